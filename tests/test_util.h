#pragma once
// Helpers shared by kiln's tests.

#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <string>

#include "kiln/kiln.h"

namespace kiln::testing {

/** Asserts that `f` throws a kiln::Error of `kind` whose message contains `needle`. */
template <typename F>
void expect_error(F&& f, ErrorKind kind, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected a " << to_string(kind) << " error containing: " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

/** Element-wise |a - b| <= atol + rtol |b| over all values, as doubles. */
inline ::testing::AssertionResult all_close(const Tensor& a, const std::vector<double>& b,
                                            double rtol = 1e-5, double atol = 1e-6) {
  std::vector<double> av = to_vector<double>(a);
  if (av.size() != b.size())
    return ::testing::AssertionFailure() << "size " << av.size() << " vs " << b.size();
  for (size_t i = 0; i < av.size(); ++i) {
    bool both_nan = (std::isnan(av[i]) && std::isnan(b[i])) || av[i] == b[i];
    if (!both_nan && !(std::abs(av[i] - b[i]) <= atol + rtol * std::abs(b[i])))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << av[i] << " vs " << b[i] << " in " << to_string(a);
  }
  return ::testing::AssertionSuccess();
}

/** A task that holds its stream until open() is called: makes asynchrony observable. */
struct Gate {
  std::promise<void> p;
  std::shared_future<void> f = p.get_future().share();
  std::function<void()> task() {
    return [f = f] { f.wait(); };
  }
  void open() { p.set_value(); }
};

/** Skips the test (with the reason) unless this machine has `n` CUDA devices. */
#define KILN_REQUIRE_CUDA(n)                                                  \
  do {                                                                        \
    if (::kiln::device_count(::kiln::DeviceType::cuda) < (n))                 \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s); this machine has " \
                   << ::kiln::device_count(::kiln::DeviceType::cuda)          \
                   << (::kiln::device_backend(::kiln::DeviceType::cuda)       \
                           ? ""                                               \
                           : " (this build has no CUDA backend)");            \
  } while (0)

}  // namespace kiln::testing

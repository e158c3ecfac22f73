#include "kiln/backend/cpu/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <exception>
#include <mutex>

#include "kiln/device/kernel_scope.h"
#include "kiln/device/threads.h"

#if KILN_WITH_OPENMP
#include <omp.h>
#endif

namespace kiln::cpu {

// Note [Threads on a shared machine]
// Kernels split their loops over an OpenMP team (the runtime oneDNN uses too, so the two
// never compete with separate pools). A team is fork-join: a region ends when every
// member has run its slice, and GNU OpenMP's members spin while they wait. When another
// process takes one of the cores, every region waits for the member that lost its core,
// and a forward of a few hundred small regions ran 3-36x slower than on one thread.
// So each member but the calling thread measures, per slice, the time it spent off its
// core (wall time minus its own CPU time). When that passes kStraggler, the budget
// follows the load: kernels run on the calling thread alone for kSerialFor, then the
// team is tried again. On an idle machine nothing changes; on a loaded one a region pays
// for a straggler about once per kSerialFor. Kiln's kernels give the same bits on any
// team; oneDNN's products do not (its matmul splits a short sum over a team of two), so
// they keep the whole budget: a train step gave other parameters than eager's when the
// load came and went between the two runs.
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kStraggler = std::chrono::microseconds(500);
constexpr auto kSerialFor = std::chrono::milliseconds(200);
std::atomic<Clock::rep> g_serial_until{0};

bool serial_for_now() {
  return Clock::now().time_since_epoch().count() < g_serial_until.load(std::memory_order_relaxed);
}

[[maybe_unused]] int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace

int kernel_threads() {
  const KernelFrame* k = current_kernel();
  return k ? get_num_threads(k->device) : get_num_threads();
}

int detail::threads_for_large(int64_t work, int64_t grain) {
#if KILN_WITH_OPENMP
  if (work < 2 * grain || omp_in_parallel()) return 1;
  int budget = kernel_threads();
  if (budget <= 1 || serial_for_now()) return 1;
  return static_cast<int>(std::min<int64_t>(budget, work / grain));
#else
  (void)work;
  (void)grain;
  return 1;
#endif
}

void detail::serial_for_a_while() {
  g_serial_until.store((Clock::now() + kSerialFor).time_since_epoch().count(),
                       std::memory_order_relaxed);
}

void use_kernel_threads_for_openmp() {
#if KILN_WITH_OPENMP
  int want = kernel_threads();
  if (omp_get_max_threads() != want) omp_set_num_threads(want);
#endif
}

namespace detail {

void run_parallel(int threads, int64_t n, ChunkFn fn, void* ctx) {
#if KILN_WITH_OPENMP
  std::exception_ptr error;
  std::mutex error_mu;
#pragma omp parallel num_threads(threads)
  {
    int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t chunk = (n + nt - 1) / nt;
    int64_t begin = std::min(n, t * chunk), end = std::min(n, begin + chunk);
    if (begin < end) {
      Clock::time_point wall0;
      int64_t cpu0 = 0;
      if (t != 0) wall0 = Clock::now(), cpu0 = thread_cpu_ns();
      try {
        fn(ctx, begin, end);
      } catch (...) {  // kept, rethrown below: exceptions must not leave the team
        std::lock_guard lock(error_mu);
        if (!error) error = std::current_exception();
      }
      if (t != 0) {  // Note [Threads on a shared machine]
        auto off_core = (Clock::now() - wall0) - std::chrono::nanoseconds(thread_cpu_ns() - cpu0);
        if (off_core > kStraggler)
          g_serial_until.store((Clock::now() + kSerialFor).time_since_epoch().count(),
                               std::memory_order_relaxed);
      }
    }
  }
  if (error) std::rethrow_exception(error);
#else
  (void)threads;
  fn(ctx, 0, n);
#endif
}

}  // namespace detail

}  // namespace kiln::cpu

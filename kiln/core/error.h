#pragma once
// kiln::Error and KILN_CHECK: how every user error leaves the library.

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>

#include "kiln/core/scope.h"

namespace kiln {

/** What kind of mistake an Error reports; tests match on it. */
enum class ErrorKind {
  value,            // a bad argument value
  device_mismatch,  // (D2) tensors on different devices
  device,           // a device that is malformed or not present
  shape,
  dtype,
  index,
  unsupported,      // no kernel, or a feature kiln does not have
  data_dependent,   // (F5) needs data a fake tensor does not have
  constraint,       // (Y2) a declared dynamic dim the trace specialized, related or narrowed
  frozen_mutation,  // (X2)
  format,           // a malformed file
  invalid_graph,    // an IR graph that breaks an invariant
  internal,         // a broken invariant inside kiln
  out_of_memory,    // a device allocator could not satisfy a request
  backend,          // a device runtime or library call failed (CUDA, cuBLAS)
};

/** Printable name of an ErrorKind. */
std::string_view to_string(ErrorKind kind);

/** The one exception type kiln throws for user errors. */
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

/** While one lives, errors raised by the ops a composite is built from name the op the
 * user called: "[expand] ..." inside index_put reads "[index_put] ... (raised by expand)".
 * The outermost scope on a thread wins. */
class OpNameScope : ScopeGuard {
 public:
  explicit OpNameScope(const char* op);
  ~OpNameScope();

 private:
  bool outermost_;
};

/** The op the user called, while a composite runs (the outermost OpNameScope), or null. */
const char* current_user_op();

/** `message` as the op the user called would report it (see OpNameScope). */
std::string in_user_op(std::string message);

/** Throws an Error of `kind` with a fmt-formatted message. */
template <typename... Args>
[[noreturn]] void fail(ErrorKind kind, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(kind, in_user_op(fmt::format(f, std::forward<Args>(args)...)));
}

}  // namespace kiln

/** Throws kiln::Error(kind, fmt::format(...)) when `cond` is false; the message is
 * built only on failure. */
#define KILN_CHECK(cond, kind, ...)                       \
  do {                                                    \
    if (!(cond)) [[unlikely]]                             \
      ::kiln::fail(::kiln::ErrorKind::kind, __VA_ARGS__); \
  } while (0)

/** An invariant of kiln itself; failing it is a kiln bug, reported as an internal Error. */
#define KILN_ASSERT(cond)                                                                         \
  do {                                                                                            \
    if (!(cond)) [[unlikely]]                                                                     \
      ::kiln::fail(::kiln::ErrorKind::internal, "internal assertion '{}' failed at {}:{}", #cond, \
                   __FILE__, __LINE__);                                                           \
  } while (0)

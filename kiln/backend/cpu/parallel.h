#pragma once
// Internal to the CPU backend: splitting a kernel's work over its intra-op threads
// (Note [Intra-op threads] in kiln/device/threads.h).

#include <cstdint>
#include <utility>

namespace kiln::cpu {

/** Elements of simple work per thread below which a loop stays on one thread (about
 * PyTorch's grain; a team costs a few microseconds to wake). */
inline constexpr int64_t kGrain = 32768;

namespace detail {
int threads_for_large(int64_t work, int64_t grain);
/** Behaves as if a team member had just lost its core (tests: the serial spell of Note
 * [Threads on a shared machine] without a loaded machine). */
void serial_for_a_while();
}  // namespace detail

/** The number of threads the running kernel may use for `work` units of work at `grain`
 * per thread: 1 below two grains, inside another parallel region, or on a budget of 1. */
inline int threads_for(int64_t work, int64_t grain) {
  return work < 2 * grain ? 1 : detail::threads_for_large(work, grain);  // tiny ops: no call
}

/** Sets the calling thread's OpenMP team size for a library that uses OpenMP itself
 * (oneDNN) to the running kernel's budget -- the whole budget even while kiln's own
 * kernels run serially on a loaded machine: how a library splits a sum over its team
 * may depend on the team's size, and a product's bits must not depend on the load
 * (Note [Threads on a shared machine]). */
void use_kernel_threads_for_openmp();
/** The running kernel's budget (its device's, else the process's). */
int kernel_threads();

namespace detail {
using ChunkFn = void (*)(void* ctx, int64_t begin, int64_t end);
void run_parallel(int threads, int64_t n, ChunkFn fn, void* ctx);
}  // namespace detail

/** Calls `f(begin, end)` over disjoint chunks covering [0, n), on up to threads_for(n *
 * cost, grain) threads. `f` must only compute (no kiln calls, no allocation through
 * kiln); an exception in a chunk is rethrown on the calling thread after the team ends. */
template <typename F>
void parallel_for(int64_t n, int64_t cost_per_item, F&& f, int64_t grain = kGrain) {
  if (n <= 0) return;
  int threads = threads_for(n * cost_per_item, grain);
  if (threads <= 1) {
    f(int64_t{0}, n);
    return;
  }
  auto call = [](void* ctx, int64_t b, int64_t e) { (*static_cast<F*>(ctx))(b, e); };
  detail::run_parallel(threads, n, call, const_cast<void*>(static_cast<const void*>(&f)));
}

}  // namespace kiln::cpu

#include "kiln/backend/cpu/parallel.h"

#include <algorithm>
#include <exception>
#include <mutex>

#include "kiln/device/kernel_scope.h"
#include "kiln/device/threads.h"

#if KILN_WITH_OPENMP
#include <omp.h>
#endif

namespace kiln::cpu {

int kernel_threads() {
  const KernelFrame* k = current_kernel();
  return k ? get_num_threads(k->device) : get_num_threads();
}

int detail::threads_for_large(int64_t work, int64_t grain) {
#if KILN_WITH_OPENMP
  if (work < 2 * grain || omp_in_parallel()) return 1;
  int budget = kernel_threads();
  if (budget <= 1) return 1;
  return static_cast<int>(std::min<int64_t>(budget, work / grain));
#else
  (void)work;
  (void)grain;
  return 1;
#endif
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
      try {
        fn(ctx, begin, end);
      } catch (...) {  // kept, rethrown below: exceptions must not leave the team
        std::lock_guard lock(error_mu);
        if (!error) error = std::current_exception();
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

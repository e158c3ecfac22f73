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

// ---- Note [Portable kernels]: the CPU's level ------------------------------------------

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kiln/backend/cpu/isa.h"
#include "kiln/core/error.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

namespace kiln::cpu {

namespace {

Isa detect() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  // F16C and BMI2 from CPUID itself (clang's __builtin_cpu_supports lacks their names).
  unsigned a = 0, b = 0, c = 0, d = 0;
  bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
  bool bmi2 = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_BMI2);
  bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c && bmi2;
  bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return v4 ? Isa::avx512 : v3 ? Isa::avx2 : Isa::base;
#else
  return Isa::base;
#endif
}

Isa from_env(Isa best) {
  const char* env = std::getenv("KILN_CPU_ISA");
  if (!env) return best;
  Isa want = std::strcmp(env, "base") == 0   ? Isa::base
             : std::strcmp(env, "avx2") == 0 ? Isa::avx2
                                             : Isa::avx512;
  return want < best ? want : best;
}

}  // namespace

// Set when the library loads; zero (base) for kernels run by static initializers before.
std::atomic<Isa> detail::g_cpu_isa{from_env(cpu_isa_supported())};

Isa cpu_isa_supported() {
  static const Isa best = detect();
  return best;
}

void set_cpu_isa(Isa isa) {
  KILN_CHECK(isa <= cpu_isa_supported(), unsupported,
             "[set_cpu_isa] this CPU has {} kernels at most, not {}", isa_name(cpu_isa_supported()),
             isa_name(isa));
  detail::g_cpu_isa.store(isa, std::memory_order_relaxed);
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    case Isa::base: return "base";
  }
  return "?";
}

}  // namespace kiln::cpu

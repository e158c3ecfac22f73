// Note [Portable kernels]: the CPU's level, from CPUID, lowered by KILN_CPU_ISA.
#include "kiln/backend/cpu/isa.h"

#include <cstdlib>
#include <cstring>
#include <string>

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

// KILN_CPU_ISA, read once when the library loads (so it must not throw): a bad value
// leaves the CPU's best level and is kept as an error for check_isa_environment().
struct EnvIsa {
  Isa isa;
  std::string error;
};

const EnvIsa& env_isa() {
  static const EnvIsa e = [] {
    EnvIsa r{cpu_isa_supported(), {}};
    const char* env = std::getenv("KILN_CPU_ISA");
    if (!env || !*env) return r;
    for (Isa want : {Isa::base, Isa::avx2, Isa::avx512})
      if (std::strcmp(env, isa_name(want)) == 0) {
        r.isa = want < r.isa ? want : r.isa;  // never above what the CPU has
        return r;
      }
    r.error = std::string("KILN_CPU_ISA must be 'base', 'avx2' or 'avx512', got '") + env + "'";
    return r;
  }();
  return e;
}

}  // namespace

// Set when the library loads; zero (base) for kernels run by static initializers before.
std::atomic<Isa> detail::g_cpu_isa{env_isa().isa};

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

void check_isa_environment() {
  if (!env_isa().error.empty()) fail(ErrorKind::value, "{}", env_isa().error);
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

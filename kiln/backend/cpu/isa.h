#pragma once
// Internal to the CPU backend: hot loops compiled for several x86-64 levels, the best
// one the running CPU has picked at run time.
//
// Note [Portable kernels]
// kiln is built for the baseline x86-64 (no -march=native unless KILN_NATIVE=ON), so a
// binary runs on any x86-64 CPU. The loops that profit from wider vectors -- dense
// elementwise runs, conversions (F16C), softmax and norm rows -- are written once as a
// lambda and handed to with_best_isa, which calls it through one of three functions
// compiled for x86-64-v4 (AVX-512), x86-64-v3 (AVX2, FMA, F16C) or the baseline.
// `flatten` inlines the lambda and everything it calls into each variant, so every
// instruction of the loop is compiled for that variant's level; each (variant, lambda)
// pair is its own template instance, so no code of one level is shared with another
// (which an object file compiled for several levels would risk). KILN_CPU_ISA=base|avx2|
// avx512 lowers the choice (never above what the CPU has); the tests run every level the
// machine has.

#include <atomic>
#include <cstdint>
#include <type_traits>

namespace kiln::cpu {

enum class Isa : uint8_t { base, avx2, avx512 };

namespace detail {
extern std::atomic<Isa> g_cpu_isa;
}  // namespace detail

/** The level the kernels use: the best the CPU has, lowered by KILN_CPU_ISA. */
inline Isa cpu_isa() { return detail::g_cpu_isa.load(std::memory_order_relaxed); }
/** The best level the CPU has. */
Isa cpu_isa_supported();
/** Sets the level (tests and benchmarks); Error above cpu_isa_supported(). */
void set_cpu_isa(Isa isa);
/** A value Error when KILN_CPU_ISA is malformed. */
void check_isa_environment();
const char* isa_name(Isa isa);

/** A level's vector register width in bytes, handed to a kernel lambda that takes one
 * argument: code written with GCC vector types of that width stays in registers, where a
 * vector wider than the level's registers is split through the stack (64-byte vectors
 * made AVX2's softmax 3x slower than 32-byte ones). */
template <int Bytes>
struct VectorWidth {
  static constexpr int bytes = Bytes;
};

/** f(VectorWidth<Bytes>{}) when f takes the width, else f(). */
template <int Bytes, typename F>
inline void call_with_width(F& f) {
  if constexpr (std::is_invocable_v<F&, VectorWidth<Bytes>>)
    f(VectorWidth<Bytes>{});
  else
    f();
}

#if defined(__x86_64__) && defined(__GNUC__)
// The attribute that compiles a function for a level, empty where the whole build already
// targets it (KILN_NATIVE=ON on such a CPU): a target attribute below the build's own
// flags would stop the intrinsics and the lambda from being inlined.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
#define KILN_TARGET_AVX512
#else
#define KILN_TARGET_AVX512 gnu::target("arch=x86-64-v4")
#endif
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && defined(__BMI2__)
#define KILN_TARGET_AVX2
#else
#define KILN_TARGET_AVX2 gnu::target("arch=x86-64-v3")
#endif

template <typename F>
[[gnu::flatten, KILN_TARGET_AVX512]] void call_avx512(F& f) {
  call_with_width<64>(f);
}
template <typename F>
[[gnu::flatten, KILN_TARGET_AVX2]] void call_avx2(F& f) {
  call_with_width<32>(f);
}
#endif
template <typename F>
[[gnu::flatten]] void call_base(F& f) {
  call_with_width<16>(f);
}

/** Runs `f()` -- or `f(VectorWidth<bytes>{})` -- compiled for the level cpu_isa() picks. */
template <typename F>
inline void with_best_isa(F&& f) {
#if defined(__x86_64__) && defined(__GNUC__)
  switch (cpu_isa()) {
    case Isa::avx512: return call_avx512(f);
    case Isa::avx2: return call_avx2(f);
    case Isa::base: break;
  }
#endif
  call_base(f);
}

}  // namespace kiln::cpu

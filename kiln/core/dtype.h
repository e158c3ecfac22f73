#pragma once
// DType, the half-precision storage types, and PyTorch's type promotion.

#include <fmt/format.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <iosfwd>
#include <string_view>
#include <type_traits>

namespace kiln {

/** Element types. `b8` is bool. */
enum class DType : uint8_t { f32, f64, f16, bf16, i64, i32, i16, i8, u8, b8 };
inline constexpr int kNumDTypes = 10;

inline constexpr DType f32 = DType::f32, f64 = DType::f64, f16 = DType::f16, bf16 = DType::bf16,
                       i64 = DType::i64, i32 = DType::i32, i16 = DType::i16, i8 = DType::i8,
                       u8 = DType::u8, b8 = DType::b8;

/** The short name ("f32", "bool", ...). */
std::string_view to_string(DType dtype);
/** Prints the short name ("f32"). */
std::ostream& operator<<(std::ostream& os, DType dtype);
/** Parses a short name back; throws kiln::Error on unknown names. */
DType dtype_from_string(std::string_view name);
/** Bytes per element. */
size_t itemsize(DType dtype);
inline bool is_floating(DType d) { return d <= DType::bf16; }
inline bool is_integral(DType d, bool include_bool) {
  return (d >= DType::i64 && d <= DType::u8) || (include_bool && d == DType::b8);
}

/** The dtype both operands of a binary op are computed in (torch.promote_types). */
DType promote_types(DType a, DType b);

/** Accumulates operands into a result dtype the way torch.result_type does: tensors
 * with dimensions outrank 0-dim tensors, which outrank wrapped Python-like scalars,
 * unless a lower-ranked operand is of a higher category (bool < int < float). */
struct ResultType {
  enum Rank { dim, zero_dim, wrapped };
  void add(DType dtype, Rank rank);
  DType result() const;

 private:
  int8_t state_[3] = {-1, -1, -1};
};

/** Round-to-nearest-even float -> binary16 bits and back, in portable integer code. */
uint16_t half_bits_from_float(float f);
float float_from_half_bits(uint16_t bits);

/** IEEE binary16 storage; arithmetic happens in float. Where the compiler has _Float16
 * the conversions are the compiler's: one instruction in code built for F16C (the CPU
 * kernels' x86-64-v3 and v4 variants, Note [Portable kernels]), which then vectorizes. */
struct Half {
  uint16_t bits = 0;
  Half() = default;
#if defined(__FLT16_MAX__) && !defined(__CUDACC__)
  Half(float f) : bits(std::bit_cast<uint16_t>(static_cast<_Float16>(f))) {}            // NOLINT
  operator float() const { return static_cast<float>(std::bit_cast<_Float16>(bits)); }  // NOLINT
#else
  Half(float f) : bits(half_bits_from_float(f)) {}               // NOLINT
  operator float() const { return float_from_half_bits(bits); }  // NOLINT
#endif
};

/** bfloat16 storage (the top half of a float, round-to-nearest-even). */
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) {  // NOLINT
    uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7fffffff) > 0x7f800000) {
      bits = 0x7fc0;
      return;
    }
    bits = static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
  }
  operator float() const { return std::bit_cast<float>(uint32_t(bits) << 16); }  // NOLINT
};

/** The C++ type that stores each DType. */
template <DType D>
struct CppType;
template <>
struct CppType<DType::f32> {
  using type = float;
};
template <>
struct CppType<DType::f64> {
  using type = double;
};
template <>
struct CppType<DType::f16> {
  using type = Half;
};
template <>
struct CppType<DType::bf16> {
  using type = BFloat16;
};
template <>
struct CppType<DType::i64> {
  using type = int64_t;
};
template <>
struct CppType<DType::i32> {
  using type = int32_t;
};
template <>
struct CppType<DType::i16> {
  using type = int16_t;
};
template <>
struct CppType<DType::i8> {
  using type = int8_t;
};
template <>
struct CppType<DType::u8> {
  using type = uint8_t;
};
template <>
struct CppType<DType::b8> {
  using type = bool;
};

/** The dtype whose elements are C++ type T (cv-qualifiers ignored); false for types
 * that are no dtype's element. */
template <typename T>
inline constexpr bool kIsElement =
    std::is_same_v<std::remove_cv_t<T>, float> || std::is_same_v<std::remove_cv_t<T>, double> ||
    std::is_same_v<std::remove_cv_t<T>, Half> || std::is_same_v<std::remove_cv_t<T>, BFloat16> ||
    std::is_same_v<std::remove_cv_t<T>, int64_t> || std::is_same_v<std::remove_cv_t<T>, int32_t> ||
    std::is_same_v<std::remove_cv_t<T>, int16_t> || std::is_same_v<std::remove_cv_t<T>, int8_t> ||
    std::is_same_v<std::remove_cv_t<T>, uint8_t> || std::is_same_v<std::remove_cv_t<T>, bool>;
template <typename T>
requires kIsElement<T>
constexpr DType dtype_of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>)
    return DType::f32;
  else if constexpr (std::is_same_v<U, double>)
    return DType::f64;
  else if constexpr (std::is_same_v<U, Half>)
    return DType::f16;
  else if constexpr (std::is_same_v<U, BFloat16>)
    return DType::bf16;
  else if constexpr (std::is_same_v<U, int64_t>)
    return DType::i64;
  else if constexpr (std::is_same_v<U, int32_t>)
    return DType::i32;
  else if constexpr (std::is_same_v<U, int16_t>)
    return DType::i16;
  else if constexpr (std::is_same_v<U, int8_t>)
    return DType::i8;
  else if constexpr (std::is_same_v<U, uint8_t>)
    return DType::u8;
  else
    return DType::b8;
}

}  // namespace kiln

template <>
struct fmt::formatter<kiln::DType> : fmt::formatter<std::string_view> {
  auto format(kiln::DType d, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(kiln::to_string(d), ctx);
  }
};

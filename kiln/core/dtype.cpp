#include "kiln/core/dtype.h"

#include <cmath>
#include <ostream>

#include "kiln/core/error.h"

namespace kiln {

namespace {
constexpr std::string_view kNames[kNumDTypes] = {"f32", "f64", "f16", "bf16", "i64",
                                                 "i32", "i16", "i8",  "u8",   "bool"};
constexpr size_t kSizes[kNumDTypes] = {4, 8, 2, 2, 8, 4, 2, 1, 1, 1};

int category(DType d) { return d == DType::b8 ? 0 : is_floating(d) ? 2 : 1; }
}  // namespace

std::string_view to_string(DType dtype) { return kNames[static_cast<int>(dtype)]; }
size_t itemsize(DType dtype) { return kSizes[static_cast<int>(dtype)]; }

DType dtype_from_string(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kNames[i] == name) return static_cast<DType>(i);
  fail(ErrorKind::dtype, "unknown dtype '{}'", name);
}

std::ostream& operator<<(std::ostream& os, DType dtype) { return os << to_string(dtype); }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::b8) return b;
  if (b == DType::b8) return a;
  if (is_floating(a) && is_floating(b)) {
    if (itemsize(a) == 2 && itemsize(b) == 2) return DType::f32;  // f16 with bf16
    return itemsize(a) >= itemsize(b) ? a : b;
  }
  if (is_floating(a)) return a;
  if (is_floating(b)) return b;
  // Both integral. u8 with a signed type needs a signed type that holds 0..255.
  if (a == DType::u8 || b == DType::u8) {
    DType other = a == DType::u8 ? b : a;
    return other == DType::i8 ? DType::i16 : other;
  }
  return itemsize(a) >= itemsize(b) ? a : b;
}

void ResultType::add(DType dtype, Rank rank) {
  if (rank == wrapped) {
    // A wrapped number contributes its category's default type.
    dtype = is_floating(dtype) ? DType::f32 : dtype == DType::b8 ? DType::b8 : DType::i64;
  }
  int8_t& s = state_[rank];
  s = static_cast<int8_t>(s < 0 ? dtype : promote_types(static_cast<DType>(s), dtype));
}

DType ResultType::result() const {
  // combine(higher, lower): the higher rank wins unless the lower one is of a higher
  // category than an integral/bool higher.
  auto combine = [](int8_t higher, int8_t lower) -> int8_t {
    if (higher < 0) return lower;
    if (lower < 0) return higher;
    auto h = static_cast<DType>(higher), l = static_cast<DType>(lower);
    if (category(l) > category(h)) return static_cast<int8_t>(promote_types(h, l));
    return higher;
  };
  int8_t r = combine(state_[dim], combine(state_[zero_dim], state_[wrapped]));
  return r < 0 ? DType::f32 : static_cast<DType>(r);
}

// IEEE half conversions, round-to-nearest-even, with subnormals, inf and nan.
uint16_t half_bits_from_float(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t abs = x & 0x7fffffff;
  if (abs >= 0x7f800000) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0));
  }
  if (abs >= 0x477ff000) {  // rounds to >= 65520: overflow to inf
    return static_cast<uint16_t>(sign | 0x7c00);
  }
  if (abs < 0x38800000) {  // subnormal half (or zero)
    float af = std::bit_cast<float>(abs);
    // Scale so the half subnormal step (2^-24) becomes 1, then round to even.
    float scaled = af * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  uint32_t mant = abs & 0x7fffff;
  uint32_t exp = (abs >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float float_from_half_bits(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000) << 16;
  uint32_t exp = (bits >> 10) & 0x1f;
  uint32_t mant = bits & 0x3ff;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000 | (mant << 13));
  if (exp == 0) {
    float v = static_cast<float>(mant) / 16777216.0f;  // mant * 2^-24
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

}  // namespace kiln

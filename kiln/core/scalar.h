#pragma once
// Scalar: a number that is not a tensor (an attribute, a fill value, alpha).

#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kiln/core/dtype.h"

namespace kiln {

/** Float to integer without undefined behaviour, with the results x86 PyTorch gives:
 * in range it truncates toward zero; NaN and out-of-range values give the minimum of
 * the 64-bit (for 8-byte targets) or 32-bit conversion, whose low bits narrower types
 * keep (so 300.0 -> u8 is 44 and -1.0 -> u8 is 255, as in PyTorch). */
template <typename D, typename F>
requires(std::is_integral_v<D>&& std::is_floating_point_v<F>) inline D float_to_int(F v) {
  if constexpr (sizeof(D) == 8) {
    if (!(v >= F(-0x1p63) && v < F(0x1p63))) return static_cast<D>(INT64_MIN);
    return static_cast<D>(static_cast<int64_t>(v));
  } else {
    int32_t i = v >= F(-0x1p31) && v < F(0x1p31) ? static_cast<int32_t>(v) : INT32_MIN;
    return static_cast<D>(i);  // modular narrowing (defined since C++20)
  }
}

/** A bool, an integer or a floating value, tagged with which. */
class Scalar {
 public:
  enum class Kind : uint8_t { b, i, f };

  Scalar() : Scalar(int64_t{0}) {}
  Scalar(bool v) : kind_(Kind::b), i_(v) {}  // NOLINT
  template <typename T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) Scalar(T v)
      : kind_(Kind::i), i_(static_cast<int64_t>(v)) {}  // NOLINT
  template <typename T>
  requires std::is_floating_point_v<T> Scalar(T v)
      : kind_(Kind::f), f_(static_cast<double>(v)) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::f; }
  bool is_bool() const { return kind_ == Kind::b; }
  /** The dtype this scalar would have as a tensor: f64, i64 or bool. */
  DType dtype() const {
    return kind_ == Kind::f ? DType::f64 : kind_ == Kind::i ? DType::i64 : DType::b8;
  }

  double to_double() const { return kind_ == Kind::f ? f_ : static_cast<double>(i_); }
  int64_t to_int() const { return kind_ == Kind::f ? float_to_int<int64_t>(f_) : i_; }
  bool to_bool() const { return kind_ == Kind::f ? f_ != 0 : i_ != 0; }
  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>)
      return to_bool();
    else if constexpr (std::is_integral_v<T>)
      return static_cast<T>(to_int());
    else
      return static_cast<T>(to_double());
  }

  bool operator==(const Scalar& o) const {
    return kind_ == o.kind_ && (kind_ == Kind::f ? f_ == o.f_ : i_ == o.i_);
  }
  std::string str() const;

 private:
  Kind kind_;
  union {
    int64_t i_;
    double f_;
  };
};

}  // namespace kiln

#pragma once
// Scalar: a number that is not a tensor (an attribute, a fill value, alpha).

#include <cstdint>
#include <string>
#include <type_traits>

#include "kiln/core/dtype.h"

namespace kiln {

/** A bool, an integer or a floating value, tagged with which. */
class Scalar {
 public:
  enum class Kind : uint8_t { b, i, f };

  Scalar() : Scalar(int64_t{0}) {}
  Scalar(bool v) : kind_(Kind::b), i_(v) {}  // NOLINT
  template <typename T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
  Scalar(T v) : kind_(Kind::i), i_(static_cast<int64_t>(v)) {}  // NOLINT
  template <typename T>
    requires std::is_floating_point_v<T>
  Scalar(T v) : kind_(Kind::f), f_(static_cast<double>(v)) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::f; }
  bool is_bool() const { return kind_ == Kind::b; }
  /** The dtype this scalar would have as a tensor: f64, i64 or bool. */
  DType dtype() const { return kind_ == Kind::f ? DType::f64 : kind_ == Kind::i ? DType::i64 : DType::b8; }

  double to_double() const { return kind_ == Kind::f ? f_ : static_cast<double>(i_); }
  int64_t to_int() const { return kind_ == Kind::f ? static_cast<int64_t>(f_) : i_; }
  bool to_bool() const { return kind_ == Kind::f ? f_ != 0 : i_ != 0; }
  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) return to_bool();
    else if constexpr (std::is_integral_v<T>) return static_cast<T>(to_int());
    else return static_cast<T>(to_double());
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

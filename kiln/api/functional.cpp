#include "kiln/api/functional.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "kiln/core/pool.h"
#include "kiln/device/registry.h"
#include "kiln/device/stream.h"
#include "kiln/dispatch/grad_mode.h"
#include "kiln/ops/meta.h"

namespace kiln {

using ops::OpKind;

namespace {

template <typename... A>
Outputs call(OpKind op, A&&... a) {
  Value args[] = {Value(std::forward<A>(a))...};
  return dispatch(op, args);
}
template <typename... A>
Tensor call1(OpKind op, A&&... a) {
  return std::move(call(op, std::forward<A>(a)...)[0]);
}

DType dtype_or(const TensorOptions& o, DType d) { return o.dtype.value_or(d); }
Device device_or(const TensorOptions& o, Device d) { return resolve_device(o.device.value_or(d)); }
Device default_device() { return Device(DeviceType::cpu, 0); }

/** `to` with eager semantics (D7) even while capturing: for kiln's own conversions
 * (building constants, host reads), which are not user-written transfers. */
Tensor convert(const Tensor& x, Device device, DType dtype) {
  if (x.device() == device && x.dtype() == dtype) return x;
  return _to_copy(x, dtype, device);
}

// A tensor's shape as a size argument: symbolic sizes stay symbolic (Y1).
SymSizes shape_of(const Tensor& t) { return SymSizes(t.shape()); }

}  // namespace

Tensor wrapped_number(Scalar s) {
  // Its 8 bytes live in a block of its own, not in cpu:0's allocator: a number joining
  // an op on another device allocates nothing on any device (R2).
  auto bytes = std::make_shared<std::array<std::byte, 8>>();
  Device host(DeviceType::cpu, 0);
  auto impl = make_pooled<TensorImpl>();
  impl->dtype = s.dtype();
  impl->device = host;
  impl->storage = make_pooled<StorageImpl>(bytes->data(), bytes->size(), host, nullptr, false);
  impl->storage->owner = bytes;
  Tensor t(std::move(impl));
  switch (s.kind()) {
    case Scalar::Kind::f: *t.data<double>() = s.to_double(); break;
    case Scalar::Kind::i: *t.data<int64_t>() = s.to_int(); break;
    case Scalar::Kind::b: *t.data<bool>() = s.to_bool(); break;
  }
  t.impl()->wrapped_number = true;
  return t;
}

Scalar wrapped_value(const Tensor& t) {
  KILN_CHECK(t.is_wrapped_number(), internal, "[wrapped_value] {} is not a wrapped number",
             t.meta_str());
  switch (t.dtype()) {
    case DType::f64: return Scalar(*t.data<double>());
    case DType::i64: return Scalar(*t.data<int64_t>());
    default: return Scalar(*t.data<bool>());
  }
}

// ---- factories ----------------------------------------------------------------

namespace {
// (G1) A factory's result is a leaf; it requires grad when the options ask.
Tensor made(Tensor t, const TensorOptions& o) {
  if (o.requires_grad) t.set_requires_grad(true);
  return t;
}
}  // namespace

Tensor empty(const SymSizes& size, TensorOptions o) {
  return made(call1(OpKind::empty, size.value(), dtype_or(o, f32), device_or(o, default_device())),
              o);
}
// As torch.full, the fill value's kind picks the default dtype: i64 for an integer, bool
// for a bool, f32 for a floating value.
Tensor full(const SymSizes& size, Scalar value, TensorOptions o) {
  DType natural = value.is_floating() ? f32 : value.is_bool() ? b8 : i64;
  return made(call1(OpKind::full, size.value(), value, dtype_or(o, natural),
                    device_or(o, default_device())),
              o);
}
Tensor zeros(const SymSizes& size, TensorOptions o) { return full(size, 0.0, o); }
Tensor ones(const SymSizes& size, TensorOptions o) { return full(size, 1.0, o); }
Tensor arange(Scalar end, TensorOptions o) { return arange(0, end, 1, o); }
// For a symbolic n (Y1): a running sum of ones, whose size is n (arange's own size comes
// from a number, which a trace would pin).
Tensor arange_of(const SymInt& n, TensorOptions o) {
  if (!n.is_symbolic()) return arange(n.hint(), o);
  DType dtype = o.dtype ? *o.dtype : i64;
  Tensor counts = cumsum(ones({n}, {.dtype = i64, .device = o.device}), 0) - 1;
  return dtype == i64 ? counts : to(counts, dtype);
}
Tensor size_as_tensor(const SymInt& n, TensorOptions o) {
  DType dtype = o.dtype ? *o.dtype : i64;
  if (!n.is_symbolic()) return full({}, Scalar(n.hint()), {.dtype = dtype, .device = o.device});
  Tensor count =
      sum(ones({n}, {.dtype = i64, .device = o.device}));  // exact in any dtype's rounding
  return dtype == i64 ? count : to(count, dtype);
}
Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions o) {
  bool fp = start.is_floating() || end.is_floating() || step.is_floating();
  return made(call1(OpKind::arange, start, end, step, dtype_or(o, fp ? f32 : i64),
                    device_or(o, default_device())),
              o);
}
Tensor rand(const SymSizes& size, TensorOptions o) {
  return made(call1(OpKind::rand, size.value(), dtype_or(o, f32), device_or(o, default_device())),
              o);
}
Tensor randn(const SymSizes& size, TensorOptions o) {
  return made(call1(OpKind::randn, size.value(), dtype_or(o, f32), device_or(o, default_device())),
              o);
}

namespace {
// A tensor literal: the values become a host tensor in the requested dtype (eagerly,
// whatever modes are active: a literal's data is known), are handed to the active modes
// (FakeMode makes it fake, ProxyMode records a constant), then move to the requested
// device through the modes.
template <typename T>
Tensor literal(const std::vector<T>& values, const Dims& shape, TensorOptions o) {
  KILN_CHECK(numel_of(shape) == static_cast<int64_t>(values.size()), shape,
             "[tensor] {} values cannot fill shape {}", values.size(), shape.str());
  Device cpu0 = default_device();
  Tensor t = make_tensor(shape, dtype_of<T>(), cpu0, &device_allocator(cpu0), "tensor");
  std::copy(values.begin(), values.end(), t.data<T>());
  DType dtype = o.dtype.value_or(dtype_of<T>());
  if (dtype != t.dtype()) {
    std::array<Value, 4> args = {t, dtype, cpu0, false};
    t = dispatch_eager(OpKind::_to_copy, args)[0];
  }
  return made(convert(lift_literal(t), device_or(o, cpu0), dtype), o);
}
}  // namespace

template <typename T>
Tensor from_vector(const std::vector<T>& values, const IntList& shape, TensorOptions o) {
  return literal(values, shape.empty() ? Dims{static_cast<int64_t>(values.size())} : Dims(shape),
                 o);
}
template Tensor from_vector(const std::vector<float>&, const IntList&, TensorOptions);
template Tensor from_vector(const std::vector<double>&, const IntList&, TensorOptions);
template Tensor from_vector(const std::vector<int64_t>&, const IntList&, TensorOptions);
template Tensor from_vector(const std::vector<int32_t>&, const IntList&, TensorOptions);
template Tensor from_vector(const std::vector<int16_t>&, const IntList&, TensorOptions);
template Tensor from_vector(const std::vector<int8_t>&, const IntList&, TensorOptions);
template Tensor from_vector(const std::vector<uint8_t>&, const IntList&, TensorOptions);

template <>
Tensor from_vector(const std::vector<bool>& values, const IntList& shape, TensorOptions o) {
  std::vector<uint8_t> bytes(values.begin(), values.end());
  return from_vector(
      bytes, shape,
      {.dtype = o.dtype.value_or(b8), .device = o.device, .requires_grad = o.requires_grad});
}

Tensor tensor(std::initializer_list<double> values, const IntList& shape, TensorOptions o) {
  return from_vector(
      std::vector<double>(values), shape,
      {.dtype = o.dtype.value_or(f32), .device = o.device, .requires_grad = o.requires_grad});
}

Tensor scalar_tensor(Scalar value, TensorOptions o) {  // f32 unless told, as PyTorch
  if (!o.dtype) o.dtype = f32;
  return full({}, value, o);
}

Tensor tensor(Scalar value, TensorOptions o) {
  if (value.is_floating())
    return literal(
        std::vector<double>{value.to_double()}, Dims{},
        {.dtype = o.dtype.value_or(f32), .device = o.device, .requires_grad = o.requires_grad});
  if (value.is_bool())
    return literal(
        std::vector<uint8_t>{value.to_bool()}, Dims{},
        {.dtype = o.dtype.value_or(b8), .device = o.device, .requires_grad = o.requires_grad});
  return literal(std::vector<int64_t>{value.to_int()}, Dims{}, o);
}

namespace {
TensorOptions like(const Tensor& t, TensorOptions o) {
  return {.dtype = o.dtype.value_or(t.dtype()),
          .device = o.device.value_or(t.device()),
          .requires_grad = o.requires_grad};
}
// (S1) A DTensor's *_like is a DTensor of the same global shape and mesh: its shards
// filled through an op the DTensor layer places (Partial values become Replicate), so
// autograd's seeds and formulas stay DTensors. No history, as for a factory.
Tensor dtensor_filled_like(const Tensor& t, Scalar v, TensorOptions o) {
  KILN_CHECK(!o.device || resolve_device(*o.device) == t.device(), unsupported,
             "[full_like] of a DTensor on another device ({})", *o.device);
  autograd::NoGradGuard no_grad;
  Tensor like_t = o.dtype && *o.dtype != t.dtype() ? to(t, *o.dtype) : t;
  Tensor r = masked_fill(like_t, wrapped_number(true), v);
  if (o.requires_grad) r.set_requires_grad(true);
  return r;
}
}  // namespace
Tensor empty_like(const Tensor& t, TensorOptions o) {
  if (t.is_dtensor()) [[unlikely]]
    return dtensor_filled_like(t, 0, o);
  return empty(shape_of(t), like(t, o));
}
Tensor new_empty(const Tensor& x, const SymSizes& size, TensorOptions o) {
  return empty(size, like(x, o));
}
Tensor new_zeros(const Tensor& x, const SymSizes& size, TensorOptions o) {
  return zeros(size, like(x, o));
}
Tensor new_ones(const Tensor& x, const SymSizes& size, TensorOptions o) {
  return ones(size, like(x, o));
}
Tensor new_full(const Tensor& x, const SymSizes& size, Scalar value, TensorOptions o) {
  return full(size, value, like(x, o));
}
Tensor randint_like(const Tensor& x, int64_t low, int64_t high, TensorOptions o) {
  return randint(low, high, x.shape().vec(), like(x, o));
}

Tensor zeros_like(const Tensor& t, TensorOptions o) {
  if (t.is_dtensor()) [[unlikely]]
    return dtensor_filled_like(t, 0, o);
  return zeros(shape_of(t), like(t, o));
}
Tensor ones_like(const Tensor& t, TensorOptions o) {
  if (t.is_dtensor()) [[unlikely]]
    return dtensor_filled_like(t, 1, o);
  return ones(shape_of(t), like(t, o));
}
Tensor full_like(const Tensor& t, Scalar v, TensorOptions o) {
  if (t.is_dtensor()) [[unlikely]]
    return dtensor_filled_like(t, v, o);
  return full(shape_of(t), v, like(t, o));
}
Tensor rand_like(const Tensor& t, TensorOptions o) { return rand(shape_of(t), like(t, o)); }
Tensor randn_like(const Tensor& t, TensorOptions o) { return randn(shape_of(t), like(t, o)); }

// ---- elementwise --------------------------------------------------------------

Tensor neg(const Tensor& x) { return call1(OpKind::neg, x); }
Tensor abs(const Tensor& x) { return call1(OpKind::abs, x); }
Tensor exp(const Tensor& x) { return call1(OpKind::exp, x); }
Tensor log(const Tensor& x) { return call1(OpKind::log, x); }
Tensor sqrt(const Tensor& x) { return call1(OpKind::sqrt, x); }
Tensor rsqrt(const Tensor& x) { return call1(OpKind::rsqrt, x); }
Tensor sin(const Tensor& x) { return call1(OpKind::sin, x); }
Tensor cos(const Tensor& x) { return call1(OpKind::cos, x); }
Tensor tanh(const Tensor& x) { return call1(OpKind::tanh, x); }
Tensor sigmoid(const Tensor& x) { return call1(OpKind::sigmoid, x); }
Tensor relu(const Tensor& x) { return call1(OpKind::relu, x); }
Tensor gelu(const Tensor& x, std::string_view approximate) {
  return call1(OpKind::gelu, x, Str(approximate));
}
Tensor gelu_backward(const Tensor& grad, const Tensor& x, std::string_view approximate) {
  return call1(OpKind::gelu_backward, grad, x, Str(approximate));
}
Tensor threshold_backward(const Tensor& grad, const Tensor& x, const Scalar& threshold) {
  return call1(OpKind::threshold_backward, grad, x, threshold);
}
Tensor silu(const Tensor& x) { return call1(OpKind::silu, x); }
Tensor erf(const Tensor& x) { return call1(OpKind::erf, x); }
Tensor log1p(const Tensor& x) { return call1(OpKind::log1p, x); }
Tensor expm1(const Tensor& x) { return call1(OpKind::expm1, x); }
Tensor log2(const Tensor& x) { return call1(OpKind::log2, x); }
Tensor tan(const Tensor& x) { return call1(OpKind::tan, x); }
Tensor atan(const Tensor& x) { return call1(OpKind::atan, x); }
Tensor asin(const Tensor& x) { return call1(OpKind::asin, x); }
Tensor acos(const Tensor& x) { return call1(OpKind::acos, x); }
Tensor sinh(const Tensor& x) { return call1(OpKind::sinh, x); }
Tensor cosh(const Tensor& x) { return call1(OpKind::cosh, x); }
Tensor reciprocal(const Tensor& x) { return call1(OpKind::reciprocal, x); }
Tensor floor(const Tensor& x) { return call1(OpKind::floor, x); }
Tensor ceil(const Tensor& x) { return call1(OpKind::ceil, x); }
Tensor round(const Tensor& x) { return call1(OpKind::round, x); }
Tensor round(const Tensor& x, int64_t decimals) {
  KILN_CHECK(is_floating(x.dtype()), dtype,
             "[round] with decimals expects a floating tensor, got {}", x.dtype());
  double scale = std::pow(10.0, static_cast<double>(std::abs(decimals)));
  if (decimals == 0) return round(x);
  return decimals > 0 ? round(x * scale) / scale : round(x / scale) * scale;
}
Tensor trunc(const Tensor& x) { return call1(OpKind::trunc, x); }
Tensor sign(const Tensor& x) { return call1(OpKind::sign, x); }
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  return call1(OpKind::clamp, x, min ? Value(*min) : Value(), max ? Value(*max) : Value());
}
Tensor logical_not(const Tensor& x) { return call1(OpKind::logical_not, x); }
Tensor exp2(const Tensor& x) { return call1(OpKind::exp2, x); }
Tensor log10(const Tensor& x) { return call1(OpKind::log10, x); }
Tensor erfc(const Tensor& x) { return call1(OpKind::erfc, x); }
Tensor asinh(const Tensor& x) { return call1(OpKind::asinh, x); }
Tensor acosh(const Tensor& x) { return call1(OpKind::acosh, x); }
Tensor atanh(const Tensor& x) { return call1(OpKind::atanh, x); }
Tensor erfinv(const Tensor& x) { return call1(OpKind::erfinv, x); }
Tensor lgamma(const Tensor& x) { return call1(OpKind::lgamma, x); }
Tensor digamma(const Tensor& x) { return call1(OpKind::digamma, x); }
Tensor polygamma(int64_t n, const Tensor& x) { return call1(OpKind::polygamma, x, n); }
Tensor special_unary(const Tensor& x, std::string_view fn) {
  return call1(OpKind::special_unary, x, Str(std::string(fn)));
}
Tensor special_binary(const Tensor& x, const Tensor& y, std::string_view fn) {
  return call1(OpKind::special_binary, x, y, Str(std::string(fn)));
}
Tensor bitwise_not(const Tensor& x) { return call1(OpKind::bitwise_not, x); }
Tensor bitwise_and(const Tensor& a, const Tensor& b) { return call1(OpKind::bitwise_and, a, b); }
Tensor bitwise_or(const Tensor& a, const Tensor& b) { return call1(OpKind::bitwise_or, a, b); }
Tensor bitwise_xor(const Tensor& a, const Tensor& b) { return call1(OpKind::bitwise_xor, a, b); }
Tensor bitwise_and(const Tensor& a, Scalar b) { return bitwise_and(a, wrapped_number(b)); }
Tensor bitwise_or(const Tensor& a, Scalar b) { return bitwise_or(a, wrapped_number(b)); }
Tensor bitwise_xor(const Tensor& a, Scalar b) { return bitwise_xor(a, wrapped_number(b)); }

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
  return call1(OpKind::add, a, b, alpha);
}
Tensor add(const Tensor& a, Scalar b) { return add(a, wrapped_number(b)); }
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) {
  return call1(OpKind::sub, a, b, alpha);
}
Tensor sub(const Tensor& a, Scalar b) { return sub(a, wrapped_number(b)); }
Tensor mul(const Tensor& a, const Tensor& b) { return call1(OpKind::mul, a, b); }
Tensor mul(const Tensor& a, Scalar b) { return mul(a, wrapped_number(b)); }
Tensor div(const Tensor& a, const Tensor& b) { return call1(OpKind::div, a, b); }
Tensor div(const Tensor& a, Scalar b) { return div(a, wrapped_number(b)); }
Tensor pow(const Tensor& a, const Tensor& e) { return call1(OpKind::pow, a, e); }
Tensor pow(const Tensor& a, Scalar e) {
  KILN_CHECK(!(is_integral(a.dtype(), false) && !e.is_floating() && !e.is_bool() && e.to_int() < 0),
             value, "[pow] Integers to negative integer powers are not allowed (exponent {})",
             e.to_int());
  return pow(a, wrapped_number(e));
}
Tensor div(const Tensor& a, const Tensor& b, std::string_view rounding_mode) {
  if (rounding_mode == "floor") return floor_divide(a, b);
  KILN_CHECK(rounding_mode == "trunc", value,
             "[div] expected rounding_mode to be 'trunc' or 'floor', but got '{}'", rounding_mode);
  if (is_floating(ops::result_type(a, b))) return trunc(div(a, b));
  // a - fmod(a, b) is an exact multiple of b: dividing it down is exact, and it is the
  // quotient rounded toward zero.
  return floor_divide(sub(a, fmod(a, b)), b);
}
Tensor div(const Tensor& a, Scalar b, std::string_view rounding_mode) {
  return div(a, wrapped_number(b), rounding_mode);
}
Tensor remainder(const Tensor& a, const Tensor& b) { return call1(OpKind::remainder, a, b); }
Tensor remainder(const Tensor& a, Scalar b) { return remainder(a, wrapped_number(b)); }
Tensor remainder(Scalar a, const Tensor& b) { return remainder(wrapped_number(a), b); }
Tensor fmod(const Tensor& a, const Tensor& b) { return call1(OpKind::fmod, a, b); }
Tensor fmod(const Tensor& a, Scalar b) { return fmod(a, wrapped_number(b)); }
Tensor floor_divide(const Tensor& a, const Tensor& b) { return call1(OpKind::floor_divide, a, b); }
Tensor floor_divide(const Tensor& a, Scalar b) { return floor_divide(a, wrapped_number(b)); }
Tensor atan2(const Tensor& a, const Tensor& b) { return call1(OpKind::atan2, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return call1(OpKind::maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return call1(OpKind::minimum, a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return call1(OpKind::eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return call1(OpKind::ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return call1(OpKind::lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return call1(OpKind::le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return call1(OpKind::gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return call1(OpKind::ge, a, b); }
Tensor eq(const Tensor& a, Scalar b) { return eq(a, wrapped_number(b)); }
Tensor gt(const Tensor& a, Scalar b) { return gt(a, wrapped_number(b)); }
Tensor lt(const Tensor& a, Scalar b) { return lt(a, wrapped_number(b)); }
Tensor ge(const Tensor& a, Scalar b) { return ge(a, wrapped_number(b)); }
Tensor le(const Tensor& a, Scalar b) { return le(a, wrapped_number(b)); }
Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) {
  return call1(OpKind::where, c, a, b);
}
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar v) {
  return call1(OpKind::masked_fill, x, mask, v);
}
Tensor where(const Tensor& c, const Tensor& a, Scalar b) { return where(c, a, wrapped_number(b)); }
Tensor where(const Tensor& c, Scalar a, const Tensor& b) { return where(c, wrapped_number(a), b); }
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value) {
  KILN_CHECK(value.dim() == 0, shape, "[masked_fill] only supports a 0-dim value tensor, got {}",
             value.meta_str());
  return where(mask, to(value, x.dtype()), x);
}
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max) {
  KILN_CHECK(min.defined() || max.defined(), value,
             "[clamp] at least one of 'min' or 'max' must not be None");
  // A bound replaces x where x is outside it or the bound is NaN; x on a bound stays x and
  // keeps the gradient (PyTorch's clamp_backward); min > max gives max.
  Tensor y = min.defined() ? where(logical_or(x < min, isnan(min)), min, x) : x;
  return max.defined() ? where(logical_or(y > max, isnan(max)), max, y) : y;
}
Tensor pow(Scalar base, const Tensor& exponent) { return pow(wrapped_number(base), exponent); }
Tensor operator&(const Tensor& a, const Tensor& b) { return bitwise_and(a, b); }
Tensor operator|(const Tensor& a, const Tensor& b) { return bitwise_or(a, b); }
Tensor operator^(const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); }
Tensor operator&(const Tensor& a, Scalar b) { return bitwise_and(a, b); }
Tensor operator|(const Tensor& a, Scalar b) { return bitwise_or(a, b); }
Tensor operator^(const Tensor& a, Scalar b) { return bitwise_xor(a, b); }
Tensor operator~(const Tensor& a) { return bitwise_not(a); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(Scalar a, const Tensor& b) { return add(wrapped_number(a), b); }
Tensor operator-(Scalar a, const Tensor& b) { return sub(wrapped_number(a), b); }
Tensor operator*(Scalar a, const Tensor& b) { return mul(wrapped_number(a), b); }
Tensor operator/(Scalar a, const Tensor& b) { return div(wrapped_number(a), b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(Scalar a, const Tensor& b) { return gt(b, wrapped_number(a)); }
Tensor operator<=(Scalar a, const Tensor& b) { return ge(b, wrapped_number(a)); }
Tensor operator>(Scalar a, const Tensor& b) { return lt(b, wrapped_number(a)); }
Tensor operator>=(Scalar a, const Tensor& b) { return le(b, wrapped_number(a)); }
Tensor operator==(Scalar a, const Tensor& b) { return eq(b, wrapped_number(a)); }
Tensor operator!=(Scalar a, const Tensor& b) { return ne(b, wrapped_number(a)); }
Tensor operator&(Scalar a, const Tensor& b) { return bitwise_and(b, a); }
Tensor operator|(Scalar a, const Tensor& b) { return bitwise_or(b, a); }
Tensor operator^(Scalar a, const Tensor& b) { return bitwise_xor(b, a); }
Tensor operator%(const Tensor& a, const Tensor& b) { return remainder(a, b); }
Tensor operator%(const Tensor& a, Scalar b) { return remainder(a, b); }
Tensor operator%(Scalar a, const Tensor& b) { return remainder(a, b); }
Tensor operator<<(const Tensor& a, const Tensor& b) { return bitwise_left_shift(a, b); }
Tensor operator<<(const Tensor& a, Scalar b) { return bitwise_left_shift(a, b); }
Tensor operator>>(const Tensor& a, const Tensor& b) { return bitwise_right_shift(a, b); }
Tensor operator>>(const Tensor& a, Scalar b) { return bitwise_right_shift(a, b); }
Tensor operator<(const Tensor& a, Scalar b) { return lt(a, wrapped_number(b)); }
Tensor operator<=(const Tensor& a, Scalar b) { return le(a, wrapped_number(b)); }
Tensor operator>(const Tensor& a, Scalar b) { return gt(a, wrapped_number(b)); }
Tensor operator>=(const Tensor& a, Scalar b) { return ge(a, wrapped_number(b)); }
Tensor operator==(const Tensor& a, Scalar b) { return eq(a, wrapped_number(b)); }
Tensor operator!=(const Tensor& a, Scalar b) { return ne(a, wrapped_number(b)); }
Tensor& operator+=(Tensor& a, const Tensor& b) { return add_(a, b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return sub_(a, b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return mul_(a, b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return div_(a, b); }
Tensor& operator+=(Tensor& a, Scalar b) { return add_(a, b); }
Tensor& operator-=(Tensor& a, Scalar b) { return sub_(a, wrapped_number(b)); }
Tensor& operator*=(Tensor& a, Scalar b) { return mul_(a, b); }
Tensor& operator/=(Tensor& a, Scalar b) { return div_(a, b); }

// ---- in-place -----------------------------------------------------------------

Tensor& add_(Tensor& self, const Tensor& other, Scalar alpha) {
  call(OpKind::add_, self, other, alpha);
  return self;
}
Tensor& add_(Tensor& self, Scalar other) { return add_(self, wrapped_number(other)); }
Tensor& sub_(Tensor& self, const Tensor& other, Scalar alpha) {
  call(OpKind::sub_, self, other, alpha);
  return self;
}
Tensor& mul_(Tensor& self, const Tensor& other) {
  call(OpKind::mul_, self, other);
  return self;
}
Tensor& mul_(Tensor& self, Scalar other) { return mul_(self, wrapped_number(other)); }
Tensor& div_(Tensor& self, const Tensor& other) {
  call(OpKind::div_, self, other);
  return self;
}
Tensor& div_(Tensor& self, Scalar other) { return div_(self, wrapped_number(other)); }
Tensor& masked_fill_(Tensor& self, const Tensor& mask, Scalar value) {
  call(OpKind::masked_fill_, self, mask, value);
  return self;
}
Tensor& relu_(Tensor& self) {
  call(OpKind::relu_, self);
  return self;
}
Tensor& copy_(Tensor& self, const Tensor& src, bool non_blocking) {
  call(OpKind::copy_, self, src, non_blocking);
  return self;
}
Tensor& fill_(Tensor& self, Scalar value) {
  call(OpKind::fill_, self, value);
  return self;
}
Tensor& zero_(Tensor& self) { return fill_(self, 0); }

// ---- reductions ---------------------------------------------------------------

namespace {
Value opt_dtype(std::optional<DType> d) { return d ? Value(*d) : Value(); }
}  // namespace

Tensor sum(const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  return call1(OpKind::sum, x, dims, keepdim, opt_dtype(dtype));
}
Tensor mean(const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  return call1(OpKind::mean, x, dims, keepdim, opt_dtype(dtype));
}
Tensor prod(const Tensor& x, std::optional<DType> dtype) {
  return call1(OpKind::prod, x, IntList{}, false, opt_dtype(dtype));
}
Tensor prod(const Tensor& x, int64_t dim, bool keepdim, std::optional<DType> dtype) {
  return call1(OpKind::prod, x, IntList{dim}, keepdim, opt_dtype(dtype));
}
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  Outputs o = call(OpKind::sort, x, dim, descending, stable);
  return {o[0], o[1]};
}
Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  return sort(x, dim, descending, stable).second;
}
std::pair<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim, bool keepdim) {
  int64_t d = wrap_dim(dim, x.dim(), "kthvalue"), n = x.dim() ? x.size(d) : 1;
  KILN_CHECK(k >= 1 && k <= n, index, "[kthvalue] k ({}) is out of range for dim {} of size {}", k,
             d, n);
  auto [values, indices] = sort(x, d);
  if (x.dim() == 0) return {values, indices};
  Tensor v = narrow(values, d, k - 1, 1), i = narrow(indices, d, k - 1, 1);
  return keepdim ? std::pair{v, i} : std::pair{squeeze(v, d), squeeze(i, d)};
}
std::pair<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim) {
  int64_t d = wrap_dim(dim, x.dim(), "median"), n = x.dim() ? x.size(d) : 1;
  KILN_CHECK(n > 0, index, "[median] cannot take the median of an empty dim {}", d);
  auto [v, i] = kthvalue(x, (n + 1) / 2, d, keepdim);
  if (!is_floating(x.dtype())) return {v, i};
  // A row with NaN: NaN, at the position of its first NaN.
  Tensor nan_at = argmax(to(isnan(x), DType::u8), d, keepdim);
  Tensor has_nan = any(isnan(x), d, keepdim);
  return {where(has_nan, full_like(v, std::numeric_limits<double>::quiet_NaN()), v),
          where(has_nan, nan_at, i)};
}
Tensor median(const Tensor& x) {
  if (x.numel() == 0)
    return full({}, std::numeric_limits<double>::quiet_NaN(),
                {.dtype = x.dtype(), .device = x.device()});
  return median(flatten(x), 0).first;
}
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  Outputs o = call(OpKind::topk, x, k, dim, largest, sorted);
  return {o[0], o[1]};
}
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return call1(OpKind::cumsum, x, dim, opt_dtype(dtype));
}
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return call1(OpKind::cumprod, x, dim, opt_dtype(dtype));
}
Tensor logcumsumexp(const Tensor& x, int64_t dim) { return call1(OpKind::logcumsumexp, x, dim); }
std::pair<Tensor, Tensor> cummax(const Tensor& x, int64_t dim) {
  Outputs o = call(OpKind::cummax, x, dim);
  return {o[0], o[1]};
}
std::pair<Tensor, Tensor> cummin(const Tensor& x, int64_t dim) {
  Outputs o = call(OpKind::cummin, x, dim);
  return {o[0], o[1]};
}
Tensor cumprod_backward(const Tensor& grad, const Tensor& x, int64_t dim) {
  return call1(OpKind::cumprod_backward, grad, x, dim);
}
Tensor amax(const Tensor& x, const IntList& dims, bool keepdim) {
  return call1(OpKind::amax, x, dims, keepdim);
}
Tensor amin(const Tensor& x, const IntList& dims, bool keepdim) {
  return call1(OpKind::amin, x, dims, keepdim);
}
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  Outputs o = call(OpKind::max, x, dim, keepdim);
  return {o[0], o[1]};
}
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  Outputs o = call(OpKind::min, x, dim, keepdim);
  return {o[0], o[1]};
}
Tensor max(const Tensor& x) { return amax(x); }
Tensor min(const Tensor& x) { return amin(x); }
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return call1(OpKind::argmax, x, dim ? Value(*dim) : Value(), keepdim);
}
Tensor var(const Tensor& x, const IntList& dims, int64_t correction, bool keepdim) {
  return call1(OpKind::var, x, dims, correction, keepdim);
}

namespace {
Tensor truth(const Tensor& t) { return t.dtype() == DType::b8 ? t : t != 0; }
// any / all as counts: some non-zero element, no zero element (empty reductions count 0).
Tensor any_all(const Tensor& x, const IntList& dims, bool keepdim, bool every) {
  Tensor r = every ? eq(sum(logical_not(truth(x)), dims, keepdim), 0)
                   : gt(sum(truth(x), dims, keepdim), 0);
  return x.dtype() == DType::u8 ? to(r, DType::u8) : r;
}
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  KILN_CHECK(x.dtype() != DType::b8, dtype, "[argmin] does not support bool inputs");
  if (dim) return min(x, *dim, keepdim).second;
  Tensor index = min(reshape(x, {-1}), 0).second;
  return keepdim ? reshape(index, IntList(static_cast<size_t>(x.dim()), 1)) : index;
}
Tensor std(const Tensor& x, const IntList& dims, int64_t correction, bool keepdim) {
  return sqrt(var(x, dims, correction, keepdim));
}
Tensor logsumexp(const Tensor& x, const IntList& dims, bool keepdim) {
  Tensor xf = is_floating(x.dtype()) ? x : to(x, DType::f32);
  // The shift: each row's max, as a constant (its gradient would cancel), 0 where infinite.
  Tensor m = amax(xf.detach(), dims, /*keepdim=*/true);
  m = masked_fill(m, abs(m) == kInf, 0);
  Tensor logs = log(sum(exp(xf - m), dims, keepdim));
  return logs + reshape(m, shape_of(logs));
}
Tensor clamp_min(const Tensor& x, Scalar min) { return clamp(x, min, std::nullopt); }
Tensor clamp_max(const Tensor& x, Scalar max) { return clamp(x, std::nullopt, max); }

Tensor logical_and(const Tensor& a, const Tensor& b) { return minimum(truth(a), truth(b)); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return maximum(truth(a), truth(b)); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return ne(truth(a), truth(b)); }
Tensor any(const Tensor& x) { return any_all(x, {}, false, false); }
Tensor any(const Tensor& x, int64_t dim, bool keepdim) { return any_all(x, {dim}, keepdim, false); }
Tensor all(const Tensor& x) { return any_all(x, {}, false, true); }
Tensor all(const Tensor& x, int64_t dim, bool keepdim) { return any_all(x, {dim}, keepdim, true); }
Tensor count_nonzero(const Tensor& x, const IntList& dims) { return sum(truth(x), dims); }
Tensor mv(const Tensor& mat, const Tensor& vec) {
  KILN_CHECK(mat.dim() == 2 && vec.dim() == 1, shape,
             "[mv] expects a matrix and a vector, got {} and {}", mat.meta_str(), vec.meta_str());
  return matmul(mat, vec);
}
bool wants_opmath(const TensorList& inputs) {
  std::vector<Tensor> defined;
  for (const Tensor& t : inputs)
    if (t.defined()) defined.push_back(t);
  DType out = ops::result_type(defined);
  return out == DType::f16 || out == DType::bf16;
}

Tensor in_opmath(const TensorList& inputs, const std::function<Tensor(const TensorList&)>& f) {
  std::vector<Tensor> defined;
  for (const Tensor& t : inputs)
    if (t.defined()) defined.push_back(t);
  DType out = ops::result_type(defined);
  DType wide = out == DType::f16 || out == DType::bf16 ? DType::f32 : out;
  TensorList widened;
  for (const Tensor& t : inputs)
    widened.push_back(t.defined() && is_floating(t.dtype()) ? to(t, wide) : t);
  Tensor r = f(widened);
  return is_floating(r.dtype()) && is_floating(out) && r.dtype() != out ? to(r, out) : r;
}

namespace {
// addmm-family factors as the element type holds them: an integer result truncates
// beta = 0.2 to 0 (PyTorch converts the Scalars to the dtype first).
void integral_factors(DType result, Scalar& beta, Scalar& alpha) {
  if (!is_integral(result, true)) return;
  if (beta.is_floating()) beta = static_cast<int64_t>(beta.to_double());
  if (alpha.is_floating()) alpha = static_cast<int64_t>(alpha.to_double());
}

// beta * self + alpha * product, as addmm's rule: beta == 0 ignores self (NaN too).
Tensor scaled_sum(const Tensor& self, const Tensor& product, Scalar beta, Scalar alpha) {
  integral_factors(ops::result_type(self, product), beta, alpha);
  Tensor p = alpha.to_double() == 1.0 ? product : mul(product, alpha);
  if (beta.to_double() == 0.0)
    return add(p, zeros_like(self));  // self's shape and dtype, not its values
  return add(beta.to_double() == 1.0 ? self : mul(self, beta), p);
}
}  // namespace
Tensor addmv(const Tensor& self, const Tensor& mat, const Tensor& vec, Scalar beta, Scalar alpha) {
  return in_opmath({self, mat, vec}, [&](const TensorList& t) {
    return scaled_sum(t[0], mv(t[1], t[2]), beta, alpha);
  });
}
// Elementwise, as PyTorch's addr: alpha 0 still multiplies the outer product (0 * inf is
// NaN), where a GEMM with alpha 0 would skip it on some BLAS kernels.
Tensor addr(const Tensor& input, const Tensor& vec1, const Tensor& vec2, Scalar beta,
            Scalar alpha) {
  KILN_CHECK(vec1.dim() == 1 && vec2.dim() == 1, shape, "[addr] expects 1-D vectors, got {} and {}",
             vec1.meta_str(), vec2.meta_str());
  if (input.dtype() == DType::b8 && vec1.dtype() == DType::b8 &&
      vec2.dtype() == DType::b8) {  // logical, as PyTorch
    Tensor product = logical_and(outer(vec1, vec2),
                                 scalar_tensor(alpha.to_double() != 0, {.device = input.device()}));
    if (beta.to_double() == 0) return logical_or(product, zeros_like(input));
    return logical_or(product, input);
  }
  return in_opmath({input, vec1, vec2}, [&](const TensorList& t) {
    return scaled_sum(t[0], outer(t[1], t[2]), beta, alpha);
  });
}
Tensor baddbmm(const Tensor& self, const Tensor& b1, const Tensor& b2, Scalar beta, Scalar alpha) {
  return in_opmath({self, b1, b2}, [&](const TensorList& t) {
    return scaled_sum(t[0], bmm(t[1], t[2]), beta, alpha);
  });
}
Tensor kron(const Tensor& a, const Tensor& b) {
  int64_t rank = std::max(a.dim(), b.dim());
  IntList sa, sb, pa, pb, out;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t da = i - (rank - a.dim()), db = i - (rank - b.dim());
    int64_t na = da >= 0 ? a.size(da) : 1, nb = db >= 0 ? b.size(db) : 1;
    pa.insert(pa.end(), {na, 1});
    pb.insert(pb.end(), {1, nb});
    out.push_back(na * nb);
  }
  return reshape(mul(reshape(a, pa), reshape(b, pb)), out);
}
Tensor cross(const Tensor& a, const Tensor& b, int64_t dim) {
  KILN_CHECK(a.dim() == b.dim(), shape,
             "[cross] inputs must have the same number of dims, got {} and {}", a.meta_str(),
             b.meta_str());
  int64_t rank = std::max(a.dim(), b.dim());
  int64_t d = wrap_dim(dim, rank, "cross");
  auto at = [&](const Tensor& t, int64_t i) {
    int64_t td = d - (rank - t.dim());
    KILN_CHECK(td >= 0 && t.size(td) == 3, shape, "[cross] dim {} must have size 3, got {}", dim,
               t.meta_str());
    return narrow(t, td, i, 1);
  };
  return cat({at(a, 1) * at(b, 2) - at(a, 2) * at(b, 1), at(a, 2) * at(b, 0) - at(a, 0) * at(b, 2),
              at(a, 0) * at(b, 1) - at(a, 1) * at(b, 0)},
             d);
}
Tensor cdist(const Tensor& x1, const Tensor& x2, double p) {
  KILN_CHECK(x1.dim() >= 2 && x2.dim() >= 2 && x1.size(-1) == x2.size(-1), shape,
             "[cdist] expects [..., P, M] and [..., R, M], got {} and {}", x1.meta_str(),
             x2.meta_str());
  return vector_norm(unsqueeze(x1, -2) - unsqueeze(x2, -3), p, {-1});
}
Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  KILN_CHECK(a.dtype() == b.dtype(), dtype, "[isclose] {} did not match {}", a.dtype(), b.dtype());
  KILN_CHECK(rtol >= 0, value, "[isclose] rtol must be greater than or equal to zero, but got {}",
             rtol);
  KILN_CHECK(atol >= 0, value, "[isclose] atol must be greater than or equal to zero, but got {}",
             atol);
  Tensor close = eq(a, b);
  if (equal_nan && is_floating(a.dtype()))
    close = logical_or(close, logical_and(isnan(a), isnan(b)));
  if (a.dtype() == DType::b8) return close;
  Tensor x = is_floating(a.dtype()) ? a : to(a, DType::f64),
         y = is_floating(b.dtype()) ? b : to(b, DType::f64);
  Tensor error = abs(x - y);
  return logical_or(close, logical_and(isfinite(error), le(error, abs(y) * rtol + atol)));
}
bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  return item<bool>(all(isclose(a, b, rtol, atol, equal_nan)));
}
bool equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && item<bool>(all(eq(a, b)));
}
Tensor isnan(const Tensor& x) { return x != x; }
Tensor isinf(const Tensor& x) {
  return is_floating(x.dtype()) ? abs(x) == kInf : zeros_like(x, {.dtype = DType::b8});
}
Tensor isfinite(const Tensor& x) {
  return is_floating(x.dtype()) ? abs(x) < kInf : ones_like(x, {.dtype = DType::b8});
}
Tensor nan_to_num(const Tensor& x, double nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  if (!is_floating(x.dtype())) return clone(x);
  double top = x.dtype() == DType::f16    ? 65504.0
               : x.dtype() == DType::bf16 ? 0x1.fep127
               : x.dtype() == DType::f32  ? static_cast<double>(std::numeric_limits<float>::max())
                                          : std::numeric_limits<double>::max();
  Tensor out = masked_fill(x, isnan(x), nan);
  out = masked_fill(out, x == kInf, posinf.value_or(top));
  return masked_fill(out, x == -kInf, neginf.value_or(-top));
}

namespace {
// column - row for the last two dims of `x`, as [rows, cols] on x's device.
Tensor positions(const SymInt& n, TensorOptions o) { return arange_of(n, o); }

Tensor diagonal_offsets(const Tensor& x, const char* op) {
  KILN_CHECK(x.dim() >= 2, shape, "[{}] expects a tensor of at least 2 dims, got {}", op,
             x.meta_str());
  TensorOptions o{.dtype = DType::i64, .device = x.device()};
  return unsqueeze(positions(x.sym_size(-1), o), 0) - unsqueeze(positions(x.sym_size(-2), o), 1);
}
}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) {
  return masked_fill(x, gt(diagonal_offsets(x, "tril"), Scalar(diagonal)), 0);
}
Tensor triu(const Tensor& x, int64_t diagonal) {
  return masked_fill(x, lt(diagonal_offsets(x, "triu"), Scalar(diagonal)), 0);
}

Tensor flip(const Tensor& x, const IntList& dims) {
  Tensor out = x;
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(x.dim(), 1)), false);
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, x.dim(), "flip");
    KILN_CHECK(!seen[static_cast<size_t>(w)], value, "[flip] dim {} appears more than once", d);
    seen[static_cast<size_t>(w)] = true;
    if (x.dim() > 0)  // a 0-dim tensor reads the same backwards
      out = index_select(
          out, w, arange(x.size(w) - 1, -1, -1, {.dtype = DType::i64, .device = x.device()}));
  }
  return out.is_same(x) ? clone(x) : out;
}

Tensor repeat(const Tensor& x, const SymSizes& repeats) {
  Dims r = repeats.dims();  // (Y1) counts and sizes may be symbolic: no guard pins them
  auto n = static_cast<int64_t>(r.size());
  KILN_CHECK(n >= x.dim(), shape,
             "[repeat] the number of repeats ({}) can not be smaller than the number of dims ({})",
             n, x.dim());
  size_t lead = static_cast<size_t>(n - x.dim());
  Dims interleaved(2 * r.size()), expanded(2 * r.size()), result(r.size());
  for (size_t i = 0; i < r.size(); ++i) {
    SymInt count = r.sym(i);
    KILN_CHECK(count.is_symbolic() || count.hint() >= 0, value,
               "[repeat] repeats must be non-negative, got {}", count.hint());
    SymInt size = i < lead ? SymInt(1) : x.shape().sym(i - lead);
    interleaved.set(2 * i, 1), interleaved.set(2 * i + 1, size);
    expanded.set(2 * i, count), expanded.set(2 * i + 1, size);
    result.set(i, count * size);
  }
  return reshape(expand(reshape(x, interleaved), expanded), result);
}

Tensor one_hot(const Tensor& index, int64_t num_classes) {
  KILN_CHECK(index.dtype() == DType::i64, dtype, "[one_hot] expects an i64 index tensor, got {}",
             index.meta_str());
  OpNameScope user_op("one_hot");
  // A fake index (tracing) has no values to read here: with num_classes given, the check
  // becomes (Y3) a runtime assertion of the program on a size read from the data (all
  // classes in range, as 0 or 1, must be at least 1), where a trace has a ShapeEnv.
  if (index.is_fake() && num_classes >= 0) {
    if (ShapeEnv::current()) {
      Tensor in_range =
          logical_and(ge(index, wrapped_number(0)), lt(index, wrapped_number(num_classes)));
      check_size(SymInt(1), Rel::le, item_size(to(all(in_range), DType::i64)));
    }
  } else if (index.numel() > 0) {
    int64_t lo = item<int64_t>(amin(index)), hi = item<int64_t>(amax(index));
    KILN_CHECK(lo >= 0, value, "[one_hot] class values must be non-negative, got {}", lo);
    if (num_classes < 0) num_classes = hi + 1;
    KILN_CHECK(hi < num_classes, value,
               "[one_hot] class values must be smaller than num_classes ({}), got {}", num_classes,
               hi);
  }
  KILN_CHECK(num_classes >= 0, value,
             "[one_hot] can not infer the number of classes of an empty tensor");
  Tensor classes = arange(num_classes, {.dtype = DType::i64, .device = index.device()});
  return to(unsqueeze(index, -1) == classes, DType::i64);
}

Tensor outer(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() == 1 && b.dim() == 1, shape, "[outer] expects two 1-D tensors, got {} and {}",
             a.meta_str(), b.meta_str());
  return unsqueeze(a, 1) * unsqueeze(b, 0);
}

Tensor dot(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() == 1 && b.dim() == 1 && a.size(0) == b.size(0), shape,
             "[dot] expects two 1-D tensors of one size, got {} and {}", a.meta_str(),
             b.meta_str());
  KILN_CHECK(a.dtype() == b.dtype(), dtype,
             "[dot] expects both vectors to have the same dtype, got {} and {}", a.dtype(),
             b.dtype());
  if (wants_opmath({a, b}))  // accumulated in f32, rounded once
    return in_opmath({a, b}, [](const TensorList& t) { return dot(t[0], t[1]); });
  return sum(a * b, {}, false, a.dtype());  // integers stay in their type
}

Tensor addcmul(const Tensor& self, const Tensor& a, const Tensor& b, Scalar value) {
  // value is converted to the element type first: an integer addcmul truncates 3.14 to 3
  if (is_integral(ops::result_type(std::vector<Tensor>{self, a, b}), true) && value.is_floating())
    value = static_cast<int64_t>(value.to_double());
  return in_opmath({self, a, b}, [&](const TensorList& t) { return t[0] + t[1] * t[2] * value; });
}
Tensor addcdiv(const Tensor& self, const Tensor& a, const Tensor& b, Scalar value) {
  KILN_CHECK(
      is_floating(a.dtype()) || is_floating(b.dtype()), dtype,
      "[addcdiv] integer division with addcdiv is not supported; use true division of floats");
  return in_opmath({self, a, b}, [&](const TensorList& t) { return t[0] + t[1] / t[2] * value; });
}

Tensor lerp(const Tensor& start, const Tensor& end, Scalar weight) {
  double w = weight.to_double();
  return in_opmath({start, end}, [&](const TensorList& t) {
    Tensor diff = t[1] - t[0];
    return w < 0.5 ? t[0] + diff * w : t[1] - diff * (1.0 - w);
  });
}
Tensor vector_norm(const Tensor& x, double ord, const IntList& dims, bool keepdim) {
  KILN_CHECK(is_floating(x.dtype()), dtype, "[vector_norm] expects a floating tensor, got {}",
             x.meta_str());
  if (wants_opmath({x}))  // powers and sums in f32 (no f16 overflow of x^2), rounded once
    return in_opmath({x},
                     [&](const TensorList& t) { return vector_norm(t[0], ord, dims, keepdim); });
  Tensor a = abs(x);
  if (std::isinf(ord)) return ord > 0 ? amax(a, dims, keepdim) : amin(a, dims, keepdim);
  if (ord == 0) return sum(to(x != 0, x.dtype()), dims, keepdim);
  if (ord == 1) return sum(a, dims, keepdim);
  if (ord < 0) return pow(sum(pow(a, ord), dims, keepdim), 1.0 / ord);  // a zero element gives 0
  Tensor s = ord == 2 ? sum(x * x, dims, keepdim) : sum(pow(a, ord), dims, keepdim);
  // The root of a zero sum is 0 with gradient 0: the root never sees the 0 itself (a NaN
  // sum is not zero and stays NaN).
  Tensor positive = s != 0.0;
  Tensor safe = where(positive, s, ones_like(s));
  Tensor root = ord == 2 ? sqrt(safe) : pow(safe, 1.0 / ord);
  return where(positive, root, zeros_like(s));
}

Tensor normalize(const Tensor& x, double p, int64_t dim, double eps) {
  return x / clamp_min(vector_norm(x, p, {dim}, /*keepdim=*/true), eps);
}

Tensor eye(int64_t n, std::optional<int64_t> m, TensorOptions o) {
  int64_t cols = m.value_or(n);
  KILN_CHECK(n >= 0 && cols >= 0, value, "[eye] sizes must be non-negative, got {} x {}", n, cols);
  TensorOptions idx{.dtype = DType::i64, .device = device_or(o, default_device())};
  Tensor ones_on_diagonal = unsqueeze(arange(n, idx), 1) == unsqueeze(arange(cols, idx), 0);
  return made(to(ones_on_diagonal, dtype_or(o, f32)), o);
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions o) {
  KILN_CHECK(steps >= 0, value, "[linspace] number of steps must be non-negative, got {}", steps);
  DType dtype = dtype_or(o, f32);
  Device device = device_or(o, default_device());
  // f32/f64 outputs compute in their own dtype; f16/bf16 in double, rounded once (the exact
  // points); integer ones in double from bounds converted to the dtype first (as PyTorch),
  // then truncated.
  DType work = dtype == DType::f32 || dtype == DType::f64 ? dtype : DType::f64;
  if (is_integral(dtype, false)) {
    start = std::trunc(start);
    end = std::trunc(end);
  }
  Tensor i = arange(steps, {.dtype = work, .device = device});
  Tensor out = i;
  if (steps > 1) {
    double step = (end - start) / static_cast<double>(steps - 1);
    Tensor from_start = i * step + start;
    Tensor from_end = (i - static_cast<double>(steps - 1)) * step + end;
    out = where(i < static_cast<double>(steps / 2), from_start, from_end);
  } else if (steps == 1) {
    out = full({1}, start, {.dtype = work, .device = device});
  }
  return made(to(out, dtype), o);
}

Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  KILN_CHECK(x.dim() >= 2, shape, "[diagonal] expects a tensor of at least 2 dims, got {}",
             x.meta_str());
  int64_t d1 = wrap_dim(dim1, x.dim(), "diagonal"), d2 = wrap_dim(dim2, x.dim(), "diagonal");
  KILN_CHECK(d1 != d2, value, "[diagonal] dim1 and dim2 must differ, both are {}", d1);
  // an offset past either side gives no element (and is never negated: INT64_MIN)
  bool inside = offset > -x.size(d1) && offset < x.size(d2);
  int64_t length = inside ? std::min(x.size(d1) - std::max<int64_t>(-offset, 0),
                                     x.size(d2) - std::max<int64_t>(offset, 0))
                          : 0;
  int64_t start = x.offset();
  if (length > 0) start += offset >= 0 ? offset * x.stride(d2) : -offset * x.stride(d1);
  IntList size, stride;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d == d1 || d == d2) continue;
    size.push_back(x.size(d));
    stride.push_back(x.stride(d));
  }
  size.push_back(length);
  stride.push_back(x.stride(d1) + x.stride(d2));
  return as_strided(x, size, stride, start);
}

Tensor diag(const Tensor& x, int64_t offset) {
  KILN_CHECK(x.dim() == 1 || x.dim() == 2, shape, "[diag] expects a 1-D or 2-D tensor, got {}",
             x.meta_str());
  if (x.dim() == 2) return clone(diagonal(x, offset));
  int64_t len = x.size(0), n = len + (offset >= 0 ? offset : -offset);
  TensorOptions idx{.dtype = DType::i64, .device = x.device()};
  Tensor cols = unsqueeze(arange(n, idx), 0), rows = unsqueeze(arange(n, idx), 1);
  Tensor padded = cat({x, zeros({n - len}, {.dtype = x.dtype(), .device = x.device()})});
  // (r, r + offset) holds x[r] above the diagonal; (c - offset, c) holds x[c] below it.
  Tensor values = offset >= 0 ? unsqueeze(padded, 1) : unsqueeze(padded, 0);
  return where(cols - rows == offset, values,
               zeros({}, {.dtype = x.dtype(), .device = x.device()}));
}

Tensor trace(const Tensor& x) {
  KILN_CHECK(x.dim() == 2, shape, "[trace] expects a matrix, got {}", x.meta_str());
  return sum(diagonal(x));
}

TensorList unbind(const Tensor& x, int64_t dim) {
  KILN_CHECK(x.dim() > 0, shape, "[unbind] expects a tensor of at least 1 dim, got {}",
             x.meta_str());
  int64_t d = wrap_dim(dim, x.dim(), "unbind");
  TensorList parts;
  for (int64_t i = 0; i < x.size(d); ++i) parts.push_back(select(x, d, i));
  return parts;
}

Tensor movedim(const Tensor& x, int64_t source, int64_t destination) {
  int64_t s = wrap_dim(source, x.dim(), "movedim"), t = wrap_dim(destination, x.dim(), "movedim");
  IntList order;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != s) order.push_back(d);
  order.insert(order.begin() + t, s);
  return x.dim() == 0 ? x : permute(x, order);
}
Tensor movedim(const Tensor& x, const IntList& source, const IntList& destination) {
  KILN_CHECK(source.size() == destination.size(), value,
             "[movedim] invalid source or destination dims: source ({} dims) should contain the "
             "same number of dims "
             "as destination ({} dims)",
             source.size(), destination.size());
  int64_t rank = x.dim();
  if (rank == 0) {  // only dim 0 (or -1) names the one place a 0-dim tensor has
    for (size_t i = 0; i < source.size(); ++i)
      wrap_dim(source[i], 1, "movedim"), wrap_dim(destination[i], 1, "movedim");
    return x;
  }
  std::vector<int64_t> order(static_cast<size_t>(rank), -1);
  std::vector<bool> moved(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < source.size(); ++i) {
    int64_t s = wrap_dim(source[i], std::max<int64_t>(rank, 1), "movedim");
    int64_t t = wrap_dim(destination[i], std::max<int64_t>(rank, 1), "movedim");
    KILN_CHECK(!moved[static_cast<size_t>(s)] && order[static_cast<size_t>(t)] < 0, value,
               "[movedim] repeated dim in source {} or destination {}", fmt::join(source, ", "),
               fmt::join(destination, ", "));
    order[static_cast<size_t>(t)] = s;
    moved[static_cast<size_t>(s)] = true;
  }
  int64_t next = 0;  // the unmoved dims fill the free places in order
  for (int64_t& o : order) {
    if (o >= 0) continue;
    while (moved[static_cast<size_t>(next)]) ++next;
    o = next++;
  }
  return permute(x, order);
}

Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  return in_opmath({start, end, weight}, [](const TensorList& t) {
    Tensor diff = t[1] - t[0];
    return where(t[2] < 0.5, t[0] + t[2] * diff, t[1] - diff * (1.0 - t[2]));
  });
}
Tensor softmax(const Tensor& x, int64_t dim) { return call1(OpKind::softmax, x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return call1(OpKind::log_softmax, x, dim); }
Tensor softmax(const Tensor& x, int64_t dim, DType dtype) { return softmax(to(x, dtype), dim); }
Tensor log_softmax(const Tensor& x, int64_t dim, DType dtype) {
  return log_softmax(to(x, dtype), dim);
}
Tensor softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim) {
  return call1(OpKind::softmax_backward, grad, y, dim);
}
Tensor log_softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim) {
  return call1(OpKind::log_softmax_backward, grad, y, dim);
}

// ---- linear algebra -----------------------------------------------------------

Tensor mm(const Tensor& a, const Tensor& b) { return call1(OpKind::mm, a, b); }
Tensor bmm(const Tensor& a, const Tensor& b) { return call1(OpKind::bmm, a, b); }
Tensor matmul(const Tensor& a, const Tensor& b) { return call1(OpKind::matmul, a, b); }
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) {
  integral_factors(ops::result_type(std::vector<Tensor>{self, a, b}), beta, alpha);
  return call1(OpKind::addmm, self, a, b, beta, alpha);
}
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  return call1(OpKind::linear, x, w, bias.defined() ? Value(bias) : Value());
}

Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const IntList& stride, const IntList& padding, const IntList& dilation,
                   int64_t groups) {
  if (wants_opmath({input, weight, bias}))
    return in_opmath({input, weight, bias}, [&](const TensorList& t) {
      return convolution(t[0], t[1], t[2], stride, padding, dilation, groups);
    });
  KILN_CHECK(weight.dim() >= 3 && weight.dim() <= 5, shape,
             "[convolution] expects a weight with 1 to 3 spatial dims, got {}", weight.meta_str());
  auto rank = static_cast<size_t>(weight.dim() - 2);
  auto per_dim = [&](const IntList& v, const char* what) {
    if (v.size() == rank) return v;
    KILN_CHECK(v.size() == 1, value, "[convolution] {} needs 1 or {} values, got {}", what, rank,
               v.size());
    return IntList(rank, v[0]);
  };
  return call1(OpKind::convolution, input, weight, bias.defined() ? Value(bias) : Value(),
               per_dim(stride, "stride"), per_dim(padding, "padding"),
               per_dim(dilation, "dilation"), groups);
}

// ---- views --------------------------------------------------------------------

Tensor view(const Tensor& x, const SymSizes& size) { return call1(OpKind::view, x, size.value()); }
Tensor reshape(const Tensor& x, const SymSizes& size) {
  if (!size.is_symbolic() && !x.shape().is_symbolic()) [[likely]] {
    Dims shape = ops::infer_size(size.ints(), x.numel(), "reshape");
    Dims strides;
    if (ops::compute_view_strides(x.shape(), x.strides(), shape, strides)) return view(x, size);
    return view(clone(x), size);
  }
  OpNameScope name("reshape");  // errors and guards (Y2) name the op the user called
  Dims shape = ops::infer_size(size.dims(), x.sym_numel(), "reshape");
  Dims strides;
  if (ops::compute_view_strides(x.shape(), x.strides(), shape, strides)) return view(x, size);
  return view(clone(x), size);
}
Tensor permute(const Tensor& x, const IntList& dims) { return call1(OpKind::permute, x, dims); }
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  return call1(OpKind::transpose, x, d0, d1);
}
Tensor t(const Tensor& x) {
  KILN_CHECK(x.dim() <= 2, shape, "[t] expects a tensor with <= 2 dimensions, but got {}D",
             x.dim());
  return x.dim() < 2 ? transpose(x, 0, 0) : transpose(x, 0, 1);
}
Tensor unsqueeze(const Tensor& x, int64_t dim) { return call1(OpKind::unsqueeze, x, dim); }
Tensor squeeze(const Tensor& x) { return call1(OpKind::squeeze, x, IntList{}); }
Tensor squeeze(const Tensor& x, int64_t dim) { return call1(OpKind::squeeze, x, IntList{dim}); }
Tensor expand(const Tensor& x, const SymSizes& size) {
  return call1(OpKind::expand, x, size.value());
}
// (Y1) A bound that is a symbolic size is boxed as a one-entry size list.
Value bound(const std::optional<SymInt>& b) {
  if (!b) return Value();
  if (b->is_symbolic()) return SymIntList(sym_dims({*b}));
  return Value(b->hint());
}
Tensor slice(const Tensor& x, int64_t dim, std::optional<SymInt> start, std::optional<SymInt> end,
             int64_t step) {
  return call1(OpKind::slice, x, dim, bound(start), bound(end), step);
}
Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  return call1(OpKind::select, x, dim, index);
}
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  int64_t size = x.size(dim);
  if (start < 0) start += size;
  // compared as `length <= size - start`: `start + length` overflows for huge arguments
  KILN_CHECK(start >= 0 && start <= size && length >= 0 && length <= size - start, index,
             "[narrow] start ({}) + length ({}) exceeds dimension size ({})", start, length, size);
  return slice(x, dim, start, start + length, 1);
}
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  int64_t s = wrap_dim(start_dim, x.dim(), "flatten"), e = wrap_dim(end_dim, x.dim(), "flatten");
  KILN_CHECK(s <= e, value, "[flatten] start_dim ({}) cannot come after end_dim ({})", s, e);
  Dims shape;  // sizes, symbolic ones kept (Y1)
  for (int64_t i = 0; i < x.dim(); ++i) {
    SymInt size = x.shape().sym(static_cast<size_t>(i));
    if (i <= s || i > e)
      shape.push_back(size);
    else
      shape.set(shape.size() - 1, shape.sym(shape.size() - 1) * size);
  }
  return reshape(x, shape);
}
Tensor sym_as_strided(const Tensor& x, const SymSizes& size, const SymSizes& stride,
                      std::optional<int64_t> offset) {
  if (!size.is_symbolic() && !stride.is_symbolic())
    return as_strided(x, size.ints(), stride.ints(), offset);
  return call1(OpKind::as_strided, x, size.value(), stride.value(),
               offset ? Value(*offset) : Value());
}
Tensor as_strided(const Tensor& x, const IntList& size, const IntList& stride,
                  std::optional<int64_t> offset) {
  return call1(OpKind::as_strided, x, size, stride, offset ? Value(*offset) : Value());
}
Tensor as_strided_scatter(const Tensor& x, const Tensor& src, const IntList& size,
                          const IntList& stride, std::optional<int64_t> offset) {
  return call1(OpKind::as_strided_scatter, x, src, size, stride, offset ? Value(*offset) : Value());
}
Tensor alias(const Tensor& x) { return call1(OpKind::alias, x); }

Tensor wait_tensor(const Tensor& x) { return call1(OpKind::wait_tensor, x); }
namespace {
// (C5) A captured collective is followed by wait_tensor, as PyTorch's functional
// collectives are in its graphs: a program may run the collective asynchronously and wait
// where its result is first read (Note [Asynchronous collectives in programs]). Eager
// collectives complete before they return.
Tensor waited(Tensor collective) {
  return CaptureScope::active() ? wait_tensor(collective) : collective;
}
}  // namespace
Tensor all_reduce(const Tensor& x, std::string_view reduce_op, std::string_view group) {
  return waited(call1(OpKind::all_reduce, x, Str(reduce_op), Str(group)));
}
Tensor all_gather_into_tensor(const Tensor& x, int64_t group_size, std::string_view group) {
  return waited(call1(OpKind::all_gather_into_tensor, x, group_size, Str(group)));
}
Tensor reduce_scatter_tensor(const Tensor& x, std::string_view reduce_op, int64_t group_size,
                             std::string_view group) {
  return waited(call1(OpKind::reduce_scatter_tensor, x, Str(reduce_op), group_size, Str(group)));
}
Tensor all_to_all_single(const Tensor& x, int64_t group_size, std::string_view group) {
  return waited(call1(OpKind::all_to_all_single, x, group_size, Str(group)));
}
Tensor all_to_all_single(const Tensor& x, const IntList& output_split_sizes,
                         const IntList& input_split_sizes, std::string_view group) {
  return waited(
      call1(OpKind::all_to_all_single_v, x, output_split_sizes, input_split_sizes, Str(group)));
}
Tensor broadcast(const Tensor& x, int64_t src, std::string_view group) {
  return waited(call1(OpKind::broadcast, x, src, Str(group)));
}
Tensor& all_reduce_(Tensor& x, std::string_view reduce_op, std::string_view group) {
  call(OpKind::all_reduce_, x, Str(reduce_op), Str(group));
  return x;
}
Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : clone(x); }

// ---- data movement ------------------------------------------------------------

Tensor cat(const TensorList& tensors, int64_t dim) { return call1(OpKind::cat, tensors, dim); }
Tensor stack(const TensorList& tensors, int64_t dim) {
  KILN_CHECK(!tensors.empty(), value, "[stack] expects a non-empty list of tensors");
  for (const Tensor& x : tensors)
    KILN_CHECK(x.shape() == tensors[0].shape(), shape,
               "[stack] expects each tensor to be equal size, but got {} and {}",
               tensors[0].shape().str(), x.shape().str());
  int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  TensorList parts;
  for (const Tensor& x : tensors) parts.push_back(unsqueeze(x, d));
  return cat(parts, d);
}
TensorList split(const Tensor& x, const IntList& sizes, int64_t dim) {
  int64_t d = wrap_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  KILN_CHECK(total == x.shape()[d], shape,
             "[split] split sizes add up to {} but dimension {} has size {}", total, d,
             x.shape()[d]);
  TensorList out;
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(narrow(x, d, at, s));
    at += s;
  }
  return out;
}
TensorList split(const Tensor& x, int64_t split_size, int64_t dim) {
  int64_t d = wrap_dim(dim, x.dim(), "split");
  KILN_CHECK(split_size > 0, value, "[split] split_size must be positive, got {}", split_size);
  IntList sizes;
  for (int64_t at = 0, n = x.shape()[d]; at < n || (n == 0 && sizes.empty()); at += split_size)
    sizes.push_back(std::min(split_size, n - at));
  return split(x, sizes, d);
}
TensorList chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  KILN_CHECK(chunks > 0, value, "[chunk] chunks must be positive, got {}", chunks);
  int64_t size = x.size(dim);
  if (size == 0)
    return split(x, IntList(static_cast<size_t>(chunks), 0), dim);  // `chunks` empties, as PyTorch
  return split(x, (size + chunks - 1) / chunks, dim);
}
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  return call1(OpKind::index_select, x, dim, index);
}
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  ops::check_long_index("scatter_add", index);
  return call1(OpKind::scatter_add, x, dim, index, src);
}
namespace {
// Where scatter_add(.., dim, index, ..) of x writes: a bool mask shaped like x.
Tensor scattered(const Tensor& x, int64_t dim, const Tensor& index) {
  TensorOptions o{.dtype = DType::i64, .device = x.device()};
  IntList index_shape(index.shape().begin(), index.shape().end());
  return gt(scatter_add(zeros(IntList(x.shape().begin(), x.shape().end()), o), dim, index,
                        ones(index_shape, o)),
            0);
}
// A 1-D index of source.size(dim) positions along dim, expanded to source's shape.
Tensor along(const Tensor& index, const Tensor& source, int64_t dim, const char* op) {
  KILN_CHECK(index.dim() <= 1, shape, "[{}] index must be 1-D, got {}", op, index.meta_str());
  int64_t d = wrap_dim(dim, source.dim(), op);
  IntList shape(static_cast<size_t>(std::max<int64_t>(source.dim(), 1)), 1);
  shape[static_cast<size_t>(d)] = index.numel();
  KILN_CHECK(source.dim() == 0 || source.size(d) == index.numel(), shape,
             "[{}] index has {} elements but source {} has {} along dim {}", op, index.numel(),
             source.meta_str(), source.dim() ? source.size(d) : 1, d);
  // (Y1) source's sizes as they are: a symbolic batch adds no guard
  SymSizes full_shape = source.dim() ? SymSizes(source.shape()) : SymSizes(shape);
  return expand(reshape(to(index, DType::i64), shape), full_shape);  // i32 too, for index_add
}
}  // namespace
namespace {
// scatter's source after its checks, cut to index's region (the only part read).
Tensor scatter_source(const Tensor& x, const Tensor& index, const Tensor& src) {
  ops::check_long_index("scatter", index);
  KILN_CHECK(src.dtype() == x.dtype(), dtype,
             "[scatter] expected self ({}) and src ({}) to have the same dtype", x.dtype(),
             src.dtype());
  Tensor part = src;
  for (int64_t i = 0; i < std::min(src.dim(), index.dim()); ++i)
    if (src.size(i) > index.size(i)) part = narrow(part, i, 0, index.size(i));
  return part;
}
}  // namespace
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  OpNameScope user_op("scatter");
  return where(scattered(x, dim, index),
               scatter_add(zeros_like(x), dim, index, scatter_source(x, index, src)), x);
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
               const std::string& reduce) {
  OpNameScope user_op("scatter");
  KILN_CHECK(reduce == "add" || reduce == "multiply", value,
             "[scatter] reduce argument must be either add or multiply, got {}", reduce);
  return scatter_reduce(x, dim, index, scatter_source(x, index, src),
                        reduce == "add" ? "sum" : "prod",
                        /*include_self=*/true);
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value,
               const std::string& reduce) {
  OpNameScope user_op("scatter");
  IntList shape(index.shape().begin(), index.shape().end());
  return scatter(x, dim, index, full(shape, value, {.dtype = x.dtype(), .device = x.device()}),
                 reduce);
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value) {
  OpNameScope user_op("scatter");
  ops::check_long_index("scatter", index);
  return masked_fill(x, scattered(x, dim, index), value);
}
namespace {
// A tensor as a 1-element vector when it is 0-dim: PyTorch's index ops treat 0-dim self,
// index and source as [1].
Tensor as_vector(const Tensor& t) { return t.dim() == 0 ? reshape(t, {1}) : t; }
}  // namespace

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 Scalar alpha) {
  OpNameScope user_op("index_add");
  if (x.dim() == 0)
    return reshape(index_add(as_vector(x), dim, as_vector(index), as_vector(source), alpha), {});
  Tensor s = alpha.to_double() == 1.0 ? source : mul(source, alpha);
  return scatter_add(x, dim, along(index, source, dim, "index_add"), to(s, x.dtype()));
}
Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) {
  OpNameScope user_op("index_copy");
  if (x.dim() == 0)
    return reshape(index_copy(as_vector(x), dim, as_vector(index), as_vector(source)), {});
  return scatter(x, dim, along(index, source, dim, "index_copy"), source);
}
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, Scalar value) {
  OpNameScope user_op("index_fill");
  KILN_CHECK(index.dim() <= 1, shape, "[index_fill] index must be 1-D, got {}", index.meta_str());
  if (x.dim() == 0) return reshape(index_fill(as_vector(x), dim, as_vector(index), value), {});
  int64_t d = wrap_dim(dim, x.dim(), "index_fill");
  Dims slice_shape = x.shape();
  if (x.dim()) slice_shape.set(static_cast<size_t>(d), index.numel());
  Tensor slices = zeros(slice_shape, {.dtype = x.dtype(), .device = x.device()});
  return masked_fill(x, scattered(x, d, along(index, slices, d, "index_fill")), value);
}
Tensor roll(const Tensor& x, const IntList& shifts, const IntList& dims) {
  if (dims.empty()) {
    KILN_CHECK(shifts.size() == 1, value, "[roll] without dims takes one shift, got {}",
               shifts.size());
    return reshape(roll(flatten(x), shifts, {0}), x.shape());
  }
  KILN_CHECK(shifts.size() == dims.size(), value,
             "[roll] shifts ({}) and dims ({}) must have the same length", shifts.size(),
             dims.size());
  Tensor out = x;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], x.dim(), "roll");
    if (x.dim() && x.sym_size(d).is_symbolic()) {  // (Y1) the split point as a size
      SymInt size = x.sym_size(d), k = shifts[i];
      KILN_CHECK(
          SymInt(std::abs(shifts[i])) <= size, value,
          "[roll] a shift of {} along a dim of symbolic size {} needs the size to be at least {}",
          shifts[i], size.str(), std::abs(shifts[i]));
      SymInt keep = shifts[i] >= 0 ? size - k : SymInt(0) - k;  // elements that move right
      out = cat({slice(out, d, keep, std::nullopt), slice(out, d, 0, keep)}, d);
      continue;
    }
    int64_t n = x.dim() ? x.size(d) : 1;
    if (n == 0) continue;
    int64_t s = ((shifts[i] % n) + n) % n;
    if (s) out = cat({narrow(out, d, n - s, s), narrow(out, d, 0, n - s)}, d);
  }
  return out.is_same(x) ? clone(x) : out;
}

namespace {
// x rolled by n / 2 ((n + 1) / 2 for ifftshift) along dims, all when empty.
Tensor half_roll(const Tensor& x, const IntList& dims, bool inverse) {
  IntList ds = dims, shifts;
  if (ds.empty())
    for (int64_t d = 0; d < x.dim(); ++d) ds.push_back(d);
  for (int64_t d : ds) {
    int64_t n = x.size(wrap_dim(d, x.dim(), inverse ? "fft.ifftshift" : "fft.fftshift"));
    shifts.push_back(inverse ? (n + 1) / 2 : n / 2);
  }
  return ds.empty() ? clone(x) : roll(x, shifts, ds);
}
}  // namespace

Tensor fft::fftshift(const Tensor& x, const IntList& dims) { return half_roll(x, dims, false); }
Tensor fft::ifftshift(const Tensor& x, const IntList& dims) { return half_roll(x, dims, true); }
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  // PyTorch reads a 0-dim input as [1] (the index keeps its own 0 or 1 dims) and checks an
  // empty index's dtype only when there is something to gather.
  if (x.dim() == 0 && index.dim() == 1) return gather(reshape(x, {1}), dim, index);
  if (is_integral(index.dtype(), false) && index.dtype() != DType::i64 && index.sym_numel() == 0)
    return gather(x, dim, to(index, DType::i64));
  ops::check_long_index("gather", index);
  return call1(OpKind::gather, x, dim, index);
}
Tensor embedding(const Tensor& w, const Tensor& indices) {
  return call1(OpKind::embedding, w, indices);
}
Tensor clone(const Tensor& x) { return call1(OpKind::clone, x); }

// ---- normalization ------------------------------------------------------------

namespace {
Value opt(const Tensor& t) { return t.defined() ? Value(t) : Value(); }
}  // namespace
Tensor layer_norm(const Tensor& x, const IntList& shape, const Tensor& w, const Tensor& b,
                  double eps) {
  return call1(OpKind::layer_norm, x, shape, opt(w), opt(b), eps);
}
Tensor rms_norm(const Tensor& x, const IntList& shape, const Tensor& w, std::optional<double> eps) {
  return call1(OpKind::rms_norm, x, shape, opt(w), eps ? Value(*eps) : Value());
}
LayerNormGrads layer_norm_backward(const Tensor& grad, const Tensor& x, const IntList& shape,
                                   const Tensor& w, double eps) {
  Outputs o = call(OpKind::layer_norm_backward, grad, x, shape, opt(w), eps);
  return {std::move(o[0]), std::move(o[1]), std::move(o[2])};
}
LinearGrads linear_backward(const Tensor& grad, const Tensor& x, const Tensor& w) {
  Outputs o = call(OpKind::linear_backward, grad, x, w);
  return {std::move(o[0]), std::move(o[1]), std::move(o[2])};
}

// ---- conversion ---------------------------------------------------------------

Tensor to(const Tensor& x, Device device, std::optional<DType> dtype, bool non_blocking,
          bool copy) {
  Device target = resolve_device(device);
  DType d = dtype.value_or(x.dtype());
  if (!CaptureScope::active()) {
    if (!copy && target == x.device() && d == x.dtype()) return x;  // (D7)
    return _to_copy(x, d, target, non_blocking);
  }
  // (X1) A captured program always records the transfer; (X2) a dtype-preserving one
  // without copy=true may alias or not depending on the device it later runs on, so
  // its result is frozen.
  Tensor y = _to_copy(x, d, target, non_blocking);
  if (d == x.dtype() && !copy) {
    const std::string& scope = current_scope();
    freeze(y, fmt::format("to({}) of {}{}", target, x.meta_str(),
                          scope.empty() ? "" : " in '" + scope + "'"));
  }
  return y;
}
Tensor to(const Tensor& x, DType dtype, bool non_blocking, bool copy) {
  return to(x, x.device(), dtype, non_blocking, copy);
}
Tensor _to_copy(const Tensor& x, DType dtype, Device device, bool non_blocking) {
  return call1(OpKind::_to_copy, x, dtype, resolve_device(device), non_blocking);
}

// ---- host access --------------------------------------------------------------

namespace {
// Host reads need data: not a DTensor's (its shards are elsewhere), not a fake tensor's.
void check_readable(const Tensor& x, std::string_view op) {
  KILN_CHECK(!x.is_dtensor(), value,
             "[{}] tensor {} is a DTensor: its data is in shards; read to_local() (this rank's) or "
             "full_tensor() (all of it)",
             op, x.meta_str());
  KILN_CHECK(!x.is_fake(), data_dependent,
             "[{}] cannot read the value of fake tensor {}: it has metadata only", op,
             x.meta_str());
}
}  // namespace

Tensor nonzero(const Tensor& x) {
  // The op on the CPU and under traces (Y3: its row count an unbacked size); other devices
  // read the data on the host.
  if (!x.is_dtensor() && (x.is_fake() || x.device().type == DeviceType::cpu))
    return call1(OpKind::nonzero, x);
  check_readable(x, "nonzero");
  std::vector<bool> truth_values = to_vector<bool>(x);
  std::vector<int64_t> coords;
  std::vector<int64_t> at(static_cast<size_t>(x.dim()), 0);
  int64_t n = 0;
  for (bool t : truth_values) {
    if (t) {
      coords.insert(coords.end(), at.begin(), at.end());
      ++n;
    }
    for (int64_t d = x.dim() - 1; d >= 0; --d) {  // the next row-major coordinate
      if (++at[static_cast<size_t>(d)] < x.size(d)) break;
      at[static_cast<size_t>(d)] = 0;
    }
  }
  return to(from_vector(coords, {n, x.dim()}), x.device());
}
SymInt item_size(const Tensor& x) { return call1(OpKind::value_as_size, x).sym_size(0); }
TensorList where(const Tensor& condition) {
  if (condition.dim() == 0) return where(reshape(condition, {1}));  // one index tensor, as PyTorch
  Tensor coords = nonzero(condition);
  TensorList out;
  for (int64_t d = 0; d < condition.dim(); ++d) out.push_back(select(coords, 1, d));
  return out;
}
Tensor masked_select(const Tensor& x, const Tensor& mask) {
  OpNameScope user_op("masked_select");
  KILN_CHECK(mask.dtype() == DType::b8, dtype, "[masked_select] expected a bool mask, got {}",
             mask.dtype());
  IntList shape = ops::broadcast_shapes(x.shape(), mask.shape(), "masked_select").vec();
  Tensor flat_mask = flatten(expand(mask, shape));
  return index_select(flatten(expand(x, shape)), 0, select(nonzero(flat_mask), 1, 0));
}
namespace {

// The runs of equal neighbouring rows of `rows` [n, m] (NaN != NaN): each run's first
// row, each row's run number (with `inverse`) and each run's length (with `counts`).
struct Runs {
  Tensor values, run_of, counts;
};
Runs runs_of(const Tensor& rows, bool inverse, bool counts) {
  SymInt n = rows.sym_size(0);
  TensorOptions o{.dtype = DType::i64, .device = rows.device()};
  if (n == SymInt(0))
    return {rows, inverse ? zeros({0}, o) : Tensor(), counts ? zeros({0}, o) : Tensor()};
  Tensor differs = any(ne(slice(rows, 0, 1, n), slice(rows, 0, 0, n - 1)), 1);
  Tensor starts =
      cat(TensorList{ones({1}, {.dtype = DType::b8, .device = rows.device()}), differs});
  Tensor first = select(nonzero(starts), 1, 0);  // (Y3) [u]: u runs, the data's
  Runs r{index_select(rows, 0, first), Tensor(), Tensor()};
  if (inverse) r.run_of = cumsum(starts, 0) - 1;
  if (counts) {  // each run ends where the next starts (the last at n)
    SymInt groups = first.sym_size(0);
    check_size(SymInt(1), Rel::le, groups);  // rows that exist make a run
    Tensor end = n.is_symbolic() ? sum(ones_like(starts, o), {0}, true) : full({1}, n.hint(), o);
    r.counts = cat(TensorList{slice(first, 0, 1, groups), end}) - first;
  }
  return r;
}

// x as rows [n, m]: the elements (dim absent, m = 1) or the slices along dim, flattened.
Tensor as_rows(const Tensor& x, std::optional<int64_t> dim) {
  if (!dim) return reshape(x, {-1, 1});
  Tensor moved = movedim(x, *dim, 0);
  return reshape(moved, {moved.sym_size(0), -1});
}

// The distinct rows back as unique's values: elements 1-D, or slices moved back to dim.
Tensor from_rows(const Tensor& rows, const Tensor& x, std::optional<int64_t> dim) {
  if (!dim) return reshape(rows, {-1});
  int64_t d = wrap_dim(*dim, x.dim(), "unique");
  Dims moved = movedim(x, d, 0).shape();  // the slices' shape after moving dim first
  moved.set(0, rows.sym_size(0));
  return movedim(reshape(rows, moved), 0, d);
}

Dims inverse_shape(const Tensor& x, std::optional<int64_t> dim) {
  if (dim) return sym_dims({x.sym_size(wrap_dim(*dim, x.dim(), "unique"))});
  return x.shape();
}

// unique and bincount read the data; under export their sizes are the data's (Y3).
void check_unique_readable(const Tensor& x, std::string_view op) {
  if (!x.is_fake() || !ShapeEnv::current()) check_readable(x, op);
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& x, bool return_inverse, bool return_counts,
                                          std::optional<int64_t> dim) {
  check_unique_readable(x, "unique");
  Tensor rows = as_rows(x, dim);
  int64_t columns = rows.size(1);
  if (columns == 0) return unique_consecutive(x, return_inverse, return_counts, dim);
  // Lexicographic order of the rows: stable sorts by each column, the last first.
  Tensor order = argsort(select(rows, 1, columns - 1), 0, false, /*stable=*/true);
  for (int64_t j = columns - 2; j >= 0; --j)
    order = index_select(
        order, 0, argsort(index_select(select(rows, 1, j), 0, order), 0, false, /*stable=*/true));
  Runs r = runs_of(index_select(rows, 0, order), return_inverse, return_counts);
  Tensor inverse;  // the run of each sorted row, scattered back to its place in x
  if (return_inverse)
    inverse = reshape(scatter(zeros_like(r.run_of), 0, order, r.run_of), inverse_shape(x, dim));
  return {from_rows(r.values, x, dim), inverse, r.counts};
}

std::tuple<Tensor, Tensor, Tensor> unique_consecutive(const Tensor& x, bool return_inverse,
                                                      bool return_counts,
                                                      std::optional<int64_t> dim) {
  check_unique_readable(x, "unique_consecutive");
  Runs r = runs_of(as_rows(x, dim), return_inverse, return_counts);
  Tensor inverse = return_inverse ? reshape(r.run_of, inverse_shape(x, dim)) : Tensor();
  return {from_rows(r.values, x, dim), inverse, r.counts};
}

Tensor repeat_interleave(const Tensor& repeats) {
  KILN_CHECK(repeats.dim() <= 1 && is_integral(repeats.dtype(), false), shape,
             "[repeat_interleave] repeats must be a 0-D or 1-D integer tensor, got {}",
             repeats.meta_str());
  Tensor r = reshape(repeats, {-1});
  check_readable(r, "repeat_interleave");
  KILN_CHECK(r.numel() == 0 || item<int64_t>(amin(r)) >= 0, value,
             "[repeat_interleave] repeats can not be negative");
  TensorOptions o{.dtype = DType::i64, .device = r.device()};
  int64_t total = r.numel() ? item<int64_t>(sum(r)) : 0;
  // Output position k belongs to the i whose running total first exceeds k.
  return searchsorted(cumsum(to(r, DType::i64), 0), arange(0, total, 1, o), /*right=*/true);
}

Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim,
                         std::optional<int64_t> output_size) {
  Tensor input = dim ? x : flatten(x);
  int64_t d = dim ? wrap_dim(*dim, std::max<int64_t>(x.dim(), 1), "repeat_interleave") : 0;
  if (input.dim() == 0) input = reshape(input, {1});
  int64_t size = input.size(d);
  Tensor r = reshape(repeats, {-1});
  KILN_CHECK(r.numel() == size || r.numel() == 1, shape,
             "[repeat_interleave] repeats must have the same size as input along dim ({}), got {}",
             size, r.numel());
  if (r.numel() == 1 && size != 1) r = expand(r, {size});
  if (output_size) {  // no host read: positions up to the given size (traceable)
    TensorOptions o{.dtype = DType::i64, .device = r.device()};
    return index_select(
        input, d, searchsorted(cumsum(to(r, DType::i64), 0), arange(0, *output_size, 1, o), true));
  }
  return index_select(input, d, repeat_interleave(r));
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  KILN_CHECK(repeats >= 0, value, "[repeat_interleave] repeats can not be negative");
  Tensor input = dim ? x : flatten(x);
  if (input.dim() == 0) input = reshape(input, {1});
  int64_t d = dim ? wrap_dim(*dim, input.dim(), "repeat_interleave") : 0;
  // Static: repeats copies of each slice, side by side after it.
  Tensor spread = unsqueeze(input, d + 1);
  Dims shape = spread.shape();
  shape.set(static_cast<size_t>(d + 1), repeats);
  return flatten(expand(spread, shape), d, d + 1);
}

Tensor bincount(const Tensor& x, const Tensor& weights, int64_t minlength) {
  KILN_CHECK(x.dim() == 1 && is_integral(x.dtype(), false), shape,
             "[bincount] expects a 1-D integer tensor, got {}", x.meta_str());
  KILN_CHECK(minlength >= 0, value, "[bincount] minlength should be >= 0, got {}", minlength);
  check_unique_readable(x, "bincount");
  SymInt bins = minlength;
  if (x.sym_numel() != SymInt(0)) {
    if (x.is_fake()) {     // (Y3) the bins are the data's: max(minlength, max(x) + 1)
      item_size(amin(x));  // a run-time check that no value is negative
      bins = sym_max(bins, item_size(amax(x)) + SymInt(1));
    } else {
      int64_t lowest = item<int64_t>(amin(x)), highest = item<int64_t>(amax(x));
      KILN_CHECK(lowest >= 0, value,
                 "[bincount] input should contain only non-negative values, got {}", lowest);
      bins = std::max(minlength, highest + 1);
    }
  }
  Tensor index = to(x, DType::i64);
  if (!weights.defined()) {
    TensorOptions o{.dtype = DType::i64, .device = x.device()};
    return scatter_add(zeros(sym_dims({bins}), o), 0, index, ones_like(index));
  }
  KILN_CHECK(weights.shape() == x.shape(), shape,
             "[bincount] weights {} must be shaped like the input {}", weights.meta_str(),
             x.meta_str());
  DType wd = is_floating(weights.dtype()) ? weights.dtype() : DType::f64;
  return scatter_add(zeros(sym_dims({bins}), {.dtype = wd, .device = x.device()}), 0, index,
                     to(weights, wd));
}

template <typename T>
std::vector<T> to_vector(const Tensor& x) {
  check_readable(x, "to_vector");
  // (D4) A host read waits for the stream that last wrote the data.
  if (StreamImpl* w = x.storage()->writer.load()) Stream::of(w).synchronize();
  autograd::NoGradGuard no_grad;  // reading values is not part of any gradient
  Tensor host = convert(x, Device(DeviceType::cpu, 0), dtype_of<T>());
  host = contiguous(host);
  std::vector<T> out(static_cast<size_t>(host.numel()));
  const T* p = host.data<T>();
  for (size_t i = 0; i < out.size(); ++i) out[i] = p[i];
  return out;
}

template <typename T>
T item(const Tensor& x) {
  check_readable(x, "item");
  KILN_CHECK(x.numel() == 1, value,
             "[item] a tensor with {} elements cannot be converted to a scalar", x.numel());
  return to_vector<T>(x)[0];
}

#define KILN_INSTANTIATE_HOST(T)                       \
  template std::vector<T> to_vector<T>(const Tensor&); \
  template T item<T>(const Tensor&);
KILN_INSTANTIATE_HOST(float)
KILN_INSTANTIATE_HOST(double)
KILN_INSTANTIATE_HOST(int64_t)
KILN_INSTANTIATE_HOST(int32_t)
KILN_INSTANTIATE_HOST(int16_t)
KILN_INSTANTIATE_HOST(int8_t)
KILN_INSTANTIATE_HOST(uint8_t)
#undef KILN_INSTANTIATE_HOST

template <>
std::vector<bool> to_vector<bool>(const Tensor& x) {
  std::vector<uint8_t> bytes = to_vector<uint8_t>(convert(x, x.device(), b8));
  return std::vector<bool>(bytes.begin(), bytes.end());
}
template <>
bool item<bool>(const Tensor& x) {
  return item<uint8_t>(convert(x, x.device(), b8)) != 0;
}

}  // namespace kiln

#pragma once
// One representative call per op of the table, shared by the consistency tests (F6)
// and gradcheck (G2). An op without an entry fails both.
#include <vector>

#include "kiln/kiln.h"

namespace kiln::testing {

/** Arguments of one call of `op`; floating tensors have dtype `fp`. */
/** (Y3) Ops whose output size is their input's data: a fake input needs a symbolic trace
 * (its size an unbacked symbol), and they run on CPU tensors only. */
inline bool data_dependent(ops::OpKind op) { return ops::is_data_dependent(op); }

inline std::vector<Value> sample_args(ops::OpKind op, DType fp = f32) {
  using ops::OpKind;
  TensorOptions o{.dtype = fp};
  Tensor a = randn({3, 4}, o), b = randn({4}, o), m = randn({4, 5}, o), i = arange(3);
  Tensor pos = add(abs(a), 1.0);
  Tensor mask = gt(a, 0.0);
  Tensor idx = from_vector<int64_t>({2, 0});
  Tensor scalar = scalar_tensor(2.0, o);
  switch (op) {
    case OpKind::empty:
    case OpKind::rand:
    case OpKind::randn: return {IntList{2, 3}, f32, Device("cpu:0")};
    case OpKind::full: return {IntList{2, 3}, Scalar(1.5), f64, Device("cpu:0")};
    case OpKind::arange: return {Scalar(0), Scalar(10), Scalar(3), i64, Device("cpu:0")};
    case OpKind::neg:
    case OpKind::abs:
    case OpKind::relu:
    case OpKind::exp:
    case OpKind::sin:
    case OpKind::cos:
    case OpKind::tanh:
    case OpKind::sigmoid:
    case OpKind::silu:
    case OpKind::erf:
    case OpKind::logical_not: return {transpose(a, 0, 1)};
    case OpKind::log:
    case OpKind::sqrt:
    case OpKind::rsqrt:
    case OpKind::log2:
    case OpKind::log10:
    case OpKind::reciprocal: return {pos};
    case OpKind::log1p: return {sub(pos, 1.5)};  // >= -0.5
    case OpKind::expm1:
    case OpKind::atan:
    case OpKind::sinh:
    case OpKind::cosh:
    case OpKind::floor:
    case OpKind::ceil:
    case OpKind::round:
    case OpKind::trunc:
    case OpKind::sign: return {transpose(mul(a, 2.0), 0, 1)};
    case OpKind::tan:
    case OpKind::asin:
    case OpKind::acos:
    case OpKind::atanh: return {mul(tanh(a), 0.9)};  // in (-0.9, 0.9)
    case OpKind::exp2:
    case OpKind::erfc:
    case OpKind::asinh: return {transpose(a, 0, 1)};
    case OpKind::acosh: return {add(pos, 0.5)};  // >= 1.5
    case OpKind::erfinv: return {mul(tanh(a), 0.9)};
    case OpKind::lgamma:
    case OpKind::digamma: return {transpose(mul(a, 2.0), 0, 1)};
    case OpKind::polygamma: return {add(pos, 0.5), int64_t{2}};
    case OpKind::special_unary: return {transpose(mul(a, 2.0), 0, 1), Str("i1e")};
    case OpKind::special_binary: return {from_vector<int64_t>({2, 3, 5, 4}), pos, Str("zeta")};
    case OpKind::bitwise_not:
      return {transpose(from_vector<int64_t>({5, -3, 0, 7, 12, -8}, {2, 3}), 0, 1)};
    case OpKind::bitwise_and:
    case OpKind::bitwise_or:
    case OpKind::bitwise_xor:
      return {from_vector<int64_t>({5, -3, 0, 7, 12, -8}, {2, 3}),
              from_vector<int32_t>({6, 3, -1}, {3})};
    case OpKind::sort: return {transpose(a, 0, 1), int64_t{0}, true, false};
    case OpKind::topk: return {a, int64_t{2}, int64_t{1}, true, true};
    case OpKind::clamp: return {transpose(a, 0, 1), Scalar(-0.5), Scalar(0.75)};
    case OpKind::gelu: return {a, Str("tanh")};
    case OpKind::gelu_backward:
      return {randn({3, 4}, o), transpose(randn({4, 3}, o), 0, 1), Str("tanh")};
    case OpKind::threshold_backward:
      return {randn({3, 4}, o), transpose(randn({4, 3}, o), 0, 1), Scalar(0.25)};
    case OpKind::add:
    case OpKind::sub: return {a, b, Scalar(2)};
    case OpKind::mul:
    case OpKind::div:
    case OpKind::maximum:
    case OpKind::minimum:
    case OpKind::eq:
    case OpKind::ne:
    case OpKind::lt:
    case OpKind::le:
    case OpKind::gt:
    case OpKind::ge: return {a, scalar};
    case OpKind::pow: return {pos, b};
    // Divisors kept away from 0 and quotients away from integers (where the derivative jumps).
    case OpKind::remainder:
    case OpKind::fmod: return {mul(a, 3.0), add(abs(b), 0.7)};
    case OpKind::floor_divide: return {mul(a, 3.0), neg(add(abs(b), 0.7))};
    case OpKind::atan2: return {a, transpose(randn({4, 3}, o), 0, 1)};
    case OpKind::where: return {mask, a, to(b, f64)};
    case OpKind::masked_fill:
    case OpKind::masked_fill_: return {clone(a), mask, Scalar(0.5)};
    case OpKind::add_:
    case OpKind::sub_: return {clone(a), b, Scalar(1)};
    case OpKind::mul_:
    case OpKind::div_: return {clone(a), b};
    case OpKind::relu_: return {clone(a)};
    case OpKind::copy_: return {clone(a), to(b, f64), false};
    case OpKind::fill_: return {clone(a), Scalar(3)};
    case OpKind::sum:
    case OpKind::mean: return {a, IntList{1}, true, Value()};
    case OpKind::amax:
    case OpKind::amin: return {a, IntList{0}, false};
    case OpKind::max:
    case OpKind::min: return {a, int64_t{1}, true};
    case OpKind::argmax: return {a, int64_t{0}, false};
    case OpKind::var: return {a, IntList{1}, int64_t{1}, false};
    case OpKind::prod: return {a, IntList{1}, false, Value()};
    case OpKind::cumsum: return {transpose(a, 0, 1), int64_t{1}, Value()};
    case OpKind::cumprod: return {a, int64_t{0}, Value()};
    case OpKind::logcumsumexp: return {transpose(a, 0, 1), int64_t{1}};
    case OpKind::cummax:
    case OpKind::cummin: return {a, int64_t{1}};
    case OpKind::cumprod_backward:
      return {randn({3, 4}, o), transpose(randn({4, 3}, o), 0, 1), int64_t{1}};
    case OpKind::softmax:
    case OpKind::log_softmax: return {a, int64_t{0}};
    case OpKind::softmax_backward:
      return {randn({3, 4}, o), softmax(transpose(randn({4, 3}, o), 0, 1), 1), int64_t{1}};
    case OpKind::log_softmax_backward: return {randn({3, 4}, o), log_softmax(a, 0), int64_t{0}};
    case OpKind::mm: return {a, m};
    case OpKind::bmm: return {randn({2, 3, 4}, o), randn({2, 4, 5}, o)};
    case OpKind::matmul: return {randn({2, 1, 3, 4}, o), m};
    case OpKind::addmm: return {randn({5}, o), a, m, Scalar(1), Scalar(1)};
    case OpKind::linear: return {a, randn({6, 4}, o), randn({6}, o)};
    case OpKind::linear_backward: return {randn({3, 6}, o), a, randn({6, 4}, o)};
    case OpKind::nonzero: return {where(gt(a, 0.0), a, zeros_like(a))};  // some zeros
    case OpKind::value_as_size: return {full({1}, 3, {.dtype = DType::i64})};
    // f32 and f64 only (the functional API computes half types in f32): half samples are
    // f32. Two groups, stride 2 in one dim, padding, dilation.
    case OpKind::convolution: {
      TensorOptions co{.dtype = fp == f64 ? f64 : f32};
      return {randn({2, 4, 5, 6}, co), randn({6, 2, 3, 2}, co), randn({6}, co), IntList{1, 2},
              IntList{1, 0},           IntList{1, 2},           int64_t{2}};
    }
    // The decompositions take f32 and f64 only (LAPACK's types, as PyTorch): half
    // samples are f32.
    case OpKind::linalg_eigh: {  // symmetric, its eigenvalues apart
      TensorOptions lo{.dtype = fp == f64 ? f64 : f32};
      Tensor s = randn({4, 4}, lo);
      return {add(add(s, transpose(s, 0, 1)), diag(arange(0.0, 8.0, 2.0, lo))), Str("L")};
    }
    case OpKind::linalg_svd: return {randn({4, 3}, {.dtype = fp == f64 ? f64 : f32}), false};
    case OpKind::view: return {a, IntList{2, -1}};
    case OpKind::permute: return {a, IntList{1, 0}};
    case OpKind::transpose: return {a, int64_t{0}, int64_t{1}};
    case OpKind::unsqueeze: return {a, int64_t{1}};
    case OpKind::squeeze: return {randn({3, 1, 4}, o), IntList{}};
    case OpKind::expand: return {b, IntList{2, 4}};
    case OpKind::slice: return {a, int64_t{1}, int64_t{1}, Value(), int64_t{2}};
    case OpKind::select: return {a, int64_t{0}, int64_t{-1}};
    case OpKind::as_strided: return {a, IntList{2, 2}, IntList{1, 4}, int64_t{1}};
    case OpKind::alias: return {transpose(a, 0, 1)};
    case OpKind::as_strided_scatter:
      return {randn({12}, o), randn({2, 2}, o), IntList{2, 2}, IntList{1, 4}, int64_t{1}};
    case OpKind::cat: return {TensorList{a, randn({2, 4}, o)}, int64_t{0}};
    case OpKind::index_select: return {a, int64_t{0}, idx};
    case OpKind::gather: return {a, int64_t{1}, from_vector<int64_t>({0, 3, 1, 1}, {2, 2})};
    case OpKind::embedding: return {m, from_vector<int64_t>({1, 2, 3}, {3, 1})};
    case OpKind::scatter_add:
      return {a, int64_t{1}, from_vector<int64_t>({0, 3, 1, 1}, {2, 2}), randn({2, 3}, o)};
    case OpKind::clone: return {transpose(a, 0, 1)};
    case OpKind::layer_norm: return {a, IntList{4}, b, b, 1e-5};
    case OpKind::rms_norm: return {a, IntList{4}, b, Value()};
    case OpKind::layer_norm_backward: return {randn({3, 4}, o), a, IntList{4}, b, 1e-5};
    case OpKind::_to_copy: return {a, f16, Device("cpu:1"), false};
    // Collectives on a group of this process alone.
    case OpKind::all_reduce:
      dist::bind_group("samples", dist::local_group());
      return {a, Str("sum"), Str("samples")};
    case OpKind::all_gather_into_tensor:
      dist::bind_group("samples", dist::local_group());
      return {a, int64_t{1}, Str("samples")};
    case OpKind::reduce_scatter_tensor:
      dist::bind_group("samples", dist::local_group());
      return {a, Str("avg"), int64_t{1}, Str("samples")};
    case OpKind::all_to_all_single:
      dist::bind_group("samples", dist::local_group());
      return {a, int64_t{1}, Str("samples")};
    case OpKind::wait_tensor: return {transpose(a, 0, 1)};
    case OpKind::all_to_all_single_v:
      dist::bind_group("samples", dist::local_group());
      return {a, IntList{a.size(0)}, IntList{a.size(0)}, Str("samples")};
    case OpKind::broadcast:
      dist::bind_group("samples", dist::local_group());
      return {a, int64_t{0}, Str("samples")};
    case OpKind::all_reduce_:
      dist::bind_group("samples", dist::local_group());
      return {clone(a), Str("sum"), Str("samples")};
  }
  return {};
}

}  // namespace kiln::testing

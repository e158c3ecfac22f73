#pragma once
// What every backend's kernels share: the list of kernels and the ops they serve (one
// list, so every backend covers the same ops), and the host-side layout logic that
// does not depend on where the data is. Backends pass their own copy/allocation.

#include <array>
#include <cmath>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "kiln/ops/meta.h"
#include "kiln/ops/op_table.h"

// Functions both the CPU kernels and the CUDA kernels (on the GPU) call.
#if defined(__CUDACC__)
#define KILN_HOST_DEVICE __host__ __device__
#else
#define KILN_HOST_DEVICE
#endif

// X(kernel, ops...): the kernel functions a backend defines and the ops each serves.
// View ops need no kernel (dispatch builds them from meta); derived in-place ops use
// their functional kernel plus copy_.
#define KILN_KERNELS(X)                                                                         \
  X(k_empty, empty)                                                                             \
  X(k_full, full)                                                                               \
  X(k_arange, arange)                                                                           \
  X(k_rand, rand)                                                                               \
  X(k_randn, randn)                                                                             \
  X(k_unary, neg, abs, relu, exp, log, sqrt, rsqrt, sin, cos, tanh, sigmoid, silu, gelu, erf)   \
  X(k_unary, log1p, expm1, log2, tan, atan, asin, acos, sinh, cosh, reciprocal)                 \
  X(k_unary, floor, ceil, round, trunc, sign, exp2, log10, erfc, asinh, acosh, atanh)           \
  X(k_unary, erfinv, lgamma, digamma, polygamma)                                                \
  X(k_special, special_unary, special_binary)                                                   \
  X(k_clamp, clamp)                                                                             \
  X(k_logical_not, logical_not)                                                                 \
  X(k_bitwise, bitwise_not, bitwise_and, bitwise_or, bitwise_xor)                               \
  X(k_binary, add, sub, mul, div, pow, maximum, minimum)                                        \
  X(k_binary, remainder, fmod, floor_divide, atan2)                                             \
  X(k_compare, eq, ne, lt, le, gt, ge)                                                          \
  X(k_where, where)                                                                             \
  X(k_gelu_backward, gelu_backward)                                                             \
  X(k_threshold_backward, threshold_backward)                                                   \
  X(k_masked_fill, masked_fill)                                                                 \
  X(k_copy_, copy_)                                                                             \
  X(k_fill_, fill_)                                                                             \
  X(k_sum_mean, sum, mean)                                                                      \
  X(k_amax, amax, amin)                                                                         \
  X(k_max_dim, max, min, argmax)                                                                \
  X(k_prod, prod)                                                                               \
  X(k_scan, cumsum, cumprod, logcumsumexp)                                                      \
  X(k_cumextreme, cummax, cummin)                                                               \
  X(k_cumprod_backward, cumprod_backward)                                                       \
  X(k_sort, sort, topk)                                                                         \
  X(k_var, var)                                                                                 \
  X(k_softmax, softmax, log_softmax)                                                            \
  X(k_softmax_backward, softmax_backward, log_softmax_backward)                                 \
  X(k_mm, mm)                                                                                   \
  X(k_bmm, bmm)                                                                                 \
  X(k_matmul, matmul)                                                                           \
  X(k_addmm, addmm)                                                                             \
  X(k_linear, linear)                                                                           \
  X(k_linear_backward, linear_backward)                                                         \
  X(k_convolution, convolution)                                                                 \
  X(k_nonzero, nonzero)                                                                         \
  X(k_linalg_eigh, linalg_eigh)                                                                 \
  X(k_linalg_svd, linalg_svd)                                                                   \
  X(k_cat, cat)                                                                                 \
  X(k_as_strided_scatter, as_strided_scatter)                                                   \
  X(k_index_select, index_select)                                                               \
  X(k_gather, gather)                                                                           \
  X(k_embedding, embedding)                                                                     \
  X(k_scatter_add, scatter_add)                                                                 \
  X(k_clone, clone)                                                                             \
  X(k_layer_norm, layer_norm, rms_norm)                                                         \
  X(k_layer_norm_backward, layer_norm_backward)                                                 \
  X(k_to_copy, _to_copy)                                                                        \
  X(k_collective, all_reduce, all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single, \
    broadcast, all_to_all_single_v)

namespace kiln::backend {
/** d gelu(v) / dv, erf or tanh form, written with the caller's erf/exp/tanh (vectorizable
 * ones on the CPU, CUDA's on the GPU). */
template <typename W, typename Erf, typename Exp, typename Tanh>
KILN_HOST_DEVICE inline W gelu_derivative(W v, bool tanh_form, Erf erf_, Exp exp_, Tanh tanh_) {
  if (tanh_form) {
    const W k = W(0.7978845608028654), a = W(0.044715);  // sqrt(2 / pi)
    W t = tanh_(k * (v + a * v * v * v));
    return W(0.5) * (W(1) + t) + W(0.5) * v * (W(1) - t * t) * k * (W(1) + W(3) * a * v * v);
  }
  // Phi(v) + v phi(v)
  return W(0.5) * (W(1) + erf_(v * W(0.7071067811865476))) +
         v * exp_(W(-0.5) * v * v) * W(0.3989422804014327);
}
}  // namespace kiln::backend

/** Declares a backend's kernels (inside its namespace). */
#define KILN_DECLARE_KERNEL(name, ...) \
  void name(const ::kiln::ops::OpCall&, std::span<::kiln::Tensor>);

/** The kernel table of the backend whose namespace this expands in. */
#define KILN_BIND_KERNEL(name, ...) \
  for (::kiln::ops::OpKind op : {KILN_OP_KINDS(__VA_ARGS__)}) t[static_cast<size_t>(op)] = name;
#define KILN_OP_KIND(op) ::kiln::ops::OpKind::op,
#define KILN_OP_KINDS(...) KILN_FOR_EACH(KILN_OP_KIND, __VA_ARGS__)
#define KILN_BUILD_KERNEL_TABLE()  \
  [] {                             \
    ::kiln::ops::KernelTable t{};  \
    KILN_KERNELS(KILN_BIND_KERNEL) \
    return t;                      \
  }()

// A small FOR_EACH over up to 16 arguments (the longest KILN_KERNELS line).
#define KILN_FE_1(m, a) m(a)
#define KILN_FE_2(m, a, ...) m(a) KILN_FE_1(m, __VA_ARGS__)
#define KILN_FE_3(m, a, ...) m(a) KILN_FE_2(m, __VA_ARGS__)
#define KILN_FE_4(m, a, ...) m(a) KILN_FE_3(m, __VA_ARGS__)
#define KILN_FE_5(m, a, ...) m(a) KILN_FE_4(m, __VA_ARGS__)
#define KILN_FE_6(m, a, ...) m(a) KILN_FE_5(m, __VA_ARGS__)
#define KILN_FE_7(m, a, ...) m(a) KILN_FE_6(m, __VA_ARGS__)
#define KILN_FE_8(m, a, ...) m(a) KILN_FE_7(m, __VA_ARGS__)
#define KILN_FE_9(m, a, ...) m(a) KILN_FE_8(m, __VA_ARGS__)
#define KILN_FE_10(m, a, ...) m(a) KILN_FE_9(m, __VA_ARGS__)
#define KILN_FE_11(m, a, ...) m(a) KILN_FE_10(m, __VA_ARGS__)
#define KILN_FE_12(m, a, ...) m(a) KILN_FE_11(m, __VA_ARGS__)
#define KILN_FE_13(m, a, ...) m(a) KILN_FE_12(m, __VA_ARGS__)
#define KILN_FE_14(m, a, ...) m(a) KILN_FE_13(m, __VA_ARGS__)
#define KILN_FE_15(m, a, ...) m(a) KILN_FE_14(m, __VA_ARGS__)
#define KILN_FE_16(m, a, ...) m(a) KILN_FE_15(m, __VA_ARGS__)
#define KILN_FE_PICK(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, name, \
                     ...)                                                                         \
  name
#define KILN_FOR_EACH(m, ...)                                                                 \
  KILN_FE_PICK(__VA_ARGS__, KILN_FE_16, KILN_FE_15, KILN_FE_14, KILN_FE_13, KILN_FE_12,       \
               KILN_FE_11, KILN_FE_10, KILN_FE_9, KILN_FE_8, KILN_FE_7, KILN_FE_6, KILN_FE_5, \
               KILN_FE_4, KILN_FE_3, KILN_FE_2, KILN_FE_1)                                    \
  (m, __VA_ARGS__)

namespace kiln::backend {

/** clamp's max(v, lo) then min(., hi), each propagating NaN (of v or of a bound); with
 * lo > hi every value is hi, as torch.clamp. */
template <typename W>
KILN_HOST_DEVICE inline W clamp_value(W v, bool has_lo, W lo, bool has_hi, W hi) {
  if (has_lo) v = v != v ? v : lo != lo ? lo : (v < lo ? lo : v);
  if (has_hi) v = v != v ? v : hi != hi ? hi : (v > hi ? hi : v);
  return v;
}

/** x + y and x * y with two's-complement wrap-around for signed integers (the result
 * PyTorch's kernels give; signed overflow is undefined in C++). Other types as usual. */
template <typename T>
KILN_HOST_DEVICE inline T wrap_add(T x, T y) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
  } else {
    return x + y;
  }
}
template <typename T>
KILN_HOST_DEVICE inline T wrap_mul(T x, T y) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    using P = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, U>;  // no int promotion
    return static_cast<T>(
        static_cast<U>(static_cast<P>(static_cast<U>(x)) * static_cast<P>(static_cast<U>(y))));
  } else {
    return x * y;
  }
}

/** base^e for integers, wrapping on overflow. Negative exponents (reached only with a
 * tensor exponent; a negative scalar exponent is an error) give 1 for base 1, +-1 for
 * base -1 and 0 otherwise, as in PyTorch. */
template <typename W>
KILN_HOST_DEVICE inline W int_pow(W base, W e) {
  if constexpr (std::is_signed_v<W>)
    if (e < 0) return base == 1 ? W(1) : base == W(-1) ? W(e % 2 ? -1 : 1) : W(0);
  W r = 1;
  while (e) {
    if (e & 1) r = wrap_mul(r, base);
    base = wrap_mul(base, base);
    e >>= 1;
  }
  return r;
}

// The division family as PyTorch defines it. Integers: the caller has ruled out y == 0
// (an Error); y == -1 is handled apart (x % -1 and INT_MIN / -1 are undefined in C++).

/** fmod: x - trunc(x / y) * y, with x's sign (C's fmod). */
template <typename W>
KILN_HOST_DEVICE inline W fmod_of(W x, W y) {
  if constexpr (std::is_floating_point_v<W>) {
    using std::fmod;
    return fmod(x, y);
  } else {
    if constexpr (std::is_signed_v<W>)
      if (y == W(-1)) return W(0);
    return static_cast<W>(x % y);
  }
}

/** remainder: x - floor(x / y) * y, with y's sign (Python's %). */
template <typename W>
KILN_HOST_DEVICE inline W remainder_of(W x, W y) {
  W r = fmod_of(x, y);
  if constexpr (!std::is_unsigned_v<W>)
    if (r != W(0) && (r < W(0)) != (y < W(0))) r = static_cast<W>(r + y);
  return r;
}

/** floor_divide: the quotient rounded down. Floats: from fmod, so that the quotient and
 * remainder agree; a zero quotient keeps the sign of x / y; y == 0 gives x / y. */
template <typename W>
KILN_HOST_DEVICE inline W floor_divide_of(W x, W y) {
  if constexpr (std::is_floating_point_v<W>) {
    using std::copysign;
    using std::floor;
    if (y == W(0)) return x / y;
    W r = fmod_of(x, y);
    W q = (x - r) / y;
    if (r != W(0) && (r < W(0)) != (y < W(0))) q -= W(1);
    if (q == W(0)) return copysign(W(0), x / y);
    W f = floor(q);
    return q - f > W(0.5) ? f + W(1) : f;
  } else {
    if constexpr (std::is_signed_v<W>) {
      if (y == W(-1)) return wrap_mul(W(-1), x);
      W q = static_cast<W>(x / y);
      return (x % y != 0 && (x < 0) != (y < 0)) ? static_cast<W>(q - 1) : q;
    }
    return static_cast<W>(x / y);
  }
}

/** A scan's running combination: sums and products (integers wrap) or log-sum-exp
 * (floats; equal infinities stay, NaN spreads). */
enum class Scan : uint8_t { sum, product, logsumexp };
template <typename A>
KILN_HOST_DEVICE inline A scan_identity(Scan s) {
  if (s == Scan::product) return A(1);
  if constexpr (std::is_floating_point_v<A>)
    if (s == Scan::logsumexp) return -std::numeric_limits<A>::infinity();
  return A(0);
}
template <typename A>
KILN_HOST_DEVICE inline A scan_combine(Scan s, A acc, A v) {
  if (s == Scan::sum) return wrap_add(acc, v);
  if (s == Scan::product) return wrap_mul(acc, v);
  if constexpr (std::is_floating_point_v<A>) {
    using std::exp;
    using std::fabs;
    using std::log1p;
    if (acc != acc || v != v) return acc + v;
    if (acc == v)
      return fabs(acc) == std::numeric_limits<A>::infinity() ? acc
                                                             : acc + log1p(A(1));  // log(2 e^v)
    A hi = acc > v ? acc : v;
    return hi + log1p(exp(-fabs(acc - v)));
  }
  return acc;
}

/** cummax's / cummin's step: whether v at a later position replaces the running extreme
 * `best` (NaN wins and stays; ties move to the later position). */
template <typename T>
KILN_HOST_DEVICE inline bool takes_over(T v, T best, bool is_max) {
  if (v != v) return true;
  if (best != best) return false;
  return is_max ? !(v < best) : !(best < v);
}

/** sort's and topk's order: whether `a` comes before `b` (NaN above every number: last
 * ascending, first descending, as PyTorch). */
template <typename T>
KILN_HOST_DEVICE inline bool sorts_before(T a, T b, bool descending) {
  bool a_nan = a != a, b_nan = b != b;
  if (a_nan || b_nan) return descending ? a_nan && !b_nan : b_nan && !a_nan;
  return descending ? b < a : a < b;
}

/** The bitwise op `op` of (x, y) (y unused for bitwise_not); bools as logical ops. Other
 * types compile (generic kernels instantiate every dtype) and give x. */
template <typename T>
KILN_HOST_DEVICE inline T bitwise_of(ops::OpKind op, T x, T y) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (op) {
      case ops::OpKind::bitwise_not: return !x;
      case ops::OpKind::bitwise_and: return x && y;
      case ops::OpKind::bitwise_or: return x || y;
      default: return x != y;
    }
  } else if constexpr (!std::is_integral_v<T>) {
    return x;  // floats are refused before (meta)
  } else {
    switch (op) {
      case ops::OpKind::bitwise_not: return static_cast<T>(~x);
      case ops::OpKind::bitwise_and: return static_cast<T>(x & y);
      case ops::OpKind::bitwise_or: return static_cast<T>(x | y);
      default: return static_cast<T>(x ^ y);
    }
  }
}

/** Whether `op` is one of the integer-dividing ops (an integer divisor of 0 is an error). */
inline bool divides_integers(ops::OpKind op) {
  return op == ops::OpKind::remainder || op == ops::OpKind::fmod || op == ops::OpKind::floor_divide;
}

/** A reduction's input as a dense [outer, inner] matrix: kept dims first (in order),
 * then reduced dims. */
struct Rows {
  Tensor data;
  int64_t outer = 1, inner = 1;
};

/** `x` as Rows in `dtype`; `dense(view, dtype)` is the backend's "this view, dense, in
 * that dtype" (the view itself when it already is). */
template <typename Dense>
Rows to_rows(const Tensor& x, const std::vector<bool>& reduced, DType dtype, Dense&& dense) {
  Dims shape, strides;
  Rows r;
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < reduced.size(); ++i)
      if (reduced[i] == (pass == 1)) {
        shape.push_back(x.shape()[i]);
        strides.push_back(x.strides()[i]);
        (pass ? r.inner : r.outer) *= x.shape()[i];
      }
  r.data = dense(make_view(x, shape, strides, x.offset()), dtype);
  return r;
}

/** The view of `out` (shaped like x) with dim `d` moved last, matching to_rows. */
inline Tensor moved_last(const Tensor& out, int64_t d) {
  if (out.dim() == 0) return out;
  Dims shape, strides;
  for (int64_t i = 0; i < out.dim(); ++i) {
    if (i == d) continue;
    shape.push_back(out.shape()[i]);
    strides.push_back(out.strides()[i]);
  }
  shape.push_back(out.shape()[d]);
  strides.push_back(out.strides()[d]);
  return make_view(out, shape, strides, out.offset());
}

/** The `reduced` mask of a reduction over dim `d` alone. */
inline std::vector<bool> only_dim(int64_t rank, int64_t d) {
  std::vector<bool> v(rank, false);
  if (rank) v[d] = true;
  return v;
}

/** The `reduced` mask of the last `k` dims (a norm's normalized shape). */
inline std::vector<bool> last_dims(int64_t rank, int64_t k) {
  std::vector<bool> v(rank, false);
  for (int64_t i = rank - k; i < rank; ++i) v[i] = true;
  return v;
}

/** What layer_norm and rms_norm read from their arguments, the same on every backend:
 * the rows' mask (the last dims the normalized shape names), the optional weight and bias
 * (rms_norm has no bias), and epsilon (rms_norm's None is the compute dtype's epsilon, as
 * PyTorch's). */
struct NormArgs {
  bool rms;
  std::vector<bool> rows;  // the reduced mask of to_rows
  Tensor weight, bias;     // undefined where absent
  double eps;              // when !eps_is_dtype_epsilon
  bool eps_is_dtype_epsilon;

  template <typename T>
  T epsilon() const {
    return eps_is_dtype_epsilon ? std::numeric_limits<T>::epsilon() : static_cast<T>(eps);
  }
};

inline NormArgs norm_args(const ops::OpCall& c) {
  const Tensor& x = c.args.tensor(0);
  bool rms = c.op == ops::OpKind::rms_norm;
  bool dtype_eps = rms && c.args.is_none(3);
  return NormArgs{rms,
                  last_dims(x.dim(), static_cast<int64_t>(c.args.ints(1).size())),
                  c.args.opt_tensor(2),
                  rms ? Tensor() : c.args.opt_tensor(3),
                  dtype_eps ? 0.0 : c.args.f64(rms ? 3 : 4),
                  dtype_eps};
}

/** copy_: a source that overlaps the destination in another layout is read out
 * completely (into `scratch(src)`, a fresh tensor like it) before anything is written. */
template <typename CopyInto, typename Scratch>
void copy_overlapping(const Tensor& dst, Tensor src, CopyInto&& copy_into, Scratch&& scratch) {
  bool same_view = src.offset() == dst.offset() && src.strides() == dst.strides();
  if (src.is_alias_of(dst) && !same_view) {
    Tensor tmp = scratch(src);
    copy_into(tmp, src);
    src = tmp;
  }
  copy_into(dst, src);
}

/** cat: each input copied into its slice of `out` along `dim` (wrapped). */
template <typename CopyInto>
void cat_into(const Tensor& out, const TensorList& inputs, int64_t dim, CopyInto&& copy_into) {
  int64_t d = dim < 0 ? dim + out.dim() : dim;
  int64_t at = 0;
  for (const Tensor& t : inputs) {
    if (t.numel() == 0) continue;  // nothing to copy (and legacy [0] tensors have another rank)
    int64_t len = t.shape()[d];
    Dims shape = out.shape();
    shape[d] = len;
    copy_into(make_view(out, shape, out.strides(), out.offset() + at * out.strides()[d]), t);
    at += len;
  }
}

/** as_strided_scatter(self, src, size, stride, offset) into `out`. */
template <typename CopyInto>
void as_strided_scatter_into(const Tensor& out, const ops::OpCall& c, CopyInto&& copy_into) {
  copy_into(out, c.args.tensor(0));
  int64_t offset = c.args.is_none(4) ? 0 : c.args.i64(4);
  copy_into(make_view(out, Dims(c.args.ints(2)), Dims(c.args.ints(3)), out.offset() + offset),
            c.args.tensor(1));
}

/** The rows of linear's input `x` (every dim but the last, flattened): not
 * numel / features, which is 0 for zero features. */
inline int64_t linear_rows(const Tensor& x) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.shape()[static_cast<size_t>(d)];
  return rows;
}

/** A convolution's spatial geometry with every convolution seen as 3-D: missing leading
 * spatial dims have size 1, one tap, stride 1, no padding (so one loop nest serves
 * 1, 2 and 3 spatial dims). */
struct Conv3d {
  std::array<int64_t, 3> in{1, 1, 1}, kernel{1, 1, 1}, out{1, 1, 1}, stride{1, 1, 1},
      padding{0, 0, 0}, dilation{1, 1, 1};
};
inline Conv3d as_3d(const ops::ConvGeometry& g) {
  Conv3d c;
  auto shift = static_cast<size_t>(3 - g.rank);  // the given dims are the last ones
  for (size_t i = 0; i < static_cast<size_t>(g.rank); ++i) {
    c.in[shift + i] = g.in[i];
    c.kernel[shift + i] = g.kernel[i];
    c.out[shift + i] = g.out[i];
    c.stride[shift + i] = g.stride[i];
    c.padding[shift + i] = g.padding[i];
    c.dilation[shift + i] = g.dilation[i];
  }
  return c;
}

/** matmul's 1-D operands as matrices ([1, k] and [k, 1]); their unit dims are absent
 * from the output but do not change its dense layout. */
inline Tensor as_left_matrix(const Tensor& a) {
  return a.dim() == 1 ? make_view(a, Dims{1, a.shape()[0]}, Dims{0, a.strides()[0]}, a.offset())
                      : a;
}
inline Tensor as_right_matrix(const Tensor& b) {
  return b.dim() == 1 ? make_view(b, Dims{b.shape()[0], 1}, Dims{b.strides()[0], 0}, b.offset())
                      : b;
}

/** The broadcast batch shape of matmul's (matrix-promoted) operands. */
inline Dims matmul_batch(const Tensor& a2, const Tensor& b2) {
  Dims batch_a(std::span<const int64_t>(a2.shape().data(), a2.dim() - 2));
  Dims batch_b(std::span<const int64_t>(b2.shape().data(), b2.dim() - 2));
  return ops::broadcast_shapes(batch_a, batch_b, "matmul");
}

/** `t` ([..., r, c]) broadcast to batch dims `batch`, as a dense [nb, r, c] copy made with
 * the backend's `empty(shape, like)` and `copy_into(dst, src)`. */
template <typename Empty, typename CopyInto>
Tensor dense_batch(const Tensor& t, const Dims& batch, Empty&& empty, CopyInto&& copy_into) {
  int64_t r = t.shape()[t.dim() - 2], c = t.shape()[t.dim() - 1];
  Dims shape = batch;
  shape.push_back(r);
  shape.push_back(c);
  Tensor d = empty(shape, t);
  copy_into(d, t);  // broadcasts the batch dims
  return make_view(d, Dims{numel_of(batch), r, c}, Dims{r * c, c, 1}, 0);
}

}  // namespace kiln::backend

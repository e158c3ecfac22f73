// Stacking, splitting and dim-shuffling composites as PyTorch defines them (views and
// cat over views), and PyTorch's plain aliases of existing ops.
#include <algorithm>
#include <numbers>

#include "kiln/api/functional.h"
#include "kiln/ops/meta.h"

namespace kiln {
namespace {

IntList shape_of(const Tensor& t) { return IntList(t.shape().begin(), t.shape().end()); }

TensorList each(const TensorList& ts, Tensor (*f)(const Tensor&)) {
  TensorList out;
  for (const Tensor& t : ts) out.push_back(f(t));
  return out;
}

}  // namespace

Tensor atleast_1d(const Tensor& x) { return x.dim() == 0 ? reshape(x, {1}) : x; }
Tensor atleast_2d(const Tensor& x) {
  if (x.dim() == 0) return reshape(x, {1, 1});
  return x.dim() == 1 ? unsqueeze(x, 0) : x;
}
Tensor atleast_3d(const Tensor& x) {
  switch (x.dim()) {
    case 0: return reshape(x, {1, 1, 1});
    case 1: return reshape(x, {1, x.size(0), 1});
    case 2: return unsqueeze(x, -1);
    default: return x;
  }
}

Tensor hstack(const TensorList& ts) {
  TensorList xs = each(ts, atleast_1d);
  KILN_CHECK(!xs.empty(), value, "[hstack] expects a non-empty list of tensors");
  return cat(xs, xs[0].dim() == 1 ? 0 : 1);
}
Tensor vstack(const TensorList& ts) { return cat(each(ts, atleast_2d), 0); }
Tensor row_stack(const TensorList& ts) { return vstack(ts); }
Tensor dstack(const TensorList& ts) { return cat(each(ts, atleast_3d), 2); }
Tensor column_stack(const TensorList& ts) {
  TensorList cols;
  for (const Tensor& t : ts) cols.push_back(t.dim() <= 1 ? reshape(t, {t.numel(), 1}) : t);
  return hstack(cols);
}

TensorList tensor_split(const Tensor& x, int64_t sections, int64_t dim) {
  KILN_CHECK(x.dim() > 0, shape, "[tensor_split] expects at least a 1-D tensor, got {}",
             x.meta_str());
  KILN_CHECK(sections > 0, value, "[tensor_split] number of sections must be larger than 0, got {}",
             sections);
  int64_t d = wrap_dim(dim, x.dim(), "tensor_split"), n = x.size(d);
  // The first n % sections pieces are one longer.
  TensorList out;
  int64_t start = 0;
  for (int64_t i = 0; i < sections; ++i) {
    int64_t len = n / sections + (i < n % sections ? 1 : 0);
    out.push_back(narrow(x, d, start, len));
    start += len;
  }
  return out;
}

TensorList tensor_split(const Tensor& x, const IntList& indices, int64_t dim) {
  KILN_CHECK(x.dim() > 0, shape, "[tensor_split] expects at least a 1-D tensor, got {}",
             x.meta_str());
  int64_t d = wrap_dim(dim, x.dim(), "tensor_split"), n = x.size(d);
  auto clip = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  // Piece k is x[indices[k-1]:indices[k]] as a Python slice: empty where they decrease.
  TensorList out;
  int64_t start = 0;
  for (int64_t i : indices) {
    int64_t stop = clip(i);
    out.push_back(narrow(x, d, start, std::max<int64_t>(0, stop - start)));
    start = stop;
  }
  out.push_back(narrow(x, d, start, n - start));
  return out;
}

namespace {

TensorList split_evenly(const Tensor& x, int64_t sections, int64_t dim, int64_t min_rank,
                        const char* op) {
  KILN_CHECK(x.dim() >= min_rank, shape,
             "[{}] requires a tensor with at least {} dimension(s), got {}", op, min_rank,
             x.meta_str());
  KILN_CHECK(sections > 0 && x.size(dim) % sections == 0, value,
             "[{}] attempted to split along dimension {}, but the size of the dimension {} is not "
             "divisible by the "
             "split_size {}",
             op, dim, x.size(dim), sections);
  return tensor_split(x, sections, dim);
}

}  // namespace

TensorList hsplit(const Tensor& x, int64_t sections) {
  return split_evenly(x, sections, x.dim() == 1 ? 0 : 1, 1, "hsplit");
}
TensorList vsplit(const Tensor& x, int64_t sections) {
  return split_evenly(x, sections, 0, 2, "vsplit");
}
TensorList dsplit(const Tensor& x, int64_t sections) {
  return split_evenly(x, sections, 2, 3, "dsplit");
}

namespace {
TensorList split_at(const Tensor& x, const IntList& indices, int64_t dim, int64_t min_rank,
                    const char* op) {
  KILN_CHECK(x.dim() >= min_rank, shape,
             "[{}] requires a tensor with at least {} dimension(s), got {}", op, min_rank,
             x.meta_str());
  return tensor_split(x, indices, dim);
}
}  // namespace

TensorList hsplit(const Tensor& x, const IntList& indices) {
  return split_at(x, indices, x.dim() == 1 ? 0 : 1, 1, "hsplit");
}
TensorList vsplit(const Tensor& x, const IntList& indices) {
  return split_at(x, indices, 0, 2, "vsplit");
}
TensorList dsplit(const Tensor& x, const IntList& indices) {
  return split_at(x, indices, 2, 3, "dsplit");
}

Tensor unflatten(const Tensor& x, int64_t dim, const IntList& sizes) {
  int64_t d = wrap_dim(dim, x.dim(), "unflatten");
  KILN_CHECK(!sizes.empty(), value, "[unflatten] sizes must be non-empty");
  int64_t known = 1, unknown = 0;
  for (int64_t s : sizes) {
    if (s == -1)
      ++unknown;
    else
      known *= s;
  }
  SymInt size = x.sym_size(d);  // (Y1) a symbolic dim stays symbolic: its check is a guard
  KILN_CHECK(unknown <= 1 && (unknown ? known > 0 && mod(size, known) == 0 : size == known), shape,
             "[unflatten] sizes {} don't multiply up to the size of dim {} ({}) of {}",
             Dims(sizes).str(), d, size.str(), x.meta_str());
  Dims shape;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i != d)
      shape.push_back(x.shape().sym(static_cast<size_t>(i)));
    else
      for (int64_t s : sizes) shape.push_back(s == -1 ? floordiv(size, known) : SymInt(s));
  return reshape(x, shape);
}

Tensor swapaxes(const Tensor& x, int64_t a, int64_t b) { return transpose(x, a, b); }
Tensor swapdims(const Tensor& x, int64_t a, int64_t b) { return transpose(x, a, b); }
Tensor moveaxis(const Tensor& x, int64_t source, int64_t destination) {
  return movedim(x, source, destination);
}
Tensor clip(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  return clamp(x, min, max);
}
Tensor fix(const Tensor& x) { return trunc(x); }
Tensor absolute(const Tensor& x) { return abs(x); }
Tensor negative(const Tensor& x) { return neg(x); }
Tensor positive(const Tensor& x) {
  KILN_CHECK(x.dtype() != DType::b8, dtype, "[positive] does not support bool tensors");
  return x;
}
Tensor sgn(const Tensor& x) { return sign(x); }

Tensor ldexp(const Tensor& x, const Tensor& exponent) {
  Tensor fx = is_floating(x.dtype()) ? x : to(x, DType::f32);
  return fx * exp2(to(exponent, fx.dtype()));
}

Tensor narrow_copy(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  return contiguous(clone(narrow(x, dim, start, length)));
}
TensorList split_with_sizes(const Tensor& x, const IntList& sizes, int64_t dim) {
  return split(x, sizes, dim);
}

Tensor sum_to_size(const Tensor& x, const IntList& size) {
  int64_t lead = x.dim() - static_cast<int64_t>(size.size());
  bool expandable = lead >= 0;
  for (int64_t d = std::max<int64_t>(lead, 0); d < x.dim() && expandable; ++d) {
    int64_t s = size[static_cast<size_t>(d - lead)];
    expandable = s == x.size(d) || s == 1;
  }
  KILN_CHECK(expandable, shape, "[sum_to_size] size {} is not expandable to the tensor's {}",
             Dims(size).str(), x.meta_str());
  if (size.empty()) return sum(x);  // PyTorch's sum_to: a full sum, integers promoted to i64
  IntList dims;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d < lead || (size[static_cast<size_t>(d - lead)] == 1 && x.size(d) != 1)) dims.push_back(d);
  if (dims.empty()) return x;
  return reshape(sum(x, dims, true), size);
}

Tensor reshape_as(const Tensor& x, const Tensor& other) { return reshape(x, other.shape()); }
Tensor view_as(const Tensor& x, const Tensor& other) { return view(x, other.shape()); }

Tensor mT(const Tensor& x) {
  if (x.dim() == 0) return view(x, {});  // PyTorch returns a 0-dim tensor itself (1-D is an error)
  KILN_CHECK(x.dim() >= 2, shape, "[mT] expects a tensor of at least 2 dims, got {}", x.meta_str());
  return transpose(x, -2, -1);
}
Tensor mH(const Tensor& x) { return mT(x); }
Tensor adjoint(const Tensor& x) { return mT(x); }
Tensor numpy_T(const Tensor& x) {
  IntList dims;
  for (int64_t d = x.dim() - 1; d >= 0; --d) dims.push_back(d);
  return permute(x, dims);
}

Tensor real(const Tensor& x) { return x; }
Tensor imag(const Tensor& x) {
  fail(ErrorKind::dtype, "[imag] is not implemented for tensors with non-complex dtypes (got {})",
       x.dtype());
}
Tensor conj(const Tensor& x) { return x; }
Tensor conj_physical(const Tensor& x) { return x; }
Tensor resolve_conj(const Tensor& x) { return x; }
Tensor resolve_neg(const Tensor& x) { return x; }
Tensor angle(const Tensor& x) {
  Tensor fx = is_floating(x.dtype()) ? x : to(x, DType::f32);
  Tensor pi = full_like(fx, std::numbers::pi);
  return where(isnan(fx), fx, where(fx < 0.0, pi, zeros_like(fx)));
}

Tensor arccos(const Tensor& x) { return acos(x); }
Tensor arcsin(const Tensor& x) { return asin(x); }
Tensor arctan(const Tensor& x) { return atan(x); }
Tensor arccosh(const Tensor& x) { return acosh(x); }
Tensor arcsinh(const Tensor& x) { return asinh(x); }
Tensor arctanh(const Tensor& x) { return atanh(x); }
Tensor arctan2(const Tensor& a, const Tensor& b) { return atan2(a, b); }
Tensor greater(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor greater_equal(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor less(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor less_equal(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor not_equal(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor multiply(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor divide(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor divide(const Tensor& a, const Tensor& b, std::string_view rounding_mode) {
  return div(a, b, rounding_mode);
}
Tensor true_divide(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor subtract(const Tensor& a, const Tensor& b, Scalar alpha) { return sub(a, b, alpha); }
Tensor rsub(const Tensor& a, const Tensor& b, Scalar alpha) { return sub(b, a, alpha); }
Tensor concat(const TensorList& tensors, int64_t dim) { return cat(tensors, dim); }
Tensor concatenate(const TensorList& tensors, int64_t dim) { return cat(tensors, dim); }
Tensor msort(const Tensor& x) { return sort(x, 0).first; }
Tensor ravel(const Tensor& x) { return reshape(x, {-1}); }

Tensor inner(const Tensor& a, const Tensor& b) {
  if (a.dim() == 0 || b.dim() == 0) return mul(a, b);
  KILN_CHECK(a.size(-1) == b.size(-1), shape, "[inner] last dimension of a {} and b {} must match",
             a.meta_str(), b.meta_str());
  return tensordot(a, b, IntList{-1}, IntList{-1});
}

Tensor vdot(const Tensor& a, const Tensor& b) { return dot(a, b); }
Tensor broadcast_to(const Tensor& x, const SymSizes& shape) { return expand(x, shape); }
Tensor expand_as(const Tensor& x, const Tensor& other) { return expand(x, other.shape()); }

IntList broadcast_shapes(const std::vector<IntList>& shapes) {
  Dims out;
  for (const IntList& s : shapes) out = ops::broadcast_shapes(out, Dims(s), "broadcast_shapes");
  return out.vec();
}

TensorList broadcast_tensors(const TensorList& tensors) {
  std::vector<IntList> shapes;
  for (const Tensor& t : tensors) shapes.push_back(shape_of(t));
  IntList shape = broadcast_shapes(shapes);
  TensorList out;
  for (const Tensor& t : tensors) out.push_back(expand(t, shape));
  return out;
}

Tensor isposinf(const Tensor& x) { return logical_and(isinf(x), x > 0.0); }
Tensor isneginf(const Tensor& x) { return logical_and(isinf(x), x < 0.0); }
Tensor isreal(const Tensor& x) { return ones_like(x, {.dtype = DType::b8}); }
Tensor argwhere(const Tensor& x) { return nonzero(x); }

}  // namespace kiln

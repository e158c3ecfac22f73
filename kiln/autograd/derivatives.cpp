// THE derivative table (G2): one entry per op of kiln/ops/op_table.h, in the same
// order, in the spirit of PyTorch's derivatives.yaml. Each entry says which tensors the
// formula reads (`saves`: only those are kept alive between forward and backward) and
// gives the formula in ordinary kiln ops, so backward is dispatched like forward.
// In-place ops use their functional op's entry. An op with neither a formula nor a
// `none` entry fails AutogradTable.EveryOpIsDifferentiableOrMarked.
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>

#include "kiln/autograd/function.h"
#include "kiln/ops/extension.h"

namespace kiln::autograd {

using ops::OpKind;

// (Y2) Sizes are read as SymInts: a dynamic batch stays symbolic through backward. A
// dim of `shape` is summed to 1 only where it is a static 1 (a symbolic size that is 1
// at run time was broadcast under a guard the forward's meta function recorded).
Tensor sum_to(const Tensor& g, const Dims& shape) {
  if (g.shape() == shape) return g;
  int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  IntList dims;
  bool inner = false;  // a dimension of `shape` itself is summed to 1
  for (int64_t i = 0; i < g.dim(); ++i) {
    bool to_one = false;
    if (i >= lead) {
      SymInt want = shape.sym(static_cast<size_t>(i - lead)), have = g.sym_size(i);
      to_one = !want.is_symbolic() && want.hint() == 1 && (have.is_symbolic() || have.hint() != 1);
    }
    if (i < lead || to_one) dims.push_back(i);
    inner = inner || to_one;
  }
  if (dims.empty()) return reshape(g, shape);  // only 1s differ
  // One op where one does: leading dimensions summed away, or inner ones kept as 1.
  if (!inner) return sum(g, dims, /*keepdim=*/false);
  Tensor r = sum(g, dims, /*keepdim=*/true);
  return lead == 0 ? r : reshape(r, shape);
}

namespace {

TensorOptions like(const GradMeta& m) { return {.dtype = m.dtype, .device = m.device}; }
Tensor zeros_for(const GradMeta& m) { return zeros(m.shape, like(m)); }

// The dimensions a reduction over `dims` (empty: all) of a rank-`rank` tensor removes,
// wrapped and sorted.
IntList reduced_dims(const IntList& dims, int64_t rank, std::string_view op) {
  IntList out;
  if (rank == 0) {  // a 0-dim input reduces nothing (dim 0 / -1 name it, as PyTorch allows)
    for (int64_t d : dims) wrap_dim(d, 1, op);
    return out;
  }
  if (dims.empty()) {
    for (int64_t i = 0; i < rank; ++i) out.push_back(i);
  } else {
    for (int64_t d : dims) out.push_back(wrap_dim(d, rank, op));
    std::sort(out.begin(), out.end());
  }
  return out;
}

// `g` of a reduction's output with the reduced dimensions put back (size 1).
Tensor keep_dims(Tensor g, const IntList& reduced, bool keepdim) {
  if (keepdim) return g;
  for (int64_t d : reduced) g = unsqueeze(g, d);
  return g;
}

// `g` of a reduction, shaped to broadcast against its rank-`rank` input: a full
// reduction's 0-d gradient broadcasts as it is (no unsqueeze per dimension; PyTorch's
// sum backward expands it directly too).
Tensor broadcastable(Tensor g, const IntList& reduced, bool keepdim, int64_t rank) {
  if (!keepdim && static_cast<int64_t>(reduced.size()) == rank) return g;
  return keep_dims(std::move(g), reduced, keepdim);
}

// Number of elements each output element of a reduction over `reduced` summed.
int64_t reduced_count(const Dims& shape, const IntList& reduced) {
  int64_t n = 1;
  for (int64_t d : reduced) n *= shape[d];
  return n;
}
// The same as a SymInt (Y2): a reduction over a dynamic batch divides by its size.
SymInt sym_reduced_count(const Dims& shape, const IntList& reduced) {
  SymInt n(1);
  for (int64_t d : reduced) n = n * shape.sym(static_cast<size_t>(d));
  return n;
}

// The normalized (trailing) dimensions of layer_norm / rms_norm.
IntList trailing_dims(int64_t rank, size_t count) {
  IntList dims;
  for (int64_t d = rank - static_cast<int64_t>(count); d < rank; ++d) dims.push_back(d);
  return dims;
}

// `g` at the region of zeros shaped like the input that a view with `g`'s shape,
// `strides` and `offset` in the zeros' dense layout picks out (the gradient of slice
// and select): one functional op, so a traced backward records `full` +
// `as_strided_scatter` rather than a write through a view that functionalization must
// take apart. A DTensor gradient is written through `make_view(zeros)` instead: views
// and copy_ have sharding rules, storage-level ops do not.
template <typename F>
Tensor into_zeros(const GradMeta& m, const Tensor& g, const Dims& strides, int64_t offset,
                  F make_view) {
  Tensor z = zeros_for(m);
  if (!g.is_dtensor()) return as_strided_scatter(z, g, ints(g.shape()), ints(strides), offset);
  Tensor region = make_view(z);
  copy_(region, g);
  return z;
}

// The last element a strided layout reaches, plus one.
int64_t extent(const Dims& shape, const Dims& strides, int64_t offset) {
  int64_t end = offset;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return offset;
    end += (shape[i] - 1) * strides[i];
  }
  return end + 1;
}

// Whether a layout reaches some storage element twice: with dims sorted by stride, each
// must step past everything the smaller ones span.
bool overlaps(const IntList& size, const IntList& stride) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (size_t i = 0; i < size.size(); ++i) {
    if (size[i] == 0) return false;
    if (size[i] > 1) dims.emplace_back(stride[i], size[i]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t span = 1;  // elements the smaller dims cover, from the first
  for (auto [st, n] : dims) {
    if (st < span) return true;
    span = st * (n - 1) + span;
  }
  return false;
}

// The storage position of every element of a layout, as an i64 tensor of `size`: one
// arange per dim, so symbolic sizes and strides (Y2) stay symbolic.
Tensor storage_positions(const Dims& size, const Dims& stride, int64_t offset, Device device) {
  TensorOptions i64{.dtype = DType::i64, .device = device};
  Tensor pos = full({}, offset, i64);
  for (size_t i = 0; i < size.size(); ++i) {
    Dims shape;
    for (size_t j = 0; j < size.size(); ++j) shape.push_back(j == i ? size.sym(i) : SymInt(1));
    SymInt step = stride.sym(i);
    Tensor steps = step.is_symbolic() ? mul(arange_of(size.sym(i), i64), size_as_tensor(step, i64))
                                      : mul(arange_of(size.sym(i), i64), step.hint());
    pos = add(pos, reshape(steps, shape));
  }
  return expand(pos, size);
}

// (Y2) The gradient of as_strided(x, size, stride, offset) where a size or stride is
// symbolic (pooling windows over a dynamic image): the gradient added at every element's
// storage position (windows that share elements add up) into a zero storage, read back at
// x's layout. Nothing is read as an integer, so the backward keeps the forward's symbols.
Tensor as_strided_grad(const Tensor& g, const Tensor& x, const Dims& size, const Dims& stride,
                       int64_t offset) {
  KILN_CHECK(x.is_contiguous(), unsupported,
             "[as_strided] backward with symbolic sizes needs a contiguous input, got {}",
             x.meta_str());
  SymInt end = offset + 1;  // one past the last element the view reaches
  for (size_t i = 0; i < size.size(); ++i) end = end + (size.sym(i) - 1) * stride.sym(i);
  SymInt n = sym_max(end, x.sym_numel() + x.offset());
  Tensor flat = zeros(sym_dims({n}), {.dtype = g.dtype(), .device = g.device()});
  Tensor pos = storage_positions(size, stride, offset, g.device());
  flat = scatter_add(flat, 0, reshape(pos, {-1}), reshape(contiguous(g), {-1}));
  return contiguous(sym_as_strided(flat, x.shape(), x.strides(), x.offset()));
}

// A dense copy of `g` whose element order is its logical order from storage offset 0.
Tensor dense(const Tensor& g) { return g.is_contiguous() && g.offset() == 0 ? g : clone(g); }

// Gradients of mm/bmm/matmul-like products a @ b: d a = g @ b^T, d b = a^T @ g.
void matmul_grads(GradCtx& c, const Tensor& a, const Tensor& b, int ia, int ib) {
  const Tensor& g = c.grad();
  // 1-D operands are a row / a column, as in the forward.
  Tensor a2 = a.dim() == 1 ? unsqueeze(a, 0) : a;
  Tensor b2 = b.dim() == 1 ? unsqueeze(b, 1) : b;
  Tensor g2 = g;
  if (a.dim() == 1) g2 = unsqueeze(g2, g2.dim() - (b.dim() == 1 ? 0 : 1));
  if (b.dim() == 1) g2 = unsqueeze(g2, g2.dim());
  // Back to the operand's shape: only a 1-D operand's gradient needs a reshape (a traced
  // backward records no view to the shape a gradient already has).
  auto shaped = [](Tensor g, const Tensor& like) {
    return g.shape() == like.shape() ? g : reshape(g, like.shape());
  };
  if (c.needs(ia)) c.set(ia, shaped(sum_to(matmul(g2, transpose(b2, -1, -2)), a2.shape()), a));
  if (c.needs(ib)) c.set(ib, shaped(sum_to(matmul(transpose(a2, -1, -2), g2), b2.shape()), b));
}

void extremum(GradCtx& c, bool is_max) {
  const Tensor &a = c.t(0), &b = c.t(1), &g = c.grad();
  Tensor split = where(eq(a, b), g / 2, g);
  Tensor a_loses = is_max ? lt(a, b) : gt(a, b);
  Tensor b_loses = is_max ? gt(a, b) : lt(a, b);
  if (c.needs(0)) c.set(0, sum_to(masked_fill(split, a_loses, 0), c.input(0).shape));
  if (c.needs(1)) c.set(1, sum_to(masked_fill(split, b_loses, 0), c.input(1).shape));
}

void extreme_value(GradCtx& c) {
  const Tensor& x = c.t(0);
  IntList dims = reduced_dims(c.args().ints(1), x.dim(), "amax");
  bool keepdim = c.args().flag(2);
  Tensor mask = to(eq(x, broadcastable(c.result(), dims, keepdim, x.dim())), x.dtype());
  Tensor count = sum(mask, dims, /*keepdim=*/true);
  c.set(0, mask * broadcastable(c.grad(), dims, keepdim, x.dim()) / count);
}

void picked(GradCtx& c) {
  const GradMeta& in = c.input(0);
  int64_t dim = wrap_dim(c.args().i64(1), static_cast<int64_t>(in.shape.size()), "max");
  IntList dims{dim};
  bool keepdim = c.args().flag(2);
  if (in.shape.size() == 0) return c.set(0, c.grad());
  Tensor idx = keep_dims(c.result(1), dims, keepdim);
  c.set(0, scatter_add(zeros_for(in), dim, idx, keep_dims(c.grad(), dims, keepdim)));
}

// sort's and topk's: the values' gradient scattered back to the indices they came from.
void sorted_back(GradCtx& c, int64_t dim) {
  const GradMeta& in = c.input(0);
  if (in.shape.size() == 0) return c.set(0, c.grad());
  dim = wrap_dim(dim, static_cast<int64_t>(in.shape.size()), "sort");
  c.set(0, scatter_add(zeros_for(in), dim, c.result(1), c.grad()));
}

// The decompositions' gradients (PyTorch's formulas). mT: the matrices transposed;
// skew(X) = X - X^T; `denominator(x)` [..., k, k] holds x_j - x_i at (i, j), and 1 on the
// diagonal, where the numerators it divides are 0.
Tensor skew(const Tensor& x) { return x - mT(x); }
Tensor denominator(const Tensor& x) {
  return unsqueeze(x, -2) - unsqueeze(x, -1) +
         eye(x.size(-1), std::nullopt, {.dtype = x.dtype(), .device = x.device()});
}

// eigh: gA = V (diag(gL) + skew(V^T gV) / 2E) V^T, E from the eigenvalues; with no
// gradient for V, V diag(gL) V^T (the general form would divide 0 by 0 at repeated
// eigenvalues).
void eigh_back(GradCtx& c) {
  const Tensor& V = c.result(1);
  Tensor inner = diag_embed(c.grad(0));
  if (c.flowed(1))
    inner = inner + skew(matmul(mT(V), c.grad(1))) / (denominator(c.result(0)) * 2.0);
  c.set(0, matmul(matmul(V, inner), mT(V)));
}

// svd, with U and Vh narrowed to k = min(m, n) vectors (full_matrices' others carry no
// gradient): gA = U (skew(U^T gU) / E S + S skew(V^T gV) / E + diag(gS)) Vh, E from the
// squared singular values, plus (I - U U^T) gU S^-1 Vh when m > k and
// U S^-1 gV^T (I - V Vh) when n > k. With only gS: U diag(gS) Vh.
void svd_back(GradCtx& c) {
  const Tensor& S = c.result(1);
  int64_t k = S.size(-1);
  Tensor U = narrow(c.result(0), -1, 0, k), Vh = narrow(c.result(2), -2, 0, k);
  if (!c.flowed(0) && !c.flowed(2)) return c.set(0, matmul(U * unsqueeze(c.grad(1), -2), Vh));
  Tensor gU = narrow(c.grad(0), -1, 0, k), gVh = narrow(c.grad(2), -2, 0, k);
  Tensor uu = matmul(mT(U), gU), vv = matmul(Vh, mT(gVh));  // U^T gU, V^T gV
  Tensor e = denominator(S * S);
  Tensor inner =
      skew(uu) / e * unsqueeze(S, -2) + unsqueeze(S, -1) * (skew(vv) / e) + diag_embed(c.grad(1));
  Tensor ga = matmul(matmul(U, inner), Vh);
  Tensor inv_s = unsqueeze(reciprocal(S), -2);
  if (U.size(-2) > k) ga = ga + matmul((gU - matmul(U, uu)) * inv_s, Vh);
  if (Vh.size(-1) > k) ga = ga + matmul(U * inv_s, gVh - matmul(mT(vv), Vh));
  c.set(0, ga);
}

// linear's gradients in ops (what linear_backward computes in one node), only those asked
// for; `bias_shape` is the bias's (a 0-dim bias of one output feature).
LinearGrads linear_composite(const Tensor& g, const Tensor& x, const Tensor& w, bool input,
                             bool weight, const Dims* bias_shape) {
  LinearGrads r;
  if (input) r.input = matmul(g, w);
  if (weight) {  // rows of a batched input flattened (2-D ones are as they are)
    Tensor g2 = g.dim() == 2 ? g : reshape(g, {-1, w.size(0)});
    Tensor x2 = x.dim() == 2 ? x : reshape(x, {-1, w.size(1)});
    r.weight = mm(t(g2), x2);
  }
  if (bias_shape) r.bias = sum_to(g, *bias_shape);
  return r;
}

// The formula of a fused backward op (input, weight and bias gradients in one node):
// leaves stand for its tensor arguments `in`, `composite` computes the three gradients
// from them in ops under autograd, and grad() of those, weighted by the node's output
// gradients, gives the vector-Jacobian product w.r.t. each of `in` (kiln has no
// create_graph: this is the last order).
TensorList composite_vjp(const GradCtx& c, const TensorList& in,
                         const std::function<WeightedGrads(const TensorList&)>& composite) {
  TensorList leaves;
  for (const Tensor& t : in) leaves.push_back(t.detach());
  for (Tensor& l : leaves) l.set_requires_grad(true);
  TensorList outs;
  {
    GradModeGuard on(true);
    WeightedGrads r = composite(leaves);
    outs = {r.input, r.weight, r.bias};
  }
  return grad(outs, leaves, {c.grad(0), c.grad(1), c.grad(2)}, false, /*allow_unused=*/true);
}

// layer_norm's gradients in ops (what layer_norm_backward computes in one pass), only
// those asked for: d input = rstd (gh - mean(gh) - xhat mean(gh xhat)) with gh = g w,
// d weight = sum over rows of g xhat, d bias = sum over rows of g.
LayerNormGrads layer_norm_composite(const Tensor& g, const Tensor& x, const Tensor* w,
                                    const IntList& norm, double eps, bool input, bool weight,
                                    bool bias) {
  IntList dims = trailing_dims(x.dim(), norm.size());
  Tensor centered = x - mean(x, dims, true);
  Tensor rstd = rsqrt(mean(centered * centered, dims, true) + eps);
  Tensor xhat = centered * rstd;
  LayerNormGrads r;
  if (weight) r.weight = sum_to(g * xhat, Dims(norm));
  if (bias) r.bias = sum_to(g, Dims(norm));
  if (input) {
    Tensor gh = w ? g * *w : g;
    r.input = rstd * (gh - mean(gh, dims, true) - xhat * mean(gh * xhat, dims, true));
  }
  return r;
}

// For prod's gradient: each element's product of the others in its reduced group, as the
// running products before it and after it (exact where x has zeros, where x's product
// over x would divide by zero).
Tensor others_product(const Tensor& x, const IntList& dims) {
  if (x.numel() == 0) return zeros_like(x);
  std::vector<bool> reduced(static_cast<size_t>(x.dim()), false);
  for (int64_t d : dims) reduced[static_cast<size_t>(d)] = true;
  IntList perm, grouped;  // kept dims first, then the reduced ones flattened into one
  int64_t n = 1;
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t d = 0; d < x.dim(); ++d)
      if (reduced[static_cast<size_t>(d)] == (pass == 1)) {
        perm.push_back(d);
        if (pass == 0)
          grouped.push_back(x.shape()[d]);
        else
          n *= x.shape()[d];
      }
  grouped.push_back(n);
  Tensor rows = reshape(permute(x, perm), grouped);
  int64_t last = rows.dim() - 1;
  Tensor one = ones_like(narrow(rows, last, 0, 1));
  auto exclusive = [&](const Tensor& r) {
    return cumprod(cat({one, narrow(r, last, 0, n - 1)}, last), last);
  };
  Tensor others = exclusive(rows) * flip(exclusive(flip(rows, {last})), {last});
  IntList permuted, inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    permuted.push_back(x.shape()[perm[i]]);
    inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  }
  return permute(reshape(others, permuted), inverse);
}

// cumprod's gradient sum_{i >= k} g_i prod_{j <= i, j != k} x_j in differentiable ops.
// Before a row's first zero z it is the reversed running sum of g * out over x. Every
// other position's gradient is linear in x_z; with x_z taken as 1 it is the gradient G'
// of the row without that zero (recursively, one level per zero), and it is G' at z and
// x_z G' after z: the value 0 there, and the right derivative w.r.t. x_z.
Tensor cumprod_gradient_in_ops(const Tensor& g, const Tensor& x, int64_t dim) {
  if (x.dim() == 0) return g;
  Tensor is_zero = x == 0.0;
  Tensor zeros_so_far = cumsum(to(is_zero, DType::i64), dim);
  Tensor before_zero = zeros_so_far == 0;
  Tensor one = ones_like(x);
  Tensor up_to_zero =
      flip(cumsum(flip(g * cumprod(x, dim), {dim}), dim), {dim}) / where(before_zero, x, one);
  if (x.is_fake() || !item<bool>(any(is_zero))) return up_to_zero;  // fake: shapes only
  Tensor first_zero = logical_and(is_zero, zeros_so_far == 1);
  Tensor without = cumprod_gradient_in_ops(g, where(first_zero, one, x), dim);
  Tensor x_z = sum(where(first_zero, x, zeros_like(x)), {dim}, /*keepdim=*/true);
  return where(before_zero, up_to_zero, where(first_zero, without, x_z * without));
}

// The most negative finite value of a floating dtype.
double lowest_finite(DType d) {
  switch (d) {
    case DType::f64: return std::numeric_limits<double>::lowest();
    case DType::f16: return -65504.0;
    case DType::bf16: return -0x1.fep127;  // float's exponent, 8 significant bits
    default: return std::numeric_limits<float>::lowest();
  }
}

constexpr uint32_t arg(int i) { return 1u << i; }
constexpr uint32_t kResult = kSavesResult;

struct Table {
  std::array<Derivative, ops::kNumOps> entries{};
  void none(OpKind op) { entries[static_cast<size_t>(op)] = {Differentiable::no, 0, nullptr}; }
  void def(OpKind op, uint32_t saves, void (*f)(GradCtx&)) {
    entries[static_cast<size_t>(op)] = {Differentiable::yes, saves, f};
  }
};

Table build() {
  Table d;
  using O = OpKind;
  // ---- factories: no inputs to differentiate ----
  for (O op : {O::empty, O::full, O::arange, O::rand, O::randn}) d.none(op);

  // ---- unary ----
  d.def(O::neg, 0, [](GradCtx& c) { c.set(0, neg(c.grad())); });
  d.def(O::abs, arg(0), [](GradCtx& c) {  // g * sgn(x)
    const Tensor& x = c.t(0);
    c.set(0, masked_fill(where(x < 0, neg(c.grad()), c.grad()), x == 0, 0));
  });
  d.def(O::relu, kResult, [](GradCtx& c) {  // one fused node, as PyTorch's
    c.set(0, threshold_backward(c.grad(), c.result(), 0));
  });
  d.def(O::exp, kResult, [](GradCtx& c) { c.set(0, c.grad() * c.result()); });
  d.def(O::log, arg(0), [](GradCtx& c) { c.set(0, c.grad() / c.t(0)); });
  d.def(O::sqrt, kResult, [](GradCtx& c) { c.set(0, c.grad() / (c.result() * 2)); });
  d.def(O::rsqrt, kResult, [](GradCtx& c) {  // -1/2 x^(-3/2) = -1/2 r^3
    const Tensor& r = c.result();
    c.set(0, c.grad() * (r * r * r) * -0.5);
  });
  d.def(O::sin, arg(0), [](GradCtx& c) { c.set(0, c.grad() * cos(c.t(0))); });
  d.def(O::cos, arg(0), [](GradCtx& c) { c.set(0, c.grad() * neg(sin(c.t(0)))); });
  d.def(O::tanh, kResult, [](GradCtx& c) {
    const Tensor& r = c.result();
    c.set(0, c.grad() * (1 - r * r));
  });
  d.def(O::sigmoid, kResult, [](GradCtx& c) {
    const Tensor& r = c.result();
    c.set(0, c.grad() * (r * (1 - r)));
  });
  d.def(O::silu, arg(0), [](GradCtx& c) {  // s (1 + x (1 - s))
    const Tensor& x = c.t(0);
    Tensor s = sigmoid(x);
    c.set(0, c.grad() * (s * (1 + x * (1 - s))));
  });
  d.def(O::gelu, arg(0),
        [](GradCtx& c) { c.set(0, gelu_backward(c.grad(), c.t(0), c.args().str(1))); });
  d.def(O::threshold_backward, arg(1), [](GradCtx& c) {  // piecewise constant in self
    if (c.needs(0))
      c.set(0, sum_to(threshold_backward(c.grad(), c.t(1), c.args().scalar(2)), c.input(0).shape));
  });
  d.def(O::gelu_backward, arg(0) | arg(1), [](GradCtx& c) {  // g gelu'(x): d/dg, d/dx
    const Tensor &g = c.t(0), &x = c.t(1), &G = c.grad();
    std::string_view approximate = c.args().str(2);
    if (c.needs(0)) c.set(0, sum_to(gelu_backward(G, x, approximate), c.input(0).shape));
    if (!c.needs(1)) return;
    Tensor second;  // gelu''(x)
    if (approximate == "tanh") {
      // d = 0.5 (1 + t) + 0.5 x s, s = (1 - t^2) u, u = k (1 + 3 a x^2), t = tanh(k (x + a x^3))
      // d' = s + 0.5 x (-2 t s u + (1 - t^2) 6 a k x)
      const double k = std::sqrt(2.0 / std::numbers::pi), a = 0.044715;
      Tensor x2 = x * x;
      Tensor t = tanh((x + x2 * x * a) * k);
      Tensor one_minus = 1 - t * t;
      Tensor u = (1 + x2 * (3 * a)) * k;
      Tensor s = one_minus * u;
      second = s + x * (t * s * u * -2.0 + one_minus * x * (6 * a * k)) * 0.5;
    } else {
      // phi(x) (2 - x^2)
      second = exp(x * x * -0.5) * (1 / std::sqrt(2 * std::numbers::pi)) * (2 - x * x);
    }
    c.set(1, sum_to(G * g * second, c.input(1).shape));
  });
  d.def(O::erf, arg(0), [](GradCtx& c) {
    const Tensor& x = c.t(0);
    c.set(0, c.grad() * (exp(neg(x * x)) * (2 / std::sqrt(std::numbers::pi))));
  });
  d.def(O::log1p, arg(0), [](GradCtx& c) { c.set(0, c.grad() / (c.t(0) + 1)); });
  d.def(O::expm1, kResult, [](GradCtx& c) { c.set(0, c.grad() * (c.result() + 1)); });
  d.def(O::log2, arg(0), [](GradCtx& c) { c.set(0, c.grad() / (c.t(0) * std::numbers::ln2)); });
  d.def(O::log10, arg(0), [](GradCtx& c) { c.set(0, c.grad() / (c.t(0) * std::numbers::ln10)); });
  d.def(O::exp2, kResult, [](GradCtx& c) { c.set(0, c.grad() * c.result() * std::numbers::ln2); });
  d.def(O::erfc, arg(0), [](GradCtx& c) {
    const Tensor& x = c.t(0);
    c.set(0, c.grad() * (exp(neg(x * x)) * (-2 / std::sqrt(std::numbers::pi))));
  });
  // d erfinv(y) = sqrt(pi) / 2 exp(erfinv(y)^2); d lgamma = digamma; d polygamma(n) =
  // polygamma(n + 1).
  d.def(O::erfinv, kResult, [](GradCtx& c) {
    c.set(0, c.grad() * (exp(c.result() * c.result()) * (std::sqrt(std::numbers::pi) / 2)));
  });
  d.def(O::lgamma, arg(0), [](GradCtx& c) { c.set(0, c.grad() * digamma(c.t(0))); });
  d.def(O::digamma, arg(0), [](GradCtx& c) { c.set(0, c.grad() * polygamma(1, c.t(0))); });
  d.def(O::polygamma, arg(0),
        [](GradCtx& c) { c.set(0, c.grad() * polygamma(c.args().i64(1) + 1, c.t(0))); });
  // The other torch.special functions: PyTorch's derivatives where it has them (i0, i0e,
  // i1, i1e, erfcx, log_ndtr; zeta and the incomplete gamma functions w.r.t. their second
  // argument); the public functions without one give outputs that need no gradient.
  d.def(O::special_unary, arg(0) | kResult, [](GradCtx& c) {
    const Tensor &x = c.t(0), &y = c.result(), &g = c.grad();
    std::string_view fn = c.args().str(1);
    auto unary = [&](const char* name) { return special_unary(x, name); };
    // i1/i1e: at x = 0 the limit 1/2; the other branch divides by 1 there, so that its own
    // gradient (create_graph) is not 0 * NaN.
    auto off_zero = [&](auto f) {
      Tensor at_zero = x == 0.0;
      return g * where(at_zero, full_like(y, 0.5), f(where(at_zero, ones_like(x), x)));
    };
    if (fn == "i0")
      c.set(0, g * unary("i1"));
    else if (fn == "i0e")
      c.set(0, g * (unary("i1e") - sign(x) * y));
    else if (fn == "i1")
      c.set(0, off_zero([&](const Tensor& safe_x) { return unary("i0") - y / safe_x; }));
    else if (fn == "i1e")
      c.set(0, off_zero([&](const Tensor& safe_x) {
              return unary("i0e") - y * (sign(x) + reciprocal(safe_x));
            }));
    else if (fn == "erfcx")
      c.set(0, g * (x * y * 2.0 - 2 / std::sqrt(std::numbers::pi)));
    else if (fn == "log_ndtr")
      c.set(0, g * exp(neg(x * x * 0.5 + y)) * (1 / std::sqrt(2 * std::numbers::pi)));
    else
      fail(ErrorKind::unsupported, "[special_unary] the derivative of {} is not implemented", fn);
  });
  d.def(O::special_binary, arg(0) | arg(1), [](GradCtx& c) {
    const Tensor &x = c.t(0), &y = c.t(1), &g = c.grad();
    std::string_view fn = c.args().str(2);
    bool incomplete = fn == "gammainc" || fn == "gammaincc";
    if (fn != "zeta" && !incomplete)
      fail(ErrorKind::unsupported, "[special_binary] the derivative of {} is not implemented", fn);
    if (c.needs(0))
      fail(ErrorKind::unsupported,
           "[special_binary] the derivative of {} w.r.t. its first argument is not implemented",
           fn);
    if (!c.needs(1)) return;
    Tensor d = incomplete ? exp((x - 1.0) * log(y) - y - lgamma(x))
                          : neg(x) * special_binary(x + 1.0, y, "zeta");
    c.set(1, sum_to(g * (fn == "gammaincc" ? neg(d) : d), c.input(1).shape));
  });
  d.def(O::asinh, arg(0), [](GradCtx& c) {
    const Tensor& x = c.t(0);
    c.set(0, c.grad() * rsqrt(x * x + 1));
  });
  d.def(O::acosh, arg(0), [](GradCtx& c) {
    const Tensor& x = c.t(0);
    c.set(0, c.grad() * rsqrt(x * x - 1));
  });
  d.def(O::atanh, arg(0), [](GradCtx& c) {
    const Tensor& x = c.t(0);
    c.set(0, c.grad() / (1 - x * x));
  });
  d.def(O::tan, kResult, [](GradCtx& c) {
    const Tensor& r = c.result();
    c.set(0, c.grad() * (1 + r * r));
  });
  d.def(O::atan, arg(0), [](GradCtx& c) {
    const Tensor& x = c.t(0);
    c.set(0, c.grad() / (1 + x * x));
  });
  d.def(O::asin, arg(0), [](GradCtx& c) {
    const Tensor& x = c.t(0);
    c.set(0, c.grad() * rsqrt(1 - x * x));
  });
  d.def(O::acos, arg(0), [](GradCtx& c) {
    const Tensor& x = c.t(0);
    c.set(0, neg(c.grad() * rsqrt(1 - x * x)));
  });
  d.def(O::sinh, arg(0), [](GradCtx& c) { c.set(0, c.grad() * cosh(c.t(0))); });
  d.def(O::cosh, arg(0), [](GradCtx& c) { c.set(0, c.grad() * sinh(c.t(0))); });
  d.def(O::reciprocal, kResult, [](GradCtx& c) {  // -1/x^2 = -r^2
    const Tensor& r = c.result();
    c.set(0, neg(c.grad() * (r * r)));
  });
  // Piecewise constant: zero almost everywhere (PyTorch's convention at the jumps too).
  for (O op : {O::floor, O::ceil, O::round, O::trunc, O::sign})
    d.def(op, 0, [](GradCtx& c) { c.set(0, zeros_like(c.grad())); });
  d.def(O::clamp, arg(0), [](GradCtx& c) {  // passes where min <= x <= max (not for NaN)
    const Tensor& x = c.t(0);
    Tensor g = c.grad();
    if (!c.args().is_none(1)) g = masked_fill(g, logical_not(ge(x, c.args().scalar(1))), 0);
    if (!c.args().is_none(2)) g = masked_fill(g, logical_not(le(x, c.args().scalar(2))), 0);
    c.set(0, g);
  });
  d.none(O::logical_not);

  // ---- binary (gradients reduced back over broadcast dimensions) ----
  d.def(O::add, 0, [](GradCtx& c) {
    const Tensor& g = c.grad();
    Scalar alpha = c.args().scalar(2);
    if (c.needs(0)) c.set(0, sum_to(g, c.input(0).shape));
    if (c.needs(1)) c.set(1, sum_to(alpha.to_double() == 1 ? g : g * alpha, c.input(1).shape));
  });
  d.def(O::sub, 0, [](GradCtx& c) {
    const Tensor& g = c.grad();
    Scalar alpha = c.args().scalar(2);
    if (c.needs(0)) c.set(0, sum_to(g, c.input(0).shape));
    if (c.needs(1)) c.set(1, sum_to(g * -alpha.to_double(), c.input(1).shape));
  });
  d.def(O::mul, arg(0) | arg(1), [](GradCtx& c) {
    if (c.needs(0)) c.set(0, sum_to(c.grad() * c.t(1), c.input(0).shape));
    if (c.needs(1)) c.set(1, sum_to(c.grad() * c.t(0), c.input(1).shape));
  });
  d.def(O::div, arg(0) | arg(1), [](GradCtx& c) {
    const Tensor &a = c.t(0), &b = c.t(1);
    if (c.needs(0)) c.set(0, sum_to(c.grad() / b, c.input(0).shape));
    if (c.needs(1)) c.set(1, sum_to(neg(c.grad()) * a / (b * b), c.input(1).shape));
  });
  d.def(O::pow, arg(0) | arg(1) | kResult, [](GradCtx& c) {
    const Tensor &x = c.t(0), &e = c.t(1);
    if (c.needs(0)) {
      // A number exponent stays a number: (1/3) - 1 in double, as Python computes it, not
      // rounded to the default dtype as two wrapped numbers in an op would be.
      Scalar v = e.is_wrapped_number() ? wrapped_value(e) : Scalar(int64_t{0});
      Tensor e1 = !e.is_wrapped_number() ? e - 1
                  : v.is_floating()      ? wrapped_number(v.to_double() - 1.0)
                                         : wrapped_number(v.to_int() - 1);
      c.set(0, sum_to(c.grad() * e * pow(x, e1), c.input(0).shape));
    }
    if (c.needs(1)) {  // x^e log x, 0 where x == 0 and e >= 0 (the limit)
      Tensor d = masked_fill(c.result() * log(x), mul(x == 0, ge(e, wrapped_number(0))), 0);
      c.set(1, sum_to(c.grad() * d, c.input(1).shape));
    }
  });
  // remainder / fmod: x - q y with q = floor(x / y) (trunc for fmod), piecewise constant.
  d.def(O::remainder, arg(0) | arg(1), [](GradCtx& c) {
    if (c.needs(0)) c.set(0, sum_to(c.grad(), c.input(0).shape));
    if (c.needs(1))
      c.set(1, sum_to(neg(c.grad()) * floor_divide(c.t(0), c.t(1)), c.input(1).shape));
  });
  d.def(O::fmod, arg(0) | arg(1), [](GradCtx& c) {
    if (c.needs(0)) c.set(0, sum_to(c.grad(), c.input(0).shape));
    if (c.needs(1))
      c.set(1, sum_to(neg(c.grad()) * div(c.t(0), c.t(1), "trunc"), c.input(1).shape));
  });
  d.none(O::floor_divide);   // PyTorch has no derivative for it either
  d.none(O::nonzero);        // integer coordinates
  d.none(O::value_as_size);  // an integer's value
  for (O op : {O::bitwise_not, O::bitwise_and, O::bitwise_or, O::bitwise_xor}) d.none(op);
  d.def(O::atan2, arg(0) | arg(1), [](GradCtx& c) {
    const Tensor &a = c.t(0), &b = c.t(1);
    Tensor k = c.grad() / (a * a + b * b);
    if (c.needs(0)) c.set(0, sum_to(k * b, c.input(0).shape));
    if (c.needs(1)) c.set(1, sum_to(neg(k) * a, c.input(1).shape));
  });
  // maximum / minimum: the larger (smaller) side takes the gradient; ties split it.
  d.def(O::maximum, arg(0) | arg(1), [](GradCtx& c) { extremum(c, true); });
  d.def(O::minimum, arg(0) | arg(1), [](GradCtx& c) { extremum(c, false); });
  for (O op : {O::eq, O::ne, O::lt, O::le, O::gt, O::ge}) d.none(op);
  d.def(O::where, arg(0), [](GradCtx& c) {
    const Tensor &cond = c.t(0), &g = c.grad();
    if (c.needs(1)) c.set(1, sum_to(masked_fill(g, logical_not(cond), 0), c.input(1).shape));
    if (c.needs(2)) c.set(2, sum_to(masked_fill(g, cond, 0), c.input(2).shape));
  });
  d.def(O::masked_fill, arg(1),
        [](GradCtx& c) { c.set(0, sum_to(masked_fill(c.grad(), c.t(1), 0), c.input(0).shape)); });

  // ---- in-place primitives (the derived in-place ops use their functional entry) ----
  d.def(O::copy_, 0, [](GradCtx& c) {  // self's old value is gone: only src gets one
    if (!c.needs(1)) return;
    const GradMeta& src = c.input(1);
    Tensor g = sum_to(c.grad(), src.shape);
    c.set(1, g.device() == src.device && g.dtype() == src.dtype
                 ? g
                 : _to_copy(g, src.dtype, src.device));
  });
  d.def(O::fill_, 0, [](GradCtx&) {});  // the old value is gone, the new one is a constant

  // ---- reductions ----
  d.def(O::sum, 0, [](GradCtx& c) {
    const GradMeta& in = c.input(0);
    IntList dims = reduced_dims(c.args().ints(1), static_cast<int64_t>(in.shape.size()), "sum");
    int64_t rank = static_cast<int64_t>(in.shape.size());
    c.set(0, expand(broadcastable(c.grad(), dims, c.args().flag(2), rank), in.shape));
  });
  d.def(O::mean, 0, [](GradCtx& c) {
    const GradMeta& in = c.input(0);
    IntList dims = reduced_dims(c.args().ints(1), static_cast<int64_t>(in.shape.size()), "mean");
    int64_t rank = static_cast<int64_t>(in.shape.size());
    SymInt count = sym_reduced_count(in.shape, dims);
    Tensor g = broadcastable(c.grad(), dims, c.args().flag(2), rank);
    g = count.is_symbolic() ? g / size_as_tensor(count, {.dtype = g.dtype(), .device = g.device()})
                            : g / static_cast<double>(count.hint());
    c.set(0, expand(g, in.shape));
  });
  // amax/amin: shared evenly between the elements equal to the extremum.
  d.def(O::amax, arg(0) | kResult, extreme_value);
  d.def(O::amin, arg(0) | kResult, extreme_value);
  // max/min along a dim: the gradient goes to the index the forward picked.
  d.def(O::max, kResult, picked);
  d.def(O::min, kResult, picked);
  d.none(O::argmax);
  // sort / topk: each value's gradient goes back to where it came from.
  d.def(O::sort, kResult, [](GradCtx& c) { sorted_back(c, c.args().i64(1)); });
  d.def(O::topk, kResult, [](GradCtx& c) { sorted_back(c, c.args().i64(2)); });
  d.def(O::linalg_eigh, kResult, eigh_back);
  d.def(O::linalg_svd, kResult, svd_back);
  d.def(O::var, arg(0), [](GradCtx& c) {  // 2 (x - mean) / (N - correction)
    const Tensor& x = c.t(0);
    IntList dims = reduced_dims(c.args().ints(1), x.dim(), "var");
    double n = static_cast<double>(reduced_count(x.shape(), dims) - c.args().i64(2));
    Tensor centered = x - mean(x, dims, /*keepdim=*/true);
    c.set(0, broadcastable(c.grad(), dims, c.args().flag(3), x.dim()) * centered * (2.0 / n));
  });
  d.def(O::prod, arg(0), [](GradCtx& c) {
    const Tensor& x = c.t(0);
    IntList dims = reduced_dims(c.args().ints(1), x.dim(), "prod");
    c.set(0, to(broadcastable(c.grad(), dims, c.args().flag(2), x.dim()) * others_product(x, dims),
                x.dtype()));
  });
  // Running sums: the gradient's running sums from the other end.
  d.def(O::cumsum, 0, [](GradCtx& c) {
    int64_t dim = c.args().i64(1);
    c.set(0, to(flip(cumsum(flip(c.grad(), {dim}), dim), {dim}), c.input(0).dtype));
  });
  d.def(O::cumprod, arg(0), [](GradCtx& c) {
    const Tensor& x = c.t(0);
    Tensor g = to(c.grad(), x.dtype());
    int64_t dim = c.args().i64(1);
    // create_graph: the same gradient in ordinary ops, differentiable again (G2)
    c.set(0, grad_enabled() ? cumprod_gradient_in_ops(g, x, dim) : cumprod_backward(g, x, dim));
  });
  // exp(x_i) sum_{k >= i} g_k exp(-out_k), in log space by the gradient's sign (so no
  // exp overflows), with logcumsumexp from the other end: differentiable again.
  d.def(O::logcumsumexp, arg(0) | kResult, [](GradCtx& c) {
    const Tensor &x = c.t(0), &out = c.result(), &g = c.grad();
    int64_t dim = c.args().i64(1);
    auto from_end = [&](const Tensor& t) { return flip(logcumsumexp(flip(t, {dim}), dim), {dim}); };
    // log|g| where g has the sign, else the dtype's lowest finite value rather than -inf:
    // -inf - -inf would make the double backward NaN (PyTorch's formula does the same).
    Tensor log_abs = log(abs(g)), floor = full_like(g, lowest_finite(g.dtype()));
    Tensor up = exp(x + from_end(where(g > 0.0, log_abs, floor) - out));
    Tensor down = exp(x + from_end(where(g < 0.0, log_abs, floor) - out));
    c.set(0, up - down);
  });
  d.def(O::cummax, kResult, [](GradCtx& c) { sorted_back(c, c.args().i64(1)); });
  d.def(O::cummin, kResult, [](GradCtx& c) { sorted_back(c, c.args().i64(1)); });
  // The fused kernel runs only outside create_graph (the cumprod formula above).
  d.none(O::cumprod_backward);
  d.def(O::softmax, kResult, [](GradCtx& c) {  // y (g - sum(g y)), one fused op
    c.set(0, softmax_backward(c.grad(), c.result(), c.args().i64(1)));
  });
  d.def(O::log_softmax, kResult, [](GradCtx& c) {  // g - exp(y) sum(g), one fused op
    c.set(0, log_softmax_backward(c.grad(), c.result(), c.args().i64(1)));
  });
  // Their gradients (double backward), G the incoming gradient:
  // y (g - s), s = sum(g y): d/dg = y (G - sum(G y)); d/dy = G (g - s) - g sum(G y).
  d.def(O::softmax_backward, arg(0) | arg(1), [](GradCtx& c) {
    const Tensor &g = c.t(0), &y = c.t(1), &G = c.grad();
    int64_t dim = c.args().i64(2);
    if (c.needs(0)) c.set(0, softmax_backward(G, y, dim));
    if (c.needs(1))
      c.set(1, G * (g - sum(g * y, {dim}, /*keepdim=*/true)) -
                   g * sum(G * y, {dim}, /*keepdim=*/true));
  });
  // g - exp(y) S, S = sum(g): d/dg = G - sum(G exp(y)); d/dy = -G exp(y) S.
  d.def(O::log_softmax_backward, arg(0) | arg(1), [](GradCtx& c) {
    const Tensor &g = c.t(0), &y = c.t(1), &G = c.grad();
    int64_t dim = c.args().i64(2);
    Tensor e = exp(y);
    if (c.needs(0)) c.set(0, G - sum(G * e, {dim}, /*keepdim=*/true));
    if (c.needs(1)) c.set(1, -(G * e * sum(g, {dim}, /*keepdim=*/true)));
  });

  // ---- linear algebra ----
  d.def(O::mm, arg(0) | arg(1), [](GradCtx& c) {
    if (c.needs(0)) c.set(0, mm(c.grad(), t(c.t(1))));
    if (c.needs(1)) c.set(1, mm(t(c.t(0)), c.grad()));
  });
  d.def(O::bmm, arg(0) | arg(1), [](GradCtx& c) {
    if (c.needs(0)) c.set(0, bmm(c.grad(), transpose(c.t(1), 1, 2)));
    if (c.needs(1)) c.set(1, bmm(transpose(c.t(0), 1, 2), c.grad()));
  });
  d.def(O::matmul, arg(0) | arg(1), [](GradCtx& c) { matmul_grads(c, c.t(0), c.t(1), 0, 1); });
  d.def(O::addmm, arg(1) | arg(2), [](GradCtx& c) {
    const Tensor& g = c.grad();
    double beta = c.args().scalar(3).to_double(), alpha = c.args().scalar(4).to_double();
    if (c.needs(0)) c.set(0, sum_to(beta == 1 ? g : g * beta, c.input(0).shape));
    if (c.needs(1)) {
      Tensor d = mm(g, t(c.t(2)));
      c.set(1, alpha == 1 ? d : d * alpha);
    }
    if (c.needs(2)) {
      Tensor d = mm(t(c.t(1)), g);
      c.set(2, alpha == 1 ? d : d * alpha);
    }
  });
  d.def(O::linear, arg(0) | arg(1), [](GradCtx& c) {  // y = x W^T + b
    const Tensor &x = c.t(0), &w = c.t(1), &g = c.grad();
    // All three asked for (a layer inside a network): one fused op, as PyTorch's
    // linear_backward (a traced backward records one node, not four). Else, and for
    // DTensors (whose ops have sharding rules), the ops asked for.
    const Dims* bias_shape = c.needs(2) ? &c.input(2).shape : nullptr;
    bool fused = c.needs(0) && c.needs(1) && bias_shape && bias_shape->size() == 1 &&
                 !g.is_dtensor() && !x.is_dtensor() && !w.is_dtensor();
    LinearGrads r = fused ? linear_backward(g, x, w)
                          : linear_composite(g, x, w, c.needs(0), c.needs(1), bias_shape);
    c.set(0, r.input);
    c.set(1, r.weight);
    c.set(2, r.bias);
  });
  d.def(O::linear_backward, arg(0) | arg(1) | arg(2), [](GradCtx& c) {
    Dims bias_shape{c.t(2).size(0)};
    TensorList d = composite_vjp(c, {c.t(0), c.t(1), c.t(2)}, [&](const TensorList& l) {
      return linear_composite(l[0], l[1], l[2], true, true, &bias_shape);
    });
    for (size_t i = 0; i < d.size(); ++i)
      if (d[i].defined()) c.set(static_cast<int>(i), d[i]);
  });

  // Note [Convolution's gradients] (kiln/api/convolution.cpp): d input a transposed
  // convolution of the gradient, d weight the gradient times the input's windows.
  d.def(O::convolution, arg(0) | arg(1), [](GradCtx& c) {
    const Tensor &x = c.t(0), &w = c.t(1), &g = c.grad();
    Args a = c.args();
    const IntList &stride = a.ints(3), &padding = a.ints(4), &dilation = a.ints(5);
    int64_t groups = a.i64(6);
    if (c.needs(0)) {
      IntList output_padding;  // what gives back the input's size where stride drops a tail
      for (size_t i = 0; i < stride.size(); ++i) {
        auto d = static_cast<int64_t>(i) + 2;
        output_padding.push_back(x.size(d) + 2 * padding[i] - (g.size(d) - 1) * stride[i] -
                                 dilation[i] * (w.size(d) - 1) - 1);
      }
      c.set(0, conv_transpose(g, w, Tensor(), stride, padding, output_padding, groups, dilation));
    }
    if (c.needs(1))
      c.set(1, convolution_weight_grad(g, x, ints(w.shape()), stride, padding, dilation, groups));
    if (c.needs(2)) {
      IntList dims{0};
      for (int64_t d = 2; d < g.dim(); ++d) dims.push_back(d);
      c.set(2, sum(g, dims));
    }
  });

  // ---- views: the gradient is the inverse view of the gradient ----
  d.def(O::view, 0, [](GradCtx& c) { c.set(0, reshape(c.grad(), c.input(0).shape)); });
  d.def(O::permute, 0, [](GradCtx& c) {
    const IntList& dims = c.args().ints(1);
    int64_t rank = static_cast<int64_t>(dims.size());
    IntList inverse(dims.size());
    for (int64_t i = 0; i < rank; ++i) inverse[wrap_dim(dims[i], rank, "permute")] = i;
    c.set(0, permute(c.grad(), inverse));
  });
  d.def(O::transpose, 0,
        [](GradCtx& c) { c.set(0, transpose(c.grad(), c.args().i64(1), c.args().i64(2))); });
  d.def(O::unsqueeze, 0, [](GradCtx& c) { c.set(0, reshape(c.grad(), c.input(0).shape)); });
  d.def(O::squeeze, 0, [](GradCtx& c) { c.set(0, reshape(c.grad(), c.input(0).shape)); });
  d.def(O::alias, 0, [](GradCtx& c) { c.set(0, c.grad()); });
  d.def(O::expand, 0, [](GradCtx& c) { c.set(0, sum_to(c.grad(), c.input(0).shape)); });
  d.def(O::slice, 0, [](GradCtx& c) {
    Args a = c.args();
    const GradMeta& in = c.input(0);
    int64_t d = wrap_dim(a.i64(1), static_cast<int64_t>(in.shape.size()), "slice");
    int64_t size = in.shape[d];
    int64_t start = a.is_none(2) ? 0 : a.i64(2);  // normalized as the forward's meta does
    if (start < 0) start += size;
    start = std::clamp<int64_t>(start, 0, size);
    Dims strides = contiguous_strides(in.shape);
    int64_t offset = start * strides[d];
    strides[d] *= a.i64(4);
    c.set(0, into_zeros(in, c.grad(), strides, offset, [&](const Tensor& z) {
            return slice(z, a.i64(1), a.is_none(2) ? std::nullopt : std::optional(a.i64(2)),
                         a.is_none(3) ? std::nullopt : std::optional(a.i64(3)), a.i64(4));
          }));
  });
  d.def(O::select, 0, [](GradCtx& c) {
    Args a = c.args();
    const GradMeta& in = c.input(0);
    int64_t d = wrap_dim(a.i64(1), static_cast<int64_t>(in.shape.size()), "select");
    int64_t index = a.i64(2);
    if (index < 0) index += in.shape[d];
    Dims strides = contiguous_strides(in.shape);
    int64_t offset = index * strides[d];
    strides.erase(d);
    c.set(0, into_zeros(in, c.grad(), strides, offset,
                        [&](const Tensor& z) { return select(z, a.i64(1), a.i64(2)); }));
  });
  // Through the storage: scatter the gradient into a zero storage at the output's
  // layout, read it back at the input's. Self-overlapping layouts would need sums there.
  d.def(O::as_strided, arg(0), [](GradCtx& c) {
    const Tensor& x = c.t(0);
    Args a = c.args();
    int64_t offset = a.is_none(3) ? x.offset() : a.i64(3);
    if (Dims sym_size = a.sizes(1), sym_stride = a.sizes(2);
        sym_size.is_symbolic() || sym_stride.is_symbolic() || x.shape().is_symbolic()) {
      c.set(0, as_strided_grad(c.grad(), x, sym_size, sym_stride, offset));
      return;
    }
    const IntList &size = a.ints(1), &stride = a.ints(2);
    KILN_CHECK(!overlaps(ints(x.shape()), ints(x.strides())), unsupported,
               "[as_strided] backward through an input whose layout holds an element twice "
               "(an expanded tensor, say) is not supported; clone it first");
    int64_t n = std::max(extent(Dims(size), Dims(stride), offset),
                         extent(x.shape(), x.strides(), x.offset()));
    Tensor flat = zeros({n}, {.dtype = c.grad().dtype(), .device = c.grad().device()});
    if (overlaps(size, stride)) {  // windows that share elements: their gradients add up
      Tensor pos = storage_positions(Dims(size), Dims(stride), offset, flat.device());
      flat = scatter_add(flat, 0, reshape(pos, {-1}), reshape(c.grad(), {-1}));
    } else {
      flat = as_strided_scatter(flat, contiguous(c.grad()), size, stride, offset);
    }
    c.set(0, contiguous(as_strided(flat, ints(x.shape()), ints(x.strides()), x.offset())));
  });
  d.def(O::as_strided_scatter, 0, [](GradCtx& c) {
    Args a = c.args();
    const IntList &size = a.ints(2), &stride = a.ints(3);
    std::optional<int64_t> offset = a.is_none(4) ? std::nullopt : std::optional(a.i64(4));
    Tensor g = dense(c.grad());
    if (c.needs(0))
      c.set(0, as_strided_scatter(g, zeros(size, {.dtype = g.dtype(), .device = g.device()}), size,
                                  stride, offset));
    if (c.needs(1)) c.set(1, contiguous(as_strided(g, size, stride, offset)));
  });

  // ---- data movement ----
  d.def(O::cat, 0, [](GradCtx& c) {
    const Tensor& g = c.grad();
    int64_t dim = wrap_dim(c.args().i64(1), g.dim(), "cat");
    int64_t at = 0;
    const std::vector<Dims>& shapes = c.list_shapes();
    for (size_t j = 0; j < shapes.size(); ++j) {
      const Dims& s = shapes[j];
      if (s.size() == 1 && s[0] == 0 && g.dim() != 1) continue;  // a skipped legacy [0]
      c.set(0, narrow(g, dim, at, s[static_cast<size_t>(dim)]), static_cast<int>(j));
      at += s[static_cast<size_t>(dim)];
    }
  });
  d.def(O::index_select, arg(2), [](GradCtx& c) {
    const GradMeta& in = c.input(0);
    const Tensor& g = c.grad();
    int64_t dim = wrap_dim(c.args().i64(1), g.dim(), "index_select");
    if (g.dim() == 0) return c.set(0, reshape(g, in.shape));
    IntList along(static_cast<size_t>(g.dim()), 1);
    along[static_cast<size_t>(dim)] = g.size(dim);
    Tensor idx = expand(reshape(to(c.t(2), g.device(), DType::i64), along), g.shape());  // i32 too
    c.set(0, scatter_add(zeros_for(in), dim, idx, g));
  });
  d.def(O::gather, arg(2), [](GradCtx& c) {
    int64_t dim = c.args().i64(1);
    c.set(0, scatter_add(zeros_for(c.input(0)), dim, to(c.t(2), c.grad().device()), c.grad()));
  });
  d.def(O::embedding, arg(1), [](GradCtx& c) {
    const GradMeta& w = c.input(0);
    int64_t d = w.shape[1];
    Tensor g2 = reshape(c.grad(), {-1, d});
    Tensor idx =
        expand(reshape(to(c.t(1), g2.device(), DType::i64), {-1, 1}), g2.shape());  // i32 too
    c.set(0, scatter_add(zeros_for(w), 0, idx, g2));
  });
  d.def(O::scatter_add, arg(2), [](GradCtx& c) {
    c.set(0, c.grad());
    if (!c.needs(3)) return;
    // src positions the index does not reach got added nowhere: their gradient is 0.
    const Tensor& index = c.t(2);
    Tensor picked = gather(c.grad(), c.args().i64(1), index);
    const GradMeta& src = c.input(3);
    c.set(3, picked.shape() == src.shape
                 ? picked
                 : into_zeros(src, picked, contiguous_strides(src.shape), 0, [&](Tensor z) {
                     for (int64_t d = 0; d < z.dim(); ++d) z = narrow(z, d, 0, index.size(d));
                     return z;
                   }));
  });
  d.def(O::clone, 0, [](GradCtx& c) { c.set(0, c.grad()); });

  // ---- normalization (statistics recomputed from the saved input) ----
  d.def(O::layer_norm, arg(0) | arg(2), [](GradCtx& c) {
    const Tensor &x = c.t(0), &g = c.grad();
    Args a = c.args();
    const Tensor* w = a.opt_tensor_ptr(2);
    // One fused op (a traced backward records one node, as PyTorch's
    // native_layer_norm_backward); DTensors take the composite form, whose ops have
    // sharding rules.
    LayerNormGrads r =
        g.is_dtensor() || x.is_dtensor()
            ? layer_norm_composite(g, x, w, a.ints(1), a.f64(4), c.needs(0), c.needs(2), c.needs(3))
            : layer_norm_backward(g, x, a.ints(1), w ? *w : Tensor(), a.f64(4));
    c.set(0, r.input);
    c.set(2, r.weight);
    c.set(3, r.bias);
  });
  d.def(O::layer_norm_backward, arg(0) | arg(1) | arg(3), [](GradCtx& c) {
    Args a = c.args();
    const Tensor* w = a.opt_tensor_ptr(3);
    TensorList in = {c.t(0), c.t(1)};
    if (w) in.push_back(*w);
    TensorList d = composite_vjp(c, in, [&](const TensorList& l) {
      return layer_norm_composite(l[0], l[1], w ? &l[2] : nullptr, a.ints(2), a.f64(4), true, true,
                                  true);
    });
    for (size_t i = 0; i < d.size(); ++i)
      if (d[i].defined()) c.set(i == 2 ? 3 : static_cast<int>(i), d[i]);
  });
  d.def(O::rms_norm, arg(0) | arg(2), [](GradCtx& c) {
    const Tensor &x = c.t(0), &g = c.grad();
    Args a = c.args();
    const Tensor* w = a.opt_tensor_ptr(2);
    IntList dims = trailing_dims(x.dim(), a.ints(1).size());
    double eps = !a.is_none(3)             ? a.f64(3)
                 : x.dtype() == DType::f64 ? std::numeric_limits<double>::epsilon()
                                           : std::numeric_limits<float>::epsilon();
    Tensor rr = rsqrt(mean(x * x, dims, true) + eps);
    if (c.needs(2)) c.set(2, sum_to(g * (x * rr), c.input(2).shape));
    if (c.needs(0)) {
      Tensor gh = w ? g * *w : g;
      c.set(0, rr * (gh - x * (rr * rr) * mean(gh * x, dims, true)));
    }
  });

  // ---- collectives (SPMD: every rank runs the same backward) ----
  d.def(O::all_reduce, 0, [](GradCtx& c) {  // y = sum_r x_r on every rank: dx = sum_r dy_r
    std::string_view op = c.args().str(1);
    KILN_CHECK(op == "sum" || op == "avg", unsupported,
               "[AllReduceBackward0] an all_reduce({}) has no gradient (sum and avg do)", op);
    c.set(0, all_reduce(c.grad(), op, c.args().str(2)));
  });
  d.def(O::all_gather_into_tensor, 0, [](GradCtx& c) {
    c.set(0, reduce_scatter_tensor(c.grad(), "sum", c.args().i64(1), c.args().str(2)));
  });
  d.def(O::reduce_scatter_tensor, 0, [](GradCtx& c) {
    std::string_view op = c.args().str(1);
    KILN_CHECK(
        op == "sum" || op == "avg", unsupported,
        "[ReduceScatterTensorBackward0] a reduce_scatter({}) has no gradient (sum and avg do)", op);
    int64_t n = c.args().i64(2);
    Tensor g = all_gather_into_tensor(c.grad(), n, c.args().str(3));
    c.set(0, op == "avg" ? g / static_cast<double>(n) : g);
  });
  d.def(O::all_to_all_single, 0, [](GradCtx& c) {
    c.set(0, all_to_all_single(c.grad(), c.args().i64(1), c.args().str(2)));
  });
  d.def(O::wait_tensor, 0, [](GradCtx& c) { c.set(0, c.grad()); });
  d.none(O::broadcast);  // as PyTorch's functional broadcast: no gradient
  d.def(O::all_to_all_single_v, 0, [](GradCtx& c) {  // the rows go back the way they came
    const auto& a = c.args();
    c.set(0, all_to_all_single(c.grad(), a.ints(2), a.ints(1), a.str(3)));
  });

  // ---- conversion: the gradient goes back to the source's device and dtype ----
  d.def(O::_to_copy, 0, [](GradCtx& c) {
    const GradMeta& in = c.input(0);
    c.set(0, _to_copy(c.grad(), in.dtype, in.device));
  });
  return d;
}

const Table& table() {
  static const Table t = build();
  return t;
}

}  // namespace

Derivative derivative(OpKind op) {
  const ops::OpInfo& info = ops::op_info(op);
  OpKind f = info.meta ? op : info.functional;
  if (ops::is_builtin(f)) [[likely]]
    return table().entries[static_cast<size_t>(f)];
  const ops::ExtensionOp& e = *ops::extension_op(f);  // its registration (E1)
  using Grad = ops::ExtensionOp::Grad;
  switch (e.grad) {
    case Grad::missing: return {};
    case Grad::none: return {Differentiable::no, 0, nullptr};
    case Grad::formula: return {Differentiable::yes, e.grad_saves, e.grad_formula};
  }
  return {};
}

Differentiable differentiability(OpKind op) { return derivative(op).kind; }

}  // namespace kiln::autograd

#include "kiln/ops/meta.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kiln/ops/meta_util.h"
#include "kiln/ops/special_names.h"

namespace kiln::ops {

namespace {

void check_floating(const OpCall& c, DType d) {
  KILN_CHECK(is_floating(d), dtype, "[{}] expected a floating point tensor, got {}", name_of(c), d);
}

void check_same_dtype(const OpCall& c, const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dtype() == b.dtype(), dtype,
             "[{}] expected both operands to have the same dtype, but got {} and {}", name_of(c),
             a.dtype(), b.dtype());
}

// A fill value must be representable in the tensor's dtype (PyTorch's overflow check):
// NaN, inf or an out-of-range number for an integer dtype, or a finite number past a
// floating dtype's range, is an error instead of an undefined conversion. As in PyTorch,
// an integer may be negative for u8 down to -255 (it wraps: `fill_(-1)` gives 255).
void check_fits(std::string_view op, const Scalar& v, DType d) {
  bool ok = true;
  if (is_integral(d, false)) {
    int bits = static_cast<int>(itemsize(d)) * 8;
    bool is_unsigned = d == DType::u8;
    // [lo, hi] as doubles are exact: -2^(bits-1) .. 2^(bits-1) - 1, or 0 .. 2^bits - 1 for u8.
    double hi = (is_unsigned ? std::ldexp(1.0, bits) : std::ldexp(1.0, bits - 1)) - 1;
    double lo = is_unsigned ? 0.0 : -std::ldexp(1.0, bits - 1);
    if (v.is_floating()) {
      double x = v.to_double();
      ok = x >= lo && (bits == 64 ? x < -lo : x <= hi);  // NaN fails
    } else {
      int64_t i = v.to_int();  // within int64, so a comparison in double is exact at the bounds
      if (is_unsigned) lo = -hi;
      ok = bits == 64 || (static_cast<double>(i) >= lo && static_cast<double>(i) <= hi);
    }
  } else if (is_floating(d) && d != DType::f64 && v.is_floating() && std::isfinite(v.to_double())) {
    double max = d == DType::f16 ? 65504.0 : d == DType::bf16 ? 0x1.fep127 : 0x1.fffffep127;
    ok = std::abs(v.to_double()) <= max;
  }
  KILN_CHECK(ok, value, "[{}] value {} cannot be converted to type {} without overflow", op,
             v.str(), d);
}

void self_out(MetaOut& out, const Tensor& self) {
  TensorMeta m;
  m.shape = self.shape();
  m.strides = self.strides();
  m.offset = self.sym_offset();
  m.dtype = self.dtype();
  m.alias = TensorMeta::Alias::self;
  out.outs.push_back(std::move(m));
}

}  // namespace

Dims broadcast_shapes(const Dims& a, const Dims& b, std::string_view op) {
  if (a == b) return a;  // the common case: nothing to broadcast
  if (a.is_symbolic() || b.is_symbolic()) [[unlikely]]
    return broadcast_symbolic(a, b, op);
  size_t n = std::max(a.size(), b.size());
  Dims out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    KILN_CHECK(da == db || da == 1 || db == 1, shape,
               "[{}] The size of tensor a ({}) must match the size of tensor b ({}) at "
               "non-singleton dimension {} (shapes {} and {})",
               op, da, db, i, a.str(), b.str());
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Dims broadcast_symbolic(const Dims& a, const Dims& b, std::string_view op) {
  size_t n = std::max(a.size(), b.size());
  Dims out(n);
  for (size_t i = 0; i < n; ++i) {
    SymInt da = i < n - a.size() ? SymInt(1) : a.sym(i - (n - a.size()));
    SymInt db = i < n - b.size() ? SymInt(1) : b.sym(i - (n - b.size()));
    // Sizes known alike need no decision; otherwise the order of the questions is
    // PyTorch's: is b 1, is a 1, else they must be equal (each a guard on symbols, Y2).
    if (da.same_as(db) || db.same_as(1))
      out.set(i, da);
    else if (da.same_as(1))
      out.set(i, db);
    else if (db == 1)
      out.set(i, da);
    else if (da == 1)
      out.set(i, db);
    else {
      KILN_CHECK(da == db, shape,
                 "[{}] The size of tensor a ({}) must match the size of tensor b ({}) at "
                 "non-singleton dimension {} (shapes {} and {})",
                 op, da.str(), db.str(), i, a.str(), b.str());
      out.set(i, da.is_symbolic() ? da : db);
    }
  }
  return out;
}

namespace {
void add_operand(ResultType& rt, const Tensor& t) {
  auto rank = t.is_wrapped_number() ? ResultType::wrapped
              : t.dim() == 0        ? ResultType::zero_dim
                                    : ResultType::dim;
  rt.add(t.dtype(), rank);
}
}  // namespace

DType result_type(std::span<const Tensor> tensors) {
  ResultType rt;
  for (const Tensor& t : tensors) add_operand(rt, t);
  return rt.result();
}

DType result_type(const Tensor& a, const Tensor& b) {
  if (a.dtype() == b.dtype()) return a.dtype();
  ResultType rt;
  add_operand(rt, a);
  add_operand(rt, b);
  return rt.result();
}

bool can_cast(DType from, DType to) {
  if (is_floating(from) && is_integral(to, true)) return false;
  if (from != DType::b8 && to == DType::b8) return false;
  return true;
}

ReduceDims reduce_dims(const Dims& shape, const IntList& dims, bool keepdim, std::string_view op) {
  ReduceDims r;
  int64_t rank = static_cast<int64_t>(shape.size());
  KILN_CHECK(rank <= 64, shape, "[{}] only tensors with up to 64 dims are supported, got {}", op,
             rank);
  r.reduced.assign(shape.size(), dims.empty());
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, rank, op);
    if (rank == 0) continue;
    KILN_CHECK(!r.reduced[w], value, "[{}] dim {} appears multiple times in the list of dims", op,
               w);
    r.reduced[w] = true;
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    if (!r.reduced[i])
      r.out_shape.push_back(shape.sym(i));
    else if (keepdim)
      r.out_shape.push_back(int64_t{1});
  }
  return r;
}

Dims matmul_shape(const Dims& a, const Dims& b) {
  KILN_CHECK(!a.empty() && !b.empty(), shape,
             "[matmul] both arguments to matmul need to be at least 1D, but they are {}D and {}D",
             a.size(), b.size());
  if (!a.is_symbolic() && !b.is_symbolic()) [[likely]] {
    int64_t k_a = a.back();
    int64_t k_b = b.size() == 1 ? b[0] : b[b.size() - 2];
    KILN_CHECK(k_a == k_b, shape, "[matmul] mat1 and mat2 shapes cannot be multiplied ({} and {})",
               a.str(), b.str());
    Dims batch_a, batch_b;
    for (size_t i = 0; i + 2 < a.size(); ++i) batch_a.push_back(a[i]);
    for (size_t i = 0; i + 2 < b.size(); ++i) batch_b.push_back(b[i]);
    Dims out = broadcast_shapes(batch_a, batch_b, "matmul");
    if (a.size() >= 2) out.push_back(a[a.size() - 2]);
    if (b.size() >= 2) out.push_back(b.back());
    return out;
  }
  SymInt k_a = a.sym(a.size() - 1);
  SymInt k_b = b.size() == 1 ? b.sym(0) : b.sym(b.size() - 2);
  KILN_CHECK(k_a.same_as(k_b) || k_a == k_b, shape,
             "[matmul] mat1 and mat2 shapes cannot be multiplied ({} and {})", a.str(), b.str());
  Dims batch_a, batch_b;
  for (size_t i = 0; i + 2 < a.size(); ++i) batch_a.push_back(a.sym(i));
  for (size_t i = 0; i + 2 < b.size(); ++i) batch_b.push_back(b.sym(i));
  Dims out = broadcast_shapes(batch_a, batch_b, "matmul");
  if (a.size() >= 2) out.push_back(a.sym(a.size() - 2));
  if (b.size() >= 2) out.push_back(b.sym(b.size() - 1));
  return out;
}

// ---- factories ----------------------------------------------------------------

void meta_factory(const OpCall& c, MetaOut& out) {
  Dims size = c.args.sizes(0);  // (Y1) may be symbolic
  for (int64_t s : size.hints())
    KILN_CHECK(s >= 0, shape, "[{}] negative dimension {} in size {}", name_of(c), s, size.str());
  DType dtype = c.args.dtype(c.args.size() - 2);
  if (c.op == OpKind::full) check_fits("full", c.args.scalar(1), dtype);
  if (c.op == OpKind::rand || c.op == OpKind::randn)
    KILN_CHECK(is_floating(dtype), dtype, "[{}] needs a floating point dtype, got {}", name_of(c),
               dtype);
  out.fresh(std::move(size), dtype);
}

void meta_arange(const OpCall& c, MetaOut& out) {
  double start = c.args.scalar(0).to_double(), end = c.args.scalar(1).to_double(),
         step = c.args.scalar(2).to_double();
  DType dtype = c.args.dtype(3);
  KILN_CHECK(std::isfinite(start) && std::isfinite(end), value,
             "[arange] unsupported range: {} -> {}", start, end);
  // An integer output takes start, end and step as integers first (truncated, as
  // PyTorch's int64 accumulation): arange(0.5, 5, 1.5, dtype=i64) is 0..4 in steps of 1.
  // Only an i64 output also counts its elements from the truncated bounds.
  bool integral = is_integral(dtype, false);
  double xstart = integral ? std::trunc(start) : start, xend = integral ? std::trunc(end) : end,
         xstep = integral ? std::trunc(step) : step;
  KILN_CHECK(xstep != 0, value, "[arange] step must be nonzero");
  KILN_CHECK((xstep > 0 && xend >= xstart) || (xstep < 0 && xend <= xstart), value,
             "[arange] upper bound and larger bound inconsistent with step sign (start {}, end {}, "
             "step {})",
             start, end, step);
  double count =
      dtype == DType::i64 ? std::ceil((xend - xstart) / xstep) : std::ceil((end - start) / step);
  KILN_CHECK(count < 0x1p63, shape,
             "[arange] the range {} -> {} with step {} has more elements than int64 can hold",
             start, end, step);
  out.fresh(Dims{static_cast<int64_t>(std::max(count, 0.0))}, dtype);
}

// ---- elementwise --------------------------------------------------------------

void meta_unary(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  KILN_CHECK(!(c.op == OpKind::neg && self.dtype() == DType::b8), dtype,
             "[neg] negation on a bool tensor is not supported; use logical_not");
  KILN_CHECK(!(c.op == OpKind::relu && self.dtype() == DType::b8), dtype,
             "[relu] does not support bool inputs");
  bool rounding = c.op == OpKind::floor || c.op == OpKind::ceil || c.op == OpKind::round ||
                  c.op == OpKind::trunc;
  KILN_CHECK(!(rounding && self.dtype() == DType::b8), dtype, "[{}] does not support bool inputs",
             c.op);
  out.fresh(self.shape(), self.dtype());  // rounding an integer tensor is the identity
}

void meta_unary_float(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  if (c.op == OpKind::gelu)
    KILN_CHECK(c.args.str(1) == "none" || c.args.str(1) == "tanh", value,
               "[gelu] approximate must be 'none' or 'tanh', got '{}'", c.args.str(1));
  if (c.op == OpKind::polygamma)
    KILN_CHECK(c.args.i64(1) >= 0, value, "[polygamma] n must be >= 0, got {}", c.args.i64(1));
  if (c.op == OpKind::special_unary)
    KILN_CHECK(special_code(c.args.str(1), false) >= 0, value,
               "[special_unary] unknown function '{}'", c.args.str(1));
  out.fresh(self.shape(), is_floating(self.dtype()) ? self.dtype() : DType::f32);
}

void meta_unary_bool(const OpCall& c, MetaOut& out) {
  out.fresh(c.args.tensor(0).shape(), DType::b8);
}

// clamp(self, min, max): self's dtype promoted with the bounds as numbers (an integer
// tensor clamped to a float bound is float, as torch.clamp); each bound must fit it.
void meta_clamp(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  KILN_CHECK(!c.args.is_none(1) || !c.args.is_none(2), value,
             "[clamp] at least one of 'min' or 'max' must not be None");
  ResultType rt;
  add_operand(rt, self);
  for (size_t i : {size_t{1}, size_t{2}})
    if (!c.args.is_none(i)) rt.add(c.args.scalar(i).dtype(), ResultType::wrapped);
  DType dtype = rt.result();
  for (size_t i : {size_t{1}, size_t{2}})
    if (!c.args.is_none(i)) check_fits("clamp", c.args.scalar(i), dtype);
  out.fresh(self.shape(), dtype);
}

void meta_binary(const OpCall& c, MetaOut& out) {
  const Tensor& a = c.args.tensor(0);
  const Tensor& b = c.args.tensor(1);
  DType dtype = result_type(a, b);
  if (c.op == OpKind::sub)
    KILN_CHECK(!(a.dtype() == DType::b8 && b.dtype() == DType::b8), dtype,
               "[sub] subtraction with two bool tensors is not supported; use logical_xor");
  if (c.op == OpKind::remainder || c.op == OpKind::fmod || c.op == OpKind::floor_divide)
    KILN_CHECK(dtype != DType::b8, dtype, "[{}] is not defined for bool tensors", name_of(c));
  if ((c.op == OpKind::add || c.op == OpKind::sub) && is_integral(dtype, true))
    KILN_CHECK(!c.args.scalar(2).is_floating(), dtype,
               "[{}] for integral input tensors, argument alpha must not be a floating point "
               "number",
               name_of(c));
  out.fresh(broadcast_shapes(a.shape(), b.shape(), name_of(c)), dtype);
}

void meta_binary_float(const OpCall& c, MetaOut& out) {
  const Tensor& a = c.args.tensor(0);
  const Tensor& b = c.args.tensor(1);
  if (c.op == OpKind::special_binary)
    KILN_CHECK(special_code(c.args.str(2), true) >= 0, value,
               "[special_binary] unknown function '{}'", c.args.str(2));
  DType dtype = result_type(a, b);
  out.fresh(broadcast_shapes(a.shape(), b.shape(), name_of(c)),
            is_floating(dtype) ? dtype : DType::f32);
}

void meta_compare(const OpCall& c, MetaOut& out) {
  out.fresh(broadcast_shapes(c.args.tensor(0).shape(), c.args.tensor(1).shape(), name_of(c)),
            DType::b8);
}

void meta_where(const OpCall& c, MetaOut& out) {
  const Tensor& cond = c.args.tensor(0);
  KILN_CHECK(cond.dtype() == DType::b8, dtype,
             "[where] expected condition to be a bool tensor, but got {}", cond.dtype());
  const Tensor& a = c.args.tensor(1);
  const Tensor& b = c.args.tensor(2);
  Dims shape = broadcast_shapes(cond.shape(), a.shape(), "where");
  out.fresh(broadcast_shapes(shape, b.shape(), "where"), result_type(a, b));
}

void meta_masked_fill(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  const Tensor& mask = c.args.tensor(1);
  KILN_CHECK(mask.dtype() == DType::b8, dtype,
             "[masked_fill] expected mask to be a bool tensor, but got {}", mask.dtype());
  out.fresh(broadcast_shapes(self.shape(), mask.shape(), "masked_fill"), self.dtype());
}

void meta_copy_(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  const Tensor& src = c.args.tensor(1);
  KILN_CHECK(broadcast_shapes(self.shape(), src.shape(), "copy_") == self.shape(), shape,
             "[copy_] source of shape {} cannot be broadcast to destination of shape {}",
             src.shape().str(), self.shape().str());
  self_out(out, self);
}

void meta_fill_(const OpCall& c, MetaOut& out) {
  check_fits("fill_", c.args.scalar(1), c.args.tensor(0).dtype());
  self_out(out, c.args.tensor(0));
}

// ---- reductions ---------------------------------------------------------------

namespace {
void check_nonempty_reduce(const OpCall& c, const Tensor& self, const ReduceDims& r) {
  for (size_t i = 0; i < r.reduced.size(); ++i)
    KILN_CHECK(!r.reduced[i] || self.shape().sym(i) > 0, shape,
               "[{}] expected reduction dim {} to have non-zero size", name_of(c), i);
  KILN_CHECK(self.dim() > 0 || self.numel() > 0, shape, "[{}] empty input", name_of(c));
}
}  // namespace

void meta_sum(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  auto r = reduce_dims(self.shape(), c.args.ints(1), c.args.flag(2), name_of(c));
  // Integers and bools sum (multiply) into i64 unless a dtype is given (as torch.sum).
  DType dtype = c.args.is_none(3) ? self.dtype() : c.args.dtype(3);
  if (c.args.is_none(3) && is_integral(dtype, true)) dtype = DType::i64;
  out.fresh(std::move(r.out_shape), dtype);
}

void meta_mean(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  auto r = reduce_dims(self.shape(), c.args.ints(1), c.args.flag(2), "mean");
  DType dtype = c.args.is_none(3) ? self.dtype() : c.args.dtype(3);
  KILN_CHECK(is_floating(dtype), dtype,
             "[mean] could not infer output dtype: input dtype must be floating point, got {}",
             dtype);
  out.fresh(std::move(r.out_shape), dtype);
}

void meta_amax(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  auto r = reduce_dims(self.shape(), c.args.ints(1), c.args.flag(2), name_of(c));
  check_nonempty_reduce(c, self, r);
  out.fresh(std::move(r.out_shape), self.dtype());
}

void meta_max_dim(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  auto r = reduce_dims(self.shape(), {c.args.i64(1)}, c.args.flag(2), name_of(c));
  check_nonempty_reduce(c, self, r);
  out.fresh(r.out_shape, self.dtype());
  out.fresh(std::move(r.out_shape), DType::i64);
}

void meta_argmax(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  IntList dims;
  if (!c.args.is_none(1)) dims.push_back(c.args.i64(1));
  auto r = reduce_dims(self.shape(), dims, c.args.flag(2), "argmax");
  check_nonempty_reduce(c, self, r);
  out.fresh(std::move(r.out_shape), DType::i64);
}

void meta_var(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  check_floating(c, self.dtype());
  auto r = reduce_dims(self.shape(), c.args.ints(1), c.args.flag(3), "var");
  out.fresh(std::move(r.out_shape), self.dtype());
}

void meta_softmax(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  wrap_dim(c.args.i64(1), self.dim(), name_of(c));
  check_floating(c, self.dtype());
  out.fresh(self.shape(), self.dtype());
}

// sort(self, dim, descending, stable): values like self and their i64 indices.
void meta_sort(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  wrap_dim(c.args.i64(1), self.dim(), name_of(c));
  out.fresh(self.shape(), self.dtype());
  out.fresh(self.shape(), DType::i64);
}

// topk(self, k, dim, largest, sorted): dim `dim` cut to k (a 0-dim self stays 0-dim).
void meta_topk(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  int64_t d = wrap_dim(c.args.i64(2), self.dim(), name_of(c));
  int64_t k = c.args.i64(1);
  int64_t size = self.dim() ? self.shape()[d] : 1;
  KILN_CHECK(k >= 0 && k <= size, index,
             "[topk] selected index k = {} is out of range for dim {} of size {}", k, d, size);
  Dims shape = self.shape();
  if (self.dim()) shape[d] = k;
  out.fresh(shape, self.dtype());
  out.fresh(std::move(shape), DType::i64);
}

// bitwise_not / and / or / xor: integers and bools only, broadcasting with promotion.
void meta_bitwise(const OpCall& c, MetaOut& out) {
  const Tensor& a = c.args.tensor(0);
  bool binary = c.op != OpKind::bitwise_not;
  DType dtype = binary ? result_type(a, c.args.tensor(1)) : a.dtype();
  KILN_CHECK(is_integral(dtype, true), dtype,
             "[{}] is only defined for integer and bool tensors, got {}", name_of(c), dtype);
  out.fresh(binary ? broadcast_shapes(a.shape(), c.args.tensor(1).shape(), name_of(c)) : a.shape(),
            dtype);
}

// cumsum / cumprod(self, dim, dtype?): self's shape; integers and bools accumulate in
// i64 unless a dtype is given (as torch.cumsum).
void meta_cumulative(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  wrap_dim(c.args.i64(1), self.dim(), name_of(c));
  DType dtype = c.args.is_none(2) ? self.dtype() : c.args.dtype(2);
  if (c.args.is_none(2) && is_integral(dtype, true)) dtype = DType::i64;
  out.fresh(self.shape(), dtype);
}

void meta_logcumsumexp(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  wrap_dim(c.args.i64(1), self.dim(), name_of(c));
  check_floating(c, self.dtype());
  out.fresh(self.shape(), self.dtype());
}

// cummax / cummin(self, dim): values like self and their i64 positions.
void meta_cumextreme(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  wrap_dim(c.args.i64(1), self.dim(), name_of(c));
  out.fresh(self.shape(), self.dtype());
  out.fresh(self.shape(), DType::i64);
}

// (grad_output, self, dim): self's gradient, shaped and typed like self.
void meta_cumprod_backward(const OpCall& c, MetaOut& out) {
  const Tensor& g = c.args.tensor(0);
  const Tensor& self = c.args.tensor(1);
  wrap_dim(c.args.i64(2), self.dim(), name_of(c));
  check_floating(c, self.dtype());
  check_same_dtype(c, self, g);
  KILN_CHECK(g.shape() == self.shape(), shape,
             "[{}] grad_output of shape {} does not match self {}", name_of(c), g.shape().str(),
             self.shape().str());
  out.fresh(self.shape(), self.dtype());
}

// (grad_output, output, dim): both shaped like the forward's output, no broadcasting.
void meta_softmax_backward(const OpCall& c, MetaOut& out) {
  const Tensor& g = c.args.tensor(0);
  const Tensor& y = c.args.tensor(1);
  wrap_dim(c.args.i64(2), y.dim(), name_of(c));
  check_floating(c, y.dtype());
  check_same_dtype(c, y, g);
  KILN_CHECK(g.shape() == y.shape(), shape,
             "[{}] grad_output of shape {} does not match the output {}", name_of(c),
             g.shape().str(), y.shape().str());
  out.fresh(y.shape(), y.dtype());
}

// ---- linear algebra -----------------------------------------------------------

void meta_mm(const OpCall& c, MetaOut& out) {
  const Tensor& a = c.args.tensor(0);
  const Tensor& b = c.args.tensor(1);
  KILN_CHECK(a.dim() == 2 && b.dim() == 2, shape, "[mm] expected 2-D tensors, got {}D and {}D",
             a.dim(), b.dim());
  KILN_CHECK(a.sym_size(1) == b.sym_size(0), shape,
             "[mm] mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
             a.sym_size(0).str(), a.sym_size(1).str(), b.sym_size(0).str(), b.sym_size(1).str());
  check_same_dtype(c, a, b);
  out.fresh(sym_dims({a.sym_size(0), b.sym_size(1)}), a.dtype());
}

void meta_bmm(const OpCall& c, MetaOut& out) {
  const Tensor& a = c.args.tensor(0);
  const Tensor& b = c.args.tensor(1);
  KILN_CHECK(a.dim() == 3 && b.dim() == 3, shape, "[bmm] expected 3-D tensors, got {}D and {}D",
             a.dim(), b.dim());
  KILN_CHECK(a.sym_size(0) == b.sym_size(0) && a.sym_size(2) == b.sym_size(1), shape,
             "[bmm] batch1 {} and batch2 {} cannot be multiplied", a.shape().str(),
             b.shape().str());
  check_same_dtype(c, a, b);
  out.fresh(sym_dims({a.sym_size(0), a.sym_size(1), b.sym_size(2)}), a.dtype());
}

void meta_matmul(const OpCall& c, MetaOut& out) {
  const Tensor& a = c.args.tensor(0);
  const Tensor& b = c.args.tensor(1);
  check_same_dtype(c, a, b);
  out.fresh(matmul_shape(a.shape(), b.shape()), a.dtype());
}

void meta_addmm(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  const Tensor& a = c.args.tensor(1);
  const Tensor& b = c.args.tensor(2);
  KILN_CHECK(a.dim() == 2 && b.dim() == 2 && a.sym_size(1) == b.sym_size(0), shape,
             "[addmm] mat1 and mat2 shapes cannot be multiplied ({} and {})", a.shape().str(),
             b.shape().str());
  check_same_dtype(c, a, b);
  check_same_dtype(c, self, a);
  Dims shape = sym_dims({a.sym_size(0), b.sym_size(1)});
  KILN_CHECK(broadcast_shapes(self.shape(), shape, "addmm") == shape, shape,
             "[addmm] self of shape {} cannot be broadcast to {}", self.shape().str(), shape.str());
  out.fresh(std::move(shape), a.dtype());
}

namespace {
// The checks linear and its gradient share: input `x` and weight `w` ([out, in]) can be
// multiplied and have one dtype. Returns linear's output shape.
Dims check_linear_args(const OpCall& c, const Tensor& x, const Tensor& w) {
  KILN_CHECK(w.dim() == 2 && x.dim() >= 1 && x.sym_size(-1) == w.sym_size(1), shape,
             "[{}] input {} and weight {} cannot be multiplied (expected weight [out, {}])",
             name_of(c), x.shape().str(), w.shape().str(), x.dim() ? x.sym_size(-1).str() : "0");
  check_same_dtype(c, x, w);
  Dims shape = x.shape();
  shape.set(shape.size() - 1, w.sym_size(0));
  return shape;
}
}  // namespace

void meta_linear(const OpCall& c, MetaOut& out) {
  const Tensor& x = c.args.tensor(0);
  const Tensor& w = c.args.tensor(1);
  const Tensor* bias = c.args.opt_tensor_ptr(2);
  Dims shape = check_linear_args(c, x, w);
  if (bias) {
    check_same_dtype(c, x, *bias);
    KILN_CHECK(bias->dim() <= 1 && bias->sym_numel() == w.sym_size(0), shape,
               "[linear] bias of shape {} does not match {} output features", bias->shape().str(),
               w.size(0));
  }
  out.fresh(std::move(shape), x.dtype());
}

// (grad_output, input, weight) -> d input, d weight, d bias: the forward's checks on
// (input, weight), and grad_output shaped like linear's output.
void meta_linear_backward(const OpCall& c, MetaOut& out) {
  const Tensor& g = c.args.tensor(0);
  const Tensor& x = c.args.tensor(1);
  const Tensor& w = c.args.tensor(2);
  Dims y = check_linear_args(c, x, w);
  check_same_dtype(c, x, g);
  KILN_CHECK(g.shape() == y, shape, "[{}] grad_output of shape {} does not match the output {}",
             name_of(c), g.shape().str(), y.str());
  out.fresh(x.shape(), x.dtype());
  out.fresh(w.shape(), x.dtype());
  out.fresh(sym_dims({w.sym_size(0)}), x.dtype());
}

int64_t ConvGeometry::positions() const {
  int64_t p = 1;
  for (int i = 0; i < rank; ++i) p *= out[static_cast<size_t>(i)];
  return p;
}

int64_t ConvGeometry::taps() const {
  int64_t t = 1;
  for (int i = 0; i < rank; ++i) t *= kernel[static_cast<size_t>(i)];
  return t;
}

// convolution(input [N, C, *S], weight [O, C / groups, *K], bias [O]?, stride, padding,
// dilation, groups): PyTorch's checks and output sizes, (S + 2 padding - dilation (K - 1)
// - 1) / stride + 1 per spatial dim. Channels and the kernel are read as integers; the
// batch and the spatial sizes may stay symbolic (Y2): the geometry holds their example
// values, meta_convolution the output sizes as expressions, and the check that the kernel
// fits becomes a guard on the size's range.
ConvGeometry conv_geometry(const OpCall& c) {
  const Tensor& x = c.args.tensor(0);
  const Tensor& w = c.args.tensor(1);
  const Tensor* bias = c.args.opt_tensor_ptr(2);
  ConvGeometry g;
  g.rank = static_cast<int>(w.dim()) - 2;
  KILN_CHECK(g.rank >= 1 && g.rank <= 3, shape,
             "[convolution] expects a weight with 1 to 3 spatial dims, got {}", w.meta_str());
  KILN_CHECK(x.dim() == w.dim(), shape,
             "[convolution] expects a batched {}-D input for weight {}, got {}", w.dim(),
             w.meta_str(), x.meta_str());
  KILN_CHECK(x.dtype() == w.dtype() && (!bias || bias->dtype() == x.dtype()), dtype,
             "[convolution] input ({}), weight ({}) and bias ({}) must have the same dtype",
             x.dtype(), w.dtype(), bias ? to_string(bias->dtype()) : std::string_view("none"));
  KILN_CHECK(x.dtype() != DType::b8 && x.dtype() != DType::f16 && x.dtype() != DType::bf16, dtype,
             "[convolution] does not take {} (the functional API computes f16 and bf16 in f32)",
             x.dtype());
  auto per_dim = [&](size_t arg, const char* what) {
    const IntList& v = c.args.ints(arg);
    KILN_CHECK(v.size() == static_cast<size_t>(g.rank), value,
               "[convolution] {} needs {} values, got {}", what, g.rank, v.size());
    std::array<int64_t, 3> r{};
    std::copy(v.begin(), v.end(), r.begin());
    return r;
  };
  g.stride = per_dim(3, "stride");
  g.padding = per_dim(4, "padding");
  g.dilation = per_dim(5, "dilation");
  g.groups = c.args.i64(6);
  g.batch = x.shape().hint(0);
  g.in_channels = x.sym_size(1).guard_int();
  g.out_channels = w.sym_size(0).guard_int();
  KILN_CHECK(g.groups > 0 && g.in_channels % g.groups == 0 && g.out_channels % g.groups == 0, value,
             "[convolution] groups ({}) must divide the input channels ({}) and the output "
             "channels ({})",
             g.groups, g.in_channels, g.out_channels);
  KILN_CHECK(w.sym_size(1).guard_int() * g.groups == g.in_channels, shape,
             "[convolution] weight {} with {} groups expects {} input channels, got input {}",
             w.meta_str(), g.groups, w.size(1) * g.groups, x.meta_str());
  KILN_CHECK(!bias || (bias->dim() == 1 && bias->size(0) == g.out_channels), shape,
             "[convolution] bias {} does not match {} output channels",
             bias ? bias->meta_str() : "", g.out_channels);
  for (size_t i = 0; i < static_cast<size_t>(g.rank); ++i) {
    auto d = static_cast<int64_t>(i) + 2;
    KILN_CHECK(g.stride[i] > 0 && g.dilation[i] > 0 && g.padding[i] >= 0, value,
               "[convolution] stride and dilation must be positive and padding non-negative "
               "(got {}, {}, {})",
               g.stride[i], g.dilation[i], g.padding[i]);
    g.in[i] = x.shape().hint(static_cast<size_t>(d));
    g.kernel[i] = w.sym_size(d).guard_int();
    int64_t span = g.dilation[i] * (g.kernel[i] - 1) + 1, padded = g.in[i] + 2 * g.padding[i];
    KILN_CHECK(x.sym_size(d) + 2 * g.padding[i] >= span, shape,
               "[convolution] the kernel ({} taps, dilation {}) is larger than the padded input "
               "({}) along spatial dim {}",
               g.kernel[i], g.dilation[i], padded, i);
    g.out[i] = (padded - span) / g.stride[i] + 1;
  }
  return g;
}

void meta_convolution(const OpCall& c, MetaOut& out) {
  ConvGeometry g = conv_geometry(c);
  const Tensor& x = c.args.tensor(0);
  Dims shape = sym_dims({x.sym_size(0), SymInt(g.out_channels)});
  for (size_t i = 0; i < static_cast<size_t>(g.rank); ++i) {
    int64_t span = g.dilation[i] * (g.kernel[i] - 1) + 1;
    SymInt room = x.sym_size(static_cast<int64_t>(i) + 2) + 2 * g.padding[i] - span;
    shape.push_back(floordiv(room, g.stride[i]) + 1);
  }
  out.fresh(std::move(shape), c.args.tensor(0).dtype());
}

namespace {

// The non-zero elements of a real CPU tensor (a float zero of either sign is zero; NaN is
// not), counted from its bytes: the count is nonzero's output size.
int64_t count_nonzero_elements(const Tensor& x) {
  size_t size = itemsize(x.dtype());
  // A float's sign bit does not make it non-zero.
  uint64_t value_bits = ~uint64_t{0};
  if (is_floating(x.dtype())) value_bits = ~(uint64_t{1} << (8 * size - 1));
  const auto* base = static_cast<const unsigned char*>(x.storage()->data);
  int64_t count = 0, n = x.numel(), rank = x.dim();
  std::vector<int64_t> at(static_cast<size_t>(rank), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = x.offset();
    for (int64_t d = 0; d < rank; ++d) off += at[static_cast<size_t>(d)] * x.stride(d);
    uint64_t bits = 0;
    std::memcpy(&bits, base + off * static_cast<int64_t>(size), size);
    count += (bits & value_bits) != 0;
    for (int64_t d = rank - 1; d >= 0; --d) {  // the next row-major coordinate
      if (++at[static_cast<size_t>(d)] < x.size(d)) break;
      at[static_cast<size_t>(d)] = 0;
    }
  }
  return count;
}

// (Y3) The size a data-dependent op reads from `x`: for a fake x, a new unbacked size in
// [0, max] of the trace's ShapeEnv (a data-dependent Error without one, F5); for a real
// one, `read(x)`, on the CPU only (the meta function reads the data).
template <typename Read>
SymInt data_size(const Tensor& x, const char* op, const char* what, const SymInt& max, Read read) {
  if (x.is_fake()) {
    ShapeEnv* env = ShapeEnv::current();
    KILN_CHECK(env, data_dependent,
               "[{}] the {} of fake tensor {} is data: trace with symbolic shapes "
               "(export_program) to give it a size of its own",
               op, what, x.meta_str());
    int64_t hi = max.is_symbolic() ? env->range(max.as_expr()).hi : max.hint();
    return env->new_unbacked(0, hi, op);
  }
  KILN_CHECK(x.device().type == DeviceType::cpu, unsupported,
             "[{}] runs on CPU tensors, got {} (copy it to the CPU first)", op, x.meta_str());
  return read(x);
}

}  // namespace

// nonzero: [n, rank] coordinates. Eager (a real CPU tensor) counts its non-zero elements
// here, so the kernel's output is allocated like any other; a fake tensor gets an
// unbacked size in [0, numel] from the trace's ShapeEnv (Y3), and is a data-dependent
// Error without one (F5).
void meta_nonzero(const OpCall& c, MetaOut& out) {
  const Tensor& x = c.args.tensor(0);
  SymInt rows =
      data_size(x, "nonzero", "number of non-zero elements", x.sym_numel(), count_nonzero_elements);
  out.fresh(sym_dims({rows, SymInt(x.dim())}), DType::i64);
}

// value_as_size: a real tensor's value is read here (the output's size); a fake one's is
// an unbacked size in [0, max] (Y3): a size is never negative.
void meta_value_as_size(const OpCall& c, MetaOut& out) {
  const Tensor& x = c.args.tensor(0);
  KILN_CHECK(x.numel() == 1 && is_integral(x.dtype(), false), value,
             "[item_size] takes a one-element integer tensor, got {}", x.meta_str());
  SymInt v = data_size(x, "item_size", "value", SymInt(int64_t{1} << 40), [](const Tensor& t) {
    int64_t value = 0;
    const auto* at = static_cast<const unsigned char*>(t.storage()->data) +
                     t.offset() * static_cast<int64_t>(itemsize(t.dtype()));
    switch (t.dtype()) {
      case DType::i64: value = *reinterpret_cast<const int64_t*>(at); break;
      case DType::i32: value = *reinterpret_cast<const int32_t*>(at); break;
      case DType::i16: value = *reinterpret_cast<const int16_t*>(at); break;
      case DType::i8: value = *reinterpret_cast<const int8_t*>(at); break;
      default: value = *at; break;  // u8
    }
    KILN_CHECK(value >= 0, value, "[item_size] a size must not be negative, got {}", value);
    return SymInt(value);
  });
  TensorMeta& m = out.outs.append_slot();
  m.shape = sym_dims({v});
  m.strides = Dims{0};
  m.offset = x.sym_offset();
  m.dtype = x.dtype();
  m.alias = TensorMeta::Alias::view;
}

// A (batch of) float or double matrix, as the decompositions take.
static void check_decomposed(const OpCall& c, const Tensor& a, bool square) {
  KILN_CHECK(a.dim() >= 2, shape, "[{}] expects a (batch of) matrix with at least 2 dims, got {}",
             name_of(c), a.meta_str());
  KILN_CHECK(!square || a.size(-1) == a.size(-2), shape, "[{}] expects square matrices, got {}",
             name_of(c), a.meta_str());
  KILN_CHECK(a.dtype() == DType::f32 || a.dtype() == DType::f64, dtype,
             "[{}] expects a float or double tensor, got {}", name_of(c), a.dtype());
}

// linalg_eigh(self [..., n, n], UPLO): eigenvalues [..., n] (ascending), eigenvectors
// [..., n, n] (one per column).
void meta_linalg_eigh(const OpCall& c, MetaOut& out) {
  const Tensor& a = c.args.tensor(0);
  check_decomposed(c, a, true);
  std::string_view uplo = c.args.str(1);
  KILN_CHECK(uplo == "L" || uplo == "U" || uplo == "l" || uplo == "u", value,
             "[{}] UPLO must be 'L' or 'U', got '{}'", name_of(c), uplo);
  Dims values = a.shape();
  values.resize(values.size() - 1);
  out.fresh(std::move(values), a.dtype());
  out.fresh(a.shape(), a.dtype());
}

// linalg_svd(A [..., m, n], full_matrices): U [..., m, m | k], S [..., k], Vh [..., n | k, n]
// with k = min(m, n).
void meta_linalg_svd(const OpCall& c, MetaOut& out) {
  const Tensor& a = c.args.tensor(0);
  check_decomposed(c, a, false);
  int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  bool full = c.args.flag(1);
  Dims u = a.shape();
  u.resize(u.size() - 2);
  Dims s = u, vh = u;
  u.push_back(m);
  u.push_back(full ? m : k);
  s.push_back(k);
  vh.push_back(full ? n : k);
  vh.push_back(n);
  out.fresh(std::move(u), a.dtype());
  out.fresh(std::move(s), a.dtype());
  out.fresh(std::move(vh), a.dtype());
}

// ---- data movement ------------------------------------------------------------

void meta_cat(const OpCall& c, MetaOut& out) {
  const TensorList& ts = c.args.tensors(0);
  KILN_CHECK(!ts.empty(), value, "[cat] expected a non-empty list of tensors");
  for (size_t i = 0; i < ts.size(); ++i)
    KILN_CHECK(ts[i].dim() > 0, shape,
               "[cat] zero-dimensional tensor (at position {}) cannot be concatenated", i);
  // As in PyTorch, 1-D tensors of size 0 (the legacy "empty" tensor) are skipped in the
  // shape checks, whatever the rank of the others.
  auto legacy_empty = [](const Tensor& t) { return t.dim() == 1 && t.shape().sym(0).same_as(0); };
  auto ref = std::find_if(ts.begin(), ts.end(), [&](const Tensor& t) { return !legacy_empty(t); });
  const Tensor& first = ref == ts.end() ? ts[0] : *ref;
  int64_t d = wrap_dim(c.args.i64(1), first.dim(), "cat");
  Dims shape = first.shape();
  SymInt total = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    if (legacy_empty(t)) continue;
    KILN_CHECK(t.dim() == first.dim(), shape,
               "[cat] tensors must have the same number of dimensions: got {} and {} (tensor {})",
               first.dim(), t.dim(), i);
    for (size_t j = 0; j < static_cast<size_t>(t.dim()); ++j) {
      SymInt want = first.shape().sym(j), got = t.shape().sym(j);
      KILN_CHECK(j == static_cast<size_t>(d) || want.same_as(got) || want == got, shape,
                 "[cat] sizes of tensors must match except in dimension {}: expected {} but got {} "
                 "in dimension {} for tensor {}",
                 d, want.str(), got.str(), j, i);
    }
    total = total + t.shape().sym(static_cast<size_t>(d));
  }
  shape.set(static_cast<size_t>(d), total);
  out.fresh(std::move(shape), result_type(ts));
}

namespace {}  // namespace

void check_long_index(std::string_view op, const Tensor& index) {
  KILN_CHECK(index.dtype() == DType::i64, dtype,
             "[{}] expected an index tensor of dtype i64, got {}", op, index.dtype());
}

namespace {
void check_index_dtype(const char* op, const Tensor& index) {
  KILN_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, dtype,
             "[{}] expected an index tensor of dtype i64 or i32, got {}", op, index.dtype());
}
}  // namespace

void meta_index_select(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  const Tensor& index = c.args.tensor(2);
  check_index_dtype("index_select", index);
  KILN_CHECK(index.dim() <= 1, shape, "[index_select] index must be 0-D or 1-D, got {}D",
             index.dim());
  Dims shape = self.shape();
  if (self.dim() > 0)
    shape.set(static_cast<size_t>(wrap_dim(c.args.i64(1), self.dim(), "index_select")),
              index.sym_numel());
  out.fresh(std::move(shape), self.dtype());
}

void meta_gather(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  const Tensor& index = c.args.tensor(2);
  check_index_dtype("gather", index);
  int64_t d = wrap_dim(c.args.i64(1), self.dim(), "gather");
  KILN_CHECK(index.dim() == self.dim(), shape,
             "[gather] index tensor must have the same number of dimensions as input ({} vs {})",
             index.dim(), self.dim());
  for (int64_t i = 0; i < self.dim(); ++i)
    KILN_CHECK(i == d || index.shape().sym(static_cast<size_t>(i)) <=
                             self.shape().sym(static_cast<size_t>(i)),
               shape, "[gather] size of index {} exceeds input {} at dimension {}",
               index.shape().str(), self.shape().str(), i);
  out.fresh(index.shape(), self.dtype());
}

void meta_scatter_add(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  const Tensor& index = c.args.tensor(2);
  const Tensor& src = c.args.tensor(3);
  check_index_dtype("scatter_add", index);
  int64_t d = wrap_dim(c.args.i64(1), self.dim(), "scatter_add");
  KILN_CHECK(src.dtype() == self.dtype(), dtype,
             "[scatter_add] self ({}) and src ({}) must have the same dtype", self.dtype(),
             src.dtype());
  KILN_CHECK(index.dim() == self.dim() && src.dim() == self.dim(), shape,
             "[scatter_add] index, src and self must have the same number of dimensions ({}, {} "
             "and {})",
             index.dim(), src.dim(), self.dim());
  for (int64_t i = 0; i < self.dim(); ++i) {  // (Y1) as sizes: a symbolic batch adds no guard
    auto u = static_cast<size_t>(i);
    SymInt at = index.shape().sym(u);
    KILN_CHECK(at <= src.shape().sym(u) && (i == d || at <= self.shape().sym(u)), shape,
               "[scatter_add] index {} is larger than src {} or self {} at dimension {}",
               index.shape().str(), src.shape().str(), self.shape().str(), i);
  }
  out.fresh(self.shape(), self.dtype());
}

// ---- collectives (C2): shapes from the group size the program was traced for ----
namespace {
void check_reduction(const OpCall& c, size_t arg) {
  std::string_view r = c.args.str(arg);
  KILN_CHECK(r == "sum" || r == "avg" || r == "max" || r == "min" || r == "product", value,
             "[{}] unknown reduction '{}' (sum, avg, max, min or product)", name_of(c), r);
}
int64_t group_size_of(const OpCall& c, size_t arg) {
  int64_t n = c.args.i64(arg);
  KILN_CHECK(n > 0, value, "[{}] group_size must be positive, got {}", name_of(c), n);
  return n;
}
Dims rows_scaled(const OpCall& c, int64_t n, bool gather) {
  const Tensor& self = c.args.tensor(0);
  KILN_CHECK(self.dim() > 0, shape, "[{}] needs a tensor with a dim 0, got {}", name_of(c),
             self.meta_str());
  Dims shape = self.shape();
  if (gather) {
    shape[0] *= n;
  } else {
    KILN_CHECK(shape[0] % n == 0, shape, "[{}] dim 0 of {} is not divisible by the group size {}",
               name_of(c), self.meta_str(), n);
    shape[0] /= n;
  }
  return shape;
}
}  // namespace

void meta_all_reduce(const OpCall& c, MetaOut& out) {
  check_reduction(c, 1);
  out.fresh(c.args.tensor(0).shape(), c.args.tensor(0).dtype());
}
void meta_all_gather(const OpCall& c, MetaOut& out) {
  out.fresh(rows_scaled(c, group_size_of(c, 1), true), c.args.tensor(0).dtype());
}
void meta_reduce_scatter(const OpCall& c, MetaOut& out) {
  check_reduction(c, 1);
  out.fresh(rows_scaled(c, group_size_of(c, 2), false), c.args.tensor(0).dtype());
}
void meta_all_to_all_v(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  const IntList &outs = c.args.ints(1), &ins = c.args.ints(2);
  KILN_CHECK(self.dim() > 0, shape,
             "[all_to_all_single] expects a tensor of at least 1 dim, got {}", self.meta_str());
  KILN_CHECK(
      !outs.empty() && outs.size() == ins.size(), value,
      "[all_to_all_single] needs one output and one input split size per rank, got {} and {}",
      outs.size(), ins.size());
  int64_t rows_in = 0, rows_out = 0;
  for (size_t r = 0; r < ins.size(); ++r) {
    KILN_CHECK(outs[r] >= 0 && ins[r] >= 0, value, "[all_to_all_single] a negative split size");
    rows_in += ins[r];
    rows_out += outs[r];
  }
  KILN_CHECK(self.size(0) == rows_in, shape,
             "[all_to_all_single] input split sizes sum to {} rows, but the input {} has {}",
             rows_in, self.meta_str(), self.size(0));
  Dims shape = self.shape();
  shape.set(0, rows_out);
  out.fresh(std::move(shape), self.dtype());
}
void meta_broadcast(const OpCall& c, MetaOut& out) {
  KILN_CHECK(c.args.i64(1) >= 0, index, "[broadcast] src must be a rank (>= 0), got {}",
             c.args.i64(1));
  out.fresh(c.args.tensor(0).shape(), c.args.tensor(0).dtype());
}
void meta_all_to_all(const OpCall& c, MetaOut& out) {
  int64_t n = group_size_of(c, 1);
  rows_scaled(c, n, false);  // divisible into chunks
  out.fresh(c.args.tensor(0).shape(), c.args.tensor(0).dtype());
}

void meta_embedding(const OpCall& c, MetaOut& out) {
  const Tensor& weight = c.args.tensor(0);
  const Tensor& indices = c.args.tensor(1);
  check_index_dtype("embedding", indices);
  KILN_CHECK(weight.dim() == 2, shape, "[embedding] weight must be 2-D, got {}D", weight.dim());
  Dims shape = indices.shape();
  shape.push_back(weight.sym_size(1));
  out.fresh(std::move(shape), weight.dtype());
}

void meta_clone(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  out.fresh(self.shape(), self.dtype());
}

namespace {
// The checks a norm and its gradient share: input `x` floating, `norm` its trailing dims,
// and the affine tensors at arguments first_affine.. (weight, then bias) of shape `norm`
// and x's dtype.
void check_norm_args(const OpCall& c, const Tensor& x, const IntList& norm, size_t first_affine,
                     size_t n_affine) {
  check_floating(c, x.dtype());
  bool ok = static_cast<int64_t>(norm.size()) <= x.dim() && !norm.empty();
  for (size_t i = 0; ok && i < norm.size(); ++i)
    ok = SymInt(norm[i]) == x.shape().sym(x.dim() - norm.size() + i);
  KILN_CHECK(ok, shape, "[{}] normalized_shape {} does not match the trailing dims of input {}",
             name_of(c), ints_str(norm), x.shape().str());
  for (size_t i = 0; i < n_affine; ++i) {
    const Tensor* p = c.args.opt_tensor_ptr(first_affine + i);
    if (!p) continue;
    KILN_CHECK(p->shape() == Dims(norm), shape,
               "[{}] {} of shape {} does not match normalized_shape {}", name_of(c),
               i == 0 ? "weight" : "bias", p->shape().str(), ints_str(norm));
    check_same_dtype(c, x, *p);
  }
}
}  // namespace

void meta_layer_norm(const OpCall& c, MetaOut& out) {
  const Tensor& x = c.args.tensor(0);
  check_norm_args(c, x, c.args.ints(1), 2, c.op == OpKind::layer_norm ? 2 : 1);
  out.fresh(x.shape(), x.dtype());
}

// (grad_output, input, normalized_shape, weight?, eps) -> d input, d weight, d bias: the
// forward's checks on (input, normalized_shape, weight), and grad_output shaped like input.
void meta_layer_norm_backward(const OpCall& c, MetaOut& out) {
  const Tensor& g = c.args.tensor(0);
  const Tensor& x = c.args.tensor(1);
  const IntList& norm = c.args.ints(2);
  check_norm_args(c, x, norm, 3, 1);
  check_same_dtype(c, x, g);
  KILN_CHECK(g.shape() == x.shape(), shape, "[{}] grad_output of shape {} does not match input {}",
             name_of(c), g.shape().str(), x.shape().str());
  out.fresh(x.shape(), x.dtype());
  out.fresh(Dims(norm), x.dtype());
  out.fresh(Dims(norm), x.dtype());
}

void meta_to_copy(const OpCall& c, MetaOut& out) {
  out.fresh(c.args.tensor(0).shape(), c.args.dtype(1));
}

}  // namespace kiln::ops

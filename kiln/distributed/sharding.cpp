// THE sharding table (S2): one entry per op of kiln/ops/op_table.h, grouped by family,
// in the spirit of kiln/autograd/derivatives.cpp. See kiln/distributed/sharding.h for
// what an entry is; the rules below are the placement logic, shared by the families.
#include "kiln/distributed/sharding.h"

#include <array>
#include <optional>

#include "kiln/api/functional.h"
#include "kiln/dispatch/dispatch.h"

namespace kiln::dist::detail {

using ops::OpKind;

namespace {

// One flag per tensor dimension (sharded, reduced, kept whole), inline for usual ranks.
using DimFlags = SmallVector<char, 8>;

[[noreturn]] void no_rule(OpKind op, const Operands& in) {
  std::string placements;
  for (const Tensor* t : in.tensors)
    placements += (placements.empty() ? "" : ", ") + to_string(t->impl()->dtensor->placements);
  fail(ErrorKind::unsupported, "[{}] has no sharding rule for DTensor arguments with placements {}",
       ops::op_name(op), placements);
}

// Whether Partial inputs (all of the call's DTensors, with one reduction) may stay
// partial through `op`: sums and differences of partial sums, and scaling by a number,
// commute with the reduction. With one DTensor operand, the other is a plain number (S3).
bool keeps_partial(OpKind op, const Operands& in) {
  switch (op) {
    case OpKind::neg:
    case OpKind::clone:
    case OpKind::alias: return true;
    case OpKind::add:
    case OpKind::sub:
    case OpKind::add_:
    case OpKind::sub_:
    case OpKind::copy_: return in.tensors.size() == 2;
    case OpKind::mul:
    case OpKind::mul_: return in.tensors.size() == 1;
    case OpKind::div:
    case OpKind::div_: return in.tensors.size() == 1 && in.arg[0] == 0;
    default: return false;
  }
}

// P + R: a sum or difference of a Partial(sum) operand and a replicated one stays a
// partial sum at mesh dim `i`, as in PyTorch: the replicated operand joins as a partial
// value (itself on coordinate 0, zeros elsewhere; R -> P moves nothing), so a rowwise
// layer's bias is added without reducing its partial sums.
bool partial_plus_replicate(OpKind op, const Operands& in, int64_t i) {
  if (in.tensors.size() != 2) return false;
  switch (op) {
    case OpKind::add:
    case OpKind::sub:
    case OpKind::add_:
    case OpKind::sub_: break;
    default: return false;
  }
  bool partial = false;
  for (const Tensor* t : in.tensors) {
    const Placement& p = t->impl()->dtensor->placements[static_cast<size_t>(i)];
    if (p.is_partial() && p.op != ReduceOp::sum) return false;
    if (!p.is_partial() && !p.is_replicate()) return false;
    partial = partial || p.is_partial();
  }
  return partial;
}

// Where dim `d` of input `t` lands in a broadcast output of shape `out`; nullopt when the
// input is broadcast along it.
std::optional<int64_t> out_dim(const Tensor& t, int64_t d, const Dims& out) {
  int64_t od = d + static_cast<int64_t>(out.size()) - t.dim();
  if (t.shape()[static_cast<size_t>(d)] == 1 && out[od] != 1) return std::nullopt;
  return od;
}

// The common case in one pass: every DTensor operand has the output's shape and the
// same placements, none partial. They keep them, and so does the output.
bool same_layout(const Operands& in, const Dims& out, Decision& d, bool outputs_only) {
  const Placements& first = in.tensors[0]->impl()->dtensor->placements;
  for (const Placement& p : first)
    if (p.is_partial()) return false;
  for (const Tensor* t : in.tensors)
    if (t->shape() != out || !(t->impl()->dtensor->placements == first)) return false;
  if (!outputs_only) d.inputs.assign(in.tensors.size(), first);
  d.output = first;
  return true;
}

// `outputs_only`: the caller needs the output placements alone (d.inputs stays empty).
Decision pointwise_rule(OpKind op, const Operands& in, const Dims& out, const DeviceMesh& mesh,
                        bool inplace, bool outputs_only) {
  Decision d;
  if (same_layout(in, out, d, outputs_only)) return d;
  if (!outputs_only) d.inputs.resize(in.tensors.size());
  for (auto& p : d.inputs) p.resize(static_cast<size_t>(mesh.ndim()));
  for (int64_t i = 0; i < mesh.ndim(); ++i) {
    auto at = [&](size_t k) -> const Placement& {
      return in.tensors[k]->impl()->dtensor->placements[static_cast<size_t>(i)];
    };
    Placement target = Replicate();
    bool all_partial = true;
    std::optional<ReduceOp> pop;
    for (size_t k = 0; k < in.tensors.size(); ++k) {
      all_partial = all_partial && at(k).is_partial();
      if (at(k).is_partial()) pop = pop.value_or(at(k).op);
    }
    bool same_op = true;
    for (size_t k = 0; k < in.tensors.size(); ++k)
      same_op = same_op && (!at(k).is_partial() || at(k).op == *pop);
    if (inplace) {
      target = at(0);  // self keeps its placement
      if (target.is_shard() && !out_dim(*in.tensors[0], target.dim, out)) target = Replicate();
      if (target.is_partial() && !(all_partial && same_op && keeps_partial(op, in)) &&
          !partial_plus_replicate(op, in, i))
        fail(ErrorKind::unsupported,
             "[{}] writes a Partial({}) DTensor in place, which would mix partial values; "
             "redistribute it to Replicate first",
             ops::op_name(op), to_string(target.op));
    } else if (pop && all_partial && same_op && keeps_partial(op, in)) {
      target = Partial(*pop);
    } else if (partial_plus_replicate(op, in, i)) {
      target = Partial(ReduceOp::sum);
    } else {
      for (size_t k = 0; k < in.tensors.size() && target.is_replicate(); ++k)
        if (at(k).is_shard())
          if (auto od = out_dim(*in.tensors[k], at(k).dim, out)) target = Shard(*od);
    }
    d.output.push_back(target);  // mesh dims in order
    for (size_t k = 0; k < d.inputs.size(); ++k) {
      const Tensor& t = *in.tensors[k];
      Placement want = target;
      if (target.is_shard()) {
        int64_t td = target.dim - (static_cast<int64_t>(out.size()) - t.dim());
        want =
            td >= 0 && out_dim(t, td, out) ? Shard(td) : Replicate();  // broadcast dims stay whole
      }
      d.inputs[k][static_cast<size_t>(i)] = want;
    }
  }
  return d;
}

// Reductions over `dims` (empty: all). sum keeps partial sums partial and turns a
// sharded reduced dim into Partial(sum); amax/amin into Partial(max/min); other
// reductions gather the reduced dims first.
Decision reduce_rule(OpKind op, const Tensor& x, const IntList& dims_in, bool keepdim,
                     const DeviceMesh& mesh) {
  DimFlags reduced(static_cast<size_t>(x.dim()), dims_in.empty());
  for (int64_t d : dims_in)
    reduced[static_cast<size_t>(wrap_dim(d, x.dim(), ops::op_name(op)))] = true;
  Decision dec;
  dec.inputs.assign(1, Placements(static_cast<size_t>(mesh.ndim())));
  const Placements& have = x.impl()->dtensor->placements;
  for (int64_t i = 0; i < mesh.ndim(); ++i) {
    const Placement& p = have[static_cast<size_t>(i)];
    Placement in = p, out = p;
    if (p.is_partial()) {
      bool ok = op == OpKind::sum && p.op == ReduceOp::sum;
      if (!ok) in = out = Replicate();
    } else if (p.is_shard() && reduced[static_cast<size_t>(p.dim)]) {
      if (op == OpKind::sum)
        out = Partial(ReduceOp::sum);
      else if (op == OpKind::amax)
        out = Partial(ReduceOp::max);
      else if (op == OpKind::amin)
        out = Partial(ReduceOp::min);
      else
        in = out = Replicate();
    } else if (p.is_shard() && !keepdim) {
      int64_t before = 0;
      for (int64_t d = 0; d < p.dim; ++d) before += reduced[static_cast<size_t>(d)];
      out = Shard(p.dim - before);
    }
    dec.inputs[0][static_cast<size_t>(i)] = in;
    dec.output.push_back(out);  // mesh dims in order
  }
  return dec;
}

// Every DTensor argument whole along `dims` (gathered where sharded), partial values
// reduced; other shards kept. Outputs are placed like the first input.
Decision keep_shards_except(const Operands& in, const DimFlags& whole) {
  Decision d;
  for (const Tensor* t : in.tensors) {
    Placements p = t->impl()->dtensor->placements;
    for (Placement& x : p)
      if (x.is_partial() ||
          (x.is_shard() && (static_cast<size_t>(x.dim) >= whole.size() || whole[x.dim])))
        x = Replicate();
    d.inputs.push_back(std::move(p));
  }
  d.output = d.inputs[0];
  return d;
}

// Bytes moved to turn `from` into `to` along a mesh dim of `n` ranks, for a tensor of
// `bytes` (ring algorithms; local chunking is free).
double move_cost(const Placement& from, const Placement& to, double bytes, int64_t n) {
  if (from == to || (from.is_replicate() && !to.is_replicate())) return 0;
  double f = double(n - 1) / double(n);
  if (from.is_shard() && to.is_replicate()) return bytes * f;
  if (from.is_partial() && to.is_replicate()) return 2 * bytes * f;
  if (from.is_partial() && to.is_shard()) return bytes * f;
  if (from.is_shard() && to.is_shard()) return bytes * f / double(n);
  return 2 * bytes;  // through Replicate
}

// a [..., m, k] @ b [k, n] or [..., k, n] with the same batch dims: per mesh dim the
// cheapest of the strategies that need no communication after the local product:
// shard a's batch/row dims (b whole), shard b's columns (a whole), shard the contracted
// dim of both (partial sums), or everything whole.
Decision matmul_rule(const Tensor& a, const Tensor& b, const Dims& out, const DeviceMesh& mesh) {
  KILN_CHECK(a.dim() >= 2 && b.dim() >= 2, unsupported,
             "[matmul] of DTensors needs operands of at least 2 dims, got {} and {}", a.meta_str(),
             b.meta_str());
  int64_t ak = a.dim() - 1, bk = b.dim() - 2, bn = b.dim() - 1,
          on = static_cast<int64_t>(out.size()) - 1;
  Decision d;
  d.inputs.assign(2, Placements(static_cast<size_t>(mesh.ndim())));
  d.output.resize(static_cast<size_t>(mesh.ndim()));
  // a cost estimate: sizes at their example values (no guard on a symbolic batch)
  double abytes = double(a.sym_numel().hint() * a.itemsize()),
         bbytes = double(b.sym_numel().hint() * b.itemsize());
  for (int64_t i = 0; i < mesh.ndim(); ++i) {
    const Placement& pa = a.impl()->dtensor->placements[static_cast<size_t>(i)];
    const Placement& pb = b.impl()->dtensor->placements[static_cast<size_t>(i)];
    struct Strategy {
      Placement a, b, out;
    };
    std::vector<Strategy> options = {{Replicate(), Replicate(), Replicate()},
                                     {Shard(ak), Shard(bk), Partial()},
                                     {Replicate(), Shard(bn), Shard(on)}};
    for (int64_t dim = 0; dim < ak; ++dim)  // a's batch and row dims
      if (b.dim() == 2 || dim == ak - 1)
        options.push_back(
            {Shard(dim), Replicate(), Shard(dim + static_cast<int64_t>(out.size()) - a.dim())});
    if (a.dim() == b.dim())  // batch dims sharded alike on both (attention heads)
      for (int64_t dim = 0; dim < ak - 1; ++dim)
        options.push_back({Shard(dim), Shard(dim), Shard(dim)});
    if (pa.is_partial() && pa.op == ReduceOp::sum) options.push_back({pa, Replicate(), Partial()});
    if (pb.is_partial() && pb.op == ReduceOp::sum) options.push_back({Replicate(), pb, Partial()});
    const Strategy* best = nullptr;
    double best_cost = 0;
    for (const Strategy& s : options) {
      // ties (a mesh dim of one rank moves nothing) go to the strategy that changes least
      double c = move_cost(pa, s.a, abytes, mesh.size(i)) +
                 move_cost(pb, s.b, bbytes, mesh.size(i)) + 1e-9 * ((pa != s.a) + (pb != s.b));
      if (!best || c < best_cost) best = &s, best_cost = c;
    }
    d.inputs[0][static_cast<size_t>(i)] = best->a;
    d.inputs[1][static_cast<size_t>(i)] = best->b;
    d.output[static_cast<size_t>(i)] = best->out;
  }
  return d;
}

// Where a shard of input dim `d` (over `n` ranks) lands after a view to `out`, or
// nullopt when the view would cut through the shards (the input is gathered first). A
// view maps groups of input dims onto groups of output dims with equal products; the
// shard survives when its dim is kept whole, when it is split and the first output dim
// of the split divides into the shards (heads out of a sharded hidden dim), or when it
// is the first of the dims merged and divides evenly (heads back into the hidden dim).
std::optional<int64_t> view_dim(const Dims& in, int64_t d, const Dims& out, int64_t n) {
  size_t i = 0, o = 0;
  while (i < in.size() || o < out.size()) {
    size_t i0 = i, o0 = o;
    int64_t pi = i < in.size() ? in[i++] : 1, po = o < out.size() ? out[o++] : 1;
    while (pi != po) {
      if (pi < po && i < in.size())
        pi *= in[i++];
      else if (po < pi && o < out.size())
        po *= out[o++];
      else
        return std::nullopt;
    }
    if (static_cast<size_t>(d) < i0 || static_cast<size_t>(d) >= i) continue;
    bool first_in = static_cast<size_t>(d) == i0;
    if (i - i0 == 1 && o - o0 == 1) return static_cast<int64_t>(o0);                 // kept
    if (i - i0 == 1 && out[o0] % n == 0) return static_cast<int64_t>(o0);            // split
    if (o - o0 == 1 && first_in && in[d] % n == 0) return static_cast<int64_t>(o0);  // merged
    return std::nullopt;
  }
  return std::nullopt;
}

// The placements of a view's output, and whether the input must be gathered first.
Decision view_rule(OpKind op, const Tensor& x, std::span<const Value> args, const Dims& out,
                   const DeviceMesh& mesh) {
  Decision d;
  Placements in = x.impl()->dtensor->placements, res = in;
  for (size_t i = 0; i < in.size(); ++i) {
    Placement& p = in[i];
    Placement& o = res[i];
    if (!p.is_shard()) continue;
    int64_t dim = p.dim;
    std::optional<int64_t> to;
    switch (op) {
      case OpKind::transpose: {
        int64_t a = wrap_dim(std::get<int64_t>(args[1]), x.dim(), "transpose");
        int64_t b = wrap_dim(std::get<int64_t>(args[2]), x.dim(), "transpose");
        to = dim == a ? b : dim == b ? a : dim;
        break;
      }
      case OpKind::permute: {
        const IntList& perm = std::get<IntList>(args[1]);
        for (size_t k = 0; k < perm.size(); ++k)
          if (wrap_dim(perm[k], x.dim(), "permute") == dim) to = static_cast<int64_t>(k);
        break;
      }
      case OpKind::unsqueeze: {
        int64_t at = wrap_dim(std::get<int64_t>(args[1]), x.dim() + 1, "unsqueeze");
        to = dim + (dim >= at);
        break;
      }
      case OpKind::view:
      case OpKind::squeeze: to = view_dim(x.shape(), dim, out, mesh.size(i)); break;
      case OpKind::expand:
        to = x.size(dim) == out[dim + out.size() - x.dim()]
                 ? std::optional(dim + int64_t(out.size()) - x.dim())
                 : std::nullopt;
        break;
      case OpKind::alias: to = dim; break;
      case OpKind::slice:
      case OpKind::select: {
        int64_t along = wrap_dim(std::get<int64_t>(args[1]), x.dim(), ops::op_name(op));
        if (along != dim) to = op == OpKind::select && dim > along ? dim - 1 : dim;
        break;
      }
      default: break;
    }
    if (to)
      o = Shard(*to);
    else
      p = o = Replicate();
  }
  d.inputs.push_back(in);
  d.output = res;
  return d;
}

// ---- the families' rules ------------------------------------------------------------

Decision pointwise(const ShardingCall& c) {
  return pointwise_rule(c.op, c.in, c.out, c.mesh, ops::op_info(c.op).is_inplace(), c.outputs_only);
}

// (S4) copy_: the source takes self's placements.
Decision copy_into(const ShardingCall& c) {
  KILN_CHECK(c.in.arg[0] == 0, value,
             "[copy_] into a plain tensor from a DTensor; use full_tensor()");
  return pointwise_rule(c.op, c.in, c.out, c.mesh, true, c.outputs_only);
}

Decision reduction(const ShardingCall& c) {
  return reduce_rule(c.op, c.tensor(0), std::get<IntList>(c.args[1]), std::get<bool>(c.args[2]),
                     c.mesh);
}

Decision product(const ShardingCall& c) {
  return matmul_rule(c.tensor(0), c.tensor(1), c.out, c.mesh);
}

Decision view(const ShardingCall& c) { return view_rule(c.op, c.tensor(0), c.args, c.out, c.mesh); }

// convolution: each rank convolves its own images (the input's batch dim may stay
// sharded); channels, spatial dims, weight and bias whole; the output like the input.
Decision convolution(const ShardingCall& c) {
  Decision d;
  for (size_t k = 0; k < c.in.tensors.size(); ++k) {
    Placements p = c.in.tensors[k]->impl()->dtensor->placements;
    for (Placement& x : p)
      if (x.is_partial() || (x.is_shard() && (c.in.arg[k] != 0 || x.dim != 0))) x = Replicate();
    d.inputs.push_back(std::move(p));
  }
  if (c.in.arg[0] == 0)
    d.output = d.inputs[0];
  else
    d.output.assign(static_cast<size_t>(c.mesh.ndim()), Replicate());
  return d;
}

// The flags of the first DTensor's dims named by argument `i` (an int dim).
DimFlags whole_at(const ShardingCall& c, size_t i) {
  const Tensor& x = c.tensor(0);
  DimFlags whole(static_cast<size_t>(x.dim()), 0);
  whole[static_cast<size_t>(wrap_dim(std::get<int64_t>(c.args[i]), x.dim(), ops::op_name(c.op)))] =
      true;
  return whole;
}

// Without keepdim, a shard after reduced dims moves down by the dims removed before it.
void drop_reduced(Placements& out, const DimFlags& whole) {
  for (Placement& p : out)
    if (p.is_shard()) {
      int64_t before = 0;
      for (int64_t q = 0; q < p.dim; ++q) before += whole[static_cast<size_t>(q)];
      p = Shard(p.dim - before);
    }
}

// Ops along the dim argument 1 names (softmax, scans, sort): that dim gathered.
Decision along_dim(const ShardingCall& c) { return keep_shards_except(c.in, whole_at(c, 1)); }

Decision topk(const ShardingCall& c) { return keep_shards_except(c.in, whole_at(c, 2)); }

// Gradients along the dim argument 2 names, and cat along argument 1: every input like
// the first, shards of that dim gathered.
Decision like_first(const ShardingCall& c, const DimFlags& whole) {
  Decision d = keep_shards_except(c.in, whole);
  for (size_t k = 1; k < d.inputs.size(); ++k) d.inputs[k] = d.inputs[0];
  return d;
}
Decision gradient_along_dim(const ShardingCall& c) { return like_first(c, whole_at(c, 2)); }
Decision concatenation(const ShardingCall& c) { return like_first(c, whole_at(c, 1)); }

// max/min over a dim (values and indices), keepdim at argument 2.
Decision extreme_along_dim(const ShardingCall& c) {
  DimFlags whole = whole_at(c, 1);
  Decision d = keep_shards_except(c.in, whole);
  if (!std::get<bool>(c.args[2])) drop_reduced(d.output, whole);
  return d;
}

// argmax over a dim, or over everything without one.
Decision arg_extreme(const ShardingCall& c) {
  DimFlags whole = std::holds_alternative<int64_t>(c.args[1])
                       ? whole_at(c, 1)
                       : DimFlags(static_cast<size_t>(c.tensor(0).dim()), 1);
  Decision d = keep_shards_except(c.in, whole);
  if (!std::get<bool>(c.args[2])) drop_reduced(d.output, whole);
  return d;
}

// var over dims (none: all), keepdim at argument 3.
Decision variance(const ShardingCall& c) {
  const Tensor& x = c.tensor(0);
  const IntList& dims = std::get<IntList>(c.args[1]);
  DimFlags whole(static_cast<size_t>(x.dim()), dims.empty());
  for (int64_t d : dims) whole[static_cast<size_t>(wrap_dim(d, x.dim(), "var"))] = true;
  Decision d = keep_shards_except(c.in, whole);
  if (!std::get<bool>(c.args[3])) drop_reduced(d.output, whole);
  return d;
}

// layer_norm and rms_norm: the normalized trailing dims whole, weight and bias replicated.
Decision normalization(const ShardingCall& c) {
  const Tensor& x = c.tensor(0);
  int64_t k = static_cast<int64_t>(std::get<IntList>(c.args[1]).size());
  DimFlags whole(static_cast<size_t>(x.dim()), 0);
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) whole[static_cast<size_t>(d)] = true;
  Decision d = keep_shards_except(c.in, whole);
  for (size_t j = 1; j < d.inputs.size(); ++j) d.inputs[j].assign(d.inputs[j].size(), Replicate());
  return d;
}

// Decompositions of whole matrices: the matrix dims whole, batches sharded.
Decision matrices(const ShardingCall& c) {
  const Tensor& x = c.tensor(0);
  DimFlags whole(static_cast<size_t>(x.dim()), 0);
  whole[static_cast<size_t>(x.dim() - 2)] = whole[static_cast<size_t>(x.dim() - 1)] = true;
  return keep_shards_except(c.in, whole);
}

// The table whole, the indices' shards carried to the output.
Decision embedding_lookup(const ShardingCall& c) {
  Decision d;
  d.inputs.push_back(Placements(static_cast<size_t>(c.mesh.ndim()), Replicate()));
  if (c.in.tensors.size() == 2) {
    d.inputs.push_back(c.placements(1));
    d.output = c.placements(1);
  } else {
    d.output = d.inputs[0];
  }
  return d;
}

// ---- decompositions: ops that run as other DTensor ops -------------------------------

// linear(x, w, b) = matmul(x, w^T) + b, each a DTensor op: colwise (w sharded on its
// rows) gives column shards, rowwise (w on its columns, x on its last dim) partial sums,
// which adding the bias reduces (one all_reduce).
Outputs linear_as_matmul(std::span<const Value> args) {
  Value t_args[3] = {args[1], int64_t{0}, int64_t{1}};
  Tensor wt = redispatch(OpKind::transpose, t_args)[0];
  Value mm_args[2] = {args[0], wt};
  Tensor y = redispatch(OpKind::matmul, mm_args)[0];
  if (std::holds_alternative<Tensor>(args[2])) {
    Value add_args[3] = {y, args[2], Scalar(1)};
    y = redispatch(OpKind::add, add_args)[0];
  }
  Outputs out;
  out.push_back(y);
  return out;
}

// addmm(self, a, b, beta, alpha) = beta * self + alpha * (a @ b), and baddbmm the same
// with bmm: each a DTensor op, so the product's sharding (matmul_rule) decides and a
// partial product is reduced by the add, once.
Outputs scaled_product_plus(OpKind product, std::span<const Value> args) {
  Value mm_args[2] = {args[1], args[2]};
  Tensor y = redispatch(product, mm_args)[0];
  const Scalar& beta = std::get<Scalar>(args[3]);
  const Scalar& alpha = std::get<Scalar>(args[4]);
  if (alpha.to_double() != 1.0) {
    Value mul_args[2] = {y, wrapped_number(alpha)};
    y = redispatch(OpKind::mul, mul_args)[0];
  }
  if (beta.to_double() != 0.0) {  // beta = 0 ignores self (NaN and inf included), as PyTorch
    Value add_args[3] = {y, args[0], beta};
    y = redispatch(OpKind::add, add_args)[0];
  }
  Outputs out;
  out.push_back(y);
  return out;
}

// mean = sum / count, so that a sharded reduced dim gives partial sums, not a gather.
Outputs mean_as_sum(std::span<const Value> args) {
  const Tensor& x = std::get<Tensor>(args[0]);
  const IntList& dims = std::get<IntList>(args[1]);
  int64_t count = 1;
  if (dims.empty()) count = x.numel();
  for (int64_t d : dims) count *= x.size(wrap_dim(d, x.dim(), "mean"));
  Value sum_args[4] = {args[0], args[1], args[2], args[3]};
  Tensor s = redispatch(OpKind::sum, sum_args)[0];
  Value div_args[2] = {s, wrapped_number(double(count))};
  Outputs out;
  out.push_back(redispatch(OpKind::div, div_args)[0]);
  return out;
}

Outputs addmm_as_product(std::span<const Value> args) {
  return scaled_product_plus(OpKind::mm, args);
}

// ---- the table ------------------------------------------------------------------------

struct Table {
  std::array<ShardingEntry, ops::kNumOps> entries{};
  void rule(OpKind op, Decision (*r)(const ShardingCall&)) {
    entries[static_cast<size_t>(op)] = {ShardingKind::rule, r, nullptr};
  }
  void decompose(OpKind op, Outputs (*f)(std::span<const Value>)) {
    entries[static_cast<size_t>(op)] = {ShardingKind::decomposed, nullptr, f};
  }
  void none(OpKind op) {
    entries[static_cast<size_t>(op)] = {ShardingKind::none, nullptr, nullptr};
  }
};

Table build() {
  Table s;
  using O = OpKind;
  // ---- factories: no DTensor argument ever reaches the layer ----
  for (O op : {O::empty, O::full, O::arange, O::rand, O::randn}) s.none(op);

  // ---- pointwise: shards kept (broadcast dims whole), partial values kept through the
  // linear ops (keeps_partial), self's placement kept by in-place ops ----
  for (O op : {O::neg,     O::abs,       O::relu,          O::exp,
               O::log,     O::sqrt,      O::rsqrt,         O::sin,
               O::cos,     O::tanh,      O::sigmoid,       O::silu,
               O::gelu,    O::erf,       O::log1p,         O::expm1,
               O::log2,    O::tan,       O::atan,          O::asin,
               O::acos,    O::sinh,      O::cosh,          O::reciprocal,
               O::exp2,    O::log10,     O::erfc,          O::asinh,
               O::acosh,   O::atanh,     O::erfinv,        O::lgamma,
               O::digamma, O::polygamma, O::special_unary, O::special_binary,
               O::floor,   O::ceil,      O::round,         O::trunc,
               O::sign,    O::clamp,     O::logical_not,   O::bitwise_not})
    s.rule(op, pointwise);
  for (O op : {O::add,         O::sub,
               O::mul,         O::div,
               O::pow,         O::maximum,
               O::minimum,     O::remainder,
               O::fmod,        O::floor_divide,
               O::atan2,       O::bitwise_and,
               O::bitwise_or,  O::bitwise_xor,
               O::eq,          O::ne,
               O::lt,          O::le,
               O::gt,          O::ge,
               O::where,       O::gelu_backward,
               O::masked_fill, O::threshold_backward})
    s.rule(op, pointwise);
  for (O op : {O::add_, O::sub_, O::mul_, O::div_, O::relu_, O::masked_fill_, O::fill_})
    s.rule(op, pointwise);
  s.rule(O::copy_, copy_into);
  for (O op : {O::clone, O::alias, O::_to_copy}) s.rule(op, pointwise);

  // ---- reductions: partial sums from sharded reduced dims (sum, amax, amin) ----
  for (O op : {O::sum, O::amax, O::amin, O::prod}) s.rule(op, reduction);
  s.decompose(O::mean, mean_as_sum);  // sum / count: partial sums, not a gather
  for (O op : {O::max, O::min}) s.rule(op, extreme_along_dim);
  s.rule(O::argmax, arg_extreme);
  s.rule(O::var, variance);
  for (O op : {O::softmax, O::log_softmax, O::cumsum, O::cumprod, O::logcumsumexp, O::cummax,
               O::cummin, O::sort})
    s.rule(op, along_dim);
  s.rule(O::topk, topk);
  for (O op : {O::softmax_backward, O::log_softmax_backward, O::cumprod_backward})
    s.rule(op, gradient_along_dim);

  // ---- linear algebra: the cheapest product strategy per mesh dim ----
  for (O op : {O::mm, O::bmm, O::matmul}) s.rule(op, product);
  s.decompose(O::addmm, addmm_as_product);
  s.decompose(O::linear, linear_as_matmul);
  s.none(O::linear_backward);  // autograd of a DTensor linear sees its decomposition
  s.rule(O::convolution, convolution);
  s.none(O::nonzero);  // data-dependent rows: replicated only
  s.none(O::value_as_size);
  for (O op : {O::linalg_eigh, O::linalg_svd}) s.rule(op, matrices);

  // ---- views: shards follow the dims they move to, or are gathered first ----
  for (O op : {O::view, O::permute, O::transpose, O::unsqueeze, O::squeeze, O::expand, O::slice,
               O::select})
    s.rule(op, view);
  s.none(O::as_strided);          // arbitrary geometry: no shard survives it
  s.none(O::as_strided_scatter);  // the same

  // ---- data movement ----
  s.rule(O::cat, concatenation);
  s.rule(O::embedding, embedding_lookup);
  for (O op : {O::index_select, O::gather, O::scatter_add}) s.none(op);

  // ---- normalization ----
  for (O op : {O::layer_norm, O::rms_norm}) s.rule(op, normalization);
  s.none(O::layer_norm_backward);

  // ---- collectives: they run on local shards, never on DTensors ----
  for (O op :
       {O::all_reduce, O::all_gather_into_tensor, O::reduce_scatter_tensor, O::all_to_all_single,
        O::wait_tensor, O::broadcast, O::all_reduce_, O::all_to_all_single_v})
    s.none(op);
  return s;
}

const Table& table() {
  static const Table t = build();
  return t;
}

}  // namespace

const ShardingEntry& sharding_entry(OpKind op) {
  static const ShardingEntry kNone{ShardingKind::none, nullptr, nullptr};
  if (!ops::is_builtin(op)) return kNone;  // extension ops: replicated arguments only
  return table().entries[static_cast<size_t>(op)];
}

bool keeps_nested_shards(const ShardingCall& c) {
  const ShardingEntry& e = sharding_entry(c.op);
  Decision unused;
  return (e.rule == pointwise || e.rule == copy_into) && !c.in.tensors.empty() &&
         same_layout(c.in, c.out, unused, /*outputs_only=*/true);
}

Decision decide(const ShardingCall& c) {
  const ShardingEntry& e = sharding_entry(c.op);
  KILN_CHECK(e.kind == ShardingKind::rule || e.kind == ShardingKind::none, internal,
             "[{}] reached the sharding rules without a rule (a decomposed op or a table gap)",
             ops::op_name(c.op));
  if (e.kind == ShardingKind::rule) return e.rule(c);
  // None: any op on operands that are all Replicate is the same computation on every rank.
  Decision d;
  for (size_t k = 0; k < c.in.tensors.size(); ++k) {
    for (const Placement& p : c.placements(k))
      if (!p.is_replicate()) no_rule(c.op, c.in);
    d.inputs.push_back(c.placements(k));
  }
  d.output = Placements(static_cast<size_t>(c.mesh.ndim()), Replicate());
  return d;
}

}  // namespace kiln::dist::detail

#include "kiln/runtime/executor.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <map>
#include <unordered_map>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/pointwise.h"
#include "kiln/device/kernel_scope.h"
#include "kiln/device/process_group.h"
#include "kiln/device/stream.h"
#include "kiln/ir/interpreter.h"
#include "kiln/passes/fuse.h"

namespace kiln::runtime {

namespace {

// The argument whose buffer output `k` of `op` may be written over, or -1 (Note
// [Outputs in their input's buffer]): the CPU and CUDA kernels of these ops read each
// element of that argument before writing the same element of the output (elementwise
// ops and scatters: output 0 over self), or read the argument no more before writing
// the output at all (linear_backward: d input after d weight, over the input).
int writes_over_arg(ops::OpKind op, size_t k) {
  using ops::OpKind;
  switch (op) {
    case OpKind::add:
    case OpKind::sub:
    case OpKind::mul:
    case OpKind::div:
    case OpKind::relu:
    case OpKind::gelu:
    case OpKind::neg:
    case OpKind::exp:
    case OpKind::sqrt:
    case OpKind::rsqrt:
    case OpKind::tanh:
    case OpKind::sigmoid:
    case OpKind::silu:
    case OpKind::maximum:
    case OpKind::minimum:
    case OpKind::gelu_backward:
    case OpKind::threshold_backward:
    case OpKind::as_strided_scatter: return k == 0 ? 0 : -1;
    case OpKind::linear_backward: return k == 0 ? 1 : -1;
    default: return -1;
  }
}

// A tensor over `storage` with contiguous layout.
Tensor over(const Storage& storage, const ir::ValueMeta& m) {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = m.shape;
  impl->strides = contiguous_strides(m.shape);
  impl->dtype = m.dtype;
  impl->device = m.device;
  impl->storage = storage;
  return Tensor(std::move(impl));
}

bool contiguous_meta(const ir::ValueMeta& m) {
  return !m.offset.is_symbolic() && m.offset.hint() == 0 &&
         m.strides == contiguous_strides(m.shape);
}

// Whether node n can be a step of a fused CPU region (Note [Regions of elementwise
// nodes]): a pointwise op (or its in-place form on its first argument) making one dense
// f32 value of rank >= 1 on a CPU device, from dense f32 values of that shape and 0-d
// float tensors.
bool fusible_on_cpu(const ir::Node& n) {
  const ops::OpInfo& info = ops::op_info(n.op());
  if (!ops::is_builtin(n.op()) || !cpu::fusible_pointwise_op(info.functional)) return false;
  if (info.is_inplace() && info.schema.mutated_arg != 0) return false;
  if (n.meta().size() != 1) return false;
  const ir::ValueMeta& out = n.meta()[0];
  if (out.device.type != DeviceType::cpu || out.dtype != DType::f32 || out.shape.empty() ||
      !contiguous_meta(out))
    return false;
  bool ok = true;
  n.for_each_input([&](const ir::Ref& r) {
    const ir::ValueMeta& m = r.node->meta()[static_cast<size_t>(r.output)];
    bool scalar = m.shape.empty() && (m.dtype == DType::f32 || m.dtype == DType::f64);
    bool full = m.shape == out.shape && m.dtype == DType::f32 && contiguous_meta(m);
    ok = ok && m.device == out.device && (scalar || full);
  });
  return ok;
}

}  // namespace

struct Executor::Region {
  std::vector<size_t> members;  // node indices in program order
  std::vector<bool> stored;     // per member: its value is written to memory
  std::vector<cpu::FusedStep> steps;
  // Where each tensor and scalar of the kernel comes from at run time: env[node][output]
  // (a store's tensor is its member's own output, or an in-place member's self).
  std::vector<std::pair<size_t, int>> tensors;
  std::vector<std::pair<size_t, int>> scalars;  // node kConstant: constants[output]
  std::vector<Tensor> constants;                // the wrapped numbers of Scalar operands
};

static constexpr size_t kConstant = SIZE_MAX;

// Note [Blocked attention]: softmax(mask(scale * q k^T)) v, as the nodes matmul, mul (or
// div) by a number, a mask (masked_fill by a bool mask, or add of a float one, either
// broadcast to the scores), softmax over the last dim, matmul that an exported attention
// is (scale and mask optional), runs as one step over blocks of query rows: per batch
// matrix and block, the block's scores are made in a buffer of at most
// kAttentionBlockBytes (in L2), scaled, masked (the mask's rows for the block, a view),
// soft-maxed and multiplied by v into the output's rows. The [.., T, S] scores are never made whole
// (FlashAttention's point, without its running maximum: a block holds whole rows of
// scores, so the softmax is the ordinary row kernel). Each step is the unfused op on a
// block, so a row's values agree with the unfused program's to float rounding (the
// products are smaller GEMMs, which the library may sum in another order). Below
// ExecutorOptions::min_attention_bytes of scores the unfused ops are as fast (the whole scores stay
// in cache) and run as they are.
struct Executor::Attention {
  size_t scores, scale, softmax, out;  // node indices; scale is kNone without one
  Value factor;                        // the scale's other operand (a number or a 0-d tensor)
  bool divide = false;
  size_t mask = SIZE_MAX;  // the masked_fill or add node, if any
};

static constexpr size_t kNone = SIZE_MAX;

Tensor Executor::output_of(const Plan& plan, size_t node, size_t k) const {
  if (plan.planned[node].size() && plan.planned[node][k].defined()) return plan.planned[node][k];
  const ir::ValueMeta& m = plan.metas.empty() ? nodes_[node]->meta()[k] : plan.metas[node][k];
  return make_tensor(m.shape, m.dtype, m.device, &device_allocator(m.device));
}

// Marks `members` (kNone entries skipped) as group `index` of `group_of`, run where `last`
// is and named `label` in profiles.
void Executor::claim(std::vector<int>& group_of, size_t index, std::span<const size_t> members,
                     size_t last, std::string label) {
  for (size_t m : members)
    if (m != kNone) {
      group_of[m] = static_cast<int>(index);
      runs_at_[m] = last;
    }
  labels_[last] = std::move(label);
}
static constexpr int64_t kAttentionBlockBytes = 512 << 10;

int Executor::fused_attention() const { return static_cast<int>(attention_.size()); }
int Executor::async_collectives() const {
  return static_cast<int>(
      std::count_if(wait_at_.begin(), wait_at_.end(), [](size_t w) { return w != kNone; }));
}

// Note [Product epilogues]: linear followed by relu, by an add of a residual, or both
// (each the only reader of the one before) runs as one product whose epilogue does the
// rest before the tiles are stored (cpu::linear_with_epilogue: oneDNN's post-ops, or the
// transposing copy of a short product): the [rows, out] intermediate is never written
// and read back. The add and the short products' ReLU have the unfused ops' bits; oneDNN's
// ReLU too, except that it keeps the sign of a -0.0 product.
struct Executor::Epilogue {
  size_t product, relu, add, last;  // node indices; relu and add are kNone when absent
  size_t residual_arg = 0;          // which argument of the add is the residual
};

int Executor::fused_epilogues() const { return static_cast<int>(epilogues_.size()); }

void Executor::find_epilogues() {
  auto dense_f32_cpu = [](const ir::ValueMeta& m) {
    return m.dtype == DType::f32 && m.device.type == DeviceType::cpu && contiguous_meta(m);
  };
  auto unclaimed = [&](const ir::Node* n) {
    size_t i = pos_.at(n);
    return n->opcode() == ir::Opcode::call && region_of_[i] < 0 && attention_of_[i] < 0 &&
           epilogue_of_[i] < 0 && !data_dependent_[i];
  };
  auto only_user = [](const ir::Node* n) -> const ir::Node* {
    return n->users().size() == 1 ? n->users()[0] : nullptr;
  };
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const ir::Node* lin = nodes_[i];
    if (lin->opcode() != ir::Opcode::call || lin->op() != ops::OpKind::linear || !unclaimed(lin) ||
        !dense_f32_cpu(lin->meta()[0]))
      continue;
    Epilogue e{i, kNone, kNone, i};
    const ir::Node* at = lin;
    const ir::Node* next = only_user(at);
    if (next && unclaimed(next) && next->op() == ops::OpKind::relu) {
      e.relu = e.last = pos_.at(next);
      at = next;
      next = only_user(at);
    }
    if (next && unclaimed(next) && next->op() == ops::OpKind::add && next->args().size() >= 2) {
      bool alpha_one = next->args().size() < 3 || !std::get_if<Scalar>(&next->args()[2]) ||
                       std::get<Scalar>(next->args()[2]).to_double() == 1.0;
      const auto* a = std::get_if<ir::Ref>(&next->args()[0]);
      const auto* b = std::get_if<ir::Ref>(&next->args()[1]);
      if (alpha_one && a && b && (a->node == at) != (b->node == at)) {
        const ir::Ref& r = a->node == at ? *b : *a;
        const ir::ValueMeta& m = r.node->meta()[static_cast<size_t>(r.output)];
        if (dense_f32_cpu(m) && m.shape == lin->meta()[0].shape &&
            next->meta()[0] == lin->meta()[0]) {
          e.add = e.last = pos_.at(next);
          e.residual_arg = a->node == at ? 1 : 0;
        }
      }
    }
    if (e.last == i) continue;
    claim(epilogue_of_, epilogues_.size(), std::array{e.product, e.relu, e.add}, e.last,
          e.relu == kNone  ? "linear+add"
          : e.add == kNone ? "linear+relu"
                           : "linear+relu+add");
    epilogues_.push_back(e);
  }
}

void Executor::run_epilogue(const Epilogue& e, const Plan& plan, std::vector<Outputs>& env,
                            std::vector<Value>& args) {
  auto arg = [&](size_t node, size_t k) -> Tensor {
    if (k >= nodes_[node]->args().size()) return Tensor();
    const auto* r = std::get_if<ir::Ref>(&nodes_[node]->args()[k]);
    return r ? env[pos_.at(r->node)][static_cast<size_t>(r->output)] : Tensor();
  };
  Tensor out = output_of(plan, e.last);
  Tensor residual = e.add != kNone ? arg(e.add, e.residual_arg) : Tensor();
  bool ran;
  {
    KernelScope scope("linear", out.device());
    ran = cpu::linear_with_epilogue(arg(e.product, 0), arg(e.product, 1), arg(e.product, 2),
                                    e.relu != kNone, residual, out);
  }
  env[e.last] = {out};
  if (ran) return;
  // A product the library does not take: the ops one by one, all into `out` (relu and
  // add read each element before writing it).
  auto value_of = [&](const ir::Ref& r) -> const Tensor& {
    return env[pos_.at(r.node)][static_cast<size_t>(r.output)];
  };
  args.clear();
  ir::call_args(*nodes_[e.product], value_of, args);
  Tensor into[1] = {out};
  dispatch_into(ops::OpKind::linear, args, into);
  if (e.relu != kNone) dispatch_into(ops::OpKind::relu, std::vector<Value>{out}, into);
  if (e.add != kNone) {
    std::vector<Value> sum{out, out, Scalar(1)};
    sum[e.residual_arg] = residual;
    dispatch_into(ops::OpKind::add, sum, into);
  }
}

void Executor::find_attention() {
  auto dense_f32_cpu = [](const ir::ValueMeta& m) {
    return m.dtype == DType::f32 && m.device.type == DeviceType::cpu && m.shape.size() >= 2;
  };
  auto single_call_user = [](const ir::Node* n, ops::OpKind op) -> const ir::Node* {
    if (n->users().size() != 1) return nullptr;
    const ir::Node* u = n->users()[0];
    if (u->opcode() != ir::Opcode::call || u->op() != op) return nullptr;
    const auto* first = std::get_if<ir::Ref>(&u->args()[0]);
    return first && first->node == n ? u : nullptr;
  };
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const ir::Node* mm = nodes_[i];
    if (mm->opcode() != ir::Opcode::call || mm->op() != ops::OpKind::matmul || region_of_[i] >= 0 ||
        attention_of_[i] >= 0 || data_dependent_[i])
      continue;
    Attention a{i, kNone, kNone, kNone, {}, false};
    const ir::Node* next = mm;
    const ir::Node* scale = single_call_user(mm, ops::OpKind::mul);
    if (!scale) scale = single_call_user(mm, ops::OpKind::div);
    if (scale) {
      const ir::Arg& f = scale->args()[1];
      if (const auto* sc = std::get_if<Scalar>(&f)) {
        a.factor = *sc;
      } else if (const auto* r = std::get_if<ir::Ref>(&f);
                 !r || !r->node->meta()[static_cast<size_t>(r->output)].shape.empty()) {
        continue;  // a tensor factor: not a scale (read at run time when 0-d)
      }
      a.scale = pos_.at(scale);
      a.divide = scale->op() == ops::OpKind::div;
      next = scale;
    }
    // A mask: masked_fill(scores, bool mask, number) or add(scores, f32 mask), the mask
    // broadcast to the scores (no more dims than they have, each 1 or theirs).
    const ir::Node* masking = single_call_user(next, ops::OpKind::masked_fill);
    if (!masking) masking = single_call_user(next, ops::OpKind::add);
    if (masking) {
      const auto* m = std::get_if<ir::Ref>(&masking->args()[1]);
      if (!m) continue;
      const ir::ValueMeta& mm_meta = m->node->meta()[static_cast<size_t>(m->output)];
      const Dims& sc = next->meta()[0].shape;
      bool fill = masking->op() == ops::OpKind::masked_fill;
      const Scalar* third =  // masked_fill's value, add's alpha
          masking->args().size() > 2 ? std::get_if<Scalar>(&masking->args()[2]) : nullptr;
      bool fits = mm_meta.shape.size() <= sc.size() && !mm_meta.shape.is_symbolic() &&
                  mm_meta.device == next->meta()[0].device &&
                  mm_meta.dtype == (fill ? DType::b8 : DType::f32) &&
                  (fill ? third != nullptr : !third || third->to_double() == 1.0);
      for (size_t d = 0; fits && d < mm_meta.shape.size(); ++d) {
        int64_t want = sc.hint(sc.size() - mm_meta.shape.size() + d), got = mm_meta.shape[d];
        fits = got == 1 || got == want;
      }
      if (!fits) continue;
      a.mask = pos_.at(masking);
      next = masking;
    }
    const ir::Node* soft = single_call_user(next, ops::OpKind::softmax);
    if (!soft) continue;
    int64_t dim = std::get<int64_t>(soft->args()[1]);
    if (dim != -1 && dim != static_cast<int64_t>(soft->meta()[0].shape.size()) - 1) continue;
    const ir::Node* out = single_call_user(soft, ops::OpKind::matmul);
    if (!out) continue;
    a.softmax = pos_.at(soft);
    a.out = pos_.at(out);
    // Same batch dims everywhere (no broadcasting), f32 on a CPU device.
    const ir::ValueMeta& s = mm->meta()[0];
    auto meta_of = [](const ir::Node* n, size_t arg) {
      const auto& r = std::get<ir::Ref>(n->args()[arg]);
      return r.node->meta()[static_cast<size_t>(r.output)];
    };
    ir::ValueMeta q = meta_of(mm, 0), k = meta_of(mm, 1), v = meta_of(out, 1);
    size_t rank = s.shape.size();
    if (!dense_f32_cpu(s) || q.shape.size() != rank || k.shape.size() != rank ||
        v.shape.size() != rank || !dense_f32_cpu(out->meta()[0]) ||
        soft->meta()[0].dtype != DType::f32)
      continue;
    bool same_batch = true;
    for (size_t d = 0; d + 2 < rank; ++d)
      same_batch = same_batch && q.shape[d] == s.shape[d] && k.shape[d] == s.shape[d] &&
                   v.shape[d] == s.shape[d];
    if (!same_batch) continue;
    if (!s.shape.is_symbolic() && numel_of(s.shape) * 4 < min_attention_bytes_) continue;
    claim(attention_of_, attention_.size(), std::array{a.scores, a.scale, a.mask, a.softmax, a.out},
          a.out, "blocked_attention");
    attention_.push_back(std::move(a));
  }
}

void Executor::run_nodes_one_by_one(std::span<const size_t> members, std::vector<Outputs>& env,
                                    std::vector<Value>& args) {
  for (size_t i : members) {
    const ir::Node* n = nodes_[i];
    auto value_of = [&](const ir::Ref& r) -> const Tensor& {
      return env[pos_.at(r.node)][static_cast<size_t>(r.output)];
    };
    args.clear();
    ir::call_args(*n, value_of, args);
    env[i] = dispatch(n->op(), args);
  }
}

void Executor::run_attention(const Attention& a, const Plan& plan, std::vector<Outputs>& env) {
  auto arg = [&](size_t node, size_t k) -> const Tensor& {
    const auto& r = std::get<ir::Ref>(nodes_[node]->args()[k]);
    return env[pos_.at(r.node)][static_cast<size_t>(r.output)];
  };
  const Tensor &q = arg(a.scores, 0), &kt = arg(a.scores, 1), &v = arg(a.out, 1);
  size_t rank = q.shape().size();
  int64_t T = q.shape()[rank - 2], D = q.shape()[rank - 1], S = kt.shape()[rank - 1],
          Dv = v.shape()[rank - 1];
  Tensor out = output_of(plan, a.out);
  env[a.out] = {out};
  Value factor = a.factor;
  if (a.scale != kNone && std::holds_alternative<std::monostate>(factor)) factor = arg(a.scale, 1);
  if (const auto* sc = std::get_if<Scalar>(&factor)) factor = wrapped_number(*sc);
  // A block: `group` batch matrices that follow each other along the innermost batch
  // dim (one stride apart: a head's neighbours), `rows` query rows of each. Whole matrices
  // when one fits the block (a call per group, not per matrix: short sequences), else
  // one matrix's rows.
  int64_t matrix_bytes = T * S * 4, inner = rank >= 3 ? out.shape()[rank - 3] : 1;
  int64_t group = 1, rows = T;
  if (matrix_bytes <= kAttentionBlockBytes)
    group =
        std::clamp<int64_t>(kAttentionBlockBytes / std::max<int64_t>(matrix_bytes, 1), 1, inner);
  else
    rows = std::clamp<int64_t>(kAttentionBlockBytes / std::max<int64_t>(S * 4, 1), 16,
                               std::max<int64_t>(T, 1));
  Device d = out.device();
  Tensor scores = make_tensor(Dims{group, rows, S}, DType::f32, d, &device_allocator(d));
  Tensor probs = make_tensor(Dims{group, rows, S}, DType::f32, d, &device_allocator(d));
  // The element offset of batch matrix `b` of t (its leading dims, row-major).
  auto batch_offset = [&](const Tensor& t, int64_t b) {
    int64_t off = t.offset();
    for (size_t dim = rank - 2; dim-- > 0;) {
      off += (b % t.shape()[dim]) * t.strides()[dim];
      b /= t.shape()[dim];
    }
    return off;
  };
  // t's stride along the scores' dim rank - back (0 for the batch dim of a 2-D t).
  auto st = [&](const Tensor& t, size_t back) {
    return back <= t.shape().size() ? t.strides()[t.shape().size() - back] : int64_t{0};
  };
  int64_t batch = T > 0 && Dv > 0 ? numel_of(out.shape()) / (T * Dv) : 0;
  std::vector<Value> args(2);
  auto run = [&](ops::OpKind op, Value x, Value y, Tensor& into) {
    args[0] = std::move(x);
    args[1] = std::move(y);
    dispatch_into(op, args, std::span<Tensor>(&into, 1));
  };
  // The mask's part for matrices [b, b + g), query rows [r0, r0 + r): a [g, r, S] view of
  // the mask (stride 0 along its broadcast dims).
  Tensor mask;
  if (a.mask != kNone) mask = arg(a.mask, 1);
  auto mask_block = [&](int64_t b, int64_t g, int64_t r0, int64_t r) {
    size_t lead = rank - mask.shape().size();  // the scores' dims the mask lacks
    int64_t off = mask.offset();
    for (size_t dim = rank - 2; dim-- > 0;) {
      int64_t coord = b % out.shape()[dim];
      b /= out.shape()[dim];
      if (dim >= lead && mask.shape()[dim - lead] != 1) off += coord * mask.strides()[dim - lead];
    }
    auto along = [&](size_t back) {  // 0 where the mask is broadcast
      if (back > mask.shape().size()) return int64_t{0};
      return mask.shape()[mask.shape().size() - back] == 1 ? int64_t{0} : st(mask, back);
    };
    return make_view(mask, Dims{g, r, S}, Dims{along(3), along(2), along(1)}, off + r0 * along(2));
  };
  for (int64_t b = 0, g = 0; b < batch; b += g) {
    g = std::min(group, inner - b % inner);  // never past the innermost batch dim
    Tensor ktb =
        make_view(kt, Dims{g, D, S}, Dims{st(kt, 3), st(kt, 2), st(kt, 1)}, batch_offset(kt, b));
    Tensor vb =
        make_view(v, Dims{g, S, Dv}, Dims{st(v, 3), st(v, 2), st(v, 1)}, batch_offset(v, b));
    for (int64_t r0 = 0; r0 < T; r0 += rows) {
      int64_t r = std::min(rows, T - r0);
      Tensor qb = make_view(q, Dims{g, r, D}, Dims{st(q, 3), st(q, 2), st(q, 1)},
                            batch_offset(q, b) + r0 * st(q, 2));
      Tensor sb = make_view(scores, Dims{g, r, S}, Dims{r * S, S, 1}, 0);
      Tensor pb = make_view(probs, Dims{g, r, S}, Dims{r * S, S, 1}, 0);
      Tensor ob =
          make_view(out, Dims{g, r, Dv}, Dims{st(out, 3), Dv, 1}, batch_offset(out, b) + r0 * Dv);
      run(ops::OpKind::matmul, qb, ktb, sb);
      Tensor *logits = &sb, *spare = &pb;
      if (a.scale != kNone) {
        run(a.divide ? ops::OpKind::div : ops::OpKind::mul, *logits, factor, *spare);
        std::swap(logits, spare);
      }
      if (a.mask != kNone) {
        ops::OpKind op = nodes_[a.mask]->op();  // masked_fill (value) or add (alpha 1)
        Scalar third = op == ops::OpKind::masked_fill ? std::get<Scalar>(nodes_[a.mask]->args()[2])
                                                      : Scalar(int64_t{1});
        args.assign({*logits, mask_block(b, g, r0, r), third});
        dispatch_into(op, args, std::span<Tensor>(spare, 1));
        args.resize(2);
        std::swap(logits, spare);
      }
      run(ops::OpKind::softmax, *logits, int64_t{-1}, *spare);
      run(ops::OpKind::matmul, *spare, vb, ob);
    }
  }
}

Executor::~Executor() = default;

int Executor::fused_regions() const { return static_cast<int>(regions_.size()); }

// Note [Fused regions in the executor]: the executor's own fusion; the program keeps
// its nodes. A region's members other than the last are skipped where they are and run
// with it, as one kernel; their values that nothing outside the region reads are never
// made. The memory plan treats every member as running at the last one (where its
// inputs must still be alive and its stored values begin).
void Executor::find_regions() {
  const auto& pos = pos_;
  std::vector<passes::PointwiseRegion> found = passes::find_pointwise_regions(
      program_.graph,
      [&](const ir::Node& n) {
        size_t i = pos_.at(&n);
        return epilogue_of_[i] < 0 && !data_dependent_[i] && fusible_on_cpu(n);
      },
      cpu::kMaxFusedSteps);
  for (const passes::PointwiseRegion& pr : found) {
    Region r;
    for (const ir::Node* n : pr.nodes) r.members.push_back(pos.at(n));
    size_t index = regions_.size();
    std::string label;                           // for profiles: "fused(mul_, add_)"
    std::unordered_map<size_t, size_t> step_of;  // member node -> its step
    for (size_t k = 0; k < r.members.size(); ++k) step_of[r.members[k]] = k;
    // A member is stored when a node outside the region reads it, or an in-place member
    // writes into it.
    r.stored.assign(r.members.size(), false);
    for (size_t k = 0; k < r.members.size(); ++k) {
      const ir::Node* n = nodes_[r.members[k]];
      for (const ir::Node* u : n->users())
        if (!step_of.count(pos.at(u))) r.stored[k] = true;
      if (ops::op_info(n->op()).is_inplace()) {
        r.stored[k] = true;
        const auto& self = std::get<ir::Ref>(n->args()[0]);
        if (auto it = step_of.find(pos.at(self.node)); it != step_of.end())
          r.stored[it->second] = true;
      }
    }
    std::unordered_map<size_t, int> tensor_of, scalar_of;  // node*64+output -> slot
    auto slot = [&](std::unordered_map<size_t, int>& seen,
                    std::vector<std::pair<size_t, int>>& list, size_t node, int output) {
      size_t key = node * 64 + static_cast<size_t>(output);
      auto [it, fresh] = seen.try_emplace(key, static_cast<int>(list.size()));
      if (fresh) list.emplace_back(node, output);
      return it->second;
    };
    std::vector<int> store_of(r.members.size(), -1);  // member -> the tensor it is stored in
    for (size_t k = 0; k < r.members.size(); ++k) {
      const ir::Node* n = nodes_[r.members[k]];
      const ops::OpInfo& info = ops::op_info(n->op());
      cpu::FusedStep step;
      step.op = info.functional;
      const auto& specs = info.schema.args;
      cpu::FusedOperand* operand[2] = {&step.a, &step.b};
      int next = 0;
      for (size_t a = 0; a < n->args().size(); ++a) {
        const ir::Arg& arg = n->args()[a];
        bool tensor_arg = specs[a].type == ops::ArgType::tensor;
        if (const auto* ref = std::get_if<ir::Ref>(&arg)) {
          cpu::FusedOperand& o = *operand[next++];
          size_t src = pos.at(ref->node);
          if (auto it = step_of.find(src); it != step_of.end()) {
            o = {cpu::FusedOperand::Kind::step, static_cast<int>(it->second)};
          } else if (ref->node->meta()[static_cast<size_t>(ref->output)].shape.empty()) {
            o = {cpu::FusedOperand::Kind::scalar, slot(scalar_of, r.scalars, src, ref->output)};
          } else {
            o = {cpu::FusedOperand::Kind::tensor, slot(tensor_of, r.tensors, src, ref->output)};
          }
        } else if (const auto* sc = std::get_if<Scalar>(&arg); sc && tensor_arg) {
          *operand[next++] = {cpu::FusedOperand::Kind::scalar, static_cast<int>(r.scalars.size())};
          r.scalars.emplace_back(kConstant, static_cast<int>(r.constants.size()));
          r.constants.push_back(wrapped_number(*sc));
        } else if (sc && step.op == ops::OpKind::clamp) {
          (a == 1 ? step.lo : step.hi) = *sc;
        } else if (sc) {
          step.param = *sc;  // alpha, threshold
        } else if (const auto* str = std::get_if<Str>(&arg)) {
          step.tanh = *str == "tanh";
        }
      }
      if (r.stored[k]) {
        if (info.is_inplace()) {  // into self: a tensor of the region or a stored member
          const auto& self = std::get<ir::Ref>(n->args()[0]);
          size_t src = pos.at(self.node);
          auto it = step_of.find(src);
          step.store = it != step_of.end() ? store_of[it->second]
                                           : slot(tensor_of, r.tensors, src, self.output);
        } else {
          step.store = slot(tensor_of, r.tensors, r.members[k], 0);
        }
        store_of[k] = step.store;
      }
      r.steps.push_back(step);
      label += fmt::format("{}{}", k ? ", " : "fused(", ops::op_name(n->op()));
    }
    claim(region_of_, index, r.members, r.members.back(), label + ")");
    regions_.push_back(std::move(r));
  }
}

// Note [Asynchronous collectives in programs]
// A captured collective is followed by wait_tensor (C5), as in PyTorch's graphs. The
// executor launches such a collective asynchronously (the kernel leaves its Work in this
// thread's pending_work_slot instead of waiting) and waits for it only before the first
// node that reads its result through the wait_tensor -- so the compute between the two
// overlaps the communication (a backward's gradient all_reduce with the layers below it).
// While a collective is in flight its engine still reads its input and writes its
// output, so the memory plan keeps its inputs alive until the wait (its output is alive
// anyway: the wait_tensor aliases it). A run that fails waits for what it launched before
// the error leaves. The order of collectives is the graph's on every rank, as it must be.
void Executor::find_async_collectives() {
  using ops::OpKind;
  wait_at_.assign(nodes_.size(), kNone);
  waits_before_.assign(nodes_.size(), {});
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const ir::Node* n = nodes_[i];
    if (n->opcode() != ir::Opcode::call) continue;
    switch (n->op()) {
      case OpKind::all_reduce:
      case OpKind::all_gather_into_tensor:
      case OpKind::reduce_scatter_tensor:
      case OpKind::all_to_all_single:
      case OpKind::all_to_all_single_v:
      case OpKind::broadcast: break;
      default: continue;
    }
    if (n->users().empty() || runs_at_[i] != i) continue;
    size_t first_read = nodes_.size();
    bool only_waits = true;
    for (const ir::Node* u : n->users()) {
      only_waits = only_waits && u->opcode() == ir::Opcode::call && u->op() == OpKind::wait_tensor;
      if (!only_waits) break;
      for (const ir::Node* r : u->users()) first_read = std::min(first_read, runs_at_[pos_.at(r)]);
    }
    if (!only_waits || first_read == nodes_.size()) continue;  // read where it is made
    wait_at_[i] = first_read;
    waits_before_[first_read].push_back(i);
    any_async_ = true;
  }
}

Executor::Executor(ExportedProgram& program, ExecutorOptions options) : program_(program) {
  nodes_ = program.graph.nodes();
  for (size_t i = 0; i < nodes_.size(); ++i) pos_[nodes_[i]] = i;
  region_of_.assign(nodes_.size(), -1);
  attention_of_.assign(nodes_.size(), -1);
  epilogue_of_.assign(nodes_.size(), -1);
  runs_at_.resize(nodes_.size());
  labels_.resize(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) runs_at_[i] = i;
  min_attention_bytes_ = options.min_attention_bytes;
  // (Y3) Values whose sizes are data: made per run, their unbacked symbols bound from them.
  data_dependent_.assign(nodes_.size(), false);
  binds_.resize(nodes_.size());
  bool any_unbacked = false;
  for (const SymbolInfo& s : program.shapes.symbols) any_unbacked = any_unbacked || s.unbacked;
  auto unbacked = [&](const SymInt& v) {
    if (!v.is_symbolic()) return false;
    for (const sym::Expr* s : sym::symbols_of(v.expr())) {
      int k = program.shapes.index_of(s);
      if (k >= 0 && program.shapes.symbols[static_cast<size_t>(k)].unbacked) return true;
    }
    return false;
  };
  for (size_t i = 0; any_unbacked && i < nodes_.size(); ++i) {
    const ir::MetaList& metas = nodes_[i]->meta();
    for (size_t k = 0; k < metas.size(); ++k) {
      const ir::ValueMeta& m = metas[k];
      for (size_t d = 0; d < m.shape.size(); ++d) {
        SymInt s = m.shape.sym(d);
        data_dependent_[i] = data_dependent_[i] || unbacked(s) || unbacked(m.strides.sym(d));
        if (unbacked(s) && s.expr()->op == sym::Op::symbol)
          binds_[i].push_back({k, d, static_cast<size_t>(program.shapes.index_of(s.expr()))});
      }
      data_dependent_[i] = data_dependent_[i] || unbacked(m.offset);
    }
  }
  const char* env = std::getenv("KILN_FUSION");
  KILN_CHECK(!env || std::string_view(env) == "0" || std::string_view(env) == "1", value,
             "[Executor] KILN_FUSION must be 0 (no fusion) or 1, got '{}'", env);
  // Fusion plans from sizes, which are not all known before a run with data-dependent ones:
  // nodes whose sizes are the data's run op by op, the rest fuse (docs/dynamic-shapes.md).
  if (options.fuse && !(env && std::string_view(env) == "0")) {
    find_epilogues();  // a product takes its epilogue before regions form
    find_regions();
    find_attention();
  }
  find_async_collectives();
  if (program.shapes.empty()) {
    plans_.emplace_back();
    build_plan(plans_.front().second);
    current_ = &plans_.front().second;
  }
}

// (Y5) A program with symbols is planned per binding: the metas of every node evaluated
// at it, then the same plan a static program gets. The last kMaxPlans bindings are kept,
// the most recent first.
const Executor::Plan& Executor::plan_for(const std::vector<int64_t>& binding) {
  if (program_.shapes.empty()) return plans_.front().second;
  for (auto it = plans_.begin(); it != plans_.end(); ++it)
    if (it->first == binding) {
      if (it != plans_.begin()) plans_.splice(plans_.begin(), plans_, it);
      return plans_.front().second;
    }
  if (plans_.size() == kMaxPlans) plans_.pop_back();
  plans_.emplace_front(binding, Plan{});
  Plan& plan = plans_.front().second;
  plan.metas.resize(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (const ir::ValueMeta& m : nodes_[i]->meta())  // (Y3) data-dependent ones stay symbolic
      plan.metas[i].push_back(data_dependent_[i] ? m : evaluate(m, program_.shapes, binding));
  build_plan(plan);
  ++plans_built_;
  return plan;
}

void Executor::build_plan(Plan& plan) {
  auto meta_of = [&](size_t node) -> std::span<const ir::ValueMeta> {
    if (plan.metas.empty()) return nodes_[node]->meta();
    return plan.metas[node];
  };
  std::vector<Outputs>& planned_ = plan.planned;
  PlanStats& stats_ = plan.stats;
  std::unordered_map<const ir::Node*, int> pos;
  for (size_t i = 0; i < nodes_.size(); ++i) pos[nodes_[i]] = static_cast<int>(i);
  planned_.resize(nodes_.size());

  // Every value (one per output of each node) by a flat index: node i's output k is
  // first[i] + k. Each value's own lifetime: the outputs of one node die apart (a fused
  // backward op's d input is dead long before its d weight, read by the optimizer).
  std::vector<size_t> first(nodes_.size() + 1);
  for (size_t i = 0; i < nodes_.size(); ++i)
    first[i + 1] = first[i] + std::max<size_t>(nodes_[i]->meta().size(), 1);
  auto value = [&](const ir::Ref& r) {
    return first[pos.at(r.node)] + static_cast<size_t>(r.output);
  };
  // Aliasing root of each value: views and in-place ops share their input's.
  std::vector<size_t> root(first.back());
  for (size_t v = 0; v < root.size(); ++v) root[v] = v;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    ir::Node* n = nodes_[i];
    if (n->opcode() != ir::Opcode::call) continue;
    const ops::OpInfo& info = ops::op_info(n->op());
    int alias = info.is_view() ? info.schema.view_of_arg : info.schema.mutated_arg;
    if (alias >= 0) root[first[i]] = root[value(std::get<ir::Ref>(n->args()[alias]))];
  }
  // A root dies after the last use of any value sharing it; program outputs never die.
  // A fused region's members all run (read and write) where its last one is.
  const int kForever = static_cast<int>(nodes_.size());
  auto at = [&](size_t i) { return static_cast<int>(runs_at_[i]); };
  std::vector<int> death(first.back());
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (size_t v = first[i]; v < first[i + 1]; ++v) death[v] = at(i);
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (const ir::Ref& r : nodes_[i]->inputs()) {
      int& d = death[root[value(r)]];
      d = nodes_[i]->opcode() == ir::Opcode::output ? kForever : std::max(d, at(i));
      // Note [Asynchronous collectives in programs]: read until the wait
      if (wait_at_[i] != kNone) d = std::max(d, static_cast<int>(wait_at_[i]));
    }
  // Region members' values only live in the region's blocks unless stored.
  std::vector<bool> never_made(nodes_.size(), false);
  for (const Region& reg : regions_)
    for (size_t k = 0; k < reg.members.size(); ++k) never_made[reg.members[k]] = !reg.stored[k];
  for (const Attention& a : attention_)
    for (size_t m : {a.scores, a.scale, a.softmax})
      if (m != kNone) never_made[m] = true;
  for (const Epilogue& e : epilogues_)
    for (size_t m : {e.product, e.relu, e.add})
      if (m != kNone && m != e.last) never_made[m] = true;

  // The values to plan: fresh outputs that die within the program, with their live
  // interval [defined at, last read at].
  struct Planned {
    size_t node, output, bytes;
    int start, end;
    Device device;
  };
  // A node of several outputs may have some planned and others (program outputs) made
  // per run: planned_ then holds undefined tensors for the latter.
  std::vector<Planned> values;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    ir::Node* n = nodes_[i];
    if (n->opcode() != ir::Opcode::call) continue;
    const ops::OpInfo& info = ops::op_info(n->op());
    bool fresh =
        info.meta && !info.is_view() && !info.is_inplace() && !never_made[i] && !data_dependent_[i];
    bool any = false;
    for (size_t k = 0; k < n->meta().size(); ++k) {
      const ir::ValueMeta& m = meta_of(i)[k];
      int64_t bytes = numel_of(m.shape) * static_cast<int64_t>(itemsize(m.dtype));
      size_t v = first[i] + k;
      if (!fresh || death[v] == kForever) {
        if (death[v] == kForever && root[v] == v) stats_.unplanned_bytes += bytes;
        continue;
      }
      any = true;
      values.push_back({i, k, static_cast<size_t>(bytes), at(i), death[v], m.device});
    }
    if (any)  // filled below
      for (size_t k = 0; k < n->meta().size(); ++k) planned_[i].push_back(Tensor());
  }
  // Note [Outputs in their input's buffer]: an elementwise op (or a scatter) whose
  // `self` is a planned value that dies at it, with the same layout and read through no
  // other argument, writes its output into self's buffer: each element is read before it
  // is written at the same place (the kernels read self[i], then write out[i]; a
  // scatter's copy of self onto itself is skipped). linear_backward writes d input over
  // its input the same way, having read it for d weight first (writes_over_arg): at the
  // start of a train step's backward that is the largest activation's buffer, reused
  // instead of a third one of that size. Such values form one group, planned
  // as one value over their joined interval: gradients summed into zeros
  // (Note [Sums of disjoint scatters]) fill one buffer instead of cloning it per region.
  std::unordered_map<size_t, size_t> planned_index;  // value -> index in `values`
  for (size_t v = 0; v < values.size(); ++v)
    planned_index[first[values[v].node] + values[v].output] = v;
  std::vector<size_t> group(values.size());
  for (size_t v = 0; v < group.size(); ++v) group[v] = v;
  auto group_of = [&](size_t v) {
    while (group[v] != v) v = group[v] = group[group[v]];
    return v;
  };
  for (size_t v = 0; v < values.size(); ++v) {
    ir::Node* n = nodes_[values[v].node];
    int over = writes_over_arg(n->op(), values[v].output);
    if (over < 0 || static_cast<size_t>(over) >= n->args().size() ||
        region_of_[values[v].node] >= 0 || attention_of_[values[v].node] >= 0 ||
        epilogue_of_[values[v].node] >= 0)
      continue;
    const auto* self = std::get_if<ir::Ref>(&n->args()[static_cast<size_t>(over)]);
    if (!self) continue;
    size_t s = value(*self);
    auto it = planned_index.find(s);
    if (it == planned_index.end() || root[s] != s || death[s] != at(values[v].node) ||
        !(meta_of(static_cast<size_t>(pos.at(self->node)))[static_cast<size_t>(self->output)] ==
          meta_of(values[v].node)[values[v].output]))
      continue;
    bool read_elsewhere = false;
    for (size_t a = 0; a < n->args().size(); ++a)
      if (const auto* r = std::get_if<ir::Ref>(&n->args()[a]);
          r && a != static_cast<size_t>(over) && root[value(*r)] == s)
        read_elsewhere = true;
    if (read_elsewhere) continue;
    group[group_of(v)] = group_of(it->second);
  }
  // A group's members after the first keep their own entries but are placed with it.
  std::vector<size_t> leaders;
  std::unordered_map<size_t, std::vector<size_t>> members;
  for (size_t v = 0; v < values.size(); ++v) {
    size_t g = group_of(v);
    if (g == v) leaders.push_back(v);
    members[g].push_back(v);
  }
  for (size_t g : leaders)
    for (size_t v : members[g]) {
      values[g].start = std::min(values[g].start, values[v].start);
      values[g].end = std::max(values[g].end, values[v].end);
    }

  // Greedy by size: the largest values first, each into the first buffer of its device
  // that is big enough and free for its whole interval, else a new buffer of its size.
  // (Placing big values first lets small ones fill their gaps; planning in program
  // order instead took ~20% more memory on a BLOCK train step.)
  std::vector<size_t> order = leaders;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return values[a].bytes > values[b].bytes; });
  struct Buffer {
    Storage storage;
    size_t bytes;
    std::vector<std::pair<int, int>> busy;  // live intervals of the values it holds
  };
  std::vector<Buffer> buffers;
  for (size_t v : order) {
    const Planned& p = values[v];
    Buffer* home = nullptr;
    for (Buffer& b : buffers) {
      if (b.storage->device != p.device || b.bytes < p.bytes) continue;
      bool free = true;
      for (auto [s, e] : b.busy) free = free && (p.end < s || e < p.start);
      if (free) {
        home = &b;
        break;
      }
    }
    if (!home) {
      Allocator& a = device_allocator(p.device);
      size_t size = std::max<size_t>(p.bytes, 1);
      buffers.push_back(
          {std::make_shared<StorageImpl>(a.allocate(size), size, p.device, &a, false), size, {}});
      stats_.planned_bytes += static_cast<int64_t>(size);
      home = &buffers.back();
    }
    home->busy.push_back({p.start, p.end});
    for (size_t m : members[v]) {
      const Planned& q = values[m];
      planned_[q.node][q.output] = over(home->storage, meta_of(q.node)[q.output]);
      ++stats_.planned_values;
    }
  }
  stats_.buffers = static_cast<int>(buffers.size());
}

TensorList Executor::run(const TensorList& user_inputs) {
  KILN_CHECK(!running_.exchange(true), value,
             "[run] this Executor is already running on another thread; an Executor owns its "
             "planned buffers, so use one Executor per thread (they may share the program)");
  struct Done {
    std::atomic<bool>& flag;
    ~Done() { flag = false; }
  } done{running_};
  auto lock = program_.lock_for_run();
  std::vector<int64_t> binding;
  TensorList inputs = program_.bind_inputs(user_inputs, &binding);  // (R3, Y4) before anything runs
  const Plan& plan = plan_for(binding);
  current_ = &plan;
  ir::SymbolValues symbol_values;
  if (!binding.empty())
    symbol_values = [&](const sym::Expr* s) {
      return binding.at(static_cast<size_t>(program_.shapes.index_of(s)));
    };
  std::vector<Outputs> env(nodes_.size());
  size_t next_input = 0;
  TensorList outs;
  std::vector<Value> args;
  // Note [Asynchronous collectives in programs]: the collectives in flight, by node; all
  // waited for before the run returns or throws.
  struct InFlight {
    std::vector<std::shared_ptr<dist::Work>> work;
    ~InFlight() {
      for (auto& w : work)
        if (w) try {
            w->wait();
          } catch (const std::exception& e) {  // the run's own error is the one to report
            std::fprintf(stderr, "kiln: a collective in flight failed while a run unwound: %s\n",
                         e.what());
          }
    }
  } in_flight{std::vector<std::shared_ptr<dist::Work>>(any_async_ ? nodes_.size() : 0)};
  for (size_t i = 0; i < nodes_.size(); ++i) {
    ir::Node* n = nodes_[i];
    auto value_of = [&](const ir::Ref& r) -> const Tensor& {
      return env[pos_.at(r.node)][r.output];
    };
    for (size_t c : waits_before_[i])
      if (auto& w = in_flight.work[c]) std::exchange(w, nullptr)->wait();
    switch (n->opcode()) {
      case ir::Opcode::input: env[i].push_back(inputs[next_input++]); break;
      case ir::Opcode::constant: env[i].push_back(n->value()); break;
      case ir::Opcode::call: {
        if (runs_at_[i] != i) break;  // a fused group's member: runs with its last one
        bool fused = epilogue_of_[i] >= 0 || attention_of_[i] >= 0 || region_of_[i] >= 0;
        if (!fused) {
          args.clear();
          ir::call_args(*n, value_of, args);
          if (!binding.empty()) ir::bind_size_args(n->op(), args, symbol_values);
        }
        std::chrono::steady_clock::time_point t0;
        if (profiling_) t0 = std::chrono::steady_clock::now();
        if (epilogue_of_[i] >= 0) {  // Note [Product epilogues]
          run_epilogue(epilogues_[static_cast<size_t>(epilogue_of_[i])], plan, env, args);
        } else if (attention_of_[i] >= 0) {  // Note [Blocked attention]
          run_attention(attention_[static_cast<size_t>(attention_of_[i])], plan, env);
        } else if (region_of_[i] >= 0) {  // Note [Fused pointwise regions]
          run_region(regions_[static_cast<size_t>(region_of_[i])], plan, env, args);
        } else {
          struct Slot {  // an asynchronous collective leaves its Work here
            std::shared_ptr<dist::Work>* saved = nullptr;
            bool set = false;
            ~Slot() {
              if (set) dist::pending_work_slot() = saved;
            }
          } slot;
          if (wait_at_[i] != kNone) {  // only collectives touch the slot
            slot.saved = std::exchange(dist::pending_work_slot(), &in_flight.work[i]);
            slot.set = true;
          }
          if (!plan.planned[i].size()) {
            env[i] = dispatch(n->op(), args);
          } else {
            env[i] = plan.planned[i];
            for (size_t k = 0; k < env[i].size(); ++k)  // a program output: made per run
              if (!env[i][k].defined()) env[i][k] = output_of(plan, i, k);
            dispatch_into(n->op(), args, env[i]);
          }
        }
        for (const auto& [k, d, symbol] : binds_[i]) {  // (Y3) an unbacked size, now known
          int64_t size = env[i][k].size(static_cast<int64_t>(d));
          const SymbolInfo& s = program_.shapes.symbols[symbol];
          int64_t& bound = binding[symbol];
          KILN_CHECK(bound == kUnbound || bound == size, value,
                     "[run] {} is {} here but was {} earlier in this run", sym::str(s.expr), size,
                     bound);
          bound = size;
          check_assertions_of(program_.shapes, binding, symbol);  // the facts stated first
          KILN_CHECK(size >= s.min && size <= s.max, value,
                     "[run] the data gave {} = {} ({}), outside its range [{}, {}]",
                     sym::str(s.expr), size, s.source, s.min, s.max);
        }
        if (profiling_) {
          for (const ir::ValueMeta& m : n->meta())
            if (m.device.type == DeviceType::cuda) synchronize_device(m.device);
          node_seconds_[i] +=
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          ++node_calls_[i];
        }
        break;
      }
      case ir::Opcode::output:
        for (const ir::Ref& r : std::get<ir::RefList>(n->args()[0])) outs.push_back(value_of(r));
        break;
    }
  }
  return program_.write_back(outs, user_inputs);
}

void Executor::run_region(const Region& reg, const Plan& plan, std::vector<Outputs>& env,
                          std::vector<Value>& args) {
  const ir::Node* last = nodes_[reg.members.back()];
  Device device = last->meta()[0].device;
  // Each stored functional member's output (planned, or made per run as a program
  // output); an in-place member's value is its self.
  for (size_t k = 0; k < reg.members.size(); ++k) {
    size_t i = reg.members[k];
    const ir::Node* n = nodes_[i];
    if (!reg.stored[k]) continue;
    if (ops::op_info(n->op()).is_inplace()) {
      const auto& self = std::get<ir::Ref>(n->args()[0]);
      env[i] = {env[pos_.at(self.node)][static_cast<size_t>(self.output)]};
    } else {
      env[i] = {output_of(plan, i)};
    }
  }
  TensorList tensors, scalars;
  for (auto [node, output] : reg.tensors) tensors.push_back(env[node][static_cast<size_t>(output)]);
  for (auto [node, output] : reg.scalars)
    scalars.push_back(node == kConstant ? reg.constants[static_cast<size_t>(output)]
                                        : env[node][static_cast<size_t>(output)]);
  const ir::ValueMeta& shape =
      plan.metas.empty() ? last->meta()[0] : plan.metas[reg.members.back()][0];
  bool ran;
  {
    KernelScope scope("fused_pointwise", device);
    ran = cpu::run_fused_pointwise(reg.steps, tensors, scalars, numel_of(shape.shape));
  }
  if (ran) return;
  // A layout the kernel does not take (Note [Fused pointwise regions]): op by op.
  run_nodes_one_by_one(reg.members, env, args);
}

void Executor::set_profiling(bool on) {
  profiling_ = on;
  node_seconds_.resize(nodes_.size());
  node_calls_.resize(nodes_.size());
}

std::vector<OpTime> Executor::profile(bool by_input_shapes) const {
  std::map<std::pair<std::string_view, std::string>, OpTime> by_op;
  for (size_t i = 0; i < node_calls_.size(); ++i) {
    if (!node_calls_[i]) continue;
    std::string_view name =
        labels_[i].empty() ? ops::op_name(nodes_[i]->op()) : std::string_view(labels_[i]);
    std::string inputs;
    if (by_input_shapes)
      for (const ir::Ref& r :  // a product epilogue's: the product's inputs
           nodes_[epilogue_of_[i] >= 0 ? epilogues_[static_cast<size_t>(epilogue_of_[i])].product
                                       : i]
               ->inputs()) {
        const ir::ValueMeta& m = r.node->meta()[static_cast<size_t>(r.output)];
        inputs +=
            fmt::format("{}{}{}", inputs.empty() ? "" : ", ", to_string(m.dtype), m.shape.str());
      }
    OpTime& t = by_op[{name, inputs}];
    t.op = name;
    t.inputs = std::move(inputs);
    t.calls += node_calls_[i];
    t.seconds += node_seconds_[i];
  }
  std::vector<OpTime> table;
  for (auto& [name, t] : by_op) table.push_back(std::move(t));
  std::stable_sort(table.begin(), table.end(),
                   [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
  return table;
}

}  // namespace kiln::runtime

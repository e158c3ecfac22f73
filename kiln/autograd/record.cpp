// Recording: what autograd does to each op call while gradients are on (G1, G4).
#include "kiln/autograd/record.h"

#include <atomic>

#include "kiln/autograd/function.h"
#include "kiln/core/pool.h"
#include "kiln/core/warning.h"
#include "kiln/dispatch/dispatch.h"

namespace kiln::autograd {

using ops::OpInfo;
using ops::OpKind;

namespace {
thread_local bool t_writable_leaves = false;
std::atomic<uint64_t> g_sequence{0};

// "layer_norm" -> "LayerNormBackward0", "_to_copy" -> "ToCopyBackward0" (PyTorch's names).
std::string backward_name(std::string_view op) {
  std::string name;
  bool upper = true;
  for (char c : op) {
    if (c == '_') {
      upper = true;
      continue;
    }
    name += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return name + "Backward0";
}

// (G4) A view made before a recorded in-place write to its storage has a history that
// no longer describes its data: kiln does not rebase views (documented in
// docs/autograd.md), so using one is an error rather than a wrong gradient.
void check_view_current(const OpInfo& info, const Tensor& t, std::string_view arg) {
  uint32_t made = t.impl()->view_made_at;
  if (made == 0 || made > t.storage()->recorded_write) return;
  fail(ErrorKind::value,
       "[{}] argument '{}' ({}) is a view made before its base was modified in place by an op "
       "autograd recorded; its gradient history is stale. Make the view after the in-place op",
       info.name, arg, t.meta_str());
}

// Note [In-place writes through views]
// (G4) A recorded in-place op on a view v of a base b changes b's value too. As PyTorch's
// CopySlices, b's history becomes a node of as_strided_scatter(b before, v after): the
// gradient of b flows to b's old history outside v's elements and through the in-place
// op's node inside them. v's own history is the in-place op's node (its value is that
// op's output). Other views of b made before the write are stale: the next recorded op
// that reads one first gives it the history as_strided(b now) (refresh_view), as PyTorch
// regenerates a view's grad_fn.

// The root base whose history a recorded write through `view` rebases; errors where
// kiln cannot: no base known (a view made outside dispatch), a leaf that requires grad
// (as PyTorch), a base that is not a dense tensor from its storage's start, a DTensor.
Tensor view_base_to_rebase(const OpInfo& info, const Tensor& view) {
  KILN_CHECK(!view.is_dtensor(), unsupported,
             "[{}] modifies in place a view ({}) of a distributed tensor while recording "
             "gradients. Compute the new value out of place, or clone the view first",
             info.name, view.meta_str());
  const std::shared_ptr<TensorImpl>& root = view.impl()->view_base;
  KILN_CHECK(root, unsupported,
             "[{}] modifies in place a view ({}) whose base kiln does not know (a view made "
             "outside dispatch) while recording gradients. Compute the new value out of place, or "
             "clone the view first",
             info.name, view.meta_str());
  Tensor base(root);
  const AutogradMeta* m = base.impl()->autograd.get();
  KILN_CHECK(!(m && m->requires_grad && !m->grad_fn) || t_writable_leaves, value,
             "[{}] modifies in place a view ({}) of a leaf tensor that requires grad ({}): its "
             "gradient would describe a value that no longer exists. Write to a clone, or under "
             "NoGradGuard",
             info.name, view.meta_str(), base.meta_str());
  KILN_CHECK(base.offset() == 0 && base.is_contiguous(), unsupported,
             "[{}] modifies in place a view ({}) of a tensor that is not dense from the start of "
             "its storage ({}) while recording gradients. Clone the base first",
             info.name, view.meta_str(), base.meta_str());
  return base;
}

// Makes `node` (its edges set) the history of `t`, its one output.
void attach_single_output(const Tensor& t, std::shared_ptr<Node> node) {
  node->inputs.push_back({t.shape(), t.dtype(), t.device()});
  node->device = t.device();
  node->sequence = g_sequence.fetch_add(1, std::memory_order_relaxed);
  AutogradMeta& m = detail::meta_of(t);
  m.grad_fn = std::move(node);
  m.output_nr = 0;
  m.requires_grad = false;
}

// Makes `t`'s history a node of `op` (as_strided or as_strided_scatter, whose formulas read
// only the arguments' layouts and the gradient) with edges `next`.
void set_layout_history(const Tensor& t, OpKind op, PoolVector<Value> args,
                        PoolVector<int> first_slot, std::initializer_list<Edge> next,
                        const char* display_name = nullptr) {
  auto node = make_pooled<FormulaNode>();
  node->op = node->called = op;
  node->display_name = display_name;
  node->args = std::move(args);
  node->first_slot = std::move(first_slot);
  node->next.assign(next.begin(), next.end());
  attach_single_output(t, std::move(node));
}

// Gives `base` the history of its value after `node` wrote `view` in place (see the Note).
void rebase_onto_view_write(const Tensor& base, Edge base_before, const Tensor& view,
                            const std::shared_ptr<FormulaNode>& node) {
  set_layout_history(base, OpKind::as_strided_scatter,
                     {Tensor(), Tensor(), ints(view.shape()), ints(view.strides()), view.offset()},
                     {0, 1, -1, -1, -1}, {std::move(base_before), Edge{node, 0}}, "CopySlices");
  view.impl()->view_made_at = view.storage()->version + 1;  // its history is current
}

}  // namespace

namespace detail {
uint64_t next_node_sequence() { return g_sequence.fetch_add(1, std::memory_order_relaxed); }
}  // namespace detail

WritableLeavesGuard::WritableLeavesGuard() : prev_(t_writable_leaves) { t_writable_leaves = true; }
WritableLeavesGuard::~WritableLeavesGuard() { t_writable_leaves = prev_; }

Edge gradient_edge(const Tensor& t);  // engine.cpp

// ---- FormulaNode and GradCtx --------------------------------------------------------

std::string FormulaNode::name() const {
  return display_name ? display_name : backward_name(ops::op_name(op));
}

void FormulaNode::release() {
  if (saved.empty()) return;  // nothing saved: running it again needs nothing freed
  for (const SavedTensor& s : saved)
    if (s.arg >= 0) args[static_cast<size_t>(s.arg)] = Tensor();
  results.clear();
  saved.clear();
  released = true;
}

GradList FormulaNode::apply(GradList& grads) {
  GradList out(next.size());
  GradCtx ctx(*this, grads, out);
  auto formula = derivative(op).formula;
  KILN_CHECK(
      formula, unsupported,
      "[{}] has no backward formula: backward() reached it through an argument that requires grad. "
      "Register one (OpDefinition::backward), declare the op not differentiable, or call it under "
      "NoGradGuard",
      ops::op_name(called));
  formula(ctx);
  return out;
}

Args GradCtx::args() const { return Args(node_.args); }
const std::vector<Dims>& GradCtx::list_shapes() const { return node_.list_shapes; }
const Tensor& GradCtx::result(int i) const {
  const Tensor& saved = node_.results[static_cast<size_t>(i)];
  if (!grad_enabled()) return saved;  // an ordinary backward records nothing
  // create_graph: the formula's use of the output is differentiated too, through the
  // output's own history (this node), which the saved alias lacks to avoid a cycle.
  if (live_results_.empty()) live_results_.resize(node_.results.size());
  Tensor& live = live_results_[static_cast<size_t>(i)];
  if (!live.defined()) {
    live = saved.detach_descriptor();
    AutogradMeta& m = detail::meta_of(live);
    m.grad_fn = const_cast<FormulaNode&>(node_).shared_from_this();
    m.output_nr = static_cast<uint32_t>(i);
  }
  return live;
}
bool GradCtx::flowed(int i) const { return i >= 64 || (node_.flowed >> i & 1); }
int GradCtx::slot(int arg, int j) const { return node_.first_slot[static_cast<size_t>(arg)] + j; }
bool GradCtx::needs(int arg, int j) const {
  int s = node_.first_slot[static_cast<size_t>(arg)];
  return s >= 0 && node_.next[static_cast<size_t>(s + j)].valid();
}
const GradMeta& GradCtx::input(int arg, int j) const {
  KILN_CHECK(needs(arg, j), internal,
             "[{}] formula reads the metadata of input {} that needs no "
             "gradient",
             node_.name(), arg);
  const Edge& e = node_.next[static_cast<size_t>(slot(arg, j))];
  return e.node->inputs[e.input_nr];
}
void GradCtx::set(int arg, Tensor g, int j) {
  if (needs(arg, j)) out_[static_cast<size_t>(slot(arg, j))] = std::move(g);
}

// ---- dispatch's entry points --------------------------------------------------------

namespace detail {

bool refresh_view(const Tensor& t) {
  auto has_history = [&] {  // not Tensor::requires_grad, which calls here
    const AutogradMeta* m = t.impl()->autograd.get();
    return m && (m->requires_grad || m->grad_fn);
  };
  const std::shared_ptr<TensorImpl>& root = t.impl()->view_base;
  if (!root) return has_history();  // no base known: check_view_current reports it
  Tensor base(root);
  Edge base_edge = gradient_edge(base);
  if (!base_edge.valid()) return has_history();
  // t = as_strided(base, t's geometry): the formula reads only the base's layout.
  set_layout_history(t, OpKind::as_strided,
                     {base.detach_descriptor(), ints(t.shape()), ints(t.strides()), t.offset()},
                     {0, -1, -1, -1}, {std::move(base_edge)});
  t.impl()->view_made_at = t.storage()->version + 1;
  return true;
}

Outputs record(OpKind op, std::span<const Value> args) {
  const OpInfo& info = ops::op_info(op);
  Derivative d = derivative(op);
  if (d.kind == Differentiable::missing) {
    KILN_CHECK(!ops::is_builtin(op), internal, "[{}] has no entry in the derivative table",
               info.name);
    // (E4) As PyTorch: the forward runs and records a node; backward() through it fails,
    // naming the op (its formula may still be registered before then). A warning now.
    warn_once(fmt::format("no backward formula for {}", info.name),
              fmt::format(
                  "[{}] has no backward formula, and an argument requires grad: backward() through "
                  "its outputs will fail unless one is registered first",
                  info.name));
    d = {Differentiable::yes, 0, nullptr};
  }
  if (d.kind == Differentiable::no) {  // outputs need no gradient
    if (info.is_inplace()) bump_version(op, args);
    return redispatch(op, args);
  }
  const auto& specs = info.schema.args;
  auto node = make_pooled<FormulaNode>();
  node->op = info.functional;
  node->called = op;
  node->first_slot.assign(args.size(), -1);
  // One edge per tensor input (list elements included), in argument order.
  for (size_t i = 0; i < args.size(); ++i) {
    if (auto* t = std::get_if<Tensor>(&args[i])) {
      node->first_slot[i] = static_cast<int>(node->next.size());
      if (detail::wants_grad(*t))
        check_view_current(info, *t, specs[i].name);  // a stale view refreshed
      node->next.push_back(gradient_edge(*t));
    } else if (auto* list = std::get_if<TensorList>(&args[i])) {
      node->first_slot[i] = static_cast<int>(node->next.size());
      for (const Tensor& x : *list) {
        node->list_shapes.push_back(x.shape());
        if (detail::wants_grad(x)) check_view_current(info, x, specs[i].name);
        node->next.push_back(gradient_edge(x));
      }
    }
  }

  int mutated = info.schema.mutated_arg;
  const Tensor* self =
      mutated >= 0 ? &std::get<Tensor>(args[static_cast<size_t>(mutated)]) : nullptr;
  Tensor base;  // the root base of a view written in place, whose history is rebased
  Edge base_edge;
  if (self) {
    const AutogradMeta* m = self->impl()->autograd.get();
    KILN_CHECK(!(m && m->requires_grad && !m->grad_fn) || t_writable_leaves, value,
               "[{}] cannot modify in place a leaf tensor that requires grad ({}): its gradient "
               "would describe a value that no longer exists. Write to a clone, or under "
               "NoGradGuard",
               info.name, self->meta_str());
    if (self->impl()->view_made_at != 0) {
      base = view_base_to_rebase(info, *self);
      base_edge = gradient_edge(base);
    }
  }

  // What the formula reads: the saved tensor arguments (for an in-place op, self's value
  // *before* the write: a copy, and any argument that is self reads the copy too).
  node->args.assign(args.begin(), args.end());
  Tensor before;
  for (size_t i = 0; i < args.size(); ++i) {
    bool saved = i < 31 && (d.saves >> i) & 1u;
    if (auto* list = std::get_if<TensorList>(&node->args[i])) {
      if (!saved) list->clear();
      for (const Tensor& x : *list)
        KILN_CHECK(!x.defined() || !x.is_inference(), value,
                   "[{}] Inference tensors cannot be saved for backward (an element of '{}', {}). "
                   "To work around "
                   "you can make a clone to get a normal tensor and use it in autograd",
                   info.name, specs[i].name, x.meta_str());
      continue;
    }
    auto* t = std::get_if<Tensor>(&node->args[i]);
    if (!t) continue;
    if (!saved || !t->defined()) {
      *t = Tensor();
      continue;
    }
    KILN_CHECK(!t->is_inference(), value,
               "[{}] Inference tensors cannot be saved for backward (argument '{}', {}). To work "
               "around you can "
               "make a clone to get a normal tensor and use it in autograd",
               info.name, specs[i].name, t->meta_str());
    if (self && t->is_same(*self)) {
      if (!before.defined()) {
        Value clone_args[1] = {*self};
        before = std::move(redispatch(OpKind::clone, clone_args)[0]);
      }
      *t = before;
    } else if (self && t->impl()->view_base && t->storage() == self->storage()) {
      // Another view of the storage this op writes: the node will be in its base's history,
      // so saving the view's link to that base would close a cycle. (Backward reports the
      // write anyway: the saved view's version changes with it.)
      auto copy = make_pooled<TensorImpl>(*t->impl());
      copy->view_base.reset();
      *t = Tensor(std::move(copy));
    }
    const AutogradMeta* m = t->impl()->autograd.get();
    node->saved.push_back({*t, t->storage()->version, static_cast<int>(i),
                           m ? m->grad_fn.get() : nullptr, m ? m->output_nr : 0});
  }

  Outputs outs = redispatch(op, args);
  if (self) {  // (G4) the write, counted after what was saved before it
    StorageImpl& s = *self->storage();
    s.recorded_write = ++s.version;
  }

  node->device = outs.size() ? outs[0].device() : Device();
  node->sequence = g_sequence.fetch_add(1, std::memory_order_relaxed);
  node->inputs.reserve(outs.size());
  for (const Tensor& o : outs) node->inputs.push_back({o.shape(), o.dtype(), o.device()});
  if (d.saves & kSavesResult) {
    for (size_t i = 0; i < outs.size(); ++i) {
      // Without history (the output itself would make a cycle through its grad_fn): a
      // second handle on its data, which the modes are told stands for the output (a
      // traced backward reads the output's own node; no alias op per saved value).
      Tensor saved = outs[i].detach_descriptor();
      alias_to_modes(saved, outs[i]);
      node->results.push_back(std::move(saved));
      node->saved.push_back(
          {node->results.back(), outs[i].storage()->version, -1 - static_cast<int>(i)});
    }
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!is_floating(outs[i].dtype())) continue;  // integer outputs have no gradient
    AutogradMeta& m = detail::meta_of(outs[i]);
    m.grad_fn = node;
    m.output_nr = static_cast<uint32_t>(i);
    m.requires_grad = false;
  }
  if (self && !outs[0].is_same(*self)) {  // a mode handed back self's twin: rebase self too
    AutogradMeta& m = detail::meta_of(*self);
    m.grad_fn = node;
    m.output_nr = 0;
  }
  if (base.defined()) rebase_onto_view_write(base, std::move(base_edge), *self, node);
  return outs;
}

}  // namespace detail

GradList FunctionNode::apply(GradList& grads) {
  GradList out;
  out.push_back(grads.empty() || !grads[0].defined() ? Tensor() : backward_(grads[0]));
  return out;
}

bool record_function(const Tensor& output, const Tensor& input, std::string name,
                     std::function<Tensor(const Tensor&)> backward) {
  if (!grad_enabled() || !is_floating(output.dtype())) return false;
  Edge edge = gradient_edge(input);
  if (!edge.valid()) return false;
  auto node = std::make_shared<FunctionNode>(std::move(name), std::move(backward));
  node->next.push_back(std::move(edge));
  attach_single_output(output, std::move(node));
  return true;
}

}  // namespace kiln::autograd

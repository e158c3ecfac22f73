// Custom differentiable functions: Note [Custom functions] in custom_function.h.
#include "kiln/autograd/custom_function.h"

#include <algorithm>
#include <optional>

#include "kiln/autograd/function.h"
#include "kiln/core/error.h"

namespace kiln::autograd {

namespace {

bool same_impl(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.impl() == b.impl();
}

bool listed(const std::vector<const TensorImpl*>& impls, const Tensor& t) {
  return t.defined() && std::find(impls.begin(), impls.end(), t.impl()) != impls.end();
}

}  // namespace

/** The node of one custom function call: runs the user's backward. */
class CustomFunctionNode final : public Node {
 public:
  CustomFunctionNode(std::shared_ptr<FunctionCtx> ctx,
                     std::function<TensorList(FunctionCtx&, const TensorList&)> backward, bool once)
      : ctx_(std::move(ctx)), backward_(std::move(backward)), once_(once) {}
  std::string name() const override { return ctx_->name_; }

  GradList apply(GradList& grads) override {
    TensorList g(grads.begin(), grads.end());
    // The engine hands zeros for a floating output none flowed into; without
    // materialize_grads backward sees those as undefined, as PyTorch's.
    if (!ctx_->materialize_grads_)
      for (size_t k = 0; k < g.size() && k < 64; ++k)
        if (!(flowed >> k & 1)) g[k] = Tensor();
    bool recording = grad_enabled();
    std::optional<NoGradGuard> no_grad;
    if (once_) no_grad.emplace();
    TensorList r = backward_(*ctx_, g);
    no_grad.reset();
    KILN_CHECK(
        r.size() == next.size(), value,
        "[{}] backward returned {} gradients, expected {} (one per forward argument, undefined for "
        "the arguments that are not tensors)",
        name(), r.size(), next.size());
    GradList out;
    for (size_t i = 0; i < r.size(); ++i) {
      Tensor gi = std::move(r[i]);
      if (gi.defined()) {
        KILN_CHECK(arg_meta_[i].has_value(), value,
                   "[{}] backward returned a gradient for argument {}, which is not a tensor",
                   name(), i);
        const GradMeta& want = *arg_meta_[i];
        if (gi.shape() != want.shape) {  // a broadcast gradient is summed back (PyTorch does too)
          KILN_CHECK(broadcasts_to(want.shape, gi.shape()), value,
                     "[{}] backward returned a gradient of shape {} for argument {} of shape {}",
                     name(), gi.shape().str(), i, want.shape.str());
          gi = sum_to(gi, want.shape);
        }
        if (once_ && recording) gi = refuse_double_backward(gi, g);
      }
      out.push_back(std::move(gi));
    }
    return out;
  }

  void release() override {
    ctx_->saved_.clear();
    ctx_->saved_versions_.clear();
    released_ = true;
  }

  std::vector<std::optional<GradMeta>> arg_meta_;  // per forward argument, when a tensor
  bool released_ = false;

 private:
  // A once_differentiable result under create_graph: an alias whose history, when a
  // gradient reaches it, is an Error (PyTorch's DelayedError).
  Tensor refuse_double_backward(const Tensor& result, const TensorList& grads) const {
    for (const Tensor& g : grads) {
      if (!g.defined() || !gradient_edge(g).valid()) continue;
      Tensor alias = result.detach_descriptor();
      record_function(alias, g, name(), [n = name()](const Tensor&) -> Tensor {
        fail(ErrorKind::value,
             "[{}] is once_differentiable: its backward cannot be differentiated again", n);
      });
      return alias;
    }
    return result;
  }

  static bool broadcasts_to(const Dims& target, const Dims& g) {
    if (target.size() > g.size()) return false;
    size_t off = g.size() - target.size();
    for (size_t i = 0; i < target.size(); ++i)
      if (target[i] != 1 && target[i] != g[off + i]) return false;
    return true;
  }

  std::shared_ptr<FunctionCtx> ctx_;
  std::function<TensorList(FunctionCtx&, const TensorList&)> backward_;
  bool once_;
};

void FunctionCtx::save_for_backward(TensorList tensors) {
  saved_.clear();
  saved_versions_.clear();
  for (Tensor& t : tensors) {
    saved_versions_.push_back(t.defined() ? t.storage()->version : 0);
    saved_.push_back(std::move(t));
  }
}

TensorList FunctionCtx::saved_tensors() const {
  auto node = node_.lock();
  KILN_CHECK(!node || !node->released_, value,
             "[{}] Trying to backward through the graph a second time (or directly access saved "
             "tensors after "
             "they have already been freed); pass retain_graph=true the first time",
             name_);
  TensorList out;
  for (size_t i = 0; i < saved_.size(); ++i) {
    const Tensor& t = saved_[i];
    KILN_CHECK(
        !t.defined() || t.storage()->version == saved_versions_[i], value,
        "[{}] one of the tensors needed for gradient computation has been modified by an inplace "
        "operation: saved tensor {} ({}) is at version {}; expected version {} instead",
        name_, i, t.meta_str(), t.storage()->version, saved_versions_[i]);
    Tensor v = t;
    if (i < saved_output_nr_.size() && saved_output_nr_[i] >= 0 && node) {
      // a saved output: kept without history (the node holds the context), given its
      // history back when read, so the backward itself can be differentiated
      v = t.detach_descriptor();
      AutogradMeta& m = detail::meta_of(v);
      m.grad_fn = node;
      m.output_nr = static_cast<uint32_t>(saved_output_nr_[i]);
    }
    out.push_back(std::move(v));
  }
  return out;
}

void FunctionCtx::mark_dirty(const TensorList& tensors) {
  for (const Tensor& t : tensors)
    if (t.defined()) dirty_.push_back(t.impl());
}

void FunctionCtx::mark_non_differentiable(const TensorList& tensors) {
  for (const Tensor& t : tensors)
    if (t.defined()) non_differentiable_.push_back(t.impl());
}

CustomCall::CustomCall(std::string name, TensorList arguments)
    : ctx(std::make_shared<FunctionCtx>()) {
  args = std::move(arguments);
  ctx->name_ = std::move(name);
  ctx->needs_input_grad_.resize(args.size());
  bool enabled = grad_enabled();
  for (size_t i = 0; i < args.size(); ++i)
    if (enabled && args[i].defined() && args[i].requires_grad())
      ctx->needs_input_grad_[i] = record = true;
}

TensorList CustomCall::finish(TensorList outputs,
                              std::function<TensorList(FunctionCtx&, const TensorList&)> backward,
                              bool once_differentiable) {
  FunctionCtx& c = *ctx;
  for (const TensorImpl* d : c.dirty_) {
    bool returned =
        std::any_of(outputs.begin(), outputs.end(), [&](const Tensor& o) { return o.impl() == d; });
    KILN_CHECK(returned, value, "[{}] an argument marked dirty must be returned as an output",
               c.name_);
  }
  if (!record) return outputs;
  auto node = std::make_shared<CustomFunctionNode>(ctx, std::move(backward), once_differentiable);
  for (const Tensor& a : args) {
    node->next.push_back(a.defined() ? gradient_edge(a) : Edge{});
    node->arg_meta_.push_back(
        a.defined() ? std::optional<GradMeta>(GradMeta{a.shape(), a.dtype(), a.device()})
                    : std::nullopt);
  }
  node->sequence = detail::next_node_sequence();
  c.saved_output_nr_.assign(c.saved_.size(), -1);
  for (size_t k = 0; k < outputs.size(); ++k) {
    Tensor& o = outputs[k];
    if (!o.defined()) {
      node->inputs.push_back({});
      continue;
    }
    node->inputs.push_back({o.shape(), o.dtype(), o.device()});
    if (k == 0 || node->device.type == DeviceType::meta) node->device = o.device();
    bool dirty = listed(c.dirty_, o);
    if (dirty) {
      const AutogradMeta* m = o.impl()->autograd.get();
      KILN_CHECK(!(m && m->requires_grad && !m->grad_fn), value,
                 "[{}] a leaf tensor that requires grad ({}) is used in an in-place operation "
                 "(marked dirty)",
                 c.name_, o.meta_str());
    } else if (std::any_of(args.begin(), args.end(),
                           [&](const Tensor& a) { return same_impl(a, o); })) {
      o = o.detach_descriptor();  // an argument returned as is: an alias of it carries the history
    }
    bool differentiable = is_floating(o.dtype()) && !listed(c.non_differentiable_, o);
    for (size_t i = 0; i < c.saved_.size(); ++i)  // saved outputs are held without history
      if (same_impl(c.saved_[i], o)) {
        c.saved_[i] = o.detach_descriptor();
        c.saved_output_nr_[i] = differentiable ? static_cast<int>(k) : -1;
      }
    if (!differentiable) continue;
    AutogradMeta& m = detail::meta_of(o);
    m.grad_fn = node;
    m.output_nr = static_cast<uint32_t>(k);
    m.requires_grad = false;
  }
  c.node_ = node;
  return outputs;
}

}  // namespace kiln::autograd

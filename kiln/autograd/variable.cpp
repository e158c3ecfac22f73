// The autograd side of Tensor (G1's state), installed into core as its AutogradHooks and
// into dispatch as its AutogradLayer: Note [Autograd methods through a hook] in
// kiln/core/tensor.h.
#include "kiln/autograd/function.h"
#include "kiln/autograd/record.h"
#include "kiln/core/warning.h"
#include "kiln/dispatch/dispatch.h"

namespace kiln::autograd {

namespace detail {
AutogradMeta& meta_of(const Tensor& t) {
  auto& m = t.impl()->autograd;
  if (!m) m = make_pooled<AutogradMeta>();
  return *m;
}
}  // namespace detail

using detail::meta_of;

namespace {
const Tensor kUndefined;
const std::shared_ptr<Node> kNoNode;

bool requires_grad(const Tensor& t) {
  if (kiln::detail::stale_view(t)) [[unlikely]]  // (G4) a view's history brought up to date
    detail::refresh_view(t);
  const AutogradMeta* m = t.impl()->autograd.get();
  return m && (m->requires_grad || m->grad_fn);
}

void set_requires_grad(const Tensor& t, bool on) {
  AutogradMeta* m = t.impl()->autograd.get();
  KILN_CHECK(!(m && m->grad_fn), value,
             "[requires_grad] {} is not a leaf (it has grad_fn {}): only leaves can change "
             "requires_grad; use detach() to make a leaf",
             t.meta_str(), m ? m->grad_fn->name() : "");
  KILN_CHECK(!on || is_floating(t.dtype()), dtype,
             "[requires_grad] only tensors of floating dtype can require gradients, got {}",
             t.meta_str());
  KILN_CHECK(!on || !t.is_inference() || inference_mode(), value,
             "[requires_grad] Setting requires_grad=True on inference tensor outside InferenceMode "
             "is not allowed "
             "({}); clone it first",
             t.meta_str());
  if (on || m) meta_of(t).requires_grad = on;
}

bool is_leaf(const Tensor& t) {
  const AutogradMeta* m = t.impl()->autograd.get();
  return !m || !m->grad_fn;
}

const Tensor& grad(const Tensor& t) {
  const AutogradMeta* m = t.impl()->autograd.get();
  if (m && m->grad_fn && !m->retains_grad && !m->grad.defined())  // as PyTorch warns
    warn_once(
        "grad of a non-leaf",
        fmt::format(
            "the .grad of {}, a tensor that is not a leaf, is read: backward() does not fill it. "
            "Call retain_grad() on it before backward() to keep its gradient, or read the .grad of "
            "the leaf it comes from",
            t.meta_str()));
  return m ? m->grad : kUndefined;
}

Tensor& mutable_grad(const Tensor& t) { return meta_of(t).grad; }

void retain_grad(const Tensor& t) {
  AutogradMeta& m = meta_of(t);
  KILN_CHECK(m.requires_grad || m.grad_fn, value,
             "[retain_grad] {} does not require grad: there is no gradient to retain",
             t.meta_str());
  if (!m.grad_fn || m.retains_grad) return;  // leaves keep their gradient anyway
  m.retains_grad = true;
  m.grad_fn->retained.push_back({m.output_nr, t.impl()->autograd});
}

const std::shared_ptr<Node>& grad_fn(const Tensor& t) {
  if (kiln::detail::stale_view(t)) [[unlikely]]
    detail::refresh_view(t);
  const AutogradMeta* m = t.impl()->autograd.get();
  return m ? m->grad_fn : kNoNode;
}

std::string grad_fn_name(const Tensor& t) {
  const std::shared_ptr<Node>& fn = grad_fn(t);
  return fn ? fn->name() : std::string();
}

Tensor detach(const Tensor& t) {
  if (active_mode_count() == 0) return t.detach_descriptor();
  // Below autograd (redispatch records no history): the modes see an alias of the data.
  Value args[1] = {t};
  Tensor alias = std::move(redispatch(ops::OpKind::alias, args)[0]);
  alias.impl()->view_made_at = 0;  // a detached tensor has no history to go stale (G4)
  alias.impl()->view_base.reset();
  return alias;
}

void backward_of(const Tensor& t, const Tensor& grad, bool retain_graph, bool create_graph) {
  backward({t}, grad.defined() ? TensorList{grad} : TensorList{}, retain_graph, create_graph);
}

constexpr kiln::detail::AutogradHooks kHooks{
    &requires_grad, &set_requires_grad, &is_leaf,      &grad,   &mutable_grad,
    &retain_grad,   &grad_fn,           &grad_fn_name, &detach, &backward_of};
constexpr AutogradLayer kLayer{&detail::record};

// Linked in, installed before main (Note [Autograd methods through a hook]).
[[maybe_unused]] const bool kInstalledAtStart = detail::install_layer();
}  // namespace

bool detail::install_layer() {
  kiln::detail::set_autograd_hooks(&kHooks);
  set_autograd_layer(&kLayer);
  return true;
}

}  // namespace kiln::autograd

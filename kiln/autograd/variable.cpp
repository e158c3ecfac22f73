// The autograd side of Tensor (declared in kiln/core/tensor.h): G1's state.
#include "kiln/autograd/function.h"
#include "kiln/autograd/record.h"
#include "kiln/core/warning.h"

namespace kiln {

using autograd::AutogradMeta;

namespace autograd::detail {
AutogradMeta& meta_of(const Tensor& t) {
  auto& m = t.impl()->autograd;
  if (!m) m = make_pooled<AutogradMeta>();
  return *m;
}
}  // namespace autograd::detail

using autograd::detail::meta_of;

namespace {
const Tensor kUndefined;
const std::shared_ptr<autograd::Node> kNoNode;
}  // namespace

bool Tensor::requires_grad() const {
  if (autograd::detail::stale_view(*this)) [[unlikely]]  // (G4) a view's history brought up to date
    autograd::detail::refresh_view(*this);
  const AutogradMeta* m = impl_->autograd.get();
  return m && (m->requires_grad || m->grad_fn);
}

Tensor& Tensor::set_requires_grad(bool on) {
  AutogradMeta* m = impl_->autograd.get();
  KILN_CHECK(!(m && m->grad_fn), value,
             "[requires_grad] {} is not a leaf (it has grad_fn {}): only leaves can change "
             "requires_grad; use detach() to make a leaf",
             meta_str(), m ? m->grad_fn->name() : "");
  KILN_CHECK(!on || is_floating(dtype()), dtype,
             "[requires_grad] only tensors of floating dtype can require gradients, got {}",
             meta_str());
  KILN_CHECK(!on || !is_inference() || inference_mode(), value,
             "[requires_grad] Setting requires_grad=True on inference tensor outside InferenceMode is not allowed "
             "({}); clone it first",
             meta_str());
  if (on || m) meta_of(*this).requires_grad = on;
  return *this;
}

bool Tensor::is_leaf() const {
  const AutogradMeta* m = impl_->autograd.get();
  return !m || !m->grad_fn;
}

const Tensor& Tensor::grad() const {
  const AutogradMeta* m = impl_->autograd.get();
  if (m && m->grad_fn && !m->retains_grad && !m->grad.defined())  // as PyTorch warns
    warn_once("grad of a non-leaf",
              fmt::format("the .grad of {}, a tensor that is not a leaf, is read: backward() does not fill it. "
                          "Call retain_grad() on it before backward() to keep its gradient, or read the .grad of "
                          "the leaf it comes from",
                          meta_str()));
  return m ? m->grad : kUndefined;
}

Tensor& Tensor::mutable_grad() const { return meta_of(*this).grad; }

void Tensor::retain_grad() const {
  AutogradMeta& m = meta_of(*this);
  KILN_CHECK(m.requires_grad || m.grad_fn, value,
             "[retain_grad] {} does not require grad: there is no gradient to retain", meta_str());
  if (!m.grad_fn || m.retains_grad) return;  // leaves keep their gradient anyway
  m.retains_grad = true;
  m.grad_fn->retained.push_back({m.output_nr, impl_->autograd});
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  if (autograd::detail::stale_view(*this)) [[unlikely]] autograd::detail::refresh_view(*this);
  const AutogradMeta* m = impl_->autograd.get();
  return m ? m->grad_fn : kNoNode;
}

Tensor Tensor::detach_descriptor() const {
  auto impl = make_pooled<TensorImpl>(*impl_);
  impl->autograd.reset();
  impl->view_made_at = 0;
  impl->view_base.reset();
  return Tensor(std::move(impl));
}

Tensor Tensor::detach() const {
  if (active_mode_count() == 0) return detach_descriptor();
  // Below autograd (redispatch records no history): the modes see an alias of the data.
  Value args[1] = {*this};
  Tensor alias = std::move(redispatch(ops::OpKind::alias, args)[0]);
  alias.impl()->view_made_at = 0;  // a detached tensor has no history to go stale (G4)
  alias.impl()->view_base.reset();
  return alias;
}

void Tensor::backward(const Tensor& grad, bool retain_graph, bool create_graph) const {
  autograd::backward({*this}, grad.defined() ? TensorList{grad} : TensorList{}, retain_graph, create_graph);
}

}  // namespace kiln

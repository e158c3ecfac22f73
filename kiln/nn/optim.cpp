#include "kiln/nn/optim.h"

#include <cmath>

#include "kiln/autograd/autograd.h"

namespace kiln::nn {

Optimizer::Optimizer(TensorList params) : params_(std::move(params)), state_(params_.size()) {
  for (size_t i = 0; i < params_.size(); ++i)
    KILN_CHECK(params_[i].defined() && params_[i].is_leaf() && params_[i].requires_grad(), value,
               "[optimizer] parameter {} must be a leaf that requires grad, got {}", i,
               params_[i].defined() ? params_[i].meta_str() : "undefined");
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.mutable_grad() = Tensor();
}

void Optimizer::set_state(size_t i, const std::string& name, Tensor value) {
  KILN_CHECK(i < params_.size(), index, "[optimizer] no parameter {}", i);
  state(i, name) = std::move(value);
}

Tensor& Optimizer::state(size_t i, const std::string& name) {
  for (auto& [n, t] : state_[i])
    if (n == name) return t;
  state_[i].emplace_back(name, Tensor());
  return state_[i].back().second;
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  for (size_t i = 0; i < state_.size(); ++i)
    for (const auto& [name, t] : state_[i])
      if (t.defined()) out.emplace_back(fmt::format("state.{}.{}", i, name), t);
  return out;
}

void Optimizer::load_state_dict(const OptimizerState& state) {
  // Checked in full before anything changes.
  std::vector<std::vector<std::pair<std::string, Tensor>>> next(params_.size());
  std::vector<std::string> names = state_names();
  for (const auto& [key, t] : state) {
    size_t i = 0;
    char name[64] = {};
    KILN_CHECK(std::sscanf(key.c_str(), "state.%zu.%63s", &i, name) == 2 && i < params_.size() &&
                   std::find(names.begin(), names.end(), name) != names.end(),
               value, "[optimizer] unexpected state key '{}'", key);
    bool scalar = std::string(name) == "step";
    KILN_CHECK(scalar ? t.numel() == 1 : t.shape() == params_[i].shape(), shape,
               "[optimizer] state '{}' has shape {}, expected {}", key, t.shape().str(),
               scalar ? "[]" : params_[i].shape().str());
    Tensor value = clone(to(t.detach_descriptor(), params_[i].device()));
    next[i].emplace_back(name, scalar ? reshape(to(value, f32), {}) : value);
  }
  state_ = std::move(next);
}

namespace {

// The parameters that have a gradient, with their indices and (maybe negated) gradients.
struct Active {
  std::vector<size_t> index;
  TensorList params, grads;
};
Active active(const TensorList& params, bool maximize) {
  Active a;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& g = params[i].grad();
    if (!g.defined()) continue;
    a.index.push_back(i);
    a.params.push_back(params[i]);
    a.grads.push_back(maximize ? neg(g) : g);
  }
  return a;
}

}  // namespace

SGD::SGD(TensorList params, SGDOptions o) : Optimizer(std::move(params)), options(o) {
  KILN_CHECK(o.lr >= 0 && o.momentum >= 0 && o.weight_decay >= 0, value,
             "[SGD] lr, momentum and weight_decay must be >= 0");
  KILN_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), value,
             "[SGD] nesterov momentum requires a momentum and zero dampening");
}

std::vector<std::string> SGD::state_names() const { return {"momentum_buffer"}; }

OptimizerState SGD::fresh_state(const Tensor& param) const {
  if (options.momentum == 0) return {};
  return {{"momentum_buffer", zeros_like(param)}};
}

void SGD::step() {
  autograd::NoGradGuard no_grad;
  Active a = active(params_, options.maximize);
  TensorList& d = a.grads;
  // Parameter by parameter, all of its update at once: the same ops in the same order
  // per parameter as a pass per op over the list, with each parameter's buffers still
  // in cache for the next op (the momentum buffer is read twice).
  for (size_t k = 0; k < d.size(); ++k) {
    if (options.weight_decay != 0) d[k] = add(d[k], a.params[k], options.weight_decay);
    if (options.momentum != 0) {
      Tensor& buf = state(a.index[k], "momentum_buffer");
      if (!buf.defined()) {
        buf = clone(d[k]);
      } else {
        mul_(buf, options.momentum);
        add_(buf, d[k], 1 - options.dampening);
      }
      d[k] = options.nesterov ? add(d[k], buf, options.momentum) : buf;
    }
    add_(a.params[k], d[k], -options.lr);
  }
}

AdamW::AdamW(TensorList params, AdamWOptions o) : Optimizer(std::move(params)), options(o) {
  KILN_CHECK(o.lr >= 0 && o.eps >= 0 && o.weight_decay >= 0, value,
             "[AdamW] lr, eps and weight_decay must be >= 0");
  KILN_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, value,
             "[AdamW] betas must be in [0, 1), got ({}, {})", o.beta1, o.beta2);
}

std::vector<std::string> AdamW::state_names() const { return {"step", "exp_avg", "exp_avg_sq"}; }

OptimizerState AdamW::fresh_state(const Tensor& param) const {
  return {{"step", zeros({}, {.dtype = f32, .device = param.device()})},
          {"exp_avg", zeros_like(param)},
          {"exp_avg_sq", zeros_like(param)}};
}

void AdamW::step() {
  autograd::NoGradGuard no_grad;
  Active a = active(params_, options.maximize);
  const double lr = options.lr, b1 = options.beta1, b2 = options.beta2;
  for (size_t k = 0; k < a.params.size(); ++k) {  // state on first use, as PyTorch
    size_t i = a.index[k];
    if (!state(i, "step").defined())
      for (auto& [name, t] : fresh_state(a.params[k])) state(i, name) = t;
  }
  for (size_t k = 0; k < a.params.size(); ++k) add_(state(a.index[k], "step"), 1.0);
  if (options.weight_decay != 0)
    for (Tensor& p : a.params) mul_(p, 1 - lr * options.weight_decay);
  for (size_t k = 0; k < a.params.size(); ++k) {
    Tensor& m = state(a.index[k], "exp_avg");
    mul_(m, b1);
    add_(m, a.grads[k], 1 - b1);
  }
  for (size_t k = 0; k < a.params.size(); ++k) {
    Tensor& v = state(a.index[k], "exp_avg_sq");
    mul_(v, b2);
    add_(v, mul(a.grads[k], a.grads[k]), 1 - b2);
  }
  for (size_t k = 0; k < a.params.size(); ++k) {
    size_t i = a.index[k];
    // Bias corrections from the step tensor, on its device, in f64 (0-dim: the updates
    // below stay in the parameter's dtype).
    Tensor t = to(state(i, "step"), f64);
    TensorOptions o{.dtype = f64, .device = t.device()};
    Tensor bias1 = 1 - pow(full({}, b1, o), t);
    Tensor bias2_sqrt = sqrt(1 - pow(full({}, b2, o), t));
    Tensor denom = add(div(sqrt(state(i, "exp_avg_sq")), bias2_sqrt), options.eps);
    add_(a.params[k], mul(div(state(i, "exp_avg"), denom), neg(lr / bias1)));
  }
}

}  // namespace kiln::nn

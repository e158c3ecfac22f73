#include "kiln/nn/optim.h"

#include <cmath>
#include <numbers>

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

void Optimizer::set_hyperparameter(const std::string& name, Tensor value) {
  KILN_CHECK(name == "lr" || name == "weight_decay", value,
             "[optimizer] unknown hyperparameter '{}' (lr or weight_decay)", name);
  KILN_CHECK(value.defined() && value.dim() == 0 && value.dtype() == f64, value,
             "[optimizer] hyperparameter '{}' must be a 0-dim f64 tensor, got {}", name,
             value.defined() ? value.meta_str() : "undefined");
  for (auto& [n, t] : hyperparameters_)
    if (n == name) {
      t = std::move(value);
      return;
    }
  hyperparameters_.emplace_back(name, std::move(value));
}

Tensor Optimizer::hyperparameter(const std::string& name, double value, const Tensor& like) const {
  for (const auto& [n, t] : hyperparameters_)
    if (n == name) return t;
  return full({}, value, {.dtype = f64, .device = like.device()});
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
    if (options.weight_decay != 0)
      d[k] = add(d[k], mul(a.params[k],
                           hyperparameter("weight_decay", options.weight_decay, a.params[k])));
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
    sub_(a.params[k], mul(d[k], hyperparameter("lr", options.lr, a.params[k])));
  }
}

namespace {

// The step tensor of parameter i as f64, and a 0-dim f64 tensor of `v` on its device.
Tensor step_f64(const Tensor& step) { return to(step, f64); }
Tensor scalar_on(double v, const Tensor& like) {
  return full({}, v, {.dtype = f64, .device = like.device()});
}

Tensor step_state(const Tensor& param) {
  return zeros({}, {.dtype = f32, .device = param.device()});
}

}  // namespace

Adam::Adam(TensorList params, AdamOptions o) : Adam(std::move(params), o, false, "Adam") {}

Adam::Adam(TensorList params, AdamOptions o, bool decoupled, const char* name)
    : Optimizer(std::move(params)), options(o), decoupled_(decoupled) {
  KILN_CHECK(o.lr >= 0 && o.eps >= 0 && o.weight_decay >= 0, value,
             "[{}] lr, eps and weight_decay must be >= 0", name);
  KILN_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, value,
             "[{}] betas must be in [0, 1), got ({}, {})", name, o.beta1, o.beta2);
}

AdamW::AdamW(TensorList params, AdamWOptions o)
    : Adam(std::move(params),
           {.lr = o.lr,
            .beta1 = o.beta1,
            .beta2 = o.beta2,
            .eps = o.eps,
            .weight_decay = o.weight_decay,
            .amsgrad = o.amsgrad,
            .maximize = o.maximize},
           true, "AdamW") {}

std::vector<std::string> Adam::state_names() const {
  if (options.amsgrad) return {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"step", "exp_avg", "exp_avg_sq"};
}

OptimizerState Adam::fresh_state(const Tensor& param) const {
  OptimizerState s = {{"step", step_state(param)},
                      {"exp_avg", zeros_like(param)},
                      {"exp_avg_sq", zeros_like(param)}};
  if (options.amsgrad) s.emplace_back("max_exp_avg_sq", zeros_like(param));
  return s;
}

void Adam::step() {
  autograd::NoGradGuard no_grad;
  Active a = active(params_, options.maximize);
  const double b1 = options.beta1, b2 = options.beta2, wd = options.weight_decay;
  for (size_t k = 0; k < a.params.size(); ++k) {  // state on first use, as PyTorch
    size_t i = a.index[k];
    if (!state(i, "step").defined())
      for (auto& [name, t] : fresh_state(a.params[k])) state(i, name) = t;
  }
  for (size_t k = 0; k < a.params.size(); ++k) add_(state(a.index[k], "step"), 1.0);
  if (wd != 0) {
    if (decoupled_)
      for (Tensor& p : a.params)
        mul_(p,
             1 - mul(hyperparameter("lr", options.lr, p), hyperparameter("weight_decay", wd, p)));
    else
      for (size_t k = 0; k < a.params.size(); ++k)
        a.grads[k] =
            add(a.grads[k], mul(a.params[k], hyperparameter("weight_decay", wd, a.params[k])));
  }
  for (size_t k = 0; k < a.params.size(); ++k) {
    Tensor& m = state(a.index[k], "exp_avg");
    mul_(m, b1);
    add_(m, a.grads[k], 1 - b1);
  }
  for (size_t k = 0; k < a.params.size(); ++k) {
    Tensor& v = state(a.index[k], "exp_avg_sq");
    mul_(v, b2);
    add_(v, mul(a.grads[k], a.grads[k]), 1 - b2);
    if (options.amsgrad) {
      Tensor& vmax = state(a.index[k], "max_exp_avg_sq");
      copy_(vmax, maximum(vmax, v));
    }
  }
  for (size_t k = 0; k < a.params.size(); ++k) {
    size_t i = a.index[k];
    // Bias corrections from the step tensor, on its device, in f64 (0-dim: the updates
    // below stay in the parameter's dtype).
    Tensor t = step_f64(state(i, "step"));
    Tensor bias1 = 1 - pow(scalar_on(b1, t), t);
    Tensor bias2_sqrt = sqrt(1 - pow(scalar_on(b2, t), t));
    const Tensor& v = state(i, options.amsgrad ? "max_exp_avg_sq" : "exp_avg_sq");
    Tensor denom = add(div(sqrt(v), bias2_sqrt), options.eps);
    add_(a.params[k], mul(div(state(i, "exp_avg"), denom),
                          neg(div(hyperparameter("lr", options.lr, t), bias1))));
  }
}

RMSprop::RMSprop(TensorList params, RMSpropOptions o) : Optimizer(std::move(params)), options(o) {
  KILN_CHECK(o.lr >= 0 && o.eps >= 0 && o.weight_decay >= 0 && o.momentum >= 0 && o.alpha >= 0,
             value, "[RMSprop] lr, alpha, eps, momentum and weight_decay must be >= 0");
}

std::vector<std::string> RMSprop::state_names() const {
  return {"step", "square_avg", "momentum_buffer", "grad_avg"};
}

OptimizerState RMSprop::fresh_state(const Tensor& param) const {
  OptimizerState s = {{"step", step_state(param)}, {"square_avg", zeros_like(param)}};
  if (options.momentum > 0) s.emplace_back("momentum_buffer", zeros_like(param));
  if (options.centered) s.emplace_back("grad_avg", zeros_like(param));
  return s;
}

void RMSprop::step() {
  autograd::NoGradGuard no_grad;
  Active a = active(params_, options.maximize);
  const double alpha = options.alpha;
  for (size_t k = 0; k < a.params.size(); ++k) {
    size_t i = a.index[k];
    if (!state(i, "step").defined())
      for (auto& [name, t] : fresh_state(a.params[k])) state(i, name) = t;
    add_(state(i, "step"), 1.0);
    Tensor g = options.weight_decay != 0
                   ? add(a.grads[k],
                         mul(a.params[k],
                             hyperparameter("weight_decay", options.weight_decay, a.params[k])))
                   : a.grads[k];
    Tensor lr = hyperparameter("lr", options.lr, a.params[k]);
    Tensor& s = state(i, "square_avg");
    mul_(s, alpha);
    add_(s, mul(g, g), 1 - alpha);
    Tensor avg;
    if (options.centered) {
      Tensor& ga = state(i, "grad_avg");
      mul_(ga, alpha);
      add_(ga, g, 1 - alpha);
      avg = sqrt(sub(s, mul(ga, ga)));
    } else {
      avg = sqrt(s);
    }
    avg = add(avg, options.eps);
    if (options.momentum > 0) {
      Tensor& buf = state(i, "momentum_buffer");
      mul_(buf, options.momentum);
      add_(buf, div(g, avg));
      sub_(a.params[k], mul(buf, lr));
    } else {
      sub_(a.params[k], mul(div(g, avg), lr));
    }
  }
}

Adagrad::Adagrad(TensorList params, AdagradOptions o) : Optimizer(std::move(params)), options(o) {
  KILN_CHECK(
      o.lr >= 0 && o.lr_decay >= 0 && o.weight_decay >= 0 && o.initial_accumulator_value >= 0 &&
          o.eps >= 0,
      value,
      "[Adagrad] lr, lr_decay, weight_decay, initial_accumulator_value and eps must be >= 0");
  // PyTorch creates the state with the optimizer, not at the first step.
  for (size_t i = 0; i < params_.size(); ++i)
    for (auto& [name, t] : fresh_state(params_[i])) state(i, name) = t;
}

std::vector<std::string> Adagrad::state_names() const { return {"step", "sum"}; }

OptimizerState Adagrad::fresh_state(const Tensor& param) const {
  return {{"step", step_state(param)},
          {"sum", full_like(param, options.initial_accumulator_value)}};
}

void Adagrad::step() {
  autograd::NoGradGuard no_grad;
  Active a = active(params_, options.maximize);
  for (size_t k = 0; k < a.params.size(); ++k) {
    size_t i = a.index[k];
    Tensor& step = state(i, "step");
    add_(step, 1.0);
    Tensor g = options.weight_decay != 0
                   ? add(a.grads[k],
                         mul(a.params[k],
                             hyperparameter("weight_decay", options.weight_decay, a.params[k])))
                   : a.grads[k];
    Tensor& s = state(i, "sum");
    add_(s, mul(g, g));
    // -lr / (1 + (t - 1) lr_decay), from the step tensor on its device (no host read).
    Tensor clr = div(neg(hyperparameter("lr", options.lr, step)),
                     add(mul(sub(step_f64(step), 1.0), options.lr_decay), 1.0));
    add_(a.params[k], mul(div(g, add(sqrt(s), options.eps)), clr));
  }
}

// ---- schedulers -----------------------------------------------------------------------------

LRScheduler::LRScheduler(Optimizer& optimizer)
    : optimizer_(optimizer), base_lr_(optimizer.learning_rate()), last_lr_(base_lr_) {}

void LRScheduler::start() {
  epoch_ = 0;
  last_lr_ = optimizer_.learning_rate() = next_lr(0, base_lr_);
}

void LRScheduler::step() {
  KILN_CHECK(epoch_ >= 0, value, "[LRScheduler] step() before the scheduler started");
  ++epoch_;
  last_lr_ = optimizer_.learning_rate() = next_lr(epoch_, optimizer_.learning_rate());
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  KILN_CHECK(step_size > 0, value, "[StepLR] step_size must be > 0, got {}", step_size);
  start();
}

double StepLR::next_lr(int64_t epoch, double current) const {
  return epoch == 0 || epoch % step_size_ != 0 ? current : current * gamma_;
}

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  start();
}

double MultiStepLR::next_lr(int64_t epoch, double current) const {
  for (int64_t m : milestones_)  // a milestone listed twice applies gamma twice
    if (m == epoch) current *= gamma_;
  return current;
}

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma)
    : LRScheduler(optimizer), gamma_(gamma) {
  start();
}

double ExponentialLR::next_lr(int64_t epoch, double current) const {
  return epoch == 0 ? current : current * gamma_;
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {
  KILN_CHECK(t_max > 0, value, "[CosineAnnealingLR] t_max must be > 0, got {}", t_max);
  start();
}

double CosineAnnealingLR::next_lr(int64_t epoch, double current) const {
  if (epoch == 0) return current;
  const double pi = std::numbers::pi, t = static_cast<double>(t_max_);
  int64_t period = 2 * t_max_, r = (epoch - 1 - t_max_) % period;
  if ((r < 0 ? r + period : r) == 0)  // the bottom of a period: restart the climb
    return current + (base_lr() - eta_min_) * (1 - std::cos(pi / t)) / 2;
  return (1 + std::cos(pi * epoch / t)) / (1 + std::cos(pi * (epoch - 1) / t)) *
             (current - eta_min_) +
         eta_min_;
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   int64_t total_iters)
    : LRScheduler(optimizer), start_(start_factor), end_(end_factor), total_(total_iters) {
  KILN_CHECK(start_factor > 0 && start_factor <= 1, value,
             "[LinearLR] start_factor must be in (0, 1], got {}", start_factor);
  KILN_CHECK(end_factor >= 0 && end_factor <= 1, value,
             "[LinearLR] end_factor must be in [0, 1], got {}", end_factor);
  KILN_CHECK(total_iters > 0, value, "[LinearLR] total_iters must be > 0, got {}", total_iters);
  start();
}

double LinearLR::next_lr(int64_t epoch, double current) const {
  if (epoch == 0) return current * start_;
  if (epoch > total_) return current;
  return current * (1 + (end_ - start_) / (total_ * start_ + (epoch - 1) * (end_ - start_)));
}

LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lambda)
    : LRScheduler(optimizer), lambda_(std::move(lambda)) {
  KILN_CHECK(static_cast<bool>(lambda_), value, "[LambdaLR] no lambda given");
  start();
}

double LambdaLR::next_lr(int64_t epoch, double) const { return base_lr() * lambda_(epoch); }

}  // namespace kiln::nn

#pragma once
// Optimizers with PyTorch's update formulas (torch.optim.SGD, Adam, AdamW, RMSprop,
// Adagrad) and its learning-rate schedulers. Adam and AdamW apply each step of the
// formula over the whole parameter list before the next (foreach-style);
// SGD runs each parameter's whole update before the next parameter's (the same ops in
// the same order per parameter, its buffers still in cache). Updates are not recorded by
// autograd; each parameter's state lives on its device.

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/api/functional.h"

namespace kiln::nn {

/** Named state tensors of an optimizer: "state.<param index>.<name>". */
using OptimizerState = std::vector<std::pair<std::string, Tensor>>;

class Optimizer {
 public:
  explicit Optimizer(TensorList params);
  virtual ~Optimizer() = default;
  /** Updates every parameter that has a gradient. */
  virtual void step() = 0;
  /** Resets the parameters' gradients (to undefined, as PyTorch's set_to_none). */
  void zero_grad();
  /** The per-parameter state (momentum buffers, moments, step counts). */
  OptimizerState state_dict() const;
  /** Replaces the state: keys and shapes must match what step() would create. */
  void load_state_dict(const OptimizerState& state);
  const TensorList& params() const { return params_; }

  /** Names of the state each parameter holds once step() has run. */
  virtual std::vector<std::string> state_names() const = 0;
  /** The state a parameter starts with (zeros), as step() creates it on first use. */
  virtual OptimizerState fresh_state(const Tensor& param) const = 0;
  /** The learning rate step() uses next (what a scheduler sets). */
  virtual double& learning_rate() = 0;
  /** Makes `value` the state `name` of parameter `i`, without copying: step() then
   * updates `value` in place (how a train-step program threads its state through). */
  void set_state(size_t i, const std::string& name, Tensor value);
  /** Reads hyperparameter `name` ("lr" or "weight_decay") from `value`, a 0-dim f64
   * tensor, at every step instead of from the options (as PyTorch's tensor lr): its
   * contents may change between steps. A train-step program makes them inputs this way,
   * so `kiln train --lr` and schedules need no new export. Weight decay must have been
   * non-zero in the options (the options decide whether the update has that term). */
  void set_hyperparameter(const std::string& name, Tensor value);

 protected:
  /** Hyperparameter `name` for a step on `like`'s device: the tensor given to
   * set_hyperparameter, else `value` as a 0-dim f64 tensor there. Every step computes
   * with tensors, so an eager step and a traced one are the same computation (J5). */
  Tensor hyperparameter(const std::string& name, double value, const Tensor& like) const;
  /** The state tensor `name` of parameter `i` (undefined until created). */
  Tensor& state(size_t i, const std::string& name);

  TensorList params_;
  std::vector<std::vector<std::pair<std::string, Tensor>>> state_;
  std::vector<std::pair<std::string, Tensor>> hyperparameters_;
};

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
};

/** torch.optim.SGD: d = g + wd p; b = mu b + (1 - dampening) d (b = d at the first step);
 * d = nesterov ? d + mu b : b; p -= lr d. */
class SGD final : public Optimizer {
 public:
  SGD(TensorList params, SGDOptions options);
  void step() override;
  std::vector<std::string> state_names() const override;
  OptimizerState fresh_state(const Tensor& param) const override;
  double& learning_rate() override { return options.lr; }
  SGDOptions options;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool amsgrad = false;
  bool maximize = false;
};

/** torch.optim.Adam: g += wd p (L2, through the moments); m = b1 m + (1 - b1) g;
 * v = b2 v + (1 - b2) g^2 (amsgrad: vmax = max(vmax, v), used for v below);
 * p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). The step count t is a
 * tensor on the parameter's device and the bias corrections are computed from it there
 * (in f64), as PyTorch's capturable Adam: no host read, so a traced step is the same
 * computation as an eager one. */
class Adam : public Optimizer {
 public:
  Adam(TensorList params, AdamOptions options);
  void step() override;
  std::vector<std::string> state_names() const override;
  OptimizerState fresh_state(const Tensor& param) const override;
  double& learning_rate() override { return options.lr; }
  AdamOptions options;

 protected:
  Adam(TensorList params, AdamOptions options, bool decoupled, const char* name);

 private:
  bool decoupled_;  // AdamW: weight decay shrinks p directly instead of joining g
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
};

/** torch.optim.AdamW: Adam whose weight decay is decoupled: p *= 1 - lr wd before the
 * update, and g is the gradient alone. */
class AdamW final : public Adam {
 public:
  AdamW(TensorList params, AdamWOptions options);
};

struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0;
  bool centered = false;
  bool maximize = false;
};

/** torch.optim.RMSprop: g += wd p; s = alpha s + (1 - alpha) g^2; centered: a = alpha a +
 * (1 - alpha) g and d = sqrt(s - a^2) + eps, else d = sqrt(s) + eps; with momentum
 * b = mu b + g / d and p -= lr b, else p -= lr g / d. */
class RMSprop final : public Optimizer {
 public:
  RMSprop(TensorList params, RMSpropOptions options);
  void step() override;
  std::vector<std::string> state_names() const override;
  OptimizerState fresh_state(const Tensor& param) const override;
  double& learning_rate() override { return options.lr; }
  RMSpropOptions options;
};

struct AdagradOptions {
  double lr = 1e-2;
  double lr_decay = 0;
  double weight_decay = 0;
  double initial_accumulator_value = 0;
  double eps = 1e-10;
  bool maximize = false;
};

/** torch.optim.Adagrad: g += wd p; s += g^2; p -= lr / (1 + (t - 1) lr_decay) * g /
 * (sqrt(s) + eps), with the step count t a tensor on the parameter's device (as Adam's).
 * The sums start at initial_accumulator_value. */
class Adagrad final : public Optimizer {
 public:
  Adagrad(TensorList params, AdagradOptions options);
  void step() override;
  std::vector<std::string> state_names() const override;
  OptimizerState fresh_state(const Tensor& param) const override;
  double& learning_rate() override { return options.lr; }
  AdagradOptions options;
};

// ---- learning-rate schedulers -----------------------------------------------------------
//
// As torch.optim.lr_scheduler: a scheduler reads an optimizer's learning rate as the
// base at construction (PyTorch's initial_lr), sets the epoch-0 rate, and each step()
// (after the optimizer's, once per epoch) sets the next. The rate is the optimizer's
// `options.lr`, a number: a train-step program bakes it in, so a schedule is eager-only
// (re-export the step, or train eagerly, to change it).

class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  /** Advances one epoch and sets the optimizer's learning rate for it. */
  void step();
  /** The rate set last (PyTorch's get_last_lr()[0]). */
  double last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return epoch_; }
  double base_lr() const { return base_lr_; }

 protected:
  /** The rate for `epoch` (>= 1), given the current one (PyTorch's recursive forms). */
  virtual double next_lr(int64_t epoch, double current) const = 0;
  /** Sets epoch 0's rate; derived constructors call it once their fields are set. */
  void start();

 private:
  Optimizer& optimizer_;
  double base_lr_ = 0, last_lr_ = 0;
  int64_t epoch_ = -1;
};

/** lr = base * gamma^(epoch / step_size). */
class StepLR final : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 private:
  double next_lr(int64_t epoch, double current) const override;
  int64_t step_size_;
  double gamma_;
};

/** lr *= gamma at each of the given epochs. */
class MultiStepLR final : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);

 private:
  double next_lr(int64_t epoch, double current) const override;
  std::vector<int64_t> milestones_;
  double gamma_;
};

/** lr = base * gamma^epoch. */
class ExponentialLR final : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);

 private:
  double next_lr(int64_t epoch, double current) const override;
  double gamma_;
};

/** Cosine from base down to eta_min over t_max epochs (then back up), in PyTorch's
 * recursive form. */
class CosineAnnealingLR final : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0);

 private:
  double next_lr(int64_t epoch, double current) const override;
  int64_t t_max_;
  double eta_min_;
};

/** lr = base * factor, factor moving linearly from start_factor to end_factor over
 * total_iters epochs. */
class LinearLR final : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5);

 private:
  double next_lr(int64_t epoch, double current) const override;
  double start_, end_;
  int64_t total_;
};

/** lr = base * lambda(epoch). */
class LambdaLR final : public LRScheduler {
 public:
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lambda);

 private:
  double next_lr(int64_t epoch, double current) const override;
  std::function<double(int64_t)> lambda_;
};

}  // namespace kiln::nn

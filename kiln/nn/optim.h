#pragma once
// Optimizers with PyTorch's update formulas (torch.optim.SGD and AdamW). AdamW applies
// each step of the formula over the whole parameter list before the next (foreach-style);
// SGD runs each parameter's whole update before the next parameter's (the same ops in
// the same order per parameter, its buffers still in cache). Updates are not recorded by
// autograd; each parameter's state lives on its device.

#include <string>
#include <utility>
#include <vector>

#include "kiln/dispatch/functional.h"

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
  /** Makes `value` the state `name` of parameter `i`, without copying: step() then
   * updates `value` in place (how a train-step program threads its state through). */
  void set_state(size_t i, const std::string& name, Tensor value);

 protected:
  /** The state tensor `name` of parameter `i` (undefined until created). */
  Tensor& state(size_t i, const std::string& name);

  TensorList params_;
  std::vector<std::vector<std::pair<std::string, Tensor>>> state_;
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
  SGDOptions options;
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool maximize = false;
};

/** torch.optim.AdamW: p *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
 * p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). The step count t is a
 * tensor on the parameter's device and the bias corrections are computed from it there
 * (in f64), as PyTorch's capturable AdamW: no host read, so a traced step is the same
 * computation as an eager one. */
class AdamW final : public Optimizer {
 public:
  AdamW(TensorList params, AdamWOptions options);
  void step() override;
  std::vector<std::string> state_names() const override;
  OptimizerState fresh_state(const Tensor& param) const override;
  AdamWOptions options;
};

}  // namespace kiln::nn

#pragma once
// A whole training step as one program (J4, J5): forward, loss, backward and the
// optimizer's update, traced together; parameters and optimizer state are inputs that
// the program writes back, like buffers.

#include <functional>
#include <memory>
#include <optional>
#include <variant>

#include "kiln/nn/optim.h"
#include "kiln/program/program.h"

namespace kiln {

/** The loss of one batch: calls the module (e.g. `mse_loss(m(b[0])[0], b[1])`). */
using LossFn = std::function<Tensor(nn::Module& module, const TensorList& batch)>;
using OptimizerConfig = std::variant<nn::SGDOptions, nn::AdamWOptions, nn::AdamOptions,
                                     nn::RMSpropOptions, nn::AdagradOptions>;

/** The optimizer a config describes, over `params`. */
std::unique_ptr<nn::Optimizer> make_optimizer(const OptimizerConfig& config, TensorList params);

struct TrainStepOptions {
  OptimizerConfig optimizer = nn::SGDOptions{};
  /** Trace for this device (fake tensors); default: the device of the first parameter. */
  std::optional<Device> device;
  /** (Y1) Per batch input, its dynamic dims, as ExportOptions::dynamic_shapes (a dynamic
   * batch: a short last batch runs the same program). */
  std::vector<InputDims> dynamic_shapes;
};

/** (J4) Traces `loss(module, example_batch)`, its gradients w.r.t. the module's
 * parameters and the optimizer's update into ONE program. Signature: inputs are
 * parameters, buffers, optimizer state ("optimizer.<param>.<name>", zeros at first),
 * the hyperparameters "optimizer.lr" and, when the options have weight decay,
 * "optimizer.weight_decay" (0-dim f64 state the step reads and never writes: change them
 * between runs to schedule them), workspaces, then the batch; outputs are the writes
 * (parameter_mutation, buffer_mutation, optimizer_state_mutation, in input order), then loss_output
 * and one gradient_to_parameter per parameter the loss depends on. Running it N times trains as N
 * eager steps would (J5). Errors before tracing: no parameter requires grad, an SGD with both
 * momentum and dampening (its first step is not expressible without a branch); while tracing: a
 * loss that is not a scalar. */
ExportedProgram export_train_step(nn::Module& module, const LossFn& loss,
                                  const TensorList& example_batch,
                                  const TrainStepOptions& options = {});

/** The trained parameters of a train-step program, by module name (its state minus the
 * buffers and optimizer state). */
NamedTensors trained_parameters(const ExportedProgram& program);

/** A learning-rate schedule over a run of `total` steps: `warmup` steps rising linearly
 * to the base rate (step s gets base * (s + 1) / warmup), then constant, cosine (down to
 * 0 at the last step: base * (1 + cos(pi * k / K)) / 2 after k of K remaining steps) or
 * linear (base * (1 - k / K)). What `kiln train --schedule` applies per step. */
struct LrSchedule {
  enum class Kind : uint8_t { constant, cosine, linear };
  Kind kind = Kind::constant;
  int64_t warmup = 0;
};
/** The rate of 0-based step `step` of `total` under `schedule` from `base`. */
double scheduled_lr(const LrSchedule& schedule, double base, int64_t step, int64_t total);

/** The order of `n` examples in epoch `epoch` (0-based): 0..n-1, or, with `shuffle`, a
 * permutation drawn from (seed, epoch) alone (so a resumed run draws the same one). */
std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch);

}  // namespace kiln

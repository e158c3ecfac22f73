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
using OptimizerConfig =
    std::variant<nn::SGDOptions, nn::AdamWOptions, nn::AdamOptions, nn::RMSpropOptions, nn::AdagradOptions>;

/** The optimizer a config describes, over `params`. */
std::unique_ptr<nn::Optimizer> make_optimizer(const OptimizerConfig& config, TensorList params);

struct TrainStepOptions {
  OptimizerConfig optimizer = nn::SGDOptions{};
  /** Trace for this device (fake tensors); default: the device of the first parameter. */
  std::optional<Device> device;
};

/** (J4) Traces `loss(module, example_batch)`, its gradients w.r.t. the module's
 * parameters and the optimizer's update into ONE program. Signature: inputs are
 * parameters, buffers, optimizer state ("optimizer.<param>.<name>", zeros at first),
 * workspaces, then the batch; outputs are the writes (parameter_mutation,
 * buffer_mutation, optimizer_state_mutation, in input order), then loss_output and one
 * gradient_to_parameter per parameter the loss depends on. Running it N times trains as
 * N eager steps would (J5). Errors before tracing: no parameter requires grad, an SGD
 * with both momentum and dampening (its first step is not expressible without a branch);
 * while tracing: a loss that is not a scalar. */
ExportedProgram export_train_step(nn::Module& module, const LossFn& loss,
                                  const TensorList& example_batch,
                                  const TrainStepOptions& options = {});

/** The trained parameters of a train-step program, by module name (its state minus the
 * buffers and optimizer state): what `kiln train --save` writes. */
NamedTensors trained_parameters(const ExportedProgram& program);

}  // namespace kiln

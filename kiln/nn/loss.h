#pragma once
// Loss functions, as torch.nn.functional's: made of ordinary ops, so they differentiate,
// trace and export like any other code.

#include <string_view>

#include "kiln/dispatch/functional.h"

namespace kiln::nn {

/** How per-element losses are combined: "mean" (default), "sum" or "none". */
using Reduction = std::string_view;

/** (input - target)^2, reduced. Shapes must match (no silent broadcasting). */
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = "mean");

/** -log softmax(input)[target] for class-index targets: input [N, C] (or [C]), target
 * [N] (or []) of an integer dtype. Targets equal to `ignore_index` count for nothing
 * (and are left out of the mean), as in PyTorch. */
Tensor cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction = "mean",
                     int64_t ignore_index = -100);

}  // namespace kiln::nn

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

/** -input[target] for log-probabilities `input` [N, C] (or [C]) and class indices
 * `target` [N] (or []) of an integer dtype. Targets equal to `ignore_index` count for
 * nothing (and are left out of the mean), as in PyTorch. */
Tensor nll_loss(const Tensor& input, const Tensor& target, Reduction reduction = "mean",
                int64_t ignore_index = -100);

/** nll_loss(log_softmax(input, 1), target): -log softmax(input)[target]. */
Tensor cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction = "mean",
                     int64_t ignore_index = -100);

/** |input - target|, reduced. */
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = "mean");

/** 0.5 d^2 / beta where d = |input - target| < beta, else d - 0.5 beta (beta = 0: l1). */
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = "mean",
                      double beta = 1.0);

/** 0.5 d^2 where d = |input - target| < delta, else delta (d - 0.5 delta). */
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = "mean",
                  double delta = 1.0);

/** -(target log(input) + (1 - target) log(1 - input)) for probabilities `input`, each log
 * clamped at -100 as PyTorch's; `weight` (optional) scales each element. */
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                            Reduction reduction = "mean");

/** binary_cross_entropy(sigmoid(input), target) computed from the logits without
 * overflow; `pos_weight` (optional) scales the positive term, `weight` each element. */
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight = {}, Reduction reduction = "mean",
                                        const Tensor& pos_weight = {});

/** target (log target - input) for log-probabilities `input` (0 where target is 0), or
 * exp(target) (target - input) with log_target; "batchmean" divides the sum by the
 * first dim's size. */
Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction = "mean",
              bool log_target = false);

}  // namespace kiln::nn

#pragma once
// Loss functions, as torch.nn.functional's: made of ordinary ops, so they differentiate,
// trace and export like any other code.

#include <functional>
#include <string_view>

#include "kiln/api/functional.h"

namespace kiln::nn {

/** How per-element losses are combined: "mean" (default), "sum" or "none". */
using Reduction = std::string_view;

/** (input - target)^2, reduced. Shapes must match (no silent broadcasting). */
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = "mean");

/** -weight[target] * input[target] for log-probabilities `input` [N, C, *] (or [C]) and
 * class indices `target` [N, *] (or []) of an integer dtype; `weight` [C] (optional)
 * weighs each class, and the mean divides by the weights taken. Targets equal to
 * `ignore_index` count for nothing (and are left out of the mean), as in PyTorch. */
Tensor nll_loss(const Tensor& input, const Tensor& target, Reduction reduction = "mean",
                int64_t ignore_index = -100, const Tensor& weight = {});

/** nll_loss(log_softmax(input, 1), target), or for class probabilities `target` (a
 * floating tensor shaped like input) -sum(target * log_softmax(input)) over the classes
 * (the mean divides by the samples). label_smoothing mixes in the uniform distribution:
 * (1 - e) times the loss plus e / C times the loss against every class, as PyTorch's. */
Tensor cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction = "mean",
                     int64_t ignore_index = -100, double label_smoothing = 0.0,
                     const Tensor& weight = {});

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

/** max(0, -y (x1 - x2) + margin) for labels y of +-1. */
Tensor margin_ranking_loss(const Tensor& x1, const Tensor& x2, const Tensor& y, double margin = 0.0,
                           Reduction reduction = "mean");
/** x where y == 1, max(0, margin - x) where y == -1. */
Tensor hinge_embedding_loss(const Tensor& x, const Tensor& y, double margin = 1.0,
                            Reduction reduction = "mean");
/** log(1 + exp(-y x)) for labels y of +-1. */
Tensor soft_margin_loss(const Tensor& x, const Tensor& y, Reduction reduction = "mean");
/** 1 - cos(x1, x2) where y == 1, max(0, cos(x1, x2) - margin) where y == -1 (rows along dim 1). */
Tensor cosine_embedding_loss(const Tensor& x1, const Tensor& x2, const Tensor& y,
                             double margin = 0.0, Reduction reduction = "mean");
/** max(0, d(a, p) - d(a, n) + margin) with d the p-norm distance (pairwise_distance);
 * swap uses the smaller of d(a, n) and d(p, n). */
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           double margin = 1.0, double p = 2.0, double eps = 1e-6,
                           bool swap = false, Reduction reduction = "mean");
/** triplet_margin_loss with any distance (default pairwise_distance). */
Tensor triplet_margin_with_distance_loss(
    const Tensor& anchor, const Tensor& positive, const Tensor& negative,
    const std::function<Tensor(const Tensor&, const Tensor&)>& distance_function = nullptr,
    double margin = 1.0, bool swap = false, Reduction reduction = "mean");
/** Connectionist temporal classification: -log p(target | log_probs) summed over
 * alignments (the alpha recursion in log space, unrolled over time). log_probs [T, N, C]
 * (or [T, C]), targets [N, S] padded or 1-D concatenated, lengths per sample. Impossible
 * targets give inf (zero_infinity: 0); "mean" divides each loss by its target length.
 * The gradient w.r.t. log_probs is PyTorch's (which adds exp(log_probs) over each sample's
 * frames: the same gradient w.r.t. logits through log_softmax). */
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const IntList& input_lengths,
                const IntList& target_lengths, int64_t blank = 0, Reduction reduction = "mean",
                bool zero_infinity = false);
/** ctc_loss with the lengths as integer tensors (read on the host: eager). */
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank = 0, Reduction reduction = "mean",
                bool zero_infinity = false);
/** exp(x) - y x for log_input (else x - y log(x + eps)); full adds Stirling's term for y > 1. */
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input = true,
                        bool full = false, double eps = 1e-8, Reduction reduction = "mean");
/** 0.5 (log(max(var, eps)) + (input - target)^2 / max(var, eps)), + 0.5 log(2 pi) with full. */
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         bool full = false, double eps = 1e-6, Reduction reduction = "mean");
/** The mean over classes of binary_cross_entropy_with_logits, per sample. */
/** Multi-class hinge: per sample, sum over classes i != y of weight[y] max(0, margin -
 * x[y] + x[i])^p, divided by C (input [N, C] or [C], target class indices). */
Tensor multi_margin_loss(const Tensor& input, const Tensor& target, int64_t p = 1,
                         double margin = 1.0, const Tensor& weight = {},
                         Reduction reduction = "mean");
/** Multi-label hinge: target [N, C] holds each sample's classes, ended by the first -1;
 * per sample, sum over its target entries j and the classes i not among them of max(0, 1 - (x[j] -
 * x[i])), divided by C. */
Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target,
                              Reduction reduction = "mean");
Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target,
                                   const Tensor& weight = {}, Reduction reduction = "mean");

}  // namespace kiln::nn

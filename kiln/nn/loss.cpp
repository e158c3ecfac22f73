#include "kiln/nn/loss.h"

namespace kiln::nn {

namespace {
Tensor reduce(const Tensor& losses, Reduction reduction, const char* op) {
  if (reduction == "mean") return mean(losses);
  if (reduction == "sum") return sum(losses);
  KILN_CHECK(reduction == "none", value, "[{}] reduction must be 'mean', 'sum' or 'none', got '{}'",
             op, reduction);
  return losses;
}
}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  KILN_CHECK(input.shape() == target.shape(), shape,
             "[mse_loss] input {} and target {} must have the same shape", input.meta_str(),
             target.meta_str());
  Tensor diff = input - target;
  return reduce(diff * diff, reduction, "mse_loss");
}

namespace {
// The checks of nll_loss and cross_entropy, naming the op the user called.
void check_class_targets(const Tensor& input, const Tensor& target, const char* op) {
  KILN_CHECK(is_floating(input.dtype()), dtype, "[{}] input must be floating, got {}", op,
             input.meta_str());
  KILN_CHECK(is_integral(target.dtype(), /*include_bool=*/false), dtype,
             "[{}] expects class indices of an integer dtype as target, got {}", op,
             target.meta_str());
  KILN_CHECK((input.dim() == 2 && target.dim() == 1 && target.size(0) == input.size(0)) ||
                 (input.dim() == 1 && target.dim() == 0),
             shape, "[{}] expects input [N, C] with target [N] (or [C] with []), got {} and {}", op,
             input.meta_str(), target.meta_str());
}
}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, Reduction reduction, int64_t ignore_index) {
  check_class_targets(input, target, "nll_loss");
  bool batched = input.dim() == 2;
  Tensor logp = batched ? input : unsqueeze(input, 0);
  Tensor classes = reshape(target, {-1});
  Tensor keep = classes != ignore_index;
  Tensor safe = masked_fill(classes, logical_not(keep), 0);  // ignored rows read class 0
  Tensor picked = gather(logp, 1, unsqueeze(safe, 1));
  Tensor losses = masked_fill(neg(reshape(picked, {-1})), logical_not(keep), 0);
  if (reduction == "mean") return sum(losses) / sum(to(keep, losses.dtype()));
  Tensor out = reduce(losses, reduction, "nll_loss");
  return batched || reduction != "none" ? out : reshape(out, {});
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction,
                     int64_t ignore_index) {
  check_class_targets(input, target, "cross_entropy");
  return nll_loss(log_softmax(input, input.dim() - 1), target, reduction, ignore_index);
}

namespace {
void check_same_shape(const Tensor& input, const Tensor& target, const char* op) {
  KILN_CHECK(input.shape() == target.shape(), shape, "[{}] input {} and target {} must have the same shape",
             op, input.meta_str(), target.meta_str());
}
}  // namespace

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_same_shape(input, target, "l1_loss");
  return reduce(abs(input - target), reduction, "l1_loss");
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta) {
  check_same_shape(input, target, "smooth_l1_loss");
  KILN_CHECK(beta >= 0, value, "[smooth_l1_loss] beta must be non-negative, got {}", beta);
  Tensor d = abs(input - target);
  if (beta == 0) return reduce(d, reduction, "smooth_l1_loss");
  return reduce(where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction, "smooth_l1_loss");
}

Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction, double delta) {
  check_same_shape(input, target, "huber_loss");
  KILN_CHECK(delta > 0, value, "[huber_loss] delta must be positive, got {}", delta);
  Tensor d = abs(input - target);
  return reduce(where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta), reduction, "huber_loss");
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                            Reduction reduction) {
  check_same_shape(input, target, "binary_cross_entropy");
  KILN_CHECK(is_floating(input.dtype()), dtype, "[binary_cross_entropy] input must be floating, got {}",
             input.meta_str());
  Tensor log_p = clamp_min(log(input), -100.0), log_q = clamp_min(log(1.0 - input), -100.0);
  Tensor losses = neg(target * log_p + (1.0 - target) * log_q);
  if (weight.defined()) losses = losses * weight;
  return reduce(losses, reduction, "binary_cross_entropy");
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight,
                                        Reduction reduction, const Tensor& pos_weight) {
  check_same_shape(input, target, "binary_cross_entropy_with_logits");
  // -log sigmoid(x) = log(1 + exp(-|x|)) + max(-x, 0), finite for every x.
  Tensor neg_log_sigmoid = log1p(exp(neg(abs(input)))) + clamp_min(neg(input), 0.0);
  Tensor losses = pos_weight.defined()
                      ? (1.0 - target) * input + (1.0 + (pos_weight - 1.0) * target) * neg_log_sigmoid
                      : (1.0 - target) * input + neg_log_sigmoid;
  if (weight.defined()) losses = losses * weight;
  return reduce(losses, reduction, "binary_cross_entropy_with_logits");
}

Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction, bool log_target) {
  Tensor losses = log_target ? exp(target) * (target - input)
                             : masked_fill(target * log(target), target == 0.0, 0) - target * input;
  if (reduction == "batchmean") {
    KILN_CHECK(input.dim() > 0, shape, "[kl_div] batchmean needs a batch dim, got {}", input.meta_str());
    return sum(losses) / static_cast<double>(input.size(0));
  }
  return reduce(losses, reduction, "kl_div");
}

}  // namespace kiln::nn

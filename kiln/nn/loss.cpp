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

Tensor cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction,
                     int64_t ignore_index) {
  KILN_CHECK(is_floating(input.dtype()), dtype, "[cross_entropy] input must be floating, got {}",
             input.meta_str());
  KILN_CHECK(is_integral(target.dtype(), /*include_bool=*/false), dtype,
             "[cross_entropy] expects class indices of an integer dtype as target, got {}",
             target.meta_str());
  bool batched = input.dim() == 2;
  KILN_CHECK((batched && target.dim() == 1 && target.size(0) == input.size(0)) ||
                 (input.dim() == 1 && target.dim() == 0),
             shape, "[cross_entropy] expects input [N, C] with target [N] (or [C] with []), got {} "
             "and {}", input.meta_str(), target.meta_str());
  Tensor logits = batched ? input : unsqueeze(input, 0);
  Tensor classes = reshape(target, {-1});
  Tensor keep = classes != ignore_index;
  Tensor safe = masked_fill(classes, logical_not(keep), 0);  // ignored rows read class 0
  Tensor picked = gather(log_softmax(logits, 1), 1, unsqueeze(safe, 1));
  Tensor losses = masked_fill(neg(reshape(picked, {-1})), logical_not(keep), 0);
  if (reduction == "mean") return sum(losses) / sum(to(keep, losses.dtype()));
  Tensor out = reduce(losses, reduction, "cross_entropy");
  return batched || reduction != "none" ? out : reshape(out, {});
}

}  // namespace kiln::nn

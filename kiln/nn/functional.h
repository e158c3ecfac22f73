#pragma once
// More of torch.nn.functional, made of ordinary ops (so they differentiate, trace and
// export as those ops): dropout, batch and group normalization, attention.

#include <optional>
#include <string>
#include <tuple>

#include "kiln/api/functional.h"

namespace kiln::nn {

/** In training, each element zeroed with probability p and the rest scaled by 1/(1-p);
 * otherwise x itself. */
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);
/** Whole channels zeroed: x [N, C, *spatial] (or unbatched [C, *spatial]) with 1
 * (dropout1d), 2 or 3 spatial dims, each channel kept with probability 1 - p and scaled
 * by 1/(1-p). */
Tensor dropout1d(const Tensor& x, double p = 0.5, bool training = true);
Tensor dropout2d(const Tensor& x, double p = 0.5, bool training = true);
Tensor dropout3d(const Tensor& x, double p = 0.5, bool training = true);
/** torch.feature_dropout: whole channels of x [N, C, *] (any number of spatial dims, at
 * least one) zeroed with probability p. */
Tensor feature_dropout(const Tensor& x, double p = 0.5, bool training = true);
/** torch.native_dropout: (output, keep mask (bool)); outside training (x, all true). */
std::pair<Tensor, Tensor> native_dropout(const Tensor& x, double p, bool training);
/** Dropout for SELU networks: dropped elements take SELU's negative saturation, and an
 * affine map keeps the mean and variance (per element; feature_: per channel). */
Tensor alpha_dropout(const Tensor& x, double p = 0.5, bool training = false);
Tensor feature_alpha_dropout(const Tensor& x, double p = 0.5, bool training = false);
/** softmax((logits + Gumbel noise) / tau) along dim; hard: the one-hot of its argmax in the
 * forward, the soft sample's gradient in the backward (straight-through). */
Tensor gumbel_softmax(const Tensor& logits, double tau = 1.0, bool hard = false, int64_t dim = -1);
/** x1^T A x2 + b per output feature: x1 [*, I1], x2 [*, I2], weight [O, I1, I2], bias [O]. */
Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight,
                const Tensor& bias = Tensor());
/** The p-norm distances between the rows of x [N, M], pairs (i, j) with i < j in row-major
 * order: [N (N - 1) / 2]. */
Tensor pdist(const Tensor& x, double p = 2.0);

/** x [N, C, *] normalized per channel: with the batch's statistics in training (then
 * running_mean / running_var, when given, move by `momentum` toward them in place, the
 * variance unbiased), else with the running ones; then * weight + bias (each optional). */
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  bool training = false, double momentum = 0.1, double eps = 1e-5);
/** torch.native_batch_norm: (output, save_mean, save_invstd), the batch's mean and
 * 1 / sqrt(biased variance + eps) per channel in training, empty [0] tensors outside it. */
std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& x, const Tensor& weight,
                                                     const Tensor& bias, const Tensor& running_mean,
                                                     const Tensor& running_var, bool training,
                                                     double momentum, double eps);

/** x [N, C, *] normalized over each of num_groups channel groups (and the other dims),
 * then * weight + bias per channel (each optional). */
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

/** x [N, C, *] normalized per (sample, channel) over the other dims (use_input_stats),
 * or with the running statistics; in training with running statistics given, they move
 * by momentum toward the batch's mean instance statistics (variance unbiased), in place. */
Tensor instance_norm(const Tensor& x, const Tensor& running_mean = Tensor(),
                     const Tensor& running_var = Tensor(), const Tensor& weight = Tensor(),
                     const Tensor& bias = Tensor(), bool use_input_stats = true,
                     double momentum = 0.1, double eps = 1e-5);
/** x / (k + alpha * mean of x^2 over `size` neighbouring channels)^beta (x [N, C, *]). */
Tensor local_response_norm(const Tensor& x, int64_t size, double alpha = 1e-4, double beta = 0.75,
                           double k = 1.0);

/** weight's rows at `indices`, as torch.nn.functional.embedding: padding_idx's row gets
 * no gradient; with max_norm, the rows looked up whose norm_type-norm exceeds it are
 * first rescaled to max_norm in weight itself (in place, not differentiated); with
 * scale_grad_by_freq each row's gradient is divided by how often its index occurs. */
Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx,
                 std::optional<double> max_norm = std::nullopt, double norm_type = 2.0,
                 bool scale_grad_by_freq = false);
/** torch.embedding_renorm_'s result, out of place: weight with each row that `indices`
 * looks up and whose norm_type-norm exceeds max_norm rescaled to max_norm (not
 * differentiated). */
Tensor embedding_renorm(const Tensor& weight, const Tensor& indices, double max_norm,
                        double norm_type);
struct EmbeddingBagOptions {
  /** "sum", "mean" or "max" of each bag's rows. */
  std::string mode = "mean";
  /** With a 1-D input: where each bag starts (bag i is [offsets[i], offsets[i + 1])). */
  Tensor offsets;
  /** Weights of each index's row (mode "sum" only), shaped like the input. */
  Tensor per_sample_weights;
  /** Indices equal to it are left out of their bag (and of its count for "mean"). */
  std::optional<int64_t> padding_idx;
  /** offsets has one more entry, the end of the last bag. */
  bool include_last_offset = false;
  /** As embedding's: the rows looked up whose norm_type-norm exceeds max_norm are rescaled
   * to it in weight, in place, before the bags are reduced. */
  std::optional<double> max_norm;
  double norm_type = 2.0;
  /** Each row's gradient divided by how often its index occurs in the input. */
  bool scale_grad_by_freq = false;
};
/** Each bag's rows of weight reduced: input [B, N] (B bags of N) or 1-D with offsets;
 * returns [B, dim]. An empty bag gives zeros. */
Tensor embedding_bag(const Tensor& input, const Tensor& weight,
                     const EmbeddingBagOptions& options = {});

/** Cosine of the angle between x1 and x2 along dim: each normalized by max(norm, eps). */
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);
/** The p-norm of x1 - x2 + eps along the last dim. */
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2.0, double eps = 1e-6,
                         bool keepdim = false);

/** softmax(q k^T * scale + mask) v over the last two dims (scale: 1 / sqrt(q.size(-1))).
 * attn_mask: bool (true = attend) or added to the scores; is_causal masks the future
 * (not with attn_mask). Rows that attend nowhere are NaN, as PyTorch's math path. */
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt);

}  // namespace kiln::nn

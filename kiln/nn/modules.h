#pragma once
// torch.nn's parameter-free modules under their PyTorch names: each is a Functional, a
// module that applies one function (with the arguments fixed at construction) to its
// inputs, and sees the module's training flag. Modules with parameters (PReLU, Bilinear)
// are below them.

#include <functional>
#include <string>

#include "kiln/nn/activation.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/layers.h"
#include "kiln/nn/loss.h"

namespace kiln::nn {

/** A module whose forward is `f(inputs, training())`. */
class Functional : public Module {
 public:
  using Fn = std::function<Tensor(const TensorList&, bool training)>;
  explicit Functional(Fn f) : f_(std::move(f)) {}
  TensorList forward(const TensorList& in) override { return {f_(in, training())}; }

 private:
  Fn f_;
};

// A Functional of the first input: KILN_UNARY_MODULE(Name, (ctor params), expression of x).
#define KILN_UNARY_MODULE(Name, params, ...)                            \
  struct Name : Functional {                                            \
    explicit Name params : Functional([=](const TensorList& in, bool) { \
      const Tensor& x = in.at(0);                                       \
      return __VA_ARGS__;                                               \
    }) {}                                                               \
  };
// ... and of the first input and the training flag.
#define KILN_TRAINING_MODULE(Name, params, ...)                                  \
  struct Name : Functional {                                                     \
    explicit Name params : Functional([=](const TensorList& in, bool training) { \
      const Tensor& x = in.at(0);                                                \
      return __VA_ARGS__;                                                        \
    }) {}                                                                        \
  };
// A loss of (input, target[, third]): forward({input, target, ...}).
#define KILN_LOSS_MODULE(Name, params, ...)                                                       \
  struct Name : Functional {                                                                      \
    explicit Name params : Functional([=](const TensorList& in, bool) { return __VA_ARGS__; }) {} \
  };

// ---- activations ----
KILN_UNARY_MODULE(LeakyReLU, (double negative_slope = 0.01), leaky_relu(x, negative_slope))
KILN_UNARY_MODULE(ELU, (double alpha = 1.0), elu(x, alpha))
KILN_UNARY_MODULE(SELU, (), selu(x))
KILN_UNARY_MODULE(CELU, (double alpha = 1.0), celu(x, alpha))
KILN_UNARY_MODULE(Softplus, (double beta = 1.0, double threshold = 20.0),
                  softplus(x, beta, threshold))
KILN_UNARY_MODULE(Hardtanh, (double min_val = -1.0, double max_val = 1.0),
                  hardtanh(x, min_val, max_val))
KILN_UNARY_MODULE(ReLU6, (), relu6(x))
KILN_UNARY_MODULE(Hardsigmoid, (), hardsigmoid(x))
KILN_UNARY_MODULE(Hardswish, (), hardswish(x))
KILN_UNARY_MODULE(Mish, (), mish(x))
KILN_UNARY_MODULE(LogSigmoid, (), logsigmoid(x))
KILN_UNARY_MODULE(Softsign, (), softsign(x))
KILN_UNARY_MODULE(Tanhshrink, (), tanhshrink(x))
KILN_UNARY_MODULE(Softshrink, (double lambd = 0.5), softshrink(x, lambd))
KILN_UNARY_MODULE(Hardshrink, (double lambd = 0.5), hardshrink(x, lambd))
KILN_UNARY_MODULE(Threshold, (double threshold_value, double value),
                  threshold(x, threshold_value, value))
KILN_UNARY_MODULE(GLU, (int64_t dim = -1), glu(x, dim))
KILN_UNARY_MODULE(Softmin, (int64_t dim), softmin(x, dim))
KILN_UNARY_MODULE(Softmax2d, (), softmax(x, -3))
KILN_TRAINING_MODULE(RReLU, (double lower = 1.0 / 8, double upper = 1.0 / 3),
                     rrelu(x, lower, upper, training))

// ---- dropouts ----
KILN_TRAINING_MODULE(Dropout1d, (double p = 0.5), dropout1d(x, p, training))
KILN_TRAINING_MODULE(Dropout2d, (double p = 0.5), dropout2d(x, p, training))
KILN_TRAINING_MODULE(Dropout3d, (double p = 0.5), dropout3d(x, p, training))
KILN_TRAINING_MODULE(AlphaDropout, (double p = 0.5), alpha_dropout(x, p, training))
KILN_TRAINING_MODULE(FeatureAlphaDropout, (double p = 0.5), feature_alpha_dropout(x, p, training))

// ---- pooling, padding, reshaping ----
KILN_UNARY_MODULE(MaxPool1d,
                  (IntList kernel, IntList stride = {}, IntList padding = {0},
                   IntList dilation = {1}, bool ceil_mode = false),
                  max_pool1d(x, kernel, stride, padding, dilation, ceil_mode))
KILN_UNARY_MODULE(MaxPool3d,
                  (IntList kernel, IntList stride = {}, IntList padding = {0},
                   IntList dilation = {1}, bool ceil_mode = false),
                  max_pool3d(x, kernel, stride, padding, dilation, ceil_mode))
KILN_UNARY_MODULE(AvgPool1d,
                  (IntList kernel, IntList stride = {}, IntList padding = {0},
                   bool ceil_mode = false, bool count_include_pad = true),
                  avg_pool1d(x, kernel, stride, padding, ceil_mode, count_include_pad))
KILN_UNARY_MODULE(AvgPool3d,
                  (IntList kernel, IntList stride = {}, IntList padding = {0},
                   bool ceil_mode = false, bool count_include_pad = true,
                   std::optional<int64_t> divisor_override = std::nullopt),
                  avg_pool3d(x, kernel, stride, padding, ceil_mode, count_include_pad,
                             divisor_override))
KILN_UNARY_MODULE(LPPool1d,
                  (double norm_type, IntList kernel, IntList stride = {}, bool ceil_mode = false),
                  lp_pool1d(x, norm_type, kernel, stride, ceil_mode))
KILN_UNARY_MODULE(LPPool2d,
                  (double norm_type, IntList kernel, IntList stride = {}, bool ceil_mode = false),
                  lp_pool2d(x, norm_type, kernel, stride, ceil_mode))
KILN_UNARY_MODULE(AdaptiveAvgPool1d, (IntList output_size), adaptive_avg_pool1d(x, output_size))
KILN_UNARY_MODULE(AdaptiveAvgPool3d, (IntList output_size), adaptive_avg_pool3d(x, output_size))
KILN_UNARY_MODULE(AdaptiveMaxPool1d, (IntList output_size), adaptive_max_pool1d(x, output_size))
KILN_UNARY_MODULE(AdaptiveMaxPool2d, (IntList output_size), adaptive_max_pool2d(x, output_size))
KILN_UNARY_MODULE(AdaptiveMaxPool3d, (IntList output_size), adaptive_max_pool3d(x, output_size))
/** The padding of torch.nn's *Pad*d modules: (left, right[, top, bottom[, front, back]]). */
KILN_UNARY_MODULE(ZeroPad2d, (IntList padding), pad(x, padding, 0.0))
KILN_UNARY_MODULE(ConstantPad, (IntList padding, double value), pad(x, padding, value))
KILN_UNARY_MODULE(ReflectionPad, (IntList padding), pad(x, padding, "reflect"))
KILN_UNARY_MODULE(ReplicationPad, (IntList padding), pad(x, padding, "replicate"))
KILN_UNARY_MODULE(CircularPad, (IntList padding), pad(x, padding, "circular"))
KILN_UNARY_MODULE(PixelUnshuffle, (int64_t downscale_factor), pixel_unshuffle(x, downscale_factor))
KILN_UNARY_MODULE(ChannelShuffle, (int64_t groups), channel_shuffle(x, groups))
KILN_UNARY_MODULE(Unflatten, (int64_t dim, IntList sizes), unflatten(x, dim, sizes))
KILN_UNARY_MODULE(LocalResponseNorm,
                  (int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1.0),
                  local_response_norm(x, size, alpha, beta, k))

// ---- distances and losses: forward({input, target[, ...]}) ----
KILN_LOSS_MODULE(CosineSimilarity, (int64_t dim = 1, double eps = 1e-8),
                 cosine_similarity(in.at(0), in.at(1), dim, eps))
KILN_LOSS_MODULE(PairwiseDistance, (double p = 2.0, double eps = 1e-6, bool keepdim = false),
                 pairwise_distance(in.at(0), in.at(1), p, eps, keepdim))
KILN_LOSS_MODULE(MSELoss, (std::string reduction = "mean"), mse_loss(in.at(0), in.at(1), reduction))
KILN_LOSS_MODULE(L1Loss, (std::string reduction = "mean"), l1_loss(in.at(0), in.at(1), reduction))
KILN_LOSS_MODULE(CrossEntropyLoss,
                 (Tensor weight = {}, int64_t ignore_index = -100, std::string reduction = "mean",
                  double label_smoothing = 0.0),
                 cross_entropy(in.at(0), in.at(1), reduction, ignore_index, label_smoothing,
                               weight))
KILN_LOSS_MODULE(NLLLoss,
                 (Tensor weight = {}, int64_t ignore_index = -100, std::string reduction = "mean"),
                 nll_loss(in.at(0), in.at(1), reduction, ignore_index, weight))
KILN_LOSS_MODULE(BCELoss, (Tensor weight = {}, std::string reduction = "mean"),
                 binary_cross_entropy(in.at(0), in.at(1), weight, reduction))
KILN_LOSS_MODULE(BCEWithLogitsLoss,
                 (Tensor weight = {}, std::string reduction = "mean", Tensor pos_weight = {}),
                 binary_cross_entropy_with_logits(in.at(0), in.at(1), weight, reduction,
                                                  pos_weight))
KILN_LOSS_MODULE(HuberLoss, (std::string reduction = "mean", double delta = 1.0),
                 huber_loss(in.at(0), in.at(1), reduction, delta))
KILN_LOSS_MODULE(SmoothL1Loss, (std::string reduction = "mean", double beta = 1.0),
                 smooth_l1_loss(in.at(0), in.at(1), reduction, beta))
KILN_LOSS_MODULE(KLDivLoss, (std::string reduction = "mean", bool log_target = false),
                 kl_div(in.at(0), in.at(1), reduction, log_target))
KILN_LOSS_MODULE(SoftMarginLoss, (std::string reduction = "mean"),
                 soft_margin_loss(in.at(0), in.at(1), reduction))
KILN_LOSS_MODULE(HingeEmbeddingLoss, (double margin = 1.0, std::string reduction = "mean"),
                 hinge_embedding_loss(in.at(0), in.at(1), margin, reduction))
KILN_LOSS_MODULE(MarginRankingLoss, (double margin = 0.0, std::string reduction = "mean"),
                 margin_ranking_loss(in.at(0), in.at(1), in.at(2), margin, reduction))
KILN_LOSS_MODULE(CosineEmbeddingLoss, (double margin = 0.0, std::string reduction = "mean"),
                 cosine_embedding_loss(in.at(0), in.at(1), in.at(2), margin, reduction))
KILN_LOSS_MODULE(TripletMarginLoss,
                 (double margin = 1.0, double p = 2.0, double eps = 1e-6, bool swap = false,
                  std::string reduction = "mean"),
                 triplet_margin_loss(in.at(0), in.at(1), in.at(2), margin, p, eps, swap, reduction))
KILN_LOSS_MODULE(PoissonNLLLoss,
                 (bool log_input = true, bool full = false, double eps = 1e-8,
                  std::string reduction = "mean"),
                 poisson_nll_loss(in.at(0), in.at(1), log_input, full, eps, reduction))
KILN_LOSS_MODULE(GaussianNLLLoss,
                 (bool full = false, double eps = 1e-6, std::string reduction = "mean"),
                 gaussian_nll_loss(in.at(0), in.at(1), in.at(2), full, eps, reduction))
/** forward({log_probs, targets, input_lengths, target_lengths}) (lengths as tensors). */
KILN_LOSS_MODULE(CTCLoss,
                 (int64_t blank = 0, std::string reduction = "mean", bool zero_infinity = false),
                 ctc_loss(in.at(0), in.at(1), in.at(2), in.at(3), blank, reduction, zero_infinity))

#undef KILN_UNARY_MODULE
#undef KILN_TRAINING_MODULE
#undef KILN_LOSS_MODULE

// ---- with parameters ----

/** prelu with `num_parameters` slopes (1, or one per channel), all `init` (torch.nn.PReLU). */
class PReLU : public Module {
 public:
  explicit PReLU(int64_t num_parameters = 1, double init = 0.25, Device device = Device("cpu:0"));
  TensorList forward(const TensorList& in) override { return {prelu(in.at(0), weight)}; }
  Tensor& weight;
};

/** bilinear(x1, x2, weight [out, in1, in2], bias [out]), both uniform in +-1/sqrt(in1)
 * (torch.nn.Bilinear's bound). */
class Bilinear : public Module {
 public:
  Bilinear(int64_t in1, int64_t in2, int64_t out, bool bias = true,
           Device device = Device("cpu:0"));
  TensorList forward(const TensorList& in) override;
  Tensor& weight;
  Tensor* bias = nullptr;
};

/** Batch normalization over [N, C, D, H, W] (batch_norm normalizes any [N, C, *]). */
class BatchNorm3d : public BatchNorm1d {
 public:
  using BatchNorm1d::BatchNorm1d;
};

}  // namespace kiln::nn

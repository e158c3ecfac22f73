#pragma once
// Layers and the reference models (mlp, gpt, bn_mlp).

#include <map>

#include "kiln/nn/conv.h"
#include "kiln/nn/module.h"

namespace kiln::nn {

/** y = x W^T + b; W, b uniform in +-1/sqrt(in) (as torch.nn.Linear's bound). */
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias = true, Device device = Device("cpu:0"));
  TensorList forward(const TensorList& in) override;
  Tensor& weight;
  Tensor* bias = nullptr;
};

/** Rows of weight [num, dim] ~ N(0, 1) (torch.nn.Embedding); padding_idx's row starts
 * at zero and gets no gradient; max_norm renormalizes the rows looked up (see
 * nn::embedding). */
class Embedding : public Module {
 public:
  Embedding(int64_t num, int64_t dim, Device device = Device("cpu:0"),
            std::optional<int64_t> padding_idx = std::nullopt,
            std::optional<double> max_norm = std::nullopt);
  TensorList forward(const TensorList& in) override;
  Tensor& weight;
  std::optional<int64_t> padding_idx;
  std::optional<double> max_norm;
};

/** embedding_bag over its own weight (torch.nn.EmbeddingBag): forward({input}) or
 * ({input, offsets}). */
class EmbeddingBag : public Module {
 public:
  EmbeddingBag(int64_t num, int64_t dim, std::string mode = "mean",
               Device device = Device("cpu:0"));
  TensorList forward(const TensorList& in) override;
  Tensor& weight;
  std::string mode;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, Device device = Device("cpu:0"));
  TensorList forward(const TensorList& in) override;
  Tensor &weight, &bias;
  int64_t dim;
  double eps;
};

class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t dim, Device device = Device("cpu:0"));
  TensorList forward(const TensorList& in) override;
  Tensor& weight;
  int64_t dim;
};

class ReLU : public Module {
 public:
  TensorList forward(const TensorList& in) override { return {relu(in[0])}; }
};

// Modules of one function (torch.nn's), for Sequential.
class Identity : public Module {
 public:
  TensorList forward(const TensorList& in) override { return in; }
};
class Sigmoid : public Module {
 public:
  TensorList forward(const TensorList& in) override { return {sigmoid(in[0])}; }
};
class Tanh : public Module {
 public:
  TensorList forward(const TensorList& in) override { return {tanh(in[0])}; }
};
class SiLU : public Module {
 public:
  TensorList forward(const TensorList& in) override { return {silu(in[0])}; }
};
class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : dim_(dim) {}
  TensorList forward(const TensorList& in) override { return {softmax(in[0], dim_)}; }

 private:
  int64_t dim_;
};
class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int64_t dim) : dim_(dim) {}
  TensorList forward(const TensorList& in) override { return {log_softmax(in[0], dim_)}; }

 private:
  int64_t dim_;
};

/** instance_norm per sample and channel (torch.nn.InstanceNorm1d/2d: no affine and no
 * running statistics by default). */
class InstanceNorm : public Module {
 public:
  explicit InstanceNorm(int64_t channels, double eps = 1e-5, double momentum = 0.1,
                        bool affine = false, bool track_running_stats = false,
                        Device device = Device("cpu:0"));
  TensorList forward(const TensorList& in) override;
  Tensor *weight = nullptr, *bias = nullptr, *running_mean = nullptr, *running_var = nullptr;
  double eps, momentum;
};

class GELU : public Module {
 public:
  explicit GELU(bool tanh = false) : tanh_(tanh) {}
  TensorList forward(const TensorList& in) override {
    return {gelu(in[0], tanh_ ? "tanh" : "none")};
  }

 private:
  bool tanh_;
};

/** Identity in eval mode; in training, zeroes elements with probability p and scales
 * the rest by 1/(1-p). */
class Dropout : public Module {
 public:
  explicit Dropout(double p) : p_(p) {}
  TensorList forward(const TensorList& in) override;

 private:
  double p_;
};

/** Batch normalization over [N, C]; running statistics are persistent buffers, updated
 * in place in training mode (a buffer mutation in exported programs). */
class BatchNorm1d : public Module {
 public:
  explicit BatchNorm1d(int64_t features, double momentum = 0.1, double eps = 1e-5,
                       Device device = Device("cpu:0"));
  TensorList forward(const TensorList& in) override;
  Tensor &weight, &bias, &running_mean, &running_var, &num_batches_tracked;

 private:
  double momentum_, eps_;
};

/** The same over [N, C, H, W] (batch_norm normalizes any [N, C, *]). */
class BatchNorm2d : public BatchNorm1d {
 public:
  using BatchNorm1d::BatchNorm1d;
};

/** group_norm with a weight (ones) and bias (zeros) per channel. */
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t channels, double eps = 1e-5,
            Device device = Device("cpu:0"));
  TensorList forward(const TensorList& in) override;
  Tensor &weight, &bias;
  int64_t num_groups;
  double eps;
};

/** conv1d / conv2d with weight [out, in / groups, *kernel] and bias [out], both uniform in
 * +-1/sqrt(fan_in), fan_in = in / groups * prod(kernel) (torch.nn.Conv2d's bounds). */
class Conv1d : public Module {
 public:
  Conv1d(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1, int64_t padding = 0,
         int64_t dilation = 1, int64_t groups = 1, bool bias = true,
         Device device = Device("cpu:0"));
  TensorList forward(const TensorList& in) override;
  Tensor& weight;
  Tensor* bias = nullptr;
  int64_t stride, padding, dilation, groups;
};
/** conv2d / conv3d (rank 2 or 3 spatial dims) with weight [out, in / groups, *kernel] and
 * bias [out], uniform in +-1/sqrt(fan_in); a one-value kernel is cubic / square. */
class ConvNd : public Module {
 public:
  ConvNd(size_t rank, int64_t in, int64_t out, const IntList& kernel, const IntList& stride,
         const IntList& padding, const IntList& dilation, int64_t groups, bool bias, Device device);
  TensorList forward(const TensorList& in) override;
  Tensor& weight;
  Tensor* bias = nullptr;
  IntList stride, padding, dilation;
  int64_t groups;
  size_t rank;
};
class Conv2d : public ConvNd {
 public:
  Conv2d(int64_t in, int64_t out, const IntList& kernel, const IntList& stride = {1},
         const IntList& padding = {0}, const IntList& dilation = {1}, int64_t groups = 1,
         bool bias = true, Device device = Device("cpu:0"))
      : ConvNd(2, in, out, kernel, stride, padding, dilation, groups, bias, device) {}
};
class Conv3d : public ConvNd {
 public:
  Conv3d(int64_t in, int64_t out, const IntList& kernel, const IntList& stride = {1},
         const IntList& padding = {0}, const IntList& dilation = {1}, int64_t groups = 1,
         bool bias = true, Device device = Device("cpu:0"))
      : ConvNd(3, in, out, kernel, stride, padding, dilation, groups, bias, device) {}
};

/** conv_transpose2d with weight [in, out / groups, *kernel] and bias [out], uniform in
 * +-1/sqrt(fan_in), fan_in = out / groups * prod(kernel) (torch.nn.ConvTranspose2d's). */
class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in, int64_t out, const IntList& kernel, const IntList& stride = {1},
                  const IntList& padding = {0}, const IntList& output_padding = {0},
                  int64_t groups = 1, bool bias = true, const IntList& dilation = {1},
                  Device device = Device("cpu:0"));
  TensorList forward(const TensorList& in) override;
  Tensor& weight;
  Tensor* bias = nullptr;
  IntList stride, padding, output_padding, dilation;
  int64_t groups;
};

/** interpolate with fixed options (torch.nn.Upsample). */
class Upsample : public Module {
 public:
  explicit Upsample(InterpolateOptions options) : options_(std::move(options)) {}
  TensorList forward(const TensorList& in) override { return {interpolate(in[0], options_)}; }

 private:
  InterpolateOptions options_;
};

class PixelShuffle : public Module {
 public:
  explicit PixelShuffle(int64_t upscale_factor) : r_(upscale_factor) {}
  TensorList forward(const TensorList& in) override { return {pixel_shuffle(in[0], r_)}; }

 private:
  int64_t r_;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(IntList kernel, IntList stride = {}, IntList padding = {0},
                     bool ceil_mode = false)
      : kernel_(std::move(kernel)),
        stride_(std::move(stride)),
        padding_(std::move(padding)),
        ceil_mode_(ceil_mode) {}
  TensorList forward(const TensorList& in) override;

 private:
  IntList kernel_, stride_, padding_;
  bool ceil_mode_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(IntList kernel, IntList stride = {}, IntList padding = {0},
                     bool ceil_mode = false, bool count_include_pad = true)
      : kernel_(std::move(kernel)),
        stride_(std::move(stride)),
        padding_(std::move(padding)),
        ceil_mode_(ceil_mode),
        count_include_pad_(count_include_pad) {}
  TensorList forward(const TensorList& in) override;

 private:
  IntList kernel_, stride_, padding_;
  bool ceil_mode_, count_include_pad_;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(IntList output_size) : output_size_(std::move(output_size)) {}
  TensorList forward(const TensorList& in) override;

 private:
  IntList output_size_;
};

/** flatten(x, start_dim, end_dim); by default everything but the batch dim. */
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : start_(start_dim), end_(end_dim) {}
  TensorList forward(const TensorList& in) override { return {flatten(in[0], start_, end_)}; }

 private:
  int64_t start_, end_;
};

/** all_reduce of its input over the process group bound to `group` (a mesh axis). */
class AllReduce : public Module {
 public:
  AllReduce(std::string reduce_op, std::string group)
      : op_(std::move(reduce_op)), group_(std::move(group)) {}
  TensorList forward(const TensorList& in) override { return {all_reduce(in[0], op_, group_)}; }

 private:
  std::string op_, group_;
};

class Sequential : public Module {
 public:
  explicit Sequential(std::vector<std::shared_ptr<Module>> layers);
  TensorList forward(const TensorList& in) override;

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

/** Linear + ReLU layers of the given widths (no ReLU after the last). */
class MLP : public Sequential {
 public:
  MLP(const std::vector<int64_t>& widths, Device device = Device("cpu:0"));
};

/** Multi-head causal self-attention; the causal mask is a non-persistent buffer. */
class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(int64_t width, int64_t heads, int64_t context,
                      Device device = Device("cpu:0"));
  TensorList forward(const TensorList& in) override;

 private:
  int64_t width_, heads_;
  std::shared_ptr<Linear> qkv_, proj_;
  Tensor& mask_;
};

/** Pre-LN transformer block: x + attn(ln1(x)); x + mlp(ln2(x)) with a 4x GELU MLP. */
class TransformerBlock : public Module {
 public:
  TransformerBlock(int64_t width, int64_t heads, int64_t context, Device device = Device("cpu:0"));
  TensorList forward(const TensorList& in) override;

 private:
  std::shared_ptr<LayerNorm> ln1_, ln2_;
  std::shared_ptr<CausalSelfAttention> attn_;
  std::shared_ptr<Linear> fc_, proj_;
};

/** The benchmark BLOCK, op for op as bench/peers/models.py: pre-LN, non-causal softmax
 * attention written with matmul, erf GELU MLP, two residuals. */
class BenchBlock : public Module {
 public:
  BenchBlock(int64_t width = 256, int64_t heads = 4, int64_t hidden = 1024,
             Device device = Device("cpu:0"));
  TensorList forward(const TensorList& in) override;

 private:
  int64_t width_, heads_;
  std::shared_ptr<LayerNorm> ln1_;
  std::shared_ptr<Linear> qkv_, proj_;
  std::shared_ptr<LayerNorm> ln2_;
  std::shared_ptr<Linear> fc1_, fc2_;
};

struct GPTConfig {
  int64_t vocab = 256, context = 64, layers = 2, heads = 4, width = 64;
};

/** A GPT-style language model: token + position embeddings, blocks, final LayerNorm,
 * a linear head. forward({ids i64[B, T]}) -> {logits f32[B, T, vocab]}. */
class GPT : public Module {
 public:
  explicit GPT(GPTConfig config, Device device = Device("cpu:0"));
  TensorList forward(const TensorList& in) override;
  const GPTConfig config;

 private:
  std::shared_ptr<Embedding> wte_, wpe_;
  std::vector<std::shared_ptr<TransformerBlock>> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;
  std::shared_ptr<Linear> head_;
};

/** Settings of a reference model; unknown keys are an error. */
using ModelConfig = std::map<std::string, int64_t>;

/** A reference model by name ("mlp", "block", "gpt", "bn_mlp"), seeded, with example
 * inputs; "mlp" and "block" are the benchmark workloads. */
struct ReferenceModel {
  std::shared_ptr<Module> module;
  TensorList example_inputs;
};
/** A reference model: its name, what it is, and every setting with its default. */
struct ReferenceModelInfo {
  std::string name;
  std::string about;
  ModelConfig defaults;
};
/** Every model make_reference_model knows (the one list its settings come from). */
const std::vector<ReferenceModelInfo>& reference_models();
/** Builds a model; `overrides` must name settings it has (positive integers), else a
 * value Error listing them. */
ReferenceModel make_reference_model(const std::string& name, const ModelConfig& overrides = {},
                                    uint64_t seed = 0);
/** The names make_reference_model knows. */
std::vector<std::string> reference_model_names();

}  // namespace kiln::nn

#include "kiln/nn/layers.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/autograd/autograd.h"
#include "kiln/nn/conv.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/modules.h"

namespace kiln::nn {

namespace {
Tensor uniform(const IntList& shape, double bound, Device d) {
  return sub(mul(rand(shape, {.device = d}), 2 * bound), bound);
}
}  // namespace

Linear::Linear(int64_t in, int64_t out, bool with_bias, Device d)
    : weight(register_parameter("weight", uniform({out, in}, 1.0 / std::sqrt(double(in)), d))) {
  if (with_bias) bias = &register_parameter("bias", uniform({out}, 1.0 / std::sqrt(double(in)), d));
}
TensorList Linear::forward(const TensorList& in) {
  return {linear(in[0], weight, bias ? *bias : Tensor())};
}

Embedding::Embedding(int64_t num, int64_t dim, Device d, std::optional<int64_t> padding,
                     std::optional<double> norm)
    : weight(register_parameter("weight", randn({num, dim}, {.device = d}))),
      padding_idx(padding),
      max_norm(norm) {
  if (padding_idx) {
    KILN_CHECK(*padding_idx >= -num && *padding_idx < num, value,
               "[Embedding] padding_idx {} must be within num_embeddings {}", *padding_idx, num);
    autograd::NoGradGuard no_grad;
    Tensor row = select(weight, 0, *padding_idx < 0 ? *padding_idx + num : *padding_idx);
    fill_(row, 0.0);
  }
}
TensorList Embedding::forward(const TensorList& in) {
  if (!padding_idx && !max_norm) return {kiln::embedding(weight, in[0])};
  return {embedding(in[0], weight, padding_idx, max_norm)};
}

EmbeddingBag::EmbeddingBag(int64_t num, int64_t dim, std::string m, Device d)
    : weight(register_parameter("weight", randn({num, dim}, {.device = d}))), mode(std::move(m)) {}
TensorList EmbeddingBag::forward(const TensorList& in) {
  return {
      embedding_bag(in.at(0), weight, {.mode = mode, .offsets = in.size() > 1 ? in[1] : Tensor()})};
}

InstanceNorm::InstanceNorm(int64_t c, double e, double m, bool affine, bool track, Device d)
    : eps(e), momentum(m) {
  if (affine) {
    weight = &register_parameter("weight", ones({c}, {.device = d}));
    bias = &register_parameter("bias", zeros({c}, {.device = d}));
  }
  if (track) {
    running_mean = &register_buffer("running_mean", zeros({c}, {.device = d}));
    running_var = &register_buffer("running_var", ones({c}, {.device = d}));
  }
}
TensorList InstanceNorm::forward(const TensorList& in) {
  auto opt = [](Tensor* t) { return t ? *t : Tensor(); };
  bool input_stats = training() || !running_mean;
  return {instance_norm(in[0], opt(running_mean), opt(running_var), opt(weight), opt(bias),
                        input_stats, momentum, eps)};
}

LayerNorm::LayerNorm(int64_t d, double e, Device dev)
    : weight(register_parameter("weight", ones({d}, {.device = dev}))),
      bias(register_parameter("bias", zeros({d}, {.device = dev}))),
      dim(d),
      eps(e) {}
TensorList LayerNorm::forward(const TensorList& in) {
  return {layer_norm(in[0], {dim}, weight, bias, eps)};
}

RMSNorm::RMSNorm(int64_t d, Device dev)
    : weight(register_parameter("weight", ones({d}, {.device = dev}))), dim(d) {}
TensorList RMSNorm::forward(const TensorList& in) { return {rms_norm(in[0], {dim}, weight)}; }

TensorList Dropout::forward(const TensorList& in) { return {dropout(in[0], p_, training())}; }

BatchNorm1d::BatchNorm1d(int64_t c, double momentum, double eps, Device d)
    : weight(register_parameter("weight", ones({c}, {.device = d}))),
      bias(register_parameter("bias", zeros({c}, {.device = d}))),
      running_mean(register_buffer("running_mean", zeros({c}, {.device = d}))),
      running_var(register_buffer("running_var", ones({c}, {.device = d}))),
      num_batches_tracked(
          register_buffer("num_batches_tracked", zeros({}, {.dtype = i64, .device = d}))),
      momentum_(momentum),
      eps_(eps) {}

TensorList BatchNorm1d::forward(const TensorList& in) {
  if (training()) {
    autograd::NoGradGuard no_grad;
    add_(num_batches_tracked, 1);
  }
  return {batch_norm(in[0], running_mean, running_var, weight, bias, training(), momentum_, eps_)};
}

GroupNorm::GroupNorm(int64_t groups, int64_t c, double eps_, Device d)
    : weight(register_parameter("weight", ones({c}, {.device = d}))),
      bias(register_parameter("bias", zeros({c}, {.device = d}))),
      num_groups(groups),
      eps(eps_) {}
TensorList GroupNorm::forward(const TensorList& in) {
  return {group_norm(in[0], num_groups, weight, bias, eps)};
}

namespace {
double conv_bound(int64_t in, int64_t groups, const IntList& kernel) {
  KILN_CHECK(groups > 0 && in % groups == 0, value,
             "[Conv] groups ({}) must divide the input channels ({})", groups, in);
  int64_t fan_in = in / groups;
  for (int64_t k : kernel) fan_in *= k;
  return 1.0 / std::sqrt(static_cast<double>(fan_in));
}
// A one-value kernel repeated over `rank` spatial dims.
IntList spread(const IntList& k, size_t rank) { return k.size() == 1 ? IntList(rank, k[0]) : k; }
IntList square(const IntList& k) { return spread(k, 2); }
IntList conv_weight_shape(int64_t in, int64_t out, int64_t groups, const IntList& kernel) {
  IntList shape{out, in / std::max<int64_t>(groups, 1)};
  shape.insert(shape.end(), kernel.begin(), kernel.end());
  return shape;
}
}  // namespace

Conv1d::Conv1d(int64_t in, int64_t out, int64_t k, int64_t stride_, int64_t padding_,
               int64_t dilation_, int64_t groups_, bool with_bias, Device d)
    : weight(register_parameter("weight", uniform(conv_weight_shape(in, out, groups_, {k}),
                                                  conv_bound(in, groups_, {k}), d))),
      stride(stride_),
      padding(padding_),
      dilation(dilation_),
      groups(groups_) {
  if (with_bias)
    bias = &register_parameter("bias", uniform({out}, conv_bound(in, groups_, {k}), d));
}
TensorList Conv1d::forward(const TensorList& in) {
  return {conv1d(in[0], weight, bias ? *bias : Tensor(), {stride}, {padding}, {dilation}, groups)};
}

ConvNd::ConvNd(size_t rank_, int64_t in, int64_t out, const IntList& kernel, const IntList& stride_,
               const IntList& padding_, const IntList& dilation_, int64_t groups_, bool with_bias,
               Device d)
    : weight(register_parameter("weight",
                                uniform(conv_weight_shape(in, out, groups_, spread(kernel, rank_)),
                                        conv_bound(in, groups_, spread(kernel, rank_)), d))),
      stride(stride_),
      padding(padding_),
      dilation(dilation_),
      groups(groups_),
      rank(rank_) {
  if (with_bias)
    bias = &register_parameter("bias",
                               uniform({out}, conv_bound(in, groups_, spread(kernel, rank_)), d));
}
TensorList ConvNd::forward(const TensorList& in) {
  Tensor b = bias ? *bias : Tensor();
  if (rank == 2) return {conv2d(in[0], weight, b, stride, padding, dilation, groups)};
  return {conv3d(in[0], weight, b, stride, padding, dilation, groups)};
}

PReLU::PReLU(int64_t num_parameters, double init, Device d)
    : weight(register_parameter("weight", full({num_parameters}, init, {.device = d}))) {}

Bilinear::Bilinear(int64_t in1, int64_t in2, int64_t out, bool with_bias, Device d)
    : weight(
          register_parameter("weight", uniform({out, in1, in2}, 1.0 / std::sqrt(double(in1)), d))) {
  if (with_bias)
    bias = &register_parameter("bias", uniform({out}, 1.0 / std::sqrt(double(in1)), d));
}
TensorList Bilinear::forward(const TensorList& in) {
  return {bilinear(in.at(0), in.at(1), weight, bias ? *bias : Tensor())};
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, const IntList& kernel,
                                 const IntList& stride_, const IntList& padding_,
                                 const IntList& output_padding_, int64_t groups_, bool with_bias,
                                 const IntList& dilation_, Device d)
    : weight(
          register_parameter("weight", uniform(conv_weight_shape(out, in, groups_, square(kernel)),
                                               conv_bound(out, groups_, square(kernel)), d))),
      stride(stride_),
      padding(padding_),
      output_padding(output_padding_),
      dilation(dilation_),
      groups(groups_) {
  if (with_bias)
    bias = &register_parameter("bias", uniform({out}, conv_bound(out, groups_, square(kernel)), d));
}
TensorList ConvTranspose2d::forward(const TensorList& in) {
  return {conv_transpose2d(in[0], weight, bias ? *bias : Tensor(), stride, padding, output_padding,
                           groups, dilation)};
}

TensorList MaxPool2d::forward(const TensorList& in) {
  return {max_pool2d(in[0], kernel_, stride_, padding_, {1}, ceil_mode_)};
}
TensorList AvgPool2d::forward(const TensorList& in) {
  return {avg_pool2d(in[0], kernel_, stride_, padding_, ceil_mode_, count_include_pad_)};
}
TensorList AdaptiveAvgPool2d::forward(const TensorList& in) {
  return {adaptive_avg_pool2d(in[0], output_size_)};
}

Sequential::Sequential(std::vector<std::shared_ptr<Module>> layers) {
  for (size_t i = 0; i < layers.size(); ++i)
    layers_.push_back(register_module(std::to_string(i), layers[i]));
}
TensorList Sequential::forward(const TensorList& in) {
  TensorList x = in;
  for (auto& l : layers_) x = (*l)(x);
  return x;
}

namespace {
std::vector<std::shared_ptr<Module>> mlp_layers(const std::vector<int64_t>& w, Device d) {
  std::vector<std::shared_ptr<Module>> out;
  for (size_t i = 0; i + 1 < w.size(); ++i) {
    out.push_back(std::make_shared<Linear>(w[i], w[i + 1], true, d));
    if (i + 2 < w.size()) out.push_back(std::make_shared<ReLU>());
  }
  return out;
}
}  // namespace

MLP::MLP(const std::vector<int64_t>& widths, Device d) : Sequential(mlp_layers(widths, d)) {}

CausalSelfAttention::CausalSelfAttention(int64_t width, int64_t heads, int64_t context, Device d)
    : width_(width),
      heads_(heads),
      qkv_(register_module("qkv", std::make_shared<Linear>(width, 3 * width, true, d))),
      proj_(register_module("proj", std::make_shared<Linear>(width, width, true, d))),
      mask_(register_buffer("mask",
                            gt(unsqueeze(arange(context, {.device = d}), 0),
                               unsqueeze(arange(context, {.device = d}), 1)),
                            /*persistent=*/false)) {
  KILN_CHECK(width % heads == 0, value,
             "[CausalSelfAttention] width {} is not divisible by {} heads", width, heads);
}

TensorList CausalSelfAttention::forward(const TensorList& in) {
  const Tensor& x = in[0];
  SymInt B = x.sym_size(0), T = x.sym_size(1);  // sizes, so that a dynamic export keeps them (Y1)
  int64_t D = width_ / heads_;
  Tensor t = permute(reshape((*qkv_)(x), {B, T, 3, heads_, D}), {2, 0, 3, 1, 4});
  Tensor q = select(t, 0, 0), k = select(t, 0, 1), v = select(t, 0, 2);
  Tensor att = matmul(q, transpose(k, -2, -1)) * (1.0 / std::sqrt(double(D)));
  Tensor causal = slice(slice(mask_, 0, 0, T), 1, 0, T);
  att = softmax(masked_fill(att, causal, -std::numeric_limits<double>::infinity()), -1);
  Tensor y = reshape(transpose(matmul(att, v), 1, 2), {B, T, width_});
  return {(*proj_)(y)};
}

TransformerBlock::TransformerBlock(int64_t width, int64_t heads, int64_t context, Device d)
    : ln1_(register_module("ln1", std::make_shared<LayerNorm>(width, 1e-5, d))),
      ln2_(register_module("ln2", std::make_shared<LayerNorm>(width, 1e-5, d))),
      attn_(
          register_module("attn", std::make_shared<CausalSelfAttention>(width, heads, context, d))),
      fc_(register_module("fc", std::make_shared<Linear>(width, 4 * width, true, d))),
      proj_(register_module("proj", std::make_shared<Linear>(4 * width, width, true, d))) {}

TensorList TransformerBlock::forward(const TensorList& in) {
  Tensor x = in[0] + (*attn_)((*ln1_)(in[0]));
  return {x + (*proj_)(gelu((*fc_)((*ln2_)(x)), "tanh"))};
}

BenchBlock::BenchBlock(int64_t width, int64_t heads, int64_t hidden, Device d)
    : width_(width),
      heads_(heads),
      ln1_(register_module("ln1", std::make_shared<LayerNorm>(width, 1e-5, d))),
      qkv_(register_module("qkv", std::make_shared<Linear>(width, 3 * width, true, d))),
      proj_(register_module("proj", std::make_shared<Linear>(width, width, true, d))),
      ln2_(register_module("ln2", std::make_shared<LayerNorm>(width, 1e-5, d))),
      fc1_(register_module("fc1", std::make_shared<Linear>(width, hidden, true, d))),
      fc2_(register_module("fc2", std::make_shared<Linear>(hidden, width, true, d))) {}

TensorList BenchBlock::forward(const TensorList& in) {
  Tensor x = in[0];
  SymInt B = x.sym_size(0), T = x.sym_size(1);  // sizes, so that a dynamic export keeps them (Y1)
  int64_t D = width_ / heads_;
  Tensor t = permute(reshape((*qkv_)((*ln1_)(x)), {B, T, 3, heads_, D}), {2, 0, 3, 1, 4});
  Tensor q = select(t, 0, 0), k = select(t, 0, 1), v = select(t, 0, 2);
  Tensor att = softmax(matmul(q, transpose(k, -2, -1)) * (1.0 / std::sqrt(double(D))), -1);
  Tensor y = reshape(transpose(matmul(att, v), 1, 2), {B, T, width_});
  x = x + (*proj_)(y);
  return {x + (*fc2_)(gelu((*fc1_)((*ln2_)(x))))};
}

GPT::GPT(GPTConfig c, Device d)
    : config(c),
      wte_(register_module("wte", std::make_shared<Embedding>(c.vocab, c.width, d))),
      wpe_(register_module("wpe", std::make_shared<Embedding>(c.context, c.width, d))) {
  for (int64_t i = 0; i < c.layers; ++i)
    blocks_.push_back(
        register_module("blocks." + std::to_string(i),
                        std::make_shared<TransformerBlock>(c.width, c.heads, c.context, d)));
  ln_f_ = register_module("ln_f", std::make_shared<LayerNorm>(c.width, 1e-5, d));
  head_ = register_module("head", std::make_shared<Linear>(c.width, c.vocab, false, d));
}

TensorList GPT::forward(const TensorList& in) {
  const Tensor& ids = in[0];
  SymInt T = ids.sym_size(1);
  KILN_CHECK(T <= config.context, shape, "[GPT] sequence length {} exceeds the context {}", T.str(),
             config.context);
  Tensor pos = arange_of(T, {.device = ids.device()});
  Tensor x = (*wte_)(ids) + (*wpe_)(pos);
  for (auto& b : blocks_) x = (*b)(x);
  return {(*head_)((*ln_f_)(x))};
}

const std::vector<ReferenceModelInfo>& reference_models() {
  static const std::vector<ReferenceModelInfo> models = {
      {"mlp",
       "the benchmark MLP: x[batch, width] through layers x (Linear + ReLU)",
       {{"batch", 64}, {"width", 512}, {"layers", 8}}},
      {"block",
       "the benchmark transformer block: x[batch, seq, width], heads, MLP of hidden",
       {{"batch", 4}, {"seq", 128}, {"width", 256}, {"heads", 4}, {"hidden", 1024}}},
      {"gpt",
       "a small GPT: token ids[batch, seq] -> logits over vocab",
       {{"vocab", 256},
        {"context", 64},
        {"layers", 2},
        {"heads", 4},
        {"width", 64},
        {"batch", 2},
        {"seq", 32}}},
      {"bn_mlp",
       "Linear -> BatchNorm1d -> ReLU -> Linear (buffers that train mode updates)",
       {{"batch", 16}, {"in", 16}, {"hidden", 32}, {"out", 8}}},
      {"dp_linear",
       "Linear whose output is summed over the ranks of mesh axis 'dp' (run under mpirun)",
       {{"batch", 4}, {"in", 8}, {"out", 4}}},
  };
  return models;
}

std::vector<std::string> reference_model_names() {
  std::vector<std::string> names;
  for (const ReferenceModelInfo& m : reference_models()) names.push_back(m.name);
  return names;
}

ReferenceModel make_reference_model(const std::string& name, const ModelConfig& overrides,
                                    uint64_t seed) {
  const auto& models = reference_models();
  auto info =
      std::find_if(models.begin(), models.end(), [&](const auto& m) { return m.name == name; });
  KILN_CHECK(info != models.end(), value, "[model] unknown reference model '{}'; known: {}", name,
             fmt::join(reference_model_names(), ", "));
  ModelConfig c = info->defaults;
  for (const auto& [key, value] : overrides) {
    if (!c.contains(key)) {
      std::vector<std::string> keys;
      for (const auto& [k, v] : info->defaults)
        keys.push_back(fmt::format("{} (default {})", k, v));
      fail(ErrorKind::value, "[model] '{}' has no setting '{}'; its settings: {}", name, key,
           fmt::join(keys, ", "));
    }
    KILN_CHECK(value > 0, value, "[model] setting '{}' must be positive, got {}", key, value);
    c[key] = value;
  }
  manual_seed(seed);
  ReferenceModel m;
  if (name == "mlp") {
    std::vector<std::shared_ptr<Module>> ls;
    for (int64_t i = 0; i < c["layers"]; ++i) {
      ls.push_back(std::make_shared<Linear>(c["width"], c["width"]));
      ls.push_back(std::make_shared<ReLU>());
    }
    m.module = std::make_shared<Sequential>(ls);
    m.example_inputs = {randn({c["batch"], c["width"]})};
  } else if (name == "block") {
    m.module = std::make_shared<BenchBlock>(c["width"], c["heads"], c["hidden"]);
    m.example_inputs = {randn({c["batch"], c["seq"], c["width"]})};
  } else if (name == "gpt") {
    GPTConfig g;
    g.vocab = c["vocab"];
    g.context = c["context"];
    g.layers = c["layers"];
    g.heads = c["heads"];
    g.width = c["width"];
    m.module = std::make_shared<GPT>(g);
    Tensor ids = to(mul(rand({c["batch"], c["seq"]}), static_cast<double>(g.vocab)), i64);
    m.example_inputs = {ids};
  } else if (name == "dp_linear") {
    m.module = std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
        std::make_shared<Linear>(c["in"], c["out"]), std::make_shared<AllReduce>("sum", "dp")});
    m.example_inputs = {randn({c["batch"], c["in"]})};
  } else {  // bn_mlp
    m.module = std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
        std::make_shared<Linear>(c["in"], c["hidden"]), std::make_shared<BatchNorm1d>(c["hidden"]),
        std::make_shared<ReLU>(), std::make_shared<Linear>(c["hidden"], c["out"])});
    m.example_inputs = {randn({c["batch"], c["in"]})};
  }
  return m;
}

}  // namespace kiln::nn

#include "kiln/nn/transformer.h"

#include <cmath>
#include <limits>

#include "kiln/autograd/autograd.h"
#include "kiln/nn/conv.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/utils.h"

namespace kiln::nn {
namespace {

Tensor xavier_uniform(int64_t rows, int64_t cols, Device d) {
  double bound = std::sqrt(6.0 / static_cast<double>(rows + cols));
  return sub(mul(rand({rows, cols}, {.device = d}), 2 * bound), bound);
}

// A mask as scores to add: bool true -> -inf (PyTorch's layers mask where true), floats as
// they are (in the scores' dtype).
Tensor additive(const Tensor& mask, DType dtype) {
  if (mask.dtype() != DType::b8) return to(mask, dtype);
  return masked_fill(zeros(IntList(mask.shape().begin(), mask.shape().end()),
                           {.dtype = dtype, .device = mask.device()}),
                     mask, -std::numeric_limits<double>::infinity());
}

}  // namespace

MultiheadAttention::MultiheadAttention(MultiheadAttentionOptions o) : options_(o) {
  int64_t e = o.embed_dim, kd = o.kdim ? o.kdim : e, vd = o.vdim ? o.vdim : e;
  KILN_CHECK(e > 0 && o.num_heads > 0 && e % o.num_heads == 0, value,
             "[MultiheadAttention] embed_dim ({}) must be positive and divisible by num_heads ({})",
             e, o.num_heads);
  KILN_CHECK(o.dropout >= 0 && o.dropout <= 1, value,
             "[MultiheadAttention] dropout must be in [0, 1], got {}", o.dropout);
  options_.kdim = kd;
  options_.vdim = vd;
  if (kd == e && vd == e) {
    in_proj_weight = &register_parameter("in_proj_weight", xavier_uniform(3 * e, e, o.device));
  } else {
    q_proj_weight = &register_parameter("q_proj_weight", xavier_uniform(e, e, o.device));
    k_proj_weight = &register_parameter("k_proj_weight", xavier_uniform(e, kd, o.device));
    v_proj_weight = &register_parameter("v_proj_weight", xavier_uniform(e, vd, o.device));
  }
  if (o.bias)
    in_proj_bias = &register_parameter("in_proj_bias", zeros({3 * e}, {.device = o.device}));
  if (o.add_bias_kv) {  // Xavier-normal of [1, 1, E]: std 1 / sqrt(E)
    double std = 1 / std::sqrt(static_cast<double>(e));
    bias_k = &register_parameter("bias_k", randn({1, 1, e}, {.device = o.device}) * std);
    bias_v = &register_parameter("bias_v", randn({1, 1, e}, {.device = o.device}) * std);
  }
  out_proj = register_module("out_proj", std::make_shared<Linear>(e, e, o.bias, o.device));
  if (o.bias) {
    autograd::NoGradGuard no_grad;
    fill_(*out_proj->bias, 0.0);
  }
}

TensorList MultiheadAttention::forward(const TensorList& in) {
  KILN_CHECK(in.size() == 3, value,
             "[MultiheadAttention] expects (query, key, value), got {} tensors", in.size());
  auto [out, weights] = attend(in[0], in[1], in[2]);
  return {out, weights};
}

std::pair<Tensor, Tensor> MultiheadAttention::attend(const Tensor& query_in, const Tensor& key_in,
                                                     const Tensor& value_in,
                                                     const AttentionMasks& masks, bool need_weights,
                                                     bool average_weights) {
  const MultiheadAttentionOptions& o = options_;
  const char* op = "MultiheadAttention";
  bool unbatched = query_in.dim() == 2;
  KILN_CHECK((query_in.dim() == 3 || unbatched) && key_in.dim() == query_in.dim() &&
                 value_in.dim() == query_in.dim(),
             shape,
             "[{}] expects query, key and value all 3-D (or all 2-D, unbatched), got {}, {}, {}",
             op, query_in.meta_str(), key_in.meta_str(), value_in.meta_str());
  auto layout = [&](const Tensor& t) {  // -> [L, N, E]
    if (unbatched) return unsqueeze(t, 1);
    return o.batch_first ? transpose(t, 0, 1) : t;
  };
  Tensor query = layout(query_in), key = layout(key_in), value = layout(value_in);
  int64_t e = o.embed_dim, heads = o.num_heads, hd = e / heads;
  int64_t tgt = query.size(0), n = query.size(1), src = key.size(0);
  KILN_CHECK(query.size(2) == e && key.size(2) == o.kdim && value.size(2) == o.vdim, shape,
             "[{}] expects query, key and value features ({}, {}, {}), got {}, {}, {}", op, e,
             o.kdim, o.vdim, query_in.meta_str(), key_in.meta_str(), value_in.meta_str());
  KILN_CHECK(key.size(1) == n && value.size(1) == n && value.size(0) == src, shape,
             "[{}] key {} and value {} must match the query's batch and each other's length", op,
             key_in.meta_str(), value_in.meta_str());

  TensorList b = in_proj_bias ? chunk(*in_proj_bias, 3) : TensorList(3);
  Tensor q, k, v;
  if (in_proj_weight) {
    TensorList w = chunk(*in_proj_weight, 3);
    q = linear(query, w[0], b[0]), k = linear(key, w[1], b[1]), v = linear(value, w[2], b[2]);
  } else {
    q = linear(query, *q_proj_weight, b[0]), k = linear(key, *k_proj_weight, b[1]),
    v = linear(value, *v_proj_weight, b[2]);
  }
  if (o.add_bias_kv) {  // one more key and value per sequence: [S + 1, N, E]
    k = cat({k, expand(*bias_k, {1, n, e})}, 0);
    v = cat({v, expand(*bias_v, {1, n, e})}, 0);
  }
  int64_t keys = src + int64_t{o.add_bias_kv};
  // [L, N, E] -> [N * heads, L, head_dim]
  auto split_heads = [&](const Tensor& t, int64_t len) {
    return transpose(reshape(t, {len, n * heads, hd}), 0, 1);
  };
  q = split_heads(q, tgt) * (1 / std::sqrt(static_cast<double>(hd)));
  k = split_heads(k, keys);
  v = split_heads(v, keys);
  if (o.add_zero_attn) {  // and a zero one per head
    Tensor zero = zeros({n * heads, 1, hd}, {.dtype = k.dtype(), .device = k.device()});
    k = cat({k, zero}, 1);
    v = cat({v, zero}, 1);
    ++keys;
  }
  // The masks were written for the src keys: the appended ones are never masked.
  auto widen = [&](const Tensor& additive_mask) {
    int64_t extra = keys - src;
    return extra ? pad(additive_mask, {0, extra}) : additive_mask;
  };

  Tensor scores = bmm(q, transpose(k, 1, 2));  // [N * heads, L, keys]
  if (masks.attn_mask.defined()) {
    const Tensor& m = masks.attn_mask;
    bool ok = (m.dim() == 2 && m.size(0) == tgt && m.size(1) == src) ||
              (m.dim() == 3 && m.size(0) == n * heads && m.size(1) == tgt && m.size(2) == src);
    KILN_CHECK(ok, shape, "[{}] attn_mask must be [{}, {}] or [{}, {}, {}], got {}", op, tgt, src,
               n * heads, tgt, src, m.meta_str());
    scores = scores + widen(additive(m, scores.dtype()));
  }
  if (masks.key_padding_mask.defined()) {
    Tensor m = unbatched ? unsqueeze(masks.key_padding_mask, 0) : masks.key_padding_mask;
    KILN_CHECK(m.dim() == 2 && m.size(0) == n && m.size(1) == src, shape,
               "[{}] key_padding_mask must be [{}, {}], got {}", op, n, src,
               masks.key_padding_mask.meta_str());
    Tensor per_head = reshape(
        expand(reshape(widen(additive(m, scores.dtype())), {n, 1, 1, keys}), {n, heads, 1, keys}),
        {n * heads, 1, keys});
    scores = scores + per_head;
  }
  Tensor attn = softmax(scores, -1);
  if (o.dropout > 0 && training()) attn = dropout(attn, o.dropout, true);
  Tensor out = reshape(transpose(bmm(attn, v), 0, 1), {tgt, n, e});  // [L, N, E]
  out = (*out_proj)(out);
  Tensor weights;
  if (need_weights) {
    weights = reshape(attn, {n, heads, tgt, keys});
    if (average_weights) weights = mean(weights, {1});
    if (unbatched) weights = squeeze(weights, 0);
  }
  if (unbatched)
    out = squeeze(out, 1);
  else if (o.batch_first)
    out = transpose(out, 0, 1);
  return {out, weights};
}

// ---- transformer layers -------------------------------------------------------------------

namespace {

Tensor activate(const std::string& name, const Tensor& x) {
  return name == "gelu" ? gelu(x) : relu(x);
}

MultiheadAttentionOptions attention_options(const TransformerLayerOptions& o) {
  return {.embed_dim = o.d_model,
          .num_heads = o.nhead,
          .dropout = o.dropout,
          .batch_first = o.batch_first,
          .device = o.device};
}

void check_layer(const TransformerLayerOptions& o, const char* op) {
  KILN_CHECK(o.activation == "relu" || o.activation == "gelu", value,
             "[{}] activation must be relu or gelu, got '{}'", op, o.activation);
  KILN_CHECK(o.dim_feedforward > 0, value, "[{}] dim_feedforward must be positive, got {}", op,
             o.dim_feedforward);
}

}  // namespace

TransformerEncoderLayer::TransformerEncoderLayer(TransformerLayerOptions o) : options_(o) {
  check_layer(o, "TransformerEncoderLayer");
  self_attn =
      register_module("self_attn", std::make_shared<MultiheadAttention>(attention_options(o)));
  linear1 = register_module("linear1",
                            std::make_shared<Linear>(o.d_model, o.dim_feedforward, true, o.device));
  linear2 = register_module("linear2",
                            std::make_shared<Linear>(o.dim_feedforward, o.d_model, true, o.device));
  norm1 =
      register_module("norm1", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps, o.device));
  norm2 =
      register_module("norm2", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps, o.device));
}

Tensor TransformerEncoderLayer::feed_forward(const Tensor& x) {
  double p = training() ? options_.dropout : 0.0;
  Tensor h = dropout(activate(options_.activation, (*linear1)(x)), p, training());
  return dropout((*linear2)(h), p, training());
}

Tensor TransformerEncoderLayer::encode(const Tensor& src, const AttentionMasks& masks) {
  double p = training() ? options_.dropout : 0.0;
  auto attend = [&](const Tensor& x) {
    return dropout(self_attn->attend(x, x, x, masks, false).first, p, training());
  };
  Tensor x = src;
  if (options_.norm_first) {
    x = x + attend((*norm1)(x));
    return x + feed_forward((*norm2)(x));
  }
  x = (*norm1)(x + attend(x));
  return (*norm2)(x + feed_forward(x));
}

TransformerDecoderLayer::TransformerDecoderLayer(TransformerLayerOptions o) : options_(o) {
  check_layer(o, "TransformerDecoderLayer");
  self_attn =
      register_module("self_attn", std::make_shared<MultiheadAttention>(attention_options(o)));
  multihead_attn =
      register_module("multihead_attn", std::make_shared<MultiheadAttention>(attention_options(o)));
  linear1 = register_module("linear1",
                            std::make_shared<Linear>(o.d_model, o.dim_feedforward, true, o.device));
  linear2 = register_module("linear2",
                            std::make_shared<Linear>(o.dim_feedforward, o.d_model, true, o.device));
  norm1 =
      register_module("norm1", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps, o.device));
  norm2 =
      register_module("norm2", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps, o.device));
  norm3 =
      register_module("norm3", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps, o.device));
}

Tensor TransformerDecoderLayer::decode(const Tensor& tgt, const Tensor& memory,
                                       const AttentionMasks& tgt_masks,
                                       const AttentionMasks& memory_masks) {
  double p = training() ? options_.dropout : 0.0;
  auto drop = [&](const Tensor& t) { return dropout(t, p, training()); };
  auto self_block = [&](const Tensor& x) {
    return drop(self_attn->attend(x, x, x, tgt_masks, false).first);
  };
  auto cross_block = [&](const Tensor& x) {
    return drop(multihead_attn->attend(x, memory, memory, memory_masks, false).first);
  };
  auto ff_block = [&](const Tensor& x) {
    return drop((*linear2)(drop(activate(options_.activation, (*linear1)(x)))));
  };
  Tensor x = tgt;
  if (options_.norm_first) {
    x = x + self_block((*norm1)(x));
    x = x + cross_block((*norm2)(x));
    return x + ff_block((*norm3)(x));
  }
  x = (*norm1)(x + self_block(x));
  x = (*norm2)(x + cross_block(x));
  return (*norm3)(x + ff_block(x));
}

TransformerEncoder::TransformerEncoder(const TransformerLayerOptions& layer, int64_t num_layers,
                                       bool final_norm) {
  KILN_CHECK(num_layers > 0, value, "[TransformerEncoder] num_layers must be positive, got {}",
             num_layers);
  for (int64_t i = 0; i < num_layers; ++i)
    layers.push_back(register_module("layers." + std::to_string(i),
                                     std::make_shared<TransformerEncoderLayer>(layer)));
  if (final_norm)
    norm = register_module(
        "norm", std::make_shared<LayerNorm>(layer.d_model, layer.layer_norm_eps, layer.device));
}

Tensor TransformerEncoder::encode(const Tensor& src, const AttentionMasks& masks) {
  Tensor x = src;
  for (auto& l : layers) x = l->encode(x, masks);
  return norm ? (*norm)(x) : x;
}

TransformerDecoder::TransformerDecoder(const TransformerLayerOptions& layer, int64_t num_layers,
                                       bool final_norm) {
  KILN_CHECK(num_layers > 0, value, "[TransformerDecoder] num_layers must be positive, got {}",
             num_layers);
  for (int64_t i = 0; i < num_layers; ++i)
    layers.push_back(register_module("layers." + std::to_string(i),
                                     std::make_shared<TransformerDecoderLayer>(layer)));
  if (final_norm)
    norm = register_module(
        "norm", std::make_shared<LayerNorm>(layer.d_model, layer.layer_norm_eps, layer.device));
}

Tensor TransformerDecoder::decode(const Tensor& tgt, const Tensor& memory,
                                  const AttentionMasks& tgt_masks,
                                  const AttentionMasks& memory_masks) {
  Tensor x = tgt;
  for (auto& l : layers) x = l->decode(x, memory, tgt_masks, memory_masks);
  return norm ? (*norm)(x) : x;
}

Transformer::Transformer(const TransformerLayerOptions& layer, int64_t num_encoder_layers,
                         int64_t num_decoder_layers)
    : encoder(register_module(
          "encoder", std::make_shared<TransformerEncoder>(layer, num_encoder_layers, true))),
      decoder(register_module(
          "decoder", std::make_shared<TransformerDecoder>(layer, num_decoder_layers, true))),
      batch_first_(layer.batch_first) {
  autograd::NoGradGuard no_grad;
  for (auto& [name, p] : named_parameters())
    if (p.dim() > 1) init::xavier_uniform_(p);
}

Tensor Transformer::transform(const Tensor& src, const Tensor& tgt, const AttentionMasks& src_masks,
                              const AttentionMasks& tgt_masks, const AttentionMasks& memory_masks) {
  int64_t batch_dim = batch_first_ ? 0 : 1;
  KILN_CHECK(src.dim() != 3 || tgt.dim() != 3 || src.size(batch_dim) == tgt.size(batch_dim), shape,
             "[Transformer] the batch number of src {} and tgt {} must be equal", src.meta_str(),
             tgt.meta_str());
  KILN_CHECK(src.size(-1) == tgt.size(-1), shape,
             "[Transformer] the feature number of src {} and tgt {} must be equal", src.meta_str(),
             tgt.meta_str());
  Tensor memory = encoder->encode(src, src_masks);
  return decoder->decode(tgt, memory, tgt_masks, memory_masks);
}

Tensor square_subsequent_mask(int64_t n, Device device) {
  Tensor ones_above = triu(ones({n, n}, {.device = device}), 1);
  return masked_fill(zeros({n, n}, {.device = device}), ones_above > 0.0,
                     -std::numeric_limits<double>::infinity());
}

}  // namespace kiln::nn

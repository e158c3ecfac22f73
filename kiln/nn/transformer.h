#pragma once
// torch.nn's attention and transformer layers: MultiheadAttention,
// TransformerEncoderLayer / TransformerDecoderLayer and the stacks over them, with
// PyTorch's parameter names, order and initialization (a PyTorch state_dict loads
// unchanged) and its mask conventions. Made of ordinary ops, so they differentiate,
// trace and export like any other module.

#include <memory>
#include <string>
#include <vector>

#include "kiln/nn/layers.h"

namespace kiln::nn {

struct MultiheadAttentionOptions {
  int64_t embed_dim = 0, num_heads = 1;
  /** Dropout on the attention weights, in training. */
  double dropout = 0;
  bool bias = true;
  /** Key and value feature sizes (0: embed_dim); when they differ from embed_dim the
   * projections are separate (q_proj_weight, k_proj_weight, v_proj_weight). */
  int64_t kdim = 0, vdim = 0;
  /** Inputs and output [N, L, E] instead of [L, N, E]. */
  bool batch_first = false;
  /** A learned key and value (bias_k, bias_v [1, 1, E]) appended to every sequence's
   * keys and values after the projections. */
  bool add_bias_kv = false;
  /** An all-zero key and value appended per head after that (its score 0). */
  bool add_zero_attn = false;
  Device device = Device("cpu:0");
};

struct AttentionMasks {
  /** [L, S] or [N * heads, L, S]: bool true = may NOT attend (PyTorch's convention, the
   * opposite of scaled_dot_product_attention's), or a float added to the scores. */
  Tensor attn_mask;
  /** [N, S] (or [S] unbatched): bool true = ignore that key, or a float added. */
  Tensor key_padding_mask;
};

/** torch.nn.MultiheadAttention. forward({query, key, value}) with [L, N, E] inputs (or
 * batch_first, or unbatched [L, E]) returns {output, weights}: the weights [N, L, S]
 * averaged over heads (or per head, [N, heads, L, S], with average_weights false).
 * in_proj_weight is Xavier-uniform, the biases zero, out_proj as a Linear's weight. */
class MultiheadAttention : public Module {
 public:
  explicit MultiheadAttention(MultiheadAttentionOptions options);
  TensorList forward(const TensorList& in) override;
  /** The attention with masks; need_weights false leaves the weights undefined. */
  std::pair<Tensor, Tensor> attend(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const AttentionMasks& masks = {}, bool need_weights = true,
                                   bool average_weights = true);
  const MultiheadAttentionOptions& options() const { return options_; }

  Tensor* in_proj_weight = nullptr;  // [3E, E] when kdim == vdim == embed_dim
  Tensor *q_proj_weight = nullptr, *k_proj_weight = nullptr, *v_proj_weight = nullptr;
  Tensor* in_proj_bias = nullptr;               // [3E]
  Tensor *bias_k = nullptr, *bias_v = nullptr;  // [1, 1, E] with add_bias_kv
  std::shared_ptr<Linear> out_proj;

 private:
  MultiheadAttentionOptions options_;
};

struct TransformerLayerOptions {
  int64_t d_model = 0, nhead = 1;
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  /** "relu" or "gelu". */
  std::string activation = "relu";
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  /** Pre-LN (x + f(norm(x))) instead of PyTorch's default post-LN (norm(x + f(x))). */
  bool norm_first = false;
  Device device = Device("cpu:0");
};

/** torch.nn.TransformerEncoderLayer: self-attention and a feed-forward block, each with
 * dropout and a residual LayerNorm. forward({src}); encode() takes the masks. */
class TransformerEncoderLayer : public Module {
 public:
  explicit TransformerEncoderLayer(TransformerLayerOptions options);
  TensorList forward(const TensorList& in) override { return {encode(in.at(0))}; }
  Tensor encode(const Tensor& src, const AttentionMasks& masks = {});

  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<LayerNorm> norm1, norm2;

 private:
  Tensor feed_forward(const Tensor& x);
  TransformerLayerOptions options_;
};

/** torch.nn.TransformerDecoderLayer: self-attention, attention over `memory`, and the
 * feed-forward block. forward({tgt, memory}); decode() takes the masks. */
class TransformerDecoderLayer : public Module {
 public:
  explicit TransformerDecoderLayer(TransformerLayerOptions options);
  TensorList forward(const TensorList& in) override { return {decode(in.at(0), in.at(1))}; }
  Tensor decode(const Tensor& tgt, const Tensor& memory, const AttentionMasks& tgt_masks = {},
                const AttentionMasks& memory_masks = {});

  std::shared_ptr<MultiheadAttention> self_attn, multihead_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;

 private:
  TransformerLayerOptions options_;
};

/** torch.nn.TransformerEncoder: num_layers layers (layers.0, layers.1, ...), then an
 * optional final LayerNorm ("norm"). */
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const TransformerLayerOptions& layer, int64_t num_layers,
                     bool final_norm = false);
  TensorList forward(const TensorList& in) override { return {encode(in.at(0))}; }
  Tensor encode(const Tensor& src, const AttentionMasks& masks = {});
  std::vector<std::shared_ptr<TransformerEncoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;
};

/** torch.nn.TransformerDecoder: num_layers decoder layers, then an optional LayerNorm. */
class TransformerDecoder : public Module {
 public:
  TransformerDecoder(const TransformerLayerOptions& layer, int64_t num_layers,
                     bool final_norm = false);
  TensorList forward(const TensorList& in) override { return {decode(in.at(0), in.at(1))}; }
  Tensor decode(const Tensor& tgt, const Tensor& memory, const AttentionMasks& tgt_masks = {},
                const AttentionMasks& memory_masks = {});
  std::vector<std::shared_ptr<TransformerDecoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;
};

/** torch.nn.Transformer: an encoder of num_encoder_layers layers and a decoder of
 * num_decoder_layers, each with a final LayerNorm ("encoder.*", "decoder.*"); every
 * parameter with more than one dim Xavier-uniform (PyTorch's _reset_parameters).
 * forward({src, tgt}); transform() takes the masks (src's for the encoder's
 * self-attention, tgt's for the decoder's, memory's for its attention over the encoding). */
class Transformer : public Module {
 public:
  Transformer(const TransformerLayerOptions& layer, int64_t num_encoder_layers = 6,
              int64_t num_decoder_layers = 6);
  TensorList forward(const TensorList& in) override { return {transform(in.at(0), in.at(1))}; }
  Tensor transform(const Tensor& src, const Tensor& tgt, const AttentionMasks& src_masks = {},
                   const AttentionMasks& tgt_masks = {}, const AttentionMasks& memory_masks = {});
  std::shared_ptr<TransformerEncoder> encoder;
  std::shared_ptr<TransformerDecoder> decoder;

 private:
  bool batch_first_;
};

/** A causal mask for PyTorch's layers: [n, n] floats, -inf above the diagonal, 0 elsewhere
 * (torch.nn.Transformer.generate_square_subsequent_mask). */
Tensor square_subsequent_mask(int64_t n, Device device = Device("cpu:0"));

}  // namespace kiln::nn

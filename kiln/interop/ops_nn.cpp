// The ATen ops of torch.nn.functional (I2): normalization, convolution and pooling,
// upsampling and sampling, attention, recurrent layers, dropout and losses. The rest of
// the table, and how an entry reads its arguments, is in ops.cpp.

#include "kiln/interop/adapters.h"
#include "kiln/nn/activation.h"
#include "kiln/nn/conv.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/loss.h"
#include "kiln/nn/rnn.h"

namespace kiln::interop {
namespace {

// torch.convolution: conv or transposed conv of any rank, chosen by the weight's rank.
Tensor convolution(const Tensor& x, const Tensor& w, const Tensor& b, const IntList& stride,
                   const IntList& padding, const IntList& dilation, bool transposed,
                   const IntList& output_padding, int64_t groups) {
  int64_t spatial = w.dim() - 2;
  if (transposed) {
    if (spatial == 1)
      return nn::conv_transpose1d(x, w, b, stride, padding, output_padding, groups, dilation);
    if (spatial == 2)
      return nn::conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation);
    if (spatial == 3)
      return nn::conv_transpose3d(x, w, b, stride, padding, output_padding, groups, dilation);
  } else {
    if (spatial == 1) return nn::conv1d(x, w, b, stride, padding, dilation, groups);
    if (spatial == 2) return nn::conv2d(x, w, b, stride, padding, dilation, groups);
    if (spatial == 3) return nn::conv3d(x, w, b, stride, padding, dilation, groups);
  }
  fail(ErrorKind::shape, "convolution: a weight of rank {} (1, 2 or 3 spatial dims expected)",
       w.dim());
}

Results conv(const Call& c, int64_t spatial) {
  Tensor x = c.tensor("input"), w = c.tensor("weight"), b = c.opt_tensor("bias");
  IntList ones(static_cast<size_t>(spatial), 1), zeros(static_cast<size_t>(spatial), 0);
  IntList stride = c.ints("stride", ones), dilation = c.ints("dilation", ones);
  int64_t groups = c.integer("groups", 1);
  if (c.has("padding") && !c.is_tensor("padding")) {
    // conv2d.padding: the string form
    std::optional<IntList> pad;
    try {
      pad = c.opt_ints("padding");
    } catch (const Error&) {
      std::string mode = c.str("padding");
      nn::ConvPadding p = mode == "same" ? nn::ConvPadding::same : nn::ConvPadding::valid;
      if (spatial == 1) return one(nn::conv1d(x, w, b, stride, p, dilation, groups));
      if (spatial == 2) return one(nn::conv2d(x, w, b, stride, p, dilation, groups));
      return one(nn::conv3d(x, w, b, stride, p, dilation, groups));
    }
    return one(convolution(x, w, b, stride, *pad, dilation, false, zeros, groups));
  }
  return one(convolution(x, w, b, stride, zeros, dilation, false, zeros, groups));
}

// max_pool{1,2,3}d(_with_indices) and avg_pool{2,3}d: `f` on the arguments these overloads
// share, with PyTorch's defaults (stride: the kernel).
template <typename F>
auto max_pooled(const Call& c, F f) {
  return f(self(c), c.ints("kernel_size"), stride_or_kernel(c), c.ints("padding", IntList{0}),
           c.ints("dilation", IntList{1}), c.flag("ceil_mode", false));
}
template <typename F>
auto avg_pooled(const Call& c, F f) {
  return f(self(c), c.ints("kernel_size"), stride_or_kernel(c), c.ints("padding", IntList{0}),
           c.flag("ceil_mode", false), c.flag("count_include_pad", true),
           c.opt_integer("divisor_override"));
}

// upsample_*.vec: an output size or scale factors, as F.interpolate with `mode`.
Tensor upsample(const Call& c, const char* mode, bool antialias = false) {
  nn::InterpolateOptions o;
  o.mode = mode;
  o.antialias = antialias;
  o.size = c.ints("output_size", IntList{});
  o.scale_factor = c.reals("scale_factors");
  if (c.has("align_corners")) o.align_corners = c.flag("align_corners");
  return nn::interpolate(c.tensor("input"), o);
}

// One direction of one layer of an RNN over time: `step` maps (x_t, state) to state.
// torch.lstm / torch.gru with batch_first and several layers; kiln runs the cells.
enum class Cell { lstm, gru, rnn_tanh, rnn_relu };

// One step of an LSTM with proj_size: h is [B, P] and w_hh [4H, P], and the new h is the
// cell's output projected by w_hr [P, H] (nn::lstm_cell takes square hidden states only).
std::pair<Tensor, Tensor> projected_lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c,
                                              const Tensor& w_ih, const Tensor& w_hh,
                                              const Tensor& b_ih, const Tensor& b_hh,
                                              const Tensor& w_hr) {
  Tensor gates = add(linear(x, w_ih, b_ih), linear(h, w_hh, b_hh));
  TensorList g = chunk(gates, 4, 1);  // input, forget, cell, output gates, as PyTorch orders them
  Tensor c_next = add(mul(sigmoid(g[1]), c), mul(sigmoid(g[0]), tanh(g[2])));
  return {linear(mul(sigmoid(g[3]), tanh(c_next)), w_hr), c_next};
}

Results recurrent(const Call& c, Cell kind) {
  bool lstm = kind == Cell::lstm;
  Tensor x = c.tensor("input");
  TensorList hx = lstm ? c.tensors("hx") : TensorList{c.tensor("hx")};
  TensorList params = c.tensors("params");
  bool has_biases = c.flag("has_biases"), batch_first = c.flag("batch_first");
  int64_t layers = c.integer("num_layers");
  double dropout = c.real("dropout");
  bool train = c.flag("train"), bidirectional = c.flag("bidirectional");
  if (train && dropout > 0)
    fail(ErrorKind::unsupported, "{}: dropout between layers in training mode", c.target());
  // params: per layer, per direction (forward, then reverse), w_ih, w_hh[, b_ih, b_hh],
  // then an LSTM's projection w_hr when it has proj_size (h is projected after each step)
  size_t per_direction = has_biases ? 4 : 2, directions = bidirectional ? 2 : 1;
  size_t cells = directions * static_cast<size_t>(layers);
  bool projected = lstm && params.size() == (per_direction + 1) * cells;
  if (projected) ++per_direction;
  if (params.size() != per_direction * cells)
    fail(ErrorKind::value, "{}: {} parameters for {} layers", c.target(), params.size(), layers);
  Tensor seq = batch_first ? transpose(x, 0, 1) : x;  // [T, B, F]
  int64_t steps = seq.shape()[0];
  TensorList h_out, c_out;
  for (int64_t l = 0; l < layers; ++l) {
    TensorList per_dir;
    for (size_t dir = 0; dir < directions; ++dir) {
      size_t slot = static_cast<size_t>(l) * directions + dir;
      const Tensor* p = &params[per_direction * slot];
      Tensor b_ih = has_biases ? p[2] : Tensor(), b_hh = has_biases ? p[3] : Tensor();
      Tensor h = select(hx[0], 0, static_cast<int64_t>(slot));
      Tensor cell = lstm ? select(hx[1], 0, static_cast<int64_t>(slot)) : Tensor();
      TensorList outs(static_cast<size_t>(steps));
      for (int64_t i = 0; i < steps; ++i) {
        int64_t t =
            dir == 0 ? i : steps - 1 - i;  // the reverse direction reads the sequence backwards
        Tensor xt = select(seq, 0, t);
        switch (kind) {
          case Cell::lstm:
            if (projected)
              std::tie(h, cell) =
                  projected_lstm_cell(xt, h, cell, p[0], p[1], b_ih, b_hh, p[per_direction - 1]);
            else
              std::tie(h, cell) = nn::lstm_cell(xt, h, cell, p[0], p[1], b_ih, b_hh);
            break;
          case Cell::gru: h = nn::gru_cell(xt, h, p[0], p[1], b_ih, b_hh); break;
          case Cell::rnn_tanh: h = nn::rnn_tanh_cell(xt, h, p[0], p[1], b_ih, b_hh); break;
          case Cell::rnn_relu: h = nn::rnn_relu_cell(xt, h, p[0], p[1], b_ih, b_hh); break;
        }
        outs[static_cast<size_t>(t)] = h;
      }
      per_dir.push_back(stack(outs, 0));
      h_out.push_back(h);
      if (lstm) c_out.push_back(cell);
    }
    seq = directions == 1 ? per_dir[0] : cat(per_dir, -1);  // [T, B, directions * H]
  }
  Tensor y = batch_first ? transpose(seq, 0, 1) : seq;
  Results r{Slot(contiguous(y)), Slot(stack(h_out, 0))};
  if (lstm) r.emplace_back(stack(c_out, 0));
  return r;
}

// scaled_dot_product_attention with grouped-query heads (enable_gqa): each key/value head
// serves heads / kv_heads query heads.
Results attention(const Call& c) {
  Tensor q = c.tensor("query"), k = c.tensor("key"), v = c.tensor("value");
  Tensor mask = c.opt_tensor("attn_mask");
  double dropout = c.real("dropout_p", 0.0);
  bool causal = c.flag("is_causal", false);
  std::optional<double> scale = c.opt_real("scale");
  if (c.flag("enable_gqa", false) && q.dim() >= 3 &&
      k.shape()[q.dim() - 3] != q.shape()[q.dim() - 3]) {
    int64_t groups = q.shape()[q.dim() - 3] / k.shape()[k.dim() - 3];
    k = repeat_interleave(k, groups, k.dim() - 3);
    v = repeat_interleave(v, groups, v.dim() - 3);
  }
  return one(nn::scaled_dot_product_attention(q, k, v, mask, dropout, causal, scale));
}

// _native_batch_norm_legit_functional: the output, the batch statistics, and the new
// running statistics as values (the graph writes them back itself).
Results batch_norm_functional(const Call& c) {
  Tensor x = c.tensor("input"), w = c.opt_tensor("weight"), b = c.opt_tensor("bias");
  Tensor mean = clone(c.tensor("running_mean")), var = clone(c.tensor("running_var"));
  bool training = c.flag("training");
  auto [y, save_mean, save_rstd] =
      nn::native_batch_norm(x, w, b, mean, var, training, c.real("momentum"), c.real("eps"));
  return {Slot(y), Slot(save_mean), Slot(save_rstd), Slot(mean), Slot(var)};
}

// The .default form of an upsampling: self, output_size, align_corners and one optional
// scale per dim (scales_d, scales_h, scales_w), used as interpolate's factors when given.
Tensor upsample_sizes(const Call& c, const char* mode, bool antialias) {
  nn::InterpolateOptions o;
  o.mode = mode;
  o.antialias = antialias;
  o.size = c.ints("output_size");
  o.align_corners = c.flag("align_corners");
  std::vector<double> scales;
  for (const char* name : {"scales_d", "scales_h", "scales_w"})
    if (auto s = c.opt_real(name)) scales.push_back(*s);
  if (scales.size() == o.size.size()) o.size.clear(), o.scale_factor = scales;
  return nn::interpolate(self(c), o);
}

// ATen's reduction argument: 0 none, 1 mean, 2 sum.
nn::Reduction reduction(const Call& c) {
  switch (c.integer("reduction", 1)) {
    case 0: return "none";
    case 1: return "mean";
    case 2: return "sum";
    default: c.fail_arg("reduction", "expected 0 (none), 1 (mean) or 2 (sum)");
  }
}

Results nll_loss(const Call& c) {
  return one(nn::nll_loss(self(c), c.tensor("target"), reduction(c),
                          c.integer("ignore_index", -100), c.opt_tensor("weight")));
}

// native_group_norm: the output and each (sample, group)'s mean and 1 / std, [N, G].
Results native_group_norm(const Call& c) {
  Tensor x = c.tensor("input");
  int64_t n = c.integer("N"), groups = c.integer("group");
  c.integer("C"), c.integer("HxW");
  double eps = c.real("eps");
  Tensor y = nn::group_norm(x, groups, c.opt_tensor("weight"), c.opt_tensor("bias"), eps);
  auto [variance, mean] = var_mean(reshape(x, {n, groups, -1}), {-1}, 0);
  return {Slot(y), Slot(mean), Slot(rsqrt(add(variance, wrapped_number(eps))))};
}

Results conv_transpose(const Call& c, size_t spatial) {
  IntList ones(spatial, 1), zeros(spatial, 0);
  return one(convolution(c.tensor("input"), c.tensor("weight"), c.opt_tensor("bias"),
                         c.ints("stride", ones), c.ints("padding", zeros), c.ints("dilation", ones),
                         true, c.ints("output_padding", zeros), c.integer("groups", 1)));
}

// grid_sampler(_2d/_3d): the modes as ATen numbers them.
Results grid_sampler(const Call& c) {
  static constexpr const char* kModes[] = {"bilinear", "nearest", "bicubic"};
  static constexpr const char* kPadding[] = {"zeros", "border", "reflection"};
  int64_t mode = c.integer("interpolation_mode"), padding = c.integer("padding_mode");
  if (mode < 0 || mode > 2) c.fail_arg("interpolation_mode", "expected 0, 1 or 2");
  if (padding < 0 || padding > 2) c.fail_arg("padding_mode", "expected 0, 1 or 2");
  return one(nn::grid_sample(c.tensor("input"), c.tensor("grid"), kModes[mode], kPadding[padding],
                             c.flag("align_corners")));
}

// embedding_bag (and _embedding_bag): the bags' output; offset2bag, bag_size and
// max_indices (what its backward reads) are not made, so a graph that reads them fails
// at that node.
Results embedding_bag(const Call& c) {
  static constexpr const char* kModes[] = {"sum", "mean", "max"};
  nn::EmbeddingBagOptions o;
  int64_t mode = c.integer("mode", 0);
  if (mode < 0 || mode > 2) c.fail_arg("mode", "expected 0 (sum), 1 (mean) or 2 (max)");
  o.mode = kModes[mode];
  o.offsets = c.opt_tensor("offsets");
  o.per_sample_weights = c.opt_tensor("per_sample_weights");
  o.include_last_offset = c.flag("include_last_offset", false);
  o.scale_grad_by_freq = c.flag("scale_grad_by_freq", false);
  c.flag("sparse", false);  // the gradient's layout: kiln's are dense
  if (auto p = c.opt_integer("padding_idx"); p && *p >= 0) o.padding_idx = *p;
  return {Slot(nn::embedding_bag(c.tensor("indices"), c.tensor("weight"), o)), Slot(), Slot(),
          Slot()};
}

}  // namespace

std::vector<AdapterEntry> nn_adapters() {
  return {
      // ---- normalization ----
      {"aten.layer_norm.default",
       [](const Call& c) {
         c.accept_defaults({"cudnn_enable"});
         return one(layer_norm(c.tensor("input"), c.ints("normalized_shape"),
                               c.opt_tensor("weight"), c.opt_tensor("bias"), c.real("eps", 1e-5)));
       }},
      {"aten.native_layer_norm.default",
       [](const Call& c) {
         return tuple_of(native_layer_norm(c.tensor("input"), c.ints("normalized_shape"),
                                           c.opt_tensor("weight"), c.opt_tensor("bias"),
                                           c.real("eps")));
       }},
      {"aten.rms_norm.default",
       [](const Call& c) {
         return one(rms_norm(c.tensor("input"), c.ints("normalized_shape"), c.opt_tensor("weight"),
                             c.opt_real("eps")));
       }},
      {"aten.group_norm.default",
       [](const Call& c) {
         c.accept_defaults({"cudnn_enabled"});
         return one(nn::group_norm(c.tensor("input"), c.integer("num_groups"),
                                   c.opt_tensor("weight"), c.opt_tensor("bias"),
                                   c.real("eps", 1e-5)));
       }},
      {"aten.batch_norm.default",
       [](const Call& c) {
         c.accept_defaults({"cudnn_enabled"});
         return one(nn::batch_norm(c.tensor("input"), c.opt_tensor("running_mean"),
                                   c.opt_tensor("running_var"), c.opt_tensor("weight"),
                                   c.opt_tensor("bias"), c.flag("training"), c.real("momentum"),
                                   c.real("eps")));
       }},
      {"aten._native_batch_norm_legit_no_training.default",
       [](const Call& c) {
         return tuple_of(nn::native_batch_norm(c.tensor("input"), c.opt_tensor("weight"),
                                               c.opt_tensor("bias"), c.tensor("running_mean"),
                                               c.tensor("running_var"), false, c.real("momentum"),
                                               c.real("eps")));
       }},
      {"aten._native_batch_norm_legit_functional.default", batch_norm_functional},
      {"aten._native_batch_norm_legit.default",
       [](const Call& c) {  // writes the running statistics in place, as PyTorch
         return tuple_of(nn::native_batch_norm(c.tensor("input"), c.opt_tensor("weight"),
                                               c.opt_tensor("bias"), c.tensor("running_mean"),
                                               c.tensor("running_var"), c.flag("training"),
                                               c.real("momentum"), c.real("eps")));
       }},
      {"aten.native_batch_norm.default",
       [](const Call& c) {
         return tuple_of(nn::native_batch_norm(c.tensor("input"), c.opt_tensor("weight"),
                                               c.opt_tensor("bias"), c.opt_tensor("running_mean"),
                                               c.opt_tensor("running_var"), c.flag("training"),
                                               c.real("momentum"), c.real("eps")));
       }},
      {"aten.conv1d.default", [](const Call& c) { return conv(c, 1); }},
      {"aten.conv2d.default", [](const Call& c) { return conv(c, 2); }},
      {"aten.conv3d.default", [](const Call& c) { return conv(c, 3); }},
      {"aten.conv1d.padding", [](const Call& c) { return conv(c, 1); }},
      {"aten.conv2d.padding", [](const Call& c) { return conv(c, 2); }},
      {"aten.conv3d.padding", [](const Call& c) { return conv(c, 3); }},
      {"aten.convolution.default",
       [](const Call& c) {
         return one(convolution(c.tensor("input"), c.tensor("weight"), c.opt_tensor("bias"),
                                c.ints("stride"), c.ints("padding"), c.ints("dilation"),
                                c.flag("transposed"), c.ints("output_padding"),
                                c.integer("groups")));
       }},
      {"aten.conv_transpose1d.default", [](const Call& c) { return conv_transpose(c, 1); }},
      {"aten.conv_transpose2d.input", [](const Call& c) { return conv_transpose(c, 2); }},
      {"aten.conv_transpose3d.input", [](const Call& c) { return conv_transpose(c, 3); }},
      {"aten.max_pool1d.default", [](const Call& c) { return one(max_pooled(c, nn::max_pool1d)); }},
      {"aten.max_pool2d.default", [](const Call& c) { return one(max_pooled(c, nn::max_pool2d)); }},
      {"aten.max_pool3d.default", [](const Call& c) { return one(max_pooled(c, nn::max_pool3d)); }},
      {"aten.max_pool1d_with_indices.default",
       [](const Call& c) { return pair_of(max_pooled(c, nn::max_pool1d_with_indices)); }},
      {"aten.max_pool2d_with_indices.default",
       [](const Call& c) { return pair_of(max_pooled(c, nn::max_pool2d_with_indices)); }},
      {"aten.max_pool3d_with_indices.default",
       [](const Call& c) { return pair_of(max_pooled(c, nn::max_pool3d_with_indices)); }},
      {"aten.avg_pool1d.default",
       [](const Call& c) {
         return one(nn::avg_pool1d(self(c), c.ints("kernel_size"), stride_or_kernel(c),
                                   c.ints("padding", IntList{0}), c.flag("ceil_mode", false),
                                   c.flag("count_include_pad", true)));
       }},
      {"aten.avg_pool2d.default", [](const Call& c) { return one(avg_pooled(c, nn::avg_pool2d)); }},
      {"aten.avg_pool3d.default", [](const Call& c) { return one(avg_pooled(c, nn::avg_pool3d)); }},
      {"aten.adaptive_avg_pool1d.default",
       [](const Call& c) { return one(nn::adaptive_avg_pool1d(self(c), c.ints("output_size"))); }},
      {"aten.adaptive_avg_pool2d.default",
       [](const Call& c) { return one(nn::adaptive_avg_pool2d(self(c), c.ints("output_size"))); }},
      {"aten._adaptive_avg_pool2d.default",
       [](const Call& c) { return one(nn::adaptive_avg_pool2d(self(c), c.ints("output_size"))); }},
      {"aten.adaptive_max_pool2d.default",
       [](const Call& c) {
         return pair_of(nn::adaptive_max_pool2d_with_indices(self(c), c.ints("output_size")));
       }},
      {"aten.upsample_nearest1d.vec", [](const Call& c) { return one(upsample(c, "nearest")); }},
      {"aten.upsample_nearest2d.vec", [](const Call& c) { return one(upsample(c, "nearest")); }},
      {"aten.upsample_nearest3d.vec", [](const Call& c) { return one(upsample(c, "nearest")); }},
      {"aten._upsample_nearest_exact2d.vec",
       [](const Call& c) { return one(upsample(c, "nearest-exact")); }},
      {"aten.upsample_linear1d.vec", [](const Call& c) { return one(upsample(c, "linear")); }},
      {"aten.upsample_bilinear2d.vec", [](const Call& c) { return one(upsample(c, "bilinear")); }},
      {"aten.upsample_bicubic2d.vec", [](const Call& c) { return one(upsample(c, "bicubic")); }},
      {"aten.upsample_trilinear3d.vec",
       [](const Call& c) { return one(upsample(c, "trilinear")); }},
      // max_unpool: the indices are flat positions in the output plane, whose size the op
      // names, so the pooling's kernel is not needed (1 stands in for it)
      {"aten.max_unpool2d.default",
       [](const Call& c) {
         return one(
             nn::max_unpool2d(self(c), c.tensor("indices"), {1}, {1}, {0}, c.ints("output_size")));
       }},
      {"aten.max_unpool3d.default",
       [](const Call& c) {
         return one(nn::max_unpool3d(self(c), c.tensor("indices"), {1}, c.ints("stride"),
                                     c.ints("padding"), c.ints("output_size")));
       }},
      // embedding_renorm_ (an embedding with max_norm) on the weight's alias: its
      // functional form, copied back into the weight as every in-place op is
      {"aten.embedding_renorm.default",
       [](const Call& c) {
         return one(nn::embedding_renorm(self(c), c.tensor("indices"), c.real("max_norm"),
                                         c.real("norm_type")));
       }},
      {"aten.pixel_shuffle.default",
       [](const Call& c) { return one(nn::pixel_shuffle(self(c), c.integer("upscale_factor"))); }},
      {"aten.dropout.default",
       [](const Call& c) {
         return one(nn::dropout(c.tensor("input"), c.real("p"), c.flag("train")));
       }},
      {"aten.native_dropout.default",
       [](const Call& c) {
         return pair_of(nn::native_dropout(c.tensor("input"), c.real("p"), c.flag("train", true)));
       }},
      {"aten.scaled_dot_product_attention.default", attention},
      {"aten.lstm.input", [](const Call& c) { return recurrent(c, Cell::lstm); }},
      {"aten.gru.input", [](const Call& c) { return recurrent(c, Cell::gru); }},
      {"aten.rnn_tanh.input", [](const Call& c) { return recurrent(c, Cell::rnn_tanh); }},
      {"aten.rnn_relu.input", [](const Call& c) { return recurrent(c, Cell::rnn_relu); }},
      {"aten.glu.default",
       [](const Call& c) { return one(nn::glu(self(c), c.integer("dim", -1))); }},
      {"aten.softmax.default",
       [](const Call& c) { return one(softmax(self(c), c.integer("dim"))); }},
      // ---- losses (reduction: ATen's 0 none, 1 mean, 2 sum) ----
      {"aten.cross_entropy_loss.default",
       [](const Call& c) {
         return one(nn::cross_entropy(self(c), c.tensor("target"), reduction(c),
                                      c.integer("ignore_index", -100),
                                      c.real("label_smoothing", 0.0), c.opt_tensor("weight")));
       }},
      {"aten.nll_loss_nd.default", nll_loss},
      {"aten.nll_loss.default", nll_loss},
      {"aten.nll_loss2d.default", nll_loss},
      {"aten.binary_cross_entropy.default",
       [](const Call& c) {
         return one(nn::binary_cross_entropy(self(c), c.tensor("target"), c.opt_tensor("weight"),
                                             reduction(c)));
       }},
      {"aten.binary_cross_entropy_with_logits.default",
       [](const Call& c) {
         return one(nn::binary_cross_entropy_with_logits(self(c), c.tensor("target"),
                                                         c.opt_tensor("weight"), reduction(c),
                                                         c.opt_tensor("pos_weight")));
       }},
      {"aten.mse_loss.default",
       [](const Call& c) { return one(nn::mse_loss(self(c), c.tensor("target"), reduction(c))); }},
      {"aten.l1_loss.default",
       [](const Call& c) { return one(nn::l1_loss(self(c), c.tensor("target"), reduction(c))); }},
      {"aten.smooth_l1_loss.default",
       [](const Call& c) {
         return one(
             nn::smooth_l1_loss(self(c), c.tensor("target"), reduction(c), c.real("beta", 1.0)));
       }},
      {"aten.huber_loss.default",
       [](const Call& c) {
         return one(
             nn::huber_loss(self(c), c.tensor("target"), reduction(c), c.real("delta", 1.0)));
       }},
      {"aten.kl_div.default",
       [](const Call& c) {
         return one(
             nn::kl_div(self(c), c.tensor("target"), reduction(c), c.flag("log_target", false)));
       }},
      {"aten.cosine_similarity.default",
       [](const Call& c) {
         return one(nn::cosine_similarity(c.tensor("x1"), c.tensor("x2"), c.integer("dim", 1),
                                          c.real("eps", 1e-8)));
       }},
      {"aten.pairwise_distance.default",
       [](const Call& c) {
         return one(nn::pairwise_distance(c.tensor("x1"), c.tensor("x2"), c.real("p", 2.0),
                                          c.real("eps", 1e-6), c.flag("keepdim", false)));
       }},
      {"aten.triplet_margin_loss.default",
       [](const Call& c) {
         return one(nn::triplet_margin_loss(
             c.tensor("anchor"), c.tensor("positive"), c.tensor("negative"), c.real("margin", 1.0),
             c.real("p", 2.0), c.real("eps", 1e-6), c.flag("swap", false), reduction(c)));
       }},
      {"aten.hinge_embedding_loss.default",
       [](const Call& c) {
         return one(nn::hinge_embedding_loss(self(c), c.tensor("target"), c.real("margin", 1.0),
                                             reduction(c)));
       }},
      {"aten.margin_ranking_loss.default",
       [](const Call& c) {
         return one(nn::margin_ranking_loss(c.tensor("input1"), c.tensor("input2"),
                                            c.tensor("target"), c.real("margin", 0.0),
                                            reduction(c)));
       }},
      {"aten.soft_margin_loss.default",
       [](const Call& c) {
         return one(nn::soft_margin_loss(self(c), c.tensor("target"), reduction(c)));
       }},
      {"aten.multi_margin_loss.default",
       [](const Call& c) {
         return one(nn::multi_margin_loss(self(c), c.tensor("target"), c.integer("p", 1),
                                          c.real("margin", 1.0), c.opt_tensor("weight"),
                                          reduction(c)));
       }},
      {"aten._pdist_forward.default",
       [](const Call& c) { return one(nn::pdist(self(c), c.real("p", 2.0))); }},
      {"aten.pdist.default",
       [](const Call& c) { return one(nn::pdist(c.tensor("input"), c.real("p", 2.0))); }},
      {"aten.feature_dropout.default",
       [](const Call& c) {
         return one(nn::feature_dropout(c.tensor("input"), c.real("p"), c.flag("train")));
       }},
      // ---- more normalization ----
      {"aten.native_group_norm.default", native_group_norm},
      {"aten.instance_norm.default",
       [](const Call& c) {
         c.accept_defaults({"cudnn_enabled"});
         return one(nn::instance_norm(c.tensor("input"), c.opt_tensor("running_mean"),
                                      c.opt_tensor("running_var"), c.opt_tensor("weight"),
                                      c.opt_tensor("bias"), c.flag("use_input_stats"),
                                      c.real("momentum"), c.real("eps")));
       }},
      {"aten._native_batch_norm_legit.no_stats",
       [](const Call& c) {  // batch statistics only (instance norm in the core dialect)
         return tuple_of(nn::native_batch_norm(
             c.tensor("input"), c.opt_tensor("weight"), c.opt_tensor("bias"), Tensor(), Tensor(),
             c.flag("training"), c.real("momentum"), c.real("eps")));
       }},
      // ---- more convolution and pooling ----
      {"aten.im2col.default",
       [](const Call& c) {
         return one(nn::unfold(self(c), c.ints("kernel_size"), c.ints("dilation"),
                               c.ints("padding"), c.ints("stride")));
       }},
      {"aten.col2im.default",
       [](const Call& c) {
         return one(nn::fold(self(c), c.ints("output_size"), c.ints("kernel_size"),
                             c.ints("dilation"), c.ints("padding"), c.ints("stride")));
       }},
      {"aten.adaptive_avg_pool3d.default",
       [](const Call& c) { return one(nn::adaptive_avg_pool3d(self(c), c.ints("output_size"))); }},
      {"aten._adaptive_avg_pool3d.default",
       [](const Call& c) { return one(nn::adaptive_avg_pool3d(self(c), c.ints("output_size"))); }},
      {"aten.adaptive_max_pool1d.default",
       [](const Call& c) {  // a 2-d pooling of height 1: its flat indices are the positions in L
         auto [y, i] = nn::adaptive_max_pool2d_with_indices(
             unsqueeze(self(c), -2), IntList{1, c.ints("output_size").at(0)});
         return pair_of({squeeze(y, -2), squeeze(i, -2)});
       }},
      {"aten.adaptive_max_pool3d.default",
       [](const Call& c) {
         return pair_of(nn::adaptive_max_pool3d_with_indices(self(c), c.ints("output_size")));
       }},
      {"aten.pixel_unshuffle.default",
       [](const Call& c) {
         return one(nn::pixel_unshuffle(self(c), c.integer("downscale_factor")));
       }},
      {"aten.channel_shuffle.default",
       [](const Call& c) { return one(nn::channel_shuffle(self(c), c.integer("groups"))); }},
      {"aten.native_channel_shuffle.default",
       [](const Call& c) { return one(nn::channel_shuffle(self(c), c.integer("groups"))); }},
      // ---- sampling ----
      {"aten.grid_sampler.default", grid_sampler},
      {"aten.grid_sampler_2d.default", grid_sampler},
      {"aten.grid_sampler_3d.default", grid_sampler},
      {"aten.affine_grid_generator.default",
       [](const Call& c) {
         return one(nn::affine_grid(c.tensor("theta"), c.ints("size"), c.flag("align_corners")));
       }},
      {"aten._upsample_bilinear2d_aa.vec",
       [](const Call& c) { return one(upsample(c, "bilinear", true)); }},
      {"aten._upsample_bicubic2d_aa.vec",
       [](const Call& c) { return one(upsample(c, "bicubic", true)); }},
      {"aten._upsample_bilinear2d_aa.default",
       [](const Call& c) { return one(upsample_sizes(c, "bilinear", true)); }},
      {"aten._upsample_bicubic2d_aa.default",
       [](const Call& c) { return one(upsample_sizes(c, "bicubic", true)); }},
      // ---- more layers ----
      {"aten.embedding_bag.padding_idx", embedding_bag},
      {"aten.embedding_bag.default", embedding_bag},
      {"aten._embedding_bag.default", embedding_bag},
      {"aten._weight_norm.default",
       [](const Call& c) {  // v * g / ||v||, the norm over every dim but `dim` (all of them for -1)
         Tensor v = c.tensor("v"), g = c.tensor("g");
         int64_t dim = c.integer("dim", 0);
         IntList others;
         if (dim != -1) {
           if (dim < 0) dim += v.dim();
           for (int64_t d = 0; d < v.dim(); ++d)
             if (d != dim) others.push_back(d);
         }
         return one(mul(v, div(g, vector_norm(v, 2.0, others, dim != -1))));
       }},
      {"aten.bilinear.default",
       [](const Call& c) {
         return one(nn::bilinear(c.tensor("input1"), c.tensor("input2"), c.tensor("weight"),
                                 c.opt_tensor("bias")));
       }},
      {"aten.rrelu_with_noise_functional.default",
       [](const Call&
              c) {  // the core dialect's rrelu: (result, noise); in eval the noise is unused
         if (c.flag("training", false))
           fail(ErrorKind::unsupported, "{}: rrelu in training mode", c.target());
         c.opt_tensor("generator");
         return Results{
             Slot(nn::rrelu(self(c), c.real("lower", 1.0 / 8), c.real("upper", 1.0 / 3), false)),
             Slot(c.tensor("noise"))};
       }},
      {"aten._trilinear.default",
       [](const Call& c) {  // (nn.Bilinear in the core dialect) the three inputs unsqueezed at
         // their expand dims, multiplied, and summed over sumdim
         TensorList in = {c.tensor("i1"), c.tensor("i2"), c.tensor("i3")};
         const char* expand[] = {"expand1", "expand2", "expand3"};
         int64_t total = in[0].dim() + static_cast<int64_t>(c.ints("expand1").size());
         for (size_t k = 0; k < 3; ++k) {
           IntList dims = c.ints(expand[k]);
           for (int64_t d = 0; d < total; ++d)
             if (std::find(dims.begin(), dims.end(), d) != dims.end()) in[k] = unsqueeze(in[k], d);
         }
         c.integer("unroll_dim", 1);  // how ATen loops over the products: the result is the same
         Tensor product = mul(mul(in[0], in[1]), in[2]);
         IntList sumdim = c.ints("sumdim");
         return one(sumdim.empty() ? product : sum(product, sumdim));
       }},
      {"aten.alpha_dropout.default",
       [](const Call& c) {
         return one(nn::alpha_dropout(c.tensor("input"), c.real("p"), c.flag("train")));
       }},
      {"aten.feature_alpha_dropout.default",
       [](const Call& c) {
         if (c.flag("train") && c.real("p") > 0)
           fail(ErrorKind::unsupported, "{}: feature alpha dropout in training mode", c.target());
         return one(c.tensor("input"));
       }},
      {"aten.gru_cell.default",
       [](const Call& c) {
         return one(nn::gru_cell(c.tensor("input"), c.tensor("hx"), c.tensor("w_ih"),
                                 c.tensor("w_hh"), c.opt_tensor("b_ih"), c.opt_tensor("b_hh")));
       }},
      {"aten.rnn_tanh_cell.default",
       [](const Call& c) {
         return one(nn::rnn_tanh_cell(c.tensor("input"), c.tensor("hx"), c.tensor("w_ih"),
                                      c.tensor("w_hh"), c.opt_tensor("b_ih"),
                                      c.opt_tensor("b_hh")));
       }},
      {"aten.rnn_relu_cell.default",
       [](const Call& c) {
         return one(nn::rnn_relu_cell(c.tensor("input"), c.tensor("hx"), c.tensor("w_ih"),
                                      c.tensor("w_hh"), c.opt_tensor("b_ih"),
                                      c.opt_tensor("b_hh")));
       }},
      {"aten.lstm_cell.default",
       [](const Call& c) {
         TensorList hx = c.tensors("hx");
         if (hx.size() != 2) c.fail_arg("hx", "expected (h, c)");
         return pair_of(nn::lstm_cell(c.tensor("input"), hx[0], hx[1], c.tensor("w_ih"),
                                      c.tensor("w_hh"), c.opt_tensor("b_ih"),
                                      c.opt_tensor("b_hh")));
       }},
  };
}

}  // namespace kiln::interop

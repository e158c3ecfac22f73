#include "kiln/nn/functional.h"

#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/nn/conv.h"

namespace kiln::nn {
namespace {

// A per-channel [C] tensor shaped to broadcast against x [N, C, *].
Tensor per_channel(const Tensor& t, const Tensor& x) {
  IntList shape(static_cast<size_t>(x.dim()), 1);
  shape[1] = x.size(1);
  return reshape(t, shape);
}

Tensor affine(Tensor y, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (weight.defined()) y = y * per_channel(weight, x);
  if (bias.defined()) y = y + per_channel(bias, x);
  return y;
}

}  // namespace

Tensor dropout(const Tensor& x, double p, bool training) {
  KILN_CHECK(p >= 0 && p <= 1, value, "[dropout] probability has to be between 0 and 1, but got {}",
             p);
  if (!training || p == 0) return x;
  if (p == 1) return x * 0.0;
  Tensor keep = ge(rand_like(x), scalar_tensor(p, {.dtype = x.dtype()}));
  return where(keep, x / (1 - p), zeros_like(x));
}

namespace {

// A keep mask of x's shape (per element), or [N, C, 1, ...] (per channel).
Tensor keep_mask(const Tensor& x, double p, bool per_channel, int64_t spatial, const char* op) {
  if (!per_channel) return ge(rand_like(x), scalar_tensor(p, {.dtype = x.dtype()}));
  KILN_CHECK(x.dim() == spatial + 2 || x.dim() == spatial + 1, shape,
             "[{}] expects a {}-D (batched) or {}-D (unbatched) input, got {}", op, spatial + 2,
             spatial + 1, x.meta_str());
  IntList shape(x.shape().begin(), x.shape().end());
  for (int64_t d = x.dim() - spatial; d < x.dim(); ++d) shape[static_cast<size_t>(d)] = 1;
  return ge(rand(shape, {.dtype = x.dtype(), .device = x.device()}), p);
}

Tensor feature_dropout(const Tensor& x, double p, bool training, int64_t spatial, const char* op) {
  KILN_CHECK(p >= 0 && p <= 1, value, "[{}] probability has to be between 0 and 1, but got {}", op,
             p);
  if (!training || p == 0) return x;
  if (p == 1) return x * 0.0;
  return x * to(keep_mask(x, p, true, spatial, op), x.dtype()) / (1 - p);
}

Tensor alpha_dropout_impl(const Tensor& x, double p, bool training, bool per_channel,
                          const char* op) {
  KILN_CHECK(p >= 0 && p <= 1, value, "[{}] probability has to be between 0 and 1, but got {}", op,
             p);
  if (!training || p == 0) return x;
  if (p == 1) return x * 0.0;
  const double alpha = 1.7580993408473766;  // SELU's scale * alpha: its negative saturation
  double a = 1.0 / std::sqrt((alpha * alpha * p + 1) * (1 - p));
  Tensor keep = to(keep_mask(x, p, per_channel, std::max<int64_t>(x.dim() - 2, 0), op), x.dtype());
  // kept: a x + a alpha p; dropped: a alpha (p - 1)
  return x * keep * a + (keep - 1.0) * (alpha * a) + alpha * a * p;
}

}  // namespace

Tensor feature_dropout(const Tensor& x, double p, bool training) {
  KILN_CHECK(x.dim() >= 3, shape,
             "[feature_dropout] expects an input [N, C, *spatial] of at least 3 dims, got {}",
             x.meta_str());
  return feature_dropout(x, p, training, x.dim() - 2, "feature_dropout");
}

std::pair<Tensor, Tensor> native_dropout(const Tensor& x, double p, bool training) {
  KILN_CHECK(p >= 0 && p <= 1, value,
             "[native_dropout] probability has to be between 0 and 1, but got {}", p);
  if (!training) return {x, ones_like(x, {.dtype = DType::b8})};
  Tensor keep =
      p == 1 ? zeros_like(x, {.dtype = DType::b8}) : keep_mask(x, p, false, 0, "native_dropout");
  return {p == 1 ? x * 0.0 : x * to(keep, x.dtype()) / (1 - p), keep};
}

Tensor dropout1d(const Tensor& x, double p, bool training) {
  return feature_dropout(x, p, training, 1, "dropout1d");
}
Tensor dropout2d(const Tensor& x, double p, bool training) {
  return feature_dropout(x, p, training, 2, "dropout2d");
}
Tensor dropout3d(const Tensor& x, double p, bool training) {
  return feature_dropout(x, p, training, 3, "dropout3d");
}
Tensor alpha_dropout(const Tensor& x, double p, bool training) {
  return alpha_dropout_impl(x, p, training, false, "alpha_dropout");
}
Tensor feature_alpha_dropout(const Tensor& x, double p, bool training) {
  return alpha_dropout_impl(x, p, training, true, "feature_alpha_dropout");
}

Tensor gumbel_softmax(const Tensor& logits, double tau, bool hard, int64_t dim) {
  Tensor gumbels = neg(log(neg(log(clamp_min(rand_like(logits), 1e-20)))));  // -log(Exp(1))
  Tensor y = softmax((logits + gumbels) / tau, dim);
  if (!hard) return y;
  int64_t d = wrap_dim(dim, y.dim(), "gumbel_softmax");
  Tensor one_hot = scatter(zeros_like(y), d, argmax(y, d, true), 1.0);
  return one_hot - y.detach() + y;
}

Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const Tensor& bias) {
  KILN_CHECK(weight.dim() == 3 && x1.dim() >= 1 && x2.dim() >= 1 && x1.size(-1) == weight.size(1) &&
                 x2.size(-1) == weight.size(2),
             shape, "[bilinear] input1 {} and input2 {} do not match weight {} [out, in1, in2]",
             x1.meta_str(), x2.meta_str(), weight.meta_str());
  if (wants_opmath({x1, x2, weight, bias}))
    return in_opmath({x1, x2, weight, bias},
                     [](const TensorList& t) { return bilinear(t[0], t[1], t[2], t[3]); });
  Tensor y = einsum("...i,oij,...j->...o", {x1, weight, x2});
  return bias.defined() ? y + bias : y;
}

Tensor pdist(const Tensor& x, double p) {
  KILN_CHECK(x.dim() == 2, shape, "[pdist] only supports 2D tensors, got: {}", x.meta_str());
  KILN_CHECK(p >= 0, value, "[pdist] only supports non-negative p values, got {}", p);
  Tensor pairs = triu_indices(x.size(0), x.size(0), 1, {.dtype = DType::i64, .device = x.device()});
  Tensor diff = index_select(x, 0, select(pairs, 0, 0)) - index_select(x, 0, select(pairs, 0, 1));
  return vector_norm(diff, p, {1});
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  return std::get<0>(
      native_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps));
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& x, const Tensor& weight,
                                                     const Tensor& bias, const Tensor& running_mean,
                                                     const Tensor& running_var, bool training,
                                                     double momentum, double eps) {
  if (x.dim() < 2 && x.sym_numel() == 0)
    return {clone(x), Tensor(), Tensor()};  // PyTorch passes an empty input through
  if (wants_opmath({x, weight, bias})) {    // statistics in f32, the output rounded once
    Tensor wide_mean, wide_invstd;
    Tensor y = in_opmath({x, weight, bias}, [&](const TensorList& t) {
      auto [out, m, s] =
          native_batch_norm(t[0], t[1], t[2], running_mean, running_var, training, momentum, eps);
      wide_mean = m;
      wide_invstd = s;
      return out;
    });
    // the saved statistics in the input's dtype, as PyTorch returns them
    auto narrow = [&](const Tensor& t) { return t.defined() ? to(t, x.dtype()) : t; };
    return {y, narrow(wide_mean), narrow(wide_invstd)};
  }
  KILN_CHECK(x.dim() >= 2, shape,
             "[batch_norm] expects an input of at least 2 dims [N, C, *], got {}", x.meta_str());
  IntList dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  Tensor mean_, var_;
  if (training) {
    int64_t count = x.numel() / x.size(1);
    KILN_CHECK(count > 1, value,
               "[batch_norm] expected more than 1 value per channel when training, got input {}",
               x.meta_str());
    mean_ = mean(x, dims);
    var_ = var(x, dims, /*correction=*/0);
    autograd::NoGradGuard no_grad;  // the running statistics are not differentiated
    if (running_mean.defined()) {
      Tensor m = running_mean;
      mul_(m, 1 - momentum);
      add_(m, mean_.detach(), momentum);
    }
    if (running_var.defined()) {
      Tensor v = running_var;
      mul_(v, 1 - momentum);
      add_(v, var_.detach() * (static_cast<double>(count) / static_cast<double>(count - 1)),
           momentum);
    }
  } else {
    KILN_CHECK(running_mean.defined() && running_var.defined(), value,
               "[batch_norm] needs running_mean and running_var outside training");
    // read in x's (compute) dtype: bf16 statistics of a bf16 input join its f32 opmath
    mean_ = to(running_mean, x.dtype());
    var_ = to(running_var, x.dtype());
  }
  Tensor invstd = rsqrt(var_ + eps);
  Tensor y = affine((x - per_channel(mean_, x)) * per_channel(invstd, x), x, weight, bias);
  if (!training) {
    Tensor none = empty({0}, {.dtype = x.dtype(), .device = x.device()});
    return {y, none, none};
  }
  return {y, mean_, invstd};
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  KILN_CHECK(x.dim() >= 2, shape,
             "[group_norm] expects an input of at least 2 dims [N, C, *], got {}", x.meta_str());
  KILN_CHECK(num_groups > 0 && x.size(1) % num_groups == 0, value,
             "[group_norm] expected the number of channels ({}) to be divisible by num_groups ({})",
             x.size(1), num_groups);
  if (wants_opmath({x, weight, bias}))
    return in_opmath({x, weight, bias}, [&](const TensorList& t) {
      return group_norm(t[0], num_groups, t[1], t[2], eps);
    });
  // [N, groups, C / groups * spatial], the sizes as they are (Y1: a dynamic batch or length
  // adds no guard)
  SymInt per_group = x.size(1) / num_groups;
  for (int64_t d = 2; d < x.dim(); ++d)
    per_group = per_group * x.shape().sym(static_cast<size_t>(d));
  Dims grouped(3);
  grouped.set(0, x.shape().sym(0)), grouped.set(1, num_groups), grouped.set(2, per_group);
  Tensor g = reshape(x, grouped);
  Tensor centered = g - mean(g, {2}, true);
  Tensor y = centered * rsqrt(mean(centered * centered, {2}, true) + eps);
  return affine(reshape(y, x.shape()), x, weight, bias);
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  // Broadcast first: a dim of size 1 in one operand is normalized at its broadcast size.
  TensorList both = broadcast_tensors({x1, x2});
  auto unit = [&](const Tensor& x) { return x / clamp_min(vector_norm(x, 2.0, {dim}, true), eps); };
  return sum(unit(both[0]) * unit(both[1]), {dim});
}

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  return vector_norm(x1 - x2 + eps, p, {-1}, keepdim);
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale) {
  KILN_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, shape,
             "[scaled_dot_product_attention] q, k and v need at least 2 dims, got {}, {}, {}",
             q.meta_str(), k.meta_str(), v.meta_str());
  KILN_CHECK(!(is_causal && attn_mask.defined()), value,
             "[scaled_dot_product_attention] takes attn_mask or is_causal, not both");
  double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor scores = matmul(q, transpose(k, -2, -1)) * s;
  if (is_causal) {
    Tensor future =
        triu(ones({q.size(-2), k.size(-2)}, {.dtype = DType::b8, .device = q.device()}), 1);
    scores = masked_fill(scores, future, -std::numeric_limits<double>::infinity());
  } else if (attn_mask.defined()) {
    scores = attn_mask.dtype() == DType::b8 ? masked_fill(scores, logical_not(attn_mask),
                                                          -std::numeric_limits<double>::infinity())
                                            : scores + attn_mask;
  }
  Tensor weights = dropout(softmax(scores, -1), dropout_p, dropout_p > 0);
  return matmul(weights, v);
}

Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                     const Tensor& weight, const Tensor& bias, bool use_input_stats,
                     double momentum, double eps) {
  KILN_CHECK(x.dim() >= 3, shape,
             "[instance_norm] expects an input of at least 3 dims [N, C, *], got {}", x.meta_str());
  if (wants_opmath(
          {x, weight, bias}))  // statistics in f32, rounded once; running stats keep their dtype
    return in_opmath({x, weight, bias}, [&](const TensorList& t) {
      return instance_norm(t[0], running_mean, running_var, t[1], t[2], use_input_stats, momentum,
                           eps);
    });
  IntList dims;
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  if (!use_input_stats) {
    KILN_CHECK(running_mean.defined() && running_var.defined(), value,
               "[instance_norm] needs running_mean and running_var when use_input_stats is false");
    return affine((x - per_channel(running_mean, x)) * rsqrt(per_channel(running_var, x) + eps), x,
                  weight, bias);
  }
  Tensor m = mean(x, dims, true), v = var(x, dims, /*correction=*/0, true);
  int64_t count = 1;
  for (int64_t d : dims) count *= x.size(d);
  if (running_mean.defined() || running_var.defined()) {  // the batch's mean instance statistics
    autograd::NoGradGuard no_grad;
    auto update = [&](const Tensor& running, const Tensor& stat) {
      Tensor r = running;
      mul_(r, 1 - momentum);
      add_(r, mean(reshape(stat.detach(), {x.size(0), x.size(1)}), {0}), momentum);
    };
    if (running_mean.defined()) update(running_mean, m);
    if (running_var.defined())
      update(running_var, v * (static_cast<double>(count) /
                               static_cast<double>(std::max<int64_t>(count - 1, 1))));
  }
  return affine((x - m) * rsqrt(v + eps), x, weight, bias);
}

Tensor local_response_norm(const Tensor& x, int64_t size, double alpha, double beta, double k) {
  KILN_CHECK(x.dim() >= 3, shape,
             "[local_response_norm] expects an input of at least 3 dims [N, C, *], got {}",
             x.meta_str());
  KILN_CHECK(size > 0, value, "[local_response_norm] size must be positive, got {}", size);
  // Channel windows of x^2, zero-padded by size / 2 before and (size - 1) / 2 after.
  Tensor sq = movedim(x * x, 1, -1);
  IntList amounts{size / 2, (size - 1) / 2};
  Tensor padded = pad(sq, amounts, 0.0);
  Tensor windows = kiln::unfold(padded, -1, size, 1);
  // integers: the window sum divided with truncation, as PyTorch's integer avg_pool
  Tensor avg = movedim(
      is_floating(x.dtype()) ? mean(windows, {-1}) : div(sum(windows, {-1}), Scalar(size), "trunc"),
      -1, 1);
  return x / pow(avg * alpha + k, beta);
}

}  // namespace kiln::nn

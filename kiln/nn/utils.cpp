#include "kiln/nn/utils.h"

#include <cmath>
#include <numbers>

#include "kiln/api/linalg.h"
#include "kiln/autograd/autograd.h"

namespace kiln::nn {
namespace init {
namespace {

IntList shape_of(const Tensor& t) { return IntList(t.shape().begin(), t.shape().end()); }
TensorOptions options_of(const Tensor& t) { return {.dtype = t.dtype(), .device = t.device()}; }

// t's values replaced by `values` (same shape), outside autograd.
Tensor& overwrite(Tensor& t, const Tensor& values) {
  autograd::NoGradGuard no_grad;
  Tensor target = t.detach();
  copy_(target, values);
  return t;
}

double fan(const Tensor& t, const std::string& mode) {
  KILN_CHECK(mode == "fan_in" || mode == "fan_out", value,
             "[init] mode {} not supported, use fan_in or fan_out", mode);
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  return static_cast<double>(mode == "fan_in" ? in : out);
}

}  // namespace

double calculate_gain(const std::string& nonlinearity, std::optional<double> param) {
  if (nonlinearity == "linear" || nonlinearity == "sigmoid" || nonlinearity.starts_with("conv"))
    return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") {
    double slope = param.value_or(0.01);
    return std::sqrt(2.0 / (1 + slope * slope));
  }
  if (nonlinearity == "selu") return 3.0 / 4.0;
  fail(ErrorKind::value, "[init] unsupported nonlinearity {}", nonlinearity);
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  KILN_CHECK(t.dim() >= 2, shape,
             "[init] fan in and fan out can not be computed for a tensor with fewer than 2 "
             "dimensions, got {}",
             t.meta_str());
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor& uniform_(Tensor& t, double a, double b) {
  return overwrite(t, rand(shape_of(t), options_of(t)) * (b - a) + a);
}
Tensor& normal_(Tensor& t, double mean, double std) {
  return overwrite(t, randn(shape_of(t), options_of(t)) * std + mean);
}

Tensor& trunc_normal_(Tensor& t, double mean, double std, double a, double b) {
  KILN_CHECK(a < b && std > 0, value,
             "[trunc_normal_] expects a < b and std > 0, got [{}, {}], std {}", a, b, std);
  auto cdf = [](double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); };
  double lo = cdf((a - mean) / std), hi = cdf((b - mean) / std);
  // A uniform draw in [2 lo - 1, 2 hi - 1], through erfinv, scaled, clamped for rounding.
  Tensor u = rand(shape_of(t), {.dtype = DType::f64, .device = t.device()}) * (2 * (hi - lo)) +
             (2 * lo - 1);
  Tensor x = clamp(erfinv(u) * (std * std::numbers::sqrt2) + mean, a, b);
  return overwrite(t, to(x, t.dtype()));
}

Tensor& constant_(Tensor& t, double value) { return overwrite(t, full_like(t, value)); }
Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }

Tensor& eye_(Tensor& t) {
  KILN_CHECK(t.dim() == 2, shape, "[eye_] only tensors with 2 dimensions are supported, got {}",
             t.meta_str());
  return overwrite(t, eye(t.size(0), t.size(1), options_of(t)));
}

Tensor& xavier_uniform_(Tensor& t, double gain) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  double bound = gain * std::sqrt(6.0 / static_cast<double>(in + out));
  return uniform_(t, -bound, bound);
}

Tensor& xavier_normal_(Tensor& t, double gain) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  return normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(in + out)));
}

Tensor& kaiming_uniform_(Tensor& t, double a, const std::string& mode,
                         const std::string& nonlinearity) {
  double bound = std::sqrt(3.0) * calculate_gain(nonlinearity, a) / std::sqrt(fan(t, mode));
  return uniform_(t, -bound, bound);
}

Tensor& kaiming_normal_(Tensor& t, double a, const std::string& mode,
                        const std::string& nonlinearity) {
  return normal_(t, 0.0, calculate_gain(nonlinearity, a) / std::sqrt(fan(t, mode)));
}

Tensor& orthogonal_(Tensor& t, double gain) {
  KILN_CHECK(t.dim() >= 2, shape,
             "[orthogonal_] only tensors with 2 or more dimensions are supported, got {}",
             t.meta_str());
  int64_t rows = t.size(0), cols = t.numel() / std::max<int64_t>(rows, 1);
  Tensor flat = randn({rows, cols}, {.dtype = DType::f64, .device = t.device()});
  if (rows < cols) flat = transpose(flat, 0, 1);
  auto [q, r] = linalg::qr(flat);
  q = q * unsqueeze(sign(diagonal(r)), 0);  // a uniform draw: R's diagonal made positive
  if (rows < cols) q = transpose(q, 0, 1);
  return overwrite(t, to(reshape(q * gain, shape_of(t)), t.dtype()));
}

}  // namespace init

namespace {

TensorList grads_of(const TensorList& parameters) {
  TensorList g;
  for (const Tensor& p : parameters)
    if (p.grad().defined()) g.push_back(p.grad());
  return g;
}

}  // namespace

Tensor clip_grad_norm_(const TensorList& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  TensorList grads = grads_of(parameters);
  if (grads.empty()) return scalar_tensor(0.0);
  autograd::NoGradGuard no_grad;
  Device d = grads[0].device();
  TensorList norms;
  for (const Tensor& g : grads) norms.push_back(to(vector_norm(g, norm_type), d));
  Tensor total = std::isinf(norm_type) && norm_type > 0 ? amax(stack(norms))
                                                        : vector_norm(stack(norms), norm_type);
  if (error_if_nonfinite && !total.is_fake())
    KILN_CHECK(item<bool>(isfinite(total)), value,
               "[clip_grad_norm_] the total norm of order {} for gradients from `parameters` is "
               "non-finite, so it "
               "cannot be clipped",
               norm_type);
  Tensor coef = clamp(max_norm / (total + 1e-6), std::nullopt, 1.0);
  for (const Tensor& g : grads) {
    Tensor target = g;
    mul_(target, to(coef, g.device()));
  }
  return total;
}

void clip_grad_value_(const TensorList& parameters, double clip_value) {
  autograd::NoGradGuard no_grad;
  for (Tensor g : grads_of(parameters)) copy_(g, clamp(g, -clip_value, clip_value));
}

Tensor parameters_to_vector(const TensorList& parameters) {
  TensorList flat;
  for (const Tensor& p : parameters) flat.push_back(reshape(p, {-1}));
  return cat(flat, 0);
}

void vector_to_parameters(const Tensor& vec, const TensorList& parameters) {
  int64_t total = 0;
  for (const Tensor& p : parameters) total += p.numel();
  KILN_CHECK(vec.dim() == 1 && vec.numel() == total, shape,
             "[vector_to_parameters] expects a 1-D vector of {} elements, got {}", total,
             vec.meta_str());
  autograd::NoGradGuard no_grad;
  int64_t at = 0;
  for (Tensor p : parameters) {
    Tensor target = p.detach();
    copy_(target,
          reshape(narrow(vec, 0, at, p.numel()), IntList(p.shape().begin(), p.shape().end())));
    at += p.numel();
  }
}

}  // namespace kiln::nn

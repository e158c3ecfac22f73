#include "kiln/nn/activation.h"

#include <cmath>

namespace kiln::nn {

Tensor softplus(const Tensor& x, double beta, double threshold) {
  Tensor bx = x * beta;
  // The log1p(exp(.)) branch sees at most `threshold`: where it is not taken it stays
  // finite, so no inf * 0 reaches the gradient.
  return where(bx > threshold, x, log1p(exp(clamp(bx, std::nullopt, threshold))) / beta);
}

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  return where(x > 0.0, x, x * negative_slope);
}

Tensor elu(const Tensor& x, double alpha) {
  return where(x > 0.0, x, expm1(clamp(x, std::nullopt, 0.0)) * alpha);
}

Tensor selu(const Tensor& x) {
  constexpr double kAlpha = 1.6732632423543772848170429916717;
  constexpr double kScale = 1.0507009873554804934193349852946;
  return elu(x, kAlpha) * kScale;
}

Tensor hardtanh(const Tensor& x, double min_val, double max_val) { return clamp(x, min_val, max_val); }

Tensor relu6(const Tensor& x) { return hardtanh(x, 0.0, 6.0); }

Tensor hardsigmoid(const Tensor& x) { return clamp(x / 6.0 + 0.5, 0.0, 1.0); }

Tensor hardswish(const Tensor& x) { return x * hardsigmoid(x); }

Tensor mish(const Tensor& x) { return x * tanh(softplus(x)); }

Tensor logsigmoid(const Tensor& x) { return neg(softplus(neg(x))); }

}  // namespace kiln::nn

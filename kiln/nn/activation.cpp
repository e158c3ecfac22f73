#include "kiln/nn/activation.h"

#include <any>
#include <cmath>

#include "kiln/autograd/custom_function.h"

namespace kiln::nn {

Tensor softplus(const Tensor& x, double beta, double threshold) {
  if (wants_opmath({x}))  // in f32, rounded once (PyTorch's opmath)
    return in_opmath({x}, [&](const TensorList& t) { return softplus(t[0], beta, threshold); });
  Tensor bx = x * beta;
  // The log1p(exp(.)) branch sees at most `threshold`: where it is not taken it stays
  // finite, so no inf * 0 reaches the gradient.
  return where(bx > threshold, x, log1p(exp(clamp(bx, std::nullopt, threshold))) / beta);
}

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  return where(x > 0.0, x, x * negative_slope);
}

Tensor rrelu(const Tensor& x, double lower, double upper, bool training) {
  KILN_CHECK(lower <= upper, value, "[rrelu] lower bound ({}) must not exceed the upper bound ({})",
             lower, upper);
  if (!training) return leaky_relu(x, (lower + upper) / 2);
  return where(x >= 0.0, x, x * (rand_like(x) * (upper - lower) + lower));
}

Tensor elu(const Tensor& x, double alpha) {
  return where(x > 0.0, x, expm1(clamp(x, std::nullopt, 0.0)) * alpha);
}

Tensor selu(const Tensor& x) {
  constexpr double kAlpha = 1.6732632423543772848170429916717;
  constexpr double kScale = 1.0507009873554804934193349852946;
  return elu(x, kAlpha) * kScale;
}

namespace {

// hardtanh: clamp's values, but a gradient only strictly inside the bounds (PyTorch's
// hardtanh_backward gives 0 at them, where clamp's passes it). A custom function, so a
// program records one clamp forward (not the comparisons a select would need: four
// more passes and two more activations alive in a CNN) and the mask in backward only.
struct Hardtanh : autograd::Function<Hardtanh> {
  static constexpr const char* name = "Hardtanh";
  static Tensor forward(autograd::FunctionCtx& ctx, const Tensor& x, double lo, double hi) {
    ctx.save_for_backward({x});
    ctx.saved_data["lo"] = lo;
    ctx.saved_data["hi"] = hi;
    return clamp(x, lo, hi);
  }
  static TensorList backward(autograd::FunctionCtx& ctx, const TensorList& grads) {
    Tensor x = ctx.saved_tensors()[0];
    auto lo = std::any_cast<double>(ctx.saved_data["lo"]);
    auto hi = std::any_cast<double>(ctx.saved_data["hi"]);
    return {where(logical_and(x > lo, x < hi), grads[0], 0.0), Tensor(), Tensor()};
  }
};

}  // namespace

Tensor hardtanh(const Tensor& x, double min_val, double max_val) {
  if (is_integral(x.dtype(), false))  // integers stay integers: the bounds truncated, as PyTorch
    return clamp(x, static_cast<int64_t>(min_val), static_cast<int64_t>(max_val));
  return Hardtanh::apply(x, min_val, max_val);
}

Tensor relu6(const Tensor& x) { return hardtanh(x, 0.0, 6.0); }

// PyTorch's arithmetic, (x + 3) / 6 inside (-3, 3), in f32 for f16/bf16; 0 gradient at
// the bounds, NaN stays NaN. The constants are numbers (0-d), not tensors of x's shape.
Tensor hardsigmoid(const Tensor& x) {
  if (wants_opmath({x}))
    return in_opmath({x}, [](const TensorList& t) { return hardsigmoid(t[0]); });
  return where(x <= -3.0, 0.0, where(x >= 3.0, 1.0, (x + 3.0) / 6.0));
}

// PyTorch's kernel's arithmetic, x * min(max(x + 3, 0), 6) / 6, so the values agree bit
// for bit; its gradient (0 below -3, x / 3 + 1/2 up to 3 inclusive, 1 above) is what
// clamp's gradient (passed at the bounds) gives through this formula.
Tensor hardswish(const Tensor& x) {
  if (wants_opmath({x})) return in_opmath({x}, [](const TensorList& t) { return hardswish(t[0]); });
  return x * clamp(x + 3.0, 0.0, 6.0) / 6.0;
}

Tensor mish(const Tensor& x) { return x * tanh(softplus(x)); }

Tensor logsigmoid(const Tensor& x) { return neg(softplus(neg(x))); }

Tensor celu(const Tensor& x, double alpha) {
  KILN_CHECK(alpha != 0, value, "[celu] alpha must not be 0");
  return where(x > 0.0, x, expm1(clamp(x / alpha, std::nullopt, 0.0)) * alpha);
}

Tensor softsign(const Tensor& x) { return x / (abs(x) + 1.0); }

Tensor tanhshrink(const Tensor& x) { return x - tanh(x); }

Tensor softshrink(const Tensor& x, double lambd) {
  KILN_CHECK(lambd >= 0, value, "[softshrink] lambda must be non-negative, got {}", lambd);
  return where(x > lambd, x - lambd, where(x < -lambd, x + lambd, zeros_like(x)));
}

Tensor hardshrink(const Tensor& x, double lambd) {
  return where(logical_and(x >= -lambd, x <= lambd), zeros_like(x), x);  // NaN stays NaN
}

Tensor threshold(const Tensor& x, double threshold, double value) {
  // x <= threshold takes the value (NaN keeps itself); an integer tensor takes it converted
  // as C converts it, wrapping (PyTorch's -9 in u8 is 247).
  Tensor v = is_floating(x.dtype())
                 ? full_like(x, value)
                 : expand(to(scalar_tensor(static_cast<int64_t>(value), {.device = x.device()}),
                             x.dtype()),
                          IntList(x.shape().begin(), x.shape().end()));
  return where(x <= threshold, v, x);
}

Tensor prelu(const Tensor& x, const Tensor& weight) {
  KILN_CHECK(weight.dim() <= 1, shape, "[prelu] weight must be a scalar or 1-D tensor, got {}",
             weight.meta_str());
  KILN_CHECK(weight.numel() == 1 || (x.dim() >= 2 && weight.numel() == x.size(1)), shape,
             "[prelu] weight must have 1 value or one per channel, got {} for input {}",
             weight.meta_str(), x.meta_str());
  Tensor w = weight;
  if (weight.numel() > 1) {
    IntList shape(static_cast<size_t>(x.dim()), 1);
    shape[1] = weight.numel();
    w = reshape(weight, shape);
  } else {
    w = reshape(weight, {});
  }
  return where(x > 0.0, x, x * w);  // 0 takes the weight's side, as PyTorch (forward and gradient)
}

Tensor glu(const Tensor& x, int64_t dim) {
  int64_t d = wrap_dim(dim, x.dim(), "glu");
  KILN_CHECK(x.dim() > 0 && x.size(d) % 2 == 0, shape,
             "[glu] halving dimension must be even, but dimension {} is size {}", d,
             x.dim() ? x.size(d) : 0);
  int64_t half = x.size(d) / 2;
  return narrow(x, d, 0, half) * sigmoid(narrow(x, d, half, half));
}

Tensor softmin(const Tensor& x, int64_t dim) { return softmax(neg(x), dim); }
Tensor softmin(const Tensor& x, int64_t dim, DType dtype) { return softmax(neg(x), dim, dtype); }

}  // namespace kiln::nn

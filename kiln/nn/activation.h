#pragma once
// Activation functions, as torch.nn.functional's, made of ordinary ops (so they
// differentiate, trace and export as those ops). relu, gelu, silu, sigmoid, tanh and
// softmax are ops of the table (kiln/api/functional.h).

#include <optional>

#include "kiln/api/functional.h"

namespace kiln::nn {

/** log(1 + exp(beta x)) / beta; x itself where beta x > threshold. */
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
/** x where x > 0, else negative_slope * x. */
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
/** Randomized leaky ReLU: in training each negative element's slope drawn from
 * U(lower, upper); otherwise the mean slope (lower + upper) / 2. */
Tensor rrelu(const Tensor& x, double lower = 1.0 / 8, double upper = 1.0 / 3,
             bool training = false);
/** x where x > 0, else alpha * (exp(x) - 1). */
Tensor elu(const Tensor& x, double alpha = 1.0);
/** scale * elu(x, alpha) with the self-normalising constants. */
Tensor selu(const Tensor& x);
/** clamp(x, min_val, max_val). The gradient passes at the bounds themselves too (clamp's
 * rule); PyTorch's hardtanh stops it there. */
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0);
/** hardtanh(x, 0, 6). */
Tensor relu6(const Tensor& x);
/** clamp(x / 6 + 1/2, 0, 1). */
Tensor hardsigmoid(const Tensor& x);
/** x * hardsigmoid(x). */
Tensor hardswish(const Tensor& x);
/** x * tanh(softplus(x)). */
Tensor mish(const Tensor& x);
/** log(sigmoid(x)) = -softplus(-x), without overflow. */
Tensor logsigmoid(const Tensor& x);
/** max(0, x) + min(0, alpha (exp(x / alpha) - 1)). */
Tensor celu(const Tensor& x, double alpha = 1.0);
/** x / (1 + |x|). */
Tensor softsign(const Tensor& x);
/** x - tanh(x). */
Tensor tanhshrink(const Tensor& x);
/** x - lambd where x > lambd, x + lambd where x < -lambd, else 0. */
Tensor softshrink(const Tensor& x, double lambd = 0.5);
/** x where |x| > lambd, else 0. */
Tensor hardshrink(const Tensor& x, double lambd = 0.5);
/** x where x > threshold, else value. */
Tensor threshold(const Tensor& x, double threshold, double value);
/** x where x >= 0, else weight * x; weight has one value or one per channel (dim 1). */
Tensor prelu(const Tensor& x, const Tensor& weight);
/** The first half of dim times sigmoid of the second half. */
Tensor glu(const Tensor& x, int64_t dim = -1);
/** softmax(-x, dim). */
Tensor softmin(const Tensor& x, int64_t dim);
/** softmax(-x, dim, dtype): the negation in x's dtype, then the conversion (as PyTorch). */
Tensor softmin(const Tensor& x, int64_t dim, DType dtype);

}  // namespace kiln::nn

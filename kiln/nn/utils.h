#pragma once
// torch.nn.init's initializers and torch.nn.utils' gradient clipping. The initializers
// overwrite a tensor in place (not recorded by autograd) and return it; their draws come
// from kiln's generator (PyTorch's distributions, not its random streams).

#include <string>

#include "kiln/api/functional.h"

namespace kiln::nn {

namespace init {

/** The recommended gain for a nonlinearity: linear, conv*, sigmoid: 1; tanh: 5/3; relu:
 * sqrt(2); leaky_relu: sqrt(2 / (1 + param^2)) (param: the negative slope, 0.01 when
 * absent); selu: 3/4. */
double calculate_gain(const std::string& nonlinearity, std::optional<double> param = std::nullopt);
/** (fan_in, fan_out) of a weight [out, in, *kernel]: in and out times the kernel size. */
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);

Tensor& uniform_(Tensor& t, double a = 0.0, double b = 1.0);
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0);
/** Normal(mean, std) conditioned on [a, b] (inverse CDF of a uniform draw). */
Tensor& trunc_normal_(Tensor& t, double mean = 0.0, double std = 1.0, double a = -2.0,
                      double b = 2.0);
Tensor& constant_(Tensor& t, double value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);
/** The identity (2-D only). */
Tensor& eye_(Tensor& t);
/** U(-b, b) with b = gain sqrt(6 / (fan_in + fan_out)); normal with std gain sqrt(2 /
 * (fan_in + fan_out)). */
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0);
Tensor& xavier_normal_(Tensor& t, double gain = 1.0);
/** std = gain(nonlinearity, a) / sqrt(fan) with fan the mode's ("fan_in" or "fan_out");
 * uniform in +-sqrt(3) std, or normal. */
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                         const std::string& nonlinearity = "leaky_relu");
Tensor& kaiming_normal_(Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                        const std::string& nonlinearity = "leaky_relu");
/** A (semi-)orthogonal matrix (of t flattened to [size(0), rest]) times gain, from the QR
 * of a normal draw with R's diagonal signs folded in. */
Tensor& orthogonal_(Tensor& t, double gain = 1.0);

}  // namespace init

/** Scales every parameter's gradient in place so that their joint norm_type-norm is at
 * most max_norm (factor max_norm / (norm + 1e-6), never above 1); returns that norm
 * (a 0-dim tensor). Parameters without a gradient are skipped; a non-finite norm is a
 * value Error with error_if_nonfinite. */
Tensor clip_grad_norm_(const TensorList& parameters, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
/** Clamps every gradient to [-clip_value, clip_value] in place. */
void clip_grad_value_(const TensorList& parameters, double clip_value);
/** The parameters flattened and concatenated, and the inverse (copies into them). */
Tensor parameters_to_vector(const TensorList& parameters);
void vector_to_parameters(const Tensor& vec, const TensorList& parameters);

}  // namespace kiln::nn

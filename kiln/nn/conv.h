#pragma once
// Convolution, pooling and padding, as torch.nn.functional's, made of ordinary ops: the
// (padded) input's windows are an as_strided view, a convolution is that view times the
// weight (one bmm over the groups), a pooling its max or mean. So they differentiate
// (overlapping windows add their gradients), trace, export and run on every device as
// those ops do. Spatial arguments take one value per spatial dim, or one for all.

#include <optional>
#include <string>
#include <vector>

#include "kiln/api/functional.h"

namespace kiln::nn {

/** Cross-correlation of input [N, C, *spatial] (or unbatched [C, *spatial]) with weight
 * [O, C / groups, *kernel], plus bias [O]; spatial ranks 1 to 3. */
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              const IntList& stride = {1}, const IntList& padding = {0},
              const IntList& dilation = {1}, int64_t groups = 1);
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              const IntList& stride = {1}, const IntList& padding = {0},
              const IntList& dilation = {1}, int64_t groups = 1);
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              const IntList& stride = {1}, const IntList& padding = {0},
              const IntList& dilation = {1}, int64_t groups = 1);
/** PyTorch's padding='valid' (none) and padding='same' (the output keeps the input's size;
 * stride 1; an odd total padding puts the extra element after, as PyTorch). */
enum class ConvPadding { valid, same };
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
              ConvPadding padding, const IntList& dilation = {1}, int64_t groups = 1);
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
              ConvPadding padding, const IntList& dilation = {1}, int64_t groups = 1);
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
              ConvPadding padding, const IntList& dilation = {1}, int64_t groups = 1);

/** The largest element of each window (NaN wins); padding counts as -inf. `stride`
 * empty: the kernel size. ceil_mode keeps a last partial window that starts inside the
 * input or its left padding. Ties inside one window share the gradient (PyTorch gives it
 * to one of them). */
Tensor max_pool1d(const Tensor& input, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, const IntList& dilation = {1},
                  bool ceil_mode = false);
Tensor max_pool2d(const Tensor& input, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, const IntList& dilation = {1},
                  bool ceil_mode = false);
Tensor max_pool3d(const Tensor& input, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, const IntList& dilation = {1},
                  bool ceil_mode = false);
/** max_pool with return_indices: (values, i64 flat spatial position of each window's
 * maximum in the input; max_unpool's indices). */
std::pair<Tensor, Tensor> max_pool1d_with_indices(const Tensor& input, const IntList& kernel_size,
                                                  const IntList& stride = {},
                                                  const IntList& padding = {0},
                                                  const IntList& dilation = {1},
                                                  bool ceil_mode = false);
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, const IntList& kernel_size,
                                                  const IntList& stride = {},
                                                  const IntList& padding = {0},
                                                  const IntList& dilation = {1},
                                                  bool ceil_mode = false);
std::pair<Tensor, Tensor> max_pool3d_with_indices(const Tensor& input, const IntList& kernel_size,
                                                  const IntList& stride = {},
                                                  const IntList& padding = {0},
                                                  const IntList& dilation = {1},
                                                  bool ceil_mode = false);
/** torch.nn.functional.fractional_max_pool2d / 3d of [N, C, *S] (or unbatched [C, *S]):
 * windows of kernel_size whose starts along each spatial dim follow PyTorch's pseudo-random
 * sequence trunc((i + u) alpha) - trunc(u alpha), alpha = (S - k) / (out - 1), the last at
 * S - k, from `samples` [N, C, dims] in [0, 1) (PyTorch's _random_samples: for 2-D, u for
 * W then H; for 3-D, T, H, W; drawn when undefined). Give output_size or output_ratio
 * (out = floor(S * ratio)). Returns (values, flat spatial index of each window's maximum). */
std::pair<Tensor, Tensor> fractional_max_pool2d(const Tensor& input, const IntList& kernel_size,
                                                const IntList& output_size = {},
                                                const std::vector<double>& output_ratio = {},
                                                const Tensor& samples = Tensor());
std::pair<Tensor, Tensor> fractional_max_pool3d(const Tensor& input, const IntList& kernel_size,
                                                const IntList& output_size = {},
                                                const std::vector<double>& output_ratio = {},
                                                const Tensor& samples = Tensor());
/** The inverse of max_pool: each value at its index in a zero output of output_size
 * (default (S - 1) stride - 2 padding + kernel per spatial dim). */
Tensor max_unpool1d(const Tensor& input, const Tensor& indices, const IntList& kernel_size,
                    const IntList& stride = {}, const IntList& padding = {0},
                    const IntList& output_size = {});
Tensor max_unpool2d(const Tensor& input, const Tensor& indices, const IntList& kernel_size,
                    const IntList& stride = {}, const IntList& padding = {0},
                    const IntList& output_size = {});
Tensor max_unpool3d(const Tensor& input, const Tensor& indices, const IntList& kernel_size,
                    const IntList& stride = {}, const IntList& padding = {0},
                    const IntList& output_size = {});
/** (sum of x^p over each window)^(1/p) (torch.nn.functional.lp_pool*d). */
Tensor lp_pool1d(const Tensor& input, double norm_type, const IntList& kernel_size,
                 const IntList& stride = {}, bool ceil_mode = false);
Tensor lp_pool2d(const Tensor& input, double norm_type, const IntList& kernel_size,
                 const IntList& stride = {}, bool ceil_mode = false);
/** The mean of each window: over the window clipped to the padded input
 * (count_include_pad) or over its elements inside the input. */
Tensor avg_pool1d(const Tensor& input, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, bool ceil_mode = false,
                  bool count_include_pad = true);
Tensor avg_pool2d(const Tensor& input, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, bool ceil_mode = false,
                  bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
Tensor avg_pool3d(const Tensor& input, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, bool ceil_mode = false,
                  bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
/** Means over output_size[i] windows per spatial dim, window j spanning
 * [floor(j S / o), ceil((j + 1) S / o)). */
Tensor adaptive_avg_pool2d(const Tensor& input, const IntList& output_size);

/** x padded with `value`: pad holds (before, after) pairs starting from the last dim, as
 * torch.nn.functional.pad's constant mode; negative amounts crop. */
Tensor pad(const Tensor& x, const IntList& pad, double value = 0.0);
/** torch.constant_pad_nd: pad(x, pad, value). */
Tensor constant_pad_nd(const Tensor& x, const IntList& pad, double value = 0.0);
/** torch.nn.functional.pad with a mode: "constant" (as above), "reflect" (mirrored
 * without repeating the edge; each amount below the dim's size), "replicate" (the edge
 * repeated) or "circular" (wrapped; each amount at most the size). The non-constant
 * modes pad the last 1-3 dims of a batched or unbatched input, by amounts >= 0. */
Tensor pad(const Tensor& x, const IntList& pad, const std::string& mode, double value = 0.0);

/** The transposed convolution (the gradient of conv w.r.t. its input) of input [N, Cin,
 * *S] (or unbatched) with weight [Cin, Cout / groups, *K], plus bias [Cout]: output size
 * (S - 1) stride - 2 padding + dilation (K - 1) + output_padding + 1 per spatial dim. */
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                        const IntList& stride = {1}, const IntList& padding = {0},
                        const IntList& output_padding = {0}, int64_t groups = 1,
                        const IntList& dilation = {1});
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                        const IntList& stride = {1}, const IntList& padding = {0},
                        const IntList& output_padding = {0}, int64_t groups = 1,
                        const IntList& dilation = {1});
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                        const IntList& stride = {1}, const IntList& padding = {0},
                        const IntList& output_padding = {0}, int64_t groups = 1,
                        const IntList& dilation = {1});

/** Means (adaptive_avg) or maxima (adaptive_max, values only) over output_size[i] windows
 * per spatial dim, window j spanning [floor(j S / o), ceil((j + 1) S / o)). */
Tensor adaptive_avg_pool1d(const Tensor& input, const IntList& output_size);
Tensor adaptive_avg_pool3d(const Tensor& input, const IntList& output_size);
Tensor adaptive_max_pool1d(const Tensor& input, const IntList& output_size);
Tensor adaptive_max_pool2d(const Tensor& input, const IntList& output_size);
Tensor adaptive_max_pool3d(const Tensor& input, const IntList& output_size);
/** (values, indices): adaptive max pooling with each maximum's flat index within its
 * input plane (return_indices=True; what max_unpool takes). */
std::pair<Tensor, Tensor> adaptive_max_pool1d_with_indices(const Tensor& input,
                                                           const IntList& output_size);
std::pair<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& input,
                                                           const IntList& output_size);
std::pair<Tensor, Tensor> adaptive_max_pool3d_with_indices(const Tensor& input,
                                                           const IntList& output_size);

struct InterpolateOptions {
  /** The output's spatial sizes (one value for all dims, or one per dim), or ... */
  IntList size;
  /** ... the factors they grow by (output size floor(S * factor)); exactly one is given. */
  std::vector<double> scale_factor;
  /** "nearest", "nearest-exact", "linear" (3-D input), "bilinear" or "bicubic" (4-D),
   * "trilinear" (5-D) or "area" (adaptive average pooling). */
  std::string mode = "nearest";
  /** Linear modes: corner pixels' centres line up (else their outer edges do). */
  std::optional<bool> align_corners;
  /** bilinear / bicubic: when shrinking, average over the filter's footprint stretched by
   * the scale (PyTorch's antialias, as PIL resizes); A = -0.5 for the cubic filter. */
  bool antialias = false;
};

/** torch.nn.functional.interpolate of input [N, C, *S] with 1 to 3 spatial dims: each
 * output element's source coordinate is computed per dim as PyTorch does (with a given
 * scale factor, 1 / factor is the step, as PyTorch's default recompute_scale_factor);
 * the linear modes are separable (one lerp per dim). */
Tensor interpolate(const Tensor& input, const InterpolateOptions& options);
/** The deprecated F.upsample_nearest and F.upsample_bilinear (align_corners = true): size
 * or scale_factor, as interpolate's. */
Tensor upsample_nearest(const Tensor& input, const IntList& size,
                        const std::vector<double>& scale_factor = {});
Tensor upsample_bilinear(const Tensor& input, const IntList& size,
                         const std::vector<double>& scale_factor = {});

/** torch.nn.functional.unfold (im2col): the sliding blocks of input [N, C, H, W] (or
 * unbatched) as columns [N, C * kh * kw, L]; fold is its adjoint, summing the columns'
 * overlapping blocks into [N, C, output_size]. */
Tensor unfold(const Tensor& input, const IntList& kernel_size, const IntList& dilation = {1},
              const IntList& padding = {0}, const IntList& stride = {1});
Tensor fold(const Tensor& input, const IntList& output_size, const IntList& kernel_size,
            const IntList& dilation = {1}, const IntList& padding = {0},
            const IntList& stride = {1});

/** Sampling grids [N, H, W, 2] (x, y in [-1, 1]) of the affine maps theta [N, 2, 3] for
 * an output of size [N, C, H, W], or [N, D, H, W, 3] of theta [N, 3, 4] for [N, C, D, H, W]
 * (torch.nn.functional.affine_grid). */
Tensor affine_grid(const Tensor& theta, const IntList& size, bool align_corners = false);
/** input [N, C, H, W] sampled at grid [N, Ho, Wo, 2] (x, y in [-1, 1]): mode "bilinear",
 * "nearest" or "bicubic" (4-D only; 4 x 4 taps, A = -0.75, each tap padded), padding_mode
 * "zeros", "border" or "reflection"
 * (torch.nn.functional.grid_sample, 4-D, or 5-D with grid [N, D, H, W, 3]: x, y, z, and
 * bilinear meaning trilinear); differentiable w.r.t. input and grid. */
Tensor grid_sample(const Tensor& input, const Tensor& grid, const std::string& mode = "bilinear",
                   const std::string& padding_mode = "zeros", bool align_corners = false);

/** [*, C r^2, H, W] -> [*, C, H r, W r] (torch.nn.functional.pixel_shuffle) and back. */
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor);
Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor);
/** [N, C, *] with its C channels in `groups` groups interleaved: channel g * (C / groups) + k
 * goes to k * groups + g (torch.nn.functional.channel_shuffle). */
Tensor channel_shuffle(const Tensor& x, int64_t groups);

}  // namespace kiln::nn

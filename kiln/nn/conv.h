#pragma once
// Convolution, pooling and padding, as torch.nn.functional's, made of ordinary ops: the
// (padded) input's windows are an as_strided view, a convolution is that view times the
// weight (one bmm over the groups), a pooling its max or mean. So they differentiate
// (overlapping windows add their gradients), trace, export and run on every device as
// those ops do. Spatial arguments take one value per spatial dim, or one for all.

#include "kiln/dispatch/functional.h"

namespace kiln::nn {

/** Cross-correlation of input [N, C, *spatial] (or unbatched [C, *spatial]) with weight
 * [O, C / groups, *kernel], plus bias [O]; spatial ranks 1 to 3. */
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(), const IntList& stride = {1},
              const IntList& padding = {0}, const IntList& dilation = {1}, int64_t groups = 1);
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(), const IntList& stride = {1},
              const IntList& padding = {0}, const IntList& dilation = {1}, int64_t groups = 1);
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(), const IntList& stride = {1},
              const IntList& padding = {0}, const IntList& dilation = {1}, int64_t groups = 1);

/** The largest element of each window (NaN wins); padding counts as -inf. `stride`
 * empty: the kernel size. ceil_mode keeps a last partial window that starts inside the
 * input or its left padding. Ties inside one window share the gradient (PyTorch gives it
 * to one of them). */
Tensor max_pool1d(const Tensor& input, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, const IntList& dilation = {1}, bool ceil_mode = false);
Tensor max_pool2d(const Tensor& input, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, const IntList& dilation = {1}, bool ceil_mode = false);
/** The mean of each window: over the window clipped to the padded input
 * (count_include_pad) or over its elements inside the input. */
Tensor avg_pool1d(const Tensor& input, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, bool ceil_mode = false, bool count_include_pad = true);
Tensor avg_pool2d(const Tensor& input, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, bool ceil_mode = false, bool count_include_pad = true);
/** Means over output_size[i] windows per spatial dim, window j spanning
 * [floor(j S / o), ceil((j + 1) S / o)). */
Tensor adaptive_avg_pool2d(const Tensor& input, const IntList& output_size);

/** x padded with `value`: pad holds (before, after) pairs starting from the last dim, as
 * torch.nn.functional.pad's constant mode; negative amounts crop. */
Tensor pad(const Tensor& x, const IntList& pad, double value = 0.0);

}  // namespace kiln::nn

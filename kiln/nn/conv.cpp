#include "kiln/nn/conv.h"

#include <cmath>
#include <limits>

namespace kiln::nn {
namespace {

int64_t product(const IntList& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// One value per spatial dim: `v` as given, or its one value repeated.
IntList per_dim(const IntList& v, size_t rank, const char* op, const char* what) {
  if (v.size() == rank) return v;
  KILN_CHECK(v.size() == 1, value, "[{}] {} needs 1 or {} values, got {}", op, what, rank, v.size());
  return IntList(rank, v[0]);
}

// The input with a batch dim (an unbatched input gets one), and whether it was added.
std::pair<Tensor, bool> batched(const Tensor& x, size_t rank, const char* op) {
  auto r = static_cast<int64_t>(rank);
  KILN_CHECK(x.dim() == r + 2 || x.dim() == r + 1, shape,
             "[{}] expects a {}-D (batched) or {}-D (unbatched) input, got {}", op, r + 2, r + 1, x.meta_str());
  if (x.dim() == r + 1) return {unsqueeze(x, 0), true};
  return {x, false};
}

// x [N, C, *S] padded on its spatial dims: `before[i]` before and `after[i]` after.
Tensor pad_spatial(const Tensor& x, const IntList& before, const IntList& after, double value) {
  IntList amounts;  // pad's order: the last dim first
  bool any = false;
  for (size_t i = before.size(); i-- > 0;) {
    amounts.insert(amounts.end(), {before[i], after[i]});
    any = any || before[i] || after[i];
  }
  return any ? pad(x, amounts, value) : x;
}

// The windows of xp [N, C, *S]: an as_strided view [N, C, *O, *K] with O[i] windows of
// kernel[i] taps spaced dilation[i] apart, stride[i] apart, along spatial dim i.
Tensor windows(const Tensor& padded, const IntList& kernel, const IntList& stride, const IntList& dilation,
               const char* op) {
  Tensor xp = contiguous(padded);
  IntList size{xp.size(0), xp.size(1)}, strides{xp.stride(0), xp.stride(1)};
  for (size_t i = 0; i < kernel.size(); ++i) {
    auto d = static_cast<int64_t>(i) + 2;
    int64_t span = dilation[i] * (kernel[i] - 1) + 1;
    KILN_CHECK(xp.size(d) >= span, shape,
               "[{}] the kernel ({} taps, dilation {}) is larger than the padded input ({}) along spatial dim {}",
               op, kernel[i], dilation[i], xp.size(d), i);
    size.push_back((xp.size(d) - span) / stride[i] + 1);
    strides.push_back(xp.stride(d) * stride[i]);
  }
  for (size_t i = 0; i < kernel.size(); ++i) {
    size.push_back(kernel[i]);
    strides.push_back(xp.stride(static_cast<int64_t>(i) + 2) * dilation[i]);
  }
  return as_strided(xp, size, strides, xp.offset());
}

IntList last_dims(size_t rank, size_t count) {
  IntList dims;
  for (size_t i = rank - count; i < rank; ++i) dims.push_back(static_cast<int64_t>(i));
  return dims;
}

Tensor conv(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride_in,
            const IntList& padding_in, const IntList& dilation_in, int64_t groups, size_t rank, const char* op) {
  auto [x, added] = batched(input, rank, op);
  KILN_CHECK(weight.dim() == static_cast<int64_t>(rank) + 2, shape, "[{}] expects a {}-D weight, got {}", op,
             rank + 2, weight.meta_str());
  int64_t n = x.size(0), c = x.size(1), o = weight.size(0);
  KILN_CHECK(groups > 0 && c % groups == 0 && o % groups == 0, value,
             "[{}] groups ({}) must divide the input channels ({}) and the output channels ({})", op, groups, c, o);
  KILN_CHECK(weight.size(1) * groups == c, shape, "[{}] weight {} with {} groups expects {} input channels, got input {}",
             op, weight.meta_str(), groups, weight.size(1) * groups, x.meta_str());
  IntList stride = per_dim(stride_in, rank, op, "stride"), padding = per_dim(padding_in, rank, op, "padding"),
          dilation = per_dim(dilation_in, rank, op, "dilation");
  for (size_t i = 0; i < rank; ++i)
    KILN_CHECK(stride[i] > 0 && dilation[i] > 0 && padding[i] >= 0, value,
               "[{}] stride and dilation must be positive and padding non-negative (got {}, {}, {})", op, stride[i],
               dilation[i], padding[i]);
  IntList kernel(weight.shape().begin() + 2, weight.shape().end());
  Tensor win = windows(pad_spatial(x, padding, padding, 0.0), kernel, stride, dilation, op);  // [N, C, *O, *K]
  IntList out(win.shape().begin() + 2, win.shape().begin() + 2 + static_cast<int64_t>(rank));
  int64_t g = groups, cg = c / g, og = o / g;
  // [N, G, Cg, *O, *K] -> [G, N, *O, Cg, *K] -> [G, N * positions, Cg * taps]
  IntList split{n, g, cg}, perm{1, 0};
  split.insert(split.end(), win.shape().begin() + 2, win.shape().end());
  for (size_t i = 0; i < rank; ++i) perm.push_back(3 + static_cast<int64_t>(i));
  perm.push_back(2);
  for (size_t i = 0; i < rank; ++i) perm.push_back(3 + static_cast<int64_t>(rank + i));
  Tensor cols = reshape(permute(reshape(win, split), perm), {g, n * product(out), cg * product(kernel)});
  Tensor w = transpose(reshape(weight, {g, og, cg * product(kernel)}), 1, 2);  // [G, Cg * taps, Og]
  IntList grouped{g, n};
  grouped.insert(grouped.end(), out.begin(), out.end());
  grouped.push_back(og);
  Tensor y = reshape(bmm(cols, w), grouped);  // [G, N, *O, Og]
  IntList back{1, 0, 2 + static_cast<int64_t>(rank)};
  for (size_t i = 0; i < rank; ++i) back.push_back(2 + static_cast<int64_t>(i));
  IntList shape{n, o};
  shape.insert(shape.end(), out.begin(), out.end());
  y = reshape(permute(y, back), shape);  // [N, O, *O]
  if (bias.defined()) {
    IntList bshape(rank + 2, 1);
    bshape[1] = o;
    y = y + reshape(bias, bshape);
  }
  return added ? squeeze(y, 0) : y;
}

// A pooling's geometry: its arguments per spatial dim and the padding after each dim
// that ceil_mode's last partial window needs.
struct Pooling {
  IntList kernel, stride, padding, dilation, extra;
};

Pooling pooling(const Tensor& x, const IntList& kernel_in, const IntList& stride_in, const IntList& padding_in,
                const IntList& dilation_in, bool ceil_mode, size_t rank, const char* op) {
  Pooling p;
  p.kernel = per_dim(kernel_in, rank, op, "kernel_size");
  p.stride = stride_in.empty() ? p.kernel : per_dim(stride_in, rank, op, "stride");
  p.padding = per_dim(padding_in, rank, op, "padding");
  p.dilation = per_dim(dilation_in, rank, op, "dilation");
  for (size_t i = 0; i < rank; ++i) {
    int64_t k = p.kernel[i], s = p.stride[i], pad = p.padding[i], d = p.dilation[i];
    KILN_CHECK(k > 0 && s > 0 && d > 0 && pad >= 0, value,
               "[{}] kernel_size, stride and dilation must be positive and padding non-negative", op);
    KILN_CHECK(2 * pad <= k, value, "[{}] pad should be at most half of the kernel size, but got pad={} and kernel_size={}",
               op, pad, k);
    int64_t size = x.size(static_cast<int64_t>(i) + 2), span = d * (k - 1) + 1, room = size + 2 * pad - span;
    KILN_CHECK(room >= 0, shape, "[{}] the kernel ({} taps, dilation {}) is larger than the padded input ({})", op, k, d,
               size + 2 * pad);
    int64_t windows = (ceil_mode ? (room + s - 1) / s : room / s) + 1;
    if (ceil_mode && (windows - 1) * s >= size + pad) --windows;  // the last one must start inside
    p.extra.push_back(std::max<int64_t>(0, (windows - 1) * s + span - (size + 2 * pad)));
  }
  return p;
}

IntList plus(const IntList& a, const IntList& b) {
  IntList r = a;
  for (size_t i = 0; i < r.size(); ++i) r[i] += b[i];
  return r;
}

Tensor max_pool(const Tensor& input, const IntList& kernel, const IntList& stride, const IntList& padding,
                const IntList& dilation, bool ceil_mode, size_t rank, const char* op) {
  auto [x, added] = batched(input, rank, op);
  KILN_CHECK(is_floating(x.dtype()), dtype, "[{}] expects a floating input, got {}", op, x.dtype());
  Pooling p = pooling(x, kernel, stride, padding, dilation, ceil_mode, rank, op);
  double lowest = -std::numeric_limits<double>::infinity();
  Tensor win = windows(pad_spatial(x, p.padding, plus(p.padding, p.extra), lowest), p.kernel, p.stride, p.dilation, op);
  Tensor y = amax(win, last_dims(static_cast<size_t>(win.dim()), rank));
  return added ? squeeze(y, 0) : y;
}

Tensor avg_pool(const Tensor& input, const IntList& kernel, const IntList& stride, const IntList& padding,
                bool ceil_mode, bool count_include_pad, size_t rank, const char* op) {
  auto [x, added] = batched(input, rank, op);
  KILN_CHECK(is_floating(x.dtype()), dtype, "[{}] expects a floating input, got {}", op, x.dtype());
  Pooling p = pooling(x, kernel, stride, padding, {1}, ceil_mode, rank, op);
  IntList dims = last_dims(static_cast<size_t>(x.dim() + static_cast<int64_t>(rank)), rank);
  Tensor sums = sum(windows(pad_spatial(x, p.padding, plus(p.padding, p.extra), 0.0), p.kernel, p.stride, IntList(rank, 1), op), dims);
  // The divisor of each window: its elements inside the input, or inside the padded
  // input with count_include_pad (never those only ceil_mode added).
  IntList ones_shape{1, 1};
  for (size_t i = 0; i < rank; ++i) ones_shape.push_back(x.size(static_cast<int64_t>(i) + 2));
  Tensor mask = ones(ones_shape, {.dtype = x.dtype(), .device = x.device()});
  mask = pad_spatial(mask, p.padding, p.padding, count_include_pad ? 1.0 : 0.0);
  mask = pad_spatial(mask, IntList(rank, 0), p.extra, 0.0);
  Tensor count = sum(windows(mask, p.kernel, p.stride, IntList(rank, 1), op), dims);
  Tensor y = sums / count;
  return added ? squeeze(y, 0) : y;
}

}  // namespace

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
              const IntList& padding, const IntList& dilation, int64_t groups) {
  return conv(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d");
}
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
              const IntList& padding, const IntList& dilation, int64_t groups) {
  return conv(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d");
}
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
              const IntList& padding, const IntList& dilation, int64_t groups) {
  return conv(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d");
}

Tensor max_pool1d(const Tensor& input, const IntList& kernel_size, const IntList& stride, const IntList& padding,
                  const IntList& dilation, bool ceil_mode) {
  return max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, 1, "max_pool1d");
}
Tensor max_pool2d(const Tensor& input, const IntList& kernel_size, const IntList& stride, const IntList& padding,
                  const IntList& dilation, bool ceil_mode) {
  return max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, 2, "max_pool2d");
}
Tensor avg_pool1d(const Tensor& input, const IntList& kernel_size, const IntList& stride, const IntList& padding,
                  bool ceil_mode, bool count_include_pad) {
  return avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, 1, "avg_pool1d");
}
Tensor avg_pool2d(const Tensor& input, const IntList& kernel_size, const IntList& stride, const IntList& padding,
                  bool ceil_mode, bool count_include_pad) {
  return avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, 2, "avg_pool2d");
}

Tensor adaptive_avg_pool2d(const Tensor& input, const IntList& output_size) {
  auto [x, added] = batched(input, 2, "adaptive_avg_pool2d");
  IntList o = per_dim(output_size, 2, "adaptive_avg_pool2d", "output_size");
  Tensor y = x;
  for (int64_t d : {2, 3}) {  // separable: the mean over a rectangle is a mean of means
    int64_t size = y.size(d), n = o[static_cast<size_t>(d - 2)];
    KILN_CHECK(n > 0, value, "[adaptive_avg_pool2d] output sizes must be positive, got {}", n);
    TensorList parts;
    for (int64_t j = 0; j < n; ++j) {
      int64_t start = j * size / n, end = ((j + 1) * size + n - 1) / n;
      parts.push_back(mean(narrow(y, d, start, end - start), {d}, /*keepdim=*/true));
    }
    y = cat(parts, d);
  }
  return added ? squeeze(y, 0) : y;
}

Tensor pad(const Tensor& x, const IntList& amounts, double value) {
  KILN_CHECK(amounts.size() % 2 == 0 && static_cast<int64_t>(amounts.size() / 2) <= x.dim(), value,
             "[pad] expects (before, after) pairs for at most {} dims, got {} amounts", x.dim(), amounts.size());
  Tensor out = x;
  for (size_t i = 0; i < amounts.size() / 2; ++i) {
    int64_t d = x.dim() - 1 - static_cast<int64_t>(i);
    int64_t before = amounts[2 * i], after = amounts[2 * i + 1], size = out.size(d);
    KILN_CHECK(size + before + after >= 0, value,
               "[pad] the input size {} plus padding {} and {} of dim {} is a negative size", size, before, after, d);
    int64_t start = std::max<int64_t>(0, -before), stop = size - std::max<int64_t>(0, -after);
    if (start > 0 || stop < size) out = narrow(out, d, start, std::max<int64_t>(0, stop - start));
    auto block = [&](int64_t n) {
      IntList shape(out.shape().begin(), out.shape().end());
      shape[static_cast<size_t>(d)] = n;
      return full(shape, value, {.dtype = out.dtype(), .device = out.device()});
    };
    TensorList parts;
    if (before > 0) parts.push_back(block(before));
    parts.push_back(out);
    if (after > 0) parts.push_back(block(after));
    if (parts.size() > 1) out = cat(parts, d);
  }
  return out.is_same(x) ? clone(x) : out;
}

}  // namespace kiln::nn

#include "kiln/nn/conv.h"

#include <algorithm>
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
  KILN_CHECK(v.size() == 1, value, "[{}] {} needs 1 or {} values, got {}", op, what, rank,
             v.size());
  return IntList(rank, v[0]);
}

// The input with a batch dim (an unbatched input gets one), and whether it was added.
std::pair<Tensor, bool> batched(const Tensor& x, size_t rank, const char* op) {
  auto r = static_cast<int64_t>(rank);
  KILN_CHECK(x.dim() == r + 2 || x.dim() == r + 1, shape,
             "[{}] expects a {}-D (batched) or {}-D (unbatched) input, got {}", op, r + 2, r + 1,
             x.meta_str());
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
// (Y2) Every size and stride is carried as a SymInt, so a program keeps a dynamic batch and
// image size; that the kernel fits is a guard on the size's range.
Tensor windows(const Tensor& padded, const IntList& kernel, const IntList& stride,
               const IntList& dilation, const char* op) {
  Tensor xp = contiguous(padded);
  Dims size, strides;
  size.push_back(xp.sym_size(0));
  size.push_back(xp.sym_size(1));
  strides.push_back(xp.strides().sym(0));
  strides.push_back(xp.strides().sym(1));
  for (size_t i = 0; i < kernel.size(); ++i) {
    auto d = static_cast<int64_t>(i) + 2;
    int64_t span = dilation[i] * (kernel[i] - 1) + 1;
    SymInt extent = xp.sym_size(d);
    KILN_CHECK(extent >= span, shape,
               "[{}] the kernel ({} taps, dilation {}) is larger than the padded input ({}) along "
               "spatial dim {}",
               op, kernel[i], dilation[i], extent.hint(), i);
    size.push_back(floordiv(extent - span, stride[i]) + 1);
    strides.push_back(xp.strides().sym(static_cast<size_t>(d)) * stride[i]);
  }
  for (size_t i = 0; i < kernel.size(); ++i) {
    size.push_back(kernel[i]);
    strides.push_back(xp.strides().sym(i + 2) * dilation[i]);
  }
  return sym_as_strided(xp, size, strides, xp.offset());
}

IntList last_dims(size_t rank, size_t count) {
  IntList dims;
  for (size_t i = rank - count; i < rank; ++i) dims.push_back(static_cast<int64_t>(i));
  return dims;
}

// A convolution's input, weight and bias share one dtype (PyTorch promotes none of them).
void check_conv_dtypes(const Tensor& input, const Tensor& weight, const Tensor& bias,
                       const char* op) {
  KILN_CHECK(input.dtype() == weight.dtype() && (!bias.defined() || bias.dtype() == input.dtype()),
             dtype, "[{}] input ({}), weight ({}) and bias ({}) must have the same dtype", op,
             input.dtype(), weight.dtype(),
             bias.defined() ? to_string(bias.dtype()) : std::string_view("none"));
}

Tensor conv(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride_in,
            const IntList& padding_in, const IntList& dilation_in, int64_t groups, size_t rank,
            const char* op) {
  check_conv_dtypes(input, weight, bias, op);
  if (wants_opmath(
          {input, weight, bias}))  // f16/bf16: products, sums and bias in f32, one rounding
    return in_opmath({input, weight, bias}, [&](const TensorList& t) {
      return conv(t[0], t[1], t[2], stride_in, padding_in, dilation_in, groups, rank, op);
    });
  auto [x, added] = batched(input, rank, op);
  KILN_CHECK(weight.dim() == static_cast<int64_t>(rank) + 2, shape,
             "[{}] expects a {}-D weight, got {}", op, rank + 2, weight.meta_str());
  int64_t c = x.size(1), o = weight.size(0);
  KILN_CHECK(groups > 0 && c % groups == 0 && o % groups == 0, value,
             "[{}] groups ({}) must divide the input channels ({}) and the output channels ({})",
             op, groups, c, o);
  KILN_CHECK(weight.size(1) * groups == c, shape,
             "[{}] weight {} with {} groups expects {} input channels, got input {}", op,
             weight.meta_str(), groups, weight.size(1) * groups, x.meta_str());
  IntList stride = per_dim(stride_in, rank, op, "stride"),
          padding = per_dim(padding_in, rank, op, "padding"),
          dilation = per_dim(dilation_in, rank, op, "dilation");
  for (size_t i = 0; i < rank; ++i) {
    KILN_CHECK(
        stride[i] > 0 && dilation[i] > 0 && padding[i] >= 0, value,
        "[{}] stride and dilation must be positive and padding non-negative (got {}, {}, {})", op,
        stride[i], dilation[i], padding[i]);
    auto d = static_cast<int64_t>(i) + 2;
    int64_t span = dilation[i] * (weight.size(d) - 1) + 1;
    SymInt padded = x.sym_size(d) + 2 * padding[i];  // (Y2) a guard on a symbolic size
    KILN_CHECK(padded >= span, shape,
               "[{}] the kernel ({} taps, dilation {}) is larger than the padded input ({}) along "
               "spatial dim {}",
               op, weight.size(d), dilation[i], padded.hint(), i);
  }
  Tensor y = convolution(x, weight, bias, stride, padding, dilation, groups);
  return added ? squeeze(y, 0) : y;
}

// A pooling's geometry: its arguments per spatial dim and the padding after each dim
// that ceil_mode's last partial window needs.
struct Pooling {
  IntList kernel, stride, padding, dilation, extra;
};

Pooling pooling(const Tensor& x, const IntList& kernel_in, const IntList& stride_in,
                const IntList& padding_in, const IntList& dilation_in, bool ceil_mode, size_t rank,
                const char* op) {
  Pooling p;
  p.kernel = per_dim(kernel_in, rank, op, "kernel_size");
  p.stride = stride_in.empty() ? p.kernel : per_dim(stride_in, rank, op, "stride");
  p.padding = per_dim(padding_in, rank, op, "padding");
  p.dilation = per_dim(dilation_in, rank, op, "dilation");
  for (size_t i = 0; i < rank; ++i) {
    int64_t k = p.kernel[i], s = p.stride[i], pad = p.padding[i], d = p.dilation[i];
    KILN_CHECK(k > 0 && s > 0 && d > 0 && pad >= 0, value,
               "[{}] kernel_size, stride and dilation must be positive and padding non-negative",
               op);
    KILN_CHECK(
        2 * pad <= k, value,
        "[{}] pad should be at most half of the kernel size, but got pad={} and kernel_size={}", op,
        pad, k);
    SymInt size = x.sym_size(static_cast<int64_t>(i) + 2);
    int64_t span = d * (k - 1) + 1;
    KILN_CHECK(size + 2 * pad >= span, shape,
               "[{}] the kernel ({} taps, dilation {}) is larger than the padded input ({})", op, k,
               d, size.hint() + 2 * pad);
    // Floor mode's windows end inside the padded input: no extra padding, and a symbolic
    // size stays symbolic (Y2). Ceil mode's last partial window depends on the size modulo
    // the stride, which reads (and pins) it.
    if (!ceil_mode) {
      p.extra.push_back(0);
      continue;
    }
    int64_t n = size.guard_int(), room = n + 2 * pad - span, windows = (room + s - 1) / s + 1;
    if ((windows - 1) * s >= n + pad) --windows;  // the last one must start inside
    p.extra.push_back(std::max<int64_t>(0, (windows - 1) * s + span - (n + 2 * pad)));
  }
  return p;
}

IntList plus(const IntList& a, const IntList& b) {
  IntList r = a;
  for (size_t i = 0; i < r.size(); ++i) r[i] += b[i];
  return r;
}

// The values and, with `with_indices`, the flat spatial position in the input of each
// window's maximum (the first one; NaN wins), as PyTorch's return_indices.
std::pair<Tensor, Tensor> max_pool(const Tensor& input, const IntList& kernel,
                                   const IntList& stride, const IntList& padding,
                                   const IntList& dilation, bool ceil_mode, size_t rank,
                                   const char* op, bool with_indices = false) {
  auto [x, added] = batched(input, rank, op);
  KILN_CHECK(is_floating(x.dtype()), dtype, "[{}] expects a floating input, got {}", op, x.dtype());
  Pooling p = pooling(x, kernel, stride, padding, dilation, ceil_mode, rank, op);
  double lowest = -std::numeric_limits<double>::infinity();
  Tensor win = windows(pad_spatial(x, p.padding, plus(p.padding, p.extra), lowest), p.kernel,
                       p.stride, p.dilation, op);
  if (!with_indices) {
    Tensor y = amax(win, last_dims(static_cast<size_t>(win.dim()), rank));
    return {added ? squeeze(y, 0) : y, Tensor()};
  }
  // Windows of the positions (padding at -1), read where the values' windows peak.
  IntList spatial, pos_shape{1, 1};
  for (int64_t d = 2; d < x.dim(); ++d) spatial.push_back(x.sym_size(d).guard_int());
  pos_shape.insert(pos_shape.end(), spatial.begin(), spatial.end());
  Tensor pos = reshape(arange(0, product(spatial), 1, {.dtype = DType::i64, .device = x.device()}),
                       pos_shape);
  Tensor pos_win = windows(pad_spatial(pos, p.padding, plus(p.padding, p.extra), -1), p.kernel,
                           p.stride, p.dilation, op);
  // (Y2) the batch dim kept symbolic
  Dims flat;
  for (int64_t d = 0; d < 2 + static_cast<int64_t>(rank); ++d) flat.push_back(win.sym_size(d));
  flat.push_back(-1);
  Tensor values = reshape(win, flat);
  Tensor at = argmax(values, -1, /*keepdim=*/true);
  Tensor y = squeeze(gather(values, -1, at), -1);
  Dims pos_flat = flat;
  pos_flat.set(0, 1);
  pos_flat.set(1, 1);
  Dims expanded = at.shape();
  expanded.set(expanded.size() - 1, values.sym_size(-1));
  Tensor idx = squeeze(gather(expand(reshape(pos_win, pos_flat), expanded), -1, at), -1);
  return {added ? squeeze(y, 0) : y, added ? squeeze(idx, 0) : idx};
}

Tensor avg_pool(const Tensor& input, const IntList& kernel, const IntList& stride,
                const IntList& padding, bool ceil_mode, bool count_include_pad, size_t rank,
                const char* op, std::optional<int64_t> divisor_override = std::nullopt) {
  KILN_CHECK(input.dtype() != DType::b8, dtype, "[{}] expects a numeric input, got bool", op);
  if (!is_floating(
          input.dtype())) {  // integers: the mean in f64, truncated, as PyTorch's integer division
    Tensor mean = avg_pool(to(input, DType::f64), kernel, stride, padding, ceil_mode,
                           count_include_pad, rank, op, divisor_override);
    return to(trunc(mean), input.dtype());
  }
  auto [x, added] = batched(input, rank, op);
  Pooling p = pooling(x, kernel, stride, padding, {1}, ceil_mode, rank, op);
  IntList dims = last_dims(static_cast<size_t>(x.dim() + static_cast<int64_t>(rank)), rank);
  Tensor sums = sum(windows(pad_spatial(x, p.padding, plus(p.padding, p.extra), 0.0), p.kernel,
                            p.stride, IntList(rank, 1), op),
                    dims);
  // The divisor of each window: its elements inside the input, or inside the padded
  // input with count_include_pad (never those only ceil_mode added).
  Dims ones_shape{1, 1};
  for (size_t i = 0; i < rank; ++i) ones_shape.push_back(x.sym_size(static_cast<int64_t>(i) + 2));
  Tensor mask = ones(ones_shape, {.dtype = x.dtype(), .device = x.device()});
  mask = pad_spatial(mask, p.padding, p.padding, count_include_pad ? 1.0 : 0.0);
  mask = pad_spatial(mask, IntList(rank, 0), p.extra, 0.0);
  Tensor count = sum(windows(mask, p.kernel, p.stride, IntList(rank, 1), op), dims);
  KILN_CHECK(!divisor_override || *divisor_override != 0, value, "[{}] divisor must be not zero",
             op);
  Tensor y = divisor_override ? sums / static_cast<double>(*divisor_override) : sums / count;
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

namespace {
// padding valid or same as amounts: same pads dilation (k - 1) per dim, half before
// (rounded down) and the rest after; an uneven split pads the input explicitly first.
Tensor conv_named_padding(const Tensor& input, const Tensor& weight, const Tensor& bias,
                          const IntList& stride, ConvPadding padding, const IntList& dilation,
                          int64_t groups, size_t rank, const char* op) {
  if (padding == ConvPadding::valid)
    return conv(input, weight, bias, stride, {0}, dilation, groups, rank, op);
  IntList strides = per_dim(stride, rank, op, "stride"),
          dilations = per_dim(dilation, rank, op, "dilation");
  for (int64_t s : strides)
    KILN_CHECK(s == 1, value, "[{}] padding='same' is not supported for strided convolutions", op);
  IntList symmetric, extra;  // extra: F.pad amounts, the last dim first
  bool uneven = false;
  for (size_t i = 0; i < rank; ++i) {
    int64_t total = dilations[i] * (weight.size(static_cast<int64_t>(i) + 2) - 1);
    symmetric.push_back(total / 2);
    uneven = uneven || total % 2;
  }
  for (size_t i = rank; i-- > 0;) {
    int64_t total = dilations[i] * (weight.size(static_cast<int64_t>(i) + 2) - 1);
    extra.insert(extra.end(), {0, total % 2});
  }
  Tensor x = uneven ? pad(input, extra, 0.0) : input;
  return conv(x, weight, bias, stride, symmetric, dilation, groups, rank, op);
}
}  // namespace

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
              ConvPadding padding, const IntList& dilation, int64_t groups) {
  return conv_named_padding(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d");
}
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
              ConvPadding padding, const IntList& dilation, int64_t groups) {
  return conv_named_padding(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d");
}
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
              ConvPadding padding, const IntList& dilation, int64_t groups) {
  return conv_named_padding(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d");
}

Tensor max_pool1d(const Tensor& input, const IntList& kernel_size, const IntList& stride,
                  const IntList& padding, const IntList& dilation, bool ceil_mode) {
  return max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, 1, "max_pool1d").first;
}
Tensor max_pool2d(const Tensor& input, const IntList& kernel_size, const IntList& stride,
                  const IntList& padding, const IntList& dilation, bool ceil_mode) {
  return max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, 2, "max_pool2d").first;
}
Tensor max_pool3d(const Tensor& input, const IntList& kernel_size, const IntList& stride,
                  const IntList& padding, const IntList& dilation, bool ceil_mode) {
  return max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, 3, "max_pool3d").first;
}
std::pair<Tensor, Tensor> max_pool1d_with_indices(const Tensor& input, const IntList& kernel_size,
                                                  const IntList& stride, const IntList& padding,
                                                  const IntList& dilation, bool ceil_mode) {
  return max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, 1, "max_pool1d", true);
}
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, const IntList& kernel_size,
                                                  const IntList& stride, const IntList& padding,
                                                  const IntList& dilation, bool ceil_mode) {
  return max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, 2, "max_pool2d", true);
}
std::pair<Tensor, Tensor> max_pool3d_with_indices(const Tensor& input, const IntList& kernel_size,
                                                  const IntList& stride, const IntList& padding,
                                                  const IntList& dilation, bool ceil_mode) {
  return max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, 3, "max_pool3d", true);
}
namespace {

// One value per spatial dim: a single value repeated, or exactly `dims` of them.
template <typename T>
std::vector<T> per_dim(const std::vector<T>& v, int64_t dims, const char* what, const char* op) {
  KILN_CHECK(v.size() == 1 || static_cast<int64_t>(v.size()) == dims, value,
             "[{}] {} must have 1 or {} values, got {}", op, what, dims, v.size());
  return v.size() == 1 ? std::vector<T>(static_cast<size_t>(dims), v[0]) : v;
}

std::pair<Tensor, Tensor> fractional_max_pool(const Tensor& input, const IntList& kernel_size,
                                              const IntList& output_size,
                                              const std::vector<double>& output_ratio,
                                              const Tensor& samples_in, int64_t dims,
                                              const char* op) {
  KILN_CHECK(input.dim() == dims + 1 || input.dim() == dims + 2, shape,
             "[{}] expects a {}-D or {}-D input, got {}", op, dims + 1, dims + 2, input.meta_str());
  KILN_CHECK(is_floating(input.dtype()), dtype, "[{}] expects a floating input, got {}", op,
             input.dtype());
  KILN_CHECK(output_size.empty() != output_ratio.empty(), value,
             "[{}] give exactly one of output_size and output_ratio", op);
  bool unbatched = input.dim() == dims + 1;
  Tensor x = unbatched ? unsqueeze(input, 0) : input;
  int64_t n = x.size(0), c = x.size(1);
  IntList k = per_dim(kernel_size, dims, "kernel_size", op), out;
  if (!output_size.empty()) {
    out = per_dim(output_size, dims, "output_size", op);
  } else {
    std::vector<double> ratio = per_dim(output_ratio, dims, "output_ratio", op);
    for (int64_t d = 0; d < dims; ++d) {
      double r = ratio[static_cast<size_t>(d)];
      KILN_CHECK(r > 0 && r < 1, value, "[{}] output_ratio must be in (0, 1), got {}", op, r);
      out.push_back(static_cast<int64_t>(static_cast<double>(x.size(2 + d)) * r));
    }
  }
  for (int64_t d = 0; d < dims; ++d) {
    int64_t size = x.size(2 + d), kd = k[static_cast<size_t>(d)], od = out[static_cast<size_t>(d)];
    KILN_CHECK(kd > 0 && od > 0 && od + kd - 1 <= size, value,
               "[{}] output size {} with kernel {} does not fit input size {} along spatial dim {}",
               op, od, kd, size, d);
  }
  TensorOptions o{.dtype = x.dtype(), .device = x.device()};
  Tensor samples = samples_in.defined() ? to(samples_in, x.dtype()) : rand({n, c, dims}, o);
  KILN_CHECK(
      samples.dim() == 3 && samples.size(0) == n && samples.size(1) == c && samples.size(2) == dims,
      shape, "[{}] expects samples [{}, {}, {}], got {}", op, n, c, dims, samples.meta_str());
  // Per spatial dim d: the positions its windows cover, [N, C, out_d, k_d] (i64).
  TensorOptions io{.dtype = DType::i64, .device = x.device()};
  TensorList positions;
  for (int64_t d = 0; d < dims; ++d) {
    int64_t size = x.size(2 + d), kd = k[static_cast<size_t>(d)], od = out[static_cast<size_t>(d)];
    // [N, C, 1]: PyTorch's 2-D kernel reads u[0] for W, its 3-D kernel u[0] for T.
    Tensor u = unsqueeze(select(samples, 2, dims == 3 ? d : dims - 1 - d), -1);
    Tensor starts;
    if (od > 1) {
      // In the input's dtype, as PyTorch computes them.
      double alpha_d = static_cast<double>(size - kd) / static_cast<double>(od - 1);
      Tensor alpha = scalar_tensor(alpha_d, o);
      if (x.dtype() == DType::f32)
        alpha = scalar_tensor(
            static_cast<double>(static_cast<float>(size - kd) / static_cast<float>(od - 1)), o);
      Tensor i = arange(0, od - 1, 1, o);
      starts = to(trunc((i + u) * alpha) - trunc(u * alpha), DType::i64);
      starts = cat({starts, full({n, c, 1}, size - kd, io)}, -1);
    } else {
      starts = full({n, c, 1}, size - kd, io);
    }
    positions.push_back(unsqueeze(starts, -1) + arange(0, kd, 1, io));  // [N, C, out_d, k_d]
  }
  // The flat index of every (window, offset) pair, [N, C, out_0, k_0, out_1, k_1, ...].
  IntList grid{n, c};
  for (int64_t d = 0; d < dims; ++d)
    grid.push_back(out[static_cast<size_t>(d)]), grid.push_back(k[static_cast<size_t>(d)]);
  Tensor flat;
  int64_t stride = 1;
  for (int64_t d = dims - 1; d >= 0; --d) {
    IntList view(grid.size(), 1);
    view[0] = n, view[1] = c;
    view[static_cast<size_t>(2 + 2 * d)] = out[static_cast<size_t>(d)];
    view[static_cast<size_t>(3 + 2 * d)] = k[static_cast<size_t>(d)];
    Tensor term = reshape(positions[static_cast<size_t>(d)], view) * stride;
    flat = flat.defined() ? flat + term : term;
    stride *= x.size(2 + d);
  }
  // -> [N, C, out_0, out_1, ..., k_0 * k_1 * ...]
  IntList perm{0, 1}, full_shape{n, c};
  int64_t window = 1;
  for (int64_t d = 0; d < dims; ++d)
    perm.push_back(2 + 2 * d), full_shape.push_back(out[static_cast<size_t>(d)]);
  for (int64_t d = 0; d < dims; ++d) perm.push_back(3 + 2 * d), window *= k[static_cast<size_t>(d)];
  full_shape.push_back(window);
  Tensor index = reshape(permute(expand(flat, grid), perm), full_shape);
  Tensor values = gather(flatten(x, 2), 2, reshape(index, {n, c, -1}));
  values = reshape(values, full_shape);
  auto [best, at] = max(values, -1);
  Tensor indices = squeeze(gather(index, -1, unsqueeze(at, -1)), -1);
  if (unbatched) return {squeeze(best, 0), squeeze(indices, 0)};
  return {best, indices};
}

}  // namespace

std::pair<Tensor, Tensor> fractional_max_pool2d(const Tensor& input, const IntList& kernel_size,
                                                const IntList& output_size,
                                                const std::vector<double>& output_ratio,
                                                const Tensor& samples) {
  return fractional_max_pool(input, kernel_size, output_size, output_ratio, samples, 2,
                             "fractional_max_pool2d");
}
std::pair<Tensor, Tensor> fractional_max_pool3d(const Tensor& input, const IntList& kernel_size,
                                                const IntList& output_size,
                                                const std::vector<double>& output_ratio,
                                                const Tensor& samples) {
  return fractional_max_pool(input, kernel_size, output_size, output_ratio, samples, 3,
                             "fractional_max_pool3d");
}

Tensor avg_pool1d(const Tensor& input, const IntList& kernel_size, const IntList& stride,
                  const IntList& padding, bool ceil_mode, bool count_include_pad) {
  return avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, 1,
                  "avg_pool1d");
}
Tensor avg_pool2d(const Tensor& input, const IntList& kernel_size, const IntList& stride,
                  const IntList& padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  return avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, 2,
                  "avg_pool2d", divisor_override);
}
Tensor avg_pool3d(const Tensor& input, const IntList& kernel_size, const IntList& stride,
                  const IntList& padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  return avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, 3,
                  "avg_pool3d", divisor_override);
}

namespace {

Tensor lp_pool(const Tensor& input, double norm_type, const IntList& kernel_size,
               const IntList& stride, bool ceil_mode, size_t rank, const char* op) {
  IntList kernel = per_dim(kernel_size, rank, op, "kernel_size");
  Tensor means = avg_pool(pow(input, norm_type), kernel, stride, {0}, ceil_mode, true, rank, op);
  // sum |x|^p over the window, then the root (PyTorch's: the sign kept through a relu).
  return pow(sign(means) * relu(abs(means)) * static_cast<double>(product(kernel)),
             1.0 / norm_type);
}

Tensor max_unpool(const Tensor& input, const Tensor& indices, const IntList& kernel_size,
                  const IntList& stride_in, const IntList& padding_in, const IntList& output_size,
                  size_t rank, const char* op) {
  auto [x, added] = batched(input, rank, op);
  KILN_CHECK(indices.shape() == input.shape() && indices.dtype() == DType::i64, shape,
             "[{}] expects i64 indices shaped like the input {}, got {}", op, input.meta_str(),
             indices.meta_str());
  IntList kernel = per_dim(kernel_size, rank, op, "kernel_size");
  IntList stride = stride_in.empty() ? kernel : per_dim(stride_in, rank, op, "stride");
  IntList padding = per_dim(padding_in, rank, op, "padding");
  IntList out;
  if (!output_size.empty()) {
    out = IntList(output_size.end() - static_cast<int64_t>(rank), output_size.end());
  } else {
    for (size_t i = 0; i < rank; ++i)
      out.push_back((x.size(static_cast<int64_t>(i) + 2) - 1) * stride[i] - 2 * padding[i] +
                    kernel[i]);
  }
  int64_t n = x.size(0), c = x.size(1), positions = product(out);
  Tensor idx = reshape(added ? unsqueeze(indices, 0) : indices, {n, c, -1});
  if (!idx.is_fake() && idx.numel())
    KILN_CHECK(item<int64_t>(amin(idx)) >= 0 && item<int64_t>(amax(idx)) < positions, index,
               "[{}] found an invalid max index (the output has {} positions per channel)", op,
               positions);
  // Where indices repeat the last write wins, as PyTorch's loop: each output position
  // takes the source element of the largest position that names it.
  Tensor src = reshape(x, {n, c, -1});
  TensorOptions o{.dtype = DType::i64, .device = x.device()};
  Tensor order = expand(reshape(arange(0, src.size(2), 1, o), {1, 1, -1}), {n, c, src.size(2)});
  Tensor winner =
      scatter_reduce(full({n, c, positions}, int64_t{-1}, o), 2, idx, order, "amax", true);
  Tensor flat = where(winner >= 0, gather(src, 2, clamp_min(winner, int64_t{0})),
                      zeros_like(winner, {.dtype = x.dtype()}));
  if (src.requires_grad()) {  // PyTorch's gradient: every element gets the output's at its index,
                              // winner or not
    Tensor routed = scatter_add(zeros_like(flat), 2, idx, src);
    flat = flat.detach() + (routed - routed.detach());
  }
  IntList shape{n, c};
  shape.insert(shape.end(), out.begin(), out.end());
  Tensor y = reshape(flat, shape);
  return added ? squeeze(y, 0) : y;
}

}  // namespace

Tensor lp_pool1d(const Tensor& input, double norm_type, const IntList& kernel_size,
                 const IntList& stride, bool ceil_mode) {
  return lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 1, "lp_pool1d");
}
Tensor lp_pool2d(const Tensor& input, double norm_type, const IntList& kernel_size,
                 const IntList& stride, bool ceil_mode) {
  return lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 2, "lp_pool2d");
}
Tensor max_unpool1d(const Tensor& input, const Tensor& indices, const IntList& kernel_size,
                    const IntList& stride, const IntList& padding, const IntList& output_size) {
  return max_unpool(input, indices, kernel_size, stride, padding, output_size, 1, "max_unpool1d");
}
Tensor max_unpool2d(const Tensor& input, const Tensor& indices, const IntList& kernel_size,
                    const IntList& stride, const IntList& padding, const IntList& output_size) {
  return max_unpool(input, indices, kernel_size, stride, padding, output_size, 2, "max_unpool2d");
}
Tensor max_unpool3d(const Tensor& input, const Tensor& indices, const IntList& kernel_size,
                    const IntList& stride, const IntList& padding, const IntList& output_size) {
  return max_unpool(input, indices, kernel_size, stride, padding, output_size, 3, "max_unpool3d");
}

namespace {

Tensor adaptive_pool(const Tensor& input, const IntList& output_size, size_t rank, bool max,
                     const char* op) {
  if (!max && wants_opmath({input}))  // means in f32, rounded once
    return in_opmath({input}, [&](const TensorList& t) {
      return adaptive_pool(t[0], output_size, rank, max, op);
    });
  auto [x, added] = batched(input, rank, op);
  IntList o = per_dim(output_size, rank, op, "output_size");
  // Windows that tile each dim evenly (global pooling among them): one reduction over
  // [N, C, o0, s0 / o0, o1, s1 / o1, ..]'s window dims, as PyTorch sums each window once.
  // An output size of 1 tiles any size without reading it (a symbolic size stays so, Y2).
  bool even = true;
  for (size_t i = 0; i < rank; ++i)
    even = even && o[i] > 0 && (o[i] == 1 || x.size(static_cast<int64_t>(i) + 2) % o[i] == 0);
  if (even) {
    Dims tiled = sym_dims({x.sym_size(0), x.sym_size(1)}), out = tiled;
    IntList window_dims;
    for (size_t i = 0; i < rank; ++i) {
      SymInt size = x.sym_size(static_cast<int64_t>(i) + 2);
      tiled.push_back(o[i]);
      tiled.push_back(o[i] == 1 ? size : SymInt(size.guard_int() / o[i]));
      out.push_back(o[i]);
      window_dims.push_back(3 + 2 * static_cast<int64_t>(i));
    }
    Tensor t = reshape(x, tiled);
    Tensor y = reshape(max ? amax(t, window_dims) : mean(t, window_dims), out);
    return added ? squeeze(y, 0) : y;
  }
  Tensor y = x;
  for (size_t i = 0; i < rank;
       ++i) {  // separable: a mean (max) over a box is one of means (maxima)
    auto d = static_cast<int64_t>(i) + 2;
    int64_t size = y.size(d), n = o[i];
    KILN_CHECK(n > 0, value, "[{}] output sizes must be positive, got {}", op, n);
    TensorList parts;
    for (int64_t j = 0; j < n; ++j) {
      int64_t start = j * size / n, end = ((j + 1) * size + n - 1) / n;
      KILN_CHECK(end > start, shape, "[{}] input {} has an empty window for output size {}", op,
                 x.meta_str(), n);
      Tensor window = narrow(y, d, start, end - start);
      parts.push_back(max ? amax(window, {d}, true) : mean(window, {d}, /*keepdim=*/true));
    }
    y = cat(parts, d);
  }
  return added ? squeeze(y, 0) : y;
}

// Adaptive max pooling with the flat index (within each input plane) of every maximum:
// one window per output cell, its maximum found over the flattened window (the first on
// ties, NaN wins), the window-local position turned into the plane's.
std::pair<Tensor, Tensor> adaptive_max_with_indices(const Tensor& input, const IntList& output_size,
                                                    size_t rank, const char* op) {
  auto [x, added] = batched(input, rank, op);
  IntList o = per_dim(output_size, rank, op, "output_size");
  int64_t cells = 1;
  for (int64_t n : o) {
    KILN_CHECK(n > 0, value, "[{}] output sizes must be positive, got {}", op, n);
    cells *= n;
  }
  TensorList values, indices;
  for (int64_t cell = 0; cell < cells; ++cell) {
    IntList start(rank), length(rank);
    Tensor window = x;
    for (int64_t i = static_cast<int64_t>(rank) - 1, rest = cell; i >= 0; --i) {
      auto u = static_cast<size_t>(i);
      int64_t j = rest % o[u], size = x.size(i + 2);
      rest /= o[u];
      start[u] = j * size / o[u];
      length[u] = ((j + 1) * size + o[u] - 1) / o[u] - start[u];
      KILN_CHECK(length[u] > 0, shape, "[{}] input {} has an empty window for output size {}", op,
                 x.meta_str(), o[u]);
      window = narrow(window, i + 2, start[u], length[u]);
    }
    auto [v, local] = max(flatten(window, 2), 2);
    Tensor flat;  // local = sum_i c_i prod(length[i+1:]) -> sum_i (start_i + c_i) prod(size[i+1:])
    int64_t stride = 1;
    for (int64_t i = static_cast<int64_t>(rank) - 1; i >= 0; --i) {
      auto u = static_cast<size_t>(i);
      Tensor c = remainder(local, length[u]);
      local = div(local, Scalar(length[u]), "floor");
      Tensor term = (c + start[u]) * stride;
      flat = flat.defined() ? flat + term : term;
      stride *= x.size(i + 2);
    }
    values.push_back(v);
    indices.push_back(flat);
  }
  IntList shape{x.size(0), x.size(1)};
  shape.insert(shape.end(), o.begin(), o.end());
  Tensor v = reshape(stack(values, -1), shape), k = reshape(stack(indices, -1), shape);
  if (added) return {squeeze(v, 0), squeeze(k, 0)};
  return {v, k};
}

}  // namespace

std::pair<Tensor, Tensor> adaptive_max_pool1d_with_indices(const Tensor& input,
                                                           const IntList& output_size) {
  return adaptive_max_with_indices(input, output_size, 1, "adaptive_max_pool1d");
}
std::pair<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& input,
                                                           const IntList& output_size) {
  return adaptive_max_with_indices(input, output_size, 2, "adaptive_max_pool2d");
}
std::pair<Tensor, Tensor> adaptive_max_pool3d_with_indices(const Tensor& input,
                                                           const IntList& output_size) {
  return adaptive_max_with_indices(input, output_size, 3, "adaptive_max_pool3d");
}

Tensor adaptive_avg_pool1d(const Tensor& input, const IntList& output_size) {
  return adaptive_pool(input, output_size, 1, false, "adaptive_avg_pool1d");
}
Tensor adaptive_avg_pool2d(const Tensor& input, const IntList& output_size) {
  return adaptive_pool(input, output_size, 2, false, "adaptive_avg_pool2d");
}
Tensor adaptive_avg_pool3d(const Tensor& input, const IntList& output_size) {
  return adaptive_pool(input, output_size, 3, false, "adaptive_avg_pool3d");
}
Tensor adaptive_max_pool1d(const Tensor& input, const IntList& output_size) {
  return adaptive_pool(input, output_size, 1, true, "adaptive_max_pool1d");
}
Tensor adaptive_max_pool2d(const Tensor& input, const IntList& output_size) {
  return adaptive_pool(input, output_size, 2, true, "adaptive_max_pool2d");
}
Tensor adaptive_max_pool3d(const Tensor& input, const IntList& output_size) {
  return adaptive_pool(input, output_size, 3, true, "adaptive_max_pool3d");
}

Tensor pad(const Tensor& x, const IntList& amounts, double value) {
  KILN_CHECK(amounts.size() % 2 == 0 && static_cast<int64_t>(amounts.size() / 2) <= x.dim(), value,
             "[pad] expects (before, after) pairs for at most {} dims, got {} amounts", x.dim(),
             amounts.size());
  Tensor out = x;
  for (size_t i = 0; i < amounts.size() / 2; ++i) {
    int64_t d = x.dim() - 1 - static_cast<int64_t>(i);
    int64_t before = amounts[2 * i], after = amounts[2 * i + 1];
    if (before < 0 || after < 0) {  // a crop reads the size; padding alone keeps it symbolic
      int64_t size = out.size(d);
      KILN_CHECK(size + before + after >= 0, value,
                 "[pad] the input size {} plus padding {} and {} of dim {} is a negative size",
                 size, before, after, d);
      int64_t start = std::max<int64_t>(0, -before), stop = size - std::max<int64_t>(0, -after);
      if (start > 0 || stop < size) out = narrow(out, d, start, std::max<int64_t>(0, stop - start));
    }
    auto block = [&](int64_t n) {
      Dims shape = out.shape();  // (Y2) the other dims as they are, symbolic ones included
      shape.set(static_cast<size_t>(d), n);
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

namespace {

// The source index of each output position along a dim of `size` padded by (before,
// after) in a non-constant mode.
Tensor pad_index(int64_t size, int64_t before, int64_t after, const std::string& mode,
                 Device device) {
  std::vector<int64_t> index;
  index.reserve(static_cast<size_t>(size + before + after));
  for (int64_t j = -before; j < size + after; ++j) {
    int64_t k = j;
    if (mode == "reflect")
      k = j < 0 ? -j : j >= size ? 2 * (size - 1) - j : j;
    else if (mode == "replicate")
      k = std::clamp<int64_t>(j, 0, size - 1);
    else
      k = ((j % size) + size) % size;  // circular
    index.push_back(k);
  }
  return to(from_vector(index), device);
}

}  // namespace

Tensor constant_pad_nd(const Tensor& x, const IntList& amounts, double value) {
  return pad(x, amounts, value);
}

Tensor upsample_nearest(const Tensor& input, const IntList& size,
                        const std::vector<double>& scale_factor) {
  return interpolate(input, {.size = size, .scale_factor = scale_factor, .mode = "nearest"});
}

Tensor upsample_bilinear(const Tensor& input, const IntList& size,
                         const std::vector<double>& scale_factor) {
  return interpolate(
      input,
      {.size = size, .scale_factor = scale_factor, .mode = "bilinear", .align_corners = true});
}

Tensor pad(const Tensor& x, const IntList& amounts, const std::string& mode, double value) {
  if (mode == "constant") return pad(x, amounts, value);
  KILN_CHECK(mode == "reflect" || mode == "replicate" || mode == "circular", value,
             "[pad] mode must be 'constant', 'reflect', 'replicate' or 'circular', got '{}'", mode);
  KILN_CHECK(value == 0.0, value, "[pad] a fill value is only for the constant mode, not '{}'",
             mode);
  int64_t dims = static_cast<int64_t>(amounts.size() / 2);
  KILN_CHECK(amounts.size() % 2 == 0 && dims >= 1 && dims <= 3 && x.dim() >= dims + 1 &&
                 x.dim() <= dims + 2,
             value,
             "[pad] {} padding of {} dims expects a {}-D or {}-D input and (before, after) pairs, "
             "got {} amounts for {}",
             mode, dims, dims + 1, dims + 2, amounts.size(), x.meta_str());
  Tensor out = x;
  for (int64_t i = 0; i < dims; ++i) {
    int64_t d = x.dim() - 1 - i, size = x.size(d);
    int64_t before = amounts[2 * static_cast<size_t>(i)],
            after = amounts[2 * static_cast<size_t>(i) + 1];
    if (mode == "circular" &&
        (before < 0 || after < 0)) {  // negative amounts crop first, as PyTorch
      int64_t lo = std::max<int64_t>(-before, 0), hi = std::max<int64_t>(-after, 0);
      KILN_CHECK(lo + hi <= size, value,
                 "[pad] circular cropping ({}, {}) exceeds the size {} of dim {}", before, after,
                 size, d);
      out = narrow(out, d, lo, size - lo - hi);
      size -= lo + hi;
      before = std::max<int64_t>(before, 0);
      after = std::max<int64_t>(after, 0);
    }
    // Negative reflect/replicate amounts crop (pad_index reads from inside the dim).
    KILN_CHECK(size + before + after >= 1, value,
               "[pad] {} padding ({}, {}) of dim {} (size {}) leaves no element", mode, before,
               after, d, size);
    if (mode == "reflect")
      KILN_CHECK(before < size && after < size, value,
                 "[pad] reflect padding ({}, {}) must be less than the size {} of dim {}", before,
                 after, size, d);
    else if (mode == "circular")
      KILN_CHECK(before <= size && after <= size, value,
                 "[pad] circular padding ({}, {}) must be at most the size {} of dim {}", before,
                 after, size, d);
    else
      KILN_CHECK(size > 0, value, "[pad] replicate padding of the empty dim {}", d);
    if (before || after)
      out = index_select(out, d, pad_index(size, before, after, mode, x.device()));
  }
  return out.is_same(x) ? clone(x) : out;
}

namespace {

// conv_transpose as a convolution: the input with stride - 1 zeros between elements,
// padded by dilation (K - 1) - padding (+ output_padding after), convolved with the
// weight's groups transposed and its taps flipped.
Tensor conv_transpose(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      const IntList& stride_in, const IntList& padding_in,
                      const IntList& output_padding_in, int64_t groups, const IntList& dilation_in,
                      size_t rank, const char* op) {
  check_conv_dtypes(input, weight, bias, op);
  if (wants_opmath({input, weight, bias}))
    return in_opmath({input, weight, bias}, [&](const TensorList& t) {
      return conv_transpose(t[0], t[1], t[2], stride_in, padding_in, output_padding_in, groups,
                            dilation_in, rank, op);
    });
  auto [x, added] = batched(input, rank, op);
  auto r = static_cast<int64_t>(rank);
  KILN_CHECK(weight.dim() == r + 2, shape, "[{}] expects a {}-D weight, got {}", op, rank + 2,
             weight.meta_str());
  int64_t c = x.size(1);
  KILN_CHECK(groups > 0 && c % groups == 0, value,
             "[{}] groups ({}) must divide the input channels ({})", op, groups, c);
  KILN_CHECK(weight.size(0) == c, shape, "[{}] weight {} expects {} input channels, got input {}",
             op, weight.meta_str(), weight.size(0), x.meta_str());
  IntList stride = per_dim(stride_in, rank, op, "stride"),
          padding = per_dim(padding_in, rank, op, "padding"),
          out_pad = per_dim(output_padding_in, rank, op, "output_padding"),
          dilation = per_dim(dilation_in, rank, op, "dilation");
  for (size_t i = 0; i < rank; ++i) {
    KILN_CHECK(stride[i] > 0 && dilation[i] > 0 && padding[i] >= 0 && out_pad[i] >= 0, value,
               "[{}] stride and dilation must be positive, padding and output_padding non-negative",
               op);
    KILN_CHECK(out_pad[i] < stride[i] || out_pad[i] < dilation[i], value,
               "[{}] output padding must be smaller than either stride or dilation, got "
               "output_padding: {}, "
               "stride: {}, dilation: {}",
               op, out_pad[i], stride[i], dilation[i]);
  }
  Tensor y = kiln::conv_transpose(x, weight, bias, stride, padding, out_pad, groups, dilation);
  return added ? squeeze(y, 0) : y;
}

}  // namespace

Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const IntList& stride, const IntList& padding,
                        const IntList& output_padding, int64_t groups, const IntList& dilation) {
  return conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 1,
                        "conv_transpose1d");
}
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const IntList& stride, const IntList& padding,
                        const IntList& output_padding, int64_t groups, const IntList& dilation) {
  return conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 2,
                        "conv_transpose2d");
}
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const IntList& stride, const IntList& padding,
                        const IntList& output_padding, int64_t groups, const IntList& dilation) {
  return conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 3,
                        "conv_transpose3d");
}

namespace {

struct Blocks {
  IntList kernel, dilation, padding, stride;
};

Blocks blocks(const IntList& k, const IntList& d, const IntList& p, const IntList& s,
              const char* op) {
  Blocks b{per_dim(k, 2, op, "kernel_size"), per_dim(d, 2, op, "dilation"),
           per_dim(p, 2, op, "padding"), per_dim(s, 2, op, "stride")};
  for (size_t i = 0; i < 2; ++i)
    KILN_CHECK(b.kernel[i] > 0 && b.dilation[i] > 0 && b.stride[i] > 0 && b.padding[i] >= 0, value,
               "[{}] kernel_size, dilation and stride must be positive and padding non-negative",
               op);
  return b;
}

// The sliding blocks of x [N, C, H, W] as [N, C * kh * kw, L].
Tensor columns(const Tensor& x, const Blocks& b, const char* op) {
  Tensor win = windows(pad_spatial(x, b.padding, b.padding, 0.0), b.kernel, b.stride, b.dilation,
                       op);  // [N, C, oh, ow, kh, kw]
  // (Y1) the batch and the number of blocks as they are: symbolic ones add no guard
  const Dims& w = win.shape();
  return reshape(
      permute(win, {0, 1, 4, 5, 2, 3}),
      SymSizes{w.sym(0), SymInt(x.size(1) * b.kernel[0] * b.kernel[1]), w.sym(2) * w.sym(3)});
}

}  // namespace

Tensor unfold(const Tensor& input, const IntList& kernel_size, const IntList& dilation,
              const IntList& padding, const IntList& stride) {
  auto [x, added] = batched(input, 2, "unfold");
  Tensor cols = columns(x, blocks(kernel_size, dilation, padding, stride, "unfold"), "unfold");
  return added ? squeeze(cols, 0) : cols;
}

Tensor fold(const Tensor& input, const IntList& output_size, const IntList& kernel_size,
            const IntList& dilation, const IntList& padding, const IntList& stride) {
  const char* op = "fold";
  KILN_CHECK(input.dim() == 2 || input.dim() == 3, shape,
             "[fold] expects a 2-D or 3-D input, got {}", input.meta_str());
  Tensor x = input.dim() == 2 ? unsqueeze(input, 0) : input;
  Blocks b = blocks(kernel_size, dilation, padding, stride, op);
  IntList out = per_dim(output_size, 2, op, "output_size");
  int64_t taps = b.kernel[0] * b.kernel[1];
  KILN_CHECK(x.size(1) % taps == 0, shape,
             "[fold] expected size of input's dimension 1 ({}) to be divisible by the product of "
             "kernel_size ({})",
             x.size(1), taps);
  // Where each column entry lands in the padded output: the same blocks of its positions.
  int64_t hp = out[0] + 2 * b.padding[0], wp = out[1] + 2 * b.padding[1];
  Tensor where_to =
      reshape(arange(0, hp * wp, 1, {.dtype = DType::i64, .device = x.device()}), {1, 1, hp, wp});
  Tensor index =
      columns(where_to, {b.kernel, b.dilation, IntList{0, 0}, b.stride}, op);  // [1, taps, L]
  KILN_CHECK(
      index.size(2) == x.size(2), shape,
      "[fold] given output_size {}, kernel_size {}, dilation {}, padding {}, stride {}, expected "
      "size of input's "
      "dimension 2 to match the calculated number of sliding blocks {}, but got input.size(2)={}",
      Dims(out).str(), Dims(b.kernel).str(), Dims(b.dilation).str(), Dims(b.padding).str(),
      Dims(b.stride).str(), index.size(2), x.size(2));
  SymInt n = x.shape().sym(0);  // (Y1) a symbolic batch stays one
  int64_t c = x.size(1) / taps;
  Tensor summed = index_add(
      zeros(SymSizes{n, SymInt(c), SymInt(hp * wp)}, {.dtype = x.dtype(), .device = x.device()}), 2,
      reshape(index, {-1}), reshape(x, SymSizes{n, SymInt(c), SymInt(taps) * x.shape().sym(2)}));
  Tensor y = reshape(summed, SymSizes{n, SymInt(c), SymInt(hp), SymInt(wp)});
  y = narrow(narrow(y, 2, b.padding[0], out[0]), 3, b.padding[1], out[1]);
  return input.dim() == 2 ? squeeze(y, 0) : y;
}

}  // namespace kiln::nn

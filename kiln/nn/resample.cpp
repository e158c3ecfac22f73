// interpolate and pixel_shuffle (declared in kiln/nn/conv.h): index_select and lerp over
// index tensors computed on the host from the shapes, so they differentiate (the
// gradient of index_select adds into the sources), trace and export as those ops do.
#include <algorithm>
#include <array>
#include <cmath>

#include "kiln/nn/conv.h"

namespace kiln::nn {
namespace {

// PyTorch's step between output and source coordinates along one dim.
double source_scale(int64_t in, int64_t out, std::optional<double> factor, bool align_corners) {
  if (align_corners)
    return out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  return factor && *factor > 0 ? 1.0 / *factor : static_cast<double>(in) / static_cast<double>(out);
}

Tensor index_tensor(const std::vector<int64_t>& v, Device device) {
  return to(from_vector(v), device);
}

// Nearest: out[j] = in[min(floor(j * scale), in - 1)] ("nearest-exact": (j + 0.5) * scale),
// in f32 arithmetic as PyTorch's kernels compute it.
Tensor nearest_along(const Tensor& x, int64_t d, int64_t out, float scale, bool exact) {
  int64_t in = x.size(d);
  std::vector<int64_t> index(static_cast<size_t>(out));
  for (int64_t j = 0; j < out; ++j) {
    float src = exact ? (static_cast<float>(j) + 0.5f) * scale : static_cast<float>(j) * scale;
    index[static_cast<size_t>(j)] = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
  }
  return index_select(x, d, index_tensor(index, x.device()));
}

// Linear along dim d: out[j] = lerp(in[i0], in[i1], src - i0) with src = scale j (align
// corners) or scale (j + 0.5) - 0.5 clamped at 0, i1 = min(i0 + 1, in - 1).
Tensor linear_along(const Tensor& x, int64_t d, int64_t out, double scale, bool align_corners) {
  int64_t in = x.size(d);
  std::vector<int64_t> lo(static_cast<size_t>(out)), hi(static_cast<size_t>(out));
  std::vector<double> w(static_cast<size_t>(out));
  for (int64_t j = 0; j < out; ++j) {
    double src = align_corners ? scale * static_cast<double>(j)
                               : std::max(0.0, scale * (static_cast<double>(j) + 0.5) - 0.5);
    auto i0 = std::min(static_cast<int64_t>(src), in - 1);
    auto k = static_cast<size_t>(j);
    lo[k] = i0;
    hi[k] = std::min(i0 + 1, in - 1);
    w[k] = std::min(1.0, src - static_cast<double>(i0));
  }
  IntList wshape(static_cast<size_t>(x.dim()), 1);
  wshape[static_cast<size_t>(d)] = out;
  Tensor weight = reshape(to(from_vector(w, {}, {.dtype = x.dtype()}), x.device()), wshape);
  Tensor a = index_select(x, d, index_tensor(lo, x.device())),
         b = index_select(x, d, index_tensor(hi, x.device()));
  return a + (b - a) * weight;
}

// Cubic convolution (Keys, A = -0.75, as PyTorch) along dim d: four taps around
// src = scale j (align corners) or scale (j + 0.5) - 0.5 (not clamped), clamped to the
// input at its edges.
Tensor cubic_along(const Tensor& x, int64_t d, int64_t out, double scale, bool align_corners) {
  const double a = -0.75;
  auto near = [&](double t) { return ((a + 2) * t - (a + 3)) * t * t + 1; };       // |t| <= 1
  auto far = [&](double t) { return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a; };  // 1 < |t| < 2
  int64_t in = x.size(d);
  std::vector<std::vector<int64_t>> taps(4, std::vector<int64_t>(static_cast<size_t>(out)));
  std::vector<std::vector<double>> weights(4, std::vector<double>(static_cast<size_t>(out)));
  for (int64_t j = 0; j < out; ++j) {
    double src = align_corners ? scale * static_cast<double>(j)
                               : scale * (static_cast<double>(j) + 0.5) - 0.5;
    double base = std::floor(src), t = src - base;
    double w[4] = {far(t + 1), near(t), near(1 - t), far(2 - t)};
    for (int k = 0; k < 4; ++k) {
      auto i = static_cast<int64_t>(base) - 1 + k;
      taps[static_cast<size_t>(k)][static_cast<size_t>(j)] = std::clamp<int64_t>(i, 0, in - 1);
      weights[static_cast<size_t>(k)][static_cast<size_t>(j)] = w[k];
    }
  }
  IntList wshape(static_cast<size_t>(x.dim()), 1);
  wshape[static_cast<size_t>(d)] = out;
  Tensor y;
  for (size_t k = 0; k < 4; ++k) {
    Tensor w = reshape(to(from_vector(weights[k], {}, {.dtype = x.dtype()}), x.device()), wshape);
    Tensor term = index_select(x, d, index_tensor(taps[k], x.device())) * w;
    y = y.defined() ? y + term : term;
  }
  return y;
}

// Antialiased resampling along dim d (PyTorch's antialias=True, after PIL): output j
// averages the inputs within `support` of its centre scale (j + 0.5), weighted by the
// triangle (bilinear) or Keys cubic with A = -0.5 (bicubic) filter stretched by the scale
// when shrinking, the weights normalized per output. One [out, in] weight matrix: a
// contraction, differentiable as matmul.
Tensor antialiased_along(const Tensor& x, int64_t d, int64_t out, double scale, bool align_corners,
                         bool cubic) {
  int64_t in = x.size(d);
  auto filter = [cubic](double t) {
    t = std::abs(t);
    if (!cubic) return t < 1 ? 1 - t : 0.0;
    const double a = -0.5;
    if (t < 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
    if (t < 2) return (((t - 5) * t + 8) * t - 4) * a;
    return 0.0;
  };
  double half = cubic ? 2.0 : 1.0;  // the filter's half-width
  double support = scale >= 1 ? half * scale : half, invscale = scale >= 1 ? 1 / scale : 1.0;
  std::vector<double> w(static_cast<size_t>(out * in), 0.0);
  for (int64_t j = 0; j < out; ++j) {
    // (align_corners changes only the scale, (in - 1) / (out - 1), as in PyTorch 1.13.)
    double center = scale * (static_cast<double>(j) + 0.5);
    int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    int64_t hi = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in);
    double total = 0;
    for (int64_t i = lo; i < hi; ++i)
      total += filter((static_cast<double>(i) - center + 0.5) * invscale);
    for (int64_t i = lo; i < hi && total != 0; ++i)
      w[static_cast<size_t>(j * in + i)] =
          filter((static_cast<double>(i) - center + 0.5) * invscale) / total;
  }
  Tensor weight = to(from_vector(w, {out, in}, {.dtype = x.dtype()}), x.device());
  return movedim(matmul(weight, movedim(x, d, -2)), -2, d);
}

// Nearest upsampling by whole factors that are powers of two (a U-Net's or FPN's 2x):
// out[j] = in[j / f] exactly (1 / f is exact, so PyTorch's floor(j * (1 / f)) is j / f
// for both nearest modes), each element repeated f times along each spatial dim. Built
// from unsqueeze, expand and reshape, so a symbolic image size stays symbolic (Y2) where
// index tensors computed on the host would pin it.
Tensor repeat_each(const Tensor& x, const std::vector<double>& factors) {
  Tensor y = x;
  for (int64_t d = 2; d < x.dim(); ++d) {
    auto f = static_cast<int64_t>(factors.size() == 1 ? factors[0]
                                                      : factors[static_cast<size_t>(d - 2)]);
    if (f == 1) continue;
    Dims spread = unsqueeze(y, d + 1).shape();
    spread.set(static_cast<size_t>(d) + 1, f);
    Dims merged = y.shape();
    merged.set(static_cast<size_t>(d), y.sym_size(d) * f);
    y = reshape(expand(unsqueeze(y, d + 1), spread), merged);
  }
  return y.is_same(x) ? clone(x) : y;
}

}  // namespace

Tensor interpolate(const Tensor& input, const InterpolateOptions& o) {
  if (wants_opmath({input}) && o.mode != "nearest" &&
      o.mode != "nearest-exact")  // weights in f32, one rounding
    return in_opmath({input}, [&](const TensorList& t) { return interpolate(t[0], o); });
  const std::string& mode = o.mode;
  auto rank = static_cast<size_t>(input.dim() - 2);
  KILN_CHECK(input.dim() >= 3 && input.dim() <= 5, shape,
             "[interpolate] expects a 3-D, 4-D or 5-D input [N, C, *spatial], got {}",
             input.meta_str());
  bool cubic = mode == "bicubic";
  bool linear = mode == "linear" || mode == "bilinear" || mode == "trilinear" || cubic;
  KILN_CHECK(linear || mode == "nearest" || mode == "nearest-exact" || mode == "area", value,
             "[interpolate] mode must be nearest, nearest-exact, linear, bilinear, bicubic, "
             "trilinear or area, got '{}'",
             mode);
  if (linear) {
    size_t want = mode == "linear" ? 1 : mode == "bilinear" || cubic ? 2 : 3;
    KILN_CHECK(rank == want, shape, "[interpolate] mode '{}' expects a {}-D input, got {}", mode,
               want + 2, input.meta_str());
  }
  KILN_CHECK(linear || !o.align_corners.has_value(), value,
             "[interpolate] align_corners can only be set with the linear modes, not '{}'", mode);
  KILN_CHECK(o.size.empty() != o.scale_factor.empty(), value,
             "[interpolate] exactly one of size and scale_factor must be given");
  KILN_CHECK(is_floating(input.dtype()) || mode == "nearest" || mode == "nearest-exact", dtype,
             "[interpolate] mode '{}' expects a floating input, got {}", mode, input.dtype());
  auto power_of_two = [](double f) {
    return f >= 1 && f <= 64 && std::exp2(std::round(std::log2(f))) == f;
  };
  bool repeats = (mode == "nearest" || mode == "nearest-exact") &&
                 (o.scale_factor.size() == 1 || o.scale_factor.size() == rank) &&
                 std::all_of(o.scale_factor.begin(), o.scale_factor.end(), power_of_two);
  if (repeats && (input.shape().is_symbolic() || input.numel() > 0))  // empty: checked below
    return repeat_each(input, o.scale_factor);
  IntList out(rank);
  std::vector<std::optional<double>> factor(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t in = input.size(static_cast<int64_t>(i) + 2);
    if (!o.size.empty()) {
      KILN_CHECK(o.size.size() == 1 || o.size.size() == rank, value,
                 "[interpolate] size needs 1 or {} values, got {}", rank, o.size.size());
      out[i] = o.size.size() == 1 ? o.size[0] : o.size[i];
    } else {
      KILN_CHECK(o.scale_factor.size() == 1 || o.scale_factor.size() == rank, value,
                 "[interpolate] scale_factor needs 1 or {} values, got {}", rank,
                 o.scale_factor.size());
      factor[i] = o.scale_factor.size() == 1 ? o.scale_factor[0] : o.scale_factor[i];
      out[i] = static_cast<int64_t>(std::floor(static_cast<double>(in) * *factor[i]));
    }
    KILN_CHECK(out[i] > 0 && in > 0, value,
               "[interpolate] input {} and output sizes {} must be positive", input.meta_str(),
               out[i]);
  }
  if (mode == "area") {
    if (rank == 1) return adaptive_avg_pool1d(input, out);
    if (rank == 2) return adaptive_avg_pool2d(input, out);
    return adaptive_avg_pool3d(input, out);
  }
  bool corners = o.align_corners.value_or(false);
  KILN_CHECK(!o.antialias || mode == "bilinear" || cubic, value,
             "[interpolate] antialias is supported for the bilinear and bicubic modes, got '{}'",
             mode);
  Tensor y = input;
  for (size_t i = 0; i < rank; ++i) {
    auto d = static_cast<int64_t>(i) + 2;
    int64_t in = y.size(d);
    if (o.antialias) {
      y = antialiased_along(y, d, out[i], source_scale(in, out[i], factor[i], corners), corners,
                            cubic);
    } else if (cubic) {
      y = cubic_along(y, d, out[i], source_scale(in, out[i], factor[i], corners), corners);
    } else if (linear) {
      y = linear_along(y, d, out[i], source_scale(in, out[i], factor[i], corners), corners);
    } else {
      auto scale = static_cast<float>(source_scale(in, out[i], factor[i], false));
      y = nearest_along(y, d, out[i], scale, mode == "nearest-exact");
    }
  }
  return y;
}

Tensor channel_shuffle(const Tensor& x, int64_t groups) {
  KILN_CHECK(x.dim() >= 3, shape, "[channel_shuffle] expects an input of at least 3 dims, got {}",
             x.meta_str());
  KILN_CHECK(groups > 0 && x.size(1) % groups == 0, value,
             "[channel_shuffle] the number of channels ({}) must be divisible by groups ({})",
             x.size(1), groups);
  IntList shape(x.shape().begin(), x.shape().end()), split{x.size(0), groups, x.size(1) / groups};
  split.insert(split.end(), shape.begin() + 2, shape.end());
  return reshape(transpose(reshape(x, split), 1, 2), shape);
}

Tensor pixel_shuffle(const Tensor& x, int64_t r) {
  KILN_CHECK(x.dim() >= 3, shape, "[pixel_shuffle] expects an input of at least 3 dims, got {}",
             x.meta_str());
  KILN_CHECK(r > 0, value, "[pixel_shuffle] upscale_factor must be positive, got {}", r);
  int64_t c = x.size(-3), h = x.size(-2), w = x.size(-1);
  KILN_CHECK(c % (r * r) == 0, shape,
             "[pixel_shuffle] the channel dim ({}) of {} must be divisible by the square of "
             "upscale_factor ({})",
             c, x.meta_str(), r * r);
  IntList batch(x.shape().begin(), x.shape().end() - 3);
  auto b = static_cast<int64_t>(batch.size());
  IntList split = batch, merged = batch, perm;
  split.insert(split.end(), {c / (r * r), r, r, h, w});
  merged.insert(merged.end(), {c / (r * r), h * r, w * r});
  for (int64_t i = 0; i < b; ++i) perm.push_back(i);
  perm.insert(perm.end(), {b, b + 3, b + 1, b + 4, b + 2});  // [C, r, r, H, W] -> [C, H, r, W, r]
  return reshape(permute(reshape(x, split), perm), merged);
}

Tensor pixel_unshuffle(const Tensor& x, int64_t r) {
  KILN_CHECK(x.dim() >= 3, shape, "[pixel_unshuffle] expects an input of at least 3 dims, got {}",
             x.meta_str());
  KILN_CHECK(r > 0, value, "[pixel_unshuffle] downscale_factor must be positive, got {}", r);
  int64_t c = x.size(-3), h = x.size(-2), w = x.size(-1);
  KILN_CHECK(
      h % r == 0 && w % r == 0, shape,
      "[pixel_unshuffle] the height and width of {} must be divisible by downscale_factor ({})",
      x.meta_str(), r);
  IntList batch(x.shape().begin(), x.shape().end() - 3);
  auto b = static_cast<int64_t>(batch.size());
  IntList split = batch, merged = batch, perm;
  split.insert(split.end(), {c, h / r, r, w / r, r});
  merged.insert(merged.end(), {c * r * r, h / r, w / r});
  for (int64_t i = 0; i < b; ++i) perm.push_back(i);
  perm.insert(perm.end(), {b, b + 2, b + 4, b + 1, b + 3});  // [C, H, r, W, r] -> [C, r, r, H, W]
  return reshape(permute(reshape(x, split), perm), merged);
}

Tensor affine_grid(const Tensor& theta, const IntList& size, bool align_corners) {
  KILN_CHECK(size.size() == 4 || size.size() == 5, shape,
             "[affine_grid] supports 4-D [N, C, H, W] and 5-D [N, C, D, H, W] sizes, got {}",
             Dims(size).str());
  auto dims = static_cast<int64_t>(size.size()) - 2;
  KILN_CHECK(is_floating(theta.dtype()) && theta.dim() == 3 && theta.size(0) == size[0] &&
                 theta.size(1) == dims && theta.size(2) == dims + 1,
             shape, "[affine_grid] expected a floating theta of shape [{}, {}, {}], got {}",
             size[0], dims, dims + 1, theta.meta_str());
  int64_t n = size[0], points = 1;
  TensorOptions o{.dtype = theta.dtype(), .device = theta.device()};
  // Pixel centres in [-1, 1] (the corners' centres at +-1 with align_corners).
  auto axis = [&](int64_t len) {
    if (len <= 1) return zeros({len}, o);
    Tensor l = linspace(-1.0, 1.0, len, o);
    return align_corners ? l : l * (static_cast<double>(len - 1) / static_cast<double>(len));
  };
  IntList spatial(size.begin() + 2, size.end());
  for (int64_t s : spatial) points *= s;
  // The homogeneous base coordinates (x, y[, z], 1) of every output pixel: x runs along
  // the last spatial dim.
  TensorList coords;
  for (int64_t j = 0; j < dims; ++j) {
    int64_t d = dims - 1 - j;  // the spatial dim coordinate j runs along
    IntList view(static_cast<size_t>(dims), 1);
    view[static_cast<size_t>(d)] = spatial[static_cast<size_t>(d)];
    coords.push_back(expand(reshape(axis(spatial[static_cast<size_t>(d)]), view), spatial));
  }
  coords.push_back(ones(spatial, o));
  Tensor base = reshape(stack(coords, -1), {1, points, dims + 1});
  IntList out{n};
  out.insert(out.end(), spatial.begin(), spatial.end());
  out.push_back(dims);
  return reshape(matmul(expand(base, {n, points, dims + 1}), transpose(theta, 1, 2)), out);
}

namespace {

// A normalized coordinate [-1, 1] as a (fractional) pixel index of a dim of `size`.
Tensor unnormalize(const Tensor& coord, int64_t size, bool align_corners) {
  auto s = static_cast<double>(size);
  return align_corners ? (coord + 1.0) * ((s - 1) / 2) : ((coord + 1.0) * s - 1.0) / 2;
}

// A pixel index with the padding mode's clipping or reflection applied; "zeros" leaves it
// (the tap reads 0 outside). PyTorch's grid_sampler_compute_source_index after
// unnormalizing; bicubic applies it to each integer tap.
Tensor pad_index(const Tensor& x, int64_t size, const std::string& padding, bool align_corners) {
  auto s = static_cast<double>(size);
  auto clip = [&](const Tensor& t) { return clamp(t, 0.0, s - 1); };
  if (padding == "border") return clip(x);
  if (padding == "reflection") {
    double lo = align_corners ? 0.0 : -0.5, span = align_corners ? s - 1 : s;
    if (span <= 0) return zeros_like(x);
    Tensor d = abs(x - lo);
    Tensor extra = fmod(d, span), flips = floor(d / span);
    Tensor even = remainder(flips, 2.0) == 0.0;
    return clip(where(even, extra + lo, (span - extra) + lo));
  }
  return x;
}

// The four cubic-convolution weights (Keys, A = -0.75) of the taps at floor - 1 .. floor + 2
// for the fraction t.
std::array<Tensor, 4> cubic_weights(const Tensor& t) {
  constexpr double A = -0.75;
  auto near = [&](const Tensor& d) { return ((d * (A + 2) - (A + 3)) * d * d) + 1.0; };  // |d| <= 1
  auto far = [&](const Tensor& d) {
    return (((d * A) - 5 * A) * d + 8 * A) * d - 4 * A;
  };  // 1 < |d| < 2
  Tensor u = 1.0 - t;
  return {far(t + 1.0), near(t), near(u), far(u + 1.0)};
}

}  // namespace

Tensor grid_sample(const Tensor& input, const Tensor& grid, const std::string& mode,
                   const std::string& padding_mode, bool align_corners) {
  KILN_CHECK(input.dim() == 4 || input.dim() == 5, shape,
             "[grid_sample] supports 4-D [N, C, H, W] and 5-D [N, C, D, H, W] inputs, got {}",
             input.meta_str());
  int64_t dims = input.dim() - 2;
  KILN_CHECK(grid.dim() == input.dim() && grid.size(0) == input.size(0) && grid.size(-1) == dims,
             shape, "[grid_sample] expected grid of shape [{}, {}, {}], got {}", input.size(0),
             dims == 2 ? "H, W" : "D, H, W", dims, grid.meta_str());
  KILN_CHECK(mode == "bilinear" || mode == "nearest" || mode == "bicubic", value,
             "[grid_sample] mode must be 'bilinear', 'nearest' or 'bicubic', got '{}'", mode);
  KILN_CHECK(mode != "bicubic" || input.dim() == 4, shape,
             "[grid_sample] bicubic interpolation supports 4-D input only, got {}",
             input.meta_str());
  KILN_CHECK(padding_mode == "zeros" || padding_mode == "border" || padding_mode == "reflection",
             value,
             "[grid_sample] padding_mode must be 'zeros', 'border' or 'reflection', got '{}'",
             padding_mode);
  KILN_CHECK(is_floating(input.dtype()) && grid.dtype() == input.dtype(), dtype,
             "[grid_sample] expects floating input and grid of one dtype, got {} and {}",
             input.dtype(), grid.dtype());
  int64_t n = input.size(0), c = input.size(1), points = 1, plane = 1;
  IntList out_shape{n, c};
  for (int64_t i = 0; i < dims; ++i)
    points *= grid.size(1 + i), out_shape.push_back(grid.size(1 + i));
  for (int64_t i = 0; i < dims; ++i) plane *= input.size(2 + i);
  // The source coordinate along each spatial dim i, [N, P]: the grid's last entries run
  // the other way (x for W first).
  TensorList coord;
  for (int64_t i = 0; i < dims; ++i)
    coord.push_back(unnormalize(reshape(select(grid, -1, dims - 1 - i), {n, points}),
                                input.size(2 + i), align_corners));
  Tensor flat = reshape(input, {n, c, plane});
  // input at the integer pixel `at` (one [N, P] per dim) times weight [N, P]; outside: 0.
  auto tap = [&](const TensorList& at, const Tensor& weight) {
    Tensor inside, index;
    int64_t stride = 1;
    for (int64_t i = dims - 1; i >= 0; --i) {
      auto last = static_cast<double>(input.size(2 + i) - 1);
      const Tensor& p = at[static_cast<size_t>(i)];
      Tensor in_i = logical_and(p >= 0.0, p <= last);
      inside = inside.defined() ? logical_and(inside, in_i) : in_i;
      Tensor term = to(clamp(p, 0.0, last), DType::i64) * stride;
      index = index.defined() ? index + term : term;
      stride *= input.size(2 + i);
    }
    return gather(flat, 2, expand(unsqueeze(index, 1), {n, c, points})) *
           unsqueeze(where(inside, weight, zeros_like(weight)), 1);
  };
  Tensor out;
  auto padded = [&](const Tensor& p, int64_t i) {
    return pad_index(p, input.size(2 + i), padding_mode, align_corners);
  };
  if (mode == "nearest") {
    TensorList at;
    for (int64_t i = 0; i < dims; ++i)
      at.push_back(round(padded(coord[static_cast<size_t>(i)], i)));  // half to even
    out = tap(at, ones_like(coord[0]));
  } else if (mode ==
             "bicubic") {  // 4 x 4 taps, each padded on its own (PyTorch's get_value_bounded)
    Tensor x0 = floor(coord[0]), y0 = floor(coord[1]);
    std::array<Tensor, 4> wx = cubic_weights(coord[0] - x0), wy = cubic_weights(coord[1] - y0);
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t i = 0; i < 4; ++i) {
        Tensor term = tap({padded(x0 + static_cast<double>(i - 1), 0),
                           padded(y0 + static_cast<double>(j - 1), 1)},
                          wx[static_cast<size_t>(i)] * wy[static_cast<size_t>(j)]);
        out = out.defined() ? out + term : term;
      }
  } else {  // (tri)linear: the 2^dims corners around each point
    for (int64_t i = 0; i < dims; ++i)
      coord[static_cast<size_t>(i)] = padded(coord[static_cast<size_t>(i)], i);
    for (int64_t corner = 0; corner < (int64_t{1} << dims); ++corner) {
      TensorList at;
      Tensor weight;
      for (int64_t i = 0; i < dims; ++i) {
        Tensor lo = floor(coord[static_cast<size_t>(i)]);
        bool high = (corner >> i) & 1;
        Tensor w =
            high ? coord[static_cast<size_t>(i)] - lo : lo + 1.0 - coord[static_cast<size_t>(i)];
        at.push_back(high ? lo + 1.0 : lo);
        weight = weight.defined() ? weight * w : w;
      }
      Tensor term = tap(at, weight);
      out = out.defined() ? out + term : term;
    }
  }
  return reshape(out, out_shape);
}

}  // namespace kiln::nn

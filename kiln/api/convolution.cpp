// Note [Convolution's gradients]
// `convolution` is one op with a native kernel per backend; what is built around it is
// written with table ops, so it differentiates again (double backward) and traces as
// the ops it is made of:
// - the transposed convolution is a convolution of the input spread by stride - 1 zeros
//   between elements and padded by dilation * (taps - 1) - padding (negative amounts
//   crop), with each group's weight transposed and its taps flipped;
// - d input of a convolution is the transposed convolution of the gradient by the same
//   weight, with the output padding that gives back the input's size;
// - d weight is, per group, the gradient [O/G, N * positions] times the input's windows
//   as columns [N * positions, C/G * taps] (an im2col copy of the padded input);
// - d bias is the gradient summed over the batch and the positions.
#include "kiln/api/functional.h"

namespace kiln {
namespace {

// x [N, C, *S] with spatial dim i grown by before[i] zeros in front and after[i] behind
// (a negative amount crops).
Tensor pad_spatial(const Tensor& x, const IntList& before, const IntList& after) {
  Tensor out = x;
  for (size_t i = 0; i < before.size(); ++i) {
    auto d = static_cast<int64_t>(i) + 2;
    int64_t size = out.size(d), start = std::max<int64_t>(0, -before[i]),
            stop = size - std::max<int64_t>(0, -after[i]);
    if (start > 0 || stop < size) out = narrow(out, d, start, std::max<int64_t>(0, stop - start));
    auto zeros_of = [&](int64_t n) {
      Dims shape = out.shape();  // (Y2) a symbolic batch stays symbolic
      shape.set(static_cast<size_t>(d), n);
      return zeros(shape, {.dtype = out.dtype(), .device = out.device()});
    };
    TensorList parts;
    if (before[i] > 0) parts.push_back(zeros_of(before[i]));
    parts.push_back(out);
    if (after[i] > 0) parts.push_back(zeros_of(after[i]));
    if (parts.size() > 1) out = cat(parts, d);
  }
  return out;
}

int64_t product(const IntList& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

}  // namespace

Tensor conv_transpose(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      const IntList& stride, const IntList& padding, const IntList& output_padding,
                      int64_t groups, const IntList& dilation) {
  auto rank = static_cast<size_t>(weight.dim() - 2);
  Tensor z = input;
  IntList before, after;
  for (size_t i = 0; i < rank; ++i) {
    auto d = static_cast<int64_t>(i) + 2;
    if (stride[i] > 1 &&
        z.size(d) > 0) {  // [.., S, ..] -> [.., S, stride, ..] -> (S - 1) stride + 1
      int64_t s = z.size(d);
      Dims gap = z.shape();
      gap.insert(static_cast<size_t>(d) + 1, stride[i] - 1);
      Tensor spread =
          cat({unsqueeze(z, d + 1), zeros(gap, {.dtype = z.dtype(), .device = z.device()})}, d + 1);
      Dims merged = z.shape();
      merged.set(static_cast<size_t>(d), s * stride[i]);
      z = narrow(reshape(spread, merged), d, 0, (s - 1) * stride[i] + 1);
    }
    int64_t edge = dilation[i] * (weight.size(d) - 1) - padding[i];
    before.push_back(edge);
    after.push_back(edge + output_padding[i]);
  }
  z = pad_spatial(z, before, after);
  // [Cin, Cout/G, *K] -> [G, Cin/G, Cout/G, *K] -> [G, Cout/G, Cin/G, *K] -> [Cout, Cin/G, *K],
  // taps flipped.
  int64_t c = weight.size(0), cg = c / groups, og = weight.size(1);
  IntList split{groups, cg, og}, merged{groups * og, cg}, spatial;
  for (int64_t k = 2; k < weight.dim(); ++k) {
    split.push_back(weight.size(k));
    merged.push_back(weight.size(k));
    spatial.push_back(k);
  }
  Tensor w = flip(reshape(transpose(reshape(weight, split), 1, 2), merged), spatial);
  return convolution(z, w, bias, IntList(rank, 1), IntList(rank, 0), dilation, groups);
}

Tensor convolution_weight_grad(const Tensor& grad, const Tensor& input, const IntList& weight_shape,
                               const IntList& stride, const IntList& padding,
                               const IntList& dilation, int64_t groups) {
  auto rank = weight_shape.size() - 2;
  Tensor xp = contiguous(pad_spatial(input, padding, padding));
  IntList kernel(weight_shape.begin() + 2, weight_shape.end()), out;
  for (size_t i = 0; i < rank; ++i) out.push_back(grad.size(static_cast<int64_t>(i) + 2));
  // The windows of xp: [N, C, *P, *K], a view.
  Dims size = sym_dims({xp.sym_size(0), xp.sym_size(1)}),
       strides = sym_dims({xp.strides().sym(0), xp.strides().sym(1)});
  for (size_t i = 0; i < rank; ++i) {
    size.push_back(out[i]);
    strides.push_back(xp.stride(static_cast<int64_t>(i) + 2) * stride[i]);
  }
  for (size_t i = 0; i < rank; ++i) {
    size.push_back(kernel[i]);
    strides.push_back(xp.stride(static_cast<int64_t>(i) + 2) * dilation[i]);
  }
  Tensor windows = sym_as_strided(xp, size, strides, xp.offset());
  SymInt n = input.sym_size(0);
  int64_t c = input.size(1), o = weight_shape[0], cg = c / groups, og = o / groups;
  int64_t positions = product(out), taps = product(kernel);
  // [N, G, Cg, *P, *K] -> [G, N, *P, Cg, *K] -> [G, N * P, Cg * taps]
  Dims split = sym_dims({n, groups, cg});
  IntList perm{1, 0};
  for (size_t i = 0; i < 2 * rank; ++i) split.push_back(i < rank ? out[i] : kernel[i - rank]);
  for (size_t i = 0; i < rank; ++i) perm.push_back(3 + static_cast<int64_t>(i));
  perm.push_back(2);
  for (size_t i = 0; i < rank; ++i) perm.push_back(3 + static_cast<int64_t>(rank + i));
  Tensor cols =
      reshape(permute(reshape(windows, split), perm), sym_dims({groups, n * positions, cg * taps}));
  // grad [N, G, Og, P] -> [G, Og, N, P] -> [G, Og, N * P]
  Tensor g = reshape(permute(reshape(grad, sym_dims({n, groups, og, positions})), {1, 2, 0, 3}),
                     sym_dims({groups, og, n * positions}));
  return reshape(bmm(g, cols), weight_shape);
}

}  // namespace kiln

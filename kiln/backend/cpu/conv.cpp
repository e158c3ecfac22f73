// Note [Convolution on the CPU]
// f32 convolutions run on oneDNN's convolution primitive: it picks the kernel for this CPU
// (brgemm or direct JIT kernels, a depthwise kernel for groups == channels) and the
// layouts that kernel wants (channel blocks of 16 on AVX-512, 8 on AVX2), into which
// the input and weight are reordered and out of which the output is written back —
// what PyTorch's CPU convolution does through ideep. Other dtypes (f64, integers, as PyTorch
// computes them on the CPU), and f32 when oneDNN is absent or KILN_GEMM=openblas, copy each image's
// windows of each group into columns (im2col: [C/G * taps, positions]) and multiply the group's
// weights by them through the backend's GEMM. Both paths give the same values up to the order of
// the sums (a test compares them).
#include <array>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/loops.h"
#include "kiln/backend/cpu/onednn.h"

namespace kiln::cpu {
namespace {

// out [N, O, *P] (contiguous) = the convolution, per image and group: the group's
// weights [O/G, C/G * taps] times the image's windows as columns [C/G * taps, P].
template <typename T>
void im2col_convolution(const ops::ConvGeometry& g, const Tensor& x, const Tensor& w,
                        const Tensor& bias, const Tensor& out) {
  backend::Conv3d s = backend::as_3d(g);
  std::array<int64_t, 3> x_stride{0, 0, 0};  // x's strides along s's dims
  for (int i = 0; i < g.rank; ++i) x_stride[static_cast<size_t>(3 - g.rank + i)] = x.stride(i + 2);
  int64_t cg = g.in_channels / g.groups, og = g.out_channels / g.groups;
  int64_t taps = g.taps(), positions = g.positions(), rows = cg * taps;
  Tensor wd = contiguous(w);
  Tensor cols = empty(Dims{rows, positions}, x.dtype(), x.device());
  const T* xs = x.data<T>();
  T* col = cols.data<T>();
  T* o = out.data<T>();
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      T* dst = o + (n * g.out_channels + grp * og) * positions;
      if (rows == 0) {
        std::fill(dst, dst + og * positions, T(0));
      } else {
        for (int64_t ci = 0; ci < cg; ++ci) {
          const T* plane = xs + n * x.stride(0) + (grp * cg + ci) * x.stride(1);
          T* r = col + ci * taps * positions;
          for (int64_t t0 = 0; t0 < s.kernel[0]; ++t0)
            for (int64_t t1 = 0; t1 < s.kernel[1]; ++t1)
              for (int64_t t2 = 0; t2 < s.kernel[2]; ++t2, r += positions) {
                T* p = r;
                for (int64_t p0 = 0; p0 < s.out[0]; ++p0) {
                  int64_t i0 = p0 * s.stride[0] - s.padding[0] + t0 * s.dilation[0];
                  bool in0 = i0 >= 0 && i0 < s.in[0];
                  for (int64_t p1 = 0; p1 < s.out[1]; ++p1) {
                    int64_t i1 = p1 * s.stride[1] - s.padding[1] + t1 * s.dilation[1];
                    bool in01 = in0 && i1 >= 0 && i1 < s.in[1];
                    const T* line = plane + i0 * x_stride[0] + i1 * x_stride[1];
                    for (int64_t p2 = 0; p2 < s.out[2]; ++p2, ++p) {
                      int64_t i2 = p2 * s.stride[2] - s.padding[2] + t2 * s.dilation[2];
                      *p = in01 && i2 >= 0 && i2 < s.in[2] ? line[i2 * x_stride[2]] : T(0);
                    }
                  }
                }
              }
        }
        Tensor wg = make_view(wd, Dims{og, rows}, Dims{rows, 1}, wd.offset() + grp * og * rows);
        Tensor yg = make_view(out, Dims{og, positions}, Dims{positions, 1},
                              out.offset() + (n * g.out_channels + grp * og) * positions);
        gemm(wg, cols, yg, 1.0, 0.0);
      }
      if (bias.defined())
        for (int64_t oc = 0; oc < og; ++oc) {
          T b = bias.data<T>()[(grp * og + oc) * bias.stride(0)];
          T* row = dst + oc * positions;
          for (int64_t p = 0; p < positions; ++p) row[p] += b;
        }
    }
}

std::array<int64_t, 5> strides_of(const Tensor& t) {
  std::array<int64_t, 5> s{};
  for (int64_t d = 0; d < t.dim(); ++d) s[static_cast<size_t>(d)] = t.stride(d);
  return s;
}

}  // namespace

void k_convolution(const OpCall& c, std::span<Tensor> outs) {
  ops::ConvGeometry g = ops::conv_geometry(c);
  const Tensor& x = c.args.tensor(0);
  const Tensor& w = c.args.tensor(1);
  Tensor bias = c.args.opt_tensor(2);
  Tensor out = outs[0].is_contiguous() ? outs[0] : empty(outs[0].shape(), x.dtype(), x.device());
  if (out.numel() == 0) return;
  if (x.dtype() == DType::f32 && g.in_channels > 0 && onednn_available() &&
      gemm_library() != GemmLibrary::openblas) {
    Tensor b = bias.defined() ? contiguous(bias) : Tensor();
    std::array<int64_t, 5> xs = strides_of(x), ws = strides_of(w);
    onednn_convolution({g, x.data<float>(), xs.data(), w.data<float>(), ws.data(),
                        b.defined() ? b.data<float>() : nullptr, out.data<float>()});
  } else {
    KILN_DISPATCH_COMPUTE(
        x.dtype(), "convolution",
        if constexpr (!std::is_same_v<T, bool>) { im2col_convolution<T>(g, x, w, bias, out); });
  }
  if (!out.is_same(outs[0])) copy_into(outs[0], out);
}

}  // namespace kiln::cpu

// convolution on CUDA: one thread per output element sums its window directly (a
// correct, simple kernel; a tuned one, cuDNN's, is left to a later change). And nonzero's
// table entry.
#include "kiln/backend/cuda/common.cuh"

namespace kiln::cuda {
namespace {

// backend::Conv3d with the channel counts, in plain arrays passed to the kernel by value.
struct Conv3 {
  int64_t batch, in_channels, out_channels, groups;
  int64_t in[3], kernel[3], out[3], stride[3], padding[3], dilation[3];
};

template <typename T>
__global__ void convolution_direct(const T* x, const T* w, const T* bias, T* y, Conv3 g,
                                   int64_t total) {
  int64_t cg = g.in_channels / g.groups, og = g.out_channels / g.groups;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i;
    int64_t p2 = r % g.out[2];
    r /= g.out[2];
    int64_t p1 = r % g.out[1];
    r /= g.out[1];
    int64_t p0 = r % g.out[0];
    r /= g.out[0];
    int64_t oc = r % g.out_channels, n = r / g.out_channels, grp = oc / og;
    T acc = bias ? bias[oc] : T(0);
    for (int64_t ci = 0; ci < cg; ++ci) {
      const T* plane = x + (n * g.in_channels + grp * cg + ci) * g.in[0] * g.in[1] * g.in[2];
      const T* taps = w + (oc * cg + ci) * g.kernel[0] * g.kernel[1] * g.kernel[2];
      for (int64_t t0 = 0; t0 < g.kernel[0]; ++t0) {
        int64_t i0 = p0 * g.stride[0] - g.padding[0] + t0 * g.dilation[0];
        if (i0 < 0 || i0 >= g.in[0]) continue;
        for (int64_t t1 = 0; t1 < g.kernel[1]; ++t1) {
          int64_t i1 = p1 * g.stride[1] - g.padding[1] + t1 * g.dilation[1];
          if (i1 < 0 || i1 >= g.in[1]) continue;
          for (int64_t t2 = 0; t2 < g.kernel[2]; ++t2) {
            int64_t i2 = p2 * g.stride[2] - g.padding[2] + t2 * g.dilation[2];
            if (i2 < 0 || i2 >= g.in[2]) continue;
            acc += plane[(i0 * g.in[1] + i1) * g.in[2] + i2] *
                   taps[(t0 * g.kernel[1] + t1) * g.kernel[2] + t2];
          }
        }
      }
    }
    y[i] = acc;
  }
}

template <typename T>
T* device_ptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.storage()->data) + t.offset() : nullptr;
}

}  // namespace

void k_convolution(const OpCall& c, std::span<Tensor> outs) {
  ops::ConvGeometry geo = ops::conv_geometry(c);
  const Tensor& x = c.args.tensor(0);
  DType dt = x.dtype();
  Device dev = x.device();
  Tensor xd = dense(x, dt, dev), wd = dense(c.args.tensor(1), dt, dev);
  Tensor bias = c.args.opt_tensor(2);
  if (bias.defined()) bias = dense(bias, dt, dev);
  Tensor y = outs[0].is_contiguous() ? outs[0] : empty(outs[0].shape(), dt, dev);
  backend::Conv3d wide = backend::as_3d(geo);
  Conv3 g{geo.batch, geo.in_channels, geo.out_channels, geo.groups, {}, {}, {}, {}, {}, {}};
  for (size_t i = 0; i < 3; ++i) {
    g.in[i] = wide.in[i];
    g.kernel[i] = wide.kernel[i];
    g.out[i] = wide.out[i];
    g.stride[i] = wide.stride[i];
    g.padding[i] = wide.padding[i];
    g.dilation[i] = wide.dilation[i];
  }
  int64_t total = y.numel();
  if (total > 0) {
    constexpr int kThreads = 256;
    auto blocks =
        static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, 65535));
    auto run = [&]<typename T>(T*) {
      convolution_direct<T><<<blocks, kThreads, 0, stream()>>>(
          device_ptr<T>(xd), device_ptr<T>(wd), device_ptr<T>(bias), device_ptr<T>(y), g, total);
      check_launch("convolution kernel launch");
    };
    switch (dt) {
      KILN_CUDA_CASE(f32, float, run(static_cast<T*>(nullptr)))
      KILN_CUDA_CASE(f64, double, run(static_cast<T*>(nullptr)))
      KILN_CUDA_UNSUPPORTED(dt, c.op)
    }
  }
  if (!y.is_same(outs[0])) copy_into(outs[0], y);
}

}  // namespace kiln::cuda

namespace kiln::cuda {

// nonzero's output size is counted by its meta function from host-readable data, which a
// CUDA tensor is not: the meta function refuses it first (copy to the CPU, as the error
// says). This entry only completes the kernel table.
void k_nonzero(const OpCall& c, std::span<Tensor>) {
  fail(ErrorKind::unsupported, "[nonzero] runs on CPU tensors, got {}",
       c.args.tensor(0).meta_str());
}

}  // namespace kiln::cuda

// Copies, conversions, fills, factories and selection on CUDA devices.
#include "kiln/backend/cuda/common.cuh"

namespace kiln::cuda {

Tensor empty(const Dims& shape, DType dtype, Device device) {
  return make_tensor(shape, dtype, device, &device_allocator(device));
}

template <typename T>
T host_scalar(const Tensor& t) {
  const void* p = t.storage()->data;
  int64_t o = t.offset();
  double dv = 0;
  int64_t iv = 0;
  bool integral = true;
  switch (t.dtype()) {
    case DType::f32: dv = static_cast<const float*>(p)[o], integral = false; break;
    case DType::f64: dv = static_cast<const double*>(p)[o], integral = false; break;
    case DType::f16: dv = float(static_cast<const Half*>(p)[o]), integral = false; break;
    case DType::bf16: dv = float(static_cast<const BFloat16*>(p)[o]), integral = false; break;
    case DType::i64: iv = static_cast<const int64_t*>(p)[o]; break;
    case DType::i32: iv = static_cast<const int32_t*>(p)[o]; break;
    case DType::i16: iv = static_cast<const int16_t*>(p)[o]; break;
    case DType::i8: iv = static_cast<const int8_t*>(p)[o]; break;
    case DType::u8: iv = static_cast<const uint8_t*>(p)[o]; break;
    case DType::b8: iv = static_cast<const bool*>(p)[o]; break;
  }
  if (integral) dv = static_cast<double>(iv);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (integral) return static_cast<T>(iv);
  }
  return store<T>(dv);
}
#define KILN_HOST_SCALAR(T) template T host_scalar<T>(const Tensor&);
KILN_HOST_SCALAR(float)
KILN_HOST_SCALAR(double)
KILN_HOST_SCALAR(half)
KILN_HOST_SCALAR(bfloat)
KILN_HOST_SCALAR(int64_t)
KILN_HOST_SCALAR(int32_t)
KILN_HOST_SCALAR(int16_t)
KILN_HOST_SCALAR(int8_t)
KILN_HOST_SCALAR(uint8_t)
KILN_HOST_SCALAR(bool)
#undef KILN_HOST_SCALAR

namespace {

// Reads element `off` of memory holding dtype `s`, converted to D. The source dtype is
// a runtime switch (uniform across threads): one kernel per destination dtype.
template <typename D>
__device__ inline D read_as(const void* p, int64_t off, DType s) {
  switch (s) {
    case DType::f32: return cast<D>(static_cast<const float*>(p)[off]);
    case DType::f64: return cast<D>(static_cast<const double*>(p)[off]);
    case DType::f16: return cast<D>(static_cast<const half*>(p)[off]);
    case DType::bf16: return cast<D>(static_cast<const bfloat*>(p)[off]);
    case DType::i64: return cast<D>(static_cast<const int64_t*>(p)[off]);
    case DType::i32: return cast<D>(static_cast<const int32_t*>(p)[off]);
    case DType::i16: return cast<D>(static_cast<const int16_t*>(p)[off]);
    case DType::i8: return cast<D>(static_cast<const int8_t*>(p)[off]);
    case DType::u8: return cast<D>(static_cast<const uint8_t*>(p)[off]);
    case DType::b8: return cast<D>(static_cast<const bool*>(p)[off]);
  }
  return D{};
}

// Same-dtype copies move elements of the same width, whatever their type.
template <typename W>
void copy_same(const Tensor& dst, const Tensor& src) {
  W* d = out_ptr<W>(dst);
  const W* s = static_cast<const W*>(src.storage()->data);
  auto g = make_geometry<2>(dst.shape(), {dst.strides(), broadcast_strides(src, dst.shape())},
                            {dst.offset(), src.offset()});
  launch_elementwise<2>(dst.numel(), g,
                        [=] __device__(const int64_t* off) { d[off[0]] = s[off[1]]; });
}

template <typename T>
void fill_value(const Tensor& t, T v) {
  T* p = out_ptr<T>(t);
  auto g = make_geometry<1>(t.shape(), {t.strides()}, {t.offset()});
  launch_elementwise<1>(t.numel(), g, [=] __device__(const int64_t* off) { p[off[0]] = v; });
}

void fill(const Tensor& t, const Scalar& v) {
  if (t.numel() == 0) return;
  KILN_CUDA_DISPATCH_ALL(t.dtype(), "fill_", fill_value<T>(t, scalar_as<T>(v)));
}

}  // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  if (src.device().is_cpu()) {  // a 0-dim CPU scalar (D2)
    KILN_CHECK(src.dim() == 0, internal,
               "[copy_] a CUDA kernel read CPU tensor {}; only 0-dim CPU tensors join CUDA ops",
               src.meta_str());
    KILN_CUDA_DISPATCH_ALL(dst.dtype(), "copy_", fill_value<T>(dst, host_scalar<T>(src)));
    return;
  }
  if (dst.is_alias_of(src) && dst.offset() == src.offset() && dst.shape() == src.shape() &&
      dst.strides() == src.strides() && dst.dtype() == src.dtype())
    return;
  if (dst.dtype() == src.dtype() && dst.shape() == src.shape() && dst.is_contiguous() &&
      src.is_contiguous()) {  // a dense copy is a device-to-device memcpy
    size_t w = itemsize(dst.dtype());
    check(cudaMemcpyAsync(static_cast<char*>(dst.storage()->data) + dst.offset() * w,
                          static_cast<const char*>(src.storage()->data) + src.offset() * w,
                          static_cast<size_t>(dst.numel()) * w, cudaMemcpyDeviceToDevice, stream()),
          "cudaMemcpyAsync");
    return;
  }
  if (dst.dtype() == src.dtype()) {
    switch (itemsize(dst.dtype())) {
      case 1: copy_same<uint8_t>(dst, src); return;
      case 2: copy_same<uint16_t>(dst, src); return;
      case 4: copy_same<uint32_t>(dst, src); return;
      case 8: copy_same<uint64_t>(dst, src); return;
    }
  }
  DType sd = src.dtype();
  const void* s = src.storage()->data;
  auto g = make_geometry<2>(dst.shape(), {dst.strides(), broadcast_strides(src, dst.shape())},
                            {dst.offset(), src.offset()});
  KILN_CUDA_DISPATCH_ALL(dst.dtype(), "copy_", {
    T* d = out_ptr<T>(dst);
    launch_elementwise<2>(dst.numel(), g, [=] __device__(const int64_t* off) {
      d[off[0]] = read_as<T>(s, off[1], sd);
    });
  });
}

Tensor dense(const Tensor& t, DType dtype, Device device) {
  if (t.dtype() == dtype && t.is_contiguous() && t.device() == device) return t;
  Tensor out = empty(t.shape(), dtype, device);
  copy_into(out, t);
  return out;
}

void k_copy_(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& dst = outs[0];
  backend::copy_overlapping(dst, c.args.tensor(1), copy_into, [&](const Tensor& t) {
    return empty(t.shape(), t.dtype(), dst.device());
  });
}
void k_clone(const OpCall& c, std::span<Tensor> outs) { copy_into(outs[0], c.args.tensor(0)); }
void k_to_copy(const OpCall& c, std::span<Tensor> outs) { copy_into(outs[0], c.args.tensor(0)); }
void k_fill_(const OpCall& c, std::span<Tensor> outs) { fill(outs[0], c.args.scalar(1)); }
void k_full(const OpCall& c, std::span<Tensor> outs) { fill(outs[0], c.args.scalar(1)); }
void k_empty(const OpCall&, std::span<Tensor>) {}

void k_arange(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& out = outs[0];
  if (out.numel() == 0) return;
  const Scalar& start = c.args.scalar(0);
  const Scalar& step = c.args.scalar(2);
  bool integral = (!start.is_floating() && !step.is_floating()) ||
                  is_integral(out.dtype(), false);  // as the CPU kernel
  double fs = start.to_double(), fd = step.to_double();
  int64_t is = start.to_int(), id = step.to_int();
  auto g = make_geometry<1>(out.shape(), {out.strides()}, {out.offset()});
  KILN_CUDA_DISPATCH_ALL(out.dtype(), "arange", {
    T* p = out_ptr<T>(out);
    launch_elementwise<1>(out.numel(), g, [=] __device__(const int64_t* off) {
      int64_t i = off[0] - g.base[0];
      p[off[0]] = integral ? store<T>(static_cast<double>(is + i * id))
                           : store<T>(fs + static_cast<double>(i) * fd);
    });
  });
}

namespace {

// A counter-based generator: element i of a call draws from hash(seed, i), so results
// do not depend on the launch shape. splitmix64's finalizer is the hash.
__device__ inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
__device__ inline double uniform01(uint64_t seed, uint64_t i) {
  return static_cast<double>(mix(seed + 0x9e3779b97f4a7c15ull * (i + 1)) >> 11) * 0x1.0p-53;
}

template <bool Normal>
void fill_random(const OpCall& c, const Tensor& out) {
  if (out.numel() == 0) return;
  uint64_t seed;
  {
    Generator& gen = device_generator(c.device);
    std::lock_guard lock(gen.mutex());
    seed = gen.next_u64();
  }
  auto g = make_geometry<1>(out.shape(), {out.strides()}, {out.offset()});
  KILN_CUDA_DISPATCH_FLOAT(out.dtype(), Normal ? "randn" : "rand", {
    T* p = out_ptr<T>(out);
    bool normal = Normal;
    launch_elementwise<1>(out.numel(), g, [=] __device__(const int64_t* off) {
      uint64_t i = static_cast<uint64_t>(off[0] - g.base[0]);
      double v;
      if (normal) {  // Box-Muller on two independent draws
        double u1 = uniform01(seed, 2 * i), u2 = uniform01(seed, 2 * i + 1);
        v = sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
      } else {
        v = uniform01(seed, i);
      }
      p[off[0]] = store<T>(v);
    });
  });
}

}  // namespace

void k_rand(const OpCall& c, std::span<Tensor> outs) { fill_random<false>(c, outs[0]); }
void k_randn(const OpCall& c, std::span<Tensor> outs) { fill_random<true>(c, outs[0]); }

void k_cat(const OpCall& c, std::span<Tensor> outs) {
  backend::cat_into(outs[0], c.args.tensors(0), c.args.i64(1), copy_into);
}

void k_as_strided_scatter(const OpCall& c, std::span<Tensor> outs) {
  backend::as_strided_scatter_into(outs[0], c, copy_into);
}

void k_where(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& out = outs[0];
  const Tensor& cond = c.args.tensor(0);
  const Tensor &a = c.args.tensor(1), &b = c.args.tensor(2);
  // Inputs of another dtype are converted first; host scalars convert on the host.
  auto prep = [&](const Tensor& t) {
    return t.device().is_cpu() || t.dtype() == out.dtype() ? t
                                                           : dense(t, out.dtype(), out.device());
  };
  Tensor ca = prep(a), cb = prep(b);
  const Dims& shape = out.shape();
  auto g = make_geometry<4>(
      shape, {out.strides(), in_strides(cond, shape), in_strides(ca, shape), in_strides(cb, shape)},
      {out.offset(), in_offset(cond), in_offset(ca), in_offset(cb)});
  In<bool> pc = input<bool>(cond);
  KILN_CUDA_DISPATCH_ALL(out.dtype(), "where", {
    T* o = out_ptr<T>(out);
    In<T> pa = input<T>(ca), pb = input<T>(cb);
    launch_elementwise<4>(out.numel(), g, [=] __device__(const int64_t* off) {
      o[off[0]] = pc[off[1]] ? pa[off[2]] : pb[off[3]];
    });
  });
}

void k_masked_fill(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& out = outs[0];
  const Tensor& self = c.args.tensor(0);
  const Tensor& mask = c.args.tensor(1);
  // One pass: out = mask ? value : self (out is self itself for masked_fill_).
  bool usable = self.dtype() == out.dtype() && self.device() == out.device();
  Tensor x = usable ? self : dense(self, out.dtype(), out.device());
  const Dims& shape = out.shape();
  auto g =
      make_geometry<3>(shape, {out.strides(), broadcast_strides(x, shape), in_strides(mask, shape)},
                       {out.offset(), x.offset(), in_offset(mask)});
  In<bool> m = input<bool>(mask);
  KILN_CUDA_DISPATCH_ALL(out.dtype(), "masked_fill", {
    T* o = out_ptr<T>(out);
    const T* p = static_cast<const T*>(x.storage()->data);
    T v = scalar_as<T>(c.args.scalar(2));
    launch_elementwise<3>(out.numel(), g, [=] __device__(const int64_t* off) {
      o[off[0]] = m[off[2]] ? v : p[off[1]];
    });
  });
}

}  // namespace kiln::cuda

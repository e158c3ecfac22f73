// Unary and binary arithmetic on CUDA devices. See Note [CUDA elementwise kernels].
#include "kiln/backend/cuda/common.cuh"

namespace kiln::cuda {

using ops::OpKind;

namespace {

template <typename W>
__device__ inline W gelu_of(W v, bool tanh_form) {
  if (tanh_form) {
    const W k = W(0.7978845608028654);  // sqrt(2 / pi)
    return W(0.5) * v * (W(1) + tanh(k * (v + W(0.044715) * v * v * v)));
  }
  return W(0.5) * v * (W(1) + erf(v * W(0.7071067811865476)));
}

template <typename T>
__device__ inline T unary_op(OpKind op, T x, bool flag) {
  using W = opmath_t<T>;
  W v = load(x);
  if constexpr (std::is_same_v<T, bool>) {
    return x;  // abs and relu of bool are the identity
  } else {
    switch (op) {
      case OpKind::neg: return store<T>(-v);
      case OpKind::abs: if constexpr (std::is_unsigned_v<W>) return x; else return store<T>(v < W(0) ? -v : v);
      case OpKind::relu: return store<T>(v > W(0) ? v : W(0));
      default: break;
    }
    if constexpr (std::is_floating_point_v<W>) {
      switch (op) {
        case OpKind::exp: return store<T>(exp(v));
        case OpKind::log: return store<T>(log(v));
        case OpKind::sqrt: return store<T>(sqrt(v));
        case OpKind::rsqrt: return store<T>(W(1) / sqrt(v));
        case OpKind::sin: return store<T>(sin(v));
        case OpKind::cos: return store<T>(cos(v));
        case OpKind::tanh: return store<T>(tanh(v));
        case OpKind::sigmoid: return store<T>(W(1) / (W(1) + exp(-v)));
        case OpKind::silu: return store<T>(v / (W(1) + exp(-v)));
        case OpKind::gelu: return store<T>(gelu_of(v, flag));
        default: break;
      }
    }
    return x;
  }
}

template <typename W>
__device__ inline W int_pow(W base, W e) {
  if (e < 0) return base == 1 ? 1 : 0;
  W r = 1;
  while (e) {
    if (e & 1) r *= base;
    base *= base;
    e >>= 1;
  }
  return r;
}

template <typename T>
__device__ inline T binary_op(OpKind op, T a, T b, opmath_t<T> alpha) {
  using W = opmath_t<T>;
  if constexpr (std::is_same_v<T, bool>) {
    switch (op) {
      case OpKind::add: case OpKind::sub: return a || (alpha && b);
      case OpKind::mul: return a && b;
      case OpKind::pow: return a || !b;
      case OpKind::maximum: return a || b;
      case OpKind::minimum: return a && b;
      default: return a;
    }
  } else {
    W x = load(a), y = load(b);
    switch (op) {
      case OpKind::add: return store<T>(x + alpha * y);
      case OpKind::sub: return store<T>(x - alpha * y);
      case OpKind::mul: return store<T>(x * y);
      case OpKind::div: return store<T>(x / y);
      case OpKind::pow:
        if constexpr (std::is_floating_point_v<W>) return store<T>(pow(x, y));
        else return store<T>(int_pow(x, y));
      case OpKind::maximum:
      case OpKind::minimum:
        if constexpr (std::is_floating_point_v<W>)
          if (isnan(x) || isnan(y)) return store<T>(x + y);
        return store<T>(op == OpKind::maximum ? (x > y ? x : y) : (x < y ? x : y));
      default: return a;
    }
  }
}

// The input converted to the kernel's dtype (host scalars convert on the host).
Tensor as_dtype(const Tensor& t, DType dtype, Device device) {
  return t.device().is_cpu() || t.dtype() == dtype ? t : dense(t, dtype, device);
}

}  // namespace

void k_unary(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& out = outs[0];
  Tensor x = as_dtype(c.args.tensor(0), out.dtype(), out.device());
  OpKind op = c.op;
  bool flag = op == OpKind::gelu && c.args.flag(1);
  if (!is_floating(out.dtype()) && op != OpKind::neg && op != OpKind::abs && op != OpKind::relu)
    fail(ErrorKind::unsupported, "[{}] does not support dtype {} on cuda", op, out.dtype());
  auto g = make_geometry<2>(out.shape(), {out.strides(), broadcast_strides(x, out.shape())},
                            {out.offset(), x.offset()});
  KILN_CUDA_DISPATCH_ALL(out.dtype(), op, {
    T* o = out_ptr<T>(out);
    const T* p = static_cast<const T*>(x.storage()->data);
    launch_elementwise<2>(out.numel(), g, [=] __device__(const int64_t* off) {
      o[off[0]] = unary_op<T>(op, p[off[1]], flag);
    });
  });
}

void k_logical_not(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& out = outs[0];
  const Tensor& x = c.args.tensor(0);
  DType sd = x.dtype();
  const void* p = x.storage()->data;
  auto g = make_geometry<2>(out.shape(), {out.strides(), broadcast_strides(x, out.shape())},
                            {out.offset(), x.offset()});
  bool* o = out_ptr<bool>(out);
  KILN_CUDA_DISPATCH_ALL(sd, "logical_not", {
    const T* px = static_cast<const T*>(p);
    launch_elementwise<2>(out.numel(), g, [=] __device__(const int64_t* off) {
      o[off[0]] = !(load(px[off[1]]) != opmath_t<T>(0));
    });
  });
}

void k_binary(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& out = outs[0];
  Tensor a = as_dtype(c.args.tensor(0), out.dtype(), out.device());
  Tensor b = as_dtype(c.args.tensor(1), out.dtype(), out.device());
  OpKind op = c.op;
  if (op == OpKind::div && !is_floating(out.dtype()))
    fail(ErrorKind::unsupported, "[div] does not support dtype {} on cuda", out.dtype());
  const Dims& shape = out.shape();
  auto g = make_geometry<3>(shape, {out.strides(), in_strides(a, shape), in_strides(b, shape)},
                            {out.offset(), in_offset(a), in_offset(b)});
  bool has_alpha = op == OpKind::add || op == OpKind::sub;
  KILN_CUDA_DISPATCH_ALL(out.dtype(), op, {
    using W = opmath_t<T>;
    W alpha = W(1);
    if (has_alpha) {
      const Scalar& s = c.args.scalar(2);
      if constexpr (std::is_same_v<W, bool>) alpha = s.to_bool();
      else if constexpr (std::is_integral_v<W>) alpha = static_cast<W>(s.to_int());
      else alpha = static_cast<W>(s.to_double());
    }
    T* o = out_ptr<T>(out);
    In<T> pa = input<T>(a), pb = input<T>(b);
    launch_elementwise<3>(out.numel(), g, [=] __device__(const int64_t* off) {
      o[off[0]] = binary_op<T>(op, pa[off[1]], pb[off[2]], alpha);
    });
  });
}

}  // namespace kiln::cuda

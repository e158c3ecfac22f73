// Unary and binary arithmetic on CUDA devices. See Note [CUDA elementwise kernels].
#include "kiln/backend/cuda/common.cuh"
#include "kiln/backend/cuda/element_ops.h"
#include "kiln/backend/special_functions.h"

namespace kiln::cuda {

using ops::OpKind;

namespace {

template <typename T>
__device__ inline T unary_op(OpKind op, T x, int64_t attr) {
  return store<T>(unary_w(op, load(x), attr));
}

template <typename T>
__device__ inline T binary_op(OpKind op, T a, T b, opmath_t<T> alpha) {
  return store<T>(binary_w(op, load(a), load(b), alpha));
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
  int64_t attr = op == OpKind::gelu        ? int64_t{c.args.str(1) == "tanh"}
                 : op == OpKind::polygamma ? c.args.i64(1)
                                           : 0;
  bool integral_ok = op == OpKind::neg || op == OpKind::abs || op == OpKind::relu ||
                     op == OpKind::sign || op == OpKind::floor || op == OpKind::ceil ||
                     op == OpKind::round || op == OpKind::trunc;
  if (!is_floating(out.dtype()) && !integral_ok)
    fail(ErrorKind::unsupported, "[{}] does not support dtype {} on cuda", op, out.dtype());
  auto g = make_geometry<2>(out.shape(), {out.strides(), broadcast_strides(x, out.shape())},
                            {out.offset(), x.offset()});
  KILN_CUDA_DISPATCH_ALL(out.dtype(), op, {
    T* o = out_ptr<T>(out);
    const T* p = static_cast<const T*>(x.storage()->data);
    launch_elementwise<2>(out.numel(), g, [=] __device__(const int64_t* off) {
      o[off[0]] = unary_op<T>(op, p[off[1]], attr);
    });
  });
}

void k_clamp(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& out = outs[0];
  Tensor x = as_dtype(c.args.tensor(0), out.dtype(), out.device());
  bool has_lo = !c.args.is_none(1), has_hi = !c.args.is_none(2);
  auto g = make_geometry<2>(out.shape(), {out.strides(), broadcast_strides(x, out.shape())},
                            {out.offset(), x.offset()});
  KILN_CUDA_DISPATCH_ALL(out.dtype(), "clamp", {
    using W = opmath_t<T>;
    W lo = has_lo ? scalar_as<W>(c.args.scalar(1)) : W(0);
    W hi = has_hi ? scalar_as<W>(c.args.scalar(2)) : W(0);
    T* o = out_ptr<T>(out);
    const T* p = static_cast<const T*>(x.storage()->data);
    launch_elementwise<2>(out.numel(), g, [=] __device__(const int64_t* off) {
      o[off[0]] = store<T>(backend::clamp_value<W>(load(p[off[1]]), has_lo, lo, has_hi, hi));
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

void k_gelu_backward(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& out = outs[0];
  Tensor g = as_dtype(c.args.tensor(0), out.dtype(), out.device());
  Tensor x = as_dtype(c.args.tensor(1), out.dtype(), out.device());
  bool tanh_form = c.args.str(2) == "tanh";
  const Dims& shape = out.shape();
  auto geo = make_geometry<3>(shape, {out.strides(), in_strides(g, shape), in_strides(x, shape)},
                              {out.offset(), in_offset(g), in_offset(x)});
  KILN_CUDA_DISPATCH_FLOAT(out.dtype(), "gelu_backward", {
    using W = opmath_t<T>;
    T* o = out_ptr<T>(out);
    In<T> pg = input<T>(g), px = input<T>(x);
    launch_elementwise<3>(out.numel(), geo, [=] __device__(const int64_t* off) {
      W v = load(px[off[2]]);
      W d = backend::gelu_derivative(
          v, tanh_form, [](W u) { return erf(u); }, [](W u) { return exp(u); },
          [](W u) { return tanh(u); });
      o[off[0]] = store<T>(load(pg[off[1]]) * d);
    });
  });
}

void k_threshold_backward(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& out = outs[0];
  Tensor g = as_dtype(c.args.tensor(0), out.dtype(), out.device());
  Tensor x = as_dtype(c.args.tensor(1), out.dtype(), out.device());
  double threshold = c.args.scalar(2).to_double();
  const Dims& shape = out.shape();
  auto geo = make_geometry<3>(shape, {out.strides(), in_strides(g, shape), in_strides(x, shape)},
                              {out.offset(), in_offset(g), in_offset(x)});
  KILN_CUDA_DISPATCH_FLOAT(out.dtype(), "threshold_backward", {
    using W = opmath_t<T>;
    T* o = out_ptr<T>(out);
    In<T> pg = input<T>(g), px = input<T>(x);
    W th = static_cast<W>(threshold);
    launch_elementwise<3>(out.numel(), geo, [=] __device__(const int64_t* off) {
      o[off[0]] = load(px[off[2]]) <= th ? store<T>(W(0)) : store<T>(load(pg[off[1]]));
    });
  });
}

// special_unary / special_binary: the named function per element, in double inside.
void k_special(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& out = outs[0];
  bool binary = c.op == OpKind::special_binary;
  int code = ops::special_code(c.args.str(binary ? 2 : 1), binary);
  Tensor a = as_dtype(c.args.tensor(0), out.dtype(), out.device());
  Tensor b = binary ? as_dtype(c.args.tensor(1), out.dtype(), out.device()) : a;
  const Dims& shape = out.shape();
  auto g = make_geometry<3>(shape, {out.strides(), in_strides(a, shape), in_strides(b, shape)},
                            {out.offset(), in_offset(a), in_offset(b)});
  KILN_CUDA_DISPATCH_FLOAT(out.dtype(), c.op, {
    using W = opmath_t<T>;
    T* o = out_ptr<T>(out);
    In<T> pa = input<T>(a), pb = input<T>(b);
    launch_elementwise<3>(out.numel(), g, [=] __device__(const int64_t* off) {
      W x = load(pa[off[1]]);
      o[off[0]] = store<T>(binary ? backend::special_binary_of<W>(code, x, load(pb[off[2]]))
                                  : backend::special_unary_of<W>(code, x));
    });
  });
}

void k_bitwise(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& out = outs[0];
  OpKind op = c.op;
  bool binary = op != OpKind::bitwise_not;
  Tensor a = as_dtype(c.args.tensor(0), out.dtype(), out.device());
  Tensor b = binary ? as_dtype(c.args.tensor(1), out.dtype(), out.device()) : a;
  const Dims& shape = out.shape();
  auto g = make_geometry<3>(shape, {out.strides(), in_strides(a, shape), in_strides(b, shape)},
                            {out.offset(), in_offset(a), in_offset(b)});
  KILN_CUDA_DISPATCH_ALL(out.dtype(), op, {  // meta refuses floats
    T* o = out_ptr<T>(out);
    In<T> pa = input<T>(a), pb = input<T>(b);
    launch_elementwise<3>(out.numel(), g, [=] __device__(const int64_t* off) {
      o[off[0]] = backend::bitwise_of(op, pa[off[1]], pb[off[2]]);
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
  if (backend::divides_integers(op) && !is_floating(out.dtype())) {
    // A zero divisor is found by the kernel, as a bad index is (Note [Index errors found
    // by kernels]): code 2, raised at the next host wait as a `value` Error.
    KernelError* error = kernel_error_block(out.device().index);
    const char* name = ops::op_info(op).name.data();
    switch (out.dtype()) {
      KILN_CUDA_INT_CASES({
        T* o = out_ptr<T>(out);
        In<T> pa = input<T>(a), pb = input<T>(b);
        launch_elementwise<3>(out.numel(), g, [=] __device__(const int64_t* off) {
          T y = pb[off[2]];
          if (y == T(0) && atomicCAS(&error->code, 0, 2) == 0) error->op = name;
          o[off[0]] = binary_op<T>(op, pa[off[1]], y, T(1));
        });
      })
      KILN_CUDA_UNSUPPORTED(out.dtype(), op)
    }
    return;
  }
  bool has_alpha = op == OpKind::add || op == OpKind::sub;
  KILN_CUDA_DISPATCH_ALL(out.dtype(), op, {
    using W = opmath_t<T>;
    W alpha = has_alpha ? scalar_as<W>(c.args.scalar(2)) : W(1);
    T* o = out_ptr<T>(out);
    In<T> pa = input<T>(a), pb = input<T>(b);
    launch_elementwise<3>(out.numel(), g, [=] __device__(const int64_t* off) {
      o[off[0]] = binary_op<T>(op, pa[off[1]], pb[off[2]], alpha);
    });
  });
}

}  // namespace kiln::cuda

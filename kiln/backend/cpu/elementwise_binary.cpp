// Binary and bitwise kernels over broadcast, strided operands.
#include "kiln/backend/cpu/elementwise.h"
#include "kiln/backend/cpu/pointwise_fns.h"
#include "kiln/backend/cpu/vmath.h"
#include "kiln/backend/special_functions.h"
#include "kiln/backend/special_math.h"
#include "kiln/ops/meta.h"

namespace kiln::cpu {

using ops::OpKind;
using namespace elementwise;

void k_bitwise(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& out = outs[0];
  OpKind op = c.op;
  auto run = [&]<typename T>(T*) {
    if constexpr (std::is_integral_v<T>) {
      Tensor ta = cast(c.args.tensor(0), out.dtype());
      if (op == OpKind::bitwise_not)
        return unary_loop<T, T>(
            out, ta, [](T x) { return backend::bitwise_of<T>(OpKind::bitwise_not, x, x); });
      Tensor tb = cast(c.args.tensor(1), out.dtype());
      binary_loop<T, T>(out, ta, tb, [op](T x, T y) { return backend::bitwise_of(op, x, y); });
    }
  };
  KILN_DISPATCH_COMPUTE(out.dtype(), op, run(static_cast<T*>(nullptr)));
}

namespace {

// pow's exponent when it is a number (a 0-d f32/f64/i64 tensor) that PyTorch's CPU
// kernel computes without pow: 2, 3, -1, -2, and 0.5 / -0.5 as 5 / -5; else 0.
int special_exponent(const Tensor& e) {
  if (e.dim() != 0) return 0;
  double v = e.dtype() == DType::f64   ? *e.data<double>()
             : e.dtype() == DType::f32 ? *e.data<float>()
             : e.dtype() == DType::i64 ? static_cast<double>(*e.data<int64_t>())
                                       : 0.0;
  for (int k : {2, 3, -1, -2})
    if (v == k) return k;
  if (v == 0.5) return 5;
  if (v == -0.5) return -5;
  return 0;
}

}  // namespace

void k_binary(const OpCall& c, std::span<Tensor> outs) {
  DType cd = compute_dtype(outs[0].dtype());
  bool half = dense_half_case(outs[0], {&c.args.tensor(0), &c.args.tensor(1)});
  DType work = half ? outs[0].dtype() : cd;
  Tensor ta, tb;  // converted copies, only when needed
  const Tensor& a = cast_ref(c.args.tensor(0), work, ta);
  const Tensor& b = cast_ref(c.args.tensor(1), work, tb);
  Staged s(outs[0], work);
  auto run = [&]<typename T>(T*) {
    constexpr bool is_bool = std::is_same_v<T, bool>;
    auto apply = [&](auto f) {
      if constexpr (std::is_same_v<T, float>) {
        if (half) {
          if (a.dtype() == DType::f16)
            half_binary<Half>(s.dst, a, b, f);
          else
            half_binary<BFloat16>(s.dst, a, b, f);
          return;
        }
      }
      binary_loop<T, T>(s.dst, a, b, f);
    };
    switch (c.op) {
      case OpKind::add:
      case OpKind::sub: {
        T alpha = scalar_as<T>(c.args.scalar(2));
        bool sub = c.op == OpKind::sub;
        if constexpr (is_bool)
          apply([alpha](T x, T y) -> T { return x || (alpha && y); });
        else
          fns::with_add(sub, alpha, apply);
        return;
      }
      case OpKind::mul:
        if constexpr (is_bool)
          apply([](T x, T y) -> T { return x && y; });
        else
          apply([](T x, T y) -> T { return backend::wrap_mul(x, y); });
        return;
      case OpKind::div:
        if constexpr (std::is_floating_point_v<T>) {
          apply([](T x, T y) -> T { return x / y; });
          return;
        }
        break;
      case OpKind::pow:
        if constexpr (std::is_floating_point_v<T>) {
          // A number exponent PyTorch's CPU kernel special-cases: its arithmetic, so its
          // bits (x.pow(2) is RMS norm's square: a multiply, not a call to pow).
          switch (special_exponent(c.args.tensor(1))) {
            case 2: apply([](T x, T) -> T { return x * x; }); return;
            case 3: apply([](T x, T) -> T { return x * x * x; }); return;
            case -1: apply([](T x, T) -> T { return T(1) / x; }); return;
            case -2: apply([](T x, T) -> T { return T(1) / (x * x); }); return;
            case 5: apply([](T x, T) -> T { return std::sqrt(x); }); return;          // 0.5
            case -5: apply([](T x, T) -> T { return T(1) / std::sqrt(x); }); return;  // -0.5
            default: apply([](T x, T y) -> T { return std::pow(x, y); });
          }
        } else if constexpr (is_bool)
          apply([](T x, T y) -> T { return x || !y; });
        else
          apply([](T x, T y) -> T { return backend::int_pow(x, y); });
        return;
      case OpKind::maximum: apply([](T x, T y) -> T { return fns::maximum(x, y); }); return;
      case OpKind::minimum: apply([](T x, T y) -> T { return fns::minimum(x, y); }); return;
      case OpKind::remainder:
      case OpKind::fmod:
      case OpKind::floor_divide:
        if constexpr (!is_bool) {
          if constexpr (std::is_integral_v<T>)
            KILN_CHECK(!any_zero<T>(b), value, "[{}] integer division by zero (ZeroDivisionError)",
                       c.op);
          if (c.op == OpKind::remainder)
            apply([](T x, T y) -> T { return backend::remainder_of(x, y); });
          else if (c.op == OpKind::fmod)
            apply([](T x, T y) -> T { return backend::fmod_of(x, y); });
          else
            apply([](T x, T y) -> T { return backend::floor_divide_of(x, y); });
          return;
        }
        break;
      case OpKind::atan2:
        if constexpr (std::is_floating_point_v<T>) {
          apply([](T x, T y) -> T { return std::atan2(x, y); });
          return;
        }
        break;
      default: break;
    }
    fail(ErrorKind::unsupported, "[{}] does not support dtype {} on cpu", c.op, cd);
  };
  KILN_DISPATCH_COMPUTE(cd, c.op, run(static_cast<T*>(nullptr)));
  s.finish();
}

}  // namespace kiln::cpu

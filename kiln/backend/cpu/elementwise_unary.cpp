// Unary kernels (math, activations and their backward, special functions) over strided operands.
#include "kiln/backend/cpu/elementwise.h"
#include "kiln/backend/cpu/pointwise_fns.h"
#include "kiln/backend/cpu/vmath.h"
#include "kiln/backend/special_functions.h"
#include "kiln/backend/special_math.h"
#include "kiln/ops/meta.h"

namespace kiln::cpu {

using ops::OpKind;
using namespace elementwise;

void k_unary(const OpCall& c, std::span<Tensor> outs) {
  DType cd = compute_dtype(outs[0].dtype());
  bool half = dense_half_case(outs[0], {&c.args.tensor(0)});
  Tensor tx;
  const Tensor& x = cast_ref(c.args.tensor(0), half ? outs[0].dtype() : cd, tx);
  Staged s(outs[0], half ? outs[0].dtype() : cd);
  bool tanh_gelu = c.op == OpKind::gelu && c.args.str(1) == "tanh";
  auto run = [&]<typename T>(T*) {
    constexpr bool fp = std::is_floating_point_v<T>;
    auto apply = [&](auto f) { map_unary<T>(s.dst, x, half, f); };
    switch (c.op) {
      case OpKind::neg:
        if constexpr (!std::is_same_v<T, bool>) apply([](T v) -> T { return -v; });
        return;
      case OpKind::abs: apply([](T v) -> T { return fns::abs(v); }); return;
      case OpKind::relu: apply([](T v) -> T { return fns::relu(v); }); return;
      case OpKind::sign:  // of NaN: 0, as PyTorch's
        apply([](T v) -> T {
          if constexpr (std::is_same_v<T, bool>)
            return v;
          else if constexpr (std::is_unsigned_v<T>)
            return static_cast<T>(v > T(0));
          else
            return static_cast<T>((T(0) < v) - (v < T(0)));
        });
        return;
      case OpKind::floor:
      case OpKind::ceil:
      case OpKind::round:
      case OpKind::trunc:
        if constexpr (!fp) {  // integers are whole already (bool is refused by meta)
          apply([](T v) { return v; });
          return;
        }
        break;
      default: break;
    }
    if constexpr (fp) {
      if (fns::with_float_unary<T>(c.op, tanh_gelu, apply)) return;
      switch (c.op) {
        case OpKind::log1p: apply([](T v) { return std::log1p(v); }); return;
        case OpKind::expm1: apply([](T v) { return std::expm1(v); }); return;
        case OpKind::log2: apply([](T v) { return std::log2(v); }); return;
        case OpKind::exp2: apply([](T v) { return std::exp2(v); }); return;
        case OpKind::log10: apply([](T v) { return std::log10(v); }); return;
        case OpKind::erfc: apply([](T v) { return std::erfc(v); }); return;
        case OpKind::asinh: apply([](T v) { return std::asinh(v); }); return;
        case OpKind::acosh: apply([](T v) { return std::acosh(v); }); return;
        case OpKind::atanh: apply([](T v) { return std::atanh(v); }); return;
        case OpKind::erfinv: apply([](T v) { return backend::erfinv_of(v); }); return;
        case OpKind::lgamma: apply([](T v) { return backend::lgamma_of(v); }); return;
        case OpKind::digamma: apply([](T v) { return backend::digamma_of(v); }); return;
        case OpKind::polygamma: {
          int64_t n = c.args.i64(1);
          apply([n](T v) { return backend::polygamma_of(n, v); });
          return;
        }
        case OpKind::tan: apply([](T v) { return std::tan(v); }); return;
        case OpKind::atan: apply([](T v) { return std::atan(v); }); return;
        case OpKind::asin: apply([](T v) { return std::asin(v); }); return;
        case OpKind::acos: apply([](T v) { return std::acos(v); }); return;
        case OpKind::sinh: apply([](T v) { return std::sinh(v); }); return;
        case OpKind::cosh: apply([](T v) { return std::cosh(v); }); return;
        case OpKind::floor: apply([](T v) { return std::floor(v); }); return;
        case OpKind::ceil: apply([](T v) { return std::ceil(v); }); return;
        case OpKind::round: apply([](T v) { return std::nearbyint(v); }); return;  // half to even
        case OpKind::trunc: apply([](T v) { return std::trunc(v); }); return;
        default: break;
      }
    }
    fail(ErrorKind::unsupported, "[{}] does not support dtype {} on cpu", c.op, x.dtype());
  };
  KILN_DISPATCH_COMPUTE(cd, c.op, run(static_cast<T*>(nullptr)));
  s.finish();
}

// clamp: max(v, min) then min(., max), each propagating NaN (of v or of a bound); with
// min > max every element is max, as torch.clamp.
void k_clamp(const OpCall& c, std::span<Tensor> outs) {
  DType cd = compute_dtype(outs[0].dtype());
  bool half = dense_half_case(outs[0], {&c.args.tensor(0)});
  Tensor tx;
  const Tensor& x = cast_ref(c.args.tensor(0), half ? outs[0].dtype() : cd, tx);
  Staged s(outs[0], half ? outs[0].dtype() : cd);
  bool has_lo = !c.args.is_none(1), has_hi = !c.args.is_none(2);
  auto run = [&]<typename T>(T*) {
    T lo = has_lo ? scalar_as<T>(c.args.scalar(1)) : T(0);
    T hi = has_hi ? scalar_as<T>(c.args.scalar(2)) : T(0);
    if (lo != lo || hi != hi) {  // a NaN bound: NaN everywhere (clamp_value's rules)
      map_unary<T>(s.dst, x, half,
                   [=](T v) { return backend::clamp_value(v, has_lo, lo, has_hi, hi); });
      return;
    }
    // Bounds known per call, each a compare and a select the loop vectorizes (a NaN
    // input fails both compares and stays NaN); the same values as clamp_value.
    if (has_lo && has_hi)
      map_unary<T>(s.dst, x, half, [=](T v) {
        T r = v < lo ? lo : v;
        return r > hi ? hi : r;
      });
    else if (has_lo)
      map_unary<T>(s.dst, x, half, [=](T v) { return v < lo ? lo : v; });
    else if (has_hi)
      map_unary<T>(s.dst, x, half, [=](T v) { return v > hi ? hi : v; });
    else
      map_unary<T>(s.dst, x, half, [](T v) { return v; });
  };
  KILN_DISPATCH_COMPUTE(cd, c.op, run(static_cast<T*>(nullptr)));
  s.finish();
}

void k_gelu_backward(const OpCall& c, std::span<Tensor> outs) {
  DType cd = compute_dtype(outs[0].dtype());
  Tensor tg, tx;
  const Tensor& g = cast_ref(c.args.tensor(0), cd, tg);
  const Tensor& x = cast_ref(c.args.tensor(1), cd, tx);
  Staged s(outs[0], cd);
  bool tanh_form = c.args.str(2) == "tanh";
  auto run = [&]<typename T>(T*) {
    if constexpr (std::is_floating_point_v<T>) {
      auto erf_ = [](T v) { return verf(v); };
      auto exp_ = [](T v) { return vexp(v); };
      auto tanh_ = [](T v) { return vtanh(v); };
      if constexpr (std::is_same_v<T, float>)
        fns::with_gelu_backward(tanh_form, [&](auto f) { binary_loop<T, T>(s.dst, g, x, f); });
      else
        binary_loop<T, T>(s.dst, g, x, [=](T gv, T v) {
          return gv * backend::gelu_derivative(v, tanh_form, erf_, exp_, tanh_);
        });
    } else {
      fail(ErrorKind::unsupported, "[gelu_backward] does not support dtype {} on cpu", cd);
    }
  };
  KILN_DISPATCH_COMPUTE(cd, c.op, run(static_cast<T*>(nullptr)));
  s.finish();
}

void k_threshold_backward(const OpCall& c, std::span<Tensor> outs) {
  DType cd = compute_dtype(outs[0].dtype());
  Tensor tg, tx;
  const Tensor& g = cast_ref(c.args.tensor(0), cd, tg);
  const Tensor& x = cast_ref(c.args.tensor(1), cd, tx);
  Staged s(outs[0], cd);
  double threshold = c.args.scalar(2).to_double();
  auto run = [&]<typename T>(T*) {
    if constexpr (std::is_floating_point_v<T>) {
      T th = static_cast<T>(threshold);  // defined for any double (inf, NaN)
      binary_loop<T, T>(s.dst, g, x, [=](T gv, T v) { return v <= th ? T(0) : gv; });
    } else {  // compared as doubles: a threshold outside T's range converts to nothing
      binary_loop<T, T>(s.dst, g, x,
                        [=](T gv, T v) { return static_cast<double>(v) <= threshold ? T(0) : gv; });
    }
  };
  KILN_DISPATCH_COMPUTE(cd, c.op, run(static_cast<T*>(nullptr)));
  s.finish();
}

void k_logical_not(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  Tensor x = cast(self, compute_dtype(self.dtype()));
  KILN_DISPATCH_COMPUTE(x.dtype(), "logical_not",
                        unary_loop<bool, T>(outs[0], x, [](T v) { return !(v != T(0)); }));
}

// special_unary / special_binary: the named function per element, computed in double
// (kiln/backend/special_functions.h), in the output's floating type.
void k_special(const OpCall& c, std::span<Tensor> outs) {
  bool binary = c.op == OpKind::special_binary;
  int code = ops::special_code(c.args.str(binary ? 2 : 1), binary);
  DType cd = compute_dtype(outs[0].dtype());
  Tensor ta, tb;
  const Tensor& a = cast_ref(c.args.tensor(0), cd, ta);
  Staged s(outs[0], cd);
  auto run = [&]<typename T>(T*) {
    if constexpr (std::is_floating_point_v<T>) {
      if (binary) {
        const Tensor& b = cast_ref(c.args.tensor(1), cd, tb);
        binary_loop<T, T>(s.dst, a, b,
                          [code](T x, T y) { return backend::special_binary_of(code, x, y); });
      } else {
        unary_loop<T, T>(s.dst, a, [code](T x) { return backend::special_unary_of(code, x); });
      }
    } else {
      fail(ErrorKind::unsupported, "[{}] does not support dtype {} on cpu", c.op, cd);
    }
  };
  KILN_DISPATCH_COMPUTE(cd, c.op, run(static_cast<T*>(nullptr)));
  s.finish();
}

}  // namespace kiln::cpu

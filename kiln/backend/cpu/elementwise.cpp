// Unary, binary, comparison and selection kernels over broadcast, strided operands.
#include <atomic>

#include "kiln/backend/cpu/convert.h"
#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/loops.h"
#include "kiln/backend/cpu/vmath.h"
#include "kiln/backend/special_functions.h"
#include "kiln/backend/special_math.h"
#include "kiln/ops/meta.h"

namespace kiln::cpu {

using ops::OpKind;

namespace {

template <typename R, typename T, typename F>
void unary_loop(const Tensor& out, const Tensor& x, F f) {
  R* o = static_cast<R*>(out.storage()->data);
  const T* p = static_cast<const T*>(x.storage()->data);
  if (out.is_contiguous() && x.is_contiguous()) {
    R* oo = o + out.offset();
    const T* pp = p + x.offset();
    parallel_for(out.numel(), 1, [&](int64_t b, int64_t e) {
      with_best_isa([&] {
        for (int64_t i = b; i < e; ++i) oo[i] = f(pp[i]);
      });
    });
    return;
  }
  for_each_run<2>(out.shape(), {out.strides(), broadcast_strides(x, out.shape())},
                  {out.offset(), x.offset()},
                  [&](int64_t n, std::array<int64_t, 2> off, std::array<int64_t, 2> st) {
                    with_best_isa([&] {
                      for (int64_t i = 0; i < n; ++i)
                        o[off[0] + i * st[0]] = f(p[off[1] + i * st[1]]);
                    });
                  });
}

template <typename R, typename T, typename F>
void binary_loop(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  R* o = static_cast<R*>(out.storage()->data);
  const T* pa = static_cast<const T*>(a.storage()->data);
  const T* pb = static_cast<const T*>(b.storage()->data);
  if (a.shape() == out.shape() && b.shape() == out.shape() && out.is_contiguous() &&
      a.is_contiguous() && b.is_contiguous()) {  // the dense fast path
    R* oo = o + out.offset();
    const T* xa = pa + a.offset();
    const T* xb = pb + b.offset();
    parallel_for(out.numel(), 1, [&](int64_t lo, int64_t hi) {
      with_best_isa([&] {
        for (int64_t i = lo; i < hi; ++i) oo[i] = f(xa[i], xb[i]);
      });
    });
    return;
  }
  for_each_run<3>(
      out.shape(),
      {out.strides(), broadcast_strides(a, out.shape()), broadcast_strides(b, out.shape())},
      {out.offset(), a.offset(), b.offset()},
      [&](int64_t n, std::array<int64_t, 3> off, std::array<int64_t, 3> st) {
        R* oo = o + off[0];
        const T* xa = pa + off[1];
        const T* xb = pb + off[2];
        with_best_isa([&] {
          if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
            for (int64_t i = 0; i < n; ++i) oo[i] = f(xa[i], xb[i]);
          } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
            T y = *xb;
            for (int64_t i = 0; i < n; ++i) oo[i] = f(xa[i], y);
          } else {
            for (int64_t i = 0; i < n; ++i) oo[i * st[0]] = f(xa[i * st[1]], xb[i * st[2]]);
          }
        });
      });
}

// Whether any element of `t` (of element type T) is zero.
template <typename T>
bool any_zero(const Tensor& t) {
  const T* p = static_cast<const T*>(t.storage()->data);
  std::atomic<bool> zero{false};  // runs go to several threads
  for_each_run<1>(t.shape(), {t.strides()}, {t.offset()},
                  [&](int64_t n, std::array<int64_t, 1> off, std::array<int64_t, 1> st) {
                    for (int64_t i = 0; i < n; ++i)
                      if (p[off[0] + i * st[0]] == T(0)) return zero.store(true, std::memory_order_relaxed);
                  });
  return zero.load();
}

// Output goes straight into `out` when its dtype is the compute dtype, else through
// a temporary that is converted at the end.
struct Staged {
  const Tensor& out;
  Tensor tmp;
  const Tensor& dst;
  Staged(const Tensor& o, DType compute)
      : out(o),
        tmp(o.dtype() == compute ? Tensor() : empty(o.shape(), compute, o.device())),
        dst(tmp.defined() ? tmp : o) {}
  void finish() {
    if (tmp.defined()) copy_into(out, tmp);
  }
};

// The half types, dense: blocks converted to float on the stack, computed, converted
// back, so an f16 op reads and writes f16 once instead of going through f32 tensors.
bool dense_half_case(const Tensor& out, std::initializer_list<const Tensor*> ins) {
  if ((out.dtype() != DType::f16 && out.dtype() != DType::bf16) || !out.is_contiguous()) return false;
  for (const Tensor* t : ins)
    if (t->dtype() != out.dtype() || t->shape() != out.shape() || !t->is_contiguous()) return false;
  return true;
}

template <typename H, typename F>
void half_unary(const Tensor& out, const Tensor& x, F f) {
  H* o = out.data<H>();
  const H* p = x.data<H>();
  parallel_for(out.numel(), 1, [&](int64_t lo, int64_t hi) {
    float buf[kHalfBlock];
    for (int64_t i = lo; i < hi; i += kHalfBlock) {
      int64_t m = std::min(kHalfBlock, hi - i);
      convert_dense(p + i, buf, m);
      with_best_isa([&] {
        for (int64_t j = 0; j < m; ++j) buf[j] = f(buf[j]);
      });
      convert_dense(buf, o + i, m);
    }
  });
}

template <typename H, typename F>
void half_binary(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  H* o = out.data<H>();
  const H* pa = a.data<H>();
  const H* pb = b.data<H>();
  parallel_for(out.numel(), 1, [&](int64_t lo, int64_t hi) {
    float ba[kHalfBlock], bb[kHalfBlock];
    for (int64_t i = lo; i < hi; i += kHalfBlock) {
      int64_t m = std::min(kHalfBlock, hi - i);
      convert_dense(pa + i, ba, m);
      convert_dense(pb + i, bb, m);
      with_best_isa([&] {
        for (int64_t j = 0; j < m; ++j) ba[j] = f(ba[j], bb[j]);
      });
      convert_dense(ba, o + i, m);
    }
  });
}

// dst = f(x) elementwise in compute type T; `half`: x and dst are dense f16/bf16 computed
// in float blocks (T is float then).
template <typename T, typename F>
void map_unary(const Tensor& dst, const Tensor& x, bool half, F f) {
  if constexpr (std::is_same_v<T, float>) {
    if (half) {
      if (x.dtype() == DType::f16) half_unary<Half>(dst, x, f);
      else half_unary<BFloat16>(dst, x, f);
      return;
    }
  }
  unary_loop<T, T>(dst, x, f);
}

}  // namespace

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
      case OpKind::abs:
        apply([](T v) -> T {
          if constexpr (std::is_unsigned_v<T> || std::is_same_v<T, bool>) return v;
          else return v < 0 ? -v : v;
        });
        return;
      case OpKind::relu:
        apply([](T v) -> T { return v > T(0) || v != v ? v : T(0); });  // NaN stays
        return;
      case OpKind::sign:  // of NaN: 0, as PyTorch's
        apply([](T v) -> T {
          if constexpr (std::is_same_v<T, bool>) return v;
          else if constexpr (std::is_unsigned_v<T>) return static_cast<T>(v > T(0));
          else return static_cast<T>((T(0) < v) - (v < T(0)));
        });
        return;
      case OpKind::floor: case OpKind::ceil: case OpKind::round: case OpKind::trunc:
        if constexpr (!fp) {  // integers are whole already (bool is refused by meta)
          apply([](T v) { return v; });
          return;
        }
        break;
      default: break;
    }
    if constexpr (fp) {
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
        case OpKind::reciprocal: apply([](T v) { return T(1) / v; }); return;
        case OpKind::floor: apply([](T v) { return std::floor(v); }); return;
        case OpKind::ceil: apply([](T v) { return std::ceil(v); }); return;
        case OpKind::round: apply([](T v) { return std::nearbyint(v); }); return;  // half to even
        case OpKind::trunc: apply([](T v) { return std::trunc(v); }); return;
        case OpKind::exp: apply([](T v) { return std::exp(v); }); return;
        case OpKind::log: apply([](T v) { return std::log(v); }); return;
        case OpKind::sqrt: apply([](T v) { return std::sqrt(v); }); return;
        case OpKind::rsqrt: apply([](T v) { return T(1) / std::sqrt(v); }); return;
        case OpKind::sin: apply([](T v) { return std::sin(v); }); return;
        case OpKind::cos: apply([](T v) { return std::cos(v); }); return;
        case OpKind::erf: apply([](T v) { return verf(v); }); return;
        case OpKind::tanh: apply([](T v) { return vtanh(v); }); return;
        case OpKind::sigmoid:
          apply([](T v) { return T(1) / (T(1) + vexp(-v)); });
          return;
        case OpKind::silu:
          apply([](T v) { return v / (T(1) + vexp(-v)); });
          return;
        case OpKind::gelu:
          if (tanh_gelu) {
            // 0.5 v (1 + tanh(z)) = v sigmoid(2z): one exp and one division per element.
            apply([](T v) {
              const T k2 = T(2) * std::sqrt(T(2) / T(3.14159265358979323846));
              return v / (T(1) + vexp(-k2 * (v + T(0.044715) * v * v * v)));
            });
          } else {
            apply([](T v) {
              return T(0.5) * v * (T(1) + verf(v * T(0.70710678118654752440)));
            });
          }
          return;
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
    map_unary<T>(s.dst, x, half, [=](T v) { return backend::clamp_value(v, has_lo, lo, has_hi, hi); });
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
      if (tanh_form)
        binary_loop<T, T>(s.dst, g, x, [=](T gv, T v) {
          return gv * backend::gelu_derivative(v, true, erf_, exp_, tanh_);
        });
      else if constexpr (std::is_same_v<T, float>)
        binary_loop<T, T>(s.dst, g, x, [](T gv, T v) { return gv * fast_gelu_derivative(v); });
      else
        binary_loop<T, T>(s.dst, g, x, [=](T gv, T v) {
          return gv * backend::gelu_derivative(v, false, erf_, exp_, tanh_);
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
      binary_loop<T, T>(s.dst, g, x, [=](T gv, T v) { return static_cast<double>(v) <= threshold ? T(0) : gv; });
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
        binary_loop<T, T>(s.dst, a, b, [code](T x, T y) { return backend::special_binary_of(code, x, y); });
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

void k_bitwise(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& out = outs[0];
  OpKind op = c.op;
  auto run = [&]<typename T>(T*) {
    if constexpr (std::is_integral_v<T>) {
      Tensor ta = cast(c.args.tensor(0), out.dtype());
      if (op == OpKind::bitwise_not)
        return unary_loop<T, T>(out, ta, [](T x) { return backend::bitwise_of<T>(OpKind::bitwise_not, x, x); });
      Tensor tb = cast(c.args.tensor(1), out.dtype());
      binary_loop<T, T>(out, ta, tb, [op](T x, T y) { return backend::bitwise_of(op, x, y); });
    }
  };
  KILN_DISPATCH_COMPUTE(out.dtype(), op, run(static_cast<T*>(nullptr)));
}

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
          if (a.dtype() == DType::f16) half_binary<Half>(s.dst, a, b, f);
          else half_binary<BFloat16>(s.dst, a, b, f);
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
        if constexpr (is_bool) {
          apply([alpha](T x, T y) -> T { return x || (alpha && y); });
        } else if (alpha == T(1) && !sub) {
          apply([](T x, T y) -> T { return backend::wrap_add(x, y); });
        } else if (alpha == T(1)) {
          apply([](T x, T y) -> T {
            return backend::wrap_add(x, backend::wrap_mul(T(-1), y));
          });
        } else {
          T k = sub ? backend::wrap_mul(T(-1), alpha) : alpha;
          apply([k](T x, T y) -> T { return backend::wrap_add(x, backend::wrap_mul(k, y)); });
        }
        return;
      }
      case OpKind::mul:
        if constexpr (is_bool) apply([](T x, T y) -> T { return x && y; });
        else apply([](T x, T y) -> T { return backend::wrap_mul(x, y); });
        return;
      case OpKind::div:
        if constexpr (std::is_floating_point_v<T>) {
          apply([](T x, T y) -> T { return x / y; });
          return;
        }
        break;
      case OpKind::pow:
        if constexpr (std::is_floating_point_v<T>)
          apply([](T x, T y) -> T { return std::pow(x, y); });
        else if constexpr (is_bool)
          apply([](T x, T y) -> T { return x || !y; });
        else apply([](T x, T y) -> T { return backend::int_pow(x, y); });
        return;
      case OpKind::maximum:
        apply([](T x, T y) -> T {
          if constexpr (std::is_floating_point_v<T>)
            if (std::isnan(x) || std::isnan(y)) return x + y;
          return x > y ? x : y;
        });
        return;
      case OpKind::minimum:
        apply([](T x, T y) -> T {
          if constexpr (std::is_floating_point_v<T>)
            if (std::isnan(x) || std::isnan(y)) return x + y;
          return x < y ? x : y;
        });
        return;
      case OpKind::remainder:
      case OpKind::fmod:
      case OpKind::floor_divide:
        if constexpr (!is_bool) {
          if constexpr (std::is_integral_v<T>)
            KILN_CHECK(!any_zero<T>(b), value, "[{}] integer division by zero (ZeroDivisionError)", c.op);
          if (c.op == OpKind::remainder) apply([](T x, T y) -> T { return backend::remainder_of(x, y); });
          else if (c.op == OpKind::fmod) apply([](T x, T y) -> T { return backend::fmod_of(x, y); });
          else apply([](T x, T y) -> T { return backend::floor_divide_of(x, y); });
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

void k_compare(const OpCall& c, std::span<Tensor> outs) {
  DType cd = compute_dtype(ops::result_type(c.args.tensor(0), c.args.tensor(1)));
  Tensor ta, tb;
  const Tensor& a = cast_ref(c.args.tensor(0), cd, ta);
  const Tensor& b = cast_ref(c.args.tensor(1), cd, tb);
  auto run = [&]<typename T>(T*) {
    const Tensor& o = outs[0];
    switch (c.op) {
      case OpKind::eq: binary_loop<bool, T>(o, a, b, [](T x, T y) { return x == y; }); return;
      case OpKind::ne: binary_loop<bool, T>(o, a, b, [](T x, T y) { return x != y; }); return;
      case OpKind::lt: binary_loop<bool, T>(o, a, b, [](T x, T y) { return x < y; }); return;
      case OpKind::le: binary_loop<bool, T>(o, a, b, [](T x, T y) { return x <= y; }); return;
      case OpKind::gt: binary_loop<bool, T>(o, a, b, [](T x, T y) { return x > y; }); return;
      case OpKind::ge: binary_loop<bool, T>(o, a, b, [](T x, T y) { return x >= y; }); return;
      default: fail(ErrorKind::internal, "[{}] is not a comparison", c.op);
    }
  };
  KILN_DISPATCH_COMPUTE(cd, c.op, run(static_cast<T*>(nullptr)));
}

void k_where(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& out = outs[0];
  DType cd = compute_dtype(out.dtype());
  const Tensor& cond = c.args.tensor(0);
  Tensor a = cast(c.args.tensor(1), cd), b = cast(c.args.tensor(2), cd);
  Staged s(out, cd);
  KILN_DISPATCH_COMPUTE(cd, "where", {
    T* o = static_cast<T*>(s.dst.storage()->data);
    const bool* pc = static_cast<const bool*>(cond.storage()->data);
    const T* pa = static_cast<const T*>(a.storage()->data);
    const T* pb = static_cast<const T*>(b.storage()->data);
    const Dims& shape = out.shape();
    for_each_run<4>(shape,
                    {s.dst.strides(), broadcast_strides(cond, shape), broadcast_strides(a, shape),
                     broadcast_strides(b, shape)},
                    {s.dst.offset(), cond.offset(), a.offset(), b.offset()},
                    [&](int64_t n, std::array<int64_t, 4> off, std::array<int64_t, 4> st) {
                      for (int64_t i = 0; i < n; ++i)
                        o[off[0] + i * st[0]] = pc[off[1] + i * st[1]] ? pa[off[2] + i * st[2]]
                                                                       : pb[off[3] + i * st[3]];
                    });
  });
  s.finish();
}

void k_masked_fill(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& out = outs[0];
  const Tensor& self = c.args.tensor(0);
  const Tensor& mask = c.args.tensor(1);
  if (self.dtype() == out.dtype() && self.shape() == out.shape() && mask.shape() == out.shape() &&
      self.is_contiguous() && mask.is_contiguous() && out.is_contiguous()) {
    // The dense case (relu's gradient): one branch-free pass.
    KILN_DISPATCH_ALL(out.dtype(), "masked_fill", {
      T value = scalar_as<T>(c.args.scalar(2));
      T* o = out.data<T>();
      const T* s = self.data<T>();
      const bool* m = mask.data<bool>();
      parallel_for(out.numel(), 1, [&](int64_t b, int64_t e) {
        with_best_isa([&] {
          for (int64_t i = b; i < e; ++i) {  // both loaded first: a select, not a branch
            T keep = s[i];
            o[i] = m[i] ? value : keep;
          }
        });
      });
    });
    return;
  }
  bool in_place = self.storage() == out.storage() && self.offset() == out.offset() &&
                  self.strides() == out.strides() && self.shape() == out.shape();
  if (!in_place) copy_into(out, self);
  KILN_DISPATCH_ALL(out.dtype(), "masked_fill", {
    T value = scalar_as<T>(c.args.scalar(2));
    T* o = static_cast<T*>(out.storage()->data);
    const bool* m = static_cast<const bool*>(mask.storage()->data);
    for_each_run<2>(out.shape(), {out.strides(), broadcast_strides(mask, out.shape())},
                    {out.offset(), mask.offset()},
                    [&](int64_t n, std::array<int64_t, 2> off, std::array<int64_t, 2> st) {
                      for (int64_t i = 0; i < n; ++i)
                        if (m[off[1] + i * st[1]]) o[off[0] + i * st[0]] = value;
                    });
  });
}

}  // namespace kiln::cpu

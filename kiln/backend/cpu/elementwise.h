#pragma once
// The loops shared by the elementwise kernels (elementwise_unary.cpp, _binary.cpp,
// _select.cpp): strided and broadcast operands, staging through the compute dtype, and
// dense f16/bf16 in float blocks. Split in three translation units because each kernel is
// instantiated per dtype and per ISA level (isa.h): one file was the build's longest step.
#include <array>
#include <atomic>

#include "kiln/backend/cpu/convert.h"
#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/loops.h"

namespace kiln::cpu::elementwise {

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
                      if (p[off[0] + i * st[0]] == T(0))
                        return zero.store(true, std::memory_order_relaxed);
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
inline bool dense_half_case(const Tensor& out, std::initializer_list<const Tensor*> ins) {
  if ((out.dtype() != DType::f16 && out.dtype() != DType::bf16) || !out.is_contiguous())
    return false;
  for (const Tensor* t : ins)
    if (t->dtype() != out.dtype() || t->shape() != out.shape() || !t->is_contiguous()) return false;
  return true;
}

// out = f(ins...) over dense tensors of half type H, computed in float blocks; f takes N
// floats.
template <typename H, size_t N, typename F>
void half_map(const Tensor& out, std::array<const Tensor*, N> ins, F f) {
  H* o = out.data<H>();
  std::array<const H*, N> p;
  for (size_t k = 0; k < N; ++k) p[k] = ins[k]->template data<H>();
  parallel_for(out.numel(), 1, [&](int64_t lo, int64_t hi) {
    with_best_isa([&](auto width) {
      constexpr bool in_kernel = kConvertsInKernel<H, width.bytes>;
      constexpr int64_t block = in_kernel ? kHalfTile : kHalfBlock;
      float buf[N][block];
      for (int64_t i = lo; i < hi; i += block) {
        int64_t m = std::min(block, hi - i);
        for (size_t k = 0; k < N; ++k) {
          if constexpr (in_kernel)
            widen_in_kernel(p[k] + i, buf[k], m);
          else
            convert_dense(p[k] + i, buf[k], m);
        }
        for (int64_t j = 0; j < m; ++j) {
          if constexpr (N == 1)
            buf[0][j] = f(buf[0][j]);
          else
            buf[0][j] = f(buf[0][j], buf[1][j]);
        }
        if constexpr (in_kernel)
          narrow_in_kernel(buf[0], o + i, m);
        else
          convert_dense(buf[0], o + i, m);
      }
    });
  });
}

template <typename H, typename F>
void half_unary(const Tensor& out, const Tensor& x, F f) {
  half_map<H, 1>(out, {&x}, f);
}

template <typename H, typename F>
void half_binary(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  half_map<H, 2>(out, {&a, &b}, f);
}

// dst = f(x) elementwise in compute type T; `half`: x and dst are dense f16/bf16 computed
// in float blocks (T is float then).
template <typename T, typename F>
void map_unary(const Tensor& dst, const Tensor& x, bool half, F f) {
  if constexpr (std::is_same_v<T, float>) {
    if (half) {
      if (x.dtype() == DType::f16)
        half_unary<Half>(dst, x, f);
      else
        half_unary<BFloat16>(dst, x, f);
      return;
    }
  }
  unary_loop<T, T>(dst, x, f);
}

}  // namespace kiln::cpu::elementwise

#pragma once
// Internal to the CPU backend: strided loops, dtype dispatch and tensor helpers.

#include <array>
#include <cmath>

#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/device/registry.h"
#include "kiln/ops/op_table.h"

namespace kiln::cpu {

using ops::OpCall;

/** A fresh contiguous tensor on `device` (a CPU device). */
inline Tensor empty(const Dims& shape, DType dtype, Device device) {
  return make_tensor(shape, dtype, device, &device_allocator(device));
}

/** Strides of `t` seen through a broadcast to `shape` (0 on broadcast dims). */
inline Dims broadcast_strides(const Tensor& t, const Dims& shape) {
  Dims st(shape.size(), 0);
  size_t lead = shape.size() - t.shape().size();
  for (size_t i = 0; i < t.shape().size(); ++i)
    st[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  return st;
}

/** Runs `f(n, offsets, inner_strides)` over 1-D runs of `shape`, for N operands with
 * the given element strides. Adjacent dims that are contiguous for every operand are
 * merged first, so dense tensors become one run. Runs are spread over the kernel's
 * intra-op threads (parallel_for's rules for `f`: it only computes, and each run
 * writes only its own elements). */
constexpr int64_t kShortRun = 16;

template <size_t N, typename F>
void for_each_run(const Dims& shape, std::array<Dims, N> strides, std::array<int64_t, N> base,
                  F&& f) {
  if (numel_of(shape) == 0) return;
  Dims sh = shape;
  // Drop size-1 dims, then merge dims i-1, i when every operand is contiguous across them.
  for (size_t i = sh.size(); i-- > 0;) {
    if (sh[i] == 1 && sh.size() > 1) {
      sh.erase(i);
      for (auto& s : strides) s.erase(i);
    }
  }
  for (size_t i = sh.size(); i-- > 1;) {
    bool merge = true;
    for (auto& s : strides) merge = merge && s[i - 1] == s[i] * sh[i];
    if (!merge) continue;
    sh[i - 1] *= sh[i];
    sh.erase(i);
    for (auto& s : strides) {
      s[i - 1] = s[i];
      s.erase(i);
    }
  }
  if (sh.empty()) {
    f(int64_t{1}, base, std::array<int64_t, N>{});
    return;
  }
  size_t rank = sh.size();
  // Runs of a few elements (the taps of a window view, a [.., n, 2] slice) cost a call
  // and an odometer step each: the longest dim becomes the runs instead. Elementwise
  // callers do not depend on the order.
  if (rank >= 2 && sh[rank - 1] < kShortRun) {
    size_t longest = 0;
    for (size_t d = 1; d < rank; ++d)
      if (sh[d] > sh[longest]) longest = d;
    if (sh[longest] >= 2 * sh[rank - 1]) {
      int64_t size = sh[longest];
      sh.erase(longest);
      sh.push_back(size);
      for (auto& s : strides) {
        int64_t st = s[longest];
        s.erase(longest);
        s.push_back(st);
      }
    }
  }
  int64_t inner = sh[rank - 1];
  std::array<int64_t, N> inner_st;
  for (size_t k = 0; k < N; ++k) inner_st[k] = strides[k][rank - 1];
  int64_t outer = numel_of(sh) / inner;
  if (outer == 1 && inner >= 2 * kGrain) {  // one long run: split it
    parallel_for(inner, 1, [&](int64_t b, int64_t e) {
      std::array<int64_t, N> off = base;
      for (size_t k = 0; k < N; ++k) off[k] += b * inner_st[k];
      f(e - b, off, inner_st);
    });
    return;
  }
  parallel_for(outer, inner, [&](int64_t ob, int64_t oe) {
    // The odometer's position at run `ob`.
    Dims idx(rank, 0);
    std::array<int64_t, N> off = base;
    for (size_t d = rank - 1, r = static_cast<size_t>(ob); d-- > 0;) {
      idx[d] = static_cast<int64_t>(r % static_cast<size_t>(sh[d]));
      r /= static_cast<size_t>(sh[d]);
      for (size_t k = 0; k < N; ++k) off[k] += idx[d] * strides[k][d];
    }
    for (int64_t o = ob; o < oe; ++o) {
      f(inner, off, inner_st);
      for (size_t d = rank - 1; d-- > 0;) {  // odometer over the outer dims
        if (++idx[d] < sh[d]) {
          for (size_t k = 0; k < N; ++k) off[k] += strides[k][d];
          break;
        }
        for (size_t k = 0; k < N; ++k) off[k] -= strides[k][d] * (sh[d] - 1);
        idx[d] = 0;
      }
    }
  });
}

/** The dtype arithmetic runs in: f16/bf16 compute in f32. */
/** Converts between element types, going through float for the half types. */
template <typename D, typename S>
inline D convert(S s) {
  constexpr bool s_half = std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>;
  constexpr bool d_half = std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>;
  if constexpr (std::is_same_v<D, S>)
    return s;
  else if constexpr (s_half)
    return convert<D>(static_cast<float>(s));
  else if constexpr (d_half)
    return D(static_cast<float>(s));
  else if constexpr (std::is_same_v<D, bool>)
    return s != S(0);
  else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>)
    return float_to_int<D>(s);
  else
    return static_cast<D>(s);
}

/** A Scalar as element type T. */
template <typename T>
inline T scalar_as(const Scalar& s) {
  if constexpr (std::is_same_v<T, bool>)
    return s.to_bool();
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(s.to_int());
  else
    return convert<T>(s.to_double());
}

inline DType compute_dtype(DType d) { return d == DType::f16 || d == DType::bf16 ? DType::f32 : d; }

/** Copies src into dst (broadcasting src, converting dtype). */
void copy_into(const Tensor& dst, const Tensor& src);
/** Writes `v` into every element of `t`. */
void fill(const Tensor& t, const Scalar& v);
/** `t` itself if it already has `dtype`, else a converted contiguous copy on the running
 * kernel's device. */
Tensor cast(const Tensor& t, DType dtype);
/** `t` if it has `dtype`, else a converted copy kept alive in `holder`. */
inline const Tensor& cast_ref(const Tensor& t, DType dtype, Tensor& holder) {
  if (t.dtype() == dtype) return t;
  holder = cast(t, dtype);
  return holder;
}
/** `t` itself if contiguous, else a contiguous copy. */
Tensor contiguous(const Tensor& t);

}  // namespace kiln::cpu

// Runs the statement with `T` bound to the C++ type of a compute dtype.
#define KILN_CASE(D, ...)                              \
  case ::kiln::DType::D: {                             \
    using T = ::kiln::CppType<::kiln::DType::D>::type; \
    __VA_ARGS__;                                       \
    break;                                             \
  }
#define KILN_DISPATCH_FLOAT(dtype, op, ...)                                                     \
  switch (dtype) {                                                                              \
    KILN_CASE(f32, __VA_ARGS__)                                                                 \
    KILN_CASE(f64, __VA_ARGS__)                                                                 \
    default:                                                                                    \
      ::kiln::fail(::kiln::ErrorKind::unsupported, "[{}] does not support dtype {} on cpu", op, \
                   dtype);                                                                      \
  }
// The integral and bool cases shared by the dispatchers below.
#define KILN_INTEGRAL_CASES(...) \
  KILN_CASE(i64, __VA_ARGS__)    \
  KILN_CASE(i32, __VA_ARGS__)    \
  KILN_CASE(i16, __VA_ARGS__)    \
  KILN_CASE(i8, __VA_ARGS__)     \
  KILN_CASE(u8, __VA_ARGS__)     \
  KILN_CASE(b8, __VA_ARGS__)
// Every dtype arithmetic runs in (no half types: see compute_dtype).
#define KILN_DISPATCH_COMPUTE(dtype, op, ...)                                                   \
  switch (dtype) {                                                                              \
    KILN_CASE(f32, __VA_ARGS__)                                                                 \
    KILN_CASE(f64, __VA_ARGS__)                                                                 \
    KILN_INTEGRAL_CASES(__VA_ARGS__)                                                            \
    default:                                                                                    \
      ::kiln::fail(::kiln::ErrorKind::unsupported, "[{}] does not support dtype {} on cpu", op, \
                   dtype);                                                                      \
  }
// Every dtype (storage-level work: copies, fills, gathers).
#define KILN_DISPATCH_ALL(dtype, op, ...) \
  switch (dtype) {                        \
    KILN_CASE(f32, __VA_ARGS__)           \
    KILN_CASE(f64, __VA_ARGS__)           \
    KILN_CASE(f16, __VA_ARGS__)           \
    KILN_CASE(bf16, __VA_ARGS__)          \
    KILN_INTEGRAL_CASES(__VA_ARGS__)      \
  }

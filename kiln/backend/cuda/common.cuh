#pragma once
// Internal to the CUDA backend: dtype dispatch, element conversions, strided
// geometry and the launch helper every elementwise kernel uses.
//
// Note [CUDA elementwise kernels]
// One kernel template walks any strided, broadcast operands: the host merges dims that
// are contiguous for every operand (a dense tensor becomes one dim, and then the
// offsets are the index itself) and passes sizes and strides by value. Half types are
// loaded into f32 ("opmath") and stored back, so f16/bf16 need no temporaries. An op
// family shares one instantiation per dtype: the op is a runtime switch inside the
// kernel, uniform across threads, which keeps nvcc's work (and the build) small.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <type_traits>

#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/plan.h"
#include "kiln/core/error.h"
#include "kiln/device/cuda_runtime.h"
#include "kiln/device/registry.h"
#include "kiln/device/stream.h"

namespace kiln::cuda {

using ops::OpCall;
using half = __half;
using bfloat = __nv_bfloat16;

template <typename T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<half> {
  using type = float;
};
template <>
struct OpMath<bfloat> {
  using type = float;
};
template <typename T>
using opmath_t = typename OpMath<T>::type;

/** Loads an element into its arithmetic type. */
template <typename T>
__host__ __device__ inline opmath_t<T> load(T v) {
  if constexpr (std::is_same_v<T, half>)
    return __half2float(v);
  else if constexpr (std::is_same_v<T, bfloat>)
    return __bfloat162float(v);
  else
    return v;
}
/** Stores an arithmetic value as element type D. */
template <typename D, typename W>
__host__ __device__ inline D store(W w) {
  if constexpr (std::is_same_v<D, half>)
    return __float2half(static_cast<float>(w));
  else if constexpr (std::is_same_v<D, bfloat>)
    return __float2bfloat16(static_cast<float>(w));
  else if constexpr (std::is_same_v<D, bool>)
    return w != W(0);
  else
    return static_cast<D>(w);
}
template <typename D, typename S>
__host__ __device__ inline D cast(S v) {
  if constexpr (std::is_same_v<D, S>)
    return v;
  else
    return store<D>(load(v));
}

/** The launch stream: the current stream of the kernel's device (D4, checked by D8). */
inline cudaStream_t stream() {
  Device d = current_device(DeviceType::cuda);
  set_device(d.index);
  return static_cast<cudaStream_t>(current_stream(DeviceType::cuda).native_handle());
}
inline void check_launch(const char* what) { check(cudaGetLastError(), what); }
/** A dim argument wrapped into [0, rank) (meta already checked its range). */
inline int64_t wrap(int64_t d, int64_t rank) { return d < 0 ? d + std::max<int64_t>(rank, 1) : d; }

/** Strides of `t` seen through a broadcast to `shape` (0 on broadcast dims). */
inline Dims broadcast_strides(const Tensor& t, const Dims& shape) {
  return broadcast_strides(t.shape(), t.strides(), shape);
}

template <int N, typename F>
__global__ void elementwise_kernel(int64_t n, Geometry<N> g, F f) {
  int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[N];
    g.offsets(i, off);
    f(off);
  }
}

/** Runs `f(offsets)` for every element of the walk on the current stream. */
template <int N, typename F>
void launch_elementwise(int64_t n, const Geometry<N>& g, F f) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 132 * 32);
  elementwise_kernel<N><<<static_cast<unsigned>(blocks), kThreads, 0, stream()>>>(n, g, f);
  check_launch("elementwise kernel launch");
}

/** A Scalar as element (or arithmetic) type T. */
template <typename T>
T scalar_as(const Scalar& s) {
  if constexpr (std::is_same_v<T, bool>)
    return s.to_bool();
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(s.to_int());
  else
    return store<T>(s.to_double());
}

/** One input of an elementwise kernel: device memory, or a 0-dim CPU tensor (D2)
 * whose value travels as a kernel argument. */
template <typename T>
struct In {
  const T* p = nullptr;
  T value{};
  __device__ inline T operator[](int64_t off) const { return p ? p[off] : value; }
};

/** The value of a 0-dim CPU tensor as element type T (read on the host). */
template <typename T>
T host_scalar(const Tensor& t);

template <typename T>
In<T> input(const Tensor& t) {
  In<T> in;
  if (t.device().is_cpu())
    in.value = host_scalar<T>(t);
  else
    in.p = static_cast<const T*>(t.storage()->data);
  return in;
}
/** Strides and offset of an input for the walk (all 0 for a host scalar). */
inline Dims in_strides(const Tensor& t, const Dims& shape) {
  return t.device().is_cpu() ? Dims(shape.size(), 0) : broadcast_strides(t, shape);
}
inline int64_t in_offset(const Tensor& t) { return t.device().is_cpu() ? 0 : t.offset(); }

template <typename T>
T* out_ptr(const Tensor& t) {
  return static_cast<T*>(t.storage()->data);
}

}  // namespace kiln::cuda

// Runs the statement with `T` bound to the device type of `dtype`.
#define KILN_CUDA_CASE(D, Type, ...) \
  case ::kiln::DType::D: {           \
    using T = Type;                  \
    __VA_ARGS__;                     \
    break;                           \
  }
#define KILN_CUDA_FLOAT_CASES(...)                     \
  KILN_CUDA_CASE(f32, float, __VA_ARGS__)              \
  KILN_CUDA_CASE(f64, double, __VA_ARGS__)             \
  KILN_CUDA_CASE(f16, ::kiln::cuda::half, __VA_ARGS__) \
  KILN_CUDA_CASE(bf16, ::kiln::cuda::bfloat, __VA_ARGS__)
#define KILN_CUDA_INT_CASES(...)            \
  KILN_CUDA_CASE(i64, int64_t, __VA_ARGS__) \
  KILN_CUDA_CASE(i32, int32_t, __VA_ARGS__) \
  KILN_CUDA_CASE(i16, int16_t, __VA_ARGS__) \
  KILN_CUDA_CASE(i8, int8_t, __VA_ARGS__)   \
  KILN_CUDA_CASE(u8, uint8_t, __VA_ARGS__)
#define KILN_CUDA_UNSUPPORTED(dtype, op)                                                       \
  default:                                                                                     \
    ::kiln::fail(::kiln::ErrorKind::unsupported, "[{}] does not support dtype {} on cuda", op, \
                 dtype);
#define KILN_CUDA_DISPATCH_FLOAT(dtype, op, ...) \
  switch (dtype) {                               \
    KILN_CUDA_FLOAT_CASES(__VA_ARGS__)           \
    KILN_CUDA_UNSUPPORTED(dtype, op)             \
  }
#define KILN_CUDA_DISPATCH_ALL(dtype, op, ...) \
  switch (dtype) {                             \
    KILN_CUDA_FLOAT_CASES(__VA_ARGS__)         \
    KILN_CUDA_INT_CASES(__VA_ARGS__)           \
    KILN_CUDA_CASE(b8, bool, __VA_ARGS__)      \
    KILN_CUDA_UNSUPPORTED(dtype, op)           \
  }

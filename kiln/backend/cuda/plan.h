#pragma once
// Host-side planning for the CUDA kernels, free of CUDA headers so that tests check it
// on any machine: strided walks (Note [CUDA elementwise kernels]) and how a row-major
// [batch, rows, cols] operand is handed to cuBLAS (column-major).

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/backend/shared.h"  // KILN_HOST_DEVICE
#include "kiln/core/dims.h"
#include "kiln/core/error.h"

namespace kiln::cuda {

constexpr int kMaxDims = 12;

/** Division of unsigned dividends below 2^31 by a fixed divisor in [1, 2^31), as a
 * multiply-high, an add and a shift (the round-up method of Granlund and Montgomery):
 * the strided walk's per-dim division is the cost of every non-dense kernel, and a
 * 64-bit division is a long software routine on a GPU. */
struct FastDivider {
  uint32_t divisor = 1;
  uint32_t magic = 1;
  uint32_t shift = 0;

  FastDivider() = default;
  explicit FastDivider(uint32_t d) : divisor(d) {
    while ((uint64_t{1} << shift) < d) ++shift;  // shift = ceil(log2 d)
    magic = static_cast<uint32_t>((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d) / d + 1);
  }
  KILN_HOST_DEVICE inline uint32_t quotient(uint32_t n) const {
#ifdef __CUDA_ARCH__
    uint32_t high = __umulhi(n, magic);
#else
    uint32_t high = static_cast<uint32_t>((static_cast<uint64_t>(n) * magic) >> 32);
#endif
    return (high + n) >> shift;  // high <= n < 2^31: no overflow
  }
};

/** Sizes and per-operand strides (in elements) of a strided walk over N operands. */
template <int N>
struct Geometry {
  int ndim = 0;
  bool dense = true;   // at most one dim, unit strides: offset = base + index
  bool narrow = true;  // fewer than 2^31 elements: 32-bit coordinates, FastDivider
  int64_t sizes[kMaxDims];
  FastDivider dividers[kMaxDims];
  int64_t strides[N][kMaxDims];
  int64_t base[N];
  /** Offsets of element `i` (row-major order over the walk) of every operand. */
  KILN_HOST_DEVICE inline void offsets(int64_t i, int64_t* off) const {
    for (int k = 0; k < N; ++k) off[k] = base[k];
    if (dense) {
      for (int k = 0; k < N; ++k) off[k] += i;
      return;
    }
    if (narrow) {
      uint32_t rest = static_cast<uint32_t>(i);
      for (int d = ndim - 1; d >= 0; --d) {
        uint32_t q = dividers[d].quotient(rest);
        int64_t c = rest - q * dividers[d].divisor;
        rest = q;
        for (int k = 0; k < N; ++k) off[k] += c * strides[k][d];
      }
      return;
    }
    for (int d = ndim - 1; d >= 0; --d) {
      int64_t c = i % sizes[d];
      i /= sizes[d];
      for (int k = 0; k < N; ++k) off[k] += c * strides[k][d];
    }
  }
};
/** Strides of a tensor of `tshape` seen through a broadcast to `shape` (0 on broadcast dims). */
inline Dims broadcast_strides(const Dims& tshape, const Dims& tstrides, const Dims& shape) {
  Dims st(shape.size(), 0);
  size_t lead = shape.size() - tshape.size();
  for (size_t i = 0; i < tshape.size(); ++i) st[lead + i] = tshape[i] == 1 ? 0 : tstrides[i];
  return st;
}

/** The walk of `shape` over operands with the given strides and offsets, with size-1
 * dims dropped and dims merged where every operand is contiguous across them. */
template <int N>
Geometry<N> make_geometry(const Dims& shape, const std::array<Dims, N>& strides,
                          const std::array<int64_t, N>& base) {
  Geometry<N> g;
  std::vector<int64_t> sz;
  std::array<std::vector<int64_t>, N> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !sz.empty();
    for (int k = 0; k < N && merge; ++k) merge = st[k].back() == strides[k][d] * shape[d];
    if (merge) {
      sz.back() *= shape[d];
      for (int k = 0; k < N; ++k) st[k].back() = strides[k][d];
    } else {
      sz.push_back(shape[d]);
      for (int k = 0; k < N; ++k) st[k].push_back(strides[k][d]);
    }
  }
  KILN_CHECK(sz.size() <= kMaxDims, unsupported,
             "[cuda] tensors with more than {} non-mergeable dims are not supported", kMaxDims);
  g.ndim = static_cast<int>(sz.size());
  for (int k = 0; k < N; ++k) g.base[k] = base[k];
  constexpr int64_t kNarrow = int64_t{1} << 31;
  int64_t n = 1;  // the walk's element count, saturated at kNarrow
  for (int d = 0; d < g.ndim; ++d) {
    g.sizes[d] = sz[d];
    n = n >= kNarrow || sz[d] >= kNarrow ? kNarrow : std::min(n * sz[d], kNarrow);
    for (int k = 0; k < N; ++k) g.strides[k][d] = st[k][d];
  }
  g.narrow = n < kNarrow;
  if (g.narrow)
    for (int d = 0; d < g.ndim; ++d) g.dividers[d] = FastDivider(static_cast<uint32_t>(sz[d]));
  g.dense = g.ndim <= 1;
  for (int k = 0; k < N && g.dense && g.ndim == 1; ++k) g.dense = g.strides[k][0] == 1;
  return g;
}

/** How one [batch, rows, cols] operand reaches cuBLAS. A row-major matrix read
 * column-major is its transpose, so `trans` is false for row-major operands; a layout
 * that is neither needs a dense copy first (then row-major with ld = cols). */
struct GemmOperand {
  bool copy = false;
  bool trans = false;
  int64_t ld = 1;
  int64_t batch_stride = 0;
};

inline GemmOperand plan_operand(int64_t batch, int64_t r, int64_t c, int64_t sb, int64_t s1,
                                int64_t s2) {
  GemmOperand o;
  if ((c == 1 || s2 == 1) && (r == 1 || s1 >= std::max<int64_t>(c, 1))) {
    o.ld = r == 1 ? std::max<int64_t>(c, 1) : s1;  // row-major
  } else if ((r == 1 || s1 == 1) && (c == 1 || s2 >= std::max<int64_t>(r, 1))) {
    o.trans = true;  // column-major
    o.ld = c == 1 ? std::max<int64_t>(r, 1) : s2;
  } else {
    o.copy = true;
    o.ld = std::max<int64_t>(c, 1);
    sb = r * c;
  }
  o.batch_stride = batch == 1 ? 0 : sb;
  return o;
}

/** The arguments of cublasGemmStridedBatchedEx for dense row-major C[batch, m, n] =
 * A[batch, m, k] @ B[batch, k, n]: cuBLAS computes C^T = B^T A^T, so its first operand
 * is B and its second A. */
struct GemmCall {
  bool trans_first, trans_second;
  int64_t rows, cols, inner;  // cuBLAS's m, n, k: n, m, k of the row-major product
  int64_t ld_first, ld_second, ldc;
  int64_t stride_first, stride_second, stride_c;
  int64_t batch;
};

inline GemmCall plan_gemm(int64_t batch, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                          const GemmOperand& b) {
  return GemmCall{b.trans,        a.trans,        n,     m,    k, b.ld, a.ld, n,
                  b.batch_stride, a.batch_stride, m * n, batch};
}

/** The one batch stride of batch dims `batch` with (broadcast) strides `strides`, when
 * they collapse into one dim (each outer stride = inner stride × inner size, size-1
 * dims ignored); nullopt when a dense copy is needed. */
inline std::optional<int64_t> collapsed_batch_stride(const Dims& batch, const Dims& strides) {
  int64_t bs = 0, next = -1;
  for (size_t i = batch.size(); i-- > 0;) {
    if (batch[i] == 1) continue;
    if (next < 0)
      bs = strides[i];
    else if (strides[i] != next)
      return std::nullopt;
    next = strides[i] * batch[i];
  }
  return bs;
}

}  // namespace kiln::cuda

#pragma once
// Internal to the CPU backend: f32 matrix products through oneDNN's matmul primitive.

#include <cstdint>

#include "kiln/ops/meta.h"

namespace kiln::cpu {

/** A batch of matrices in memory: element strides between matrices, rows and columns. */
struct MatrixBatch {
  float* data;
  int64_t batch_stride, row_stride, col_stride;
};

/** Whether this build has oneDNN. */
bool onednn_available();

/** Whether oneDNN runs its AVX-512 kernels here (the CPU has them and ONEDNN_MAX_CPU_ISA
 * allows them). */
bool onednn_avx512();

/** oneDNN's process-wide set-up (its engine, CPU detection, primitive cache: ~1.5 MiB,
 * 0.1 ms), done when the CPU backend starts rather than inside the first product, the
 * way a framework's math library is ready once it is loaded. No-op without oneDNN. */
void onednn_warm_up();

/** Elementwise work done on the product where its tiles are still in registers: ReLU,
 * then a residual of c's shape added (a product's epilogue, kiln/runtime/executor.cpp). */
struct MatmulEpilogue {
  bool relu = false;
  const float* residual = nullptr;  // with c's layout
  int64_t residual_row_stride = 0;
};

/** c[i] = beta * c[i] + alpha * a[i] @ b[i] (+ bias on every row) for i < batch, with a[i]
 * [n, k], b[i] [k, m], c[i] [n, m] and `bias` (optional) m contiguous floats; on the
 * running kernel's intra-op threads. Throws an internal Error when oneDNN refuses the
 * shapes (callers only pass what it takes). */
void onednn_matmul(int64_t batch, int64_t n, int64_t m, int64_t k, MatrixBatch a, MatrixBatch b,
                   MatrixBatch c, float alpha, float beta, const float* bias = nullptr,
                   const MatmulEpilogue& epilogue = {});

/** A convolution's operands: its geometry, f32 data and element strides (rank + 2 each)
 * of input and weight, a dense bias (or null), a contiguous output. */
struct ConvOperands {
  const ops::ConvGeometry& geometry;
  const float* src;
  const int64_t* src_strides;
  const float* weights;
  const int64_t* weight_strides;
  const float* bias;
  float* dst;
};

/** dst = the convolution of src by weights (+ bias), through oneDNN's convolution
 * primitive in the layouts it picks for this CPU (Note [Convolution on the CPU]). */
void onednn_convolution(const ConvOperands& operands);

}  // namespace kiln::cpu

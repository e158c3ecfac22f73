#pragma once
// The CUDA backend's kernel table, and the host-side helpers its kernels share.
// (No CUDA headers: dispatch includes this.)

#include "kiln/backend/shared.h"
#include "kiln/ops/op_table.h"

namespace kiln::cuda {

/** The CUDA kernel of every op that has one; null entries are unsupported. */
const ops::KernelTable& kernels();

KILN_KERNELS(KILN_DECLARE_KERNEL)

/** c = beta * c + alpha * a @ b for [batch, m, k] x [batch, k, n] into a dense
 * [batch, m, n] on the current device (matmul's kernels and kiln::gemm call it). */
void gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta);

// Host-side helpers (copy.cu), for kernels on the current CUDA device.
/** A fresh contiguous tensor on `device`. */
Tensor empty(const Dims& shape, DType dtype, Device device);
/** Copies `src` into `dst` on the GPU, broadcasting and converting dtype. `src` is a
 * tensor on dst's device, or a 0-dim CPU tensor (D2). */
void copy_into(const Tensor& dst, const Tensor& src);
/** `t` if it has `dtype` and is dense, else a converted dense copy on `device`. */
Tensor dense(const Tensor& t, DType dtype, Device device);
/** Opens cuBLAS (it is loaded on first use, not linked) and resolves the functions kiln
 * calls; throws a backend Error naming what is missing. Needs no GPU. */
void load_cublas();
/** f16/bf16 arithmetic runs in f32 where a kernel needs a separate buffer. */
inline DType compute_dtype(DType d) { return d == DType::f16 || d == DType::bf16 ? DType::f32 : d; }

}  // namespace kiln::cuda

#pragma once
// The CUDA backend's kernel table, and the host-side helpers its kernels share.
// (No CUDA headers: dispatch includes this.)

#include "kiln/ops/op_table.h"

namespace kiln::cuda {

/** The CUDA kernel of every op that has one; null entries are unsupported. */
const ops::KernelTable& kernels();

#define KILN_CUDA_KERNEL(name) void name(const ops::OpCall&, std::span<Tensor>);
KILN_CUDA_KERNEL(k_empty)
KILN_CUDA_KERNEL(k_full)
KILN_CUDA_KERNEL(k_arange)
KILN_CUDA_KERNEL(k_rand)
KILN_CUDA_KERNEL(k_randn)
KILN_CUDA_KERNEL(k_unary)
KILN_CUDA_KERNEL(k_logical_not)
KILN_CUDA_KERNEL(k_binary)
KILN_CUDA_KERNEL(k_compare)
KILN_CUDA_KERNEL(k_where)
KILN_CUDA_KERNEL(k_masked_fill)
KILN_CUDA_KERNEL(k_copy_)
KILN_CUDA_KERNEL(k_fill_)
KILN_CUDA_KERNEL(k_sum_mean)
KILN_CUDA_KERNEL(k_amax)
KILN_CUDA_KERNEL(k_max_dim)
KILN_CUDA_KERNEL(k_var)
KILN_CUDA_KERNEL(k_softmax)
KILN_CUDA_KERNEL(k_mm)
KILN_CUDA_KERNEL(k_bmm)
KILN_CUDA_KERNEL(k_matmul)
KILN_CUDA_KERNEL(k_addmm)
KILN_CUDA_KERNEL(k_linear)
KILN_CUDA_KERNEL(k_cat)
KILN_CUDA_KERNEL(k_as_strided_scatter)
KILN_CUDA_KERNEL(k_index_select)
KILN_CUDA_KERNEL(k_gather)
KILN_CUDA_KERNEL(k_embedding)
KILN_CUDA_KERNEL(k_clone)
KILN_CUDA_KERNEL(k_layer_norm)
KILN_CUDA_KERNEL(k_to_copy)
#undef KILN_CUDA_KERNEL

// Host-side helpers (copy.cu), for kernels on the current CUDA device.
/** A fresh contiguous tensor on `device`. */
Tensor empty(const Dims& shape, DType dtype, Device device);
/** Copies `src` into `dst` on the GPU, broadcasting and converting dtype. `src` is a
 * tensor on dst's device, or a 0-dim CPU tensor (D2). */
void copy_into(const Tensor& dst, const Tensor& src);
/** `t` if it has `dtype` and is dense, else a converted dense copy on `device`. */
Tensor dense(const Tensor& t, DType dtype, Device device);
/** f16/bf16 arithmetic runs in f32 where a kernel needs a separate buffer. */
inline DType compute_dtype(DType d) { return d == DType::f16 || d == DType::bf16 ? DType::f32 : d; }

}  // namespace kiln::cuda

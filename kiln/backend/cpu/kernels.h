#pragma once
// The CPU backend's kernels and its kernel table.

#include "kiln/ops/op_table.h"

namespace kiln::cpu {

/** The CPU kernel of every op that has one; null entries are unsupported. */
const ops::KernelTable& kernels();

#define KILN_CPU_KERNEL(name) void name(const ops::OpCall&, std::span<Tensor>);
KILN_CPU_KERNEL(k_empty)
KILN_CPU_KERNEL(k_full)
KILN_CPU_KERNEL(k_arange)
KILN_CPU_KERNEL(k_rand)
KILN_CPU_KERNEL(k_randn)
KILN_CPU_KERNEL(k_unary)
KILN_CPU_KERNEL(k_logical_not)
KILN_CPU_KERNEL(k_binary)
KILN_CPU_KERNEL(k_compare)
KILN_CPU_KERNEL(k_where)
KILN_CPU_KERNEL(k_masked_fill)
KILN_CPU_KERNEL(k_copy_)
KILN_CPU_KERNEL(k_fill_)
KILN_CPU_KERNEL(k_sum_mean)
KILN_CPU_KERNEL(k_amax)
KILN_CPU_KERNEL(k_max_dim)
KILN_CPU_KERNEL(k_var)
KILN_CPU_KERNEL(k_softmax)
KILN_CPU_KERNEL(k_mm)
KILN_CPU_KERNEL(k_bmm)
KILN_CPU_KERNEL(k_matmul)
KILN_CPU_KERNEL(k_addmm)
KILN_CPU_KERNEL(k_linear)
KILN_CPU_KERNEL(k_cat)
KILN_CPU_KERNEL(k_as_strided_scatter)
KILN_CPU_KERNEL(k_index_select)
KILN_CPU_KERNEL(k_gather)
KILN_CPU_KERNEL(k_embedding)
KILN_CPU_KERNEL(k_clone)
KILN_CPU_KERNEL(k_layer_norm)
KILN_CPU_KERNEL(k_to_copy)
#undef KILN_CPU_KERNEL

}  // namespace kiln::cpu

#pragma once
// The CPU backend's kernels and its kernel table.

#include "kiln/backend/shared.h"
#include "kiln/ops/op_table.h"

namespace kiln::cpu {

/** The CPU kernel of every op that has one; null entries are unsupported. */
const ops::KernelTable& kernels();

KILN_KERNELS(KILN_DECLARE_KERNEL)

}  // namespace kiln::cpu

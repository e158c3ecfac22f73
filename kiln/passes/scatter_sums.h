#pragma once
// Sums of gradients scattered into zeros, as the backward of select/slice makes them.

#include "kiln/ir/graph.h"

namespace kiln::passes {

/** Note [Sums of disjoint scatters]: select and slice pass their gradient back as
 * zeros with the gradient written into a region (`full` 0 + `as_strided_scatter`), and
 * the gradients of several selects of one tensor (q, k and v of a fused qkv) are then
 * summed: three tensors of zeros filled and cloned, two full-size adds. Where one
 * operand of an `add` (alpha 1) is a single region written into zeros and the other is
 * zeros written in regions disjoint from it (their element ranges do not meet), the add
 * becomes that region written into the other operand: the same values (up to the sign
 * of a zero: 0 + -0 is +0, a scatter keeps -0), one zero fill for the whole sum. When
 * the regions are dense and tile the whole tensor (q, k and v of a qkv gradient), and no
 * one else reads the fill or a partial sum, the fill becomes `empty`: every element is
 * written anyway. Returns the number of adds and fills rewritten; the scatters and fills
 * the adds no longer read are removed. */
int merge_disjoint_scatters(ir::Graph& graph);

}  // namespace kiln::passes

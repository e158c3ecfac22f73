#pragma once
// Rematerialization: cheap activations recomputed where a late use needs them, instead
// of kept alive from the forward to the backward of a train step.

#include "kiln/ir/graph.h"

namespace kiln::passes {

/** Note [Recomputed activations]
 * A GELU or SiLU value read again long after its first use -- a train step's backward
 * reads the activation its forward fed to the next linear -- is recomputed right before
 * that later use, when its input is read there or later anyway (the activation's own
 * backward formula reads it): one more pass over a tensor that is alive anyway, instead
 * of a second tensor of the same size alive in between. That is the choice
 * torch.compile's partitioner makes for pointwise ops (eager PyTorch saves both). The
 * recomputed value has the same bits. Returns the number of values recomputed. */
int rematerialize_activations(ir::Graph& graph);

}  // namespace kiln::passes

#pragma once
// Runs a graph on real (or fake) tensors through normal dispatch, so every call obeys
// device checks, guards, streams and any active modes.

#include "kiln/ir/graph.h"

namespace kiln::ir {

/** Runs `graph` with `inputs` bound to its input nodes in order; returns the values of
 * the output node. Throws a value Error naming the input when the count, shape, dtype
 * or device of an input differs from the input node's meta. */
TensorList interpret(const Graph& graph, const TensorList& inputs);

}  // namespace kiln::ir

#pragma once
// Re-inplacing: functional updates of state that a program writes back become in-place
// ops on that state, so the new values need no buffers of their own.

#include <utility>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::passes {

/** For each (input node, output index) pair, where the output is the new value the
 * runtime writes back into that input: when the value is made by a chain of functional
 * ops with an in-place variant (add, sub, mul, div, ...), each taking the previous
 * link as `self` and starting at the input, and nothing reads the input (or a link)
 * after the op that replaces it, the chain is rewritten to the in-place ops. The output
 * then aliases the input, and writing it back is a copy onto itself, which the runtime
 * skips. Returns the number of ops rewritten. */
int reinplace_write_backs(ir::Graph& graph,
                          const std::vector<std::pair<ir::Node*, int>>& write_backs);

}  // namespace kiln::passes

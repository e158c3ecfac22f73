#pragma once
// Fusion of elementwise chains: which call nodes of a graph can run together as one pass
// over memory (the executor runs such a region with one kernel; the CPU's is
// kiln/backend/cpu/pointwise.h). The graph itself is not changed: a program file keeps
// the ops it was exported with, and fusion is the runtime's choice, per device.

#include <functional>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::passes {

/** Elementwise call nodes of one shape that run as one step where the last of them is
 * (the others are deferred to it). */
struct PointwiseRegion {
  std::vector<ir::Node*> nodes;  // in program order
};

/** Note [Regions of elementwise nodes]
 * Walking the graph in order, a node `fusible` accepts joins the region of a node it
 * reads (regions it reads from are merged) or opens one. Because a region runs where its
 * last node is, a region is closed -- nothing joins it any more -- at the first node
 * outside it that
 *   - reads a value the region makes (it must exist by then),
 *   - reads memory the region writes in place, or
 *   - writes memory the region reads or writes;
 * so deferring its nodes can never change what any node reads. Memory is followed
 * through views and in-place ops to its root value. Regions of one node are dropped, and
 * one has at most `max_nodes`. `fusible` is the caller's: op, dtype, layout, device. */
std::vector<PointwiseRegion> find_pointwise_regions(
    const ir::Graph& graph, const std::function<bool(const ir::Node&)>& fusible, size_t max_nodes);

}  // namespace kiln::passes

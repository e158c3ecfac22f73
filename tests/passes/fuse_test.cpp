// Regions of elementwise nodes (Note [Regions of elementwise nodes] in kiln/passes/fuse.h)
// on hand-built graphs with in-place ops, as a train step's update has them.
#include "kiln/passes/fuse.h"

#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "kiln/passes/rematerialize.h"

namespace kiln::passes {
namespace {

using ir::Node;
using ir::Ref;
using ops::OpKind;

ir::ValueMeta meta(Dims shape) {
  return {shape, contiguous_strides(shape), 0, DType::f32, Device("cpu:0")};
}

// The elementwise call nodes of these graphs may join a region.
bool any(const ir::Node& n) {
  return n.op() != OpKind::sum && n.op() != OpKind::clone && n.op() != OpKind::copy_;
}

std::vector<std::vector<Node*>> regions(const ir::Graph& g, size_t max_nodes = 32) {
  std::vector<std::vector<Node*>> out;
  for (PointwiseRegion& r : find_pointwise_regions(g, any, max_nodes)) out.push_back(r.nodes);
  return out;
}

// A chain of reads joins; two chains that meet merge; a chain in place on an input stays
// one region with the functional nodes around it.
TEST(FuseRegions, ChainsJoinAndMeetingChainsMerge) {
  ir::Graph g;
  Node* x = g.add_input("x", meta({8}));
  Node* m = g.add_input("m", meta({8}));
  Node* a = g.add_call(OpKind::mul, {Ref{x}, Scalar(2)}, {meta({8})});
  Node* b = g.add_call(OpKind::mul_, {Ref{m}, Scalar(0.9)}, {meta({8})});  // m's chain
  Node* c = g.add_call(OpKind::add_, {Ref{b}, Ref{a}, Scalar(0.1)}, {meta({8})});
  Node* d = g.add_call(OpKind::sqrt, {Ref{c}}, {meta({8})});
  g.set_output({Ref{d}});
  EXPECT_EQ(regions(g), (std::vector<std::vector<Node*>>{{a, b, c, d}}));
  EXPECT_TRUE(regions(g, 3).size() == 1 && regions(g, 3)[0].size() == 3);  // at most 3
}

// A region ends before a node outside it that reads its value, reads memory it writes,
// or writes memory it reads: the nodes after that start a new region.
TEST(FuseRegions, OutsideReadsAndWritesEndARegion) {
  for (int kind : {0, 1, 2}) {
    SCOPED_TRACE(kind);
    ir::Graph g;
    Node* x = g.add_input("x", meta({8}));
    Node* y = g.add_input("y", meta({8}));
    Node* a = g.add_call(OpKind::mul, {Ref{x}, Scalar(2)}, {meta({8})});
    Node* b = g.add_call(OpKind::add_, {Ref{y}, Ref{a}, Scalar(1)}, {meta({8})});  // writes y
    Node* outside = nullptr;
    if (kind == 0)  // reads the region's value a
      outside =
          g.add_call(OpKind::sum, {Ref{a}, std::monostate{}, false, std::monostate{}}, {meta({})});
    else if (kind == 1)  // reads y, which the region wrote
      outside = g.add_call(OpKind::clone, {Ref{y}}, {meta({8})});
    else  // writes x, which the region read
      outside = g.add_call(OpKind::copy_, {Ref{x}, Ref{y}}, {meta({8})});
    Node* c = g.add_call(OpKind::mul, {Ref{b}, Ref{a}}, {meta({8})});
    Node* d = g.add_call(OpKind::neg, {Ref{c}}, {meta({8})});
    g.set_output({Ref{d}, Ref{outside}});
    auto got = regions(g, 32);
    std::vector<std::vector<Node*>> want = {{a, b}, {c, d}};
    EXPECT_EQ(got, want);
  }
}

// Nodes that are not fusible never join, and a region of one node is no region.
TEST(FuseRegions, SingleNodesAreNoRegion) {
  ir::Graph g;
  Node* x = g.add_input("x", meta({8}));
  Node* a = g.add_call(OpKind::relu, {Ref{x}}, {meta({8})});
  Node* b = g.add_call(OpKind::clone, {Ref{a}}, {meta({8})});
  Node* c = g.add_call(OpKind::exp, {Ref{b}}, {meta({8})});
  g.set_output({Ref{c}});
  auto only_pointwise = [](const ir::Node& n) { return n.op() != OpKind::clone; };
  EXPECT_TRUE(find_pointwise_regions(g, only_pointwise, 32).empty());
}

// Note [Recomputed activations]: a GELU read again where its input is still alive is
// recomputed right before that read; one whose input dies before is kept.
TEST(Rematerialize, LateUsesOfAGeluReadARecomputedOne) {
  for (bool input_alive : {true, false}) {
    SCOPED_TRACE(input_alive);
    ir::Graph g;
    Node* x = g.add_input("x", meta({8}));
    Node* u = g.add_call(OpKind::exp, {Ref{x}}, {meta({8})});
    Node* v = g.add_call(OpKind::gelu, {Ref{u}, Str("none")}, {meta({8})});
    Node* early = g.add_call(OpKind::neg, {Ref{v}}, {meta({8})});
    Node* mid = g.add_call(OpKind::exp, {Ref{early}}, {meta({8})});
    Node* late = g.add_call(OpKind::mul, {Ref{mid}, Ref{v}}, {meta({8})});
    Node* out = late;
    if (input_alive)
      out = g.add_call(OpKind::gelu_backward, {Ref{late}, Ref{u}, Str("none")}, {meta({8})});
    g.set_output({Ref{out}});
    EXPECT_EQ(rematerialize_activations(g), input_alive ? 1 : 0);
    g.verify();
    Node* read = std::get<Ref>(late->args()[1]).node;
    if (!input_alive) {
      EXPECT_EQ(read, v);
      continue;
    }
    EXPECT_NE(read, v);
    EXPECT_EQ(read->op(), OpKind::gelu);
    EXPECT_EQ(std::get<Ref>(read->args()[0]).node, u);
    EXPECT_EQ(read->next(), late);  // right before the late use
    EXPECT_EQ(v->users().size(), 1u);
  }
}

}  // namespace
}  // namespace kiln::passes

// kiln::ir: construction, user lists, erase, the printer, the verifier, DCE and CSE.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln::ir {
namespace {

using kiln::testing::expect_error;
using ops::OpKind;

ValueMeta meta(Dims shape, DType dtype = f32) {
  return {shape, contiguous_strides(shape), 0, dtype, Device("cpu:0")};
}

// x, y -> a = add(x, y); b = mul(a, y); return b
struct Small {
  Graph g;
  Node *x, *y, *a, *b;
  Small() {
    x = g.add_input("x", meta({4}));
    y = g.add_input("y", meta({4}));
    a = g.add_call(OpKind::add, {Ref{x}, Ref{y}, Scalar(1)}, {meta({4})});
    b = g.add_call(OpKind::mul, {Ref{a}, Ref{y}}, {meta({4})});
    g.set_output({Ref{b}});
  }
};

TEST(Graph, UsersAreMaintained) {
  Small s;
  EXPECT_EQ(s.x->users(), NodeList{s.a});
  EXPECT_EQ(s.y->users(), (NodeList{s.a, s.b}));
  EXPECT_EQ(s.b->users(), NodeList{s.g.output()});
  EXPECT_EQ(s.g.size(), 5u);
  s.g.verify();
}

TEST(Graph, EraseRefusesWhileUsed) {
  Small s;
  expect_error([&] { s.g.erase(s.a); }, ErrorKind::value,
               "[graph] cannot erase %add: it still has 1 user(s), e.g. %mul");
  s.g.replace_all_uses(s.a, s.x);  // b = mul(x, y)
  EXPECT_TRUE(s.a->users().empty());
  s.g.erase(s.a);
  EXPECT_EQ(s.x->users(), NodeList{s.b});
  EXPECT_EQ(s.y->users(), NodeList{s.b});
  s.g.verify();
  EXPECT_EQ(s.g.str(),
            "%x : f32[4]@cpu:0 = input()\n"
            "%y : f32[4]@cpu:0 = input()\n"
            "%mul : f32[4]@cpu:0 = mul(%x, %y)\n"
            "return %mul\n");
}

TEST(Graph, PrinterOmitsDefaultsAndNamesUniquely) {
  Graph g;
  Node* x = g.add_input("x", meta({2, 3}));
  Node* s1 = g.add_call(OpKind::sum, {Ref{x}, IntList{1}, false, std::monostate{}}, {meta({2})});
  Node* s2 = g.add_call(OpKind::sum, {Ref{x}, IntList{0}, true, f64}, {meta({1, 3}, f64)});
  Node* c = g.add_constant(tensor({1.5, 2}), "scale");
  Node* m = g.add_call(OpKind::max, {Ref{x}, int64_t{1}, false}, {meta({2}), meta({2}, i64)});
  g.set_output({Ref{s1}, Ref{s2}, Ref{c}, Ref{m, 1}});
  g.verify();
  EXPECT_EQ(g.str(),
            "%x : f32[2,3]@cpu:0 = input()\n"
            "%sum : f32[2]@cpu:0 = sum(%x, dim=[1])\n"
            "%sum_1 : f64[1,3]@cpu:0 = sum(%x, dim=[0], keepdim=True, dtype=f64)\n"
            "%scale : f32[2]@cpu:0 = constant([1.5, 2.])\n"
            "%max : (f32[2]@cpu:0, i64[2]@cpu:0) = max(%x, dim=1)\n"
            "return (%sum, %sum_1, %scale, %max.1)\n");
}

// Note [Node names]: numbered names are implied by counters, yet never collide with
// names given as such, before or after the numbering reaches them.
TEST(Graph, NumberedNamesNeverCollideWithGivenNames) {
  Graph g;
  Node* given_early = g.add_input("neg_2", meta({4}));  // given before the numbering reaches it
  std::vector<std::string> names;
  Node* last = given_early;
  for (int i = 0; i < 4; ++i) {
    last = g.add_call(OpKind::neg, {Ref{last}}, {meta({4})});
    names.push_back(last->name());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"neg", "neg_1", "neg_3", "neg_4"}));
  // given after: neg_1 and neg_4 are taken by numbering, neg_9 is free, "neg" is taken
  EXPECT_EQ(g.add_input("neg_1", meta({4}))->name(), "neg_1_1");
  EXPECT_EQ(g.add_input("neg_4", meta({4}))->name(), "neg_4_1");
  EXPECT_EQ(g.add_input("neg_9", meta({4}))->name(), "neg_9");
  EXPECT_EQ(g.add_input("neg", meta({4}))->name(), "neg_5");
  // "neg_05" and "neg_x" are not numbered names: taken as given
  EXPECT_EQ(g.add_input("neg_05", meta({4}))->name(), "neg_05");
  for (int i = 0; i < 4; ++i) last = g.add_call(OpKind::neg, {Ref{last}}, {meta({4})});
  EXPECT_EQ(last->name(), "neg_10");  // neg_6, neg_7, neg_8, then neg_9 (given) is skipped
  std::set<std::string> seen;
  for (const Node* n : g.nodes()) EXPECT_TRUE(seen.insert(n->name()).second) << n->name();
}

TEST(Graph, OpNamesMeetGivenNamesAndErasedNamesAreNotReused) {
  Graph g;
  Node* x = g.add_input("relu", meta({4}));  // an input that takes an op's base name
  Node* a = g.add_call(OpKind::relu, {Ref{x}}, {meta({4})});
  Node* b = g.add_call(OpKind::relu, {Ref{a}}, {meta({4})});
  EXPECT_EQ(a->name(), "relu_1");
  EXPECT_EQ(b->name(), "relu_2");
  Node* c = g.add_call(OpKind::_to_copy, {Ref{b}, DType::f32, Device("cpu:0"), false}, {meta({4})});
  EXPECT_EQ(c->name(), "to_copy");  // a leading underscore is dropped
  g.erase(c);
  EXPECT_EQ(g.add_input("to_copy", meta({4}))->name(), "to_copy_1");
  g.erase(b);
  EXPECT_EQ(g.add_input("relu_2", meta({4}))->name(), "relu_2_1");
}

// Note [Node names]: names are made on first request, in creation order, so a node's
// name is the same whenever it is asked for, and a node erased before anyone asked
// still takes its name.
TEST(Graph, NamesDoNotDependOnWhenTheyAreAsked) {
  auto build = [](Graph& g, bool ask_each) {
    std::vector<Node*> alive;
    auto keep = [&](Node* n) {
      if (ask_each) (void)n->name();
      alive.push_back(n);
      return n;
    };
    Node* x = keep(g.add_input("x", meta({4})));
    Node* a = keep(g.add_call(OpKind::neg, {Ref{x}}, {meta({4})}));
    Node* dead = g.add_call(OpKind::neg, {Ref{a}}, {meta({4})});  // neg_1, erased unasked
    Node* dead_given = g.add_input("y", meta({4}));               // y, erased unasked
    g.erase(dead);
    g.erase(dead_given);
    keep(g.add_input("y", meta({4})));                               // y_1
    Node* b = keep(g.add_call(OpKind::neg, {Ref{a}}, {meta({4})}));  // neg_2
    keep(g.add_call(OpKind::relu, {Ref{b}}, {meta({4})}, "", "neg_3"));
    keep(g.add_call(OpKind::neg, {Ref{b}}, {meta({4})}));  // neg_4 (neg_3 is given)
    keep(g.set_output({Ref{b}}));
    return alive;
  };
  Graph early, late;
  std::vector<Node*> e = build(early, true), l = build(late, false);
  std::vector<std::string> names;
  for (Node* n : l) names.push_back(n->name());
  EXPECT_EQ(names,
            (std::vector<std::string>{"x", "neg", "y_1", "neg_2", "neg_3", "neg_4", "output"}));
  for (size_t i = 0; i < e.size(); ++i) EXPECT_EQ(e[i]->name(), names[i]);

  // First requests from several threads at once (a const graph is shared by readers).
  Graph shared;
  std::vector<Node*> nodes = build(shared, false);
  std::vector<std::thread> readers;
  std::vector<std::vector<std::string>> seen(4);
  for (size_t t = 0; t < seen.size(); ++t)
    readers.emplace_back([&, t] {
      for (size_t i = nodes.size(); i-- > 0;)
        seen[t].push_back(nodes[(i + t) % nodes.size()]->name());
    });
  for (auto& r : readers) r.join();
  for (size_t t = 0; t < seen.size(); ++t)
    for (size_t i = nodes.size(), k = 0; i-- > 0; ++k)
      EXPECT_EQ(seen[t][k], names[(i + t) % nodes.size()]);
}

// Inputs a recorder makes after calls (joint capture's saved values) move to the front:
// the list, the inputs, the names and the verifier agree; once a name is made, refused.
TEST(Graph, InputsMadeLateMoveToTheFront) {
  Graph g;
  Node* t = g.add_input("t", meta({4}));
  Node* a = g.add_call(OpKind::neg, {Ref{t}}, {meta({4})});
  Node* s1 = g.add_input("s1", meta({4}));
  Node* b = g.add_call(OpKind::mul, {Ref{a}, Ref{s1}}, {meta({4})});
  Node* s2 = g.add_input("s2", meta({4}));
  Node* c = g.add_call(OpKind::add, {Ref{b}, Ref{s2}, Scalar(1)}, {meta({4})});
  g.set_output({Ref{c}});
  g.move_inputs_to_front({s1, s2, t});
  EXPECT_EQ(g.inputs(), (std::vector<Node*>{s1, s2, t}));
  EXPECT_EQ(g.nodes(), (std::vector<Node*>{s1, s2, t, a, b, c, g.output()}));
  EXPECT_EQ(g.first()->prev(), nullptr);
  g.verify();
  EXPECT_EQ(g.str(),
            "%s1 : f32[4]@cpu:0 = input()\n"
            "%s2 : f32[4]@cpu:0 = input()\n"
            "%t : f32[4]@cpu:0 = input()\n"
            "%neg : f32[4]@cpu:0 = neg(%t)\n"
            "%mul : f32[4]@cpu:0 = mul(%neg, %s1)\n"
            "%add : f32[4]@cpu:0 = add(%mul, %s2)\n"
            "return %add\n");
  expect_error([&] { g.move_inputs_to_front({t}); }, ErrorKind::internal,
               "before any node is named");
  Graph h;
  Node* x = h.add_input("x", meta({4}));
  Node* n = h.add_call(OpKind::neg, {Ref{x}}, {meta({4})});
  expect_error([&] { h.move_inputs_to_front({n}); }, ErrorKind::internal,
               "not an input of this graph");
  expect_error([&] { h.move_inputs_to_front({s1}); }, ErrorKind::internal,
               "not an input of this graph");
}

// Note [Borrowed names]: an input named after another graph's node takes the source's
// name when its own graph is named, whatever became of the source graph meanwhile
// (alive, moved, assigned over, destroyed, the source node erased); a graph that borrows
// lends eagerly. ASan checks that no link outlives its source.
TEST(Graph, BorrowedNamesOutliveTheirSourceGraph) {
  struct Pair {
    std::unique_ptr<Graph> fw = std::make_unique<Graph>(), bw = std::make_unique<Graph>();
    Node *a, *b, *s1, *s2;
    Pair() {
      Node* x = fw->add_input("x", meta({4}));
      a = fw->add_call(OpKind::neg, {Ref{x}}, {meta({4})});  // neg
      b = fw->add_call(OpKind::neg, {Ref{a}}, {meta({4})});  // neg_1
      fw->set_output({Ref{a}});
      s1 = bw->add_input_named_after(*fw, b, "saved_", "", meta({4}));
      s2 = bw->add_input_named_after(*fw, a, "saved_", "_out", meta({4}));
      Node* c = bw->add_call(OpKind::mul, {Ref{s1}, Ref{s2}}, {meta({4})});
      bw->set_output({Ref{c}});
    }
  };
  const std::string want =
      "%saved_neg_1 : f32[4]@cpu:0 = input()\n"
      "%saved_neg_out : f32[4]@cpu:0 = input()\n"
      "%mul : f32[4]@cpu:0 = mul(%saved_neg_1, %saved_neg_out)\n"
      "return %mul\n";
  {  // both alive; the source graph is not named by building the borrower
    Pair p;
    EXPECT_EQ(p.bw->str(), want);
    EXPECT_EQ(p.b->name(), "neg_1");
  }
  {  // the source graph destroyed first
    Pair p;
    p.fw.reset();
    EXPECT_EQ(p.bw->str(), want);
  }
  {  // moved, then assigned over
    Pair p;
    Graph moved = std::move(*p.fw);
    moved = Graph();
    EXPECT_EQ(p.bw->str(), want);
  }
  {  // the source node erased before either graph is named
    Pair p;
    p.fw->erase(p.b);
    EXPECT_EQ(p.s1->name(), "saved_neg_1");
    EXPECT_EQ(p.fw->str(),
              "%x : f32[4]@cpu:0 = input()\n%neg : f32[4]@cpu:0 = neg(%x)\nreturn %neg\n");
  }
  {  // the borrower destroyed first: the source reads nothing at its end
    Pair p;
    p.bw.reset();
    p.fw.reset();
  }
  {  // a graph that borrows lends eagerly (no chain of links), also to a second borrower
    Pair p;
    Graph third;
    Node* t = third.add_input_named_after(*p.bw, p.s1, "grad_", "", meta({4}));
    Node* u = third.add_input_named_after(*p.fw, p.a, "of_", "", meta({4}));
    EXPECT_EQ(t->name(), "grad_saved_neg_1");
    EXPECT_EQ(u->name(), "of_neg");
    expect_error([&] { third.add_input_named_after(third, t, "self_", "", meta({4})); },
                 ErrorKind::internal, "not a node of the other graph");
    expect_error([&] { third.add_input_named_after(*p.fw, t, "x_", "", meta({4})); },
                 ErrorKind::internal, "not a node of the other graph");
  }
  {  // first requests from several threads at once, the source graph unnamed
    Pair p;
    std::vector<std::thread> readers;
    std::vector<std::string> seen(4);
    for (size_t t = 0; t < seen.size(); ++t)
      readers.emplace_back([&, t] { seen[t] = t % 2 ? p.bw->str() : p.fw->str() + p.bw->str(); });
    for (auto& r : readers) r.join();
    for (size_t t = 0; t < seen.size(); ++t)
      EXPECT_EQ(seen[t].substr(seen[t].size() - want.size()), want);
  }
}

TEST(Graph, NodeIdsAreDenseAndNeverReused) {
  Graph g;
  Node* x = g.add_input("x", meta({4}));
  Node* a = g.add_call(OpKind::neg, {Ref{x}}, {meta({4})});
  Node* b = g.add_call(OpKind::neg, {Ref{a}}, {meta({4})});
  EXPECT_EQ(x->id(), 0u);
  EXPECT_EQ(a->id(), 1u);
  EXPECT_EQ(b->id(), 2u);
  g.erase(b);
  Node* c = g.add_call(OpKind::relu, {Ref{a}}, {meta({4})});
  EXPECT_EQ(c->id(), 3u);
  EXPECT_EQ(g.id_bound(), 4u);
  EXPECT_EQ(g.size(), 3u);
}

TEST(Verifier, ReportsEachBrokenInvariant) {
  {  // wrong argument type
    Graph g;
    Node* x = g.add_input("x", meta({4}));
    g.add_call(OpKind::add, {Ref{x}, int64_t{1}, Scalar(1)}, {meta({4})});
    g.set_output({Ref{x}});
    expect_error([&] { g.verify(); }, ErrorKind::invalid_graph,
                 "[verify] node %add: argument 'other' of add must be Tensor");
  }
  {  // wrong arity
    Graph g;
    Node* x = g.add_input("x", meta({4}));
    g.add_call(OpKind::relu, {Ref{x}, Ref{x}}, {meta({4})});
    g.set_output({Ref{x}});
    expect_error([&] { g.verify(); }, ErrorKind::invalid_graph, "relu takes 1 arguments, got 2");
  }
  {  // meta count differs from the op's outputs
    Graph g;
    Node* x = g.add_input("x", meta({4}));
    g.add_call(OpKind::max, {Ref{x}, int64_t{0}, false}, {meta({})});
    g.set_output({Ref{x}});
    expect_error([&] { g.verify(); }, ErrorKind::invalid_graph,
                 "has 1 meta entries, but max returns 2");
  }
  {  // a node of another graph
    Graph other;
    Node* foreign = other.add_input("f", meta({4}));
    Graph g;
    Node* x = g.add_input("x", meta({4}));
    g.add_call(OpKind::add, {Ref{x}, Ref{foreign}, Scalar(1)}, {meta({4})});
    g.set_output({Ref{x}});
    expect_error([&] { g.verify(); }, ErrorKind::invalid_graph,
                 "uses a node that is not in this graph");
  }
  {  // an output index the node does not have
    Graph g;
    Node* x = g.add_input("x", meta({4}));
    g.add_call(OpKind::relu, {Ref{x, 1}}, {meta({4})});
    g.set_output({Ref{x}});
    expect_error([&] { g.verify(); }, ErrorKind::invalid_graph, "uses output 1 of %x, which has 1");
  }
  {  // no output node; nothing may follow the output node
    Graph g;
    g.add_input("x", meta({4}));
    expect_error([&] { g.verify(); }, ErrorKind::invalid_graph, "the graph has no output node");
    g.set_output({});
    expect_error([&] { g.add_input("late", meta({4})); }, ErrorKind::invalid_graph,
                 "cannot add node %late after the output node");
  }
}

TEST(Passes, DeadCodeKeepsMutations) {
  Graph g;
  Node* x = g.add_input("x", meta({4}));
  Node* dead = g.add_call(OpKind::exp, {Ref{x}}, {meta({4})});
  g.add_call(OpKind::relu, {Ref{dead}}, {meta({4})});           // dead too
  g.add_call(OpKind::fill_, {Ref{x}, Scalar(0)}, {meta({4})});  // mutates: kept
  g.add_constant(tensor({1}));                                  // unused constant: removed
  g.set_output({Ref{x}});
  EXPECT_EQ(eliminate_dead_code(g), 3);
  g.verify();
  EXPECT_EQ(g.str(),
            "%x : f32[4]@cpu:0 = input()\n"
            "%fill_ : f32[4]@cpu:0 = fill_(%x, value=0)\n"
            "return %x\n");
}

TEST(Passes, CommonSubexpressionsMergeUpToAMutation) {
  Graph g;
  Node* x = g.add_input("x", meta({4}));
  Node* a = g.add_call(OpKind::exp, {Ref{x}}, {meta({4})});
  Node* b = g.add_call(OpKind::exp, {Ref{x}}, {meta({4})});  // same as a
  Node* r1 = g.add_call(OpKind::rand, {IntList{4}, f32, Device("cpu:0")}, {meta({4})});
  Node* r2 =
      g.add_call(OpKind::rand, {IntList{4}, f32, Device("cpu:0")}, {meta({4})});  // random: kept
  g.add_call(OpKind::add_, {Ref{x}, Ref{r1}, Scalar(1)}, {meta({4})});
  Node* c = g.add_call(OpKind::exp, {Ref{x}}, {meta({4})});  // after the mutation: kept
  Node* sum = g.add_call(OpKind::add, {Ref{a}, Ref{b}, Scalar(1)}, {meta({4})});
  g.set_output({Ref{sum}, Ref{c}, Ref{r2}});
  EXPECT_EQ(eliminate_common_subexpressions(g), 1);
  g.verify();
  EXPECT_EQ(sum->inputs()[0].node, a);
  EXPECT_EQ(sum->inputs()[1].node, a);
}

// Arguments compare exactly: -0.0 is not 0.0 (x * -0.0 differs from x * 0.0 in sign),
// an int 1 is not a float 1.0 (type promotion differs), a NaN equals itself; int lists
// and strings by value. Many calls (a table that grows past its first guess) all merge.
TEST(Passes, CommonSubexpressionsCompareArgumentsExactly) {
  Graph g;
  Node* x = g.add_input("x", meta({4}));
  ir::RefList outs;
  auto call = [&](OpKind op, ArgList args) {
    Node* n = g.add_call(op, std::move(args), {meta({4})});
    outs.push_back(Ref{n});
    return n;
  };
  Node* pz = call(OpKind::mul, {Ref{x}, Scalar(0.0)});
  Node* nz = call(OpKind::mul, {Ref{x}, Scalar(-0.0)});
  Node* i1 = call(OpKind::mul, {Ref{x}, Scalar(int64_t{1})});
  Node* f1 = call(OpKind::mul, {Ref{x}, Scalar(1.0)});
  Node* nan1 = call(OpKind::mul, {Ref{x}, Scalar(std::nan(""))});
  Node* nan2 = call(OpKind::mul, {Ref{x}, Scalar(std::nan(""))});
  Node* g1 = call(OpKind::gelu, {Ref{x}, Str("tanh")});
  Node* g2 = call(OpKind::gelu, {Ref{x}, Str("tanh")});
  Node* g3 = call(OpKind::gelu, {Ref{x}, Str("none")});
  std::vector<Node*> chain{x};
  for (int i = 0; i < 40; ++i) chain.push_back(call(OpKind::exp, {Ref{chain.back()}}));
  for (int i = 0; i < 40; ++i)
    call(OpKind::exp, {Ref{chain[static_cast<size_t>(i)]}});  // each a repeat
  g.set_output(outs);
  EXPECT_EQ(eliminate_common_subexpressions(g), 1 + 1 + 40);
  g.verify();
  const ir::RefList& out = g.output()->inputs();
  EXPECT_EQ(out[0].node, pz);
  EXPECT_EQ(out[1].node, nz);  // -0.0 kept apart from 0.0
  EXPECT_EQ(out[2].node, i1);
  EXPECT_EQ(out[3].node, f1);    // 1.0 kept apart from 1
  EXPECT_EQ(out[5].node, nan1);  // NaN merged with NaN
  EXPECT_NE(out[5].node, nan2);
  EXPECT_EQ(out[7].node, g1);
  EXPECT_NE(out[7].node, g2);
  EXPECT_EQ(out[8].node, g3);
  for (int i = 0; i < 40; ++i)
    EXPECT_EQ(out[static_cast<size_t>(49 + i)].node, chain[static_cast<size_t>(i) + 1]);
}

TEST(Interpreter, RunsThroughDispatchAndChecksInputs) {
  Small s;
  Tensor x = tensor({1, 2, 3, 4}), y = tensor({2, 2, 2, 2});
  TensorList out = interpret(s.g, {x, y});
  EXPECT_EQ(to_vector<float>(out[0]), (std::vector<float>{6, 8, 10, 12}));
  expect_error([&] { interpret(s.g, {x}); }, ErrorKind::value, "the graph takes 2 inputs, got 1");
  expect_error(
      [&] {
        interpret(s.g, {x, tensor({1, 2})});
      },
      ErrorKind::value, "[interpret] input %y expects f32[4]@cpu:0, got f32[2]@cpu:0");
}

}  // namespace
}  // namespace kiln::ir

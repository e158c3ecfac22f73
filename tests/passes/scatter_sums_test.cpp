// Note [Sums of disjoint scatters]: passes::merge_disjoint_scatters.
#include "kiln/passes/scatter_sums.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "kiln/ir/interpreter.h"
#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using ops::OpKind;

// sum_i as_strided_scatter(zeros[3, 2, 4], g_i, [2, 4], [4, 1], offsets[i]), the way
// autograd sums the gradients of selects of one tensor.
struct ScatterSum {
  ir::Graph g;
  std::vector<ir::Node*> adds, scatters;
  ScatterSum(std::vector<int64_t> offsets, double alpha = 1.0,
             std::vector<size_t> also_outputs = {}) {
    ir::ValueMeta whole = ir::ValueMeta::of(zeros({3, 2, 4})),
                  part = ir::ValueMeta::of(zeros({2, 4}));
    std::vector<ir::Node*> grads;
    for (size_t i = 0; i < offsets.size(); ++i)
      grads.push_back(g.add_input(fmt::format("g{}", i), part));
    ir::Node* sum = nullptr;
    ir::RefList outs;
    for (size_t i = 0; i < offsets.size(); ++i) {
      ir::Node* z = g.add_call(
          OpKind::full, {IntList{3, 2, 4}, Scalar(0.0), DType::f32, Device("cpu:0")}, {whole});
      ir::Node* s = g.add_call(
          OpKind::as_strided_scatter,
          {ir::Ref{z, 0}, ir::Ref{grads[i], 0}, IntList{2, 4}, IntList{4, 1}, offsets[i]}, {whole});
      scatters.push_back(s);
      if (std::find(also_outputs.begin(), also_outputs.end(), i) != also_outputs.end())
        outs.push_back({s, 0});
      if (!sum) {
        sum = s;
        continue;
      }
      sum = g.add_call(OpKind::add, {ir::Ref{sum, 0}, ir::Ref{s, 0}, Scalar(alpha)}, {whole});
      adds.push_back(sum);
    }
    outs.insert(outs.begin(), {sum, 0});
    g.set_output(outs);
  }
  int count(OpKind op) const {
    int n = 0;
    for (ir::Node* node : g.nodes()) n += node->opcode() == ir::Opcode::call && node->op() == op;
    return n;
  }
};

TensorList inputs(size_t n) {
  TensorList in;
  for (size_t i = 0; i < n; ++i) in.push_back(randn({2, 4}));
  return in;
}

TEST(ScatterSums, DisjointRegionsAreWrittenIntoOneFill) {
  manual_seed(1);
  ScatterSum s({16, 8, 0});  // the three rows of [3, 2, 4], last first (as q, k, v come back)
  TensorList in = inputs(3);
  Tensor want = ir::interpret(s.g, in)[0];
  EXPECT_EQ(passes::merge_disjoint_scatters(s.g), 3);  // two adds, and the fill
  EXPECT_EQ(s.count(OpKind::add), 0);
  EXPECT_EQ(s.count(OpKind::full), 0);  // the three rows cover it: nothing to fill
  EXPECT_EQ(s.count(OpKind::empty), 1);
  EXPECT_EQ(s.count(OpKind::as_strided_scatter), 3);
  Tensor got = ir::interpret(s.g, in)[0];
  EXPECT_TRUE(testing::all_close(got, to_vector<double>(want), 0, 0));
  EXPECT_TRUE(testing::all_close(got, to_vector<double>(stack({in[2], in[1], in[0]})), 0, 0));
}

// Two rows of three: the third stays zeros, so the fill stays.
TEST(ScatterSums, RegionsThatLeaveElementsKeepTheFill) {
  manual_seed(4);
  ScatterSum s({16, 0});
  TensorList in = inputs(2);
  EXPECT_EQ(passes::merge_disjoint_scatters(s.g), 1);
  EXPECT_EQ(s.count(OpKind::full), 1);
  EXPECT_EQ(s.count(OpKind::empty), 0);
  Tensor got = ir::interpret(s.g, in)[0];
  EXPECT_TRUE(
      testing::all_close(got, to_vector<double>(stack({in[1], zeros({2, 4}), in[0]})), 0, 0));
}

TEST(ScatterSums, OverlapsScaledSumsAndSharedScattersStayAdds) {
  manual_seed(2);
  struct Case {
    std::vector<int64_t> offsets;
    double alpha;
    std::vector<size_t> also_outputs;
    int merged;
  };
  for (const Case& c : {Case{{0, 4}, 1.0, {}, 0},          // rows overlap by half
                        Case{{0, 8}, 2.0, {}, 0},          // alpha 2: not a plain sum
                        Case{{0, 8, 16}, 1.0, {0, 1}, 0},  // the first two are outputs too
                        Case{{0, 8, 16}, 1.0, {1}, 2},     // the first is folded into the second
                        Case{{0, 8, 4}, 1.0, {}, 1}}) {    // the third overlaps both
    ScatterSum s(c.offsets, c.alpha, c.also_outputs);
    TensorList in = inputs(c.offsets.size());
    TensorList want = ir::interpret(s.g, in);
    EXPECT_EQ(passes::merge_disjoint_scatters(s.g), c.merged);
    EXPECT_EQ(s.count(OpKind::add), static_cast<int>(c.offsets.size()) - 1 - c.merged);
    TensorList got = ir::interpret(s.g, in);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(testing::all_close(got[i], to_vector<double>(want[i]), 0, 0));
  }
}

// A BLOCK train step: the gradients of q, k and v come back into one buffer of the fused
// qkv's shape (not even filled: they cover it), and (J5) its steps still equal eager SGD steps on a
// twin of the model.
TEST(ScatterSums, BlockTrainStepFillsTheQkvGradientOnce) {
  manual_seed(3);
  const nn::ModelConfig config{{"batch", 2}, {"seq", 8}, {"width", 16}, {"hidden", 32}};
  auto ref = nn::make_reference_model("block", config, 5);
  auto twin = nn::make_reference_model("block", config, 5);
  Tensor x = ref.example_inputs[0], target = randn_like(x);
  ExportedProgram p = export_train_step(
      *ref.module, [](nn::Module& m, const TensorList& b) { return nn::mse_loss(m(b[0]), b[1]); },
      {x, target}, {.optimizer = nn::SGDOptions{.lr = 1e-2}});
  int fills = 0, empties = 0, scatters = 0, big_adds = 0;
  for (ir::Node* n : p.graph.nodes()) {
    if (n->opcode() != ir::Opcode::call || n->meta()[0].shape.size() != 5) continue;
    fills += n->op() == OpKind::full;
    empties += n->op() == OpKind::empty;
    scatters += n->op() == OpKind::as_strided_scatter;
    big_adds += n->op() == OpKind::add;
  }
  EXPECT_EQ(fills, 0);  // q, k and v cover the gradient: allocated, never filled
  EXPECT_EQ(empties, 1);
  EXPECT_EQ(scatters, 3);
  EXPECT_EQ(big_adds, 0);
  TensorList params;
  for (auto& [name, t] : twin.module->named_parameters()) params.push_back(t);
  nn::SGD opt(params, nn::SGDOptions{.lr = 1e-2});
  runtime::Executor exec(p);
  for (int step = 0; step < 2; ++step) {
    opt.zero_grad();
    Tensor loss = nn::mse_loss((*twin.module)(TensorList{x})[0], target);
    loss.backward();
    opt.step();
    Tensor got = exec.run({x, target})[0];
    EXPECT_TRUE(testing::all_close(got, to_vector<double>(loss), 0, 0)) << "step " << step;
  }
  NamedTensors trained = trained_parameters(p);
  auto named = twin.module->named_parameters();
  ASSERT_EQ(trained.size(), named.size());
  for (size_t i = 0; i < trained.size(); ++i)
    EXPECT_TRUE(testing::all_close(trained[i].second, to_vector<double>(named[i].second), 0, 0))
        << named[i].first;
}

}  // namespace
}  // namespace kiln

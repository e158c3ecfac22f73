// The runtime executor: (R1)-(R3), the memory plan, write-backs.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln::runtime {
namespace {

using kiln::testing::all_close;
using kiln::testing::expect_error;

struct Case {
  std::string model;
  nn::ModelConfig config;
  bool train;
};
const std::vector<Case> kCases = {
    {"mlp", {{"batch", 8}, {"width", 64}, {"layers", 4}}, false},
    {"gpt", {}, false},
    {"block", {{"batch", 2}, {"seq", 16}, {"width", 32}, {"hidden", 64}}, false},
    {"bn_mlp", {}, false},
    {"bn_mlp", {}, true}};

TEST(Executor, EqualsEagerOnEveryReferenceModelAndDevice) {
  for (const Case& c : kCases) {
    for (Device d : {Device("cpu:0"), Device("cpu:1")}) {
      SCOPED_TRACE(c.model + (c.train ? " train " : " eval ") + d.str());
      nn::ReferenceModel ref = nn::make_reference_model(c.model, c.config, 11);
      ref.module->train(c.train);
      ExportedProgram p = export_program(*ref.module, ref.example_inputs);
      move_to_device(p, d);
      Executor exec(p);
      TensorList in;
      for (const Tensor& t : ref.example_inputs) in.push_back(to(t, d));
      for (int step = 0; step < 2; ++step) {  // twice: buffers and running stats evolve
        AllocatorStats other =
            allocator_stats(d == Device("cpu:0") ? Device("cpu:1") : Device("cpu:0"));
        TensorList got = exec.run(in);
        // (R2) nothing lands on another device
        AllocatorStats other_after =
            allocator_stats(d == Device("cpu:0") ? Device("cpu:1") : Device("cpu:0"));
        EXPECT_EQ(other_after.num_allocs, other.num_allocs);
        TensorList want = (*ref.module)(ref.example_inputs);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(got[0].device(), d);
        EXPECT_TRUE(all_close(got[0], to_vector<double>(want[0]), 1e-5, 1e-5));
      }
      for (const auto& [name, t] : p.state)  // write-backs (bn running statistics)
        for (const auto& [mname, mt] : ref.module->state_dict())
          if (mname == name) {
            EXPECT_TRUE(all_close(t, to_vector<double>(mt), 1e-6, 1e-6)) << name;
          }
    }
  }
}

// kiln run/train --profile: every call node of every profiled run is counted under its
// op (and, grouped by shapes, under its input shapes), most expensive first; nothing is
// recorded while profiling is off.
TEST(Executor, ProfileCountsEveryCallNodeOfTheProfiledRuns) {
  nn::ReferenceModel ref =
      nn::make_reference_model("mlp", {{"batch", 16}, {"width", 128}, {"layers", 3}});
  ExportedProgram p = export_program(*ref.module, ref.example_inputs);
  Executor exec(p, {.fuse = false});  // one entry per node (fused: "linear+relu")
  exec.run(ref.example_inputs);
  EXPECT_TRUE(exec.profile().empty());
  exec.set_profiling(true);
  for (int i = 0; i < 4; ++i) exec.run(ref.example_inputs);
  exec.set_profiling(false);
  exec.run(ref.example_inputs);
  std::map<std::string, int64_t> want;
  for (ir::Node* n : p.graph.nodes())
    if (n->opcode() == ir::Opcode::call) want[std::string(ops::op_name(n->op()))] += 4;
  std::vector<OpTime> table = exec.profile();
  std::map<std::string, int64_t> got;
  for (size_t i = 0; i < table.size(); ++i) {
    got[table[i].op] = table[i].calls;
    EXPECT_GT(table[i].seconds, 0.0) << table[i].op;
    EXPECT_TRUE(table[i].inputs.empty());
    if (i) {
      EXPECT_GE(table[i - 1].seconds, table[i].seconds);
    }
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(got["linear"], 12);
  std::vector<OpTime> by_shape = exec.profile(true);
  bool found = false;
  for (const OpTime& t : by_shape)
    if (t.op == "linear") {
      EXPECT_EQ(t.inputs, "f32[16, 128], f32[128, 128], f32[128]");
      EXPECT_EQ(t.calls, 12);
      found = true;
    }
  EXPECT_TRUE(found);
}

TEST(Executor, PlanReusesBuffersAndSteadyStateAllocatesOnlyOutputs) {
  nn::ReferenceModel ref =
      nn::make_reference_model("mlp", {{"batch", 16}, {"width", 128}, {"layers", 8}});
  ExportedProgram p = export_program(*ref.module, ref.example_inputs);
  Executor exec(p, {.fuse = false});  // fused, each linear's relu is its epilogue: 7 values
  const PlanStats& s = exec.stats();
  EXPECT_EQ(s.planned_values, 15);  // 8 linear + 8 relu, the last relu is the output
  EXPECT_LE(s.buffers, 2);          // ping-pong between two activation buffers
  EXPECT_EQ(s.planned_bytes, 2 * 16 * 128 * 4);
  exec.run(ref.example_inputs);  // warm up the caches
  Device d("cpu:0");
  AllocatorStats before = allocator_stats(d);
  exec.run(ref.example_inputs);
  AllocatorStats after = allocator_stats(d);
  EXPECT_EQ(after.num_os_allocs, before.num_os_allocs);  // no fresh pages in steady state
  EXPECT_LE(after.num_allocs - before.num_allocs, 2);    // the output (and its block)
}

// Note [Outputs in their input's buffer]: an elementwise chain whose links die at the
// next one runs in one buffer; a link read again later, or read twice by the next op,
// keeps its own. The results equal eager either way.
TEST(Executor, ElementwiseOutputsTakeTheBufferOfASelfThatDiesThere) {
  struct Chain : nn::Module {
    int variant = 0;
    TensorList forward(const TensorList& in) override {
      Tensor a = mul(in[0], 2.0);
      Tensor b = variant == 2 ? add(a, a) : add(a, in[0]);
      Tensor c = relu(b);
      Tensor out = sum(gelu(c));
      if (variant == 1) out = add(out, sum(a));  // a lives on
      return {out};
    }
  };
  Tensor x = randn({64, 32});
  for (int variant : {0, 1, 2}) {
    SCOPED_TRACE(variant);
    Chain m;
    m.variant = variant;
    ExportedProgram p = export_program(m, {x});
    Executor exec(p, {.fuse = false});  // fused, the chain's links are never made at all
    // [64, 32] f32 buffers (8 KiB each), plus a few bytes for the sums of variant 1
    EXPECT_EQ(exec.stats().planned_bytes / (64 * 32 * 4), variant == 0 ? 1 : 2);
    for (int run = 0; run < 2; ++run)
      EXPECT_TRUE(all_close(exec.run({x})[0], to_vector<double>(m.forward({x})[0]), 1e-6, 1e-6));
  }
}

// Each output of a node has its own lifetime: a fused backward node's d input (read by
// the layer below only) is planned although its d weight is a program output; only the
// program's outputs are made per run.
TEST(Executor, OutputsOfOneNodeArePlannedApart) {
  nn::ReferenceModel ref =
      nn::make_reference_model("mlp", {{"batch", 16}, {"width", 128}, {"layers", 4}});
  Tensor target = randn({16, 128});
  ExportedProgram p = export_train_step(
      *ref.module, [](nn::Module& m, const TensorList& b) { return nn::mse_loss(m(b[0]), b[1]); },
      {ref.example_inputs[0], target}, {.optimizer = nn::SGDOptions{.lr = 1e-2}});
  int fused = 0;
  for (ir::Node* n : p.graph.nodes())
    fused += n->opcode() == ir::Opcode::call && n->op() == ops::OpKind::linear_backward;
  EXPECT_EQ(fused, 3);  // the first layer's input needs no gradient: its backward is two ops
  std::set<std::pair<const ir::Node*, int>> outputs;
  int64_t output_bytes = 0;
  for (const ir::Ref& r : p.graph.output()->inputs())
    if (r.node->opcode() == ir::Opcode::call && outputs.insert({r.node, r.output}).second) {
      const ir::ValueMeta& m = r.node->meta()[static_cast<size_t>(r.output)];
      output_bytes += numel_of(m.shape) * static_cast<int64_t>(itemsize(m.dtype));
    }
  Executor exec(p);
  EXPECT_GT(exec.stats().unplanned_bytes, 0);
  EXPECT_LE(exec.stats().unplanned_bytes, output_bytes);
  exec.run({ref.example_inputs[0], target});  // warm up the caches
  AllocatorStats before = allocator_stats(Device("cpu:0"));
  exec.run({ref.example_inputs[0], target});
  EXPECT_EQ(allocator_stats(Device("cpu:0")).num_os_allocs, before.num_os_allocs);  // steady state
}

TEST(Executor, PlannedPeakIsBelowEager) {
  nn::ReferenceModel ref =
      nn::make_reference_model("gpt", {{"layers", 4}, {"width", 128}, {"seq", 64}});
  ExportedProgram p = export_program(*ref.module, ref.example_inputs);
  move_to_device(p, Device("cpu:3"));
  Executor exec(p);
  TensorList in = {to(ref.example_inputs[0], Device("cpu:3"))};
  Device d("cpu:3");
  exec.run(in);
  allocator_stats(d);
  device_allocator(d).reset_peak();
  int64_t base = allocator_stats(d).bytes_in_use;
  exec.run(in);
  int64_t planned_peak = allocator_stats(d).peak_bytes - base;
  ref.module->to(d);
  device_allocator(d).reset_peak();
  base = allocator_stats(d).bytes_in_use;
  (*ref.module)(in);
  int64_t eager_peak = allocator_stats(d).peak_bytes - base;
  EXPECT_LT(planned_peak, eager_peak) << "planned " << planned_peak << " eager " << eager_peak;
}

TEST(Executor, InputsAreCheckedBeforeAnythingRuns) {  // (R3)
  nn::ReferenceModel ref = nn::make_reference_model("bn_mlp", {});
  ref.module->train();
  ExportedProgram p = export_program(*ref.module, ref.example_inputs);
  Executor exec(p);
  std::vector<float> stats_before = to_vector<float>(p.state[2].second);
  expect_error([&] { exec.run({}); }, ErrorKind::value,
               "[run] the program takes 1 user inputs, got 0");
  expect_error(
      [&] {
        exec.run({randn({3, 16})});
      },
      ErrorKind::value,
      "[run] input 'input_0' expects f32[16,16]@cpu:0, got f32[3,16]@cpu:0 (export with "
      "dynamic_shapes to accept other sizes)");
  expect_error(
      [&] {
        exec.run({randn({16, 16}, {.device = Device("cpu:1")})});
      },
      ErrorKind::device_mismatch, "got f32[16,16]@cpu:1");
  EXPECT_EQ(to_vector<float>(p.state[2].second), stats_before);  // nothing ran
}

// See Note [Programs across threads]: executors on several threads over one program that
// writes its state (BatchNorm in training) queue on the program's run lock, so every
// update lands exactly once and the state equals the same number of sequential runs.
TEST(Executor, ThreadsSharingAStatefulProgramSerialiseTheirUpdates) {
  nn::ReferenceModel ref = nn::make_reference_model("bn_mlp", {}, 3);
  ref.module->train();
  ExportedProgram shared = export_program(*ref.module, ref.example_inputs);
  nn::ReferenceModel twin = nn::make_reference_model("bn_mlp", {}, 3);  // its own state
  twin.module->train();
  ExportedProgram alone = export_program(*twin.module, twin.example_inputs);
  constexpr int kThreads = 4, kRuns = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      Executor exec(shared);
      for (int i = 0; i < kRuns; ++i) exec.run(ref.example_inputs);
    });
  for (std::thread& t : threads) t.join();
  Executor exec(alone);
  for (int i = 0; i < kThreads * kRuns; ++i) exec.run(ref.example_inputs);
  ASSERT_EQ(shared.state.size(), alone.state.size());
  for (size_t i = 0; i < shared.state.size(); ++i) {
    SCOPED_TRACE(shared.state[i].first);
    EXPECT_TRUE(
        all_close(shared.state[i].second, to_vector<double>(alone.state[i].second), 1e-6, 1e-6));
    if (shared.state[i].first.ends_with("num_batches_tracked")) {
      EXPECT_EQ(item<int64_t>(shared.state[i].second), kThreads * kRuns);
    }
  }
}

// One Executor on two threads at once is refused with a clear error (it owns its planned
// buffers); whatever the interleaving, every run either completes or throws that error.
TEST(Executor, OneExecutorOnTwoThreadsIsAnErrorNotARace) {
  nn::ReferenceModel ref =
      nn::make_reference_model("mlp", {{"batch", 64}, {"width", 128}, {"layers", 4}}, 5);
  ExportedProgram p = export_program(*ref.module, ref.example_inputs);
  Executor exec(p);
  TensorList want = exec.run(ref.example_inputs);
  std::atomic<int> refused{0};
  auto worker = [&] {
    for (int i = 0; i < 200; ++i) {
      try {
        TensorList got = exec.run(ref.example_inputs);
        EXPECT_EQ(got[0].shape(), want[0].shape());
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("already running on another thread"),
                  std::string::npos)
            << e.what();
        ++refused;
      }
    }
  };
  std::thread a(worker), b(worker);
  a.join();
  b.join();
  EXPECT_TRUE(all_close(exec.run(ref.example_inputs)[0], to_vector<double>(want[0])));
}

}  // namespace
}  // namespace kiln::runtime

// make_fx cost per call node, fake mode, parameters passed as graph inputs (as the
// PyTorch peer a PyTorch make_fx peer (not in bench/peers) does with functional_call).
#include <benchmark/benchmark.h>

#include "models.h"

namespace {

using namespace kiln;
using bench::Functional;

// Runs `trace` (returning the graph) and reports time per call node.
template <typename Model, typename Trace>
void per_node(benchmark::State& state, IntList input_shape, Trace trace) {
  Functional<Model> f(std::move(input_shape));
  size_t calls = 0;
  for (auto _ : state) {
    size_t nodes = trace(f);
    calls = nodes - f.inputs.size() - 1;  // all nodes but inputs and the output
  }
  state.counters["call_nodes"] = static_cast<double>(calls);
  state.counters["ns/node"] =
      benchmark::Counter(static_cast<double>(calls), benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
}

template <typename Model>
void run_trace(benchmark::State& state, IntList input_shape) {
  per_node<Model>(state, std::move(input_shape), [](const Functional<Model>& f) {
    ir::Graph g = make_fx(std::cref(f), f.inputs);
    benchmark::DoNotOptimize(g.first());
    return g.size();
  });
}

void BM_MakeFxFakeMlp(benchmark::State& state) { run_trace<bench::Mlp>(state, {64, 512}); }
BENCHMARK(BM_MakeFxFakeMlp)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_MakeFxFakeBlock(benchmark::State& state) { run_trace<bench::Block>(state, {4, 128, 256}); }
BENCHMARK(BM_MakeFxFakeBlock)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

namespace {

// Marginal cost per node: a chain of N dependent adds on small tensors (the peer's
// "chain slope"); compare N = 32 and N = 256. Up to 100k nodes: tracing cost must stay
// linear (issue 21: 32k nodes < 3x the per-node cost of 512).
void BM_MakeFxFakeChain(benchmark::State& state) {
  int64_t n = state.range(0);
  kiln::TensorList inputs = {kiln::randn({8}), kiln::randn({8})};
  auto fn = [n](const kiln::TensorList& in) {
    kiln::Tensor x = in[0];
    for (int64_t i = 0; i < n; ++i) x = kiln::add(x, in[1]);
    return kiln::TensorList{x};
  };
  for (auto _ : state) {
    kiln::ir::Graph g = kiln::make_fx(fn, inputs);
    benchmark::DoNotOptimize(g.first());
  }
  state.counters["nodes"] = static_cast<double>(n);
  state.counters["ns/node"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                                     benchmark::Counter::kInvert);
}
BENCHMARK(BM_MakeFxFakeChain)
    ->Arg(32)
    ->Arg(256)
    ->Arg(512)
    ->Arg(4096)
    ->Arg(32768)
    ->Arg(100000)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace

namespace {

// Functionalization + tracing (capture), fake mode, per call node.
template <typename Model>
void run_capture(benchmark::State& state, kiln::IntList input_shape) {
  per_node<Model>(state, std::move(input_shape), [](const Functional<Model>& f) {
    kiln::passes::CapturedProgram p = kiln::passes::capture(std::cref(f), f.inputs);
    benchmark::DoNotOptimize(p.graph.first());
    return p.graph.size();
  });
}

void BM_CaptureFakeMlp(benchmark::State& state) { run_capture<kiln::bench::Mlp>(state, {64, 512}); }
BENCHMARK(BM_CaptureFakeMlp)->Unit(benchmark::kMicrosecond)->UseRealTime();
void BM_CaptureFakeBlock(benchmark::State& state) {
  run_capture<kiln::bench::Block>(state, {4, 128, 256});
}
BENCHMARK(BM_CaptureFakeBlock)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

namespace {

void BM_CaptureFakeMutationProgram(benchmark::State& state) {
  using namespace kiln;
  TensorList inputs = {randn({64, 64}), randn({64, 64})};
  size_t nodes = 0;
  for (auto _ : state) {
    passes::CapturedProgram p = passes::capture(bench::mutation_program, inputs);
    nodes = p.graph.size();
    benchmark::DoNotOptimize(p.graph.first());
  }
  const double source_ops =
      1 + 16 * 6 + 1;  // clone, 16 x (add_, mul_, view, select, add_, relu_), add_
  state.counters["graph_nodes"] = static_cast<double>(nodes);
  state.counters["per_source_op"] = benchmark::Counter(
      source_ops, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_CaptureFakeMutationProgram)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

namespace {

// Joint capture (forward + backward, AOTAutograd style) per call node of the joint
// graph, fake mode: loss = sum(model(x)), gradients w.r.t. every parameter (as the
// peer's "make_fx fwd+bwd tracing_mode=fake").
template <typename Model>
void run_joint(benchmark::State& state, IntList input_shape) {
  Functional<Model> f(std::move(input_shape));
  std::vector<bool> wants(f.inputs.size(), true);
  wants[0] = false;  // x
  auto loss = [&f](const TensorList& in) { return TensorList{sum(f(in)[0])}; };
  size_t calls = 0;
  for (auto _ : state) {
    passes::JointProgram p = passes::capture_joint(loss, f.inputs, {.requires_grad = wants});
    benchmark::DoNotOptimize(p.forward.first());
    calls = 0;
    for (const ir::Graph* g : {&p.forward, &p.backward})
      for (ir::Node* n : g->nodes()) calls += n->opcode() == ir::Opcode::call;
  }
  state.counters["call_nodes"] = static_cast<double>(calls);
  state.counters["ns/node"] =
      benchmark::Counter(static_cast<double>(calls), benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
}
void BM_CaptureJointMlp(benchmark::State& state) { run_joint<bench::Mlp>(state, {64, 512}); }
BENCHMARK(BM_CaptureJointMlp)->Unit(benchmark::kMicrosecond)->UseRealTime();
void BM_CaptureJointBlock(benchmark::State& state) {
  run_joint<bench::Block>(state, {4, 128, 256});
}
BENCHMARK(BM_CaptureJointBlock)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

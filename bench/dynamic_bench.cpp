// Dynamic shapes (issue 49): exporting with symbolic batch and sequence against the same
// export with static shapes (time per call node), and a program with symbols run at a
// binding it has seen against the program exported static (and its first run at a new
// binding, which plans memory for it).
#include <benchmark/benchmark.h>

#include "kiln/kiln.h"

namespace {

using namespace kiln;

struct Workload {
  std::shared_ptr<nn::Module> module;
  TensorList inputs;
  std::vector<InputDims> dims;  // batch (and sequence) dynamic
};

Workload make(const std::string& name) {
  manual_seed(0);
  auto ref = nn::make_reference_model(name);
  ref.module->eval();
  std::vector<InputDims> dims = {{{0, Dim("batch", 1, 1024)}}};
  if (name != "mlp") dims[0][1] = Dim("seq", 1, name == "gpt" ? 64 : 1024);
  return {ref.module, ref.example_inputs, dims};
}

void BM_Export(benchmark::State& state, const std::string& name, bool dynamic) {
  Workload w = make(name);
  ExportOptions o;
  if (dynamic) o.dynamic_shapes = w.dims;
  size_t calls = 0;
  for (auto _ : state) {
    ExportedProgram p = export_program(*w.module, w.inputs, o);
    calls = 0;
    for (ir::Node* n : p.graph.nodes()) calls += n->opcode() == ir::Opcode::call;
    benchmark::DoNotOptimize(p.graph.first());
  }
  state.counters["call_nodes"] = static_cast<double>(calls);
  state.counters["ns/node"] =
      benchmark::Counter(static_cast<double>(calls), benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
}
BENCHMARK_CAPTURE(BM_Export, static_mlp, std::string("mlp"), false)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Export, dynamic_mlp, std::string("mlp"), true)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Export, static_block, std::string("block"), false)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Export, dynamic_block, std::string("block"), true)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Export, static_gpt, std::string("gpt"), false)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Export, dynamic_gpt, std::string("gpt"), true)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// One thread: the run itself, not the thread pool, is what the binding could slow down.
void BM_Run(benchmark::State& state, const std::string& name, bool dynamic) {
  NumThreadsGuard threads(1);
  Workload w = make(name);
  ExportOptions o;
  if (dynamic) o.dynamic_shapes = w.dims;
  ExportedProgram p = export_program(*w.module, w.inputs, o);
  runtime::Executor exec(p);
  for (int i = 0; i < 3; ++i) exec.run(w.inputs);
  for (auto _ : state) benchmark::DoNotOptimize(exec.run(w.inputs)[0].impl());
}
BENCHMARK_CAPTURE(BM_Run, static_mlp, std::string("mlp"), false)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Run, dynamic_mlp, std::string("mlp"), true)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Run, static_block, std::string("block"), false)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Run, dynamic_block, std::string("block"), true)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// The first run at a binding: the sizes evaluated and the memory planned, then the run.
void BM_FirstRunAtANewBinding(benchmark::State& state, const std::string& name) {
  NumThreadsGuard threads(1);
  Workload w = make(name);
  ExportOptions o;
  o.dynamic_shapes = w.dims;
  ExportedProgram p = export_program(*w.module, w.inputs, o);
  for (auto _ : state) {
    runtime::Executor exec(p);
    benchmark::DoNotOptimize(exec.run(w.inputs)[0].impl());
  }
}
BENCHMARK_CAPTURE(BM_FirstRunAtANewBinding, block, std::string("block"))
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace

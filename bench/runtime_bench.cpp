// Program runs (runtime::Executor) vs eager kiln on the shared MLP and BLOCK workloads
// (bench/peers/models.py); compare with bench/peers/eager_models.py. Counters:
// peak bytes above the baseline during one forward, and minor page faults per forward.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <sys/resource.h>

#include "kiln/kiln.h"

namespace {

using namespace kiln;

struct Workload {
  std::shared_ptr<nn::Module> module;
  TensorList inputs;
};

Workload make(const std::string& name) {
  manual_seed(0);
  auto ref = nn::make_reference_model(name);  // "mlp" or "block": the benchmark workloads
  ref.module->eval();
  return {ref.module, ref.example_inputs};
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

template <typename Run>
void measure(benchmark::State& state, Run&& run) {
  kiln::NumThreadsGuard threads(static_cast<int>(state.range(0)));
  Device d("cpu:0");
  for (int i = 0; i < 3; ++i) run();  // warm-up: caches filled
  device_allocator(d).reset_peak();
  int64_t base = allocator_stats(d).bytes_in_use;
  run();
  double peak = static_cast<double>(allocator_stats(d).peak_bytes - base);
  long faults = minor_faults();
  for (auto _ : state) run();
  state.counters["faults/fwd"] =
      static_cast<double>(minor_faults() - faults) / static_cast<double>(state.iterations());
  state.counters["peak_MiB"] = peak / 1048576.0;
}

void BM_Eager(benchmark::State& state, const std::string& name) {
  Workload w = make(name);
  autograd::NoGradGuard no_grad;  // inference, as the peer's torch.no_grad
  measure(state, [&] { benchmark::DoNotOptimize((*w.module)(w.inputs)[0].impl()); });
}

void BM_Program(benchmark::State& state, const std::string& name) {
  Workload w = make(name);
  ExportedProgram p = export_program(*w.module, w.inputs);
  runtime::Executor exec(p);
  state.counters["planned_MiB"] = exec.stats().planned_bytes / 1048576.0;
  measure(state, [&] { benchmark::DoNotOptimize(exec.run(w.inputs)[0].impl()); });
}

BENCHMARK_CAPTURE(BM_Eager, mlp, std::string("mlp"))
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Program, mlp, std::string("mlp"))
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Eager, block, std::string("block"))
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Program, block, std::string("block"))
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

namespace {

// Attention as a program, B=4, H=4, head 64, at sequence length T: blocked over query
// rows (Note [Blocked attention]) or as its four ops (scores [4, 4, T, T] made whole).
void BM_AttentionProgram(benchmark::State& state, bool blocked) {
  kiln::NumThreadsGuard threads(1);
  struct Sdpa : nn::Module {
    TensorList forward(const TensorList& in) override {
      return {nn::scaled_dot_product_attention(in[0], in[1], in[2])};
    }
  } sdpa;
  int64_t T = state.range(0);
  TensorList in = {randn({4, 4, T, 64}), randn({4, 4, T, 64}), randn({4, 4, T, 64})};
  ExportedProgram p = export_program(sdpa, in);
  runtime::Executor exec(p, {.min_attention_bytes = blocked ? 0 : int64_t{1} << 62});
  for (int i = 0; i < 2; ++i) exec.run(in);
  state.counters["planned_MiB"] = exec.stats().planned_bytes / 1048576.0;
  for (auto _ : state) benchmark::DoNotOptimize(exec.run(in)[0].impl());
}
void sequence_lengths(benchmark::internal::Benchmark* b) {
  b->Arg(128)->Arg(512)->Arg(2048)->Unit(benchmark::kMicrosecond)->UseRealTime();
}
BENCHMARK_CAPTURE(BM_AttentionProgram, blocked, true)->Apply(sequence_lengths);
BENCHMARK_CAPTURE(BM_AttentionProgram, unfused, false)->Apply(sequence_lengths);

}  // namespace

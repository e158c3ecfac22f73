// Program runs (runtime::Executor) vs eager kiln on the shared MLP and BLOCK workloads
// (../shared/peers/models.py); compare with ../shared/peers/eager_models.py. Counters:
// peak bytes above the baseline during one forward, and minor page faults per forward.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <sys/resource.h>

#include <cmath>

#include "kiln/kiln.h"

namespace {

using namespace kiln;

// BLOCK as an nn::Module, op for op as models.Block (no causal mask, erf GELU).
class BenchBlock : public nn::Module {
 public:
  BenchBlock()
      : ln1_(register_module("ln1", std::make_shared<nn::LayerNorm>(256))),
        qkv_(register_module("qkv", std::make_shared<nn::Linear>(256, 768))),
        proj_(register_module("proj", std::make_shared<nn::Linear>(256, 256))),
        ln2_(register_module("ln2", std::make_shared<nn::LayerNorm>(256))),
        fc1_(register_module("fc1", std::make_shared<nn::Linear>(256, 1024))),
        fc2_(register_module("fc2", std::make_shared<nn::Linear>(1024, 256))) {}
  TensorList forward(const TensorList& in) override {
    const int64_t B = 4, T = 128, C = 256, H = 4, D = 64;
    Tensor x = in[0];
    Tensor t = permute(reshape((*qkv_)((*ln1_)(x)), {B, T, 3, H, D}), {2, 0, 3, 1, 4});
    Tensor q = select(t, 0, 0), k = select(t, 0, 1), v = select(t, 0, 2);
    Tensor att = softmax(matmul(q, transpose(k, -2, -1)) * (1.0 / std::sqrt(double(D))), -1);
    Tensor y = reshape(transpose(matmul(att, v), 1, 2), {B, T, C});
    x = x + (*proj_)(y);
    return {x + (*fc2_)(gelu((*fc1_)((*ln2_)(x))))};
  }

 private:
  std::shared_ptr<nn::LayerNorm> ln1_;
  std::shared_ptr<nn::Linear> qkv_, proj_;
  std::shared_ptr<nn::LayerNorm> ln2_;
  std::shared_ptr<nn::Linear> fc1_, fc2_;
};

struct Workload {
  std::shared_ptr<nn::Module> module;
  TensorList inputs;
};

Workload make(const std::string& name) {
  manual_seed(0);
  if (name == "mlp") {
    auto ref = nn::make_reference_model("mlp");
    ref.module->eval();
    return {ref.module, ref.example_inputs};
  }
  auto block = std::make_shared<BenchBlock>();
  block->eval();
  return {block, {randn({4, 128, 256})}};
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

template <typename Run>
void measure(benchmark::State& state, Run&& run) {
  openblas_set_num_threads(static_cast<int>(state.range(0)));
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
  openblas_set_num_threads(2);
}

void BM_Eager(benchmark::State& state, const std::string& name) {
  Workload w = make(name);
  measure(state, [&] { benchmark::DoNotOptimize((*w.module)(w.inputs)[0].impl()); });
}

void BM_Program(benchmark::State& state, const std::string& name) {
  Workload w = make(name);
  ExportedProgram p = export_program(*w.module, w.inputs);
  runtime::Executor exec(p);
  state.counters["planned_MiB"] = exec.stats().planned_bytes / 1048576.0;
  measure(state, [&] { benchmark::DoNotOptimize(exec.run(w.inputs)[0].impl()); });
}

BENCHMARK_CAPTURE(BM_Eager, mlp, std::string("mlp"))->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Program, mlp, std::string("mlp"))->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Eager, block, std::string("block"))->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Program, block, std::string("block"))->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

}  // namespace

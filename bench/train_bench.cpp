// Training costs, side by side with bench/train_peer.py (PyTorch eager, same shapes):
//  - BM_TrainStep/{mlp,block}/{threads}: forward, mse_loss, backward, SGD (momentum 0.9)
//    step of the benchmark MLP and BLOCK; counter peak_MiB = allocator peak above the
//    baseline during one step.
//  - BM_TinyAddBackward: a + b with a requiring grad, forward and backward with a given
//    gradient (compare libtorch C++, bench/autograd_peer.cpp).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include "kiln/kiln.h"

namespace {

using namespace kiln;

struct Step {
  std::shared_ptr<nn::Module> model;
  Tensor x, target;
  std::unique_ptr<nn::SGD> opt;
  void operator()() {
    opt->zero_grad();
    Tensor loss = nn::mse_loss((*model)(x), target);
    loss.backward();
    opt->step();
  }
};

Step make_step(const std::string& name) {
  manual_seed(0);
  auto ref = nn::make_reference_model(name);
  Step s{ref.module, ref.example_inputs[0], randn_like(ref.example_inputs[0]), nullptr};
  TensorList params;
  for (auto& [k, p] : s.model->named_parameters()) params.push_back(p);
  s.opt = std::make_unique<nn::SGD>(params, nn::SGDOptions{.lr = 1e-3, .momentum = 0.9});
  return s;
}

void BM_TrainStep(benchmark::State& state, const std::string& name) {
  kiln::NumThreadsGuard threads(static_cast<int>(state.range(0)));
  Step step = make_step(name);
  for (int i = 0; i < 3; ++i) step();  // warm-up: caches and optimizer state filled
  Device d("cpu:0");
  device_allocator(d).reset_peak();
  int64_t base = allocator_stats(d).bytes_in_use;
  step();
  state.counters["peak_MiB"] =
      static_cast<double>(allocator_stats(d).peak_bytes - base) / 1048576.0;
  for (auto _ : state) step();
}
BENCHMARK_CAPTURE(BM_TrainStep, mlp, std::string("mlp"))
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_TrainStep, block, std::string("block"))
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_TinyAddBackward(benchmark::State& state) {
  Tensor a = randn({8}, {.requires_grad = true}), b = randn({8}), g = ones({8});
  for (auto _ : state) {
    Tensor r = add(a, b);
    r.backward(g);
    benchmark::DoNotOptimize(a.grad().impl());
  }
}
BENCHMARK(BM_TinyAddBackward)->UseRealTime();

}  // namespace

namespace {

// The same step as one exported program run by the executor (J4), vs the same peer.
void BM_TrainProgram(benchmark::State& state, const std::string& name) {
  kiln::NumThreadsGuard threads(static_cast<int>(state.range(0)));
  manual_seed(0);
  auto ref = nn::make_reference_model(name);
  Tensor x = ref.example_inputs[0], target = randn_like(x);
  ExportedProgram p = export_train_step(
      *ref.module, [](nn::Module& m, const TensorList& b) { return nn::mse_loss(m(b[0]), b[1]); },
      {x, target}, {.optimizer = nn::SGDOptions{.lr = 1e-3, .momentum = 0.9}});
  runtime::Executor exec(p);
  TensorList batch{x, target};
  for (int i = 0; i < 3; ++i) exec.run(batch);
  Device d("cpu:0");
  device_allocator(d).reset_peak();
  int64_t base = allocator_stats(d).bytes_in_use;
  exec.run(batch);
  state.counters["peak_MiB"] =
      static_cast<double>(allocator_stats(d).peak_bytes - base) / 1048576.0;
  state.counters["planned_MiB"] = exec.stats().planned_bytes / 1048576.0;
  for (auto _ : state) benchmark::DoNotOptimize(exec.run(batch)[0].impl());
}
BENCHMARK_CAPTURE(BM_TrainProgram, mlp, std::string("mlp"))
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_TrainProgram, block, std::string("block"))
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

namespace {

// An optimizer-bound step (one 256 x N linear on 4 rows, Adam; N = the second
// argument): the update's elementwise chain per parameter run fused (one pass over p, m,
// v, g) or op by op.
void BM_AdamProgram(benchmark::State& state, bool fuse) {
  kiln::NumThreadsGuard threads(static_cast<int>(state.range(0)));
  manual_seed(0);
  int64_t n = state.range(1);
  nn::Linear model(256, n);
  Tensor x = randn({4, 256}), target = randn({4, n});
  ExportedProgram p = export_train_step(
      model, [](nn::Module& m, const TensorList& b) { return nn::mse_loss(m(b[0]), b[1]); },
      {x, target}, {.optimizer = nn::AdamOptions{}});
  runtime::Executor exec(p, {.fuse = fuse});
  TensorList batch{x, target};
  for (int i = 0; i < 3; ++i) exec.run(batch);
  state.counters["regions"] = exec.fused_regions();
  for (auto _ : state) benchmark::DoNotOptimize(exec.run(batch)[0].impl());
}
void adam_sizes(benchmark::internal::Benchmark* b) {  // (threads, N)
  b->Args({1, 1024})->Args({1, 4096})->Unit(benchmark::kMicrosecond)->UseRealTime();
}
BENCHMARK_CAPTURE(BM_AdamProgram, fused, true)->Apply(adam_sizes);
BENCHMARK_CAPTURE(BM_AdamProgram, unfused, false)->Apply(adam_sizes);

}  // namespace

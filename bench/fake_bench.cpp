// Fake propagation cost per op on the shared MLP and transformer-block workloads
// (../shared/peers/models.py, re-implemented op for op), parameters on cuda:0 on a
// machine without CUDA. Compare with ../shared/peers/fake_prop.py ("fake" rows).
#include <benchmark/benchmark.h>

#include "models.h"

namespace {

using namespace kiln;

using bench::Block;
using bench::Mlp;

// Counts the ops one forward dispatches (measured once, outside the timed loop).
class CountMode final : public Mode {
 public:
  int64_t n = 0;
  Outputs handle(ops::OpKind op, std::span<const Value> args) override {
    ++n;
    return dispatch(op, args);
  }
};

template <typename Model>
void run_fake(benchmark::State& state, std::vector<int64_t> input_shape) {
  FakeMode mode;
  Device gpu("cuda:0");
  Model model(gpu);
  Tensor x = empty(input_shape, {.device = gpu});
  int64_t ops = 0;
  {
    CountMode count;
    ModeGuard g(count);
    model.forward(x);
    ops = count.n;
  }
  for (auto _ : state) {
    Tensor y = model.forward(x);
    benchmark::DoNotOptimize(y.impl());
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["ns/op"] = benchmark::Counter(
      static_cast<double>(ops), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_FakeMlpForward(benchmark::State& state) { run_fake<Mlp>(state, {64, 512}); }
BENCHMARK(BM_FakeMlpForward)->Unit(benchmark::kMicrosecond);

void BM_FakeBlockForward(benchmark::State& state) { run_fake<Block>(state, {4, 128, 256}); }
BENCHMARK(BM_FakeBlockForward)->Unit(benchmark::kMicrosecond);

}  // namespace

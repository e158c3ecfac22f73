// Fake propagation cost per op on the shared MLP and transformer-block workloads
// (bench/peers/models.py, re-implemented op for op), parameters on cuda:0 on a
// machine without CUDA. Compare with a FakeTensorMode peer (not in bench/peers) ("fake" rows).
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
  state.counters["ns/op"] =
      benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsIterationInvariantRate |
                                                       benchmark::Counter::kInvert);
}

void BM_FakeMlpForward(benchmark::State& state) { run_fake<Mlp>(state, {64, 512}); }
BENCHMARK(BM_FakeMlpForward)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_FakeBlockForward(benchmark::State& state) { run_fake<Block>(state, {4, 128, 256}); }
BENCHMARK(BM_FakeBlockForward)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

// Sharding propagation (issue 19): the same ops on DTensors of a fake 8-rank mesh
// (global metadata, the rule, the local op, the wrapper) vs on their plain local shards,
// both under FakeMode. Per op.
namespace {
using namespace kiln;

template <bool kDistributed>
void run_sharded_ops(benchmark::State& state) {
  FakeMode fake;
  dist::DeviceMesh mesh = dist::DeviceMesh::fake({8}, {"tp"}, 3, Device("cpu:0"));
  Tensor x = empty({64, 256}), w = empty({256});
  if constexpr (kDistributed) {
    x = dist::distribute_tensor(empty({512, 256}), mesh, {dist::Shard(0)});
    w = dist::distribute_tensor(w, mesh, {dist::Replicate()});
  }
  for (auto _ : state) {
    Tensor y = relu(add(mul(x, w), 1.0));  // three pointwise ops, shards kept
    Tensor s = sum(y, {1});                // a reduction over an unsharded dim
    benchmark::DoNotOptimize(s.impl());
  }
  state.counters["ns/op"] = benchmark::Counter(
      double(state.iterations()) * 4, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
void BM_ShardedOpsDTensor(benchmark::State& state) { run_sharded_ops<true>(state); }
void BM_ShardedOpsLocal(benchmark::State& state) { run_sharded_ops<false>(state); }
BENCHMARK(BM_ShardedOpsDTensor)->UseRealTime();
BENCHMARK(BM_ShardedOpsLocal)->UseRealTime();
}  // namespace

// Fake propagation cost per op on the shared MLP and transformer-block workloads
// (../shared/peers/models.py, re-implemented op for op), parameters on cuda:0 on a
// machine without CUDA. Compare with ../shared/peers/fake_prop.py ("fake" rows).
#include <benchmark/benchmark.h>

#include <cmath>

#include "kiln/kiln.h"

namespace {

using namespace kiln;

struct Linear {
  Tensor w, b;
  Linear(int64_t in, int64_t out, Device d)
      : w(empty({out, in}, {.device = d})), b(empty({out}, {.device = d})) {}
  Tensor operator()(const Tensor& x) const { return linear(x, w, b); }
};

struct Mlp {
  std::vector<Linear> layers;
  explicit Mlp(Device d) {
    for (int i = 0; i < 8; ++i) layers.emplace_back(512, 512, d);
  }
  Tensor forward(Tensor x) const {
    for (const Linear& l : layers) x = relu(l(x));
    return x;
  }
};

struct Block {
  static constexpr int64_t B = 4, T = 128, C = 256, H = 4, D = 64;
  Tensor ln1_w, ln1_b, ln2_w, ln2_b;
  Linear qkv, proj, fc1, fc2;
  explicit Block(Device d)
      : ln1_w(empty({C}, {.device = d})), ln1_b(empty({C}, {.device = d})),
        ln2_w(empty({C}, {.device = d})), ln2_b(empty({C}, {.device = d})),
        qkv(C, 3 * C, d), proj(C, C, d), fc1(C, 1024, d), fc2(1024, C, d) {}
  Tensor forward(Tensor x) const {
    Tensor h = layer_norm(x, {C}, ln1_w, ln1_b);
    Tensor t = permute(reshape(qkv(h), {B, T, 3, H, D}), {2, 0, 3, 1, 4});
    Tensor q = select(t, 0, 0), k = select(t, 0, 1), v = select(t, 0, 2);
    Tensor att = softmax(matmul(q, transpose(k, -2, -1)) * (1.0 / std::sqrt(double(D))), -1);
    Tensor y = reshape(transpose(matmul(att, v), 1, 2), {B, T, C});
    x = x + proj(y);
    return x + fc2(gelu(fc1(layer_norm(x, {C}, ln2_w, ln2_b))));
  }
};

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

// Device runtime costs: an op queued on a side stream (compare BM_TinyAdd, the same op
// inline on the default stream), and an event record + cross-stream wait.
#include <benchmark/benchmark.h>

#include "kiln/kiln.h"

namespace {

using namespace kiln;

// Per op, amortised over a batch of 256 queued adds and one synchronize.
void BM_AddSideStream(benchmark::State& state) {
  Device cpu0("cpu:0");
  Stream s = Stream::create(cpu0);
  Tensor a = ones({8}), b = ones({8});
  for (auto _ : state) {
    {
      StreamGuard g(s);
      for (int i = 0; i < 256; ++i) {
        Tensor c = add(a, b);
        benchmark::DoNotOptimize(c.impl());
      }
    }
    s.synchronize();
  }
  state.SetItemsProcessed(state.iterations() * 256);
}
BENCHMARK(BM_AddSideStream)->UseRealTime();

void BM_EventRecordWait(benchmark::State& state) {
  Device cpu0("cpu:0");
  Stream a = Stream::create(cpu0), b = Stream::create(cpu0);
  for (auto _ : state) {
    Event e;
    e.record(a);
    e.wait(b);
  }
  b.synchronize();
}
BENCHMARK(BM_EventRecordWait)->UseRealTime();

}  // namespace

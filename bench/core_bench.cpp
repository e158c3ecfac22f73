// Foundation benchmarks (see ../shared/the benchmarks and docs/benchmarks.md):
//  - tiny-op dispatch: add of two 8-element f32 tensors, per call; the same add
//    registered as an extension op (define_op) to measure what registration costs
//  - SGEMM 1024^3 through kiln's matmul vs OpenBLAS called directly
//  - elementwise add of 2 x 16M floats, reported as bytes/s against the bandwidth bound
#include <benchmark/benchmark.h>
#include <cblas.h>

#include "extension_add.h"
#include "kiln/backend/cpu/kernels.h"
#include "kiln/kiln.h"

extern "C" int blas_thread_shutdown_(void) __attribute__((weak));  // OpenBLAS (pthreads)

namespace {

using namespace kiln;

void BM_TinyAdd(benchmark::State& state) {
  Tensor a = ones({8}), b = ones({8});
  for (auto _ : state) {
    Tensor c = add(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
}
BENCHMARK(BM_TinyAdd)->UseRealTime();

// The built-in add registered as an extension op: the difference from BM_TinyAdd is
// what going through the registry costs per call (E1).
void BM_TinyExtensionAdd(benchmark::State& state) {
  const ops::OpKind op = bench::extension_add_op();
  Tensor a = ones({8}), b = ones({8});
  for (auto _ : state) {
    Tensor c = std::move(call_op(op, {a, b, Scalar(1)})[0]);  // boxed per call, as add() does
    benchmark::DoNotOptimize(c.impl());
  }
}
BENCHMARK(BM_TinyExtensionAdd)->UseRealTime();

void BM_TinyAddMeta(benchmark::State& state) {
  Tensor a = empty({8}, {.device = Device("meta")}), b = empty({8}, {.device = Device("meta")});
  for (auto _ : state) {
    Tensor c = add(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
}
BENCHMARK(BM_TinyAddMeta)->UseRealTime();

// An n^3 GEMM does 2 n^3 flops per iteration.
void report_gflops(benchmark::State& state, int64_t n) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void BM_SgemmKiln(benchmark::State& state) {
  int64_t n = state.range(0);
  Tensor a = randn({n, n}), b = randn({n, n});
  for (auto _ : state) {
    Tensor c = matmul(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
  report_gflops(state, n);
}
BENCHMARK(BM_SgemmKiln)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SgemmOpenBlas(benchmark::State& state) {
  int n = static_cast<int>(state.range(0));
  std::vector<float> a(n * n, 1.0f), b(n * n, 0.5f), c(n * n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  report_gflops(state, n);
  // OpenBLAS's workers spin for ~0.1 s after a threaded call: stop them, or the next
  // benchmark's OpenMP team would share its cores with them.
  if (blas_thread_shutdown_) blas_thread_shutdown_();
}
BENCHMARK(BM_SgemmOpenBlas)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

// One MLP layer of the benchmarks (x[64,512] -> Linear 512->512 -> ReLU) at 1 and 2 threads:
// the GEMM library and intra-op threads (Note [oneDNN for f32 GEMM]).
void BM_MlpLayer(benchmark::State& state) {
  kiln::NumThreadsGuard threads(static_cast<int>(state.range(0)));
  Tensor x = randn({64, 512}), w = randn({512, 512}), b = randn({512});
  for (auto _ : state) {
    Tensor y = relu(linear(x, w, b));
    benchmark::DoNotOptimize(y.impl());
  }
}
BENCHMARK(BM_MlpLayer)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

// The MLP layer's product alone through each library at one thread.
void BM_MlpProduct(benchmark::State& state, cpu::GemmLibrary lib) {
  kiln::NumThreadsGuard threads(1);
  cpu::set_gemm_library(lib);
  Tensor x = randn({64, 512}), w = randn({512, 512}), b = randn({512});
  for (auto _ : state) {
    Tensor y = linear(x, w, b);
    benchmark::DoNotOptimize(y.impl());
  }
  cpu::set_gemm_library(cpu::GemmLibrary::automatic);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * 64 * 512 * 512 * double(state.iterations()),
                                                 benchmark::Counter::kIsRate);
}
// linear with few rows of output (small batches) at 1 and 2 threads: where computing the
// product transposed pays (Note [Short products transposed]).
void BM_ShortProduct(benchmark::State& state) {
  kiln::NumThreadsGuard threads(static_cast<int>(state.range(3)));
  int64_t n = state.range(0), m = state.range(1), k = state.range(2);
  Tensor x = randn({n, k}), w = randn({m, k}), b = randn({m});
  for (auto _ : state) {
    Tensor y = linear(x, w, b);
    benchmark::DoNotOptimize(y.impl());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * m * k * double(state.iterations()), benchmark::Counter::kIsRate);
}
// (The sweep behind the note: rows {1, 4, 8, 16, 32, 48, 64, 96, 128} x columns and depths
// {256, 512, 1024}, with the note's rule switched off and on.)
BENCHMARK(BM_ShortProduct)
    ->ArgsProduct({{16, 32, 64, 128}, {512}, {512, 1024}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_MlpProduct, openblas, cpu::GemmLibrary::openblas)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
// BLOCK's attention products at one thread with heads as they come from the fused qkv
// (strided; a key transposed is column-major) and with the same heads made dense first:
// what copying strided batches costs.
void BM_AttentionProduct(benchmark::State& state) {
  kiln::NumThreadsGuard threads(1);
  Tensor qkv = randn({4, 128, 768});
  Tensor heads = permute(reshape(qkv, {4, 128, 3, 4, 64}), {2, 0, 3, 1, 4});
  Tensor q = select(heads, 0, 0), k = select(heads, 0, 1), scores = randn({4, 4, 128, 128});
  bool dense = state.range(1) != 0;
  if (dense) {
    q = contiguous(q);
    k = contiguous(k);
  }
  for (auto _ : state) {
    Tensor y = state.range(0) == 0 ? matmul(q, transpose(k, -2, -1)) : matmul(scores, q);
    benchmark::DoNotOptimize(y.impl());
  }
  state.SetLabel(std::string(state.range(0) == 0 ? "q k^T" : "scores v") +
                 (dense ? ", dense heads" : ", strided heads"));
}
BENCHMARK(BM_AttentionProduct)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_MlpProduct, onednn, cpu::GemmLibrary::onednn)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// The BLOCK's four linear products ([512, K] x [K, N] + bias) through each library at one
// thread, in GFLOP/s: the GEMM evaluation of docs/benchmarks.md ("Which GEMM"), beside
// bench/peers/gemm_peer.py (PyTorch's addmm: MKL) at the same shapes.
void BM_BlockProducts(benchmark::State& state, cpu::GemmLibrary lib) {
  kiln::NumThreadsGuard threads(1);
  cpu::set_gemm_library(lib);
  int64_t k = state.range(0), n = state.range(1);
  Tensor x = randn({512, k}), w = randn({n, k}), b = randn({n});
  for (auto _ : state) benchmark::DoNotOptimize(linear(x, w, b).impl());
  cpu::set_gemm_library(cpu::GemmLibrary::automatic);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * 512 * k * n * double(state.iterations()),
                                                 benchmark::Counter::kIsRate);
}
void block_product_shapes(benchmark::internal::Benchmark* b) {  // (K, N): qkv, proj, fc1, fc2
  b->Args({256, 768})->Args({256, 256})->Args({256, 1024})->Args({1024, 256});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
BENCHMARK_CAPTURE(BM_BlockProducts, onednn, cpu::GemmLibrary::onednn)->Apply(block_product_shapes);
BENCHMARK_CAPTURE(BM_BlockProducts, openblas, cpu::GemmLibrary::openblas)
    ->Apply(block_product_shapes);

// linear_backward's products at one thread: d weight = g^T x (a column-major left
// operand, the sum over the batch rows) and d input = g W, for the MLP's [64, 512]
// layers and the BLOCK's [512, 256] -> 1024; per library, and with g^T copied dense first
// (label "dense"): what Note [Transposed left operands at AVX2] routes.
void BM_BackwardProducts(benchmark::State& state, cpu::GemmLibrary lib) {
  kiln::NumThreadsGuard threads(1);
  cpu::set_gemm_library(lib);
  int64_t rows = state.range(0), in = state.range(1), out = state.range(2);
  bool dense = state.range(3) != 0;
  Tensor g = randn({rows, out}), x = randn({rows, in});
  for (auto _ : state) {
    Tensor gt = dense ? contiguous(t(g)) : t(g);
    benchmark::DoNotOptimize(mm(gt, x).impl());
  }
  cpu::set_gemm_library(cpu::GemmLibrary::automatic);
  state.SetLabel(dense ? "g^T x, g^T dense" : "g^T x");
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * in * out * double(state.iterations()),
                                                 benchmark::Counter::kIsRate);
}
void backward_shapes(benchmark::internal::Benchmark* b) {  // rows, in, out, dense
  for (int dense : {0, 1}) b->Args({64, 512, 512, dense})->Args({512, 256, 1024, dense});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
BENCHMARK_CAPTURE(BM_BackwardProducts, onednn, cpu::GemmLibrary::onednn)->Apply(backward_shapes);
BENCHMARK_CAPTURE(BM_BackwardProducts, openblas, cpu::GemmLibrary::openblas)
    ->Apply(backward_shapes);
BENCHMARK_CAPTURE(BM_BackwardProducts, automatic, cpu::GemmLibrary::automatic)
    ->Apply(backward_shapes);

// Small square products through each library: where the automatic choice switches.
void BM_GemmSmall(benchmark::State& state, cpu::GemmLibrary lib) {
  kiln::NumThreadsGuard threads(1);
  cpu::set_gemm_library(lib);
  int64_t n = state.range(0);
  Tensor a = randn({n, n}), b = randn({n, n});
  for (auto _ : state) {
    Tensor c = mm(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
  cpu::set_gemm_library(cpu::GemmLibrary::automatic);
}
BENCHMARK_CAPTURE(BM_GemmSmall, openblas, cpu::GemmLibrary::openblas)
    ->RangeMultiplier(2)
    ->Range(8, 64)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_GemmSmall, onednn, cpu::GemmLibrary::onednn)
    ->RangeMultiplier(2)
    ->Range(8, 64)
    ->UseRealTime();

// Elementwise add and GELU of 1M elements in f32, f16 and bf16, one thread (issue 21:
// the half types within 1.5x of f32, F16C conversions in the kernels).
void BM_Elementwise1M(benchmark::State& state, DType dtype, bool gelu_op) {
  kiln::NumThreadsGuard threads(1);
  Tensor a = to(randn({1 << 20}), dtype), b = to(randn({1 << 20}), dtype);
  for (auto _ : state) {
    Tensor c = gelu_op ? gelu(a) : add(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
}
BENCHMARK_CAPTURE(BM_Elementwise1M, add_f32, DType::f32, false)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Elementwise1M, add_f16, DType::f16, false)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Elementwise1M, add_bf16, DType::bf16, false)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Elementwise1M, gelu_f32, DType::f32, true)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Elementwise1M, gelu_f16, DType::f16, true)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// The transcendental elementwise ops on 1M f32 elements, one thread: `make bench` runs
// them at every level the CPU has (KILN_CPU_ISA) beside PyTorch's time for the same op.
void BM_Math1M(benchmark::State& state, int which) {
  kiln::NumThreadsGuard threads(1);
  Tensor a = randn({1 << 20});
  for (auto _ : state) {
    Tensor c = which == 0   ? exp(a)
               : which == 1 ? erf(a)
               : which == 2 ? tanh(a)
               : which == 3 ? sigmoid(a)
               : which == 4 ? silu(a)
               : which == 5 ? gelu(a)
                            : gelu(a, "tanh");
    benchmark::DoNotOptimize(c.impl());
  }
}
BENCHMARK_CAPTURE(BM_Math1M, exp, 0)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Math1M, erf, 1)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Math1M, tanh, 2)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Math1M, sigmoid, 3)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Math1M, silu, 4)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Math1M, gelu, 5)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Math1M, gelu_tanh, 6)->Unit(benchmark::kMicrosecond)->UseRealTime();

// The row kernels and GELU of the benchmark BLOCK at its shapes, one thread: what a BLOCK
// forward spends outside its products.
void BM_BlockRowOps(benchmark::State& state, int which) {
  kiln::NumThreadsGuard threads(1);
  Tensor x = randn({4, 128, 256}), w = randn({256}), b = randn({256});
  Tensor scores = randn({4, 4, 128, 128}), hidden = randn({4, 128, 1024});
  Tensor gx = randn({4, 128, 256}), gh = randn({4, 128, 1024});
  for (auto _ : state) {
    Tensor y = which == 0   ? layer_norm(x, {256}, w, b)
               : which == 1 ? softmax(scores, -1)
               : which == 2 ? gelu(hidden)
               : which == 3 ? mean(x)  // mse_loss's mean over everything
               : which == 4 ? sum(scores, {-1}, true)
               : which == 5 ? layer_norm_backward(gx, x, {256}, w).input  // all three gradients
                            : gelu_backward(gh, hidden);
    benchmark::DoNotOptimize(y.impl());
  }
}
BENCHMARK_CAPTURE(BM_BlockRowOps, layer_norm, 0)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_BlockRowOps, softmax, 1)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_BlockRowOps, gelu, 2)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_BlockRowOps, mean_all, 3)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_BlockRowOps, sum_rows, 4)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_BlockRowOps, layer_norm_backward, 5)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_BlockRowOps, gelu_backward, 6)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Reads 2 x 64 MiB and writes 64 MiB per call; the output block is reused by the
// caching allocator, so no page is touched for the first time after warm-up.
void BM_Add16M(benchmark::State& state) {
  int64_t n = 16 << 20;
  Tensor a = rand({n}), b = rand({n});
  benchmark::DoNotOptimize(add(a, b).impl());  // warm-up: the output block's pages faulted in once
  for (auto _ : state) {
    Tensor c = add(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
  state.SetBytesProcessed(state.iterations() * n * 12);
}
BENCHMARK(BM_Add16M)->Unit(benchmark::kMillisecond)->UseRealTime();

// The bandwidth bound for the same traffic: a plain loop the compiler vectorizes.
void BM_Add16MRawLoop(benchmark::State& state) {
  int64_t n = 16 << 20;
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n);
  for (auto _ : state) {
    for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
    benchmark::DoNotOptimize(c.data());
  }
  state.SetBytesProcessed(state.iterations() * n * 12);
}
BENCHMARK(BM_Add16MRawLoop)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

// The CPU backend's performance machinery, checked for correctness: both GEMM libraries
// (Note [oneDNN for f32 GEMM]) and intra-op threads (Note [Intra-op threads]).
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <stdexcept>
#include <thread>

#include "kiln/backend/cpu/convert.h"
#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/onednn.h"
#include "kiln/backend/cpu/parallel.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::expect_error;

// Same shape and bitwise the same values (NaNs equal).
::testing::AssertionResult same(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << "shape or dtype";
  std::vector<double> av = to_vector<double>(a), bv = to_vector<double>(b);
  for (size_t i = 0; i < av.size(); ++i)
    if (!(av[i] == bv[i] || (std::isnan(av[i]) && std::isnan(bv[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": " << av[i] << " vs " << bv[i];
  return ::testing::AssertionSuccess();
}

// Restores the GEMM library and thread budgets a test changed.
struct Restore {
  cpu::GemmLibrary lib = cpu::gemm_library();
  int threads = get_num_threads();
  ~Restore() {
    cpu::set_gemm_library(lib);
    set_num_threads(threads);
    for (int i = 0; i < 4; ++i) set_num_threads(Device(DeviceType::cpu, i), 0);
  }
};

std::vector<cpu::GemmLibrary> libraries() {
  std::vector<cpu::GemmLibrary> libs{cpu::GemmLibrary::openblas, cpu::GemmLibrary::automatic};
  if (cpu::onednn_available()) libs.push_back(cpu::GemmLibrary::onednn);
  return libs;
}

// f32 results against the same product in f64.
void expect_matches_f64(const Tensor& got, const Tensor& ref64, const std::string& what) {
  EXPECT_EQ(got.dtype(), DType::f32) << what;
  EXPECT_TRUE(testing::all_close(got, to_vector<double>(ref64), 1e-5, 1e-4)) << what;
}

TEST(GemmLibraries, EveryLayoutMatchesADoubleReference) {
  Restore restore;
  manual_seed(3);
  struct Shape {
    int64_t n, k, m;
  };
  std::vector<Shape> shapes{{1, 1, 1},      {3, 5, 2},     {64, 512, 512},
                            {130, 67, 129}, {1, 300, 200}, {200, 300, 1}};
  for (cpu::GemmLibrary lib : libraries()) {
    cpu::set_gemm_library(lib);
    for (Shape s : shapes)
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          Tensor a = ta ? t(randn({s.k, s.n})) : randn({s.n, s.k});
          Tensor b = tb ? t(randn({s.m, s.k})) : randn({s.k, s.m});
          Tensor a64 = to(a, DType::f64), b64 = to(b, DType::f64);
          std::string what = fmt::format("lib {} [{}x{}]{} @ [{}x{}]{}", static_cast<int>(lib), s.n,
                                         s.k, ta ? "T" : "", s.k, s.m, tb ? "T" : "");
          expect_matches_f64(mm(a, b), mm(a64, b64), what);
          Tensor c = randn({s.n, s.m});
          expect_matches_f64(addmm(c, a, b, 0.5, -2.0),
                             addmm(to(c, DType::f64), a64, b64, 0.5, -2.0), "addmm " + what);
        }
    // linear with and without bias, batch dims folded into rows
    Tensor x = randn({4, 33, 96}), w = randn({80, 96}), bias = randn({80});
    Tensor x64 = to(x, DType::f64), w64 = to(w, DType::f64);
    expect_matches_f64(linear(x, w, bias), linear(x64, w64, to(bias, DType::f64)), "linear");
    expect_matches_f64(linear(x, w), linear(x64, w64), "linear without bias");
    // a bias row: added inside oneDNN's product when it takes it (alpha 1), else broadcast
    // first; a strided bias is broadcast
    Tensor a2 = randn({70, 96}), row = randn({80}), strided = select(randn({80, 2}), 1, 1);
    Tensor a2_64 = to(a2, DType::f64), wt64 = t(w64);
    for (double alpha : {1.0, 2.0})
      for (const Tensor& bias_row : {row, strided})
        expect_matches_f64(addmm(bias_row, a2, t(w), 1.0, alpha),
                           addmm(to(bias_row, DType::f64), a2_64, wt64, 1.0, alpha),
                           fmt::format("addmm with a bias row, alpha {}", alpha));
    // batched: contiguous, transposed inside the batch, broadcast batch of matmul
    Tensor p = randn({6, 40, 50}), q = randn({6, 50, 70}), qt = transpose(randn({6, 70, 50}), 1, 2);
    expect_matches_f64(bmm(p, q), bmm(to(p, DType::f64), to(q, DType::f64)), "bmm");
    expect_matches_f64(bmm(p, qt), bmm(to(p, DType::f64), to(qt, DType::f64)), "bmm transposed");
    // batches of every layout: heads selected from a fused qkv (strided batch dims that do
    // not collapse into one), a transposed key, a dense batch taken as it lies (the
    // scores), a selected batch, an empty batch, and matrices that share memory (each row
    // overlaps the next: per matrix through BLAS)
    Tensor qkv = randn({2, 24, 3, 4, 16});  // [B, T, 3, H, D]
    Tensor heads = permute(qkv, {2, 0, 3, 1, 4}),
           heads64 = to(heads, DType::f64);  // [3, B, H, T, D]
    Tensor hq = select(heads, 0, 0), hk = select(heads, 0, 1), hv = select(heads, 0, 2);
    Tensor q64 = select(heads64, 0, 0), k64 = select(heads64, 0, 1), v64 = select(heads64, 0, 2);
    Tensor scores = matmul(hq, transpose(hk, -2, -1));
    expect_matches_f64(scores, matmul(q64, transpose(k64, -2, -1)), "attention scores");
    expect_matches_f64(matmul(scores, hv), matmul(to(scores, DType::f64), v64), "attention values");
    // strided heads transposed (column-major matrices, copied as such): backward's q^T
    expect_matches_f64(matmul(transpose(hq, -2, -1), scores),
                       matmul(transpose(q64, -2, -1), to(scores, DType::f64)),
                       "a strided head transposed");
    Tensor kk = transpose(select(randn({3, 2, 4, 5}), 1, 1), -2, -1),
           left = randn({2, 1, 6, 5});  // [3, 5, 4]
    expect_matches_f64(matmul(left, kk), matmul(to(left, DType::f64), to(kk, DType::f64)),
                       "a broadcast batch of strided column-major matrices");
    Tensor dense_v = contiguous(hv),
           scores64 = to(scores, DType::f64);  // transposes of dense batches
    expect_matches_f64(matmul(transpose(scores, -2, -1), dense_v),
                       matmul(transpose(scores64, -2, -1), to(dense_v, DType::f64)),
                       "transposed scores");
    expect_matches_f64(matmul(dense_v, transpose(dense_v, -2, -1)),
                       matmul(to(dense_v, DType::f64), transpose(to(dense_v, DType::f64), -2, -1)),
                       "v v^T");
    Tensor many = select(randn({20, 3, 5, 7, 6}), 1, 2), right = randn({20, 5, 6, 4});
    expect_matches_f64(matmul(many, right), matmul(to(many, DType::f64), to(right, DType::f64)),
                       "a selected batch");
    EXPECT_EQ(matmul(randn({0, 3, 4, 5}), randn({0, 3, 5, 2})).shape(), Dims({0, 3, 4, 2}));
    Tensor base = randn({200}), rhs = randn({3, 8, 5});
    expect_matches_f64(
        matmul(as_strided(base, {3, 10, 8}, {20, 2, 1}), rhs),
        matmul(as_strided(to(base, DType::f64), {3, 10, 8}, {20, 2, 1}), to(rhs, DType::f64)),
        "overlapping rows");
    Tensor r = randn({2, 1, 40, 50}), u = randn({3, 50, 60});
    expect_matches_f64(matmul(r, u), matmul(to(r, DType::f64), to(u, DType::f64)),
                       "matmul broadcast");
    // an empty inner dimension: zeros, and addmm keeps beta * self
    Tensor z = mm(zeros({3, 0}), zeros({0, 4}));
    EXPECT_TRUE(testing::all_close(z, std::vector<double>(12, 0.0)));
    Tensor self = ones({3, 4});
    EXPECT_TRUE(testing::all_close(addmm(self, zeros({3, 0}), zeros({0, 4}), 2.0),
                                   std::vector<double>(12, 2.0)));
  }
}

// Note [Short products transposed]: products with 16-64 rows of output are computed as
// c^T = b^T a^T and transposed back (bias added on the way): whole 16 x 16 tiles and
// ragged edges, operands in either orientation, alpha, at 1 and 2 threads.
TEST(GemmLibraries, ShortProductsComputedTransposedMatchADoubleReference) {
  Restore restore;
  manual_seed(4);
  struct Shape {
    int64_t n, k, m;
  };
  for (int threads : {1, 2}) {
    kiln::NumThreadsGuard guard(threads);
    for (Shape s :
         {Shape{16, 600, 512}, Shape{40, 512, 300}, Shape{64, 512, 512}, Shape{32, 256, 1024},
          Shape{520, 80, 100}})  // the last: d weight's shape, taller than wide
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          Tensor a = ta ? t(randn({s.k, s.n})) : randn({s.n, s.k});
          Tensor b = tb ? t(randn({s.m, s.k})) : randn({s.k, s.m});
          Tensor a64 = to(a, DType::f64), b64 = to(b, DType::f64);
          std::string what = fmt::format("[{}x{}]{} @ [{}x{}]{}, {} thread(s)", s.n, s.k,
                                         ta ? "T" : "", s.k, s.m, tb ? "T" : "", threads);
          expect_matches_f64(mm(a, b), mm(a64, b64), what);
          Tensor c = randn({s.n, s.m});  // beta 0: c is not read
          expect_matches_f64(addmm(c, a, b, 0.0, 2.0), addmm(to(c, DType::f64), a64, b64, 0.0, 2.0),
                             "addmm alpha 2 " + what);
          Tensor bias = randn({s.m});
          expect_matches_f64(addmm(bias, a, b), addmm(to(bias, DType::f64), a64, b64),
                             "bias row " + what);
        }
    // linear: batch dims folded into 40 rows, with and without bias
    Tensor x = randn({2, 20, 512}), w = randn({300, 512}), bias = randn({300});
    Tensor x64 = to(x, DType::f64), w64 = to(w, DType::f64);
    expect_matches_f64(linear(x, w, bias), linear(x64, w64, to(bias, DType::f64)), "short linear");
    expect_matches_f64(linear(x, w), linear(x64, w64), "short linear without bias");
  }
}

// oneDNN's primitives are kept per thread for the last 64 product layouts: more shapes
// than that, each again after the others evicted it, and at two thread counts.
TEST(GemmLibraries, KeptPrimitivesMatchTheirProducts) {
  if (!cpu::onednn_available()) GTEST_SKIP() << "this kiln was built without oneDNN";
  Restore restore;
  cpu::set_gemm_library(cpu::GemmLibrary::onednn);
  manual_seed(5);
  for (int threads : {1, 2}) {
    kiln::NumThreadsGuard guard(threads);
    for (int round = 0; round < 2; ++round)
      for (int64_t n = 1; n <= 70; ++n) {
        Tensor a = randn({n, 9}), b = randn({9, 5}), bias = randn({5});
        std::string what = fmt::format("[{}x9] @ [9x5], {} thread(s), round {}", n, threads, round);
        expect_matches_f64(mm(a, b), mm(to(a, DType::f64), to(b, DType::f64)), what);
        expect_matches_f64(linear(a, t(b), bias),
                           linear(to(a, DType::f64), to(t(b), DType::f64), to(bias, DType::f64)),
                           "linear " + what);
      }
  }
}

TEST(GemmLibraries, OneDnnCanBeChosenExactlyWhenBuiltIn) {
  Restore restore;
  if (cpu::onednn_available()) {
    cpu::set_gemm_library(cpu::GemmLibrary::onednn);
    EXPECT_EQ(cpu::gemm_library(), cpu::GemmLibrary::onednn);
  } else {
    expect_error([] { cpu::set_gemm_library(cpu::GemmLibrary::onednn); }, ErrorKind::unsupported,
                 "without oneDNN");
    EXPECT_NE(cpu::gemm_library(), cpu::GemmLibrary::onednn);
  }
}

// A convolution summed window by window in double: the reference both CPU paths (oneDNN,
// im2col + GEMM: Note [Convolution on the CPU]) are held to.
std::vector<double> direct_convolution(const Tensor& x, const Tensor& w, const Tensor& bias,
                                       const IntList& stride, const IntList& padding,
                                       const IntList& dilation, int64_t groups) {
  auto rank = static_cast<size_t>(w.dim() - 2);
  std::vector<double> xv = to_vector<double>(contiguous(x)), wv = to_vector<double>(w);
  std::vector<double> bv = bias.defined() ? to_vector<double>(bias) : std::vector<double>();
  // Sizes as 3-D (leading spatial dims of size 1).
  std::array<int64_t, 3> in{1, 1, 1}, k{1, 1, 1}, out{1, 1, 1}, s{1, 1, 1}, p{0, 0, 0}, d{1, 1, 1};
  for (size_t i = 0; i < rank; ++i) {
    size_t j = 3 - rank + i;
    in[j] = x.size(static_cast<int64_t>(i) + 2);
    k[j] = w.size(static_cast<int64_t>(i) + 2);
    s[j] = stride[i];
    p[j] = padding[i];
    d[j] = dilation[i];
    out[j] = (in[j] + 2 * p[j] - d[j] * (k[j] - 1) - 1) / s[j] + 1;
  }
  int64_t n = x.size(0), c = x.size(1), o = w.size(0), cg = c / groups, og = o / groups;
  std::vector<double> y;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t y0 = 0; y0 < out[0]; ++y0)
        for (int64_t y1 = 0; y1 < out[1]; ++y1)
          for (int64_t y2 = 0; y2 < out[2]; ++y2) {
            double acc = bias.defined() ? bv[static_cast<size_t>(oc)] : 0.0;
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t t0 = 0; t0 < k[0]; ++t0)
                for (int64_t t1 = 0; t1 < k[1]; ++t1)
                  for (int64_t t2 = 0; t2 < k[2]; ++t2) {
                    int64_t i0 = y0 * s[0] - p[0] + t0 * d[0], i1 = y1 * s[1] - p[1] + t1 * d[1],
                            i2 = y2 * s[2] - p[2] + t2 * d[2];
                    if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2])
                      continue;
                    int64_t channel = oc / og * cg + ci;
                    acc += xv[static_cast<size_t>(
                               (((b * c + channel) * in[0] + i0) * in[1] + i1) * in[2] + i2)] *
                           wv[static_cast<size_t>(
                               (((oc * cg + ci) * k[0] + t0) * k[1] + t1) * k[2] + t2)];
                  }
            y.push_back(acc);
          }
  return y;
}

// Every geometry (1-3 spatial dims, groups and depthwise, stride, padding, dilation, a
// channels-last input, no bias, an empty batch) through both CPU paths, f32 and f64, and
// integers, against the direct sum.
TEST(Convolution, BothCpuPathsMatchADirectSum) {
  Restore restore;
  manual_seed(8);
  struct Case {
    Dims x, w;
    IntList stride, padding, dilation;
    int64_t groups;
    bool bias, channels_last;
  };
  std::vector<Case> cases{
      {{2, 3, 9}, {4, 3, 3}, {2}, {1}, {1}, 1, true, false},
      {{2, 4, 7, 6}, {6, 2, 3, 2}, {2, 1}, {1, 0}, {1, 2}, 2, true, false},
      {{2, 16, 10, 10}, {16, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 16, true, false},  // depthwise
      {{1, 3, 17, 17}, {16, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, false, false},   // a stem
      {{2, 8, 6, 5}, {12, 8, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true, true},       // pointwise
      {{2, 5, 9, 8}, {7, 5, 3, 3}, {1, 2}, {2, 1}, {2, 1}, 1, true, true},
      {{1, 2, 5, 6, 4}, {3, 2, 2, 3, 2}, {1, 2, 1}, {0, 1, 1}, {2, 1, 1}, 1, true, false},
      {{0, 3, 5, 5}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, false},
      // 400 KB of input and output per image: oneDNN runs 2 images per call, then the
      // last one alone (images_per_call in onednn.cpp)
      {{3, 32, 40, 40}, {32, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 32, true, false},
  };
  for (cpu::GemmLibrary lib : libraries()) {
    cpu::set_gemm_library(lib);
    for (const Case& k : cases)
      for (DType dt : {DType::f32, DType::f64, DType::i64}) {
        auto make = [&](const Dims& shape) {
          Tensor r = randn(shape.vec());
          return dt == DType::i64 ? to(round(r * 3.0), dt) : to(r, dt);
        };
        Tensor x = make(k.x);
        if (k.channels_last)  // the same values, channels innermost in memory
          x = permute(contiguous(permute(x, {0, 2, 3, 1})), {0, 3, 1, 2});
        Tensor w = make(k.w), b = k.bias ? make(Dims{k.w[0]}) : Tensor();
        Tensor y = convolution(x, w, b, k.stride, k.padding, k.dilation, k.groups);
        std::vector<double> ref =
            direct_convolution(x, w, b, k.stride, k.padding, k.dilation, k.groups);
        std::string what = fmt::format("lib {} {} x {} {}", static_cast<int>(lib), k.x.str(),
                                       k.w.str(), to_string(dt));
        ASSERT_EQ(static_cast<size_t>(y.numel()), ref.size()) << what;
        EXPECT_EQ(y.dtype(), dt) << what;
        if (dt == DType::i64)
          EXPECT_EQ(to_vector<double>(y), ref) << what;
        else  // f32: PyTorch's own float tolerances
          EXPECT_TRUE(testing::all_close(y, ref, dt == DType::f32 ? 1.3e-6 : 1e-7,
                                         dt == DType::f32 ? 1e-5 : 1e-7))
              << what;
      }
  }
}

TEST(IntraOpThreads, BudgetsAndTheirErrors) {
  Restore restore;
  set_num_threads(3);
  EXPECT_EQ(get_num_threads(), 3);
  EXPECT_EQ(get_num_threads(Device("cpu:1")), 3);  // no device budget: the process's
  set_num_threads(Device("cpu:1"), 1);
  EXPECT_EQ(get_num_threads(Device("cpu:1")), 1);
  EXPECT_EQ(get_num_threads(Device("cpu:2")), 3);
  {
    KernelScope scope("test", Device("cpu:1"));  // kernels use their device's budget
    EXPECT_EQ(cpu::kernel_threads(), 1);
    EXPECT_EQ(cpu::threads_for(int64_t{1} << 30, cpu::kGrain), 1);
  }
  {
    KernelScope scope("test", Device("cpu:2"));
    EXPECT_EQ(cpu::kernel_threads(), 3);
    EXPECT_LE(cpu::threads_for(int64_t{1} << 30, cpu::kGrain), 3);
    EXPECT_EQ(cpu::threads_for(cpu::kGrain, cpu::kGrain), 1);  // below two grains: one thread
  }
  expect_error([] { set_num_threads(0); }, ErrorKind::value, "at least 1 thread");
  expect_error([] { set_num_threads(Device("meta"), 2); }, ErrorKind::value, "CPU devices");
  expect_error([] { set_num_threads(Device("cpu:1"), -1); }, ErrorKind::value, "got -1");
  EXPECT_EQ(get_num_threads(), 3);  // a refused setting changes nothing
}

TEST(IntraOpThreads, GuardRestoresTheBudget) {
  Restore restore;
  set_num_threads(3);
  {
    NumThreadsGuard one(1);
    EXPECT_EQ(get_num_threads(), 1);
  }
  EXPECT_EQ(get_num_threads(), 3);
  expect_error([] { NumThreadsGuard none(0); }, ErrorKind::value, "at least 1 thread");
  EXPECT_EQ(get_num_threads(), 3);
}

TEST(IntraOpThreads, AnExceptionInAChunkReachesTheCaller) {
  Restore restore;
  set_num_threads(2);
  std::vector<int> hit(1 << 20, 0);
  EXPECT_THROW(cpu::parallel_for(static_cast<int64_t>(hit.size()), 1,
                                 [&](int64_t b, int64_t e) {
                                   for (int64_t i = b; i < e; ++i) hit[i] = 1;
                                   if (e == static_cast<int64_t>(hit.size()))
                                     throw std::runtime_error("last chunk");
                                 }),
               std::runtime_error);
  // every chunk still ran: the team finished before the error was rethrown
  EXPECT_EQ(std::count(hit.begin(), hit.end(), 1), static_cast<long>(hit.size()));
}

// A loaded machine sends kiln's kernels to one thread for a while (Note [Threads on a
// shared machine]); products keep their team, so their bits do not depend on the load.
// (oneDNN's matmul splits short sums over two threads: a train step's parameters drifted
// from eager's when the load came and went between the runs.)
TEST(IntraOpThreads, ProductsDoNotDependOnTheMachinesLoad) {
  Restore restore;
  kiln::NumThreadsGuard guard(2);
  manual_seed(6);
  std::vector<std::array<int64_t, 3>> shapes{{64, 64, 256}, {64, 256, 64}, {8, 2048, 8},
                                             {256, 64, 64}, {64, 64, 64},  {32, 16, 32}};
  std::vector<TensorList> operands;
  for (auto [n, k, m] : shapes)
    operands.push_back({randn({n, k}), randn({k, m}), t(randn({k, n})), randn({m}),
                        randn({8, n, k}), randn({8, k, m})});
  auto products = [](const TensorList& o) {
    return TensorList{mm(o[0], o[1]), mm(o[2], o[1]), addmm(o[3], o[0], o[1]), bmm(o[4], o[5])};
  };
  // Loaded: the products (and their oneDNN primitives) made during a serial spell; idle:
  // on a fresh thread (its own primitives) after the spell.
  std::vector<TensorList> loaded, idle;
  cpu::detail::serial_for_a_while();
  for (const TensorList& o : operands) loaded.push_back(products(o));
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  std::thread([&] {
    kiln::NumThreadsGuard two(2);
    for (const TensorList& o : operands) idle.push_back(products(o));
  }).join();
  for (size_t s = 0; s < shapes.size(); ++s)
    for (size_t i = 0; i < idle[s].size(); ++i)
      EXPECT_TRUE(same(idle[s][i], loaded[s][i]))
          << shapes[s][0] << "x" << shapes[s][1] << "x" << shapes[s][2] << " product " << i;
}

// Every parallel kernel gives bitwise the same result on 1, 2 and 3 threads: work is
// split by output element, row or column, never inside one sum.
TEST(IntraOpThreads, ResultsDoNotDependOnTheThreadCount) {
  Restore restore;
  manual_seed(5);
  Tensor x = randn({256, 1024}), y = randn({256, 1024}), row = randn({1024}), w = randn({1024});
  Tensor xt = transpose(randn({1024, 256}), 0, 1);  // strided: for_each_run's runs
  Tensor mask = gt(y, 0.5);
  Tensor square = randn({1024, 1024});
  auto run_all = [&] {
    std::vector<Tensor> r;
    r.push_back(add(x, y));
    r.push_back(mul(x, row));  // broadcast
    r.push_back(sub(x, xt));
    r.push_back(relu(x));
    r.push_back(gelu(x, "tanh"));
    r.push_back(gelu(xt));
    r.push_back(contiguous(xt));
    r.push_back(masked_fill(x, mask, 7.0));
    r.push_back(masked_fill(xt, mask, 7.0));
    r.push_back(sum(x, {0}));  // column sums
    r.push_back(sum(x, {1}));
    r.push_back(mean(xt, {1}));
    r.push_back(amax(x, {1}));
    r.push_back(max(x, 1).first);
    r.push_back(max(x, 1).second);
    r.push_back(var(x, {1}));
    r.push_back(softmax(x, 1));
    r.push_back(softmax(xt, 0));
    r.push_back(log_softmax(x, 1));
    r.push_back(softmax_backward(y, softmax(x, 1), 1));
    r.push_back(log_softmax_backward(y, log_softmax(xt, 0), 0));
    r.push_back(layer_norm(x, {1024}, w, row));
    r.push_back(layer_norm(x, {1024}, Tensor(), row));
    r.push_back(layer_norm(x, {1024}));
    r.push_back(rms_norm(x, {1024}, w));
    LayerNormGrads g = layer_norm_backward(y, x, {1024}, w);  // column sums over row blocks
    r.insert(r.end(), {g.input, g.weight, g.bias});
    r.push_back(layer_norm_backward(y, xt, {1024}).weight);
    r.push_back(linear_backward(y, xt, square).bias);  // columns split, each summed in row order
    r.push_back(to(x, DType::f64));
    return r;
  };
  set_num_threads(1);
  std::vector<Tensor> one = run_all();
  for (int threads : {2, 3}) {
    set_num_threads(threads);
    std::vector<Tensor> many = run_all();
    ASSERT_EQ(one.size(), many.size());
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_TRUE(same(one[i], many[i])) << "result " << i << " on " << threads << " threads";
  }
}

// The row kernels' float accumulation stays within 1e-6 relative of a double reference
// (long rows, a large common offset that naive float sums lose).
TEST(RowKernels, FloatAccumulationMatchesDouble) {
  manual_seed(9);
  Tensor x = add(randn({64, 4096}), 1000.0);
  Tensor w = randn({4096}), b = randn({4096});
  Tensor x64 = to(x, DType::f64);
  auto close = [](const Tensor& got, const Tensor& ref) {
    return testing::all_close(got, to_vector<double>(ref), 1e-6, 1e-6);
  };
  EXPECT_TRUE(close(softmax(x, 1), softmax(x64, 1)));
  EXPECT_TRUE(close(log_softmax(x, 1), log_softmax(x64, 1)));
  // layer_norm's output is (x - mean) / std: relative to its O(1) values
  EXPECT_TRUE(testing::all_close(
      layer_norm(x, {4096}, w, b),
      to_vector<double>(layer_norm(x64, {4096}, to(w, DType::f64), to(b, DType::f64))), 1e-4,
      2e-4));
  EXPECT_TRUE(testing::all_close(
      layer_norm(x, {4096}, Tensor(), b),
      to_vector<double>(layer_norm(x64, {4096}, Tensor(), to(b, DType::f64))), 1e-4, 2e-4));
  EXPECT_TRUE(close(rms_norm(x, {4096}), rms_norm(x64, {4096})));
  EXPECT_TRUE(close(mean(x, {1}), mean(x64, {1})));
  EXPECT_TRUE(close(sum(x), sum(x64)));                  // one row of 262144 (mse_loss's mean)
  EXPECT_TRUE(close(sum(t(x), {0}), sum(t(x64), {0})));  // rows gathered from columns
  // softmax's fused gradients: sum(g y) and sum(g) over rows of 4096, outputs O(1e-4)
  Tensor gs = randn({64, 4096}), gs64 = to(gs, DType::f64);
  Tensor y = softmax(x, 1), y64 = to(y, DType::f64);
  EXPECT_TRUE(testing::all_close(softmax_backward(gs, y, 1),
                                 to_vector<double>(softmax_backward(gs64, y64, 1)), 1e-6, 1e-9));
  Tensor ly = log_softmax(x, 1), ly64 = to(ly, DType::f64);
  EXPECT_TRUE(testing::all_close(log_softmax_backward(gs, ly, 1),
                                 to_vector<double>(log_softmax_backward(gs64, ly64, 1)), 1e-5,
                                 1e-5));
  // layer_norm's fused gradients: d input relative to its O(1) values, the column sums
  // over 64 rows of O(1) terms
  Tensor g = randn({64, 4096});
  LayerNormGrads f = layer_norm_backward(g, x, {4096}, w),
                 d = layer_norm_backward(to(g, DType::f64), x64, {4096}, to(w, DType::f64));
  EXPECT_TRUE(testing::all_close(f.input, to_vector<double>(d.input), 1e-4, 2e-4));
  EXPECT_TRUE(testing::all_close(f.weight, to_vector<double>(d.weight), 1e-4, 1e-3));
  EXPECT_TRUE(testing::all_close(f.bias, to_vector<double>(d.bias), 1e-5, 1e-5));
}

// A compensated row sum that overflows is the infinity (or NaN) it really is: Kahan's
// compensation turns inf - inf = NaN, and a row long enough for the vector path (64
// floats) once summed to NaN where PyTorch gives inf.
TEST(RowKernels, OverflowingRowsSumToInfinity) {
  std::vector<float> v(64, 1.0f);
  v[20] = INFINITY;
  Tensor x = from_vector(v, {1, 64});
  EXPECT_EQ(item<float>(sum(x)), INFINITY);
  EXPECT_EQ(item<float>(mean(x, {1})), INFINITY);
  std::vector<float> big(64, 3e38f);  // finite values whose sum overflows
  EXPECT_EQ(item<float>(sum(from_vector(big, {64}))), INFINITY);
  v[40] = -INFINITY;
  EXPECT_TRUE(std::isnan(item<float>(sum(from_vector(v, {64})))));
}

// Note [Portable kernels]: every level this CPU has computes the same results up to
// rounding (FMA contraction; the lane order of the row sums, which follows the register
// width), and a level above the CPU's is refused. The tolerance is float's for results
// of terms up to 10x their size (log_softmax_backward's g - e^y sum(g) cancels).
TEST(PortableKernels, EveryLevelTheCpuHasAgrees) {
  cpu::Isa best = cpu::cpu_isa_supported(), before = cpu::cpu_isa();
  manual_seed(11);
  Tensor x = randn({64, 1000}), y = randn({64, 1000}), w = randn({1000});
  Tensor h = to(x, DType::f16), bh = to(x, DType::bf16);
  auto run_all = [&] {
    return std::vector<Tensor>{add(x, y),
                               mul(x, w),
                               gelu(x, "tanh"),
                               gelu(x),
                               softmax(x, 1),
                               layer_norm(x, {1000}, w, w),
                               softmax_backward(y, softmax(x, 1), 1),
                               log_softmax_backward(y, x, 1),
                               sum(x, {0}),
                               masked_fill(x, gt(y, 0.0), 2.0),
                               to(h, DType::f32),
                               to(x, DType::f16),
                               add(h, h),
                               to(bh, DType::f32),
                               contiguous(t(x))};
  };
  cpu::set_cpu_isa(cpu::Isa::base);
  std::vector<Tensor> base = run_all();
  for (cpu::Isa isa : {cpu::Isa::avx2, cpu::Isa::avx512}) {
    if (isa > best) {
      expect_error([&] { cpu::set_cpu_isa(isa); }, ErrorKind::unsupported, "at most");
      continue;
    }
    cpu::set_cpu_isa(isa);
    std::vector<Tensor> got = run_all();
    for (size_t i = 0; i < base.size(); ++i)
      EXPECT_TRUE(testing::all_close(got[i], to_vector<double>(base[i]), 1e-5, 1e-5))
          << "result " << i << " at " << cpu::isa_name(isa);
  }
  cpu::set_cpu_isa(before);
}

// Half's conversions (the compiler's _Float16 where it has one) agree with kiln's
// portable integer code on every binary16 value and on float edge cases.
TEST(PortableKernels, HalfConversionsAgreeWithThePortableCode) {
  for (uint32_t b = 0; b < 65536; ++b) {
    Half h;
    h.bits = static_cast<uint16_t>(b);
    float want = float_from_half_bits(h.bits), got = h;
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << b;
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << b;
    ASSERT_EQ(Half(got).bits, h.bits) << b;  // exact values round-trip
  }
  std::vector<float> edges{
      0.0f,     -0.0f,     65504.0f, 65519.99f,  65520.0f,           -65520.0f,
      1e-8f,    2.98e-8f,  5.96e-8f, 6.1e-5f,    1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,
      INFINITY, -INFINITY, 3.14159f, -2.71828e4f};
  manual_seed(2);
  for (double v : to_vector<double>(mul(randn({4096}), 300.0)))
    edges.push_back(static_cast<float>(v));
  for (float f : edges) EXPECT_EQ(Half(f).bits, half_bits_from_float(f)) << f;
}

// The dense conversions (intrinsics at each level) against the scalar ones: every 16-bit
// pattern up, and float edge cases (ties, NaN, infinities, overflow) down.
TEST(PortableKernels, DenseConversionsAgreeOnEveryLevel) {
  cpu::Isa before = cpu::cpu_isa();
  std::vector<uint16_t> bits(65536 + 7);  // + 7: a tail that is not a whole vector
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint16_t>(i);
  std::vector<float> floats{
      0.0f,     -0.0f,     1.0f, 1.00390625f, 1.01171875f, 65504.0f,         65520.0f, 1e-8f,
      INFINITY, -INFINITY, NAN,  -NAN,        3.4e38f,     -1.17549435e-38f, 2.5f,     -7.75f};
  manual_seed(4);
  for (double v : to_vector<double>(mul(randn({1000}), 1000.0)))
    floats.push_back(static_cast<float>(v));
  for (uint32_t u : {0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x7fc00001u, 0xff800001u, 0x00008000u})
    floats.push_back(std::bit_cast<float>(u));  // exact bf16 ties, NaN payloads, subnormals
  for (cpu::Isa isa : {cpu::Isa::base, cpu::Isa::avx2, cpu::Isa::avx512}) {
    if (isa > cpu::cpu_isa_supported()) continue;
    cpu::set_cpu_isa(isa);
    std::vector<float> up(bits.size());
    cpu::convert_dense(reinterpret_cast<const Half*>(bits.data()), up.data(),
                       static_cast<int64_t>(bits.size()));
    for (size_t i = 0; i < bits.size(); ++i) {
      float want = float_from_half_bits(bits[i]);
      ASSERT_TRUE(std::bit_cast<uint32_t>(up[i]) == std::bit_cast<uint32_t>(want) ||
                  (std::isnan(up[i]) && std::isnan(want)))
          << "f16 " << bits[i] << " at " << cpu::isa_name(isa);
    }
    cpu::convert_dense(reinterpret_cast<const BFloat16*>(bits.data()), up.data(),
                       static_cast<int64_t>(bits.size()));
    for (size_t i = 0; i < bits.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(up[i]), uint32_t(bits[i]) << 16) << "bf16 " << bits[i];
    std::vector<Half> h(floats.size());
    std::vector<BFloat16> b(floats.size());
    cpu::convert_dense(floats.data(), h.data(), static_cast<int64_t>(floats.size()));
    cpu::convert_dense(floats.data(), b.data(), static_cast<int64_t>(floats.size()));
    for (size_t i = 0; i < floats.size(); ++i) {
      uint16_t want_h = half_bits_from_float(floats[i]), want_b = BFloat16(floats[i]).bits;
      bool h_nan = (want_h & 0x7c00) == 0x7c00 && (want_h & 0x3ff);
      if (h_nan)
        EXPECT_TRUE((h[i].bits & 0x7c00) == 0x7c00 && (h[i].bits & 0x3ff)) << floats[i];
      else
        EXPECT_EQ(h[i].bits, want_h) << floats[i] << " at " << cpu::isa_name(isa);
      EXPECT_EQ(b[i].bits, want_b) << floats[i] << " at " << cpu::isa_name(isa);
    }
  }
  cpu::set_cpu_isa(before);
}

// Note [Half conversions inside kernels]: f16 and bf16 ops convert in the kernel's own
// loop at AVX2 and above. A product of two halves is exact in float, so each result must be
// the scalar rounding of the float product, bit for bit, on every level: every 16-bit
// pattern times a spread of values (ties, subnormals, overflow, NaN), with a tail that is
// not a whole vector; and neg, through the unary loop, flips only the sign.
TEST(PortableKernels, HalfOpsRoundAsTheScalarTypesOnEveryLevel) {
  cpu::Isa before = cpu::cpu_isa();
  const int64_t n = 65536 + 7;
  auto run = [&]<typename H>(DType dtype, H*) {
    Tensor x = empty({n}, {.dtype = dtype}), y = empty({n}, {.dtype = dtype});
    manual_seed(5);
    std::vector<double> spread = to_vector<double>(mul(randn({n}), 4.0));
    for (int64_t i = 0; i < n; ++i) {
      x.data<H>()[i].bits = static_cast<uint16_t>(i);
      y.data<H>()[i] = H(static_cast<float>(spread[static_cast<size_t>(i)]));
    }
    for (cpu::Isa isa : {cpu::Isa::base, cpu::Isa::avx2, cpu::Isa::avx512}) {
      if (isa > cpu::cpu_isa_supported()) continue;
      cpu::set_cpu_isa(isa);
      Tensor z = mul(x, y), m = neg(x);
      for (int64_t i = 0; i < n; ++i) {
        float want = static_cast<float>(x.data<H>()[i]) * static_cast<float>(y.data<H>()[i]);
        float got = static_cast<float>(z.data<H>()[i]);
        if (std::isnan(want))
          ASSERT_TRUE(std::isnan(got)) << dtype << " " << i << " at " << cpu::isa_name(isa);
        else
          ASSERT_EQ(z.data<H>()[i].bits, H(want).bits)
              << dtype << " " << i << " at " << cpu::isa_name(isa);
        if (std::isnan(static_cast<float>(x.data<H>()[i])))  // signaling NaNs come back quiet
          ASSERT_TRUE(std::isnan(static_cast<float>(m.data<H>()[i])));
        else
          ASSERT_EQ(m.data<H>()[i].bits, static_cast<uint16_t>(i ^ 0x8000))
              << dtype << " neg " << i << " at " << cpu::isa_name(isa);
      }
    }
  };
  run(DType::f16, static_cast<Half*>(nullptr));
  run(DType::bf16, static_cast<BFloat16*>(nullptr));
  cpu::set_cpu_isa(before);
}

}  // namespace
}  // namespace kiln

// The CUDA backend on a real GPU: copies (D2, D7), half types, streams and events (D4),
// stream-aware memory reuse, cuBLAS and TF32 (D5), the checker (D8), modules and
// programs (R1, X3). Every test skips, with the reason, on a machine without a GPU; the
// op-by-op comparison with the CPU backend is F6's CUDA test (tests/fake).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::expect_error;

const Device kGpu("cuda:0"), kCpu("cpu:0");

Tensor host(const Tensor& t) { return to(t, kCpu); }

TEST(CudaCopies, RoundTripEveryDtypeAndLayout) {
  KILN_REQUIRE_CUDA(1);
  for (DType d : {f32, f64, f16, bf16, i64, i32, i16, i8, u8, b8}) {
    SCOPED_TRACE(std::string(to_string(d)));
    Tensor x = to(mul(randn({5, 7}), 10.0), d);
    Tensor g = to(x, kGpu);
    EXPECT_EQ(g.device(), kGpu);
    EXPECT_EQ(to_vector<double>(host(g)), to_vector<double>(x));
    // A transposed source and destination, converted to f32 on the way.
    Tensor gt = to(transpose(x, 0, 1), kGpu);
    EXPECT_EQ(to_vector<double>(host(gt)), to_vector<double>(transpose(x, 0, 1)));
    Tensor dst = transpose(empty({5, 7}, {.dtype = f32, .device = kGpu}), 0, 1);
    copy_(dst, transpose(x, 0, 1));
    EXPECT_EQ(to_vector<double>(host(dst)), to_vector<double>(to(transpose(x, 0, 1), f32)));
  }
  // copy_ broadcasts from the host; a 0-dim CPU scalar joins a CUDA op (D2).
  Tensor row = from_vector<float>({1, 2, 3});
  Tensor m = zeros({2, 3}, {.device = kGpu});
  copy_(m, row);
  EXPECT_EQ(to_vector<float>(m), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(to_vector<float>(add(m, scalar_tensor(1.0))), (std::vector<float>{2, 3, 4, 2, 3, 4}));
}

TEST(CudaCopies, NonBlockingToHostLandsInPinnedMemory) {  // (D7)
  KILN_REQUIRE_CUDA(1);
  Tensor g = arange(0, 1 << 20, 1, {.dtype = f32, .device = kGpu});
  Tensor h = to(g, kCpu, std::nullopt, /*non_blocking=*/true);
  EXPECT_EQ(h.storage()->allocator, device_backend(DeviceType::cuda)->host_transfer_allocator());
  std::vector<float> v = to_vector<float>(h);  // the host read waits for the copy (D4)
  EXPECT_EQ(v[12345], 12345.0f);
  EXPECT_EQ(v.back(), static_cast<float>((1 << 20) - 1));
}

TEST(CudaKernels, HalfTypesOnTheModelPath) {
  KILN_REQUIRE_CUDA(1);
  manual_seed(3);
  Tensor x = randn({8, 64}), w = randn({32, 64}), b = randn({32}), g = randn({32});
  Tensor want = gelu(layer_norm(linear(x, w, b), {32}, g, b, 1e-5));
  Tensor want_sm = softmax(want, -1);
  for (DType d : {f16, bf16}) {
    SCOPED_TRACE(std::string(to_string(d)));
    auto dev = [&](const Tensor& t) { return to(t, kGpu, d); };
    Tensor got = gelu(layer_norm(linear(dev(x), dev(w), dev(b)), {32}, dev(g), dev(b), 1e-5));
    EXPECT_EQ(got.dtype(), d);
    double tol = d == bf16 ? 6e-2 : 2e-2;
    EXPECT_TRUE(all_close(host(got), to_vector<double>(want), tol, tol));
    EXPECT_TRUE(all_close(host(softmax(got, -1)), to_vector<double>(want_sm), tol, tol));
  }
}

TEST(CudaKernels, LargeReductionsAndMatmuls) {
  KILN_REQUIRE_CUDA(1);
  Tensor a = randn({300, 1000}), b = randn({1000, 200});
  Tensor ga = to(a, kGpu), gb = to(b, kGpu);
  EXPECT_TRUE(all_close(host(matmul(ga, gb)), to_vector<double>(matmul(a, b)), 1e-4, 1e-4));
  EXPECT_TRUE(all_close(host(sum(ga, {1})), to_vector<double>(sum(a, {1})), 1e-5, 1e-4));
  EXPECT_TRUE(all_close(host(sum(ga, {0})), to_vector<double>(sum(a, {0})), 1e-5, 1e-4));
  EXPECT_EQ(to_vector<int64_t>(argmax(ga, 1)), to_vector<int64_t>(argmax(a, 1)));
  // A few long rows split over many blocks, partial results reduced again.
  Tensor big = randn({3, 400000}), gbig = to(big, kGpu);
  EXPECT_TRUE(all_close(host(sum(gbig)), to_vector<double>(sum(big)), 1e-5, 1e-3));
  EXPECT_TRUE(all_close(host(mean(gbig, {1})), to_vector<double>(mean(big, {1})), 1e-5, 1e-6));
  EXPECT_TRUE(all_close(host(amax(gbig)), to_vector<double>(amax(big)), 0, 0));
  EXPECT_TRUE(all_close(host(amin(gbig, {1})), to_vector<double>(amin(big, {1})), 0, 0));
  Tensor ints = to(mul(big, 100.0), i64);
  EXPECT_EQ(to_vector<int64_t>(sum(to(ints, kGpu), {1})), to_vector<int64_t>(sum(ints, {1})));
  Tensor with_nan = clone(big);
  Tensor one = narrow(select(with_nan, 0, 1), 0, 123456, 1);
  fill_(one, std::nan(""));
  std::vector<double> maxima = to_vector<double>(host(amax(to(with_nan, kGpu), {1})));
  EXPECT_FALSE(std::isnan(maxima[0]));
  EXPECT_TRUE(std::isnan(maxima[1]));
  Tensor bat = randn({4, 1, 30, 40}), rhs = randn({3, 40, 20});
  EXPECT_TRUE(all_close(host(matmul(to(bat, kGpu), to(rhs, kGpu))),
                        to_vector<double>(matmul(bat, rhs)), 1e-4, 1e-4));
}

// softmax picks a kernel by row length (a warp per row up to 1024, a block beyond):
// every size class, both forms, against the CPU.
TEST(CudaKernels, SoftmaxOfEveryRowLength) {
  KILN_REQUIRE_CUDA(1);
  for (int64_t inner : {1, 5, 32, 33, 100, 128, 129, 300, 512, 513, 777, 1024, 1025, 3000}) {
    SCOPED_TRACE(inner);
    Tensor x = mul(randn({7, inner}), 4.0);
    Tensor gx = to(x, kGpu);
    EXPECT_TRUE(all_close(host(softmax(gx, 1)), to_vector<double>(softmax(x, 1)), 1e-5, 1e-7));
    EXPECT_TRUE(
        all_close(host(log_softmax(gx, -1)), to_vector<double>(log_softmax(x, -1)), 1e-5, 1e-5));
    EXPECT_TRUE(all_close(host(softmax(to(gx, f64), 0)), to_vector<double>(softmax(to(x, f64), 0)),
                          1e-12, 1e-14));
  }
}

TEST(CudaKernels, IndexErrorsFromHostIndicesAreClear) {
  KILN_REQUIRE_CUDA(1);
  Tensor w = randn({10, 4}, {.device = kGpu});
  expect_error(
      [&] {
        embedding(w, from_vector<int64_t>({1, 10}));
      },
      ErrorKind::index, "[embedding] index 10 is out of range for size 10");
  EXPECT_EQ(embedding(w, from_vector<int64_t>({3})).shape(), (Dims{1, 4}));
}

// Note [Index errors found by kernels]: a bad index in a GPU index tensor is an index
// Error at the next host wait, naming the op, the index and the size; the access is
// skipped and the process's CUDA context stays usable (PyTorch's device assert ends it).
TEST(CudaKernels, IndexErrorsFromDeviceIndicesSurfaceAtTheNextWaitAndLeaveTheGpuUsable) {
  KILN_REQUIRE_CUDA(1);
  Tensor w = randn({10, 4}, {.device = kGpu});
  Tensor x = randn({3, 5}, {.device = kGpu});
  auto bad = [&](std::vector<int64_t> v, IntList shape) {
    return to(from_vector<int64_t>(v, shape), kGpu);
  };
  struct Case {
    std::function<Tensor()> call;
    std::string message;
  };
  std::vector<Case> cases = {
      {[&] {
         return embedding(w, bad({1, 10}, {2}));
       },
       "[embedding] index 10 is out of range for size 10"},
      {[&] {
         return index_select(x, 1, bad({0, -1}, {2}));
       },
       "[index_select] index -1 is out of range for size 5"},
      {[&] {
         return gather(x, 0, bad({0, 1, 3, 0, 0}, {1, 5}));
       },
       "[gather] index 3 is out of range for size 3"},
      {[&] {
         return scatter_add(zeros({3, 5}, {.device = kGpu}), 0, bad({7, 0, 0, 0, 0}, {1, 5}), x);
       },
       "[scatter_add] index 7 is out of range for size 3"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    Tensor out = c.call();  // launched; the GPU has not answered yet
    expect_error([&] { to_vector<float>(out); }, ErrorKind::index, c.message);
    // Reported once; the GPU keeps working and the good indices were served.
    EXPECT_EQ(to_vector<float>(add(out, 1.0)).size(), static_cast<size_t>(out.numel()));
  }
  Tensor e = embedding(w, bad({3, 3}, {2}));
  EXPECT_TRUE(all_close(
      host(e), to_vector<double>(host(index_select(w, 0, from_vector<int64_t>({3, 3})))), 0, 0));
  synchronize_device(kGpu);  // nothing left to report
}

TEST(CudaStreams, SideStreamsEventsAndOrdering) {  // (D4)
  KILN_REQUIRE_CUDA(1);
  Stream side = Stream::create(kGpu);
  EXPECT_FALSE(side.is_default());
  EXPECT_NE(side.native_handle(), nullptr);
  EXPECT_TRUE(side.runs_inline());  // the host launches; the GPU runs asynchronously
  Tensor a = randn({512, 512}, {.device = kGpu});
  Tensor c;
  {
    StreamGuard g(side);
    EXPECT_EQ(current_stream(kGpu), side);
    for (int i = 0; i < 20; ++i) c = matmul(a, a);  // long-running work on the side stream
  }
  EXPECT_TRUE(current_stream(kGpu).is_default());
  // The default stream reads c after the side stream's writes (ordered by an event).
  Tensor d = add(c, 1.0);
  EXPECT_TRUE(all_close(host(d), to_vector<double>(add(host(matmul(a, a)), 1.0)), 1e-4, 1e-3));
  Event e;
  e.record(side);
  e.synchronize();
  EXPECT_TRUE(e.query());
  synchronize_device(kGpu);
}

TEST(CudaAllocator, StreamAwareReuseAndStats) {
  KILN_REQUIRE_CUDA(1);
  synchronize_device(kGpu);
  empty({1}, {.device = kGpu});  // returns blocks earlier tests left waiting on streams
  AllocatorStats before = allocator_stats(kGpu);
  void* first;
  {
    Tensor t = empty({1 << 20}, {.device = kGpu});
    first = t.storage()->data;
  }
  {
    Tensor t = empty({1 << 20}, {.device = kGpu});  // same stream: the cached block
    EXPECT_EQ(t.storage()->data, first);
  }
  Stream side = Stream::create(kGpu);
  {
    StreamGuard g(side);
    Tensor t = empty({1 << 20}, {.device = kGpu});  // another stream: never that block
    EXPECT_NE(t.storage()->data, first);
  }
  AllocatorStats after = allocator_stats(kGpu);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_GE(after.bytes_cached, 2 * (4 << 20));
}

TEST(CudaBlas, Tf32IsExplicit) {  // (D5)
  KILN_REQUIRE_CUDA(1);
  Tensor a = randn({256, 256}, {.dtype = f64}), b = randn({256, 256}, {.dtype = f64});
  std::vector<double> exact = to_vector<double>(matmul(a, b));
  auto error = [&] {
    std::vector<double> got = to_vector<double>(matmul(to(a, kGpu, f32), to(b, kGpu, f32)));
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - exact[i]));
    return worst;
  };
  double f32_error = error();
  set_allow_tf32(true);
  double tf32_error = error();
  set_allow_tf32(false);
  EXPECT_LT(f32_error, 1e-3);
  EXPECT_GT(tf32_error, 10 * f32_error);  // TF32 keeps 10 mantissa bits
}

TEST(CudaChecker, KernelsUseOnlyTheirDevice) {  // (D8)
  KILN_REQUIRE_CUDA(1);
  std::string message;
  launch_kernel("ext", kGpu, [&] {
    try {
      current_stream(kCpu).enqueue([] {});
    } catch (const Error& e) {
      message = e.what();
    }
  });
  synchronize_device(kGpu);
  EXPECT_NE(message.find("[ext] kernel for cuda:0 used the stream of cpu:0: every kernel"),
            std::string::npos)
      << message;
}

TEST(CudaChecker, TwoGpusAreNeverMixed) {
  KILN_REQUIRE_CUDA(2);
  Tensor a = ones({2}, {.device = Device("cuda:0")}), b = ones({2}, {.device = Device("cuda:1")});
  expect_error([&] { add(a, b); }, ErrorKind::device_mismatch,
               "cuda:0 (argument 'self') and cuda:1 (argument 'other')");
  Tensor c = to(a, Device("cuda:1"));  // a device-to-device copy
  EXPECT_EQ(to_vector<float>(add(c, b)), (std::vector<float>{2, 2}));
  std::string message;
  launch_kernel("ext", Device("cuda:1"), [&] {
    try {
      current_stream(Device("cuda:0")).enqueue([] {});
    } catch (const Error& e) {
      message = e.what();
    }
  });
  EXPECT_NE(message.find("kernel for cuda:1 used the stream of cuda:0"), std::string::npos)
      << message;
}

TEST(CudaPrograms, TracedAnywhereRunsOnTheGpu) {  // (R1, X3)
  KILN_REQUIRE_CUDA(1);
  nn::ReferenceModel ref = nn::make_reference_model("gpt", {{"layers", 2}}, 11);
  ref.module->eval();
  TensorList want = (*ref.module)(ref.example_inputs);
  ExportedProgram p = export_program(*ref.module, ref.example_inputs, {.device = Device("cuda:0")});
  std::string path = ::testing::TempDir() + "kiln_cuda_gpt.kiln";
  save(p, path);
  ExportedProgram loaded = load_program(path);  // this machine has cuda:0
  runtime::Executor exec(loaded);
  TensorList inputs;
  for (const Tensor& t : ref.example_inputs) inputs.push_back(to(t, kGpu));
  TensorList got = exec.run(inputs);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(got[0].device(), kGpu);
  EXPECT_TRUE(all_close(host(got[0]), to_vector<double>(want[0]), 1e-4, 1e-4));
  // The same module moved to the GPU runs eagerly with the same result.
  ref.module->to(kGpu);
  EXPECT_TRUE(all_close(host((*ref.module)(inputs)[0]), to_vector<double>(want[0]), 1e-4, 1e-4));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kiln

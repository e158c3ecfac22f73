// Everything around the CUDA kernels, run on any machine against the stand-in backend
// of tests/mock_cuda.h: copies between backends (Note [Copies between backends]), pinned
// non-blocking copies (D7), stream-aware reuse through dispatch (Note [Stream-aware
// reuse]), device checks (D2, D8) and programs/modules on cuda:N (R1, X3).
#include "mock_cuda.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::MockCuda;

const Device kGpu("cuda:0"), kGpu1("cuda:1"), kCpu("cpu:0");

TEST(MockCuda, CopiesBetweenBackendsKeepEveryValueAndLayout) {
  MockCuda mock;
  for (DType d : {f32, f64, f16, bf16, i64, i32, i16, i8, u8, b8}) {
    SCOPED_TRACE(std::string(to_string(d)));
    Tensor x = to(mul(randn({5, 7}), 10.0), d);
    mock.copies.clear();
    Tensor g = to(x, kGpu);  // dense, same dtype: one byte copy straight into g
    ASSERT_EQ(mock.copies.size(), 1u);
    EXPECT_EQ(mock.copies[0].bytes, 35 * itemsize(d));
    EXPECT_EQ(g.device(), kGpu);
    EXPECT_EQ(g.storage()->allocator, &mock.allocator(0));
    EXPECT_EQ(to_vector<double>(to(g, kCpu)), to_vector<double>(x));
    // Strided source and destination, with a dtype change on the way.
    Tensor xt = transpose(x, 0, 1);
    EXPECT_EQ(to_vector<double>(to(to(xt, kGpu), kCpu)), to_vector<double>(xt));
    Tensor dst = transpose(zeros({5, 7}, {.device = kGpu}), 0, 1);
    copy_(dst, xt);
    EXPECT_EQ(to_vector<double>(to(dst, kCpu)), to_vector<double>(to(xt, f32)));
    // A view in the middle of a storage, both directions.
    Tensor col = select(g, 1, 3);
    EXPECT_EQ(to_vector<double>(to(col, kCpu)), to_vector<double>(select(x, 1, 3)));
    Tensor into = zeros({5, 7}, {.dtype = d, .device = kGpu});
    Tensor into_col = select(into, 1, 2);
    copy_(into_col, select(x, 1, 4));
    EXPECT_EQ(to_vector<double>(to(select(into, 1, 2), kCpu)), to_vector<double>(select(x, 1, 4)));
  }
  // copy_ broadcasts a CPU source; a 0-dim CPU tensor joins a GPU op (D2).
  Tensor m = zeros({2, 3}, {.device = kGpu});
  copy_(m, from_vector<float>({1, 2, 3}));
  EXPECT_EQ(to_vector<float>(m), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(to_vector<float>(add(m, scalar_tensor(1.0))), (std::vector<float>{2, 3, 4, 2, 3, 4}));
  expect_error([&] { add(m, ones({3})); }, ErrorKind::device_mismatch,
               "cuda:0 (argument 'self') and cpu:0 (argument 'other')");
}

TEST(MockCuda, GpuToGpuCopiesAreByteCopiesOnTheDestination) {
  MockCuda mock;
  Tensor a = arange(0, 12, 1, {.dtype = f32, .device = kGpu});
  mock.copies.clear();
  Tensor b = to(a, kGpu1);
  ASSERT_EQ(mock.copies.size(), 1u);
  EXPECT_EQ(mock.copies[0].from, kGpu);
  EXPECT_EQ(mock.copies[0].to, kGpu1);
  EXPECT_EQ(b.storage()->allocator, &mock.allocator(1));
  EXPECT_EQ(to_vector<float>(b), to_vector<float>(a));
  expect_error([&] { add(a, b); }, ErrorKind::device_mismatch, "cuda:0");
}

TEST(MockCuda, NonBlockingToHostLandsInPinnedMemoryAndReadsWait) {  // (D7)
  MockCuda mock;
  Tensor g = arange(0, 1000, 1, {.dtype = f32, .device = kGpu});
  mock.copies.clear();
  Tensor h = to(g, kCpu, std::nullopt, /*non_blocking=*/true);
  EXPECT_EQ(h.storage()->allocator, mock.host_transfer_allocator());
  ASSERT_EQ(mock.copies.size(), 1u);
  EXPECT_TRUE(mock.copies[0].non_blocking);
  EXPECT_EQ(h.storage()->writer.load(), current_stream(kGpu).impl());  // written by the GPU
  EXPECT_EQ(to_vector<float>(h)[999], 999.0f);
  Tensor blocking = to(g, kCpu);
  EXPECT_NE(blocking.storage()->allocator, mock.host_transfer_allocator());
  EXPECT_EQ(blocking.storage()->writer.load(), nullptr);  // a blocking copy is complete
  // Converting on the way: the bytes land in a temporary, the CPU converts.
  EXPECT_EQ(to_vector<double>(to(g, kCpu, f64, true))[5], 5.0);
}

TEST(MockCuda, MemoryUsedByAnotherStreamWaitsForIt) {  // Note [Stream-aware reuse]
  MockCuda mock;
  Stream side = Stream::create(kGpu);
  Tensor a = ones({1 << 10}, {.device = kGpu});  // owned by the default stream
  void* block = a.storage()->data;
  mock.gpu_done = false;  // the side stream's work is still queued
  {
    StreamGuard g(side);
    Tensor b = mul(a, 2.0);  // dispatch records that `side` uses a's block
    EXPECT_EQ(b.storage()->writer.load(), side.impl());
  }
  a = Tensor();  // freed on the host while the side stream may still read it
  auto* alloc = static_cast<StreamAwareAllocator*>(&mock.allocator(0));
  EXPECT_EQ(alloc->pending_blocks(), 1);
  Tensor c = empty({1 << 10}, {.device = kGpu});
  EXPECT_NE(c.storage()->data, block);  // not handed out again yet
  mock.gpu_done = true;
  Tensor d = empty({1 << 10}, {.device = kGpu});
  EXPECT_EQ(d.storage()->data, block);  // back once the stream is done
  EXPECT_EQ(alloc->pending_blocks(), 0);
}

TEST(MockCuda, ReadsOfAnotherStreamsOutputWaitOnItsEvent) {  // (D4)
  MockCuda mock;
  Stream side = Stream::create(kGpu);
  Tensor a = ones({8}, {.device = kGpu});
  Tensor b;
  {
    StreamGuard g(side);
    b = add(a, 1.0);
  }
  int waits = mock.waits;
  Tensor c = mul(b, 3.0);  // the default stream waits on the side stream's event
  EXPECT_EQ(mock.waits, waits + 1);
  Tensor e = mul(c, 1.0);  // same stream: no wait
  EXPECT_EQ(mock.waits, waits + 1);
  EXPECT_EQ(to_vector<float>(e), std::vector<float>(8, 6.0f));
}

TEST(MockCuda, ProgramsAndModulesRunOnTheGpu) {  // (R1, X3)
  MockCuda mock;
  nn::ReferenceModel ref = nn::make_reference_model("gpt", {{"layers", 2}}, 11);
  ref.module->eval();
  TensorList want = (*ref.module)(ref.example_inputs);
  ExportedProgram p = export_program(*ref.module, ref.example_inputs, {.device = kGpu});
  std::string path = ::testing::TempDir() + "kiln_mock_cuda_gpt.kiln";
  save(p, path);
  ExportedProgram loaded = load_program(path);  // cuda:0 exists now: no map needed
  for (const auto& [name, t] : loaded.state) EXPECT_EQ(t.device(), kGpu) << name;
  runtime::Executor exec(loaded);
  TensorList inputs = {to(ref.example_inputs[0], kGpu)};
  TensorList got = exec.run(inputs);
  EXPECT_EQ(got[0].device(), kGpu);
  EXPECT_TRUE(all_close(to(got[0], kCpu), to_vector<double>(want[0]), 1e-5, 1e-5));
  expect_error([&] { exec.run(ref.example_inputs); }, ErrorKind::device_mismatch,
               "[run] input 'input_0' expects i64[2,32]@cuda:0, got i64[2,32]@cpu:0");  // (R3)
  // A program whose state lives on a GPU saves (through host copies) and loads back.
  std::string again = ::testing::TempDir() + "kiln_mock_cuda_gpt_again.kiln";
  save(loaded, again);
  ExportedProgram reloaded = load_program(again);
  runtime::Executor exec2(reloaded);
  EXPECT_TRUE(all_close(to(exec2.run(inputs)[0], kCpu), to_vector<double>(want[0]), 1e-5, 1e-5));
  std::remove(again.c_str());
  ExportedProgram moved = load_program(path, {{kGpu, kGpu1}});
  runtime::Executor exec1(moved);
  EXPECT_TRUE(all_close(to(exec1.run({to(ref.example_inputs[0], kGpu1)})[0], kCpu),
                        to_vector<double>(want[0]), 1e-5, 1e-5));
  ref.module->to(kGpu1);
  TensorList eager = (*ref.module)(TensorList{to(ref.example_inputs[0], kGpu1)});
  EXPECT_TRUE(all_close(to(eager[0], kCpu), to_vector<double>(want[0]), 1e-5, 1e-5));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kiln

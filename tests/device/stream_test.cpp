// The device runtime: streams and events (D4), BLAS handles (D5), the safety
// checker (D8). Run with KILN_CPU_DEVICES=4 (ctest sets it); also under `make tsan`.
#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::expect_error;
using testing::Gate;

const Device kCpu1("cpu:1"), kCpu2("cpu:2");

TEST(Streams, PoolHandsOutItsStreamsRoundRobin) {
  const Device d("cpu:3");
  std::vector<Stream> first;
  for (int i = 0; i < Stream::kPoolSize; ++i) first.push_back(Stream::from_pool(d));
  for (int i = 0; i < Stream::kPoolSize; ++i) {
    EXPECT_FALSE(first[i].is_default());
    EXPECT_EQ(first[i].device(), d);
    for (int j = 0; j < i; ++j) EXPECT_FALSE(first[i] == first[j]);
  }
  for (int i = 0; i < Stream::kPoolSize; ++i) EXPECT_EQ(Stream::from_pool(d), first[i]);
  Stream extra = Stream::create(d);  // created streams are not the pool's
  for (const Stream& s : first) EXPECT_FALSE(s == extra);
}

TEST(Streams, DefaultIsInlineSideIsAsynchronous) {
  Stream d = current_stream(kCpu1);
  EXPECT_TRUE(d.is_default());
  EXPECT_EQ(d.device(), kCpu1);
  int ran = 0;
  d.enqueue([&] { ++ran; });
  EXPECT_EQ(ran, 1);  // inline
  Stream s = Stream::create(kCpu1);
  EXPECT_FALSE(s.is_default());
  Gate gate;
  s.enqueue(gate.task());
  std::atomic<int> side{0};
  s.enqueue([&] { side = 1; });
  EXPECT_FALSE(s.query());
  EXPECT_EQ(side.load(), 0);
  gate.open();
  s.synchronize();
  EXPECT_TRUE(s.query());
  EXPECT_EQ(side.load(), 1);
}

TEST(Streams, CurrentStreamIsPerDeviceAndRestored) {
  Stream s1 = Stream::create(kCpu1);
  {
    StreamGuard g(s1);
    EXPECT_EQ(current_device(DeviceType::cpu), kCpu1);
    EXPECT_EQ(current_stream(kCpu1), s1);
    EXPECT_TRUE(current_stream(kCpu2).is_default());  // only that stream's device changes
    Stream s2 = Stream::create(kCpu2);
    exchange_stream(s2);
    EXPECT_EQ(current_stream(kCpu1), s1);
    EXPECT_EQ(current_stream(kCpu2), s2);
    exchange_stream(Stream::default_stream(kCpu2));
  }
  EXPECT_EQ(current_device(DeviceType::cpu), Device("cpu:0"));
  EXPECT_TRUE(current_stream(kCpu1).is_default());
  // A device index past the machine's count (cuda:0 when it has no GPU).
  std::string absent = "cuda:" + std::to_string(device_count(DeviceType::cuda));
  expect_error([&] { Stream::create(Device(absent)); }, ErrorKind::device,
               absent + " is not available");
}

TEST(Streams, OpsOnASideStreamAreOrderedAndHostReadsSynchronize) {
  Stream s = Stream::create(kCpu1);
  Tensor x = zeros({16}, {.device = kCpu1});
  Gate gate;
  {
    StreamGuard g(s);
    s.enqueue(gate.task());
    for (int i = 0; i < 200; ++i) add_(x, 1.0);
    x = mul(x, 2);  // a fresh output, written on s
  }
  EXPECT_FALSE(s.query());
  gate.open();
  EXPECT_EQ(item<float>(select(x, 0, 3)), 400.0f);  // item synchronises the writer
  EXPECT_TRUE(s.query());
}

TEST(Streams, InputsWrittenOnAnotherStreamAreWaitedFor) {
  Stream s = Stream::create(kCpu1);
  Gate gate;
  Tensor x = ones({1024}, {.device = kCpu1});
  {
    StreamGuard g(s);
    s.enqueue(gate.task());
    mul_(x, 5);  // queued behind the gate
  }
  // Readers on other streams (of this and another device) wait for s before reading x.
  // (A reader on an inline default stream would block the host right here.)
  Stream t1 = Stream::create(kCpu1), t2 = Stream::create(kCpu2);
  Tensor y, z;
  {
    StreamGuard g(t1);
    y = add(x, 1);
  }
  {
    StreamGuard g(t2);
    z = to(x, kCpu2, std::nullopt, /*non_blocking=*/true);
  }
  EXPECT_FALSE(t1.query());
  EXPECT_FALSE(t2.query());
  gate.open();
  EXPECT_EQ(item<float>(sum(y)), 6.0f * 1024);
  EXPECT_EQ(item<float>(sum(z)), 5.0f * 1024);
}

TEST(Events, OrderWorkAcrossStreamsAndDevices) {
  Stream a = Stream::create(kCpu1);
  Stream b = Stream::create(kCpu2);
  Gate gate;
  int shared = 0;  // plain memory: only the event orders the two tasks
  int seen = -1;
  a.enqueue(gate.task());
  a.enqueue([&] { shared = 42; });
  Event e;
  e.record(a);
  EXPECT_FALSE(e.query());
  e.wait(b);
  b.enqueue([&] { seen = shared; });
  gate.open();
  b.synchronize();
  EXPECT_EQ(seen, 42);
  EXPECT_TRUE(e.query());
  Event never;
  EXPECT_TRUE(never.query());
  never.synchronize();
}

TEST(Streams, MemoryInUseByAStreamIsNotReused) {
  Stream s = Stream::create(kCpu1);
  Gate gate;
  Tensor x = full({4096}, 7.0, {.device = kCpu1});
  void* block = x.raw_data();
  Tensor y;
  {
    StreamGuard g(s);
    s.enqueue(gate.task());
    y = mul(x, 2);  // the queued task references x
  }
  x = Tensor();  // the user drops x while the stream still needs it
  Tensor z = full({4096}, 0.0, {.device = kCpu1});
  EXPECT_NE(z.raw_data(), block);
  gate.open();
  EXPECT_EQ(item<float>(sum(y)), 14.0f * 4096);
}

TEST(Streams, KernelErrorsSurfaceAtSynchronize) {
  Stream s = Stream::create(kCpu1);
  Tensor x = ones({3, 2}, {.device = kCpu1});
  Tensor bad = from_vector<int64_t>({5});
  {
    StreamGuard g(s);
    index_select(x, 0, bad);  // out of bounds: detected inside the queued kernel
  }
  expect_error([&] { s.synchronize(); }, ErrorKind::index,
               "[index_select] index 5 is out of bounds");
  s.synchronize();  // the error is reported once
}

TEST(Streams, StressTwoStreamsTimesTwoDevices) {
  Device devs[2] = {kCpu1, kCpu2};
  std::vector<std::vector<Stream>> streams(2);
  Tensor acc[2][2];
  for (int d = 0; d < 2; ++d)
    for (int k = 0; k < 2; ++k) {
      streams[d].push_back(Stream::create(devs[d]));
      acc[d][k] = zeros({8}, {.device = devs[d]});
    }
  const int rounds = 500;
  for (int r = 0; r < rounds; ++r)
    for (int d = 0; d < 2; ++d)
      for (int k = 0; k < 2; ++k) {
        StreamGuard g(streams[d][k]);
        acc[d][k] = add(acc[d][k], ones({8}, {.device = devs[d]}), k + 1);
      }
  // Cross-stream, cross-device combination: ordered by the writers' streams.
  Tensor total = zeros({8});
  for (int d = 0; d < 2; ++d)
    for (int k = 0; k < 2; ++k) total = add(total, to(acc[d][k], Device("cpu:0")));
  EXPECT_EQ(to_vector<float>(total), std::vector<float>(8, rounds * (1 + 2) * 2.0f));
}

// (D8) The three classic multi-device bugs, each written as a small extension kernel
// on cpu:1, are caught; the correct version of each passes.
TEST(SafetyChecker, CatchesAKernelRunningWithAnotherDeviceCurrent) {
  expect_error(
      [] {
        launch_kernel("bad_guard", kCpu1, [] {
          DeviceGuard oops(kCpu2);       // e.g. a guard for the wrong tensor
          blas_handle(DeviceType::cpu);  // code that takes no device argument
        });
      },
      ErrorKind::device_mismatch, "[bad_guard] kernel for cpu:1 used the current device of cpu:2");
  Device seen;
  launch_kernel("good_guard", kCpu1, [&] { seen = blas_handle(DeviceType::cpu).device(); });
  EXPECT_EQ(seen, kCpu1);
}

TEST(SafetyChecker, CatchesAStreamOfAnotherDevice) {
  expect_error(
      [] { launch_kernel("bad_stream", kCpu1, [] { current_stream(kCpu2).enqueue([] {}); }); },
      ErrorKind::device_mismatch, "[bad_stream] kernel for cpu:1 used the stream of cpu:2");
  int ran = 0;
  launch_kernel("good_stream", kCpu1,
                [&] { current_stream(DeviceType::cpu).enqueue([&] { ++ran; }); });
  EXPECT_EQ(ran, 1);
}

TEST(SafetyChecker, CatchesABlasHandleOfAnotherDevice) {
  expect_error([] { launch_kernel("bad_handle", kCpu1, [] { blas_handle(kCpu2).begin_use(); }); },
               ErrorKind::device_mismatch,
               "[bad_handle] kernel for cpu:1 used the BLAS handle of cpu:2");
  launch_kernel("good_handle", kCpu1, [] { blas_handle(DeviceType::cpu).begin_use(); });
  EXPECT_EQ(current_kernel(), nullptr);  // the scope ended
}

TEST(BlasHandles, OnePerStreamNeverShared) {
  Stream s = Stream::create(kCpu2);
  const BlasHandle& h_default = blas_handle(kCpu2);
  const BlasHandle* h_side = nullptr;
  {
    StreamGuard g(s);
    h_side = &blas_handle(DeviceType::cpu);
  }
  EXPECT_NE(&h_default, h_side);
  EXPECT_EQ(h_side->stream(), s);
  EXPECT_EQ(h_side->device(), kCpu2);
  EXPECT_TRUE(h_default.stream().is_default());
  EXPECT_EQ(&blas_handle(kCpu2), &h_default);  // pooled, not created per call
  EXPECT_NE(&blas_handle(kCpu1), &h_default);
  EXPECT_GE(h_default.threads(), 1);
}

}  // namespace
}  // namespace kiln

// The stream-aware caching allocator's bookkeeping (Note [Stream-aware reuse]) and the
// per-(device, thread) handle pool (D5), tested with CPU streams and host memory, so
// they run on every machine; the CUDA allocator and cuBLAS pool are these classes.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::expect_error;
using testing::Gate;

const Device kCpu1("cpu:1"), kCpu2("cpu:2");

// Host memory standing in for a device's, with counters.
struct RawMemory {
  int allocs = 0, frees = 0;
  int64_t limit = -1;  // allocations beyond this many bytes in use fail
  int64_t in_use = 0;
  std::map<void*, size_t> sizes;
  StreamAwareAllocator make(Device d) {
    return StreamAwareAllocator(
        d, "test allocator",
        [this](size_t n) -> void* {
          if (limit >= 0 && in_use + static_cast<int64_t>(n) > limit) return nullptr;
          ++allocs;
          in_use += static_cast<int64_t>(n);
          void* p = std::malloc(n);
          sizes[p] = n;
          return p;
        },
        [this](void* p) {
          ++frees;
          in_use -= static_cast<int64_t>(sizes[p]);
          sizes.erase(p);
          std::free(p);
        });
  }
};

TEST(StreamAwareAllocator, ReusesBlocksOfTheSameStream) {
  RawMemory raw;
  StreamAwareAllocator a = raw.make(kCpu1);
  void* p = a.allocate(1000);
  EXPECT_EQ(StreamAwareAllocator::round_size(1000), 1024u);
  EXPECT_EQ(a.stats().bytes_in_use, 1024);
  a.deallocate(p, 1000);
  EXPECT_EQ(a.stats().bytes_in_use, 0);
  EXPECT_EQ(a.stats().bytes_cached, 1024);
  EXPECT_EQ(a.allocate(1000), p);  // same stream, same size: the cached block
  EXPECT_EQ(a.stats().num_os_allocs, 1);
  EXPECT_EQ(a.stats().num_allocs, 2);
  a.deallocate(p, 1000);
  a.empty_cache();
  EXPECT_EQ(raw.frees, 1);
  EXPECT_EQ(a.stats().bytes_cached, 0);
}

TEST(StreamAwareAllocator, NeverHandsABlockToAnotherStream) {
  RawMemory raw;
  StreamAwareAllocator a = raw.make(kCpu1);
  Stream s1 = Stream::create(kCpu1), s2 = Stream::create(kCpu1);
  void* p;
  {
    StreamGuard g(s1);
    p = a.allocate(4096);
  }
  a.deallocate(p, 4096);
  {
    StreamGuard g(s2);  // a block of s1 may still be in use by s1's queued work
    void* q = a.allocate(4096);
    EXPECT_NE(q, p);
    a.deallocate(q, 4096);
  }
  {
    StreamGuard g(s1);
    EXPECT_EQ(a.allocate(4096), p);  // s1's own work is ordered after its earlier use
    a.deallocate(p, 4096);
  }
  EXPECT_EQ(raw.allocs, 2);
}

TEST(StreamAwareAllocator, RecordedStreamsDelayReuseUntilTheirWorkIsDone) {
  RawMemory raw;
  StreamAwareAllocator a = raw.make(kCpu1);
  Stream side = Stream::create(kCpu1);
  Gate gate;
  void* p = a.allocate(512);  // owned by the default stream
  side.enqueue(gate.task());  // the side stream is "still using" the block
  a.record_stream(p, side.impl());
  a.record_stream(p, side.impl());  // recorded once
  a.record_stream(p, nullptr);      // the inline CPU stream: always caught up
  a.deallocate(p, 512);
  EXPECT_EQ(a.pending_blocks(), 1);
  EXPECT_EQ(a.stats().bytes_in_use, 512);  // not reusable yet
  void* q = a.allocate(512);
  EXPECT_NE(q, p);
  gate.open();
  side.synchronize();
  a.deallocate(q, 512);
  void* r = a.allocate(512);  // the pending block has come back
  EXPECT_EQ(a.pending_blocks(), 0);
  EXPECT_TRUE(r == p || r == q);
  a.deallocate(r, 512);
  EXPECT_EQ(a.stats().bytes_in_use, 0);
  EXPECT_EQ(a.stats().bytes_cached, 1024);
}

TEST(StreamAwareAllocator, OutOfMemoryReleasesTheCacheThenFailsClearly) {
  RawMemory raw;
  raw.limit = 4096;
  StreamAwareAllocator a = raw.make(kCpu2);
  void* p = a.allocate(2048);
  a.deallocate(p, 2048);       // cached, still counted against the raw limit
  void* q = a.allocate(3072);  // fails, frees the cache, retries
  EXPECT_EQ(raw.frees, 1);
  EXPECT_EQ(a.stats().bytes_cached, 0);
  expect_error([&] { a.allocate(2048); }, ErrorKind::out_of_memory,
               "[test allocator] out of memory on cpu:2: tried to allocate 2048 bytes with 3072 "
               "bytes in use");
  a.deallocate(q, 3072);
  expect_error([&] { a.deallocate(reinterpret_cast<void*>(16), 1); }, ErrorKind::internal,
               "which it did not allocate");
}

TEST(StreamAwareAllocator, ConcurrentStreamsAndThreads) {
  RawMemory raw;
  StreamAwareAllocator a = raw.make(kCpu1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&a, t] {
      Stream s = Stream::create(kCpu1);
      StreamGuard g(s);
      for (int i = 0; i < 200; ++i) {
        void* p = a.allocate(64 * (1 + (i + t) % 5));
        a.record_stream(p, nullptr);
        a.deallocate(p, 0);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(a.stats().bytes_in_use, 0);
  EXPECT_EQ(a.pending_blocks(), 0);
  EXPECT_EQ(a.stats().num_allocs, 800);
}

// Handles are plain counters here; the CUDA backend's are cublasHandle_t.
struct Counter {
  std::atomic<intptr_t> next{1};
  HandlePool pool{"test handle", [this](Device) { return reinterpret_cast<void*>(next++); }};
};

// The host allocator's free lists under a spin lock: threads allocating and freeing
// small and large blocks at once never get a block another thread holds (each writes its
// tag over its blocks and finds it intact before freeing), and the statistics come out
// exact (run under ThreadSanitizer by `make tsan`).
TEST(CachingHostAllocator, ThreadsSharingItKeepBlocksApartAndStatisticsExact) {
  CachingHostAllocator a("cpu:test");
  constexpr int kThreads = 4, kRounds = 3000;
  const size_t sizes[] = {8, 512, 700, 4096, 65536, 1 << 20, 3 << 20};
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::vector<std::pair<unsigned char*, size_t>> held;
      unsigned seed = static_cast<unsigned>(t) * 7919u + 1;
      for (int r = 0; r < kRounds; ++r) {
        seed = seed * 1103515245u + 12345u;
        if (held.size() < 8 && (seed >> 16) % 3 != 0) {
          size_t n = sizes[(seed >> 8) % std::size(sizes)];
          auto* p = static_cast<unsigned char*>(a.allocate(n));
          std::memset(p, t + 1, n);
          held.push_back({p, n});
        } else if (!held.empty()) {
          auto [p, n] = held.back();
          held.pop_back();
          for (size_t i = 0; i < n; i += 61)
            if (p[i] != t + 1) ++bad;
          a.deallocate(p, n);
        }
      }
      for (auto [p, n] : held) a.deallocate(p, n);
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.bytes_in_use, 0);
  EXPECT_GT(s.num_allocs, kThreads * kRounds / 3);
  EXPECT_GE(s.num_allocs, s.num_os_allocs);
  EXPECT_GT(s.peak_bytes, 0);
  EXPECT_EQ(s.bytes_cached % 512, 0);
  a.empty_cache();
  EXPECT_EQ(a.stats().bytes_cached, 0);
}

TEST(HandlePool, OnePerDeviceAndThreadReusedAfterTheThreadExits) {
  Counter c;
  void* h1 = c.pool.acquire(kCpu1);
  EXPECT_EQ(c.pool.acquire(kCpu1), h1);  // cached per thread
  void* h2 = c.pool.acquire(kCpu2);
  EXPECT_NE(h1, h2);  // never shared across devices
  void* other = nullptr;
  std::thread([&] { other = c.pool.acquire(kCpu1); }).join();
  EXPECT_NE(other, h1);  // never shared across threads
  EXPECT_EQ(c.pool.created(kCpu1), 2);
  EXPECT_EQ(c.pool.available(kCpu1), 1);  // the exited thread gave it back
  void* reused = nullptr;
  std::thread([&] { reused = c.pool.acquire(kCpu1); }).join();
  EXPECT_EQ(reused, other);
  EXPECT_EQ(c.pool.created(kCpu1), 2);
  EXPECT_EQ(c.pool.created(kCpu2), 1);
}

TEST(HandlePool, InsideAKernelOnlyTheKernelsDevice) {  // (D8)
  Counter c;
  KernelScope k("mm", kCpu1);
  EXPECT_NE(c.pool.acquire(kCpu1), nullptr);
  expect_error([&] { c.pool.acquire(kCpu2); }, ErrorKind::device_mismatch,
               "[mm] kernel for cpu:1 used the test handle of cpu:2: every kernel");
}

TEST(HandlePool, ManyThreadsGetDistinctHandles) {
  Counter c;
  std::mutex mu;
  std::set<void*> seen;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      void* h = c.pool.acquire(kCpu1);
      EXPECT_EQ(c.pool.acquire(kCpu1), h);
      std::lock_guard lock(mu);
      seen.insert(h);
    });
  for (auto& t : threads) t.join();
  EXPECT_LE(static_cast<int>(seen.size()), 8);
  EXPECT_EQ(c.pool.created(kCpu1), static_cast<int>(seen.size()));
  EXPECT_EQ(c.pool.available(kCpu1), c.pool.created(kCpu1));
}

TEST(Tf32, OffByDefaultAndExplicit) {
  EXPECT_FALSE(allow_tf32());
  set_allow_tf32(true);
  EXPECT_TRUE(allow_tf32());
  set_allow_tf32(false);
  EXPECT_FALSE(allow_tf32());
}

TEST(CudaDevices, CountNeverThrowsAndAbsenceIsAClearError) {
  int n = device_count(DeviceType::cuda);  // 0 without a driver or GPU
  EXPECT_GE(n, 0);
#if KILN_TEST_WITH_CUDA
  EXPECT_NE(device_backend(DeviceType::cuda), nullptr);
#else
  EXPECT_EQ(device_backend(DeviceType::cuda), nullptr);
#endif
  if (n > 0) GTEST_SKIP() << "this machine has CUDA devices; absence is not testable here";
  expect_error([] { zeros({2}, {.device = Device("cuda:0")}); }, ErrorKind::device,
               "[device] cuda:0 is not available: this build or machine has no cuda devices");
  expect_error([] { Stream::create(Device("cuda:0")); }, ErrorKind::device,
               "cuda:0 is not available");
  expect_error([] { to(ones({2}), Device("cuda:1")); }, ErrorKind::device,
               "cuda:1 is not available");
  // Fake tensors still live on absent devices (F1): tracing for a GPU needs none.
  FakeMode mode;
  EXPECT_EQ(add(ones({2}, {.device = Device("cuda:0")}), 1.0).device(), Device("cuda:0"));
}

}  // namespace
}  // namespace kiln

#pragma once
// A stand-in CUDA backend for machines without a GPU: host memory from the same
// stream-aware allocator the CUDA backend uses, streams that "launch" inline like CUDA
// streams, events whose completion a test controls, byte copies by memcpy, and the CPU
// kernels (run under a cpu:0 kernel frame) as the kernel table. Installed, it lets the
// tests run everything *around* the CUDA kernels -- copies between backends, pinned
// non-blocking copies, stream-aware reuse through dispatch, programs and modules on
// cuda:N -- on any machine. It proves nothing about the CUDA kernels themselves.

#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/device/stream_impl.h"
#include "kiln/kiln.h"

namespace kiln::testing {

class MockCuda final : public DeviceBackend {
 public:
  static constexpr int kDevices = 2;

  // Inline like a CUDA stream; its events complete when the test says so.
  struct MockStream final : StreamImpl {
    MockCuda* owner = nullptr;
    bool host_inline() const override { return true; }
    void enqueue(std::function<void()> work) override { work(); }
    void synchronize() override {}
    bool query() override { return owner->gpu_done; }
    void* native() const override { return const_cast<MockStream*>(this); }
    void record(uint64_t& mark, std::shared_ptr<void>&) override { mark = ++owner->events; }
    void event_synchronize(uint64_t, const std::shared_ptr<void>&) override {}
    bool event_query(uint64_t, const std::shared_ptr<void>&) override { return owner->gpu_done; }
    void wait(const Event&) override { ++owner->waits; }
  };

  MockCuda() {
    for (int i = 0; i < kDevices; ++i) {
      auto s = std::make_unique<Slot>();
      s->stream.device = Device(DeviceType::cuda, i);
      s->stream.owner = this;
      s->allocator = host_allocator(Device(DeviceType::cuda, i), "mock cuda");
      slots_.push_back(std::move(s));
    }
    pinned_ = host_allocator(Device(DeviceType::cpu, 0), "mock pinned");
    for (int op = 0; op < ops::kNumOps; ++op)
      if (cpu::kernels()[op]) table_[op] = trampolines()[op];
    set_device_backend_for_testing(DeviceType::cuda, this);
    set_kernel_table_for_testing(DeviceType::cuda, &table_);
  }
  ~MockCuda() override {
    set_kernel_table_for_testing(DeviceType::cuda, nullptr);
    set_device_backend_for_testing(DeviceType::cuda, nullptr);
  }

  DeviceType type() const override { return DeviceType::cuda; }
  int device_count() const noexcept override { return kDevices; }
  Allocator& allocator(int index) override { return *slots_[index]->allocator; }
  Generator& generator(int index) override { return slots_[index]->generator; }
  StreamImpl* default_stream(int index) override { return &slots_[index]->stream; }
  std::unique_ptr<StreamImpl> create_stream(Device device, int id) override {
    auto s = std::make_unique<MockStream>();
    s->device = device;
    s->id = id;
    s->owner = this;
    return s;
  }
  void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t n,
                  bool non_blocking) override {
    // Like cudaMemcpyAsync: ordered on the current stream of the CUDA side, which the
    // kernel frame must name (D8).
    Device side = dst_device.is_cpu() ? src_device : dst_device;
    check_kernel_device(side, "stream");
    copies.push_back({src_device, dst_device, n, non_blocking});
    std::memcpy(dst, src, n);
  }
  Allocator* host_transfer_allocator() override { return pinned_.get(); }

  struct Copy {
    Device from, to;
    size_t bytes;
    bool non_blocking;
  };
  std::vector<Copy> copies;
  bool gpu_done = true;  // whether queued "GPU" work has finished (events, queries)
  int events = 0, waits = 0;

 private:
  struct Slot {
    MockStream stream;
    std::unique_ptr<StreamAwareAllocator> allocator;
    Generator generator;
  };

  static std::unique_ptr<StreamAwareAllocator> host_allocator(Device d, const char* name) {
    return std::make_unique<StreamAwareAllocator>(
        d, name, [](size_t n) { return std::aligned_alloc(64, (n + 63) / 64 * 64); },
        [](void* p) { std::free(p); });
  }

  // The CPU kernel of op I, in a frame for cpu:0 so that its own runtime calls (the
  // BLAS handle, scratch tensors) go to the CPU, where its memory really is.
  template <size_t I>
  static void run_on_host(const ops::OpCall& c, std::span<Tensor> outs) {
    KernelScope scope(ops::op_name(static_cast<ops::OpKind>(I)), Device(DeviceType::cpu, 0));
    cpu::kernels()[I](c, outs);
  }
  template <size_t... I>
  static ops::KernelTable make_trampolines(std::index_sequence<I...>) {
    return {&run_on_host<I>...};
  }
  static const ops::KernelTable& trampolines() {
    static const ops::KernelTable t = make_trampolines(std::make_index_sequence<ops::kNumOps>());
    return t;
  }

  std::vector<std::unique_ptr<Slot>> slots_;
  std::unique_ptr<StreamAwareAllocator> pinned_;
  ops::KernelTable table_{};
};

}  // namespace kiln::testing

// The CUDA device runtime: device count, per-device caching allocators and
// generators, streams and events on cudaStream_t / cudaEvent_t, byte copies, pinned
// host memory. Host code against the CUDA runtime API; kernels are in backend/cuda.
#include "kiln/device/cuda_runtime.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/device/caching_allocator.h"
#include "kiln/device/registry.h"
#include "kiln/device/stream_impl.h"

namespace kiln {

namespace cuda {

void check(int status, const char* what) {
  if (status == cudaSuccess) return;
  auto e = static_cast<cudaError_t>(status);
  fail(ErrorKind::backend, "[CUDA] {} failed: {} ({})", what, cudaGetErrorString(e),
       cudaGetErrorName(e));
}

void* load_library(const std::string& soname, const char* what) {
  void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    lib = dlopen((std::string(KILN_CUDA_LIBDIR) + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL);
  KILN_CHECK(lib, backend, "[{}] cannot load {} (also tried {}): {}", what, soname,
             KILN_CUDA_LIBDIR, dlerror());
  return lib;
}

void* library_symbol(void* lib, const char* symbol, const std::string& soname, const char* what) {
  void* f = dlsym(lib, symbol);
  KILN_CHECK(f, backend, "[{}] {} has no {}", what, soname, symbol);
  return f;
}

// Asks the runtime rather than caching: other code in the process may call
// cudaSetDevice too, and cudaGetDevice is a thread-local read.
void set_device(int index) {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == index) return;
  check(cudaSetDevice(index), "cudaSetDevice");
}

namespace {

constexpr int kMaxDevices = 64;
std::atomic<KernelError*> error_blocks[kMaxDevices];

}  // namespace

KernelError* kernel_error_block(int device) {
  KILN_CHECK(device >= 0 && device < kMaxDevices, device, "cuda:{} is past kiln's {} CUDA devices",
             device, kMaxDevices);
  if (KernelError* block = error_blocks[device].load(std::memory_order_acquire)) return block;
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  if (KernelError* block = error_blocks[device].load(std::memory_order_relaxed)) return block;
  set_device(device);
  void* p = nullptr;  // mapped pinned memory: one address on the host and on every GPU
  check(cudaHostAlloc(&p, sizeof(KernelError), cudaHostAllocMapped | cudaHostAllocPortable),
        "cudaHostAlloc (kernel error block)");
  auto* block = new (p) KernelError{};
  error_blocks[device].store(block, std::memory_order_release);
  return block;  // lives as long as the process, as the CUDA context does
}

void raise_kernel_error(int device) {
  if (device < 0 || device >= kMaxDevices) return;
  auto* block = error_blocks[device].load(std::memory_order_acquire);
  if (!block) return;
  volatile KernelError* seen = block;  // written by the GPU
  if (seen->code == 0) return;
  KernelError e{seen->code, seen->op, seen->value, seen->bound};
  seen->code = 0;
  if (e.code == 2)
    fail(ErrorKind::value,
         "[{}] integer division by zero (ZeroDivisionError) on cuda:{}, found by the "
         "kernel and reported at this wait",
         e.op ? e.op : "kernel", device);
  fail(ErrorKind::index,
       "[{}] index {} is out of range for size {} (an index tensor on cuda:{}, "
       "found by the kernel and reported at this wait)",
       e.op ? e.op : "kernel", e.value, e.bound, device);
}

namespace {

// A CUDA stream: host code launching its work runs on the calling thread (inline);
// the work itself is asynchronous on the GPU. The default stream is the legacy null
// stream; side streams do not synchronise with it implicitly.
struct CudaStream final : StreamImpl {
  cudaStream_t stream = nullptr;

  bool host_inline() const override { return true; }
  void enqueue(std::function<void()> work) override { work(); }
  void synchronize() override {
    set_device(device.index);
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    raise_kernel_error(device.index);
  }
  bool query() override {
    set_device(device.index);
    cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaErrorNotReady) return false;
    check(e, "cudaStreamQuery");
    return true;
  }
  void* native() const override { return stream; }

  void record(uint64_t&, std::shared_ptr<void>& native) override {
    set_device(device.index);
    cudaEvent_t ev = nullptr;
    check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    native =
        std::shared_ptr<void>(ev, [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
    check(cudaEventRecord(ev, stream), "cudaEventRecord");
  }
  void event_synchronize(uint64_t, const std::shared_ptr<void>& native) override {
    check(cudaEventSynchronize(static_cast<cudaEvent_t>(native.get())), "cudaEventSynchronize");
    raise_kernel_error(device.index);
  }
  bool event_query(uint64_t, const std::shared_ptr<void>& native) override {
    cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(native.get()));
    if (e == cudaErrorNotReady) return false;
    check(e, "cudaEventQuery");
    return true;
  }
  void wait(const Event& event) override {
    if (void* ev = event.native_handle()) {  // GPU-side wait, any device
      set_device(device.index);
      check(cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(ev), 0), "cudaStreamWaitEvent");
    } else {  // a CPU stream's event: the host waits before launching more work
      event.synchronize();
    }
  }
};

class CudaBackend final : public DeviceBackend {
 public:
  DeviceType type() const override { return DeviceType::cuda; }

  // No driver, no GPU, or a driver older than the runtime: 0 devices, never an error.
  int device_count() const noexcept override {
    std::call_once(count_once_, [this] {
      int n = 0;
      if (cudaGetDeviceCount(&n) != cudaSuccess) {
        n = 0;
        cudaGetLastError();  // clear the sticky error
      }
      count_ = n;
    });
    return count_;
  }

  Allocator& allocator(int index) override { return *slot(index).allocator; }
  Generator& generator(int index) override { return slot(index).generator; }
  StreamImpl* default_stream(int index) override { return &slot(index).default_stream; }

  std::unique_ptr<StreamImpl> create_stream(Device device, int id) override {
    set_device(device.index);
    auto s = std::make_unique<CudaStream>();
    s->device = device;
    s->id = id;
    check(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    return s;
  }

  void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes,
                  bool non_blocking) override {
    Device side = dst_device.is_cpu() ? src_device : dst_device;
    set_device(side.index);
    auto stream = static_cast<cudaStream_t>(current_stream(side).native_handle());
    if (!dst_device.is_cpu() && !src_device.is_cpu() && dst_device != src_device) {
      check(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, nbytes, stream),
            "cudaMemcpyPeerAsync");
    } else {
      check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, stream), "cudaMemcpyAsync");
    }
    if (!non_blocking) {
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      raise_kernel_error(side.index);
    }
  }

  Allocator* host_transfer_allocator() override {
    std::call_once(pinned_once_, [this] {
      pinned_ = std::make_unique<StreamAwareAllocator>(
          Device(DeviceType::cpu, 0), "CUDA pinned host allocator",
          [](size_t n) -> void* {
            void* p = nullptr;
            if (cudaHostAlloc(&p, n, cudaHostAllocDefault) != cudaSuccess) {
              cudaGetLastError();
              return nullptr;
            }
            return p;
          },
          [](void* p) { cudaFreeHost(p); });
    });
    return pinned_.get();
  }

 private:
  struct Slot {
    std::unique_ptr<StreamAwareAllocator> allocator;
    Generator generator;
    CudaStream default_stream;
  };

  Slot& slot(int index) {
    std::call_once(slots_once_, [this] {
      int n = device_count();
      for (int i = 0; i < n; ++i) {
        auto s = std::make_unique<Slot>();
        Device d(DeviceType::cuda, i);
        s->default_stream.device = d;
        s->allocator = std::make_unique<StreamAwareAllocator>(
            d, "CUDA caching allocator",
            [i](size_t n) -> void* {
              set_device(i);
              void* p = nullptr;
              if (cudaMalloc(&p, n) != cudaSuccess) {
                cudaGetLastError();
                return nullptr;
              }
              return p;
            },
            [i](void* p) {
              set_device(i);
              cudaFree(p);
            });
        slots_.push_back(std::move(s));
      }
    });
    return *slots_.at(index);
  }

  mutable std::once_flag count_once_;
  mutable int count_ = 0;
  std::once_flag slots_once_, pinned_once_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::unique_ptr<StreamAwareAllocator> pinned_;
};

}  // namespace
}  // namespace cuda

DeviceBackend* cuda_backend() {
  // Never destroyed: allocators and streams may be used by static tensors at exit.
  static auto* backend = new cuda::CudaBackend;
  return backend;
}

}  // namespace kiln

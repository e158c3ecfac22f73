#include "kiln/device/registry.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/device/stream_impl.h"

namespace kiln {

namespace {

// Virtual CPU devices: each has its own allocator (so statistics prove where memory
// went) and its own generator.
class CpuBackend final : public DeviceBackend {
 public:
  DeviceType type() const override { return DeviceType::cpu; }
  int device_count() const noexcept override { return count_.load(std::memory_order_acquire); }
  Allocator& allocator(int index) override { return slot(index).allocator; }
  Generator& generator(int index) override { return slot(index).generator; }
  std::unique_ptr<StreamImpl> create_stream(Device device, int id) override {
    return make_cpu_stream(device, id);
  }

  void configure(int n) {
    KILN_CHECK(n >= 1 && n <= 1024, value, "[set_cpu_device_count] expected 1..1024, got {}", n);
    std::lock_guard lock(mu_);
    env_error_.clear();  // an explicit count replaces the environment's
    if (n == count_.load()) return;
    KILN_CHECK(!used_, value,
               "[set_cpu_device_count] cannot change the CPU device count from {} to {} after "
               "CPU devices were used; call it first (or set KILN_CPU_DEVICES)",
               count_.load(), n);
    while (static_cast<int>(slots_.size()) < n)
      slots_.push_back(std::make_unique<Slot>(static_cast<int>(slots_.size())));
    count_.store(n, std::memory_order_release);
  }

  // A malformed KILN_CPU_DEVICES is reported when a CPU device is first used (every use
  // checks availability), never from device_count(), which must not throw.
  CpuBackend() {
    int n = 1;
    if (const char* env = std::getenv("KILN_CPU_DEVICES"); env && *env) {
      char* end = nullptr;
      long v = std::strtol(env, &end, 10);
      if (*end == '\0' && v >= 1 && v <= 1024)
        n = static_cast<int>(v);
      else
        env_error_ = fmt::format("KILN_CPU_DEVICES must be an integer in 1..1024, got '{}'", env);
    }
    for (int i = 0; i < n; ++i) slots_.push_back(std::make_unique<Slot>(i));
    count_ = n;
  }

  void check_env() const {
    if (!env_error_.empty()) [[unlikely]]
      fail(ErrorKind::value, "{}", env_error_);
  }

 private:
  struct Slot {
    explicit Slot(int index) : allocator("cpu:" + std::to_string(index)) {}
    CachingHostAllocator allocator;
    Generator generator;
  };
  Slot& slot(int index) {
    if (!used_) {
      std::lock_guard lock(mu_);
      used_ = true;
    }
    return *slots_[index];
  }

  std::mutex mu_;
  std::vector<std::unique_ptr<Slot>> slots_;  // grows only; never shrinks
  std::atomic<int> count_{1};
  std::atomic<bool> used_{false};
  std::string env_error_;  // cleared by an explicit set_cpu_device_count
};

CpuBackend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

thread_local std::array<int16_t, kNumDeviceTypes> t_current = {0, 0, 0};

}  // namespace

void DeviceBackend::copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                               size_t nbytes, bool) {
  KILN_CHECK(dst_device.is_cpu() && src_device.is_cpu(), unsupported,
             "[copy] no byte copy from {} to {} in this build", src_device, dst_device);
  std::memcpy(dst, src, nbytes);
}

#if KILN_WITH_CUDA
DeviceBackend* cuda_backend();  // device/cuda_runtime.cpp
#else
DeviceBackend* cuda_backend() { return nullptr; }
#endif

namespace {
DeviceBackend* g_test_backend[kNumDeviceTypes] = {};
}  // namespace

void set_device_backend_for_testing(DeviceType type, DeviceBackend* backend) {
  g_test_backend[static_cast<int>(type)] = backend;
}

// The one registry of backends: add a line here per compiled backend.
DeviceBackend* device_backend(DeviceType type) {
  if (DeviceBackend* b = g_test_backend[static_cast<int>(type)]) return b;
  switch (type) {
    case DeviceType::cpu: return &cpu_backend();
    case DeviceType::cuda: return cuda_backend();  // null when built without CUDA
    case DeviceType::meta: return nullptr;
  }
  return nullptr;
}

int device_count(DeviceType type) noexcept {
  if (type == DeviceType::meta) return 1;
  DeviceBackend* b = device_backend(type);
  return b ? b->device_count() : 0;
}

void set_cpu_device_count(int n) { cpu_backend().configure(n); }

void check_device_available(Device device) {
  if (device.type == DeviceType::meta) return;
  if (device.type == DeviceType::cpu) cpu_backend().check_env();
  int n = device_count(device.type);
  KILN_CHECK(n > 0, device, "[device] {} is not available: this build or machine has no {} devices",
             device, device.type);
  KILN_CHECK(device.index < n, device,
             "[device] {} is not available: {} {} device(s) are configured ({}:0..{}:{}){}", device,
             n, device.type, device.type, device.type, n - 1,
             device.type == DeviceType::cpu ? "; set KILN_CPU_DEVICES for more" : "");
}

Device resolve_device(Device device) {
  if (device.has_index()) return device;
  return current_device(device.type);
}

Allocator& device_allocator(Device device) {
  check_device_available(device);
  KILN_CHECK(device.type != DeviceType::meta, device, "[device] meta tensors have no memory");
  return device_backend(device.type)->allocator(device.index);
}

AllocatorStats allocator_stats(Device device) {
  return device_allocator(resolve_device(device)).stats();
}

Generator& device_generator(Device device) {
  check_device_available(device);
  KILN_CHECK(device.type != DeviceType::meta, device, "[device] meta tensors have no generator");
  return device_backend(device.type)->generator(device.index);
}

void manual_seed(uint64_t seed) {
  for (auto type : {DeviceType::cpu, DeviceType::cuda}) {
    DeviceBackend* b = device_backend(type);
    for (int i = 0; b && i < b->device_count(); ++i) {
      Generator& g = b->generator(i);
      std::lock_guard lock(g.mutex());
      g.manual_seed(seed);
    }
  }
}

Device current_device(DeviceType type) { return Device(type, t_current[static_cast<int>(type)]); }

Device exchange_device(Device device) {
  KILN_ASSERT(device.has_index());
  Device prev = current_device(device.type);
  t_current[static_cast<int>(device.type)] = device.index;
  return prev;
}

void OptionalDeviceGuard::set_device(Device device) {
  device = resolve_device(device);
  if (engaged_ && prev_.type == device.type) {
    exchange_device(device);
    return;
  }
  reset();
  prev_ = exchange_device(device);
  engaged_ = true;
}

void OptionalDeviceGuard::reset() {
  if (!engaged_) return;
  exchange_device(prev_);
  engaged_ = false;
}

}  // namespace kiln

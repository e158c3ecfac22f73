#include "kiln/device/blas.h"

#include <map>
#include <memory>
#include <mutex>

#include "kiln/device/kernel_scope.h"
#include "kiln/device/threads.h"

namespace kiln {

namespace {

// One pool per device: a handle per stream, created on first use and kept.
struct Pools {
  std::mutex mu;
  std::map<std::pair<uint32_t, int>, std::unique_ptr<BlasHandle>> handles;
};
Pools& pools() {
  static auto* p = new Pools;
  return *p;
}
}  // namespace

void BlasHandle::begin_use() const { check_kernel_device(device_, "BLAS handle"); }

const BlasHandle& blas_handle(Device device) {
  Stream stream = current_stream(device);
  Pools& p = pools();
  std::lock_guard lock(p.mu);
  auto& slot = p.handles[{stream.device().key(), stream.id()}];
  if (!slot) {
    slot = std::make_unique<BlasHandle>(stream.device(), stream, get_num_threads(stream.device()));
  }
  return *slot;
}

const BlasHandle& blas_handle(DeviceType type) {
  Device d = current_device(type);
  check_kernel_device(d, "current device");  // (D8) the kernel forgot its guard
  return blas_handle(d);
}

int blas_handle_count(Device device) {
  device = resolve_device(device);
  Pools& p = pools();
  std::lock_guard lock(p.mu);
  int n = 0;
  for (const auto& [k, h] : p.handles) n += k.first == device.key();
  return n;
}

}  // namespace kiln

#pragma once
// The context a kernel runs in, and the safety checker (D8).
//
// Every kernel runs inside a KernelScope: a DeviceGuard for its device plus a
// thread-local frame naming the op and the device. Runtime calls a kernel makes
// without naming a device -- the current stream, the current BLAS handle, a stream
// to queue on -- check the frame, so a kernel that runs with another device current,
// or uses another device's stream or handle, fails loudly with both devices named.
// That is how multi-GPU bugs show up on a machine with virtual CPU devices only.

#include <string_view>

#include "kiln/core/scope.h"
#include "kiln/device/registry.h"

namespace kiln {

/** The op and device of the kernel running on this thread. */
struct KernelFrame {
  std::string_view op;
  Device device;
};

/** Null outside kernels. */
const KernelFrame* current_kernel();

/** Enters a kernel: makes `device` current and records the frame; restores both. */
class KernelScope : ScopeGuard {
 public:
  KernelScope(std::string_view op, Device device);
  ~KernelScope();

 private:
  DeviceGuard guard_;
  const KernelFrame* prev_;
  KernelFrame frame_;
};

/** (D8) Inside a kernel, throws unless `used` is the kernel's device; `what` says
 * what was used ("current device", "stream", "BLAS handle"). No-op outside kernels. */
void check_kernel_device(Device used, std::string_view what);

}  // namespace kiln

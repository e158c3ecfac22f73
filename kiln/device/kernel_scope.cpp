#include "kiln/device/kernel_scope.h"

#include "kiln/core/error.h"

namespace kiln {

namespace {
thread_local const KernelFrame* t_frame = nullptr;
}  // namespace

const KernelFrame* current_kernel() { return t_frame; }

KernelScope::KernelScope(std::string_view op, Device device)
    : guard_(device), prev_(t_frame), frame_{op, device} {
  t_frame = &frame_;
}

KernelScope::~KernelScope() { t_frame = prev_; }

void check_kernel_device(Device used, std::string_view what) {
  const KernelFrame* f = t_frame;
  if (!f || used == f->device) return;
  fail(ErrorKind::device_mismatch,
       "[{}] kernel for {} used the {} of {}: every kernel must run with its tensors' "
       "device current and use that device's streams and BLAS handles",
       f->op, f->device, what, used);
}

}  // namespace kiln

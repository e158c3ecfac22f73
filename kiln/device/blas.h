#pragma once
// BLAS handles (D5): per device, per stream, never shared across devices.

#include "kiln/device/stream.h"

namespace kiln {

/** What a BLAS call needs besides its operands: the device it belongs to, the stream
 * its work is ordered on, and the threading configuration. On CPU OpenBLAS has no
 * handle object, so this is kiln's own; CUDA's will wrap a cublasHandle_t with the
 * same API. */
class BlasHandle {
 public:
  BlasHandle(Device device, Stream stream, int threads)
      : device_(device), stream_(stream), threads_(threads) {}
  Device device() const { return device_; }
  Stream stream() const { return stream_; }
  int threads() const { return threads_; }
  /** Called right before a BLAS call: inside a kernel the handle must belong to the
   * kernel's device (D8). */
  void begin_use() const;

 private:
  Device device_;
  Stream stream_;
  int threads_;
};

/** The handle of the current device of `type`, bound to that device's current
 * stream (the way kernels get one; checks the current device, D8). */
const BlasHandle& blas_handle(DeviceType type);
/** The handle of `device` for its current stream. */
const BlasHandle& blas_handle(Device device);
/** Number of handles `device`'s pool has created (one per stream used). */
int blas_handle_count(Device device);

}  // namespace kiln

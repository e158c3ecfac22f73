#pragma once
// The device runtime's front door: which devices exist, their allocators and
// generators, and the thread's current device per type (D3).

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kiln/core/allocator.h"
#include "kiln/core/device.h"
#include "kiln/core/random.h"
#include "kiln/core/scope.h"

namespace kiln {

struct StreamImpl;

/** One device type's runtime. A backend that is not compiled in has none. */
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual DeviceType type() const = 0;
  /** Never throws; 0 when the type is unusable here. */
  virtual int device_count() const noexcept = 0;
  virtual Allocator& allocator(int index) = 0;
  virtual Generator& generator(int index) = 0;
  /** The default stream of device `index`; null when it runs inline on the host. */
  virtual StreamImpl* default_stream(int index) { return nullptr; }
  /** A new side stream of `device` with stream id `id` (ids are per device, from 1). */
  virtual std::unique_ptr<StreamImpl> create_stream(Device device, int id) = 0;
  /** Copies `nbytes` of plain bytes between memory of this backend's devices and host
   * memory (or between two of its devices), ordered on the current stream of the
   * non-CPU side (the destination's when both are). Returns once the copy is done
   * unless `non_blocking`. */
  virtual void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                          size_t nbytes, bool non_blocking);
  /** The allocator for host memory that device copies read and write without staging
   * (pinned memory on CUDA); null when ordinary host memory serves. */
  virtual Allocator* host_transfer_allocator() { return nullptr; }
};

/** The backend of `type`, or null when this build or machine has none. */
DeviceBackend* device_backend(DeviceType type);

/** Replaces the backend of `type` (null restores the built-in one): tests run the device
 * runtime and dispatch logic of a backend this machine lacks against a stand-in (see
 * tests/mock_cuda.h). Not synchronised with concurrent device use. */
void set_device_backend_for_testing(DeviceType type, DeviceBackend* backend);

/** Number of devices of `type` (0 for an absent backend; meta reports 1). Never throws. */
int device_count(DeviceType type) noexcept;

/** Configures `n` virtual CPU devices cpu:0..cpu:n-1. Must precede the first use of a
 * CPU device unless `n` equals the current count; KILN_CPU_DEVICES sets the default. */
void set_cpu_device_count(int n);

/** Throws a device Error unless `device` (with an index) exists on this machine. */
void check_device_available(Device device);

/** Fills in the index of a device request ("cuda" -> the current cuda device). */
Device resolve_device(Device device);

/** The allocator of a (resolved, available) device; throws for meta. */
Allocator& device_allocator(Device device);
AllocatorStats allocator_stats(Device device);

/** The random generator of a device; `manual_seed` reseeds every device's generator. */
Generator& device_generator(Device device);
void manual_seed(uint64_t seed);

/** The thread's current device of `type` (index 0 until a guard changes it). */
Device current_device(DeviceType type);
/** Makes `device` current for its type and returns the previous current device. */
Device exchange_device(Device device);

/** (D3) Makes a device current for this thread for its lifetime. */
class DeviceGuard : ScopeGuard {
 public:
  explicit DeviceGuard(Device device) : prev_(exchange_device(resolve_device(device))) {}
  ~DeviceGuard() { exchange_device(prev_); }
  /** The device that was current before this guard. */
  Device original_device() const { return prev_; }

 private:
  Device prev_;
};

/** (D3) A guard that may be empty; while empty it changes and restores nothing. */
class OptionalDeviceGuard : ScopeGuard {
 public:
  OptionalDeviceGuard() = default;
  explicit OptionalDeviceGuard(Device device) { set_device(device); }
  ~OptionalDeviceGuard() { reset(); }

  /** Engages the guard (or moves it to another device, restoring the first original). */
  void set_device(Device device);
  /** Restores the original device and empties the guard. */
  void reset();
  bool engaged() const { return engaged_; }

 private:
  Device prev_;
  bool engaged_ = false;
};

}  // namespace kiln

#pragma once
// The backend side of a stream (internal: backends implement it, users hold Streams).
//
// A stream either runs its work on the calling thread (`host_inline`: the CPU default
// stream has no StreamImpl at all, and every CUDA stream launches its device work from
// the calling thread) or queues host work on a worker (CPU side streams). Events are
// a stream-defined mark: a queue position on CPU, a cudaEvent_t on CUDA.

#include <cstdint>
#include <functional>
#include <memory>

#include "kiln/core/device.h"
#include "kiln/device/stream.h"

namespace kiln {

struct StreamImpl {
  Device device;
  int id = 0;  // 0 for the default stream

  virtual ~StreamImpl() = default;
  /** True when enqueued work runs on the calling thread. */
  virtual bool host_inline() const = 0;
  /** Queues host work (only called when !host_inline()). */
  virtual void enqueue(std::function<void()> work) = 0;
  /** Blocks the host until the stream has drained; rethrows a queued task's error. */
  virtual void synchronize() = 0;
  virtual bool query() = 0;
  /** The backend's stream object (a cudaStream_t), or null. */
  virtual void* native() const { return nullptr; }

  // Events: `mark` and `native` are the Event's state, set by record.
  virtual void record(uint64_t& mark, std::shared_ptr<void>& native) = 0;
  virtual void event_synchronize(uint64_t mark, const std::shared_ptr<void>& native) = 0;
  virtual bool event_query(uint64_t mark, const std::shared_ptr<void>& native) = 0;
  /** Makes this stream's later work wait for `event` (recorded on any stream). */
  virtual void wait(const Event& event) = 0;

 protected:
  /** The stream an event was recorded on and its mark (for events without a native
   * object, whose state is just these two). */
  static StreamImpl* recorded_on(const Event& e);
  static uint64_t mark_of(const Event& e);
};

inline StreamImpl* StreamImpl::recorded_on(const Event& e) { return e.stream_; }
inline uint64_t StreamImpl::mark_of(const Event& e) { return e.target_; }

/** A CPU side stream (a FIFO with its own worker thread, started once the stream is
 * fully set up). */
std::unique_ptr<StreamImpl> make_cpu_stream(Device device, int id);

}  // namespace kiln

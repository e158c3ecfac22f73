#pragma once
// Streams and events (D4).
//
// Note [CPU streams]
// Every device has a default stream and any number of side streams. On a CPU device
// the default stream runs work inline, on the calling thread; a side stream is a real
// FIFO drained by its own worker thread, so work on it is asynchronous to the host and
// to other streams, and a missing synchronisation is a real race that tests and
// ThreadSanitizer can catch. Work queued on a side stream holds references to every
// tensor it touches until it has run: memory in use by a stream is never freed or
// reused early (the effect of CUDA's record_stream, by construction).
//
// A CUDA stream is a cudaStream_t: host code that launches its kernels runs on the
// calling thread, the kernels run asynchronously on the GPU, and the CUDA caching
// allocator keeps memory used by a stream until that stream is done with it. Both
// kinds sit behind the same Stream and Event (see stream_impl.h).

#include <cstdint>
#include <functional>
#include <memory>

#include "kiln/core/device.h"
#include "kiln/core/scope.h"

namespace kiln {

struct StreamImpl;

/** A handle to one stream of one device. Cheap to copy; streams live as long as
 * the process. */
class Stream {
 public:
  /** The default stream of `device` (inline on CPU). */
  static Stream default_stream(Device device);
  /** A new side stream on `device` (streams live as long as the process). */
  static Stream create(Device device);
  /** A side stream from `device`'s pool: kPoolSize streams created on first use and
   * handed out round-robin, so code that wants "some other stream" per call does not
   * create one each time (PyTorch's getStreamFromPool). */
  static Stream from_pool(Device device);
  static constexpr int kPoolSize = 8;

  Device device() const;
  /** 0 for the default stream. */
  int id() const;
  bool is_default() const { return id() == 0; }
  /** Queues `work` (runs it now when the stream runs inline). Inside a kernel, the
   * stream must belong to the kernel's device (D8). */
  void enqueue(std::function<void()> work) const;
  /** Blocks the host until all queued work has run; rethrows the first error a
   * queued task raised. */
  void synchronize() const;
  /** True when all queued work has run. */
  bool query() const;

  /** True when work queued here runs on the calling thread: the CPU default stream
   * and every CUDA stream (whose device work is asynchronous on the GPU instead). */
  bool runs_inline() const;
  /** The backend's stream object (a cudaStream_t for CUDA), or null. */
  void* native_handle() const;

  bool operator==(const Stream& o) const { return device_ == o.device_ && impl_ == o.impl_; }
  /** Null for the CPU default stream (inline: it needs no state). */
  StreamImpl* impl() const { return impl_; }
  /** The stream behind a non-null impl. */
  static Stream of(StreamImpl* impl);

 private:
  Stream(Device device, StreamImpl* impl) : device_(device), impl_(impl) {}
  Device device_;
  StreamImpl* impl_;
  friend Stream stream_by_id(Device device, int id);
  friend Stream current_stream(Device device);
  friend class Event;
};

/** The stream with `id` on `device` (as recorded on a storage). */
Stream stream_by_id(Device device, int id);

/** (D4) The calling thread's current stream of `device` (its default unless set). */
Stream current_stream(Device device);
/** The current stream of the thread's current device of `type`. Inside a kernel the
 * current device must be the kernel's device (D8). */
Stream current_stream(DeviceType type);
/** Makes `stream` current for its device on this thread; returns the previous one. */
Stream exchange_stream(Stream stream);

/** (D4) Makes a stream's device current and the stream current on it; restores both. */
class StreamGuard : ScopeGuard {
 public:
  explicit StreamGuard(Stream stream);
  ~StreamGuard();

 private:
  Device prev_device_;
  Stream prev_stream_;
};

/** A point in a stream's work. Another stream (of any device) can wait on it. */
class Event {
 public:
  /** Marks the current end of `stream`'s queue. */
  void record(Stream stream);
  /** Makes `stream` wait until this event has completed (the host, for an inline
   * default stream). An event never recorded is complete. */
  void wait(Stream stream) const;
  /** Blocks the host until the event has completed. */
  void synchronize() const;
  bool query() const;
  /** The backend's event object (a cudaEvent_t for CUDA), or null. */
  void* native_handle() const { return native_.get(); }

 private:
  StreamImpl* stream_ = nullptr;  // recorded on; null = complete
  uint64_t target_ = 0;           // CPU side streams: the queue position
  std::shared_ptr<void> native_;  // CUDA: the event object
  friend struct StreamImpl;
};

/** Blocks until every stream of `device` (its default stream included) has drained. */
void synchronize_device(Device device);

}  // namespace kiln

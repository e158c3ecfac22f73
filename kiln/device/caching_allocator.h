#pragma once
// The stream-aware caching allocator (CUDA device memory, pinned host memory).
//
// Note [Stream-aware reuse]
// Device work is asynchronous: when a tensor dies on the host, kernels that read or
// write it may still be queued. A block therefore belongs to the stream that was
// current when it was allocated: a freed block is reused only by allocations for that
// same stream, whose later work is ordered after everything already queued there.
// When other streams used the block too (`record_stream`, which dispatch calls for
// every tensor a kernel on another stream touches), freeing it records an event on
// each of them, and the block returns to the cache only once all those events have
// completed. The memory itself comes from a `raw` function (cudaMalloc,
// cudaHostAlloc, or plain malloc in the tests), so the bookkeeping is tested on any
// machine.

#include <functional>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/core/allocator.h"
#include "kiln/core/device.h"
#include "kiln/device/stream.h"

namespace kiln {

class StreamAwareAllocator final : public Allocator {
 public:
  using RawAlloc = std::function<void*(size_t)>;  // null when out of memory
  using RawFree = std::function<void(void*)>;

  /** Blocks for `device` (whose current stream owns each allocation); `name` is used in
   * out-of-memory errors. */
  StreamAwareAllocator(Device device, std::string name, RawAlloc alloc, RawFree free);
  ~StreamAwareAllocator() override;

  void* allocate(size_t nbytes) override;
  void deallocate(void* ptr, size_t nbytes) override;
  AllocatorStats stats() const override;
  void reset_peak() override;
  void empty_cache() override;
  void record_stream(void* ptr, StreamImpl* stream) override;

  /** Blocks freed but still waiting for another stream's work. */
  int pending_blocks() const;
  /** The block size a request of `nbytes` is rounded to. */
  static size_t round_size(size_t nbytes);

 private:
  struct Block {
    size_t size = 0;
    StreamImpl* stream = nullptr;   // owner: current stream at allocation
    std::vector<StreamImpl*> uses;  // other streams that used it
  };
  struct Pending {
    void* ptr;
    Block block;
    std::vector<Event> events;
  };
  void process_pending();  // with mu_ held
  void release_cached();   // with mu_ held

  Device device_;
  std::string name_;
  RawAlloc raw_alloc_;
  RawFree raw_free_;
  mutable std::mutex mu_;
  std::unordered_map<void*, Block> live_;
  std::map<std::pair<StreamImpl*, size_t>, std::vector<void*>> free_;
  std::vector<Pending> pending_;
  AllocatorStats stats_;
};

}  // namespace kiln

#pragma once
// Allocator: the per-device memory interface, and the caching host allocator.

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/core/spin_lock.h"

namespace kiln {

struct StreamImpl;

/** Counters every allocator keeps; read them with allocator_stats(device). */
struct AllocatorStats {
  int64_t bytes_in_use = 0;   // held by live storages (rounded to the block size)
  int64_t peak_bytes = 0;     // max of bytes_in_use since the last reset_peak
  int64_t num_allocs = 0;     // allocate() calls that returned memory
  int64_t num_os_allocs = 0;  // of those, how many had to ask the OS (cache misses)
  int64_t bytes_cached = 0;   // freed blocks kept for reuse
};

/** Memory for one device. Implementations are thread-safe. */
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void reset_peak() = 0;
  /** Returns cached blocks to the OS. */
  virtual void empty_cache() = 0;
  /** Tells a stream-aware allocator that `stream` uses the block at `ptr`: when the
   * block is freed it is not reused before that stream's work queued so far is done. */
  virtual void record_stream(void* ptr, StreamImpl* stream) {}
};

/** Host memory with a cache of freed blocks per rounded size, so a steady-state
 * loop never touches fresh pages (a first touch costs ~12 us here, see docs/benchmarks.md).
 * Blocks are 64-byte aligned; large ones (from 1 MiB) are 2 MiB aligned, and those of
 * 32 MiB or more are asked to use transparent huge pages. */
class CachingHostAllocator final : public Allocator {
 public:
  /** `device` names the allocator in out-of-memory errors ("cpu:1"). */
  explicit CachingHostAllocator(std::string device = "cpu") : device_(std::move(device)) {}
  ~CachingHostAllocator() override;
  void* allocate(size_t nbytes) override;
  void deallocate(void* ptr, size_t nbytes) override;
  AllocatorStats stats() const override;
  void reset_peak() override;
  void empty_cache() override;

  /** The block size a request of `nbytes` is rounded to. */
  static size_t round_size(size_t nbytes);

 private:
  std::string device_;
  mutable SpinLock mu_;
  // Cached blocks by size: below 1 MiB (multiples of 512 bytes) indexed by size / 512,
  // no hashing on the path of every small tensor; larger sizes in a map.
  std::array<std::vector<void*>, 2048> small_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  AllocatorStats stats_;
};

}  // namespace kiln

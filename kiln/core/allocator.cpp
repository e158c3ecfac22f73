#include "kiln/core/allocator.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

#include "kiln/core/error.h"

namespace kiln {

namespace {
constexpr size_t kSmall = 512;  // granularity below 1 MiB
constexpr size_t kLargeThreshold = 1 << 20;
constexpr size_t kHuge = 2 << 20;  // granularity and alignment of large blocks
static_assert(kLargeThreshold / kSmall == 2048,
              "CachingHostAllocator::small_ has a list per small size");
// Blocks from this size on are asked to use transparent huge pages. Not below: a huge
// page is resident as a whole from its first touch, so a partly used 2 MiB tail of a
// medium block would count in full (BLOCK's train step: 19.0 MiB peak RSS with huge
// pages from 1 MiB on, 16.3 MiB without). PyTorch's CPU allocator asks for none unless
// THP_MEM_ALLOC_ENABLE is set; kiln keeps them where a tensor is big enough for page
// walks to matter and the rounding waste is small (< 7%).
constexpr size_t kHugePagesFrom = 32 << 20;

// Null when the OS refuses.
void* os_alloc(size_t size) {
  size_t align = size >= kLargeThreshold ? kHuge : 64;
  void* p = std::aligned_alloc(align, size);
  if (p && size >= kHugePagesFrom) madvise(p, size, MADV_HUGEPAGE);
  return p;
}
}  // namespace

size_t CachingHostAllocator::round_size(size_t nbytes) {
  if (nbytes == 0) return 0;
  if (nbytes > SIZE_MAX - kHuge) return SIZE_MAX;        // rounding would wrap; the OS refuses it
  size_t g = nbytes < kLargeThreshold ? kSmall : kHuge;  // both powers of two
  return (nbytes + g - 1) & ~(g - 1);
}

CachingHostAllocator::~CachingHostAllocator() { empty_cache(); }

void* CachingHostAllocator::allocate(size_t nbytes) {
  size_t size = round_size(nbytes);
  if (size == 0) return nullptr;
  std::unique_lock lock(mu_);
  void* p = nullptr;
  std::vector<void*>* blocks = nullptr;
  if (size < kLargeThreshold)
    blocks = &small_[size / kSmall];
  else if (auto it = free_.find(size); it != free_.end())
    blocks = &it->second;
  if (blocks && !blocks->empty()) {
    p = blocks->back();
    blocks->pop_back();
    stats_.bytes_cached -= static_cast<int64_t>(size);
  } else {
    lock.unlock();
    p = os_alloc(size);
    if (!p) {  // give the cache back to the OS and try once more
      empty_cache();
      p = os_alloc(size);
    }
    lock.lock();
    KILN_CHECK(p, out_of_memory,
               "[alloc] {} is out of memory: tried to allocate {} bytes ({:.2f} GiB) with {} bytes "
               "in use",
               device_, nbytes, double(nbytes) / double(1ull << 30), stats_.bytes_in_use);
    ++stats_.num_os_allocs;
  }
  ++stats_.num_allocs;
  stats_.bytes_in_use += static_cast<int64_t>(size);
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes_in_use);
  return p;
}

void CachingHostAllocator::deallocate(void* ptr, size_t nbytes) {
  if (!ptr) return;
  size_t size = round_size(nbytes);
  std::lock_guard lock(mu_);
  (size < kLargeThreshold ? small_[size / kSmall] : free_[size]).push_back(ptr);
  stats_.bytes_in_use -= static_cast<int64_t>(size);
  stats_.bytes_cached += static_cast<int64_t>(size);
}

AllocatorStats CachingHostAllocator::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void CachingHostAllocator::reset_peak() {
  std::lock_guard lock(mu_);
  stats_.peak_bytes = stats_.bytes_in_use;
}

void CachingHostAllocator::empty_cache() {
  std::lock_guard lock(mu_);
  for (auto& [size, blocks] : free_)
    for (void* p : blocks) std::free(p);
  free_.clear();
  for (std::vector<void*>& blocks : small_) {
    for (void* p : blocks) std::free(p);
    blocks.clear();
  }
  stats_.bytes_cached = 0;
}

}  // namespace kiln

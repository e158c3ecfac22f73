#include "kiln/device/caching_allocator.h"

#include <algorithm>

#include "kiln/core/error.h"

namespace kiln {

namespace {
constexpr size_t kSmall = 512;  // granularity below 1 MiB
constexpr size_t kLargeThreshold = 1 << 20;
constexpr size_t kLarge = 2 << 20;  // granularity from 1 MiB on
}  // namespace

size_t StreamAwareAllocator::round_size(size_t nbytes) {
  if (nbytes == 0) return 0;
  size_t g = nbytes < kLargeThreshold ? kSmall : kLarge;
  return (nbytes + g - 1) & ~(g - 1);
}

StreamAwareAllocator::StreamAwareAllocator(Device device, std::string name, RawAlloc alloc,
                                           RawFree free)
    : device_(device),
      name_(std::move(name)),
      raw_alloc_(std::move(alloc)),
      raw_free_(std::move(free)) {}

StreamAwareAllocator::~StreamAwareAllocator() {
  std::lock_guard lock(mu_);
  release_cached();
}

void* StreamAwareAllocator::allocate(size_t nbytes) {
  size_t size = round_size(nbytes);
  if (size == 0) return nullptr;
  StreamImpl* stream = current_stream(device_).impl();
  std::lock_guard lock(mu_);
  process_pending();
  void* p = nullptr;
  if (auto it = free_.find({stream, size}); it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    stats_.bytes_cached -= static_cast<int64_t>(size);
  } else {
    p = raw_alloc_(size);
    if (!p) {  // give the cache back and try once more
      release_cached();
      p = raw_alloc_(size);
    }
    KILN_CHECK(p, out_of_memory,
               "[{}] out of memory on {}: tried to allocate {} bytes with {} bytes in use "
               "(peak {})",
               name_, device_, size, stats_.bytes_in_use, stats_.peak_bytes);
    ++stats_.num_os_allocs;
  }
  live_[p] = Block{size, stream, {}};
  ++stats_.num_allocs;
  stats_.bytes_in_use += static_cast<int64_t>(size);
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes_in_use);
  return p;
}

void StreamAwareAllocator::record_stream(void* ptr, StreamImpl* stream) {
  std::lock_guard lock(mu_);
  if (!stream) return;  // the inline CPU stream is always caught up
  auto it = live_.find(ptr);
  if (it == live_.end()) return;  // not ours (a view into borrowed memory)
  Block& b = it->second;
  if (stream == b.stream || std::find(b.uses.begin(), b.uses.end(), stream) != b.uses.end()) return;
  b.uses.push_back(stream);
}

void StreamAwareAllocator::deallocate(void* ptr, size_t) {
  if (!ptr) return;
  std::lock_guard lock(mu_);
  auto node = live_.extract(ptr);
  KILN_CHECK(!node.empty(), internal, "[{}] freeing {} which it did not allocate", name_, ptr);
  Block b = std::move(node.mapped());
  if (b.uses.empty()) {
    free_[{b.stream, b.size}].push_back(ptr);
    stats_.bytes_in_use -= static_cast<int64_t>(b.size);
    stats_.bytes_cached += static_cast<int64_t>(b.size);
    return;
  }
  Pending p{ptr, std::move(b), {}};
  for (StreamImpl* s : p.block.uses) {
    Event e;
    e.record(Stream::of(s));
    p.events.push_back(std::move(e));
  }
  pending_.push_back(std::move(p));
  process_pending();
}

void StreamAwareAllocator::process_pending() {
  auto done = [](const Pending& p) {
    return std::all_of(p.events.begin(), p.events.end(), [](const Event& e) { return e.query(); });
  };
  auto it = std::stable_partition(pending_.begin(), pending_.end(),
                                  [&](const Pending& p) { return !done(p); });
  for (auto p = it; p != pending_.end(); ++p) {
    free_[{p->block.stream, p->block.size}].push_back(p->ptr);
    stats_.bytes_in_use -= static_cast<int64_t>(p->block.size);
    stats_.bytes_cached += static_cast<int64_t>(p->block.size);
  }
  pending_.erase(it, pending_.end());
}

void StreamAwareAllocator::release_cached() {
  process_pending();
  for (auto& [key, blocks] : free_)
    for (void* p : blocks) raw_free_(p);
  free_.clear();
  stats_.bytes_cached = 0;
}

AllocatorStats StreamAwareAllocator::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void StreamAwareAllocator::reset_peak() {
  std::lock_guard lock(mu_);
  stats_.peak_bytes = stats_.bytes_in_use;
}

void StreamAwareAllocator::empty_cache() {
  std::lock_guard lock(mu_);
  release_cached();
}

int StreamAwareAllocator::pending_blocks() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(pending_.size());
}

}  // namespace kiln

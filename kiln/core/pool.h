#pragma once
// A thread-local free-list allocator for small, hot objects (tensor descriptors and
// storages created by every op): std::allocate_shared with it skips malloc on the
// dispatch path once a thread has warmed up.

#include <cstddef>
#include <cstdlib>
#include <functional>
#include <new>
#include <unordered_map>

namespace kiln {

namespace detail {
/** Free blocks of one size class, per thread; blocks freed on another thread join that
 * thread's list (memory moves, it is never lost). */
void* pool_get(size_t size_class);
void pool_put(void* p, size_t size_class);
inline constexpr size_t kPoolGranule = 64;
inline constexpr size_t kPoolClasses = 8;  // objects up to 512 bytes
}  // namespace detail

template <typename T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>&) {}  // NOLINT

  static constexpr size_t kClass = (sizeof(T) + detail::kPoolGranule - 1) / detail::kPoolGranule;

  T* allocate(size_t n) {
    if (n == 1 && kClass < detail::kPoolClasses) return static_cast<T*>(detail::pool_get(kClass));
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) {
    if (n == 1 && kClass < detail::kPoolClasses) return detail::pool_put(p, kClass);
    ::operator delete(p);
  }
  template <typename U>
  bool operator==(const PoolAllocator<U>&) const { return true; }
};

/** An unordered_map whose nodes come from the pool (tables filled on every traced op). */
template <typename K, typename V>
using PoolMap = std::unordered_map<K, V, std::hash<K>, std::equal_to<K>,
                                   PoolAllocator<std::pair<const K, V>>>;

}  // namespace kiln

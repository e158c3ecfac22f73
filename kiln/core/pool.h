#pragma once
// A thread-local free-list allocator for small, hot objects (tensor descriptors and
// storages created by every op, graph nodes and their short vectors, tracing tables):
// with it, a warmed-up thread skips malloc on the dispatch and tracing paths. Blocks are
// never returned to the system: the pool holds each thread's peak of live objects.

#include <cstddef>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <unordered_map>
#include <vector>

namespace kiln {

namespace detail {
inline constexpr size_t kPoolGranule = 64;
inline constexpr size_t kPoolClasses = 8;  // objects up to 512 bytes

/** Free blocks of each size class, per thread, as intrusive lists (a free block holds
 * the next one's address). Trivial, so reading it costs no TLS guard. */
struct PoolLists {
  void* head[kPoolClasses];
  bool ready;  // the thread's cleanup is registered
  bool gone;   // the thread's cleanup ran
};
extern constinit thread_local PoolLists t_pool;
void* pool_get_slow(size_t size_class);
void pool_put_slow(void* p, size_t size_class);

/** A block of size_class granules. Blocks freed on another thread join that thread's
 * list (memory moves, it is never lost). */
inline void* pool_get(size_t size_class) {
  void* p = t_pool.head[size_class];
  if (!p) return pool_get_slow(size_class);
  t_pool.head[size_class] = *static_cast<void**>(p);
  return p;
}
inline void pool_put(void* p, size_t size_class) {
  if (!t_pool.ready) return pool_put_slow(p, size_class);
  *static_cast<void**>(p) = t_pool.head[size_class];
  t_pool.head[size_class] = p;
}
}  // namespace detail

template <typename T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>&) {}  // NOLINT

  /** The pool class of n objects, or kPoolClasses when they are too big for the pool. */
  static size_t size_class(size_t n) {
    size_t c = (n * sizeof(T) + detail::kPoolGranule - 1) / detail::kPoolGranule;
    return c == 0 ? 1 : c < detail::kPoolClasses ? c : detail::kPoolClasses;
  }

  T* allocate(size_t n) {
    size_t c = size_class(n);
    if (c < detail::kPoolClasses) return static_cast<T*>(detail::pool_get(c));
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) {
    size_t c = size_class(n);
    if (c < detail::kPoolClasses) return detail::pool_put(p, c);
    ::operator delete(p);
  }
  template <typename U>
  bool operator==(const PoolAllocator<U>&) const {
    return true;
  }
};

/** std::make_shared from the pool. */
template <typename T, typename... A>
std::shared_ptr<T> make_pooled(A&&... args) {
  return std::allocate_shared<T>(PoolAllocator<T>(), std::forward<A>(args)...);
}

/** A vector whose (short) buffer comes from the pool. */
template <typename T>
using PoolVector = std::vector<T, PoolAllocator<T>>;

/** An unordered_map whose nodes come from the pool (tables filled on every traced op). */
template <typename K, typename V>
using PoolMap =
    std::unordered_map<K, V, std::hash<K>, std::equal_to<K>, PoolAllocator<std::pair<const K, V>>>;

}  // namespace kiln

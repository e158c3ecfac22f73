#include "kiln/core/pool.h"

namespace kiln::detail {

constinit thread_local PoolLists t_pool{};

namespace {
// Frees the thread's blocks when it exits. Blocks released after that (a static
// holding a tensor, freed at process exit) go straight back to the system.
struct Cleanup {
  ~Cleanup() {
    t_pool.gone = true;
    t_pool.ready = false;
    for (void*& head : t_pool.head)
      while (head) {
        void* next = *static_cast<void**>(head);
        ::operator delete(head);
        head = next;
      }
  }
};
}  // namespace

void* pool_get_slow(size_t size_class) { return ::operator new(size_class* kPoolGranule); }

void pool_put_slow(void* p, size_t size_class) {
  if (t_pool.gone) return ::operator delete(p);
  thread_local Cleanup cleanup;  // constructed once per thread, on its first release
  (void)cleanup;
  t_pool.ready = true;
  pool_put(p, size_class);
}

}  // namespace kiln::detail

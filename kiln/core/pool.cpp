#include "kiln/core/pool.h"

#include <vector>

namespace kiln::detail {

namespace {
// Trivially destructible, so it stays readable while the thread's other thread_locals
// are being destroyed: objects released after that (a static holding a tensor, freed
// at process exit) go straight back to the system.
thread_local bool t_lists_gone = false;

struct Lists {
  std::vector<void*> free[kPoolClasses];
  ~Lists() {
    t_lists_gone = true;
    for (auto& list : free)
      for (void* p : list) ::operator delete(p);
  }
};
thread_local Lists t_lists;
}  // namespace

void* pool_get(size_t size_class) {
  if (t_lists_gone) return ::operator new(size_class * kPoolGranule);
  std::vector<void*>& list = t_lists.free[size_class];
  if (list.empty()) return ::operator new(size_class * kPoolGranule);
  void* p = list.back();
  list.pop_back();
  return p;
}

void pool_put(void* p, size_t size_class) {
  if (t_lists_gone) return ::operator delete(p);
  t_lists.free[size_class].push_back(p);
}

}  // namespace kiln::detail

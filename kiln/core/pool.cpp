#include "kiln/core/pool.h"

#include <vector>

namespace kiln::detail {

namespace {
struct Lists {
  std::vector<void*> free[kPoolClasses];
  ~Lists() {
    for (auto& list : free)
      for (void* p : list) ::operator delete(p);
  }
};
thread_local Lists t_lists;
}  // namespace

void* pool_get(size_t size_class) {
  std::vector<void*>& list = t_lists.free[size_class];
  if (list.empty()) return ::operator new(size_class * kPoolGranule);
  void* p = list.back();
  list.pop_back();
  return p;
}

void pool_put(void* p, size_t size_class) { t_lists.free[size_class].push_back(p); }

}  // namespace kiln::detail

#include "kiln/device/handle_pool.h"

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kiln/device/kernel_scope.h"

namespace kiln {

struct HandlePool::State {
  Create create;
  mutable std::mutex mu;
  std::unordered_map<uint32_t, std::vector<void*>> parked;  // per device key
  std::unordered_map<uint32_t, int> created;
};

namespace {

// The calling thread's handles of every pool; given back when the thread exits.
struct ThreadHandles {
  struct Entry {
    std::weak_ptr<HandlePool::State> pool;
    HandlePool::State* raw;
    uint32_t device;
    void* handle;
  };
  std::vector<Entry> entries;
  ~ThreadHandles() {
    for (Entry& e : entries) {
      auto pool = e.pool.lock();
      if (!pool) continue;
      std::lock_guard lock(pool->mu);
      pool->parked[e.device].push_back(e.handle);
    }
  }
};
thread_local ThreadHandles t_handles;

}  // namespace

HandlePool::HandlePool(std::string name, Create create)
    : name_(std::move(name)), state_(std::make_shared<State>()) {
  state_->create = std::move(create);
}

HandlePool::~HandlePool() = default;

void* HandlePool::acquire(Device device) {
  check_kernel_device(device, name_);  // (D8)
  uint32_t key = device.key();
  for (const auto& e : t_handles.entries)
    if (e.raw == state_.get() && e.device == key && !e.pool.expired()) return e.handle;
  void* handle = nullptr;
  {
    std::lock_guard lock(state_->mu);
    auto& parked = state_->parked[key];
    if (!parked.empty()) {
      handle = parked.back();
      parked.pop_back();
    }
  }
  if (!handle) {
    handle = state_->create(device);
    std::lock_guard lock(state_->mu);
    ++state_->created[key];
  }
  t_handles.entries.push_back({state_, state_.get(), key, handle});
  return handle;
}

int HandlePool::created(Device device) const {
  std::lock_guard lock(state_->mu);
  auto it = state_->created.find(device.key());
  return it == state_->created.end() ? 0 : it->second;
}

int HandlePool::available(Device device) const {
  std::lock_guard lock(state_->mu);
  auto it = state_->parked.find(device.key());
  return it == state_->parked.end() ? 0 : static_cast<int>(it->second.size());
}

namespace {
std::atomic<bool> g_allow_tf32{false};
}  // namespace

bool allow_tf32() { return g_allow_tf32.load(std::memory_order_relaxed); }
void set_allow_tf32(bool allow) { g_allow_tf32.store(allow, std::memory_order_relaxed); }

}  // namespace kiln

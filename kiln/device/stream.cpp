#include "kiln/device/stream.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/device/kernel_scope.h"
#include "kiln/device/registry.h"
#include "kiln/device/stream_impl.h"

namespace kiln {

namespace {

// A CPU side stream: a FIFO drained by one worker thread. See Note [CPU streams].
struct CpuStream final : StreamImpl {
  std::mutex mu;
  std::condition_variable has_work, work_done;
  std::deque<std::function<void()>> queue;
  uint64_t enqueued = 0, completed = 0;
  std::exception_ptr error;

  bool host_inline() const override { return false; }
  void enqueue(std::function<void()> work) override {
    {
      std::lock_guard lock(mu);
      queue.push_back(std::move(work));
      ++enqueued;
    }
    has_work.notify_one();
  }
  void synchronize() override {
    std::unique_lock lock(mu);
    work_done.wait(lock, [&] { return completed >= enqueued; });
    if (error) std::rethrow_exception(std::exchange(error, nullptr));
  }
  bool query() override {
    std::lock_guard lock(mu);
    return completed >= enqueued;
  }
  void record(uint64_t& mark, std::shared_ptr<void>&) override {
    std::lock_guard lock(mu);
    mark = enqueued;
  }
  void event_synchronize(uint64_t mark, const std::shared_ptr<void>&) override {
    std::unique_lock lock(mu);
    work_done.wait(lock, [&] { return completed >= mark; });
  }
  bool event_query(uint64_t mark, const std::shared_ptr<void>&) override {
    std::lock_guard lock(mu);
    return completed >= mark;
  }
  // Runs in FIFO order on the worker: work queued after the wait starts only once the
  // event has completed. Waiting on one's own stream cannot deadlock: the recorded
  // work precedes this task in the queue.
  void wait(const Event& event) override {
    if (event.native_handle()) {
      enqueue([event] { event.synchronize(); });
      return;
    }
    // A CPU event is (stream, mark): 16 trivially copyable bytes, which std::function
    // stores without a heap allocation.
    StreamImpl* s = recorded_on(event);
    uint64_t mark = mark_of(event);
    enqueue([s, mark] { s->event_synchronize(mark, nullptr); });
  }
  void run();
};

// Side streams of every device. Never destroyed: workers may still be parked when
// the process exits, and nothing they own needs a destructor to run.
struct Registry {
  std::mutex mu;
  std::unordered_map<uint32_t, std::vector<std::unique_ptr<StreamImpl>>> streams;
  struct Pool {
    std::vector<StreamImpl*> streams;
    size_t next = 0;
  };
  std::unordered_map<uint32_t, Pool> pools;
};
Registry& registry() {
  static auto* r = new Registry;
  return *r;
}

// The thread's current side stream per device; null (or absent) = the default stream.
thread_local std::vector<StreamImpl*> t_current[kNumDeviceTypes];

StreamImpl*& current_slot(Device d) {
  auto& v = t_current[static_cast<int>(d.type)];
  if (static_cast<size_t>(d.index) >= v.size()) v.resize(d.index + 1, nullptr);
  return v[d.index];
}

DeviceBackend& stream_backend(Device d) {
  check_device_available(d);
  DeviceBackend* b = device_backend(d.type);
  KILN_CHECK(b, unsupported, "[Stream] {} has no streams", d);
  return *b;
}

// The default stream's impl: null on CPU (inline), the backend's otherwise.
StreamImpl* default_impl(Device d) {
  if (d.type == DeviceType::cpu) return nullptr;
  return stream_backend(d).default_stream(d.index);
}

}  // namespace

void CpuStream::run() {
  exchange_device(device);
  current_slot(device) = this;
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu);
      has_work.wait(lock, [&] { return !queue.empty(); });
      task = std::move(queue.front());
      queue.pop_front();
    }
    std::exception_ptr err;
    try {
      task();
    } catch (...) {
      err = std::current_exception();
    }
    task = nullptr;  // release the task's tensors before the work counts as done
    std::lock_guard lock(mu);
    // Hand the error over (or drop it) under the lock: the worker keeps no reference
    // that it could release while the host is handling the rethrown exception.
    if (err && !error) error = std::move(err);
    err = nullptr;
    ++completed;
    work_done.notify_all();
  }
}

std::unique_ptr<StreamImpl> make_cpu_stream(Device device, int id) {
  auto impl = std::make_unique<CpuStream>();
  impl->device = device;
  impl->id = id;
  CpuStream* raw = impl.get();
  std::thread([raw] { raw->run(); }).detach();
  return impl;
}

Stream Stream::default_stream(Device device) {
  device = resolve_device(device);
  stream_backend(device);
  return Stream(device, default_impl(device));
}

namespace {
StreamImpl* new_stream(Registry& r, DeviceBackend& backend, Device device) {  // r.mu held
  auto& list = r.streams[device.key()];
  list.push_back(backend.create_stream(device, static_cast<int>(list.size()) + 1));
  return list.back().get();
}
}  // namespace

Stream Stream::create(Device device) {
  device = resolve_device(device);
  DeviceBackend& backend = stream_backend(device);
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  return Stream(device, new_stream(r, backend, device));
}

Stream Stream::from_pool(Device device) {
  device = resolve_device(device);
  DeviceBackend& backend = stream_backend(device);
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  Registry::Pool& pool = r.pools[device.key()];
  if (pool.streams.size() < kPoolSize) pool.streams.push_back(new_stream(r, backend, device));
  StreamImpl* s = pool.streams[pool.next++ % kPoolSize];
  return Stream(device, s);
}

Stream Stream::of(StreamImpl* impl) {
  KILN_ASSERT(impl);
  return Stream(impl->device, impl);
}

Stream stream_by_id(Device device, int id) {
  if (id == 0) return Stream(device, default_impl(device));
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto& list = r.streams[device.key()];
  KILN_CHECK(id > 0 && id <= static_cast<int>(list.size()), value, "[Stream] {} has no stream {}",
             device, id);
  return Stream(device, list[id - 1].get());
}

Device Stream::device() const { return device_; }
int Stream::id() const { return impl_ ? impl_->id : 0; }
bool Stream::runs_inline() const { return !impl_ || impl_->host_inline(); }
void* Stream::native_handle() const {
  check_kernel_device(device_, "stream");  // (D8) a launch on another device's stream
  return impl_ ? impl_->native() : nullptr;
}

void Stream::enqueue(std::function<void()> work) const {
  check_kernel_device(device_, "stream");  // (D8)
  if (runs_inline()) {
    work();
    return;
  }
  impl_->enqueue(std::move(work));
}

void Stream::synchronize() const {
  if (impl_) impl_->synchronize();
}

bool Stream::query() const { return !impl_ || impl_->query(); }

Stream current_stream(Device device) {
  device = resolve_device(device);
  StreamImpl* impl = current_slot(device);
  if (!impl && device.type != DeviceType::cpu) impl = default_impl(device);
  return Stream(device, impl);
}

Stream current_stream(DeviceType type) {
  Device d = current_device(type);
  check_kernel_device(d, "current device");  // (D8) the kernel forgot its guard
  return current_stream(d);
}

Stream exchange_stream(Stream stream) {
  StreamImpl*& slot = current_slot(stream.device());
  Stream prev = current_stream(stream.device());
  slot = stream.is_default() ? nullptr : stream.impl();
  return prev;
}

StreamGuard::StreamGuard(Stream stream)
    : prev_device_(exchange_device(stream.device())), prev_stream_(exchange_stream(stream)) {}

StreamGuard::~StreamGuard() {
  exchange_stream(prev_stream_);
  exchange_device(prev_device_);
}

void Event::record(Stream stream) {
  stream_ = stream.impl();
  native_ = nullptr;
  target_ = 0;
  if (stream_) stream_->record(target_, native_);  // the inline CPU stream is caught up
}

void Event::wait(Stream stream) const {
  if (!stream_) return;
  if (!stream.impl()) {  // the inline CPU stream waits by blocking the host
    synchronize();
    return;
  }
  stream.impl()->wait(*this);
}

void Event::synchronize() const {
  if (stream_) stream_->event_synchronize(target_, native_);
}

bool Event::query() const { return !stream_ || stream_->event_query(target_, native_); }

void synchronize_device(Device device) {
  device = resolve_device(device);
  Stream::default_stream(device).synchronize();
  size_t n;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    n = r.streams[device.key()].size();
  }
  for (size_t id = 1; id <= n; ++id) stream_by_id(device, static_cast<int>(id)).synchronize();
}

}  // namespace kiln

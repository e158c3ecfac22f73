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

namespace kiln {

// A side stream: a FIFO drained by one worker thread. See Note [CPU streams].
struct StreamImpl {
  Device device;
  int id = 0;
  std::mutex mu;
  std::condition_variable has_work, work_done;
  std::deque<std::function<void()>> queue;
  uint64_t enqueued = 0, completed = 0;
  std::exception_ptr error;
  std::thread worker;

  void run();
  void wait_for(uint64_t target) {
    std::unique_lock lock(mu);
    work_done.wait(lock, [&] { return completed >= target; });
  }
};

namespace {

// Side streams of every device. Never destroyed: workers may still be parked when
// the process exits, and nothing they own needs a destructor to run.
struct Registry {
  std::mutex mu;
  std::unordered_map<uint32_t, std::vector<std::unique_ptr<StreamImpl>>> streams;
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

void check_stream_device(Device d) {
  check_device_available(d);
  KILN_CHECK(d.type == DeviceType::cpu, unsupported, "[Stream] {} has no streams in this build",
             d);
}

}  // namespace

void StreamImpl::run() {
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

Stream Stream::default_stream(Device device) {
  device = resolve_device(device);
  check_stream_device(device);
  return Stream(device, nullptr);
}

Stream Stream::create(Device device) {
  device = resolve_device(device);
  check_stream_device(device);
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto& list = r.streams[device.key()];
  auto impl = std::make_unique<StreamImpl>();
  impl->device = device;
  impl->id = static_cast<int>(list.size()) + 1;
  StreamImpl* raw = impl.get();
  list.push_back(std::move(impl));
  raw->worker = std::thread([raw] { raw->run(); });
  raw->worker.detach();
  return Stream(device, raw);
}

Stream stream_by_id(Device device, int id) {
  if (id == 0) return Stream(device, nullptr);
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto& list = r.streams[device.key()];
  KILN_CHECK(id > 0 && id <= static_cast<int>(list.size()), value, "[Stream] {} has no stream {}",
             device, id);
  return Stream(device, list[id - 1].get());
}

Device Stream::device() const { return device_; }
int Stream::id() const { return impl_ ? impl_->id : 0; }

void Stream::enqueue(std::function<void()> work) const {
  check_kernel_device(device_, "stream");  // (D8)
  if (!impl_) {
    work();
    return;
  }
  {
    std::lock_guard lock(impl_->mu);
    impl_->queue.push_back(std::move(work));
    ++impl_->enqueued;
  }
  impl_->has_work.notify_one();
}

void Stream::synchronize() const {
  if (!impl_) return;
  std::unique_lock lock(impl_->mu);
  impl_->work_done.wait(lock, [&] { return impl_->completed >= impl_->enqueued; });
  if (impl_->error) std::rethrow_exception(std::exchange(impl_->error, nullptr));
}

bool Stream::query() const {
  if (!impl_) return true;
  std::lock_guard lock(impl_->mu);
  return impl_->completed >= impl_->enqueued;
}

Stream current_stream(Device device) {
  device = resolve_device(device);
  return Stream(device, current_slot(device));
}

Stream current_stream(DeviceType type) {
  Device d = current_device(type);
  check_kernel_device(d, "current device");  // (D8) the kernel forgot its guard
  return current_stream(d);
}

Stream exchange_stream(Stream stream) {
  StreamImpl*& slot = current_slot(stream.device());
  Stream prev = current_stream(stream.device());
  slot = stream.impl();
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
  if (!stream_) return;  // the inline default stream is always caught up
  std::lock_guard lock(stream_->mu);
  target_ = stream_->enqueued;
}

void Event::wait(Stream stream) const {
  if (!stream_) return;
  Event self = *this;
  if (!stream.impl()) {  // an inline stream waits by blocking the host
    synchronize();
    return;
  }
  // Runs on `stream`'s worker in FIFO order: work queued after the wait starts only
  // once the event has completed. Waiting on one's own stream cannot deadlock: the
  // recorded work precedes this task in the queue.
  stream.enqueue([self] { self.synchronize(); });
}

void Event::synchronize() const {
  if (stream_) stream_->wait_for(target_);
}

bool Event::query() const {
  if (!stream_) return true;
  std::lock_guard lock(stream_->mu);
  return stream_->completed >= target_;
}

void synchronize_device(Device device) {
  device = resolve_device(device);
  size_t n;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    n = r.streams[device.key()].size();
  }
  for (size_t id = 1; id <= n; ++id) stream_by_id(device, static_cast<int>(id)).synchronize();
}

}  // namespace kiln

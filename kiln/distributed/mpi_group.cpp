// The MPI engine (C1, C3, C4). See Note [Collectives on the engine].
#include <mpi.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "kiln/autograd/autograd.h"
#include "kiln/device/registry.h"
#include "kiln/device/stream.h"
#include "kiln/distributed/groups.h"

namespace kiln::dist {

namespace {

void check_mpi(int rc, std::string_view what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fail(ErrorKind::backend, "[{}] MPI failed: {}", what,
       std::string_view(msg, static_cast<size_t>(len)));
}

// Set when a collective timed out: the job is broken (a rank is gone or stuck), so
// nothing may wait on MPI again, and exit aborts the job instead of finalising (which
// would wait for the missing rank).
std::atomic<bool> g_broken{false};

// MPI for the life of the process: initialised on first use, finalised at exit.
struct Runtime {
  bool owned = false;
  Runtime() {
    int ready = 0;
    MPI_Initialized(&ready);
    if (!ready) {
      int provided = 0;
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "mpi_world");
      owned = true;
    }
  }
  ~Runtime() {
    int done = 0;
    MPI_Finalized(&done);
    if (!owned || done) return;
    if (g_broken) {
      // The job is broken (C4): end this process at once, without MPI_Abort or
      // MPI_Finalize. Both can block while a worker thread is stuck inside MPI (seen under
      // load); a process that exits without finalizing makes the launcher end the job.
      std::fflush(nullptr);
      std::_Exit(1);
    }
    MPI_Finalize();
  }
};
Runtime& runtime() {
  static Runtime r;
  return r;
}
bool finalized() {
  int done = 0;
  MPI_Finalized(&done);
  return done;
}

double timeout_seconds() {
  static const double s = [] {
    const char* v = std::getenv("KILN_COLLECTIVE_TIMEOUT");
    if (!v || !*v) return 300.0;
    double x = 0;
    auto [end, ec] = std::from_chars(v, v + std::strlen(v), x);
    KILN_CHECK(ec == std::errc() && *end == '\0' && x > 0 && x <= 1e6, value,
               "KILN_COLLECTIVE_TIMEOUT must be a number of seconds in (0, 1e6], got '{}'", v);
    return x;
  }();
  return s;
}
bool checks_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("KILN_CHECK_COLLECTIVES");
    return !(v && std::string_view(v) == "0");
  }();
  return on;
}

// The dtype a buffer is exchanged in and its MPI type (f16 and bf16 go through f32).
struct EngineType {
  MPI_Datatype type;
  DType dtype;
};
EngineType engine_type(DType d) {
  switch (d) {
    case DType::f32: return {MPI_FLOAT, d};
    case DType::f64: return {MPI_DOUBLE, d};
    case DType::f16:
    case DType::bf16: return {MPI_FLOAT, DType::f32};
    case DType::i64: return {MPI_INT64_T, d};
    case DType::i32: return {MPI_INT32_T, d};
    case DType::i16: return {MPI_INT16_T, d};
    case DType::i8: return {MPI_INT8_T, d};
    case DType::u8: return {MPI_UINT8_T, d};
    case DType::b8: return {MPI_C_BOOL, d};
  }
  fail(ErrorKind::unsupported, "[collective] no MPI type for {}", d);
}
MPI_Op engine_op(ReduceOp op, DType d) {
  if (d == DType::b8) return op == ReduceOp::min || op == ReduceOp::product ? MPI_LAND : MPI_LOR;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
    case ReduceOp::product: return MPI_PROD;
  }
  return MPI_SUM;
}

// (D4) The host reads `t` after the stream that last wrote it.
void after_writer(const Tensor& t) {
  if (StreamImpl* w = t.storage()->writer.load()) Stream::of(w).synchronize();
}

// A dense buffer of `dtype` holding `t`'s values: `t` itself when it already is one. The
// engine reads it after the stream that last wrote it (D4).
Tensor staged(const Tensor& t, DType dtype, bool read) {
  after_writer(t);
  if (t.is_contiguous() && t.dtype() == dtype) return t;
  autograd::NoGradGuard no_grad;
  if (!read)
    return empty(IntList(t.shape().begin(), t.shape().end()),
                 {.dtype = dtype, .device = t.device()});
  return to(t, t.device(), dtype, false, /*copy=*/true);
}
void* data_of(const Tensor& t) {
  return static_cast<char*>(t.storage()->data) + t.offset() * t.itemsize();
}

int count_of(const Tensor& t, std::string_view op) {
  KILN_CHECK(t.numel() <= std::numeric_limits<int>::max(), value,
             "[{}] {} has more elements than one MPI call can move", op, t.meta_str());
  return static_cast<int>(t.numel());
}

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_from_now() {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(timeout_seconds()));
}
[[noreturn]] void timed_out(const std::string& what) {
  g_broken = true;  // (C4) never a hang: the job is broken and ends at exit
  fail(ErrorKind::backend,
       "[{}] did not complete within {:.0f} s (KILN_COLLECTIVE_TIMEOUT): a rank of the group died "
       "or stopped calling collectives; the job will abort at exit",
       what, timeout_seconds());
}

// One queued engine call. `run` gets the deadline of the thread that runs it: none on the
// worker (its caller's wait() keeps the time), the caller's own when it runs the call
// itself (see Worker::take).
struct Job {
  std::string what;
  bool checked = false;  // starts with the cross-rank check, which can keep a deadline
  std::function<void(std::optional<Clock::time_point>)> run;
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;

  void execute(std::optional<Clock::time_point> deadline) {
    std::exception_ptr e;
    try {
      run(deadline);
    } catch (...) {  // handed to the caller's wait(), which rethrows it
      e = std::current_exception();
    }
    // The tensors the call holds are released before the caller is woken: once it
    // returns from wait() it may free what they use (or leave main).
    run = nullptr;
    {
      std::lock_guard lock(m);
      done = true;
      error = e;
    }
    cv.notify_all();
  }
};

// Runs a group's engine calls one after another on its own thread, so collectives use
// MPI's tuned blocking algorithms while callers get asynchronous Work, and every rank
// issues them in the order they were called. A caller that waits for the call the worker
// would run next, while the worker is idle, runs it itself (take): the same order, without
// the two thread hand-offs (~7 us a call on this machine).
class Worker {
 public:
  Worker() : thread_([this] { loop(); }) {}
  ~Worker() { stop(); }
  // Runs what was queued, then ends the thread.
  void stop() {
    {
      std::lock_guard lock(m_);
      if (stop_) return;
      stop_ = true;
    }
    cv_.notify_one();
    if (g_broken)
      thread_.detach();  // it may be stuck in MPI for good; exit aborts the job
    else
      thread_.join();
  }
  void post(std::shared_ptr<Job> job) {
    {
      std::lock_guard lock(m_);
      tasks_.push_back(std::move(job));
    }
    cv_.notify_one();
  }
  // Whether the calling thread may run `job` now: it is next and nothing runs. Then the
  // worker waits for release().
  bool take(const Job* job) {
    std::lock_guard lock(m_);
    if (busy_ || stop_ || tasks_.empty() || tasks_.front().get() != job) return false;
    tasks_.pop_front();
    busy_ = true;
    return true;
  }
  // Whether the calling thread may run a job now that is not queued: nothing is queued or
  // runs. Then the worker waits for release().
  bool take_idle() {
    std::lock_guard lock(m_);
    if (busy_ || stop_ || !tasks_.empty()) return false;
    busy_ = true;
    return true;
  }
  void release() {
    bool wake;
    {
      std::lock_guard lock(m_);
      busy_ = false;
      wake = stop_ || !tasks_.empty();  // an idle worker sleeps on: waking it costs
    }
    if (wake) cv_.notify_one();
  }

 private:
  void loop() {
    autograd::NoGradGuard no_grad;  // staging and landing copies are not differentiated
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return !busy_ && (stop_ || !tasks_.empty()); });
        if (tasks_.empty()) return;
        job = std::move(tasks_.front());
        tasks_.pop_front();
        busy_ = true;
      }
      job->execute(std::nullopt);
      std::lock_guard lock(m_);
      busy_ = false;
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> tasks_;
  bool busy_ = false;  // a job runs (here or on a caller that took it)
  bool stop_ = false;
  std::thread thread_;
};

// A collective queued on a Worker: its outputs are valid once the job is done.
class QueuedWork final : public Work {
 public:
  QueuedWork(std::shared_ptr<Job> job, std::shared_ptr<Worker> worker)
      : job_(std::move(job)), worker_(std::move(worker)) {}
  void wait() override {
    Clock::time_point deadline = deadline_from_now();
    if (job_->checked && worker_->take(job_.get())) return run_here(deadline);
    std::unique_lock lock(job_->m);
    if (!job_->cv.wait_until(lock, deadline, [&] { return job_->done; })) timed_out(job_->what);
    if (job_->error) std::rethrow_exception(job_->error);
  }
  bool completed() override {
    std::lock_guard lock(job_->m);
    return job_->done;
  }
  // Runs the job, taken from the worker, on this thread (its check polls until
  // `deadline`); rethrows its Error.
  void run_here(Clock::time_point deadline) {
    {
      autograd::NoGradGuard no_grad;
      job_->execute(deadline);
    }
    worker_->release();
    if (job_->error) std::rethrow_exception(job_->error);
  }

 private:
  std::shared_ptr<Job> job_;
  std::shared_ptr<Worker> worker_;
};

class MpiGroup final : public ProcessGroup {
 public:
  MpiGroup(MPI_Comm comm, bool owned)
      : comm_(comm), owned_(owned), worker_(std::make_shared<Worker>()) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiGroup() override {
    worker_->stop();  // runs what was queued
    if (owned_ && !finalized() && !g_broken) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view engine() const override { return "mpi"; }

  std::shared_ptr<Work> all_reduce(const Tensor& t, ReduceOp op, Launch launch) override {
    check_cpu("all_reduce", t);
    KILN_CHECK(op != ReduceOp::avg || is_floating(t.dtype()), dtype,
               "[all_reduce] avg needs a floating dtype, got {}", t.meta_str());
    EngineType e = engine_type(t.dtype());
    count_of(t, "all_reduce");
    return queue("all_reduce", fmt::format("all_reduce({})", to_string(op)), t,
                 static_cast<int>(op), launch, [=, this] {
                   Tensor buf = staged(t, e.dtype, true);
                   check_mpi(
                       MPI_Allreduce(MPI_IN_PLACE, data_of(buf), static_cast<int>(buf.numel()),
                                     e.type, engine_op(op, t.dtype()), comm_),
                       "all_reduce");
                   if (op == ReduceOp::avg) div_(buf, static_cast<double>(size_));
                   land(t, buf);
                 });
  }
  std::shared_ptr<Work> all_gather(const Tensor& out, const Tensor& in, Launch launch) override {
    check_cpu("all_gather", in);
    check_cpu("all_gather", out);
    check_output("all_gather", out, in, Rows::gather);
    EngineType e = engine_type(in.dtype());
    int n = count_of(in, "all_gather");
    return queue("all_gather", "all_gather", in, 0, launch, [=, this] {
      Tensor src = staged(in, e.dtype, true), dst = staged(out, e.dtype, false);
      check_mpi(MPI_Allgather(data_of(src), n, e.type, data_of(dst), n, e.type, comm_),
                "all_gather");
      land(out, dst);
    });
  }
  std::shared_ptr<Work> reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op,
                                       Launch launch) override {
    check_cpu("reduce_scatter", in);
    KILN_CHECK(op != ReduceOp::avg || is_floating(in.dtype()), dtype,
               "[reduce_scatter] avg needs a floating dtype, got {}", in.meta_str());
    check_cpu("reduce_scatter", out);
    check_output("reduce_scatter", out, in, Rows::scatter);
    EngineType e = engine_type(in.dtype());
    int n = count_of(out, "reduce_scatter");
    return queue("reduce_scatter", fmt::format("reduce_scatter({})", to_string(op)), in,
                 static_cast<int>(op), launch, [=, this] {
                   Tensor src = staged(in, e.dtype, true), dst = staged(out, e.dtype, false);
                   check_mpi(MPI_Reduce_scatter_block(data_of(src), data_of(dst), n, e.type,
                                                      engine_op(op, in.dtype()), comm_),
                             "reduce_scatter");
                   if (op == ReduceOp::avg) div_(dst, static_cast<double>(size_));
                   land(out, dst);
                 });
  }
  std::shared_ptr<Work> all_to_all(const Tensor& out, const Tensor& in, Launch launch) override {
    check_cpu("all_to_all", in);
    check_cpu("all_to_all", out);
    check_output("all_to_all", out, in, Rows::same);
    EngineType e = engine_type(in.dtype());
    int chunk = count_of(in, "all_to_all") / size_;
    return queue("all_to_all", "all_to_all", in, 0, launch, [=, this] {
      Tensor src = staged(in, e.dtype, true), dst = staged(out, e.dtype, false);
      check_mpi(MPI_Alltoall(data_of(src), chunk, e.type, data_of(dst), chunk, e.type, comm_),
                "all_to_all");
      land(out, dst);
    });
  }
  std::shared_ptr<Work> all_to_all_v(const Tensor& out, const Tensor& in,
                                     const std::vector<int64_t>& out_splits,
                                     const std::vector<int64_t>& in_splits,
                                     Launch launch) override {
    check_cpu("all_to_all_v", in);
    check_cpu("all_to_all_v", out);
    check_splits("all_to_all_v", out, in, out_splits, in_splits);
    EngineType e = engine_type(in.dtype());
    count_of(in, "all_to_all_v");
    count_of(out, "all_to_all_v");
    int64_t row =
        in.size(0) > 0 ? in.numel() / in.size(0) : out.numel() / std::max<int64_t>(out.size(0), 1);
    std::vector<int> send(size_), sdisp(size_), recv(size_), rdisp(size_);
    for (int r = 0, s = 0, t = 0; r < size_; ++r) {  // elements; the totals fit an int (count_of)
      send[r] = static_cast<int>(in_splits[static_cast<size_t>(r)] * row);
      recv[r] = static_cast<int>(out_splits[static_cast<size_t>(r)] * row);
      sdisp[r] = s;
      rdisp[r] = t;
      s += send[r];
      t += recv[r];
    }
    // The ranks' row counts differ by design: the signature checks kind and dtype only.
    return queue("all_to_all_v", "all_to_all_v", Tensor(), static_cast<int64_t>(in.dtype()), launch,
                 [=, this] {
                   Tensor src = staged(in, e.dtype, true), dst = staged(out, e.dtype, false);
                   check_mpi(MPI_Alltoallv(data_of(src), send.data(), sdisp.data(), e.type,
                                           data_of(dst), recv.data(), rdisp.data(), e.type, comm_),
                             "all_to_all_v");
                   land(out, dst);
                 });
  }
  std::shared_ptr<Work> broadcast(const Tensor& t, int root, Launch launch) override {
    check_rank("broadcast", root);
    check_cpu("broadcast", t);
    EngineType e = engine_type(t.dtype());
    int n = count_of(t, "broadcast");
    return queue("broadcast", fmt::format("broadcast(root={})", root), t, root, launch, [=, this] {
      Tensor buf = staged(t, e.dtype, true);
      check_mpi(MPI_Bcast(data_of(buf), n, e.type, root, comm_), "broadcast");
      land(t, buf);
    });
  }
  std::shared_ptr<Work> send(const Tensor& t, int dst, int tag) override {
    check_rank("send", dst);
    check_cpu("send", t);
    EngineType e = engine_type(t.dtype());
    int n = count_of(t, "send");
    return post(fmt::format("send to rank {}", dst), false, Launch::async,
                [=, this](std::optional<Clock::time_point>) {
                  Tensor buf = staged(t, e.dtype, true);
                  check_mpi(MPI_Send(data_of(buf), n, e.type, dst, tag, comm_), "send");
                });
  }
  std::shared_ptr<Work> recv(const Tensor& t, int src, int tag) override {
    check_rank("recv", src);
    check_cpu("recv", t);
    EngineType e = engine_type(t.dtype());
    int n = count_of(t, "recv");
    return post(fmt::format("recv from rank {}", src), false, Launch::async,
                [=, this](std::optional<Clock::time_point>) {
                  Tensor buf = staged(t, e.dtype, false);
                  check_mpi(MPI_Recv(data_of(buf), n, e.type, src, tag, comm_, MPI_STATUS_IGNORE),
                            "recv");
                  land(t, buf);
                });
  }
  void barrier() override {
    queue("barrier", "barrier", Tensor(), 0, Launch::blocking,
          [this] { check_mpi(MPI_Barrier(comm_), "barrier"); });
  }
  std::shared_ptr<ProcessGroup> split(const std::vector<int>& ranks) override {
    int64_t h = 0;
    for (int r : ranks) {
      check_rank("split", r);
      h = h * 1000003 + r + 1;
    }
    int color = MPI_UNDEFINED, key = 0;
    for (size_t i = 0; i < ranks.size(); ++i)
      if (ranks[i] == rank_) color = 0, key = static_cast<int>(i);
    MPI_Comm sub = MPI_COMM_NULL;
    queue("split", "split", Tensor(), h, Launch::blocking,
          [&, this] { check_mpi(MPI_Comm_split(comm_, color, key, &sub), "split"); });
    if (sub == MPI_COMM_NULL) return nullptr;
    return std::make_shared<MpiGroup>(sub, true);
  }

 private:
  // Numbers the collective, and queues on the worker: (C4) the check that every rank
  // calls the same thing, then `engine`. The Work fails with the check's Error.
  template <typename Engine>
  std::shared_ptr<Work> queue(std::string_view op, std::string call, const Tensor& t, int64_t extra,
                              Launch launch, Engine engine) {
    uint64_t n = ++sequence_;
    uint64_t key = signature(op, n, extra, t);
    bool checked = checks_enabled();
    std::string what = fmt::format("{} #{}", call, n);
    return post(std::move(what), checked, launch,
                [=, this, op = std::string(op)](std::optional<Clock::time_point> deadline) {
                  if (checked && !matched(key, deadline, what)) {
                    fail(ErrorKind::value,
                         "[{}] collective #{} does not match across the ranks of its group: rank "
                         "{} called {}, "
                         "another rank a different collective, reduction, dtype or shape",
                         op, n, rank_, t.defined() ? call + " of " + t.meta_str() : call);
                  }
                  engine();
                });
  }
  // Whether every rank's `key` is this one's (one 16-byte all-reduce of max(key) and
  // max(-key)). Non-blocking on every thread (MPI matches a blocking collective with
  // blocking ones only), polled: a caller that runs the call itself times out by its
  // deadline as its wait() would.
  bool matched(uint64_t key, std::optional<Clock::time_point> deadline, const std::string& what) {
    int64_t v[2] = {static_cast<int64_t>(key), -static_cast<int64_t>(key)};
    MPI_Request request;
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, v, 2, MPI_INT64_T, MPI_MAX, comm_, &request), what);
    for (uint32_t polls = 1;; ++polls) {
      int done = 0;
      check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
      if (done) break;
      if (deadline && polls % 1024 == 0 && Clock::now() > *deadline) timed_out(what);
    }
    return v[0] == -v[1];
  }
  // Queues the call on the worker; a blocking call runs on this thread instead when
  // nothing is queued or running (its check keeps this wait's deadline), or waits.
  template <typename Task>
  std::shared_ptr<Work> post(std::string what, bool checked, Launch launch, Task task) {
    auto job = std::make_shared<Job>();
    job->what = std::move(what);
    job->checked = checked;
    job->run = std::move(task);
    auto work = std::make_shared<QueuedWork>(job, worker_);
    if (launch == Launch::blocking && checked && worker_->take_idle()) {
      work->run_here(deadline_from_now());
      return work;
    }
    worker_->post(std::move(job));
    if (launch == Launch::blocking) work->wait();
    return work;
  }
  // A 62-bit number for the call (mixed with splitmix64's finalizer so every input bit
  // reaches the bits kept); every rank's must be equal.
  static uint64_t signature(std::string_view op, uint64_t n, int64_t extra, const Tensor& t) {
    uint64_t h = std::hash<std::string_view>{}(op) ^ (n * 0x9e3779b97f4a7c15ull) ^
                 (static_cast<uint64_t>(extra) * 0xbf58476d1ce4e5b9ull);
    if (t.defined()) {
      h = h * 31 + static_cast<uint64_t>(t.dtype());
      for (int64_t s : t.shape()) h = h * 1000003 + static_cast<uint64_t>(s);
    }
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h & 0x3fffffffffffffffull;
  }
  void check_cpu(std::string_view op, const Tensor& t) const {
    KILN_CHECK(t.defined() && t.device().is_cpu() && !t.is_fake(), device,
               "[{}] the MPI engine moves CPU tensors with data (any cpu:N), got {}", op,
               t.defined() ? t.meta_str() : "an undefined tensor");
  }
  // The engine wrote `buf`; `t` gets its values (when it was staged).
  static void land(const Tensor& t, const Tensor& buf) {
    if (!buf.is_same(t)) {
      Tensor dst = t;
      copy_(dst, buf);
    }
    t.storage()->writer.store(nullptr);
  }

  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0, size_ = 1;
  uint64_t sequence_ = 0;
  std::shared_ptr<Worker> worker_;  // shared with the Works, which may run a call themselves
};

}  // namespace

bool mpi_available() { return true; }

std::shared_ptr<ProcessGroup> mpi_world() {
  static std::shared_ptr<ProcessGroup> world = [] {
    timeout_seconds();  // a malformed KILN_COLLECTIVE_TIMEOUT is refused here, on the caller's
                        // thread
    runtime();
    MPI_Comm comm;
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "mpi_world");
    return std::make_shared<MpiGroup>(comm, true);
  }();
  return world;
}

}  // namespace kiln::dist

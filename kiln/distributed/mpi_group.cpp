// The MPI engine (C1, C3, C4). See Note [Collectives on the engine].
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <functional>
#include <thread>

#include "kiln/autograd/autograd.h"
#include "kiln/device/registry.h"
#include "kiln/device/stream.h"
#include "kiln/distributed/process_group.h"

namespace kiln::dist {

namespace {

void check_mpi(int rc, std::string_view what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fail(ErrorKind::backend, "[{}] MPI failed: {}", what, std::string_view(msg, static_cast<size_t>(len)));
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
    if (g_broken) MPI_Abort(MPI_COMM_WORLD, 1);
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
    double x = v ? std::atof(v) : 0;
    return x > 0 ? x : 300.0;
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

// A dense buffer of `dtype` holding `t`'s values: `t` itself when it already is one.
Tensor staged(const Tensor& t, DType dtype, bool read) {
  if (t.is_contiguous() && t.dtype() == dtype) return t;
  autograd::NoGradGuard no_grad;
  if (!read) return empty(IntList(t.shape().begin(), t.shape().end()), {.dtype = dtype, .device = t.device()});
  return to(t, t.device(), dtype, false, /*copy=*/true);
}
void* data_of(const Tensor& t) { return static_cast<char*>(t.storage()->data) + t.offset() * t.itemsize(); }

int count_of(const Tensor& t, std::string_view op) {
  KILN_CHECK(t.numel() <= std::numeric_limits<int>::max(), value,
             "[{}] {} has more elements than one MPI call can move", op, t.meta_str());
  return static_cast<int>(t.numel());
}

class MpiWork final : public Work {
 public:
  MpiWork(std::string what, MPI_Request request, std::function<void()> finish)
      : what_(std::move(what)), request_(request), finish_(std::move(finish)) {}
  ~MpiWork() override {
    if (done_ || finalized() || g_broken) return;  // a broken job is aborted at exit
    MPI_Wait(&request_, MPI_STATUS_IGNORE);  // never leave the engine writing freed memory
    done_ = true;
  }
  void wait() override {
    if (done_) return;
    KILN_CHECK(!g_broken, backend, "[{}] an earlier collective timed out: this job's MPI engine is broken",
               what_);
    auto start = std::chrono::steady_clock::now();
    // Polled as MPI_Wait polls (MPI's progress engine yields when the job is
    // oversubscribed), then, past 2 ms, with 50 us naps, so a collective that never
    // completes ends in an Error (C4) instead of blocking forever.
    for (uint64_t spins = 1;; ++spins) {
      int flag = 0;
      check_mpi(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), what_);
      if (flag) break;
      if (spins % 64) continue;
      double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > 2e-3) std::this_thread::sleep_for(std::chrono::microseconds(50));
      if (waited >= timeout_seconds()) {
        g_broken = true;
        fail(ErrorKind::backend,
             "[{}] did not complete within {:.0f} s (KILN_COLLECTIVE_TIMEOUT): a rank of the group died "
             "or stopped calling collectives; the job will abort at exit",
             what_, timeout_seconds());
      }
    }
    done_ = true;
    if (finish_) finish_();
  }
  bool completed() override {
    if (done_) return true;
    int flag = 0;
    check_mpi(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), what_);
    if (flag) {
      done_ = true;
      if (finish_) finish_();
    }
    return done_;
  }

 private:
  std::string what_;
  MPI_Request request_;
  std::function<void()> finish_;
  bool done_ = false;
};

class MpiGroup final : public ProcessGroup {
 public:
  MpiGroup(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiGroup() override {
    if (owned_ && !finalized() && !g_broken) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view engine() const override { return "mpi"; }

  std::shared_ptr<Work> all_reduce(const Tensor& t, ReduceOp op) override {
    std::string what = begin("all_reduce", t, fmt::format("all_reduce({})", to_string(op)), static_cast<int>(op));
    KILN_CHECK(op != ReduceOp::avg || is_floating(t.dtype()), dtype,
               "[all_reduce] avg needs a floating dtype, got {}", t.meta_str());
    EngineType e = engine_type(t.dtype());
    Tensor buf = staged(t, e.dtype, true);
    MPI_Request req;
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data_of(buf), count_of(buf, what), e.type, engine_op(op, t.dtype()),
                             comm_, &req),
              what);
    return work(what, req, [t, buf, op, n = size_] {
      if (op == ReduceOp::avg) div_(const_cast<Tensor&>(buf), static_cast<double>(n));
      land(t, buf);
    });
  }
  std::shared_ptr<Work> all_gather(const Tensor& out, const Tensor& in) override {
    std::string what = begin("all_gather", in, "all_gather", 0);
    check_rows("all_gather", out, in, in.dim() ? in.size(0) * size_ : 0);
    EngineType e = engine_type(in.dtype());
    Tensor src = staged(in, e.dtype, true), dst = staged(out, e.dtype, false);
    MPI_Request req;
    int n = count_of(src, what);
    check_mpi(MPI_Iallgather(data_of(src), n, e.type, data_of(dst), n, e.type, comm_, &req), what);
    return work(what, req, [out, src, dst] { land(out, dst); });
  }
  std::shared_ptr<Work> reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) override {
    std::string what = begin("reduce_scatter", in, fmt::format("reduce_scatter({})", to_string(op)), static_cast<int>(op));
    KILN_CHECK(in.dim() > 0 && in.size(0) % size_ == 0, shape,
               "[reduce_scatter] input {} is not divisible into {} chunks along dim 0", in.meta_str(), size_);
    KILN_CHECK(op != ReduceOp::avg || is_floating(in.dtype()), dtype,
               "[reduce_scatter] avg needs a floating dtype, got {}", in.meta_str());
    check_rows("reduce_scatter", out, in, in.size(0) / size_);
    EngineType e = engine_type(in.dtype());
    Tensor src = staged(in, e.dtype, true), dst = staged(out, e.dtype, false);
    MPI_Request req;
    check_mpi(MPI_Ireduce_scatter_block(data_of(src), data_of(dst), count_of(dst, what), e.type,
                                        engine_op(op, in.dtype()), comm_, &req),
              what);
    return work(what, req, [out, src, dst, op, n = size_] {
      if (op == ReduceOp::avg) div_(const_cast<Tensor&>(dst), static_cast<double>(n));
      land(out, dst);
    });
  }
  std::shared_ptr<Work> all_to_all(const Tensor& out, const Tensor& in) override {
    std::string what = begin("all_to_all", in, "all_to_all", 0);
    KILN_CHECK(in.dim() > 0 && in.size(0) % size_ == 0, shape,
               "[all_to_all] input {} is not divisible into {} chunks along dim 0", in.meta_str(), size_);
    check_rows("all_to_all", out, in, in.size(0));
    EngineType e = engine_type(in.dtype());
    Tensor src = staged(in, e.dtype, true), dst = staged(out, e.dtype, false);
    MPI_Request req;
    int chunk = count_of(src, what) / size_;
    check_mpi(MPI_Ialltoall(data_of(src), chunk, e.type, data_of(dst), chunk, e.type, comm_, &req), what);
    return work(what, req, [out, src, dst] { land(out, dst); });
  }
  std::shared_ptr<Work> broadcast(const Tensor& t, int root) override {
    check_rank("broadcast", root);
    std::string what = begin("broadcast", t, fmt::format("broadcast(root={})", root), root);
    EngineType e = engine_type(t.dtype());
    Tensor buf = staged(t, e.dtype, true);
    MPI_Request req;
    check_mpi(MPI_Ibcast(data_of(buf), count_of(buf, what), e.type, root, comm_, &req), what);
    return work(what, req, [t, buf] { land(t, buf); });
  }
  std::shared_ptr<Work> send(const Tensor& t, int dst, int tag) override {
    check_rank("send", dst);
    check_cpu("send", t);
    after_writer(t);
    EngineType e = engine_type(t.dtype());
    Tensor buf = staged(t, e.dtype, true);
    MPI_Request req;
    std::string what = fmt::format("send to rank {}", dst);
    check_mpi(MPI_Isend(data_of(buf), count_of(buf, what), e.type, dst, tag, comm_, &req), what);
    return work(what, req, [buf] {});
  }
  std::shared_ptr<Work> recv(const Tensor& t, int src, int tag) override {
    check_rank("recv", src);
    check_cpu("recv", t);
    after_writer(t);
    EngineType e = engine_type(t.dtype());
    Tensor buf = staged(t, e.dtype, false);
    MPI_Request req;
    std::string what = fmt::format("recv from rank {}", src);
    check_mpi(MPI_Irecv(data_of(buf), count_of(buf, what), e.type, src, tag, comm_, &req), what);
    return work(what, req, [t, buf] { land(t, buf); });
  }
  void barrier() override {
    std::string what = begin("barrier", Tensor(), "barrier", 0);
    MPI_Request req;
    check_mpi(MPI_Ibarrier(comm_, &req), what);
    work(what, req, nullptr)->wait();
  }
  std::shared_ptr<ProcessGroup> split(const std::vector<int>& ranks) override {
    int64_t h = 0;
    for (int r : ranks) {
      check_rank("split", r);
      h = h * 1000003 + r + 1;
    }
    begin("split", Tensor(), "split", h);
    int color = MPI_UNDEFINED, key = 0;
    for (size_t i = 0; i < ranks.size(); ++i)
      if (ranks[i] == rank_) color = 0, key = static_cast<int>(i);
    MPI_Comm sub;
    check_mpi(MPI_Comm_split(comm_, color, key, &sub), "split");
    if (sub == MPI_COMM_NULL) return nullptr;
    return std::make_shared<MpiGroup>(sub, true);
  }

 private:
  // Checks `t`, numbers the collective and (C4) compares it across the ranks; returns
  // its name for messages: "all_reduce(sum) #7".
  std::string begin(std::string_view op, const Tensor& t, std::string call, int64_t extra) {
    if (t.defined()) {
      check_cpu(op, t);
      after_writer(t);
    }
    uint64_t n = ++sequence_;
    std::string what = fmt::format("{} #{}", call, n);
    if (!checks_enabled()) return what;
    // One number for the call; every rank's must be equal: max == min.
    uint64_t h = std::hash<std::string_view>{}(op) ^ (n * 0x9e3779b97f4a7c15ull) ^
                 (static_cast<uint64_t>(extra) * 0xbf58476d1ce4e5b9ull);
    if (t.defined()) {
      h = h * 31 + static_cast<uint64_t>(t.dtype());
      for (int64_t s : t.shape()) h = h * 1000003 + static_cast<uint64_t>(s);
    }
    // Mixed (splitmix64's finalizer) so every input bit reaches the low 62 bits kept.
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    int64_t key = static_cast<int64_t>(h & 0x3fffffffffffffffull);
    int64_t v[2] = {key, -key};
    MPI_Request req;
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, v, 2, MPI_INT64_T, MPI_MAX, comm_, &req), what);
    work(what, req, nullptr)->wait();
    KILN_CHECK(v[0] == -v[1], value,
               "[{}] collective #{} does not match across the ranks of its group: rank {} called {}{}, "
               "another rank a different collective, reduction, dtype or shape",
               op, n, rank_, call, t.defined() ? " of " + t.meta_str() : "");
    return what;
  }
  void check_cpu(std::string_view op, const Tensor& t) const {
    KILN_CHECK(t.defined() && t.device().is_cpu() && !t.is_fake(), device,
               "[{}] the MPI engine moves CPU tensors with data (any cpu:N), got {}", op,
               t.defined() ? t.meta_str() : "an undefined tensor");
  }
  void check_rank(std::string_view op, int r) const {
    KILN_CHECK(r >= 0 && r < size_, index, "[{}] rank {} is not in a group of {} ranks", op, r, size_);
  }
  void check_rows(std::string_view op, const Tensor& out, const Tensor& in, int64_t rows) const {
    check_cpu(op, out);
    Dims want = in.shape();
    if (want.size()) want[0] = rows;
    KILN_CHECK(out.shape() == want && out.dtype() == in.dtype() && out.device() == in.device(), shape,
               "[{}] output {} must be {}{}@{} for input {} on {} ranks", op, out.meta_str(),
               to_string(in.dtype()), want.str(), in.device(), in.meta_str(), size_);
  }
  // The engine wrote `buf`; `t` gets its values (when it was staged) on the host.
  static void land(const Tensor& t, const Tensor& buf) {
    if (!buf.is_same(t)) {
      autograd::NoGradGuard no_grad;
      Tensor dst = t;
      copy_(dst, buf);
    }
    t.storage()->writer.store(nullptr);
  }
  std::shared_ptr<Work> work(const std::string& what, MPI_Request req, std::function<void()> finish) {
    return std::make_shared<MpiWork>(what, req, std::move(finish));
  }

  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0, size_ = 1;
  uint64_t sequence_ = 0;
};

}  // namespace

bool mpi_available() { return true; }

std::shared_ptr<ProcessGroup> mpi_world() {
  static std::shared_ptr<ProcessGroup> world = [] {
    runtime();
    MPI_Comm comm;
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "mpi_world");
    return std::make_shared<MpiGroup>(comm, true);
  }();
  return world;
}

}  // namespace kiln::dist

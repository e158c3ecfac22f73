#include "kiln/distributed/process_group.h"

namespace kiln::dist {

std::string_view to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
    case ReduceOp::product: return "product";
  }
  return "?";
}

namespace {

class DoneWork final : public Work {
 public:
  void wait() override {}
  bool completed() override { return true; }
};

// (C1) Metadata only: the shapes a real engine would require, checked; nothing moved.
class FakeGroup final : public ProcessGroup {
 public:
  FakeGroup(int rank, int size) : rank_(rank), size_(size) {
    KILN_CHECK(size > 0 && rank >= 0 && rank < size, value, "[fake_group] rank {} of {} ranks", rank, size);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view engine() const override { return "fake"; }

  std::shared_ptr<Work> all_reduce(const Tensor& t, ReduceOp) override { return done(); }
  std::shared_ptr<Work> all_gather(const Tensor& out, const Tensor& in) override {
    expect_dim0("all_gather", out, in, in.dim() ? in.size(0) * size_ : 0);
    return done();
  }
  std::shared_ptr<Work> reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp) override {
    KILN_CHECK(in.dim() > 0 && in.size(0) % size_ == 0, shape,
               "[reduce_scatter] input {} is not divisible into {} chunks along dim 0", in.meta_str(), size_);
    expect_dim0("reduce_scatter", out, in, in.size(0) / size_);
    return done();
  }
  std::shared_ptr<Work> all_to_all(const Tensor& out, const Tensor& in) override {
    KILN_CHECK(in.dim() > 0 && in.size(0) % size_ == 0, shape,
               "[all_to_all] input {} is not divisible into {} chunks along dim 0", in.meta_str(), size_);
    expect_dim0("all_to_all", out, in, in.size(0));
    return done();
  }
  std::shared_ptr<Work> broadcast(const Tensor&, int root) override {
    check_rank("broadcast", root);
    return done();
  }
  std::shared_ptr<Work> send(const Tensor&, int dst, int) override {
    check_rank("send", dst);
    return done();
  }
  std::shared_ptr<Work> recv(const Tensor&, int src, int) override {
    check_rank("recv", src);
    return done();
  }
  void barrier() override {}
  std::shared_ptr<ProcessGroup> split(const std::vector<int>& ranks) override {
    for (size_t i = 0; i < ranks.size(); ++i) {
      check_rank("split", ranks[i]);
      if (ranks[i] == rank_) return std::make_shared<FakeGroup>(static_cast<int>(i), static_cast<int>(ranks.size()));
    }
    return nullptr;
  }

 private:
  static std::shared_ptr<Work> done() { return std::make_shared<DoneWork>(); }
  void check_rank(const char* op, int r) const {
    KILN_CHECK(r >= 0 && r < size_, index, "[{}] rank {} is not in a group of {} ranks", op, r, size_);
  }
  void expect_dim0(const char* op, const Tensor& out, const Tensor& in, int64_t rows) const {
    Dims want = in.shape();
    if (want.size()) want[0] = rows;
    KILN_CHECK(out.shape() == want && out.dtype() == in.dtype() && out.device() == in.device(), shape,
               "[{}] output {} must be {}{}@{} for input {} on {} ranks", op, out.meta_str(),
               to_string(in.dtype()), want.str(), in.device(), in.meta_str(), size_);
  }
  int rank_, size_;
};

}  // namespace

std::shared_ptr<ProcessGroup> fake_group(int rank, int size) { return std::make_shared<FakeGroup>(rank, size); }

#if !KILN_WITH_MPI
bool mpi_available() { return false; }
std::shared_ptr<ProcessGroup> mpi_world() {
  fail(ErrorKind::unsupported, "[mpi_world] this kiln was built without MPI (install libopenmpi-dev and rebuild)");
}
#endif

}  // namespace kiln::dist

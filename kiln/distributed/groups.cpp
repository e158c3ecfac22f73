#include "kiln/distributed/groups.h"

namespace kiln::dist {

namespace {

class DoneWork final : public Work {
 public:
  void wait() override {}
  bool completed() override { return true; }
};

// (C1) The shapes a real engine would require, checked; then, as PyTorch's fake process
// group, data moved as if every rank held what this one holds: an all_gather writes
// `size` copies of the input, a reduce_scatter this rank's chunk of it, an all_to_all
// the input, an all_reduce and a broadcast leave the tensor as it is. Outputs are never
// left unwritten; on fake tensors the copies only propagate metadata.
class FakeGroup final : public ProcessGroup {
 public:
  FakeGroup(int rank, int size) : rank_(rank), size_(size) {
    KILN_CHECK(size > 0 && rank >= 0 && rank < size, value, "[fake_group] rank {} of {} ranks",
               rank, size);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view engine() const override { return "fake"; }

  std::shared_ptr<Work> all_reduce(const Tensor& t, ReduceOp, Launch) override { return done(); }
  std::shared_ptr<Work> all_gather(const Tensor& out, const Tensor& in, Launch) override {
    check_output("all_gather", out, in, Rows::gather);
    for (int r = 0; r < size_; ++r) {
      Tensor chunk = narrow(out, 0, r * in.size(0), in.size(0));
      copy_(chunk, in);
    }
    return done();
  }
  std::shared_ptr<Work> reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp,
                                       Launch) override {
    check_output("reduce_scatter", out, in, Rows::scatter);
    Tensor dst = out;
    copy_(dst, narrow(in, 0, rank_ * out.size(0), out.size(0)));
    return done();
  }
  std::shared_ptr<Work> all_to_all(const Tensor& out, const Tensor& in, Launch) override {
    check_output("all_to_all", out, in, Rows::same);
    Tensor dst = out;
    copy_(dst, in);
    return done();
  }
  // As if every rank sent what this one sends: rank i's rows for this rank are this
  // input's chunk for this rank, where the sizes allow (zeros elsewhere).
  std::shared_ptr<Work> all_to_all_v(const Tensor& out, const Tensor& in,
                                     const std::vector<int64_t>& out_splits,
                                     const std::vector<int64_t>& in_splits, Launch) override {
    check_splits("all_to_all_v", out, in, out_splits, in_splits);
    Tensor dst = out;
    fill_(dst, 0.0);
    int64_t mine = 0;
    for (int r = 0; r < rank_; ++r) mine += in_splits[static_cast<size_t>(r)];
    int64_t at = 0;
    for (size_t i = 0; i < out_splits.size(); ++i) {
      int64_t rows = std::min(out_splits[i], in_splits[static_cast<size_t>(rank_)]);
      if (rows > 0) {
        Tensor into = narrow(dst, 0, at, rows);
        copy_(into, narrow(in, 0, mine, rows));
      }
      at += out_splits[i];
    }
    return done();
  }
  std::shared_ptr<Work> broadcast(const Tensor&, int root, Launch) override {
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
      if (ranks[i] == rank_)
        return std::make_shared<FakeGroup>(static_cast<int>(i), static_cast<int>(ranks.size()));
    }
    return nullptr;
  }

 private:
  static std::shared_ptr<Work> done() { return std::make_shared<DoneWork>(); }
  int rank_, size_;
};

// This process alone: every collective of one rank is a copy (or nothing).
class LocalGroup final : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string_view engine() const override { return "local"; }
  std::shared_ptr<Work> all_reduce(const Tensor&, ReduceOp, Launch) override { return done(); }
  std::shared_ptr<Work> all_gather(const Tensor& out, const Tensor& in, Launch) override {
    return copy(out, in);
  }
  std::shared_ptr<Work> reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp,
                                       Launch) override {
    return copy(out, in);
  }
  std::shared_ptr<Work> all_to_all(const Tensor& out, const Tensor& in, Launch) override {
    return copy(out, in);
  }
  std::shared_ptr<Work> all_to_all_v(const Tensor& out, const Tensor& in,
                                     const std::vector<int64_t>& out_splits,
                                     const std::vector<int64_t>& in_splits, Launch) override {
    check_splits("all_to_all_v", out, in, out_splits, in_splits);
    return copy(out, in);
  }
  std::shared_ptr<Work> broadcast(const Tensor&, int root, Launch) override {
    check_rank("broadcast", root);
    return done();
  }
  std::shared_ptr<Work> send(const Tensor&, int dst, int) override {
    fail(ErrorKind::value, "[send] the local group has no other rank (asked for {})", dst);
  }
  std::shared_ptr<Work> recv(const Tensor&, int src, int) override {
    fail(ErrorKind::value, "[recv] the local group has no other rank (asked for {})", src);
  }
  void barrier() override {}
  std::shared_ptr<ProcessGroup> split(const std::vector<int>& ranks) override {
    KILN_CHECK(ranks.size() <= 1 && (ranks.empty() || ranks[0] == 0), index,
               "[split] the local group has only rank 0");
    return ranks.empty() ? nullptr : std::make_shared<LocalGroup>();
  }

 private:
  static std::shared_ptr<Work> done() { return std::make_shared<DoneWork>(); }
  static std::shared_ptr<Work> copy(const Tensor& out, const Tensor& in) {
    KILN_CHECK(out.shape() == in.shape() && out.dtype() == in.dtype(), shape,
               "[collective] output {} must match input {} in a group of 1 rank", out.meta_str(),
               in.meta_str());
    Tensor dst = out;
    copy_(dst, in);
    return done();
  }
};

}  // namespace

std::shared_ptr<ProcessGroup> fake_group(int rank, int size) {
  return std::make_shared<FakeGroup>(rank, size);
}
std::shared_ptr<ProcessGroup> local_group() { return std::make_shared<LocalGroup>(); }

#if !KILN_WITH_NCCL
bool nccl_available() { return false; }
std::shared_ptr<ProcessGroup> nccl_group(const std::shared_ptr<ProcessGroup>&, Device device) {
  fail(ErrorKind::unsupported,
       "[nccl_group] this kiln was built without CUDA, so without NCCL (asked for {})", device);
}
#endif

#if !KILN_WITH_MPI
bool mpi_available() { return false; }
std::shared_ptr<ProcessGroup> mpi_world() {
  fail(ErrorKind::unsupported,
       "[mpi_world] this kiln was built without MPI (install libopenmpi-dev and rebuild)");
}
#endif

}  // namespace kiln::dist

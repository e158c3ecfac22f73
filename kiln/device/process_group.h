#pragma once
// The process-group interface collectives run on (C1, C2), and the names programs use for
// groups: a program's collective ops name a group (a mesh axis, e.g. "dp"), and running
// the program looks the name up here. The engines (MPI, a local group of one process,
// the fake group) live in kiln/distributed; the kernels of the collective ops call them
// through this interface.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln::dist {

enum class ReduceOp : uint8_t { sum, avg, max, min, product };
std::string_view to_string(ReduceOp op);

/** An asynchronous collective; its outputs are valid after wait(). */
/** How a collective call returns. `async`: at once, with the call queued (wait() for its
 * result; the engine makes progress meanwhile). `blocking`: once the call is complete
 * (wait() returns at once); the MPI engine then runs it on the calling thread when
 * nothing is queued before it, without a hand-off to its worker. */
enum class Launch : uint8_t { async, blocking };

class Work {
 public:
  virtual ~Work() = default;
  /** Blocks until the collective is complete (staged outputs copied back). */
  virtual void wait() = 0;
  /** Whether wait() would return at once. */
  virtual bool completed() = 0;
};

/** A set of ranks that run collectives together. Every rank of the group must call the
 * same collectives in the same order, with tensors of the same dtype and shape. */
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /** "mpi" or "fake". */
  virtual std::string_view engine() const = 0;

  /** In place: every rank's `tensor` becomes the reduction of all ranks' values. */
  virtual std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::sum,
                                           Launch launch = Launch::async) = 0;
  /** `output` ([size * n, ...]) gets the ranks' `input`s ([n, ...]) in rank order along dim 0. */
  virtual std::shared_ptr<Work> all_gather(const Tensor& output, const Tensor& input,
                                           Launch launch = Launch::async) = 0;
  /** `output` ([n / size, ...]) gets this rank's slice (along dim 0) of the reduction of the
   * ranks' `input`s ([n, ...]). */
  virtual std::shared_ptr<Work> reduce_scatter(const Tensor& output, const Tensor& input,
                                               ReduceOp op = ReduceOp::sum,
                                               Launch launch = Launch::async) = 0;
  /** `input` is split along dim 0 in `size` equal chunks; chunk j goes to rank j, and
   * `output`'s chunk i comes from rank i. */
  virtual std::shared_ptr<Work> all_to_all(const Tensor& output, const Tensor& input,
                                           Launch launch = Launch::async) = 0;
  /** Uneven all_to_all along dim 0: `in_splits[j]` rows of `input` go to rank j (in
   * order), and `out_splits[i]` rows of `output` come from rank i. Row counts may differ
   * per rank; the other dims are the same everywhere. */
  virtual std::shared_ptr<Work> all_to_all_v(const Tensor& output, const Tensor& input,
                                             const std::vector<int64_t>& out_splits,
                                             const std::vector<int64_t>& in_splits,
                                             Launch launch = Launch::async) = 0;
  /** In place: every rank's `tensor` becomes rank `root`'s. */
  virtual std::shared_ptr<Work> broadcast(const Tensor& tensor, int root,
                                          Launch launch = Launch::async) = 0;
  /** Point to point (not checked across ranks: a send and its recv must agree). */
  virtual std::shared_ptr<Work> send(const Tensor& tensor, int dst, int tag = 0) = 0;
  virtual std::shared_ptr<Work> recv(const Tensor& tensor, int src, int tag = 0) = 0;
  virtual void barrier() = 0;
  /** A group of the listed ranks (of this group), in that order. Every rank of this group
   * calls it with the same list; ranks not listed get null. */
  virtual std::shared_ptr<ProcessGroup> split(const std::vector<int>& ranks) = 0;

 protected:
  // Argument checks every engine makes.
  /** An index Error naming `op` unless 0 <= r < size(). */
  void check_rank(std::string_view op, int r) const;
  /** How a collective's output relates to its input along dim 0 (of size n): gather
   * makes n * size(), scatter n / size(), same n (all_to_all); scatter and same need n
   * to divide into size() chunks. */
  enum class Rows : uint8_t { gather, scatter, same };
  /** A shape Error naming `op` unless `in` has such a dim 0 and `out` is the matching
   * tensor (shape, dtype, device). */
  void check_output(std::string_view op, const Tensor& out, const Tensor& in, Rows rows) const;
  /** A shape Error naming `op` unless the splits have one entry per rank, none negative,
   * summing to the rows of `in` and of `out`, which agree in dtype, device and other dims. */
  void check_splits(std::string_view op, const Tensor& out, const Tensor& in,
                    const std::vector<int64_t>& out_splits,
                    const std::vector<int64_t>& in_splits) const;
};

/** The reduction named "sum", "avg", "max", "min" or "product" (a value Error otherwise). */
ReduceOp reduce_op_from_name(std::string_view name);

/** Binds a group name (a mesh axis) to `group` for this process; null unbinds it. */
void bind_group(const std::string& name, std::shared_ptr<ProcessGroup> group);
/** The group bound to `name`; a value Error naming `op` and the name when there is none. */
std::shared_ptr<ProcessGroup> bound_group(std::string_view name, std::string_view op);

/** (C5) Where the collective kernel leaves its Work instead of waiting for it: the
 * executor points this thread's slot at one while it runs a collective node whose result
 * is first read later (Note [Asynchronous collectives in programs], kiln/runtime/
 * executor.cpp); the kernel then launches asynchronously and returns at once. Null (the
 * default): collectives complete before their kernel returns. */
std::shared_ptr<Work>*& pending_work_slot();

}  // namespace kiln::dist

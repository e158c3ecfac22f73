#pragma once
// Process groups and collectives on real engines (C1, C3, C4): MPI across processes for
// CPU tensors (any cpu:N device, virtual ones included), and a fake group that computes
// metadata only, so programs for N ranks can be traced in one process.
//
// Note [Collectives on the engine]
// A collective reads and writes dense buffers of an engine dtype. Inputs that are not
// contiguous (or whose dtype the engine lacks: f16, bf16 go through f32) are staged in a
// dense copy, and outputs staged that way are copied back when the work completes. Before
// an engine call the tensors' last writer streams are waited for (D4) and the call runs
// under a guard for the tensors' device (D3); its writes are complete when wait()
// returns. Each collective is numbered per group; unless KILN_CHECK_COLLECTIVES=0, the
// ranks first compare what they are about to call (kind, reduction, dtype, shape, root)
// with one small all-reduce, so a mismatch is an Error on every rank naming the
// collective and its number instead of a hang or garbage (C4). A wait longer than
// KILN_COLLECTIVE_TIMEOUT seconds (default 300) is an Error too.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/dispatch/functional.h"

namespace kiln::dist {

enum class ReduceOp : uint8_t { sum, avg, max, min, product };
std::string_view to_string(ReduceOp op);

/** An asynchronous collective; its outputs are valid after wait(). */
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
  virtual std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::sum) = 0;
  /** `output` ([size * n, ...]) gets the ranks' `input`s ([n, ...]) in rank order along dim 0. */
  virtual std::shared_ptr<Work> all_gather(const Tensor& output, const Tensor& input) = 0;
  /** `output` ([n / size, ...]) gets this rank's slice (along dim 0) of the reduction of the
   * ranks' `input`s ([n, ...]). */
  virtual std::shared_ptr<Work> reduce_scatter(const Tensor& output, const Tensor& input,
                                               ReduceOp op = ReduceOp::sum) = 0;
  /** `input` is split along dim 0 in `size` equal chunks; chunk j goes to rank j, and
   * `output`'s chunk i comes from rank i. */
  virtual std::shared_ptr<Work> all_to_all(const Tensor& output, const Tensor& input) = 0;
  /** In place: every rank's `tensor` becomes rank `root`'s. */
  virtual std::shared_ptr<Work> broadcast(const Tensor& tensor, int root) = 0;
  /** Point to point (not checked across ranks: a send and its recv must agree). */
  virtual std::shared_ptr<Work> send(const Tensor& tensor, int dst, int tag = 0) = 0;
  virtual std::shared_ptr<Work> recv(const Tensor& tensor, int src, int tag = 0) = 0;
  virtual void barrier() = 0;
  /** A group of the listed ranks (of this group), in that order. Every rank of this group
   * calls it with the same list; ranks not listed get null. */
  virtual std::shared_ptr<ProcessGroup> split(const std::vector<int>& ranks) = 0;
};

/** Whether this build has the MPI engine. */
bool mpi_available();
/** All processes of the job (MPI_COMM_WORLD), initialising MPI on first use; an
 * unsupported Error in a build without MPI. */
std::shared_ptr<ProcessGroup> mpi_world();
/** A group of `size` ranks seen from `rank` that moves no data: collectives check their
 * arguments' metadata (shapes, dtypes, devices) and complete at once (C1). */
std::shared_ptr<ProcessGroup> fake_group(int rank, int size);

}  // namespace kiln::dist

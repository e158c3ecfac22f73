#pragma once
// Distributed tensors (S1-S3): a device mesh over process groups, placements, and the
// DTensor -- a kiln::Tensor whose impl carries its local shard, mesh and placements.
//
// Note [DTensor is a layer between autograd and the modes]
// A DTensor is an ordinary Tensor handle: its impl has the *global* shape, strides and
// dtype, the device of this rank's shard, no data, and a DTensorState (local shard,
// mesh, placements). Every op call reaches redispatch(), which hands calls with a
// DTensor argument to this layer (set_dtensor_layer): it checks the mesh and the plain
// tensors (S3), computes the output's global metadata with kiln's own meta function on
// the global shapes, picks the output placements from the op's sharding rule --
// redistributing inputs where the rule needs it, the cheapest way (S2) -- and runs the
// op on the local shards through redispatch(), so fake tensors, tracing and
// functionalization see local ops and functional collectives naming mesh axes (C2).
// Autograd sits above: it records the op on the DTensors, and backward formulas are
// DTensor ops again, so gradients of sharded tensors are DTensors.

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kiln/core/scope.h"
#include "kiln/core/small_vector.h"
#include "kiln/distributed/groups.h"

namespace kiln::nn {
class Module;
}  // namespace kiln::nn

namespace kiln::dist {

/** How a tensor is laid out along one mesh dimension (S1). */
struct Placement {
  enum class Kind : uint8_t { shard, replicate, partial };
  // Eight bytes, so that a placement is built and copied in one register (as a
  // 16-byte struct, field-wise stores read back by vector copies stalled the rules).
  Kind kind = Kind::replicate;
  ReduceOp op = ReduceOp::sum;  // partial: how the ranks' values combine
  int32_t dim = 0;              // shard: the tensor dim split across the mesh dim

  bool is_shard() const { return kind == Kind::shard; }
  bool is_shard(int64_t d) const { return kind == Kind::shard && dim == d; }
  bool is_replicate() const { return kind == Kind::replicate; }
  bool is_partial() const { return kind == Kind::partial; }
  bool operator==(const Placement&) const = default;
  /** "S(0)", "R", "P(sum)". */
  std::string str() const;
};
inline Placement Shard(int64_t dim) {
  return {Placement::Kind::shard, ReduceOp::sum, static_cast<int32_t>(dim)};
}
inline Placement Replicate() { return {}; }
inline Placement Partial(ReduceOp op = ReduceOp::sum) { return {Placement::Kind::partial, op, 0}; }
/** One placement per mesh dimension; inline for meshes of up to 4 dimensions, so
 * sharding propagation allocates nothing for them. */
using Placements = SmallVector<Placement, 4>;
std::string to_string(const Placements& p);

/** An n-dimensional grid of ranks with named dimensions. Each dimension's ranks form a
 * process group, bound under the dimension's name (bind_group) so that collective ops
 * name it. Copies share one mesh. */
class DeviceMesh {
 public:
  /** Every rank of `world`, laid out row-major in `shape` (whose product must be the
   * world size); `device` is where this rank's shards live. Every rank of `world` calls it. */
  DeviceMesh(const std::shared_ptr<ProcessGroup>& world, std::vector<int64_t> shape,
             std::vector<std::string> names, Device device);
  /** A mesh of NCCL groups for CUDA tensors on `device` (one GPU per rank): each
   * dimension's communicator is bootstrapped over that dimension's group of `bootstrap`
   * (e.g. mpi_world()). Errors as nccl_group's where NCCL or the GPU is missing. */
  static DeviceMesh nccl(const std::shared_ptr<ProcessGroup>& bootstrap, std::vector<int64_t> shape,
                         std::vector<std::string> names, Device device);
  /** A mesh of fake groups, seen from `rank`: for tracing a program for any world size in
   * one process (shards are fake; collectives check metadata only). */
  static DeviceMesh fake(std::vector<int64_t> shape, std::vector<std::string> names, int64_t rank,
                         Device device);

  int64_t ndim() const;
  int64_t size(int64_t dim) const;
  int64_t size() const;  // all ranks
  const std::vector<int64_t>& shape() const;
  const std::vector<std::string>& names() const;
  /** This rank's index along `dim`. */
  int64_t coordinate(int64_t dim) const;
  Device device() const;
  const std::shared_ptr<ProcessGroup>& group(int64_t dim) const;
  /** The 1-d mesh of this rank's group along the dimension named `name`. */
  DeviceMesh operator[](const std::string& name) const;
  /** Binds each dimension's group under its name again (bind_group), e.g. after
   * another mesh reused the names: collective ops name groups by axis. */
  void bind() const;
  /** The dimension named `name`; a value Error listing the names otherwise. */
  int64_t dim_of(const std::string& name) const;
  bool operator==(const DeviceMesh& other) const { return impl_ == other.impl_; }
  /** "DeviceMesh((2, 2), names=('dp', 'tp'))". */
  std::string str() const;

  struct Impl;

 private:
  explicit DeviceMesh(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

/** What a DTensor's impl carries besides its global metadata: its mesh, placements and
 * this rank's shard. A shard that fake propagation derives is only described, and made
 * when first asked for (Note [Derived shards] in dtensor.cpp). */
class DTensorState {
 public:
  /** A state around an existing shard. */
  DTensorState(Tensor local, DeviceMesh mesh, Placements placements)
      : mesh(std::move(mesh)), placements(std::move(placements)), local_(std::move(local)) {}
  /** A fake shard, shaped by the placements (S1), made by the first local(). */
  DTensorState(DeviceMesh mesh, Placements placements)
      : mesh(std::move(mesh)), placements(std::move(placements)), derived_(true) {}
  DTensorState(const DTensorState&) = delete;
  DTensorState& operator=(const DTensorState&) = delete;

  /** This rank's shard of `outer`, the DTensor this state belongs to. */
  const Tensor& local(const TensorImpl& outer) const;
  /** Whether the shard holds no data (a fake one, or one still to be derived). */
  bool fake_local() const { return derived_ || local_.is_fake(); }

  DeviceMesh mesh;
  Placements placements;  // one per mesh dimension

 private:
  mutable std::once_flag made_;  // derived shards: made once, also by concurrent readers
  mutable Tensor local_;
  bool derived_ = false;
};

/** Whether `t` is a DTensor, and its state (a value Error naming `op` otherwise). */
const DTensorState& dtensor_state(const Tensor& t, std::string_view op = "to_local");

/** `full` (the same on every rank) laid out on `mesh`: each rank keeps its chunk of the
 * sharded dims (torch.chunk semantics: uneven sizes allowed, trailing ranks may be
 * empty); Partial keeps the value on coordinate 0 and zeros elsewhere (sum) or the value
 * everywhere (max, min). */
Tensor distribute_tensor(const Tensor& full, const DeviceMesh& mesh, const Placements& placements);
/** Wraps this rank's `local` shard. The global shape is inferred assuming even shards
 * unless given. */
Tensor from_local(const Tensor& local, const DeviceMesh& mesh, const Placements& placements,
                  std::optional<Dims> global_shape = std::nullopt,
                  std::optional<Placements> grad_placements = std::nullopt);
/** This rank's shard. Differentiable (Note [Autograd through the DTensor conversions]):
 * the local gradient comes back as a DTensor with this one's placements, or
 * `grad_placements`. from_local and redistribute are differentiable too; from_local's
 * gradient is redistributed to its placements (or `grad_placements`) first. */
Tensor to_local(const Tensor& dtensor, std::optional<Placements> grad_placements = std::nullopt);
/** The whole tensor on every rank (redistributes to Replicate: collectives). */
Tensor full_tensor(const Tensor& dtensor);
/** `p` with every Partial made Replicate: the layout of a value reduced where it is partial
 * (a gradient on its way back, a saved shard, a program's output). */
Placements replicate_partials(Placements p);
/** The same tensor with other placements: all_gather, all_reduce, reduce_scatter,
 * all_to_all or local chunking, one mesh dimension at a time. */
Tensor redistribute(const Tensor& dtensor, const Placements& placements);
/** "DTensor(f32[8, 4], mesh=..., placements=(S(0)), local=f32[4, 4]@cpu:1)". */
std::string describe(const Tensor& dtensor);

/** (S3) While alive, plain tensors joining a DTensor op on this thread are taken as
 * Replicate DTensors on its mesh (torch's implicit_replication), for models that make
 * tensors in forward (positions, masks). Without it, such a call is an error. */
class ImplicitReplication : ScopeGuard {
 public:
  ImplicitReplication();
  ~ImplicitReplication();

 private:
  bool prev_;
};

/** How parallelize_module lays out a Linear's parameters (Megatron-style). */
enum class ParallelStyle : uint8_t {
  colwise,  // weight S(0), bias S(0): outputs sharded on their last dim
  rowwise,  // weight S(1), bias R: inputs sharded on their last dim, outputs summed
            // (made replicated after the layer, as RowwiseParallel's default layout)
};
/** Makes every parameter, buffer and workspace of `module` a DTensor on the 1-d `mesh`:
 * those of the modules whose path matches a plan entry ('*' matches one path component,
 * e.g. "blocks.*.fc") get the entry's style, all others Replicate. Parameters stay leaves
 * that require grad. Run forward with plain inputs under ImplicitReplication (or pass
 * DTensors). */
void parallelize_module(nn::Module& module, const DeviceMesh& mesh,
                        const std::vector<std::pair<std::string, ParallelStyle>>& plan);

/** Tensor-parallel styles with their activations' layouts, as PyTorch's
 * torch.distributed.tensor.parallel (Note [Parallel styles with layouts] in dtensor.cpp).
 * A plain tensor given to a styled module is taken as this rank's part of a DTensor laid
 * out as `input_layout`; it is redistributed to what the module computes on, and its
 * output to `output_layout`; `use_local_output` hands back this rank's plain tensor.
 * Shard(-1) counts from the last dim. */
struct ColwiseParallel {  // weight S(0), bias S(0); computes on a replicated input
  Placement input_layout = Replicate();
  Placement output_layout = Shard(-1);
  bool use_local_output = true;
};
struct RowwiseParallel {  // weight S(1), bias R; computes on an input sharded on its last dim
  Placement input_layout = Shard(-1);
  Placement output_layout = Replicate();
  bool use_local_output = true;
};
/** Replicated parameters (LayerNorm, dropout) computing on activations sharded on the
 * sequence dim; the output stays a DTensor sharded there unless use_local_output. */
struct SequenceParallel {
  int64_t sequence_dim = 1;
  bool use_local_output = false;
};
/** Lays out a module's inputs only: input i from input_layouts[i] to
 * desired_input_layouts[i]. */
struct PrepareModuleInput {
  std::vector<Placement> input_layouts, desired_input_layouts;
  bool use_local_output = false;
};
using TensorParallelStyle =
    std::variant<ColwiseParallel, RowwiseParallel, SequenceParallel, PrepareModuleInput>;
/** parallelize_module with layouts: parameters as the styles say (others Replicate), and
 * forward hooks on the matched modules that lay out their inputs and outputs, so plain
 * tensors go in and out and activations between modules may stay sharded (sequence
 * parallel). A module may match several entries (PrepareModuleInput on a block and
 * styles on its layers). */
void parallelize_module(nn::Module& module, const DeviceMesh& mesh,
                        const std::vector<std::pair<std::string, TensorParallelStyle>>& plan);

/** The chunk of a dim of `size` that coordinate `index` of `n` holds: (offset, length). */
std::pair<int64_t, int64_t> chunk_of(int64_t size, int64_t n, int64_t index);

}  // namespace kiln::dist

#pragma once
// Functionalization: captured programs without mutation (M1-M5).
//
// Note [Functional storages]
// FunctionalizeMode keeps, behind every storage the traced code has written, the
// storage's current contents. Every mutation becomes functional ops: the new value of
// the written tensor; when that tensor covers the whole storage, it is the new contents
// as it is; otherwise `as_strided_scatter` of it into a flat [N] value of the contents
// (made from the whole value, or from the storage's first tensor, when first needed).
// Each write bumps the storage's generation. A tensor whose cached value is older
// re-reads itself (the whole value when laid out like it, else `as_strided(flat, its
// size, its strides, its offset)`). So a write through any view is seen by the base and
// by every other view, and the graph below holds no mutation.
//
// Tracking is lazy: every tensor (the program's inputs and views included) is its own
// value until its storage is written. An op, view or not, whose arguments are all
// untracked goes straight down, and its outputs reach the user as they are (no wrapper,
// no table entry). The first write starts tracking the storage, with the tensor it
// went through (the base or any view: `as_strided` offsets are storage-relative, and
// views alias their base at run time too) as the storage's first contents; tensors
// that share a storage share its contents, like eager aliasing. From then on a view of
// it gets a user-facing tensor with user metadata over the same storage, whose value
// is a view of the current value. Any handle on a tracked storage (a view or detached
// copy made before the write) is looked up by storage, so none can read a stale value.
#include <memory>
#include <unordered_map>

#include "kiln/fake/fake_mode.h"
#include "kiln/trace/proxy_mode.h"

namespace kiln::passes {

/** (M1, M2) Turns in-place ops and mutation through views into functional ops. Push it
 * innermost (after a ProxyMode) to record the functional program. */
class FunctionalizeMode final : public Mode {
 public:
  FunctionalizeMode();
  ~FunctionalizeMode() override;
  FunctionalizeMode(const FunctionalizeMode&) = delete;
  FunctionalizeMode& operator=(const FunctionalizeMode&) = delete;

  /** The current value of `t` (an untracked tensor is its own value). */
  Tensor value_of(const Tensor& t);
  /** Whether anything was written to `t`'s storage. */
  bool mutated(const Tensor& t) { return writes(t) > 0; }
  /** How many writes `t`'s storage has had (0 when untracked): a later count that
   * differs means a write in between. */
  uint64_t writes(const Tensor& t);
  /** Whether a write to `t`'s storage ran with grad mode on (false: every write was
   * under no-grad, hidden from autograd). */
  bool written_with_grad(const Tensor& t);

  Outputs handle(ops::OpKind op, std::span<const Value> args) override;

 private:
  struct FStorage;
  struct FTensor {  // what a tracked user-facing tensor stands for
    uint64_t user;  // the tensor's impl id (TensorId): the table holds no user tensor
    std::shared_ptr<FStorage> st;
    Tensor value;
    uint64_t generation = 0;
  };
  FTensor* find(const Tensor& t);
  FTensor* track(const Tensor& t);
  Tensor adopt(Tensor user, std::shared_ptr<FStorage> st, const Tensor& value);
  std::shared_ptr<FStorage> storage_for(const Tensor& root);
  Tensor value_of(const Tensor& t, FTensor& f);
  const Tensor& flat_of(FStorage& st);
  /** `args` with each tracked tensor replaced by its current value (copied into
   * `values` when any is; `args` itself when none is). */
  std::span<const Value> values_of(std::span<const Value> args, PoolVector<Value>& values);
  Outputs mutate(const ops::OpInfo& info, std::span<const Value> args);

  PoolMap<const TensorImpl*, FTensor> tensors_;  // node-based: entries never move
  // By the storage of each tracked tensor.
  PoolMap<const StorageImpl*, std::shared_ptr<FStorage>> roots_;
  ModeGuard guard_;
};

/** (M3) Where a mutated input's new value is written back. */
enum class WriteBack : uint8_t { in_graph, out_of_graph };

/** (M3) What a captured program does to one of its inputs. */
struct InputMutation {
  bool data_mutated = false;
  enum class Where : uint8_t { none, in_graph, out_of_graph };
  Where where = Where::none;
  /** (J2) Its shape, strides or offset changed in place (t_, transpose_, ...): a joint
   * program returns the input's new view out of graph and run_joint gives the input that
   * geometry (as_strided_), as AOTAutograd's runtime epilogue does. */
  bool metadata_mutated = false;
};

/** The shape, strides and offset of the tensors a capture traces as its inputs, taken
 * before the function runs: an in-place metadata op on an input (t_, transpose_, ...;
 * Note [In-place metadata ops]) changes them. changed() says which inputs (capture_joint
 * replays those, as AOTAutograd does); check() refuses any, naming the input and the
 * change, as torch.export refuses input metadata mutations. */
class InputGeometry {
 public:
  explicit InputGeometry(const TensorList& inputs);
  void check(const TensorList& inputs, const std::vector<std::string>& names) const;
  std::vector<bool> changed(const TensorList& inputs) const;

 private:
  struct Entry {
    Dims shape, strides;
    int64_t offset;
  };
  std::vector<Entry> entries_;
};

struct CaptureOptions {
  MakeFxOptions::Mode mode = MakeFxOptions::Mode::fake;
  WriteBack write_back = WriteBack::in_graph;
  std::vector<std::string> input_names;
};

/** A functional graph plus what it does to its inputs. */
// Note [Aliased inputs]
// Two inputs may be views of one storage. Functionalization tracks contents per storage,
// so a capture that kept them aliased would read one input through the other's node
// (correct only for exactly that aliasing at run time). As AOTAutograd: inputs whose
// memory does not overlap are traced as independent inputs (each its own storage);
// inputs joined by overlapping memory form a group traced as views of one storage of its
// own (a synthesized base for the group), each at its captured storage offset. The
// program records them, and its runner checks before running that each group shares one
// storage at those offsets and that no inputs of different groups overlap
// (check_input_aliasing), naming both inputs when the aliasing differs.

/** How two inputs of a capture shared memory: `second` is in the overlapping group whose
 * first input is `first`; their storage offsets when captured. */
struct InputAlias {
  int first = 0, second = 0;
  int64_t first_offset = 0, second_offset = 0;
};

/** The traced stand-ins of `inputs` (fake twins under `fake`, else the inputs): inputs
 * that share a storage get storages of their own, one per group joined by overlapping
 * memory; each group member after the first is returned in `overlapping`. See Note
 * [Aliased inputs]. */
TensorList traced_inputs(const TensorList& inputs, FakeMode* fake,
                         std::vector<InputAlias>& overlapping);
/** Throws a value Error naming both inputs unless every `overlapping` member shares its
 * group's storage at the captured offsets and no inputs of different groups overlap. */
void check_input_aliasing(const TensorList& inputs, const std::vector<InputAlias>& overlapping,
                          std::string_view runner);

struct CapturedProgram {
  ir::Graph graph;
  std::vector<InputMutation> inputs;  // one per input
  /** (M5) With out-of-graph write-back, the first outputs are the new values of the
   * mutated inputs, in input order; user outputs follow. */
  int num_mutation_outputs = 0;
  /** Inputs captured as overlapping views of one storage (Note [Aliased inputs]). */
  std::vector<InputAlias> overlapping_inputs;
};

/** Traces `fn` (fake by default) under functionalization: the graph has no in-place op
 * except epilogue `copy_(input, new_value)` write-backs (in-graph mode, traced in a
 * NoClobberScope, M4), and user-written to() calls are recorded as _to_copy (X1) whose
 * device-preserving results may not be mutated (X2). */
CapturedProgram capture(const std::function<TensorList(const TensorList&)>& fn,
                        const TensorList& inputs, const CaptureOptions& options = {});

}  // namespace kiln::passes

#pragma once
// Internals shared by the recorder (record.cpp) and the derivative table
// (derivatives.cpp): what a backward formula sees, and the node that runs it.

#include <vector>

#include "kiln/autograd/autograd.h"
#include "kiln/core/pool.h"

namespace kiln::autograd {

class FormulaNode;

/** What a backward formula reads and writes. Arguments are addressed as in the op's
 * schema: `arg` is the argument index, `j` the position in a tensor list (cat). */
class GradCtx {
 public:
  GradCtx(const FormulaNode& node, GradList& grads, GradList& out)
      : node_(node), grads_(grads), out_(out) {}

  /** The call's arguments; tensors the formula does not save are undefined. */
  Args args() const;
  const Tensor& t(int arg) const { return args().tensor(static_cast<size_t>(arg)); }
  /** Output `i` of the forward call (saved when the formula reads results). */
  const Tensor& result(int i = 0) const;
  /** The gradient of output `i` (zeros when none flowed into a differentiable output). */
  const Tensor& grad(int i = 0) const { return grads_[static_cast<size_t>(i)]; }
  /** Whether a gradient flowed into output `i` (else grad(i) is zeros): formulas whose
   * general form divides by zero where an output's gradient is absent (eigh, svd with
   * repeated values) take their short form then, as PyTorch's do. */
  bool flowed(int i) const;
  /** Whether input `arg` ([j]) needs a gradient: formulas skip work nobody uses. */
  bool needs(int arg, int j = 0) const;
  /** The shape, dtype and device the gradient of input `arg` ([j]) must have. */
  const GradMeta& input(int arg, int j = 0) const;
  /** The shapes of the tensor-list argument's elements (cat). */
  const std::vector<Dims>& list_shapes() const;
  /** Sets the gradient of input `arg` ([j]); ignored when it is not needed. */
  void set(int arg, Tensor g, int j = 0);

 private:
  int slot(int arg, int j) const;
  const FormulaNode& node_;
  GradList& grads_;
  GradList& out_;
  mutable std::vector<Tensor> live_results_;  // create_graph: the outputs with this node's history
};

/** One op's derivative: which inputs and outputs its formula reads, and the formula. */
struct Derivative {
  Differentiable kind = Differentiable::missing;
  uint32_t saves = 0;  // bit i: tensor argument i; kSavesResult: the outputs
  void (*formula)(GradCtx&) = nullptr;
};
inline constexpr uint32_t kSavesResult = 1u << 31;

/** The table entry of `op` (in-place ops answer with their functional op's entry; an
 * extension op with its registration's). */
Derivative derivative(ops::OpKind op);

/** A tensor a node keeps for its formula, with the storage version it had (G4). */
struct SavedTensor {
  Tensor value;
  uint32_t version = 0;
  int arg = -1;  // the argument it stands for, or -(1 + output number) for results
  // The node that produced an argument (kept alive by this node's edge to it), and which
  // of its outputs: what the version error names, as PyTorch's. Null for a leaf.
  const Node* producer = nullptr;
  uint32_t producer_output = 0;
};

/** The node of one recorded op call. */
class FormulaNode final : public Node {
 public:
  // User-provided: make_pooled value-initializes (see TensorImpl).
  FormulaNode() { kind = Kind::formula; }
  std::string name() const override;
  GradList apply(GradList& grads) override;
  void release() override;

  ops::OpKind op = ops::OpKind::empty;      // the functional op whose formula runs
  ops::OpKind called = ops::OpKind::empty;  // the op the user called (add_ for add)
  const char* display_name = nullptr;       // a name of PyTorch's own for it ("CopySlices")
  PoolVector<Value> args;                   // unsaved tensors are undefined
  PoolVector<Tensor> results;               // saved outputs (aliases without history), or empty
  PoolVector<SavedTensor> saved;
  PoolVector<int> first_slot;     // per argument: its first slot in `next` (-1: none)
  std::vector<Dims> list_shapes;  // the tensor-list argument's shapes (cat)
  bool released = false;
};

namespace detail {
/** `t`'s gradient state, created on first use. */
AutogradMeta& meta_of(const Tensor& t);
/** The creation number of a new node (later nodes run first in backward). */
uint64_t next_node_sequence();
}  // namespace detail

/** A shape or strides as an op argument. */
inline IntList ints(const Dims& d) { return IntList(d.begin(), d.end()); }

/** Gradient of `g` reduced to `shape` (summing the broadcast dimensions). */
Tensor sum_to(const Tensor& g, const Dims& shape);

}  // namespace kiln::autograd

#pragma once
// Reverse-mode automatic differentiation (G1-G5).
//
// Note [Autograd sits above the modes]
// dispatch() hands a call to autograd first when gradients are being recorded (grad
// mode on, some tensor argument requires grad). Autograd runs the op through the mode
// stack like any other call, then attaches to each floating output a node holding
// what the op's backward formula reads (kiln/autograd/derivatives.cpp). backward()
// walks those nodes and runs the formulas, which are ordinary kiln ops dispatched
// from the top again: under FakeMode the backward is fake, under ProxyMode it is
// traced, under FunctionalizeMode it is functional. Backward itself records nothing,
// except grad(..., create_graph = true), which runs the formulas with grad mode on so
// the gradients have histories of their own (double backward).

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/api/functional.h"
#include "kiln/core/pool.h"
#include "kiln/core/scope.h"
#include "kiln/dispatch/grad_mode.h"

namespace kiln::autograd {

class Node;

/** Where a gradient goes: input `input_nr` of `node` (the node's forward output number). */
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  bool valid() const { return node != nullptr; }
};

/** Gradient state of one tensor (TensorImpl::autograd). */
struct AutogradMeta {
  bool requires_grad = false;  // a leaf that asked for gradients
  bool retains_grad = false;
  uint32_t output_nr = 0;  // which output of grad_fn this tensor is
  std::shared_ptr<Node> grad_fn;
  std::weak_ptr<Node> grad_accumulator;  // leaves: shared by every edge into them
  Tensor grad;
};

/** Shape, dtype and device of one forward output of a node: what its gradient must be. */
struct GradMeta {
  Dims shape;
  DType dtype = DType::f32;
  Device device;
};

/** Gradients handed between backward nodes: one list per node run, from the thread's
 * pool (no malloc per node). */
using GradList = PoolVector<Tensor>;

/** A step of the backward graph: turns gradients of its forward outputs into gradients
 * of its forward inputs (one per edge in `next`). */
class Node : public std::enable_shared_from_this<Node> {
 public:
  virtual ~Node() = default;
  /** "MulBackward0", "AccumulateGrad". */
  virtual std::string name() const = 0;
  /** grads[i]: the gradient of forward output i (undefined: none flowed). Returns one
   * gradient per edge of `next` (undefined: none). */
  virtual GradList apply(GradList& grads) = 0;
  /** Frees what the node saved (after a backward without retain_graph). */
  virtual void release() {}

  // Pool-allocated: a node is made per recorded op.
  PoolVector<Edge> next;           // per differentiable input, in argument order
  PoolVector<GradMeta> inputs;     // per forward output: the gradient this node expects
  Device device;                   // (G3) backward runs under this device's guard
  uint64_t sequence = 0;           // creation order: later nodes run first
  uint64_t flowed = ~uint64_t{0};  // bit i: a gradient flowed into output i (set before apply)
  /** Non-leaf outputs that retain their gradient: (output number, tensor state). */
  std::vector<std::pair<uint32_t, std::weak_ptr<AutogradMeta>>> retained;
  /** What the engine asks of a node without a dynamic_cast. */
  enum class Kind : uint8_t { other, formula, accumulate_grad };
  Kind kind = Kind::other;
};

// Grad mode (grad_enabled, NoGradGuard, GradModeGuard, InferenceModeGuard) is in
// kiln/dispatch/grad_mode.h, below autograd.

// ---- the engine -----------------------------------------------------------------
/** (G5) Accumulates d(sum of outputs[i] * grad_outputs[i]) / d(leaf) into every leaf's
 * grad(). A scalar output may omit its gradient (1); others need one. Without
 * `retain_graph` the graph's saved tensors are freed. With `create_graph` the backward is
 * recorded (graph kept) and the leaves' grad() have histories, summed out of place. */
void backward(const TensorList& outputs, const TensorList& grad_outputs = {},
              bool retain_graph = false, bool create_graph = false);

/** The gradients of `outputs` w.r.t. `inputs` (leaves or not), returned instead of
 * accumulated: nothing's grad() changes. An input the outputs do not depend on is an
 * error unless `allow_unused` (then its gradient is undefined). With `create_graph` the
 * backward is itself recorded (and the graph kept): the gradients require grad and can
 * be differentiated again, as torch.autograd.grad(..., create_graph=True). */
TensorList grad(const TensorList& outputs, const TensorList& inputs,
                const TensorList& grad_outputs = {}, bool retain_graph = false,
                bool allow_unused = false, bool create_graph = false);

/** The edge through which a gradient reaches `t` (its grad_fn, or its accumulator when
 * it is a leaf requiring grad); invalid when `t` needs no gradient. */
Edge gradient_edge(const Tensor& t);

/** A backward step written as a function of the gradient of one output, for the
 * differentiable conversions that are not ops (DTensor's from_local, to_local and
 * redistribute): `backward(grad)` gives the gradient of the one input. */
class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, std::function<Tensor(const Tensor&)> backward)
      : name_(std::move(name)), backward_(std::move(backward)) {}
  std::string name() const override { return name_; }
  GradList apply(GradList& grads) override;

 private:
  std::string name_;
  std::function<Tensor(const Tensor&)> backward_;
};

/** Records `output = f(input)` when grad mode is on and `input` needs a gradient: the
 * output gets a FunctionNode named `name` whose edge leads to `input`. Returns whether
 * it recorded. `output` must be a fresh tensor (its own impl). */
bool record_function(const Tensor& output, const Tensor& input, std::string name,
                     std::function<Tensor(const Tensor&)> backward);

/** grad() at edges taken earlier (`edges[i]` = gradient_edge(inputs[i]) when it was
 * taken; `inputs` give subclass gradients their placement): the gradient w.r.t. a
 * value an in-place write has since replaced. For joint capture. */
TensorList grad_at(const TensorList& outputs, const TensorList& inputs,
                   const std::vector<Edge>& edges, const TensorList& grad_outputs,
                   bool allow_unused);

/** While alive, leaves that require grad may be written in place on this thread: the
 * write's node sends the gradient of the old value to the leaf's accumulator, which
 * grad_at() can capture. Joint capture only (J2: an input that requires grad, mutated);
 * eager code gets the usual error. */
class WritableLeavesGuard : ScopeGuard {
 public:
  WritableLeavesGuard();
  ~WritableLeavesGuard();

 private:
  bool prev_;
};

// ---- the derivative table (derivatives.cpp) ---------------------------------------
/** How an op is differentiated: one entry per op of the table (G2). */
enum class Differentiable : uint8_t { missing, no, yes };
/** `no`: the op has no gradient (comparisons, indices, factories); `yes`: it has a
 * backward formula (in-place ops use their functional op's formula). */
Differentiable differentiability(ops::OpKind op);

namespace detail {
bool install_layer();  // kiln/autograd/variable.cpp
/** Every file that includes this header installs autograd before its own statics run,
 * and pulls autograd out of a static libkiln.a into its program (Note [Autograd methods
 * through a hook] in kiln/core/tensor.h). */
inline const bool kInstalled = install_layer();
}  // namespace detail

}  // namespace kiln::autograd

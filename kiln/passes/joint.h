#pragma once
// Joint capture: forward and backward traced together, recorded into a forward and a
// backward graph (J1-J3, kiln's AOTAutograd).
//
// Note [Joint capture]
// The function runs under ProxyMode -> FunctionalizeMode -> FakeMode on (fake twins of)
// its inputs; inputs that require grad are leaves whose gradient edges (accumulators) are
// taken before the function runs, and the function may even write them in place
// (WritableLeavesGuard: the write's node sends the old value's gradient to that edge);
// autograd::grad_at of the outputs at those edges then runs the backward formulas
// through the same modes.
// Forward and backward are recorded straight into their own graphs (no joint graph to
// partition and copy): once the function returns, the forward's outputs and write-backs
// are known, so the nodes they need are marked, and the recorder switches to the
// backward graph. A forward value a backward op reads is imported on first use: saved
// (a backward input and a forward output: "save what the formulas read") if a marked
// node made it, recomputed in backward if no forward output needs its node (autograd's
// alias of a saved result), copied if a constant. Write-backs of inputs that need no
// gradient are recorded last, back in the forward graph, as epilogue copy_ nodes under
// NoClobberScope (J3: they never rebind earlier nodes); a saved input they overwrite is
// saved as a clone taken before them. Values the formulas derive (cos(x) for sin) are
// computed in backward.

#include <functional>
#include <string>
#include <vector>

#include "kiln/passes/functionalize.h"
#include "kiln/trace/dynamic.h"

namespace kiln::passes {

struct JointOptions {
  MakeFxOptions::Mode mode = MakeFxOptions::Mode::fake;
  /** (J2) Where data mutations of inputs that need no gradient (or that require grad
   * but were written only under no-grad) are written back; other writes of inputs that
   * require grad are always out of graph. */
  WriteBack write_back = WriteBack::in_graph;
  std::vector<std::string> input_names;
  /** Which inputs to differentiate; default: those whose requires_grad() is true. */
  std::vector<bool> requires_grad;
  /** (Y1) Per input, its dynamic dims (fewer entries than inputs: the rest static), as
   * ExportOptions::dynamic_shapes: both graphs then have symbolic sizes, and run_joint
   * runs them at any sizes their ranges and guards allow. Fake mode only. */
  std::vector<InputDims> dynamic_shapes;
};

/** A partitioned training graph. Forward: primals -> [out-of-graph mutations (per input
 * in order: its new view when its geometry changed, its new value when written out of
 * graph), user outputs, saved values]; in-graph mutations are epilogue copy_ nodes. Backward:
 * [saved values, tangents] -> [one gradient per differentiable input that the outputs use, the new
 * value of each input the backward writes]. */
struct JointProgram {
  ir::Graph forward;
  ir::Graph backward;
  std::vector<InputMutation> inputs;  // per primal input
  int num_mutation_outputs = 0;       // out-of-graph mutations, in input order
  int num_user_outputs = 0;
  int num_saved = 0;
  std::vector<int> tangent_of;  // per backward tangent input: the user output it is for
  std::vector<int> grad_of;     // per backward output: the primal input it is the gradient of
  /** Inputs a backward formula writes in place (a saved input, or a view of one): after
   * the gradients, the backward graph returns each one's new value, in this order, and
   * run_joint copies it into the input, as eager's backward writes it. */
  std::vector<int> backward_mutated;
  /** Inputs captured as overlapping views of one storage; run_joint checks the inputs it
   * is given alias the same way (Note [Aliased inputs]). */
  std::vector<InputAlias> overlapping_inputs;
  /** (S4) Per user output, and per gradient in grad_of's order: the DTensor it was traced
   * as (mesh, placements, global shape; no autograd history), undefined for a plain
   * tensor. run_joint returns DTensors like them, as AOTAutograd rewraps subclass outputs
   * (a global shape with dynamic dims: the local shard, unwrapped). */
  TensorList output_like, grad_like;
  /** (Y4) The symbols and guards of a capture with dynamic dims (empty if static). */
  ShapeSpec shapes;
  /** Bytes of the saved values (from their metadata). */
  int64_t saved_bytes() const;
};

/** (J1-J3) Traces fn's forward and backward into one functional graph and partitions it.
 * An in-place metadata op on an input (t_, ...) is replayed by run_joint (InputMutation::
 * metadata_mutated).
 * DTensor inputs are traced on their shards (S4, Note [Tensor subclasses under
 * capture]): the graphs are this rank's, with functional collectives naming mesh axes. */
JointProgram capture_joint(const std::function<TensorList(const TensorList&)>& fn,
                           const TensorList& inputs, const JointOptions& options = {});

/** What running a JointProgram gives. */
struct JointRun {
  TensorList outputs;  // the user outputs
  TensorList grads;    // per primal input: its gradient, undefined when none
};

/** Runs forward on `inputs` (applying in-graph and out-of-graph input mutations to
 * them, as eager would), then backward with `tangents` (default: ones for scalar
 * outputs), through the IR interpreter. DTensor inputs and tangents run as their local
 * shards; outputs and gradients traced as DTensors come back as DTensors with the
 * placements they had in the capture (JointProgram::output_like, grad_like). */
JointRun run_joint(const JointProgram& program, const TensorList& inputs,
                   const TensorList& tangents = {});

}  // namespace kiln::passes

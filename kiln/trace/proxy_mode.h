#pragma once
// Tracing: ProxyMode records every dispatched op into a Graph; make_fx drives it.
// Rules (T1)-(T4) of docs/rules.md.

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/core/address_map.h"
#include "kiln/core/pool.h"
#include "kiln/core/scope.h"
#include "kiln/fake/fake_mode.h"
#include "kiln/ir/graph.h"

namespace kiln {

/** (T4) While alive, an in-place op does not rebind a tensor that already has a
 * node; a tensor without one still gets one. */
class NoClobberScope : ScopeGuard {
 public:
  NoClobberScope();
  ~NoClobberScope();
  static bool active();

 private:
  bool prev_;
};

/** Records each op into `graph` and forwards it to the modes below. */
class ProxyMode final : public Mode {
 public:
  explicit ProxyMode(ir::Graph& graph);

  /** Adds an input node for `t` and binds it. */
  ir::Ref add_input(const Tensor& t, std::string name);
  /** (T2) The node producing `t`'s current value; a tensor from outside the trace
   * becomes a constant node holding its value. */
  ir::Ref ref_of(const Tensor& t);
  /** Whether `t` has a node (a weak lookup: a dead tensor never matches). */
  bool tracked(const Tensor& t) const;
  /** Records into `graph` from now on (back into an earlier one too). A value recorded
   * into another graph that is read while recording into this one is handed to `import`,
   * which returns the value of this graph that stands for it (joint capture: a saved
   * input of the backward graph); without `import` that is an internal error. */
  void record_into(ir::Graph& graph, std::function<ir::Ref(const ir::Ref&)> import = {});

  Outputs handle(ops::OpKind op, std::span<const Value> args) override;
  /** (T2) A literal made during the trace becomes, at its first use, a constant node
   * holding its real value, even when the modes below made it fake. */
  Tensor lift(const Tensor& literal) override;
  /** `alias` gets `of`'s node (autograd's saved outputs: no alias node per saved value). */
  void alias(const Tensor& alias, const Tensor& of) override;

 private:
  void bind(const Tensor& t, ir::Ref ref);
  struct Entry;
  const Entry* find(const Tensor& t) const;

  ir::Graph* graph_;
  uint32_t graph_index_ = 0;              // of graph_ in graphs_
  std::vector<const ir::Graph*> graphs_;  // every graph recorded into, in first-use order
  std::function<ir::Ref(const ir::Ref&)> import_;
  // (T2) Keyed by impl address, checked against the impl's id (TensorId), so a freed
  // tensor whose address is reused never inherits an old node; holds no tensor. 24 bytes:
  // the graph's index sits where a Ref would pad.
  struct Entry {
    uint64_t id;
    ir::Node* node;
    int32_t output;
    uint32_t graph;  // index in graphs_ of the node's graph
    ir::Ref ref() const { return {node, output}; }
  };
  AddressMap<Entry> table_;
  // Literals made fake below this mode, with their real values, until first use.
  struct Literal {
    uint64_t id;
    Tensor value;
  };
  PoolMap<const TensorImpl*, Literal> literals_;
  CaptureScope capture_;
  ModeGuard guard_;
};

struct MakeFxOptions {
  enum class Mode { fake, real };
  Mode mode = Mode::fake;
  /** Options of the FakeMode used in fake mode (outside tensors are converted). */
  FakeModeOptions fake = {.allow_non_fake_inputs = true};
  /** Names of the input nodes; default arg0, arg1, ... */
  std::vector<std::string> input_names;
};

/** (T1) Traces `fn` on `inputs` into a graph: an input node per input, a call node
 * per dispatched op, one output node. Fake mode runs no real compute. */
ir::Graph make_fx(const std::function<TensorList(const TensorList&)>& fn, const TensorList& inputs,
                  const MakeFxOptions& options = {});

}  // namespace kiln

#pragma once
// kiln::ir — a small, typed, FX-like graph.
//
// Opcodes: input, constant, call, output. Nodes live in a doubly linked list owned
// by the Graph; every node knows its users, and the lists are maintained by the
// Graph's own mutators, so they cannot go stale. Each value carries typed meta
// (shape, strides, offset, dtype, device).

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/core/pool.h"
#include "kiln/ops/op_table.h"

namespace kiln::ir {

class Node;
class Namer;
struct NameLinks;

/** One value a node produces: the node and which of its outputs. */
struct Ref {
  Node* node = nullptr;
  int output = 0;
  bool operator==(const Ref&) const = default;
};
using RefList = std::vector<Ref>;

/** A call argument: like kiln::Value with tensors replaced by references. */
using Arg = std::variant<std::monostate, Ref, RefList, Scalar, int64_t, double, bool, IntList,
                         DType, Device, Str, SymIntList>;

/** Arguments of a call node (pool-allocated: one per traced op). */
using ArgList = std::vector<Arg, PoolAllocator<Arg>>;

/** Typed metadata of one value. */
struct ValueMeta {
  Dims shape, strides;
  SymInt offset = 0;  // symbolic for a view at a symbolic position (Y2)
  DType dtype = DType::f32;
  Device device;
  static ValueMeta of(const Tensor& t);
  /** "f32[8,16]@cpu:0". */
  std::string str() const;
  bool operator==(const ValueMeta& o) const {  // the same expressions, no guard
    return shape == o.shape && strides == o.strides && offset.same_as(o.offset) &&
           dtype == o.dtype && device == o.device;
  }
};

/** One meta entry per output of a node. */
using MetaList = std::vector<ValueMeta, PoolAllocator<ValueMeta>>;
/** A node's users. */
using NodeList = std::vector<Node*, PoolAllocator<Node*>>;

enum class Opcode : uint8_t { input, constant, call, output };

class Node {
 public:
  Opcode opcode() const { return opcode_; }
  /** The op of a call node. */
  ops::OpKind op() const { return op_; }
  /** Unique in its graph; made on first request (Note [Node names]), the same
   * whenever that is. */
  const std::string& name() const {
    if (namer_.load(std::memory_order_acquire)) name_now();
    return name_;
  }
  const ArgList& args() const { return args_; }
  /** One entry per output (none for the output node). */
  const MetaList& meta() const { return meta_; }
  /** Nodes that use this node's values, each once. */
  const NodeList& users() const { return users_; }
  /** The value of a constant node. */
  const Tensor& value() const { return value_; }
  /** Where in user code the node came from (a scope path), possibly empty. */
  const std::string& scope() const { return scope_; }
  /** Dense per-graph index in creation order (never reused): passes keep per-node
   * facts in vectors of Graph::id_bound() entries instead of hash maps. */
  uint32_t id() const { return id_; }
  Node* next() const { return next_; }
  Node* prev() const { return prev_; }
  /** The node's tensor arguments in order. */
  std::vector<Ref> inputs() const;
  /** Calls `f(ref)` for each tensor argument in order (inputs() without a vector). */
  template <typename F>
  void for_each_input(F&& f) const {
    for (const Arg& a : args_) {
      if (auto* r = std::get_if<Ref>(&a))
        f(*r);
      else if (auto* l = std::get_if<RefList>(&a))
        for (const Ref& x : *l) f(x);
    }
  }

  // User-provided, so that `new Node()` does not zero the node before constructing it.
  Node() {}  // NOLINT(modernize-use-equals-default)

 private:
  friend class Graph;
  friend class Namer;
  void name_now() const;
  Opcode opcode_ = Opcode::call;
  ops::OpKind op_ = ops::OpKind::empty;
  bool given_name_ = false;  // name_ holds the asked-for base until the node is named
  bool lends_name_ = false;  // another graph's node is named after this one
  int32_t name_link_ = -1;   // named after another graph's node: its link (Note [Borrowed names])
  mutable std::string name_;
  mutable std::atomic<Namer*> namer_{nullptr};  // set while the name is not made yet
  ArgList args_;
  MetaList meta_;
  NodeList users_;
  Tensor value_;
  std::string scope_;
  Node* prev_ = nullptr;
  Node* next_ = nullptr;
  size_t owner_slot_ = 0;  // index in Graph::owned_ (erase is O(1))
  uint32_t id_ = 0;
};

/** Destroys a node and returns its memory to the pool. */
struct NodeDeleter {
  void operator()(Node* node) const;
};
using NodePtr = std::unique_ptr<Node, NodeDeleter>;

class Graph {
 public:
  Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;
  ~Graph();

  Node* add_input(std::string name, ValueMeta meta);
  /** An input named `prefix` + the name of `source`, a node of graph `from`, + `suffix`
   * (joint capture's saved values: "saved_relu_3"). The source's name is taken when this
   * graph's names are made, so neither graph is named to build it (Note [Borrowed
   * names]); `from` may be changed, moved or destroyed meanwhile. */
  Node* add_input_named_after(Graph& from, Node* source, std::string_view prefix,
                              std::string_view suffix, ValueMeta meta);
  /** A constant holding `value` (a tensor captured from outside the traced code). */
  Node* add_constant(Tensor value, std::string name = "");
  /** A call; `meta` has one entry per output of `op`; named after the op unless `name`. */
  Node* add_call(ops::OpKind op, ArgList args, MetaList meta, std::string scope = "",
                 std::string name = "");
  /** A call inserted right before `before` (a call or the output node); every value it
   * reads must come before it. */
  Node* insert_call(Node* before, ops::OpKind op, ArgList args, MetaList meta,
                    std::string scope = "");
  /** The single output node, appended last. */
  Node* set_output(RefList values);

  /** Replaces every device in node meta and in Device arguments by `f(device)`. */
  void rewrite_devices(const std::function<Device(Device)>& f);
  /** Replaces the value of a constant node (same metadata but the device). */
  void set_constant_value(Node* node, Tensor value);

  /** Removes a node; refuses (value Error) while it has users. */
  void erase(Node* node);
  /** Points `user`'s uses of `from` (any output index i) at `to` (same index). */
  void replace_uses_in(Node* user, Node* from, Node* to);
  /** Points every use of `from` (any output index i) at `to` (same index). */
  void replace_all_uses(Node* from, Node* to);
  /** Makes call node `n` call `op` instead (same arguments and outputs), e.g. its
   * in-place variant. */
  void set_op(Node* n, ops::OpKind op);
  /** Makes call node `n` call `op` with `args` (same outputs: the caller keeps its meta
   * true); every value it reads must come before it. */
  void set_call(Node* n, ops::OpKind op, ArgList args);
  /** Moves input nodes to the front of the list, in the given order (inputs a recorder
   * made on demand, after calls: the saved values of a joint capture's backward). Only
   * before any node of the graph is named: names follow the list order. */
  void move_inputs_to_front(const std::vector<Node*>& inputs);

  Node* first() const { return head_; }
  Node* output() const { return output_; }
  std::vector<Node*> nodes() const;
  std::vector<Node*> inputs() const;
  size_t size() const;
  /** One more than the largest node id so far. */
  uint32_t id_bound() const { return next_id_; }

  /** One line per node, e.g. `%mm : f32[8,16]@cpu:0 = matmul(%x, %w)`. */
  std::string str() const;
  /** Checks ownership, order, users, meta and schemas; throws an invalid_graph Error
   * naming the node and the broken rule. */
  void verify() const;

 private:
  Node* append(NodePtr node);
  void link_uses(Node* n);
  // Makes the names other graphs borrow from this one, before a node they name leaves.
  void settle_lent_names();

  std::vector<NodePtr> owned_;
  Node* head_ = nullptr;
  Node* tail_ = nullptr;
  Node* output_ = nullptr;
  // Note [Node names]: names are made when first asked for (most traced graphs are run
  // or passed on, never printed), by a Namer that keeps the nodes not named yet in
  // creation order. Held by pointer: the nodes point at it and it stays put when the
  // graph moves.
  std::unique_ptr<Namer> namer_;
  std::vector<std::shared_ptr<NameLinks>> lent_;  // names other graphs borrow from this one
  uint32_t next_id_ = 0;
};

/** Removes call and constant nodes whose values nobody uses, never ops that mutate
 * an argument; returns how many nodes were removed. */
int eliminate_dead_code(Graph& graph);
/** Merges identical call nodes (same op, same arguments) that neither mutate nor draw
 * random numbers; mutating ops are barriers. Returns how many were merged. */
int eliminate_common_subexpressions(Graph& graph);
/** Merges constant nodes holding equal values (dtype, shape, device and bytes; dense
 * host data), unless an op mutates one. Returns how many were merged. */
int merge_equal_constants(Graph& graph);

}  // namespace kiln::ir

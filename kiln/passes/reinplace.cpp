#include "kiln/passes/reinplace.h"

#include <array>
#include <unordered_map>

namespace kiln::passes {

using ops::OpKind;

namespace {

// Functional op -> its in-place variant (add -> add_), from the op table.
const std::array<OpKind, ops::kNumOps>& inplace_variants() {
  static const auto table = [] {
    std::array<OpKind, ops::kNumOps> t;
    for (int k = 0; k < ops::kNumOps; ++k) t[k] = static_cast<OpKind>(k);
    for (int k = 0; k < ops::kNumOps; ++k) {
      const ops::OpInfo& info = ops::op_info(static_cast<OpKind>(k));
      if (info.is_inplace() && info.functional != info.kind)
        t[static_cast<size_t>(info.functional)] = info.kind;
    }
    return t;
  }();
  return table;
}

// The in-place variant of a functional op, or the op itself when it has none (extension
// ops are never rewritten: their kernels need not support it).
OpKind inplace_variant(OpKind op) {
  return ops::is_builtin(op) ? inplace_variants()[static_cast<size_t>(op)] : op;
}

bool same_value_shape(const ir::ValueMeta& a, const ir::ValueMeta& b) {
  return a.shape == b.shape && a.dtype == b.dtype && a.device == b.device;
}

}  // namespace

int reinplace_write_backs(ir::Graph& graph,
                          const std::vector<std::pair<ir::Node*, int>>& write_backs) {
  std::vector<ir::Node*> nodes = graph.nodes();
  std::unordered_map<const ir::Node*, int> pos;
  for (size_t i = 0; i < nodes.size(); ++i) pos[nodes[i]] = static_cast<int>(i);
  const auto& outs = std::get<ir::RefList>(graph.output()->args()[0]);
  int rewritten = 0;
  // Whether any user of `v` other than `except` comes after position `at` (the output
  // node counts: it reads the value last).
  auto read_after = [&](const ir::Node* v, const ir::Node* except, int at) {
    for (const ir::Node* u : v->users())
      if (u != except && pos.at(u) > at) return true;
    return false;
  };
  for (auto [input, k] : write_backs) {
    // Back from the written value through views that keep its shape, to its producer.
    ir::Ref r = outs[static_cast<size_t>(k)];
    while (r.node->opcode() == ir::Opcode::call && ops::op_info(r.node->op()).is_view() &&
           r.node->users().size() == 1 && same_value_shape(r.node->meta()[0], input->meta()[0]))
      r = std::get<ir::Ref>(
          r.node->args()[static_cast<size_t>(ops::op_info(r.node->op()).schema.view_of_arg)]);
    // The chain producer <- ... <- input, each link the next one's `self`.
    std::vector<ir::Node*> chain;
    for (ir::Node* n = r.node; n != input;) {
      if (n->opcode() != ir::Opcode::call || n->meta().size() != 1 ||
          !same_value_shape(n->meta()[0], input->meta()[0]) || inplace_variant(n->op()) == n->op())
        break;
      const auto* self = std::get_if<ir::Ref>(&n->args()[0]);
      if (!self || self->output != 0) break;
      chain.push_back(n);
      n = self->node;
      if (n == input) break;
      if (n->opcode() != ir::Opcode::call) {
        chain.clear();
        break;
      }
    }
    if (chain.empty() || std::get<ir::Ref>(chain.back()->args()[0]).node != input) continue;
    // Each link may overwrite what it reads only if nothing reads that value later.
    bool ok = true;
    for (ir::Node* n : chain) {
      const ir::Node* self = std::get<ir::Ref>(n->args()[0]).node;
      if (read_after(self, n, pos.at(n))) ok = false;
      for (size_t a = 1; a < n->args().size(); ++a)  // nor may it read itself elsewhere
        if (auto* x = std::get_if<ir::Ref>(&n->args()[a]); x && x->node == self) ok = false;
    }
    if (!ok) continue;
    for (ir::Node* n : chain) {
      graph.set_op(n, inplace_variant(n->op()));
      ++rewritten;
    }
  }
#ifndef NDEBUG
  graph.verify();
#endif
  return rewritten;
}

}  // namespace kiln::passes

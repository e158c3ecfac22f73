#include "kiln/passes/rematerialize.h"

#include <algorithm>

namespace kiln::passes {

int rematerialize_activations(ir::Graph& graph) {
  std::vector<ir::Node*> nodes = graph.nodes();
  std::vector<size_t> pos(graph.id_bound());
  for (size_t i = 0; i < nodes.size(); ++i) pos[nodes[i]->id()] = i;
  auto by_position = [&](const ir::Node* a, const ir::Node* b) {
    return pos[a->id()] < pos[b->id()];
  };
  int recomputed = 0;
  for (ir::Node* v : nodes) {
    if (v->opcode() != ir::Opcode::call ||
        (v->op() != ops::OpKind::gelu && v->op() != ops::OpKind::silu) || v->users().size() < 2)
      continue;
    const ir::Node* u = std::get<ir::Ref>(v->args()[0]).node;
    size_t u_last = 0;  // where the input is read last
    for (const ir::Node* w : u->users()) u_last = std::max(u_last, pos[w->id()]);
    std::vector<ir::Node*> users(v->users().begin(), v->users().end());
    std::sort(users.begin(), users.end(), by_position);
    std::vector<ir::Node*> late;  // uses after the first where the input is still alive
    for (size_t k = 1; k < users.size(); ++k)
      if (users[k]->opcode() == ir::Opcode::call && pos[users[k]->id()] <= u_last)
        late.push_back(users[k]);
    if (late.empty()) continue;
    ir::Node* copy = graph.insert_call(late.front(), v->op(), v->args(), v->meta(), v->scope());
    for (ir::Node* w : late) graph.replace_uses_in(w, v, copy);
    ++recomputed;
  }
  return recomputed;
}

}  // namespace kiln::passes

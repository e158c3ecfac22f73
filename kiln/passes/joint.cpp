#include "kiln/passes/joint.h"

#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "kiln/autograd/autograd.h"
#include "kiln/ir/interpreter.h"

namespace kiln::passes {

namespace {

// Passes gradients through: the history given to a differentiable input, so the traced
// function may write it in place (a leaf requiring grad could not be) while gradients
// still reach the input's leaf.
class InputIdentity final : public autograd::Node {
 public:
  std::string name() const override { return "InputBackward0"; }
  TensorList apply(TensorList& grads) override { return {grads[0]}; }
};

// Makes `w` a non-leaf whose gradient flows to a fresh leaf; returns the leaf.
Tensor give_history(const Tensor& w) {
  Tensor leaf = w.detach_descriptor();
  leaf.set_requires_grad(true);
  auto node = make_pooled<InputIdentity>();
  node->inputs.push_back({w.shape(), w.dtype(), w.device()});
  node->device = w.device();
  node->next.push_back(autograd::gradient_edge(leaf));
  auto meta = make_pooled<autograd::AutogradMeta>();
  meta->grad_fn = std::move(node);
  w.impl()->autograd = std::move(meta);
  return leaf;
}

// Copies the nodes of a joint graph into a forward or backward graph.
struct Copier {
  ir::Graph& to;
  std::vector<ir::Node*> map;  // by joint node id
  Copier(ir::Graph& to, const ir::Graph& from) : to(to), map(from.id_bound()) {}
  ir::Node*& operator[](const ir::Node* n) { return map[n->id()]; }
  ir::Ref ref(const ir::Ref& r) const {
    ir::Node* n = map[r.node->id()];
    KILN_ASSERT(n);
    return {n, r.output};
  }
  ir::Arg arg(const ir::Arg& a) const {
    if (auto* r = std::get_if<ir::Ref>(&a)) return ref(*r);
    if (auto* l = std::get_if<ir::RefList>(&a)) {
      ir::RefList out;
      for (const ir::Ref& r : *l) out.push_back(ref(r));
      return out;
    }
    return a;
  }
  void copy(const ir::Node* n) {
    if (n->opcode() == ir::Opcode::constant) {
      (*this)[n] = to.add_constant(n->value(), n->name());
      return;
    }
    ir::ArgList args;
    args.reserve(n->args().size());
    for (const ir::Arg& a : n->args()) args.push_back(arg(a));
    (*this)[n] = to.add_call(n->op(), std::move(args), n->meta(), n->scope());
  }
};

// Per-node flags of one graph, by node id.
struct NodeSet {
  std::vector<char> in;
  explicit NodeSet(const ir::Graph& g) : in(g.id_bound()) {}
  bool count(const ir::Node* n) const { return in[n->id()]; }
  bool insert(const ir::Node* n) { return !std::exchange(in[n->id()], 1); }
};

// Marks `n` and every node it reads (`stack`: scratch space, kept between calls).
void mark_ancestors(const ir::Node* n, NodeSet& set, std::vector<const ir::Node*>& stack) {
  stack.assign(1, n);
  while (!stack.empty()) {
    const ir::Node* x = stack.back();
    stack.pop_back();
    if (set.insert(x)) x->for_each_input([&](const ir::Ref& r) { stack.push_back(r.node); });
  }
}

}  // namespace

int64_t JointProgram::saved_bytes() const {
  int64_t bytes = 0;
  const auto& outs = std::get<ir::RefList>(forward.output()->args()[0]);
  for (size_t i = outs.size() - static_cast<size_t>(num_saved); i < outs.size(); ++i) {
    const ir::ValueMeta& m = outs[i].node->meta()[static_cast<size_t>(outs[i].output)];
    bytes += numel_of(m.shape) * static_cast<int64_t>(itemsize(m.dtype));
  }
  return bytes;
}

JointProgram capture_joint(const std::function<TensorList(const TensorList&)>& fn,
                           const TensorList& inputs, const JointOptions& options) {
  JointProgram program;
  program.inputs.resize(inputs.size());
  std::vector<bool> wants(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    wants[i] = i < options.requires_grad.size() ? options.requires_grad[i] : inputs[i].requires_grad();
    KILN_CHECK(!wants[i] || is_floating(inputs[i].dtype()), dtype,
               "[capture_joint] input {} ({}) cannot require grad: not a floating dtype", i,
               inputs[i].meta_str());
  }

  // ---- trace forward + backward into one graph ----
  ir::Graph joint;
  std::optional<FakeMode> fake;
  TensorList traced;
  // Subclass inputs (DTensors) are traced on their inner tensors (Note [Tensor subclasses
  // under capture]): the graph is this rank's.
  if (options.mode == MakeFxOptions::Mode::fake) fake.emplace(FakeModeOptions{.allow_non_fake_inputs = true});
  traced.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    Tensor own = subclass_inner(t).detach_descriptor();
    traced.push_back(fake ? fake->from_real(own) : std::move(own));
  }
  size_t n_primals = inputs.size();
  ir::RefList fw_refs, grad_refs;
  std::vector<int> in_graph_copies;  // inputs written back by epilogue copy_ nodes
  std::vector<ir::Node*> tangent_nodes;
  {
    autograd::GradModeGuard grad_on(true);
    ProxyMode proxy(joint);
    for (size_t i = 0; i < n_primals; ++i)
      proxy.add_input(traced[i], i < options.input_names.size() ? options.input_names[i]
                                                                 : "primals_" + std::to_string(i));
    TensorList new_values(n_primals), results, grads;
    {
      FunctionalizeMode functionalize;  // the traced primals are their own values
      TensorList fn_inputs, leaves;
      for (size_t i = 0; i < n_primals; ++i) {
        fn_inputs.push_back(subclass_rewrap(inputs[i], traced[i]));
        if (wants[i]) leaves.push_back(give_history(fn_inputs[i]));
      }
      TensorList user = fn(fn_inputs);
      for (size_t i = 0; i < n_primals; ++i)
        if (functionalize.mutated(traced[i])) new_values[i] = functionalize.value_of(traced[i]);
      TensorList diff_outputs, tangents;
      for (size_t k = 0; k < user.size(); ++k) {
        Tensor inner = subclass_inner(user[k]);
        results.push_back(functionalize.value_of(inner));
        if (!user[k].requires_grad()) continue;
        // A tangent: a graph input shaped like the output's inner tensor (wrapped like the
        // output, for a subclass).
        Device d = inner.device();
        Tensor t = make_tensor(inner.shape(), inner.dtype(), d, fake ? nullptr : &device_allocator(d), "tangent");
        tangent_nodes.push_back(proxy.add_input(t, "tangents_" + std::to_string(tangents.size())).node);
        program.tangent_of.push_back(static_cast<int>(k));
        diff_outputs.push_back(user[k]);
        tangents.push_back(subclass_rewrap_gradient(user[k], t));
      }
      if (!diff_outputs.empty() && !leaves.empty()) {
        TensorList g = autograd::grad(diff_outputs, leaves, tangents, false, /*allow_unused=*/true);
        for (Tensor& x : g) grads.push_back(x.defined() ? functionalize.value_of(subclass_inner(x)) : Tensor());
      }
    }
    // (J2) Out-of-graph mutations first; inputs that need no gradient are written back by
    // epilogue copies when asked (J3: traced last, rebinding nothing).
    for (size_t i = 0; i < n_primals; ++i) {
      if (!new_values[i].defined()) continue;
      InputMutation& m = program.inputs[i];
      m.data_mutated = true;
      if (!wants[i] && options.write_back == WriteBack::in_graph) {
        m.where = InputMutation::Where::in_graph;
        in_graph_copies.push_back(static_cast<int>(i));
      } else {
        m.where = InputMutation::Where::out_of_graph;
        fw_refs.push_back(proxy.ref_of(new_values[i]));
        ++program.num_mutation_outputs;
      }
    }
    for (const Tensor& r : results) fw_refs.push_back(proxy.ref_of(r));
    program.num_user_outputs = static_cast<int>(results.size());
    size_t k = 0;
    for (size_t i = 0; i < n_primals; ++i) {
      if (!wants[i]) continue;
      const Tensor& g = k < grads.size() ? grads[k] : Tensor();
      ++k;
      if (!g.defined()) continue;
      grad_refs.push_back(proxy.ref_of(g));
      program.grad_of.push_back(static_cast<int>(i));
    }
    for (int i : in_graph_copies) {
      NoClobberScope keep_inputs;  // (M4, J3) the input node stays the input
      copy_(traced[static_cast<size_t>(i)], new_values[static_cast<size_t>(i)]);
    }
    ir::RefList all = fw_refs;
    all.insert(all.end(), grad_refs.begin(), grad_refs.end());
    joint.set_output(std::move(all));
  }

  // ---- partition ----
  std::vector<ir::Node*> nodes = joint.nodes();
  NodeSet tangent_set(joint), forward(joint), backward(joint);
  std::vector<const ir::Node*> stack;
  for (const ir::Node* t : tangent_nodes) tangent_set.insert(t);
  for (const ir::Ref& r : fw_refs) mark_ancestors(r.node, forward, stack);
  for (ir::Node* n : nodes)  // epilogue copies (and any in-place op) belong to forward
    if (n->opcode() == ir::Opcode::call && ops::op_info(n->op()).is_inplace()) mark_ancestors(n, forward, stack);
  for (const ir::Node* t : tangent_nodes)
    KILN_CHECK(!forward.count(t), internal, "[capture_joint] the forward reads tangent {}", t->name());
  for (const ir::Ref& r : grad_refs) mark_ancestors(r.node, backward, stack);

  // Saved: forward values the backward reads (inputs of backward-only nodes, or
  // gradients that are forward values themselves), in forward order.
  std::vector<ir::Ref> saved;
  auto key = [](const ir::Ref& r) { return uint64_t{r.node->id()} << 32 | static_cast<uint32_t>(r.output); };
  std::unordered_map<uint64_t, size_t> saved_at;  // index in `saved` by key(ref)
  auto save = [&](const ir::Ref& r) {
    // Constants are copied into the backward graph rather than saved.
    if (!forward.count(r.node) || r.node->opcode() == ir::Opcode::constant) return;
    if (saved_at.emplace(key(r), saved.size()).second) saved.push_back(r);
  };
  for (ir::Node* n : nodes)
    if (backward.count(n) && !forward.count(n) && !tangent_set.count(n))
      n->for_each_input(save);
  for (const ir::Ref& r : grad_refs) save(r);

  {  // forward graph: primals -> mutations, user outputs, saved values
    Copier c(program.forward, joint);
    for (ir::Node* n : nodes) {
      if (n->opcode() == ir::Opcode::input && !tangent_set.count(n))
        c[n] = program.forward.add_input(n->name(), n->meta()[0]);
    }
    // A saved primal that an epilogue copy overwrites is saved as a copy taken first.
    std::unordered_set<const ir::Node*> overwritten;
    for (int i : in_graph_copies) overwritten.insert(joint.inputs()[static_cast<size_t>(i)]);
    std::unordered_map<const ir::Node*, ir::Node*> saved_copy;
    for (const ir::Ref& r : saved)
      if (overwritten.count(r.node) && !saved_copy.count(r.node))
        saved_copy[r.node] = program.forward.add_call(ops::OpKind::clone, {c.ref(r)}, r.node->meta());
    for (ir::Node* n : nodes)
      if (forward.count(n) && n->opcode() != ir::Opcode::input) c.copy(n);
    ir::RefList outs;
    for (const ir::Ref& r : fw_refs) outs.push_back(c.ref(r));
    for (const ir::Ref& r : saved)
      outs.push_back(saved_copy.count(r.node) ? ir::Ref{saved_copy[r.node], 0} : c.ref(r));
    program.forward.set_output(std::move(outs));
    program.num_saved = static_cast<int>(saved.size());
  }
  {  // backward graph: saved values, tangents -> gradients
    Copier c(program.backward, joint);
    std::vector<ir::Node*> saved_inputs;  // parallel to `saved`
    for (const ir::Ref& r : saved) {
      std::string name = "saved_" + r.node->name() + (r.output ? "_" + std::to_string(r.output) : "");
      saved_inputs.push_back(program.backward.add_input(name, r.node->meta()[static_cast<size_t>(r.output)]));
    }
    for (ir::Node* t : tangent_nodes) c[t] = program.backward.add_input(t->name(), t->meta()[0]);
    auto ref = [&](const ir::Ref& r) -> ir::Ref {
      if (auto it = saved_at.find(key(r)); it != saved_at.end()) return {saved_inputs[it->second], 0};
      return c.ref(r);
    };
    for (ir::Node* n : nodes) {
      if (!backward.count(n) || tangent_set.count(n)) continue;
      if (n->opcode() == ir::Opcode::constant) {
        c.copy(n);
        continue;
      }
      if (forward.count(n)) continue;
      ir::ArgList args;
      args.reserve(n->args().size());
      for (const ir::Arg& a : n->args()) {
        if (auto* r = std::get_if<ir::Ref>(&a)) args.push_back(ref(*r));
        else if (auto* l = std::get_if<ir::RefList>(&a)) {
          ir::RefList out;
          for (const ir::Ref& x : *l) out.push_back(ref(x));
          args.push_back(out);
        } else {
          args.push_back(a);
        }
      }
      c[n] = program.backward.add_call(n->op(), std::move(args), n->meta(), n->scope());
    }
    ir::RefList outs;
    for (const ir::Ref& r : grad_refs) outs.push_back(ref(r));
    program.backward.set_output(std::move(outs));
  }
  ir::eliminate_dead_code(program.forward);
  ir::eliminate_dead_code(program.backward);
#ifndef NDEBUG
  program.forward.verify();
  program.backward.verify();
#endif
  return program;
}

JointRun run_joint(const JointProgram& program, const TensorList& given, const TensorList& given_tangents) {
  autograd::NoGradGuard no_grad;
  TensorList inputs, tangents;  // subclass tensors (DTensors) run as their inner tensors
  for (const Tensor& t : given) inputs.push_back(subclass_inner(t));
  for (const Tensor& t : given_tangents) tangents.push_back(subclass_inner(t));
  TensorList fw = ir::interpret(program.forward, inputs);
  size_t m = static_cast<size_t>(program.num_mutation_outputs);
  size_t u = static_cast<size_t>(program.num_user_outputs);
  // (M5) out-of-graph mutations are applied by the caller's side, as eager would have.
  size_t k = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (program.inputs[i].where != InputMutation::Where::out_of_graph) continue;
    Tensor dst = inputs[i];
    copy_(dst, fw[k++]);
  }
  JointRun run;
  run.outputs.assign(fw.begin() + static_cast<std::ptrdiff_t>(m),
                     fw.begin() + static_cast<std::ptrdiff_t>(m + u));
  TensorList bw_in(fw.begin() + static_cast<std::ptrdiff_t>(m + u), fw.end());
  for (size_t t = 0; t < program.tangent_of.size(); ++t) {
    const Tensor& out = run.outputs[static_cast<size_t>(program.tangent_of[t])];
    if (t < tangents.size() && tangents[t].defined()) {
      bw_in.push_back(tangents[t]);
      continue;
    }
    KILN_CHECK(out.numel() == 1, value,
               "[run_joint] output {} is not a scalar ({}): pass its tangent",
               program.tangent_of[t], out.meta_str());
    bw_in.push_back(ones_like(out));
  }
  run.grads.resize(inputs.size());
  if (!program.grad_of.empty()) {
    TensorList g = ir::interpret(program.backward, bw_in);
    for (size_t j = 0; j < g.size(); ++j) run.grads[static_cast<size_t>(program.grad_of[j])] = g[j];
  }
  return run;
}

}  // namespace kiln::passes

#include "kiln/passes/joint.h"

#include <optional>
#include <unordered_map>
#include <utility>

#include "kiln/autograd/autograd.h"
#include "kiln/core/address_map.h"
#include "kiln/ir/interpreter.h"
#include "kiln/passes/scatter_sums.h"

namespace kiln::passes {

namespace {

// The traced inputs that require grad: leaves of the traced function, whose accumulators
// are where grad_at() takes their gradients (taken before the function runs, so a leaf
// the function writes in place still gets the gradient of its old value). A written leaf
// holds its write's node, which holds the leaf's accumulator, which holds the leaf: the
// leaves' autograd state is dropped when tracing ends, however it ends.
struct Leaves {
  explicit Leaves(size_t most) {
    tensors.reserve(most);
    edges.reserve(most);
  }
  TensorList tensors;
  std::vector<autograd::Edge> edges;
  void add(Tensor& t) {
    t.set_requires_grad(true);
    edges.push_back(autograd::gradient_edge(t));
    tensors.push_back(t);
  }
  ~Leaves() {
    edges.clear();
    for (Tensor& t : tensors) t.impl()->autograd.reset();
  }
};

// The backward graph's view of forward values (Note [Joint capture]). A forward value a
// backward op reads is saved (an input of the backward graph, an output of the forward
// graph), a constant is copied, and a value no forward output needs (autograd's alias of
// a saved result) is recomputed in backward from values imported the same way.
class Saver {
 public:
  Saver(ir::Graph& forward, ir::Graph& backward) : forward_(forward), backward_(backward) {}

  // Marks `r`'s node and every node it reads as needed by the forward graph.
  void need(const ir::Ref& r) {
    needed_.resize(forward_.id_bound());
    stack_.assign(1, r.node);
    while (!stack_.empty()) {
      const ir::Node* x = stack_.back();
      stack_.pop_back();
      if (!std::exchange(needed_[x->id()], 1))
        x->for_each_input([&](const ir::Ref& in) { stack_.push_back(in.node); });
    }
  }

  ir::Ref import(const ir::Ref& r) {
    // Keyed by the address of the node plus the output number (below any node's size).
    const void* key = reinterpret_cast<const char*>(r.node) + r.output;
    if (const ir::Ref* known = memo_.find(key)) return *known;
    ir::Node* n = r.node;
    ir::Ref out;
    if (n->opcode() == ir::Opcode::constant) {
      out = {backward_.add_constant(n->value(), n->name()), 0};
    } else if (n->opcode() == ir::Opcode::input ||
               (n->id() < needed_.size() && needed_[n->id()] && !rematerialized(*n))) {
      // Named after the forward value when the backward's names are made (Note [Borrowed names]).
      std::string suffix = r.output ? fmt::format("_{}", r.output) : std::string();
      ir::Node* in = backward_.add_input_named_after(forward_, n, "saved_", suffix,
                                                     n->meta()[static_cast<size_t>(r.output)]);
      saved.push_back(r);
      saved_inputs.push_back(in);
      out = {in, 0};
    } else {  // recomputed: one copy of the node, whichever of its outputs is read first
      ir::Node* const* made = recomputed_.find(n);
      ir::Node* copy = made ? *made : nullptr;
      if (!copy) {
        ir::ArgList args;
        args.reserve(n->args().size());
        for (const ir::Arg& a : n->args()) {
          if (auto* ref = std::get_if<ir::Ref>(&a)) {
            args.push_back(import(*ref));
          } else if (auto* list = std::get_if<ir::RefList>(&a)) {
            ir::RefList refs;
            for (const ir::Ref& x : *list) refs.push_back(import(x));
            args.push_back(std::move(refs));
          } else {
            args.push_back(a);
          }
        }
        copy = backward_.add_call(n->op(), std::move(args), n->meta(), n->scope());
        recomputed_.set(n, copy);
      }
      out = {copy, r.output};
    }
    memo_.set(key, out);
    return out;
  }

  // Note [Recomputed activations] (kiln/passes/rematerialize.h), as in train steps.
  static bool rematerialized(const ir::Node& n) {
    return n.opcode() == ir::Opcode::call &&
           (n.op() == ops::OpKind::gelu || n.op() == ops::OpKind::silu);
  }

  std::vector<ir::Ref> saved;           // forward values the backward reads, first use first
  std::vector<ir::Node*> saved_inputs;  // their inputs in the backward graph

 private:
  ir::Graph& forward_;
  ir::Graph& backward_;
  std::vector<char> needed_;  // by forward node id
  std::vector<const ir::Node*> stack_;
  AddressMap<ir::Ref> memo_{32};
  AddressMap<ir::Node*> recomputed_{16};
};

// The traced subclass spec of an output, without the capture's autograd history.
Tensor traced_spec(const Tensor& traced) {
  return traced.defined() && traced.is_dtensor() ? traced.detach_descriptor() : Tensor();
}
// A local result as the subclass it was traced as (S4).
Tensor rewrap_like(const Tensor& like, const Tensor& local) {
  if (!like.defined() || !local.defined() || like.shape().is_symbolic()) return local;
  return subclass_rewrap(like, local);
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
    wants[i] =
        i < options.requires_grad.size() ? options.requires_grad[i] : inputs[i].requires_grad();
    KILN_CHECK(!wants[i] || is_floating(inputs[i].dtype()), dtype,
               "[capture_joint] input {} ({}) cannot require grad: not a floating dtype", i,
               inputs[i].meta_str());
  }

  // ---- trace forward, then backward into its own graph ----
  std::optional<FakeMode> fake;
  TensorList traced;
  // Subclass inputs (DTensors) are traced on their inner tensors (Note [Tensor subclasses
  // under capture]): the graph is this rank's.
  if (options.mode == MakeFxOptions::Mode::fake)
    fake.emplace(FakeModeOptions{.allow_non_fake_inputs = true});
  {
    TensorList
        own;  // descriptors of their own: the traced leaves' autograd state is not the caller's
    for (const Tensor& t : inputs) own.push_back(subclass_inner(t).detach_descriptor());
    traced = traced_inputs(own, fake ? &*fake : nullptr,
                           program.overlapping_inputs);  // Note [Aliased inputs]
  }
  // (Y1) Declared dynamic dims make the fake primals symbolic; forward and backward are
  // traced with their ShapeEnv active, whose guards become the program's ShapeSpec.
  ShapeEnv env;
  std::optional<ShapeEnvGuard> symbolic;
  if (!options.dynamic_shapes.empty()) {
    KILN_CHECK(fake, value,
               "[capture_joint] dynamic shapes need fake mode (MakeFxOptions::Mode::fake)");
    TensorList examples;
    for (const Tensor& t : inputs) examples.push_back(subclass_inner(t));
    kiln::detail::declare_dynamic_dims(env, traced, examples, options.dynamic_shapes);
    env.scope_provider = [] { return current_scope(); };
    symbolic.emplace(&env);
  }
  size_t n_primals = inputs.size();
  ir::Graph &fw = program.forward, &bw = program.backward;
  Saver saver(fw, bw);
  ir::RefList fw_refs, grad_refs, backward_writes;
  std::vector<int> in_graph_copies;  // inputs written back by epilogue copy_ nodes
  std::vector<ir::Node*> primal_nodes, tangent_nodes;
  std::unordered_map<const ir::Node*, ir::Node*>
      saved_copy;  // overwritten saved primal -> its copy
  {
    autograd::GradModeGuard grad_on(true);
    ProxyMode proxy(fw);
    primal_nodes.reserve(n_primals);
    for (size_t i = 0; i < n_primals; ++i)
      primal_nodes.push_back(proxy
                                 .add_input(traced[i], i < options.input_names.size()
                                                           ? options.input_names[i]
                                                           : "primals_" + std::to_string(i))
                                 .node);
    TensorList new_values(n_primals), grads, grads_like;
    {
      FunctionalizeMode functionalize;  // the traced primals are their own values
      TensorList fn_inputs;
      fn_inputs.reserve(n_primals);
      Leaves leaves(n_primals);
      for (size_t i = 0; i < n_primals; ++i) {
        fn_inputs.push_back(subclass_rewrap(inputs[i], traced[i]));
        if (wants[i]) leaves.add(fn_inputs.back());
      }
      InputGeometry geometry(traced);
      TensorList user = [&] {
        autograd::WritableLeavesGuard writable;  // (J2) an input requiring grad may be mutated
        return fn(fn_inputs);
      }();
      std::vector<bool> reshaped = geometry.changed(traced);
      // (J2) The forward's outputs, known before backward is traced: out-of-graph
      // mutations first; inputs that need no gradient are written back by epilogue
      // copies when asked (J3: traced last, rebinding nothing). An input whose geometry
      // changed (t_, ...: never one that requires grad, autograd refuses those) returns
      // its new view of the input first: run_joint takes its shape, strides and offset.
      for (size_t i = 0; i < n_primals; ++i) {
        if (reshaped[i]) {
          program.inputs[i].metadata_mutated = true;
          fw_refs.push_back(proxy.ref_of(traced[i]));
          ++program.num_mutation_outputs;
        }
        if (!functionalize.mutated(traced[i])) continue;
        new_values[i] = functionalize.value_of(traced[i]);
        InputMutation& m = program.inputs[i];
        m.data_mutated = true;
        // (J2) In graph: an input that needs no gradient, and, as AOTAutograd, one that
        // requires grad but was written only under no-grad (autograd never saw the write).
        bool hidden = !wants[i] || !functionalize.written_with_grad(traced[i]);
        if (hidden && options.write_back == WriteBack::in_graph) {
          m.where = InputMutation::Where::in_graph;
          in_graph_copies.push_back(static_cast<int>(i));
          saver.need(proxy.ref_of(new_values[i]));
        } else {
          m.where = InputMutation::Where::out_of_graph;
          fw_refs.push_back(proxy.ref_of(new_values[i]));
          ++program.num_mutation_outputs;
        }
      }
      for (const Tensor& u : user) {
        fw_refs.push_back(proxy.ref_of(functionalize.value_of(subclass_inner(u))));
        program.output_like.push_back(traced_spec(u));
      }
      program.num_user_outputs = static_cast<int>(user.size());
      for (const ir::Ref& r : fw_refs) saver.need(r);
      for (ir::Node* n = fw.first(); n; n = n->next())  // any in-place op stays in forward
        if (n->opcode() == ir::Opcode::call && ops::op_info(n->op()).is_inplace())
          saver.need({n, 0});

      proxy.record_into(bw, [&saver](const ir::Ref& r) { return saver.import(r); });
      TensorList diff_outputs, tangents;
      for (size_t k = 0; k < user.size(); ++k) {
        if (!user[k].requires_grad()) continue;
        // A tangent: a graph input shaped like the output's inner tensor (wrapped like the
        // output, for a subclass).
        Tensor inner = subclass_inner(user[k]);
        Device d = inner.device();
        Tensor t = make_tensor(inner.shape(), inner.dtype(), d,
                               fake ? nullptr : &device_allocator(d), "tangent");
        tangent_nodes.push_back(
            proxy.add_input(t, "tangents_" + std::to_string(tangents.size())).node);
        program.tangent_of.push_back(static_cast<int>(k));
        diff_outputs.push_back(user[k]);
        tangents.push_back(subclass_rewrap_gradient(user[k], t));
      }
      // The writes each primal had in forward: a backward formula may write a saved input.
      std::vector<uint64_t> forward_writes(n_primals);
      for (size_t i = 0; i < n_primals; ++i) forward_writes[i] = functionalize.writes(traced[i]);
      if (!diff_outputs.empty() && !leaves.tensors.empty()) {
        grads.reserve(leaves.tensors.size());
        TensorList g = autograd::grad_at(diff_outputs, leaves.tensors, leaves.edges, tangents,
                                         /*allow_unused=*/true);
        for (Tensor& x : g) {
          grads.push_back(x.defined() ? functionalize.value_of(subclass_inner(x)) : Tensor());
          grads_like.push_back(traced_spec(x));
        }
      }
      // (J2) Writes made in backward: the new values are outputs of the backward graph,
      // after the gradients, applied to the inputs by whoever runs it (run_joint).
      for (size_t i = 0; i < n_primals; ++i) {
        if (functionalize.writes(traced[i]) == forward_writes[i]) continue;
        backward_writes.push_back(proxy.ref_of(functionalize.value_of(traced[i])));
        program.backward_mutated.push_back(static_cast<int>(i));
      }
    }
    size_t k = 0;
    for (size_t i = 0; i < n_primals; ++i) {
      if (!wants[i]) continue;
      const Tensor& g = k < grads.size() ? grads[k] : Tensor();
      ++k;
      if (!g.defined()) continue;
      grad_refs.push_back(proxy.ref_of(g));  // a forward value is saved
      program.grad_of.push_back(static_cast<int>(i));
      program.grad_like.push_back(grads_like[k - 1]);
    }

    // Back in forward: a saved primal that an epilogue copy overwrites is saved as a copy
    // taken first, then the epilogue copies.
    proxy.record_into(fw);
    for (int i : in_graph_copies) saved_copy[primal_nodes[static_cast<size_t>(i)]] = nullptr;
    for (const ir::Ref& r : saver.saved)
      if (auto it = saved_copy.find(r.node); it != saved_copy.end() && !it->second)
        it->second = fw.add_call(ops::OpKind::clone, {r}, r.node->meta());
    for (int i : in_graph_copies) {
      NoClobberScope keep_inputs;  // (M4, J3) the input node stays the input
      copy_(traced[static_cast<size_t>(i)], new_values[static_cast<size_t>(i)]);
    }
  }
  ir::RefList outs = fw_refs;
  for (const ir::Ref& r : saver.saved) {
    auto it = saved_copy.find(r.node);
    outs.push_back(it != saved_copy.end() && it->second ? ir::Ref{it->second, 0} : r);
  }
  fw.set_output(std::move(outs));
  program.num_saved = static_cast<int>(saver.saved.size());
  std::vector<ir::Node*> bw_inputs = saver.saved_inputs;  // saved values, then tangents
  bw_inputs.insert(bw_inputs.end(), tangent_nodes.begin(), tangent_nodes.end());
  bw.move_inputs_to_front(bw_inputs);
  grad_refs.insert(grad_refs.end(), backward_writes.begin(), backward_writes.end());
  bw.set_output(std::move(grad_refs));
  ir::eliminate_dead_code(program.forward);
  ir::eliminate_common_subexpressions(program.backward);  // d(x*x) = g*x + g*x: one product
  ir::eliminate_dead_code(program.backward);
  merge_disjoint_scatters(program.backward);  // Note [Sums of disjoint scatters]
#ifndef NDEBUG
  program.forward.verify();
  program.backward.verify();
#endif
  if (symbolic) {
    symbolic.reset();
    program.shapes = kiln::detail::settle_shapes(env);
  }
  return program;
}

JointRun run_joint(const JointProgram& program, const TensorList& given,
                   const TensorList& given_tangents) {
  autograd::NoGradGuard no_grad;
  check_input_aliasing(given, program.overlapping_inputs, "run_joint");
  TensorList inputs, tangents;  // subclass tensors (DTensors) run as their inner tensors
  for (const Tensor& t : given) inputs.push_back(subclass_inner(t));
  for (const Tensor& t : given_tangents) tangents.push_back(subclass_inner(t));
  // (Y4) A capture with dynamic dims binds its symbols from the inputs' sizes (checked
  // against ranges and guards) and runs both graphs at them.
  std::vector<int64_t> binding;
  if (!program.shapes.empty()) {
    std::vector<std::pair<std::string, const ir::ValueMeta*>> metas;
    for (ir::Node* n : program.forward.inputs()) metas.emplace_back(n->name(), &n->meta()[0]);
    binding = bind_symbols(program.shapes, metas, inputs);
  }
  ir::SymbolValues values;
  if (!binding.empty())
    values = [&](const sym::Expr* s) {
      return binding[static_cast<size_t>(program.shapes.index_of(s))];
    };
  TensorList fw = ir::interpret(program.forward, inputs, values);
  size_t m = static_cast<size_t>(program.num_mutation_outputs);
  size_t u = static_cast<size_t>(program.num_user_outputs);
  // (M5) out-of-graph mutations are applied by the caller's side, as eager would have:
  // the new geometry first (the input's view the forward returned), then the new data.
  size_t k = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor dst = inputs[i];
    if (program.inputs[i].metadata_mutated) {
      const Tensor& view = fw[k++];
      KILN_CHECK(view.storage() && view.storage() == dst.storage(), internal,
                 "[run_joint] input {}'s new view does not view the input", i);
      as_strided_(dst, view.shape().vec(), view.strides().vec(), view.offset());
    }
    if (program.inputs[i].where == InputMutation::Where::out_of_graph) copy_(dst, fw[k++]);
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
  for (size_t k = 0; k < run.outputs.size(); ++k)
    run.outputs[k] = rewrap_like(program.output_like[k], run.outputs[k]);
  run.grads.resize(inputs.size());
  if (!program.grad_of.empty() || !program.backward_mutated.empty()) {
    TensorList g = ir::interpret(program.backward, bw_in, values);
    size_t n_grads = program.grad_of.size();
    for (size_t j = 0; j < n_grads; ++j)
      run.grads[static_cast<size_t>(program.grad_of[j])] = rewrap_like(program.grad_like[j], g[j]);
    for (size_t j = 0; j < program.backward_mutated.size();
         ++j) {  // writes made in backward, as eager
      Tensor dst = inputs[static_cast<size_t>(program.backward_mutated[j])];
      copy_(dst, g[n_grads + j]);
    }
  }
  return run;
}

}  // namespace kiln::passes

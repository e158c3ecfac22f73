#include "kiln/program/program.h"

#include <algorithm>

#include "kiln/dispatch/dispatch.h"
#include "kiln/dispatch/grad_mode.h"
#include "kiln/ir/interpreter.h"

namespace kiln {

using Kind = InputSpec::Kind;

std::string_view to_string(InputSpec::Kind kind) {
  switch (kind) {
    case Kind::parameter: return "parameter";
    case Kind::buffer: return "buffer";
    case Kind::constant: return "constant";
    case Kind::workspace: return "workspace";
    case Kind::user_input: return "user_input";
    case Kind::optimizer_state: return "optimizer_state";
  }
  return "?";
}

std::string_view to_string(OutputSpec::Kind kind) {
  switch (kind) {
    case OutputSpec::Kind::user_output: return "user_output";
    case OutputSpec::Kind::buffer_mutation: return "buffer_mutation";
    case OutputSpec::Kind::user_input_mutation: return "user_input_mutation";
    case OutputSpec::Kind::loss_output: return "loss_output";
    case OutputSpec::Kind::gradient_to_parameter: return "gradient_to_parameter";
    case OutputSpec::Kind::parameter_mutation: return "parameter_mutation";
    case OutputSpec::Kind::optimizer_state_mutation: return "optimizer_state_mutation";
  }
  return "?";
}

namespace {

std::string node_name(std::string_view prefix, const std::string& fqn) {
  std::string s(prefix);
  for (char c : fqn) s += c == '.' ? '_' : c;
  return s;
}

Tensor* find(NamedTensors& list, const std::string& name) {
  for (auto& [n, t] : list)
    if (n == name) return &t;
  return nullptr;
}

// Swaps the module's registered tensors with traced ones for the duration of a trace.
struct Swap {
  std::vector<Tensor*> slots;
  TensorList saved;
  Swap(std::vector<Tensor*> s, const TensorList& traced) : slots(std::move(s)) {
    for (size_t i = 0; i < slots.size(); ++i) {
      saved.push_back(*slots[i]);
      *slots[i] = traced[i];
    }
  }
  ~Swap() {
    for (size_t i = 0; i < slots.size(); ++i) *slots[i] = saved[i];
  }
};

}  // namespace

ExportedProgram export_program(nn::Module& module, const TensorList& example_inputs,
                               const ExportOptions& options) {
  ExportedProgram program;
  std::vector<nn::NamedTensor> named = module.named_tensors();
  Device device = options.device   ? resolve_device(*options.device)
                  : !named.empty() ? named[0].tensor->device()
                                   : example_inputs.at(0).device();

  // Inputs in signature order: parameters, buffers, workspaces, user inputs.
  std::vector<nn::NamedTensor> lifted;
  for (auto kind : {nn::SlotKind::parameter, nn::SlotKind::buffer, nn::SlotKind::workspace})
    for (const nn::NamedTensor& t : named)
      if (t.kind == kind) lifted.push_back(t);
  std::vector<std::string> names;
  TensorList traced;
  {
    FakeMode fake;  // (F1) twins on the trace device, present or not
    for (const nn::NamedTensor& t : lifted) traced.push_back(to(fake.from_real(*t.tensor), device));
    for (const Tensor& x : example_inputs) traced.push_back(to(fake.from_real(x), device));
  }
  for (const nn::NamedTensor& t : lifted) {
    InputSpec spec;
    switch (t.kind) {
      case nn::SlotKind::parameter:
        spec = {Kind::parameter, node_name("p_", t.name), t.name};
        break;
      case nn::SlotKind::buffer:
        spec = {Kind::buffer, node_name("b_", t.name), t.name, t.persistent};
        break;
      case nn::SlotKind::workspace:
        spec = {Kind::workspace, node_name("w_", t.name), t.name, false};
        break;
    }
    names.push_back(spec.name);
    program.signature.inputs.push_back(spec);
  }
  for (size_t i = 0; i < example_inputs.size(); ++i) {
    std::string target = "input_" + std::to_string(i);
    names.push_back(target);
    program.signature.inputs.push_back({Kind::user_input, target, target});
  }

  std::vector<Tensor*> slots;
  for (const nn::NamedTensor& t : lifted) slots.push_back(t.tensor);
  size_t n_lifted = lifted.size();
  // (Y1) Declared dynamic dims make the fake user inputs symbolic; the trace then runs
  // with their ShapeEnv active, which records every decision taken on them (Y2). It is
  // active for a static program too: a data-dependent op makes its unbacked sizes there
  // (Y3); with integer sizes it is never consulted (Y6).
  ShapeEnv env;
  std::optional<ShapeEnvGuard> symbolic;
  if (!options.dynamic_shapes.empty()) {
    TensorList user(traced.begin() + static_cast<std::ptrdiff_t>(n_lifted), traced.end());
    detail::declare_dynamic_dims(env, user, example_inputs, options.dynamic_shapes);
  }
  env.scope_provider = [] { return current_scope(); };
  symbolic.emplace(&env);
  auto fn = [&](const TensorList& in) {
    Swap swap(slots, in);
    TensorList user(in.begin() + static_cast<std::ptrdiff_t>(n_lifted), in.end());
    return module(user);
  };
  passes::CapturedProgram captured = passes::capture(
      fn, traced, {.write_back = passes::WriteBack::out_of_graph, .input_names = names});
  if (symbolic) {
    symbolic.reset();
    program.shapes = detail::settle_shapes(env);
  }
  // (X4) State: parameters and persistent buffers; constants: non-persistent buffers
  // (tensor constants: finish_program); workspaces as recipes.
  for (const nn::NamedTensor& t : lifted) {
    if (t.kind == nn::SlotKind::workspace)
      program.workspaces.push_back({t.name, t.tensor->shape(), t.tensor->dtype(), device});
    else if (t.kind == nn::SlotKind::parameter || t.persistent)
      program.state.emplace_back(t.name, *t.tensor);
    else
      program.constants.emplace_back(t.name, *t.tensor);
  }
  finish_program(program, std::move(captured));
  return program;
}

void finish_program(ExportedProgram& program, passes::CapturedProgram captured) {
  program.graph = std::move(captured.graph);
  ir::merge_equal_constants(program.graph);  // equal constants are stored once

  // (M5) Mutation outputs first, in input order, then user outputs.
  for (size_t i = 0; i < captured.inputs.size(); ++i) {
    if (!captured.inputs[i].data_mutated) continue;
    const InputSpec& in = program.signature.inputs[i];
    // A parameter written in forward (an embedding with max_norm renormalizes the rows it
    // looks up, in place, as PyTorch's export records with PARAMETER_MUTATION): its new
    // value is an output the runtime copies back, as a buffer's.
    program.signature.outputs.push_back(
        {in.kind == Kind::user_input  ? OutputSpec::Kind::user_input_mutation
         : in.kind == Kind::parameter ? OutputSpec::Kind::parameter_mutation
                                      : OutputSpec::Kind::buffer_mutation,
         in.target});
  }
  size_t n_outputs = std::get<ir::RefList>(program.graph.output()->args()[0]).size();
  for (size_t i = program.signature.outputs.size(); i < n_outputs; ++i)
    program.signature.outputs.push_back({OutputSpec::Kind::user_output, ""});
  // (X4) Tensor constants the trace met are stored by their node's name.
  for (ir::Node* n : program.graph.nodes())
    if (n->opcode() == ir::Opcode::constant) program.constants.emplace_back(n->name(), n->value());
}

std::vector<int64_t> ExportedProgram::bind_symbols(const TensorList& user_inputs) const {
  if (shapes.empty()) return {};
  std::vector<ir::Node*> nodes = graph.inputs();
  std::vector<std::pair<std::string, const ir::ValueMeta*>> metas;  // user inputs
  for (size_t i = 0; i < signature.inputs.size() && i < nodes.size(); ++i)
    if (signature.inputs[i].kind == Kind::user_input)
      metas.emplace_back(signature.inputs[i].target, &nodes[i]->meta()[0]);
  return kiln::bind_symbols(shapes, metas, user_inputs);
}

TensorList ExportedProgram::bind_inputs(const TensorList& user_inputs,
                                        std::vector<int64_t>* binding) {
  std::vector<int64_t> symbols = bind_symbols(user_inputs);  // (Y4) checks every size first
  if (binding) *binding = std::move(symbols);
  std::vector<ir::Node*> nodes = graph.inputs();
  size_t n_user = std::count_if(signature.inputs.begin(), signature.inputs.end(),
                                [](const InputSpec& s) { return s.kind == Kind::user_input; });
  KILN_CHECK(user_inputs.size() == n_user, value, "[run] the program takes {} user inputs, got {}",
             n_user, user_inputs.size());
  TensorList inputs;
  size_t next_user = 0;
  for (size_t i = 0; i < signature.inputs.size(); ++i) {
    const InputSpec& spec = signature.inputs[i];
    Tensor* t = nullptr;
    switch (spec.kind) {
      case Kind::parameter:
      case Kind::optimizer_state: t = find(state, spec.target); break;
      case Kind::buffer:
        t = spec.persistent ? find(state, spec.target) : find(constants, spec.target);
        break;
      case Kind::constant: t = find(constants, spec.target); break;
      case Kind::workspace:
        if (!(t = find(workspace_values_, spec.target))) {
          auto r = std::find_if(workspaces.begin(), workspaces.end(),
                                [&](const WorkspaceRecipe& w) { return w.name == spec.target; });
          KILN_CHECK(r != workspaces.end(), value, "[run] no recipe for workspace '{}'",
                     spec.target);
          workspace_values_.emplace_back(
              r->name, zeros(r->shape.vec(), {.dtype = r->dtype, .device = r->device}));
          t = &workspace_values_.back().second;
        }
        break;
      case Kind::user_input: {
        const Tensor& u = user_inputs[next_user++];
        const ir::ValueMeta& m = nodes[i]->meta()[0];
        // (Y4) a symbolic shape was checked by bind_symbols
        bool fits = u.defined() &&
                    (m.shape.is_symbolic() ? u.dim() == static_cast<int64_t>(m.shape.size())
                                           : u.shape() == m.shape) &&
                    u.dtype() == m.dtype;
        if (!fits || u.device() != m.device)  // (R3) a wrong device alone is a device mismatch
          fail(fits ? ErrorKind::device_mismatch : ErrorKind::value,
               "[run] input '{}' expects {}, got {}{}", spec.target, m.str(),
               u.defined() ? ir::ValueMeta::of(u).str() : "an undefined tensor",
               u.defined() && u.shape() != m.shape
                   ? " (export with dynamic_shapes to accept other sizes)"
                   : "");
        inputs.push_back(u);
        continue;
      }
    }
    KILN_CHECK(t, value, "[run] the program has no value for input '{}'", spec.target);
    inputs.push_back(*t);
  }
  return inputs;
}

TensorList ExportedProgram::write_back(const TensorList& outs, const TensorList& user_inputs) {
  TensorList user_outputs;
  for (size_t i = 0; i < outs.size(); ++i) {
    const OutputSpec& spec = signature.outputs[i];
    if (!spec.is_mutation()) {
      user_outputs.push_back(outs[i]);
      continue;
    }
    Tensor* dst = nullptr;
    if (spec.kind == OutputSpec::Kind::user_input_mutation) {
      size_t k = std::stoul(spec.target.substr(6));  // "input_N"
      dst = const_cast<Tensor*>(&user_inputs[k]);
    } else if (!(dst = find(state, spec.target)) && !(dst = find(constants, spec.target))) {
      dst = find(workspace_values_, spec.target);
    }
    KILN_CHECK(dst, value, "[run] no target '{}' for a mutation output", spec.target);
    const Tensor& src = outs[i];
    bool itself = src.storage() == dst->storage() && src.offset() == dst->offset() &&
                  src.shape() == dst->shape() && src.strides() == dst->strides() &&
                  src.dtype() == dst->dtype();
    if (!itself) {                    // re-inplaced updates already wrote it
      autograd::NoGradGuard no_grad;  // a state update (a parameter's too), not differentiated
      copy_(*dst, src);
    }
  }
  return user_outputs;
}

TensorList ExportedProgram::run(const TensorList& user_inputs) {
  auto lock = lock_for_run();
  std::vector<int64_t> binding;
  TensorList inputs = bind_inputs(user_inputs, &binding);
  ir::SymbolValues values;
  if (!shapes.empty())
    values = [&](const sym::Expr* s) {
      return binding.at(static_cast<size_t>(shapes.index_of(s)));
    };
  return write_back(ir::interpret(graph, inputs, values), user_inputs);
}

std::unique_lock<std::mutex> ExportedProgram::lock_for_run() const {
  bool writes_own =
      !workspaces.empty() ||
      std::any_of(signature.outputs.begin(), signature.outputs.end(), [](const OutputSpec& s) {
        return s.is_mutation() && s.kind != OutputSpec::Kind::user_input_mutation;
      });
  return writes_own ? std::unique_lock(*run_mutex_) : std::unique_lock<std::mutex>();
}

std::vector<Device> ExportedProgram::devices() const {
  std::vector<Device> out;
  auto add = [&](Device d) {
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  };
  for (ir::Node* n : graph.nodes()) {
    for (const ir::ValueMeta& m : n->meta()) add(m.device);
    for (const ir::Arg& a : n->args())
      if (auto* d = std::get_if<Device>(&a)) add(*d);
  }
  for (const WorkspaceRecipe& w : workspaces) add(w.device);
  return out;
}

std::string ExportedProgram::str() const { return graph.str() + signature_str(); }

std::string ExportedProgram::signature_str() const {
  std::string out = "signature:\n";
  for (const InputSpec& s : signature.inputs)
    out += fmt::format("  input  %{} : {} {}{}\n", s.name, to_string(s.kind), s.target,
                       s.kind == Kind::buffer && !s.persistent ? " (non-persistent)" : "");
  for (size_t i = 0; i < signature.outputs.size(); ++i)
    out += fmt::format("  output {} : {} {}\n", i, to_string(signature.outputs[i].kind),
                       signature.outputs[i].target);
  if (!shapes.empty()) {  // (Y4) the symbols, their ranges and the guards
    out += "shapes:\n";
    std::string body = shapes.str();
    for (size_t at = 0; at < body.size();) {
      size_t end = body.find('\n', at);
      out += "  " + body.substr(at, end - at) + "\n";
      at = end == std::string::npos ? body.size() : end + 1;
    }
  }
  return out;
}

void move_to_device(ExportedProgram& program, Device target) {
  DeviceMap map;
  for (Device d : program.devices()) map.emplace_back(d, target);
  move_to_device(program, map);
}

DeviceMap resolve_device_map(const std::vector<Device>& devices, const DeviceMap& map) {
  auto matches = [](Device key, Device d) {
    return key.has_index() ? key == d : key.type == d.type;
  };
  for (const auto& entry : map) {
    Device key = entry.first;  // (a named copy: clang 14 cannot capture structured bindings)
    if (std::none_of(devices.begin(), devices.end(), [&](Device d) { return matches(key, d); })) {
      std::vector<std::string> names;
      for (Device d : devices) names.push_back(d.str());
      fail(ErrorKind::device,
           "[device map] '{}' matches no device of the program (its devices: {})", key,
           fmt::join(names, ", "));
    }
  }
  DeviceMap out;
  for (Device d : devices) {
    const std::pair<Device, Device>* chosen = nullptr;
    for (const auto& entry : map)  // the first explicit key, else the first type key
      if (matches(entry.first, d) &&
          (!chosen || (entry.first.has_index() && !chosen->first.has_index())))
        chosen = &entry;
    if (chosen) out.emplace_back(d, chosen->second);
  }
  return out;
}

void move_to_device(ExportedProgram& program, const DeviceMap& requested) {
  DeviceMap map = resolve_device_map(program.devices(), requested);
  auto mapped = [&](Device d) {
    for (const auto& [from, to] : map)
      if (from == d) return resolve_device(to);
    return d;
  };
  program.graph.rewrite_devices(mapped);
  // State and constants follow the device of the input node (or constant node) they feed.
  std::map<std::string, Device> input_device;
  for (ir::Node* n : program.graph.nodes())
    if (n->opcode() != ir::Opcode::output && !n->meta().empty())
      input_device[n->name()] = n->meta()[0].device;
  auto device_of = [&](const std::string& target) {
    for (const InputSpec& s : program.signature.inputs)
      if (s.target == target) return input_device.at(s.name);
    return input_device.at(target);  // a constant node's name
  };
  for (auto& [name, t] : program.state) t = to(t, device_of(name));
  for (auto& [name, t] : program.constants) t = to(t, device_of(name));
  for (ir::Node* n : program.graph.nodes())
    if (n->opcode() == ir::Opcode::constant)
      program.graph.set_constant_value(n, *find(program.constants, n->name()));
  for (WorkspaceRecipe& w : program.workspaces) w.device = mapped(w.device);
  std::vector<Device> gone;
  for (const auto& [from, to] : map)
    if (resolve_device(to) != from) gone.push_back(from);
  // A device that is both a source and a target (a swap) is legitimately still used.
  std::erase_if(gone, [&](Device d) {
    return std::any_of(map.begin(), map.end(),
                       [&](const auto& e) { return resolve_device(e.second) == d; });
  });
  verify_no_device(program, gone);
}

void verify_no_device(const ExportedProgram& program, const std::vector<Device>& gone) {
  auto check = [&](Device d, const std::string& where) {
    KILN_CHECK(std::find(gone.begin(), gone.end(), d) == gone.end(), device,
               "[move_to_device] {} still refers to {}", where, d);
  };
  for (ir::Node* n : program.graph.nodes()) {
    for (const ir::ValueMeta& m : n->meta()) check(m.device, "node %" + n->name());
    for (const ir::Arg& a : n->args())
      if (auto* d = std::get_if<Device>(&a)) check(*d, "a device argument of %" + n->name());
    if (n->opcode() == ir::Opcode::constant) check(n->value().device(), "constant %" + n->name());
  }
  for (const auto& [name, t] : program.state) check(t.device(), "state '" + name + "'");
  for (const auto& [name, t] : program.constants) check(t.device(), "constant '" + name + "'");
  for (const WorkspaceRecipe& w : program.workspaces) check(w.device, "workspace '" + w.name + "'");
}

}  // namespace kiln

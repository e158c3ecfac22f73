#include "kiln/program/train.h"

#include <cmath>
#include <numbers>
#include <random>

#include "kiln/autograd/autograd.h"
#include "kiln/core/overloaded.h"
#include "kiln/passes/reinplace.h"
#include "kiln/passes/rematerialize.h"
#include "kiln/passes/scatter_sums.h"
#include "kiln/trace/dynamic.h"

namespace kiln {

using Kind = InputSpec::Kind;
using OutKind = OutputSpec::Kind;

namespace {

std::string node_name(std::string_view prefix, const std::string& fqn) {
  std::string s(prefix);
  for (char c : fqn) s += c == '.' || c == '-' ? '_' : c;
  return s;
}

}  // namespace

std::unique_ptr<nn::Optimizer> make_optimizer(const OptimizerConfig& config, TensorList params) {
  return std::visit(Overloaded{[&](const nn::SGDOptions& o) -> std::unique_ptr<nn::Optimizer> {
                                 return std::make_unique<nn::SGD>(std::move(params), o);
                               },
                               [&](const nn::AdamWOptions& o) -> std::unique_ptr<nn::Optimizer> {
                                 return std::make_unique<nn::AdamW>(std::move(params), o);
                               },
                               [&](const nn::AdamOptions& o) -> std::unique_ptr<nn::Optimizer> {
                                 return std::make_unique<nn::Adam>(std::move(params), o);
                               },
                               [&](const nn::RMSpropOptions& o) -> std::unique_ptr<nn::Optimizer> {
                                 return std::make_unique<nn::RMSprop>(std::move(params), o);
                               },
                               [&](const nn::AdagradOptions& o) -> std::unique_ptr<nn::Optimizer> {
                                 return std::make_unique<nn::Adagrad>(std::move(params), o);
                               }},
                    config);
}

ExportedProgram export_train_step(nn::Module& module, const LossFn& loss,
                                  const TensorList& example_batch,
                                  const TrainStepOptions& options) {
  std::vector<nn::NamedTensor> named = module.named_tensors();
  std::vector<nn::NamedTensor> params, others;
  for (const nn::NamedTensor& t : named) {
    if (t.kind == nn::SlotKind::parameter && t.tensor->requires_grad())
      params.push_back(t);
    else
      others.push_back(t);
  }
  KILN_CHECK(
      !params.empty(), value,
      "[export_train_step] the module has no parameter that requires grad: nothing to train");
  if (auto* sgd = std::get_if<nn::SGDOptions>(&options.optimizer))
    KILN_CHECK(sgd->momentum == 0 || sgd->dampening == 0, unsupported,
               "[export_train_step] SGD with momentum {} and dampening {}: its first step differs "
               "from the later ones, which a program cannot branch on; use dampening 0",
               sgd->momentum, sgd->dampening);
  Device device = options.device ? resolve_device(*options.device) : params[0].tensor->device();

  // The optimizer's starting state (and a check of its options) on real parameters.
  TensorList real_params;
  for (const nn::NamedTensor& p : params) real_params.push_back(*p.tensor);
  std::unique_ptr<nn::Optimizer> probe = make_optimizer(options.optimizer, real_params);
  struct StateSlot {
    size_t param;
    std::string name, target;
    Tensor value;
  };
  std::vector<StateSlot> opt_state;
  for (size_t i = 0; i < params.size(); ++i)
    for (auto& [name, value] : probe->fresh_state(real_params[i]))
      opt_state.push_back({i, name, "optimizer." + params[i].name + "." + name, value});

  // Signature inputs: parameters, buffers, optimizer state, workspaces, the batch.
  ExportedProgram program;
  std::vector<std::string> names;
  TensorList real;
  auto add = [&](InputSpec spec, const Tensor& value) {
    names.push_back(spec.name);
    program.signature.inputs.push_back(std::move(spec));
    real.push_back(value);
  };
  for (const nn::NamedTensor& p : params)
    add({Kind::parameter, node_name("p_", p.name), p.name}, *p.tensor);
  std::vector<nn::NamedTensor> buffers, workspaces;
  for (const nn::NamedTensor& t : others)
    (t.kind == nn::SlotKind::workspace ? workspaces : buffers).push_back(t);
  for (const nn::NamedTensor& b : buffers)
    add({b.kind == nn::SlotKind::parameter ? Kind::parameter : Kind::buffer,
         node_name("b_", b.name), b.name, b.persistent},
        *b.tensor);
  for (const StateSlot& s : opt_state)
    add({Kind::optimizer_state, node_name("o_", s.target), s.target}, s.value);
  // The hyperparameters a run may change (kiln train --lr, schedules): 0-dim f64 inputs
  // kept with the optimizer state and never written by the step.
  std::vector<std::pair<std::string, Tensor>> hyper;
  auto [lr, weight_decay] = std::visit(
      [](const auto& o) {
        return std::pair{o.lr, o.weight_decay};
      },
      options.optimizer);
  hyper.emplace_back("lr", full({}, lr, {.dtype = f64, .device = params[0].tensor->device()}));
  if (weight_decay != 0)
    hyper.emplace_back("weight_decay", full({}, weight_decay,
                                            {.dtype = f64, .device = params[0].tensor->device()}));
  for (const auto& [name, value] : hyper)
    add({Kind::optimizer_state, node_name("o_", "optimizer." + name), "optimizer." + name}, value);
  for (const nn::NamedTensor& w : workspaces)
    add({Kind::workspace, node_name("w_", w.name), w.name, false}, *w.tensor);
  size_t n_lifted = real.size();
  for (size_t i = 0; i < example_batch.size(); ++i) {
    std::string target = "input_" + std::to_string(i);
    add({Kind::user_input, target, target}, example_batch[i]);
  }
  TensorList traced;
  {
    FakeMode fake;  // (F1) twins on the trace device, present or not
    for (const Tensor& t : real)
      traced.push_back(to(fake.from_real(t.detach_descriptor()), device));
  }

  // The step, on the traced inputs: swap them into the module, compute the loss and
  // its gradients, let the optimizer update parameters and state in place (the
  // functionalized writes become the program's mutation outputs).
  std::vector<Tensor*> slots;
  for (const nn::NamedTensor& p : params) slots.push_back(p.tensor);
  for (const nn::NamedTensor& b : buffers) slots.push_back(b.tensor);
  size_t n_params = params.size(), n_buffers = buffers.size();
  std::vector<int> grad_of;
  auto step = [&](const TensorList& in) {
    TensorList p(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n_params));
    for (Tensor& t : p) t.set_requires_grad(true);
    TensorList saved;
    for (size_t i = 0; i < slots.size(); ++i) {
      saved.push_back(*slots[i]);
      *slots[i] = i < n_params ? p[i] : in[i];
    }
    for (size_t w = 0; w < workspaces.size(); ++w) {
      saved.push_back(*workspaces[w].tensor);
      *workspaces[w].tensor = in[n_params + n_buffers + opt_state.size() + hyper.size() + w];
    }
    struct Restore {
      std::vector<Tensor*>& slots;
      std::vector<nn::NamedTensor>& workspaces;
      TensorList& saved;
      ~Restore() {
        for (size_t i = 0; i < slots.size(); ++i) *slots[i] = saved[i];
        for (size_t w = 0; w < workspaces.size(); ++w)
          *workspaces[w].tensor = saved[slots.size() + w];
      }
    } restore{slots, workspaces, saved};
    TensorList batch(in.begin() + static_cast<std::ptrdiff_t>(n_lifted), in.end());
    Tensor l = loss(module, batch);
    KILN_CHECK(l.defined() && l.numel() == 1 && is_floating(l.dtype()), value,
               "[export_train_step] the loss must be a floating scalar, got {}",
               l.defined() ? l.meta_str() : "an undefined tensor");
    KILN_CHECK(l.requires_grad(), value,
               "[export_train_step] the loss does not depend on any parameter that requires grad");
    TensorList grads = autograd::grad({l}, p, {}, false, /*allow_unused=*/true);
    std::unique_ptr<nn::Optimizer> opt = make_optimizer(options.optimizer, p);
    for (size_t k = 0; k < opt_state.size(); ++k)
      opt->set_state(opt_state[k].param, opt_state[k].name, in[n_params + n_buffers + k]);
    for (size_t h = 0; h < hyper.size(); ++h)
      opt->set_hyperparameter(hyper[h].first, in[n_params + n_buffers + opt_state.size() + h]);
    TensorList out{l};
    grad_of.clear();
    for (size_t i = 0; i < n_params; ++i) {
      if (!grads[i].defined()) continue;
      p[i].mutable_grad() = grads[i];
      out.push_back(grads[i]);
      grad_of.push_back(static_cast<int>(i));
    }
    opt->step();
    return out;
  };
  // (Y1) Declared dynamic dims make the fake batch symbolic (as export_program does).
  ShapeEnv env;
  std::optional<ShapeEnvGuard> symbolic;
  if (!options.dynamic_shapes.empty()) {
    TensorList batch(traced.begin() + static_cast<std::ptrdiff_t>(n_lifted), traced.end());
    detail::declare_dynamic_dims(env, batch, example_batch, options.dynamic_shapes);
    std::copy(batch.begin(), batch.end(), traced.begin() + static_cast<std::ptrdiff_t>(n_lifted));
    env.scope_provider = [] { return current_scope(); };
    symbolic.emplace(&env);
  }
  passes::CapturedProgram captured;
  {
    autograd::GradModeGuard grad_on(true);
    captured = passes::capture(
        step, traced, {.write_back = passes::WriteBack::out_of_graph, .input_names = names});
  }
  if (symbolic) {
    symbolic.reset();
    program.shapes = detail::settle_shapes(env);
  }
  program.graph = std::move(captured.graph);
  ir::merge_equal_constants(program.graph);
  // Backward repeats work forward-mode code would share (d(x*x) is g*x + g*x: two equal
  // products); a mutation-aware CSE pass computes each once.
  if (ir::eliminate_common_subexpressions(program.graph)) ir::eliminate_dead_code(program.graph);
  passes::merge_disjoint_scatters(program.graph);  // Note [Sums of disjoint scatters]
  {  // Parameters and optimizer state are updated in place (no second copy of them).
    std::vector<ir::Node*> in_nodes = program.graph.inputs();
    std::vector<std::pair<ir::Node*, int>> write_backs;
    int k = 0;
    for (size_t i = 0; i < captured.inputs.size(); ++i) {
      if (!captured.inputs[i].data_mutated) continue;
      Kind kind = program.signature.inputs[i].kind;
      if (kind == Kind::parameter || kind == Kind::optimizer_state)
        write_backs.push_back({in_nodes[i], k});
      ++k;
    }
    passes::reinplace_write_backs(program.graph, write_backs);
  }
  passes::rematerialize_activations(program.graph);  // Note [Recomputed activations]

  // (J4) Writes first, in input order; then the loss and the gradients.
  for (size_t i = 0; i < captured.inputs.size(); ++i) {
    if (!captured.inputs[i].data_mutated) continue;
    const InputSpec& in = program.signature.inputs[i];
    OutKind kind = in.kind == Kind::parameter         ? OutKind::parameter_mutation
                   : in.kind == Kind::optimizer_state ? OutKind::optimizer_state_mutation
                   : in.kind == Kind::user_input      ? OutKind::user_input_mutation
                                                      : OutKind::buffer_mutation;
    program.signature.outputs.push_back({kind, in.target});
  }
  program.signature.outputs.push_back({OutKind::loss_output, ""});
  for (int i : grad_of)
    program.signature.outputs.push_back(
        {OutKind::gradient_to_parameter, params[static_cast<size_t>(i)].name});

  // State: parameters, persistent buffers, optimizer state; constants: the rest.
  for (const nn::NamedTensor& p : params) program.state.emplace_back(p.name, *p.tensor);
  for (const nn::NamedTensor& b : buffers) {
    if (b.kind == nn::SlotKind::parameter || b.persistent)
      program.state.emplace_back(b.name, *b.tensor);
    else
      program.constants.emplace_back(b.name, *b.tensor);
  }
  for (const StateSlot& s : opt_state) program.state.emplace_back(s.target, s.value);
  for (const auto& [name, value] : hyper) program.state.emplace_back("optimizer." + name, value);
  for (const nn::NamedTensor& w : workspaces)
    program.workspaces.push_back({w.name, w.tensor->shape(), w.tensor->dtype(), device});
  for (ir::Node* n : program.graph.nodes())
    if (n->opcode() == ir::Opcode::constant) program.constants.emplace_back(n->name(), n->value());
  // The program owns its state: training it must not write the module's tensors.
  for (auto& [name, t] : program.state) t = clone(t.detach_descriptor());
  return program;
}

NamedTensors trained_parameters(const ExportedProgram& program) {
  NamedTensors out;
  for (const InputSpec& s : program.signature.inputs)
    if (s.kind == Kind::parameter)
      for (const auto& [name, t] : program.state)
        if (name == s.target) out.emplace_back(name, t);
  return out;
}

double scheduled_lr(const LrSchedule& schedule, double base, int64_t step, int64_t total) {
  KILN_CHECK(step >= 0 && step < total && schedule.warmup >= 0, value,
             "[schedule] step {} of {} (warmup {})", step, total, schedule.warmup);
  if (step < schedule.warmup)
    return base * static_cast<double>(step + 1) / static_cast<double>(schedule.warmup);
  int64_t k = step - schedule.warmup, remaining = std::max<int64_t>(total - schedule.warmup - 1, 1);
  double f = static_cast<double>(k) / static_cast<double>(remaining);
  switch (schedule.kind) {
    case LrSchedule::Kind::cosine: return base * (1 + std::cos(std::numbers::pi * f)) / 2;
    case LrSchedule::Kind::linear: return base * (1 - f);
    case LrSchedule::Kind::constant: break;
  }
  return base;
}

std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  if (!shuffle) return order;
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates with an unbiased draw of its own
    uint64_t bound = static_cast<uint64_t>(i) + 1, limit = UINT64_MAX - UINT64_MAX % bound, r;
    do r = rng();
    while (r >= limit);
    std::swap(order[static_cast<size_t>(i)], order[r % bound]);
  }
  return order;
}

}  // namespace kiln

#include "kiln/nn/module.h"

#include "kiln/autograd/autograd.h"

namespace kiln::nn {

TensorList Module::operator()(const TensorList& inputs) {
  if (name_.empty()) return run_forward(inputs);
  ScopeName scope(name_);
  return run_forward(inputs);
}

TensorList Module::run_forward(const TensorList& inputs) {
  if (pre_hooks_.empty() && hooks_.empty()) return forward(inputs);
  TensorList in = inputs;
  for (const ForwardPreHook& hook : pre_hooks_) in = hook(*this, in);
  TensorList out = forward(in);
  for (const ForwardHook& hook : hooks_) out = hook(*this, in, out);
  return out;
}

Tensor& Module::add_slot(std::string name, Tensor value, SlotKind kind, bool persistent) {
  for (const Slot& s : slots_)
    KILN_CHECK(s.name != name, value, "[Module] '{}' is already registered", name);
  slots_.push_back({std::move(name), std::move(value), kind, persistent});
  return slots_.back().value;
}

Tensor& Module::register_parameter(std::string name, Tensor value) {
  // (G1) A parameter is a leaf that accumulates its gradient.
  Tensor leaf = value.is_leaf() ? value : value.detach_descriptor();
  if (is_floating(leaf.dtype())) leaf.set_requires_grad(true);
  return add_slot(std::move(name), std::move(leaf), SlotKind::parameter, true);
}
Tensor& Module::register_buffer(std::string name, Tensor value, bool persistent) {
  return add_slot(std::move(name), std::move(value), SlotKind::buffer, persistent);
}
Tensor& Module::register_workspace(std::string name, const IntList& shape, DType dtype,
                                   Device device) {
  return add_slot(std::move(name), zeros(shape, {.dtype = dtype, .device = device}),
                  SlotKind::workspace, false);
}

void Module::collect(const std::string& prefix, std::vector<NamedTensor>& out) {
  for (Slot& s : slots_) out.push_back({prefix + s.name, &s.value, s.kind, s.persistent});
  for (auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

std::vector<NamedTensor> Module::named_tensors() {
  std::vector<NamedTensor> out;
  collect("", out);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const NamedTensor& t : named_tensors())
    if (t.kind == SlotKind::parameter) out.emplace_back(t.name, *t.tensor);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out = {{"", this}};
  for (auto& [name, child] : children_)
    for (auto& [sub, m] : child->named_modules())
      out.emplace_back(sub.empty() ? name : name + "." + sub, m);
  return out;
}

Module& Module::to(Device device) {
  // Moved parameters are new leaves (not outputs of a recorded copy) that still require
  // grad; gradients accumulated so far move with them.
  autograd::NoGradGuard no_grad;
  for (const NamedTensor& t : named_tensors()) {
    Tensor moved = kiln::to(*t.tensor, device);
    if (moved.is_same(*t.tensor)) continue;
    if (t.tensor->requires_grad()) {
      moved.set_requires_grad(true);
      if (t.tensor->grad().defined()) moved.mutable_grad() = kiln::to(t.tensor->grad(), device);
    }
    *t.tensor = moved;
  }
  return *this;
}

void Module::zero_grad() {
  for (const NamedTensor& t : named_tensors())
    if (t.kind == SlotKind::parameter && t.tensor->grad().defined())
      t.tensor->mutable_grad() = Tensor();
}

StateDict Module::state_dict() {
  StateDict out;
  for (const NamedTensor& t : named_tensors())
    if (t.kind == SlotKind::parameter || (t.kind == SlotKind::buffer && t.persistent))
      out.emplace_back(t.name, *t.tensor);
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  // Everything is checked before anything is copied: a bad state dict changes nothing.
  std::map<std::string, const Tensor*> given;
  for (const auto& [name, t] : state) given[name] = &t;
  std::vector<std::string> missing;
  std::vector<std::pair<Tensor*, const Tensor*>> copies;
  for (const NamedTensor& t : named_tensors()) {
    if (t.kind == SlotKind::workspace || (t.kind == SlotKind::buffer && !t.persistent)) continue;
    auto it = given.find(t.name);
    if (it == given.end()) {
      missing.push_back(t.name);
      continue;
    }
    KILN_CHECK(it->second->shape() == t.tensor->shape(), shape,
               "[load_state_dict] '{}' has shape {} in the state dict but {} in the module", t.name,
               it->second->shape().str(), t.tensor->shape().str());
    copies.emplace_back(t.tensor, it->second);
    given.erase(it);
  }
  if (strict) {
    KILN_CHECK(missing.empty(), value, "[load_state_dict] missing key(s): {}",
               fmt::join(missing, ", "));
    std::vector<std::string> unexpected;
    for (const auto& [name, t] : given) unexpected.push_back(name);
    KILN_CHECK(unexpected.empty(), value, "[load_state_dict] unexpected key(s): {}",
               fmt::join(unexpected, ", "));
  }
  autograd::NoGradGuard no_grad;  // writing parameters is not part of any gradient
  for (auto [dst, src] : copies) copy_(*dst, *src);
}

Module& Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
  return *this;
}

}  // namespace kiln::nn

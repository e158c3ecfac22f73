#include "kiln/nn/module.h"

namespace kiln::nn {

TensorList Module::operator()(const TensorList& inputs) {
  if (name_.empty()) return forward(inputs);
  ScopeName scope(name_);
  return forward(inputs);
}

Tensor& Module::add_slot(std::string name, Tensor value, SlotKind kind, bool persistent) {
  for (const Slot& s : slots_)
    KILN_CHECK(s.name != name, value, "[Module] '{}' is already registered", name);
  slots_.push_back({std::move(name), std::move(value), kind, persistent});
  return slots_.back().value;
}

Tensor& Module::register_parameter(std::string name, Tensor value) {
  return add_slot(std::move(name), std::move(value), SlotKind::parameter, true);
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
  for (const NamedTensor& t : named_tensors()) *t.tensor = kiln::to(*t.tensor, device);
  return *this;
}

StateDict Module::state_dict() {
  StateDict out;
  for (const NamedTensor& t : named_tensors())
    if (t.kind == SlotKind::parameter || (t.kind == SlotKind::buffer && t.persistent))
      out.emplace_back(t.name, *t.tensor);
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  std::map<std::string, const Tensor*> given;
  for (const auto& [name, t] : state) given[name] = &t;
  std::vector<std::string> missing;
  for (const NamedTensor& t : named_tensors()) {
    if (t.kind == SlotKind::workspace || (t.kind == SlotKind::buffer && !t.persistent)) continue;
    auto it = given.find(t.name);
    if (it == given.end()) {
      missing.push_back(t.name);
      continue;
    }
    KILN_CHECK(it->second->shape() == t.tensor->shape(), shape,
               "[load_state_dict] '{}' has shape {} in the state dict but {} in the module",
               t.name, it->second->shape().str(), t.tensor->shape().str());
    copy_(*t.tensor, *it->second);
    given.erase(it);
  }
  if (!strict) return;
  KILN_CHECK(missing.empty(), value, "[load_state_dict] missing key(s): {}",
             fmt::join(missing, ", "));
  std::vector<std::string> unexpected;
  for (const auto& [name, t] : given) unexpected.push_back(name);
  KILN_CHECK(unexpected.empty(), value, "[load_state_dict] unexpected key(s): {}",
             fmt::join(unexpected, ", "));
}

Module& Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
  return *this;
}

}  // namespace kiln::nn

#pragma once
// nn::Module: named parameters, buffers (persistent or not), workspaces and
// submodules, with fully qualified names (D6).

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/api/functional.h"

namespace kiln::nn {

/** What a registered tensor is to its module. */
enum class SlotKind : uint8_t { parameter, buffer, workspace };

/** A registered tensor, as module iteration reports it. */
struct NamedTensor {
  std::string name;  // fully qualified: "blocks.0.attn.qkv.weight"
  Tensor* tensor;    // the module's own handle (export swaps it while tracing)
  SlotKind kind;
  bool persistent;  // buffers only: serialized in state_dict
};

/** An ordered name -> tensor map (parameters and persistent buffers). */
using StateDict = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  virtual ~Module() = default;
  /** The computation; call modules through operator() so traces record their path. */
  virtual TensorList forward(const TensorList& inputs) = 0;
  /** Runs forward under a ScopeName of this module's path (node provenance), with its
   * forward hooks around it. */
  TensorList operator()(const TensorList& inputs);

  /** Hooks around forward, as PyTorch's register_forward_pre_hook / register_forward_hook:
   * each pre hook may replace the inputs, each hook the outputs, in registration order
   * (parallelize_module's layouts are such hooks). */
  using ForwardPreHook = std::function<TensorList(Module&, const TensorList& inputs)>;
  using ForwardHook =
      std::function<TensorList(Module&, const TensorList& inputs, const TensorList& outputs)>;
  void register_forward_pre_hook(ForwardPreHook hook) { pre_hooks_.push_back(std::move(hook)); }
  void register_forward_hook(ForwardHook hook) { hooks_.push_back(std::move(hook)); }
  Tensor operator()(const Tensor& x) { return (*this)(TensorList{x})[0]; }

  /** Every registered tensor of this module and its submodules, in registration order. */
  std::vector<NamedTensor> named_tensors();
  std::vector<std::pair<std::string, Tensor>> named_parameters();
  std::vector<std::pair<std::string, Module*>> named_modules();

  /** (D6) Moves parameters, buffers (persistent or not) and workspaces. */
  Module& to(Device device);
  /** (D6) Parameters and persistent buffers only. */
  StateDict state_dict();
  /** Copies values in; strict: every key must exist (and only those), shapes must agree. */
  void load_state_dict(const StateDict& state, bool strict = true);

  /** Resets every parameter's gradient (to undefined, as PyTorch's set_to_none). */
  void zero_grad();

  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool training() const { return training_; }
  const std::string& name() const { return name_; }

 protected:
  /** (G1) Registers `value` as a leaf that requires grad (floating dtypes). */
  Tensor& register_parameter(std::string name, Tensor value);
  Tensor& register_buffer(std::string name, Tensor value, bool persistent = true);
  /** Scratch memory: follows the module, never serialized; programs store its shape
   * and dtype and re-create it on load (D6). */
  Tensor& register_workspace(std::string name, const IntList& shape, DType dtype, Device device);
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    module->name_ = name;
    children_.push_back({std::move(name), module});
    return module;
  }

 private:
  struct Slot {
    std::string name;
    Tensor value;
    SlotKind kind;
    bool persistent;
  };
  Tensor& add_slot(std::string name, Tensor value, SlotKind kind, bool persistent);
  TensorList run_forward(const TensorList& inputs);
  std::vector<ForwardPreHook> pre_hooks_;
  std::vector<ForwardHook> hooks_;
  void collect(const std::string& prefix, std::vector<NamedTensor>& out);

  std::deque<Slot> slots_;  // a deque: references handed to layers stay valid
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::string name_;
  bool training_ = true;
};

}  // namespace kiln::nn

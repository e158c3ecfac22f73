#pragma once
// Differentiable functions written by the user, as PyTorch's torch.autograd.Function:
//
//   struct ScaledExp : autograd::Function<ScaledExp> {
//     static constexpr const char* name = "ScaledExp";  // optional: "ScaledExpBackward"
//     static Tensor forward(autograd::FunctionCtx& ctx, const Tensor& x, double k) {
//       Tensor y = mul(exp(x), k);
//       ctx.save_for_backward({y});
//       return y;
//     }
//     static TensorList backward(autograd::FunctionCtx& ctx, const TensorList& grads) {
//       return {mul(grads[0], ctx.saved_tensors()[0]), Tensor()};  // none for k
//     }
//   };
//   Tensor y = ScaledExp::apply(x, 2.0);
//
// Note [Custom functions]
// apply() runs forward with grad mode off (its ops are not recorded one by one), then,
// when grad mode is on and a tensor argument needs a gradient, records one node for the
// whole call: its edges lead to the tensor arguments, and each differentiable output
// (floating, not marked non-differentiable) gets it as grad_fn. backward() returns one
// gradient per forward argument, undefined for the arguments that are not tensors or
// need none; a gradient must have its argument's shape. Its ops are ordinary dispatched
// ops, so make_fx traces forward and backward alike and capture_joint puts the backward
// in the backward graph; with create_graph the backward is recorded in turn (double
// backward), unless F declares `static constexpr bool once_differentiable = true`, when
// it runs with grad mode off and differentiating its results again is an Error.
//
// The context follows PyTorch's: save_for_backward keeps tensors with their storage
// versions, and saved_tensors() refuses one written in place since (G4), naming the
// function; mark_dirty declares arguments forward wrote in place (they take the node as
// their history; a leaf that requires grad may not be one); mark_non_differentiable
// outputs get no history; set_materialize_grads(false) hands backward undefined
// gradients for outputs none flowed into (by default they are zeros).

#include <any>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/autograd/autograd.h"

namespace kiln::autograd {

class CustomFunctionNode;

/** What a custom function's forward hands its backward. */
class FunctionCtx {
 public:
  /** Keeps tensors for backward, with their storage versions (G4). */
  void save_for_backward(TensorList tensors);
  /** The saved tensors; an Error if one was written in place since it was saved. */
  TensorList saved_tensors() const;
  /** Arguments forward wrote in place: after apply they carry the function's history. */
  void mark_dirty(const TensorList& tensors);
  /** Outputs that get no gradient (indices, masks). */
  void mark_non_differentiable(const TensorList& tensors);
  /** false: backward receives undefined gradients for outputs none flowed into. */
  void set_materialize_grads(bool on) { materialize_grads_ = on; }
  /** Whether forward argument `i` needs a gradient (false for non-tensors). */
  bool needs_input_grad(size_t i) const {
    return i < needs_input_grad_.size() && needs_input_grad_[i];
  }
  /** Anything else backward needs (sizes, flags), by name. */
  std::unordered_map<std::string, std::any> saved_data;

 private:
  friend class CustomFunctionNode;
  friend struct CustomCall;
  std::string name_;
  std::vector<Tensor> saved_;
  std::vector<uint32_t> saved_versions_;
  std::vector<const TensorImpl*> dirty_, non_differentiable_;
  std::vector<int> saved_output_nr_;  // per saved tensor: the output it is, or -1
  std::vector<bool> needs_input_grad_;
  bool materialize_grads_ = true;
  std::weak_ptr<CustomFunctionNode> node_;  // the node holds the context, not the reverse
};

/** One call of a custom function, between its forward and the recording of its node
 * (the non-template part of Function::apply). */
struct CustomCall {
  std::shared_ptr<FunctionCtx> ctx;
  TensorList args;  // per forward argument: the tensor, or undefined for a non-tensor
  bool record = false;

  CustomCall(std::string name, TensorList args);
  /** Gives the outputs their history (when recording); returns them, an output that is
   * an argument not marked dirty replaced by an alias of it, as PyTorch's. */
  TensorList finish(TensorList outputs,
                    std::function<TensorList(FunctionCtx&, const TensorList&)> backward,
                    bool once_differentiable);
};

/** The base of a custom function F (see the Note above). */
template <typename F>
struct Function {
  template <typename... Args>
  static auto apply(Args&&... args) {
    CustomCall call(node_name(), TensorList{tensor_or_none(args)...});
    using Result = decltype(F::forward(*call.ctx, std::forward<Args>(args)...));
    Result result = [&] {
      NoGradGuard no_grad;
      return F::forward(*call.ctx, std::forward<Args>(args)...);
    }();
    TensorList outs;
    if constexpr (std::is_same_v<Result, Tensor>)
      outs.push_back(result);
    else
      outs = result;
    auto backward = [](FunctionCtx& ctx, const TensorList& grads) {
      return TensorList(F::backward(ctx, grads));
    };
    TensorList done = call.finish(std::move(outs), backward, is_once_differentiable());
    if constexpr (std::is_same_v<Result, Tensor>)
      return done[0];
    else
      return Result(done);
  }

 private:
  template <typename A>
  static Tensor tensor_or_none(const A& a) {
    if constexpr (std::is_convertible_v<const A&, const Tensor&> && !std::is_arithmetic_v<A>)
      return Tensor(a);
    else
      return Tensor();
  }
  static std::string node_name() {
    if constexpr (requires { F::name; })
      return std::string(F::name) + "Backward";
    else
      return "CustomFunctionBackward";
  }
  static constexpr bool is_once_differentiable() {
    if constexpr (requires { F::once_differentiable; })
      return F::once_differentiable;
    else
      return false;
  }
};

}  // namespace kiln::autograd

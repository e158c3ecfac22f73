#pragma once
// Grad mode: whether ops record gradients on this thread. It sits below autograd (as
// PyTorch's c10/core/GradMode.h does) because the choke point reads it on every call
// and the op library's composites switch it off; autograd (kiln/autograd/) reads and
// sets it too. The names live in kiln::autograd, where users look for them
// (docs/architecture.md lists this among the folders whose namespace differs).

#include "kiln/core/scope.h"
#include "kiln/core/tensor.h"

namespace kiln::autograd {

namespace detail {
/** This thread's grad mode (a thread_local of dispatch.cpp, whose hot path reads it
 * directly; other files go through these two, never an extern thread_local, which
 * GCC's sanitizers mishandle across object files). */
bool grad_mode();
void set_grad_mode(bool on);

/** Whether `t` requires grad; the common case (no gradient state, not a stale view)
 * answers inline, before Tensor::requires_grad's call through the autograd hook. */
inline bool wants_grad(const Tensor& t) {
  return t.defined() && (t.impl()->autograd || kiln::detail::stale_view(t)) && t.requires_grad();
}
}  // namespace detail

/** Whether ops record gradients on this thread (true unless a guard below is alive). */
inline bool grad_enabled() { return detail::grad_mode(); }

/** Records no gradients while alive (thread-local, restored on exit and on exceptions). */
class NoGradGuard : ScopeGuard {
 public:
  NoGradGuard() : prev_(detail::grad_mode()) { detail::set_grad_mode(false); }
  ~NoGradGuard() { detail::set_grad_mode(prev_); }

 private:
  bool prev_;
};

/** Turns recording on (or off) while alive, e.g. to train inside a NoGradGuard. */
class GradModeGuard : ScopeGuard {
 public:
  explicit GradModeGuard(bool enabled) : prev_(detail::grad_mode()) {
    detail::set_grad_mode(enabled);
  }
  ~GradModeGuard() { detail::set_grad_mode(prev_); }

 private:
  bool prev_;
};

/** (G6) NoGradGuard that also skips version counting: for pure inference, as PyTorch's
 * InferenceMode. Tensors allocated here are inference tensors (Tensor::is_inference;
 * their views too): outside the mode, an in-place op on one, saving one for backward, or
 * making one require grad is an Error; clone() makes a normal tensor. */
class InferenceModeGuard : ScopeGuard {
 public:
  InferenceModeGuard() : prev_grad_(detail::grad_mode()), prev_inference_(inference_mode()) {
    detail::set_grad_mode(false);
    set_inference_mode(true);
  }
  ~InferenceModeGuard() {
    detail::set_grad_mode(prev_grad_);
    set_inference_mode(prev_inference_);
  }
  static bool active() { return inference_mode(); }

 private:
  bool prev_grad_, prev_inference_;
};

}  // namespace kiln::autograd

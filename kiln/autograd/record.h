#pragma once
// Autograd's entry points for dispatch (kiln/dispatch/dispatch.cpp). See Note
// [Autograd sits above the modes] in kiln/autograd/autograd.h.

#include <span>

#include "kiln/ops/op_table.h"
#include "kiln/ops/value.h"

namespace kiln::autograd::detail {

/** This thread's grad mode; defined in dispatch.cpp, whose hot path reads it. */
extern thread_local bool t_grad_enabled;

/** (G4) Whether `t` is a view made before a recorded write to its storage. */
inline bool stale_view(const Tensor& t) {
  const TensorImpl* i = t.impl();
  return i->view_made_at != 0 && i->view_made_at <= i->storage->recorded_write;
}
/** Gives a stale view the history of its base's current value (when the base has one);
 * returns whether it requires grad afterwards. See Note [In-place writes through views]. */
bool refresh_view(const Tensor& t);

/** Whether `t` requires grad (Tensor::requires_grad brings a stale view up to date
 * first); the common case (no gradient state, not a stale view) is inline. */
inline bool wants_grad(const Tensor& t) {
  return t.defined() && (t.impl()->autograd || stale_view(t)) && t.requires_grad();
}

/** Whether a call records a node: grad mode is on and a tensor argument requires grad
 * (the check every call from user code makes). */
inline bool should_record(std::span<const Value> args) {
  if (!t_grad_enabled) return false;
  for (const Value& v : args) {
    if (auto* t = std::get_if<Tensor>(&v)) {
      if (wants_grad(*t)) return true;
    } else if (auto* list = std::get_if<TensorList>(&v)) {
      for (const Tensor& x : *list)
        if (wants_grad(x)) return true;
    }
  }
  return false;
}
/** Runs `op` below autograd and records its backward node on the outputs. */
Outputs record(ops::OpKind op, std::span<const Value> args);
/** (G4) Counts an in-place write that autograd does not record. */
void count_write(ops::OpKind op, std::span<const Value> args);
/** (G6) An in-place op on an inference tensor outside inference mode is an Error. */
void check_inference_write(ops::OpKind op, std::span<const Value> args);

}  // namespace kiln::autograd::detail

#pragma once
// Autograd's entry points for dispatch (kiln/dispatch/dispatch.cpp). See Note
// [Autograd sits above the modes] in kiln/autograd/autograd.h.

#include <span>

#include "kiln/ops/op_table.h"

namespace kiln::autograd::detail {

/** This thread's grad mode; defined in dispatch.cpp, whose hot path reads it. */
extern thread_local bool t_grad_enabled;

/** Whether a call records a node: grad mode is on and a tensor argument requires grad. */
bool should_record(std::span<const Value> args);
/** Runs `op` below autograd and records its backward node on the outputs. */
Outputs record(ops::OpKind op, std::span<const Value> args);
/** (G4) Counts an in-place write that autograd does not record. */
void count_write(ops::OpKind op, std::span<const Value> args);

}  // namespace kiln::autograd::detail

#pragma once
// Autograd's entry points for dispatch (kiln/dispatch/dispatch.cpp). See Note
// [Autograd sits above the modes] in kiln/autograd/autograd.h.

#include <span>

#include "kiln/dispatch/grad_mode.h"
#include "kiln/ops/op_table.h"
#include "kiln/ops/value.h"

namespace kiln::autograd::detail {

/** Gives a stale view the history of its base's current value (when the base has one);
 * returns whether it requires grad afterwards. See Note [In-place writes through views]. */
bool refresh_view(const Tensor& t);

/** Runs `op` below autograd and records its backward node on the outputs. */
Outputs record(ops::OpKind op, std::span<const Value> args);
/** Installs autograd into core and dispatch (variable.cpp); idempotent, returns true. */
bool install_layer();

}  // namespace kiln::autograd::detail

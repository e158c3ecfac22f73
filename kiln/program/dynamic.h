#pragma once
// Internal to kiln/program: the dynamic-shape steps of export (Y1, Y2).

#include "kiln/program/program.h"

namespace kiln::detail {

/** (Y1) Gives the fake user inputs of an export their declared dynamic dims: a symbol of
 * `env` per named Dim (shared by name), `k*d + c` for a derived one, each checked against
 * the example sizes in `examples`. */
void declare_dynamic_dims(ShapeEnv& env, TensorList& fakes, const TensorList& examples,
                          const std::vector<InputDims>& dims);

/** (Y2) The program's ShapeSpec from the guards of a finished trace: automatic dims are
 * specialized, related or narrowed as the guards say; a guard that does any of that to a
 * named Dim is a constraint violation, and all of them are one Error with a fix each. */
ShapeSpec settle_shapes(const ShapeEnv& env);

}  // namespace kiln::detail

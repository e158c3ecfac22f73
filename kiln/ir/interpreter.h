#pragma once
// Runs a graph on real (or fake) tensors through normal dispatch, so every call obeys
// device checks, guards, streams and any active modes.

#include <functional>
#include <vector>

#include "kiln/api/functional.h"
#include "kiln/core/overloaded.h"
#include "kiln/ir/graph.h"

namespace kiln::ir {

/** Appends to `out` the values of call node `n`'s arguments: refs through `value_of`,
 * and a scalar where the op takes a tensor as the wrapped number it was traced from
 * (`mul(%x, 0.125)`; see wrapped_number). Shared by interpret and the runtime executor. */
template <typename ValueOf>
void call_args(const Node& n, ValueOf&& value_of, std::vector<Value>& out) {
  const auto& specs = ops::op_info(n.op()).schema.args;
  for (size_t i = 0; i < n.args().size(); ++i)
    out.push_back(std::visit(Overloaded{[&](const Ref& r) -> Value { return value_of(r); },
                                        [&](const RefList& l) -> Value {
                                          TensorList ts;
                                          for (const Ref& r : l) ts.push_back(value_of(r));
                                          return ts;
                                        },
                                        [&](const Scalar& s) -> Value {
                                          if (specs[i].type == ops::ArgType::tensor)
                                            return wrapped_number(s);
                                          return s;
                                        },
                                        [](const auto& v) -> Value { return Value(v); }},
                             n.args()[i]));
}

/** (Y4) The value of each symbol a graph's sizes name, for one run. */
using SymbolValues = std::function<int64_t(const sym::Expr*)>;

/** (Y4) Makes every symbolic size argument of `op` among `args` the integers it is at
 * `values` (an int list, or an int where the schema takes one). */
void bind_size_args(ops::OpKind op, std::vector<Value>& args, const SymbolValues& values);

/** Runs `graph` with `inputs` bound to its input nodes in order; returns the values of
 * the output node. Throws a value Error naming the input when the count, shape, dtype
 * or device of an input differs from the input node's meta (symbolic input shapes are
 * the caller's to check). `values` gives the symbols of a graph with symbolic sizes. */
TensorList interpret(const Graph& graph, const TensorList& inputs, const SymbolValues& values = {});

}  // namespace kiln::ir

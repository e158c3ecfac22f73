#pragma once
// Schema: an op's signature, parsed once from the text in the op table
// ("add_(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)").

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ops/value.h"

namespace kiln::ops {

enum class ArgType : uint8_t {
  tensor,
  opt_tensor,
  tensor_list,
  scalar,
  opt_scalar,
  int_,
  opt_int,
  int_list,
  float_,
  opt_float,
  bool_,
  dtype,
  opt_dtype,
  device,
  opt_device,
  str,
};
std::string_view to_string(ArgType type);

/** One argument: name, type, default, and alias annotation. */
struct ArgSpec {
  std::string name;
  ArgType type;
  std::optional<Value> default_value;
  bool kwarg_only = false;
  bool mutated = false;  // Tensor(a!)
  bool aliased = false;  // Tensor(a) or Tensor(a!)
};

/** The parsed signature of one op. */
struct Schema {
  std::string name;
  std::vector<ArgSpec> args;
  int num_outputs = 1;
  int mutated_arg = -1;  // the argument an in-place op writes (its output is that tensor)
  /** Every argument written (Tensor(a!)). An op that writes several is not in-place in
   * the table's sense (mutated_arg -1): its returns are fresh tensors, and dispatch runs
   * it as its functional twin plus write-backs (Note [Extension ops that write several
   * arguments] in kiln/dispatch/library.cpp). */
  std::vector<int> written_args;
  int view_of_arg = -1;  // the argument a view op's output aliases

  /** Throws a value Error naming the op unless `args` match this schema in count and type. */
  void check_args(std::span<const Value> args) const;
  std::string str() const;
};

/** Parses schema text; throws an internal Error on malformed text. */
Schema parse_schema(std::string_view text);

/** True when `v` holds what `type` accepts (None for optional types). */
bool value_matches(const Value& v, ArgType type);

}  // namespace kiln::ops

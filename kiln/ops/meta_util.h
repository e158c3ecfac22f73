#pragma once
// Internal to the meta functions: small helpers shared by their files.

#include <span>
#include <string>

#include "kiln/ops/op_table.h"

namespace kiln::ops {

inline std::string_view name_of(const OpCall& c) { return op_info(c.op).name; }

inline std::string ints_str(std::span<const int64_t> v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace kiln::ops

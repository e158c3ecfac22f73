#include "kiln/ops/op_table.h"

#include <array>
#include <unordered_map>

#include "kiln/ops/meta.h"

namespace kiln::ops {

namespace {

// Each schema must start with its op's name: the table cannot drift from itself.
constexpr bool schema_names_op(std::string_view name, std::string_view schema) {
  return schema.size() > name.size() && schema.substr(0, name.size()) == name &&
         schema[name.size()] == '(';
}
#define KILN_OP_CHECK(name, rule, meta, schema) \
  static_assert(schema_names_op(#name, schema), "schema of '" #name "' must start with " #name "(");
KILN_OPS(KILN_OP_CHECK)
#undef KILN_OP_CHECK

std::array<OpInfo, kNumOps> build_table() {
  std::array<OpInfo, kNumOps> table = {{
#define KILN_OP_INFO(name, rule, meta, schema) \
  {OpKind::name, #name, DeviceRule::rule, meta, parse_schema(schema), OpKind::name},
      KILN_OPS(KILN_OP_INFO)
#undef KILN_OP_INFO
  }};
  // An in-place op without its own meta function is derived from its functional form.
  for (OpInfo& info : table) {
    if (info.meta) continue;
    KILN_ASSERT(info.is_inplace() && info.name.ends_with('_'));
    std::string_view base = info.name.substr(0, info.name.size() - 1);
    bool found = false;
    for (const OpInfo& f : table)
      if (f.name == base) info.functional = f.kind, found = true;
    KILN_ASSERT(found);
  }
  return table;
}

const std::array<OpInfo, kNumOps>& table() {
  static const std::array<OpInfo, kNumOps> t = build_table();
  return t;
}

}  // namespace

const OpInfo& op_info(OpKind op) { return table()[static_cast<size_t>(op)]; }

OpKind op_from_name(std::string_view name) {
  static const auto by_name = [] {
    std::unordered_map<std::string_view, OpKind> m;
    for (const OpInfo& info : table()) m.emplace(info.name, info.kind);
    return m;
  }();
  auto it = by_name.find(name);
  KILN_CHECK(it != by_name.end(), unsupported, "[{}] unknown op: kiln's op table has no '{}'",
             name, name);
  return it->second;
}

}  // namespace kiln::ops

#include "kiln/ops/op_table.h"

#include <array>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "kiln/ops/extension.h"
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
  static const std::array<OpInfo, kNumOps>& t = []() -> const std::array<OpInfo, kNumOps>& {
    static const std::array<OpInfo, kNumOps> built = build_table();
    detail::g_builtin_ops.store(built.data(), std::memory_order_release);
    return built;
  }();
  return t;
}

}  // namespace

// ---- extension ops. See Note [Extension ops are table entries]. ----

namespace {

constexpr int kMaxExtensionOps = 4096;

struct Registry {
  std::mutex mu;  // registration and lookup by name; op_info() reads `ops` without it
  std::unordered_map<std::string, OpKind> by_name;
  std::vector<OpKind> order;
};
Registry& registry() {
  static auto* r = new Registry;  // never destroyed: ops outlive static destructors
  return *r;
}
std::atomic<const ExtensionOp*> g_extensions[kMaxExtensionOps];

bool is_identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

const std::unordered_map<std::string_view, OpKind>& builtin_names() {
  static const auto by_name = [] {
    std::unordered_map<std::string_view, OpKind> m;
    for (const OpInfo& info : table()) m.emplace(info.name, info.kind);
    return m;
  }();
  return by_name;
}

// Why kiln cannot run an op with this schema, or "" (E1: extension ops get the same
// alias model as built-ins: an op that writes one argument returns it; one that writes
// several, as PyTorch's custom ops with several mutated arguments, returns fresh tensors).
std::string unsupported_schema(const Schema& s, std::string_view text) {
  for (const ArgSpec& a : s.args)
    if (a.mutated && a.type != ArgType::tensor)
      return "only a Tensor argument can be written (Tensor(a!))";
  if (s.view_of_arg >= 0) return "an extension op cannot return a view of an argument (Tensor(a))";
  std::string_view ret = text.substr(text.find("->") + 2);
  while (!ret.empty() && ret.front() == ' ') ret.remove_prefix(1);
  if (s.written_args.size() == 1 && ret != "Tensor(a!)")
    return "an op that writes an argument (Tensor(a!)) must return it, as '-> Tensor(a!)'";
  if (s.written_args.size() > 1 && ret.find('(', 1) != std::string_view::npos)
    return "an op that writes several arguments returns fresh tensors only (or '-> ()')";
  if (s.written_args.size() > 1 && s.num_outputs + s.written_args.size() > kMaxOutputs)
    return fmt::format(
        "an op that writes several arguments writes and returns at most {} tensors together "
        "(its functional form returns them all)",
        kMaxOutputs);
  if (s.num_outputs > static_cast<int>(kMaxOutputs))
    return fmt::format("at most {} outputs", kMaxOutputs);
  return "";
}

}  // namespace

std::string canonical_schema(std::string_view text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space && c != ',' && c != ')' && out.back() != '(') out += ' ';
    space = false;
    out += c;
  }
  return out;
}

OpKind register_extension(ExtensionOp op) {
  const std::string name = op.info.schema.name;
  size_t sep = name.find("::");
  KILN_CHECK(sep != std::string::npos && is_identifier(name.substr(0, sep)) &&
                 is_identifier(name.substr(sep + 2)),
             value, "[{}] an extension op's name must be 'namespace::op' (e.g. 'mylib::fused_mlp')",
             name);
  if (std::string why = unsupported_schema(op.info.schema, op.schema_text); !why.empty())
    fail(ErrorKind::value, "[{}] schema '{}': {}", name, op.schema_text, why);
  bool needs_device =
      op.info.device_rule == DeviceRule::factory || op.info.device_rule == DeviceRule::to_copy;
  bool has_device = false;
  for (const ArgSpec& a : op.info.schema.args) has_device = has_device || a.type == ArgType::device;
  KILN_CHECK(!needs_device || has_device, value,
             "[{}] a factory or to_copy op needs a Device argument in its schema", name);
  KILN_CHECK(!builtin_names().contains(name), value, "[{}] is a built-in op", name);

  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (auto it = r.by_name.find(name); it != r.by_name.end()) {
    const ExtensionOp* old = extension_op(it->second);
    fail(ErrorKind::value, "[{}] is already registered{}", name,
         old->library.empty() ? std::string() : fmt::format(" (by {})", old->library));
  }
  int index = static_cast<int>(r.order.size());
  KILN_CHECK(index < kMaxExtensionOps, value, "[{}] too many extension ops (at most {})", name,
             kMaxExtensionOps);
  auto kind = static_cast<OpKind>(kNumOps + index);
  op.info.kind = op.info.functional = kind;
  if (!op.info.meta &&
      !op.staged) {  // an in-place op derived from its functional form, as built-ins
    std::string base = name.substr(0, name.size() - 1);
    auto it = r.by_name.find(base);
    KILN_CHECK(op.info.is_inplace() && name.ends_with('_') && it != r.by_name.end(), value,
               "[{}] has no meta function; only an in-place op 'ns::op_' whose functional form "
               "'ns::op' is registered before it may leave it out",
               name);
    op.info.functional = it->second;
  }
  auto* entry = new ExtensionOp(std::move(op));
  entry->name = name;
  entry->info.name = entry->name;
  g_extensions[index].store(entry, std::memory_order_release);
  r.by_name.emplace(name, kind);
  r.order.push_back(kind);
  return kind;
}

void update_extension(OpKind op, const std::function<void(ExtensionOp&)>& change) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  const ExtensionOp* e = extension_op(op);
  KILN_CHECK(e, value, "op kind {} is not a registered extension op", static_cast<int>(op));
  change(*const_cast<ExtensionOp*>(e));
}

const ExtensionOp* extension_op(OpKind op) {
  int i = static_cast<int>(op) - kNumOps;
  if (i < 0 || i >= kMaxExtensionOps) return nullptr;
  return g_extensions[i].load(std::memory_order_acquire);
}

std::vector<OpKind> extension_ops() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  return r.order;
}

namespace detail {
std::atomic<const OpInfo*> g_builtin_ops{nullptr};
}  // namespace detail

const OpInfo& detail::op_info_slow(OpKind op) {
  if (is_builtin(op)) [[likely]]
    return table()[static_cast<size_t>(op)];
  const ExtensionOp* e = extension_op(op);
  KILN_CHECK(e, internal, "op kind {} is neither built in nor registered", static_cast<int>(op));
  return e->info;
}

OpKind op_from_name(std::string_view name) {
  const auto& builtins = builtin_names();
  if (auto it = builtins.find(name); it != builtins.end()) return it->second;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    if (auto it = r.by_name.find(std::string(name)); it != r.by_name.end()) return it->second;
  }
  fail(ErrorKind::unsupported, "[{}] unknown op: kiln's op table has no '{}'{}", name, name,
       name.find("::") != std::string_view::npos ? " and no extension registered it" : "");
}

}  // namespace kiln::ops

#include "kiln/interop/pt2.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "kiln/dispatch/dispatch.h"
#include "kiln/dispatch/grad_mode.h"
#include "kiln/fake/fake_mode.h"
#include "kiln/interop/archive.h"
#include "kiln/interop/call.h"
#include "kiln/ops/extension.h"
#include "kiln/passes/functionalize.h"
#include "kiln/trace/dynamic.h"

namespace kiln {
namespace {

using interop::Archive;
using interop::Call;
using interop::Env;
using interop::Results;
using interop::Slot;
using json = nlohmann::json;
using Kind = InputSpec::Kind;

// The serialized ExportedProgram's major version kiln reads (torch/_export/serde/schema.py);
// minor versions only add fields, which are ignored.
constexpr int kSchemaMajor = 8;

// A size expression as torch.export writes it: sympy's srepr (`Symbol('s77', positive=True,
// integer=True)`, `Mul(Integer(2), Symbol('s77'))`, `FloorDiv(...)`) in current versions,
// its str ("2*s77") in older ones. `symbol` gives kiln's expression for a file symbol.
class Pt2Expr {
 public:
  using SymbolOf = std::function<const sym::Expr*(const std::string&)>;
  Pt2Expr(std::string_view text, SymbolOf symbol) : s_(text), symbol_(std::move(symbol)) {}
  const sym::Expr* parse() {
    size_t open = s_.find('(');
    std::string_view head = s_.substr(0, open);
    static const char* kSrepr[] = {"Symbol", "Integer",   "Add", "Mul", "FloorDiv", "CleanDiv",
                                   "Mod",    "PythonMod", "Max", "Min", "Pow"};
    bool srepr =
        open != std::string_view::npos &&
        std::any_of(std::begin(kSrepr), std::end(kSrepr), [&](const char* k) { return head == k; });
    if (!srepr) {  // str form: kiln's own syntax, then the file's symbols renamed
      return sym::substitute(sym::parse(s_, "a size of the program"),
                             [&](const sym::Expr* x) { return symbol_(x->name); });
    }
    const sym::Expr* e = node(0);
    skip();
    if (pos_ != s_.size()) fail_here("trailing text");
    return e;
  }

 private:
  [[noreturn]] void fail_here(const char* why) const {
    fail(ErrorKind::format, "cannot read the size expression '{}': {} at offset {}", s_, why, pos_);
  }
  void skip() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  bool eat(char c) {
    skip();
    if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
    return false;
  }
  std::string_view word() {
    skip();
    size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) ||
                                s_[pos_] == '_' || s_[pos_] == '-'))
      ++pos_;
    return s_.substr(start, pos_ - start);
  }
  const sym::Expr* node(int depth) {
    if (depth > 64) fail_here("nested too deeply");
    std::string_view head = word();
    if (!eat('(')) fail_here("expected '('");
    std::vector<const sym::Expr*> args;
    std::string name;
    int64_t integer = 0;
    while (!eat(')')) {
      if (!args.empty() || !name.empty() || head == "Integer") eat(',');
      skip();
      if (pos_ < s_.size() && s_[pos_] == '\'') {  // Symbol's name
        size_t end = s_.find('\'', pos_ + 1);
        if (end == std::string_view::npos) fail_here("unterminated name");
        name = std::string(s_.substr(pos_ + 1, end - pos_ - 1));
        pos_ = end + 1;
        continue;
      }
      std::string_view w = word();
      if (w.empty()) fail_here("expected an argument");
      if (eat('=')) {  // keyword assumptions (positive=True): ignored
        word();
        continue;
      }
      if (head == "Integer") {
        auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), integer);
        if (ec != std::errc() || p != w.data() + w.size()) fail_here("expected an integer");
        continue;
      }
      pos_ -= w.size();
      args.push_back(node(depth + 1));
    }
    if (head == "Symbol") {
      if (name.empty()) fail_here("a Symbol without a name");
      return symbol_(name);
    }
    if (head == "Integer") return sym::constant(integer);
    if (args.empty()) fail_here("an operation without arguments");
    const sym::Expr* e = args[0];
    for (size_t i = 1; i < args.size(); ++i) {
      if (head == "Add")
        e = sym::add(e, args[i]);
      else if (head == "Mul")
        e = sym::mul(e, args[i]);
      else if (head == "FloorDiv" || head == "CleanDiv")
        e = sym::floordiv(e, args[i]);
      else if (head == "Mod" || head == "PythonMod")
        e = sym::mod(e, args[i]);
      else if (head == "Max")
        e = sym::max(e, args[i]);
      else if (head == "Min")
        e = sym::min(e, args[i]);
      else if (head == "Pow") {
        std::optional<int64_t> k = sym::as_constant(args[i]);
        if (!k || *k < 0 || *k > 8) fail_here("a power other than a small integer");
        const sym::Expr* base = e;
        e = sym::constant(1);
        for (int64_t j = 0; j < *k; ++j) e = sym::mul(e, base);
      } else {
        fail_here("an unknown operation");
      }
    }
    return e;
  }
  std::string_view s_;
  SymbolOf symbol_;
  size_t pos_ = 0;
};

struct Importer {
  const Archive& archive;
  std::string file;  // for errors
  std::vector<std::string> notes;
  // (Y1) The file's symbols, made kiln's: each the first time a user input's size names it,
  // with the range of the file's range_constraints.
  ShapeEnv shape_env;
  std::map<std::string, SymInt> symbols;
  const json* range_constraints = nullptr;

  // The user input size `s`: an integer, or an expression over the file's symbols (Y1).
  SymInt user_size(const json& s, std::string_view where, const std::string& source) {
    if (!s.contains("as_expr")) return sym_int(s, where, "size");
    const json& e = s.at("as_expr");
    std::string text = e.value("expr_str", std::string());
    if (!e.contains("hint") || e.at("hint").is_null() || !e.at("hint").contains("as_int"))
      bad(fmt::format("{}: symbolic size '{}' has no example value", where, text));
    int64_t hint = e.at("hint").at("as_int").get<int64_t>();
    std::vector<std::string> fresh;
    auto symbol_of = [&](const std::string& name) -> const sym::Expr* {
      if (auto it = symbols.find(name); it != symbols.end()) return it->second.expr();
      fresh.push_back(name);
      return sym::symbol("pt2_" + name);  // a placeholder until it is made below
    };
    const sym::Expr* x;
    try {
      x = Pt2Expr(text, symbol_of).parse();
    } catch (const Error& err) {
      bad(fmt::format("{}: {}", where, err.what()));
    }
    if (!fresh.empty()) {
      // One new symbol, the whole size (or k*s + c of it): its example value follows.
      if (fresh.size() != 1)
        bad(fmt::format("{}: the size '{}' introduces several symbols at once", where, text));
      auto at = [&](int64_t v) { return sym::eval(x, [&](const sym::Expr*) { return v; }); };
      int64_t c = at(0), k = at(1) - c;
      if (k <= 0 || (hint - c) % k != 0 || at(2) != 2 * k + c)
        bad(fmt::format("{}: cannot tell the value of {} from the size '{}'", where, fresh[0],
                        text));
      int64_t lo = 0, hi = Dim::kMax;
      if (range_constraints && range_constraints->contains(fresh[0])) {
        const json& r = range_constraints->at(fresh[0]);
        if (r.contains("min_val") && r.at("min_val").is_number_integer())
          lo = std::max<int64_t>(0, r.at("min_val").get<int64_t>());
        if (r.contains("max_val") && r.at("max_val").is_number_integer())
          hi = std::min(Dim::kMax, r.at("max_val").get<int64_t>());
      }
      int64_t value = (hint - c) / k;
      if (value < lo || value > hi)
        bad(fmt::format("{}: the example value {} of {} is outside its range [{}, {}]", where,
                        value, fresh[0], lo, hi));
      symbols[fresh[0]] = shape_env.new_symbol(value, lo, hi, source, fresh[0], /*automatic=*/true);
      const sym::Expr* placeholder = sym::symbol("pt2_" + fresh[0]);
      x = sym::substitute(
          x, [&](const sym::Expr* s) { return s == placeholder ? symbols[fresh[0]].expr() : s; });
    }
    SymInt size(x, hint);
    if (size.is_symbolic()) {
      int64_t at_hints = sym::eval(x, [&](const sym::Expr* s) {
        const SymbolInfo* info = shape_env.find(s);
        return info ? info->hint : 0;
      });
      if (at_hints != hint)
        bad(fmt::format("{}: the size '{}' is {} at the example, not {}", where, text, at_hints,
                        hint));
    }
    return size;
  }

  [[noreturn]] void bad(const std::string& what) const {
    fail(ErrorKind::format, "[import] {}: {}", file, what);
  }

  const json& at(const json& j, const char* key, std::string_view where) const {
    if (!j.is_object() || !j.contains(key)) bad(fmt::format("{} has no '{}'", where, key));
    return j.at(key);
  }

  json parse(const std::string& entry) const {
    try {
      return json::parse(archive.text(entry));
    } catch (const json::exception& e) {
      bad(fmt::format("'{}' is not valid JSON: {}", entry, e.what()));
    }
  }

  // ---- tensors --------------------------------------------------------------------------

  static Device device_of(const json& d) {
    std::string type = d.at("type").get<std::string>();
    int index = d.contains("index") && !d.at("index").is_null() ? d.at("index").get<int>() : 0;
    std::string spec = type == "meta" ? type : fmt::format("{}:{}", type, index);
    return Device(std::string_view(spec));
  }

  struct Meta {
    DType dtype = DType::f32;
    std::vector<int64_t> sizes, strides;
    int64_t offset = 0;
    Device device;
  };

  // A SymInt of the file as a number: an integer, or an expression's example value. User
  // input sizes keep their symbols (user_size); every other value's sizes kiln computes
  // again from its own meta functions, so their example values only describe the file.
  int64_t sym_int(const json& s, std::string_view where, const std::string& what) {
    if (s.contains("as_int")) return s.at("as_int").get<int64_t>();
    if (s.contains("as_expr")) {
      const json& e = s.at("as_expr");
      if (!e.contains("hint") || e.at("hint").is_null() || !e.at("hint").contains("as_int"))
        bad(fmt::format("{}: symbolic {} '{}' has no example value", where, what,
                        e.value("expr_str", std::string("?"))));
      return e.at("hint").at("as_int").get<int64_t>();
    }
    bad(fmt::format("{}: {} is neither an integer nor an expression", where, what));
  }

  // (Y1) A user input's sizes, symbolic where the file says.
  Dims user_sizes(const json& m, std::string_view where, const std::string& source) {
    Dims out;
    size_t d = 0;
    for (const json& s : at(m, "sizes", where)) {
      out.push_back(user_size(s, where, fmt::format("{}.shape[{}]", source, d++)));
      if (out.hint(out.size() - 1) < 0) bad(fmt::format("{}: a negative size", where));
    }
    return out;
  }

  Meta tensor_meta(const json& m, std::string_view where) {
    Meta out;
    std::optional<DType> dt = interop::dtype_of_code(at(m, "dtype", where).get<int>());
    if (!dt) bad(fmt::format("{}: dtype {} has no kiln counterpart", where, m.at("dtype").dump()));
    out.dtype = *dt;
    if (m.contains("layout") && m.at("layout").get<int>() != 7)
      bad(fmt::format("{}: layout {} is not strided (sparse tensors are not imported)", where,
                      m.at("layout").dump()));
    for (const json& s : at(m, "sizes", where)) {
      out.sizes.push_back(sym_int(s, where, "size"));
      if (out.sizes.back() < 0) bad(fmt::format("{}: a negative size", where));
    }
    for (const json& s : at(m, "strides", where)) {
      out.strides.push_back(sym_int(s, where, "stride"));
      if (out.strides.back() < 0) bad(fmt::format("{}: a negative stride", where));
    }
    if (out.strides.size() != out.sizes.size())
      bad(fmt::format("{}: {} sizes but {} strides", where, out.sizes.size(), out.strides.size()));
    out.offset =
        m.contains("storage_offset") ? sym_int(m.at("storage_offset"), where, "storage offset") : 0;
    if (out.offset < 0) bad(fmt::format("{}: a negative storage offset", where));
    out.device = device_of(at(m, "device", where));
    return out;
  }

  // Storages already read, by entry: tensors sharing one in the file share it in kiln (I3).
  std::map<std::string, Tensor> storages;

  Tensor storage(const std::string& entry, DType dtype) {
    if (auto it = storages.find(entry); it != storages.end()) {
      if (it->second.dtype() != dtype) bad(fmt::format("'{}' is read as two dtypes", entry));
      return it->second;
    }
    std::span<const unsigned char> bytes = archive.bytes(entry);
    size_t item = itemsize(dtype);
    if (bytes.size() % item != 0)
      bad(fmt::format("'{}' has {} bytes, not a whole number of {} elements", entry, bytes.size(),
                      to_string(dtype)));
    int64_t n = static_cast<int64_t>(bytes.size() / item);
    Device cpu0(DeviceType::cpu, 0);
    Tensor t;
    std::shared_ptr<const void> owner = archive.owner(entry);
    if (owner && n > 0 && reinterpret_cast<uintptr_t>(bytes.data()) % item == 0) {
      // zero-copy: the storage is the entry's bytes (in the privately mapped file, or the
      // inflated copy of a deflated entry), kept alive by the storage
      auto impl = std::make_shared<TensorImpl>();
      impl->shape = Dims({n});
      impl->strides = contiguous_strides(impl->shape);
      impl->dtype = dtype;
      impl->device = cpu0;
      impl->storage = std::make_shared<StorageImpl>(const_cast<unsigned char*>(bytes.data()),
                                                    bytes.size(), cpu0, nullptr, false);
      impl->storage->owner = std::const_pointer_cast<void>(owner);
      t = Tensor(std::move(impl));
    } else {
      t = empty({n}, {.dtype = dtype});
      if (n) std::memcpy(t.raw_data(), bytes.data(), bytes.size());
    }
    if (dtype == DType::b8)  // any other byte is not a bool
      for (unsigned char b : bytes)
        if (b > 1) bad(fmt::format("'{}': a BOOL storage holds the byte {}", entry, b));
    storages.emplace(entry, t);
    return t;
  }

  // A payload: a whole storage viewed through sizes, strides and storage offset.
  Tensor payload(const std::string& folder, const std::string& fqn, const json& p) {
    std::string where = fmt::format("'{}' in {}", fqn, folder);
    if (p.value("use_pickle", false))
      fail(ErrorKind::unsupported, "[import] {}: {} is a pickled payload; kiln never unpickles",
           file, where);
    std::string path_name = at(p, "path_name", where).get<std::string>();
    if (path_name.find('/') != std::string::npos || path_name.find("..") != std::string::npos)
      bad(fmt::format("{}: path_name '{}' leaves its folder", where, path_name));
    if (path_name.rfind("custom_obj", 0) == 0 || path_name.rfind("opaque_obj", 0) == 0)
      fail(ErrorKind::unsupported, "[import] {}: {} is a custom object; kiln imports tensors only",
           file, where);
    Meta m = tensor_meta(at(p, "tensor_meta", where), where);
    Tensor s = storage(folder + path_name, m.dtype);
    int64_t n = s.numel();
    bool empty_view = std::any_of(m.sizes.begin(), m.sizes.end(), [](int64_t x) { return x == 0; });
    if (!empty_view) {
      __int128 last = m.offset;
      for (size_t d = 0; d < m.sizes.size(); ++d)
        last += static_cast<__int128>(m.sizes[d] - 1) * m.strides[d];
      if (last >= n)
        bad(
            fmt::format("{}: sizes {} and strides {} at offset {} reach past its storage of {} "
                        "elements",
                        where, Dims(m.sizes).str(), Dims(m.strides).str(), m.offset, n));
    }
    Dims contiguous = contiguous_strides(Dims(m.sizes));
    if (m.offset == 0 && Dims(m.strides) == contiguous && numel_of(Dims(m.sizes)) == n)
      return m.sizes.size() == 1 ? s : view(s, m.sizes);
    return as_strided(s, m.sizes, m.strides, m.offset);
  }

  // The payload config of `kind` ("weights", "constants"): <model>_<kind>_config.json as
  // current PyTorch names it, or the single other *config.json an older writer left.
  json payload_config(const std::string& model, const std::string& kind) {
    std::string folder = "data/" + kind + "/";
    std::string current = folder + model + "_" + kind + "_config.json";
    if (archive.has(current)) return at(parse(current), "config", current);
    std::vector<std::string> found;
    for (const std::string& e : archive.list(folder))
      if (e.size() > 11 && e.compare(e.size() - 11, 11, "config.json") == 0) found.push_back(e);
    if (found.size() == 1) return at(parse(found[0]), "config", found[0]);
    return json::object();  // a program without weights (or constants)
  }
};

// The module path of a node from its nn_module_stack ("L__self__,,M;L__self__fc,fc,Linear"):
// the path of its innermost module.
std::string module_path(const json& node) {
  if (!node.contains("metadata") || !node.at("metadata").contains("nn_module_stack")) return "";
  std::string stack = node.at("metadata").at("nn_module_stack").get<std::string>();
  size_t last = stack.rfind(';');
  std::string entry = last == std::string::npos ? stack : stack.substr(last + 1);
  size_t a = entry.find(','), b = a == std::string::npos ? a : entry.find(',', a + 1);
  return a == std::string::npos || b == std::string::npos ? "" : entry.substr(a + 1, b - a - 1);
}

// Where in the user's Python a node came from: the innermost frame of its stack_trace
// ('File "model.py", line 12, in forward'), or "".
std::string source_line(const json& node) {
  if (!node.contains("metadata") || !node.at("metadata").contains("stack_trace")) return "";
  const json& trace = node.at("metadata").at("stack_trace");
  if (!trace.is_string()) return "";
  const std::string& t = trace.get_ref<const std::string&>();
  size_t at = t.rfind("File \"");
  if (at == std::string::npos) return "";
  size_t end = t.find('\n', at);
  return t.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// "aten.add.Tensor (node 'add', module 'blocks.0.mlp'[, File ... line ...])": what an error
// names. The list of missing ops leaves out the source lines (one line per op is enough).
std::string node_label(const json& node, const std::string& target, bool with_source = true) {
  std::string name = node.value("name", std::string());
  if (name.empty() && !node.at("outputs").empty()) name = node.at("outputs")[0].dump();
  std::string path = module_path(node), where = with_source ? source_line(node) : "";
  return fmt::format("{} (node '{}'{}{})", target, name,
                     path.empty() ? "" : ", module '" + path + "'",
                     where.empty() ? "" : ", " + where);
}

// ---- bookkeeping ops: sizes as values, assertions -------------------------------------

// with_effects(token, op, ...)'s op, as "aten._linalg_check_errors.default".
std::string effectful_op(const json& node) {
  const json& in = node.at("inputs");
  if (in.size() < 2 || !in[1].at("arg").contains("as_operator"))
    fail(ErrorKind::format, "higher_order.with_effects without its operator");
  std::string op = in[1].at("arg").at("as_operator").get<std::string>();
  return op.rfind("torch.ops.", 0) == 0 ? op.substr(10) : op;
}
constexpr const char* kCheckErrors = "aten._linalg_check_errors.default";

// The ops that compute with sizes rather than tensors (sizes are specialized: plain numbers).
std::optional<Results> bookkeeping(const std::string& target, const Call& c, const json& node,
                                   const Env& env) {
  auto positional = [&](size_t i) -> Scalar {
    const json& in = node.at("inputs");
    if (i >= in.size()) fail(ErrorKind::format, "{}: argument {} is missing", target, i);
    std::optional<Scalar> n = interop::number_of(in[i].at("arg"), env);
    if (!n) fail(ErrorKind::format, "{}: argument {} is not a number", target, i);
    return *n;
  };
  auto number = [](Scalar s) { return Results{Slot(s)}; };
  auto size = [](const SymInt& s) {
    return s.is_symbolic() ? Results{Slot(s)} : Results{Slot(Scalar(s.hint()))};
  };
  if (target == "aten.sym_size.int")
    return size(c.tensor("self").sym_size(c.integer("dim")));  // (Y1)
  if (target == "aten.sym_numel.default") return size(c.tensor("self").sym_numel());
  if (target == "aten.sym_stride.int") {
    Tensor x = c.tensor("self");
    int64_t d = c.integer("dim");
    return number(x.strides()[d < 0 ? d + x.dim() : d]);
  }
  if (target == "higher_order.with_effects") {
    // (token, op, *args): the core dialect orders effectful ops by threading a token
    // through them. The one such op kiln meets is linalg's error check, whose errors kiln's
    // kernels raise themselves (in eager runs): the token passes through, the op is dropped.
    std::string op = effectful_op(node);
    if (op != kCheckErrors)
      fail(ErrorKind::unsupported, "higher_order.with_effects of {}: an effectful op", op);
    return Results{Slot(Scalar(0)), Slot()};
  }
  if (target == "aten._assert_scalar.default") {
    if (!c.scalar("self").to_bool())
      fail(ErrorKind::value, "a runtime assertion of the program fails: {}",
           c.str("assert_msg", ""));
    return Results{};
  }
  if (target == "aten._assert_async.msg" || target == "aten._assert_async.default") {
    // torch._assert_async(t): t (one element) must be true when the program runs (the
    // core dialect's one_hot checks its classes so). A real value is checked here; a
    // traced one becomes (Y3) a data-dependent size, t != 0, that must be at least 1: a
    // runtime assertion of the program, checked by the executor at every run.
    Tensor t = c.tensor("self");
    std::string msg = c.str("assert_msg", "");
    KILN_CHECK(t.numel() == 1, shape, "{} of {}: the condition must hold one element", target,
               t.meta_str());
    Tensor truth = to(ne(reshape(t, {}), wrapped_number(0)), DType::i64);
    if (!truth.is_fake()) {
      if (item<int64_t>(truth) == 0)
        fail(ErrorKind::value, "a runtime assertion of the program fails: {}", msg);
      return Results{};
    }
    check_size(SymInt(1), Rel::le, item_size(truth));
    return Results{};
  }
  if (target == "aten._local_scalar_dense.default" || target == "aten.item.default") {
    Tensor t = c.tensor("self");
    if (is_integral(t.dtype(), false))  // (Y3) t.item() used as a size
      return size(item_size(t));
    // A float (or bool) read as a number: it can only be an operand of later arithmetic
    // (a SymFloat in the file), which kiln computes with the one-element tensor itself, so
    // nothing is read on the host.
    KILN_CHECK(t.numel() == 1, shape, "{} of {}: the tensor must hold one element", target,
               t.meta_str());
    return Results{Slot(reshape(t, {}))};
  }
  if (target == "aten.sym_constrain_range_for_size.default" ||
      target == "aten.sym_constrain_range.default") {
    std::optional<int64_t> lo = c.opt_integer("min"), hi = c.opt_integer("max");
    if (std::optional<SymInt> s = c.opt_sym_integer("size"); s && s->is_symbolic()) {
      // (Y3) a data-dependent size's range: runtime assertions of the program
      if (lo) check_size(SymInt(*lo), Rel::le, *s);
      if (hi) check_size(*s, Rel::le, SymInt(*hi));
      return Results{};
    }
    int64_t v = c.integer("size");
    if ((lo && v < *lo) || (hi && v > *hi))
      fail(ErrorKind::value, "{} is outside the range the program declares", v);
    return Results{};
  }
  if (target == "aten._assert_tensor_metadata.default") {
    Tensor x = c.tensor("a");
    if (auto dt = c.dtype("dtype"); dt && *dt != x.dtype())
      fail(ErrorKind::dtype, "the program asserts dtype {}, the value has {}", to_string(*dt),
           to_string(x.dtype()));
    if (auto sizes = c.opt_ints("size"); sizes && Dims(*sizes) != x.shape())
      fail(ErrorKind::shape, "the program asserts sizes {}, the value has {}", Dims(*sizes).str(),
           x.shape().str());
    c.opt_ints("stride");
    c.device("device");  // devices are slots: the program may run elsewhere (X3)
    c.accept_defaults({"layout"});
    return Results{};
  }
  // Python's operators on sizes (torch.export writes them as "_operator.mul" etc.)
  static const std::map<std::string, int> binary = {
      {"_operator.add", 0},      {"_operator.sub", 1},  {"_operator.mul", 2},
      {"_operator.floordiv", 3}, {"_operator.mod", 4},  {"_operator.eq", 5},
      {"_operator.ne", 6},       {"_operator.lt", 7},   {"_operator.le", 8},
      {"_operator.gt", 9},       {"_operator.ge", 10},  {"_operator.and_", 11},
      {"_operator.or_", 12},     {"torch.sym_max", 13}, {"torch.sym_min", 14},
      {"_operator.truediv", 15}, {"_operator.pow", 16}};
  auto sym_positional = [&](size_t i) -> std::optional<SymInt> {
    const json& in = node.at("inputs");
    return i < in.size() ? interop::sym_int_of(in[i].at("arg"), env) : std::nullopt;
  };
  if (auto it = binary.find(target); it != binary.end()) {
    // (Y1) Integer arithmetic on a symbolic size stays symbolic; a comparison decides
    // (a guard the program checks at run time).
    std::optional<SymInt> sa = sym_positional(0), sb = sym_positional(1);
    // (Y3) A comparison on a data-dependent size that its range does not settle: in an
    // exported graph it can only feed _assert_scalar (torch._check; a branch on it would
    // have failed the export), so it is that assertion, stated here, and holds.
    if (sa && sb && it->second >= 7 && it->second <= 10 &&
        (data_dependent_size(*sa) || data_dependent_size(*sb))) {
      const SymInt &lhs = it->second <= 8 ? *sa : *sb, &rhs = it->second <= 8 ? *sb : *sa;
      Rel rel = it->second == 7 || it->second == 9 ? Rel::lt : Rel::le;
      ShapeEnv* shape_env = ShapeEnv::current();
      sym::Range r = shape_env->range(sym::sub(lhs.as_expr(), rhs.as_expr()));
      bool settled = rel == Rel::lt ? (r.hi < 0 || r.lo >= 0) : (r.hi <= 0 || r.lo > 0);
      if (!settled) {
        check_size(lhs, rel, rhs);
        return number(Scalar(true));
      }
    }
    if (sa && sb && (sa->is_symbolic() || sb->is_symbolic())) {
      switch (it->second) {
        case 0: return size(*sa + *sb);
        case 1: return size(*sa - *sb);
        case 2: return size(*sa * *sb);
        case 3: return size(floordiv(*sa, *sb));
        case 4: return size(mod(*sa, *sb));
        case 5: return number(Scalar(*sa == *sb));
        case 6: return number(Scalar(*sa != *sb));
        case 7: return number(Scalar(*sa < *sb));
        case 8: return number(Scalar(*sa <= *sb));
        case 9: return number(Scalar(*sa > *sb));
        case 10: return number(Scalar(*sa >= *sb));
        case 13: return size(sym_max(*sa, *sb));
        case 14: return size(sym_min(*sa, *sb));
        default: break;  // the rest take numbers (the size pinned)
      }
    }
    Scalar a = positional(0), b = positional(1);
    bool ints = !a.is_floating() && !b.is_floating();
    auto floor_div = [](int64_t x, int64_t y) {
      if (y == 0) fail(ErrorKind::value, "a size is divided by zero");
      int64_t q = x / y;
      return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
    };
    double x = a.to_double(), y = b.to_double();
    int64_t i = a.to_int(), j = b.to_int();
    switch (it->second) {
      case 0: return number(ints ? Scalar(i + j) : Scalar(x + y));
      case 1: return number(ints ? Scalar(i - j) : Scalar(x - y));
      case 2: return number(ints ? Scalar(i * j) : Scalar(x * y));
      case 3: return number(ints ? Scalar(floor_div(i, j)) : Scalar(std::floor(x / y)));
      case 4:
        return number(ints ? Scalar(i - floor_div(i, j) * j) : Scalar(x - std::floor(x / y) * y));
      case 5: return number(Scalar(x == y));
      case 6: return number(Scalar(x != y));
      case 7: return number(Scalar(x < y));
      case 8: return number(Scalar(x <= y));
      case 9: return number(Scalar(x > y));
      case 10: return number(Scalar(x >= y));
      case 11: return number(Scalar(a.to_bool() && b.to_bool()));
      case 12: return number(Scalar(a.to_bool() || b.to_bool()));
      case 13: return number(ints ? Scalar(std::max(i, j)) : Scalar(std::max(x, y)));
      case 14: return number(ints ? Scalar(std::min(i, j)) : Scalar(std::min(x, y)));
      case 15: return number(Scalar(x / y));
      case 16: return number(Scalar(std::pow(x, y)));
    }
  }
  if (target == "_operator.neg") {
    if (std::optional<SymInt> s = sym_positional(0); s && s->is_symbolic())
      return size(SymInt(0) - *s);
    Scalar a = positional(0);
    return number(a.is_floating() ? Scalar(-a.to_double()) : Scalar(-a.to_int()));
  }
  if (target == "_operator.not_" || target == "torch.sym_not")
    return number(Scalar(!positional(0).to_bool()));
  if (target == "torch.sym_float") return number(Scalar(positional(0).to_double()));
  if (target == "torch.sym_int" || target == "math.floor")
    return number(Scalar(static_cast<int64_t>(std::floor(positional(0).to_double()))));
  if (target == "math.ceil")
    return number(Scalar(static_cast<int64_t>(std::ceil(positional(0).to_double()))));
  return std::nullopt;
}

bool is_bookkeeping(const std::string& target) {
  static const char* names[] = {"aten.sym_size.int",
                                "aten.sym_numel.default",
                                "aten.sym_stride.int",
                                "aten._assert_scalar.default",
                                "aten._assert_async.msg",
                                "aten._assert_async.default",
                                "aten.sym_constrain_range_for_size.default",
                                "aten.sym_constrain_range.default",
                                "aten._local_scalar_dense.default",
                                "aten.item.default",
                                "aten._assert_tensor_metadata.default",
                                "_operator.add",
                                "_operator.sub",
                                "_operator.mul",
                                "_operator.floordiv",
                                "_operator.mod",
                                "_operator.eq",
                                "_operator.ne",
                                "_operator.lt",
                                "_operator.le",
                                "_operator.gt",
                                "_operator.ge",
                                "_operator.and_",
                                "_operator.or_",
                                "torch.sym_max",
                                "torch.sym_min",
                                "_operator.truediv",
                                "_operator.pow",
                                "_operator.neg",
                                "_operator.not_",
                                "torch.sym_not",
                                "torch.sym_float",
                                "torch.sym_int",
                                "math.floor",
                                "math.ceil"};
  return std::find(std::begin(names), std::end(names), target) != std::end(names);
}

// The higher-order ops whose subgraph the importer inlines (autocast off, grad mode).
bool is_region(const std::string& target) {
  return target == "higher_order.wrap_with_autocast" ||
         target == "higher_order.wrap_with_set_grad_enabled";
}

// ---- extension ops ----------------------------------------------------------------------

// "mylib.foo.default" -> kiln's registered "mylib::foo" (E3), or nullopt.
std::optional<ops::OpKind> extension_for(const std::string& target) {
  size_t dot = target.find('.');
  if (dot == std::string::npos || target.rfind("aten.", 0) == 0 ||
      target.rfind("_operator.", 0) == 0 || target.rfind("torch.", 0) == 0 ||
      target.rfind("higher_order.", 0) == 0)
    return std::nullopt;
  size_t second = target.find('.', dot + 1);
  std::string op =
      target.substr(dot + 1, second == std::string::npos ? std::string::npos : second - dot - 1);
  std::string overload = second == std::string::npos ? "default" : target.substr(second + 1);
  std::string name =
      target.substr(0, dot) + "::" + op + (overload == "default" ? "" : "." + overload);
  for (ops::OpKind k : ops::extension_ops())
    if (ops::op_name(k) == name) return k;
  return std::nullopt;
}

// The arguments of a call of `schema` from the file's named arguments; `given_tensor`
// may supply a tensor argument itself (auto_functionalized's written ones).
std::vector<Value> extension_args(
    const ops::Schema& schema, const Call& c,
    const std::function<std::optional<Tensor>(const ops::ArgSpec&)>& given_tensor) {
  std::vector<Value> args;
  for (const ops::ArgSpec& a : schema.args) {
    if (std::optional<Tensor> t = given_tensor(a)) {
      args.emplace_back(*t);
      continue;
    }
    bool given = c.has(a.name);
    if (!given && a.default_value) {
      args.push_back(*a.default_value);
      continue;
    }
    using T = ops::ArgType;
    switch (a.type) {
      case T::tensor: args.emplace_back(c.tensor(a.name)); break;
      case T::opt_tensor: args.emplace_back(c.opt_tensor(a.name)); break;
      case T::tensor_list: args.emplace_back(c.tensors(a.name)); break;
      case T::scalar: args.emplace_back(c.scalar(a.name)); break;
      case T::opt_scalar:
        if (auto s = c.opt_scalar(a.name))
          args.emplace_back(*s);
        else
          args.emplace_back(std::monostate{});
        break;
      case T::int_: args.emplace_back(c.integer(a.name)); break;
      case T::opt_int:
        if (auto i = c.opt_integer(a.name))
          args.emplace_back(*i);
        else
          args.emplace_back(std::monostate{});
        break;
      case T::int_list: args.emplace_back(c.ints(a.name)); break;
      case T::float_: args.emplace_back(c.real(a.name)); break;
      case T::opt_float:
        if (auto d = c.opt_real(a.name))
          args.emplace_back(*d);
        else
          args.emplace_back(std::monostate{});
        break;
      case T::bool_: args.emplace_back(c.flag(a.name)); break;
      case T::dtype: args.emplace_back(*c.dtype(a.name)); break;
      case T::opt_dtype:
        if (auto d = c.dtype(a.name))
          args.emplace_back(*d);
        else
          args.emplace_back(std::monostate{});
        break;
      case T::device: args.emplace_back(*c.device(a.name)); break;
      case T::opt_device:
        if (auto d = c.device(a.name))
          args.emplace_back(*d);
        else
          args.emplace_back(std::monostate{});
        break;
      case T::str: args.emplace_back(Str(c.str(a.name))); break;
    }
  }
  return args;
}

Results call_extension(ops::OpKind op, const Call& c, const json& node) {
  const ops::Schema& schema = ops::op_info(op).schema;
  // (E3) every argument the file passes is one the registered schema has
  for (const json& in : node.at("inputs")) {
    std::string name = in.at("name").get<std::string>();
    if (std::none_of(schema.args.begin(), schema.args.end(),
                     [&](const ops::ArgSpec& a) { return a.name == name; }))
      fail(ErrorKind::value,
           "the file passes argument '{}', which kiln's registered schema '{}' lacks", name,
           schema.str());
  }
  Outputs outs = dispatch(
      op, extension_args(schema, c, [](const ops::ArgSpec&) { return std::optional<Tensor>(); }));
  Results r;
  for (const Tensor& t : outs) r.emplace_back(t);
  return r;
}

bool is_auto_functionalized(const std::string& target) {
  return target == "higher_order.auto_functionalized" ||
         target == "higher_order.auto_functionalized_v2";
}

// The custom op an auto_functionalized node applies: its first argument, an operator.
std::string auto_functionalized_op(const json& node) {
  const json& inputs = node.at("inputs");
  KILN_CHECK(!inputs.empty() && inputs[0].at("arg").contains("as_operator"), format,
             "auto_functionalized without its operator");
  std::string op = inputs[0].at("arg").at("as_operator").get<std::string>();
  return op.rfind("torch.ops.", 0) == 0 ? op.substr(10) : op;
}

// (I2, E3) torch.export's functional form of a custom op that writes arguments, as the
// op's auto-functionalized twin (Note [Extension ops that write several arguments]):
// auto_functionalized(op, **args) returns the op's results, then the written arguments'
// new values in schema order -- the twin's outputs exactly. auto_functionalized_v2
// names each written argument by `_<name>_base_index` into `_all_bases`, as the whole
// base or a view of it (`_<name>_slice_dim/_start/_end`, or `_<name>_size/_stride/
// _storage_offset`), and returns one new value per base: each written argument's new
// value scattered into its base, in schema order.
Results call_auto_functionalized(const std::string& target, const Call& c, const json& node) {
  std::string name = auto_functionalized_op(node);
  std::optional<ops::OpKind> op = extension_for(name);
  KILN_CHECK(op, unsupported, "{} of '{}', which is not a registered kiln extension op", target,
             name);
  const ops::ExtensionOp& e = *ops::extension_op(*op);
  KILN_CHECK(e.auto_functional, unsupported,
             "{} of '{}', which writes none of its arguments in kiln's registered schema '{}'",
             target, name, e.info.schema.str());
  const ops::Schema& schema = e.info.schema;
  if (target == "higher_order.auto_functionalized") {
    Outputs outs =
        dispatch(*e.auto_functional, extension_args(schema, c, [&](const ops::ArgSpec& a) {
          return a.mutated ? std::optional<Tensor>(c.tensor(a.name)) : std::nullopt;
        }));
    Results r;
    for (const Tensor& t : outs) r.emplace_back(t);
    return r;
  }
  TensorList bases = c.tensors("_all_bases");
  // Per written argument (schema order): its base, and how it views it.
  struct Written {
    size_t base;
    std::function<Tensor(const Tensor&)> view;                    // base -> argument
    std::function<Tensor(const Tensor&, const Tensor&)> scatter;  // (base, value) -> base
  };
  std::vector<Written> written;
  auto arg_of = [&](const ops::ArgSpec& a) -> std::optional<Tensor> {
    if (!a.mutated) return std::nullopt;
    std::string key = "_" + a.name;
    int64_t i = c.integer(key + "_base_index");
    KILN_CHECK(i >= 0 && i < static_cast<int64_t>(bases.size()), format,
               "{}: '{}' names base {} of {}", target, a.name, i, bases.size());
    Written w{static_cast<size_t>(i), [](const Tensor& b) { return b; },
              [](const Tensor&, const Tensor& v) { return v; }};
    if (c.has(key + "_slice_dim")) {
      int64_t dim = c.integer(key + "_slice_dim");
      std::optional<int64_t> start = c.opt_integer(key + "_slice_start"),
                             end = c.opt_integer(key + "_slice_end");
      auto sym = [](std::optional<int64_t> v) {
        return v ? std::optional<SymInt>(SymInt(*v)) : std::nullopt;
      };
      w.view = [=](const Tensor& b) { return slice(b, dim, sym(start), sym(end)); };
      w.scatter = [=](const Tensor& b, const Tensor& v) {
        return slice_scatter(b, v, dim, start, end);
      };
    } else if (c.has(key + "_size")) {
      IntList size = c.ints(key + "_size"), stride = c.ints(key + "_stride");
      int64_t offset = c.integer(key + "_storage_offset", 0);
      w.view = [=](const Tensor& b) { return as_strided(b, size, stride, offset); };
      w.scatter = [=](const Tensor& b, const Tensor& v) {
        return as_strided_scatter(b, v, size, stride, offset);
      };
    }
    written.push_back(w);
    return w.view(bases[w.base]);
  };
  Outputs outs = dispatch(*e.auto_functional, extension_args(schema, c, arg_of));
  size_t own = outs.size() - written.size();
  Results r;
  for (size_t i = 0; i < own; ++i) r.emplace_back(outs[i]);
  TensorList now = bases;
  for (size_t k = 0; k < written.size(); ++k)
    now[written[k].base] = written[k].scatter(now[written[k].base], outs[own + k]);
  for (const Tensor& b : now) r.emplace_back(b);
  return r;
}

// ---- the import -------------------------------------------------------------------------

ImportedProgram import(const Archive& archive, const std::string& file) {
  Importer im{archive, file, {}};
  if (!archive.has("archive_format"))
    im.bad("no 'archive_format' entry (not an archive torch.export.save wrote)");
  std::string format = archive.text("archive_format");
  if (format != "pt2")
    im.bad(fmt::format("archive_format is '{}', not 'pt2'", format.substr(0, 40)));
  if (archive.has("byteorder") && archive.text("byteorder") != "little")
    im.bad("the archive's byte order is not little-endian");

  // The model: models/<name>.json, "model" when torch.export.save wrote one program.
  std::vector<std::string> models;
  for (const std::string& e : archive.list("models"))
    if (e.size() > 5 && e.compare(e.size() - 5, 5, ".json") == 0) models.push_back(e);
  if (models.empty()) im.bad("no program under models/");
  std::string model_entry = archive.has("models/model.json") ? "models/model.json" : models[0];
  std::string model = model_entry.substr(7, model_entry.size() - 12);
  if (models.size() > 1)
    im.notes.push_back(
        fmt::format("the archive holds {} programs; '{}' is imported", models.size(), model));
  json doc = im.parse(model_entry);

  const json& version = im.at(doc, "schema_version", model_entry);
  int major = im.at(version, "major", "schema_version").get<int>();
  if (major != kSchemaMajor)
    fail(ErrorKind::format,
         "[import] {}: the program is serialized with schema version {}.{}; kiln reads "
         "version {}.x",
         file, major, version.value("minor", 0), kSchemaMajor);
  const json& gm = im.at(doc, "graph_module", model_entry);
  const json& graph = im.at(gm, "graph", "graph_module");
  const json& sig = im.at(gm, "signature", "graph_module");
  const json& values = im.at(graph, "tensor_values", "graph");
  const json& nodes = im.at(graph, "nodes", "graph");

  // (I2) Every op the graph uses must be one kiln maps: one error lists all that are not.
  std::vector<std::string> missing;
  std::function<void(const json&)> scan = [&](const json& graph_nodes) {
    for (const json& node : graph_nodes) {
      std::string target = im.at(node, "target", "a node").get<std::string>();
      if (target.rfind("torch.ops.", 0) == 0) target = target.substr(10);
      if (is_region(target)) {  // its subgraph's ops, inlined where it is
        for (const json& in : im.at(node, "inputs", "a node"))
          if (in.contains("arg") && in.at("arg").contains("as_graph"))
            scan(im.at(in.at("arg").at("as_graph").at("graph"), "nodes", "a subgraph"));
        continue;
      }
      if (is_auto_functionalized(target)) {  // the custom op it applies must be there
        std::string op = auto_functionalized_op(node);
        if (!extension_for(op))
          missing.push_back(node_label(node, op, /*with_source=*/false) + " (through " + target +
                            ")");
        continue;
      }
      if (target == "higher_order.with_effects") {
        if (std::string op = effectful_op(node); op != kCheckErrors)
          missing.push_back(node_label(node, op, /*with_source=*/false) + " (through " + target +
                            ")");
        continue;
      }
      if (!is_bookkeeping(target) && !interop::find_adapter(target) && !extension_for(target))
        missing.push_back(node_label(node, target, /*with_source=*/false));
    }
  };
  scan(nodes);
  if (!missing.empty())  // one line, every op: a user sees the whole gap at once
    fail(ErrorKind::unsupported,
         "[import] {}: {} op{} kiln does not map: {} (the table is kiln/interop/ops.cpp; "
         "a custom op needs a kiln extension op of the same name)",
         file, missing.size(), missing.size() == 1 ? "" : "s", fmt::join(missing, "; "));

  json weights = im.payload_config(model, "weights");
  json constants = im.payload_config(model, "constants");
  auto weight = [&](const json& config, const std::string& folder, const std::string& fqn) {
    if (!config.contains(fqn)) im.bad(fmt::format("no payload for '{}' in data/{}", fqn, folder));
    return im.payload("data/" + folder + "/", fqn, config.at(fqn));
  };

  // Inputs: state and constants as kiln's, user inputs as fake tensors of the file's
  // example sizes. A tensor tied to one already bound (same storage, same view) is that
  // input again: kiln keeps one tensor (I3).
  ExportedProgram program;
  std::vector<std::string> names;          // kiln graph inputs, in order
  std::vector<Tensor> real;                // their values (state, constants) or undefined (user)
  Env constants_in;                        // constant_input specs: numbers bound by name
  std::map<std::string, int> input_of;     // pt2 placeholder -> kiln input
  std::map<std::string, int> state_input;  // parameter / buffer / constant name -> kiln input
  std::vector<std::pair<Tensor, std::string>> seen_state;  // for ties
  auto bind_state = [&](const std::string& name, const Tensor& t, InputSpec spec, bool state,
                        const std::string& fqn) {
    for (auto& [other, other_fqn] : seen_state)
      if (other.storage() == t.storage() && other.shape() == t.shape() &&
          other.strides() == t.strides() && other.offset() == t.offset()) {
        input_of[name] = state_input[other_fqn];
        state_input[fqn] = state_input[other_fqn];
        im.notes.push_back(
            fmt::format("'{}' is tied to '{}' (one storage in the file): kiln keeps one tensor, "
                        "'{}'",
                        spec.target, other_fqn, other_fqn));
        return;
      }
    input_of[name] = static_cast<int>(names.size());
    seen_state.emplace_back(t, fqn);
    state_input[fqn] = input_of[name];
    names.push_back(name);
    real.push_back(t);
    program.signature.inputs.push_back(spec);
    (state ? program.state : program.constants).emplace_back(spec.target, t);
  };
  int n_user = 0;
  std::vector<std::pair<std::string, Importer::Meta>> user_inputs;
  std::vector<Dims> user_sizes;  // (Y1) their sizes, symbolic where the file says
  if (doc.contains("range_constraints") && doc.at("range_constraints").is_object())
    im.range_constraints = &doc.at("range_constraints");
  for (const json& spec : im.at(sig, "input_specs", "signature")) {
    if (!spec.is_object() || spec.size() != 1) im.bad("an input spec is not a one-key union");
    auto first = spec.begin();  // a one-key union
    const std::string& kind = first.key();
    const json& v = first.value();
    if (kind == "parameter") {
      std::string name = v.at("arg").at("name"), fqn = v.at("parameter_name");
      bind_state(name, weight(weights, "weights", fqn), {Kind::parameter, name, fqn}, true, fqn);
    } else if (kind == "buffer") {
      std::string name = v.at("arg").at("name"), fqn = v.at("buffer_name");
      bool persistent = v.value("persistent", true);
      Tensor t = persistent ? weight(weights, "weights", fqn) : weight(constants, "constants", fqn);
      bind_state(name, t, {Kind::buffer, name, fqn, persistent}, persistent, fqn);
    } else if (kind == "tensor_constant") {
      std::string name = v.at("arg").at("name"), fqn = v.at("tensor_constant_name");
      bind_state(name, weight(constants, "constants", fqn), {Kind::constant, name, fqn, false},
                 false, fqn);
    } else if (kind == "user_input") {
      const json& arg = v.at("arg");
      if (!arg.contains("as_tensor"))
        fail(ErrorKind::unsupported,
             "[import] {}: user input {} is not a tensor; kiln programs take tensors only", file,
             arg.dump().substr(0, 80));
      std::string name = arg.at("as_tensor").at("name");
      if (!values.contains(name))
        im.bad(fmt::format("user input '{}' has no tensor_values entry", name));
      std::string target = "input_" + std::to_string(n_user);
      Dims sizes = im.user_sizes(values.at(name), fmt::format("input '{}'", name), target);
      Importer::Meta m = im.tensor_meta(values.at(name), fmt::format("input '{}'", name));
      user_sizes.push_back(std::move(sizes));
      input_of[name] = static_cast<int>(names.size());
      ++n_user;
      names.push_back(name);
      real.emplace_back();
      user_inputs.emplace_back(name, m);
      program.signature.inputs.push_back({Kind::user_input, name, target});
    } else if (kind == "token") {  // with_effects' ordering token: no value of the program's
      constants_in[v.at("arg").at("name").get<std::string>()] = Scalar(0);
    } else if (kind == "constant_input") {
      std::string name = v.at("name");
      std::optional<Scalar> n = interop::number_of(v.at("value"), constants_in);
      if (!n)
        fail(ErrorKind::unsupported, "[import] {}: constant input '{}' is not a number", file,
             name);
      constants_in[name] = *n;
    } else {
      fail(ErrorKind::unsupported,
           "[import] {}: a '{}' input (kiln imports parameters, buffers, tensor "
           "constants and tensor inputs)",
           file, kind);
    }
  }

  // Outputs: user outputs are returned; writes the file lists (buffer or input mutations
  // of the core-ATen dialect) become copies into those inputs, which kiln's capture turns
  // back into its mutation outputs.
  std::vector<std::string> user_outputs;
  std::vector<std::pair<std::string, int>> writes;  // value, the kiln input it is written into
  for (const json& spec : im.at(sig, "output_specs", "signature")) {
    if (!spec.is_object() || spec.size() != 1) im.bad("an output spec is not a one-key union");
    auto first = spec.begin();  // a one-key union
    const std::string& kind = first.key();
    const json& v = first.value();
    if (kind == "user_output") {
      const json& arg = v.at("arg");
      if (!arg.contains("as_tensor"))
        fail(ErrorKind::unsupported,
             "[import] {}: user output {} is not a tensor; kiln programs return tensors", file,
             arg.dump().substr(0, 80));
      user_outputs.push_back(arg.at("as_tensor").at("name"));
    } else if (kind == "buffer_mutation" || kind == "parameter_mutation") {
      // (a parameter written in forward: an embedding with max_norm renormalizes its rows)
      std::string fqn = v.at(kind == "buffer_mutation" ? "buffer_name" : "parameter_name");
      if (!state_input.count(fqn)) im.bad(fmt::format("a mutation of unknown state '{}'", fqn));
      writes.emplace_back(v.at("arg").at("name"), state_input.at(fqn));
    } else if (kind == "token") {  // the ordering token's last value: not an output
      continue;
    } else if (kind == "user_input_mutation") {
      std::string in = v.at("user_input_name");
      if (!input_of.count(in)) im.bad(fmt::format("a mutation of unknown input '{}'", in));
      writes.emplace_back(v.at("arg").at("name"), input_of.at(in));
    } else {
      fail(ErrorKind::unsupported,
           "[import] {}: a '{}' output: training programs (losses, gradients, parameter "
           "updates) are not imported; export the forward and capture training with kiln",
           file, kind);
    }
  }

  // The trace: fake twins of the state on the devices the file names (the machine need not
  // have them: X3 binds them later); user inputs as fake tensors of the example sizes.
  auto state_device = [&](const std::string& fqn) -> std::optional<Device> {
    for (const json* config : {&weights, &constants})
      if (config->contains(fqn))
        return Importer::device_of(config->at(fqn).at("tensor_meta").at("device"));
    return std::nullopt;
  };
  TensorList traced;
  // (Y1) The trace runs with the file's symbols: sizes computed from them stay symbolic,
  // and the decisions taken on them are guards the program checks at run time. Active
  // without symbols too: data-dependent ops make their unbacked sizes there (Y3).
  std::optional<ShapeEnvGuard> symbolic;
  im.shape_env.scope_provider = [] { return current_scope(); };
  symbolic.emplace(&im.shape_env);
  {
    FakeMode fake;
    size_t u = 0;
    for (size_t i = 0; i < names.size(); ++i) {
      if (real[i].defined()) {
        Tensor f = fake.from_real(real[i]);
        if (auto d = state_device(program.signature.inputs[i].target); d && *d != f.device())
          f = to(f, *d);
        traced.push_back(f);
      } else {
        const Importer::Meta& m = user_inputs[u].second;
        traced.push_back(empty(user_sizes[u++], {.dtype = m.dtype, .device = m.device}));
      }
    }
  }

  interop::DeviceOf device_of = [](const json& d) { return Importer::device_of(d); };
  std::vector<Env*> env_stack;  // the env of the graph running now (subgraphs nest)
  // Runs `graph_nodes` on `env` (names to values), binding each node's outputs.
  std::function<void(const json&, Env&, const json&)> run_nodes;
  // (I2) A region PyTorch wraps in a higher-order op -- autocast switched off, or grad
  // mode set -- is its subgraph inlined: its inputs bound to the operands after the
  // graph, its nodes run here, its outputs the op's. kiln has no autocast, so a region
  // that switches autocast on is refused.
  auto inline_region = [&](const std::string& target, const json& node) -> Results {
    const json& inputs = node.at("inputs");
    size_t g = 0;
    while (g < inputs.size() && !inputs[g].at("arg").contains("as_graph")) ++g;
    if (g == inputs.size()) fail(ErrorKind::format, "{} without a subgraph argument", target);
    std::optional<autograd::GradModeGuard> grad;
    if (target == "higher_order.wrap_with_autocast") {
      KILN_CHECK(g >= 3 && !inputs[2].at("arg").value("as_bool", true), unsupported,
                 "an autocast region (torch.autocast enabled) is not supported by kiln's importer: "
                 "export the model without autocast");
    } else {
      KILN_CHECK(g >= 1 && inputs[0].at("arg").contains("as_bool"), format,
                 "{} without its grad mode", target);
      grad.emplace(inputs[0].at("arg").at("as_bool").get<bool>());
    }
    const json& sub = inputs[g].at("arg").at("as_graph").at("graph");
    Env inner = constants_in;
    const json& params = sub.at("inputs");
    KILN_CHECK(params.size() == inputs.size() - g - 1, format,
               "{}: its subgraph takes {} inputs, the op passes {}", target, params.size(),
               inputs.size() - g - 1);
    for (size_t i = 0; i < params.size(); ++i) {
      const json& operand = inputs[g + 1 + i].at("arg");
      KILN_CHECK(params[i].contains("as_tensor") && operand.contains("as_tensor"), unsupported,
                 "{}: only tensor operands are supported", target);
      std::string from = operand.at("as_tensor").at("name").get<std::string>();
      auto it = env_stack.back()->find(from);
      KILN_CHECK(it != env_stack.back()->end(), format, "{}: operand '{}' is not defined", target,
                 from);
      inner[params[i].at("as_tensor").at("name").get<std::string>()] = it->second;
    }
    run_nodes(sub.at("nodes"), inner,
              sub.contains("tensor_values") ? sub.at("tensor_values") : json::object());
    Results out;
    for (const json& o : sub.at("outputs")) {
      KILN_CHECK(o.contains("as_tensor"), unsupported, "{}: only tensor outputs are supported",
                 target);
      std::string name = o.at("as_tensor").at("name").get<std::string>();
      auto it = inner.find(name);
      KILN_CHECK(it != inner.end(), format, "{}: its subgraph returns '{}', which no node defines",
                 target, name);
      out.push_back(it->second);
    }
    return out;
  };
  run_nodes = [&](const json& graph_nodes, Env& env, const json& node_values) {
    env_stack.push_back(&env);
    struct Pop {
      std::vector<Env*>& stack;
      ~Pop() { stack.pop_back(); }
    } pop{env_stack};
    for (const json& node : graph_nodes) {
      std::string target = node.at("target").get<std::string>();
      if (target.rfind("torch.ops.", 0) == 0) target = target.substr(10);
      std::string path = module_path(node);
      std::optional<ScopeName> scope;
      if (!path.empty()) scope.emplace(path);
      Results results;
      SymOpScope sym_op(target);  // (Y2) guards taken outside a meta function name the node's op
      try {
        Call call(node, env, device_of, &node_values);
        if (auto r = bookkeeping(target, call, node, env)) {
          results = std::move(*r);
        } else if (is_region(target)) {
          results = inline_region(target, node);
        } else if (is_auto_functionalized(target)) {
          results = call_auto_functionalized(target, call, node);
        } else if (auto ext = extension_for(target)) {
          results = call_extension(*ext, call, node);
        } else {
          bool inplace = false;
          interop::Adapter adapter = interop::find_adapter(target, &inplace);
          results = adapter(call);
          if (inplace) {  // the functional twin's value written into self
            Tensor self = call.tensor("self");
            copy_(self, std::get<Tensor>(results.at(0)));
            results = {Slot(self)};
          }
          if (std::vector<std::string> left = call.unread(); !left.empty())
            fail(ErrorKind::unsupported, "argument{} {} of {} {} not supported by kiln's importer",
                 left.size() == 1 ? "" : "s", fmt::join(left, ", "), target,
                 left.size() == 1 ? "is" : "are");
        }
      } catch (const Error& e) {
        std::string what = e.what();
        if (what.rfind("[import]", 0) == 0) throw;
        throw Error(e.kind(),
                    fmt::format("[import] {}: {}: {}", file, node_label(node, target), what));
      } catch (const json::exception& e) {
        throw Error(ErrorKind::format, fmt::format("[import] {}: {}: malformed node: {}", file,
                                                   node_label(node, target), e.what()));
      }
      // Bind the outputs in order: one result per tensor or number, a list takes several.
      size_t next = 0;
      auto take = [&](const std::string& name) {
        if (next >= results.size())
          throw Error(ErrorKind::format,
                      fmt::format("[import] {}: {} names more outputs than the op returns", file,
                                  node_label(node, target)));
        env[name] = results[next++];
      };
      for (const json& out : node.at("outputs")) {
        if (out.contains("as_tensor"))
          take(out.at("as_tensor").at("name"));
        else if (out.contains("as_tensors"))
          for (const json& t : out.at("as_tensors")) take(t.at("name"));
        else if (out.contains("as_sym_int") && out.at("as_sym_int").contains("as_name"))
          take(out.at("as_sym_int").at("as_name"));
        else if (out.contains("as_sym_bool") && out.at("as_sym_bool").contains("as_name"))
          take(out.at("as_sym_bool").at("as_name"));
        else if (out.contains("as_sym_float") && out.at("as_sym_float").contains("as_name"))
          take(out.at("as_sym_float").at("as_name"));
        else if (out.contains("as_none"))
          ++next;
        else
          throw Error(ErrorKind::format,
                      fmt::format("[import] {}: {}: an output of kind {}", file,
                                  node_label(node, target), out.dump().substr(0, 60)));
      }
    }
  };
  auto fn = [&](const TensorList& in) -> TensorList {
    Env env = constants_in;
    for (const auto& [name, index] : input_of) env[name] = in[static_cast<size_t>(index)];
    run_nodes(nodes, env, values);
    auto tensor_named = [&](const std::string& name) {
      auto it = env.find(name);
      if (it == env.end() || !std::holds_alternative<Tensor>(it->second))
        throw Error(ErrorKind::format,
                    fmt::format("[import] {}: the graph returns '{}', which no node defines "
                                "as a tensor",
                                file, name));
      return std::get<Tensor>(it->second);
    };
    for (const auto& [value, into] : writes) {
      Tensor dst = in[static_cast<size_t>(into)];
      copy_(dst, tensor_named(value));
    }
    TensorList outs;
    for (const std::string& name : user_outputs) outs.push_back(tensor_named(name));
    return outs;
  };
  passes::CapturedProgram captured = passes::capture(
      fn, traced, {.write_back = passes::WriteBack::out_of_graph, .input_names = names});
  if (symbolic) {
    symbolic.reset();
    program.shapes =
        detail::settle_shapes(im.shape_env);  // the file's dims are automatic: no errors
    for (const SymbolInfo& s : program.shapes.symbols)
      im.notes.push_back(s.unbacked
                             ? fmt::format("{} is data-dependent ({}): in [{}, {}], read when the "
                                           "program runs",
                                           sym::str(s.expr), s.source, s.min, s.max)
                             : fmt::format("{} ({}) is symbolic: {} in [{}, {}]", s.source,
                                           s.dim_name, sym::str(s.expr), s.min, s.max));
  }
  finish_program(program, std::move(captured));
  return {std::move(program), std::move(im.notes)};
}

// Anything a malformed file trips that is not already a kiln::Error (a JSON value of the
// wrong type deep inside the program) is a format error naming the file.
template <typename F>
ImportedProgram as_format_errors(const std::string& file, F&& f) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(ErrorKind::format, "[import] {}: malformed archive: {}", file, e.what());
  }
}

}  // namespace

ImportedProgram read_pt2(const std::string& path) {
  return as_format_errors(path, [&] {
    Archive archive = Archive::open(path);
    return import(archive, path);
  });
}

ImportedProgram read_pt2(std::span<const unsigned char> bytes, const std::string& name) {
  return as_format_errors(name, [&] {
    Archive archive = Archive::from_bytes(bytes, name);
    return import(archive, name);
  });
}

ExportedProgram load_pt2(const std::string& path, const DeviceMap& map) {
  ExportedProgram p = read_pt2(path).program;
  bind_devices(p, map, path);
  return p;
}

bool is_pt2_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  unsigned char magic[4] = {};
  ssize_t n = ::read(fd, magic, 4);
  ::close(fd);
  return n == 4 && magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 && magic[3] == 4;
}

}  // namespace kiln

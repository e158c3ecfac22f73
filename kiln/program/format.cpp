// The program file: one safetensors file. Tensors (state, constants) are its tensors;
// the program (format version, device table, graph, signature, recipes) is JSON stored
// under the metadata key "kiln.program". See docs/program-format.md.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "kiln/core/overloaded.h"
#include "kiln/dispatch/library.h"
#include "kiln/ops/extension.h"
#include "kiln/program/mapped_file.h"
#include "kiln/program/program.h"

namespace kiln {

using json = nlohmann::json;
using Kind = InputSpec::Kind;

namespace {

// Version 2 records C++ numbers as scalar arguments of nodes (`mul(%x, 0.125)`) instead
// of constant nodes; version 1 files have none and still load. Version 3 adds dynamic
// shapes (Y4): sizes may be expression strings ("4*s0"), size arguments `sym_ints`, and
// the program a `shapes` table of symbols and guards; files of 1 and 2 still load.
constexpr int kFormatVersion = 3;
constexpr int kOldestFormatVersion = 1;
constexpr const char* kProgramKey = "kiln.program";

[[noreturn]] void bad(const std::string& path, const std::string& why) {
  fail(ErrorKind::format, "[load] {}: {}", path, why);
}

// ---- dtypes as safetensors names them --------------------------------------------

constexpr std::pair<DType, std::string_view> kSafeDTypes[] = {
    {DType::f32, "F32"}, {DType::f64, "F64"}, {DType::f16, "F16"}, {DType::bf16, "BF16"},
    {DType::i64, "I64"}, {DType::i32, "I32"}, {DType::i16, "I16"}, {DType::i8, "I8"},
    {DType::u8, "U8"},   {DType::b8, "BOOL"}};

std::string_view safe_name(DType d) {
  for (auto [dt, name] : kSafeDTypes)
    if (dt == d) return name;
  return "?";
}

std::optional<DType> safe_dtype(std::string_view name) {
  for (auto [dt, n] : kSafeDTypes)
    if (n == name) return dt;
  return std::nullopt;
}

// ---- the device table (X3) ----------------------------------------------------------

struct DeviceTable {
  std::vector<Device> slots;
  int slot(Device d) {
    auto it = std::find(slots.begin(), slots.end(), d);
    if (it != slots.end()) return static_cast<int>(it - slots.begin());
    slots.push_back(d);
    return static_cast<int>(slots.size()) - 1;
  }
};

// ---- graph <-> JSON -------------------------------------------------------------------

// JSON has no inf or nan: such floats are written as the strings "inf", "-inf", "nan".
json number(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}
double number_of(const json& j) {
  if (!j.is_string()) return j.get<double>();
  const std::string& s = j.get_ref<const std::string&>();
  if (s == "inf") return INFINITY;
  if (s == "-inf") return -INFINITY;
  if (s == "nan") return NAN;
  throw std::invalid_argument(
      fmt::format("a number written as a string must be inf, -inf or nan, got '{}'", s));
}

// Sizes as JSON: integers, and strings for expressions.
json sizes_json(const Dims& d) {
  json out = json::array();
  for (size_t i = 0; i < d.size(); ++i) {
    SymInt s = d.sym(i);
    if (s.is_symbolic())
      out.push_back(sym::str(s.expr()));
    else
      out.push_back(s.hint());
  }
  return out;
}

json meta_json(const ir::ValueMeta& m, DeviceTable& dt) {
  return {
      {"shape", sizes_json(m.shape)},
      {"strides", sizes_json(m.strides)},
      {"offset", m.offset.is_symbolic() ? json(sym::str(m.offset.expr())) : json(m.offset.hint())},
      {"dtype", to_string(m.dtype)},
      {"device", dt.slot(m.device)}};
}

json ref_json(const ir::Ref& r) { return {{"node", r.node->name()}, {"output", r.output}}; }

json arg_json(const ir::Arg& a, DeviceTable& dt) {
  return std::visit(Overloaded{[](std::monostate) -> json {
                                 return {{"none", true}};
                               },
                               [](const ir::Ref& r) -> json {
                                 return {{"ref", ref_json(r)}};
                               },
                               [](const ir::RefList& l) -> json {
                                 json refs = json::array();
                                 for (const ir::Ref& r : l) refs.push_back(ref_json(r));
                                 return {{"refs", refs}};
                               },
                               [](const Scalar& s) -> json {
                                 if (s.is_floating())
                                   return {{"scalar", {{"f", number(s.to_double())}}}};
                                 if (s.is_bool()) return {{"scalar", {{"b", s.to_bool()}}}};
                                 return {{"scalar", {{"i", s.to_int()}}}};
                               },
                               [](int64_t v) -> json {
                                 return {{"int", v}};
                               },
                               [](double v) -> json {
                                 return {{"float", number(v)}};
                               },
                               [](bool v) -> json {
                                 return {{"bool", v}};
                               },
                               [](const IntList& v) -> json {
                                 return {{"ints", v}};
                               },
                               [](DType d) -> json {
                                 return {{"dtype", to_string(d)}};
                               },
                               [&](Device d) -> json {
                                 return {{"device", dt.slot(d)}};
                               },
                               [](Str s) -> json {
                                 return {{"str", s.view()}};
                               },
                               [](const SymIntList& v) -> json {
                                 return {{"sym_ints", sizes_json(v.dims())}};
                               }},
                    a);
}

json graph_json(const ir::Graph& g, DeviceTable& dt) {
  json nodes = json::array();
  for (ir::Node* n : g.nodes()) {
    json j = {{"name", n->name()}};
    switch (n->opcode()) {
      case ir::Opcode::input: j["op"] = "input"; break;
      case ir::Opcode::constant: j["op"] = "constant"; break;
      case ir::Opcode::call:
        j["op"] = "call";
        j["target"] = ops::op_name(n->op());
        break;
      case ir::Opcode::output: j["op"] = "output"; break;
    }
    json args = json::array();
    for (const ir::Arg& a : n->args()) args.push_back(arg_json(a, dt));
    j["args"] = args;
    json meta = json::array();
    for (const ir::ValueMeta& m : n->meta()) meta.push_back(meta_json(m, dt));
    j["meta"] = meta;
    if (!n->scope().empty()) j["scope"] = n->scope();
    nodes.push_back(j);
  }
  return nodes;
}

// Readers: every access checked, every failure a format Error naming the file. Integer
// fields must be JSON integers within range (a float is never truncated into one), and
// every tensor description is bounded before anything is allocated from it.
struct Reader {
  const std::string& path;
  const std::vector<Device>& devices;
  int version = kFormatVersion;
  const ShapeSpec* shapes = nullptr;  // (Y4) the symbols sizes may name

  const json& at(const json& j, const char* key, const std::string& where) const {
    if (!j.is_object() || !j.contains(key)) bad(path, fmt::format("{} has no '{}'", where, key));
    return j.at(key);
  }
  int64_t integer(const json& j, const std::string& what) const {
    if (!j.is_number_integer() || (j.is_number_unsigned() && j.get<uint64_t>() > INT64_MAX)) {
      std::string text = j.dump();
      if (text.size() > 40) text = text.substr(0, 37) + "...";
      bad(path, fmt::format("{} must be an integer within int64, got {}", what, text));
    }
    return j.get<int64_t>();
  }
  IntList integers(const json& j, const std::string& what) const {
    if (!j.is_array()) bad(path, what + " must be a list of integers");
    IntList v;
    v.reserve(j.size());
    for (const json& x : j) v.push_back(integer(x, what));
    return v;
  }
  // Names, ops and strings are printed by `kiln show` and in messages: a control character
  // (a newline forging a graph line, an ANSI escape) makes the file malformed.
  std::string text(std::string s, const std::string& what) const {
    for (unsigned char c : s)
      if (c < 0x20 || c == 0x7f)
        bad(path, fmt::format("{} holds a control character (0x{:02x})", what, c));
    return s;
  }
  template <typename T>
  T get(const json& j, const char* key, const std::string& where) const {
    const json& v = at(j, key, where);
    std::string what = fmt::format("'{}' of {}", key, where);
    if constexpr (std::is_same_v<T, IntList>) {
      return integers(v, what);
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      int64_t i = integer(v, what);
      if (i < std::numeric_limits<T>::min() || i > std::numeric_limits<T>::max())
        bad(path, fmt::format("{} is out of range: {}", what, i));
      return static_cast<T>(i);
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!v.is_string()) bad(path, fmt::format("{} has the wrong type", what));
      return text(v.get<std::string>(), what);
    } else {
      try {
        return v.get<T>();
      } catch (const json::exception&) {
        bad(path, fmt::format("{} has the wrong type", what));
      }
    }
  }
  Device device(const json& j, const std::string& where) const {
    int64_t s = integer(j, where + ": a device slot");
    if (s < 0 || s >= static_cast<int64_t>(devices.size()))
      bad(path, fmt::format("{}: device slot {} is not in the device table ({} slots)", where, s,
                            devices.size()));
    return devices[s];
  }
  DType dtype(const std::string& name, const std::string& where) const {
    try {
      return dtype_from_string(name);
    } catch (const Error&) {
      bad(path, fmt::format("{}: unknown dtype '{}'", where, name));
    }
  }
  // (Y4) Sizes: integers, or expressions over the program's symbols, each kept with its
  // value at the symbols' example values.
  Dims sizes(const json& j, const std::string& what) const {
    if (!j.is_array()) bad(path, what + " must be a list of sizes");
    Dims out(j.size());
    for (size_t i = 0; i < j.size(); ++i) {
      if (!j[i].is_string()) {
        out.set(i, integer(j[i], what));
        continue;
      }
      if (!shapes || shapes->empty())
        bad(path, fmt::format("{} has a symbolic size but the program declares no symbols", what));
      const sym::Expr* e = sym::parse(j[i].get<std::string>(), path + ": " + what);
      for (const sym::Expr* s : sym::symbols_of(e))
        if (shapes->index_of(s) < 0)
          bad(path, fmt::format("{} uses the undeclared symbol {}", what, sym::str(s)));
      int64_t hint = sym::eval(e, [&](const sym::Expr* s) {
        return shapes->symbols[static_cast<size_t>(shapes->index_of(s))].hint;
      });
      out.set(i, SymInt(e, hint));
    }
    return out;
  }
  // A shape that describes a tensor kiln can hold (see check_sizes).
  Dims shape(const Dims& shape, DType dtype, const std::string& where) const {
    try {
      check_sizes(shape, dtype, "load");
    } catch (const Error& e) {
      bad(path, fmt::format("{}: {}", where, e.what()));
    }
    return shape;
  }
  Dims shape(const IntList& v, DType dtype, const std::string& where) const {
    Dims shape(v);
    try {
      check_sizes(shape, dtype, "load");
    } catch (const Error& e) {
      bad(path, fmt::format("{}: {}", where, e.what()));
    }
    return shape;
  }
  ir::ValueMeta meta(const json& j, const std::string& where) const {
    ir::ValueMeta m;
    m.dtype = dtype(get<std::string>(j, "dtype", where), where);
    m.shape =
        shape(sizes(at(j, "shape", where), fmt::format("'shape' of {}", where)), m.dtype, where);
    m.strides = sizes(at(j, "strides", where), fmt::format("'strides' of {}", where));
    // An integer, or (Y2) an expression for a view at a symbolic position.
    m.offset =
        sizes(json::array({at(j, "offset", where)}), fmt::format("'offset' of {}", where)).sym(0);
    m.device = device(at(j, "device", where), where);
    if (m.strides.size() != m.shape.size())
      bad(path, fmt::format("{}: {} strides for a shape of rank {}", where, m.strides.size(),
                            m.shape.size()));
    // The elements addressed must fit int64: offset + sum((size - 1) * stride).
    bool ok = m.offset.hint() >= 0;
    int64_t last = m.offset.hint();
    for (size_t i = 0; ok && i < m.shape.size(); ++i) {  // at the example values
      int64_t reach = 0, size = m.shape.hint(i), stride = m.strides.hint(i);
      ok = stride >= 0 && (size == 0 || (!__builtin_mul_overflow(size - 1, stride, &reach) &&
                                         !__builtin_add_overflow(last, reach, &last)));
    }
    if (!ok)
      bad(path, fmt::format("{}: strides {} at offset {} for shape {} are negative or address more "
                            "elements than int64 can hold",
                            where, m.strides.str(), m.offset.str(), m.shape.str()));
    return m;
  }
};

ir::Graph graph_from_json(const json& nodes, const Reader& r, const NamedTensors& constants) {
  ir::Graph g;
  std::map<std::string, ir::Node*> by_name;
  if (!nodes.is_array()) r.path.empty() ? void() : bad(r.path, "'graph' must be a list of nodes");
  auto ref = [&](const json& j, const std::string& where) -> ir::Ref {
    std::string name = r.get<std::string>(j, "node", where);
    auto it = by_name.find(name);
    if (it == by_name.end())
      bad(r.path, fmt::format("{} refers to %{}, which is not defined before it", where, name));
    ir::Node* node = it->second;
    int output = r.get<int>(j, "output", where);
    if (output < 0 || static_cast<size_t>(output) >= node->meta().size())
      bad(r.path, fmt::format("{} refers to output {} of %{}, which has {}", where, output, name,
                              node->meta().size()));
    return {node, output};
  };
  for (const json& n : nodes) {
    std::string name = r.get<std::string>(n, "name", "a node");
    std::string where = "node %" + name;
    std::string op = r.get<std::string>(n, "op", where);
    ir::MetaList meta;
    for (const json& m : r.at(n, "meta", where)) meta.push_back(r.meta(m, where));
    ir::Node* node = nullptr;
    if (op == "input") {
      if (meta.size() != 1) bad(r.path, where + ": an input has one meta entry");
      node = g.add_input(name, meta[0]);
    } else if (op == "constant") {
      auto it = std::find_if(constants.begin(), constants.end(),
                             [&](const auto& c) { return c.first == name; });
      if (it == constants.end()) bad(r.path, where + ": no constant tensor named '" + name + "'");
      node = g.add_constant(it->second, name);
    } else if (op == "call" || op == "output") {
      ir::ArgList args;
      for (const json& a : r.at(n, "args", where)) {
        if (!a.is_object() || a.size() != 1) bad(r.path, where + ": malformed argument");
        const std::string& tag = a.begin().key();
        const json& v = a.begin().value();
        try {
          if (tag == "none")
            args.emplace_back(std::monostate{});
          else if (tag == "ref")
            args.emplace_back(ref(v, where));
          else if (tag == "refs") {
            ir::RefList l;
            for (const json& x : v) l.push_back(ref(x, where));
            args.emplace_back(std::move(l));
          } else if (tag == "scalar") {
            if (v.contains("f"))
              args.emplace_back(Scalar(number_of(v.at("f"))));
            else if (v.contains("b"))
              args.emplace_back(Scalar(v.at("b").get<bool>()));
            else
              args.emplace_back(Scalar(r.integer(v.at("i"), where + ": an integer scalar")));
          } else if (tag == "int")
            args.emplace_back(r.integer(v, where + ": an int argument"));
          else if (tag == "float")
            args.emplace_back(number_of(v));
          else if (tag == "bool")
            args.emplace_back(v.get<bool>());
          else if (tag == "ints")
            args.emplace_back(r.integers(v, where + ": an ints argument"));
          else if (tag == "sym_ints")
            args.emplace_back(SymIntList(r.sizes(v, where + ": a sym_ints argument")));
          else if (tag == "dtype")
            args.emplace_back(r.dtype(v.get<std::string>(), where));
          else if (tag == "device")
            args.emplace_back(r.device(v, where));
          else if (tag == "str")
            args.emplace_back(Str(r.text(v.get<std::string>(), where + ": a str argument")));
          else
            bad(r.path, fmt::format("{}: unknown argument kind '{}'", where, tag));
        } catch (const json::exception&) {
          bad(r.path, fmt::format("{}: malformed '{}' argument", where, tag));
        }
      }
      if (op == "output") {
        if (args.size() != 1 || !std::holds_alternative<ir::RefList>(args[0]))
          bad(r.path, where + ": the output takes one list of values");
        node = g.set_output(std::get<ir::RefList>(args[0]));
      } else {
        std::string target = r.get<std::string>(n, "target", where);
        ops::OpKind kind;
        try {
          kind = ops::op_from_name(target);
        } catch (const Error&) {
          bad(r.path, fmt::format("{}: unknown op '{}' (this kiln knows {} ops)", where, target,
                                  ops::kNumOps));
        }
        // Version 1 wrote gelu's form as `bool tanh`; version 2 has approximate='none'|'tanh'.
        if (r.version == 1 && kind == ops::OpKind::gelu && args.size() == 2 &&
            std::holds_alternative<bool>(args[1]))
          args[1] = Str(std::get<bool>(args[1]) ? "tanh" : "none");
        node = g.add_call(kind, std::move(args), std::move(meta),
                          n.contains("scope") ? r.get<std::string>(n, "scope", where) : "", name);
      }
    } else {
      bad(r.path, fmt::format("{}: unknown node kind '{}'", where, op));
    }
    if (node->name() != name) bad(r.path, fmt::format("duplicate node name %{}", name));
    by_name[name] = node;
  }
  try {
    g.verify();
  } catch (const Error& e) {
    bad(r.path, std::string("the graph is invalid: ") + e.what());
  }
  return g;
}

// ---- the file ---------------------------------------------------------------------------

struct SafeFile {
  json header;
  NamedTensors tensors;
};

// Parses and validates a safetensors file; tensors point into the mapping when aligned.
SafeFile read_safetensors_checked(const std::string& path) {
  std::shared_ptr<MappedFile> m = map_file(path);
  const auto* bytes = static_cast<const unsigned char*>(m->data);
  if (m->size < 8) bad(path, fmt::format("truncated: {} bytes, not even a header length", m->size));
  uint64_t n = 0;
  std::memcpy(&n, bytes, 8);  // little-endian on every platform kiln supports
  if (n > m->size - 8)
    bad(path,
        fmt::format("truncated: the header claims {} bytes, the file has {}", n, m->size - 8));
  SafeFile f;
  try {
    f.header = json::parse(bytes + 8, bytes + 8 + n);
  } catch (const json::exception& e) {
    bad(path, std::string("the header is not valid JSON: ") + e.what());
  }
  if (!f.header.is_object()) bad(path, "the header is not a JSON object");
  const unsigned char* data = bytes + 8 + n;
  size_t data_size = m->size - 8 - n;
  Device cpu0(DeviceType::cpu, 0);
  for (auto it = f.header.begin(); it != f.header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    std::string where = "tensor '" + it.key() + "'";
    Reader r{path, {}};
    auto dt = safe_dtype(r.get<std::string>(it.value(), "dtype", where));
    if (!dt) bad(path, where + ": unknown dtype " + it.value().at("dtype").dump());
    IntList shape = r.shape(r.get<IntList>(it.value(), "shape", where), *dt, where).vec();
    IntList offsets = r.get<IntList>(it.value(), "data_offsets", where);
    if (offsets.size() != 2 || offsets[0] < 0 || offsets[0] > offsets[1] ||
        static_cast<uint64_t>(offsets[1]) > data_size)
      bad(path, fmt::format("{}: data offsets {} are out of range (the data has {} bytes)", where,
                            Dims(offsets).str(), data_size));
    uint64_t off[2] = {static_cast<uint64_t>(offsets[0]), static_cast<uint64_t>(offsets[1])};
    uint64_t nbytes = check_sizes(Dims(shape), *dt, "load");
    if (off[1] - off[0] != nbytes)
      bad(path, fmt::format("{}: {} bytes of data for shape {} of {} ({} bytes expected)", where,
                            off[1] - off[0], Dims(shape).str(), to_string(*dt), nbytes));
    const unsigned char* p = data + off[0];
    if (*dt == DType::b8)  // any other byte is not a bool (reading it would be undefined)
      for (uint64_t i = 0; i < nbytes; ++i)
        if (p[i] > 1)
          bad(path, fmt::format("{}: byte {} of a BOOL tensor is {}, not 0 or 1", where, i, p[i]));
    Tensor t;
    if (reinterpret_cast<uintptr_t>(p) % itemsize(*dt) == 0 && nbytes > 0) {  // zero-copy
      auto impl = std::make_shared<TensorImpl>();
      impl->shape = Dims(shape);
      impl->strides = contiguous_strides(impl->shape);
      impl->dtype = *dt;
      impl->device = cpu0;
      impl->storage = std::make_shared<StorageImpl>(const_cast<unsigned char*>(p), nbytes, cpu0,
                                                    nullptr, false);
      impl->storage->owner = m;
      t = Tensor(std::move(impl));
    } else {
      t = empty(shape, {.dtype = *dt});
      if (nbytes) std::memcpy(t.raw_data(), p, nbytes);
    }
    f.tensors.emplace_back(it.key(), t);
  }
  return f;
}

// Anything a malformed file trips that is not already a kiln::Error (a JSON value of
// the wrong type deep inside, a number that does not parse) is a format error too.
template <typename F>
auto as_format_errors(const std::string& path, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    bad(path, std::string("malformed file: ") + e.what());
  }
}

SafeFile read_safetensors(const std::string& path) {
  return as_format_errors(path, [&] { return read_safetensors_checked(path); });
}

// Temporary files are named "<path>.kiln-tmp.<pid>" so that they are recognisable: a save
// killed before its rename leaves one behind, and the next save to the same path removes
// those whose process is gone (a live writer's file is left alone).
void remove_stale_temporaries(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string prefix = target.filename().string() + ".kiln-tmp.";
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      fs::remove(e.path(), ec);
  }
}

// Writes a complete new file beside `path`, flushes it to disk, then renames it over
// `path`: a reader (or a crash at any moment) sees the whole old file or the whole new one.
void write_file_atomically(const std::string& path, const std::string& header,
                           const std::vector<std::pair<const void*, size_t>>& chunks) {
  remove_stale_temporaries(path);
  std::string tmp = path + ".kiln-tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  KILN_CHECK(f, format, "[save] cannot write '{}': {}", tmp, std::strerror(errno));
  uint64_t n = header.size();
  bool ok = std::fwrite(&n, 8, 1, f) == 1 && std::fwrite(header.data(), 1, n, f) == n;
  for (const auto& [p, size] : chunks) ok = ok && (size == 0 || std::fwrite(p, 1, size, f) == size);
  ok = ok && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    fail(ErrorKind::format, "[save] writing '{}' failed: {}", path, std::strerror(err));
  }
}

}  // namespace

namespace {
// Serializes tensors (largest element size first, so every offset stays aligned) with
// `metadata` into a safetensors file.
void write_safetensors(const std::string& path, const NamedTensors& tensors, const json& metadata) {
  NamedTensors entries = tensors;
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.second.itemsize() > b.second.itemsize();
  });
  json header = json::object();
  std::vector<Tensor> hosts;
  std::vector<std::pair<const void*, size_t>> chunks;
  uint64_t at = 0;
  for (const auto& [key, t] : entries) {
    KILN_CHECK(!t.is_fake(), format, "[save] '{}' is a fake tensor: a file needs its data", key);
    Tensor host = contiguous(to(t, Device(DeviceType::cpu, 0)));
    hosts.push_back(host);
    uint64_t nbytes = static_cast<uint64_t>(host.numel()) * host.itemsize();
    header[key] = {{"dtype", safe_name(host.dtype())},
                   {"shape", host.shape().vec()},
                   {"data_offsets", {at, at + nbytes}}};
    chunks.emplace_back(host.numel() ? host.raw_data() : nullptr, nbytes);
    at += nbytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');  // data starts 8-byte aligned
  write_file_atomically(path, text, chunks);
}
}  // namespace

void save_safetensors(const NamedTensors& tensors, const std::string& path) {
  write_safetensors(path, tensors, json::object());
}

std::string program_json(const ExportedProgram& program) {
  DeviceTable dt;
  for (Device d : program.devices()) dt.slot(d);
  json prog;
  prog["format_version"] = kFormatVersion;
  prog["graph"] = graph_json(program.graph, dt);
  json inputs = json::array(), outputs = json::array();
  for (const InputSpec& s : program.signature.inputs)
    inputs.push_back({{"kind", to_string(s.kind)},
                      {"name", s.name},
                      {"target", s.target},
                      {"persistent", s.persistent}});
  for (const OutputSpec& s : program.signature.outputs)
    outputs.push_back({{"kind", to_string(s.kind)}, {"target", s.target}});
  prog["signature"] = {{"inputs", inputs}, {"outputs", outputs}};
  json workspaces = json::array();
  for (const WorkspaceRecipe& w : program.workspaces)
    workspaces.push_back({{"name", w.name},
                          {"shape", w.shape.vec()},
                          {"dtype", to_string(w.dtype)},
                          {"device", dt.slot(w.device)}});
  prog["workspaces"] = workspaces;
  if (!program.shapes.empty()) {  // (Y4)
    json symbols = json::array(), guards = json::array();
    for (const SymbolInfo& s : program.shapes.symbols) {
      symbols.push_back({{"name", sym::str(s.expr)},
                         {"min", s.min},
                         {"max", s.max},
                         {"hint", s.hint},
                         {"dim", s.dim_name},
                         {"source", s.source},
                         {"automatic", s.automatic}});
      if (s.unbacked) symbols.back()["unbacked"] = true;  // (Y3) written only when set
    }
    for (const Guard& g : program.shapes.guards)
      guards.push_back({{"lhs", sym::str(g.lhs)},
                        {"rel", to_string(g.rel)},
                        {"rhs", sym::str(g.rhs)},
                        {"op", g.op},
                        {"scope", g.scope}});
    prog["shapes"] = {{"symbols", symbols}, {"guards", guards}};
  }
  // (E3) The extension ops the graph calls, with the schema they were traced with.
  json extensions = json::array();
  std::vector<ops::OpKind> listed;
  for (ir::Node* n : program.graph.nodes()) {
    if (n->opcode() != ir::Opcode::call || ops::is_builtin(n->op())) continue;
    if (std::find(listed.begin(), listed.end(), n->op()) != listed.end()) continue;
    listed.push_back(n->op());
    const ops::ExtensionOp& e = *ops::extension_op(n->op());
    extensions.push_back({{"name", e.name}, {"schema", e.schema_text}, {"library", e.library}});
  }
  if (!extensions.empty()) prog["extension_ops"] = extensions;
  json devices = json::array();
  for (Device d : dt.slots) devices.push_back(d.str());
  prog["devices"] = devices;
  return prog.dump();
}

void save(const ExportedProgram& program, const std::string& path) {
  NamedTensors tensors;
  for (const auto& [name, t] : program.state) tensors.emplace_back("state/" + name, t);
  for (const auto& [name, t] : program.constants) tensors.emplace_back("constants/" + name, t);
  write_safetensors(path, tensors, {{kProgramKey, program_json(program)}});
}

void save_graph(const ExportedProgram& program, const std::string& path,
                const std::string& distribution) {
  NamedTensors tensors;  // the graph's constant nodes only: the state is in the shards
  for (const ir::Node* n : program.graph.nodes())
    if (n->opcode() == ir::Opcode::constant)
      tensors.emplace_back("constants/" + n->name(), n->value());
  json prog = json::parse(program_json(program));
  prog["distribution"] = json::parse(distribution);
  write_safetensors(path, tensors, {{kProgramKey, prog.dump()}});
}

NamedTensors load_safetensors(const std::string& path) { return read_safetensors(path).tensors; }

TensorList load_inputs(const ExportedProgram& program, const std::string& path) {
  NamedTensors given = load_safetensors(path);
  TensorList inputs;
  std::vector<ir::Node*> nodes = program.graph.inputs();
  for (size_t i = 0; i < program.signature.inputs.size(); ++i) {
    const InputSpec& s = program.signature.inputs[i];
    if (s.kind != Kind::user_input) continue;
    auto it = std::find_if(given.begin(), given.end(),
                           [&](const auto& e) { return e.first == s.target; });
    KILN_CHECK(it != given.end(), value, "[run] {} has no tensor '{}' for the program's input",
               path, s.target);
    // a file holds host tensors: each goes where the program takes that input
    Device where = i < nodes.size() && !nodes[i]->meta().empty() ? nodes[i]->meta()[0].device
                                                                 : it->second.device();
    inputs.push_back(where == it->second.device() ? it->second : to(it->second, where));
  }
  return inputs;
}

namespace {
// `distribution` null: a whole program (state in the file); else a distributed program's
// graph, whose distribution JSON is stored there (its state is in shard files).
ExportedProgram read_program_checked(const std::string& path, std::string* distribution,
                                     const ReadOptions& options);
}  // namespace

ExportedProgram read_program(const std::string& path, const ReadOptions& options) {
  return as_format_errors(path, [&] { return read_program_checked(path, nullptr, options); });
}

ExportedProgram read_graph(const std::string& path, std::string& distribution,
                           const ReadOptions& options) {
  return as_format_errors(path, [&] { return read_program_checked(path, &distribution, options); });
}

namespace {
// (E3) Every extension op the program lists must be registered in this process, with
// the schema the program was traced with. Returns the listed names.
// The meta function of an op registered only to be shown (ReadOptions::Unregistered::show).
void shown_only_meta(const ops::OpCall& c, ops::MetaOut&) {
  const ops::ExtensionOp* e = ops::extension_op(c.op);
  fail(ErrorKind::unsupported,
       "[{}] was read from a program only to be shown: this process has not registered it{} and "
       "cannot run it",
       ops::op_name(c.op),
       e && !e->library.empty() ? fmt::format(" (it comes from {})", e->library) : "");
}

std::vector<std::string> check_extension_ops(const json& prog, const Reader& r,
                                             const ReadOptions& options) {
  std::vector<std::string> names;
  if (!prog.contains("extension_ops")) return names;
  for (const json& e : r.at(prog, "extension_ops", "the program")) {
    std::string name = r.get<std::string>(e, "name", "an extension op");
    std::string schema = r.get<std::string>(e, "schema", "an extension op");
    std::string library = r.get<std::string>(e, "library", "an extension op");
    std::string from = library.empty() ? "" : fmt::format(" (from {})", library);
    ops::OpKind kind;
    try {
      kind = ops::op_from_name(name);
    } catch (const Error&) {
      if (options.unregistered_extension_ops == ReadOptions::Unregistered::show) {
        // Registered as a user would (define_op's defaults), with no kernel and a meta
        // function that refuses to run.
        std::string canonical = ops::canonical_schema(schema);
        KILN_CHECK(canonical.starts_with(name + "("), format,
                   "[load] {}: extension op '{}' is listed with the schema '{}'", r.path, name,
                   canonical);
        try {
          define_op({.schema = canonical, .meta = shown_only_meta, .library = library});
        } catch (const Error& e) {
          bad(r.path, fmt::format("extension op '{}' cannot be shown: {}", name, e.what()));
        }
        names.push_back(std::move(name));
        continue;
      }
      fail(ErrorKind::unsupported,
           "[load] {} uses the extension op '{}'{}, which is not registered in this process: "
           "register it (link the library that defines it; on the command line, use a kiln command "
           "built with it, see kiln/cli.h) before loading the program",
           r.path, name, from);
    }
    const ops::ExtensionOp* registered = ops::extension_op(kind);
    if (!registered)
      bad(r.path, fmt::format("'{}' is listed as an extension op but is built in", name));
    if (registered->schema_text != ops::canonical_schema(schema))
      fail(ErrorKind::unsupported,
           "[load] {} was exported with the extension op '{}'{} as '{}', but the registered op is "
           "'{}': export the program again with this version of the library",
           r.path, name, from, schema, registered->schema_text);
    names.push_back(std::move(name));
  }
  return names;
}

ExportedProgram read_program_checked(const std::string& path, std::string* distribution,
                                     const ReadOptions& options) {
  SafeFile f = read_safetensors(path);
  Reader top{path, {}};
  const json& meta = top.at(f.header, "__metadata__", "the header");
  std::string text = top.get<std::string>(meta, kProgramKey, "the metadata");
  json prog;
  try {
    prog = json::parse(text);
  } catch (const json::exception& e) {
    bad(path, std::string("the program is not valid JSON: ") + e.what());
  }
  int version = top.get<int>(prog, "format_version", "the program");
  if (version < kOldestFormatVersion || version > kFormatVersion)
    bad(path, fmt::format("format_version {} is not supported (this kiln reads versions {} to {}); "
                          "export the program again with this kiln",
                          version, kOldestFormatVersion, kFormatVersion));
  std::vector<Device> devices;
  for (const json& d : top.at(prog, "devices", "the program")) {
    try {
      devices.push_back(Device(d.get<std::string>()));
    } catch (const std::exception&) {
      bad(path, "bad entry in the device table: " + d.dump());
    }
  }
  Reader r{path, devices, version};
  bool distributed = prog.contains("distribution");
  KILN_CHECK(
      !distributed || distribution, unsupported,
      "[load] {} is a distributed program: its state is in shard files next to it; load it with "
      "dist::load_distributed (under mpirun)",
      path);
  if (distribution && !distributed) bad(path, "not a distributed program (no 'distribution')");
  if (distribution) *distribution = prog.at("distribution").dump();
  ExportedProgram p;
  auto tensor = [&](const std::string& key) -> Tensor {
    for (const auto& [k, t] : f.tensors)
      if (k == key) return t;
    bad(path, "missing tensor '" + key + "'");
  };
  for (const json& s : r.at(prog.at("signature"), "inputs", "the signature")) {
    InputSpec spec;
    std::string kind = r.get<std::string>(s, "kind", "a signature input");
    bool found = false;
    for (auto k : {Kind::parameter, Kind::buffer, Kind::constant, Kind::workspace, Kind::user_input,
                   Kind::optimizer_state})
      if (to_string(k) == kind) spec.kind = k, found = true;
    if (!found) bad(path, "unknown input kind '" + kind + "'");
    spec.name = r.get<std::string>(s, "name", "a signature input");
    spec.target = r.get<std::string>(s, "target", "a signature input");
    spec.persistent = r.get<bool>(s, "persistent", "a signature input");
    p.signature.inputs.push_back(spec);
    bool stateful = spec.kind == Kind::parameter || spec.kind == Kind::optimizer_state ||
                    (spec.kind == Kind::buffer && spec.persistent);
    if (distributed) continue;  // the shards hold state and constants
    if (stateful)
      p.state.emplace_back(spec.target, tensor("state/" + spec.target));
    else if (spec.kind != Kind::user_input && spec.kind != Kind::workspace)
      p.constants.emplace_back(spec.target, tensor("constants/" + spec.target));
  }
  for (const json& s : r.at(prog.at("signature"), "outputs", "the signature")) {
    std::string kind = r.get<std::string>(s, "kind", "a signature output");
    OutputSpec spec{OutputSpec::Kind::user_output,
                    r.get<std::string>(s, "target", "a signature output")};
    bool found = false;
    for (auto k : {OutputSpec::Kind::user_output, OutputSpec::Kind::buffer_mutation,
                   OutputSpec::Kind::user_input_mutation, OutputSpec::Kind::loss_output,
                   OutputSpec::Kind::gradient_to_parameter, OutputSpec::Kind::parameter_mutation,
                   OutputSpec::Kind::optimizer_state_mutation})
      if (to_string(k) == kind) spec.kind = k, found = true;
    if (!found) bad(path, "unknown output kind '" + kind + "'");
    p.signature.outputs.push_back(spec);
  }
  std::vector<std::string> extensions = check_extension_ops(prog, r, options);
  NamedTensors node_constants;
  for (const json& n : r.at(prog, "graph", "the program"))
    if (n.is_object() && n.value("op", "") == "constant") {
      std::string name = r.get<std::string>(n, "name", "a node");
      node_constants.emplace_back(name, tensor("constants/" + name));
    }
  if (prog.contains("shapes")) {  // (Y4)
    const json& sh = prog.at("shapes");
    for (const json& s : r.at(sh, "symbols", "the shapes")) {
      SymbolInfo info;
      std::string name = r.get<std::string>(s, "name", "a symbol");
      info.expr = sym::parse(name, path + ": a symbol name");
      if (info.expr->op != sym::Op::symbol || p.shapes.index_of(info.expr) >= 0)
        bad(path, fmt::format("'{}' is not a new symbol name", name));
      info.min = r.get<int64_t>(s, "min", "symbol " + name);
      info.max = r.get<int64_t>(s, "max", "symbol " + name);
      info.hint = r.get<int64_t>(s, "hint", "symbol " + name);
      info.dim_name = r.get<std::string>(s, "dim", "symbol " + name);
      info.source = r.get<std::string>(s, "source", "symbol " + name);
      info.automatic = r.get<bool>(s, "automatic", "symbol " + name);
      if (s.contains("unbacked")) info.unbacked = r.get<bool>(s, "unbacked", "symbol " + name);
      if (info.min < 0 || info.min > info.max || info.hint < info.min || info.hint > info.max)
        bad(path,
            fmt::format(
                "symbol {} has range [{}, {}] and example {}: not a range of sizes holding it",
                name, info.min, info.max, info.hint));
      p.shapes.symbols.push_back(std::move(info));
    }
    r.shapes = &p.shapes;
    for (const json& g : r.at(sh, "guards", "the shapes")) {
      Guard guard;
      std::string rel = r.get<std::string>(g, "rel", "a guard");
      bool known = false;
      for (Rel x : {Rel::eq, Rel::ne, Rel::lt, Rel::le})
        if (to_string(x) == rel) guard.rel = x, known = true;
      if (!known) bad(path, fmt::format("a guard has the unknown relation '{}'", rel));
      for (auto [key, side] : {std::pair{"lhs", &guard.lhs}, std::pair{"rhs", &guard.rhs}}) {
        *side = sym::parse(r.get<std::string>(g, key, "a guard"), path + ": a guard");
        for (const sym::Expr* s : sym::symbols_of(*side))
          if (p.shapes.index_of(s) < 0)
            bad(path, fmt::format("a guard uses the undeclared symbol {}", sym::str(s)));
      }
      guard.op = r.get<std::string>(g, "op", "a guard");
      guard.scope = r.get<std::string>(g, "scope", "a guard");
      p.shapes.guards.push_back(std::move(guard));
    }
  }
  p.graph = graph_from_json(prog.at("graph"), r, node_constants);
  for (ir::Node* n : p.graph.nodes())
    if (n->opcode() == ir::Opcode::call && !ops::is_builtin(n->op()) &&
        std::find(extensions.begin(), extensions.end(), ops::op_name(n->op())) == extensions.end())
      bad(path,
          fmt::format("node %{} calls the extension op '{}', which the program's extension_ops "
                      "table does not list",
                      n->name(), ops::op_name(n->op())));
  p.constants.insert(p.constants.end(), node_constants.begin(), node_constants.end());
  for (const json& w : r.at(prog, "workspaces", "the program")) {
    DType dtype = r.dtype(r.get<std::string>(w, "dtype", "a workspace"), "a workspace");
    p.workspaces.push_back(
        {r.get<std::string>(w, "name", "a workspace"),
         r.shape(r.get<IntList>(w, "shape", "a workspace"), dtype, "a workspace"), dtype,
         r.device(r.at(w, "device", "a workspace"), "a workspace")});
  }

  // Inputs and outputs agree with the graph; state matches the input nodes it feeds.
  std::vector<ir::Node*> inputs = p.graph.inputs();
  if (inputs.size() != p.signature.inputs.size())
    bad(path, fmt::format("the signature lists {} inputs, the graph has {}",
                          p.signature.inputs.size(), inputs.size()));
  size_t n_out = std::get<ir::RefList>(p.graph.output()->args()[0]).size();
  if (n_out != p.signature.outputs.size())
    bad(path, fmt::format("the signature lists {} outputs, the graph has {}",
                          p.signature.outputs.size(), n_out));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputSpec& s = p.signature.inputs[i];
    if (inputs[i]->name() != s.name)
      bad(path, fmt::format("signature input {} is '{}' but the graph's is %{}", i, s.name,
                            inputs[i]->name()));
    const ir::ValueMeta& m = inputs[i]->meta()[0];
    const Tensor* t = nullptr;
    for (auto* list : {&p.state, &p.constants})
      for (const auto& [name, v] : *list)
        if (name == s.target) t = &v;
    if (t && (t->shape() != m.shape || t->dtype() != m.dtype))
      bad(path,
          fmt::format("'{}' is {}{} in the file but the program expects {}{}", s.target,
                      to_string(t->dtype()), t->shape().str(), to_string(m.dtype), m.shape.str()));
  }
  // Mutation outputs name something the runtime can write back.
  size_t n_user = std::count_if(p.signature.inputs.begin(), p.signature.inputs.end(),
                                [](const InputSpec& s) { return s.kind == Kind::user_input; });
  for (const OutputSpec& o : p.signature.outputs) {
    if (o.kind == OutputSpec::Kind::user_input_mutation) {
      size_t k = 0;
      auto [end, ec] = std::from_chars(o.target.data() + std::min<size_t>(6, o.target.size()),
                                       o.target.data() + o.target.size(), k);
      if (o.target.rfind("input_", 0) != 0 || ec != std::errc() ||
          end != o.target.data() + o.target.size() || k >= n_user)
        bad(path, fmt::format("the mutated user input '{}' is not one of input_0..input_{}",
                              o.target, static_cast<int64_t>(n_user) - 1));
    } else if (o.is_mutation()) {
      bool known = std::any_of(
          p.signature.inputs.begin(), p.signature.inputs.end(),
          [&](const InputSpec& s) { return s.kind != Kind::user_input && s.target == o.target; });
      if (!known)
        bad(path, fmt::format("the mutated state '{}' is not an input of the program", o.target));
    }
  }
  return p;
}
}  // namespace

ExportedProgram load_program(const std::string& path, const DeviceMap& requested) {
  ExportedProgram p = read_program(path);
  bind_devices(p, requested, path);
  return p;
}

void bind_devices(ExportedProgram& p, const DeviceMap& requested, const std::string& path) {
  DeviceMap map = resolve_device_map(p.devices(), requested);
  // (X3) Bind device slots: the map first, then every device must exist here.
  std::vector<Device> missing;
  std::vector<std::string> missing_names, all_names;
  int cpus_needed = 0;  // virtual CPU devices a map asks for beyond the configured ones
  for (Device d : p.devices()) {
    Device bound = d;
    for (const auto& [from, to] : map)
      if (from == d) bound = to;
    all_names.push_back(d.str());
    if (bound.type != DeviceType::meta && bound.index >= device_count(bound.type)) {
      missing.push_back(d);
      missing_names.push_back(bound == d ? d.str() : fmt::format("{} (mapped to {})", d, bound));
      if (bound.type == DeviceType::cpu) cpus_needed = std::max(cpus_needed, bound.index + 1);
    }
  }
  if (!missing.empty()) {
    std::vector<std::string>
        suggestion;  // OLD=NEW pairs: --device-map's syntax, a DeviceMap's entries
    for (Device d : missing) suggestion.push_back(fmt::format("{}=cpu:0", d.str()));
    std::string more_cpus =
        cpus_needed
            ? fmt::format("; or set KILN_CPU_DEVICES={} for virtual CPU devices cpu:0..cpu:{}",
                          cpus_needed, cpus_needed - 1)
            : "";
    fail(ErrorKind::device,
         "[load] {} needs {}, which this machine lacks (the program's devices: {}); map it to a "
         "local device: --device-map {} (kiln run, kiln train), the same pairs in a DeviceMap{}",
         path, fmt::join(missing_names, ", "), fmt::join(all_names, ", "),
         fmt::join(suggestion, ","), more_cpus);
  }
  DeviceMap full = map;
  for (Device d : p.devices()) full.emplace_back(d, d);  // identity for the unmapped ones
  as_format_errors(path, [&] { move_to_device(p, full); });
}

MappedFile::~MappedFile() {
  if (data && size) munmap(data, size);
}

std::shared_ptr<MappedFile> map_file(const std::string& path, std::string_view what) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; only regular files are read
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    fail(ErrorKind::format, "[{}] cannot open '{}': {}", what, path, std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(ErrorKind::format, "[{}] '{}' is not a regular file", what, path);
  }
  auto m = std::make_shared<MappedFile>();
  m->size = static_cast<size_t>(st.st_size);
  if (m->size > 0) {
    m->data = mmap(nullptr, m->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (m->data == MAP_FAILED) {
      ::close(fd);
      m->data = nullptr;
      fail(ErrorKind::format, "[{}] cannot map '{}': {}", what, path, std::strerror(errno));
    }
  }
  ::close(fd);
  return m;
}

}  // namespace kiln

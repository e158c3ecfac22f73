#include "kiln/ops/schema.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <mutex>
#include <set>

namespace kiln {

const std::string& Str::intern(std::string_view s) {
  static std::mutex mu;
  static std::set<std::string, std::less<>> strings;  // nodes never move: stable addresses
  std::lock_guard lock(mu);
  auto it = strings.find(s);
  if (it == strings.end()) it = strings.emplace(s).first;
  return *it;
}

}  // namespace kiln

namespace kiln::ops {

namespace {

struct TypeName {
  std::string_view text;
  ArgType type;
};
constexpr TypeName kTypes[] = {
    {"Tensor", ArgType::tensor},
    {"Tensor?", ArgType::opt_tensor},
    {"Tensor[]", ArgType::tensor_list},
    {"Scalar", ArgType::scalar},
    {"Scalar?", ArgType::opt_scalar},
    {"int", ArgType::int_},
    {"int?", ArgType::opt_int},
    {"int[]", ArgType::int_list},
    {"float", ArgType::float_},
    {"float?", ArgType::opt_float},
    {"bool", ArgType::bool_},
    {"ScalarType", ArgType::dtype},
    {"ScalarType?", ArgType::opt_dtype},
    {"Device", ArgType::device},
    {"Device?", ArgType::opt_device},
    {"str", ArgType::str},
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

[[noreturn]] void bad(std::string_view text, std::string_view why) {
  fail(ErrorKind::internal, "malformed op schema '{}': {}", text, why);
}

std::vector<std::string_view> split_top(std::string_view s) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '(' || s[i] == '[') ++depth;
    if (s[i] == ')' || s[i] == ']') --depth;
    if (s[i] == ',' && depth == 0) {
      parts.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  if (!trim(s.substr(start)).empty()) parts.push_back(trim(s.substr(start)));
  return parts;
}

Value parse_default(std::string_view text, ArgType type, std::string_view schema) {
  if (text == "None") return std::monostate{};
  if (text == "True") return true;
  if (text == "False") return false;
  if (type == ArgType::str) {
    if (text.size() < 2 || text.front() != '\'' || text.back() != '\'')
      bad(schema, "a str default is quoted");
    return Str(text.substr(1, text.size() - 2));
  }
  if (type == ArgType::int_list) {
    if (text == "[]") return IntList{};
    bad(schema, "only [] is supported as a list default");
  }
  bool is_float = text.find_first_of(".e") != std::string_view::npos;
  if (is_float) {
    double d = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
    if (ec != std::errc() || end != text.data() + text.size()) bad(schema, "bad default value");
    return type == ArgType::scalar || type == ArgType::opt_scalar ? Value(Scalar(d)) : Value(d);
  }
  int64_t i = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), i);
  if (ec != std::errc() || p != text.data() + text.size()) bad(schema, "bad default value");
  if (type == ArgType::scalar || type == ArgType::opt_scalar) return Scalar(i);
  if (type == ArgType::float_ || type == ArgType::opt_float) return static_cast<double>(i);
  return i;
}

}  // namespace

std::string_view to_string(ArgType type) {
  for (const auto& t : kTypes)
    if (t.type == type) return t.text;
  return "?";
}

Schema parse_schema(std::string_view text) {
  Schema s;
  size_t open = text.find('('), arrow = text.find("->");
  if (open == std::string_view::npos || arrow == std::string_view::npos) bad(text, "no (...) ->");
  size_t close = text.rfind(')', arrow);
  s.name = std::string(trim(text.substr(0, open)));
  bool kwarg_only = false;
  for (std::string_view part : split_top(text.substr(open + 1, close - open - 1))) {
    if (part == "*") {
      kwarg_only = true;
      continue;
    }
    ArgSpec arg;
    arg.kwarg_only = kwarg_only;
    size_t space = part.find(' ');
    if (space == std::string_view::npos) bad(text, "argument without a name");
    std::string_view type = part.substr(0, space);
    std::string_view rest = trim(part.substr(space + 1));
    if (auto a = type.find('('); a != std::string_view::npos) {  // Tensor(a) / Tensor(a!)
      arg.aliased = true;
      arg.mutated = type.find('!') != std::string_view::npos;
      type = type.substr(0, a) == "Tensor" && type.back() == '?' ? "Tensor?" : type.substr(0, a);
    }
    bool found = false;
    for (const auto& t : kTypes)
      if (t.text == type) arg.type = t.type, found = true;
    if (!found) bad(text, fmt::format("unknown type '{}'", type));
    if (auto eq = rest.find('='); eq != std::string_view::npos) {
      arg.name = std::string(trim(rest.substr(0, eq)));
      arg.default_value = parse_default(trim(rest.substr(eq + 1)), arg.type, text);
    } else {
      arg.name = std::string(rest);
    }
    int index = static_cast<int>(s.args.size());
    if (arg.mutated)
      s.written_args.push_back(index);
    else if (arg.aliased)
      s.view_of_arg = index;
    s.args.push_back(std::move(arg));
  }
  if (s.written_args.size() == 1) s.mutated_arg = s.written_args[0];
  std::string_view ret = trim(text.substr(arrow + 2));
  s.num_outputs =
      ret.starts_with("(") ? static_cast<int>(split_top(ret.substr(1, ret.size() - 2)).size()) : 1;
  return s;
}

bool value_matches(const Value& v, ArgType type) {
  auto none = std::holds_alternative<std::monostate>(v);
  switch (type) {
    case ArgType::tensor: return std::holds_alternative<Tensor>(v);
    case ArgType::opt_tensor: return none || std::holds_alternative<Tensor>(v);
    case ArgType::tensor_list: return std::holds_alternative<TensorList>(v);
    case ArgType::scalar: return std::holds_alternative<Scalar>(v);
    case ArgType::opt_scalar: return none || std::holds_alternative<Scalar>(v);
    // (Y1) a symbolic int is a one-entry SymIntList
    case ArgType::int_:
      return std::holds_alternative<int64_t>(v) || std::holds_alternative<SymIntList>(v);
    case ArgType::opt_int:
      return none || std::holds_alternative<int64_t>(v) || std::holds_alternative<SymIntList>(v);
    case ArgType::int_list:
      return std::holds_alternative<IntList>(v) || std::holds_alternative<SymIntList>(v);
    case ArgType::float_: return std::holds_alternative<double>(v);
    case ArgType::opt_float: return none || std::holds_alternative<double>(v);
    case ArgType::bool_: return std::holds_alternative<bool>(v);
    case ArgType::dtype: return std::holds_alternative<DType>(v);
    case ArgType::opt_dtype: return none || std::holds_alternative<DType>(v);
    case ArgType::device: return std::holds_alternative<Device>(v);
    case ArgType::opt_device: return none || std::holds_alternative<Device>(v);
    case ArgType::str: return std::holds_alternative<Str>(v);
  }
  return false;
}

void Schema::check_args(std::span<const Value> values) const {
  KILN_CHECK(values.size() == args.size(), value, "[{}] expected {} arguments, got {}", name,
             args.size(), values.size());
  for (size_t i = 0; i < args.size(); ++i)
    KILN_CHECK(value_matches(values[i], args[i].type), value,
               "[{}] argument '{}' (position {}) must be {}", name, args[i].name, i,
               to_string(args[i].type));
}

std::string Schema::str() const {
  std::string out = name + "(";
  for (size_t i = 0; i < args.size(); ++i)
    out += fmt::format("{}{} {}", i ? ", " : "", to_string(args[i].type), args[i].name);
  return out + ")";
}

}  // namespace kiln::ops

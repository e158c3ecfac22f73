// The one table from ATen overloads to kiln (I2): each entry reads the node's arguments
// by their schema names, with the schema's defaults where the file omits them, and calls
// kiln's functional API. Entries are grouped as ATen's native_functions.yaml groups them.

#include <cmath>
#include <limits>

#include "kiln/api/linalg.h"
#include "kiln/interop/adapters.h"
#include "kiln/nn/activation.h"
#include "kiln/nn/conv.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/rnn.h"

namespace kiln::interop {

using nlohmann::json;

// ---- arguments --------------------------------------------------------------------------

std::optional<Scalar> number_of(const json& arg, const Env& env) {
  if (!arg.is_object() || arg.size() != 1) return std::nullopt;
  auto first = arg.begin();  // a one-key union
  const std::string& key = first.key();
  const json& v = first.value();
  if (key == "as_int") return Scalar(v.get<int64_t>());
  if (key == "as_bool") return Scalar(v.get<bool>());
  if (key == "as_float") {
    if (v.is_string()) {  // json has no inf or nan: PyTorch writes them as strings
      std::string s = v.get<std::string>();
      if (s == "Infinity") return Scalar(std::numeric_limits<double>::infinity());
      if (s == "-Infinity") return Scalar(-std::numeric_limits<double>::infinity());
      if (s == "NaN") return Scalar(std::numeric_limits<double>::quiet_NaN());
      return std::nullopt;
    }
    return Scalar(v.get<double>());
  }
  if (key == "as_sym_int" || key == "as_sym_float" || key == "as_sym_bool") {
    // {"as_name": "s0"} (a value the graph computed) or {"as_int": 3}
    if (v.contains("as_name")) {
      auto it = env.find(v.at("as_name").get<std::string>());
      if (it != env.end()) {
        if (const auto* s = std::get_if<Scalar>(&it->second)) return *s;
        if (const auto* s = std::get_if<SymInt>(&it->second)) return Scalar(s->guard_int());
      }
      return std::nullopt;
    }
    for (const char* k : {"as_int", "as_float", "as_bool"})
      if (v.contains(k)) return number_of(json{{k, v.at(k)}}, env);
  }
  return std::nullopt;
}

std::optional<SymInt> sym_int_of(const json& arg, const Env& env) {
  if (arg.is_object() && arg.contains("as_sym_int") && arg.at("as_sym_int").contains("as_name")) {
    auto it = env.find(arg.at("as_sym_int").at("as_name").get<std::string>());
    if (it != env.end())
      if (const auto* s = std::get_if<SymInt>(&it->second)) return *s;
  }
  std::optional<Scalar> n = number_of(arg, env);
  if (!n || n->is_floating() || n->is_bool()) return std::nullopt;
  return SymInt(n->to_int());
}

Call::Call(const json& node, const Env& env, const DeviceOf& device_of, const json* values)
    : node_(node), values_(values), env_(env), device_of_(device_of) {
  target_ = node.at("target").get<std::string>();
  if (target_.rfind("torch.ops.", 0) == 0) target_ = target_.substr(10);
}

// An in-place overload may name its first argument `self` where its functional twin says
// `input` (dropout_ and dropout): an adapter asking for one finds the other.
std::string_view twin_name(std::string_view name) {
  return name == "input" ? "self" : name == "self" ? "input" : std::string_view();
}

const json* Call::find(std::string_view name) const {
  for (std::string_view n : {name, twin_name(name)}) {
    if (n.empty()) break;
    for (const json& in : node_.at("inputs")) {
      if (in.at("name").get_ref<const std::string&>() != n) continue;
      read_.insert(std::string(n));
      const json& arg = in.at("arg");
      if (arg.contains("as_none")) return nullptr;
      return &arg;
    }
  }
  return nullptr;
}

bool Call::has(std::string_view name) const {
  for (std::string_view n : {name, twin_name(name)})
    for (const json& in : node_.at("inputs"))
      if (!n.empty() && in.at("name").get_ref<const std::string&>() == n)
        return !in.at("arg").contains("as_none");
  return false;
}

bool Call::is_tensor(std::string_view name) const {
  for (const json& in : node_.at("inputs"))
    if (in.at("name").get_ref<const std::string&>() == name)
      return in.at("arg").contains("as_tensor");
  return false;
}

void Call::fail_arg(std::string_view name, std::string_view why) const {
  fail(ErrorKind::format, "argument '{}' of {}: {}", name, target_, why);
}

Slot Call::slot(std::string_view name, const json& arg) const {
  if (arg.contains("as_tensor") || arg.contains("as_optional_tensor")) {
    const json& t = arg.contains("as_tensor") ? arg.at("as_tensor") : arg.at("as_optional_tensor");
    if (t.contains("as_none")) return std::monostate{};
    std::string ref = t.contains("as_tensor") ? t.at("as_tensor").at("name").get<std::string>()
                                              : t.at("name").get<std::string>();
    auto it = env_.find(ref);
    if (it == env_.end())
      fail_arg(name, fmt::format("'{}' is not a value defined before this node", ref));
    return it->second;
  }
  // A number the graph read from a tensor (a float item()): kiln keeps it as that
  // one-element tensor, an operand like any other.
  for (const char* k : {"as_sym_float", "as_sym_bool"})
    if (arg.contains(k) && arg.at(k).contains("as_name"))
      if (auto it = env_.find(arg.at(k).at("as_name").get<std::string>());
          it != env_.end() && std::holds_alternative<Tensor>(it->second))
        return it->second;
  if (auto n = number_of(arg, env_)) return *n;
  fail_arg(name,
           fmt::format("expected a tensor or a number, the file has {}", arg.dump().substr(0, 80)));
}

Tensor Call::tensor(std::string_view name) const {
  const json* arg = find(name);
  if (!arg) fail_arg(name, "a tensor is required, the file has none");
  // (Y1) A symbolic size where a tensor (or a Scalar operand) goes: a 0-dim i64 tensor
  // computed from it, so the program follows the size at run time.
  if (std::optional<SymInt> s = sym_int_of(*arg, env_); s && s->is_symbolic())
    return size_as_tensor(*s);
  Slot s = slot(name, *arg);
  if (const auto* t = std::get_if<Tensor>(&s)) return *t;
  if (const auto* n = std::get_if<Scalar>(&s)) return wrapped_number(*n);
  fail_arg(name, "a tensor is required, the file has None");
}

Tensor Call::opt_tensor(std::string_view name) const {
  const json* arg = find(name);
  if (!arg) return Tensor();
  Slot s = slot(name, *arg);
  if (const auto* t = std::get_if<Tensor>(&s)) return *t;
  if (const auto* n = std::get_if<Scalar>(&s)) return wrapped_number(*n);
  return Tensor();
}

TensorList Call::tensors(std::string_view name) const {
  const json* arg = find(name);
  if (!arg) fail_arg(name, "a list of tensors is required");
  TensorList out;
  auto lookup = [&](const json& ref) {
    if (ref.contains("as_none")) return Tensor();
    std::string n = ref.contains("as_tensor") ? ref.at("as_tensor").at("name").get<std::string>()
                                              : ref.at("name").get<std::string>();
    auto it = env_.find(n);
    if (it == env_.end() || !std::holds_alternative<Tensor>(it->second))
      fail_arg(name, fmt::format("'{}' is not a tensor defined before this node", n));
    return std::get<Tensor>(it->second);
  };
  if (arg->contains("as_tensors"))
    for (const json& r : arg->at("as_tensors")) out.push_back(lookup(r));
  else if (arg->contains("as_optional_tensors"))
    for (const json& r : arg->at("as_optional_tensors")) out.push_back(lookup(r));
  else
    fail_arg(name,
             fmt::format("expected a list of tensors, the file has {}", arg->dump().substr(0, 80)));
  return out;
}

std::optional<Scalar> Call::opt_scalar(std::string_view name) const {
  const json* arg = find(name);
  if (!arg) return std::nullopt;
  if (auto n = number_of(*arg, env_)) return n;
  fail_arg(name, fmt::format("expected a number, the file has {}", arg->dump().substr(0, 80)));
}

Scalar Call::scalar(std::string_view name, std::optional<Scalar> fallback) const {
  if (auto s = opt_scalar(name)) return *s;
  if (!fallback) fail_arg(name, "a number is required, the file has none");
  return *fallback;
}

std::optional<int64_t> Call::opt_integer(std::string_view name) const {
  std::optional<Scalar> s = opt_scalar(name);
  if (!s) return std::nullopt;
  if (s->is_floating()) fail_arg(name, "expected an integer, the file has a float");
  return s->to_int();
}

int64_t Call::integer(std::string_view name, std::optional<int64_t> fallback) const {
  if (auto i = opt_integer(name)) return *i;
  if (!fallback) fail_arg(name, "an integer is required, the file has none");
  return *fallback;
}

std::optional<IntList> Call::opt_ints(std::string_view name) const {
  const json* arg = find(name);
  if (!arg) return std::nullopt;
  IntList out;
  if (arg->contains("as_ints")) {
    for (const json& v : arg->at("as_ints")) out.push_back(v.get<int64_t>());
  } else if (arg->contains("as_sym_ints")) {
    for (const json& v : arg->at("as_sym_ints")) {
      std::optional<Scalar> n = number_of(json{{"as_sym_int", v}}, env_);
      if (!n) fail_arg(name, fmt::format("size {} is not a known integer", v.dump()));
      out.push_back(n->to_int());
    }
  } else if (auto n = number_of(*arg, env_)) {  // int[1] given as one int
    out.push_back(n->to_int());
  } else {
    fail_arg(name, fmt::format("expected a list of integers, the file has {}",
                               arg->dump().substr(0, 80)));
  }
  return out;
}

SymSizes Call::sizes(std::string_view name) const {
  const json* arg = find(name);
  if (!arg) fail_arg(name, "a list of sizes is required, the file has none");
  if (!arg->contains("as_sym_ints")) {
    read_.erase(std::string(name));  // read again by ints()
    return ints(name);
  }
  Dims out(arg->at("as_sym_ints").size());
  size_t i = 0;
  for (const json& v : arg->at("as_sym_ints")) {
    std::optional<SymInt> s = sym_int_of(json{{"as_sym_int", v}}, env_);
    if (!s) fail_arg(name, fmt::format("size {} is not a known integer", v.dump()));
    out.set(i++, *s);
  }
  return SymSizes(out);
}

bool Call::is_symbolic(std::string_view name) const {
  auto it = std::find_if(node_.at("inputs").begin(), node_.at("inputs").end(), [&](const json& in) {
    return in.at("name").get_ref<const std::string&>() == name;
  });
  if (it == node_.at("inputs").end()) return false;
  std::optional<SymInt> s = sym_int_of(it->at("arg"), env_);
  return s && s->is_symbolic();
}

std::optional<SymInt> Call::opt_sym_integer(std::string_view name) const {
  const json* arg = find(name);
  if (!arg || arg->contains("as_none")) return std::nullopt;
  if (std::optional<SymInt> s = sym_int_of(*arg, env_)) return s;
  fail_arg(name, "expected an integer");
}

IntList Call::ints(std::string_view name, std::optional<IntList> fallback) const {
  if (auto l = opt_ints(name)) return *l;
  if (!fallback) fail_arg(name, "a list of integers is required, the file has none");
  return *fallback;
}

std::optional<double> Call::opt_real(std::string_view name) const {
  std::optional<Scalar> s = opt_scalar(name);
  return s ? std::optional<double>(s->to_double()) : std::nullopt;
}

double Call::real(std::string_view name, std::optional<double> fallback) const {
  if (auto d = opt_real(name)) return *d;
  if (!fallback) fail_arg(name, "a number is required, the file has none");
  return *fallback;
}

std::vector<double> Call::reals(std::string_view name) const {
  const json* arg = find(name);
  std::vector<double> out;
  if (!arg) return out;
  if (!arg->contains("as_floats")) fail_arg(name, "expected a list of floats");
  for (const json& v : arg->at("as_floats")) out.push_back(v.get<double>());
  return out;
}

bool Call::flag(std::string_view name, std::optional<bool> fallback) const {
  std::optional<Scalar> s = opt_scalar(name);
  if (s) return s->to_bool();
  if (!fallback) fail_arg(name, "a bool is required, the file has none");
  return *fallback;
}

std::string Call::str(std::string_view name, std::optional<std::string> fallback) const {
  const json* arg = find(name);
  if (!arg) {
    if (!fallback) fail_arg(name, "a string is required, the file has none");
    return *fallback;
  }
  if (!arg->contains("as_string")) fail_arg(name, "expected a string");
  return arg->at("as_string").get<std::string>();
}

std::optional<DType> Call::dtype(std::string_view name) const {
  const json* arg = find(name);
  if (!arg) return std::nullopt;
  if (!arg->contains("as_scalar_type")) fail_arg(name, "expected a dtype");
  if (std::optional<DType> d = dtype_of_code(arg->at("as_scalar_type").get<int>())) return d;
  fail_arg(name, fmt::format("dtype {} has no kiln counterpart", arg->at("as_scalar_type").dump()));
}

std::optional<DType> dtype_of_code(int code) {
  switch (code) {  // torch/_export/serde/schema.py's ScalarType numbering
    case 1: return DType::u8;
    case 2: return DType::i8;
    case 3: return DType::i16;
    case 4: return DType::i32;
    case 5: return DType::i64;
    case 6: return DType::f16;
    case 7: return DType::f32;
    case 8: return DType::f64;
    case 12: return DType::b8;
    case 13: return DType::bf16;
    default: return std::nullopt;
  }
}

std::optional<Device> Call::device(std::string_view name) const {
  const json* arg = find(name);
  if (!arg) return std::nullopt;
  if (!arg->contains("as_device")) fail_arg(name, "expected a device");
  return device_of_(arg->at("as_device"));
}

void Call::accept_defaults(std::initializer_list<std::string_view> names) const {
  for (std::string_view name : names) {
    const json* arg = find(name);
    if (!arg) continue;
    bool ok = (name == "pin_memory" && arg->value("as_bool", false) == false) ||
              (name == "layout" && arg->value("as_layout", 7) == 7) ||  // strided
              (name == "memory_format" && arg->value("as_memory_format", 1) != 2 &&
               arg->value("as_memory_format", 1) != 3) ||  // not channels-last
              name == "non_blocking" ||
              name == "requires_grad" || name == "cudnn_enabled" || name == "cudnn_enable" ||
              name == "copy";
    if (!ok)
      fail(ErrorKind::unsupported, "argument '{}' = {} of {} is not supported by kiln's importer",
           name, arg->dump(), target_);
  }
}

Tensor Call::tensor_as_recorded(std::string_view name) const {
  Tensor x = tensor(name);
  const json* arg = find(name);
  if (!arg || !arg->contains("as_tensor") || !values_) return x;
  std::string ref = arg->at("as_tensor").at("name").get<std::string>();
  if (!values_->contains(ref)) return x;
  const json& meta = values_->at(ref);
  std::vector<int64_t> strides;
  for (const json& st : meta.at("strides")) {
    if (!st.contains("as_int")) return x;  // symbolic: sizes are specialized, strides follow kiln's
    strides.push_back(st.at("as_int").get<int64_t>());
  }
  int64_t offset = meta.contains("storage_offset") && meta.at("storage_offset").contains("as_int")
                       ? meta.at("storage_offset").at("as_int").get<int64_t>()
                       : 0;
  if (strides.size() != static_cast<size_t>(x.dim()) || offset < 0)
    fail_arg(name, "the file records strides of another rank for it");
  if (Dims(strides) == x.strides() && offset == x.offset()) return x;
  // a fresh storage with PyTorch's layout, x's values copied in
  int64_t extent = offset + 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (x.size(d) == 0) return x;
    if (strides[static_cast<size_t>(d)] < 0) fail_arg(name, "negative strides");
    extent += (x.size(d) - 1) * strides[static_cast<size_t>(d)];
  }
  Tensor storage = zeros({extent}, {.dtype = x.dtype(), .device = x.device()});
  Tensor laid = as_strided(storage, x.shape().vec(), strides, offset);
  copy_(laid, x);
  return laid;
}

std::vector<std::string> Call::unread() const {
  std::vector<std::string> out;
  for (const json& in : node_.at("inputs")) {
    const std::string& name = in.at("name").get_ref<const std::string&>();
    if (!read_.count(name) && !in.at("arg").contains("as_none")) out.push_back(name);
  }
  return out;
}

// ---- adapters ---------------------------------------------------------------------------

TensorOptions options_of(const Call& c, const Tensor& like) {
  c.accept_defaults({"layout", "pin_memory", "memory_format", "requires_grad"});
  TensorOptions o;
  o.dtype = c.dtype("dtype");
  o.device = c.device("device");
  if (like.defined()) {
    if (!o.dtype) o.dtype = like.dtype();
    if (!o.device) o.device = like.device();
  }
  return o;
}

IntList stride_or_kernel(const Call& c) {
  IntList s = c.ints("stride", IntList{});
  return s.empty() ? c.ints("kernel_size") : s;
}

namespace {

// unique's three results as ATen's _unique2 returns them: what was not asked for is an
// empty i64 tensor. kiln's unique always sorts (ATen's CPU kernel sorts too unless asked
// not to, and then its order is unspecified).
Results unique_results(const std::tuple<Tensor, Tensor, Tensor>& u, const Tensor& x) {
  auto none = [&](const Tensor& t) {
    return t.defined() ? t : zeros({0}, {.dtype = DType::i64, .device = x.device()});
  };
  return {Slot(std::get<0>(u)), Slot(none(std::get<1>(u))), Slot(none(std::get<2>(u)))};
}

// view(x, size), or the same values by reshape where x's layout cannot share memory that
// way (a shape error, raised by view's meta function before anything is recorded).
Tensor view_or_reshape(const Tensor& x, const SymSizes& size) {
  try {
    return view(x, size);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::shape) throw;
  }
  return reshape(x, size);
}

// The info result of a linalg *_ex op: zeros, one per matrix of a's batch (kiln's ops
// raise an Error where LAPACK would report one).
Tensor info_of(const Tensor& a) {
  Dims batch(static_cast<size_t>(std::max<int64_t>(a.dim() - 2, 0)));
  for (size_t i = 0; i < batch.size(); ++i) batch.set(i, a.shape().sym(i));  // (Y1) as they are
  return zeros(batch, {.dtype = DType::i32, .device = a.device()});
}

// ord of linalg_matrix_norm.default as matrix_norm's string ("1", "-2", "inf", ...).
std::string ord_name(double ord) {
  if (std::isinf(ord)) return ord > 0 ? "inf" : "-inf";
  return fmt::format("{}", static_cast<int64_t>(ord));
}

// linalg_matrix_norm over the last two dims (the only dims kiln's takes).
Tensor matrix_norm_of(const Call& c, const std::string& ord) {
  Tensor x = self(c);
  if (auto dt = c.dtype("dtype")) x = to(x, *dt);
  IntList dims = c.ints("dim", IntList{-2, -1});
  for (int64_t& d : dims) d = d < 0 ? d + x.dim() : d;
  if (dims != IntList{x.dim() - 2, x.dim() - 1})
    c.fail_arg("dim", "kiln's matrix norms take the last two dims");
  return linalg::matrix_norm(x, ord, c.flag("keepdim", false));
}

// ||x||_ord over `dims_arg` (all dims when it is "" or None), in the call's dtype if it
// names one (linalg_vector_norm, norm.*).
Tensor norm_of(const Call& c, const char* ord_arg, const char* dims_arg) {
  Tensor x = self(c);
  if (auto dt = c.dtype("dtype")) x = to(x, *dt);
  double ord = c.opt_real(ord_arg).value_or(2.0);
  IntList dims = *dims_arg ? c.ints(dims_arg, IntList{}) : IntList{};
  return vector_norm(x, ord, dims, *dims_arg ? c.flag("keepdim", false) : false);
}

// The correction of var/std (and their _mean forms): `correction`, or `unbiased` (1 or 0).
// kiln takes whole corrections; PyTorch's fractional ones are refused by name.
int64_t correction_of(const Call& c) {
  if (c.has("unbiased")) return c.flag("unbiased") ? 1 : 0;
  double k = c.opt_real("correction").value_or(1.0);
  if (k != std::floor(k)) c.fail_arg("correction", "kiln takes whole corrections");
  return static_cast<int64_t>(k);
}

template <typename F>
auto moments(const Call& c, F f) {
  return f(self(c), c.ints("dim", IntList{}), correction_of(c), c.flag("keepdim", false));
}

// A reduction's result in the call's dtype argument, if it names one.
Tensor in_dtype(const Call& c, const Tensor& t) {
  auto dt = c.dtype("dtype");
  return dt && *dt != t.dtype() ? to(t, *dt) : t;
}

Tensor dim_reduce(const Call& c,
                  Tensor (*f)(const Tensor&, const IntList&, bool, std::optional<DType>)) {
  return f(self(c), c.ints("dim", IntList{}), c.flag("keepdim", false), c.dtype("dtype"));
}

#define KILN_UNARY(aten, fn)                                                 \
  {                                                                          \
    "aten." #aten ".default", [](const Call& c) { return one(fn(self(c))); } \
  }
#define KILN_BINARY(aten, fn)                                                                     \
  {"aten." #aten ".Tensor", [](const Call& c) { return one(fn(self(c), c.tensor("other"))); }}, { \
    "aten." #aten ".Scalar", [](const Call& c) { return one(fn(self(c), c.tensor("other"))); }    \
  }

const std::unordered_map<std::string_view, Adapter>& table() {
  static std::unordered_map<std::string_view, Adapter> entries = {
      // ---- pointwise ----
      KILN_UNARY(abs, abs), KILN_UNARY(neg, neg), KILN_UNARY(exp, exp), KILN_UNARY(log, log),
      KILN_UNARY(sqrt, sqrt), KILN_UNARY(rsqrt, rsqrt), KILN_UNARY(sin, sin), KILN_UNARY(cos, cos),
      KILN_UNARY(tan, tan), KILN_UNARY(tanh, tanh), KILN_UNARY(sigmoid, sigmoid), KILN_UNARY(relu, relu),
      KILN_UNARY(silu, silu), KILN_UNARY(erf, erf), KILN_UNARY(erfc, erfc), KILN_UNARY(floor, floor),
      KILN_UNARY(ceil, ceil), KILN_UNARY(round, round), KILN_UNARY(trunc, trunc), KILN_UNARY(sign, sign),
      KILN_UNARY(reciprocal, reciprocal), KILN_UNARY(logical_not, logical_not),
      KILN_UNARY(bitwise_not, bitwise_not), KILN_UNARY(log1p, log1p), KILN_UNARY(expm1, expm1),
      KILN_UNARY(log2, log2), KILN_UNARY(log10, log10), KILN_UNARY(exp2, exp2), KILN_UNARY(atan, atan),
      KILN_UNARY(asin, asin), KILN_UNARY(acos, acos), KILN_UNARY(sinh, sinh), KILN_UNARY(cosh, cosh),
      KILN_UNARY(isnan, isnan), KILN_UNARY(isinf, isinf), KILN_UNARY(erfinv, erfinv),
      KILN_UNARY(hardswish, nn::hardswish), KILN_UNARY(hardsigmoid, nn::hardsigmoid), KILN_UNARY(relu6, nn::relu6),
      KILN_UNARY(mish, nn::mish), KILN_UNARY(selu, nn::selu), KILN_UNARY(square, square),
      {"aten.gelu.default", [](const Call& c) { return one(gelu(self(c), c.str("approximate", "none"))); }},
      {"aten.hardtanh.default",
       [](const Call& c) { return one(nn::hardtanh(self(c), c.real("min_val", -1.0), c.real("max_val", 1.0))); }},
      {"aten.leaky_relu.default",
       [](const Call& c) { return one(nn::leaky_relu(self(c), c.real("negative_slope", 0.01))); }},
      {"aten.elu.default",
       [](const Call& c) {  // scale * x for x > 0, else scale * alpha * (e^(input_scale x) - 1)
         Tensor x = self(c);
         double alpha = c.real("alpha", 1.0), scale = c.real("scale", 1.0), input_scale = c.real("input_scale", 1.0);
         if (scale == 1.0 && input_scale == 1.0) return one(nn::elu(x, alpha));
         Tensor negative = mul(expm1(mul(x, wrapped_number(input_scale))), wrapped_number(alpha * scale));
         return one(where(gt(x, wrapped_number(0.0)), mul(x, wrapped_number(scale)), negative));
       }},
      {"aten.softplus.default",
       [](const Call& c) { return one(nn::softplus(self(c), c.real("beta", 1.0), c.real("threshold", 20.0))); }},
      {"aten.clamp.default",
       [](const Call& c) { return one(clamp(self(c), c.opt_scalar("min"), c.opt_scalar("max"))); }},
      {"aten.clamp.Tensor",
       [](const Call& c) {
         Tensor x = self(c), lo = c.opt_tensor("min"), hi = c.opt_tensor("max");
         if (lo.defined()) x = maximum(x, lo);
         if (hi.defined()) x = minimum(x, hi);
         return one(x);
       }},
      {"aten.clamp_min.default", [](const Call& c) { return one(clamp_min(self(c), c.scalar("min"))); }},
      {"aten.clamp_max.default", [](const Call& c) { return one(clamp_max(self(c), c.scalar("max"))); }},
      {"aten.add.Tensor", [](const Call& c) { return one(add(self(c), c.tensor("other"), c.scalar("alpha", 1))); }},
      {"aten.add.Scalar", [](const Call& c) { return one(add(self(c), c.tensor("other"), c.scalar("alpha", 1))); }},
      {"aten.sub.Tensor", [](const Call& c) { return one(sub(self(c), c.tensor("other"), c.scalar("alpha", 1))); }},
      {"aten.sub.Scalar", [](const Call& c) { return one(sub(self(c), c.tensor("other"), c.scalar("alpha", 1))); }},
      {"aten.rsub.Tensor", [](const Call& c) { return one(rsub(self(c), c.tensor("other"), c.scalar("alpha", 1))); }},
      {"aten.rsub.Scalar", [](const Call& c) { return one(rsub(self(c), c.tensor("other"), c.scalar("alpha", 1))); }},
      KILN_BINARY(mul, mul), KILN_BINARY(div, div), KILN_BINARY(remainder, remainder), KILN_BINARY(fmod, fmod),
      KILN_BINARY(eq, eq), KILN_BINARY(ne, ne), KILN_BINARY(lt, lt), KILN_BINARY(le, le), KILN_BINARY(gt, gt),
      KILN_BINARY(ge, ge), KILN_BINARY(bitwise_and, bitwise_and), KILN_BINARY(bitwise_or, bitwise_or),
      KILN_BINARY(bitwise_xor, bitwise_xor),
      KILN_BINARY(__and__, bitwise_and), KILN_BINARY(__or__, bitwise_or), KILN_BINARY(__xor__, bitwise_xor),
      {"aten.diff.default",
       [](const Call& c) {
         return one(diff(self(c), c.integer("n", 1), c.integer("dim", -1), c.opt_tensor("prepend"),
                         c.opt_tensor("append")));
       }},
      {"aten.floor_divide.default", [](const Call& c) { return one(floor_divide(self(c), c.tensor("other"))); }},
      {"aten.div.Tensor_mode",
       [](const Call& c) {
         if (!c.has("rounding_mode")) return one(div(self(c), c.tensor("other")));
         return one(div(self(c), c.tensor("other"), c.str("rounding_mode")));
       }},
      {"aten.div.Scalar_mode",
       [](const Call& c) {
         if (!c.has("rounding_mode")) return one(div(self(c), c.tensor("other")));
         return one(div(self(c), c.tensor("other"), c.str("rounding_mode")));
       }},
      {"aten.pow.Tensor_Scalar", [](const Call& c) { return one(pow(self(c), c.scalar("exponent"))); }},
      {"aten.pow.Tensor_Tensor", [](const Call& c) { return one(pow(self(c), c.tensor("exponent"))); }},
      {"aten.pow.Scalar", [](const Call& c) { return one(pow(c.scalar("self"), c.tensor("exponent"))); }},
      {"aten.maximum.default", [](const Call& c) { return one(maximum(self(c), c.tensor("other"))); }},
      {"aten.minimum.default", [](const Call& c) { return one(minimum(self(c), c.tensor("other"))); }},
      {"aten.max.other", [](const Call& c) { return one(maximum(self(c), c.tensor("other"))); }},
      {"aten.min.other", [](const Call& c) { return one(minimum(self(c), c.tensor("other"))); }},
      {"aten.atan2.default", [](const Call& c) { return one(atan2(self(c), c.tensor("other"))); }},
      {"aten.logical_and.default", [](const Call& c) { return one(logical_and(self(c), c.tensor("other"))); }},
      {"aten.logical_or.default", [](const Call& c) { return one(logical_or(self(c), c.tensor("other"))); }},
      {"aten.logical_xor.default", [](const Call& c) { return one(logical_xor(self(c), c.tensor("other"))); }},
      {"aten.where.self",
       [](const Call& c) { return one(where(c.tensor("condition"), self(c), c.tensor("other"))); }},
      {"aten.where.ScalarOther",
       [](const Call& c) { return one(where(c.tensor("condition"), self(c), c.tensor("other"))); }},
      {"aten.where.ScalarSelf",
       [](const Call& c) { return one(where(c.tensor("condition"), self(c), c.tensor("other"))); }},
      {"aten.where.Scalar",
       [](const Call& c) { return one(where(c.tensor("condition"), self(c), c.tensor("other"))); }},
      {"aten.masked_fill.Scalar",
       [](const Call& c) { return one(masked_fill(self(c), c.tensor("mask"), c.scalar("value"))); }},
      {"aten.masked_fill.Tensor",
       [](const Call& c) { return one(masked_fill(self(c), c.tensor("mask"), c.tensor("value"))); }},
      {"aten.lerp.Scalar", [](const Call& c) { return one(lerp(self(c), c.tensor("end"), c.scalar("weight"))); }},
      // ---- pointwise, continued ----
      KILN_UNARY(sgn, sgn), KILN_UNARY(frac, frac), KILN_UNARY(isfinite, isfinite),
      KILN_UNARY(isneginf, isneginf), KILN_UNARY(isposinf, isposinf), KILN_UNARY(isreal, isreal),
      KILN_UNARY(signbit, signbit), KILN_UNARY(digamma, digamma), KILN_UNARY(lgamma, lgamma),
      KILN_UNARY(sinc, sinc), KILN_UNARY(i0, i0), KILN_UNARY(special_i0, i0), KILN_UNARY(deg2rad, deg2rad),
      KILN_UNARY(rad2deg, rad2deg), KILN_UNARY(special_expit, sigmoid), KILN_UNARY(log_sigmoid, nn::logsigmoid),
      KILN_UNARY(tanhshrink, nn::tanhshrink), KILN_UNARY(softsign, nn::softsign),
      {"aten.logit.default", [](const Call& c) { return one(logit(self(c), c.opt_real("eps"))); }},
      {"aten.special_logit.default", [](const Call& c) { return one(logit(self(c), c.opt_real("eps"))); }},
      {"aten.hardshrink.default", [](const Call& c) { return one(nn::hardshrink(self(c), c.real("lambd", 0.5))); }},
      {"aten.softshrink.default", [](const Call& c) { return one(nn::softshrink(self(c), c.real("lambd", 0.5))); }},
      {"aten.celu.default", [](const Call& c) { return one(nn::celu(self(c), c.real("alpha", 1.0))); }},
      {"aten.threshold.default",
       [](const Call& c) { return one(nn::threshold(self(c), c.real("threshold"), c.real("value"))); }},
      {"aten.prelu.default", [](const Call& c) { return one(nn::prelu(self(c), c.tensor("weight"))); }},
      {"aten._prelu_kernel.default", [](const Call& c) { return one(nn::prelu(self(c), c.tensor("weight"))); }},
      {"aten.rrelu.default",
       [](const Call& c) {
         if (c.flag("training", false)) fail(ErrorKind::unsupported, "{}: rrelu in training mode", c.target());
         return one(nn::rrelu(self(c), c.real("lower", 1.0 / 8), c.real("upper", 1.0 / 3), false));
       }},
      {"aten.nan_to_num.default",
       [](const Call& c) {
         return one(nan_to_num(self(c), c.opt_real("nan").value_or(0.0), c.opt_real("posinf"), c.opt_real("neginf")));
       }},
      {"aten.hypot.default", [](const Call& c) { return one(hypot(self(c), c.tensor("other"))); }},
      {"aten.logaddexp.default", [](const Call& c) { return one(logaddexp(self(c), c.tensor("other"))); }},
      {"aten.xlogy.Tensor", [](const Call& c) { return one(xlogy(self(c), c.tensor("other"))); }},
      {"aten.copysign.Tensor", [](const Call& c) { return one(copysign(self(c), c.tensor("other"))); }},
      {"aten.nextafter.default", [](const Call& c) { return one(nextafter(self(c), c.tensor("other"))); }},
      {"aten.fmax.default", [](const Call& c) { return one(fmax(self(c), c.tensor("other"))); }},
      {"aten.fmin.default", [](const Call& c) { return one(fmin(self(c), c.tensor("other"))); }},
      {"aten.heaviside.default", [](const Call& c) { return one(heaviside(self(c), c.tensor("values"))); }},
      {"aten.__lshift__.Scalar", [](const Call& c) { return one(bitwise_left_shift(self(c), c.tensor("other"))); }},
      {"aten.__lshift__.Tensor", [](const Call& c) { return one(bitwise_left_shift(self(c), c.tensor("other"))); }},
      {"aten.__rshift__.Scalar", [](const Call& c) { return one(bitwise_right_shift(self(c), c.tensor("other"))); }},
      {"aten.__rshift__.Tensor", [](const Call& c) { return one(bitwise_right_shift(self(c), c.tensor("other"))); }},
      {"aten.bitwise_left_shift.Tensor",
       [](const Call& c) { return one(bitwise_left_shift(self(c), c.tensor("other"))); }},
      {"aten.bitwise_right_shift.Tensor",
       [](const Call& c) { return one(bitwise_right_shift(self(c), c.tensor("other"))); }},
      {"aten.addcmul.default",
       [](const Call& c) {
         return one(addcmul(self(c), c.tensor("tensor1"), c.tensor("tensor2"), c.scalar("value", 1)));
       }},
      {"aten.addcdiv.default",
       [](const Call& c) {
         return one(addcdiv(self(c), c.tensor("tensor1"), c.tensor("tensor2"), c.scalar("value", 1)));
       }},
      {"aten.lerp.Tensor", [](const Call& c) { return one(lerp(self(c), c.tensor("end"), c.tensor("weight"))); }},
      KILN_UNARY(acosh, acosh), KILN_UNARY(asinh, asinh), KILN_UNARY(atanh, atanh), KILN_UNARY(fix, fix),
      KILN_UNARY(special_entr, special_entr), KILN_UNARY(special_erfcx, special_erfcx),
      KILN_UNARY(special_log_ndtr, special_log_ndtr), KILN_UNARY(special_ndtr, special_ndtr),
      KILN_UNARY(special_ndtri, special_ndtri),
      {"aten.special_xlog1py.default", [](const Call& c) { return one(special_xlog1py(self(c), c.tensor("other"))); }},
      {"aten.round.decimals", [](const Call& c) { return one(round(self(c), c.integer("decimals"))); }},
      {"aten.true_divide.Tensor", [](const Call& c) { return one(true_divide(self(c), c.tensor("other"))); }},
      {"aten.float_power.Tensor_Scalar",
       [](const Call& c) { return one(float_power(self(c), c.scalar("exponent"))); }},
      {"aten.float_power.Tensor_Tensor",
       [](const Call& c) { return one(float_power(self(c), c.tensor("exponent"))); }},
      {"aten.clip.default", [](const Call& c) { return one(clip(self(c), c.opt_scalar("min"), c.opt_scalar("max"))); }},
      {"aten.renorm.default",
       [](const Call& c) {
         return one(renorm(self(c), c.real("p"), c.integer("dim"), c.real("maxnorm")));
       }},
      // ---- reductions and scans ----
      {"aten.sum.default", [](const Call& c) { return one(sum(self(c), {}, false, c.dtype("dtype"))); }},
      {"aten.sum.dim_IntList", [](const Call& c) { return one(dim_reduce(c, sum)); }},
      {"aten.mean.default", [](const Call& c) { return one(mean(self(c), {}, false, c.dtype("dtype"))); }},
      {"aten.mean.dim", [](const Call& c) { return one(dim_reduce(c, mean)); }},
      {"aten.amax.default",
       [](const Call& c) { return one(amax(self(c), c.ints("dim", IntList{}), c.flag("keepdim", false))); }},
      {"aten.amin.default",
       [](const Call& c) { return one(amin(self(c), c.ints("dim", IntList{}), c.flag("keepdim", false))); }},
      {"aten.max.dim",
       [](const Call& c) { return pair_of(max(self(c), c.integer("dim"), c.flag("keepdim", false))); }},
      {"aten.min.dim",
       [](const Call& c) { return pair_of(min(self(c), c.integer("dim"), c.flag("keepdim", false))); }},
      {"aten.max.default", [](const Call& c) { return one(max(self(c))); }},
      {"aten.min.default", [](const Call& c) { return one(min(self(c))); }},
      {"aten.argmax.default",
       [](const Call& c) { return one(argmax(self(c), c.opt_integer("dim"), c.flag("keepdim", false))); }},
      {"aten.argmin.default",
       [](const Call& c) { return one(argmin(self(c), c.opt_integer("dim"), c.flag("keepdim", false))); }},
      {"aten.prod.default", [](const Call& c) { return one(prod(self(c), c.dtype("dtype"))); }},
      {"aten.prod.dim_int",
       [](const Call& c) {
         return one(prod(self(c), c.integer("dim"), c.flag("keepdim", false), c.dtype("dtype")));
       }},
      {"aten.var.correction", [](const Call& c) { return one(moments(c, var)); }},
      {"aten.std.correction", [](const Call& c) { return one(moments(c, std)); }},
      {"aten.any.default", [](const Call& c) { return one(any(self(c))); }},
      {"aten.any.dim", [](const Call& c) { return one(any(self(c), c.integer("dim"), c.flag("keepdim", false))); }},
      {"aten.all.default", [](const Call& c) { return one(all(self(c))); }},
      {"aten.all.dim", [](const Call& c) { return one(all(self(c), c.integer("dim"), c.flag("keepdim", false))); }},
      {"aten.logsumexp.default",
       [](const Call& c) { return one(logsumexp(self(c), c.ints("dim"), c.flag("keepdim", false))); }},
      {"aten.softmax.int",
       [](const Call& c) {
         auto dt = c.dtype("dtype");
         return one(dt ? softmax(self(c), c.integer("dim"), *dt) : softmax(self(c), c.integer("dim")));
       }},
      {"aten.log_softmax.int",
       [](const Call& c) {
         auto dt = c.dtype("dtype");
         return one(dt ? log_softmax(self(c), c.integer("dim"), *dt) : log_softmax(self(c), c.integer("dim")));
       }},
      {"aten._softmax.default",
       [](const Call& c) {
         c.flag("half_to_float");
         return one(softmax(self(c), c.integer("dim")));
       }},
      {"aten._log_softmax.default",
       [](const Call& c) {
         c.flag("half_to_float");
         return one(log_softmax(self(c), c.integer("dim")));
       }},
      {"aten.cumsum.default", [](const Call& c) { return one(cumsum(self(c), c.integer("dim"), c.dtype("dtype"))); }},
      {"aten.cumprod.default",
       [](const Call& c) { return one(cumprod(self(c), c.integer("dim"), c.dtype("dtype"))); }},
      {"aten.topk.default",
       [](const Call& c) {
         return pair_of(topk(self(c), c.integer("k"), c.integer("dim", -1), c.flag("largest", true),
                             c.flag("sorted", true)));
       }},
      {"aten.sort.default",
       [](const Call& c) { return pair_of(sort(self(c), c.integer("dim", -1), c.flag("descending", false))); }},
      {"aten.sort.stable",
       [](const Call& c) {
         return pair_of(sort(self(c), c.integer("dim", -1), c.flag("descending", false), c.flag("stable", false)));
       }},
      {"aten.linalg_vector_norm.default", [](const Call& c) { return one(norm_of(c, "ord", "dim")); }},
      {"aten.norm.Scalar", [](const Call& c) { return one(norm_of(c, "p", "")); }},
      {"aten.norm.ScalarOpt_dim", [](const Call& c) { return one(norm_of(c, "p", "dim")); }},
      {"aten.norm.ScalarOpt_dim_dtype", [](const Call& c) { return one(norm_of(c, "p", "dim")); }},
      {"aten.norm.ScalarOpt_dtype", [](const Call& c) { return one(norm_of(c, "p", "")); }},
      {"aten.var.dim", [](const Call& c) { return one(moments(c, var)); }},
      {"aten.std.dim", [](const Call& c) { return one(moments(c, std)); }},
      {"aten.var_mean.dim", [](const Call& c) { return pair_of(moments(c, var_mean)); }},
      {"aten.std_mean.dim", [](const Call& c) { return pair_of(moments(c, std_mean)); }},
      {"aten.var_mean.correction", [](const Call& c) { return pair_of(moments(c, var_mean)); }},
      {"aten.std_mean.correction", [](const Call& c) { return pair_of(moments(c, std_mean)); }},
      {"aten.histc.default",
       [](const Call& c) {
         return one(histc(self(c), c.integer("bins", 100), c.real("min", 0.0), c.real("max", 0.0)));
       }},
      {"aten.nansum.default",
       [](const Call& c) { return one(in_dtype(c, nansum(self(c), c.ints("dim", IntList{}), c.flag("keepdim", false)))); }},
      {"aten.nanmean.default",
       [](const Call& c) { return one(in_dtype(c, nanmean(self(c), c.ints("dim", IntList{}), c.flag("keepdim", false)))); }},
      {"aten.count_nonzero.default",
       [](const Call& c) {
         auto d = c.opt_integer("dim");
         return one(count_nonzero(self(c), d ? IntList{*d} : IntList{}));
       }},
      {"aten.count_nonzero.dim_IntList", [](const Call& c) { return one(count_nonzero(self(c), c.ints("dim"))); }},
      {"aten.any.dims",
       [](const Call& c) {
         Tensor x = self(c);
         bool keepdim = c.flag("keepdim", false);
         IntList dims = c.ints("dim", IntList{});
         if (dims.empty()) return one(keepdim ? reshape(any(x), IntList(static_cast<size_t>(x.dim()), 1)) : any(x));
         for (int64_t& d : dims) d = d < 0 ? d + x.dim() : d;
         std::sort(dims.begin(), dims.end(), std::greater<>());
         for (int64_t d : dims) x = any(x, d, keepdim);
         return one(x);
       }},
      {"aten.median.default", [](const Call& c) { return one(median(self(c))); }},
      {"aten.median.dim",
       [](const Call& c) { return pair_of(median(self(c), c.integer("dim"), c.flag("keepdim", false))); }},
      {"aten.nanmedian.default", [](const Call& c) { return one(nanmedian(self(c))); }},
      {"aten.nanmedian.dim",
       [](const Call& c) { return pair_of(nanmedian(self(c), c.integer("dim"), c.flag("keepdim", false))); }},
      {"aten.kthvalue.default",
       [](const Call& c) {
         return pair_of(kthvalue(self(c), c.integer("k"), c.integer("dim", -1), c.flag("keepdim", false)));
       }},
      {"aten.aminmax.default",
       [](const Call& c) { return pair_of(aminmax(self(c), c.opt_integer("dim"), c.flag("keepdim", false))); }},
      {"aten.cummax.default", [](const Call& c) { return pair_of(cummax(self(c), c.integer("dim"))); }},
      {"aten.cummin.default", [](const Call& c) { return pair_of(cummin(self(c), c.integer("dim"))); }},
      {"aten.logcumsumexp.default", [](const Call& c) { return one(logcumsumexp(self(c), c.integer("dim"))); }},
      {"aten.argsort.default",
       [](const Call& c) { return one(argsort(self(c), c.integer("dim", -1), c.flag("descending", false))); }},
      {"aten.argsort.stable",
       [](const Call& c) {
         return one(argsort(self(c), c.integer("dim", -1), c.flag("descending", false), c.flag("stable")));
       }},
      {"aten.msort.default", [](const Call& c) { return one(msort(self(c))); }},
      {"aten.bucketize.Tensor",
       [](const Call& c) {
         return one(bucketize(self(c), c.tensor("boundaries"), c.flag("right", false), c.flag("out_int32", false)));
       }},
      {"aten.searchsorted.Tensor",
       [](const Call& c) {
         bool right = c.flag("right", false);
         if (c.has("side")) right = c.str("side") == "right";
         return one(searchsorted(c.tensor("sorted_sequence"), self(c), right, c.flag("out_int32", false),
                                 c.opt_tensor("sorter")));
       }},
      // ---- linear algebra ----
      {"aten.mm.default", [](const Call& c) { return one(mm(self(c), c.tensor("mat2"))); }},
      {"aten.bmm.default", [](const Call& c) { return one(bmm(self(c), c.tensor("mat2"))); }},
      {"aten.matmul.default", [](const Call& c) { return one(matmul(self(c), c.tensor("other"))); }},
      {"aten.addmm.default",
       [](const Call& c) {
         return one(addmm(self(c), c.tensor("mat1"), c.tensor("mat2"), c.scalar("beta", 1), c.scalar("alpha", 1)));
       }},
      {"aten.baddbmm.default",
       [](const Call& c) {
         return one(baddbmm(self(c), c.tensor("batch1"), c.tensor("batch2"), c.scalar("beta", 1),
                            c.scalar("alpha", 1)));
       }},
      {"aten.linear.default",
       [](const Call& c) { return one(linear(c.tensor("input"), c.tensor("weight"), c.opt_tensor("bias"))); }},
      {"aten.einsum.default",
       [](const Call& c) {
         c.opt_ints("path");
         return one(einsum(c.str("equation"), c.tensors("tensors")));
       }},
      {"aten.mv.default", [](const Call& c) { return one(mv(self(c), c.tensor("vec"))); }},
      {"aten.dot.default", [](const Call& c) { return one(dot(self(c), c.tensor("tensor"))); }},
      {"aten.outer.default", [](const Call& c) { return one(outer(self(c), c.tensor("vec2"))); }},
      {"aten.addmv.default",
       [](const Call& c) {
         return one(addmv(self(c), c.tensor("mat"), c.tensor("vec"), c.scalar("beta", 1), c.scalar("alpha", 1)));
       }},
      {"aten.addbmm.default",
       [](const Call& c) {
         return one(addbmm(self(c), c.tensor("batch1"), c.tensor("batch2"), c.scalar("beta", 1), c.scalar("alpha", 1)));
       }},
      {"aten.linalg_cross.default",
       [](const Call& c) { return one(cross(self(c), c.tensor("other"), c.integer("dim", -1))); }},
      {"aten.cdist.default",
       [](const Call& c) {
         c.opt_integer("compute_mode");  // which kernel PyTorch picks; the distances are the same
         return one(cdist(c.tensor("x1"), c.tensor("x2"), c.real("p", 2.0)));
       }},
      {"aten._cdist_forward.default",
       [](const Call& c) {
         c.opt_integer("compute_mode");
         return one(cdist(c.tensor("x1"), c.tensor("x2"), c.real("p")));
       }},
      {"aten.trace.default", [](const Call& c) { return one(trace(self(c))); }},
      {"aten.tensordot.default",
       [](const Call& c) { return one(tensordot(self(c), c.tensor("other"), c.ints("dims_self"), c.ints("dims_other"))); }},
      {"aten.kron.default", [](const Call& c) { return one(kron(self(c), c.tensor("other"))); }},
      {"aten.linalg_det.default", [](const Call& c) { return one(linalg::det(c.tensor("A"))); }},
      {"aten.linalg_slogdet.default", [](const Call& c) { return pair_of(linalg::slogdet(c.tensor("A"))); }},
      {"aten.logdet.default", [](const Call& c) { return one(logdet(self(c))); }},
      {"aten.linalg_inv.default", [](const Call& c) { return one(linalg::inv(c.tensor("A"))); }},
      {"aten.linalg_solve.default",
       [](const Call& c) { return one(linalg::solve_ex(c.tensor("A"), c.tensor("B"), c.flag("left", true)).first); }},
      {"aten.linalg_cholesky.default",
       [](const Call& c) { return one(linalg::cholesky(self(c), c.flag("upper", false))); }},
      {"aten.linalg_qr.default", [](const Call& c) { return pair_of(linalg::qr(c.tensor("A"), c.str("mode", "reduced"))); }},
      {"aten.linalg_eigvalsh.default", [](const Call& c) { return one(linalg::eigvalsh(self(c), c.str("UPLO", "L"))); }},
      {"aten.linalg_svdvals.default",
       [](const Call& c) {
         if (c.has("driver")) c.str("driver");  // a CUDA solver's choice; the values are the same
         return one(linalg::svdvals(c.tensor("A")));
       }},
      {"aten.linalg_matrix_power.default",
       [](const Call& c) { return one(linalg::matrix_power(self(c), c.integer("n"))); }},
      {"aten.linalg_matrix_norm.str_ord", [](const Call& c) { return one(matrix_norm_of(c, c.str("ord", "fro"))); }},
      {"aten.linalg_matrix_norm.default", [](const Call& c) { return one(matrix_norm_of(c, ord_name(c.real("ord")))); }},
      {"aten.linalg_norm.default",
       [](const Call& c) {
         Tensor x = self(c);
         if (auto dt = c.dtype("dtype")) x = to(x, *dt);
         return one(linalg::norm(x, c.opt_real("ord"), c.opt_ints("dim"), c.flag("keepdim", false)));
       }},
      {"aten.linalg_norm.ord_str",
       [](const Call& c) {
         Tensor x = self(c);
         if (auto dt = c.dtype("dtype")) x = to(x, *dt);
         return one(linalg::norm(x, c.str("ord"), c.opt_ints("dim"), c.flag("keepdim", false)));
       }},
      {"aten.linalg_pinv.atol_rtol_float",
       [](const Call& c) {
         return one(linalg::pinv(self(c), c.opt_real("atol"), c.opt_real("rtol"), c.flag("hermitian", false)));
       }},
      {"aten.linalg_pinv.atol_rtol_tensor",
       [](const Call& c) {
         if (c.has("atol") || c.has("rtol"))
           fail(ErrorKind::unsupported, "{}: tolerances given as tensors (pass numbers)", c.target());
         return one(linalg::pinv(self(c), std::nullopt, std::nullopt, c.flag("hermitian", false)));
       }},
      // the core dialect's linalg forms: the factorizations' other results (LU, pivots) are
      // not made, and info (the error code) is zeros: kiln's eager ops raise errors instead
      {"aten._linalg_det.default", [](const Call& c) { return Results{Slot(linalg::det(c.tensor("A"))), Slot(), Slot()}; }},
      {"aten._linalg_slogdet.default",
       [](const Call& c) {
         auto [sign, logabs] = linalg::slogdet(c.tensor("A"));
         return Results{Slot(sign), Slot(logabs), Slot(), Slot()};
       }},
      {"aten.linalg_inv_ex.default",
       [](const Call& c) {
         Tensor a = c.tensor("A");
         c.flag("check_errors", false);
         return Results{Slot(linalg::inv(a)), Slot(info_of(a))};
       }},
      {"aten._linalg_solve_ex.default",
       [](const Call& c) {
         Tensor a = c.tensor("A");
         c.flag("check_errors", false);
         Tensor x = linalg::solve_ex(a, c.tensor("B"), c.flag("left", true)).first;
         return Results{Slot(x), Slot(), Slot(), Slot(info_of(a))};
       }},
      {"aten.linalg_cholesky_ex.default",
       [](const Call& c) {
         Tensor a = self(c);
         c.flag("check_errors", false);
         return Results{Slot(linalg::cholesky(a, c.flag("upper", false))), Slot(info_of(a))};
       }},
      {"aten._linalg_eigh.default",
       [](const Call& c) {
         Tensor a = c.tensor("A");
         std::string uplo = c.str("UPLO", "L");
         if (!c.flag("compute_v", true)) return Results{Slot(linalg::eigvalsh(a, uplo)), Slot()};
         return pair_of(linalg::eigh(a, uplo));
       }},
      {"aten._linalg_svd.default",
       [](const Call& c) {
         Tensor a = c.tensor("A");
         if (c.has("driver")) c.str("driver");
         bool full = c.flag("full_matrices", false);
         if (!c.flag("compute_uv", true)) return Results{Slot(), Slot(linalg::svdvals(a)), Slot()};
         return tuple_of(linalg::svd(a, full));
       }},
      // ---- views and shapes ----
      {"aten.view.default",
       [](const Call& c) {
         // PyTorch took this view of its layout; kiln's ops may have laid the value out
         // otherwise (a convolution's permuted result), so the same values by reshape
         return one(view_or_reshape(self(c), c.sizes("size")));
       }},
      {"aten.as_strided.default",
       [](const Call& c) {
         return one(sym_as_strided(c.tensor_as_recorded("self"), c.sizes("size"), c.sizes("stride"),
                                   c.opt_integer("storage_offset")));
       }},
      {"aten.slice_scatter.default",
       [](const Call& c) {
         return one(slice_scatter(self(c), c.tensor("src"), c.integer("dim", 0), c.opt_integer("start"),
                                  c.opt_integer("end"), c.integer("step", 1)));
       }},
      {"aten.select_scatter.default",
       [](const Call& c) {
         return one(select_scatter(self(c), c.tensor("src"), c.integer("dim"), c.integer("index")));
       }},
      {"aten.diagonal_scatter.default",
       [](const Call& c) {
         return one(diagonal_scatter(self(c), c.tensor("src"), c.integer("offset", 0), c.integer("dim1", 0),
                                     c.integer("dim2", 1)));
       }},
      {"aten._unsafe_view.default", [](const Call& c) { return one(reshape(self(c), c.sizes("size"))); }},
      {"aten.reshape.default", [](const Call& c) { return one(reshape(self(c), c.sizes("shape"))); }},
      {"aten.permute.default", [](const Call& c) { return one(permute(self(c), c.ints("dims"))); }},
      {"aten.transpose.int",
       [](const Call& c) { return one(transpose(self(c), c.integer("dim0"), c.integer("dim1"))); }},
      {"aten.t.default", [](const Call& c) { return one(t(self(c))); }},
      {"aten.unsqueeze.default", [](const Call& c) { return one(unsqueeze(self(c), c.integer("dim"))); }},
      {"aten.squeeze.default", [](const Call& c) { return one(squeeze(self(c))); }},
      {"aten.squeeze.dim", [](const Call& c) { return one(squeeze(self(c), c.integer("dim"))); }},
      {"aten.squeeze.dims",
       [](const Call& c) {
         Tensor x = self(c);
         IntList dims = c.ints("dim");
         for (int64_t& d : dims) d = d < 0 ? d + x.dim() : d;
         std::sort(dims.begin(), dims.end(), std::greater<>());
         for (int64_t d : dims) x = squeeze(x, d);
         return one(x);
       }},
      {"aten.expand.default",
       [](const Call& c) {
         c.flag("implicit", false);
         return one(expand(self(c), c.sizes("size")));
       }},
      {"aten.reshape_as.default",
       [](const Call& c) { return one(reshape(self(c), c.tensor("other").shape())); }},
      {"aten.view_as.default", [](const Call& c) { return one(view(self(c), c.tensor("other").shape())); }},
      {"aten.expand_as.default", [](const Call& c) { return one(expand_as(self(c), c.tensor("other"))); }},
      {"aten.slice.Tensor",
       [](const Call& c) {
         return one(slice(self(c), c.integer("dim", 0), c.opt_sym_integer("start"), c.opt_sym_integer("end"),
                          c.integer("step", 1)));
       }},
      {"aten.select.int", [](const Call& c) { return one(select(self(c), c.integer("dim"), c.integer("index"))); }},
      {"aten.narrow.default",
       [](const Call& c) {
         return one(narrow(self(c), c.integer("dim"), c.integer("start"), c.integer("length")));
       }},
      {"aten.flatten.using_ints",
       [](const Call& c) { return one(flatten(self(c), c.integer("start_dim", 0), c.integer("end_dim", -1))); }},
      {"aten.unflatten.int",
       [](const Call& c) { return one(unflatten(self(c), c.integer("dim"), c.ints("sizes"))); }},
      {"aten.split.Tensor",
       [](const Call& c) { return many(split(self(c), c.integer("split_size"), c.integer("dim", 0))); }},
      {"aten.split_with_sizes.default",
       [](const Call& c) { return many(split_with_sizes(self(c), c.ints("split_sizes"), c.integer("dim", 0))); }},
      {"aten.chunk.default",
       [](const Call& c) { return many(chunk(self(c), c.integer("chunks"), c.integer("dim", 0))); }},
      {"aten.unbind.int", [](const Call& c) { return many(unbind(self(c), c.integer("dim", 0))); }},
      {"aten.alias.default", [](const Call& c) { return one(alias(self(c))); }},
      {"aten.detach.default", [](const Call& c) { return one(alias(self(c))); }},
      {"aten.lift_fresh_copy.default", [](const Call& c) { return one(clone(self(c))); }},
      {"aten.clone.default",
       [](const Call& c) {
         c.accept_defaults({"memory_format"});
         return one(clone(self(c)));
       }},
      {"aten.contiguous.default",
       [](const Call& c) {
         c.accept_defaults({"memory_format"});
         return one(contiguous(self(c)));
       }},
      {"aten.cat.default", [](const Call& c) { return one(cat(c.tensors("tensors"), c.integer("dim", 0))); }},
      {"aten.stack.default", [](const Call& c) { return one(stack(c.tensors("tensors"), c.integer("dim", 0))); }},
      {"aten.repeat.default", [](const Call& c) { return one(repeat(self(c), c.sizes("repeats"))); }},
      {"aten.repeat_interleave.self_int",
       [](const Call& c) {
         c.opt_integer("output_size");
         return one(repeat_interleave(self(c), c.integer("repeats"), c.opt_integer("dim")));
       }},
      {"aten.repeat_interleave.self_Tensor",
       [](const Call& c) {
         c.opt_integer("output_size");
         return one(repeat_interleave(self(c), c.tensor("repeats"), c.opt_integer("dim")));
       }},
      {"aten.roll.default",
       [](const Call& c) { return one(roll(self(c), c.ints("shifts"), c.ints("dims", IntList{}))); }},
      {"aten.flip.default", [](const Call& c) { return one(flip(self(c), c.ints("dims"))); }},
      {"aten.triu.default", [](const Call& c) { return one(triu(self(c), c.integer("diagonal", 0))); }},
      {"aten.tril.default", [](const Call& c) { return one(tril(self(c), c.integer("diagonal", 0))); }},
      {"aten.index_select.default",
       [](const Call& c) { return one(index_select(self(c), c.integer("dim"), c.tensor("index"))); }},
      {"aten.gather.default",
       [](const Call& c) {
         if (c.flag("sparse_grad", false)) fail(ErrorKind::unsupported, "aten.gather with sparse_grad");
         return one(gather(self(c), c.integer("dim"), c.tensor("index")));
       }},
      {"aten.index.Tensor", [](const Call& c) { return one(index(self(c), c.tensors("indices"))); }},
      // (Y3) data-dependent rows: an unbacked size of the import's trace
      {"aten.nonzero.default", [](const Call& c) { return one(nonzero(self(c))); }},
      {"aten.masked_select.default",
       [](const Call& c) { return one(masked_select(self(c), c.tensor("mask"))); }},
      {"aten._unique2.default",
       [](const Call& c) {
         c.flag("sorted", true);
         return unique_results(
             unique(self(c), c.flag("return_inverse", false), c.flag("return_counts", false)),
             self(c));
       }},
      {"aten.unique_dim.default",
       [](const Call& c) {
         c.flag("sorted", true);
         return unique_results(unique(self(c), c.flag("return_inverse", false),
                                      c.flag("return_counts", false), c.integer("dim")),
                               self(c));
       }},
      {"aten.unique_consecutive.default",
       [](const Call& c) {
         return unique_results(unique_consecutive(self(c), c.flag("return_inverse", false),
                                                  c.flag("return_counts", false), c.opt_integer("dim")),
                               self(c));
       }},
      {"aten.bincount.default",
       [](const Call& c) {
         return one(bincount(self(c), c.opt_tensor("weights"), c.integer("minlength", 0)));
       }},
      {"aten.index_put.default",
       [](const Call& c) {
         return one(index_put(self(c), c.tensors("indices"), c.tensor("values"), c.flag("accumulate", false)));
       }},
      {"aten.scatter.src",
       [](const Call& c) { return one(scatter(self(c), c.integer("dim"), c.tensor("index"), c.tensor("src"))); }},
      {"aten.scatter.value",
       [](const Call& c) { return one(scatter(self(c), c.integer("dim"), c.tensor("index"), c.scalar("value"))); }},
      {"aten.scatter_add.default",
       [](const Call& c) {
         return one(scatter_add(self(c), c.integer("dim"), c.tensor("index"), c.tensor("src")));
       }},
      {"aten.embedding.default",
       [](const Call& c) {
         c.integer("padding_idx", -1);  // only the gradient reads these
         c.flag("scale_grad_by_freq", false);
         c.flag("sparse", false);
         return one(embedding(c.tensor("weight"), c.tensor("indices")));
       }},
      {"aten.constant_pad_nd.default",
       [](const Call& c) { return one(nn::constant_pad_nd(self(c), c.ints("pad"), c.real("value", 0.0))); }},
      {"aten.pad.default",
       [](const Call& c) {
         return one(nn::pad(self(c), c.ints("pad"), c.str("mode", "constant"), c.opt_real("value").value_or(0.0)));
       }},
      {"aten.numpy_T.default", [](const Call& c) { return one(numpy_T(self(c))); }},
      {"aten.mT.default", [](const Call& c) { return one(mT(self(c))); }},
      {"aten.swapaxes.default",
       [](const Call& c) { return one(transpose(self(c), c.integer("axis0"), c.integer("axis1"))); }},
      {"aten.swapdims.default",
       [](const Call& c) { return one(transpose(self(c), c.integer("dim0"), c.integer("dim1"))); }},
      {"aten.movedim.int",
       [](const Call& c) { return one(movedim(self(c), c.integer("source"), c.integer("destination"))); }},
      {"aten.movedim.intlist",
       [](const Call& c) { return one(movedim(self(c), c.ints("source"), c.ints("destination"))); }},
      {"aten.unfold.default",
       [](const Call& c) {
         return one(unfold(self(c), c.integer("dimension"), c.integer("size"), c.integer("step")));
       }},
      {"aten.diagonal.default",
       [](const Call& c) {
         return one(diagonal(self(c), c.integer("offset", 0), c.integer("dim1", 0), c.integer("dim2", 1)));
       }},
      {"aten.diag.default", [](const Call& c) { return one(diag(self(c), c.integer("diagonal", 0))); }},
      {"aten.diag_embed.default",
       [](const Call& c) {
         return one(diag_embed(self(c), c.integer("offset", 0), c.integer("dim1", -2), c.integer("dim2", -1)));
       }},
      {"aten.rot90.default",
       [](const Call& c) { return one(rot90(self(c), c.integer("k", 1), c.ints("dims", IntList{0, 1}))); }},
      {"aten.fliplr.default", [](const Call& c) { return one(fliplr(self(c))); }},
      {"aten.flipud.default", [](const Call& c) { return one(flipud(self(c))); }},
      {"aten.tensor_split.sections",
       [](const Call& c) { return many(tensor_split(self(c), c.integer("sections"), c.integer("dim", 0))); }},
      {"aten.tensor_split.indices",
       [](const Call& c) { return many(tensor_split(self(c), c.ints("indices"), c.integer("dim", 0))); }},
      {"aten.broadcast_tensors.default", [](const Call& c) { return many(broadcast_tensors(c.tensors("tensors"))); }},
      {"aten.meshgrid.default", [](const Call& c) { return many(meshgrid(c.tensors("tensors"), "ij")); }},
      {"aten.meshgrid.indexing",
       [](const Call& c) { return many(meshgrid(c.tensors("tensors"), c.str("indexing"))); }},
      {"aten.take_along_dim.default",
       [](const Call& c) { return one(take_along_dim(self(c), c.tensor("indices"), c.opt_integer("dim"))); }},
      {"aten.index_add.default",
       [](const Call& c) {
         return one(index_add(self(c), c.integer("dim"), c.tensor("index"), c.tensor("source"), c.scalar("alpha", 1)));
       }},
      {"aten.index_copy.default",
       [](const Call& c) {
         return one(index_copy(self(c), c.integer("dim"), c.tensor("index"), c.tensor("source")));
       }},
      {"aten.index_fill.int_Scalar",
       [](const Call& c) {
         return one(index_fill(self(c), c.integer("dim"), c.tensor("index"), c.scalar("value")));
       }},
      {"aten.index_reduce.default",
       [](const Call& c) {
         return one(index_reduce(self(c), c.integer("dim"), c.tensor("index"), c.tensor("source"), c.str("reduce"),
                                 c.flag("include_self", true)));
       }},
      {"aten.scatter_reduce.two",
       [](const Call& c) {
         return one(scatter_reduce(self(c), c.integer("dim"), c.tensor("index"), c.tensor("src"), c.str("reduce"),
                                   c.flag("include_self", true)));
       }},
      {"aten.masked_scatter.default",
       [](const Call& c) { return one(masked_scatter(self(c), c.tensor("mask"), c.tensor("source"))); }},
      {"aten.one_hot.default", [](const Call& c) { return one(one_hot(self(c), c.integer("num_classes", -1))); }},
      // ---- factories and conversions ----
      {"aten.tile.default", [](const Call& c) { return one(tile(self(c), c.ints("dims"))); }},
      {"aten.block_diag.default", [](const Call& c) { return one(block_diag(c.tensors("tensors"))); }},
      {"aten.cartesian_prod.default", [](const Call& c) { return one(cartesian_prod(c.tensors("tensors"))); }},
      {"aten.where.default", [](const Call& c) { return many(where(c.tensor("condition"))); }},
      {"aten.scatter.reduce",
       [](const Call& c) {
         return one(scatter(self(c), c.integer("dim"), c.tensor("index"), c.tensor("src"), c.str("reduce")));
       }},
      {"aten.trapezoid.dx",
       [](const Call& c) { return one(trapezoid(c.tensor("y"), c.real("dx", 1.0), c.integer("dim", -1))); }},
      {"aten.trapezoid.x",
       [](const Call& c) { return one(trapezoid(c.tensor("y"), c.tensor("x"), c.integer("dim", -1))); }},
      {"aten.zeros.default", [](const Call& c) { return one(zeros(c.sizes("size"), options_of(c))); }},
      {"aten.ones.default", [](const Call& c) { return one(ones(c.sizes("size"), options_of(c))); }},
      {"aten.empty.memory_format", [](const Call& c) { return one(zeros(c.sizes("size"), options_of(c))); }},
      {"aten.full.default",
       [](const Call& c) { return one(full(c.sizes("size"), c.scalar("fill_value"), options_of(c))); }},
      {"aten.scalar_tensor.default",
       [](const Call& c) {
         TensorOptions o = options_of(c);
         if (!o.dtype) o.dtype = DType::f32;
         return one(scalar_tensor(c.scalar("s"), o));
       }},
      {"aten.zeros_like.default", [](const Call& c) { return one(zeros(self(c).shape(), options_of(c, self(c)))); }},
      {"aten.ones_like.default", [](const Call& c) { return one(ones(self(c).shape(), options_of(c, self(c)))); }},
      {"aten.empty_like.default", [](const Call& c) { return one(zeros(self(c).shape(), options_of(c, self(c)))); }},
      {"aten.full_like.default",
       [](const Call& c) { return one(full(self(c).shape(), c.scalar("fill_value"), options_of(c, self(c)))); }},
      {"aten.new_zeros.default", [](const Call& c) { return one(zeros(c.sizes("size"), options_of(c, self(c)))); }},
      {"aten.new_ones.default", [](const Call& c) { return one(ones(c.sizes("size"), options_of(c, self(c)))); }},
      {"aten.new_empty.default", [](const Call& c) { return one(zeros(c.sizes("size"), options_of(c, self(c)))); }},
      {"aten.new_full.default",
       [](const Call& c) { return one(full(c.sizes("size"), c.scalar("fill_value"), options_of(c, self(c)))); }},
      {"aten.arange.default",
       [](const Call& c) {
         TensorOptions o = options_of(c);
         if (c.is_symbolic("end")) return one(arange_of(*c.opt_sym_integer("end"), o));  // (Y1)
         return one(arange(c.scalar("end"), o));
       }},
      {"aten.arange.start",
       [](const Call& c) {
         TensorOptions o = options_of(c);
         if (c.is_symbolic("end") && !c.is_symbolic("start")) {  // (Y1) start + (0 .. end - start - 1)
           Scalar start = c.scalar("start");
           if (!start.is_floating())
             return one(arange_of(*c.opt_sym_integer("end") - SymInt(start.to_int()), o) + start);
         }
         return one(arange(c.scalar("start"), c.scalar("end"), 1, o));
       }},
      {"aten.arange.start_step",
       [](const Call& c) {
         TensorOptions o = options_of(c);
         if (c.is_symbolic("end") && !c.is_symbolic("start") && !c.is_symbolic("step")) {
           // (Y1) start + step * (0 .. n - 1), n = ceil((end - start) / step), integers only
           Scalar start = c.scalar("start"), step = c.scalar("step", 1);
           if (!start.is_floating() && !step.is_floating() && step.to_int() > 0) {
             SymInt span = *c.opt_sym_integer("end") - SymInt(start.to_int());
             SymInt n = sym_max(floordiv(span + SymInt(step.to_int() - 1), step.to_int()), 0);
             return one(arange_of(n, o) * step + start);
           }
         }
         return one(arange(c.scalar("start"), c.scalar("end"), c.scalar("step", 1), o));
       }},
      {"aten._to_copy.default",
       [](const Call& c) {
         Tensor x = self(c);
         TensorOptions o = options_of(c, x);
         c.accept_defaults({"non_blocking"});
         return one(_to_copy(x, *o.dtype, *o.device));
       }},
      {"aten.to.dtype",
       [](const Call& c) {
         c.accept_defaults({"non_blocking", "copy", "memory_format"});
         return one(to(self(c), *c.dtype("dtype")));
       }},
      {"aten.to.device",
       [](const Call& c) {
         c.accept_defaults({"non_blocking", "copy", "memory_format"});
         return one(to(self(c), *c.device("device"), c.dtype("dtype")));
       }},
      {"aten.to.dtype_layout",
       [](const Call& c) {
         Tensor x = self(c);
         TensorOptions o = options_of(c, x);
         c.accept_defaults({"non_blocking", "copy"});
         return one(to(x, *o.device, o.dtype));
       }},
      {"aten.type_as.default", [](const Call& c) { return one(to(self(c), c.tensor("other").dtype())); }},
      {"aten.tril_indices.default",
       [](const Call& c) {
         TensorOptions o = options_of(c);
         if (!o.dtype) o.dtype = DType::i64;
         return one(tril_indices(c.integer("row"), c.integer("col"), c.integer("offset", 0), o));
       }},
      {"aten.triu_indices.default",
       [](const Call& c) {
         TensorOptions o = options_of(c);
         if (!o.dtype) o.dtype = DType::i64;
         return one(triu_indices(c.integer("row"), c.integer("col"), c.integer("offset", 0), o));
       }},
      {"aten.eye.default", [](const Call& c) { return one(eye(c.integer("n"), std::nullopt, options_of(c))); }},
      {"aten.eye.m", [](const Call& c) { return one(eye(c.integer("n"), c.integer("m"), options_of(c))); }},
      {"aten.linspace.default",
       [](const Call& c) {
         return one(linspace(c.real("start"), c.real("end"), c.integer("steps"), options_of(c)));
       }},
      {"aten.logspace.default",
       [](const Call& c) {
         return one(logspace(c.real("start"), c.real("end"), c.integer("steps"), c.real("base", 10.0), options_of(c)));
       }},
      {"aten.empty_strided.default",
       [](const Call& c) {  // uninitialized memory in PyTorch: kiln's is zeros, laid out contiguously
         c.ints("stride");
         return one(zeros(c.sizes("size"), options_of(c)));
       }},
      {"aten.empty_permuted.default",
       [](const Call& c) {  // a memory layout of uninitialized memory: kiln's is zeros, contiguous
         c.ints("physical_layout");
         return one(zeros(c.sizes("size"), options_of(c)));
       }},
      {"aten.copy.default",
       [](const Call& c) {  // functional copy_: src in self's dtype, device and shape
         Tensor x = self(c);
         c.accept_defaults({"non_blocking"});
         return one(_to_copy(expand(c.tensor("src"), x.shape()), x.dtype(), x.device()));
       }},
      {"aten.fill.Scalar",
       [](const Call& c) { return one(full(self(c).shape(), c.scalar("value"), options_of(c, self(c)))); }},
      {"aten.zero.default",
       [](const Call& c) { return one(zeros(self(c).shape(), options_of(c, self(c)))); }},
  };
  static const bool merged = [] {
    for (const auto& [name, adapter] : nn_adapters()) entries.emplace(name, adapter);
    return true;
  }();
  (void)merged;
  return entries;
}

#undef KILN_UNARY
#undef KILN_BINARY

}  // namespace

Adapter find_adapter(std::string_view target, bool* inplace) {
  if (inplace) *inplace = false;
  const auto& t = table();
  if (auto it = t.find(target); it != t.end()) return it->second;
  // "aten.mul_.Tensor" -> "aten.mul.Tensor" then a copy into self; also copy_ / fill_ / zero_
  size_t dot = target.find('.'), second = target.find('.', dot + 1);
  if (dot == std::string_view::npos || second == std::string_view::npos ||
      target[second - 1] != '_')
    return nullptr;
  std::string functional =
      std::string(target.substr(0, second - 1)) + std::string(target.substr(second));
  if (auto it = t.find(functional); it != t.end()) {
    if (inplace) *inplace = true;
    return it->second;
  }
  return nullptr;
}

}  // namespace kiln::interop

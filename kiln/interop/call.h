#pragma once
// One node of an imported graph as its op adapter sees it: arguments by their ATen
// schema names, typed on access, with the schema's default where the file omits one (I2).
// Internal to kiln/interop.

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "kiln/api/functional.h"

namespace kiln::interop {

/** A value of the imported graph: a tensor, a number, a symbolic size (a SymInt of the
 * file that is an expression: Y1), or nothing (None, an absent optional tensor). */
using Slot = std::variant<std::monostate, Tensor, Scalar, SymInt>;
using Results = std::vector<Slot>;
using Env = std::unordered_map<std::string, Slot>;

/** How the file's devices become kiln's while interpreting (X3: slots, not hard-coded). */
using DeviceOf = std::function<Device(const nlohmann::json& device)>;

class Call {
 public:
  /** `values`: the graph's tensor_values (what PyTorch recorded of each value). */
  Call(const nlohmann::json& node, const Env& env, const DeviceOf& device_of,
       const nlohmann::json* values = nullptr);

  const std::string& target() const { return target_; }
  /** Whether `name` is given and not None. */
  bool has(std::string_view name) const;
  /** Whether `name` is given as a tensor (not a number). */
  bool is_tensor(std::string_view name) const;

  /** A tensor argument; a number where a tensor is expected becomes a wrapped number. */
  Tensor tensor(std::string_view name) const;
  /** An optional tensor: undefined when None or omitted. */
  Tensor opt_tensor(std::string_view name) const;
  /** A list of (optional) tensors; None entries are undefined tensors. */
  TensorList tensors(std::string_view name) const;
  Scalar scalar(std::string_view name, std::optional<Scalar> fallback = std::nullopt) const;
  std::optional<Scalar> opt_scalar(std::string_view name) const;
  int64_t integer(std::string_view name, std::optional<int64_t> fallback = std::nullopt) const;
  std::optional<int64_t> opt_integer(std::string_view name) const;
  IntList ints(std::string_view name, std::optional<IntList> fallback = std::nullopt) const;
  /** (Y1) A size list that keeps symbolic entries symbolic (ints() pins them). */
  SymSizes sizes(std::string_view name) const;
  /** (Y1) Whether `name` is a symbolic size (reads nothing). */
  bool is_symbolic(std::string_view name) const;
  /** (Y1) An integer that may be a symbolic size. */
  std::optional<SymInt> opt_sym_integer(std::string_view name) const;
  std::optional<IntList> opt_ints(std::string_view name) const;
  double real(std::string_view name, std::optional<double> fallback = std::nullopt) const;
  std::optional<double> opt_real(std::string_view name) const;
  std::vector<double> reals(std::string_view name) const;
  bool flag(std::string_view name, std::optional<bool> fallback = std::nullopt) const;
  std::string str(std::string_view name, std::optional<std::string> fallback = std::nullopt) const;
  std::optional<DType> dtype(std::string_view name) const;
  std::optional<Device> device(std::string_view name) const;
  /** Arguments that change nothing kiln computes when they have these values: accepted,
   * else an unsupported Error (pin_memory=True, a sparse layout, channels-last...). */
  void accept_defaults(std::initializer_list<std::string_view> names) const;

  /** Every argument the adapter did not read and that is not None: an adapter that
   * silently dropped one would compute something else than PyTorch. */
  std::vector<std::string> unread() const;
  [[noreturn]] void fail_arg(std::string_view name, std::string_view why) const;
  /** The tensor argument `name` laid out in memory as PyTorch had it (the strides and
   * storage offset the file records for it): what as_strided reads through. kiln's ops
   * may lay a result out otherwise (its convolution returns a permuted view). */
  Tensor tensor_as_recorded(std::string_view name) const;

 private:
  const nlohmann::json* find(std::string_view name) const;  // the Argument union, marks it read
  Slot slot(std::string_view name, const nlohmann::json& arg) const;

  const nlohmann::json& node_;
  const nlohmann::json* values_;
  const Env& env_;
  const DeviceOf& device_of_;
  std::string target_;
  mutable std::set<std::string, std::less<>> read_;
};

using Adapter = Results (*)(const Call&);

/** The adapter of an op overload ("aten.add.Tensor"), or null. In-place overloads that
 * the table lacks ("aten.mul_.Tensor") resolve to their functional twin followed by a
 * copy into self (`inplace` is set). */
Adapter find_adapter(std::string_view target, bool* inplace = nullptr);

/** The kiln dtype of a ScalarType code of the file (torch/_export/serde/schema.py's
 * numbering), or nullopt for one kiln lacks (complex, float8, ...). */
std::optional<DType> dtype_of_code(int code);

/** A number from the file: as_int / as_float (also "Infinity", "-Infinity", "NaN") /
 * as_bool, or a SymInt by name from `env` (a symbolic one pinned to its example value:
 * Y2). */
std::optional<Scalar> number_of(const nlohmann::json& arg, const Env& env);
/** (Y1) An integer or a SymInt by name from `env`, kept symbolic; nullopt otherwise. */
std::optional<SymInt> sym_int_of(const nlohmann::json& arg, const Env& env);

}  // namespace kiln::interop

#pragma once
// The registry of extension ops: ops defined outside kiln's table (E1-E3).
//
// Note [Extension ops are table entries]
// A registered op gets the next OpKind after the built-in table and an OpInfo exactly
// like a built-in's (name, device rule, meta function, parsed schema, functional form),
// so everything that walks ops through op_info() -- dispatch, the modes, the recorder,
// the IR, the serializer -- handles it without knowing it is an extension. What only
// an extension has (its kernels per backend, its backward formula, the library it
// comes from, its schema text for programs) lives here. Entries are never removed:
// an OpKind stays valid for the life of the process, and lookups take no lock.
// The public way to register is kiln::define_op (kiln/dispatch/library.h).

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ops/op_table.h"

namespace kiln::ops {

/** A backward formula, as the derivative table's (kiln/autograd/function.h). */
using GradFormula = void (*)(autograd::GradCtx&);

/** What a registered op has besides its OpInfo. */
struct ExtensionOp {
  OpInfo info;
  std::string name;         // owns the storage info.name points into
  std::string schema_text;  // the canonical schema, stored in programs (E3)
  std::string library;      // what to load to get the op (for error messages)
  std::array<Kernel, kNumDeviceTypes> kernels{};
  enum class Grad : uint8_t { missing, none, formula } grad = Grad::missing;
  uint32_t grad_saves = 0;  // as Derivative::saves
  GradFormula grad_formula = nullptr;
  /** (E4) Defined by its schema alone; the fake (meta) function comes later. */
  bool staged = false;
  /** An in-place op without a functional form: its functional twin (Note
   * [Auto-functionalized extension ops] in kiln/dispatch/library.cpp). */
  std::optional<OpKind> auto_functional;
  /** On that twin: the in-place op it stands for. */
  std::optional<OpKind> functionalizes;
};

/** Registers `op` (its info.schema already parsed, info.name unset): validates it,
 * gives it the next OpKind and returns it. Throws a value Error naming the op when the
 * name is taken or not namespaced, or the schema is one kiln cannot run. */
OpKind register_extension(ExtensionOp op);
/** (E4) Changes the registration of extension op `op` (a later step: its fake function,
 * a kernel, its backward), under the registry's lock. Steps are meant to happen before
 * the op is called on other threads (as torch.library's). */
void update_extension(OpKind op, const std::function<void(ExtensionOp&)>& change);
/** The registration of `op`, or null for a built-in op. */
const ExtensionOp* extension_op(OpKind op);
/** The kernel an extension op registered for `type`, or null. */
inline Kernel extension_kernel(OpKind op, DeviceType type) {
  const ExtensionOp* e = extension_op(op);
  return e ? e->kernels[static_cast<size_t>(type)] : nullptr;
}
/** Every registered op, in registration order. */
std::vector<OpKind> extension_ops();
/** `text` with runs of whitespace collapsed to one space and no space before ',' or
 * ')' or after '(' -- the form schemas are stored and compared in. */
std::string canonical_schema(std::string_view text);

}  // namespace kiln::ops

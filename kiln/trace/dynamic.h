#pragma once
// Dynamic shapes in captures (Y1, Y2, Y4): the dims a caller declares dynamic, giving fake
// inputs those dims, settling a finished trace's guards into ranges (or one constraint
// error), and binding the symbols of a captured graph from the sizes of its inputs.
// Export (kiln/program), train steps and joint capture (kiln/passes) all use it.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/symbolic.h"
#include "kiln/ir/graph.h"

namespace kiln {

/** (Y1) A dynamic dimension of an export input. A named Dim has a range; inputs that
 * share a name share its symbol. A derived Dim is `k*d + c` of a named one (`2*d`,
 * `d + 1`). An automatic Dim becomes whatever the trace needs (a symbol, a relation,
 * or a static size) without an error. Dims not declared are static. */
struct Dim {
  /** The largest size a Dim may take by default (sizes are int64; this leaves room for
   * arithmetic on them). */
  static constexpr int64_t kMax = int64_t{1} << 40;
  std::string name;
  int64_t min = 1, max = kMax;  // kiln's default minimum is 1 (docs/dynamic-shapes.md)
  bool automatic = false;
  // A derived Dim: coeff * (the Dim called `root`) + offset; root empty otherwise.
  std::string root;
  int64_t coeff = 1, offset = 0;

  Dim() = default;
  explicit Dim(std::string name, int64_t min = 1, int64_t max = kMax)
      : name(std::move(name)), min(min), max(max) {}
  /** A dim the trace decides (PyTorch's Dim.AUTO). */
  static Dim automatic_dim() {
    Dim d;
    d.automatic = true;
    d.min = 0;
    return d;
  }
  friend Dim operator*(int64_t k, const Dim& d) { return d.derived(k * d.coeff, k * d.offset); }
  friend Dim operator+(const Dim& d, int64_t c) { return d.derived(d.coeff, d.offset + c); }
  friend Dim operator-(const Dim& d, int64_t c) { return d.derived(d.coeff, d.offset - c); }
  bool is_derived() const { return !root.empty(); }

 private:
  Dim derived(int64_t k, int64_t c) const {
    Dim r = *this;
    if (root.empty()) r.root = name;
    r.name = "";
    r.coeff = k;
    r.offset = c;
    return r;
  }
};
/** The dynamic dims of one user input, by dim index. */
using InputDims = std::map<int64_t, Dim>;

/** (Y4) What a program with dynamic shapes needs to run at a new shape: its symbols with
 * their ranges and example values, and the guards every binding must meet. Empty for a
 * static program. */
struct ShapeSpec {
  std::vector<SymbolInfo> symbols;
  std::vector<Guard> guards;
  bool empty() const { return symbols.empty(); }
  /** The index of a symbol in `symbols`, or -1. */
  int index_of(const sym::Expr* symbol) const;
  /** "s0 in [1, 1024] (batch: input_0.shape[0])" lines, then "guard: ..." lines. */
  std::string str() const;
};

/** (Y4) The value of each symbol of `shapes` (in symbol order) for `inputs`, whose
 * captured metadata are `metas` (with the names errors use): every symbol bound from the
 * input sizes, then every bound, static dim, repeated symbol, derived dim and guard
 * checked, with an Error naming the input, dim, symbol and range that failed. Empty for
 * no symbols. */
std::vector<int64_t> bind_symbols(
    const ShapeSpec& shapes, const std::vector<std::pair<std::string, const ir::ValueMeta*>>& metas,
    const TensorList& inputs);

/** (Y3) A binding's value for an unbacked symbol not yet bound (its node has not run). */
inline constexpr int64_t kUnbound = INT64_MIN;

/** (Y3) Whether every symbol guard `g` uses is bound. */
bool all_bound(const ShapeSpec& shapes, const std::vector<int64_t>& binding, const Guard& g);

/** (Y3) Checks the guards that use symbol `symbol` (an unbacked size just bound from the
 * data) and whose symbols are all bound: a value Error naming the assertion and the
 * values that break it. */
void check_assertions_of(const ShapeSpec& shapes, const std::vector<int64_t>& binding,
                         size_t symbol);

/** (Y4) `meta` at a binding of `shapes`' symbols (values in symbol order): every size,
 * stride and offset an integer. */
ir::ValueMeta evaluate(const ir::ValueMeta& meta, const ShapeSpec& shapes,
                       const std::vector<int64_t>& binding);

namespace detail {

/** (Y1) Gives fake inputs their declared dynamic dims: a symbol of `env` per named Dim
 * (shared by name), `k*d + c` for a derived one, each checked against the example sizes
 * in `examples`. Symbols are named after `names` ("input_0.shape[0]"). */
void declare_dynamic_dims(ShapeEnv& env, TensorList& fakes, const TensorList& examples,
                          const std::vector<InputDims>& dims);

/** (Y2) The ShapeSpec of a finished trace from its guards: automatic dims are
 * specialized, related or narrowed as the guards say; a guard that does any of that to a
 * named Dim is a constraint violation, and all of them are one Error with a fix each. */
ShapeSpec settle_shapes(const ShapeEnv& env);

}  // namespace detail

}  // namespace kiln

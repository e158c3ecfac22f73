#pragma once
// Symbolic sizes (Y1-Y6): exact integer expressions over named symbols, the SymInt that
// meta functions compute with, and the shape environment of one trace.
//
// Note [Symbolic sizes]
// A size is an integer or an expression (`s0`, `4*s0`, `s0 + 1`, `s0//2`, `Max(s0, s1)`).
// Expressions are immutable and interned for the whole process, in one canonical form:
// a sum of integer multiples of products of atoms plus a constant, where an atom is a
// symbol or an operation the sum cannot absorb (FloorDiv, Mod, Max, Min). Two
// expressions are equal exactly when their pointers are, so shapes compare as fast as
// integers do and "is this the same size" needs no solver.
//
// A symbolic entry of a Dims keeps its example value (the hint) in the integer slot and
// its expression beside it (kiln/core/dims.h). Code that reads the integer of a symbolic
// size - any code not written for symbols - gets the hint and thereby specializes the
// size: the active ShapeEnv records the guard `s0 == 8` with the op and module path that
// read it (Y2). So every unported path stays sound; it just makes the program static in
// that size, and export says so when the user declared the size dynamic. Meta functions
// written for symbols read sizes as SymInt (`dims.sym(i)`) and decide comparisons through
// the ShapeEnv, which answers from the symbols' ranges when it can (no guard) and from
// the hints otherwise (a guard).

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln {

namespace sym {

enum class Op : uint8_t { constant, symbol, add, mul, floordiv, mod, max, min };

/** One interned expression node (see Note [Symbolic sizes]). For `add`, `value` is the
 * constant term and `args` the other terms; for `mul`, `value` is the coefficient and
 * `args` the atoms (sorted, repeated for powers). */
struct Expr {
  Op op;
  int64_t value = 0;
  std::string name;  // symbol
  std::vector<const Expr*> args;
  size_t hash = 0;
};

const Expr* constant(int64_t v);
/** The symbol called `name` (the same node for the same name). */
const Expr* symbol(std::string_view name);
const Expr* add(const Expr* a, const Expr* b);
const Expr* sub(const Expr* a, const Expr* b);
const Expr* mul(const Expr* a, const Expr* b);
/** Floor division and its remainder (Python's // and %), for b > 0. */
const Expr* floordiv(const Expr* a, const Expr* b);
const Expr* mod(const Expr* a, const Expr* b);
const Expr* max(const Expr* a, const Expr* b);
const Expr* min(const Expr* a, const Expr* b);

/** The constant of a constant expression. */
std::optional<int64_t> as_constant(const Expr* e);
/** "4*s0 + 1", "s0//2", "Max(1, s0)": the form files store and parse() reads. */
std::string str(const Expr* e);
/** Reads what str() writes (integers, symbols, + - * // %, Max, Min, parentheses);
 * throws a format Error naming `what` for anything else. */
const Expr* parse(std::string_view text, std::string_view what);
/** The symbols an expression mentions, each once, in first-seen order. */
std::vector<const Expr*> symbols_of(const Expr* e);
/** Evaluates `e` with `value(symbol)` for each symbol; throws a shape Error on a
 * division by zero or an overflow. */
int64_t eval(const Expr* e, const std::function<int64_t(const Expr*)>& value);
/** `e` with each symbol replaced by `f(symbol)`. */
const Expr* substitute(const Expr* e, const std::function<const Expr*(const Expr*)>& f);

/** Checked integer arithmetic (a shape Error on overflow or division by zero); floor
 * division and remainder as Python's. */
int64_t add_i(int64_t a, int64_t b);
int64_t mul_i(int64_t a, int64_t b);
int64_t floordiv_i(int64_t a, int64_t b);
int64_t mod_i(int64_t a, int64_t b);

/** An inclusive range of integers. */
struct Range {
  int64_t lo, hi;
};
/** The range of `e` when each symbol lies in `range(symbol)` (interval arithmetic,
 * saturating at int64's ends). */
Range range_of(const Expr* e, const std::function<Range(const Expr*)>& range);

}  // namespace sym

/** How a guard relates its two sides. */
enum class Rel : uint8_t { eq, ne, lt, le };
std::string_view to_string(Rel rel);

/** A size: an integer, or an expression with its example value. Arithmetic on integers
 * stays integer arithmetic; on expressions it builds expressions. Comparisons involving
 * an expression are decided by the active ShapeEnv (see Note [Symbolic sizes]). */
class SymInt {
 public:
  SymInt(int64_t v = 0) : hint_(v) {}  // NOLINT: integers are sizes
  SymInt(const sym::Expr* e, int64_t hint);
  bool is_symbolic() const { return expr_ != nullptr; }
  /** The expression; null for an integer. */
  const sym::Expr* expr() const { return expr_; }
  /** The example value (the integer itself when not symbolic). */
  int64_t hint() const { return hint_; }
  /** The expression, a constant one for an integer. */
  const sym::Expr* as_expr() const;
  /** The integer; for an expression, its hint after recording the guard that pins it
   * (as code that needs an integer must: Y2). */
  int64_t guard_int() const;
  std::string str() const;

  friend SymInt operator+(const SymInt& a, const SymInt& b) {
    if (!a.expr_ && !b.expr_) [[likely]]
      return a.hint_ + b.hint_;
    return slow(sym::Op::add, a, b);
  }
  friend SymInt operator-(const SymInt& a, const SymInt& b) {
    if (!a.expr_ && !b.expr_) [[likely]]
      return a.hint_ - b.hint_;
    return slow_sub(a, b);
  }
  friend SymInt operator*(const SymInt& a, const SymInt& b) {
    if (!a.expr_ && !b.expr_) [[likely]]
      return a.hint_ * b.hint_;
    return slow(sym::Op::mul, a, b);
  }
  /** Floor division and remainder (b > 0). */
  friend SymInt floordiv(const SymInt& a, const SymInt& b);
  friend SymInt mod(const SymInt& a, const SymInt& b);
  friend SymInt sym_max(const SymInt& a, const SymInt& b);
  friend SymInt sym_min(const SymInt& a, const SymInt& b);
  friend bool operator==(const SymInt& a, const SymInt& b) {
    if (!a.expr_ && !b.expr_) [[likely]]
      return a.hint_ == b.hint_;
    return compare(Rel::eq, a, b);
  }
  friend bool operator!=(const SymInt& a, const SymInt& b) { return !(a == b); }
  friend bool operator<(const SymInt& a, const SymInt& b) {
    if (!a.expr_ && !b.expr_) [[likely]]
      return a.hint_ < b.hint_;
    return compare(Rel::lt, a, b);
  }
  friend bool operator<=(const SymInt& a, const SymInt& b) {
    if (!a.expr_ && !b.expr_) [[likely]]
      return a.hint_ <= b.hint_;
    return compare(Rel::le, a, b);
  }
  friend bool operator>(const SymInt& a, const SymInt& b) { return b < a; }
  friend bool operator>=(const SymInt& a, const SymInt& b) { return b <= a; }
  /** Whether the two are the same expression (or equal integers): no guard. */
  bool same_as(const SymInt& o) const { return expr_ == o.expr_ && (expr_ || hint_ == o.hint_); }

 private:
  static SymInt slow(sym::Op op, const SymInt& a, const SymInt& b);
  static SymInt slow_sub(const SymInt& a, const SymInt& b);
  static bool compare(Rel rel, const SymInt& a, const SymInt& b);
  int64_t hint_;
  const sym::Expr* expr_ = nullptr;
};

/** A decision the trace took on a symbolic size: `lhs rel rhs` held for the hints, and
 * the program holds only where it holds again. `op` and `scope` say who asked. */
struct Guard {
  Rel rel;
  const sym::Expr* lhs;
  const sym::Expr* rhs;
  std::string op;     // the op (or "user code") whose decision it is
  std::string scope;  // the module path, possibly empty
  std::string str() const;
};

/** One symbol of a trace or a program. */
struct SymbolInfo {
  const sym::Expr* expr;
  int64_t min = 0, max = int64_t{1} << 62;
  int64_t hint = 0;        // the example value (0 for an unbacked symbol: none)
  std::string dim_name;    // the user's Dim name ("batch"), or empty
  std::string source;      // "input_0.shape[0]"
  bool automatic = false;  // (Y2) may be specialized or related without an error
  /** (Y3) A data-dependent size (nonzero's count, item()'s value): no example value (the
   * hint is a placeholder no decision uses); bound at run time by the node that makes it. */
  bool unbacked = false;
};

/** The symbols and guards of one trace (Y1, Y2). Install it with ShapeEnvGuard; while it
 * is active, comparisons on symbolic sizes consult it and record their guards here. */
class ShapeEnv {
 public:
  /** A new symbol with example value `hint` in [min, max]; named s0, s1, ... */
  SymInt new_symbol(int64_t hint, int64_t min, int64_t max, std::string source,
                    std::string dim_name = "", bool automatic = false);
  /** (Y3) A data-dependent size in [min, max], named u0, u1, ...; `source` says which op
   * made it. Decisions on it are taken from ranges only (else an Error naming it). */
  SymInt new_unbacked(int64_t min, int64_t max, std::string source);
  /** (Y3) `a rel b` holds from here on: a runtime assertion of the program (checked when
   * its symbols are bound), and a narrower range when it bounds a symbol by a constant. */
  void assume(Rel rel, const SymInt& a, const SymInt& b);
  /** The range of an expression from its symbols' ranges. */
  sym::Range range(const sym::Expr* e) const;
  /** Decides `a rel b`: from the ranges when they settle it, else from the hints, and
   * then records the guard. */
  bool decide(Rel rel, const SymInt& a, const SymInt& b);
  const std::vector<SymbolInfo>& symbols() const { return symbols_; }
  const SymbolInfo* find(const sym::Expr* symbol) const;
  const std::vector<Guard>& guards() const { return guards_; }
  /** The op on whose behalf sizes are being read now (for guard sources). */
  void set_current_op(std::string_view op) { current_op_ = op; }
  std::string_view current_op() const { return current_op_; }

  /** The env active on this thread, or null. */
  static ShapeEnv* current();

  /** Where user code is now (a module path) for guard sources; set by the tracer. */
  std::function<std::string()> scope_provider;

 private:
  friend class ShapeEnvGuard;
  std::vector<SymbolInfo> symbols_;
  std::vector<Guard> guards_;
  std::string_view current_op_;
  // Ranges of expressions seen (symbols' ranges are fixed once made).
  mutable std::unordered_map<const sym::Expr*, sym::Range> ranges_;
};

/** Makes `env` the active ShapeEnv of this thread while it lives. */
class ShapeEnvGuard {
 public:
  explicit ShapeEnvGuard(ShapeEnv* env);
  ~ShapeEnvGuard();
  ShapeEnvGuard(const ShapeEnvGuard&) = delete;
  ShapeEnvGuard& operator=(const ShapeEnvGuard&) = delete;

 private:
  ShapeEnv* prev_;
};

/** (Y3) Whether `n` involves an unbacked symbol of the active ShapeEnv. */
bool data_dependent_size(const SymInt& n);

/** (Y3) Whether `n` is 0 for a special case of empty tensors whose general path is right
 * for them too: a data-dependent n is taken as non-zero without a guard (PyTorch's
 * size-oblivious reasoning); otherwise `n == 0` (a guard where it must be one). */
bool empty_special_case(const SymInt& n);

/** (Y3) States a fact about sizes, as torch._check does: with integers it is checked now
 * (a value Error when false); with symbols it becomes a runtime assertion of the trace
 * (ShapeEnv::assume), the way to let a meta function decide on a data-dependent size. */
void check_size(const SymInt& a, Rel rel, const SymInt& b);

/** Sets ShapeEnv::current_op for its lifetime when an env is active (run_meta). */
class SymOpScope {
 public:
  explicit SymOpScope(std::string_view op) : env_(ShapeEnv::current()) {
    if (env_) {
      prev_ = env_->current_op();
      env_->set_current_op(op);
    }
  }
  ~SymOpScope() {
    if (env_) env_->set_current_op(prev_);
  }
  SymOpScope(const SymOpScope&) = delete;
  SymOpScope& operator=(const SymOpScope&) = delete;

 private:
  ShapeEnv* env_;
  std::string_view prev_;
};

namespace detail {
/** Records `e == hint` in the active env (a read of a symbolic size as an integer). */
void specialize(const sym::Expr* e, int64_t hint);
}  // namespace detail

}  // namespace kiln

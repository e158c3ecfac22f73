#include "kiln/core/symbolic.h"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <unordered_set>

#include "kiln/core/dims.h"
#include "kiln/core/error.h"

namespace kiln {
namespace sym {

namespace {

// ---- interning -------------------------------------------------------------------

struct ExprHash {
  size_t operator()(const Expr* e) const { return e->hash; }
};
struct ExprEq {
  bool operator()(const Expr* a, const Expr* b) const {
    return a->op == b->op && a->value == b->value && a->name == b->name && a->args == b->args;
  }
};

// Expressions live as long as the process (they are shared by every trace and program;
// there are few distinct ones). The table is never destroyed, so a program destroyed at
// exit may still hold them.
const Expr* intern(Expr e) {
  size_t h = std::hash<int>()(static_cast<int>(e.op)) * 31 + std::hash<int64_t>()(e.value);
  h = h * 31 + std::hash<std::string>()(e.name);
  for (const Expr* a : e.args) h = h * 1000003 ^ std::hash<const void*>()(a);
  e.hash = h;
  static auto* mutex = new std::mutex;
  static auto* table = new std::unordered_set<const Expr*, ExprHash, ExprEq>;
  std::lock_guard<std::mutex> lock(*mutex);
  if (auto it = table->find(&e); it != table->end()) return *it;
  const Expr* made = new Expr(std::move(e));
  table->insert(made);
  return made;
}

}  // namespace

static int64_t checked(bool overflow, int64_t v) {
  KILN_CHECK(!overflow, shape, "symbolic size arithmetic overflows int64");
  return v;
}
int64_t add_i(int64_t a, int64_t b) {
  int64_t r;
  bool overflow = __builtin_add_overflow(a, b, &r);
  return checked(overflow, r);
}
int64_t mul_i(int64_t a, int64_t b) {
  int64_t r;
  bool overflow = __builtin_mul_overflow(a, b, &r);
  return checked(overflow, r);
}
int64_t floordiv_i(int64_t a, int64_t b) {
  KILN_CHECK(b != 0, shape, "symbolic size: division by zero");
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t mod_i(int64_t a, int64_t b) { return a - floordiv_i(a, b) * b; }

namespace {

// A total order that does not depend on interning order, so printing is stable.
int cmp(const Expr* a, const Expr* b) {
  if (a == b) return 0;
  if (a->op != b->op) return a->op < b->op ? -1 : 1;
  if (a->op == Op::symbol) {  // s2 before s10
    if (a->name.size() != b->name.size()) return a->name.size() < b->name.size() ? -1 : 1;
    return a->name < b->name ? -1 : 1;
  }
  if (a->value != b->value) return a->value < b->value ? -1 : 1;
  for (size_t i = 0; i < std::min(a->args.size(), b->args.size()); ++i)
    if (int c = cmp(a->args[i], b->args[i])) return c;
  return a->args.size() < b->args.size() ? -1 : a->args.size() > b->args.size() ? 1 : 0;
}
bool less(const Expr* a, const Expr* b) { return cmp(a, b) < 0; }

// ---- the canonical polynomial form -------------------------------------------------

using Monomial = std::vector<const Expr*>;  // sorted atoms, repeated for powers
struct MonoLess {
  bool operator()(const Monomial& a, const Monomial& b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), less);
  }
};
struct Poly {
  int64_t c = 0;
  std::map<Monomial, int64_t, MonoLess> terms;  // no zero coefficients
  void add_term(const Monomial& m, int64_t k) {
    int64_t& t = terms[m];
    t = add_i(t, k);
    if (t == 0) terms.erase(m);
  }
};

void add_to(Poly& p, const Expr* e, int64_t scale) {
  switch (e->op) {
    case Op::constant: p.c = add_i(p.c, mul_i(e->value, scale)); break;
    case Op::add:
      p.c = add_i(p.c, mul_i(e->value, scale));
      for (const Expr* t : e->args) add_to(p, t, scale);
      break;
    case Op::mul: p.add_term(e->args, mul_i(e->value, scale)); break;
    default: p.add_term({e}, scale);
  }
}
Poly poly_of(const Expr* e) {
  Poly p;
  add_to(p, e, 1);
  return p;
}

const Expr* term_expr(const Monomial& m, int64_t k) {
  if (k == 1 && m.size() == 1) return m[0];
  return intern({Op::mul, k, "", m});
}
const Expr* expr_of(const Poly& p) {
  if (p.terms.empty()) return constant(p.c);
  std::vector<const Expr*> terms;
  for (const auto& [m, k] : p.terms) terms.push_back(term_expr(m, k));
  if (terms.size() == 1 && p.c == 0) return terms[0];
  return intern({Op::add, p.c, "", std::move(terms)});
}

Poly times(const Poly& a, const Poly& b) {
  Poly r;
  r.c = mul_i(a.c, b.c);
  for (const auto& [m, k] : a.terms)
    if (b.c) r.add_term(m, mul_i(k, b.c));
  for (const auto& [m, k] : b.terms)
    if (a.c) r.add_term(m, mul_i(k, a.c));
  for (const auto& [ma, ka] : a.terms)
    for (const auto& [mb, kb] : b.terms) {
      Monomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end(), less);
      r.add_term(m, mul_i(ka, kb));
    }
  return r;
}

// `a` divided exactly by the single term k*m, if every term of `a` is a multiple of it.
std::optional<Poly> divide_exactly(const Poly& a, const Monomial& m, int64_t k) {
  Poly q;
  if (a.c != 0) {
    if (!m.empty() || a.c % k != 0) return std::nullopt;
    q.c = a.c / k;
  }
  for (const auto& [am, ak] : a.terms) {
    if (ak % k != 0) return std::nullopt;
    Monomial rest;  // am minus m, as multisets
    if (!std::includes(am.begin(), am.end(), m.begin(), m.end(), less)) return std::nullopt;
    std::set_difference(am.begin(), am.end(), m.begin(), m.end(), std::back_inserter(rest), less);
    if (rest.empty())
      q.c = add_i(q.c, ak / k);
    else
      q.add_term(rest, ak / k);
  }
  return q;
}

// The divisor as one term k*m (k > 0), if it is one.
std::optional<std::pair<Monomial, int64_t>> single_term(const Poly& b) {
  if (b.terms.empty()) return b.c > 0 ? std::optional(std::pair(Monomial{}, b.c)) : std::nullopt;
  if (b.c != 0 || b.terms.size() != 1 || b.terms.begin()->second <= 0) return std::nullopt;
  return *b.terms.begin();
}

const Expr* binary_atom(Op op, const Expr* a, const Expr* b) { return intern({op, 0, "", {a, b}}); }

}  // namespace

const Expr* constant(int64_t v) {
  // Small constants come up on every traced op (strides, sizes): one lookup per thread
  // instead of the interning lock.
  constexpr int64_t kLo = -64, kHi = 4096;
  if (v >= kLo && v < kHi) {
    thread_local std::vector<const Expr*> small(kHi - kLo, nullptr);
    const Expr*& slot = small[static_cast<size_t>(v - kLo)];
    if (!slot) slot = intern({Op::constant, v, "", {}});
    return slot;
  }
  return intern({Op::constant, v, "", {}});
}
const Expr* symbol(std::string_view name) { return intern({Op::symbol, 0, std::string(name), {}}); }

const Expr* add_uncached(const Expr* a, const Expr* b) {
  Poly p = poly_of(a);
  add_to(p, b, 1);
  return expr_of(p);
}
const Expr* sub_uncached(const Expr* a, const Expr* b) {
  Poly p = poly_of(a);
  add_to(p, b, -1);
  return expr_of(p);
}
const Expr* mul_uncached(const Expr* a, const Expr* b) {
  return expr_of(times(poly_of(a), poly_of(b)));
}

const Expr* floordiv_uncached(const Expr* a, const Expr* b) {
  auto ca = as_constant(a), cb = as_constant(b);
  if (ca && cb) return constant(floordiv_i(*ca, *cb));
  if (cb && *cb == 1) return a;
  Poly pa = poly_of(a), pb = poly_of(b);
  if (auto t = single_term(pb)) {
    if (auto q = divide_exactly(pa, t->first, t->second)) return expr_of(*q);
    if (cb) {  // (k*b*X + R) // b == k*X + R // b for integer X
      Poly whole, rest;
      rest.c = pa.c;
      for (const auto& [m, k] : pa.terms)
        if (k % *cb == 0)
          whole.add_term(m, k / *cb);
        else
          rest.add_term(m, k);
      if (!whole.terms.empty()) return add(expr_of(whole), floordiv(expr_of(rest), b));
    }
  }
  return binary_atom(Op::floordiv, a, b);
}

const Expr* mod_uncached(const Expr* a, const Expr* b) {
  auto ca = as_constant(a), cb = as_constant(b);
  if (ca && cb) return constant(mod_i(*ca, *cb));
  if (cb && *cb == 1) return constant(0);
  Poly pa = poly_of(a), pb = poly_of(b);
  if (auto t = single_term(pb)) {
    if (divide_exactly(pa, t->first, t->second)) return constant(0);
    if (cb) {  // (k*b*X + R) % b == R % b
      Poly rest;
      rest.c = mod_i(pa.c, *cb);
      for (const auto& [m, k] : pa.terms)
        if (k % *cb != 0) rest.add_term(m, mod_i(k, *cb));
      if (rest.terms.empty()) return constant(rest.c);
      return binary_atom(Op::mod, expr_of(rest), b);
    }
  }
  return binary_atom(Op::mod, a, b);
}

namespace {
const Expr* extremum(Op op, const Expr* a, const Expr* b) {
  auto ca = as_constant(a), cb = as_constant(b);
  if (ca && cb) return constant(op == Op::max ? std::max(*ca, *cb) : std::min(*ca, *cb));
  if (a == b) return a;
  if (auto d = as_constant(sub(a, b)))  // a = b + d
    return (op == Op::max) == (*d > 0) ? a : b;
  if (less(b, a)) std::swap(a, b);  // commutative: one order
  return binary_atom(op, a, b);
}
}  // namespace

// Tracing repeats the same few operations on the same expressions (every contiguous
// layout of a shape computes the same strides): each result is remembered per thread,
// keyed by the operation and its operands (interned, so pointers name them exactly).
namespace {
struct OpKey {
  Op op;
  const Expr* a;
  const Expr* b;
  bool operator==(const OpKey&) const = default;
};
struct OpKeyHash {
  size_t operator()(const OpKey& k) const {
    return k.a->hash * 31 + k.b->hash * 7 + static_cast<size_t>(k.op);
  }
};
// A direct-mapped cache: one slot per hash, a collision simply recomputes.
template <typename F>
const Expr* memo(Op op, const Expr* a, const Expr* b, F&& compute) {
  struct Slot {
    OpKey key{Op::constant, nullptr, nullptr};
    const Expr* result = nullptr;
  };
  constexpr size_t kSlots = 4096;
  thread_local std::vector<Slot> cache(kSlots);
  OpKey key{op, a, b};
  Slot& slot = cache[OpKeyHash()(key) % kSlots];
  if (slot.key == key) return slot.result;
  const Expr* r = compute();
  slot = {key, r};
  return r;
}
}  // namespace

const Expr* add(const Expr* a, const Expr* b) {
  return memo(Op::add, a, b, [&] { return add_uncached(a, b); });
}
// subtraction shares add's cache through a distinct tag: Op::symbol is never an operation
const Expr* sub(const Expr* a, const Expr* b) {
  return memo(Op::symbol, a, b, [&] { return sub_uncached(a, b); });
}
const Expr* mul(const Expr* a, const Expr* b) {
  return memo(Op::mul, a, b, [&] { return mul_uncached(a, b); });
}
const Expr* floordiv(const Expr* a, const Expr* b) {
  return memo(Op::floordiv, a, b, [&] { return floordiv_uncached(a, b); });
}
const Expr* mod(const Expr* a, const Expr* b) {
  return memo(Op::mod, a, b, [&] { return mod_uncached(a, b); });
}
const Expr* max(const Expr* a, const Expr* b) {
  return memo(Op::max, a, b, [&] { return extremum(Op::max, a, b); });
}
const Expr* min(const Expr* a, const Expr* b) {
  return memo(Op::min, a, b, [&] { return extremum(Op::min, a, b); });
}

std::optional<int64_t> as_constant(const Expr* e) {
  if (e->op == Op::constant) return e->value;
  return std::nullopt;
}

namespace {
// Precedence: 1 sums, 2 products and divisions, 3 atoms.
int precedence(const Expr* e) {
  if (e->op == Op::add) return 1;
  if (e->op == Op::mul || e->op == Op::floordiv) return 2;
  if (e->op == Op::constant && e->value < 0) return 1;
  return 3;
}
std::string wrap(const Expr* e, int at_least) {
  std::string s = str(e);
  if (precedence(e) < at_least) return fmt::format("({})", s);
  return s;
}
std::string term_str(const Expr* t) {  // without its sign when the coefficient is negative
  if (t->op != Op::mul) return str(t);
  std::string s = t->value == 1 || t->value == -1 ? "" : std::to_string(std::abs(t->value));
  for (const Expr* a : t->args) s += (s.empty() ? "" : "*") + wrap(a, 3);
  return s;
}
}  // namespace

std::string str(const Expr* e) {
  switch (e->op) {
    case Op::constant: return std::to_string(e->value);
    case Op::symbol: return e->name;
    case Op::mul: return (e->value < 0 ? "-" : "") + term_str(e);
    case Op::add: {
      std::string s;
      for (const Expr* t : e->args) {
        bool negative = t->op == Op::mul && t->value < 0;
        if (s.empty())
          s = negative ? "-" : "";
        else
          s += negative ? " - " : " + ";
        s += term_str(t);
      }
      if (e->value) s += (e->value < 0 ? " - " : " + ") + std::to_string(std::abs(e->value));
      return s;
    }
    case Op::floordiv: return wrap(e->args[0], 2) + "//" + wrap(e->args[1], 3);
    case Op::mod: return "Mod(" + str(e->args[0]) + ", " + str(e->args[1]) + ")";
    case Op::max: return "Max(" + str(e->args[0]) + ", " + str(e->args[1]) + ")";
    case Op::min: return "Min(" + str(e->args[0]) + ", " + str(e->args[1]) + ")";
  }
  return "?";
}

namespace {
// Recursive descent over: sum := product (('+'|'-') product)*;
// product := unary (('*'|'//'|'%') unary)*; unary := '-' unary | atom;
// atom := integer | name | name '(' sum ',' sum ')' | '(' sum ')'.
class Parser {
 public:
  Parser(std::string_view text, std::string_view what) : s_(text), what_(what) {}
  const Expr* parse() {
    const Expr* e = sum(0);
    skip();
    if (pos_ != s_.size()) fail_at("unexpected '" + std::string(1, s_[pos_]) + "'");
    return e;
  }

 private:
  static constexpr int kMaxDepth = 64;
  [[noreturn]] void fail_at(const std::string& why) {
    fail(ErrorKind::format, "{}: cannot read the size expression '{}': {} at offset {}", what_, s_,
         why, pos_);
  }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(std::string_view tok) {
    skip();
    if (s_.substr(pos_, tok.size()) != tok) return false;
    pos_ += tok.size();
    return true;
  }
  const Expr* sum(int depth) {
    const Expr* e = product(depth);
    for (;;) {
      if (eat("+"))
        e = add(e, product(depth));
      else if (eat("-"))
        e = sub(e, product(depth));
      else
        return e;
    }
  }
  const Expr* product(int depth) {
    const Expr* e = unary(depth);
    for (;;) {
      if (eat("//"))
        e = checked_div(e, unary(depth), Op::floordiv);
      else if (eat("*"))
        e = mul(e, unary(depth));
      else if (eat("%"))
        e = checked_div(e, unary(depth), Op::mod);
      else
        return e;
    }
  }
  const Expr* checked_div(const Expr* a, const Expr* b, Op op) {
    if (auto c = as_constant(b); c && *c == 0) fail_at("division by zero");
    return op == Op::floordiv ? floordiv(a, b) : mod(a, b);
  }
  const Expr* unary(int depth) {
    if (depth > kMaxDepth) fail_at("nested too deeply");
    if (eat("-")) return sub(constant(0), unary(depth + 1));
    return atom(depth + 1);
  }
  const Expr* atom(int depth) {
    skip();
    if (eat("(")) {
      const Expr* e = sum(depth);
      if (!eat(")")) fail_at("expected ')'");
      return e;
    }
    size_t start = pos_;
    if (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      int64_t v = 0;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_])))
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s_[pos_++] - '0', &v))
          fail_at("integer out of range");
      return constant(v);
    }
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
      ++pos_;
    std::string_view name = s_.substr(start, pos_ - start);
    if (name.empty()) fail_at("expected a number or a symbol");
    if (!eat("(")) return symbol(name);
    const Expr* a = sum(depth);
    if (!eat(",")) fail_at("expected ','");
    const Expr* b = sum(depth);
    if (!eat(")")) fail_at("expected ')'");
    if (name == "Max") return max(a, b);
    if (name == "Min") return min(a, b);
    if (name == "Mod") return checked_div(a, b, Op::mod);
    if (name == "FloorDiv") return checked_div(a, b, Op::floordiv);
    fail_at("unknown function '" + std::string(name) + "'");
  }
  std::string_view s_, what_;
  size_t pos_ = 0;
};
}  // namespace

const Expr* parse(std::string_view text, std::string_view what) {
  return Parser(text, what).parse();
}

std::vector<const Expr*> symbols_of(const Expr* e) {
  std::vector<const Expr*> out;
  std::function<void(const Expr*)> walk = [&](const Expr* x) {
    if (x->op == Op::symbol) {
      if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
      return;
    }
    for (const Expr* a : x->args) walk(a);
  };
  walk(e);
  return out;
}

int64_t eval(const Expr* e, const std::function<int64_t(const Expr*)>& value) {
  switch (e->op) {
    case Op::constant: return e->value;
    case Op::symbol: return value(e);
    case Op::add: {
      int64_t r = e->value;
      for (const Expr* t : e->args) r = add_i(r, eval(t, value));
      return r;
    }
    case Op::mul: {
      int64_t r = e->value;
      for (const Expr* t : e->args) r = mul_i(r, eval(t, value));
      return r;
    }
    case Op::floordiv: return floordiv_i(eval(e->args[0], value), eval(e->args[1], value));
    case Op::mod: {
      int64_t b = eval(e->args[1], value);
      KILN_CHECK(b != 0, shape, "symbolic size: Mod by zero");
      return mod_i(eval(e->args[0], value), b);
    }
    case Op::max: return std::max(eval(e->args[0], value), eval(e->args[1], value));
    case Op::min: return std::min(eval(e->args[0], value), eval(e->args[1], value));
  }
  return 0;
}

const Expr* substitute(const Expr* e, const std::function<const Expr*(const Expr*)>& f) {
  switch (e->op) {
    case Op::constant: return e;
    case Op::symbol: return f(e);
    case Op::add: {
      const Expr* r = constant(e->value);
      for (const Expr* t : e->args) r = add(r, substitute(t, f));
      return r;
    }
    case Op::mul: {
      const Expr* r = constant(e->value);
      for (const Expr* t : e->args) r = mul(r, substitute(t, f));
      return r;
    }
    case Op::floordiv: return floordiv(substitute(e->args[0], f), substitute(e->args[1], f));
    case Op::mod: return mod(substitute(e->args[0], f), substitute(e->args[1], f));
    case Op::max: return max(substitute(e->args[0], f), substitute(e->args[1], f));
    case Op::min: return min(substitute(e->args[0], f), substitute(e->args[1], f));
  }
  return e;
}

namespace {
constexpr int64_t kLo = INT64_MIN, kHi = INT64_MAX;
int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return a > 0 ? kHi : kLo;
}
int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_mul_overflow(a, b, &r)) return r;
  return (a > 0) == (b > 0) ? kHi : kLo;
}
Range times(Range a, Range b) {
  int64_t c[4] = {sat_mul(a.lo, b.lo), sat_mul(a.lo, b.hi), sat_mul(a.hi, b.lo),
                  sat_mul(a.hi, b.hi)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}
}  // namespace

Range range_of(const Expr* e, const std::function<Range(const Expr*)>& range) {
  switch (e->op) {
    case Op::constant: return {e->value, e->value};
    case Op::symbol: return range(e);
    case Op::add: {
      Range r{e->value, e->value};
      for (const Expr* t : e->args) {
        Range x = range_of(t, range);
        r = {sat_add(r.lo, x.lo), sat_add(r.hi, x.hi)};
      }
      return r;
    }
    case Op::mul: {
      Range r{e->value, e->value};
      for (const Expr* t : e->args) r = times(r, range_of(t, range));
      return r;
    }
    case Op::floordiv: {
      Range a = range_of(e->args[0], range), b = range_of(e->args[1], range);
      if (b.lo <= 0) return {kLo, kHi};
      if (a.lo >= 0) return {a.lo / b.hi, a.hi / b.lo};
      return {std::min(floordiv_i(a.lo, b.lo), floordiv_i(a.lo, b.hi)),
              std::max(a.hi / b.lo, a.hi / b.hi)};
    }
    case Op::mod: {
      Range a = range_of(e->args[0], range), b = range_of(e->args[1], range);
      if (b.lo <= 0) return {kLo, kHi};
      if (a.lo >= 0 && a.hi < b.lo) return a;
      return {0, b.hi - 1};
    }
    case Op::max:
    case Op::min: {
      Range a = range_of(e->args[0], range), b = range_of(e->args[1], range);
      if (e->op == Op::max) return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
      return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
    }
  }
  return {kLo, kHi};
}

}  // namespace sym

// ---- SymInt ----------------------------------------------------------------------

SymInt::SymInt(const sym::Expr* e, int64_t hint) : hint_(hint), expr_(e) {
  if (auto c = sym::as_constant(e)) {  // an expression that folded to a number is one
    hint_ = *c;
    expr_ = nullptr;
  }
}

const sym::Expr* SymInt::as_expr() const { return expr_ ? expr_ : sym::constant(hint_); }

int64_t SymInt::guard_int() const {
  if (expr_) detail::specialize(expr_, hint_);
  return hint_;
}

std::string SymInt::str() const { return expr_ ? sym::str(expr_) : std::to_string(hint_); }

namespace {
// The hint arithmetic beside an expression's: the same checked operations.
int64_t hint_of(sym::Op op, int64_t a, int64_t b) {
  switch (op) {
    case sym::Op::add: return sym::add_i(a, b);
    case sym::Op::mul: return sym::mul_i(a, b);
    case sym::Op::floordiv: return sym::floordiv_i(a, b);
    case sym::Op::mod: return sym::mod_i(a, b);
    case sym::Op::max: return std::max(a, b);
    case sym::Op::min: return std::min(a, b);
    default: return 0;
  }
}
}  // namespace

SymInt SymInt::slow(sym::Op op, const SymInt& a, const SymInt& b) {
  int64_t hint = hint_of(op, a.hint_, b.hint_);
  const sym::Expr* x = a.as_expr();
  const sym::Expr* y = b.as_expr();
  switch (op) {
    case sym::Op::add: return {sym::add(x, y), hint};
    case sym::Op::mul: return {sym::mul(x, y), hint};
    case sym::Op::floordiv:
    case sym::Op::mod: {
      // Settled by the ranges where a lies in [0, b) or [b, 2b): Mod(s0 + 1, s0) is 1 when s0 >= 2.
      if (ShapeEnv* env = ShapeEnv::current()) {
        auto nonneg = [&](const sym::Expr* e) { return env->range(e).lo >= 0; };
        const sym::Expr* one = sym::constant(1);
        for (int64_t q : {0, 1}) {
          const sym::Expr* low = sym::sub(x, sym::mul(sym::constant(q), y));  // a - q*b >= 0
          const sym::Expr* high =
              sym::sub(sym::sub(sym::mul(sym::constant(q + 1), y), x), one);  // a < (q+1)*b
          if (nonneg(low) && nonneg(high))
            return op == sym::Op::floordiv ? SymInt(q) : SymInt(low, hint);
        }
      }
      return {op == sym::Op::floordiv ? sym::floordiv(x, y) : sym::mod(x, y), hint};
    }
    case sym::Op::max:
    case sym::Op::min: {
      // Settled by the ranges where the env knows them: Max(s0, 1) is s0 when s0 >= 1.
      if (ShapeEnv* env = ShapeEnv::current()) {
        sym::Range d = env->range(sym::sub(x, y));
        if (d.lo >= 0) return op == sym::Op::max ? a : b;
        if (d.hi <= 0) return op == sym::Op::max ? b : a;
      }
      return {op == sym::Op::max ? sym::max(x, y) : sym::min(x, y), hint};
    }
    default: break;
  }
  return {};
}

SymInt SymInt::slow_sub(const SymInt& a, const SymInt& b) {
  int64_t hint;
  KILN_CHECK(!__builtin_sub_overflow(a.hint_, b.hint_, &hint), shape,
             "symbolic size arithmetic overflows int64");
  return {sym::sub(a.as_expr(), b.as_expr()), hint};
}

// Integers stay integers (hint_of is their arithmetic); an expression takes slow().
#define KILN_SYM_BINARY(name, op)                                                               \
  SymInt name(const SymInt& a, const SymInt& b) {                                               \
    return a.expr_ || b.expr_ ? SymInt::slow(op, a, b) : SymInt(hint_of(op, a.hint_, b.hint_)); \
  }
KILN_SYM_BINARY(floordiv, sym::Op::floordiv)
KILN_SYM_BINARY(mod, sym::Op::mod)
KILN_SYM_BINARY(sym_max, sym::Op::max)
KILN_SYM_BINARY(sym_min, sym::Op::min)
#undef KILN_SYM_BINARY

namespace {
bool holds(Rel rel, int64_t a, int64_t b) {
  switch (rel) {
    case Rel::eq: return a == b;
    case Rel::ne: return a != b;
    case Rel::lt: return a < b;
    case Rel::le: return a <= b;
  }
  return false;
}
}  // namespace

bool SymInt::compare(Rel rel, const SymInt& a, const SymInt& b) {
  if (ShapeEnv* env = ShapeEnv::current()) return env->decide(rel, a, b);
  // Outside a trace (a pass reading a program's sizes): the same expression is equal;
  // anything else compares by the example values.
  if (a.expr_ == b.expr_) return holds(rel, 0, 0);
  return holds(rel, a.hint_, b.hint_);
}

std::string_view to_string(Rel rel) {
  switch (rel) {
    case Rel::eq: return "==";
    case Rel::ne: return "!=";
    case Rel::lt: return "<";
    case Rel::le: return "<=";
  }
  return "?";
}

std::string Guard::str() const {
  return sym::str(lhs) + " " + std::string(to_string(rel)) + " " + sym::str(rhs);
}

// ---- ShapeEnv --------------------------------------------------------------------

namespace {
thread_local ShapeEnv* t_env = nullptr;
}

ShapeEnv* ShapeEnv::current() { return t_env; }

ShapeEnvGuard::ShapeEnvGuard(ShapeEnv* env) : prev_(t_env) { t_env = env; }
ShapeEnvGuard::~ShapeEnvGuard() { t_env = prev_; }

SymInt ShapeEnv::new_symbol(int64_t hint, int64_t min, int64_t max, std::string source,
                            std::string dim_name, bool automatic) {
  const sym::Expr* e = sym::symbol("s" + std::to_string(symbols_.size()));
  symbols_.push_back({e, min, max, hint, std::move(dim_name), std::move(source), automatic});
  ranges_.clear();
  return {e, hint};
}

SymInt ShapeEnv::new_unbacked(int64_t min, int64_t max, std::string source) {
  int index = 0;
  for (const SymbolInfo& s : symbols_) index += s.unbacked;
  const sym::Expr* e = sym::symbol("u" + std::to_string(index));
  // A placeholder hint, as PyTorch's size-oblivious reasoning takes sizes >= 2: no decision
  // reads it (decide refuses what ranges cannot settle).
  int64_t hint = std::clamp<int64_t>(2, min, max);
  SymbolInfo info{e, min, max, hint, "", std::move(source), false};
  info.unbacked = true;
  symbols_.push_back(std::move(info));
  ranges_.clear();
  return {e, hint};
}

void ShapeEnv::assume(Rel rel, const SymInt& a, const SymInt& b) {
  Guard g{rel, a.as_expr(), b.as_expr(), {}, {}};
  const char* user_op = current_user_op();
  g.op = current_op_.empty() ? (user_op ? user_op : "user code") : std::string(current_op_);
  if (scope_provider) g.scope = scope_provider();
  // A symbol against a constant narrows the symbol's range.
  const sym::Expr* d = sym::sub(a.as_expr(), b.as_expr());  // d rel 0
  std::vector<const sym::Expr*> syms = sym::symbols_of(d);
  if (syms.size() == 1) {
    auto at = [&](int64_t v) { return sym::eval(d, [&](const sym::Expr*) { return v; }); };
    int64_t c0 = at(0), k = at(1) - c0;
    bool linear = sym::eval(d, [&](const sym::Expr*) { return int64_t{2}; }) == c0 + 2 * k;
    for (SymbolInfo& s : symbols_)
      if (linear && (k == 1 || k == -1) && s.expr == syms[0]) {
        // k*x + c0 rel 0
        int64_t bound = -c0 * k;  // x (k = 1) or -x (k = -1) against it
        int64_t strict = rel == Rel::lt ? 1 : 0;
        if (rel == Rel::eq) {
          s.min = std::max(s.min, bound);
          s.max = std::min(s.max, bound);
        } else if (rel == Rel::lt || rel == Rel::le) {
          if (k == 1)
            s.max = std::min(s.max, bound - strict);  // x <= -c0 (- 1)
          else
            s.min = std::max(s.min, c0 + strict);  // -x + c0 <= 0: x >= c0 (+ 1)
        }
      }
  }
  ranges_.clear();
  for (const Guard& old : guards_)
    if (old.rel == g.rel && old.lhs == g.lhs && old.rhs == g.rhs) return;
  guards_.push_back(std::move(g));
}

bool data_dependent_size(const SymInt& n) {
  if (!n.is_symbolic()) return false;
  if (ShapeEnv* env = ShapeEnv::current())
    for (const sym::Expr* s : sym::symbols_of(n.expr()))
      if (const SymbolInfo* info = env->find(s); info && info->unbacked) return true;
  return false;
}

bool empty_special_case(const SymInt& n) {
  if (!n.is_symbolic()) return n.hint() == 0;
  if (data_dependent_size(n)) return false;
  return n == 0;
}

void check_size(const SymInt& a, Rel rel, const SymInt& b) {
  if (!a.is_symbolic() && !b.is_symbolic()) {
    KILN_CHECK(holds(rel, a.hint(), b.hint()), value, "[check_size] {} {} {} does not hold",
               a.hint(), to_string(rel), b.hint());
    return;
  }
  ShapeEnv* env = ShapeEnv::current();
  KILN_CHECK(env, value, "[check_size] {} {} {}: symbolic sizes outside a trace", a.str(),
             to_string(rel), b.str());
  env->assume(rel, a, b);
}

const SymbolInfo* ShapeEnv::find(const sym::Expr* symbol) const {
  for (const SymbolInfo& s : symbols_)
    if (s.expr == symbol) return &s;
  return nullptr;
}

sym::Range ShapeEnv::range(const sym::Expr* e) const {
  if (auto it = ranges_.find(e); it != ranges_.end()) return it->second;
  sym::Range r = sym::range_of(e, [&](const sym::Expr* s) -> sym::Range {
    const SymbolInfo* info = find(s);
    return info ? sym::Range{info->min, info->max} : sym::Range{INT64_MIN, INT64_MAX};
  });
  ranges_.emplace(e, r);
  return r;
}

bool ShapeEnv::decide(Rel rel, const SymInt& a, const SymInt& b) {
  const sym::Expr* d = sym::sub(a.as_expr(), b.as_expr());  // decide d rel 0
  sym::Range r = range(d);
  switch (rel) {  // settled by the ranges: no guard
    case Rel::eq:
    case Rel::ne:
      if (r.lo == 0 && r.hi == 0) return rel == Rel::eq;
      if (r.lo > 0 || r.hi < 0) return rel == Rel::ne;
      break;
    case Rel::lt:
      if (r.hi < 0) return true;
      if (r.lo >= 0) return false;
      break;
    case Rel::le:
      if (r.hi <= 0) return true;
      if (r.lo > 0) return false;
      break;
  }
  for (const sym::Expr* s : sym::symbols_of(d))
    if (const SymbolInfo* info = find(s); info && info->unbacked) {
      const char* user_op = current_user_op();
      std::string op =
          current_op_.empty() ? (user_op ? user_op : "user code") : std::string(current_op_);
      std::string scope = scope_provider ? scope_provider() : "";
      fail(ErrorKind::data_dependent,
           "[{}] cannot decide {} {} {}{}: {} is a data-dependent size ({}, in [{}, {}]) and "
           "its range does not settle it; state what holds with check_size (a runtime "
           "assertion, as torch._check), or compute without branching on it",
           op, a.str(), to_string(rel), b.str(), scope.empty() ? "" : " at " + scope, sym::str(s),
           info->source, info->min, info->max);
    }
  bool result = holds(rel, a.hint(), b.hint());
  // Record what held: `a rel b`, or its negation.
  Guard g{rel, a.as_expr(), b.as_expr(), {}, {}};
  if (!result) {
    switch (rel) {
      case Rel::eq: g.rel = Rel::ne; break;
      case Rel::ne: g.rel = Rel::eq; break;
      case Rel::lt: g = {Rel::le, b.as_expr(), a.as_expr(), {}, {}}; break;
      case Rel::le: g = {Rel::lt, b.as_expr(), a.as_expr(), {}, {}}; break;
    }
  }
  for (const Guard& old : guards_)
    if (old.rel == g.rel && old.lhs == g.lhs && old.rhs == g.rhs) return result;
  // Who asked: the op whose meta function runs, inside the composite the user called.
  const char* user_op = current_user_op();
  g.op = current_op_.empty() ? (user_op ? user_op : "user code") : std::string(current_op_);
  if (user_op && g.op != user_op) g.op += fmt::format(" (in {})", user_op);
  if (scope_provider) g.scope = scope_provider();
  guards_.push_back(std::move(g));
  return result;
}

namespace detail {
void specialize(const sym::Expr* e, int64_t hint) {
  if (ShapeEnv* env = ShapeEnv::current()) env->decide(Rel::eq, SymInt(e, hint), SymInt(hint));
}
}  // namespace detail

// ---- symbolic shapes ---------------------------------------------------------------

SymInt sym_numel(const Dims& shape) {
  SymInt n = 1;
  for (size_t i = 0; i < shape.size(); ++i) n = n * shape.sym(i);
  return n;
}

void symbolic_strides_into(const Dims& shape, Dims& st) {
  st.clear();
  st.resize(shape.size());
  SymInt acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st.set(i, acc);
    acc = acc * sym_max(shape.sym(i), 1);
  }
}

}  // namespace kiln

// Dynamic shapes in programs: declaring dims at export (Y1), settling guards into
// ranges or constraint errors (Y2), and binding symbols before a run (Y4).
#include "kiln/trace/dynamic.h"

#include <algorithm>

#include "kiln/api/functional.h"

namespace kiln {

int ShapeSpec::index_of(const sym::Expr* symbol) const {
  for (size_t i = 0; i < symbols.size(); ++i)
    if (symbols[i].expr == symbol) return static_cast<int>(i);
  return -1;
}

std::string ShapeSpec::str() const {
  std::string s;
  for (const SymbolInfo& x : symbols) {
    s += fmt::format("{} in [{}, {}]", sym::str(x.expr), x.min, x.max);
    if (!x.dim_name.empty() || !x.source.empty())
      s += fmt::format(" ({}{}{})", x.dim_name, x.dim_name.empty() || x.source.empty() ? "" : ": ",
                       x.source);
    s += "\n";
  }
  for (const Guard& g : guards)
    s +=
        fmt::format("guard: {}  ({}{}{})\n", g.str(), g.op, g.scope.empty() ? "" : " at ", g.scope);
  return s;
}

namespace {

// A symbol's value in a binding (values in symbol order).
int64_t value_in(const ShapeSpec& shapes, const std::vector<int64_t>& binding, const sym::Expr* s) {
  int i = shapes.index_of(s);
  KILN_CHECK(i >= 0 && static_cast<size_t>(i) < binding.size(), format,
             "[run] the program uses symbol {} but does not declare it", sym::str(s));
  return binding[static_cast<size_t>(i)];
}

// Nothing when guard `g` holds at `binding`; else its symbols' values ("s0 = 3, u0 = 7"),
// each symbol named by `name`.
template <typename Name>
std::optional<std::string> broken(const ShapeSpec& shapes, const std::vector<int64_t>& binding,
                                  const Guard& g, Name name) {
  auto eval = [&](const sym::Expr* e) {
    return sym::eval(e, [&](const sym::Expr* s) { return value_in(shapes, binding, s); });
  };
  int64_t l = eval(g.lhs), r = eval(g.rhs);
  bool ok = g.rel == Rel::eq   ? l == r
            : g.rel == Rel::ne ? l != r
            : g.rel == Rel::lt ? l < r
                               : l <= r;
  if (ok) return std::nullopt;
  std::string values;
  for (const sym::Expr* s : sym::symbols_of(sym::sub(g.lhs, g.rhs)))
    values +=
        fmt::format("{}{} = {}", values.empty() ? "" : ", ", name(s), value_in(shapes, binding, s));
  return values;
}

Dims evaluate_dims(const Dims& d, const ShapeSpec& shapes, const std::vector<int64_t>& binding) {
  if (!d.is_symbolic()) return d;
  Dims out(d.size());
  for (size_t i = 0; i < d.size(); ++i) {
    SymInt s = d.sym(i);
    out[i] =
        s.is_symbolic()
            ? sym::eval(s.expr(), [&](const sym::Expr* x) { return value_in(shapes, binding, x); })
            : s.hint();
  }
  return out;
}

// `e` as a*s + b for its one symbol s, if it is linear in it.
struct Linear {
  const sym::Expr* symbol;
  int64_t a, b;
};
std::optional<Linear> linear(const sym::Expr* e) {
  std::vector<const sym::Expr*> syms = sym::symbols_of(e);
  if (syms.size() != 1) return std::nullopt;
  auto at = [&](int64_t v) { return sym::eval(e, [&](const sym::Expr*) { return v; }); };
  // Exactly linear when the expression is a sum of integer multiples of the symbol.
  std::function<bool(const sym::Expr*)> affine = [&](const sym::Expr* x) {
    switch (x->op) {
      case sym::Op::constant:
      case sym::Op::symbol: return true;
      case sym::Op::mul: return x->args.size() == 1 && x->args[0]->op == sym::Op::symbol;
      case sym::Op::add: return std::all_of(x->args.begin(), x->args.end(), affine);
      default: return false;
    }
  };
  if (!affine(e)) return std::nullopt;
  int64_t b = at(0);
  return Linear{syms[0], at(1) - b, b};
}

int64_t floor_div(int64_t a, int64_t b) { return sym::floordiv_i(a, b); }

}  // namespace

ir::ValueMeta evaluate(const ir::ValueMeta& meta, const ShapeSpec& shapes,
                       const std::vector<int64_t>& binding) {
  ir::ValueMeta m = meta;
  m.shape = evaluate_dims(meta.shape, shapes, binding);
  m.strides = evaluate_dims(meta.strides, shapes, binding);
  if (meta.offset.is_symbolic())
    m.offset = sym::eval(meta.offset.expr(),
                         [&](const sym::Expr* x) { return value_in(shapes, binding, x); });
  return m;
}

// ---- binding (Y4) -----------------------------------------------------------------

std::vector<int64_t> bind_symbols(
    const ShapeSpec& shapes, const std::vector<std::pair<std::string, const ir::ValueMeta*>>& metas,
    const TensorList& user_inputs) {
  if (shapes.empty()) return {};
  KILN_CHECK(user_inputs.size() == metas.size(), value,
             "[run] the program takes {} user inputs, got {}", metas.size(), user_inputs.size());
  std::vector<std::optional<int64_t>> value(shapes.symbols.size());
  auto where = [&](size_t i, size_t d) { return fmt::format("{}.shape[{}]", metas[i].first, d); };
  auto describe = [&](const sym::Expr* s) {
    const SymbolInfo& info = shapes.symbols[static_cast<size_t>(shapes.index_of(s))];
    return info.dim_name.empty() ? sym::str(s)
                                 : fmt::format("{} ('{}')", sym::str(s), info.dim_name);
  };
  // Rank and dtype first, then the dims that are one symbol bind it (a repeated symbol
  // must agree), then derived dims bind what only they name (k*s + c solved for s).
  for (size_t i = 0; i < metas.size(); ++i) {
    const Tensor& u = user_inputs[i];
    const ir::ValueMeta& m = *metas[i].second;
    KILN_CHECK(u.defined(), value, "[run] input '{}' expects {}, got an undefined tensor",
               metas[i].first, m.str());
    KILN_CHECK(u.dim() == static_cast<int64_t>(m.shape.size()) && u.dtype() == m.dtype, value,
               "[run] input '{}' expects {}, got {}", metas[i].first, m.str(),
               ir::ValueMeta::of(u).str());
  }
  std::vector<std::tuple<size_t, size_t, const sym::Expr*>> derived;
  for (size_t i = 0; i < metas.size(); ++i) {
    const Dims& want = metas[i].second->shape;
    for (size_t d = 0; d < want.size(); ++d) {
      SymInt w = want.sym(d);
      int64_t got = user_inputs[i].shape().hint(d);
      if (!w.is_symbolic()) {
        KILN_CHECK(got == w.hint(), shape,
                   "[run] {} is {}, but the program has it static at {} (input {} expects {})",
                   where(i, d), got, w.hint(), metas[i].first, metas[i].second->str());
        continue;
      }
      if (w.expr()->op != sym::Op::symbol) {
        derived.emplace_back(i, d, w.expr());
        continue;
      }
      int k = shapes.index_of(w.expr());
      KILN_CHECK(k >= 0, format, "[run] {} uses symbol {}, which the program does not declare",
                 where(i, d), sym::str(w.expr()));
      auto& v = value[static_cast<size_t>(k)];
      KILN_CHECK(!v || *v == got, shape,
                 "[run] {} is {}, but symbol {} is already {} from another dim of the inputs",
                 where(i, d), got, describe(w.expr()), *v);
      v = got;
    }
  }
  for (bool progress = true; progress;) {
    progress = false;
    for (auto& [i, d, e] : derived) {
      if (!e) continue;
      int64_t got = user_inputs[i].shape().hint(d);
      std::vector<const sym::Expr*> unbound;
      for (const sym::Expr* s : sym::symbols_of(e))
        if (int k = shapes.index_of(s); k < 0 || !value[static_cast<size_t>(k)])
          unbound.push_back(s);
      if (unbound.size() == 1) {
        std::optional<Linear> l = linear(e);
        if (!l) continue;
        KILN_CHECK(l->a != 0 && (got - l->b) % l->a == 0, shape,
                   "[run] {} is {}, which is not {} for any integer {}", where(i, d), got,
                   sym::str(e), describe(l->symbol));
        value[static_cast<size_t>(shapes.index_of(l->symbol))] = (got - l->b) / l->a;
        progress = true;
      }
      if (!unbound.empty() && unbound.size() != 1) continue;
      int64_t expect = sym::eval(
          e, [&](const sym::Expr* s) { return *value[static_cast<size_t>(shapes.index_of(s))]; });
      KILN_CHECK(expect == got, shape, "[run] {} is {}, but the program needs it to be {} = {}",
                 where(i, d), got, sym::str(e), expect);
      e = nullptr;
      progress = true;
    }
  }
  std::vector<int64_t> binding(value.size());
  for (size_t k = 0; k < value.size(); ++k) {
    const SymbolInfo& s = shapes.symbols[k];
    if (s.unbacked) {  // (Y3) bound by the node that makes it, during the run
      binding[k] = kUnbound;
      continue;
    }
    KILN_CHECK(value[k].has_value(), shape, "[run] symbol {} ({}) is not fixed by any input size",
               sym::str(s.expr), s.source);
    binding[k] = *value[k];
    KILN_CHECK(binding[k] >= s.min && binding[k] <= s.max, shape,
               "[run] {} is {}, outside the range [{}, {}] of {} the program was exported for",
               s.source, binding[k], s.min, s.max, describe(s.expr));
  }
  for (const Guard& g : shapes.guards) {
    if (!all_bound(shapes, binding, g)) continue;  // (Y3) checked once its sizes are known
    std::optional<std::string> values = broken(shapes, binding, g, describe);
    if (!values) continue;
    fail(ErrorKind::shape,
         "[run] these input sizes ({}) break the guard {} that {}{}{} recorded when the program "
         "was traced",
         *values, g.str(), g.op, g.scope.empty() ? "" : " at ", g.scope);
  }
  return binding;
}

bool all_bound(const ShapeSpec& shapes, const std::vector<int64_t>& binding, const Guard& g) {
  for (const sym::Expr* s : sym::symbols_of(sym::sub(g.lhs, g.rhs)))
    if (int k = shapes.index_of(s); k >= 0 && binding[static_cast<size_t>(k)] == kUnbound)
      return false;
  return true;
}

void check_assertions_of(const ShapeSpec& shapes, const std::vector<int64_t>& binding,
                         size_t symbol) {
  const sym::Expr* bound = shapes.symbols[symbol].expr;
  for (const Guard& g : shapes.guards) {
    std::vector<const sym::Expr*> used = sym::symbols_of(sym::sub(g.lhs, g.rhs));
    if (std::find(used.begin(), used.end(), bound) == used.end() || !all_bound(shapes, binding, g))
      continue;
    std::optional<std::string> values =
        broken(shapes, binding, g, [](const sym::Expr* s) { return sym::str(s); });
    if (!values) continue;
    fail(ErrorKind::value,
         "[run] the data gave {}, which breaks the assertion {} that {}{}{} stated when the "
         "program was traced",
         *values, g.str(), g.op, g.scope.empty() ? "" : " at ", g.scope);
  }
}

// ---- export (Y1, Y2) ---------------------------------------------------------------

namespace detail {

void declare_dynamic_dims(ShapeEnv& env, TensorList& fakes, const TensorList& examples,
                          const std::vector<InputDims>& dims) {
  ShapeEnvGuard active(&env);  // the input strides simplify with the declared ranges
  KILN_CHECK(dims.size() <= fakes.size(), value,
             "[export] dynamic_shapes has {} entries for {} user inputs", dims.size(),
             fakes.size());
  std::map<std::string, SymInt> by_name;
  // Named dims first (each name one symbol), then derived ones over them.
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < dims.size(); ++i) {
      Tensor& t = fakes[i];
      Dims shape = t.shape();
      for (const auto& [d0, dim] : dims[i]) {
        if (dim.is_derived() != (pass == 1)) continue;
        int64_t d = wrap_dim(d0, t.dim(), "export");
        int64_t size = examples[i].size(d);
        std::string source = fmt::format("input_{}.shape[{}]", i, d);
        KILN_CHECK(dim.min <= dim.max && dim.min >= 0, value,
                   "[export] Dim '{}' has the empty range [{}, {}]", dim.name, dim.min, dim.max);
        SymInt s;
        if (!dim.is_derived()) {
          KILN_CHECK(size >= dim.min && size <= dim.max, value,
                     "[export] {} is {} in the example, outside the range [{}, {}] of Dim '{}'",
                     source, size, dim.min, dim.max, dim.name);
          auto it = dim.name.empty() ? by_name.end() : by_name.find(dim.name);
          if (it != by_name.end()) {
            KILN_CHECK(it->second.hint() == size, value,
                       "[export] Dim '{}' is {} at {} but {} elsewhere in the example inputs",
                       dim.name, size, source, it->second.hint());
            s = it->second;
          } else {
            s = env.new_symbol(size, dim.min, dim.max, source, dim.name, dim.automatic);
            if (!dim.name.empty()) by_name[dim.name] = s;
          }
        } else {
          KILN_CHECK(dim.coeff > 0, value,
                     "[export] a derived Dim needs a positive multiplier, got {}", dim.coeff);
          auto it = by_name.find(dim.root);
          SymInt root;
          if (it != by_name.end()) {
            root = it->second;
          } else {
            KILN_CHECK(
                (size - dim.offset) % dim.coeff == 0, value,
                "[export] {} is {} in the example, which is not {}*{} + {} for an integer {}",
                source, size, dim.coeff, dim.root, dim.offset, dim.root);
            int64_t hint = (size - dim.offset) / dim.coeff;
            KILN_CHECK(hint >= dim.min && hint <= dim.max, value,
                       "[export] {} = {} makes Dim '{}' {}, outside its range [{}, {}]", source,
                       size, dim.root, hint, dim.min, dim.max);
            root = env.new_symbol(
                hint, dim.min, dim.max,
                fmt::format("{} = {}*{} + {}", source, dim.coeff, dim.root, dim.offset), dim.root);
            by_name[dim.root] = root;
          }
          s = SymInt(dim.coeff) * root + SymInt(dim.offset);
          KILN_CHECK(s.hint() == size, value,
                     "[export] {} is {} in the example, but {}*{} + {} is {}", source, size,
                     dim.coeff, dim.root, dim.offset, s.hint());
        }
        shape.set(static_cast<size_t>(d), s);
      }
      if (!shape.is_symbolic()) continue;
      // The fake input gets the symbolic shape and contiguous strides over it.
      TensorImpl* impl = t.impl();
      impl->shape = shape;
      symbolic_strides_into(impl->shape, impl->strides);
    }
}

namespace {

std::string dim_label(const SymbolInfo& s) {
  return s.dim_name.empty() ? fmt::format("{} ({})", sym::str(s.expr), s.source)
                            : fmt::format("Dim '{}' ({})", s.dim_name, s.source);
}

// The range a linear guard leaves its symbol: [lo, hi], or `equal` for a specialization.
struct Effect {
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  std::optional<int64_t> equal, excluded;
};
std::optional<Effect> effect_of(const Guard& g, const Linear& l) {
  // The guard as a*s + b rel 0.
  Effect e;
  int64_t a = l.a, b = l.b;
  switch (g.rel) {
    case Rel::eq:
    case Rel::ne:
      if (a == 0 || (-b) % a != 0) return std::nullopt;
      (g.rel == Rel::eq ? e.equal : e.excluded) = -b / a;
      return e;
    case Rel::lt: b += 1; [[fallthrough]];  // a*s + b < 0  <=>  a*s + b + 1 <= 0
    case Rel::le:
      if (a > 0)
        e.hi = floor_div(-b, a);
      else if (a < 0)
        e.lo = -floor_div(-b, -a);  // s >= ceil(b / -a)
      else
        return std::nullopt;
      return e;
  }
  return std::nullopt;
}

}  // namespace

ShapeSpec settle_shapes(const ShapeEnv& env) {
  ShapeSpec spec;
  spec.symbols = env.symbols();
  std::vector<std::string> violations;
  auto info_of = [&](const sym::Expr* s) -> SymbolInfo& {
    return spec.symbols[static_cast<size_t>(spec.index_of(s))];
  };
  for (const Guard& g : env.guards()) {
    spec.guards.push_back(g);
    const sym::Expr* d = sym::sub(g.lhs, g.rhs);
    std::vector<const sym::Expr*> syms = sym::symbols_of(d);
    std::vector<const sym::Expr*> named;
    for (const sym::Expr* s : syms)
      if (spec.index_of(s) >= 0 && !info_of(s).automatic && !info_of(s).unbacked)
        named.push_back(s);  // (Y3) facts about unbacked sizes are runtime assertions
    std::string who = fmt::format("{}{}{}", g.op, g.scope.empty() ? "" : " at ", g.scope);
    std::optional<Linear> l = linear(d);
    std::optional<Effect> effect = l ? effect_of(g, *l) : std::nullopt;
    if (named.empty()) {  // automatic dims take what the trace needs
      if (effect) {
        SymbolInfo& s = info_of(l->symbol);
        if (effect->equal) s.min = s.max = *effect->equal;
        if (effect->excluded && *effect->excluded == s.min) ++s.min;
        if (effect->excluded && *effect->excluded == s.max) --s.max;
        s.min = std::max(s.min, effect->lo);
        s.max = std::min(s.max, effect->hi);
      }
      continue;
    }
    const SymbolInfo& first = info_of(named[0]);
    std::string name = first.dim_name.empty() ? sym::str(first.expr) : first.dim_name;
    if (named.size() == 1 && effect) {
      if (effect->equal) {
        violations.push_back(
            fmt::format("{} must be {}: {} requires {}. Fix: make it static ({} = {})",
                        dim_label(first), *effect->equal, who, g.str(), name, *effect->equal));
        continue;
      }
      int64_t lo = first.min, hi = first.max;
      if (effect->excluded && *effect->excluded == lo)
        ++lo;
      else if (effect->excluded && *effect->excluded == hi)
        --hi;
      else if (effect->excluded) {
        violations.push_back(fmt::format(
            "{} must not be {}: {} requires {}. Fix: change the model; no range excludes "
            "one value",
            dim_label(first), *effect->excluded, who, g.str()));
        continue;
      }
      lo = std::max(lo, effect->lo);
      hi = std::min(hi, effect->hi);
      if (lo == first.min && hi == first.max) continue;  // implied by the declared range
      violations.push_back(fmt::format(
          "{} must lie in [{}, {}], narrower than its declared [{}, {}]: {} requires {}. "
          "Fix: Dim(\"{}\", {}, {})",
          dim_label(first), lo, hi, first.min, first.max, who, g.str(), name, lo, hi));
      continue;
    }
    if (named.size() == 2 && g.rel == Rel::eq) {
      // k*a + c == b (or the other way round): suggest the second as derived from the first.
      const SymbolInfo& second = info_of(named[1]);
      std::string name2 = second.dim_name.empty() ? sym::str(second.expr) : second.dim_name;
      std::string fix;
      const sym::Expr* solved = nullptr;
      auto coeff = [&](const sym::Expr* s, int64_t v) {
        return sym::eval(d, [&](const sym::Expr* x) { return x == s ? v : 0; });
      };
      int64_t c = coeff(named[0], 0), ka = coeff(named[0], 1) - c, kb = coeff(named[1], 1) - c;
      if (syms.size() == 2 && kb != 0 && ka % kb == 0 &&
          c % kb == 0)  // ka*a + kb*b + c == 0: b = -(ka*a + c)/kb
        solved =
            sym::add(sym::mul(sym::constant(-ka / kb), sym::symbol(name)), sym::constant(-c / kb));
      fix = solved ? fmt::format("{} = {}", name2, sym::str(solved))
                   : "declare one of them derived from the other";
      violations.push_back(fmt::format("{} and {} are related: {} requires {}. Fix: {}",
                                       dim_label(first), dim_label(second), who, g.str(), fix));
      continue;
    }
    if (named.size() == 1 && g.rel == Rel::eq && d->op == sym::Op::mod) {
      auto k = sym::as_constant(d->args[1]);
      violations.push_back(fmt::format(
          "{} must be a multiple of {}: {} requires {}. Fix: _{} = Dim(\"_{}\"); {} = {}*_{}",
          dim_label(first), k ? std::to_string(*k) : sym::str(d->args[1]), who, g.str(), name, name,
          name, k ? std::to_string(*k) : "k", name));
      continue;
    }
    violations.push_back(
        fmt::format("{} is constrained: {} requires {}. Fix: change the model or declare the dim "
                    "automatic (Dim::automatic_dim())",
                    dim_label(first), who, g.str()));
  }
  if (!violations.empty()) {
    std::string msg = "[export] the dynamic dims declared do not hold for this model:";
    for (const std::string& v : violations) msg += "\n  - " + v;
    throw Error(ErrorKind::constraint, msg);
  }
  return spec;
}

}  // namespace detail

}  // namespace kiln

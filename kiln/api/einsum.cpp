// einsum: the equation parsed into integer labels per operand dim, each operand reduced
// on its own first (repeated labels to diagonals, labels no one else needs summed), then
// the operands contracted left to right, each pair as one bmm over
// [shared kept labels] x [this operand's] x [summed labels].
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "kiln/api/functional.h"

namespace kiln {
namespace {

using Labels = std::vector<int>;  // one per dim: 0-51 for a-z A-Z, 52+ for ellipsis dims

constexpr int kEllipsisBase = 52;

int label_of(char ch) {
  if (ch >= 'a' && ch <= 'z') return ch - 'a';
  if (ch >= 'A' && ch <= 'Z') return 26 + (ch - 'A');
  fail(ErrorKind::value, "[einsum] invalid subscript '{}': subscripts are letters a-z and A-Z", ch);
}

char char_of(int label) { return static_cast<char>(label < 26 ? 'a' + label : 'A' + (label - 26)); }

// One side of the equation: its letters, and where "..." stood (-1: none).
struct Term {
  Labels letters;
  int ellipsis_at = -1;
};

Term parse_term(std::string_view s) {
  Term t;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == ' ') continue;
    if (s[i] == '.') {
      KILN_CHECK(s.substr(i, 3) == "..." && t.ellipsis_at < 0, value,
                 "[einsum] malformed ellipsis in '{}': use one '...' per operand", s);
      t.ellipsis_at = static_cast<int>(t.letters.size());
      i += 2;
      continue;
    }
    t.letters.push_back(label_of(s[i]));
  }
  return t;
}

// A term's labels for `rank` dims, ellipsis dims numbered from the right (so they
// broadcast as trailing-aligned dims do), `ellipsis_rank` of them in all.
Labels expand_term(const Term& t, int64_t rank, int64_t ellipsis_rank) {
  if (t.ellipsis_at < 0) return t.letters;
  Labels out(t.letters.begin(), t.letters.begin() + t.ellipsis_at);
  int64_t n = rank - static_cast<int64_t>(t.letters.size());
  for (int64_t i = 0; i < n; ++i)
    out.push_back(kEllipsisBase + static_cast<int>(ellipsis_rank - n + i));
  out.insert(out.end(), t.letters.begin() + t.ellipsis_at, t.letters.end());
  return out;
}

struct Operand {
  Tensor t;
  Labels labels;
};

int64_t find(const Labels& l, int label) {
  return std::find(l.begin(), l.end(), label) - l.begin();
}

// Repeated labels become one diagonal dim (moved last, as diagonal does).
void take_diagonals(Operand& op) {
  for (size_t i = 0; i < op.labels.size(); ++i)
    for (size_t j = i + 1; j < op.labels.size(); ++j)
      if (op.labels[i] == op.labels[j]) {
        int label = op.labels[i];
        KILN_CHECK(op.t.size(static_cast<int64_t>(i)) == op.t.size(static_cast<int64_t>(j)), shape,
                   "[einsum] subscript '{}' is repeated in an operand for dims of sizes {} and {}",
                   char_of(label), op.t.size(static_cast<int64_t>(i)),
                   op.t.size(static_cast<int64_t>(j)));
        op.t = diagonal(op.t, 0, static_cast<int64_t>(i), static_cast<int64_t>(j));
        op.labels.erase(op.labels.begin() + static_cast<int64_t>(j));
        op.labels.erase(op.labels.begin() + static_cast<int64_t>(i));
        op.labels.push_back(label);
        return take_diagonals(op);
      }
}

// Sums the dims whose labels `keep` does not hold.
void sum_unneeded(Operand& op, const std::vector<bool>& keep) {
  IntList dims;
  Labels kept;
  for (size_t i = 0; i < op.labels.size(); ++i) {
    if (keep[static_cast<size_t>(op.labels[i])])
      kept.push_back(op.labels[i]);
    else
      dims.push_back(static_cast<int64_t>(i));
  }
  if (dims.empty()) return;
  op.t = sum(op.t, dims);
  op.labels = std::move(kept);
}

// a and b contracted over the labels both hold that `keep` does not: one bmm.
Operand contract(Operand a, Operand b, const std::vector<bool>& keep) {
  Labels batch, a_only, b_only, summed;
  for (int l : a.labels) {
    bool shared = find(b.labels, l) < static_cast<int64_t>(b.labels.size());
    (shared ? (keep[static_cast<size_t>(l)] ? batch : summed) : a_only).push_back(l);
  }
  for (int l : b.labels)
    if (find(a.labels, l) == static_cast<int64_t>(a.labels.size())) b_only.push_back(l);
  // Shared labels broadcast: a size-1 side is expanded to the other's size. (Y1) Sizes stay
  // as they are, symbolic ones included, so a dynamic batch adds no guard.
  std::map<int, SymInt> size;
  auto is_one = [](const SymInt& v) { return !v.is_symbolic() && v.hint() == 1; };
  for (Operand* op : {&a, &b})
    for (size_t i = 0; i < op->labels.size(); ++i) {
      SymInt s = op->t.shape().sym(i);
      auto [it, fresh] = size.emplace(op->labels[i], s);
      if (fresh || it->second == s) continue;
      KILN_CHECK(
          is_one(it->second) || is_one(s), shape,
          "[einsum] subscript '{}' has sizes {} and {} in two operands, which do not broadcast",
          op->labels[i] >= kEllipsisBase ? '.' : char_of(op->labels[i]), it->second.hint(),
          s.hint());
      if (is_one(it->second)) it->second = s;
    }
  auto dims_of = [](const std::vector<SymInt>& v) {
    Dims d(v.size());
    for (size_t i = 0; i < v.size(); ++i) d.set(i, v[i]);
    return d;
  };
  auto arrange = [&](const Operand& op, std::initializer_list<const Labels*> groups) {
    IntList perm;
    std::vector<SymInt> shape, grouped;
    for (const Labels* g : groups) {
      SymInt n = 1;
      for (int l : *g) {
        perm.push_back(find(op.labels, l));
        shape.push_back(size[l]);
        n = n * size[l];
      }
      grouped.push_back(n);
    }
    return reshape(expand(permute(op.t, perm), dims_of(shape)), dims_of(grouped));
  };
  Tensor left = arrange(a, {&batch, &a_only, &summed});
  Tensor right = arrange(b, {&batch, &summed, &b_only});
  Tensor product = bmm(left, right);
  Operand out;
  std::vector<SymInt> shape;
  for (const Labels* g : {&batch, &a_only, &b_only})
    for (int l : *g) {
      out.labels.push_back(l);
      shape.push_back(size[l]);
    }
  out.t = reshape(product, dims_of(shape));
  return out;
}

}  // namespace

Tensor einsum(std::string_view equation, const TensorList& operands) {
  size_t arrow = equation.find("->");
  std::string_view lhs = equation.substr(0, arrow);
  std::vector<Term> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(
        parse_term(lhs.substr(start, comma == std::string_view::npos ? comma : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  KILN_CHECK(terms.size() == operands.size(), value,
             "[einsum] '{}' has {} operand terms but {} tensors were given", equation, terms.size(),
             operands.size());
  int64_t ellipsis_rank = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    auto explicit_dims = static_cast<int64_t>(terms[i].letters.size());
    int64_t rank = operands[i].dim();
    KILN_CHECK(terms[i].ellipsis_at >= 0 ? rank >= explicit_dims : rank == explicit_dims, shape,
               "[einsum] operand {} has {} dims but its subscripts name {}", i, rank,
               explicit_dims);
    if (terms[i].ellipsis_at >= 0) ellipsis_rank = std::max(ellipsis_rank, rank - explicit_dims);
  }
  std::vector<Operand> ops;
  std::vector<int> count(static_cast<size_t>(kEllipsisBase + ellipsis_rank), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    ops.push_back({operands[i], expand_term(terms[i], operands[i].dim(), ellipsis_rank)});
    for (int l : ops.back().labels) ++count[static_cast<size_t>(l)];
  }
  // The output's labels: given, or the ellipsis dims and then the letters seen once.
  Labels output;
  if (arrow != std::string_view::npos) {
    Term out = parse_term(equation.substr(arrow + 2));
    for (int l : out.letters)
      KILN_CHECK(count[static_cast<size_t>(l)] > 0, value,
                 "[einsum] output subscript '{}' does not appear in the operands", char_of(l));
    output =
        expand_term(out, ellipsis_rank + static_cast<int64_t>(out.letters.size()), ellipsis_rank);
    for (size_t i = 0; i < out.letters.size(); ++i)
      KILN_CHECK(std::count(out.letters.begin(), out.letters.end(), out.letters[i]) == 1, value,
                 "[einsum] output subscript '{}' appears more than once", char_of(out.letters[i]));
    // An output without '...' sums the ellipsis dims out, as PyTorch does.
  } else {
    for (int64_t i = 0; i < ellipsis_rank; ++i)
      output.push_back(kEllipsisBase + static_cast<int>(i));
    for (int l = 0; l < kEllipsisBase; ++l)
      if (count[static_cast<size_t>(l)] == 1) output.push_back(l);
  }
  // Needed labels: the output's plus those of the operands not yet folded in.
  auto needed = [&](size_t from) {
    std::vector<bool> keep(count.size(), false);
    for (int l : output) keep[static_cast<size_t>(l)] = true;
    for (size_t j = from; j < ops.size(); ++j)
      for (int l : ops[j].labels) keep[static_cast<size_t>(l)] = true;
    return keep;
  };
  for (Operand& op : ops) take_diagonals(op);
  Operand acc = ops[0];
  sum_unneeded(acc, needed(1));
  for (size_t i = 1; i < ops.size(); ++i) {
    Operand next = ops[i];
    std::vector<bool> keep = needed(i + 1);
    std::vector<bool> keep_next = keep;  // acc's labels are needed while next is reduced alone
    for (int l : acc.labels) keep_next[static_cast<size_t>(l)] = true;
    sum_unneeded(next, keep_next);
    acc = contract(std::move(acc), std::move(next), keep);
  }
  sum_unneeded(acc, needed(ops.size()));
  IntList perm;
  for (int l : output) perm.push_back(find(acc.labels, l));
  return permute(acc.t, perm);
}

}  // namespace kiln

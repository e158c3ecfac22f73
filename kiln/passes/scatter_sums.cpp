#include "kiln/passes/scatter_sums.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>
#include <vector>

namespace kiln::passes {

using ops::OpKind;

namespace {

// Element range [begin, end) of the dense layout a strided view writes.
struct Range {
  int64_t begin, end;
  bool dense = false;  // the view writes every element of [begin, end)
};

// Zeros with regions written: what a `full` 0 and the scatters on top of it hold.
struct ZeroScatters {
  std::vector<Range> written;
};

bool is_arg_ref(const ir::Node* n, size_t i) {
  return i < n->args().size() && std::holds_alternative<ir::Ref>(n->args()[i]);
}

const ir::Ref& ref_arg(const ir::Node* n, size_t i) { return std::get<ir::Ref>(n->args()[i]); }

// The range of an as_strided_scatter's view (size, stride, storage_offset at args 2-4).
std::optional<Range> view_range(const ir::Node* n) {
  if (n->args().size() < 5) return std::nullopt;
  const auto* size = std::get_if<IntList>(&n->args()[2]);
  const auto* stride = std::get_if<IntList>(&n->args()[3]);
  if (!size || !stride || size->size() != stride->size()) return std::nullopt;
  int64_t offset = 0;
  if (const auto* o = std::get_if<int64_t>(&n->args()[4]))
    offset = *o;
  else if (!std::holds_alternative<std::monostate>(n->args()[4]))
    return std::nullopt;
  int64_t end = offset;
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of the dims longer than 1
  for (size_t i = 0; i < size->size(); ++i) {
    if ((*size)[i] == 0) return Range{offset, offset, true};
    if ((*stride)[i] < 0) return std::nullopt;
    end += ((*size)[i] - 1) * (*stride)[i];
    if ((*size)[i] > 1) dims.emplace_back((*stride)[i], (*size)[i]);
  }
  // Dense when, innermost first, each stride is the product of the sizes inside it.
  std::sort(dims.begin(), dims.end());
  int64_t expect = 1;
  bool dense = true;
  for (auto [st, sz] : dims) {
    dense = dense && st == expect;
    expect *= sz;
  }
  return Range{offset, end + 1, dense};
}

bool disjoint(const std::vector<Range>& a, const std::vector<Range>& b) {
  for (Range x : a)
    for (Range y : b)
      if (x.begin < y.end && y.begin < x.end) return false;
  return true;
}

bool is_zero_fill(const ir::Node* n) {
  if (n->op() != OpKind::full || n->args().size() < 2) return false;
  const auto* v = std::get_if<Scalar>(&n->args()[1]);
  return v && !v->is_bool() && v->to_double() == 0.0 && !std::signbit(v->to_double());  // +0 only
}

}  // namespace

int merge_disjoint_scatters(ir::Graph& graph) {
  std::unordered_map<const ir::Node*, ZeroScatters> zeros;  // call nodes known to be such
  int rewritten = 0;
  for (ir::Node* n : graph.nodes()) {
    if (n->opcode() != ir::Opcode::call || n->meta().size() != 1) continue;
    if (is_zero_fill(n)) {
      zeros[n] = {};
      continue;
    }
    if (n->op() == OpKind::as_strided_scatter && is_arg_ref(n, 0)) {
      auto self = zeros.find(ref_arg(n, 0).node);
      std::optional<Range> r = view_range(n);
      if (self != zeros.end() && r) {
        ZeroScatters z = self->second;
        z.written.push_back(*r);
        zeros[n] = std::move(z);
      }
      continue;
    }
    if (n->op() != OpKind::add || n->args().size() < 3 || !is_arg_ref(n, 0) || !is_arg_ref(n, 1))
      continue;
    const auto* alpha = std::get_if<Scalar>(&n->args()[2]);
    if (!alpha || alpha->to_double() != 1.0) continue;
    // The operand that is one region written into zeros read by this add only: folded
    // into the other, when the other is zeros outside regions it does not touch.
    for (int side : {1, 0}) {
      ir::Node* one = ref_arg(n, static_cast<size_t>(side)).node;
      ir::Node* other = ref_arg(n, static_cast<size_t>(1 - side)).node;
      auto a = zeros.find(one), b = zeros.find(other);
      if (a == zeros.end() || b == zeros.end() || one == other || a->second.written.size() != 1 ||
          one->op() != OpKind::as_strided_scatter || one->users().size() != 1)
        continue;
      const ir::ValueMeta& m = n->meta()[0];
      if (!(one->meta()[0] == m && other->meta()[0] == m) ||
          !disjoint(a->second.written, b->second.written))
        continue;
      ZeroScatters merged = b->second;
      merged.written.push_back(a->second.written[0]);
      ir::ArgList args = one->args();
      args[0] = ir::Ref{other, 0};
      graph.set_call(n, OpKind::as_strided_scatter, std::move(args));
      zeros[n] = std::move(merged);
      ++rewritten;
      break;
    }
  }
  if (rewritten) ir::eliminate_dead_code(graph);  // the scatters and fills no add reads now
  // A fill every element of which the scatters overwrite need not be filled: where dense
  // regions that do not meet add up to the whole tensor, and the fill and each scatter
  // but the last are read by the next scatter alone, the fill becomes `empty`.
  for (ir::Node* n : graph.nodes()) {
    auto z = zeros.find(n);
    if (z == zeros.end() || n->op() != OpKind::as_strided_scatter) continue;
    std::vector<Range> rs = z->second.written;  // a chain of scatters may overwrite itself
    std::sort(rs.begin(), rs.end(), [](Range a, Range b) { return a.begin < b.begin; });
    int64_t numel = 1, at = 0;
    for (int64_t d : n->meta()[0].shape) numel *= d;
    bool tiled = true;
    for (Range r : rs) {
      tiled = tiled && r.dense && r.begin == at;
      at = r.end;
    }
    if (!tiled || at != numel) continue;
    ir::Node* fill = ref_arg(n, 0).node;
    while (fill->op() == OpKind::as_strided_scatter && fill->users().size() == 1)
      fill = ref_arg(fill, 0).node;
    if (fill->op() != OpKind::full || fill->users().size() != 1 || fill->args().size() < 4)
      continue;
    ir::ArgList args{fill->args()[0], fill->args()[2], fill->args()[3]};
    graph.set_call(fill, OpKind::empty, std::move(args));
    ++rewritten;
  }
#ifndef NDEBUG
  graph.verify();
#endif
  return rewritten;
}

}  // namespace kiln::passes

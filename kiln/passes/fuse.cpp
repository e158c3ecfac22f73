#include "kiln/passes/fuse.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace kiln::passes {

namespace {

uint64_t key_of(const ir::Ref& r) {
  return (static_cast<uint64_t>(r.node->id()) << 32) | static_cast<uint32_t>(r.output);
}

struct Region {
  std::vector<ir::Node*> nodes;
  std::unordered_set<uint64_t> reads, writes;  // memory roots it reads and writes in place
  bool open = true;
};

}  // namespace

std::vector<PointwiseRegion> find_pointwise_regions(
    const ir::Graph& graph, const std::function<bool(const ir::Node&)>& fusible, size_t max_nodes) {
  std::unordered_map<uint64_t, uint64_t> root;  // value -> the value whose memory it is
  auto root_of = [&](const ir::Ref& r) {
    auto it = root.find(key_of(r));
    return it == root.end() ? key_of(r) : it->second;
  };
  std::vector<int> region_of(graph.id_bound(), -1);
  std::vector<size_t> pos(graph.id_bound());  // program order (ids are creation order)
  size_t at = 0;
  for (ir::Node* n = graph.first(); n; n = n->next()) pos[n->id()] = at++;
  std::vector<Region> regions;
  std::vector<size_t> open;  // indices of the open regions
  auto close = [&](size_t r) {
    regions[r].open = false;
    open.erase(std::find(open.begin(), open.end(), r));
  };

  for (ir::Node* n = graph.first(); n; n = n->next()) {
    if (n->opcode() == ir::Opcode::output) break;
    if (n->opcode() != ir::Opcode::call) continue;
    const ops::OpInfo& info = ops::op_info(n->op());
    std::vector<ir::Ref> inputs = n->inputs();
    int alias = info.is_view() ? info.schema.view_of_arg : info.schema.mutated_arg;
    std::optional<uint64_t> written;
    if (alias >= 0) {
      uint64_t r = root_of(std::get<ir::Ref>(n->args()[static_cast<size_t>(alias)]));
      for (size_t k = 0; k < n->meta().size(); ++k) root[key_of({n, static_cast<int>(k)})] = r;
      if (info.is_inplace()) written = r;
    }

    // The region n joins: the open ones it reads from, merged, else a new one.
    int target = -1;
    if (fusible(*n)) {
      std::vector<size_t> from;
      for (const ir::Ref& r : inputs) {
        int g = region_of[r.node->id()];
        if (g >= 0 && regions[static_cast<size_t>(g)].open &&
            std::find(from.begin(), from.end(), static_cast<size_t>(g)) == from.end())
          from.push_back(static_cast<size_t>(g));
      }
      size_t size = 0;
      for (size_t g : from) size += regions[g].nodes.size();
      if (from.empty() || size + 1 > max_nodes) {
        regions.emplace_back();
        open.push_back(regions.size() - 1);
        target = static_cast<int>(regions.size() - 1);
      } else {
        std::sort(from.begin(), from.end());
        target = static_cast<int>(from[0]);
        Region& into = regions[from[0]];
        for (size_t i = 1; i < from.size(); ++i) {
          Region& other = regions[from[i]];
          for (ir::Node* m : other.nodes) {
            region_of[m->id()] = target;
            into.nodes.push_back(m);
          }
          into.reads.insert(other.reads.begin(), other.reads.end());
          into.writes.insert(other.writes.begin(), other.writes.end());
          other.nodes.clear();
          close(from[i]);
        }
        std::sort(into.nodes.begin(), into.nodes.end(), [&](const ir::Node* a, const ir::Node* b) {
          return pos[a->id()] < pos[b->id()];
        });
      }
    }

    // Every other open region that n conflicts with ends before n.
    for (size_t i = open.size(); i-- > 0;) {
      size_t g = open[i];
      if (static_cast<int>(g) == target) continue;
      const Region& reg = regions[g];
      bool conflict = written && (reg.reads.count(*written) || reg.writes.count(*written));
      for (const ir::Ref& r : inputs)
        conflict = conflict || region_of[r.node->id()] == static_cast<int>(g) ||
                   reg.writes.count(root_of(r));
      if (conflict) close(g);
    }
    if (target < 0) continue;
    Region& reg = regions[static_cast<size_t>(target)];
    reg.nodes.push_back(n);
    region_of[n->id()] = target;
    for (const ir::Ref& r : inputs)
      if (region_of[r.node->id()] != target) reg.reads.insert(root_of(r));
    if (written) reg.writes.insert(*written);
    if (reg.nodes.size() == max_nodes) close(static_cast<size_t>(target));
  }

  std::vector<PointwiseRegion> out;
  for (Region& r : regions)
    if (r.nodes.size() > 1) out.push_back({std::move(r.nodes)});
  return out;
}

}  // namespace kiln::passes

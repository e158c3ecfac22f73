// PyTorch's other functional collective forms (torch.distributed._functional_collectives),
// built from the collective ops as PyTorch builds them: along another dim by chunking
// and concatenating around the dim-0 op, and the `_coalesced` forms as one collective
// per dtype over the tensors flattened into one buffer.
#include "kiln/api/functional.h"

namespace kiln {

Tensor all_gather_tensor(const Tensor& x, int64_t gather_dim, int64_t group_size,
                         std::string_view group) {
  int64_t dim = wrap_dim(gather_dim, x.dim(), "all_gather_tensor");
  Tensor gathered = all_gather_into_tensor(dim == 0 ? x : contiguous(x), group_size, group);
  if (dim == 0) return gathered;
  return cat(chunk(gathered, group_size, 0), dim);  // rank blocks side by side along dim
}

Tensor reduce_scatter_tensor(const Tensor& x, std::string_view reduce_op, int64_t scatter_dim,
                             int64_t group_size, std::string_view group) {
  int64_t dim = wrap_dim(scatter_dim, x.dim(), "reduce_scatter_tensor");
  KILN_CHECK(group_size > 0 && x.size(dim) % group_size == 0, shape,
             "[reduce_scatter_tensor] dim {} of {} is not divisible by the group size {}", dim,
             x.meta_str(), group_size);
  if (dim == 0) return reduce_scatter_tensor(x, reduce_op, group_size, group);
  // Rank r's chunk along dim becomes row block r along dim 0.
  return reduce_scatter_tensor(cat(chunk(x, group_size, dim), 0), reduce_op, group_size, group);
}

Tensor scatter_tensor(const Tensor& x, int64_t src, int64_t group_size, std::string_view group) {
  KILN_CHECK(src >= 0 && src < group_size, index,
             "[scatter_tensor] src {} is not a rank of a group of {}", src, group_size);
  KILN_CHECK(x.dim() > 0 && x.size(0) % group_size == 0, shape,
             "[scatter_tensor] dim 0 of {} is not divisible by the group size {}", x.meta_str(),
             group_size);
  // Every rank sends chunk r of its x to rank r; what came from `src` is this rank's chunk.
  int64_t chunk = x.size(0) / group_size;
  return slice(all_to_all_single(x, group_size, group), 0, src * chunk, (src + 1) * chunk);
}

namespace {

// Runs `one` on each group of `xs` of one dtype and device (the group's tensors flattened
// into one buffer); `cut` cuts its result back into each tensor's result.
template <typename One, typename Cut>
TensorList coalesced(const TensorList& xs, One one, Cut cut) {
  TensorList out(xs.size());
  std::vector<bool> done(xs.size(), false);
  for (size_t i = 0; i < xs.size(); ++i) {
    if (done[i]) continue;
    std::vector<size_t> members;
    for (size_t j = i; j < xs.size(); ++j)
      if (!done[j] && xs[j].dtype() == xs[i].dtype() && xs[j].device() == xs[i].device()) {
        members.push_back(j);
        done[j] = true;
      }
    TensorList group;
    for (size_t j : members) group.push_back(xs[j]);
    TensorList results = cut(one(group), group);
    for (size_t k = 0; k < members.size(); ++k) out[members[k]] = results[k];
  }
  return out;
}

// The tensors of `g` flattened, one after the other.
Tensor flat_cat(const TensorList& g) {
  TensorList flat;
  for (const Tensor& x : g) flat.push_back(reshape(x, {-1}));
  return cat(flat, 0);
}

IntList numels(const TensorList& xs, int64_t divide_by = 1) {
  IntList n;
  for (const Tensor& x : xs) n.push_back(x.numel() / divide_by);
  return n;
}

// `parts[k]` shaped like `g[k]` with dim 0 scaled by `times` / `divided_by` (a 0-dim
// tensor counts as one row).
TensorList shaped_like(TensorList parts, const TensorList& g, int64_t times, int64_t divided_by) {
  for (size_t k = 0; k < g.size(); ++k) {
    Dims shape = g[k].shape();
    IntList sizes(shape.begin(), shape.end());
    if (sizes.empty()) sizes.push_back(1);
    sizes[0] = sizes[0] * times / divided_by;
    parts[k] = reshape(parts[k], sizes);
  }
  return parts;
}

}  // namespace

TensorList all_reduce_coalesced(const TensorList& xs, std::string_view reduce_op,
                                std::string_view group) {
  return coalesced(
      xs, [&](const TensorList& g) { return all_reduce(flat_cat(g), reduce_op, group); },
      [](const Tensor& r, const TensorList& g) {
        TensorList parts = split(r, numels(g), 0);
        for (size_t k = 0; k < g.size(); ++k) parts[k] = reshape(parts[k], g[k].shape());
        return parts;
      });
}

TensorList all_gather_into_tensor_coalesced(const TensorList& xs, int64_t group_size,
                                            std::string_view group) {
  return coalesced(
      xs,
      [&](const TensorList& g) { return all_gather_into_tensor(flat_cat(g), group_size, group); },
      [&](const Tensor& r, const TensorList& g) {
        // [ranks * total]: each rank's block holds every tensor of the group in turn.
        return shaped_like(split(reshape(r, {group_size, -1}), numels(g), 1), g, group_size, 1);
      });
}

TensorList reduce_scatter_tensor_coalesced(const TensorList& xs, std::string_view reduce_op,
                                           int64_t group_size, std::string_view group) {
  for (const Tensor& x : xs)
    KILN_CHECK(
        x.dim() > 0 && x.size(0) % group_size == 0, shape,
        "[reduce_scatter_tensor_coalesced] dim 0 of {} is not divisible by the group size {}",
        x.meta_str(), group_size);
  return coalesced(
      xs,
      [&](const TensorList& g) {
        // Row r of each [ranks, numel / ranks] goes to rank r: side by side per rank.
        TensorList rows;
        for (const Tensor& x : g) rows.push_back(reshape(x, {group_size, -1}));
        return reduce_scatter_tensor(reshape(cat(rows, 1), {-1}), reduce_op, group_size, group);
      },
      [&](const Tensor& r, const TensorList& g) {
        return shaped_like(split(r, numels(g, group_size), 0), g, 1, group_size);
      });
}

}  // namespace kiln

// torch.nn.functional's embedding (padding_idx, max_norm) and embedding_bag, over the
// table's embedding (a row gather) and index_add.
#include <limits>

#include "kiln/autograd/autograd.h"
#include "kiln/nn/functional.h"

namespace kiln::nn {
namespace {

void check_indices(const Tensor& indices, const Tensor& weight, const char* op) {
  KILN_CHECK(indices.dtype() == DType::i64 || indices.dtype() == DType::i32, dtype,
             "[{}] expects int64 or int32 indices, got {}", op, indices.dtype());
  KILN_CHECK(weight.dim() == 2, shape, "[{}] expects a 2-D weight, got {}", op, weight.meta_str());
}

std::optional<int64_t> wrap_padding(std::optional<int64_t> padding_idx, int64_t rows,
                                    const char* op) {
  if (!padding_idx) return std::nullopt;
  KILN_CHECK(*padding_idx >= -rows && *padding_idx < rows, value,
             "[{}] padding_idx {} must be within num_embeddings {}", op, *padding_idx, rows);
  return *padding_idx < 0 ? *padding_idx + rows : *padding_idx;
}

// PyTorch's embedding_renorm_: the rows looked up whose norm exceeds max_norm, rescaled
// to it in place (no gradient).
void renorm_looked_up(const Tensor& weight, const Tensor& indices, double max_norm,
                      double norm_type) {
  autograd::NoGradGuard no_grad;
  Tensor w = weight.detach();
  copy_(w, embedding_renorm(w, indices, max_norm, norm_type));
}

}  // namespace

Tensor embedding_renorm(const Tensor& weight, const Tensor& indices, double max_norm,
                        double norm_type) {
  autograd::NoGradGuard no_grad;
  Tensor w = weight.detach();
  // Which rows are looked up, as a mask over all of them: no data-dependent row count, so
  // a traced program (an imported embedding_renorm_) keeps static sizes. A row left alone
  // is multiplied by exactly 1.
  Tensor looked_up =
      index_fill(zeros({w.sym_size(0), 1}, {.dtype = DType::b8, .device = w.device()}), 0,
                 reshape(to(indices, DType::i64), {-1}), 1.0);
  Tensor norms = vector_norm(w, norm_type, {1}, true);
  Tensor scale =
      where(logical_and(looked_up, norms > max_norm), max_norm / (norms + 1e-7), ones_like(norms));
  return w * scale;
}

namespace {

// rows looked up at `indices` with each one's gradient divided by its index's count in
// `indices` (the values unchanged: rows.detach() + (rows - rows.detach()) / count).
Tensor scaled_by_frequency(const Tensor& rows, const Tensor& indices) {
  Tensor flat = reshape(to(indices, DType::i64), {-1});
  Tensor counts = index_select(bincount(flat), 0, flat);
  IntList shape(indices.shape().begin(), indices.shape().end());
  shape.push_back(1);
  Tensor scale = reshape(to(counts, rows.dtype()), shape);
  return rows.detach() + (rows - rows.detach()) / scale;
}

}  // namespace

Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx,
                 std::optional<double> max_norm, double norm_type, bool scale_grad_by_freq) {
  check_indices(indices, weight, "embedding");
  std::optional<int64_t> pad = wrap_padding(padding_idx, weight.size(0), "embedding");
  if (max_norm) renorm_looked_up(weight, indices, *max_norm, norm_type);
  Tensor out = kiln::embedding(weight, indices);
  if (scale_grad_by_freq && indices.numel() && out.requires_grad())
    out = scaled_by_frequency(out, indices);
  if (!pad) return out;
  // The padding row's value, with no gradient path back to it.
  Tensor at_pad = unsqueeze(indices == *pad, -1);
  return where(at_pad, out.detach(), out);
}

Tensor embedding_bag(const Tensor& input, const Tensor& weight, const EmbeddingBagOptions& o) {
  check_indices(input, weight, "embedding_bag");
  KILN_CHECK(o.mode == "sum" || o.mode == "mean" || o.mode == "max", value,
             "[embedding_bag] mode has to be one of sum, mean or max, got '{}'", o.mode);
  KILN_CHECK(!o.per_sample_weights.defined() || o.mode == "sum", value,
             "[embedding_bag] per_sample_weights is only supported for mode='sum' (got mode='{}')",
             o.mode);
  std::optional<int64_t> pad = wrap_padding(o.padding_idx, weight.size(0), "embedding_bag");
  if (o.max_norm) renorm_looked_up(weight, input, *o.max_norm, o.norm_type);
  Tensor flat, bag;  // each index, and the bag it belongs to
  int64_t bags = 0;
  if (input.dim() == 2) {
    KILN_CHECK(!o.offsets.defined(), value,
               "[embedding_bag] offsets has to be undefined if input is 2-D");
    bags = input.size(0);
    flat = reshape(input, {-1});
    bag = reshape(
        expand(unsqueeze(arange(0, bags, 1, {.dtype = DType::i64, .device = input.device()}), 1),
               {bags, input.size(1)}),
        {-1});
  } else {
    KILN_CHECK(
        input.dim() == 1 && o.offsets.defined() && o.offsets.dim() == 1, shape,
        "[embedding_bag] a 1-D input needs 1-D offsets (got input {}{})", input.meta_str(),
        o.offsets.defined() ? ", offsets " + o.offsets.meta_str() : std::string(", no offsets"));
    flat = input;
    Tensor starts = to(o.offsets, DType::i64);
    if (o.include_last_offset) starts = narrow(starts, 0, 0, starts.size(0) - 1);
    bags = starts.size(0);
    Tensor positions = arange(0, input.size(0), 1, {.dtype = DType::i64, .device = input.device()});
    bag = searchsorted(starts, positions, /*right=*/true) - 1;  // the last start at or before
  }
  Tensor rows = kiln::embedding(weight, flat);  // [M, dim]
  if (o.scale_grad_by_freq && flat.numel() && rows.requires_grad())
    rows = scaled_by_frequency(rows, flat);
  Tensor keep = pad ? flat != *pad : ones_like(flat, {.dtype = DType::b8});
  Tensor keep_f = unsqueeze(to(keep, weight.dtype()), 1);
  IntList out_shape{bags, weight.size(1)};
  TensorOptions wo{.dtype = weight.dtype(), .device = weight.device()};
  if (o.mode == "max") {
    // Each bag's maximum: rows scattered to [bags, M, dim] would be dense; instead a
    // one-hot bag mask over M, -inf where absent (bags are model-sized).
    Tensor member = logical_and(
        unsqueeze(bag, 0) ==
            unsqueeze(arange(0, bags, 1, {.dtype = DType::i64, .device = input.device()}), 1),
        unsqueeze(keep, 0));  // [bags, M]
    Tensor scores = where(unsqueeze(member, -1), unsqueeze(rows, 0),
                          full({1, 1, 1}, -std::numeric_limits<double>::infinity(), wo));
    Tensor best = amax(scores, {1});
    return where(unsqueeze(any(member, 1), 1), best, zeros(out_shape, wo));  // an empty bag gives 0
  }
  if (wants_opmath({weight, o.per_sample_weights})) {  // the weighted sums in f32, rounded once
    rows = to(rows, DType::f32);
    keep_f = to(keep_f, DType::f32);
  }
  Tensor weighted = rows * keep_f;
  if (o.per_sample_weights.defined())
    weighted = weighted * unsqueeze(reshape(o.per_sample_weights, {-1}), 1);
  TensorOptions so{.dtype = weighted.dtype(), .device = weight.device()};
  Tensor sums = index_add(zeros(out_shape, so), 0, bag, weighted);
  if (o.mode == "sum") return to(sums, weight.dtype());
  Tensor counts = index_add(zeros({bags, 1}, so), 0, bag, keep_f);
  return to(sums / where(counts == 0.0, ones_like(counts), counts), weight.dtype());
}

}  // namespace kiln::nn

// Indexing composites, as PyTorch defines them, written with table ops: flat and
// broadcast gathers (take, take_along_dim), advanced indexing (index, index_put),
// masked_scatter, the *_scatter family, scatter_reduce, sliding windows (unfold) and
// diagonal embedding. Most reduce to one index_select / index_copy / index_add over
// linear positions, computed with integer ops on the tensor's device, so they
// differentiate, trace and export as those ops do.
#include <algorithm>
#include <limits>

#include "kiln/api/functional.h"
#include "kiln/ops/meta.h"

namespace kiln {
namespace {

IntList shape_of(const Tensor& t) { return IntList(t.shape().begin(), t.shape().end()); }

TensorOptions index_options(const Tensor& like) {
  return {.dtype = DType::i64, .device = like.device()};
}

// The row-major position of every element of x, shaped like x.
Tensor positions(const Tensor& x) {
  return reshape(arange(0, x.numel(), 1, index_options(x)), shape_of(x));
}

// Negative indices counted from the end of a dim of `size`.
Tensor wrapped(const Tensor& index, int64_t size) { return where(index < 0, index + size, index); }

// (Y2) A size as an operand of index arithmetic: its integer, or for a symbolic size a
// 0-dim tensor the program computes from it.
Tensor operand(const SymInt& size, const Tensor& like) {
  return size_as_tensor(size, {.dtype = like.dtype(), .device = like.device()});
}
Tensor wrapped(const Tensor& index, const SymInt& size) {
  if (!size.is_symbolic()) return wrapped(index, size.hint());
  return where(index < 0, index + operand(size, index), index);
}

// Dims [from, to) of `x`'s shape, symbolic ones kept.
Dims dims_of(const Tensor& x, int64_t from, int64_t to) {
  Dims d;
  for (int64_t i = from; i < to; ++i) d.push_back(x.sym_size(i));
  return d;
}
Dims concat(Dims a, const Dims& b) {
  for (size_t i = 0; i < b.size(); ++i) a.push_back(b.sym(i));
  return a;
}

void check_integral_index(const Tensor& index, const char* op) {
  KILN_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, dtype,
             "[{}] expects an int64 or int32 index tensor, got {}", op, index.dtype());
}

// x with `src` written over the view `view_of(x)` selects (a copy): the view is taken of
// x's positions, so any view works, and the write is one index_copy of the flat tensor.
template <typename ViewFn>
Tensor scatter_into_view(const Tensor& x, const Tensor& src, ViewFn view_of, const char* op) {
  Tensor where_to = view_of(positions(x));
  KILN_CHECK(src.shape() == where_to.shape(), shape, "[{}] expects src shaped {}, got {}", op,
             where_to.shape().str(), src.meta_str());
  Tensor flat =
      index_copy(reshape(x, {-1}), 0, reshape(where_to, {-1}), reshape(to(src, x.dtype()), {-1}));
  return reshape(flat, shape_of(x));
}

}  // namespace

Tensor take(const Tensor& x, const Tensor& index) {
  OpNameScope user_op("take");
  ops::check_long_index("take", index);
  Tensor picked =
      index_select(reshape(x, {-1}), 0, reshape(wrapped(to(index, DType::i64), x.numel()), {-1}));
  return reshape(picked, shape_of(index));
}

Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) {
  OpNameScope user_op("take_along_dim");
  ops::check_long_index("take_along_dim", indices);
  if (!dim) return take(reshape(x, {-1}), reshape(indices, {-1}));
  KILN_CHECK(x.dim() == indices.dim(), shape,
             "[take_along_dim] input {} and indices {} must have the same rank", x.meta_str(),
             indices.meta_str());
  int64_t d = wrap_dim(*dim, x.dim(), "take_along_dim");
  // Broadcast every dim but `d`, which each keeps.
  IntList xs = shape_of(x), is = shape_of(indices);
  xs[static_cast<size_t>(d)] = is[static_cast<size_t>(d)] = 1;
  Dims common = ops::broadcast_shapes(Dims(xs), Dims(is), "take_along_dim");
  IntList x_to(common.begin(), common.end()), i_to = x_to;
  x_to[static_cast<size_t>(d)] = x.size(d);
  i_to[static_cast<size_t>(d)] = indices.size(d);
  return gather(expand(x, x_to), d, expand(to(indices, DType::i64), i_to));
}

namespace {

bool is_mask(const Tensor& t) { return t.dtype() == DType::b8 || t.dtype() == DType::u8; }
// The dims an index tensor consumes: a mask its own, an integer index one.
int64_t width_of(const Tensor& t) { return is_mask(t) ? t.dim() : 1; }

// Advanced indexing's plan: the defined index tensors (integers, or bools standing for
// their nonzero coordinates) as one block of consecutive dims starting at `first`, each
// broadcast to `shape`, combined into one linear position over the block.
struct IndexPlan {
  int64_t first = 0, block = 0;
  Tensor linear;  // [*shape]
  Dims shape;     // (Y2) symbolic where the index tensors' sizes are
};

IndexPlan plan_index(const Tensor& x, const std::vector<Tensor>& indices, const char* op) {
  std::vector<Tensor> expanded;  // bools become their coordinate tensors
  std::vector<int64_t> dims;
  int64_t d = 0;
  for (const Tensor& t : indices) {
    if (!t.defined()) {
      ++d;
      continue;
    }
    if (is_mask(t)) {
      KILN_CHECK(d + t.dim() <= x.dim(), index, "[{}] a mask {} indexes past the {} dims of {}", op,
                 t.meta_str(), x.dim(), x.meta_str());
      for (int64_t k = 0; k < t.dim(); ++k)
        KILN_CHECK(t.size(k) == x.size(d + k), index,
                   "[{}] the mask {} does not match the indexed tensor {} at dim {}", op,
                   t.meta_str(), x.meta_str(), d + k);
      TensorList coords = where(t);
      for (int64_t k = 0; k < t.dim(); ++k) {
        expanded.push_back(coords[static_cast<size_t>(k)]);
        dims.push_back(d + k);
      }
      d += t.dim();
      continue;
    }
    check_integral_index(t, op);
    KILN_CHECK(d < x.dim(), index, "[{}] too many indices for a tensor of dimension {}", op,
               x.dim());
    expanded.push_back(to(t, DType::i64));
    dims.push_back(d++);
  }
  KILN_CHECK(!expanded.empty(), value, "[{}] expects at least one index tensor", op);
  for (size_t i = 1; i < dims.size(); ++i)  // lead_with_indexed brought them together
    KILN_CHECK(dims[i] == dims[i - 1] + 1, internal,
               "[{}] index tensors at dims {} and {} are not adjacent", op, dims[i - 1], dims[i]);
  IndexPlan p;
  p.first = dims.front();
  p.block = static_cast<int64_t>(dims.size());
  Dims shape = expanded[0].shape();
  for (size_t i = 1; i < expanded.size(); ++i)
    shape = ops::broadcast_shapes(shape, expanded[i].shape(), op);
  p.shape = shape;
  for (size_t i = 0; i < expanded.size(); ++i) {
    SymInt size = x.sym_size(dims[i]);
    // Each index within its own dim (the merged position alone could alias another
    // element): a check on the values, eager only.
    if (!expanded[i].is_fake() && expanded[i].numel() > 0) {
      Tensor e = expanded[i];
      int64_t lo = item<int64_t>(amin(e)), hi = item<int64_t>(amax(e));
      int64_t n = size.hint();  // eager: real sizes, no symbols
      KILN_CHECK(lo >= -n && hi < n, index,
                 "[{}] index {} is out of bounds for dimension {} with size {}", op,
                 lo < -n ? lo : hi, dims[i], n);
    }
    Tensor idx = wrapped(expand(expanded[i], p.shape), size);
    if (!p.linear.defined())
      p.linear = idx;
    else
      p.linear =
          (size.is_symbolic() ? p.linear * operand(size, p.linear) : p.linear * size.hint()) + idx;
  }
  return p;
}

// x with the block's dims merged into one.
Tensor merge_block(const Tensor& x, const IndexPlan& p) {
  Dims shape = dims_of(x, 0, p.first);
  shape.push_back(-1);
  return reshape(x, concat(shape, dims_of(x, p.first + p.block, x.dim())));
}

Dims indexed_shape(const Tensor& x, const IndexPlan& p) {
  return concat(concat(dims_of(x, 0, p.first), p.shape), dims_of(x, p.first + p.block, x.dim()));
}

// Index tensors separated by full slices: PyTorch puts their broadcast dims first. The
// permutation that brings the indexed dims to the front, with the entries that index the
// permuted tensor (perm empty: the tensors are adjacent already).
struct Separated {
  IntList perm;
  std::vector<Tensor> indices;
};

Separated lead_with_indexed(const Tensor& x, const std::vector<Tensor>& indices) {
  std::vector<std::pair<int64_t, Tensor>> at;  // (first dim, tensor)
  int64_t d = 0;
  for (const Tensor& t : indices) {
    if (t.defined()) at.emplace_back(d, t);
    d += t.defined() ? width_of(t) : 1;
  }
  bool adjacent = true;
  for (size_t k = 1; k < at.size(); ++k)
    adjacent = adjacent && at[k].first == at[k - 1].first + width_of(at[k - 1].second);
  Separated s;
  if (adjacent || d > x.dim()) return s;  // (too many entries: plan_index reports it)
  std::vector<bool> taken(static_cast<size_t>(x.dim()), false);
  for (const auto& [first, t] : at)
    for (int64_t k = 0; k < width_of(t); ++k) {
      s.perm.push_back(first + k);
      taken[static_cast<size_t>(first + k)] = true;
    }
  for (int64_t k = 0; k < x.dim(); ++k)
    if (!taken[static_cast<size_t>(k)]) s.perm.push_back(k);
  for (const auto& [first, t] : at) s.indices.push_back(t);
  return s;
}

}  // namespace

Tensor index(const Tensor& x, const std::vector<Tensor>& indices) {
  OpNameScope user_op("index");
  if (Separated s = lead_with_indexed(x, indices); !s.perm.empty())
    return index(permute(x, s.perm), s.indices);
  IndexPlan p = plan_index(x, indices, "index");
  Tensor picked = index_select(merge_block(x, p), p.first, reshape(p.linear, {-1}));
  return reshape(picked, indexed_shape(x, p));
}

namespace {

// x[index] split into its basic part (a view of x: selects, slices, new dims) and index()'s
// entries for the index tensors left (undefined for the view's full dims).
struct Indexed {
  Tensor view;
  std::vector<Tensor> tensors;
  bool any = false;
};

Indexed apply_basic(const Tensor& x, const std::vector<indexing::TensorIndex>& index,
                    const char* op) {
  int64_t consumed = 0, ellipses = 0;  // the dims the entries other than None and Ellipsis use
  for (const auto& i : index) {
    const auto& v = i.value();
    if (std::holds_alternative<indexing::EllipsisIndex>(v))
      ++ellipses;
    else if (const Tensor* t = std::get_if<Tensor>(&v))
      consumed += is_mask(*t) ? std::max<int64_t>(t->dim(), 1) : 1;
    else if (!std::holds_alternative<indexing::NoneIndex>(v))
      ++consumed;
  }
  KILN_CHECK(ellipses <= 1, index, "[{}] an index can only have a single ellipsis ('...')", op);
  KILN_CHECK(consumed <= std::max<int64_t>(x.dim(), 0), index,
             "[{}] too many indices for tensor of dimension {}", op, x.dim());
  Indexed r{.view = x};
  std::vector<std::pair<int64_t, Tensor>> advanced;
  int64_t dim = 0;
  for (const auto& i : index) {
    const auto& v = i.value();
    if (const int64_t* n = std::get_if<int64_t>(&v)) {
      int64_t size = r.view.size(dim);
      KILN_CHECK(*n >= -size && *n < size, index,
                 "[{}] index {} is out of bounds for dimension {} with size {}", op, *n, dim, size);
      r.view = select(r.view, dim, *n);
    } else if (const auto* s = std::get_if<indexing::Slice>(&v)) {
      KILN_CHECK(s->step > 0, value, "[{}] slice step must be positive, got {}", op, s->step);
      r.view = slice(r.view, dim++, s->start, s->stop, s->step);
    } else if (std::holds_alternative<indexing::NoneIndex>(v)) {
      r.view = unsqueeze(r.view, dim++);
    } else if (std::holds_alternative<indexing::EllipsisIndex>(v)) {
      dim += x.dim() - consumed;
    } else {
      const Tensor& t = std::get<Tensor>(v);
      if (is_mask(t) && t.dim() == 0) {  // x[True]: a new dim, all of it (False: none of it)
        r.view = unsqueeze(r.view, dim);
        advanced.emplace_back(dim++, reshape(t, {1}));
        continue;
      }
      advanced.emplace_back(dim, t);
      dim += width_of(t);
    }
  }
  r.any = !advanced.empty();
  int64_t covered =
      0;  // index()'s entries: one per full dim, one per tensor (a mask spans its dims)
  for (const auto& [d, t] : advanced) {
    for (; covered < d; ++covered) r.tensors.emplace_back();
    r.tensors.push_back(t);
    covered += width_of(t);
  }
  return r;
}

}  // namespace

Tensor getitem(const Tensor& x, const std::vector<indexing::TensorIndex>& index) {
  OpNameScope user_op("getitem");
  Indexed r = apply_basic(x, index, "getitem");
  return r.any ? kiln::index(r.view, r.tensors) : r.view;
}

Tensor& setitem_(Tensor& x, const std::vector<indexing::TensorIndex>& index, const Tensor& value) {
  Indexed r = apply_basic(x, index, "setitem_");
  Tensor target = r.view;  // a view of x: writing it writes x
  if (r.any)
    copy_(target, index_put(target, r.tensors, value));
  else
    copy_(target, value);
  return x;
}

Tensor& setitem_(Tensor& x, const std::vector<indexing::TensorIndex>& index, Scalar value) {
  return setitem_(x, index, scalar_tensor(value, {.dtype = x.dtype(), .device = x.device()}));
}

Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values,
                 bool accumulate) {
  OpNameScope user_op("index_put");  // errors of the ops below name the one the user called
  if (Separated s = lead_with_indexed(x, indices); !s.perm.empty()) {
    IntList inverse(s.perm.size());
    for (size_t k = 0; k < s.perm.size(); ++k)
      inverse[static_cast<size_t>(s.perm[k])] = static_cast<int64_t>(k);
    return permute(index_put(permute(x, s.perm), s.indices, values, accumulate), inverse);
  }
  IndexPlan p = plan_index(x, indices, "index_put");
  Dims target = indexed_shape(x, p);
  Tensor v = expand(to(values, x.dtype()), target);
  Dims merged = dims_of(x, 0, p.first);
  merged.push_back(-1);
  merged = concat(merged, dims_of(x, p.first + p.block, x.dim()));
  Tensor flat = merge_block(x, p), lin = reshape(p.linear, {-1}), vals = reshape(v, merged);
  Tensor out =
      accumulate ? index_add(flat, p.first, lin, vals) : index_copy(flat, p.first, lin, vals);
  return reshape(out, x.shape());
}

Tensor masked_scatter(const Tensor& x, const Tensor& mask, const Tensor& source) {
  OpNameScope user_op("masked_scatter");
  KILN_CHECK(mask.dtype() == DType::b8, dtype, "[masked_scatter] expects a bool mask, got {}",
             mask.dtype());
  IntList shape = broadcast_shapes({shape_of(x), shape_of(mask)});
  if (shape != shape_of(x))
    return masked_scatter(expand(x, shape), mask, source);  // out of place: x broadcasts too
  Tensor m = expand(mask, shape);
  // The k-th true position (row-major) takes source's k-th element.
  Tensor taken = cumsum(reshape(to(m, DType::i64), {-1}), 0) - 1;
  Tensor flat_source = reshape(to(source, x.dtype()), {-1});
  if (!x.is_fake())  // PyTorch's check on the count of true elements: eager only
    KILN_CHECK(item<int64_t>(sum(to(m, DType::i64))) <= source.numel(), value,
               "[masked_scatter] the mask selects more elements than source {} has",
               source.meta_str());
  Tensor safe = clamp(taken, 0, std::max<int64_t>(source.numel() - 1, 0));
  Tensor picked =
      source.numel() ? reshape(index_select(flat_source, 0, safe), shape_of(x)) : zeros_like(x);
  return where(m, picked, x);
}

Tensor unfold(const Tensor& x, int64_t dim, int64_t size, int64_t step) {
  int64_t d = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), "unfold");
  int64_t len = x.dim() == 0 ? 1 : x.size(d);
  KILN_CHECK(size >= 0 && size <= len, value,
             "[unfold] maximum size for tensor at dimension {} is {} but size is {}", d, len, size);
  KILN_CHECK(step > 0, value, "[unfold] step is {} but must be > 0", step);
  Tensor c = contiguous(x.dim() == 0 ? reshape(x, {1}) : x);
  // (Y1) the other dims' sizes and strides as they are: a symbolic batch adds no guard
  // (timm's HaloNet unfolds its spatial dims of a dynamic batch)
  auto at = static_cast<size_t>(d);
  Dims shape = c.shape(), strides = c.strides();
  int64_t stride = c.stride(d);
  shape.set(at, (len - size) / step + 1);
  // a step past the end leaves one window, whose stride is never used: keep it in range
  int64_t window_stride = stride;
  if (__builtin_mul_overflow(stride, step, &window_stride)) window_stride = stride;
  strides.set(at, window_stride);
  shape.push_back(size);
  strides.push_back(stride);
  Tensor windows = sym_as_strided(c, shape, strides, c.offset());
  return x.dim() == 0 ? reshape(windows, {size}) : windows;
}

Tensor select_scatter(const Tensor& x, const Tensor& src, int64_t dim, int64_t index) {
  OpNameScope user_op("select_scatter");
  return scatter_into_view(
      x, src, [&](const Tensor& p) { return select(p, dim, index); }, "select_scatter");
}

Tensor slice_scatter(const Tensor& x, const Tensor& src, int64_t dim, std::optional<int64_t> start,
                     std::optional<int64_t> end, int64_t step) {
  OpNameScope user_op("slice_scatter");
  return scatter_into_view(
      x, src,
      [&](const Tensor& p) {
        int64_t d = wrap_dim(dim, p.dim(), "slice_scatter"), n = p.size(d);
        auto clip = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
        int64_t s = clip(start.value_or(0)), e = std::max(s, clip(end.value_or(n)));
        KILN_CHECK(step > 0, value, "[slice_scatter] step must be positive, got {}", step);
        return index_select(p, d, arange(s, e, step, index_options(p)));
      },
      "slice_scatter");
}

Tensor diagonal_scatter(const Tensor& x, const Tensor& src, int64_t offset, int64_t dim1,
                        int64_t dim2) {
  OpNameScope user_op("diagonal_scatter");
  return scatter_into_view(
      x, src, [&](const Tensor& p) { return diagonal(p, offset, dim1, dim2); }, "diagonal_scatter");
}

Tensor diag_embed(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  OpNameScope user_op("diag_embed");
  KILN_CHECK(x.dim() >= 1, shape, "[diag_embed] expects at least a 1-D input, got {}",
             x.meta_str());
  int64_t rank = x.dim() + 1, d1 = wrap_dim(dim1, rank, "diag_embed"),
          d2 = wrap_dim(dim2, rank, "diag_embed");
  KILN_CHECK(d1 != d2, value, "[diag_embed] diagonal dimensions cannot be identical {}, {}", dim1,
             dim2);
  int64_t n = x.size(-1) + (offset < 0 ? -offset : offset);
  IntList shape(x.shape().begin(), x.shape().end() - 1);  // the batch dims, then n at d1 and d2
  for (int64_t d : {std::min(d1, d2), std::max(d1, d2)}) shape.insert(shape.begin() + d, n);
  return diagonal_scatter(zeros(shape, {.dtype = x.dtype(), .device = x.device()}), x, offset, d1,
                          d2);
}

Tensor diagflat(const Tensor& x, int64_t offset) {
  return diag_embed(reshape(x, {-1}), offset, 0, 1);
}

namespace {

// A segmented inclusive scan along the last dim: within each run of equal (sorted) `key`,
// every element combined with all before it in its run. log2(n) doubling steps
// (Hillis-Steele), each a shifted combine kept where the shifted element is in the same
// run (keys are sorted, so equal ends mean one run).
Tensor segmented_scan(Tensor v, const Tensor& key,
                      Tensor (*combine)(const Tensor&, const Tensor&)) {
  int64_t n = v.size(-1);
  for (int64_t off = 1; off < n; off *= 2) {
    Tensor cur = narrow(v, -1, off, n - off), prev = narrow(v, -1, 0, n - off);
    Tensor same = narrow(key, -1, off, n - off) == narrow(key, -1, 0, n - off);
    v = cat({narrow(v, -1, 0, off), where(same, combine(cur, prev), cur)}, -1);
  }
  return v;
}

// scatter_reduce's amax / amin / prod: along each fiber of dim, the writes are grouped by
// target (a stable sort of the index), each group reduced by a segmented scan, and the
// group's last element (the whole group's result) written; the other elements write to
// a spare slot past the end, cut off after.
Tensor scatter_extreme(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                       const std::string& reduce, bool include_self) {
  auto combine = reduce == "amax" ? +[](const Tensor& a, const Tensor& b) { return maximum(a, b); }
                 : reduce == "amin"
                     ? +[](const Tensor& a, const Tensor& b) { return minimum(a, b); }
                     : +[](const Tensor& a, const Tensor& b) { return mul(a, b); };
  int64_t d = x.dim() ? wrap_dim(dim, x.dim(), "scatter_reduce") : 0;
  Tensor s = src;
  for (int64_t i = 0; i < index.dim(); ++i)
    s = narrow(s, i, 0, index.size(i));  // the part index covers
  Tensor idx = x.dim() ? movedim(index, d, -1) : reshape(index, {1});
  Tensor vals = x.dim() ? movedim(s, d, -1) : reshape(s, {1});
  Tensor xm = x.dim() ? movedim(x, d, -1) : reshape(x, {1});
  int64_t n = idx.size(-1), size = xm.size(-1);
  if (n == 0) return x;
  auto [key, order] = sort(idx, -1, false, /*stable=*/true);
  Tensor scanned = segmented_scan(gather(vals, -1, order), key, combine);
  Tensor next_differs = narrow(key, -1, 1, n - 1) != narrow(key, -1, 0, n - 1);
  Tensor last = cat({next_differs, ones_like(narrow(key, -1, 0, 1), {.dtype = DType::b8})}, -1);
  Tensor target = where(last, key, Scalar(size));
  Tensor spare = cat({xm, narrow(xm, -1, 0, 1)}, -1);
  Tensor written = narrow(scatter(spare, -1, target, scanned), -1, 0, size);
  Tensor touched = narrow(
      scatter(zeros_like(spare, {.dtype = DType::b8}), -1, target, Scalar(true)), -1, 0, size);
  Tensor out = where(touched, include_self ? combine(xm, written) : written, xm);
  return x.dim() ? movedim(out, -1, d) : reshape(out, {});
}

}  // namespace

Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self) {
  OpNameScope user_op("scatter_reduce");
  KILN_CHECK(
      reduce == "sum" || reduce == "mean" || reduce == "amax" || reduce == "amin" ||
          reduce == "prod",
      value,
      "[scatter_reduce] reduce argument must be either sum, prod, mean, amax or amin, got {}",
      reduce);
  KILN_CHECK(src.dtype() == x.dtype(), dtype,
             "[scatter_reduce] expected self ({}) and src ({}) to have the same dtype", x.dtype(),
             src.dtype());
  ops::check_long_index("scatter_reduce", index);
  KILN_CHECK(index.dim() == x.dim() && index.dim() == src.dim(), shape,
             "[scatter_reduce] index {} must have as many dims as self {} and src {}",
             index.meta_str(), x.meta_str(), src.meta_str());
  if (reduce != "sum" && reduce != "mean")
    return scatter_extreme(x, dim, index, src, reduce, include_self);
  Tensor base = include_self ? x : scatter(x, dim, index, 0.0);  // zero the targets
  Tensor sums = scatter_add(base, dim, index, src);
  if (reduce == "sum") return sums;
  // Mean: over the writes (and self, with include_self) at each target; untouched
  // positions keep x. Integer tensors divide with floor, as PyTorch.
  Tensor counts = scatter_add(full_like(x, include_self ? 1 : 0), dim, index,
                              ones_like(src, {.dtype = x.dtype()}));
  Tensor touched =
      scatter_add(zeros_like(x), dim, index, ones_like(src, {.dtype = x.dtype()})) > 0.0;
  Tensor safe = where(counts == 0.0, ones_like(counts), counts);
  Tensor mean = is_floating(x.dtype()) ? sums / safe : floor_divide(sums, safe);
  return where(touched, mean, x);
}

Tensor index_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                    const std::string& reduce, bool include_self) {
  OpNameScope user_op("index_reduce");
  KILN_CHECK(reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin", value,
             "[index_reduce] reduce argument must be one of prod, mean, amax or amin, got {}",
             reduce);
  KILN_CHECK(index.dim() <= 1, shape, "[index_reduce] index must be a vector, got {}",
             index.meta_str());
  int64_t d = x.dim() ? wrap_dim(dim, x.dim(), "index_reduce") : 0;
  KILN_CHECK(source.dim() == x.dim() && index.numel() == (source.dim() ? source.size(d) : 1), shape,
             "[index_reduce] source {} must be self {} with dim {} of the index's length {}",
             source.meta_str(), x.meta_str(), d, index.numel());
  IntList along(static_cast<size_t>(std::max<int64_t>(x.dim(), 1)), 1);
  along[static_cast<size_t>(d)] = index.numel();
  Tensor idx =
      x.dim() ? expand(reshape(wrapped(index, x.dim() ? x.size(d) : 1), along), shape_of(source))
              : reshape(index, {});
  return scatter_reduce(x, d, idx, source, reduce, include_self);
}

Tensor put(const Tensor& x, const Tensor& index, const Tensor& source, bool accumulate) {
  OpNameScope user_op("put");
  ops::check_long_index("put", index);
  KILN_CHECK(index.numel() == source.numel(), shape,
             "[put] source {} must have as many elements as index {}", source.meta_str(),
             index.meta_str());
  Tensor flat_index = reshape(wrapped(index, x.numel()), {-1}),
         flat_source = reshape(to(source, x.dtype()), {-1});
  Tensor flat = reshape(x, {-1});
  flat = accumulate ? index_add(flat, 0, flat_index, flat_source)
                    : index_copy(flat, 0, flat_index, flat_source);
  return reshape(flat, shape_of(x));
}

}  // namespace kiln

// Reductions, softmax and normalization: each moves the reduced dims last, makes
// the data a dense [outer, inner] matrix in the compute dtype, and works on rows.
#include <algorithm>
#include <limits>
#include <numeric>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/loops.h"
#include "kiln/backend/cpu/vmath.h"
#include "kiln/ops/meta.h"

namespace kiln::cpu {

using ops::OpKind;

namespace {

using backend::moved_last;
using backend::only_dim;
using backend::Rows;

// Kept dims first (in order), then reduced dims; densified in `dtype`.
Rows to_rows(const Tensor& x, const std::vector<bool>& reduced, DType dtype) {
  return backend::to_rows(x, reduced, dtype, [&](const Tensor& view, DType d) {
    if (view.is_contiguous() && view.dtype() == d) return view;
    Tensor out = empty(view.shape(), d, x.device());
    copy_into(out, view);
    return out;
  });
}

// Whether a row kernel can write its rows straight into `out` (its rows laid out as
// to_rows lays out the input's, in the compute dtype). A row kernel's outputs are fresh:
// they never share memory with its inputs (the executor's plan keeps them apart; only
// elementwise ops may write over their input, Note [Outputs in their input's buffer]).
bool direct_rows(const Tensor& out, DType compute) {
  return out.dtype() == compute && out.is_contiguous();
}

template <typename T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

// A row op of (grad_output, t, int dim), softmax's and cumprod's gradients: both as rows
// along dim in t's compute dtype, and where the result rows go (the output itself when it
// has their layout; finish() copies them there otherwise).
struct GradRows {
  Rows g, t;
  Tensor dst, res;
  void finish() const {
    if (res.impl() != dst.impl()) copy_into(dst, res);
  }
};
GradRows grad_rows(const OpCall& c, const Tensor& out) {
  const Tensor& t = c.args.tensor(1);
  int64_t d = wrap_dim(c.args.i64(2), t.dim(), op_name(c.op));
  DType cd = compute_dtype(t.dtype());
  std::vector<bool> reduced = only_dim(t.dim(), d);
  GradRows r{to_rows(c.args.tensor(0), reduced, cd), to_rows(t, reduced, cd), moved_last(out, d),
             Tensor()};
  r.res = direct_rows(r.dst, cd) ? r.dst : empty(r.t.data.shape(), cd, t.device());
  return r;
}

// Rows of `x` (contiguous) summed over its leading dims [0, lead): the reduction of a
// bias gradient. Columns accumulate side by side (vectorizable) in the same order as
// the row-wise path would add them, without moving the reduced dims last first.
template <typename T>
void sum_leading(const Tensor& x, int64_t rows, bool mean, T* o) {
  int64_t cols = x.numel() / rows;
  std::vector<Acc<T>> acc(static_cast<size_t>(cols), Acc<T>(0));
  const T* p = x.data<T>();
  // Threads take column blocks, so each sum adds in the same order on any thread count.
  parallel_for(cols, rows, [&](int64_t c0, int64_t c1) {
    with_best_isa([&] {
      for (int64_t i = 0; i < rows; ++i) {
        const T* row = p + i * cols;
        for (int64_t j = c0; j < c1; ++j)
          acc[j] = backend::wrap_add(acc[j], static_cast<Acc<T>>(row[j]));
      }
    });
  });
  for (int64_t j = 0; j < cols; ++j)
    o[j] = mean ? static_cast<T>(static_cast<double>(acc[j]) / static_cast<double>(rows))
                : static_cast<T>(acc[j]);
}

// The number of rows when exactly the leading dims are reduced (and some are kept), else 0.
int64_t leading_rows(const Tensor& x, const std::vector<bool>& reduced) {
  size_t lead = 0;
  while (lead < reduced.size() && reduced[lead]) ++lead;
  if (lead == 0 || lead == reduced.size()) return 0;
  for (size_t d = lead; d < reduced.size(); ++d)
    if (reduced[d]) return 0;
  int64_t rows = 1;
  for (size_t d = 0; d < lead; ++d) rows *= x.shape()[d];
  return rows;
}

}  // namespace

void k_sum_mean(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  const Tensor& out = outs[0];
  auto rd = ops::reduce_dims(self.shape(), c.args.ints(1), c.args.flag(2), "sum");
  DType cd = compute_dtype(out.dtype());
  Tensor dst =
      out.dtype() == cd && out.is_contiguous() ? out : empty(out.shape(), cd, out.device());
  bool mean = c.op == OpKind::mean;
  if (int64_t rows = leading_rows(self, rd.reduced);
      rows > 0 && self.is_contiguous() && self.dtype() == cd && self.numel() > 0) {
    KILN_DISPATCH_COMPUTE(cd, c.op, sum_leading<T>(self, rows, mean, dst.data<T>()));
    if (!dst.is_same(out)) copy_into(out, dst);
    return;
  }
  Rows r = to_rows(self, rd.reduced, cd);
  KILN_DISPATCH_COMPUTE(cd, c.op, {
    const T* p = r.data.data<T>();
    T* o = dst.data<T>();
    parallel_for(r.outer, r.inner, [&](int64_t b, int64_t e) {
      if constexpr (std::is_same_v<T, float>) {
        // float rows through the vector row sum (compensated float lanes, met in double)
        with_best_isa([&](auto width) {
          for (int64_t i = b; i < e; ++i) {
            const T* row = p + i * r.inner;  // T is float (the branch compiles for every T)
            double acc = row_sum<float, width.bytes>(
                r.inner, [&](int64_t j) { return static_cast<float>(row[j]); });
            o[i] = static_cast<T>(mean ? acc / static_cast<double>(r.inner) : acc);
          }
        });
      } else {
        for (int64_t i = b; i < e; ++i) {
          Acc<T> acc = 0;
          const T* row = p + i * r.inner;
          for (int64_t j = 0; j < r.inner; ++j)
            acc = backend::wrap_add(acc, static_cast<Acc<T>>(row[j]));
          if (mean)
            o[i] = static_cast<T>(static_cast<double>(acc) / static_cast<double>(r.inner));
          else
            o[i] = static_cast<T>(acc);
        }
      }
    });
  });
  if (!dst.is_same(out)) copy_into(out, dst);
}

namespace {

// The better of `best` and `v` for amax (amin with is_max false); a NaN wins and stays.
// Written as a select, which the loops vectorize or at least do not branch on.
template <typename T>
inline T extreme(T best, T v, bool is_max) {
  bool nan = false;
  if constexpr (std::is_floating_point_v<T>) nan = v != v;
  return nan || (is_max ? v > best : v < best) ? v : best;
}

// amax/amin over trailing dims of at most kFewReduced elements in all (a pooling's
// windows, an as_strided view), read in place: copying such a view dense first cost more
// than the reduction. Returns false, with nothing written, for other calls.
constexpr int64_t kFewReduced = 64;

template <typename T>
bool extreme_in_place(const Tensor& self, const std::vector<bool>& reduced, const Tensor& out,
                      bool is_max) {
  auto rank = static_cast<size_t>(self.dim());
  size_t kept = 0;
  while (kept < rank && !reduced[kept]) ++kept;
  for (size_t d = kept; d < rank; ++d)
    if (!reduced[d]) return false;  // reduced dims must be the trailing ones
  int64_t count = 1;
  for (size_t d = kept; d < rank; ++d) count *= self.size(static_cast<int64_t>(d));
  if (kept == 0 || count == 0 || count > kFewReduced || !out.is_contiguous() ||
      out.dtype() != self.dtype())
    return false;
  // Each output's elements: offsets from its window's first element.
  std::vector<int64_t> at{0};
  for (size_t d = kept; d < rank; ++d) {
    std::vector<int64_t> next;
    for (int64_t base : at)
      for (int64_t i = 0; i < self.size(static_cast<int64_t>(d)); ++i)
        next.push_back(base + i * self.stride(static_cast<int64_t>(d)));
    at = std::move(next);
  }
  Dims outer, in_strides, out_strides;
  int64_t step = 1;
  for (size_t d = kept; d-- > 0;) {
    outer.insert(0, self.size(static_cast<int64_t>(d)));
    in_strides.insert(0, self.stride(static_cast<int64_t>(d)));
    out_strides.insert(0, step);
    step *= self.size(static_cast<int64_t>(d));
  }
  const T* p = self.data<T>();
  T* o = out.data<T>();
  for_each_run<2>(outer, {out_strides, in_strides}, {int64_t{0}, int64_t{0}},
                  [&](int64_t n, std::array<int64_t, 2> off, std::array<int64_t, 2> st) {
                    for (int64_t i = 0; i < n; ++i) {
                      const T* w = p + off[1] + i * st[1];
                      T best = w[at[0]];
                      for (size_t j = 1; j < at.size(); ++j) best = extreme(best, w[at[j]], is_max);
                      o[off[0] + i * st[0]] = best;
                    }
                  });
  return true;
}

}  // namespace

void k_amax(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  auto rd = ops::reduce_dims(self.shape(), c.args.ints(1), c.args.flag(2), "amax");
  DType cd = compute_dtype(self.dtype());
  bool is_max = c.op == OpKind::amax;
  if (cd == self.dtype()) {
    bool done = false;
    KILN_DISPATCH_COMPUTE(cd, c.op, done = extreme_in_place<T>(self, rd.reduced, outs[0], is_max));
    if (done) return;
  }
  Rows r = to_rows(self, rd.reduced, cd);
  Tensor dst = empty(outs[0].shape(), cd, self.device());
  KILN_DISPATCH_COMPUTE(cd, c.op, {
    const T* p = r.data.data<T>();
    T* o = dst.data<T>();
    parallel_for(r.outer, r.inner, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const T* row = p + i * r.inner;
        T best = row[0];
        for (int64_t j = 1; j < r.inner; ++j) best = extreme(best, row[j], is_max);
        o[i] = best;
      }
    });
  });
  copy_into(outs[0], dst);
}

// max/min over one dim (values and first index), and argmax.
void k_max_dim(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  bool argmax = c.op == OpKind::argmax;
  bool is_max = c.op != OpKind::min;
  std::vector<bool> reduced;
  if (argmax && c.args.is_none(1))
    reduced.assign(self.dim(), true);
  else
    reduced = only_dim(self.dim(), wrap_dim(c.args.i64(1), self.dim(), op_name(c.op).data()));
  DType cd = compute_dtype(self.dtype());
  Rows r = to_rows(self, reduced, cd);
  Tensor values = empty(Dims{r.outer}, cd, self.device());
  Tensor indices = argmax ? outs[0] : outs[1];
  KILN_DISPATCH_COMPUTE(cd, c.op, {
    const T* p = r.data.data<T>();
    T* vo = values.data<T>();
    int64_t* io = indices.data<int64_t>();
    parallel_for(r.outer, r.inner, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const T* row = p + i * r.inner;
        int64_t best = 0;
        for (int64_t j = 1; j < r.inner; ++j) {
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(row[best])) break;
            if (std::isnan(row[j])) {
              best = j;
              break;
            }
          }
          if (is_max ? row[j] > row[best] : row[j] < row[best]) best = j;
        }
        vo[i] = row[best];
        io[i] = best;
      }
    });
  });
  if (!argmax)
    copy_into(outs[0], make_view(values, outs[0].shape(), contiguous_strides(outs[0].shape()), 0));
}

// sort and topk, row by row: the row's positions ordered by value, ties by position (so
// the order is stable, and topk's is too); topk keeps the first k.
void k_sort(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  bool topk = c.op == OpKind::topk;
  int64_t d = wrap_dim(c.args.i64(topk ? 2 : 1), self.dim(), op_name(c.op));
  bool descending = c.args.flag(topk ? 3 : 2);  // topk: largest
  DType cd = compute_dtype(self.dtype());
  Rows r = to_rows(self, only_dim(self.dim(), d), cd);
  int64_t n = r.inner;
  int64_t k = topk && self.dim() ? c.args.i64(1) : n;
  Tensor values = moved_last(outs[0], d), indices = moved_last(outs[1], d);
  Tensor vres = empty(values.shape(), cd, self.device()),
         ires = empty(indices.shape(), DType::i64, self.device());
  KILN_DISPATCH_COMPUTE(cd, c.op, {
    const T* p = r.data.data<T>();
    T* vo = vres.data<T>();
    int64_t* io = ires.data<int64_t>();
    parallel_for(r.outer, 8 * n, [&](int64_t b, int64_t e) {
      std::vector<int64_t> order(static_cast<size_t>(n));
      for (int64_t i = b; i < e; ++i) {
        const T* row = p + i * n;
        std::iota(order.begin(), order.end(), int64_t{0});
        auto before = [&](int64_t x, int64_t y) {
          if (backend::sorts_before(row[x], row[y], descending)) return true;
          return !backend::sorts_before(row[y], row[x], descending) && x < y;
        };
        if (k < n)
          std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        else
          std::sort(order.begin(), order.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          vo[i * k + j] = row[order[static_cast<size_t>(j)]];
          io[i * k + j] = order[static_cast<size_t>(j)];
        }
      }
    });
  });
  copy_into(values, vres);
  copy_into(indices, ires);
}

void k_prod(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  const Tensor& out = outs[0];
  auto rd = ops::reduce_dims(self.shape(), c.args.ints(1), c.args.flag(2), "prod");
  DType cd = compute_dtype(out.dtype());
  if (cd == DType::b8) cd = DType::i64;
  Tensor dst = direct_rows(out, cd) ? out : empty(out.shape(), cd, out.device());
  Rows r = to_rows(self, rd.reduced, cd);
  KILN_DISPATCH_COMPUTE(cd, c.op, {
    const T* p = r.data.data<T>();
    T* o = dst.data<T>();
    parallel_for(r.outer, r.inner, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        Acc<T> acc = 1;
        const T* row = p + i * r.inner;
        for (int64_t j = 0; j < r.inner; ++j)
          acc = backend::wrap_mul(acc, static_cast<Acc<T>>(row[j]));
        o[i] = static_cast<T>(acc);
      }
    });
  });
  if (!dst.is_same(out)) copy_into(out, dst);
}

// cumsum / cumprod: each row scanned in order; floats accumulate in double (as PyTorch's
// CPU kernels do), integers wrap.
void k_scan(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  int64_t d = wrap_dim(c.args.i64(1), self.dim(), op_name(c.op));
  DType cd = compute_dtype(outs[0].dtype());
  if (cd == DType::b8) cd = DType::i64;
  Rows r = to_rows(self, only_dim(self.dim(), d), cd);
  Tensor dst = moved_last(outs[0], d);
  Tensor res = direct_rows(dst, cd) ? dst : empty(r.data.shape(), cd, self.device());
  backend::Scan scan = c.op == OpKind::cumsum    ? backend::Scan::sum
                       : c.op == OpKind::cumprod ? backend::Scan::product
                                                 : backend::Scan::logsumexp;
  KILN_DISPATCH_COMPUTE(cd, c.op, {
    const T* p = r.data.data<T>();
    T* o = res.data<T>();
    int64_t n = r.inner;
    parallel_for(r.outer, n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        auto acc = backend::scan_identity<Acc<T>>(scan);
        for (int64_t j = i * n; j < (i + 1) * n; ++j) {
          acc = backend::scan_combine(scan, acc, static_cast<Acc<T>>(p[j]));
          o[j] = static_cast<T>(acc);
        }
      }
    });
  });
  if (res.impl() != dst.impl()) copy_into(dst, res);
}

void k_cumextreme(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  int64_t d = wrap_dim(c.args.i64(1), self.dim(), op_name(c.op));
  DType cd = compute_dtype(self.dtype());
  Rows r = to_rows(self, only_dim(self.dim(), d), cd);
  Tensor values = empty(r.data.shape(), cd, self.device()),
         indices = empty(r.data.shape(), DType::i64, self.device());
  bool is_max = c.op == OpKind::cummax;
  KILN_DISPATCH_COMPUTE(cd, c.op, {
    const T* p = r.data.data<T>();
    T* vo = values.data<T>();
    int64_t* io = indices.data<int64_t>();
    int64_t n = r.inner;
    parallel_for(r.outer, n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        int64_t at = 0;
        for (int64_t j = 0; j < n; ++j) {
          if (j == 0 || backend::takes_over(p[i * n + j], p[i * n + at], is_max)) at = j;
          vo[i * n + j] = p[i * n + at];
          io[i * n + j] = at;
        }
      }
    });
  });
  copy_into(moved_last(outs[0], d), values);
  copy_into(moved_last(outs[1], d), indices);
}

// cumprod's gradient, row by row: x_i's is (the product of the x before it) * R_i with
// R_i = g_i + x_{i+1} R_{i+1} (the sum over k >= i of g_k x_{i+1} ... x_k). No division,
// so rows with zeros are exact.
void k_cumprod_backward(const OpCall& c, std::span<Tensor> outs) {
  GradRows r = grad_rows(c, outs[0]);
  const Rows &rx = r.t, &rg = r.g;
  KILN_DISPATCH_FLOAT(rx.data.dtype(), c.op, {
    const T* px = rx.data.data<T>();
    const T* pg = rg.data.data<T>();
    T* o = r.res.data<T>();
    int64_t n = rx.inner;
    parallel_for(rx.outer, 2 * n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const T* xr = px + i * n;
        const T* gr = pg + i * n;
        T* orow = o + i * n;
        double after = 0;  // R_{j+1}
        for (int64_t j = n - 1; j >= 0; --j) {
          after = (j + 1 < n ? after * static_cast<double>(xr[j + 1]) : 0.0) +
                  static_cast<double>(gr[j]);
          orow[j] = static_cast<T>(after);
        }
        double before = 1;
        for (int64_t j = 0; j < n; ++j) {
          orow[j] = static_cast<T>(before * static_cast<double>(orow[j]));
          before *= static_cast<double>(xr[j]);
        }
      }
    });
  });
  r.finish();
}

void k_var(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  auto rd = ops::reduce_dims(self.shape(), c.args.ints(1), c.args.flag(3), "var");
  Rows r = to_rows(self, rd.reduced, DType::f64);
  Tensor dst = empty(outs[0].shape(), DType::f64, self.device());
  double correction = static_cast<double>(c.args.i64(2));
  const double* p = r.data.data<double>();
  double* o = dst.data<double>();
  parallel_for(r.outer, r.inner, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const double* row = p + i * r.inner;
      double mean = 0, ss = 0;
      for (int64_t j = 0; j < r.inner; ++j) mean += row[j];
      mean /= static_cast<double>(r.inner);
      for (int64_t j = 0; j < r.inner; ++j) ss += (row[j] - mean) * (row[j] - mean);
      o[i] = ss / std::max(0.0, static_cast<double>(r.inner) - correction);
    }
  });
  copy_into(outs[0], dst);
}

// Rows are independent: threads take blocks of rows (a row kernel costs a few
// operations per element, hence the weight given to parallel_for).
void k_softmax(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  int64_t d = wrap_dim(c.args.i64(1), self.dim(), "softmax");
  DType cd = compute_dtype(self.dtype());
  Rows r = to_rows(self, only_dim(self.dim(), d), cd);
  Tensor dst = moved_last(outs[0], d);
  Tensor res = direct_rows(dst, cd) ? dst : empty(r.data.shape(), cd, self.device());
  bool log = c.op == OpKind::log_softmax;
  KILN_DISPATCH_FLOAT(cd, c.op, {
    const T* p = r.data.data<T>();
    T* o = res.data<T>();
    int64_t n = r.inner;
    parallel_for(r.outer, 4 * n, [&](int64_t b, int64_t e) {
      with_best_isa([&](auto width) {
        for (int64_t i = b; i < e; ++i) {
          const T* row = p + i * n;
          T* orow = o + i * n;
          if (n == 0) continue;
          T mx = row_max<width.bytes>(row, n);
          // The exps go to the output row first, in a loop of their own: inside the
          // row sum's lane-sized steps the vectorizer's choice for them was fragile
          // (one change of an inlined helper made AVX2's softmax 3x slower).
          for (int64_t j = 0; j < n; ++j) orow[j] = vexp_nonpositive(row[j] - mx);
          T sum = static_cast<T>(row_sum<T, width.bytes>(n, [&](int64_t j) { return orow[j]; }));
          if (log) {
            T lse = std::log(sum);
            for (int64_t j = 0; j < n; ++j) orow[j] = row[j] - mx - lse;
          } else {
            T inv = T(1) / sum;  // a product per element, as PyTorch's vectorized softmax
            for (int64_t j = 0; j < n; ++j) orow[j] *= inv;
          }
        }
      });
    });
  });
  if (res.impl() != dst.impl()) copy_into(dst, res);
}

// softmax's gradient y (g - sum(g y)) and log_softmax's g - exp(y) sum(g), row by row:
// one sum and one pass per row where the composite took four ops and three temporaries.
void k_softmax_backward(const OpCall& c, std::span<Tensor> outs) {
  GradRows r = grad_rows(c, outs[0]);
  const Rows &ry = r.t, &rg = r.g;
  bool log = c.op == OpKind::log_softmax_backward;
  KILN_DISPATCH_FLOAT(ry.data.dtype(), c.op, {
    const T* py = ry.data.data<T>();
    const T* pg = rg.data.data<T>();
    T* o = r.res.data<T>();
    int64_t n = ry.inner;
    parallel_for(ry.outer, 4 * n, [&](int64_t b, int64_t e) {
      with_best_isa([&](auto width) {
        for (int64_t i = b; i < e; ++i) {
          const T* yr = py + i * n;
          const T* gr = pg + i * n;
          T* orow = o + i * n;
          if (log) {
            T s = static_cast<T>(row_sum<T, width.bytes>(n, [&](int64_t j) { return gr[j]; }));
            for (int64_t j = 0; j < n; ++j) orow[j] = gr[j] - vexp(yr[j]) * s;
          } else {
            T s = static_cast<T>(
                row_sum<T, width.bytes>(n, [&](int64_t j) { return gr[j] * yr[j]; }));
            for (int64_t j = 0; j < n; ++j) orow[j] = yr[j] * (gr[j] - s);
          }
        }
      });
    });
  });
  r.finish();
}

void k_layer_norm(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& x = c.args.tensor(0);
  backend::NormArgs a = backend::norm_args(c);
  bool rms = a.rms;
  DType cd = compute_dtype(x.dtype());
  Rows r = to_rows(x, a.rows, cd);
  Tensor w = a.weight, b = a.bias;
  if (w.defined()) w = contiguous(cast(w, cd));
  if (b.defined()) b = contiguous(cast(b, cd));
  Tensor res = direct_rows(outs[0], cd) ? outs[0] : empty(x.shape(), cd, x.device());
  KILN_DISPATCH_FLOAT(cd, c.op, {
    T eps = a.epsilon<T>();
    const T* p = r.data.data<T>();
    T* o = res.data<T>();
    const T* pw = w.defined() ? w.data<T>() : nullptr;
    const T* pb = b.defined() ? b.data<T>() : nullptr;
    int64_t n = r.inner;
    double dn = static_cast<double>(n);
    parallel_for(r.outer, 4 * n, [&](int64_t lo, int64_t hi) {
      with_best_isa([&](auto width) {
        for (int64_t i = lo; i < hi; ++i) {
          const T* row = p + i * n;
          T* orow = o + i * n;
          T mean = rms ? T(0)
                       : static_cast<T>(
                             row_sum<T, width.bytes>(n, [&](int64_t j) { return row[j]; }) / dn);
          double ss = row_sum<T, width.bytes>(
              n, [&](int64_t j) { return (row[j] - mean) * (row[j] - mean); });
          T inv = T(1) / std::sqrt(T(ss / dn) + eps);
          if (pw && pb)
            for (int64_t j = 0; j < n; ++j) orow[j] = (row[j] - mean) * inv * pw[j] + pb[j];
          else if (pw)
            for (int64_t j = 0; j < n; ++j) orow[j] = (row[j] - mean) * inv * pw[j];
          else if (pb)
            for (int64_t j = 0; j < n; ++j) orow[j] = (row[j] - mean) * inv + pb[j];
          else
            for (int64_t j = 0; j < n; ++j) orow[j] = (row[j] - mean) * inv;
        }
      });
    });
  });
  if (res.impl() != outs[0].impl()) copy_into(outs[0], res);
}

// Per row, the statistics again (as the forward computes them), then
// d input = rstd (gh - mean(gh) - xhat mean(gh xhat)) with gh = g w. The weight's and
// bias's gradients are column sums over the rows: each fixed block of rows adds its own
// in double, and the blocks are added in order, so no result depends on the thread count.
void k_layer_norm_backward(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& x = c.args.tensor(1);
  DType cd = compute_dtype(x.dtype());
  std::vector<bool> last = backend::last_dims(x.dim(), static_cast<int64_t>(c.args.ints(2).size()));
  Rows r = to_rows(x, last, cd);
  Rows rg = to_rows(c.args.tensor(0), last, cd);
  Tensor w = c.args.opt_tensor(3);
  if (w.defined()) w = contiguous(cast(w, cd));
  Tensor dx = direct_rows(outs[0], cd) ? outs[0] : empty(x.shape(), cd, x.device());
  const int64_t n = r.inner, rows = r.outer;
  constexpr int64_t kBlocks = 64;  // at most this many partial sums per column
  const int64_t per = std::max<int64_t>(1, (rows + kBlocks - 1) / kBlocks);
  const int64_t blocks = (rows + per - 1) / per;
  std::vector<double> part(static_cast<size_t>(2 * blocks * n));  // per block: d weight, d bias
  KILN_DISPATCH_FLOAT(cd, c.op, {
    const T eps = T(c.args.f64(4));
    const T* px = r.data.data<T>();
    const T* pg = rg.data.data<T>();
    const T* pw = w.defined() ? w.data<T>() : nullptr;
    T* o = dx.data<T>();
    const double dn = static_cast<double>(n);
    parallel_for(blocks, 8 * per * n, [&](int64_t lo, int64_t hi) {
      std::vector<T> scaled(static_cast<size_t>(n));  // the row's g * weight
      with_best_isa([&](auto width) {
        for (int64_t blk = lo; blk < hi; ++blk) {
          double* dw = part.data() + 2 * blk * n;
          double* db = dw + n;
          for (int64_t i = blk * per; i < std::min(rows, (blk + 1) * per); ++i) {
            const T* xr = px + i * n;
            const T* gr = pg + i * n;
            T* orow = o + i * n;
            // g * weight once per row, in a loop of its own: the sums below then read an
            // array (with the select inside their lane-sized steps AVX2 ran at half speed)
            T* sg = scaled.data();
            for (int64_t j = 0; j < n; ++j) sg[j] = pw ? gr[j] * pw[j] : gr[j];
            auto gh = [&](int64_t j) { return sg[j]; };
            T mean =
                static_cast<T>(row_sum<T, width.bytes>(n, [&](int64_t j) { return xr[j]; }) / dn);
            double ss = row_sum<T, width.bytes>(
                n, [&](int64_t j) { return (xr[j] - mean) * (xr[j] - mean); });
            T rstd = T(1) / std::sqrt(T(ss / dn) + eps);
            T m1 = static_cast<T>(row_sum<T, width.bytes>(n, gh) / dn);
            T m2 =
                static_cast<T>(row_sum<T, width.bytes>(
                                   n, [&](int64_t j) { return gh(j) * ((xr[j] - mean) * rstd); }) /
                               dn);
            for (int64_t j = 0; j < n; ++j) {
              T xhat = (xr[j] - mean) * rstd;
              orow[j] = rstd * (gh(j) - m1 - xhat * m2);
              dw[j] += static_cast<double>(gr[j] * xhat);
              db[j] += static_cast<double>(gr[j]);
            }
          }
        }
      });
    });
  });
  if (dx.impl() != outs[0].impl()) copy_into(outs[0], dx);
  Tensor dw = empty(outs[1].shape(), DType::f64, x.device()),
         db = empty(outs[2].shape(), DType::f64, x.device());
  double *pw = dw.data<double>(), *pb = db.data<double>();
  std::fill(pw, pw + n, 0.0);
  std::fill(pb, pb + n, 0.0);
  for (int64_t blk = 0; blk < blocks; ++blk)
    for (int64_t j = 0; j < n; ++j) {
      pw[j] += part[static_cast<size_t>(2 * blk * n + j)];
      pb[j] += part[static_cast<size_t>((2 * blk + 1) * n + j)];
    }
  copy_into(outs[1], dw);
  copy_into(outs[2], db);
}

}  // namespace kiln::cpu

// Reductions, softmax and normalization on CUDA devices. As on the CPU, each op moves
// the reduced dims last and makes the data a dense [outer, inner] matrix in the compute
// dtype; then one thread block works on each row.
#include <cstring>
#include <limits>

#include "kiln/backend/cuda/common.cuh"
#include "kiln/backend/cuda/element_ops.h"
#include "kiln/ops/meta.h"

namespace kiln::cuda {

using ops::OpKind;

namespace {

constexpr int kBlock = 256;  // threads per row; a power of two

using backend::moved_last;
using backend::only_dim;
using backend::Rows;

// Kept dims first (in order), then reduced dims; densified in `dtype`.
Rows to_rows(const Tensor& x, const std::vector<bool>& reduced, DType dtype) {
  return backend::to_rows(x, reduced, dtype,
                          [&](const Tensor& view, DType d) { return dense(view, d, x.device()); });
}

template <typename T>
const T* row_ptr(const Rows& r) {
  return static_cast<const T*>(r.data.storage()->data) + r.data.offset();
}
template <typename T>
T* dense_ptr(const Tensor& t) {
  return static_cast<T*>(t.storage()->data) + t.offset();
}

// One value exchanged between the lanes of a warp (types under 32 bits widened;
// structs such as Arg<T> moved as 32-bit words).
template <typename A>
__device__ A shuffle_xor(A v, int lane_mask) {
  constexpr unsigned kAll = 0xffffffffu;
  if constexpr (std::is_arithmetic_v<A> && sizeof(A) < 4) {
    return static_cast<A>(__shfl_xor_sync(kAll, static_cast<int>(v), lane_mask));
  } else if constexpr (std::is_arithmetic_v<A>) {
    return __shfl_xor_sync(kAll, v, lane_mask);
  } else {
    static_assert(sizeof(A) % 4 == 0, "shuffled structs are whole 32-bit words");
    unsigned words[sizeof(A) / 4];
    memcpy(words, &v, sizeof(A));
    for (unsigned& w : words) w = __shfl_xor_sync(kAll, w, lane_mask);
    memcpy(&v, words, sizeof(A));
    return v;
  }
}

// Reduction over the block's kBlock threads: within each warp by shuffles, then the
// warps' results through shared memory; every thread gets the result. `combine` must
// be commutative (the lanes pair up in butterfly order).
template <typename A, typename F>
__device__ A block_reduce(A v, F combine) {
  constexpr int kWarps = kBlock / 32;
  __shared__ alignas(16) unsigned char raw[kWarps * sizeof(A)];
  A* partial = reinterpret_cast<A*>(raw);
  for (int m = 16; m > 0; m >>= 1) v = combine(v, shuffle_xor(v, m));
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  v = partial[0];
  for (int w = 1; w < kWarps; ++w) v = combine(v, partial[w]);
  __syncthreads();  // the next call reuses `partial`
  return v;
}
struct Plus {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return a + b;
  }
};
struct Times {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return backend::wrap_mul(a, b);
  }
};

template <typename T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

// Row reductions run `parts` blocks per row (block b: row b / parts, every
// (parts * kBlock)-th element from its own start) and write one result per block:
// with parts > 1 the results are partial and a second launch reduces them.
template <typename T, typename O>
__global__ void sum_rows(const T* in, O* out, int64_t inner, int parts, bool mean, int64_t count) {
  const T* p = in + static_cast<int64_t>(blockIdx.x / parts) * inner;
  int64_t step = static_cast<int64_t>(parts) * kBlock;
  Acc<T> acc = 0;
  for (int64_t j = (blockIdx.x % parts) * int64_t{kBlock} + threadIdx.x; j < inner; j += step)
    acc += static_cast<Acc<T>>(p[j]);
  acc = block_reduce(acc, Plus{});
  if (threadIdx.x == 0)
    out[blockIdx.x] = mean ? static_cast<O>(static_cast<double>(acc) / static_cast<double>(count))
                           : static_cast<O>(acc);
}

template <typename T>
__global__ void extreme_rows(const T* in, T* out, int64_t inner, int parts, bool is_max) {
  const T* p = in + static_cast<int64_t>(blockIdx.x / parts) * inner;
  int64_t step = static_cast<int64_t>(parts) * kBlock;
  auto pick = [is_max](T a, T b) { return pick_extreme(a, b, is_max); };
  T best = extreme_identity<T>(is_max);
  for (int64_t j = (blockIdx.x % parts) * int64_t{kBlock} + threadIdx.x; j < inner; j += step)
    best = pick(best, p[j]);
  best = block_reduce(best, pick);
  if (threadIdx.x == 0) out[blockIdx.x] = best;
}

template <typename T>
__global__ void arg_rows(const T* in, T* values, int64_t* indices, int64_t inner, bool is_max) {
  const T* p = in + blockIdx.x * inner;
  auto pick = [is_max](Arg<T> a, Arg<T> b) { return pick_arg(a, b, is_max); };
  Arg<T> best{T(0), kNoIndex};
  for (int64_t j = threadIdx.x; j < inner; j += kBlock) best = pick(best, Arg<T>{p[j], j});
  best = block_reduce(best, pick);
  if (threadIdx.x == 0) {
    if (values) values[blockIdx.x] = best.v;
    indices[blockIdx.x] = best.i;
  }
}

template <typename T>
__global__ void prod_rows(const T* in, T* out, int64_t inner) {
  const T* p = in + blockIdx.x * inner;
  Acc<T> acc = 1;
  for (int64_t j = threadIdx.x; j < inner; j += kBlock)
    acc = backend::wrap_mul(acc, static_cast<Acc<T>>(p[j]));
  acc = block_reduce(acc, Times{});
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<T>(acc);
}

// cumsum / cumprod of each row in T (f32 sums stay f32, as PyTorch's CUDA kernels):
// each thread scans its own chunk, the block scans the chunk totals, then each thread
// rescans its chunk from the total before it.
template <typename T>
__global__ void scan_rows(const T* in, T* out, int64_t n, backend::Scan scan) {
  __shared__ T totals[kBlock];
  const T* row = in + blockIdx.x * n;
  T* o = out + blockIdx.x * n;
  auto combine = [scan](T a, T b) { return backend::scan_combine(scan, a, b); };
  const T id = backend::scan_identity<T>(scan);
  int64_t chunk = (n + kBlock - 1) / kBlock;
  int64_t lo = threadIdx.x * chunk;
  int64_t hi = lo + chunk < n ? lo + chunk : n;
  T acc = id;
  for (int64_t j = lo; j < hi; ++j) acc = combine(acc, row[j]);
  totals[threadIdx.x] = acc;
  __syncthreads();
  for (int s = 1; s < kBlock; s <<= 1) {  // inclusive scan of the totals
    T before = threadIdx.x >= s ? totals[threadIdx.x - s] : id;
    __syncthreads();
    totals[threadIdx.x] = combine(before, totals[threadIdx.x]);
    __syncthreads();
  }
  acc = threadIdx.x ? totals[threadIdx.x - 1] : id;
  for (int64_t j = lo; j < hi; ++j) o[j] = acc = combine(acc, row[j]);
}

// cummax / cummin, a thread per row.
template <typename T>
__global__ void cumextreme_rows(const T* in, T* values, int64_t* indices, int64_t rows, int64_t n,
                                bool is_max) {
  int64_t r = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (r >= rows) return;
  const T* row = in + r * n;
  int64_t at = 0;
  for (int64_t j = 0; j < n; ++j) {
    if (j == 0 || backend::takes_over(row[j], row[at], is_max)) at = j;
    values[r * n + j] = row[at];
    indices[r * n + j] = at;
  }
}

// cumprod's gradient, a thread per row (see the CPU kernel for the recurrence).
template <typename T>
__global__ void cumprod_backward_rows(const T* g, const T* x, T* out, int64_t rows, int64_t n) {
  int64_t r = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (r >= rows) return;
  const T* xr = x + r * n;
  const T* gr = g + r * n;
  T* o = out + r * n;
  T after = 0;
  for (int64_t j = n - 1; j >= 0; --j)
    o[j] = after = (j + 1 < n ? after * xr[j + 1] : T(0)) + gr[j];
  T before = 1;
  for (int64_t j = 0; j < n; ++j) {
    o[j] = before * o[j];
    before *= xr[j];
  }
}

__global__ void var_rows(const double* in, double* out, int64_t inner, double correction) {
  const double* p = in + blockIdx.x * inner;
  double s = 0;
  for (int64_t j = threadIdx.x; j < inner; j += kBlock) s += p[j];
  double mean = block_reduce(s, Plus{}) / static_cast<double>(inner);
  double ss = 0;
  for (int64_t j = threadIdx.x; j < inner; j += kBlock) ss += (p[j] - mean) * (p[j] - mean);
  ss = block_reduce(ss, Plus{});
  if (threadIdx.x == 0) out[blockIdx.x] = ss / fmax(0.0, static_cast<double>(inner) - correction);
}

template <typename T>
__global__ void softmax_rows(const T* in, T* out, int64_t inner, bool log_form) {
  const T* p = in + blockIdx.x * inner;
  T* o = out + blockIdx.x * inner;
  struct Max {
    __device__ T operator()(T a, T b) const { return a > b ? a : b; }
  };
  T mx = -std::numeric_limits<T>::infinity();
  for (int64_t j = threadIdx.x; j < inner; j += kBlock) mx = p[j] > mx ? p[j] : mx;
  mx = block_reduce(mx, Max{});
  T sum = 0;
  for (int64_t j = threadIdx.x; j < inner; j += kBlock) sum += exp(p[j] - mx);
  sum = block_reduce(sum, Plus{});
  if (log_form) {
    T lse = log(sum);
    for (int64_t j = threadIdx.x; j < inner; j += kBlock) o[j] = p[j] - mx - lse;
  } else {
    for (int64_t j = threadIdx.x; j < inner; j += kBlock) o[j] = exp(p[j] - mx) / sum;
  }
}

// Rows of at most 32 * K elements: one warp per row, its values held in registers
// (K per lane), read once and written once; a block of kBlock threads takes kBlock / 32
// rows. The block-per-row kernel above waits on its barriers where rows are short.
template <typename T, int K>
__global__ void softmax_warp_rows(const T* in, T* out, int64_t rows, int64_t inner, bool log_form) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * (kBlock / 32) + threadIdx.x / 32;
  if (row >= rows) return;  // whole warps leave together
  int lane = threadIdx.x % 32;
  const T* p = in + row * inner;
  T v[K];
  T mx = -std::numeric_limits<T>::infinity();
#pragma unroll
  for (int k = 0; k < K; ++k) {
    int64_t j = lane + 32 * k;
    v[k] = j < inner ? p[j] : -std::numeric_limits<T>::infinity();
    mx = v[k] > mx ? v[k] : mx;
  }
  for (int m = 16; m > 0; m >>= 1) {
    T other = __shfl_xor_sync(0xffffffffu, mx, m);
    mx = other > mx ? other : mx;
  }
  T sum = 0;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (lane + 32 * k < inner) {
      T e = exp(v[k] - mx);
      sum += e;
      if (!log_form) v[k] = e;
    }
  }
  for (int m = 16; m > 0; m >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, m);
  T* o = out + row * inner;
  T lse = log(sum);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    int64_t j = lane + 32 * k;
    if (j < inner) o[j] = log_form ? v[k] - mx - lse : v[k] / sum;
  }
}

// softmax's gradient y (g - sum(g y)) or log_softmax's g - exp(y) sum(g), per row.
template <typename T>
__global__ void softmax_backward_rows(const T* g, const T* y, T* out, int64_t inner,
                                      bool log_form) {
  const T* gp = g + blockIdx.x * inner;
  const T* yp = y + blockIdx.x * inner;
  T* o = out + blockIdx.x * inner;
  double s = 0;
  for (int64_t j = threadIdx.x; j < inner; j += kBlock) s += log_form ? gp[j] : gp[j] * yp[j];
  T total = static_cast<T>(block_reduce(s, Plus{}));
  for (int64_t j = threadIdx.x; j < inner; j += kBlock)
    o[j] = log_form ? gp[j] - exp(yp[j]) * total : yp[j] * (gp[j] - total);
}

template <typename T>
__global__ void norm_rows(const T* in, T* out, const T* w, const T* b, int64_t inner, T eps,
                          bool rms) {
  const T* p = in + blockIdx.x * inner;
  T* o = out + blockIdx.x * inner;
  double mean = 0;
  if (!rms) {
    double s = 0;
    for (int64_t j = threadIdx.x; j < inner; j += kBlock) s += p[j];
    mean = block_reduce(s, Plus{}) / static_cast<double>(inner);
  }
  double ss = 0;
  for (int64_t j = threadIdx.x; j < inner; j += kBlock) ss += (p[j] - mean) * (p[j] - mean);
  ss = block_reduce(ss, Plus{});
  T inv = T(1) / sqrt(T(ss / static_cast<double>(inner)) + eps);
  for (int64_t j = threadIdx.x; j < inner; j += kBlock) {
    T v = (p[j] - T(mean)) * inv;
    if (w) v *= w[j];
    if (b) v += b[j];
    o[j] = v;
  }
}

// layer_norm's input gradient, one block per row; the row's mean and rstd are kept in
// `stats` ([2, rows]) for the column sums.
template <typename T>
__global__ void norm_backward_rows(const T* x, const T* g, const T* w, T* dx, T* stats,
                                   int64_t rows, int64_t inner, T eps) {
  const T* p = x + blockIdx.x * inner;
  const T* gr = g + blockIdx.x * inner;
  T* o = dx + blockIdx.x * inner;
  double s = 0;
  for (int64_t j = threadIdx.x; j < inner; j += kBlock) s += p[j];
  T mean = T(block_reduce(s, Plus{}) / static_cast<double>(inner));
  double ss = 0;
  for (int64_t j = threadIdx.x; j < inner; j += kBlock) ss += (p[j] - mean) * (p[j] - mean);
  T rstd = T(1) / sqrt(T(block_reduce(ss, Plus{}) / static_cast<double>(inner)) + eps);
  double s1 = 0, s2 = 0;
  for (int64_t j = threadIdx.x; j < inner; j += kBlock) {
    T gh = w ? gr[j] * w[j] : gr[j];
    s1 += gh;
    s2 += gh * ((p[j] - mean) * rstd);
  }
  T m1 = T(block_reduce(s1, Plus{}) / static_cast<double>(inner));
  T m2 = T(block_reduce(s2, Plus{}) / static_cast<double>(inner));
  for (int64_t j = threadIdx.x; j < inner; j += kBlock) {
    T gh = w ? gr[j] * w[j] : gr[j];
    o[j] = rstd * (gh - m1 - (p[j] - mean) * rstd * m2);
  }
  if (threadIdx.x == 0) {
    stats[blockIdx.x] = mean;
    stats[rows + blockIdx.x] = rstd;
  }
}

// The weight's and bias's gradients: one thread per column sums its rows in order.
template <typename T>
__global__ void norm_backward_columns(const T* x, const T* g, const T* stats, T* dw, T* db,
                                      int64_t rows, int64_t inner) {
  int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= inner) return;
  double sw = 0, sb = 0;
  for (int64_t i = 0; i < rows; ++i) {
    T gv = g[i * inner + j];
    sw += gv * ((x[i * inner + j] - stats[i]) * stats[rows + i]);
    sb += gv;
  }
  dw[j] = T(sw);
  db[j] = T(sb);
}

// d bias of linear_backward: one thread per column sums it over the rows, in double.
template <typename T>
__global__ void column_sums(const T* g, T* out, int64_t rows, int64_t cols) {
  int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  double s = 0;
  for (int64_t i = 0; i < rows; ++i) s += g[i * cols + j];
  out[j] = T(s);
}

// A row op of (grad_output, t, int dim), softmax's and cumprod's gradients: both as dense
// rows along dim in t's compute dtype, and where the result rows go (the output itself
// when it has their layout; finish() copies them there otherwise).
struct GradRows {
  Rows g, t;
  Tensor dst, res;
  void finish() const {
    if (!res.is_same(dst)) copy_into(dst, res);
  }
};
GradRows grad_rows(const OpCall& c, const Tensor& out) {
  const Tensor& t = c.args.tensor(1);
  int64_t d = wrap(c.args.i64(2), t.dim());
  DType cd = compute_dtype(t.dtype());
  std::vector<bool> reduced = only_dim(t.dim(), d);
  GradRows r{to_rows(c.args.tensor(0), reduced, cd), to_rows(t, reduced, cd), moved_last(out, d),
             Tensor()};
  bool direct = r.dst.is_contiguous() && r.dst.dtype() == cd;
  r.res = direct ? r.dst : empty(r.t.data.shape(), cd, t.device());
  return r;
}

// Launch over `rows` blocks (none when there are no rows).
template <typename K, typename... A>
void launch_rows(int64_t rows, K kernel, A... args) {
  if (rows == 0) return;
  KILN_CHECK(rows < (int64_t(1) << 31), unsupported, "[cuda] too many rows: {}", rows);
  kernel<<<static_cast<unsigned>(rows), kBlock, 0, stream()>>>(args...);
  check_launch("row kernel launch");
}

// Blocks per row for a sum or an extreme: a few long rows (a full reduction) are split
// until the GPU has a few blocks per multiprocessor, each part at least 8 * kBlock long.
int parts_per_row(int64_t rows, int64_t inner) {
  constexpr int64_t kTargetBlocks = 4 * 132;  // an H100/H200 has 132 multiprocessors
  if (rows >= kTargetBlocks || inner < 16 * kBlock) return 1;
  return static_cast<int>(std::min((kTargetBlocks + rows - 1) / rows, inner / (8 * kBlock)));
}

#define KILN_CUDA_DISPATCH_COMPUTE(dtype, op, ...) \
  switch (dtype) {                                 \
    KILN_CUDA_CASE(f32, float, __VA_ARGS__)        \
    KILN_CUDA_CASE(f64, double, __VA_ARGS__)       \
    KILN_CUDA_INT_CASES(__VA_ARGS__)               \
    KILN_CUDA_UNSUPPORTED(dtype, op)               \
  }

}  // namespace

void k_sum_mean(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  const Tensor& out = outs[0];
  auto rd = ops::reduce_dims(self.shape(), c.args.ints(1), c.args.flag(2), "sum");
  DType cd = compute_dtype(out.dtype());
  if (cd == DType::b8) cd = DType::i64;
  Rows r = to_rows(self, rd.reduced, cd);
  Tensor dst = out.dtype() == cd ? out : empty(out.shape(), cd, out.device());
  bool mean = c.op == OpKind::mean;
  int parts = parts_per_row(r.outer, r.inner);
  KILN_CUDA_DISPATCH_COMPUTE(cd, c.op, {
    if (parts == 1) {
      launch_rows(r.outer, sum_rows<T, T>, row_ptr<T>(r), dense_ptr<T>(dst), r.inner, 1, mean,
                  r.inner);
    } else {  // partial sums in the accumulator's type, then their sums
      using A = Acc<T>;
      Tensor partial = empty(Dims{r.outer * parts},
                             std::is_floating_point_v<A> ? DType::f64 : DType::i64, self.device());
      launch_rows(r.outer * parts, sum_rows<T, A>, row_ptr<T>(r), dense_ptr<A>(partial), r.inner,
                  parts, false, int64_t{0});
      launch_rows(r.outer, sum_rows<A, T>, dense_ptr<A>(partial), dense_ptr<T>(dst), int64_t{parts},
                  1, mean, r.inner);
    }
  });
  if (!dst.is_same(out)) copy_into(out, dst);
}

void k_amax(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  auto rd = ops::reduce_dims(self.shape(), c.args.ints(1), c.args.flag(2), "amax");
  DType cd = compute_dtype(self.dtype());
  if (cd == DType::b8) cd = DType::u8;
  Rows r = to_rows(self, rd.reduced, cd);
  Tensor dst = outs[0].dtype() == cd ? outs[0] : empty(outs[0].shape(), cd, self.device());
  bool is_max = c.op == OpKind::amax;
  int parts = parts_per_row(r.outer, r.inner);
  KILN_CUDA_DISPATCH_COMPUTE(cd, c.op, {
    if (parts == 1) {
      launch_rows(r.outer, extreme_rows<T>, row_ptr<T>(r), dense_ptr<T>(dst), r.inner, 1, is_max);
    } else {
      Tensor partial = empty(Dims{r.outer * parts}, cd, self.device());
      launch_rows(r.outer * parts, extreme_rows<T>, row_ptr<T>(r), dense_ptr<T>(partial), r.inner,
                  parts, is_max);
      launch_rows(r.outer, extreme_rows<T>, dense_ptr<T>(partial), dense_ptr<T>(dst),
                  int64_t{parts}, 1, is_max);
    }
  });
  if (!dst.is_same(outs[0])) copy_into(outs[0], dst);
}

void k_max_dim(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  bool argmax = c.op == OpKind::argmax;
  bool is_max = c.op != OpKind::min;
  std::vector<bool> reduced;
  if (argmax && c.args.is_none(1))
    reduced.assign(self.dim(), true);
  else
    reduced = only_dim(self.dim(), wrap(c.args.i64(1), self.dim()));
  DType cd = compute_dtype(self.dtype());
  if (cd == DType::b8) cd = DType::u8;
  Rows r = to_rows(self, reduced, cd);
  Tensor values = empty(Dims{r.outer}, cd, self.device());
  const Tensor& indices = argmax ? outs[0] : outs[1];
  KILN_CUDA_DISPATCH_COMPUTE(cd, c.op, {
    launch_rows(r.outer, arg_rows<T>, row_ptr<T>(r), dense_ptr<T>(values),
                dense_ptr<int64_t>(indices), r.inner, is_max);
  });
  if (!argmax)
    copy_into(outs[0], make_view(values, outs[0].shape(), contiguous_strides(outs[0].shape()), 0));
}

void k_prod(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  const Tensor& out = outs[0];
  auto rd = ops::reduce_dims(self.shape(), c.args.ints(1), c.args.flag(2), "prod");
  DType cd = compute_dtype(out.dtype());
  if (cd == DType::b8) cd = DType::i64;
  Rows r = to_rows(self, rd.reduced, cd);
  Tensor dst = out.dtype() == cd ? out : empty(out.shape(), cd, out.device());
  KILN_CUDA_DISPATCH_COMPUTE(
      cd, c.op, launch_rows(r.outer, prod_rows<T>, row_ptr<T>(r), dense_ptr<T>(dst), r.inner));
  if (!dst.is_same(out)) copy_into(out, dst);
}

void k_scan(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  int64_t d = wrap(c.args.i64(1), self.dim());
  DType cd = compute_dtype(outs[0].dtype());
  if (cd == DType::b8) cd = DType::i64;
  Rows r = to_rows(self, only_dim(self.dim(), d), cd);
  Tensor target = moved_last(outs[0], d);
  bool direct = target.is_contiguous() && target.dtype() == cd;
  Tensor res = direct ? target : empty(r.data.shape(), cd, self.device());
  backend::Scan scan = c.op == OpKind::cumsum    ? backend::Scan::sum
                       : c.op == OpKind::cumprod ? backend::Scan::product
                                                 : backend::Scan::logsumexp;
  KILN_CUDA_DISPATCH_COMPUTE(
      cd, c.op,
      launch_rows(r.outer, scan_rows<T>, row_ptr<T>(r), dense_ptr<T>(res), r.inner, scan));
  if (!direct) copy_into(target, res);
}

void k_cumextreme(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  int64_t d = wrap(c.args.i64(1), self.dim());
  DType cd = compute_dtype(self.dtype());
  if (cd == DType::b8) cd = DType::u8;
  Rows r = to_rows(self, only_dim(self.dim(), d), cd);
  Tensor values = empty(r.data.shape(), cd, self.device()),
         indices = empty(r.data.shape(), DType::i64, self.device());
  bool is_max = c.op == OpKind::cummax;
  int64_t blocks = (r.outer + kBlock - 1) / kBlock;
  KILN_CUDA_DISPATCH_COMPUTE(
      cd, c.op,
      launch_rows(blocks, cumextreme_rows<T>, row_ptr<T>(r), dense_ptr<T>(values),
                  dense_ptr<int64_t>(indices), r.outer, r.inner, is_max));
  copy_into(moved_last(outs[0], d), values);
  copy_into(moved_last(outs[1], d), indices);
}

void k_cumprod_backward(const OpCall& c, std::span<Tensor> outs) {
  GradRows r = grad_rows(c, outs[0]);
  int64_t blocks = (r.t.outer + kBlock - 1) / kBlock;
  switch (r.t.data.dtype()) {
    KILN_CUDA_CASE(f32, float,
                   launch_rows(blocks, cumprod_backward_rows<T>, row_ptr<T>(r.g), row_ptr<T>(r.t),
                               dense_ptr<T>(r.res), r.t.outer, r.t.inner))
    KILN_CUDA_CASE(f64, double,
                   launch_rows(blocks, cumprod_backward_rows<T>, row_ptr<T>(r.g), row_ptr<T>(r.t),
                               dense_ptr<T>(r.res), r.t.outer, r.t.inner))
    KILN_CUDA_UNSUPPORTED(r.t.data.dtype(), c.op)
  }
  r.finish();
}

void k_var(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  auto rd = ops::reduce_dims(self.shape(), c.args.ints(1), c.args.flag(3), "var");
  Rows r = to_rows(self, rd.reduced, DType::f64);
  Tensor dst =
      outs[0].dtype() == DType::f64 ? outs[0] : empty(outs[0].shape(), DType::f64, self.device());
  launch_rows(r.outer, var_rows, row_ptr<double>(r), dense_ptr<double>(dst), r.inner,
              static_cast<double>(c.args.i64(2)));
  if (!dst.is_same(outs[0])) copy_into(outs[0], dst);
}

void k_softmax(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  int64_t d = wrap(c.args.i64(1), self.dim());
  DType cd = compute_dtype(self.dtype());
  Rows r = to_rows(self, only_dim(self.dim(), d), cd);
  // Straight into the output when it is already the dense row layout (dim last).
  Tensor target = moved_last(outs[0], d);
  bool direct = target.is_contiguous() && target.dtype() == cd;
  Tensor res = direct ? target : empty(r.data.shape(), cd, self.device());
  bool log_form = c.op == OpKind::log_softmax;
  auto run = [&]<typename T>(T*) {
    const T* in = row_ptr<T>(r);
    T* o = dense_ptr<T>(res);
    auto warp_rows = [&](auto kernel) {
      constexpr int64_t kRowsPerBlock = kBlock / 32;
      launch_rows((r.outer + kRowsPerBlock - 1) / kRowsPerBlock, kernel, in, o, r.outer, r.inner,
                  log_form);
    };
    if (r.inner <= 32)
      warp_rows(softmax_warp_rows<T, 1>);
    else if (r.inner <= 128)
      warp_rows(softmax_warp_rows<T, 4>);
    else if (r.inner <= 512)
      warp_rows(softmax_warp_rows<T, 16>);
    else if (r.inner <= 1024)
      warp_rows(softmax_warp_rows<T, 32>);
    else
      launch_rows(r.outer, softmax_rows<T>, in, o, r.inner, log_form);
  };
  switch (cd) {
    KILN_CUDA_CASE(f32, float, run(static_cast<T*>(nullptr)))
    KILN_CUDA_CASE(f64, double, run(static_cast<T*>(nullptr)))
    KILN_CUDA_UNSUPPORTED(cd, c.op)
  }
  if (!direct) copy_into(target, res);
}

void k_softmax_backward(const OpCall& c, std::span<Tensor> outs) {
  GradRows r = grad_rows(c, outs[0]);
  bool log_form = c.op == OpKind::log_softmax_backward;
  switch (r.t.data.dtype()) {
    KILN_CUDA_CASE(f32, float,
                   launch_rows(r.t.outer, softmax_backward_rows<T>, row_ptr<T>(r.g),
                               row_ptr<T>(r.t), dense_ptr<T>(r.res), r.t.inner, log_form))
    KILN_CUDA_CASE(f64, double,
                   launch_rows(r.t.outer, softmax_backward_rows<T>, row_ptr<T>(r.g),
                               row_ptr<T>(r.t), dense_ptr<T>(r.res), r.t.inner, log_form))
    KILN_CUDA_UNSUPPORTED(r.t.data.dtype(), c.op)
  }
  r.finish();
}

void k_layer_norm(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& x = c.args.tensor(0);
  backend::NormArgs a = backend::norm_args(c);
  bool rms = a.rms;
  DType cd = compute_dtype(x.dtype());
  Rows r = to_rows(x, a.rows, cd);
  Tensor w = a.weight, b = a.bias;
  if (w.defined()) w = dense(w, cd, x.device());
  if (b.defined()) b = dense(b, cd, x.device());
  Tensor res = outs[0].dtype() == cd ? outs[0] : empty(x.shape(), cd, x.device());
  auto run = [&]<typename T>(T*) {
    T eps = a.epsilon<T>();
    launch_rows(r.outer, norm_rows<T>, row_ptr<T>(r), dense_ptr<T>(res),
                w.defined() ? dense_ptr<T>(w) : static_cast<T*>(nullptr),
                b.defined() ? dense_ptr<T>(b) : static_cast<T*>(nullptr), r.inner, eps, rms);
  };
  switch (cd) {
    KILN_CUDA_CASE(f32, float, run(static_cast<T*>(nullptr)))
    KILN_CUDA_CASE(f64, double, run(static_cast<T*>(nullptr)))
    KILN_CUDA_UNSUPPORTED(cd, c.op)
  }
  if (!res.is_same(outs[0])) copy_into(outs[0], res);
}

void k_layer_norm_backward(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& x = c.args.tensor(1);
  DType cd = compute_dtype(x.dtype());
  std::vector<bool> last = backend::last_dims(x.dim(), static_cast<int64_t>(c.args.ints(2).size()));
  Rows r = to_rows(x, last, cd);
  Rows rg = to_rows(c.args.tensor(0), last, cd);
  Tensor w = c.args.opt_tensor(3);
  if (w.defined()) w = dense(w, cd, x.device());
  Tensor dx = outs[0].dtype() == cd ? outs[0] : empty(x.shape(), cd, x.device());
  Tensor dw = outs[1].dtype() == cd ? outs[1] : empty(outs[1].shape(), cd, x.device());
  Tensor db = outs[2].dtype() == cd ? outs[2] : empty(outs[2].shape(), cd, x.device());
  Tensor stats = empty(Dims{2, r.outer}, cd, x.device());
  auto run = [&]<typename T>(T*) {
    launch_rows(r.outer, norm_backward_rows<T>, row_ptr<T>(r), row_ptr<T>(rg),
                w.defined() ? dense_ptr<T>(w) : static_cast<T*>(nullptr), dense_ptr<T>(dx),
                dense_ptr<T>(stats), r.outer, r.inner, T(c.args.f64(4)));
    if (r.inner == 0) return;
    unsigned grid = static_cast<unsigned>((r.inner + kBlock - 1) / kBlock);
    norm_backward_columns<T><<<grid, kBlock, 0, stream()>>>(row_ptr<T>(r), row_ptr<T>(rg),
                                                            dense_ptr<T>(stats), dense_ptr<T>(dw),
                                                            dense_ptr<T>(db), r.outer, r.inner);
    check_launch("layer_norm_backward column kernel launch");
  };
  switch (cd) {
    KILN_CUDA_CASE(f32, float, run(static_cast<T*>(nullptr)))
    KILN_CUDA_CASE(f64, double, run(static_cast<T*>(nullptr)))
    KILN_CUDA_UNSUPPORTED(cd, c.op)
  }
  if (!dx.is_same(outs[0])) copy_into(outs[0], dx);
  if (!dw.is_same(outs[1])) copy_into(outs[1], dw);
  if (!db.is_same(outs[2])) copy_into(outs[2], db);
}

// Rows of a batched input flattened: d input = g W and d weight = g^T x with cuBLAS,
// d bias the column sums of g (one thread per column).
void k_linear_backward(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& x = c.args.tensor(1);
  const Tensor& w = c.args.tensor(2);
  int64_t in = w.shape()[1], outf = w.shape()[0], rows = backend::linear_rows(x);
  Tensor gd = dense(c.args.tensor(0), x.dtype(), x.device()), xd = dense(x, x.dtype(), x.device());
  auto batch1 = [](const Tensor& t, int64_t r, int64_t k, int64_t sr, int64_t sk) {
    return make_view(t, Dims{1, r, k}, Dims{0, sr, sk}, t.offset());
  };
  // d weight first (stream order): d input may then be written over x (as on the CPU).
  gemm(batch1(gd, outf, rows, 1, outf), batch1(xd, rows, in, in, 1),
       batch1(outs[1], outf, in, in, 1), 1.0, 0.0);
  gemm(batch1(gd, rows, outf, outf, 1), batch1(w, outf, in, w.strides()[0], w.strides()[1]),
       batch1(outs[0], rows, in, in, 1), 1.0, 0.0);
  DType cd = compute_dtype(x.dtype());
  Tensor g2 = dense(gd, cd, x.device());
  Tensor db = outs[2].dtype() == cd ? outs[2] : empty(outs[2].shape(), cd, x.device());
  auto run = [&]<typename T>(T*) {
    if (outf == 0) return;
    unsigned grid = static_cast<unsigned>((outf + kBlock - 1) / kBlock);
    column_sums<T><<<grid, kBlock, 0, stream()>>>(dense_ptr<T>(g2), dense_ptr<T>(db), rows, outf);
    check_launch("linear_backward column kernel launch");
  };
  switch (cd) {
    KILN_CUDA_CASE(f32, float, run(static_cast<T*>(nullptr)))
    KILN_CUDA_CASE(f64, double, run(static_cast<T*>(nullptr)))
    KILN_CUDA_UNSUPPORTED(cd, c.op)
  }
  if (!db.is_same(outs[2])) copy_into(outs[2], db);
}

}  // namespace kiln::cuda

// Matrix products: f32 through oneDNN or OpenBLAS (Note [oneDNN for f32 GEMM]), f64
// through OpenBLAS; other dtypes use a plain loop.
#include <cblas.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/loops.h"
#include "kiln/backend/cpu/onednn.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/backend/cpu/pointwise_fns.h"
#include "kiln/backend/cpu/vmath.h"
#include "kiln/device/blas.h"
#include "kiln/ops/meta.h"

// OpenBLAS's pthread build starts its worker threads when it is loaded, and each spins
// in sched_yield for ~0.1 s before sleeping (its THREAD_TIMEOUT): every kiln process
// began with a core taken, and OpenMP teams that needed it waited, making short runs
// 2-4x slower. kiln hands OpenBLAS only small products (and f64), so its workers are
// stopped at load; OpenBLAS starts them again by itself if a big product needs them.
// Weak: builds of OpenBLAS without a thread server (serial, OpenMP) lack the symbol.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

namespace kiln::cpu {

namespace {

[[maybe_unused]] const bool openblas_workers_stopped = [] {
  if (blas_thread_shutdown_) blas_thread_shutdown_();
  return true;
}();

// KILN_GEMM, read once; a bad value is kept as an error for check_gemm_environment().
struct EnvLibrary {
  GemmLibrary library = GemmLibrary::automatic;
  std::string error;
};

const EnvLibrary& env_library() {
  static const EnvLibrary e = [] {
    EnvLibrary r;
    const char* env = std::getenv("KILN_GEMM");
    if (!env || !*env) return r;
    if (std::strcmp(env, "openblas") == 0)
      r.library = GemmLibrary::openblas;
    else if (std::strcmp(env, "onednn") == 0 && onednn_available())
      r.library = GemmLibrary::onednn;
    else if (std::strcmp(env, "onednn") == 0)
      r.error = "KILN_GEMM=onednn, but this kiln was built without oneDNN";
    else
      r.error = fmt::format("KILN_GEMM must be 'openblas' or 'onednn', got '{}'", env);
    return r;
  }();
  return e;
}

std::atomic<GemmLibrary>& library_choice() {
  static std::atomic<GemmLibrary> lib{env_library().library};
  return lib;
}

// Below this many multiply-adds a product stays on OpenBLAS: a oneDNN primitive lookup
// costs ~3.5 us; OpenBLAS (pinned to Haswell) wins up to about 80^3 (bench/core_bench.cpp,
// BM_GemmSmall).
constexpr int64_t kOneDnnMinWork = 96 * 96 * 96;

// Whether OpenBLAS runs kernels as wide as the CPU's FMA units. OpenBLAS chooses its kernel
// family once, from the CPU's model number (or OPENBLAS_CORETYPE); in a VM whose CPUID
// shows a generic model, 0.3.21 falls back to its SSE3 "Prescott" kernels on an AVX-512
// core (~31 GFLOP/s where oneDNN reaches ~170; BM_GemmSmall: 32^3 in 5.4 us vs 1.3 us,
// 64^3 in 25 us vs 4 us). kiln leaves OpenBLAS's choice alone, but then sends f32 products
// from 32^3 on to oneDNN. Tinier ones stay: the first product of a new layout builds a
// oneDNN primitive (~90 us), which a product of a few microseconds never earns back when
// shapes vary.
constexpr int64_t kOneDnnMinWorkNarrowBlas = 32 * 32 * 32;

bool openblas_has_fma_kernels() {
  static const bool wide = [] {
    std::string core = openblas_get_corename();
    std::transform(core.begin(), core.end(), core.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    for (const char* family : {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"})
      if (core == family) return true;
    __builtin_cpu_init();
    return !__builtin_cpu_supports("fma");  // a CPU without FMA: OpenBLAS's kernel is its best
  }();
  return wide;
}

bool use_onednn(int64_t n, int64_t m, int64_t k) {
  if (k == 0 || !onednn_available()) return false;
  switch (library_choice().load(std::memory_order_relaxed)) {
    case GemmLibrary::openblas: return false;
    case GemmLibrary::onednn: return true;
    case GemmLibrary::automatic:
      return n * m * k >= (openblas_has_fma_kernels() ? kOneDnnMinWork : kOneDnnMinWorkNarrowBlas);
  }
  return false;
}

// Note [Transposed left operands at AVX2]: oneDNN 2.6's AVX2 matmul runs a product whose
// left operand is column-major (linear_backward's d weight = g^T x) at 65-90 GFLOP/s where
// the same product row-major runs at ~130 and OpenBLAS's Haswell kernels run either at
// ~130 (one thread, the BLOCK's shapes, BM_BlockProducts in docs/benchmarks.md: "Which
// GEMM"). At AVX-512 oneDNN reaches ~250 in both layouts, twice OpenBLAS. So where
// oneDNN runs without AVX-512 and OpenBLAS has FMA kernels, the automatic choice sends
// such products with a sum of 64 or more (a train step's d weight over the batch rows)
// to OpenBLAS, split in fixed blocks over kiln's threads (OpenBLAS's own workers beside
// kiln's team made 2-thread train steps 2-4x slower: both spin while they wait). On a
// real AVX2 CPU (AMD EPYC Zen 3; BM_BackwardProducts) oneDNN ran the MLP's d weight
// (64 rows) at 55 GFLOP/s and OpenBLAS at 69, the BLOCK's (512 rows) at 40 against 86;
// the sums of 64 were first left to oneDNN from a Zen 5 capped at AVX2, where the two
// were even. The choice depends on the shape only, never on the thread count.
bool column_major_a_to_openblas() {
  static const bool to_openblas = !onednn_avx512() && openblas_has_fma_kernels();
  return to_openblas && library_choice().load(std::memory_order_relaxed) == GemmLibrary::automatic;
}

// OpenBLAS keeps one global thread count: the running kernel's budget for a product
// big enough to share, else 1. (Its workers spin in sched_yield after each threaded
// call; woken for every small product they competed with the OpenMP team for the
// cores and made whole runs up to 4x slower.)
void use_kernel_threads_for_openblas(int64_t work) {
  static std::atomic<int> last{0};
  int want = work >= kOneDnnMinWork ? kernel_threads() : 1;
  if (last.exchange(want, std::memory_order_relaxed) != want) openblas_set_num_threads(want);
}

// A 2-D operand as BLAS sees it: row-major with a leading dimension, maybe transposed.
struct BlasMat {
  Tensor t;
  bool trans = false;
  int64_t ld = 0;
};

BlasMat blas_operand(const Tensor& m) {
  int64_t rows = m.shape()[0], cols = m.shape()[1];
  int64_t s0 = m.strides()[0], s1 = m.strides()[1];
  if ((s1 == 1 || cols == 1) && s0 >= std::max<int64_t>(cols, 1)) return {m, false, s0};
  if ((s0 == 1 || rows == 1) && s1 >= std::max<int64_t>(rows, 1)) return {m, true, s1};
  Tensor dense = empty(m.shape(), m.dtype(), m.device());
  copy_into(dense, m);
  return {dense, false, std::max<int64_t>(cols, 1)};
}

// The operand as oneDNN takes it: element strides of rows and columns.
MatrixBatch matrix_of(const BlasMat& m) {
  auto* p = const_cast<float*>(m.t.data<float>());
  return m.trans ? MatrixBatch{p, 0, 1, m.ld} : MatrixBatch{p, 0, m.ld, 1};
}

template <typename T>
void naive_gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta) {
  int64_t n = a.shape()[0], k = a.shape()[1], m = b.shape()[1];
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* pc = c.data<T>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      T acc = T(0);
      for (int64_t p = 0; p < k; ++p)
        acc += pa[i * a.strides()[0] + p * a.strides()[1]] *
               pb[p * b.strides()[0] + j * b.strides()[1]];
      T& dst = pc[i * c.strides()[0] + j * c.strides()[1]];
      dst = static_cast<T>(beta == 0 ? alpha * acc : beta * dst + alpha * acc);
    }
}

}  // namespace

void set_gemm_library(GemmLibrary library) {
  KILN_CHECK(library != GemmLibrary::onednn || onednn_available(), unsupported,
             "[set_gemm_library] this kiln was built without oneDNN");
  library_choice().store(library, std::memory_order_relaxed);
}

GemmLibrary gemm_library() { return library_choice().load(std::memory_order_relaxed); }

void check_gemm_environment() {
  if (!env_library().error.empty()) fail(ErrorKind::value, "{}", env_library().error);
}

// Note [Short products transposed]
// oneDNN 2.6's f32 matmul runs a product with few rows of output well below its speed on
// the same product transposed: x[64, 512] @ W^T (an MLP layer at batch 64) at 135
// GFLOP/s, W @ x^T at 160; at 16 or 32 rows the gap is up to 1.5x. So such a product is
// computed transposed, c^T = b^T a^T, into a dense scratch matrix, and written back
// transposed in 16 x 16 register tiles, the bias added on the way (a pass over c, ~5% of
// the product). Where it pays was measured at 1 and 2 threads (BM_ShortProduct, a sweep
// of rows 1-128 against 256-1024 columns and depths): 16 to 32 rows from 4M
// multiply-adds (0.64-0.82x of the time), up to 64 rows when the depth is at least 512
// (0.79-0.94x); fewer rows, or more, lose or gain nothing. That sweep ran oneDNN's
// AVX-512 kernels. Its AVX2 ones (AMD EPYC Zen 3, BM_ShortProduct, medians of 3) gain from
// the transposed form at 16 and 32 rows on one thread (63-70 GFLOP/s against 37-60), but
// at 64 rows the direct product is as fast on one thread (74 against 70-73) and 1.4x
// faster on two (132-146 against 94-104): at AVX2 it stops at 32 rows. The rule reads no
// thread count, so a product's bits never depend on it.
bool short_product_pays(int64_t n, int64_t m, int64_t k) {
  static const int64_t most_rows = onednn_avx512() ? 64 : 32;
  return n >= 16 && n <= most_rows && m >= 4 * n && n * m * k >= (int64_t{1} << 22) &&
         (n <= 32 || k >= 512);
}

using Floats16 = float __attribute__((vector_size(64)));  // one tile row

// Transposes a 16 x 16 block held as 16 rows of 16 lanes: at each level b (8, 4, 2, 1),
// the off-diagonal b x b blocks of every aligned 2b x 2b block trade places.
template <int B>
void swap_blocks(Floats16& r0, Floats16& r1) {
  Floats16 lo, hi;
  if constexpr (B == 8) {
    lo = __builtin_shufflevector(r0, r1, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    hi = __builtin_shufflevector(r0, r1, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30,
                                 31);
  } else if constexpr (B == 4) {
    lo = __builtin_shufflevector(r0, r1, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
    hi =
        __builtin_shufflevector(r0, r1, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
  } else if constexpr (B == 2) {
    lo = __builtin_shufflevector(r0, r1, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
    hi =
        __builtin_shufflevector(r0, r1, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
  } else {
    lo = __builtin_shufflevector(r0, r1, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
    hi = __builtin_shufflevector(r0, r1, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
  }
  r0 = lo;
  r1 = hi;
}

template <int B>
void transpose_level(Floats16 (&r)[16]) {
  for (int i = 0; i < 16; ++i)
    if ((i & B) == 0) swap_blocks<B>(r[i], r[i + B]);
}

// c[i, j] = t[j, i] (+ bias[j]) for t dense [m, n] and c with contiguous rows: whole
// 16 x 16 tiles transposed in vector registers, the edges element by element.
void transpose_into(float* c, int64_t ldc, const float* t, int64_t n, int64_t m, const float* bias,
                    const MatmulEpilogue& epi = {}) {
  const float* res = epi.residual;
  int64_t ldr = epi.residual_row_stride;
  // The epilogue with relu's and add's own element functions (the unfused ops' bits).
  auto finish = [&](float v, int64_t i, int64_t j) {
    if (epi.relu) v = fns::relu(v);
    return res ? v + res[i * ldr + j] : v;
  };
  constexpr int64_t kTile = 16;
  parallel_for((m + kTile - 1) / kTile, kTile * n, [&](int64_t lo, int64_t hi) {
    with_best_isa([&] {
      for (int64_t jt = lo * kTile; jt < std::min(m, hi * kTile); jt += kTile) {
        int64_t je = std::min(m, jt + kTile);
        Floats16 b{};
        if (bias && je - jt == kTile) std::memcpy(&b, bias + jt, sizeof b);
        for (int64_t it = 0; it < n; it += kTile) {
          int64_t ie = std::min(n, it + kTile);
          if (je - jt == kTile && ie - it == kTile) {
            Floats16 r[16];
            for (int64_t j = 0; j < kTile; ++j)
              std::memcpy(&r[j], t + (jt + j) * n + it, sizeof(Floats16));
            transpose_level<8>(r);
            transpose_level<4>(r);
            transpose_level<2>(r);
            transpose_level<1>(r);
            for (int64_t i = 0; i < kTile; ++i) {
              Floats16 v = bias ? r[i] + b : r[i];
              std::memcpy(c + (it + i) * ldc + jt, &v, sizeof v);
            }
            if (epi.relu || res)  // on the tile just stored, still in L1
              for (int64_t i = it; i < ie; ++i)
                for (int64_t j = jt; j < je; ++j) c[i * ldc + j] = finish(c[i * ldc + j], i, j);
            continue;
          }
          for (int64_t i = it; i < ie; ++i)
            for (int64_t j = jt; j < je; ++j)
              c[i * ldc + j] = finish(bias ? t[j * n + i] + bias[j] : t[j * n + i], i, j);
        }
      }
    });
  });
}

// c = beta * c + alpha * a @ b (+ bias), with c's rows contiguous.
void gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta,
          const Tensor& bias) {
  int64_t n = a.shape()[0], k = a.shape()[1], m = b.shape()[1];
  if (n == 0 || m == 0) return;
  DType d = c.dtype();
  if (bias.defined()) {
    KILN_ASSERT(beta == 0.0);
    // oneDNN adds a dense f32 bias inside the product (alpha 1 only: it scales the bias
    // with the product); otherwise the bias is broadcast into c, which the product adds to.
    if (!(d == DType::f32 && alpha == 1.0 && k > 0 && bias.dtype() == d && bias.is_contiguous() &&
          use_onednn(n, m, k))) {
      copy_into(c, bias);
      gemm(a, b, c, alpha, 1.0);
      return;
    }
  }
  if (d != DType::f32 && d != DType::f64) {
    DType cd = compute_dtype(d);
    if (cd != d) {  // half types: compute in f32
      Tensor cc = cast(c, cd);
      gemm(cast(a, cd), cast(b, cd), cc, alpha, beta);
      copy_into(c, cc);
      return;
    }
    KILN_CHECK(d != DType::b8, unsupported, "[mm] does not support dtype bool on cpu");
    KILN_DISPATCH_COMPUTE(
        d, "mm", if constexpr (!std::is_same_v<T, bool>) naive_gemm<T>(a, b, c, alpha, beta));
    return;
  }
  if (k == 0) {  // an empty sum: c = beta * c (zeros for beta 0, as PyTorch), no library call
    KILN_DISPATCH_FLOAT(d, "mm", naive_gemm<T>(a, b, c, alpha, beta));
    return;
  }
  KILN_ASSERT(c.strides()[1] == 1 || m == 1);
  // (D5) The handle of the kernel's device, bound to its current stream. Neither
  // library takes a handle; kiln's carries device, stream and threading.
  blas_handle(DeviceType::cpu).begin_use();
  BlasMat A = blas_operand(a), B = blas_operand(b);
  auto ldc = std::max<int64_t>(c.strides()[0], std::max<int64_t>(m, 1));
  bool onednn = d == DType::f32 && use_onednn(n, m, k);
  if (onednn && A.trans && k >= 64 && column_major_a_to_openblas()) {
    // Fixed blocks of c on the kernel's threads, each a one-thread OpenBLAS product: the
    // blocks do not depend on the thread count, so neither does the result (OpenBLAS's
    // edge kernels sum a block's last rows and columns in their own way), and no OpenBLAS
    // workers run beside kiln's threads. Blocks of 256 rows when c is at least as tall as
    // wide (each call packs a again only for its rows: d weight's [1024, 256] ran 12%
    // faster than in blocks of 64 columns, which pack all of a each), else 64 columns.
    constexpr int64_t kRows = 256, kColumns = 64;
    use_kernel_threads_for_openblas(0);
    auto ta = A.trans ? CblasTrans : CblasNoTrans;
    auto tb = B.trans ? CblasTrans : CblasNoTrans;
    const float* ap = A.t.data<float>();
    const float* bp = B.t.data<float>();
    float* cp = c.data<float>();
    auto fa = static_cast<float>(alpha), fb = static_cast<float>(beta);
    if (bias.defined()) {  // OpenBLAS takes no bias: it is broadcast into c, added to
      copy_into(c, bias);
      fb = 1.0f;
    }
    if (n >= m) {
      int64_t row = A.trans ? 1 : A.ld;  // between rows of a
      parallel_for((n + kRows - 1) / kRows, m * k * kRows, [&](int64_t b0, int64_t b1) {
        for (int64_t i0 = b0 * kRows; i0 < std::min(b1 * kRows, n); i0 += kRows)
          cblas_sgemm(CblasRowMajor, ta, tb, std::min(kRows, n - i0), m, k, fa, ap + i0 * row, A.ld,
                      bp, B.ld, fb, cp + i0 * ldc, ldc);
      });
      return;
    }
    int64_t column = B.trans ? B.ld : 1;  // between columns of b
    parallel_for((m + kColumns - 1) / kColumns, n * k * kColumns, [&](int64_t b0, int64_t b1) {
      for (int64_t j0 = b0 * kColumns; j0 < std::min(b1 * kColumns, m); j0 += kColumns)
        cblas_sgemm(CblasRowMajor, ta, tb, n, std::min(kColumns, m - j0), k, fa, ap, A.ld,
                    bp + j0 * column, B.ld, fb, cp + j0, ldc);
    });
    return;
  }
  if (onednn) {
    if (beta == 0.0 && short_product_pays(n, m, k)) {  // Note [Short products transposed]
      Tensor t = empty(Dims{m, n}, DType::f32, c.device());
      MatrixBatch at = matrix_of(A), bt = matrix_of(B);
      std::swap(at.row_stride, at.col_stride);
      std::swap(bt.row_stride, bt.col_stride);
      onednn_matmul(1, m, n, k, bt, at, {t.data<float>(), 0, n, 1}, static_cast<float>(alpha),
                    0.0f);
      transpose_into(c.data<float>(), ldc, t.data<float>(), n, m,
                     bias.defined() ? bias.data<float>() : nullptr);
      return;
    }
    onednn_matmul(1, n, m, k, matrix_of(A), matrix_of(B), {c.data<float>(), 0, ldc, 1},
                  static_cast<float>(alpha), static_cast<float>(beta),
                  bias.defined() ? bias.data<float>() : nullptr);
    return;
  }
  use_kernel_threads_for_openblas(n * m * k);
  auto ta = A.trans ? CblasTrans : CblasNoTrans;
  auto tb = B.trans ? CblasTrans : CblasNoTrans;
  if (d == DType::f32)
    cblas_sgemm(CblasRowMajor, ta, tb, n, m, k, static_cast<float>(alpha), A.t.data<float>(), A.ld,
                B.t.data<float>(), B.ld, static_cast<float>(beta), c.data<float>(), ldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, n, m, k, alpha, A.t.data<double>(), A.ld, B.t.data<double>(),
                B.ld, beta, c.data<double>(), ldc);
}

namespace {

Tensor mat(const Tensor& t, int64_t rows, int64_t cols) {
  // A dense [rows, cols] view of a contiguous tensor.
  return make_view(t, Dims{rows, cols}, Dims{cols, 1}, t.offset());
}

Tensor batch_slice(const Tensor& t, int64_t i) {
  return make_view(t, Dims{t.shape()[1], t.shape()[2]}, Dims{t.strides()[1], t.strides()[2]},
                   t.offset() + i * t.strides()[0]);
}

// One matrix of a batch is a row-major or column-major block (what both libraries take),
// and no two elements of the batch share memory (what oneDNN's strided layouts allow):
// sorted by stride, each dim steps over the whole extent of the ones below it.
bool blockwise(const Tensor& t) {
  if (t.strides()[2] != 1 && t.strides()[1] != 1) return false;
  std::array<std::pair<int64_t, int64_t>, 3> dims;  // (stride, size)
  for (size_t i = 0; i < 3; ++i) dims[i] = {t.strides()[i], t.shape()[i]};
  std::sort(dims.begin(), dims.end());
  int64_t extent = 1;
  for (auto [stride, size] : dims) {
    if (size == 1) continue;
    if (stride < extent) return false;
    extent = stride * size;
  }
  return true;
}

MatrixBatch batch_of(const Tensor& t) {
  return {const_cast<float*>(t.data<float>()), t.strides()[0], t.strides()[1], t.strides()[2]};
}

// c[i] = a[i] @ b[i] over the leading dim: one oneDNN primitive for the whole batch
// when it takes the product, else a GEMM per matrix.
void gemm_batched(const Tensor& a, const Tensor& b, const Tensor& c) {
  int64_t nb = a.shape()[0], n = a.shape()[1], k = a.shape()[2], m = b.shape()[2];
  if (nb > 1 && k > 0 && c.dtype() == DType::f32 && use_onednn(n, m, k) && blockwise(a) &&
      blockwise(b) && c.strides()[2] == 1) {
    blas_handle(DeviceType::cpu).begin_use();  // (D5), as gemm
    onednn_matmul(nb, n, m, k, batch_of(a), batch_of(b), batch_of(c), 1.0f, 0.0f);
    return;
  }
  for (int64_t i = 0; i < nb; ++i)
    gemm(batch_slice(a, i), batch_slice(b, i), batch_slice(c, i), 1.0, 0.0);
}

}  // namespace

void k_mm(const OpCall& c, std::span<Tensor> outs) {
  gemm(c.args.tensor(0), c.args.tensor(1), outs[0], 1.0, 0.0);
}

void k_bmm(const OpCall& c, std::span<Tensor> outs) {
  gemm_batched(c.args.tensor(0), c.args.tensor(1), outs[0]);
}

void k_addmm(const OpCall& c, std::span<Tensor> outs) {
  double beta = c.args.scalar(3).to_double(), alpha = c.args.scalar(4).to_double();
  const Tensor& input = c.args.tensor(0);
  if (beta == 1.0 && input.dim() == 1 && input.numel() == outs[0].size(-1)) {
    gemm(c.args.tensor(1), c.args.tensor(2), outs[0], alpha, 0.0, input);  // a bias row
    return;
  }
  if (beta != 0) copy_into(outs[0], input);
  gemm(c.args.tensor(1), c.args.tensor(2), outs[0], alpha, beta);
}

bool linear_with_epilogue(const Tensor& x, const Tensor& w, const Tensor& bias, bool relu,
                          const Tensor& residual, const Tensor& out) {
  int64_t in = w.shape()[1], outf = w.shape()[0], rows = backend::linear_rows(x);
  auto f32 = [](const Tensor& t) { return !t.defined() || t.dtype() == DType::f32; };
  if (!f32(x) || !f32(w) || !f32(bias) || !f32(residual) || out.dtype() != DType::f32 ||
      !out.is_contiguous() || (bias.defined() && !bias.is_contiguous()) ||
      (residual.defined() && (!residual.is_contiguous() || residual.shape() != out.shape())) ||
      rows == 0 || in == 0 || !use_onednn(rows, outf, in))
    return false;
  Tensor wt = make_view(w, Dims{in, outf}, Dims{w.strides()[1], w.strides()[0]}, w.offset());
  BlasMat A = blas_operand(mat(contiguous(x), rows, in)), B = blas_operand(wt);
  MatmulEpilogue epi{relu, residual.defined() ? residual.data<float>() : nullptr, outf};
  const float* b = bias.defined() ? bias.data<float>() : nullptr;
  blas_handle(DeviceType::cpu).begin_use();  // (D5), as gemm
  if (short_product_pays(rows, outf, in)) {  // Note [Short products transposed]
    Tensor t = empty(Dims{outf, rows}, DType::f32, out.device());
    MatrixBatch at = matrix_of(A), bt = matrix_of(B);
    std::swap(at.row_stride, at.col_stride);
    std::swap(bt.row_stride, bt.col_stride);
    onednn_matmul(1, outf, rows, in, bt, at, {t.data<float>(), 0, rows, 1}, 1.0f, 0.0f);
    transpose_into(out.data<float>(), outf, t.data<float>(), rows, outf, b, epi);
    return true;
  }
  onednn_matmul(1, rows, outf, in, matrix_of(A), matrix_of(B), {out.data<float>(), 0, outf, 1},
                1.0f, 0.0f, b, epi);
  return true;
}

void k_linear(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& x = c.args.tensor(0);
  const Tensor& w = c.args.tensor(1);
  Tensor bias = c.args.opt_tensor(2);
  int64_t in = w.shape()[1], outf = w.shape()[0], rows = backend::linear_rows(x);
  Tensor wt = make_view(w, Dims{in, outf}, Dims{w.strides()[1], w.strides()[0]}, w.offset());
  gemm(mat(contiguous(x), rows, in), wt, mat(outs[0], rows, outf), 1.0, 0.0, bias);
}

// Rows of a batched input flattened: d input = g W and d weight = g^T x (two GEMMs), d bias
// the column sums of g, each column summed over the rows in order in double by one
// thread, so no result depends on the thread count.
void k_linear_backward(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& x = c.args.tensor(1);
  const Tensor& w = c.args.tensor(2);
  int64_t in = w.shape()[1], outf = w.shape()[0], rows = backend::linear_rows(x);
  Tensor g2 = mat(contiguous(c.args.tensor(0)), rows, outf);
  // d weight first: then x is read no more, and d input may be written over it (Note
  // [Outputs in their input's buffer] in kiln/runtime/executor.cpp).
  gemm(make_view(g2, Dims{outf, rows}, Dims{1, outf}, g2.offset()), mat(contiguous(x), rows, in),
       outs[1], 1.0, 0.0);
  gemm(g2, w, mat(outs[0], rows, in), 1.0, 0.0);
  DType cd = compute_dtype(g2.dtype());
  Tensor gc = cast(g2, cd);  // g2 is dense
  Tensor db = empty(Dims{outf}, DType::f64, x.device());
  KILN_DISPATCH_FLOAT(cd, "linear_backward", {
    const T* p = gc.data<T>();
    double* o = db.data<double>();
    parallel_for(outf, rows, [&](int64_t lo, int64_t hi) {
      std::fill(o + lo, o + hi, 0.0);
      with_best_isa([&] {  // columns side by side in vector registers
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = lo; j < hi; ++j) o[j] += static_cast<double>(p[i * outf + j]);
      });
    });
  });
  copy_into(outs[2], db);
}

namespace {
// Whether `t` is a contiguous tensor with its last two dims swapped (what transpose(-2, -1)
// of one gives).
bool transposed_contiguous(const Tensor& t) {
  size_t d = t.shape().size();
  Dims shape = t.shape(), strides = t.strides();
  std::swap(shape[d - 1], shape[d - 2]);
  std::swap(strides[d - 1], strides[d - 2]);
  return strides == contiguous_strides(shape);
}
}  // namespace

void k_matmul(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& a = c.args.tensor(0);
  const Tensor& b = c.args.tensor(1);
  const Tensor& out = outs[0];
  Tensor a2 = backend::as_left_matrix(a), b2 = backend::as_right_matrix(b);
  int64_t n = a2.shape()[a2.dim() - 2], k = a2.shape()[a2.dim() - 1], m = b2.shape()[b2.dim() - 1];
  if (b2.dim() == 2) {  // fold a's batch dims into rows: one GEMM
    int64_t rows = backend::linear_rows(a2);
    gemm(mat(contiguous(a2), rows, k), b2, mat(out, rows, m), 1.0, 0.0);
    return;
  }
  Dims batch = backend::matmul_batch(a2, b2);
  int64_t nb = numel_of(batch);
  // Each operand as a dense batch of row- or column-major matrices: as it lies when it is
  // one already (attention's scores, their transposes in backward), else a copy.
  // (Strided batches, e.g. heads selected from a fused qkv, were measured handed to
  // oneDNN as they lie: it takes them with an implementation that allocates its own
  // buffers, +4.6 MiB peak RSS on BLOCK's forward for no speed.)
  auto dense = [&](const Tensor& t) {
    int64_t r = t.shape()[t.dim() - 2], c = t.shape()[t.dim() - 1];
    bool whole_batch = t.dim() - 2 == static_cast<int64_t>(batch.size()) &&
                       std::equal(batch.begin(), batch.end(), t.shape().begin());
    if (whole_batch && t.is_contiguous())
      return make_view(t, Dims{nb, r, c}, Dims{r * c, c, 1}, t.offset());
    if (whole_batch && transposed_contiguous(t))  // backward's transposes: column-major matrices
      return make_view(t, Dims{nb, r, c}, Dims{r * c, 1, r}, t.offset());
    auto fresh = [](const Dims& shape, const Tensor& like) {
      return empty(shape, like.dtype(), like.device());
    };
    int64_t d = t.dim();
    if (t.strides()[d - 1] != 1 && t.strides()[d - 2] == 1 && c > 1) {
      // Column-major matrices (a strided head transposed: k^T of a fused qkv): copied as
      // column-major, a copy along contiguous runs instead of a transposing gather.
      Dims shape = t.shape(), strides = t.strides();
      std::swap(shape[d - 1], shape[d - 2]);
      std::swap(strides[d - 1], strides[d - 2]);
      Tensor dt =
          backend::dense_batch(make_view(t, shape, strides, t.offset()), batch, fresh, copy_into);
      return make_view(dt, Dims{nb, r, c}, Dims{r * c, 1, r}, dt.offset());
    }
    return backend::dense_batch(t, batch, fresh, copy_into);
  };
  Tensor A = dense(a2), B = dense(b2);
  Tensor O = make_view(out, Dims{nb, n, m}, Dims{n * m, m, 1}, out.offset());
  gemm_batched(A, B, O);
}

}  // namespace kiln::cpu

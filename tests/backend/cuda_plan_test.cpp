// The CUDA backend's host-side index math (kiln/backend/cuda/plan.h), checked on any
// machine: strided walks against naive offsets, and cuBLAS calls against an emulation
// of cublasGemmStridedBatchedEx's column-major semantics and argument rules.
#include <gtest/gtest.h>

#include <random>

#include "kiln/backend/cuda/plan.h"
#if KILN_TEST_WITH_CUDA
#include "kiln/backend/cuda/kernels.h"
#endif
#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln::cuda {
namespace {

// Random strides for an operand walked over `shape`: dense, permuted, padded (sliced)
// or broadcast (stride 0) per dim.
Dims random_strides(const Dims& shape, std::mt19937& rng) {
  int kind = static_cast<int>(rng() % 4);
  std::vector<size_t> order(shape.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (kind == 1) std::shuffle(order.begin(), order.end(), rng);
  Dims st(shape.size(), 0);
  int64_t step = 1;
  for (size_t j = order.size(); j-- > 0;) {
    size_t d = order[j];
    st[d] = step;
    step *= shape[d] + (kind == 2 ? static_cast<int64_t>(rng() % 3) : 0);
    if (kind == 3 && rng() % 2) st[d] = 0;
  }
  return st;
}

TEST(CudaPlan, WalksVisitEveryElementAtItsStridedOffset) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    Dims shape;
    int rank = static_cast<int>(rng() % 6);
    for (int d = 0; d < rank; ++d) shape.push_back(1 + static_cast<int64_t>(rng() % 4));
    std::array<Dims, 3> st = {random_strides(shape, rng), random_strides(shape, rng),
                              random_strides(shape, rng)};
    std::array<int64_t, 3> base = {static_cast<int64_t>(rng() % 5), 0, 9};
    Geometry<3> g = make_geometry<3>(shape, st, base);
    int64_t n = numel_of(shape);
    for (int64_t i = 0; i < n; ++i) {
      int64_t want[3] = {base[0], base[1], base[2]};
      int64_t rest = i;
      for (size_t d = shape.size(); d-- > 0;) {
        int64_t c = rest % shape[d];
        rest /= shape[d];
        for (int k = 0; k < 3; ++k) want[k] += c * st[k][d];
      }
      int64_t got[3];
      g.offsets(i, got);
      for (int k = 0; k < 3; ++k) ASSERT_EQ(got[k], want[k]) << "trial " << trial << " i " << i;
    }
  }
  // Dense operands collapse into one unit-stride dim: offsets are the index itself.
  Dims shape{2, 3, 4};
  Geometry<2> dense = make_geometry<2>(shape, {Dims{12, 4, 1}, Dims{12, 4, 1}}, {0, 5});
  EXPECT_TRUE(dense.dense);
  EXPECT_EQ(dense.ndim, 1);
  Geometry<2> bcast = make_geometry<2>(shape, {Dims{12, 4, 1}, Dims{0, 4, 1}}, {0, 0});
  EXPECT_FALSE(bcast.dense);
  EXPECT_EQ(bcast.ndim, 2);  // the broadcast dim stays; the two dense inner dims merge
}

TEST(CudaPlan, FastDivisionIsExactBelowTwoToThe31) {
  std::mt19937 rng(3);
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 4096; ++d) divisors.push_back(d);
  for (int s = 12; s < 31; ++s) {  // powers of two, their neighbours, and random ones
    for (int64_t d : {(int64_t{1} << s) - 1, int64_t{1} << s, (int64_t{1} << s) + 1})
      divisors.push_back(static_cast<uint32_t>(d));
    divisors.push_back(static_cast<uint32_t>(rng() % (uint32_t{1} << s)) + 1);
  }
  divisors.push_back((uint32_t{1} << 31) - 1);
  for (uint32_t d : divisors) {
    FastDivider div(d);
    std::vector<uint32_t> dividends = {
        0, 1, d - 1, d, d + 1, 2 * d - 1, (uint32_t{1} << 31) - 1, (uint32_t{1} << 31) - d};
    for (int r = 0; r < 64; ++r) dividends.push_back(static_cast<uint32_t>(rng()) >> 1);
    for (uint32_t n : dividends) {
      if (n >= (uint32_t{1} << 31)) continue;
      ASSERT_EQ(div.quotient(n), n / d) << n << " / " << d;
    }
  }
}

TEST(CudaPlan, WalksOfTwoToThe31ElementsOrMoreUse64BitCoordinates) {
  Dims shape{3, int64_t{1} << 30, 5};  // a broadcast walk; never materialised
  Geometry<2> g = make_geometry<2>(shape, {Dims{0, 5, 1}, Dims{7, 0, 2}}, {0, 0});
  EXPECT_FALSE(g.narrow);
  for (int64_t i : {int64_t{0}, (int64_t{1} << 31) + 7, 3 * (int64_t{1} << 30) * 5 - 1}) {
    int64_t c2 = i % 5, c1 = (i / 5) % (int64_t{1} << 30), c0 = i / 5 / (int64_t{1} << 30);
    int64_t got[2];
    g.offsets(i, got);
    EXPECT_EQ(got[0], c1 * 5 + c2);
    EXPECT_EQ(got[1], c0 * 7 + c2 * 2);
  }
  EXPECT_TRUE(make_geometry<2>(Dims{3, 1000, 5}, {Dims{0, 5, 1}, Dims{7, 0, 2}}, {0, 0}).narrow);
}

// cublasGemmStridedBatchedEx on column-major data, with its argument checks.
void emulate(const GemmCall& g, const double* first, const double* second, double* c) {
  ASSERT_GE(g.ld_first, std::max<int64_t>(1, g.trans_first ? g.inner : g.rows));
  ASSERT_GE(g.ld_second, std::max<int64_t>(1, g.trans_second ? g.cols : g.inner));
  ASSERT_GE(g.ldc, std::max<int64_t>(1, g.rows));
  if (g.rows == 0 || g.cols == 0) return;  // nothing to write (and c may be null)
  for (int64_t p = 0; p < g.batch; ++p) {
    const double* x = first + p * g.stride_first;
    const double* y = second + p * g.stride_second;
    double* z = c + p * g.stride_c;
    for (int64_t i = 0; i < g.rows; ++i)
      for (int64_t j = 0; j < g.cols; ++j) {
        double s = 0;
        for (int64_t l = 0; l < g.inner; ++l) {
          double xv = g.trans_first ? x[l + i * g.ld_first] : x[i + l * g.ld_first];
          double yv = g.trans_second ? y[j + l * g.ld_second] : y[l + j * g.ld_second];
          s += xv * yv;
        }
        z[i + j * g.ldc] = s;
      }
  }
}

// A [batch, r, c] operand in one of several layouts, as a view of a larger buffer.
Tensor operand_in_layout(int64_t batch, int64_t r, int64_t c, int layout) {
  switch (layout) {
    case 0: return randn({batch, r, c}, {.dtype = f64});                          // row-major
    case 1: return transpose(randn({batch, c, r}, {.dtype = f64}), 1, 2);         // column-major
    case 2: return slice(randn({batch, r, c + 3}, {.dtype = f64}), 2, 1, c + 1);  // padded rows
    case 3: return transpose(slice(randn({batch, c, r + 2}, {.dtype = f64}), 2, 0, r), 1, 2);
    case 4: return expand(randn({1, r, c}, {.dtype = f64}), {batch, r, c});  // broadcast batch
    default: return slice(randn({batch, r, 2 * c}, {.dtype = f64}), 2, 0, 2 * c, 2);  // strided
  }
}

TEST(CudaPlan, GemmCallsComputeTheRowMajorProduct) {
  for (auto [batch, m, k, n] : std::vector<std::array<int64_t, 4>>{
           {1, 3, 4, 5}, {2, 1, 4, 5}, {3, 4, 1, 2}, {2, 5, 3, 1}, {1, 1, 1, 1}, {2, 0, 3, 2}}) {
    for (int la = 0; la < 6; ++la)
      for (int lb = 0; lb < 6; ++lb) {
        SCOPED_TRACE(::testing::Message() << batch << "x" << m << "x" << k << "x" << n
                                          << " layouts " << la << "," << lb);
        Tensor a = operand_in_layout(batch, m, k, la), b = operand_in_layout(batch, k, n, lb);
        GemmOperand pa = plan_operand(batch, m, k, a.strides()[0], a.strides()[1], a.strides()[2]);
        GemmOperand pb = plan_operand(batch, k, n, b.strides()[0], b.strides()[1], b.strides()[2]);
        if (m > 0) {  // only odd strides copy
          EXPECT_EQ(pa.copy, la == 5 && m > 1 && k > 1);
        }
        // What the backend hands over: the view itself, or a dense copy.
        Tensor da = pa.copy ? contiguous(a) : a, db = pb.copy ? contiguous(b) : b;
        Tensor c = zeros({batch, m, n}, {.dtype = f64});
        GemmCall g = plan_gemm(batch, m, n, k, pa, pb);
        emulate(g, db.data<double>(), da.data<double>(), c.data<double>());
        EXPECT_TRUE(testing::all_close(c, to_vector<double>(matmul(a, b)), 1e-12, 1e-12));
      }
  }
}

TEST(CudaPlan, BatchDimsCollapseOnlyWhenOneStrideDescribesThem) {
  EXPECT_EQ(collapsed_batch_stride(Dims{2, 3}, Dims{60, 20}), 20);        // dense
  EXPECT_EQ(collapsed_batch_stride(Dims{2, 3}, Dims{0, 0}), 0);           // fully broadcast
  EXPECT_EQ(collapsed_batch_stride(Dims{2, 1, 3}, Dims{60, 7, 20}), 20);  // size-1 ignored
  EXPECT_EQ(collapsed_batch_stride(Dims{}, Dims{}), 0);
  EXPECT_FALSE(collapsed_batch_stride(Dims{2, 3}, Dims{0, 20}));    // broadcast outer dim
  EXPECT_FALSE(collapsed_batch_stride(Dims{2, 3}, Dims{100, 20}));  // padded
}

#if KILN_TEST_WITH_CUDA
// cuBLAS is dlopen'ed at first use: its library and every symbol kiln calls must
// resolve, which this checks without a GPU.
TEST(CudaPlan, CublasLoadsWithEverySymbol) { EXPECT_NO_THROW(load_cublas()); }
#endif

}  // namespace
}  // namespace kiln::cuda

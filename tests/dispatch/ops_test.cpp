// Numeric tests of the CPU kernels against naive references: broadcasting,
// promotion, non-contiguous inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <sstream>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::expect_error;

std::vector<double> values(const Tensor& t) { return to_vector<double>(t); }

// Naive reference of a broadcast binary op on 2-D [r, c] op [c] or [r, 1].
std::vector<double> ref_binary(const Tensor& a, const Tensor& b, const Dims& out,
                               const std::function<double(double, double)>& f) {
  std::vector<double> av = values(contiguous(expand(a, out.vec())));
  std::vector<double> bv = values(contiguous(expand(b, out.vec())));
  std::vector<double> r(av.size());
  for (size_t i = 0; i < r.size(); ++i) r[i] = f(av[i], bv[i]);
  return r;
}

// Products in every operand layout, large enough for oneDNN, match a double reference:
// linear_backward's d weight has a column-major left operand (Note [Transposed left
// operands at AVX2]; ctest gemm_onednn_avx2_golden runs this with oneDNN at AVX2).
TEST(Products, EveryOperandLayoutMatchesADoubleReference) {
  manual_seed(4);
  Tensor g = randn({192, 160}), x = randn({192, 224}), w = randn({160, 224});
  auto ref = [](const Tensor& a, const Tensor& b) {
    return to_vector<double>(mm(to(a, DType::f64), to(b, DType::f64)));
  };
  EXPECT_TRUE(all_close(mm(transpose(g, 0, 1), x), ref(transpose(g, 0, 1), x), 1e-4, 1e-4));
  EXPECT_TRUE(all_close(mm(g, w), ref(g, w), 1e-4, 1e-4));
  EXPECT_TRUE(all_close(mm(x, transpose(w, 0, 1)), ref(x, transpose(w, 0, 1)), 1e-4, 1e-4));
  LinearGrads lb = linear_backward(g, x, w);
  EXPECT_TRUE(all_close(lb.weight, ref(transpose(g, 0, 1), x), 1e-4, 1e-4));
  EXPECT_TRUE(all_close(lb.input, ref(g, w), 1e-4, 1e-4));
  // The same bits at 1 and 2 threads.
  auto at_threads = [&](int t) {
    NumThreadsGuard threads(t);
    return to_vector<float>(mm(transpose(g, 0, 1), x));
  };
  EXPECT_EQ(at_threads(1), at_threads(2));
}

TEST(Elementwise, UnaryMatchesStdMath) {
  Tensor x = tensor({-2, -0.5, 0, 0.25, 1, 3});
  std::vector<double> xv = values(x);
  auto check = [&](const Tensor& got, double (*f)(double)) {
    std::vector<double> want;
    for (double v : xv) want.push_back(f(v));
    EXPECT_TRUE(all_close(got, want));
  };
  check(neg(x), [](double v) { return -v; });
  check(abs(x), [](double v) { return std::abs(v); });
  check(exp(x), [](double v) { return std::exp(v); });
  check(sin(x), [](double v) { return std::sin(v); });
  check(cos(x), [](double v) { return std::cos(v); });
  check(tanh(x), [](double v) { return std::tanh(v); });
  check(relu(x), [](double v) { return v > 0 ? v : 0; });
  check(sigmoid(x), [](double v) { return 1 / (1 + std::exp(-v)); });
  check(silu(x), [](double v) { return v / (1 + std::exp(-v)); });
  check(gelu(x), [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); });
  check(gelu(x, "tanh"), [](double v) {
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  });
  Tensor p = tensor({0.25, 1, 4});
  EXPECT_TRUE(all_close(sqrt(p), {0.5, 1, 2}));
  EXPECT_TRUE(all_close(rsqrt(p), {2, 1, 0.5}));
  EXPECT_TRUE(all_close(log(p), {std::log(0.25), 0, std::log(4.0)}));
  EXPECT_EQ(to_vector<bool>(logical_not(tensor({0, 2}))), (std::vector<bool>{true, false}));
  expect_error([] { neg(ones({2}, {.dtype = b8})); }, ErrorKind::dtype, "[neg]");
}

// A number exponent PyTorch's CPU kernel special-cases (2, 3, -1, -2, 0.5, -0.5) is its
// arithmetic, bit for bit; others go through std::pow.
TEST(Elementwise, PowOfSpecialNumbersIsPyTorchsArithmetic) {
  manual_seed(9);
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = to(abs(randn({1000})) + 0.1, dt);
    auto bits = [](const Tensor& t) { return to_vector<double>(t); };
    EXPECT_EQ(bits(pow(x, 2.0)), bits(x * x));
    EXPECT_EQ(bits(pow(x, int64_t{2})), bits(x * x));
    EXPECT_EQ(bits(pow(x, 3.0)), bits(x * x * x));
    EXPECT_EQ(bits(pow(x, -1.0)), bits(1.0 / x));
    EXPECT_EQ(bits(pow(x, -2.0)), bits(1.0 / (x * x)));
    EXPECT_EQ(bits(pow(x, 0.5)), bits(sqrt(x)));
    EXPECT_EQ(bits(pow(x, -0.5)), bits(1.0 / sqrt(x)));
    std::vector<double> xs = bits(x), want;
    for (double v : xs)
      want.push_back(dt == DType::f32 ? double(std::pow(float(v), 2.5f)) : std::pow(v, 2.5));
    EXPECT_EQ(bits(pow(x, 2.5)), want);
  }
}

TEST(Elementwise, IntegerInputsOfFloatOpsPromote) {
  Tensor i = arange(3);
  EXPECT_EQ(i.dtype(), i64);
  EXPECT_EQ(exp(i).dtype(), f32);
  EXPECT_EQ(neg(i).dtype(), i64);
  EXPECT_EQ(to_vector<int64_t>(neg(i)), (std::vector<int64_t>{0, -1, -2}));
  EXPECT_EQ(div(i, i + 1).dtype(), f32);
  EXPECT_TRUE(all_close(div(i, i + 1), {0, 0.5, 2.0 / 3}));
}

TEST(Elementwise, BinaryBroadcasts) {
  manual_seed(1);
  Tensor a = randn({3, 4});
  Tensor row = randn({4});
  Tensor col = randn({3, 1});
  Dims out{3, 4};
  EXPECT_TRUE(all_close(add(a, row), ref_binary(a, row, out, std::plus<>())));
  EXPECT_TRUE(all_close(sub(a, col, 2),
                        ref_binary(a, col, out, [](double x, double y) { return x - 2 * y; })));
  EXPECT_TRUE(all_close(mul(col, row), ref_binary(col, row, out, std::multiplies<>())));
  EXPECT_TRUE(all_close(div(a, row), ref_binary(a, row, out, std::divides<>())));
  EXPECT_TRUE(all_close(
      maximum(a, col), ref_binary(a, col, out, [](double x, double y) { return std::max(x, y); })));
  EXPECT_TRUE(all_close(
      minimum(a, row), ref_binary(a, row, out, [](double x, double y) { return std::min(x, y); })));
  Tensor pos = abs(a) + 0.5;
  EXPECT_TRUE(all_close(
      pow(pos, row), ref_binary(pos, row, out, [](double x, double y) { return std::pow(x, y); }),
      1e-4));
  EXPECT_EQ(to_vector<bool>(lt(a, row)), [&] {
    std::vector<bool> r;
    for (double v : ref_binary(a, row, out, std::less<>())) r.push_back(v != 0);
    return r;
  }());
  expect_error([&] { add(a, randn({3})); }, ErrorKind::shape,
               "[add] The size of tensor a (4) must match the size of tensor b (3) at "
               "non-singleton dimension 1");
}

// f16/bf16 add/sub with an alpha other than 1 compute in float on the half values
// (PyTorch's opmath), dense and broadcast alike; the dense path once read the half
// buffers as float (wrong values, reads past the end).
TEST(Elementwise, HalfAddAndSubWithAlpha) {
  manual_seed(7);
  for (DType d : {f16, bf16}) {
    Tensor a = to(randn({1000}), d), b = to(randn({1000}), d);
    std::vector<double> av = values(a), bv = values(b);
    for (bool is_sub : {false, true}) {
      Tensor got = is_sub ? sub(a, b, 2.5) : add(a, b, 2.5);
      ASSERT_EQ(got.dtype(), d);
      std::vector<double> want;
      for (size_t i = 0; i < av.size(); ++i) {
        float exact =
            static_cast<float>(av[i]) + (is_sub ? -2.5f : 2.5f) * static_cast<float>(bv[i]);
        want.push_back(values(to(tensor({exact}), d))[0]);  // rounded once to the half type
      }
      EXPECT_EQ(values(got), want) << d << (is_sub ? " sub" : " add");
    }
    Tensor col = to(randn({4, 1}), d), row = to(randn({5}), d);  // the strided path
    EXPECT_TRUE(all_close(
        add(col, row, -3),
        ref_binary(col, row, {4, 5}, [](double x, double y) { return x - 3 * y; }), 2e-2));
  }
}

// relu's fused gradient: grad where self > threshold, else 0, broadcasting like a binary
// op; an integer self compares exactly with a threshold outside its range.
TEST(Elementwise, ThresholdBackwardIsGradWhereSelfExceedsTheThreshold) {
  manual_seed(4);
  Tensor g = randn({3, 4}), x = transpose(randn({4, 3}), 0, 1);
  EXPECT_EQ(to_vector<float>(threshold_backward(g, x, 0.25)),
            to_vector<float>(masked_fill(g, x <= 0.25, 0)));
  Tensor row = randn({4});
  EXPECT_EQ(to_vector<float>(threshold_backward(row, x, 0)),
            to_vector<float>(masked_fill(contiguous(expand(row, {3, 4})), x <= 0, 0)));
  Tensor gi = from_vector<int64_t>({1, 2, 3}), xi = from_vector<int64_t>({-5, 0, 7});
  EXPECT_EQ(to_vector<int64_t>(threshold_backward(gi, xi, 0)), (std::vector<int64_t>{0, 0, 3}));
  EXPECT_EQ(to_vector<int64_t>(threshold_backward(gi, xi, 1e300)), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(to_vector<int64_t>(threshold_backward(gi, xi, -1e300)),
            (std::vector<int64_t>{1, 2, 3}));
}

TEST(Elementwise, TypePromotion) {
  Tensor i32t = ones({2}, {.dtype = i32});
  Tensor u8t = ones({2}, {.dtype = u8});
  Tensor i8t = ones({2}, {.dtype = i8});
  EXPECT_EQ(add(i32t, ones({2}, {.dtype = i64})).dtype(), i64);
  EXPECT_EQ(add(u8t, i8t).dtype(), i16);
  EXPECT_EQ(add(i32t, 2.5).dtype(), f32);  // int tensor + float scalar -> default float
  EXPECT_EQ(add(i32t, 2).dtype(), i32);    // int scalar keeps the tensor's type
  EXPECT_EQ(add(ones({2}, {.dtype = f16}), 2.5).dtype(), f16);
  EXPECT_EQ(add(i32t, scalar_tensor(1, {.dtype = i64})).dtype(), i32);  // 0-dim ranks lower
  EXPECT_EQ(add(i32t, scalar_tensor(1, {.dtype = f64})).dtype(),
            f64);  // ... unless a higher category
  EXPECT_EQ(add(ones({2}, {.dtype = f16}), ones({2}, {.dtype = bf16})).dtype(), f32);
  EXPECT_EQ(to_vector<double>(add(ones({2}, {.dtype = f16}), 2.5)),
            (std::vector<double>{3.5, 3.5}));
  EXPECT_EQ(to_vector<int32_t>(mul(i32t, 3)), (std::vector<int32_t>{3, 3}));
  EXPECT_EQ(to_vector<bool>(add(ones({2}, {.dtype = b8}), ones({2}, {.dtype = b8}))),
            (std::vector<bool>{true, true}));
  expect_error([&] { add(i32t, i32t, 1.5); }, ErrorKind::dtype, "alpha must not be a floating");
  expect_error([] { sub(ones({1}, {.dtype = b8}), ones({1}, {.dtype = b8})); }, ErrorKind::dtype,
               "[sub] subtraction with two bool tensors");
}

TEST(Elementwise, NonContiguousInputs) {
  Tensor base = arange(0, 12, 1, {.dtype = f32});
  Tensor m = view(base, {3, 4});
  Tensor tr = transpose(m, 0, 1);             // [4, 3], strides (1, 4)
  Tensor strided = slice(base, 0, 0, 12, 3);  // 0, 3, 6, 9
  EXPECT_FALSE(tr.is_contiguous());
  Tensor r = add(tr, tr);
  std::vector<double> want;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) want.push_back(2.0 * (j * 4 + i));
  EXPECT_TRUE(all_close(r, want));
  EXPECT_TRUE(all_close(mul(strided, strided), {0, 9, 36, 81}));
  EXPECT_TRUE(all_close(exp(select(tr, 1, 2)),
                        {std::exp(8.0), std::exp(9.0), std::exp(10.0), std::exp(11.0)}));
}

TEST(Elementwise, WhereAndMaskedFill) {
  Tensor x = tensor({1, -2, 3, -4}, {2, 2});
  Tensor mask = lt(x, 0);
  EXPECT_TRUE(all_close(where(mask, zeros({1}), x), {1, 0, 3, 0}));
  EXPECT_TRUE(all_close(masked_fill(x, mask, 9), {1, 9, 3, 9}));
  Tensor row_mask = from_vector<bool>({true, false});
  EXPECT_TRUE(all_close(masked_fill(x, row_mask, -1), {-1, -2, -1, -4}));
  Tensor y = clone(x);
  masked_fill_(y, mask, 0);
  EXPECT_TRUE(all_close(y, {1, 0, 3, 0}));
  expect_error([&] { where(x, x, x); }, ErrorKind::dtype,
               "[where] expected condition to be a bool");
}

TEST(InPlace, ArithmeticWritesSelf) {
  Tensor x = tensor({1, 2, 3});
  Tensor alias = x;
  add_(x, tensor({1, 1, 1}));
  mul_(x, 2);
  sub_(x, tensor({1, 1, 1}), 2);
  div_(x, 2);
  EXPECT_TRUE(all_close(alias, {1, 2, 3}));
  Tensor r = tensor({-1, 2});
  relu_(r);
  EXPECT_TRUE(all_close(r, {0, 2}));
  Tensor i = arange(3);
  expect_error([&] { div_(i, 2); }, ErrorKind::dtype,
               "[div_] result type f32 can't be cast to the desired output type i64");
  expect_error(
      [&] {
        add_(x, ones({2, 3}));
      },
      ErrorKind::shape, "[add_] output with shape [3] doesn't match the broadcast shape [2, 3]");
  Tensor z = ones({2, 2});
  zero_(z);
  EXPECT_EQ(item<float>(sum(z)), 0.0f);
  fill_(z, 2.5);
  EXPECT_EQ(item<float>(sum(z)), 10.0f);
}

TEST(Reductions, OverDimsWithKeepdim) {
  Tensor x = view(arange(0, 24, 1, {.dtype = f64}), {2, 3, 4});
  EXPECT_EQ(item<double>(sum(x)), 276.0);
  Tensor s = sum(x, {1}, true);
  EXPECT_EQ(s.shape(), (Dims{2, 1, 4}));
  EXPECT_TRUE(all_close(s, {12, 15, 18, 21, 48, 51, 54, 57}));
  EXPECT_TRUE(all_close(sum(x, {0, -1}), {60, 92, 124}));
  EXPECT_TRUE(all_close(mean(x, {2}), {1.5, 5.5, 9.5, 13.5, 17.5, 21.5}));
  EXPECT_TRUE(all_close(amax(x, {1}), {8, 9, 10, 11, 20, 21, 22, 23}));
  EXPECT_TRUE(all_close(amin(x, {0, 1}), {0, 1, 2, 3}));
  auto [v, idx] = max(x, 1, true);
  EXPECT_EQ(v.shape(), (Dims{2, 1, 4}));
  EXPECT_EQ(to_vector<int64_t>(idx), (std::vector<int64_t>(8, 2)));
  auto [mn, mi] = min(neg(x), 2);
  EXPECT_TRUE(all_close(mn, {-3, -7, -11, -15, -19, -23}));
  EXPECT_EQ(to_vector<int64_t>(mi), (std::vector<int64_t>(6, 3)));
  EXPECT_EQ(item<int64_t>(argmax(x)), 23);
  EXPECT_EQ(to_vector<int64_t>(argmax(tensor({1, 5, 5, 2}, {2, 2}), 1)),
            (std::vector<int64_t>{1, 0}));
  EXPECT_TRUE(all_close(var(x, {2}), std::vector<double>(6, 20.0 / 12)));
  EXPECT_TRUE(all_close(var(x, {2}, 0), std::vector<double>(6, 1.25)));
  EXPECT_EQ(sum(arange(4)).dtype(), i64);
  EXPECT_EQ(sum(ones({3}, {.dtype = b8})).dtype(), i64);
  EXPECT_EQ(item<int64_t>(sum(ones({3}, {.dtype = b8}))), 3);
  EXPECT_EQ(sum(ones({3}), {}, false, f64).dtype(), f64);
  expect_error([] { mean(arange(3)); }, ErrorKind::dtype, "[mean] could not infer output dtype");
  expect_error([&] { sum(x, {3}); }, ErrorKind::index, "Dimension out of range");
  expect_error([&] { sum(x, {1, 1}); }, ErrorKind::value, "appears multiple times");
  expect_error([] { amax(ones({0, 2}), {0}); }, ErrorKind::shape, "non-zero size");
}

TEST(Reductions, SoftmaxAndLogSoftmax) {
  Tensor x = tensor({1, 2, 3, 1, 1, 1}, {2, 3});
  auto sm = [](std::vector<double> r) {
    double mx = *std::max_element(r.begin(), r.end()), s = 0;
    for (double& v : r) s += (v = std::exp(v - mx));
    for (double& v : r) v /= s;
    return r;
  };
  std::vector<double> want = sm({1, 2, 3});
  for (double v : sm({1, 1, 1})) want.push_back(v);
  EXPECT_TRUE(all_close(softmax(x, 1), want));
  std::vector<double> logw;
  for (double v : want) logw.push_back(std::log(v));
  EXPECT_TRUE(all_close(log_softmax(x, -1), logw));
  // Along dim 0 of a transposed input: each column of x^T sums to one.
  Tensor s0 = softmax(transpose(x, 0, 1), 0);
  EXPECT_TRUE(all_close(sum(s0, {0}), {1, 1}));
  EXPECT_TRUE(all_close(select(s0, 1, 0), sm({1, 2, 3})));
}

// softmax_backward / log_softmax_backward (one pass per row) against their formulas in
// double, along the last dim and along dim 0 of strided operands; f16 computes in float.
TEST(Reductions, SoftmaxGradientsInOnePassMatchTheirFormulas) {
  manual_seed(21);
  Tensor x = randn({5, 7}, {.dtype = f64}), g = transpose(randn({7, 5}, {.dtype = f64}), 0, 1);
  for (int64_t dim : {1, 0, -1}) {
    Tensor y = softmax(x, dim), ly = log_softmax(x, dim);
    EXPECT_TRUE(all_close(softmax_backward(g, y, dim), values(y * (g - sum(g * y, {dim}, true))),
                          1e-12, 1e-12));
    EXPECT_TRUE(all_close(log_softmax_backward(g, ly, dim),
                          values(g - exp(ly) * sum(g, {dim}, true)), 1e-12, 1e-12));
    // f32 and f16 agree with the f64 result to their precision
    Tensor want = softmax_backward(g, y, dim);
    EXPECT_TRUE(all_close(softmax_backward(to(g, f32), to(y, f32), dim), values(want), 1e-6, 1e-6));
    Tensor h = softmax_backward(to(g, f16), to(y, f16), dim);
    EXPECT_EQ(h.dtype(), f16);
    EXPECT_TRUE(all_close(h, values(want), 2e-3, 2e-3));
  }
  // Sums along dim: a gradient constant along it has zero softmax gradient.
  Tensor y = softmax(x, 1);
  EXPECT_TRUE(
      all_close(softmax_backward(ones_like(y), y, 1), std::vector<double>(35, 0.0), 1e-12, 1e-12));
  expect_error([&] { softmax_backward(g, y, 2); }, ErrorKind::index, "Dimension out of range");
  expect_error(
      [&] {
        softmax_backward(randn({5, 1}, {.dtype = f64}), y, 1);
      },
      ErrorKind::shape,
      "[softmax_backward] grad_output of shape [5, 1] does not match the output [5, 7]");
  expect_error([&] { log_softmax_backward(to(g, f32), y, 1); }, ErrorKind::dtype,
               "log_softmax_backward");
}

TEST(LinearAlgebra, MatchesNaiveProducts) {
  manual_seed(3);
  auto naive = [](const Tensor& a, const Tensor& b) {
    int64_t n = a.size(0), k = a.size(1), m = b.size(1);
    std::vector<double> av = values(a), bv = values(b), c(n * m, 0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j)
        for (int64_t p = 0; p < k; ++p) c[i * m + j] += av[i * k + p] * bv[p * m + j];
    return c;
  };
  Tensor a = randn({5, 7}), b = randn({7, 3});
  EXPECT_TRUE(all_close(mm(a, b), naive(a, b), 1e-4, 1e-5));
  Tensor at = transpose(randn({7, 5}), 0, 1);  // non-contiguous operand
  EXPECT_TRUE(all_close(mm(at, b), naive(at, b), 1e-4, 1e-5));
  Tensor ad = to(a, f64), bd = to(b, f64);
  EXPECT_TRUE(all_close(matmul(ad, bd), naive(ad, bd), 1e-12, 1e-12));
  Tensor ai = to(mul(a, 4), i64), bi = to(mul(b, 4), i64);
  EXPECT_TRUE(all_close(mm(ai, bi), naive(ai, bi), 0, 0));
  // bmm and batched, broadcast matmul agree with per-batch mm.
  Tensor x = randn({4, 5, 7}), y = randn({4, 7, 3});
  Tensor r = bmm(x, y);
  Tensor r2 = matmul(unsqueeze(x, 0), y);  // [1, 4, 5, 7] @ [4, 7, 3]
  for (int i = 0; i < 4; ++i) {
    std::vector<double> want = naive(select(x, 0, i), select(y, 0, i));
    EXPECT_TRUE(all_close(select(r, 0, i), want, 1e-4, 1e-5));
    EXPECT_TRUE(all_close(select(select(r2, 0, 0), 0, i), want, 1e-4, 1e-5));
  }
  Tensor shared = matmul(x, b);  // [4, 5, 7] @ [7, 3]: folded into one GEMM
  EXPECT_TRUE(all_close(select(shared, 0, 2), naive(select(x, 0, 2), b), 1e-4, 1e-5));
  // 1-D operands
  Tensor v = randn({7});
  EXPECT_EQ(matmul(v, v).dim(), 0);
  EXPECT_NEAR(item<float>(matmul(v, v)), item<float>(sum(mul(v, v))), 1e-4);
  EXPECT_EQ(matmul(a, v).shape(), (Dims{5}));
  EXPECT_EQ(matmul(v, b).shape(), (Dims{3}));
  EXPECT_TRUE(all_close(matmul(a, v), naive(a, unsqueeze(v, 1)), 1e-4, 1e-5));
  // addmm and linear
  Tensor bias = randn({3});
  std::vector<double> ab = naive(a, b), bv = values(bias), want;
  for (size_t i = 0; i < ab.size(); ++i) want.push_back(0.5 * bv[i % 3] + 2 * ab[i]);
  EXPECT_TRUE(all_close(addmm(bias, a, b, 0.5, 2), want, 1e-4, 1e-5));
  Tensor w = randn({3, 7});
  std::vector<double> lin = naive(a, transpose(w, 0, 1)), lw;
  for (size_t i = 0; i < lin.size(); ++i) lw.push_back(lin[i] + bv[i % 3]);
  EXPECT_TRUE(all_close(linear(a, w, bias), lw, 1e-4, 1e-5));
  EXPECT_TRUE(all_close(linear(a, w), lin, 1e-4, 1e-5));
  EXPECT_EQ(linear(randn({2, 4, 7}), w).shape(), (Dims{2, 4, 3}));
  // Zero input features: the output is the bias on every row, the bias's gradient the
  // sum of grad_output's rows (the row count is not numel / features).
  Tensor none = empty({5, 0});
  EXPECT_TRUE(all_close(linear(none, empty({3, 0}), bias), values(expand(bias, {5, 3})), 0, 0));
  Tensor g = randn({5, 3});
  LinearGrads lg = linear_backward(g, none, empty({3, 0}));
  EXPECT_EQ(lg.input.shape(), (Dims{5, 0}));
  EXPECT_TRUE(all_close(lg.bias, values(sum(g, {0})), 1e-5, 1e-6));
  LinearGrads full_g = linear_backward(g, a, w);  // the fused op against its definition
  EXPECT_TRUE(all_close(full_g.input, values(mm(g, w)), 1e-4, 1e-5));
  EXPECT_TRUE(all_close(full_g.weight, values(mm(transpose(g, 0, 1), a)), 1e-4, 1e-5));
  EXPECT_TRUE(all_close(full_g.bias, values(sum(g, {0})), 1e-5, 1e-6));
  expect_error([&] { mm(a, a); }, ErrorKind::shape,
               "[mm] mat1 and mat2 shapes cannot be multiplied (5x7 and 5x7)");
  expect_error([&] { mm(a, bd); }, ErrorKind::dtype, "same dtype");
}

TEST(DataMovement, CatStackSplitChunk) {
  Tensor a = tensor({1, 2, 3, 4}, {2, 2}), b = tensor({5, 6}, {1, 2});
  Tensor c = cat({a, b});
  EXPECT_EQ(c.shape(), (Dims{3, 2}));
  EXPECT_TRUE(all_close(c, {1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(all_close(cat({a, a}, 1), {1, 2, 1, 2, 3, 4, 3, 4}));
  EXPECT_EQ(cat({a, to(a, i64)}).dtype(), f32);
  Tensor s = stack({a, a}, 1);
  EXPECT_EQ(s.shape(), (Dims{2, 2, 2}));
  EXPECT_TRUE(all_close(s, {1, 2, 1, 2, 3, 4, 3, 4}));
  TensorList parts = split(arange(7), 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].shape(), (Dims{1}));
  EXPECT_EQ(to_vector<int64_t>(parts[1]), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_TRUE(parts[1].is_alias_of(parts[0]));
  TensorList ch = chunk(arange(6), 4);  // torch gives chunks of 2: [0,1], [2,3], [4,5]
  EXPECT_EQ(ch.size(), 3u);
  expect_error(
      [&] {
        cat({a, tensor({1, 2, 3}, {1, 3})});
      },
      ErrorKind::shape, "[cat] sizes of tensors must match except in dimension 0");
}

TEST(DataMovement, IndexingOps) {
  Tensor x = view(arange(0, 12, 1, {.dtype = f32}), {3, 4});
  Tensor idx = from_vector<int64_t>({2, 0, 2});
  EXPECT_TRUE(all_close(index_select(x, 0, idx), {8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_TRUE(all_close(index_select(x, 1, from_vector<int32_t>({3, 3})), {3, 3, 7, 7, 11, 11}));
  // Negative indices are out of bounds, as in PyTorch (no wrapping).
  for (Tensor bad : {from_vector<int32_t>({3, -1}), from_vector<int64_t>({-4})})
    expect_error([&] { index_select(x, 1, bad); }, ErrorKind::index, "[index_select] index -");
  expect_error(
      [&] {
        gather(x, 1, from_vector<int64_t>({-1}, {1, 1}));
      },
      ErrorKind::index, "[gather] index -1 is out of bounds");
  expect_error([&] { embedding(x, from_vector<int64_t>({-1})); }, ErrorKind::index,
               "[embedding] index -1 is out of bounds");
  Tensor g = gather(x, 1, from_vector<int64_t>({0, 3, 1, 1, 2, 0}, {3, 2}));
  EXPECT_TRUE(all_close(g, {0, 3, 5, 5, 10, 8}));
  Tensor e = embedding(x, from_vector<int64_t>({1, 1, 0, 2}, {2, 2}));
  EXPECT_EQ(e.shape(), (Dims{2, 2, 4}));
  EXPECT_TRUE(all_close(select(select(e, 0, 0), 0, 1), {4, 5, 6, 7}));
  EXPECT_TRUE(all_close(select(select(e, 0, 1), 0, 0), {0, 1, 2, 3}));
  expect_error([&] { index_select(x, 0, from_vector<int64_t>({3})); }, ErrorKind::index,
               "[index_select] index 3 is out of bounds for dimension 0 with size 3");
  expect_error([&] { index_select(x, 0, tensor({1})); }, ErrorKind::dtype,
               "expected an index tensor of dtype i64 or i32");
}

TEST(Normalization, LayerAndRmsNorm) {
  manual_seed(5);
  Tensor x = randn({3, 8});
  Tensor w = randn({8}), b = randn({8});
  Tensor y = layer_norm(x, {8}, w, b, 1e-5);
  std::vector<double> xv = values(x), wv = values(w), bv = values(b), want, want_rms;
  for (int r = 0; r < 3; ++r) {
    double m = 0, v = 0, ms = 0;
    for (int j = 0; j < 8; ++j) m += xv[r * 8 + j] / 8;
    for (int j = 0; j < 8; ++j) v += (xv[r * 8 + j] - m) * (xv[r * 8 + j] - m) / 8;
    for (int j = 0; j < 8; ++j) ms += xv[r * 8 + j] * xv[r * 8 + j] / 8;
    for (int j = 0; j < 8; ++j)
      want.push_back((xv[r * 8 + j] - m) / std::sqrt(v + 1e-5) * wv[j] + bv[j]);
    for (int j = 0; j < 8; ++j) want_rms.push_back(xv[r * 8 + j] / std::sqrt(ms + 1e-6) * wv[j]);
  }
  EXPECT_TRUE(all_close(y, want, 1e-4, 1e-5));
  EXPECT_TRUE(all_close(rms_norm(x, {8}, w, 1e-6), want_rms, 1e-4, 1e-5));
  expect_error([&] { layer_norm(x, {4}); }, ErrorKind::shape,
               "normalized_shape [4] does not match");
}

TEST(Factories, ShapesDtypesAndValues) {
  EXPECT_TRUE(all_close(arange(1, 2, 0.25), {1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(arange(5).dtype(), i64);
  EXPECT_EQ(to_vector<int64_t>(arange(10, 0, -3)), (std::vector<int64_t>{10, 7, 4, 1}));
  EXPECT_EQ(full({2}, 7, {.dtype = i32}).dtype(), i32);
  EXPECT_TRUE(all_close(full({2, 2}, 1.5), {1.5, 1.5, 1.5, 1.5}));
  EXPECT_EQ(zeros_like(arange(3)).dtype(), i64);
  EXPECT_EQ(scalar_tensor(2).dim(), 0);
  expect_error([] { zeros({-1}); }, ErrorKind::shape, "negative dimension");
  expect_error([] { arange(0, 5, -1); }, ErrorKind::value, "inconsistent with step sign");
  expect_error(
      [] {
        tensor({1, 2, 3}, {2, 2});
      },
      ErrorKind::shape, "3 values cannot fill shape [2, 2]");
}

}  // namespace
}  // namespace kiln

#include "kiln/backend/cpu/vmath.h"

namespace kiln {
namespace {

TEST(VectorMath, FastExpAndErfAreAccurate) {
  double worst_exp = 0, worst_erf = 0;
  for (float x = -80.0f; x <= 80.0f; x += 0.01237f)
    worst_exp = std::max(worst_exp, std::abs(cpu::fast_exp(x) / std::exp(double(x)) - 1));
  for (float x = -6.0f; x <= 6.0f; x += 0.00131f)
    worst_erf = std::max(worst_erf, std::abs(double(cpu::fast_erf(x)) - std::erf(double(x))));
  EXPECT_LT(worst_exp, 3e-7);
  EXPECT_LT(worst_erf, 5e-7);
  EXPECT_EQ(cpu::fast_exp(-INFINITY), 0.0f);  // masked softmax entries stay exactly 0
  EXPECT_EQ(cpu::fast_exp(-100.0f), 0.0f);
  EXPECT_TRUE(std::isinf(cpu::fast_exp(INFINITY)));
  EXPECT_TRUE(std::isnan(cpu::fast_exp(NAN)));
  EXPECT_EQ(cpu::fast_exp(0.0f), 1.0f);
  EXPECT_EQ(cpu::fast_erf(0.0f), 0.0f);
  // the exp without overflow selects: accurate on x <= 0, exactly 0 below -87.3
  double worst_nonpositive = 0;
  for (float x = -87.0f; x <= 0.0f; x += 0.00737f)
    worst_nonpositive = std::max(worst_nonpositive,
                                 std::abs(cpu::fast_exp_nonpositive(x) / std::exp(double(x)) - 1));
  EXPECT_LT(worst_nonpositive, 3e-7);
  EXPECT_EQ(cpu::fast_exp_nonpositive(-INFINITY), 0.0f);
  EXPECT_EQ(cpu::fast_exp_nonpositive(-90.0f), 0.0f);
  EXPECT_EQ(cpu::fast_exp_nonpositive(0.0f), 1.0f);
  // erf at the ends and NaN, as PyTorch's: 1, -1, NaN
  EXPECT_EQ(cpu::fast_erf(INFINITY), 1.0f);
  EXPECT_EQ(cpu::fast_erf(-INFINITY), -1.0f);
  EXPECT_EQ(cpu::fast_erf(30.0f), 1.0f);
  EXPECT_TRUE(std::isnan(cpu::fast_erf(NAN)));
}

// The exact GELU's derivative with one exp shared by erf and the density: against the
// double formula, through the op (gelu_backward with gradient 1, vectorized) and the
// function itself.
TEST(VectorMath, GeluDerivativeSharesItsExpAndStaysAccurate) {
  std::vector<float> xs;
  for (float x = -9.0f; x <= 9.0f; x += 0.00173f) xs.push_back(x);
  Tensor x = from_vector<float>(xs);
  std::vector<float> got = to_vector<float>(gelu_backward(ones_like(x), x, "none"));
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    double v = xs[i];
    double want =
        0.5 * (1 + std::erf(v / std::sqrt(2.0))) + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    worst = std::max(worst, std::abs(got[i] - want));
    worst = std::max(worst, std::abs(cpu::fast_gelu_derivative(xs[i]) - want));
  }
  EXPECT_LT(worst, 1e-6);
  EXPECT_EQ(cpu::fast_gelu_derivative(0.0f), 0.5f);
  EXPECT_TRUE(std::isnan(cpu::fast_gelu_derivative(NAN)));
  // PyTorch's gelu'(+-inf) is NaN (inf times a density of 0); finite ends are 1 and 0
  EXPECT_TRUE(std::isnan(cpu::fast_gelu_derivative(INFINITY)));
  EXPECT_TRUE(std::isnan(cpu::fast_gelu_derivative(-INFINITY)));
  EXPECT_EQ(cpu::fast_gelu_derivative(20.0f), 1.0f);
  EXPECT_EQ(cpu::fast_gelu_derivative(-20.0f), 0.0f);
}

TEST(VectorMath, TanhGeluMatchesItsDefinition) {
  std::vector<float> xs;
  for (float x = -12.0f; x <= 12.0f; x += 0.00731f) xs.push_back(x);
  std::vector<float> got = to_vector<float>(gelu(from_vector<float>(xs), "tanh"));
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    double x = xs[i];
    double want = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    worst = std::max(worst, std::abs(got[i] - want) / (1e-6 + std::abs(want)));
  }
  EXPECT_LT(worst, 2e-6);
}

TEST(VectorMath, FastTanhIsAccurateNearZeroAndSaturates) {
  double worst = 0;
  for (float x = -12.0f; x <= 12.0f; x += 0.000913f) {
    double want = std::tanh(double(x));
    worst = std::max(worst, std::abs(cpu::fast_tanh(x) - want) / std::max(std::abs(want), 1e-30));
  }
  for (float x = 1e-6f; x < 1.0f; x *= 1.37f) {  // relative precision kept for tiny |x|
    worst = std::max(worst, std::abs(cpu::fast_tanh(x) / std::tanh(double(x)) - 1));
    worst = std::max(worst, std::abs(cpu::fast_tanh(-x) / std::tanh(double(-x)) - 1));
  }
  EXPECT_LT(worst, 5e-7);
  EXPECT_EQ(cpu::fast_tanh(0.0f), 0.0f);
  EXPECT_EQ(cpu::fast_tanh(INFINITY), 1.0f);
  EXPECT_EQ(cpu::fast_tanh(-INFINITY), -1.0f);
  EXPECT_EQ(cpu::fast_tanh(30.0f), 1.0f);
  EXPECT_TRUE(std::isnan(cpu::fast_tanh(NAN)));
}

// The operators users reach for first, each the op it names.
TEST(Operators, ArithmeticComparisonsAndCompoundAssignment) {
  Tensor a = tensor({1, 2, 3});
  Tensor b = tensor({3, 2, 1});
  EXPECT_TRUE(all_close(2.0 * a, {2, 4, 6}));
  EXPECT_TRUE(all_close(1 - a, {0, -1, -2}));
  EXPECT_TRUE(all_close(6 / a, {6, 3, 2}));
  EXPECT_TRUE(all_close(1 + a, {2, 3, 4}));
  EXPECT_EQ((1 - from_vector<int64_t>({5})).dtype(), i64);  // promotion as rsub
  EXPECT_EQ(to_vector<bool>(a > b), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(to_vector<bool>(a >= b), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(to_vector<bool>(a < b), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(to_vector<bool>(a <= 2), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(to_vector<bool>(a == b), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(to_vector<bool>(a != 2), (std::vector<bool>{true, false, true}));
  Tensor c = a;
  c += b;
  EXPECT_TRUE(c.is_same(a));  // in place, like add_
  EXPECT_TRUE(all_close(a, {4, 4, 4}));
  c -= 1;
  c *= b;
  c /= 3;
  EXPECT_TRUE(all_close(a, {3, 2, 1}));
  c *= 2.0;
  c -= b;
  EXPECT_TRUE(all_close(-a, {-3, -2, -1}));
  Tensor elsewhere = ones({3}, {.device = Device("cpu:1")});
  expect_error([&] { c += elsewhere; }, ErrorKind::device_mismatch, "[add_]");  // (D2)
}

TEST(Operators, NumbersOnTheLeftRemainderAndShifts) {
  Tensor a = tensor({1, 2, 3});
  EXPECT_EQ(to_vector<bool>(2 < a), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(to_vector<bool>(2 >= a), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(to_vector<bool>(2 == a), (std::vector<bool>{false, true, false}));
  EXPECT_TRUE(all_close(tensor({-5.0, 5.0}) % 3, {1, 2}));  // Python's %: the divisor's sign
  EXPECT_TRUE(all_close(7 % tensor({-3.0, 4.0}), {-2, 3}));
  Tensor i = from_vector<int64_t>({1, -8, 5});
  EXPECT_EQ(to_vector<int64_t>(i << 2), (std::vector<int64_t>{4, -32, 20}));
  EXPECT_EQ(to_vector<int64_t>(i >> 1), (std::vector<int64_t>{0, -4, 2}));
  EXPECT_EQ(to_vector<int64_t>(6 & i), (std::vector<int64_t>{0, 0, 4}));
  EXPECT_EQ(to_vector<int64_t>(i << from_vector<int64_t>({64, 0, -1})),
            (std::vector<int64_t>{0, -8, 0}));
  expect_error([&] { (void)(a << 1); }, ErrorKind::dtype, "[bitwise_left_shift]");
}

TEST(Operators, TypedDataChecksTheDtype) {
  Tensor f = tensor({1, 2});
  EXPECT_EQ(f.data<float>()[1], 2.0f);
  expect_error([&] { f.data<int64_t>(); }, ErrorKind::dtype,
               "[data] expected a tensor of dtype i64 for this element type, but got f32[2]@cpu:0");
  expect_error([&] { f.data<const double>(); }, ErrorKind::dtype, "dtype f64");
  EXPECT_NE(f.data<char>(), nullptr);  // bytes are not checked
}

TEST(Operators, PrintingDevicesDtypesAndShapes) {
  std::ostringstream os;
  os << Device("cpu:1") << " " << f16 << " " << Dims{2, 3};
  EXPECT_EQ(os.str(), "cpu:1 f16 [2, 3]");
}

// Sampling: support, shapes and dtypes exactly; frequencies within wide bounds (a fixed
// seed makes each run the same draw, so these are not flaky).
TEST(Sampling, RandintRandpermBernoulliNormal) {
  manual_seed(11);
  Tensor r = randint(3, 7, {20000});
  EXPECT_EQ(r.dtype(), DType::i64);
  EXPECT_EQ(item<int64_t>(amin(r)), 3);
  EXPECT_EQ(item<int64_t>(amax(r)), 6);
  for (int64_t v = 3; v < 7; ++v) EXPECT_NEAR(item<double>(mean(to(r == v, f64))), 0.25, 0.02) << v;
  EXPECT_EQ(randint(0, 5, {2, 3}, {.dtype = DType::i32}).dtype(), DType::i32);

  Tensor perm = randperm(50);
  EXPECT_EQ(values(std::get<0>(sort(perm))), values(arange(50)));
  EXPECT_NE(values(perm), values(arange(50)));

  Tensor p = full({20000}, 0.3);
  Tensor b = bernoulli(p);
  EXPECT_EQ(b.dtype(), f32);
  EXPECT_TRUE(item<bool>(all(logical_or(b == 0.0, b == 1.0))));
  EXPECT_NEAR(item<double>(mean(b)), 0.3, 0.02);
  EXPECT_NEAR(item<double>(mean(bernoulli(zeros({20000}, {.dtype = f64}), 0.75))), 0.75, 0.02);

  Tensor n = normal(full({20000}, 2.0), full({1}, 0.5));
  EXPECT_NEAR(item<double>(mean(n)), 2.0, 0.02);
  EXPECT_NEAR(item<double>(kiln::std(n)), 0.5, 0.02);
  EXPECT_EQ(normal(1.0, 0.0, {3}, {.dtype = f64}).dtype(), f64);
  EXPECT_TRUE(all_close(normal(1.0, 0.0, {3}), {1, 1, 1}));

  expect_error([] { randint(5, 5, {2}); }, ErrorKind::value, "[randint] expects low < high");
  expect_error([] { normal(0.0, -1.0, {2}); }, ErrorKind::value, "std >= 0.0");
}

// The in-place distribution fills: sample means within 6 standard errors of the
// distribution's (n = 200000), supports respected.
TEST(Sampling, InPlaceDistributionsHaveTheirMeansAndSupports) {
  manual_seed(7);
  const int64_t n = 200000;
  auto mean_of = [](const Tensor& t) { return item<double>(mean(to(t, f64))); };
  auto within = [&](double got, double want, double sd) {
    return std::abs(got - want) < 6 * sd / std::sqrt(double(n));
  };
  Tensor e = empty({n}, {.dtype = f64});
  exponential_(e, 2.0);
  EXPECT_TRUE(within(mean_of(e), 0.5, 0.5));
  EXPECT_GE(item<double>(amin(e)), 0.0);
  Tensor g = empty({n}, {.dtype = i64});
  geometric_(g, 0.25);  // mean 1/p, sd sqrt(1-p)/p
  EXPECT_TRUE(within(mean_of(g), 4.0, std::sqrt(0.75) / 0.25));
  EXPECT_EQ(item<int64_t>(amin(g)), 1);
  Tensor l = empty({n}, {.dtype = f64});
  log_normal_(l, 0.0, 0.5);  // log is N(0, 0.5)
  EXPECT_TRUE(within(mean_of(log(l)), 0.0, 0.5));
  Tensor c = empty({n}, {.dtype = f64});
  cauchy_(c, 3.0, 2.0);  // median 3, quartiles 3 -+ 2
  EXPECT_NEAR(item<double>(median(c)), 3.0, 0.05);
  EXPECT_NEAR(item<double>(mean(to(abs(c - 3.0) < 2.0, f64))), 0.5, 0.01);
  Tensor r = empty({n}, {.dtype = i32});
  random_(r, -3, 4);
  EXPECT_EQ(item<int64_t>(amin(r)), -3);
  EXPECT_EQ(item<int64_t>(amax(r)), 3);
  expect_error([&] { exponential_(e, 0.0); }, ErrorKind::value, "lambd > 0.0");
  expect_error([&] { exponential_(r, 1.0); }, ErrorKind::dtype, "[exponential_]");
  Tensor x = ones({64, 32}, {.dtype = f64});
  auto [out, keep] = nn::native_dropout(x, 0.25, true);
  EXPECT_EQ(keep.dtype(), b8);
  EXPECT_TRUE(all_close(out, to_vector<double>(to(keep, f64) / 0.75)));
  Tensor channels = nn::feature_dropout(ones({4, 8, 3, 2, 2}), 0.5, true);
  Tensor per_channel = amax(channels, {2, 3, 4}), lowest = amin(channels, {2, 3, 4});
  EXPECT_TRUE(all_close(per_channel, to_vector<double>(lowest)));  // whole channels kept or dropped
}

TEST(Sampling, MultinomialWithAndWithoutReplacement) {
  manual_seed(12);
  Tensor probs = tensor({0.1, 0.0, 0.6, 0.3});
  Tensor draws = multinomial(probs, 20000, /*replacement=*/true);
  EXPECT_EQ(draws.dtype(), DType::i64);
  EXPECT_EQ(draws.shape(), (Dims{20000}));
  std::vector<double> want = {0.1, 0.0, 0.6, 0.3};
  for (int64_t k = 0; k < 4; ++k)
    EXPECT_NEAR(item<double>(mean(to(draws == k, f64))), want[static_cast<size_t>(k)], 0.02) << k;
  // Without replacement: distinct categories per row, zero-probability ones never drawn
  // while others remain; unnormalized rows work.
  Tensor rows = tensor({5.0, 0.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0}, {2, 4});
  for (int trial = 0; trial < 20; ++trial) {
    Tensor pick = multinomial(rows, 3);
    ASSERT_EQ(pick.shape(), (Dims{2, 3}));
    for (int64_t r = 0; r < 2; ++r) {
      std::vector<double> v = values(std::get<0>(sort(select(pick, 0, r))));  // distinct
      EXPECT_TRUE(v[0] != v[1] && v[1] != v[2]) << "row " << r;
    }
    for (double c : values(select(pick, 0, 0))) EXPECT_NE(c, 1.0);
  }
  // The most likely category comes first most often (Gumbel top-k draws in order).
  Tensor firsts =
      select(multinomial(expand(unsqueeze(tensor({0.7, 0.2, 0.1}), 0), {4000, 3}), 1), 1, 0);
  EXPECT_NEAR(item<double>(mean(to(firsts == 0, f64))), 0.7, 0.03);
  expect_error([&] { multinomial(probs, 5); }, ErrorKind::value, "without replacement");
  expect_error([] { multinomial(tensor({0.5, -0.1}), 1); }, ErrorKind::value, "element < 0");
}

// The factorizations reconstruct their input and the solvers invert (batched, on a
// virtual device); the golden file checks them against PyTorch value by value.
TEST(Linalg, FactorizationsReconstructAndSolversInvert) {
  manual_seed(13);
  Device d("cpu:2");
  TensorOptions o{.dtype = f64, .device = d};
  Tensor a = randn({3, 5, 5}, o), b = randn({3, 5, 2}, o);
  Tensor eye5 = eye(5, std::nullopt, o);
  auto [p, l, u] = linalg::lu(a);
  EXPECT_TRUE(all_close(matmul(p, matmul(l, u)), values(a), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(matmul(a, linalg::inv(a)), values(expand(eye5, {3, 5, 5})), 1e-10, 1e-10));
  EXPECT_TRUE(all_close(matmul(a, linalg::solve(a, b)), values(b), 1e-10, 1e-10));
  auto [q, r] = linalg::qr(randn({3, 6, 4}, o));
  EXPECT_TRUE(all_close(matmul(transpose(q, -2, -1), q),
                        values(expand(eye(4, std::nullopt, o), {3, 4, 4})), 1e-12, 1e-12));
  Tensor spd = matmul(a, transpose(a, -2, -1)) + eye5;
  Tensor c = linalg::cholesky(spd);
  EXPECT_TRUE(all_close(matmul(c, transpose(c, -2, -1)), values(spd), 1e-10, 1e-10));
  EXPECT_TRUE(all_close(linalg::det(spd),
                        values(prod(diagonal(c, 0, -2, -1), -1) * prod(diagonal(c, 0, -2, -1), -1)),
                        1e-10, 1e-10));
  EXPECT_TRUE(all_close(matrix_power(a, 3), values(matmul(a, matmul(a, a))), 1e-12, 1e-12));
  EXPECT_EQ(linalg::det(a).device(), d);
  Tensor singular = tensor({1.0, 2.0, 2.0, 4.0}, {2, 2});
  EXPECT_EQ(item<double>(linalg::det(singular)), 0.0);
  expect_error([&] { linalg::inv(singular); }, ErrorKind::value,
               "[linalg.inv] the input matrix is singular");
  expect_error([&] { linalg::solve(singular, tensor({1.0, 1.0})); }, ErrorKind::value, "singular");
  expect_error(
      [&] {
        linalg::cholesky(tensor({1.0, 2.0, 2.0, 1.0}, {2, 2}));
      },
      ErrorKind::value, "leading minor of order 2 is not positive-definite");
  expect_error([&] { linalg::det(randn({2, 3})); }, ErrorKind::shape, "square");
  // Traced with fake tensors: the loop unrolls, the eager checks (host reads) are skipped.
  ir::Graph g = make_fx(
      [](const TensorList& in) {
        return TensorList{linalg::solve(in[0], in[1]), linalg::det(in[0])};
      },
      {a, b});
  EXPECT_GT(g.nodes().size(), 5u * 10u);
  EXPECT_NE(g.str().find("@cpu:2"), std::string::npos);
}

// The random nn functions: what their distributions promise (values are not PyTorch's
// stream; tests/golden checks them where they are deterministic).
TEST(Sampling, ChannelDropoutsAlphaDropoutGumbelAndRrelu) {
  manual_seed(3);
  Tensor x = ones({64, 32, 3, 3}, {.dtype = f64});
  Tensor y = nn::dropout2d(x, 0.25);
  // Whole channels: every channel is all 0 or all 1/(1 - p); about p of them dropped.
  Tensor per_channel = amax(y, {2, 3}), lowest = amin(y, {2, 3});
  EXPECT_TRUE(item<bool>(all(per_channel == lowest)));
  EXPECT_TRUE(item<bool>(all(logical_or(per_channel == 0.0, abs(per_channel - 1 / 0.75) < 1e-12))));
  EXPECT_NEAR(item<double>(mean(to(per_channel == 0.0, f64))), 0.25, 0.03);
  // alpha_dropout keeps a standard normal's mean and variance.
  Tensor z = randn({200000}, {.dtype = f64});
  Tensor a = nn::alpha_dropout(z, 0.3, true);
  EXPECT_NEAR(item<double>(mean(a)), 0.0, 0.02);
  EXPECT_NEAR(item<double>(kiln::std(a)), 1.0, 0.02);
  // gumbel_softmax: rows on the simplex; hard ones one-hot with the soft gradient.
  Tensor logits = randn({8, 5}, {.dtype = f64, .requires_grad = true});
  Tensor soft = nn::gumbel_softmax(logits, 0.5);
  EXPECT_TRUE(all_close(sum(soft, {1}), std::vector<double>(8, 1.0), 1e-12, 1e-12));
  Tensor hard = nn::gumbel_softmax(logits, 0.5, true);
  EXPECT_TRUE(all_close(sum(hard, {1}), std::vector<double>(8, 1.0), 0, 0));
  EXPECT_TRUE(item<bool>(all(logical_or(hard == 0.0, hard == 1.0))));
  TensorList g = autograd::grad({sum(hard * randn({8, 5}, {.dtype = f64}))}, {logits});
  EXPECT_GT(item<double>(sum(abs(g[0]))), 0.0);
  // rrelu in training: each negative element's slope within [lower, upper].
  Tensor neg_x = full({1000}, -2.0, {.dtype = f64});
  Tensor slopes = nn::rrelu(neg_x, 0.1, 0.3, true) / -2.0;
  EXPECT_TRUE(item<bool>(all(logical_and(slopes >= 0.1, slopes <= 0.3))));
  EXPECT_GT(item<double>(kiln::std(slopes)), 0.01);
}

TEST(Linalg, DecompositionsReconstructAndWhatIsBuiltOnThemHolds) {
  manual_seed(17);
  Device d("cpu:3");
  TensorOptions o{.dtype = f64, .device = d};
  auto mT = [](const Tensor& x) { return transpose(x, -2, -1); };
  Tensor m = randn({3, 5, 5}, o), sym = m + mT(m);
  auto [l, v] = linalg::eigh(sym);
  EXPECT_EQ(l.device(), d);
  EXPECT_TRUE(all_close(matmul(v * unsqueeze(l, -2), mT(v)), values(sym), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(matmul(mT(v), v), values(expand(eye(5, std::nullopt, o), {3, 5, 5})), 1e-12,
                        1e-12));
  EXPECT_TRUE(item<bool>(all(diff(l, 1, -1) >= 0.0)));  // ascending
  // Only the named triangle is read: garbage in the other changes nothing.
  EXPECT_TRUE(all_close(linalg::eigvalsh(tril(sym) + triu(randn({3, 5, 5}, o), 1)), values(l),
                        1e-12, 1e-12));
  EXPECT_TRUE(all_close(linalg::eigvalsh(triu(sym) + tril(randn({3, 5, 5}, o), -1), "U"), values(l),
                        1e-12, 1e-12));
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{6, 4}, {4, 6}}) {
    Tensor a = randn({2, rows, cols}, o);
    for (bool full : {false, true}) {
      auto [u, s, vh] = linalg::svd(a, full);
      int64_t k = std::min(rows, cols);
      EXPECT_EQ(u.shape().vec(), (IntList{2, rows, full ? rows : k}));
      EXPECT_EQ(vh.shape().vec(), (IntList{2, full ? cols : k, cols}));
      Tensor uk = narrow(u, -1, 0, k), vk = narrow(vh, -2, 0, k);
      EXPECT_TRUE(all_close(matmul(uk * unsqueeze(s, -2), vk), values(a), 1e-12, 1e-12));
      int64_t c = u.size(-1);
      EXPECT_TRUE(all_close(matmul(mT(u), u), values(expand(eye(c, std::nullopt, o), {2, c, c})),
                            1e-12, 1e-12));
    }
    // The Moore-Penrose conditions, and least squares through them.
    Tensor p = linalg::pinv(a);
    EXPECT_TRUE(all_close(matmul(matmul(a, p), a), values(a), 1e-10, 1e-10));
    EXPECT_TRUE(all_close(matmul(matmul(p, a), p), values(p), 1e-10, 1e-10));
    Tensor b = randn({2, rows, 3}, o);
    EXPECT_TRUE(all_close(linalg::lstsq(a, b).solution, values(matmul(p, b)), 1e-10, 1e-10));
    EXPECT_EQ(to_vector<int64_t>(linalg::matrix_rank(a)),
              (std::vector<int64_t>{std::min(rows, cols), std::min(rows, cols)}));
  }
  Tensor deficient = matmul(randn({5, 2}, o), randn({2, 4}, o));
  EXPECT_EQ(item<int64_t>(linalg::matrix_rank(deficient)), 2);
  EXPECT_NEAR(item<double>(linalg::matrix_norm(deficient, "2")),
              item<double>(amax(linalg::svdvals(deficient))), 1e-12);
  EXPECT_NEAR(item<double>(linalg::cond(eye(3, std::nullopt, o) * 2.0)), 1.0, 1e-12);
  // Refusals: what LAPACK cannot take, and what it would not converge on.
  expect_error(
      [&] {
        linalg::eigh(randn({2, 3}, o));
      },
      ErrorKind::shape, "[linalg_eigh] expects square matrices");
  expect_error(
      [&] {
        linalg::eigh(ones({2, 2}, {.dtype = f16}));
      },
      ErrorKind::dtype, "float or double");
  expect_error([&] { linalg::eigh(sym, "X"); }, ErrorKind::value, "UPLO must be 'L' or 'U'");
  expect_error(
      [&] {
        linalg::svd(tensor({1.0, std::nan(""), 0.0, 1.0}, {2, 2}));
      },
      ErrorKind::value,
      "[linalg.svd] the algorithm failed to converge because the input matrix contained non-finite "
      "values");
  expect_error(
      [&] {
        linalg::lstsq(randn({4, 3}, o), randn({4, 2}, o), std::nullopt, "gelsx");
      },
      ErrorKind::value, "driver");
  // Traced: one node per decomposition, on the traced device, with the results' shapes.
  ir::Graph g = make_fx(
      [](const TensorList& in) {
        auto [u, s, vh] = linalg::svd(in[0], false);
        return TensorList{linalg::eigvalsh(in[1]), s};
      },
      {randn({4, 3}, o), sym});
  std::string text = g.str();
  EXPECT_NE(text.find("linalg_svd"), std::string::npos) << text;
  EXPECT_NE(text.find("linalg_eigh"), std::string::npos) << text;
  EXPECT_LT(g.nodes().size(), 10u) << text;
}

// torch.masked (values: tests/golden): masked-out elements take no part, in the value and
// in the gradient, and the ops trace with fake tensors on the device of their inputs.
TEST(Masked, LeftOutElementsTakeNoPartAndTheOpsTrace) {
  Device d("cpu:2");
  TensorOptions o{.dtype = f64, .device = d};
  Tensor x = tensor({1.0, 5.0, -2.0, 4.0, 3.0, 8.0}, {2, 3}, o);
  x.set_requires_grad();
  Tensor mask = to(tensor({1.0, 0.0, 1.0}, {}, o), b8);  // broadcast over rows
  EXPECT_EQ(to_vector<double>(masked::sum(x, {1}, false, std::nullopt, mask)),
            (std::vector<double>{-1.0, 12.0}));
  EXPECT_EQ(to_vector<double>(masked::amax(x, {1}, false, std::nullopt, mask)),
            (std::vector<double>{1.0, 8.0}));
  Tensor gx = autograd::grad(
      {sum(masked::softmax(x, 1, std::nullopt, mask) * tensor({1.0, 2.0, 3.0}, {}, o))}, {x})[0];
  EXPECT_EQ(item<double>(sum(abs(select(gx, 1, 1)))), 0.0);  // the left-out column
  EXPECT_GT(item<double>(sum(abs(gx))), 0.0);
  Tensor none = zeros({3}, {.dtype = b8, .device = d});
  EXPECT_TRUE(item<bool>(all(isnan(masked::mean(x.detach(), {1}, false, std::nullopt, none)))));
  expect_error(
      [&] {
        masked::sum(x, {}, false, std::nullopt, ones({1, 2, 3}, {.dtype = b8, .device = d}));
      },
      ErrorKind::shape, "more dims");
  expect_error(
      [&] {
        masked::amax(ones({2}, {.dtype = b8}), {}, false, std::nullopt, ones({2}, {.dtype = b8}));
      },
      ErrorKind::dtype, "[masked.amax] no identity for bool");
  expect_error(
      [&] {
        masked::median(ones({2}, {.dtype = i32}), 0, false, std::nullopt,
                       zeros({2}, {.dtype = b8}));
      },
      ErrorKind::value, "fully masked-out rows");
  ir::Graph graph = make_fx(
      [](const TensorList& in) {
        return TensorList{masked::median(in[0], 1, false, std::nullopt, in[1]),
                          masked::var(in[0], {1}, true, false, std::nullopt, in[1])};
      },
      {x.detach(), ones({2, 3}, {.dtype = b8, .device = d})});
  EXPECT_NE(graph.str().find("@cpu:2"), std::string::npos);
  EXPECT_NE(graph.str().find("where"), std::string::npos) << graph.str();
}

// torch.poisson: integer counts whose mean and variance are the rate (values are not
// PyTorch's stream); a zero rate gives 0; a negative rate is an Error; fake: data-dependent.
TEST(Sampling, PoissonCountsHaveTheRateAsMeanAndVariance) {
  manual_seed(5);
  for (double rate : {0.0, 0.3, 4.0, 37.5, 2500.0}) {
    Tensor draws = poisson(full({40000}, rate, {.dtype = f64}));
    EXPECT_EQ(draws.dtype(), f64);
    EXPECT_TRUE(item<bool>(all(eq(draws, floor(draws))))) << rate;
    double m = item<double>(mean(draws)), v = item<double>(var(draws));
    double tol = 5 * std::sqrt(std::max(rate, 1e-3) / 40000);  // 5 standard errors of the mean
    EXPECT_NEAR(m, rate, tol) << rate;
    EXPECT_NEAR(v, rate, 0.05 * rate + 1e-9) << rate;
  }
  Tensor mixed = poisson(tensor({0.0, 1e-3, 12.0}, {}, {.dtype = f32}));
  EXPECT_EQ(mixed.dtype(), f32);
  EXPECT_EQ(item<double>(select(mixed, 0, 0)), 0.0);
  expect_error([] { poisson(tensor({1.0, -0.5})); }, ErrorKind::value, "non-negative");
  expect_error([] { poisson(ones({2}, {.dtype = i64})); }, ErrorKind::dtype, "[poisson]");
  expect_error(
      [] { make_fx([](const TensorList& in) { return TensorList{poisson(in[0])}; }, {ones({3})}); },
      ErrorKind::data_dependent, "[poisson]");
}

// svd_lowrank / pca_lowrank: exact for a matrix of rank <= q, whatever the random draw.
TEST(Linalg, LowRankSvdReconstructsLowRankMatrices) {
  manual_seed(3);
  TensorOptions o{.dtype = f64};
  Tensor a = matmul(randn({9, 2}, o), randn({2, 5}, o));
  for (Tensor m : {a, transpose(a, 0, 1)}) {
    auto [u, s, v] = svd_lowrank(m, 4);
    EXPECT_EQ(u.shape(), (Dims{m.size(0), 4}));
    EXPECT_EQ(v.shape(), (Dims{m.size(1), 4}));
    EXPECT_TRUE(all_close(matmul(matmul(u, diag(s)), transpose(v, 0, 1)), to_vector<double>(m),
                          1e-10, 1e-10));
    EXPECT_TRUE(all_close(narrow(s, 0, 0, 2),
                          to_vector<double>(narrow(linalg::svdvals(m), 0, 0, 2)), 1e-10, 1e-10));
  }
  auto [u, s, v] = pca_lowrank(a + 3.0);  // centering removes the offset
  EXPECT_TRUE(all_close(matmul(matmul(u, diag(s)), transpose(v, 0, 1)),
                        to_vector<double>(a - mean(a, {0}, true)), 1e-10, 1e-10));
  expect_error([&] { pca_lowrank(a, 6); }, ErrorKind::value, "not greater than min(m, n)=5");
}

// An error raised by an op a composite is built from names the op the user called
// (OpNameScope), with the op that raised it after the message.
TEST(Errors, CompositesNameTheOpTheUserCalled) {
  Tensor idx = from_vector(std::vector<int64_t>{0, 1});
  expect_error([&] { index_put(zeros({4}), {idx}, ones({3}), false); }, ErrorKind::shape,
               "[index_put] the expanded size of the tensor (2) must match the existing size (3) "
               "at non-singleton "
               "dimension 0; target sizes [2], tensor sizes [3] (raised by expand)");
  expect_error(
      [&] {
        index_put(zeros({4}), {from_vector(std::vector<int64_t>{0, 7})}, ones({2}), true);
      },
      ErrorKind::index, "[index_put] index 7 is out of bounds for dimension 0 with size 4");
  // the index and scatter composites too: index_add is built on scatter_add, take on gather
  expect_error([&] { index_add(zeros({4}), 0, from_vector(std::vector<int64_t>{5}), ones({1})); },
               ErrorKind::index, "[index_add] ");
  expect_error([&] { index_add(zeros({4}), 0, from_vector(std::vector<int64_t>{5}), ones({1})); },
               ErrorKind::index, "(raised by scatter_add)");
  expect_error([&] { take(zeros({4}), from_vector(std::vector<int64_t>{9})); }, ErrorKind::index,
               "[take] ");
  expect_error([&] { scatter(zeros({4}), 0, from_vector(std::vector<int64_t>{6}), 1.0); },
               ErrorKind::index, "[scatter] ");
  // outside the composite, the op's own name
  expect_error([&] { expand(ones({3}), {2}); }, ErrorKind::shape, "[expand] the expanded size");
  EXPECT_EQ(in_user_op("[expand] x"), "[expand] x");
}

}  // namespace
}  // namespace kiln

// PyTorch behaviours the OpInfo sweep's samples do not reach, each checked against what
// PyTorch 1.13 (and current PyTorch, where they agree) returns for the same call.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::expect_error;

std::vector<int64_t> ints(const Tensor& t) { return to_vector<int64_t>(t); }

// torch.svd(some=True) is the reduced decomposition: U [m, k], not [m, m].
TEST(Parity, SvdSomeIsReduced) {
  manual_seed(3);
  Tensor a = randn({5, 3});
  auto [u, s, v] = svd(a, /*some=*/true);
  EXPECT_EQ(u.shape().vec(), (IntList{5, 3}));
  EXPECT_EQ(v.shape().vec(), (IntList{3, 3}));
  auto [uf, sf, vf] = svd(a, /*some=*/false);
  EXPECT_EQ(uf.shape().vec(), (IntList{5, 5}));
  EXPECT_TRUE(all_close(matmul(u * s, transpose(v, 0, 1)), to_vector<double>(a), 1e-5, 1e-5));
}

// A NaN element makes every p-norm NaN (the 0-"norm" counts it as non-zero).
TEST(Parity, VectorNormOfNaNIsNaN) {
  Tensor x = tensor({1.0, NAN});
  for (double ord : {2.0, 1.0, 3.0, double(INFINITY), -double(INFINITY), -1.0})
    EXPECT_TRUE(std::isnan(item<double>(vector_norm(x, ord)))) << ord;
  EXPECT_EQ(item<double>(vector_norm(x, 0.0)), 2.0);
  EXPECT_EQ(item<double>(vector_norm(tensor({0.0, 0.0}), 2.0)), 0.0);
}

// An integer arange takes its bounds and step as integers (truncated); only i64 counts
// its elements from the truncated bounds.
TEST(Parity, IntegerArangeTruncatesItsArguments) {
  EXPECT_EQ(ints(arange(0.5, 5, 1.5, {.dtype = i64})), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(ints(arange(-1.5, 5, 2.2, {.dtype = i32})), (std::vector<int64_t>{-1, 1, 3}));
  EXPECT_EQ(ints(arange(0, 10, 3, {.dtype = i64})), (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(arange(5.9, 0, -2.5).numel(), 3);
  expect_error([] { arange(0, 5, 0.5, {.dtype = i64}); }, ErrorKind::value, "step must be nonzero");
}

// Integer linspace/logspace convert their bounds to the dtype first (PyTorch's rule);
// f16 linspace is the exact points rounded once.
TEST(Parity, IntegerLinspaceAndLogspaceTruncateTheirBounds) {
  EXPECT_EQ(ints(linspace(4.3, -3, 8, {.dtype = i64})),
            (std::vector<int64_t>{4, 3, 2, 1, 0, -1, -2, -3}));
  EXPECT_EQ(ints(logspace(4.3, 0, 4, 5.0, {.dtype = i64})), (std::vector<int64_t>{625, 73, 8, 1}));
  EXPECT_EQ(to_vector<double>(linspace(0.1, 1.7, 5, {.dtype = f16})),
            (std::vector<double>{0.0999755859375, 0.5, 0.89990234375, 1.2998046875, 1.7001953125}));
}

// histogram of no data spans [0, 1]; of one value, that value +- 0.5.
TEST(Parity, HistogramOfNothingSpansZeroToOne) {
  auto [h, edges] = histogram(from_vector(std::vector<float>{}), 4);
  EXPECT_TRUE(all_close(edges, {0, 0.25, 0.5, 0.75, 1}));
  EXPECT_TRUE(all_close(h, {0, 0, 0, 0}));
  auto [h1, e1] = histogram(tensor({3.0}), 2);
  EXPECT_TRUE(all_close(e1, {2.5, 3, 3.5}));
  EXPECT_TRUE(all_close(h1, {0, 1}));
}

// An output without '...' sums the ellipsis dims.
TEST(Parity, EinsumSumsEllipsisDimsTheOutputOmits) {
  Tensor t = reshape(arange(24.0), {2, 3, 4});
  EXPECT_TRUE(all_close(einsum("...ij->ij", {t}), to_vector<double>(sum(t, {0}))));
  EXPECT_TRUE(all_close(einsum("i...->i", {t}), {66, 210}));
  EXPECT_TRUE(
      all_close(einsum("...i,...i->", {t, t}), {static_cast<double>(item<double>(sum(t * t)))}));
}

// fmin/fmax/clamp(tensor bounds): a tie goes to self, and so does its gradient; NaN of
// one side of fmin/fmax gives the other.
TEST(Parity, TiesAndTheirGradientGoToSelf) {
  auto grads = [](auto f) {
    Tensor a = tensor({1., 2., 3.}), b = tensor({1., 0., 3.});
    a.set_requires_grad(true);
    b.set_requires_grad(true);
    autograd::backward({sum(f(a, b))});
    return std::pair{to_vector<double>(a.grad()), to_vector<double>(b.grad())};
  };
  using V = std::vector<double>;
  EXPECT_EQ(grads([](auto& a, auto& b) { return fmin(a, b); }), std::pair(V{1, 0, 1}, V{0, 1, 0}));
  EXPECT_EQ(grads([](auto& a, auto& b) { return fmax(a, b); }), std::pair(V{1, 1, 1}, V{0, 0, 0}));
  EXPECT_EQ(grads([](auto& a, auto& b) { return clamp(a, b, Tensor()); }),
            std::pair(V{1, 1, 1}, V{0, 0, 0}));
  EXPECT_EQ(grads([](auto& a, auto& b) { return clamp(a, Tensor(), b); }),
            std::pair(V{1, 0, 1}, V{0, 1, 0}));
  EXPECT_EQ(grads([](auto& a, auto& b) { return maximum(a, b); }),
            std::pair(V{0.5, 1, 0.5}, V{0.5, 0, 0.5}));
  Tensor x = tensor({NAN, 1, NAN}), y = tensor({2, NAN, NAN});
  EXPECT_TRUE(all_close(fmax(x, y), {2, 1, NAN}));
  EXPECT_TRUE(all_close(fmin(x, y), {2, 1, NAN}));
  // clamp: NaN in x or a bound propagates; min > max gives max
  EXPECT_TRUE(
      all_close(clamp(tensor({NAN, 5, 0}), tensor({1.0}), tensor({3, NAN, 2})), {NAN, NAN, 1}));
  EXPECT_TRUE(all_close(clamp(tensor({0, 5}), tensor({3.0}), tensor({1.0})), {1, 1}));
  // result_type of all three: a 0-dim f64 bound does not widen an f32 x, but does an integer one
  EXPECT_EQ(clamp(tensor({1, 2}), scalar_tensor(1.5, {.dtype = f64}), Tensor()).dtype(), f32);
  EXPECT_EQ(clamp(tensor({1, 2}, {}, {.dtype = i32}), scalar_tensor(1.5, {.dtype = f64}), Tensor())
                .dtype(),
            f64);
}

// quantile over dim 0 of a 0-dim tensor is the value.
TEST(Parity, QuantileOfAZeroDimTensor) {
  EXPECT_EQ(item<double>(quantile(tensor(3.0), 0.5, 0)), 3.0);
  EXPECT_EQ(quantile(tensor(3.0), 0.5, 0, true).dim(), 0);
  EXPECT_EQ(item<double>(nanquantile(tensor(3.0), 0.5, -1)), 3.0);
}

// reflect / replicate padding with negative amounts crops that side.
TEST(Parity, NegativeReflectAndReplicatePaddingCrops) {
  Tensor x = reshape(arange(10.0), {1, 1, 10});
  EXPECT_TRUE(all_close(nn::pad(x, {-2, 3}, "reflect"), {2, 3, 4, 5, 6, 7, 8, 9, 8, 7, 6}));
  EXPECT_TRUE(all_close(nn::pad(x, {2, -3}, "replicate"), {0, 0, 0, 1, 2, 3, 4, 5, 6}));
  expect_error([&] { nn::pad(x, {-6, -4}, "replicate"); }, ErrorKind::value, "leaves no element");
}

// addr multiplies the outer product even by alpha 0 (0 * inf is NaN) and ignores input
// for beta 0 (NaN too), as PyTorch's elementwise addr.
TEST(Parity, AddrIsElementwise) {
  Tensor nan_input = tensor({NAN}, {1, 1});
  EXPECT_TRUE(
      std::isnan(item<double>(addr(nan_input, tensor({INFINITY}), tensor({2.0}), 0.0, 0.0))));
  EXPECT_EQ(item<double>(addr(nan_input, tensor({1.0}), tensor({2.0}), 0.0, 0.0)), 0.0);
  EXPECT_EQ(item<double>(addr(nan_input, tensor({1.0}), tensor({2.0}), 0.0)), 2.0);
  Tensor i = ones({2, 3}, {.dtype = i64});
  EXPECT_EQ(ints(addr(i, arange(1, 3), arange(1, 4), 2, 3)),
            (std::vector<int64_t>{5, 8, 11, 8, 14, 20}));
  EXPECT_EQ(addr(ones({3}, {.dtype = f64}), tensor({1, 2}), tensor({1, 2, 3})).dtype(), f64);
}

// d/dx x^(1/3) in f64: the exponent's "minus one" stays a double number (it once fell to
// f32 as an op of two wrapped numbers: 4e-7 off).
TEST(Parity, PowGradientKeepsANumberExponentInDouble) {
  Tensor x = tensor({0.3, 2.0, 5.5}, {}, {.dtype = f64, .requires_grad = true});
  Tensor g = autograd::grad({sum(pow(x, 1.0 / 3))}, {x})[0];
  EXPECT_TRUE(
      all_close(g, {0.7438143889801885, 0.20998684164914552, 0.10698025258563826}, 1e-15, 0));
  g = autograd::grad({sum(pow(x, 2))}, {x})[0];  // an integer exponent stays an integer
  EXPECT_TRUE(all_close(g, {0.6, 4, 11}, 1e-15, 0));
}

// x[...] and x[...] = v with libtorch's TensorIndex entries; shapes and values are
// PyTorch's for the same expressions on arange(60).reshape(3, 4, 5).
TEST(Parity, GetitemAndSetitemFollowPyTorch) {
  using namespace indexing;
  Tensor x = reshape(arange(60.0), {3, 4, 5});
  Tensor t = tensor({2, 0}, {}, {.dtype = i64}), u = tensor({1, 3}, {2, 1}, {.dtype = i64});
  auto check = [&](const std::vector<TensorIndex>& index, IntList shape, double total,
                   std::vector<double> head) {
    Tensor r = getitem(x, index);
    EXPECT_EQ(r.shape().vec(), shape);
    EXPECT_EQ(item<double>(sum(r)), total);
    std::vector<double> v = to_vector<double>(r);
    v.resize(std::min(v.size(), head.size()));
    EXPECT_EQ(v, head);
  };
  check({1}, {4, 5}, 590, {20, 21, 22});
  check({-1, Slice{std::nullopt, std::nullopt, 2}}, {2, 5}, 470, {40, 41, 42, 43, 44, 50});
  check({Slice{}, Slice{1, 3}, None}, {3, 2, 1, 5}, 885, {5, 6, 7});
  check({Ellipsis, 1}, {3, 4}, 342, {1, 6, 11, 16, 21});
  check({None, Ellipsis, None}, {1, 3, 4, 5, 1}, 1770, {0, 1, 2});
  check({t}, {2, 4, 5}, 1180, {40, 41});
  check({Slice{}, t}, {3, 2, 5}, 810, {10, 11, 12, 13, 14, 0});
  check({t, Slice{}, t}, {2, 4}, 228,
        {42, 47, 52, 57, 0, 5, 10, 15});  // separated: index dims first
  check({t, 1, t}, {2}, 52, {47, 5});
  // index / index_put themselves take separated index tensors (the same rule)
  EXPECT_EQ(to_vector<double>(index(x, {t, Tensor(), t})),
            to_vector<double>(getitem(x, {t, Slice{}, t})));
  EXPECT_EQ(item<double>(sum(index_put(x, {t, Tensor(), t}, tensor({100, 200}, {2, 1})))), 2742);
  check({1, u, t}, {2, 2}, 124, {27, 25, 37, 35});
  check({x > 50.0}, {9}, 495, {51, 52});
  check({Slice{}, select(x, 0, 0) > 15.0}, {3, 4}, 450, {16, 17, 18, 19, 36});
  check({Ellipsis, t}, {3, 4, 2}, 684, {2, 0, 7, 5});
  check({0, None, t}, {1, 2, 5}, 70, {10, 11, 12, 13, 14, 0});
  EXPECT_EQ(getitem(x, {1}).storage(), x.storage());  // basic indexing is a view
  expect_error([&] { getitem(x, {0, 0, 0, 0}); }, ErrorKind::index, "too many indices");
  expect_error([&] { getitem(x, {3}); }, ErrorKind::index,
               "index 3 is out of bounds for dimension 0 with size 3");
  expect_error([&] { getitem(x, {Ellipsis, Ellipsis}); }, ErrorKind::index, "single ellipsis");
  // an index tensor is checked against its own dim, not the merged block ([0, 5] would be
  // a valid position of the 4 x 5 block)
  expect_error(
      [&] {
        getitem(x, {0, tensor({0}, {}, {.dtype = i64}), tensor({7}, {}, {.dtype = i64})});
      },
      ErrorKind::index, "index 7 is out of bounds for dimension 1 with size 5");
  expect_error(
      [&] {
        index(x, {Tensor(), tensor({-5}, {}, {.dtype = i64})});
      },
      ErrorKind::index, "index -5 is out of bounds for dimension 1 with size 4");

  auto set = [&](const std::vector<TensorIndex>& index, const Tensor& v) {
    Tensor y = clone(x);
    setitem_(y, index, v);
    return y;
  };
  Tensor y = set({1, Slice{}, t}, scalar_tensor(-1.0));
  EXPECT_EQ(item<double>(sum(y)), 1534);
  EXPECT_EQ(item<int64_t>(sum(y == -1.0)), 8);
  y = set({t, Slice{}, t}, tensor({100, 200}, {2, 1}));
  EXPECT_EQ(item<double>(sum(y)), 2742);
  EXPECT_EQ(to_vector<double>(getitem(y, {2, Slice{}, 2})),
            (std::vector<double>{100, 100, 100, 100}));
  y = set({x > 50.0}, scalar_tensor(0.0));
  EXPECT_EQ(item<double>(sum(y)), 1275);
  y = clone(x);
  setitem_(y, {Ellipsis, Slice{1, 3}}, 7);
  EXPECT_EQ(item<double>(sum(y)), 1242);
}

// torch.scatter(..., reduce=) and searchsorted(..., sorter=), PyTorch's values.
TEST(Parity, ScatterWithReduceAndSearchsortedWithSorter) {
  Tensor i = tensor({0, 1, 2, 0, 0, 0, 0, 0}, {2, 4}, {.dtype = i64});
  Tensor src = reshape(arange(1.0, 9.0), {2, 4});
  EXPECT_TRUE(
      all_close(scatter(zeros({3, 4}), 0, i, src, "add"), {6, 6, 7, 12, 0, 2, 0, 0, 0, 0, 3, 0}));
  EXPECT_TRUE(all_close(scatter(ones({3, 4}), 0, i, src, "multiply"),
                        {5, 6, 7, 32, 1, 2, 1, 1, 1, 1, 3, 1}));
  EXPECT_TRUE(
      all_close(scatter(zeros({3, 4}), 0, i, 2.0, "add"), {4, 2, 2, 4, 0, 2, 0, 0, 0, 0, 2, 0}));
  expect_error(
      [&] {
        scatter(zeros({3, 4}), 0, i, src, "max");
      },
      ErrorKind::value, "add or multiply");
  Tensor unsorted = tensor({3, 1, 2, 5}), order = tensor({1, 2, 0, 3}, {}, {.dtype = i64});
  EXPECT_EQ(ints(searchsorted(unsorted, tensor({2.5, 0, 6}), false, false, order)),
            (std::vector<int64_t>{2, 0, 4}));
}

// Calls PyTorch refuses (op_db's error inputs), refused here too with the op's name.
TEST(Parity, RefusesWhatPyTorchRefuses) {
  Tensor x = randn({3}), i32_index = tensor({0}, {}, {.dtype = i32}),
         index = tensor({0}, {}, {.dtype = i64});
  expect_error([&] { gather(x, 0, i32_index); }, ErrorKind::dtype,
               "[gather] expected an index tensor of dtype i64");
  expect_error([&] { scatter_add(x, 0, i32_index, randn({1})); }, ErrorKind::dtype,
               "[scatter_add]");
  expect_error([&] { scatter(x, 0, i32_index, 1.0); }, ErrorKind::dtype, "[scatter]");
  expect_error([&] { take(x, i32_index); }, ErrorKind::dtype, "[take]");
  expect_error([&] { take_along_dim(x, i32_index, 0); }, ErrorKind::dtype, "[take_along_dim]");
  expect_error([&] { scatter(x, 0, index, randn({1}, {.dtype = f64})); }, ErrorKind::dtype,
               "same dtype");
  expect_error(
      [&] {
        nn::conv1d(randn({1, 2, 5}), randn({3, 2, 2}, {.dtype = f64}));
      },
      ErrorKind::dtype,
      "[conv1d] input (f32), weight (f64) and bias (none) must have the same dtype");
  expect_error(
      [&] {
        nn::conv_transpose1d(randn({1, 2, 5}), randn({2, 3, 2}), randn({3}, {.dtype = f64}));
      },
      ErrorKind::dtype, "[conv_transpose1d]");
  expect_error(
      [&] {
        cov(randn({2, 4}), 1, Tensor(), tensor({1., -1, 1, 1}));
      },
      ErrorKind::value, "aweights cannot be negative");
  expect_error(
      [&] {
        cov(randn({2, 4}), 1, tensor({1, -1, 1, 1}, {}, {.dtype = i64}));
      },
      ErrorKind::value, "fweights cannot be negative");
  expect_error(
      [] {
        linalg::cross(randn({3}), randn({2, 3}));
      },
      ErrorKind::shape, "same number of dims");
  expect_error([] { nn::prelu(randn({2, 3}), randn({3, 1})); }, ErrorKind::shape, "[prelu]");
  expect_error(
      [] {
        gradient(randn({3, 4}), std::vector<double>{1.0}, IntList{0, -2});
      },
      ErrorKind::value, "appears multiple times");
  // what stays accepted: i32 indices of index_select / index_add / embedding, and their gradients
  Tensor w = randn({4, 2});
  w.set_requires_grad(true);
  autograd::backward({sum(index_select(w, 0, i32_index)) + sum(embedding(w, i32_index))});
  EXPECT_TRUE(all_close(sum(w.grad(), {1}), {4, 0, 0, 0}));
  EXPECT_TRUE(all_close(index_add(zeros({3}), 0, i32_index, ones({1})), {1, 0, 0}));
}

}  // namespace
}  // namespace kiln

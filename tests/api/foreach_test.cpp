// The _foreach_* ops (kiln/api/foreach.h): each tensor's result is the per-tensor
// op's, in place and out of place, with PyTorch's list checks.
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::expect_error;

std::vector<double> values(const Tensor& t) { return to_vector<double>(t); }

TensorList fresh(uint64_t seed) {
  manual_seed(seed);
  return {randn({3}), randn({2, 2}), randn({})};
}

TensorList clones(const TensorList& l) {
  TensorList out;
  for (const Tensor& t : l) out.push_back(clone(t));
  return out;
}

void expect_same(const TensorList& got, const TensorList& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].shape(), want[i].shape()) << i;
    EXPECT_EQ(values(got[i]), values(want[i])) << i;  // the same op: bit for bit
  }
}

TEST(Foreach, EachResultIsThePerTensorOp) {
  TensorList a = fresh(1), b = fresh(2), c = fresh(3);
  std::vector<Scalar> s{0.5, -2.0, 3.0};
  expect_same(_foreach_add(a, b, 2.0),
              {add(a[0], b[0], 2.0), add(a[1], b[1], 2.0), add(a[2], b[2], 2.0)});
  expect_same(_foreach_add(a, s), {add(a[0], 0.5), add(a[1], -2.0), add(a[2], 3.0)});
  expect_same(_foreach_mul(a, b[2]), {mul(a[0], b[2]), mul(a[1], b[2]), mul(a[2], b[2])});
  expect_same(_foreach_div(a, 4.0), {div(a[0], 4.0), div(a[1], 4.0), div(a[2], 4.0)});
  expect_same(_foreach_maximum(a, b),
              {maximum(a[0], b[0]), maximum(a[1], b[1]), maximum(a[2], b[2])});
  expect_same(_foreach_addcdiv(a, b, c, 0.1),
              {addcdiv(a[0], b[0], c[0], 0.1), addcdiv(a[1], b[1], c[1], 0.1),
               addcdiv(a[2], b[2], c[2], 0.1)});
  expect_same(_foreach_lerp(a, b, 0.25),
              {lerp(a[0], b[0], 0.25), lerp(a[1], b[1], 0.25), lerp(a[2], b[2], 0.25)});
  expect_same(_foreach_sqrt(_foreach_abs(a)), {sqrt(abs(a[0])), sqrt(abs(a[1])), sqrt(abs(a[2]))});
  TensorList norms = _foreach_norm(a);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(norms[i].dim(), 0);
    EXPECT_EQ(values(norms[i]), values(vector_norm(a[i])));
  }
}

// In place: every tensor of self is written (the same handles, new values), as the
// optimizers' updates do: Adam's step in _foreach_ form equals the per-tensor one.
TEST(Foreach, InPlaceFormsWriteEveryTensor) {
  TensorList p = fresh(4), g = fresh(5), m = clones(fresh(6)), v = clones(fresh(7));
  for (Tensor& t : v) t = abs(t);
  TensorList p0 = clones(p), m0 = clones(m), v0 = clones(v);
  const void* before = p[1].storage()->data;
  _foreach_lerp_(m, g, 0.1);  // m = 0.9 m + 0.1 g
  _foreach_mul_(v, 0.999);
  _foreach_addcmul_(v, g, g, 0.001);  // v = 0.999 v + 0.001 g^2
  TensorList denom = _foreach_sqrt(v);
  _foreach_add_(denom, 1e-8);
  _foreach_addcdiv_(p, m, denom, -0.01);  // p -= lr m / (sqrt(v) + eps)
  EXPECT_EQ(p[1].storage()->data, before);
  for (size_t i = 0; i < p.size(); ++i) {
    Tensor mi = lerp(m0[i], g[i], 0.1);
    Tensor vi = addcmul(mul(v0[i], 0.999), g[i], g[i], 0.001);
    Tensor pi = addcdiv(p0[i], mi, add(sqrt(vi), 1e-8), -0.01);
    EXPECT_EQ(values(p[i]), values(pi)) << i;
    EXPECT_EQ(values(m[i]), values(mi)) << i;
  }
  _foreach_zero_(m);
  for (const Tensor& t : m) EXPECT_EQ(item<double>(sum(abs(t))), 0.0);
  _foreach_copy_(m, g);
  expect_same(m, g);
}

TEST(Foreach, ListsAreCheckedAsPyTorchDoes) {
  TensorList a = fresh(8);
  expect_error([&] { _foreach_add(TensorList{}, 1.0); }, ErrorKind::value,
               "[_foreach_add] Tensor list must have at least one tensor.");
  expect_error(
      [&] {
        _foreach_mul_(a, TensorList{a[0], a[1]});
      },
      ErrorKind::value,
      "[_foreach_mul_] Tensor lists must have the same number of tensors, got 3 and 2");
  expect_error([&] { _foreach_add(a, std::vector<Scalar>{1.0}); }, ErrorKind::value,
               "[_foreach_add] Tensor list must have same number of elements as scalar list");
  // an element's own error names the _foreach_ op
  expect_error(
      [&] {
        _foreach_add(a, TensorList{randn({3}), randn({5}), randn({})});
      },
      ErrorKind::shape, "_foreach_add");
}

// Autograd and tracing see the per-tensor ops.
TEST(Foreach, DifferentiableAndTraced) {
  Tensor x = randn({3}, {.requires_grad = true}), y = randn({2}, {.requires_grad = true});
  TensorList out = _foreach_mul(TensorList{x, y}, 3.0);
  sum(out[0]).backward();
  sum(out[1]).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{3, 3, 3}));
  EXPECT_EQ(values(y.grad()), (std::vector<double>{3, 3}));
  ir::Graph g =
      make_fx([](const TensorList& in) { return _foreach_add(in, 1.0); }, {randn({2}), randn({3})});
  std::string text = g.str();
  EXPECT_NE(text.find("add("), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln

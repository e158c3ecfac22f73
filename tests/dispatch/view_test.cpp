// Views share storage exactly as in PyTorch: a write through a view is visible in
// the base and in every other view.
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::expect_error;

TEST(Views, ShareStorageAndMetadata) {
  Tensor base = arange(0, 12, 1, {.dtype = f32});
  Tensor m = view(base, {3, 4});
  EXPECT_TRUE(m.is_alias_of(base));
  Tensor tr = transpose(m, 0, 1);
  EXPECT_EQ(tr.strides(), (Dims{1, 4}));
  Tensor p = permute(view(base, {2, 3, 2}), {2, 0, 1});
  EXPECT_EQ(p.shape(), (Dims{2, 2, 3}));
  EXPECT_EQ(p.strides(), (Dims{1, 6, 2}));
  Tensor u = unsqueeze(m, 1);
  EXPECT_EQ(u.shape(), (Dims{3, 1, 4}));
  EXPECT_EQ(squeeze(u).shape(), (Dims{3, 4}));
  EXPECT_EQ(squeeze(u, 0).shape(), (Dims{3, 1, 4}));  // not size 1: kept
  Tensor e = expand(unsqueeze(arange(3), 1), {3, 5});
  EXPECT_EQ(e.strides(), (Dims{1, 0}));
  Tensor s = slice(m, 1, 1, std::nullopt, 2);  // columns 1 and 3
  EXPECT_EQ(s.shape(), (Dims{3, 2}));
  EXPECT_EQ(s.offset(), 1);
  EXPECT_TRUE(all_close(s, {1, 3, 5, 7, 9, 11}));
  EXPECT_TRUE(all_close(slice(base, 0, -3, std::nullopt), {9, 10, 11}));
  EXPECT_TRUE(all_close(select(m, 0, -1), {8, 9, 10, 11}));
  EXPECT_TRUE(all_close(narrow(m, 0, 1, 1), {4, 5, 6, 7}));
  EXPECT_EQ(flatten(view(base, {2, 3, 2}), 1).shape(), (Dims{2, 6}));
  EXPECT_EQ(t(m).shape(), (Dims{4, 3}));
  Tensor as = as_strided(base, {2, 2}, {1, 2}, 3);
  EXPECT_TRUE(all_close(as, {3, 5, 4, 6}));
}

TEST(Views, WritesAreVisibleThroughEveryAlias) {
  Tensor base = zeros({3, 4});
  Tensor col = select(base, 1, 2);
  Tensor row = select(base, 0, 1);
  Tensor tr = transpose(base, 0, 1);
  fill_(col, 5);
  EXPECT_TRUE(all_close(row, {0, 0, 5, 0}));
  add_(row, 1);
  EXPECT_TRUE(all_close(select(tr, 0, 2), {5, 6, 5}));
  Tensor strided = slice(view(base, {12}), 0, 0, 12, 5);  // elements 0, 5, 10
  copy_(strided, tensor({7, 8, 9}));
  EXPECT_TRUE(all_close(base, {7, 0, 5, 0, 1, 8, 6, 1, 0, 0, 9, 0}));
  mul_(tr, 2);  // in-place through a non-contiguous view
  EXPECT_EQ(item<float>(sum(base)), 2 * (7 + 5 + 1 + 8 + 6 + 1 + 9));
}

TEST(Views, CopyFromOverlappingView) {
  Tensor x = arange(0, 5, 1, {.dtype = f32});
  Tensor dst = slice(x, 0, 1, 5);
  Tensor src = slice(x, 0, 0, 4);
  copy_(dst, src);  // reads all of src before writing
  EXPECT_TRUE(all_close(x, {0, 0, 1, 2, 3}));
}

TEST(Views, ReshapeViewsWhenItCan) {
  Tensor m = view(arange(0, 6, 1, {.dtype = f32}), {2, 3});
  EXPECT_TRUE(reshape(m, {3, 2}).is_alias_of(m));
  Tensor tr = transpose(m, 0, 1);
  Tensor flat = reshape(tr, {6});
  EXPECT_FALSE(flat.is_alias_of(m));
  EXPECT_TRUE(all_close(flat, {0, 3, 1, 4, 2, 5}));
  expect_error([&] { view(tr, {6}); }, ErrorKind::shape, "use reshape instead");
  EXPECT_EQ(view(m, {-1}).shape(), (Dims{6}));
  expect_error(
      [&] {
        view(m, {4, -1});
      },
      ErrorKind::shape, "[view] shape '[4, -1]' is invalid for input of size 6");
  EXPECT_TRUE(contiguous(m).is_same(m));
  EXPECT_FALSE(contiguous(tr).is_alias_of(m));
}

TEST(Views, Errors) {
  Tensor m = zeros({2, 3});
  expect_error(
      [&] {
        expand(m, {4, 3, 2});
      },
      ErrorKind::shape,
      "[expand] the expanded size of the tensor (3) must match the existing size (2) at "
      "non-singleton dimension 1");
  expect_error([&] { permute(m, {0, 0}); }, ErrorKind::value, "[permute] repeated dim");
  expect_error([&] { select(m, 0, 2); }, ErrorKind::index, "[select] index 2 out of range");
  expect_error(
      [&] {
        as_strided(m, {4, 4}, {4, 1});
      },
      ErrorKind::shape, "[as_strided] size [4, 4] and stride [4, 1] at offset 0 need 16 elements");
  expect_error([&] { t(zeros({2, 2, 2})); }, ErrorKind::shape, "[t] expects a tensor with <= 2");
  // Bounds near INT64_MAX are refused or clamped, never wrapped around by overflow.
  constexpr int64_t kMax = INT64_MAX, kMin = INT64_MIN;
  expect_error([&] { narrow(zeros({4}), 0, kMax, 2); }, ErrorKind::index, "[narrow] start");
  expect_error([&] { narrow(zeros({4}), 0, 1, kMax); }, ErrorKind::index, "[narrow] start");
  expect_error([&] { narrow(zeros({4}), 0, -2, kMax); }, ErrorKind::index, "[narrow] start");
  EXPECT_EQ(slice(zeros({4}), 0, 1, kMax, kMax).shape().vec(), IntList{1});
  EXPECT_EQ(slice(zeros({4}), 0, kMin, kMax, 1).shape().vec(), IntList{4});
  EXPECT_EQ(diagonal(zeros({3, 3}), kMin).shape().vec(), IntList{0});
  EXPECT_EQ(diagonal(zeros({3, 3}), kMax).shape().vec(), IntList{0});
  Tensor windows = unfold(arange(0, 5), 0, 2, kMax);
  EXPECT_EQ(windows.shape().vec(), (IntList{1, 2}));
  EXPECT_TRUE(all_close(windows, {0, 1}));
}

TEST(Views, CloneAndToNeverAlias) {
  Tensor x = ones({2});
  Tensor c = clone(x);
  EXPECT_FALSE(c.is_alias_of(x));
  add_(c, 1);
  EXPECT_TRUE(all_close(x, {1, 1}));
}

}  // namespace
}  // namespace kiln

// Public calls that used to overflow, read outside storage or reach undefined behaviour:
// each now gives a defined result or a clear kiln::Error (issue: hardening).
#include <gtest/gtest.h>

#include <climits>
#include <cmath>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::expect_error;

constexpr int64_t kBig = int64_t{1} << 32;

TEST(Hardening, ViewsNeverStartBeforeTheirStorage) {
  Tensor x = arange(0, 8, 1, {.dtype = f32});
  expect_error([&] { as_strided(x, {2}, {1}, -1); }, ErrorKind::shape,
               "[as_strided] invalid storage offset -1");
  std::vector<Value> args = {x, zeros({2}), IntList{2}, IntList{1}, int64_t{-1}};
  expect_error([&] { dispatch(ops::OpKind::as_strided_scatter, args); }, ErrorKind::shape,
               "[as_strided_scatter] invalid storage offset -1");
  // A stride that overflows the reach is an error, not a wrapped (small) extent.
  expect_error([&] { as_strided(x, {3}, {INT64_MAX / 2 + 1}); }, ErrorKind::shape,
               "more elements than int64 can hold");
  EXPECT_TRUE(all_close(as_strided(x, {2}, {3}, 1), {1, 4}));
}

TEST(Hardening, SizesAreCheckedForOverflow) {
  expect_error(
      [&] {
        empty({kBig, kBig});
      },
      ErrorKind::shape,
      "[empty] size [4294967296, 4294967296] has more elements than int64 can hold");
  expect_error([&] { empty({int64_t{1} << 62}); }, ErrorKind::shape,
               "size [4611686018427387904] of f32 needs more bytes than the address space");
  expect_error([&] { zeros({2, -1}); }, ErrorKind::shape, "negative dimension -1");
  expect_error(
      [&] {
        expand(ones({1, 1}), {kBig, kBig});
      },
      ErrorKind::shape, "has more elements than int64 can hold");
  {  // fake tensors have no bytes, but still a size that must be representable
    FakeMode mode;
    expect_error(
        [&] {
          empty({kBig, kBig}, {.device = Device("cuda:0")});
        },
        ErrorKind::shape, "has more elements than int64 can hold");
    EXPECT_EQ(empty({kBig, 2}, {.device = Device("cuda:0")}).numel(), 2 * kBig);
  }
  // Zero elements, but its contiguous strides would not fit int64: refused as well.
  expect_error([&] { empty({0, kBig, kBig}); }, ErrorKind::shape, "more elements than int64");
  EXPECT_EQ(empty({0, kBig}).strides(), (Dims{kBig, 1}));
}

TEST(Hardening, CpuOutOfMemoryIsAKilnError) {
  // 2^52 bytes: more than any x86-64 address space, whatever the overcommit policy.
  try {
    zeros({int64_t{1} << 50});
    ADD_FAILURE() << "expected out_of_memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::out_of_memory) << e.what();
    EXPECT_NE(std::string(e.what()).find(
                  "cpu:0 is out of memory: tried to allocate 4503599627370496 bytes"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(item<float>(sum(ones({4}))), 4.0f);  // the allocator still works afterwards
}

TEST(Hardening, ArangeRanges) {
  expect_error([&] { arange(0, 1e30); }, ErrorKind::shape, "more elements than int64 can hold");
  expect_error([&] { arange(0, INFINITY); }, ErrorKind::value, "[arange] unsupported range");
  expect_error([&] { arange(0, NAN); }, ErrorKind::value, "[arange] unsupported range");
  EXPECT_EQ(arange(0, 1, 0.25).numel(), 4);
}

TEST(Hardening, FillValuesMustFitTheDtype) {
  expect_error([&] { full({2}, NAN, {.dtype = i64}); }, ErrorKind::value,
               "[full] value nan cannot be converted to type i64 without overflow");
  expect_error([&] { full({2}, 300, {.dtype = u8}); }, ErrorKind::value, "to type u8");
  expect_error([&] { full({2}, -256, {.dtype = u8}); }, ErrorKind::value, "to type u8");
  expect_error([&] { full({2}, -1.0, {.dtype = u8}); }, ErrorKind::value, "to type u8");
  expect_error([&] { full({2}, 127.5, {.dtype = i8}); }, ErrorKind::value, "to type i8");
  expect_error([&] { full({2}, 1e39, {.dtype = f32}); }, ErrorKind::value, "to type f32");
  // As PyTorch: a negative integer down to -255 wraps into u8.
  EXPECT_EQ(to_vector<int64_t>(full({2}, -1, {.dtype = u8})), (std::vector<int64_t>{255, 255}));
  expect_error([&] { full({2}, 1e10, {.dtype = f16}); }, ErrorKind::value, "to type f16");
  Tensor ints = zeros({2}, {.dtype = i32});
  expect_error([&] { fill_(ints, 1e10); }, ErrorKind::value, "[fill_] value");
  EXPECT_EQ(to_vector<int64_t>(full({2}, 2.5, {.dtype = i64})), (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(std::isinf(item<float>(full({}, INFINITY, {.dtype = f16}))));
}

TEST(Hardening, FloatToIntegerConversionsAreDefined) {
  Tensor f = tensor({NAN, INFINITY, -1e30, 300.0, -1.0, 2.9, -2.9});
  // The values x86 PyTorch gives (cvttss2si's "integer indefinite", low bits kept).
  EXPECT_EQ(to_vector<int64_t>(to(f, i64)),
            (std::vector<int64_t>{INT64_MIN, INT64_MIN, INT64_MIN, 300, -1, 2, -2}));
  EXPECT_EQ(to_vector<int32_t>(to(f, i32)),
            (std::vector<int32_t>{INT32_MIN, INT32_MIN, INT32_MIN, 300, -1, 2, -2}));
  EXPECT_EQ(to_vector<uint8_t>(to(f, u8)), (std::vector<uint8_t>{0, 0, 0, 44, 255, 2, 254}));
  EXPECT_EQ(Scalar(NAN).to_int(), INT64_MIN);
}

TEST(Hardening, IntegerArithmeticWraps) {
  Tensor big = from_vector<int64_t>({INT64_MAX, INT64_MIN});
  EXPECT_EQ(to_vector<int64_t>(mul(big, 2)), (std::vector<int64_t>{-2, 0}));
  EXPECT_EQ(to_vector<int64_t>(add(big, 1)), (std::vector<int64_t>{INT64_MIN, INT64_MIN + 1}));
  EXPECT_EQ(item<int64_t>(sum(from_vector<int64_t>({INT64_MAX, 1}))), INT64_MIN);
  EXPECT_EQ(to_vector<int32_t>(pow(from_vector<int32_t>({3}), from_vector<int32_t>({21}))),
            (std::vector<int32_t>{static_cast<int32_t>(10460353203LL & 0xffffffff)}));
  // A negative scalar exponent is an error (PyTorch); a tensor one gives 1, +-1 or 0.
  expect_error([&] { pow(from_vector<int64_t>({2}), -1); }, ErrorKind::value,
               "Integers to negative integer powers are not allowed");
  EXPECT_EQ(to_vector<int64_t>(
                pow(from_vector<int64_t>({2, 1, -1, -1}), from_vector<int64_t>({-1, -3, -3, -2}))),
            (std::vector<int64_t>{0, 1, -1, 1}));
}

TEST(Hardening, NanPropagatesLikePyTorch) {
  Tensor x = full({1000}, NAN);
  EXPECT_TRUE(std::isnan(item<float>(amax(relu(x)))));
  EXPECT_TRUE(std::isnan(item<float>(amax(exp(x)))));  // the vectorized exp keeps NaN
  EXPECT_TRUE(all_close(relu(tensor({-1.0, 2.0})), {0, 2}));
}

TEST(Hardening, CatEdgeCases) {
  expect_error([&] { cat({}); }, ErrorKind::value, "[cat] expected a non-empty list of tensors");
  // A legacy 1-D empty tensor is skipped whatever the others' rank, as in PyTorch.
  Tensor c = cat({empty({0}), ones({2, 3}), empty({0}), zeros({1, 3})});
  EXPECT_EQ(c.shape(), (Dims{3, 3}));
  EXPECT_TRUE(all_close(sum(c, {1}), {3, 3, 0}));
  EXPECT_EQ(cat({empty({0}), empty({0})}).shape(), (Dims{0}));
  expect_error(
      [&] {
        cat({ones({2}), full({}, 1.0)});
      },
      ErrorKind::shape, "zero-dimensional tensor (at position 1) cannot be concatenated");
}

TEST(Hardening, DimsFromEmptyVectors) {
  std::vector<int64_t> none;
  Dims d(none);  // no memcpy from a null pointer (UBSan checks this in make asan)
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(numel_of(Dims{kBig, kBig}), INT64_MAX);  // saturates, never wraps
}

}  // namespace
}  // namespace kiln

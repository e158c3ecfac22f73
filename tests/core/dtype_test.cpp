#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

TEST(DType, NamesAndSizes) {
  EXPECT_EQ(to_string(f32), "f32");
  EXPECT_EQ(to_string(b8), "bool");
  EXPECT_EQ(dtype_from_string("bf16"), bf16);
  EXPECT_EQ(itemsize(f64), 8u);
  EXPECT_EQ(itemsize(bf16), 2u);
  EXPECT_EQ(itemsize(b8), 1u);
  testing::expect_error([] { dtype_from_string("f8"); }, ErrorKind::dtype, "unknown dtype 'f8'");
}

TEST(DType, PromoteTypesMatchesTorch) {
  // Pairs checked against torch.promote_types.
  EXPECT_EQ(promote_types(u8, i8), i16);
  EXPECT_EQ(promote_types(u8, i32), i32);
  EXPECT_EQ(promote_types(b8, u8), u8);
  EXPECT_EQ(promote_types(i32, i64), i64);
  EXPECT_EQ(promote_types(i64, f16), f16);
  EXPECT_EQ(promote_types(f16, bf16), f32);
  EXPECT_EQ(promote_types(bf16, f64), f64);
  EXPECT_EQ(promote_types(f32, i64), f32);
  EXPECT_EQ(promote_types(b8, b8), b8);
  for (int a = 0; a < kNumDTypes; ++a)
    for (int b = 0; b < kNumDTypes; ++b)
      EXPECT_EQ(promote_types(DType(a), DType(b)), promote_types(DType(b), DType(a)));
}

TEST(DType, ResultTypeCategories) {
  // {dimensioned tensor, 0-dim tensor or wrapped number, rank of the second, expected},
  // each checked against torch.result_type.
  struct Case {
    DType dim, other;
    ResultType::Rank rank;
    DType want;
  };
  const Case cases[] = {
      {i32, i64, ResultType::zero_dim, i32},  // 0-dim of the same category ranks lower
      {i32, f64, ResultType::zero_dim, f64},  // ... unless its category is higher
      {i64, f64, ResultType::wrapped, f32},   // int tensor + float number -> default float
      {f16, f64, ResultType::wrapped, f16},   // f16 tensor + float number stays f16
      {b8, i64, ResultType::wrapped, i64},    // bool tensor + int number -> i64
      {u8, i64, ResultType::wrapped, u8},     // u8 tensor + int number stays u8
  };
  for (const Case& c : cases) {
    ResultType rt;
    rt.add(c.dim, ResultType::dim);
    rt.add(c.other, c.rank);
    EXPECT_EQ(rt.result(), c.want) << to_string(c.dim) << " with " << to_string(c.other);
  }
}

TEST(DType, HalfConversionsRoundTrip) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.1f}) {
    float back = static_cast<float>(Half(v));
    EXPECT_NEAR(back, v, std::abs(v) * 1e-3 + 1e-7) << v;
  }
  EXPECT_TRUE(std::isinf(static_cast<float>(Half(1e6f))));
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(std::nanf("")))));
  EXPECT_EQ(Half(1.0f).bits, 0x3c00);
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(static_cast<float>(BFloat16(3.140625f)), 3.140625f);
}

}  // namespace
}  // namespace kiln

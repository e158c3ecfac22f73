#include <gtest/gtest.h>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/kiln.h"
#include "kiln/ops/meta.h"
#include "test_util.h"

namespace kiln::ops {
namespace {

TEST(OpTable, NamesRoundTrip) {
  EXPECT_GT(kNumOps, 70);
  for (int i = 0; i < kNumOps; ++i) {
    auto op = static_cast<OpKind>(i);
    EXPECT_EQ(op_info(op).kind, op);
    EXPECT_EQ(op_from_name(op_name(op)), op);
    EXPECT_EQ(op_info(op).schema.name, op_name(op));
  }
  kiln::testing::expect_error([] { op_from_name("frobnicate"); }, ErrorKind::unsupported,
                              "[frobnicate] unknown op");
}

TEST(OpTable, SchemasCarryAliasInfo) {
  const OpInfo& add_ = op_info(OpKind::add_);
  EXPECT_TRUE(add_.is_inplace());
  EXPECT_EQ(add_.schema.mutated_arg, 0);
  EXPECT_EQ(add_.functional, OpKind::add);
  EXPECT_TRUE(op_info(OpKind::view).is_view());
  EXPECT_EQ(op_info(OpKind::view).schema.view_of_arg, 0);
  EXPECT_FALSE(op_info(OpKind::add).is_inplace());
  EXPECT_EQ(op_info(OpKind::max).schema.num_outputs, 2);
  const Schema& ln = op_info(OpKind::layer_norm).schema;
  ASSERT_EQ(ln.args.size(), 5u);
  EXPECT_EQ(ln.args[2].type, ArgType::opt_tensor);
  EXPECT_EQ(std::get<double>(*ln.args[4].default_value), 1e-5);
  const Schema& slice = op_info(OpKind::slice).schema;
  EXPECT_TRUE(std::holds_alternative<std::monostate>(*slice.args[2].default_value));
  EXPECT_TRUE(op_info(OpKind::_to_copy).schema.args[1].kwarg_only);
}

// Every op is a view (built from meta), an in-place op derived from a functional op
// that has a kernel, or has a CPU kernel of its own: the table and the kernel table
// cannot drift apart.
TEST(OpTable, EveryOpRunsOnCpu) {
  const KernelTable& k = cpu::kernels();
  for (int i = 0; i < kNumOps; ++i) {
    const OpInfo& info = op_info(static_cast<OpKind>(i));
    if (info.is_view()) {
      EXPECT_EQ(k[i], nullptr) << info.name << ": views need no kernel";
      continue;
    }
    auto kernel_op = static_cast<size_t>(info.meta ? info.kind : info.functional);
    EXPECT_NE(k[kernel_op], nullptr) << info.name << " has no CPU kernel";
    EXPECT_TRUE(info.meta || op_info(info.functional).meta) << info.name;
  }
}

// dispatch's compile-time in-place flags agree with the schemas' alias annotations.
TEST(OpTable, InplaceFlagsMatchSchemas) {
  for (int i = 0; i < kNumOps; ++i)
    EXPECT_EQ(kOpIsInplace[i], op_info(static_cast<OpKind>(i)).is_inplace())
        << op_info(static_cast<OpKind>(i)).name;
}

TEST(OpTable, SchemaChecksArguments) {
  const Schema& s = op_info(OpKind::add).schema;
  std::vector<Value> ok = {zeros({1}), zeros({1}), Scalar(1)};
  s.check_args(ok);
  std::vector<Value> bad = {zeros({1}), int64_t{3}, Scalar(1)};
  kiln::testing::expect_error([&] { s.check_args(bad); }, ErrorKind::value,
                              "[add] argument 'other' (position 1) must be Tensor");
  std::vector<Value> few = {zeros({1})};
  kiln::testing::expect_error([&] { s.check_args(few); }, ErrorKind::value,
                              "expected 3 arguments, got 1");
}

TEST(Meta, BroadcastAndViewStrides) {
  EXPECT_EQ(broadcast_shapes(Dims{3, 1}, Dims{4}, "t"), (Dims{3, 4}));
  EXPECT_EQ(broadcast_shapes(Dims{}, Dims{2, 2}, "t"), (Dims{2, 2}));
  kiln::testing::expect_error([] { broadcast_shapes(Dims{3}, Dims{4}, "add"); }, ErrorKind::shape,
                              "[add] The size of tensor a (3) must match the size of tensor b (4)");
  Dims out;
  EXPECT_TRUE(compute_view_strides(Dims{2, 3, 4}, Dims{12, 4, 1}, Dims{6, 4}, out));
  EXPECT_EQ(out, (Dims{4, 1}));
  // A transposed [3, 2] (strides 1, 3) cannot be flattened without a copy.
  EXPECT_FALSE(compute_view_strides(Dims{3, 2}, Dims{1, 3}, Dims{6}, out));
  EXPECT_EQ(matmul_shape(Dims{5, 1, 2, 3}, Dims{4, 3, 7}), (Dims{5, 4, 2, 7}));
  EXPECT_EQ(matmul_shape(Dims{3}, Dims{3}), Dims{});
}

}  // namespace
}  // namespace kiln::ops

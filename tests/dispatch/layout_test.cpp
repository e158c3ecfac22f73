// Every op gives the same values for inputs laid out with gaps (every other element of a
// wider buffer) or as column-major matrices as for dense ones: the strided paths of the
// kernels against their dense fast paths (PyTorch's OpInfo "noncontiguous samples"
// check, over kiln's whole table).
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "mock_cuda.h"
#include "op_samples.h"
#include "test_util.h"

namespace kiln {
namespace {

using ops::OpKind;

// `t`'s values in a view with a gap after every element of its last dim.
Tensor with_gaps(const Tensor& t) {
  if (!t.defined() || t.dim() == 0 || t.numel() == 0) return t;
  IntList wide(t.shape().begin(), t.shape().end());
  wide.back() *= 2;
  Tensor every_other =
      slice(zeros(wide, {.dtype = t.dtype(), .device = t.device()}), -1, 0, std::nullopt, 2);
  copy_(every_other, t);
  return every_other;
}

// `t`'s values with its last two dims stored the other way round (column-major matrices).
Tensor column_major(const Tensor& t) {
  if (!t.defined() || t.dim() < 2 || t.numel() == 0) return t;
  return transpose(contiguous(transpose(t, -1, -2)), -1, -2);
}

std::vector<Value> relaid(std::vector<Value> args, Tensor (*layout)(const Tensor&)) {
  for (Value& v : args) {
    if (auto* t = std::get_if<Tensor>(&v))
      *t = layout(*t);
    else if (auto* list = std::get_if<TensorList>(&v))
      for (Tensor& x : *list) x = layout(x);
  }
  return args;
}

// `args` with every tensor (0-dim ones too) and device argument on `device`.
std::vector<Value> on(std::vector<Value> args, Device device) {
  for (Value& v : args) {
    if (auto* t = std::get_if<Tensor>(&v))
      *t = t->defined() ? to(*t, device) : *t;
    else if (auto* list = std::get_if<TensorList>(&v))
      for (Tensor& x : *list) x = x.defined() ? to(x, device) : x;
    else if (auto* d = std::get_if<Device>(&v))
      *d = device;
  }
  return args;
}

void expect_layouts_agree(Device device) {
  for (auto layout : {&with_gaps, &column_major})
    for (DType fp : {f32, f64, f16, bf16}) {
      for (int k = 0; k < ops::kNumOps; ++k) {
        auto op = static_cast<OpKind>(k);
        SCOPED_TRACE(std::string(ops::op_name(op)) + " " + std::string(to_string(fp)) +
                     (layout == &with_gaps ? " gaps" : " column-major"));
        // Ops that read storage rather than values, or whose sample needs dense strides.
        if (op == OpKind::as_strided || op == OpKind::as_strided_scatter || op == OpKind::view ||
            op == OpKind::rand || op == OpKind::randn || op == OpKind::empty ||
            (testing::data_dependent(op) && !device.is_cpu()))  // CPU only (F6 tests it)
          continue;
        auto sample = [&] {
          manual_seed(11);
          return on(testing::sample_args(op, fp), device);  // _to_copy stays on `device`
        };
        Outputs dense = dispatch(op, sample());
        Outputs strided = dispatch(op, relaid(sample(), layout));
        ASSERT_EQ(dense.size(), strided.size());
        for (size_t i = 0; i < dense.size(); ++i) {
          ASSERT_EQ(strided[i].shape(), dense[i].shape());
          ASSERT_EQ(strided[i].dtype(), dense[i].dtype());
          EXPECT_EQ(strided[i].device(), device);
          std::vector<double> want = to_vector<double>(to(dense[i], f64));
          EXPECT_TRUE(testing::all_close(strided[i], want, 1e-6, 1e-6)) << "output " << i;
        }
      }
    }
}

TEST(Layouts, StridedInputsGiveTheSameValuesOnEveryOp) { expect_layouts_agree(Device("cpu:0")); }

// The CUDA kernels' strided paths (f16/bf16 included) against their dense ones.
TEST(Layouts, StridedInputsGiveTheSameValuesOnEveryOpOnCuda) {
  KILN_REQUIRE_CUDA(1);
  expect_layouts_agree(Device("cuda:0"));
}

TEST(Layouts, StridedInputsGiveTheSameValuesOnEveryOpOnMockCuda) {
  testing::MockCuda mock;
  expect_layouts_agree(Device("cuda:0"));
}

}  // namespace
}  // namespace kiln

// Device rules of eager execution: (D2) one device per op, (D7) to().
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::expect_error;

TEST(D2, MismatchNamesOpDevicesAndArguments) {
  Tensor a = ones({2}, {.device = Device("cpu:1")});
  Tensor b = ones({2}, {.device = Device("cpu:2")});
  expect_error([&] { add(a, b); }, ErrorKind::device_mismatch,
               "[add] Expected all tensors to be on the same device, but found at least two "
               "devices, cpu:1 (argument 'self') and cpu:2 (argument 'other')");
  expect_error([&] { matmul(a, b); }, ErrorKind::device_mismatch,
               "cpu:1 (argument 'self') and cpu:2 (argument 'other')");
  expect_error(
      [&] {
        cat({a, a, b});
      },
      ErrorKind::device_mismatch,
      "cpu:1 (argument 'tensors[0]') and cpu:2 (argument 'tensors[2]')");
  expect_error([&] { where(gt(a, 0), a, b); }, ErrorKind::device_mismatch,
               "cpu:1 (argument 'condition') and cpu:2 (argument 'other')");
}

TEST(D2, MismatchBeforeAnyWork) {
  Tensor a = ones({2}, {.device = Device("cpu:1")});
  Tensor b = ones({2}, {.device = Device("cpu:2")});
  AllocatorStats s1 = allocator_stats(Device("cpu:1"));
  EXPECT_THROW(add_(a, b), Error);
  EXPECT_EQ(allocator_stats(Device("cpu:1")).num_allocs, s1.num_allocs);
  EXPECT_EQ(to_vector<float>(a), (std::vector<float>{1, 1}));
}

TEST(D2, ZeroDimCpuTensorJoinsAnyDevice) {
  Tensor a = ones({2}, {.device = Device("cpu:2")});
  Tensor s = scalar_tensor(3.0);  // 0-dim on cpu:0
  Tensor r = add(a, s);
  EXPECT_EQ(r.device(), Device("cpu:2"));
  EXPECT_EQ(to_vector<float>(r), (std::vector<float>{4, 4}));
  EXPECT_EQ(add(s, a).device(), Device("cpu:2"));  // first or not, it never wins
  // A 1-element 1-D tensor is not a scalar.
  Tensor one = ones({1});
  expect_error([&] { add(a, one); }, ErrorKind::device_mismatch, "cpu:2 (argument 'self')");
}

// (D2) The exemption is for the host (cpu:0) only: virtual devices cpu:1.. are as strict
// as GPUs. And it never covers the tensor an op writes.
TEST(D2, OnlyHostScalarsAreExemptAndNeverTheWrittenTensor) {
  Tensor a = rand({3}, {.device = Device("cpu:1")});
  expect_error([&] { add(a, full({}, 1.0, {.device = Device("cpu:2")})); },
               ErrorKind::device_mismatch, "cpu:1 (argument 'self') and cpu:2 (argument 'other')");
  Tensor x = ones({2, 3}, {.device = Device("cpu:1")});
  expect_error(
      [&] { index_select(x, 1, from_vector<int64_t>({0}, {1}, {.device = Device("cpu:2")})); },
      ErrorKind::device_mismatch, "cpu:1 (argument 'self') and cpu:2 (argument 'index')");
  Tensor host = scalar_tensor(1.0);
  Tensor other = full({}, 2.0, {.device = Device("cpu:1")});
  expect_error(
      [&] { add_(host, other); }, ErrorKind::device_mismatch,
      "[add_] Expected all tensors to be on the same device, but found at least two devices, "
      "cpu:0 (argument 'self') and cpu:1 (argument 'other')");
  EXPECT_EQ(item<double>(host), 1.0);  // nothing was written
  Tensor dev = full({}, 2.0, {.device = Device("cpu:1")});
  add_(dev, host);  // the host scalar still joins an op that writes a device tensor
  EXPECT_EQ(item<double>(dev), 3.0);
  {
    FakeMode mode;  // (F3) the same fold under fake tensors
    Tensor s = mode.from_real(scalar_tensor(1.0));
    Tensor g = empty({4}, {.device = Device("cuda:0")});
    expect_error([&] { add_(s, g); }, ErrorKind::device_mismatch,
                 "cpu:0 (argument 'self') and cuda:0");
    EXPECT_EQ(add(s, g).device(), Device("cuda:0"));
  }
}

TEST(D2, PerOpRules) {
  Tensor x = ones({2, 3}, {.device = Device("cpu:1")});
  // factories: the device option, else cpu:0
  EXPECT_EQ(zeros({1}).device(), Device("cpu:0"));
  // *_like: the input's device unless given
  EXPECT_EQ(ones_like(x).device(), Device("cpu:1"));
  EXPECT_EQ(ones_like(x, {.device = Device("cpu:3")}).device(), Device("cpu:3"));
  // copy_: source anywhere, result on self's device
  Tensor dst = zeros({2, 3}, {.device = Device("cpu:2")});
  copy_(dst, x);
  EXPECT_EQ(dst.device(), Device("cpu:2"));
  EXPECT_EQ(item<float>(sum(dst)), 6.0f);
  // index_select: index may be on the CPU
  Tensor idx = from_vector<int64_t>({1, 0});
  Tensor sel = index_select(x, 1, idx);
  EXPECT_EQ(sel.device(), Device("cpu:1"));
  EXPECT_EQ(sel.shape(), (Dims{2, 2}));
  // to: the target
  EXPECT_EQ(to(x, Device("cpu:3")).device(), Device("cpu:3"));
  // nextafter: no CPU-scalar exception (as PyTorch), in eager and fake alike
  Tensor f = ones({2}, {.device = Device("cpu:1")});
  expect_error([&] { nextafter(f, scalar_tensor(2.0)); }, ErrorKind::device_mismatch,
               "[nextafter] Expected all tensors to be on the same device, but found at least two "
               "devices, cpu:1 "
               "(argument 'self') and cpu:0 (argument 'other')");
  EXPECT_EQ(add(f, scalar_tensor(2.0)).device(), Device("cpu:1"));  // where the exception holds
  {
    FakeMode mode;
    Tensor g = empty({4}, {.device = Device("cuda:0")});
    expect_error([&] { nextafter(g, mode.from_real(scalar_tensor(1.0))); },
                 ErrorKind::device_mismatch,
                 "cuda:0 (argument 'self') and cpu:0 (argument 'other')");
  }
}

TEST(D2, KernelsAllocateOnTheirDevice) {
  Device d("cpu:2");
  AllocatorStats before0 = allocator_stats(Device("cpu:0"));
  AllocatorStats before2 = allocator_stats(d);
  Tensor a = ones({64, 64}, {.device = d});
  Tensor r = relu(matmul(a, a) + a);
  AllocatorStats after2 = allocator_stats(d);
  EXPECT_EQ(r.device(), d);
  EXPECT_GT(after2.num_allocs, before2.num_allocs);
  EXPECT_EQ(allocator_stats(Device("cpu:0")).num_allocs, before0.num_allocs);
}

TEST(D5, KernelsUseTheirDevicesHandle) {
  Device d("cpu:3");
  int before0 = blas_handle_count(Device("cpu:0"));
  Tensor a = ones({8, 8}, {.device = d});
  Tensor r = mm(a, a);  // the checker (D8) would throw if gemm saw another device
  EXPECT_GE(blas_handle_count(d), 1);
  EXPECT_EQ(blas_handle_count(Device("cpu:0")), before0);
  EXPECT_EQ(item<float>(select(select(r, 0, 0), 0, 0)), 8.0f);
}

TEST(D7, ToReturnsSelfOrACopy) {
  Tensor x = ones({2}, {.device = Device("cpu:1")});
  EXPECT_TRUE(to(x, Device("cpu:1")).is_same(x));
  EXPECT_TRUE(to(x, x.device(), f32).is_same(x));
  {
    DeviceGuard g(Device("cpu:1"));
    EXPECT_TRUE(to(x, Device("cpu")).is_same(x));  // resolves to the current cpu device
  }
  Tensor forced = to(x, Device("cpu:1"), std::nullopt, false, /*copy=*/true);
  EXPECT_FALSE(forced.is_same(x));
  EXPECT_FALSE(forced.is_alias_of(x));
  Tensor moved = to(x, Device("cpu:2"));
  EXPECT_FALSE(moved.is_alias_of(x));
  Tensor half = to(x, f16);
  EXPECT_EQ(half.dtype(), f16);
  EXPECT_EQ(half.device(), x.device());
  EXPECT_EQ(to_vector<float>(half), (std::vector<float>{1, 1}));
}

TEST(MetaDevice, ComputesMetadataOnly) {
  Tensor a = empty({4, 8}, {.device = Device("meta")});
  Tensor b = empty({8, 3}, {.device = Device("meta")});
  Tensor c = relu(matmul(a, b));
  EXPECT_TRUE(c.is_fake());
  EXPECT_EQ(c.device(), Device("meta"));
  EXPECT_EQ(c.shape(), (Dims{4, 3}));
  Tensor v = transpose(c, 0, 1);
  EXPECT_TRUE(v.is_alias_of(c));
  EXPECT_EQ(v.strides(), (Dims{1, 3}));
  expect_error([&] { item<float>(sum(c)); }, ErrorKind::data_dependent, "[item]");
  expect_error([&] { matmul(a, a); }, ErrorKind::shape, "cannot be multiplied");
}

TEST(Errors, NoKernelIsUnsupported) {
  expect_error(
      [] {
        mm(ones({2, 2}, {.dtype = b8}), ones({2, 2}, {.dtype = b8}));
      },
      ErrorKind::unsupported, "[mm] does not support dtype bool");
}

}  // namespace
}  // namespace kiln

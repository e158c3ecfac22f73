// Fake tensors: (F1)-(F6) and the per-op device rules of (D2).
#include <gtest/gtest.h>

#include <optional>

#include "kiln/kiln.h"
#include "mock_cuda.h"
#include "op_samples.h"
#include "test_util.h"

namespace kiln {
namespace {

using ops::OpKind;
using testing::expect_error;
using testing::sample_args;

TEST(F6, FakeAndEagerAgreeOnEveryOp) {
  for (int k = 0; k < ops::kNumOps; ++k) {
    auto op = static_cast<OpKind>(k);
    SCOPED_TRACE(std::string(ops::op_name(op)));
    std::vector<Value> eager_args = sample_args(op);
    ASSERT_FALSE(eager_args.empty()) << "no sample for this op: add one to sample_args";
    Outputs eager = dispatch(op, eager_args);
    std::vector<Value> fake_args = sample_args(op);
    ShapeEnv env;  // (Y3) where a data-dependent op makes its unbacked size
    std::optional<ShapeEnvGuard> symbolic;
    if (testing::data_dependent(op)) symbolic.emplace(&env);
    FakeMode mode({.allow_non_fake_inputs = true});
    Outputs fake = dispatch(op, fake_args);
    ASSERT_EQ(eager.size(), fake.size());
    for (size_t i = 0; i < eager.size(); ++i) {
      EXPECT_TRUE(fake[i].is_fake());
      if (testing::data_dependent(op)) {  // dim 0: an unbacked size; the others as eager's
        ASSERT_EQ(fake[i].dim(), eager[i].dim());
        const SymbolInfo* rows = env.find(fake[i].sym_size(0).expr());
        ASSERT_TRUE(rows && rows->unbacked);
        EXPECT_LE(rows->min, eager[i].size(0));
        EXPECT_GE(rows->max, eager[i].size(0));
        for (int64_t d = 1; d < eager[i].dim(); ++d) EXPECT_EQ(fake[i].size(d), eager[i].size(d));
        EXPECT_EQ(fake[i].dtype(), eager[i].dtype());
        continue;
      }
      EXPECT_EQ(fake[i].shape(), eager[i].shape());
      EXPECT_EQ(fake[i].strides(), eager[i].strides());
      EXPECT_EQ(fake[i].offset(), eager[i].offset());
      EXPECT_EQ(fake[i].dtype(), eager[i].dtype());
      EXPECT_EQ(fake[i].device(), eager[i].device());
    }
  }
}

// (F6, Y1) The same with symbolic sizes: every size of 2 or more of a contiguous tensor
// argument becomes a symbol (equal sizes one symbol, as PyTorch's duck sizing), and each
// op's outputs, evaluated at the example values, equal eager's: sizes, strides, offset.
// Ops whose meta functions read sizes as integers still agree (they pin them).
TEST(F6, SymbolicSizesAgreeWithEagerOnEveryOp) {
  for (int k = 0; k < ops::kNumOps; ++k) {
    auto op = static_cast<OpKind>(k);
    SCOPED_TRACE(std::string(ops::op_name(op)));
    std::vector<Value> eager_args = sample_args(op);
    Outputs eager = dispatch(op, eager_args);
    std::vector<Value> fake_args = sample_args(op);
    ShapeEnv env;
    ShapeEnvGuard symbolic(&env);
    FakeMode mode({.allow_non_fake_inputs = true});
    std::map<int64_t, SymInt> symbol_of;  // by example value
    auto symbolize = [&](Tensor& t) {
      if (!t.defined() || !t.is_contiguous() || t.dim() == 0) return;
      t = mode.from_real(t);
      Dims shape = t.shape();
      for (size_t d = 0; d < shape.size(); ++d) {
        int64_t v = shape.hint(d);
        if (v < 2) continue;
        auto it = symbol_of.find(v);
        if (it == symbol_of.end())
          it = symbol_of.emplace(v, env.new_symbol(v, 2, 1 << 20, "sample")).first;
        shape.set(d, it->second);
      }
      auto impl = std::make_shared<TensorImpl>(*t.impl());
      impl->shape = shape;
      symbolic_strides_into(impl->shape, impl->strides);
      t = Tensor(impl);
    };
    for (Value& v : fake_args) {
      if (auto* t = std::get_if<Tensor>(&v))
        symbolize(*t);
      else if (auto* list = std::get_if<TensorList>(&v))
        for (Tensor& t : *list) symbolize(t);
    }
    Outputs fake;
    try {
      fake = dispatch(op, fake_args);
    } catch (const Error& e) {
      ADD_FAILURE() << "symbolic sizes fail where integers do not: " << e.what();
      continue;
    }
    ASSERT_EQ(eager.size(), fake.size());
    for (size_t i = 0; i < eager.size(); ++i) {
      if (testing::data_dependent(op)) {  // an unbacked size has no example value
        EXPECT_EQ(fake[i].dim(), eager[i].dim());
        continue;
      }
      const Dims& shape = fake[i].shape();
      const Dims& strides = fake[i].strides();
      EXPECT_EQ(std::vector<int64_t>(shape.hints().begin(), shape.hints().end()),
                eager[i].shape().vec())
          << shape.str();
      if (eager[i].numel() > 1) {  // strides of a one-element tensor are arbitrary
        for (size_t d = 0; d < strides.size(); ++d) {
          if (eager[i].shape()[d] > 1) {
            EXPECT_EQ(strides.hint(d), eager[i].strides()[d]) << strides.str() << " dim " << d;
          }
        }
      }
      EXPECT_EQ(fake[i].offset(), eager[i].offset());
      EXPECT_EQ(fake[i].dtype(), eager[i].dtype());
    }
  }
}

// `args` with every tensor moved to `device` keeping its layout (a transposed input
// stays transposed), 0-dim CPU tensors left where they are (D2), devices replaced.
std::vector<Value> moved(std::vector<Value> args, Device device) {
  auto move = [&](Tensor& t) {
    if (!t.defined() || (t.dim() == 0 && t.device().is_cpu())) return;
    int64_t n = static_cast<int64_t>(t.storage()->nbytes / itemsize(t.dtype()));
    Tensor base = to(make_view(t, Dims{n}, Dims{1}, 0), device);
    t = make_view(base, t.shape(), t.strides(), t.offset());
  };
  for (Value& v : args) {
    if (auto* t = std::get_if<Tensor>(&v))
      move(*t);
    else if (auto* list = std::get_if<TensorList>(&v))
      for (Tensor& t : *list) move(t);
    else if (auto* d = std::get_if<Device>(&v))
      *d = device;
  }
  return args;
}

// (F6) on another device: every op with fake and eager tensors of `gpu` agrees on
// metadata, and eager `gpu` agrees with cpu:0 on values within the dtype's tolerance.
void expect_agrees_with_cpu(Device gpu) {
  for (int k = 0; k < ops::kNumOps; ++k) {
    auto op = static_cast<OpKind>(k);
    SCOPED_TRACE(std::string(ops::op_name(op)));
    manual_seed(5);
    std::vector<Value> cpu_args = sample_args(op);
    std::vector<Value> gpu_args = moved(cpu_args, gpu);
    if (testing::data_dependent(op) && !gpu.is_cpu()) {  // CPU tensors only, said so
      expect_error([&] { dispatch(op, gpu_args); }, ErrorKind::unsupported, "runs on CPU tensors");
      continue;
    }
    Outputs want = dispatch(op, moved(cpu_args, Device("cpu:0")));
    Outputs got = dispatch(op, gpu_args);
    Outputs fake;
    {
      ShapeEnv env;  // (Y3) for a data-dependent op's size
      ShapeEnvGuard symbolic(&env);
      FakeMode mode({.allow_non_fake_inputs = true});
      fake = dispatch(op, moved(cpu_args, gpu));
    }
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(fake.size(), got.size());
    bool random = op == OpKind::rand || op == OpKind::randn || op == OpKind::empty;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].device(), gpu);
      EXPECT_EQ(fake[i].device(), gpu);
      EXPECT_EQ(got[i].shape(), want[i].shape());
      EXPECT_EQ(got[i].strides(), want[i].strides());
      EXPECT_EQ(got[i].dtype(), want[i].dtype());
      if (!testing::data_dependent(op)) {
        EXPECT_EQ(fake[i].shape(), got[i].shape());
        EXPECT_EQ(fake[i].strides(), got[i].strides());
        EXPECT_EQ(fake[i].offset(), got[i].offset());
      }
      EXPECT_EQ(fake[i].dtype(), got[i].dtype());
      if (random) continue;
      double tol = got[i].dtype() == f16 ? 1e-3 : 1e-5;
      EXPECT_TRUE(
          testing::all_close(to(got[i], Device("cpu:0")), to_vector<double>(want[i]), tol, tol));
    }
  }
}

TEST(F6, CudaAgreesWithFakeAndWithCpuOnEveryOp) {
  KILN_REQUIRE_CUDA(1);
  expect_agrees_with_cpu(Device("cuda:0"));
}

// The same harness on the stand-in CUDA backend (CPU kernels behind cuda:0): device
// rules, copies between backends and metadata of every op on a cuda device, anywhere.
TEST(F6, MockCudaAgreesWithFakeAndWithCpuOnEveryOp) {
  testing::MockCuda mock;
  expect_agrees_with_cpu(Device("cuda:0"));
}

// The same harness on a virtual CPU device, so it is known to work on every machine.
TEST(F6, VirtualDeviceAgreesWithFakeAndWithCpuOnEveryOp) {
  expect_agrees_with_cpu(Device("cpu:1"));
}

// (F1) Tensor literals made inside FakeMode are fake, whatever their dtype or device;
// no op the user did not call fails on the way.
TEST(F1, LiteralsInsideFakeModeAreFake) {
  FakeMode mode;
  Tensor a = tensor({0.});  // doubles converted to f32: used to fail in _to_copy
  EXPECT_TRUE(a.is_fake());
  EXPECT_EQ(a.meta_str(), "f32[1]@cpu:0");
  Tensor b = from_vector<int64_t>({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(b.is_fake());
  EXPECT_EQ(b.meta_str(), "i64[2, 2]@cpu:0");
  Tensor c = tensor({1, 2}, {}, {.device = Device("cuda:3")});
  EXPECT_TRUE(c.is_fake());
  EXPECT_EQ(c.meta_str(), "f32[2]@cuda:3");
  Tensor s = tensor(0.5);  // a 0-dim literal, no scalar_tensor needed
  EXPECT_TRUE(s.is_fake());
  EXPECT_EQ(s.meta_str(), "f32[]@cpu:0");
  EXPECT_EQ(add(c, s).meta_str(), "f32[2]@cuda:3");  // a host scalar joins (D2)
}

TEST(F1, ZeroDimLiteralsEagerly) {
  EXPECT_EQ(tensor(0.5).meta_str(), "f32[]@cpu:0");
  EXPECT_EQ(item<double>(tensor(0.5)), 0.5);
  EXPECT_EQ(tensor(3).dtype(), i64);
  EXPECT_EQ(tensor(true).dtype(), b8);
  EXPECT_EQ(tensor(2.5, {.dtype = f64, .device = Device("cpu:1")}).meta_str(), "f64[]@cpu:1");
}

TEST(F1, FactoriesMakeFakeTensorsOnAbsentDevices) {
  FakeMode mode;
  Tensor x = randn({2, 3}, {.device = Device("cuda:3")});
  EXPECT_TRUE(x.is_fake());
  EXPECT_EQ(x.device(), Device("cuda:3"));
  Tensor y = relu(matmul(x, transpose(x, 0, 1)));
  EXPECT_EQ(y.device(), Device("cuda:3"));
  EXPECT_EQ(y.shape(), (Dims{2, 2}));
  Tensor v = view(x, {3, 2});
  EXPECT_TRUE(v.is_alias_of(x));
  EXPECT_EQ(ones({1}, {.device = Device("cuda")}).device(), Device("cuda:0"));
}

TEST(F2, ConversionIsMemoizedAndKeepsViews) {
  Tensor base = randn({4, 4});
  Tensor row = select(base, 0, 1);
  FakeMode mode;
  Tensor fb = mode.from_real(base);
  EXPECT_TRUE(fb.is_fake());
  EXPECT_TRUE(mode.from_real(base).is_same(fb));
  Tensor fr = mode.from_real(row);
  EXPECT_TRUE(fr.is_alias_of(fb));
  EXPECT_EQ(fr.offset(), 4);
  expect_error([&] { add(base, base); }, ErrorKind::value,
               "[add] argument 'self' is a real tensor f32[4, 4]@cpu:0 inside FakeMode");
  EXPECT_EQ(add(fb, 1.0).device(), Device("cpu:0"));  // wrapped numbers are constants
}

TEST(F3, OutputDeviceRules) {
  FakeMode mode;
  Tensor c0 = empty({2}, {.device = Device("cuda:0")});
  Tensor c1 = empty({2}, {.device = Device("cuda:1")});
  Tensor cpu_scalar = mode.from_real(scalar_tensor(1.0));
  Tensor cpu_vec = empty({1});
  EXPECT_EQ(add(cpu_scalar, c0).device(), Device("cuda:0"));  // 0-dim CPU never wins
  EXPECT_EQ(add(c0, cpu_scalar).device(), Device("cuda:0"));
  expect_error([&] { add(cpu_vec, c0); }, ErrorKind::device_mismatch,
               "[add] Expected all tensors to be on the same device, but found at least two "
               "devices, cpu:0 (argument 'self') and cuda:0 (argument 'other')");
  expect_error([&] { add(c0, c1); }, ErrorKind::device_mismatch,
               "cuda:0 (argument 'self') and cuda:1");
}

TEST(F4, PreferencePolicyIsScopedAndExact) {
  FakeMode mode;
  Tensor c0 = empty({2}, {.device = Device("cuda:0")});
  Tensor c1 = empty({2}, {.device = Device("cuda:1")});
  Tensor cpu = empty({2});
  {
    DevicePolicyGuard g(DevicePolicy::prefer_type(DeviceType::cuda));
    EXPECT_EQ(add(c0, cpu).device(), Device("cuda:0"));
    EXPECT_EQ(add(cpu, c0).device(), Device("cuda:0"));
    EXPECT_EQ(add(cpu, cpu).device(), Device("cpu:0"));
    expect_error([&] { add(c0, c1); }, ErrorKind::device_mismatch, "cuda:0");
  }
  expect_error([&] { add(c0, cpu); }, ErrorKind::device_mismatch, "cuda:0");  // restored
  {
    DevicePolicyGuard g(DevicePolicy::prefer_non_cpu());
    EXPECT_EQ(add(cpu, c1).device(), Device("cuda:1"));
    expect_error([&] { add(c0, c1); }, ErrorKind::device_mismatch, "cuda:1");
  }
  {
    DevicePolicyGuard g(DevicePolicy::prefer_type(DeviceType::meta));  // exact type only
    expect_error([&] { add(c0, cpu); }, ErrorKind::device_mismatch, "cuda:0");
  }
}

TEST(D2, PerOpRulesUnderFakeMode) {
  FakeMode mode;
  Tensor x_cuda = empty({2, 3}, {.device = Device("cuda:0")});
  Tensor x_cpu = empty({2, 3});
  Tensor dst = copy_(x_cpu, x_cuda);  // copy_ from cuda:0 into a cpu tensor -> cpu
  EXPECT_EQ(dst.device(), Device("cpu:0"));
  EXPECT_TRUE(dst.is_same(x_cpu));
  EXPECT_EQ(ones_like(x_cpu, {.device = Device("cuda")}).device(), Device("cuda:0"));
  EXPECT_EQ(ones_like(x_cuda).device(), Device("cuda:0"));
  EXPECT_TRUE(to(x_cuda, x_cuda.device()).is_same(x_cuda));  // (D7) in fake mode too
  Tensor moved = to(x_cuda, Device("cpu:0"));
  EXPECT_EQ(moved.device(), Device("cpu:0"));
  EXPECT_TRUE(moved.is_fake());
  Tensor idx = mode.from_real(from_vector<int64_t>({1}));
  EXPECT_EQ(index_select(x_cuda, 0, idx).device(), Device("cuda:0"));  // CPU index allowed
}

TEST(F5, DataDependentReadsFail) {
  FakeMode mode;
  Tensor x = randn({3}, {.device = Device("cuda:0")});
  expect_error([&] { item<float>(sum(x)); }, ErrorKind::data_dependent,
               "[item] cannot read the value of fake tensor f32[]@cuda:0");
  expect_error([&] { to_vector<float>(x); }, ErrorKind::data_dependent, "[to_vector]");
  // Outputs whose shape depends on the data stop here without a symbolic trace (which
  // gives them an unbacked size, Y3), as PyTorch's fake tensors without a ShapeEnv.
  expect_error([&] { nonzero(x); }, ErrorKind::data_dependent,
               "[nonzero] the number of non-zero elements of fake tensor");
  expect_error([&] { masked_select(x, gt(x, 0.0)); }, ErrorKind::data_dependent,
               "[masked_select] the number of non-zero elements");  // raised by nonzero inside
  expect_error([&] { unique(x); }, ErrorKind::data_dependent, "[unique]");
  expect_error([&] { bincount(to(x, i64)); }, ErrorKind::data_dependent, "[bincount]");
}

// (F1) A fake tensor that reaches a kernel (outside FakeMode, or as a constant of a
// graph run for real) is an error naming the op, not a read of memory it has not got.
TEST(F1, FakeTensorsNeverReachAKernel) {
  Tensor f;
  {
    FakeMode mode;
    f = ones({3});
  }
  ASSERT_TRUE(f.is_fake());
  expect_error([&] { add(f, ones({3})); }, ErrorKind::value,
               "[add] got a fake tensor (f32[3]@cpu:0): it has metadata but no data");
  expect_error(
      [&] {
        Tensor r = ones({3});
        copy_(r, f);
      },
      ErrorKind::value, "[copy_] got a fake tensor");
  ir::Graph g;
  ir::Node* x = g.add_input("x", ir::ValueMeta::of(ones({3})));
  ir::Node* c = g.add_constant(f);
  g.set_output(
      {{g.add_call(OpKind::add, {ir::Ref{x, 0}, ir::Ref{c, 0}, Scalar(1)}, {ir::ValueMeta::of(f)}),
        0}});
  expect_error([&] { ir::interpret(g, {ones({3})}); }, ErrorKind::value, "[add] got a fake tensor");
}

TEST(F1, ModelSizedFakeTraceAllocatesNothing) {
  Device cpu0("cpu:0");
  AllocatorStats before = allocator_stats(cpu0);
  {
    FakeMode mode;
    Device gpu("cuda:0");
    Tensor h = empty({8, 4096}, {.device = gpu});
    for (int layer = 0; layer < 24; ++layer) {
      Tensor w = empty({4096, 4096}, {.device = gpu});  // 64 MiB each if it were real
      Tensor b = empty({4096}, {.device = gpu});
      h = relu(linear(h, w, b));
    }
    EXPECT_EQ(h.shape(), (Dims{8, 4096}));
    EXPECT_EQ(h.device(), gpu);
  }
  AllocatorStats after = allocator_stats(cpu0);
  EXPECT_EQ(after.num_allocs, before.num_allocs);
  EXPECT_EQ(after.peak_bytes, before.peak_bytes);
}

}  // namespace
}  // namespace kiln

// The executor's fusion of elementwise chains (Note [Fused pointwise regions], Note
// [Regions of elementwise nodes]): which nodes run together, and that fusing never
// changes a number.
#include <gtest/gtest.h>

#include <cstring>

#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/pointwise.h"
#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln::runtime {
namespace {

using kiln::testing::expect_error;

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  Tensor x = contiguous(a), y = contiguous(b);
  return std::memcmp(x.data<char>(), y.data<char>(),
                     static_cast<size_t>(x.numel()) * itemsize(x.dtype())) == 0;
}

LossFn mse_step() {
  return [](nn::Module& m, const TensorList& b) { return nn::mse_loss(m(b[0]), b[1]); };
}

// The optimizer's update per parameter (Adam: 11 elementwise ops over p, m, v, g) is one
// region; training with it fused gives the same bits as op by op, at every ISA level the
// CPU has, for every state tensor after several steps.
TEST(Fusion, AdamTrainStepIsBitForBitTheUnfusedOne) {
  cpu::Isa best = cpu::cpu_isa_supported(), before = cpu::cpu_isa();
  for (cpu::Isa isa : {cpu::Isa::base, cpu::Isa::avx2, cpu::Isa::avx512}) {
    if (isa > best) continue;
    SCOPED_TRACE(cpu::isa_name(isa));
    cpu::set_cpu_isa(isa);
    auto run = [&](bool fuse, int* regions) {
      manual_seed(3);
      auto ref = nn::make_reference_model(
          "block", {{"batch", 2}, {"seq", 16}, {"width", 32}, {"hidden", 64}});
      Tensor x = ref.example_inputs[0], target = randn_like(x);
      ExportedProgram p = export_train_step(*ref.module, mse_step(), {x, target},
                                            {.optimizer = nn::AdamOptions{.lr = 1e-2}});
      Executor exec(p, {.fuse = fuse});
      *regions = exec.fused_regions();
      TensorList losses;
      for (int step = 0; step < 3; ++step) losses.push_back(exec.run({x, target})[0]);
      for (auto& [name, t] : p.state) losses.push_back(t);
      return losses;
    };
    int fused_regions = 0, unfused_regions = 0;
    TensorList fused = run(true, &fused_regions), unfused = run(false, &unfused_regions);
    EXPECT_GE(fused_regions, 12);  // one per parameter at least
    EXPECT_EQ(unfused_regions, 0);
    ASSERT_EQ(fused.size(), unfused.size());
    for (size_t i = 0; i < fused.size(); ++i) EXPECT_TRUE(same_bits(fused[i], unfused[i])) << i;
  }
  cpu::set_cpu_isa(before);
}

// Every op a region takes, in and out of place, with scalars and 0-d tensors, gives the
// eager kernels' bits; values read outside the region are stored, the others never made.
TEST(Fusion, EveryStepOpMatchesEagerAndOnlyValuesReadOutsideAreMade) {
  struct Chain : nn::Module {
    TensorList forward(const TensorList& in) override {
      const Tensor &x = in[0], &y = in[1], &s = in[2];
      Tensor a = gelu(mul(x, 1.5));
      Tensor b = add(a, y, 0.25);
      Tensor c = sub(sigmoid(b), tanh(x), 2.0);
      Tensor d = div(maximum(c, y), add(exp(neg(abs(x))), 1.0));
      Tensor e = minimum(d, mul(y, s));  // s: a 0-d f64 tensor
      Tensor f = silu(rsqrt(add(abs(e), 0.5)));
      Tensor g = gelu_backward(f, x, "tanh");
      Tensor h = threshold_backward(g, relu(b), 0.0);
      Tensor k = mul(erf(h), reciprocal(add(sqrt(abs(y)), 1.0)));
      Tensor l = add(mul(log(add(abs(k), 1.0)), sin(x)), cos(y));
      Tensor m = gelu(clamp(clamp(clamp(l, -0.5, 0.75), -1.0), std::nullopt, 0.5));
      return {m, sum(b)};  // b is read outside the region: stored
    }
  };
  manual_seed(5);
  Tensor x = randn({33, 65}), y = randn({33, 65}), s = full({}, 0.75, {.dtype = DType::f64});
  Chain model;
  TensorList want = model.forward({x, y, s});
  ExportedProgram p = export_program(model, {x, y, s});
  Executor fused(p), unfused(p, {.fuse = false});
  EXPECT_GE(fused.fused_regions(), 1);
  for (int run = 0; run < 2; ++run) {
    TensorList got = fused.run({x, y, s});
    EXPECT_TRUE(same_bits(got[0], want[0]));
    EXPECT_TRUE(same_bits(got[1], want[1]));
  }
  // Fused, only b and the region's last value are made: less planned memory.
  EXPECT_LT(fused.stats().planned_bytes, unfused.stats().planned_bytes);
  unfused.run({x, y, s});
  EXPECT_LT(fused.stats().planned_values, unfused.stats().planned_values);
}

// A node outside a region that reads its value, or memory it writes, or writes memory it
// reads, ends the region before that node (Note [Regions of elementwise nodes]): the
// program's results and its write-backs stay eager's.
TEST(Fusion, RegionsEndWhereOtherNodesReadOrWriteTheirMemory) {
  struct Mutating : nn::Module {
    TensorList forward(const TensorList& in) override {
      Tensor x = in[0], y = in[1];
      Tensor a = mul(x, 2.0);
      Tensor t = sum(a);  // reads a: the region {mul, ...} ends before it
      Tensor b = add(a, 1.0);
      mul_(x, 0.5);               // writes x, which the region of a read
      Tensor c = add(x, b);       // reads the new x
      Tensor v = view(y, {128});  // a view of y
      add_(y, c);                 // y written in place: the view sees it
      Tensor d = mul(view(v, {8, 16}), c);
      return {add(d, t), c};
    }
  };
  manual_seed(6);
  Tensor x = randn({8, 16}), y = randn({8, 16});
  Mutating model;
  Tensor ex = clone(x), ey = clone(y);
  TensorList want = model.forward({ex, ey});
  ExportedProgram p = export_program(model, {x, y});
  for (bool fuse : {true, false}) {
    SCOPED_TRACE(fuse);
    Tensor rx = clone(x), ry = clone(y);
    Executor exec(p, {.fuse = fuse});
    TensorList got = exec.run({rx, ry});
    EXPECT_TRUE(same_bits(got[0], want[0]));
    EXPECT_TRUE(same_bits(got[1], want[1]));
    EXPECT_TRUE(same_bits(rx, ex));  // the write-backs
    EXPECT_TRUE(same_bits(ry, ey));
  }
}

// A program with a dynamic batch fuses the same regions and runs them at every size.
TEST(Fusion, DynamicShapesRunFusedAtEveryBinding) {
  struct Act : nn::Module {
    TensorList forward(const TensorList& in) override {
      return {mul(gelu(add(in[0], 1.0)), sigmoid(in[0]))};
    }
  };
  Act model;
  ExportOptions o;
  o.dynamic_shapes = {{{0, Dim("batch", 1, 64)}}};
  ExportedProgram p = export_program(model, {randn({4, 24})}, o);
  Executor exec(p);
  EXPECT_EQ(exec.fused_regions(), 1);
  for (int64_t batch : {1, 7, 64}) {
    Tensor x = randn({batch, 24});
    EXPECT_TRUE(same_bits(exec.run({x})[0], model.forward({x})[0])) << batch;
  }
}

// KILN_FUSION=0 turns fusion off for every Executor; another value is an error.
TEST(Fusion, TheEnvironmentSwitch) {
  struct Act : nn::Module {
    TensorList forward(const TensorList& in) override { return {exp(neg(in[0]))}; }
  } model;
  ExportedProgram p = export_program(model, {randn({4, 8})});
  ::setenv("KILN_FUSION", "0", 1);
  EXPECT_EQ(Executor(p).fused_regions(), 0);
  ::setenv("KILN_FUSION", "yes", 1);
  expect_error([&] { Executor e(p); }, ErrorKind::value, "KILN_FUSION must be 0");
  ::unsetenv("KILN_FUSION");
  EXPECT_EQ(Executor(p).fused_regions(), 1);
}

// The kernel declines layouts it cannot run block by block -- a tensor that is not a
// dense f32 run, two tensors overlapping at different offsets -- and writes nothing.
TEST(Fusion, TheKernelDeclinesLayoutsItCannotRun) {
  using cpu::FusedOperand;
  Tensor a = randn({64}), out = zeros({64});
  std::vector<cpu::FusedStep> steps = {
      {.op = ops::OpKind::exp, .a = {FusedOperand::Kind::tensor, 0}, .store = 1}};
  Tensor before = clone(out), big = randn({80});
  auto runs = [&](TensorList tensors) { return cpu::run_fused_pointwise(steps, tensors, {}, 64); };
  EXPECT_FALSE(runs({select(randn({64, 2}), 1, 0), out}));
  EXPECT_FALSE(runs({narrow(big, 0, 0, 64), narrow(big, 0, 8, 64)}));
  EXPECT_FALSE(runs({to(a, DType::f64), out}));
  EXPECT_TRUE(same_bits(out, before));
  EXPECT_TRUE(runs({a, out}));
  EXPECT_TRUE(same_bits(out, exp(a)));
}

}  // namespace
}  // namespace kiln::runtime

namespace kiln::runtime {
namespace {

struct Sdpa : nn::Module {
  TensorList forward(const TensorList& in) override {
    return {nn::scaled_dot_product_attention(in[0], in[1], in[2])};
  }
};

// Note [Blocked attention]: matmul, scale, softmax, matmul run over blocks of query rows,
// the scores never made whole; the values are the unfused ops' to float rounding, at a
// sequence whose rows take several blocks, and in the benchmark BLOCK.
TEST(Fusion, AttentionRunsBlockedOverQueryRows) {
  manual_seed(9);
  Sdpa sdpa;
  // Blocks of several whole matrices (T = 8), of 3 of 4 heads' matrices and then the last
  // one alone (T = 200: 160 KB each), of rows (T = 1500).
  for (auto [T, H] : {std::pair<int64_t, int64_t>{8, 3}, {200, 4}, {1500, 3}}) {
    SCOPED_TRACE(T);
    Tensor q = randn({2, H, T, 16}), k = randn({2, H, T, 16}), v = randn({2, H, T, 8});
    ExportedProgram p = export_program(sdpa, {q, k, v});
    Executor blocked(p, {.min_attention_bytes = 0}), unfused(p, {.fuse = false});
    EXPECT_EQ(blocked.fused_attention(), 1);
    Tensor want = sdpa.forward({q, k, v})[0];
    EXPECT_TRUE(
        kiln::testing::all_close(blocked.run({q, k, v})[0], to_vector<double>(want), 1.3e-6, 1e-5));
    EXPECT_TRUE(same_bits(unfused.run({q, k, v})[0], want));
    // Blocked, the program plans no scores: only the output.
    EXPECT_LT(blocked.stats().planned_bytes + 2 * H * T * T * 4, unfused.stats().planned_bytes + 1);
  }
  // Masked: a bool padding mask [B, 1, 1, S] (masked_fill) and a float mask [T, S] (add),
  // broadcast to the scores; blocks of whole matrices (T = 8: several heads per block)
  // and of rows (T = 1500).
  struct MaskedSdpa : nn::Module {
    TensorList forward(const TensorList& in) override {
      return {nn::scaled_dot_product_attention(in[0], in[1], in[2], in[3]),
              nn::scaled_dot_product_attention(in[0], in[1], in[2], in[4])};
    }
  } masked;
  for (int64_t T : {8, 1500}) {
    SCOPED_TRACE(T);
    Tensor q = randn({2, 3, T, 16}), k = randn({2, 3, T, 16}), v = randn({2, 3, T, 8});
    Tensor keep = rand({2, 1, 1, T}) > 0.3, bias = randn({T, T});
    ExportedProgram p = export_program(masked, {q, k, v, keep, bias});
    Executor blocked(p, {.min_attention_bytes = 0}), unfused(p, {.fuse = false});
    EXPECT_EQ(blocked.fused_attention(), 2);
    TensorList want = masked.forward({q, k, v, keep, bias}),
               got = blocked.run({q, k, v, keep, bias});
    for (size_t i = 0; i < 2; ++i)
      EXPECT_TRUE(kiln::testing::all_close(got[i], to_vector<double>(want[i]), 1.3e-6, 1e-5)) << i;
    EXPECT_LT(blocked.stats().planned_bytes, unfused.stats().planned_bytes);
  }
  auto ref = nn::make_reference_model("block");
  ref.module->eval();
  ExportedProgram p = export_program(*ref.module, ref.example_inputs);
  Executor blocked(p, {.min_attention_bytes = 0});
  EXPECT_EQ(blocked.fused_attention(), 1);
  Executor by_default(p);  // its 1 MiB of scores stay in cache: unfused
  EXPECT_EQ(by_default.fused_attention(), 0);
  Tensor want = by_default.run(ref.example_inputs)[0];
  EXPECT_TRUE(kiln::testing::all_close(blocked.run(ref.example_inputs)[0], to_vector<double>(want),
                                       1.3e-6, 1e-5));
}

}  // namespace
}  // namespace kiln::runtime

namespace kiln::runtime {
namespace {

// Note [Product epilogues]: linear + relu + residual add as one product, through the
// short products' transposing copy (64 rows) and oneDNN's post-ops (512 rows), with the
// unfused ops' values.
TEST(Fusion, LinearReluAndResidualRunAsTheProductsEpilogue) {
  struct Layer : nn::Module {
    TensorList forward(const TensorList& in) override {
      Tensor h = relu(linear(in[0], in[1], in[2]));
      Tensor r = add(in[3], h);                 // residual + relu(linear)
      Tensor s = add(linear(r, in[1]), in[3]);  // linear (no bias) + residual
      // Two products meeting in one add (an LSTM's gates): the first takes the add.
      Tensor t = add(linear(s, in[1], in[2]), linear(r, in[1]));
      return {mul(t, 2.0)};
    }
  };
  manual_seed(10);
  Layer layer;
  for (int64_t rows : {64, 512}) {
    SCOPED_TRACE(rows);
    TensorList in = {randn({rows, 256}), randn({256, 256}), randn({256}), randn({rows, 256})};
    ExportedProgram p = export_program(layer, in);
    Executor fused(p), unfused(p, {.fuse = false});
    EXPECT_EQ(fused.fused_epilogues(), 3);
    EXPECT_TRUE(same_bits(fused.run(in)[0], unfused.run(in)[0]));
    EXPECT_TRUE(same_bits(fused.run(in)[0], layer.forward(in)[0]));
  }
}

}  // namespace
}  // namespace kiln::runtime

// Custom differentiable functions (Note [Custom functions]), as torch.autograd.Function.
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using autograd::FunctionCtx;
using testing::all_close;
using testing::expect_error;

std::vector<double> values(const Tensor& t) { return to_vector<double>(t); }

// k * e^x, saving its output (as PyTorch's exp does).
struct ScaledExp : autograd::Function<ScaledExp> {
  static constexpr const char* name = "ScaledExp";
  static Tensor forward(FunctionCtx& ctx, const Tensor& x, double k) {
    Tensor y = mul(exp(x), k);
    ctx.save_for_backward({y});
    return y;
  }
  static TensorList backward(FunctionCtx& ctx, const TensorList& grads) {
    return {mul(grads[0], ctx.saved_tensors()[0]), Tensor()};
  }
};

TEST(CustomFunction, GradientFlowsThroughTheUsersBackward) {
  Tensor x = randn({4}, {.requires_grad = true});
  Tensor y = ScaledExp::apply(x, 2.0);
  EXPECT_EQ(y.grad_fn()->name(), "ScaledExpBackward");
  sum(y).backward();
  EXPECT_TRUE(all_close(x.grad(), values(mul(exp(x.detach()), 2.0)), 1e-6, 1e-6));
  // no argument needs a gradient, or grad mode off: nothing recorded
  Tensor plain = ScaledExp::apply(randn({4}), 2.0);
  EXPECT_FALSE(plain.requires_grad());
  autograd::NoGradGuard no_grad;
  EXPECT_FALSE(ScaledExp::apply(x, 2.0).requires_grad());
}

// The backward is itself made of recorded ops: differentiated again, it gives
// d2/dx2 (k e^x) = k e^x through the saved output's restored history.
TEST(CustomFunction, DoubleBackwardThroughASavedOutput) {
  Tensor x = randn({3}, {.requires_grad = true});
  Tensor y = ScaledExp::apply(x, 3.0);
  TensorList g = autograd::grad({sum(y)}, {x}, {}, true, false, true);
  ASSERT_TRUE(g[0].requires_grad());
  TensorList gg = autograd::grad({sum(g[0])}, {x});
  EXPECT_TRUE(all_close(gg[0], values(mul(exp(x.detach()), 3.0)), 1e-6, 1e-6));
}

// a * b with needs_input_grad: the gradient of an argument that needs none is skipped.
struct Mul2 : autograd::Function<Mul2> {
  static Tensor forward(FunctionCtx& ctx, const Tensor& a, const Tensor& b) {
    ctx.save_for_backward({a, b});
    ctx.saved_data["calls"] = 1;
    return mul(a, b);
  }
  static TensorList backward(FunctionCtx& ctx, const TensorList& grads) {
    TensorList s = ctx.saved_tensors();
    EXPECT_EQ(std::any_cast<int>(ctx.saved_data.at("calls")), 1);
    return {ctx.needs_input_grad(0) ? mul(grads[0], s[1]) : Tensor(),
            ctx.needs_input_grad(1) ? mul(grads[0], s[0]) : Tensor()};
  }
};

TEST(CustomFunction, NeedsInputGradAndBroadcastGradientsSummedBack) {
  Tensor a = randn({2, 3}, {.requires_grad = true}), b = randn({3});
  Tensor y = Mul2::apply(a, b);
  EXPECT_EQ(y.grad_fn()->name(), "CustomFunctionBackward");
  sum(y).backward();
  EXPECT_TRUE(all_close(a.grad(), values(expand(b, {2, 3})), 1e-6, 1e-6));
  // b [3] gets a [2, 3] gradient from the user's backward: summed to its shape
  Tensor a2 = randn({2, 3}), b2 = randn({3}, {.requires_grad = true});
  sum(Mul2::apply(a2, b2)).backward();
  EXPECT_TRUE(all_close(b2.grad(), values(sum(a2, {0})), 1e-6, 1e-6));
}

TEST(CustomFunction, AnInputWrittenInPlaceAfterSavingIsAnErrorNamingTheFunction) {
  Tensor a = randn({3}, {.requires_grad = true}), b = randn({3});
  Tensor y = Mul2::apply(a, b);
  add_(b, 1.0);
  expect_error([&] { sum(y).backward(); }, ErrorKind::value,
               "[CustomFunctionBackward] one of the tensors needed");
}

// Wrong counts and shapes of the user's gradients are clear errors.
struct BadCount : autograd::Function<BadCount> {
  static constexpr const char* name = "BadCount";
  static Tensor forward(FunctionCtx&, const Tensor& x) { return mul(x, 2.0); }
  static TensorList backward(FunctionCtx&, const TensorList& grads) { return {grads[0], grads[0]}; }
};
struct BadShape : autograd::Function<BadShape> {
  static constexpr const char* name = "BadShape";
  static Tensor forward(FunctionCtx&, const Tensor& x) { return mul(x, 2.0); }
  static TensorList backward(FunctionCtx&, const TensorList&) { return {ones({5})}; }
};

TEST(CustomFunction, BackwardsOfTheWrongCountOrShapeAreErrors) {
  Tensor x = randn({3}, {.requires_grad = true});
  expect_error([&] { sum(BadCount::apply(x)).backward(); }, ErrorKind::value,
               "[BadCountBackward] backward returned 2 gradients, expected 1");
  expect_error(
      [&] { sum(BadShape::apply(x)).backward(); }, ErrorKind::value,
      "[BadShapeBackward] backward returned a gradient of shape [5] for argument 0 of shape [3]");
}

// Sort-like: values differentiable, indices marked non-differentiable; the gradient of
// an unused output arrives as zeros, or undefined without materialize_grads.
struct SortValues : autograd::Function<SortValues> {
  static TensorList forward(FunctionCtx& ctx, const Tensor& x, bool materialize) {
    auto [sorted, indices] = sort(x, 0);
    ctx.mark_non_differentiable({indices});
    ctx.set_materialize_grads(materialize);
    ctx.save_for_backward({indices});
    Tensor doubled = mul(sorted, 2.0);
    return {sorted, indices, doubled};
  }
  static TensorList backward(FunctionCtx& ctx, const TensorList& grads) {
    Tensor idx = ctx.saved_tensors()[0];
    Tensor g = grads[0].defined() ? grads[0] : zeros_like(grads[2]);
    if (grads[2].defined()) g = add(g, mul(grads[2], 2.0));
    return {scatter(zeros_like(g), 0, idx, g), Tensor()};
  }
};

TEST(CustomFunction, NonDifferentiableOutputsAndMaterializedGradients) {
  for (bool materialize : {true, false}) {
    Tensor x = from_vector<float>({3, 1, 2}, {3}).detach();
    x.set_requires_grad();
    TensorList out = SortValues::apply(x, materialize);
    EXPECT_FALSE(out[1].requires_grad());
    EXPECT_TRUE(out[0].requires_grad());
    sum(out[2]).backward();  // only the third output is used
    EXPECT_EQ(values(x.grad()), (std::vector<double>{2, 2, 2})) << materialize;
  }
}

// In place: forward writes its argument and marks it dirty; the argument takes the
// function's history. A leaf that requires grad may not be written.
struct ScaleInPlace : autograd::Function<ScaleInPlace> {
  static constexpr const char* name = "ScaleInPlace";
  static Tensor forward(FunctionCtx& ctx, Tensor x) {
    mul_(x, 3.0);
    ctx.mark_dirty({x});
    return x;
  }
  static TensorList backward(FunctionCtx&, const TensorList& grads) { return {mul(grads[0], 3.0)}; }
};

TEST(CustomFunction, MarkDirtyGivesTheArgumentTheHistory) {
  Tensor leaf = randn({3}, {.requires_grad = true});
  Tensor x = mul(leaf, 1.0);
  Tensor y = ScaleInPlace::apply(x);
  EXPECT_TRUE(y.is_same(x));
  EXPECT_EQ(x.grad_fn()->name(), "ScaleInPlaceBackward");
  sum(x).backward();
  EXPECT_EQ(values(leaf.grad()), (std::vector<double>{3, 3, 3}));
  Tensor direct = randn({3}, {.requires_grad = true});
  expect_error([&] { ScaleInPlace::apply(direct); }, ErrorKind::value,
               "[ScaleInPlaceBackward] a leaf tensor that requires grad");
}

struct OnceSquare : autograd::Function<OnceSquare> {
  static constexpr const char* name = "OnceSquare";
  static constexpr bool once_differentiable = true;
  static Tensor forward(FunctionCtx& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return mul(x, x);
  }
  static TensorList backward(FunctionCtx& ctx, const TensorList& grads) {
    return {mul(mul(grads[0], ctx.saved_tensors()[0]), 2.0)};
  }
};

TEST(CustomFunction, OnceDifferentiableRefusesASecondDerivative) {
  Tensor x = randn({3}, {.requires_grad = true});
  // As PyTorch: with gradients that need none themselves, the result has no history...
  TensorList g = autograd::grad({sum(OnceSquare::apply(x))}, {x}, {}, true, false, true);
  EXPECT_TRUE(all_close(g[0], values(mul(x.detach(), 2.0)), 1e-6, 1e-6));
  EXPECT_FALSE(g[0].requires_grad());
  // ...and with ones that do, differentiating it again is the error (PyTorch's DelayedError)
  Tensor v = ones({3}, {.requires_grad = true});
  TensorList gv = autograd::grad({OnceSquare::apply(x)}, {x}, {v}, true, false, true);
  ASSERT_TRUE(gv[0].requires_grad());
  expect_error([&] { autograd::grad({sum(gv[0])}, {v}); }, ErrorKind::value,
               "[OnceSquareBackward] is once_differentiable");
  // a second backward through a freed graph names the function
  Tensor y = OnceSquare::apply(x);
  sum(y).backward();
  expect_error([&] { sum(y).backward(); }, ErrorKind::value,
               "[OnceSquareBackward] Trying to backward through the graph a second time");
}

// Traced: make_fx records the forward's ops and the backward's; capture_joint's program
// computes eager's gradient.
TEST(CustomFunction, TracedByMakeFxAndCaptureJoint) {
  ir::Graph g = make_fx(
      [](const TensorList& in) {
        Tensor x = in[0].detach();
        x.set_requires_grad();
        Tensor y = ScaledExp::apply(x, 2.0);
        return autograd::grad({sum(y)}, {x});
      },
      {randn({3})});
  std::string text = g.str();
  EXPECT_NE(text.find("exp("), std::string::npos) << text;
  EXPECT_EQ(text.find("ScaledExp"), std::string::npos) << text;  // no opaque node: plain ops

  auto fn = [](const TensorList& in) { return TensorList{sum(Mul2::apply(in[0], in[1]))}; };
  Tensor a = randn({2, 3}, {.requires_grad = true}), b = randn({2, 3}, {.requires_grad = true});
  passes::JointProgram p = passes::capture_joint(fn, {a, b});
  passes::JointRun run = passes::run_joint(p, {a, b});
  EXPECT_TRUE(all_close(run.grads[0], values(b), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(run.grads[1], values(a), 1e-6, 1e-6));
  EXPECT_NE(p.backward.str().find("mul("), std::string::npos) << p.backward.str();
}

}  // namespace
}  // namespace kiln

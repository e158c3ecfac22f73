// Autograd state and the engine: (G1) requires_grad, leaves, grad_fn, detach,
// retain_grad, guards; (G3) devices in backward; (G4) versions and in-place; (G5) the
// engine's errors; backward through the mode stack (fake, traced).
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::expect_error;

std::vector<double> values(const Tensor& t) { return to_vector<double>(t); }

TEST(G1, LeavesNonLeavesAndGradFn) {
  Tensor x = tensor({1, 2, 3}, {}, {.requires_grad = true});
  Tensor c = tensor({4, 5, 6});
  EXPECT_TRUE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
  EXPECT_EQ(x.grad_fn(), nullptr);
  EXPECT_FALSE(c.requires_grad());

  Tensor y = x * c;
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward0");
  EXPECT_EQ(_to_copy(y, f64, Device("cpu:0")).grad_fn()->name(), "ToCopyBackward0");
  EXPECT_EQ(layer_norm(y, {3}).grad_fn()->name(), "LayerNormBackward0");
  EXPECT_FALSE((c * c).requires_grad());  // no input requires grad: nothing recorded
  EXPECT_EQ((c * c).grad_fn(), nullptr);

  Tensor loss = sum(y);
  loss.backward();
  EXPECT_TRUE(all_close(x.grad(), {4, 5, 6}));
  EXPECT_FALSE(y.grad().defined());  // non-leaves keep no gradient unless asked
  EXPECT_FALSE(c.grad().defined());
}

TEST(G1, RequiresGradSetterAndFactoryOption) {
  Tensor w = zeros({2, 2});
  EXPECT_FALSE(w.requires_grad());
  w.set_requires_grad();
  EXPECT_TRUE(w.requires_grad());
  w.set_requires_grad(false);
  EXPECT_FALSE(w.requires_grad());
  EXPECT_TRUE(randn({2}, {.requires_grad = true}).requires_grad());
  EXPECT_TRUE(ones_like(w, {.requires_grad = true}).requires_grad());
  expect_error([] { arange(3).set_requires_grad(); }, ErrorKind::dtype,
               "only tensors of floating dtype can require gradients");
  Tensor x = ones({2}, {.requires_grad = true});
  Tensor y = x * 2.0;
  expect_error([&] { y.set_requires_grad(false); }, ErrorKind::value, "is not a leaf");
}

TEST(G1, GradientsAccumulateAcrossUsesAndCalls) {
  Tensor x = tensor({1, 2, 3}, {}, {.requires_grad = true});
  sum(x * x + x).backward();  // 2x + 1, x used three times
  EXPECT_TRUE(all_close(x.grad(), {3, 5, 7}));
  Tensor held = x.grad();
  sum(x * 2.0).backward();  // accumulates in place: a held handle sees it
  EXPECT_TRUE(all_close(held, {5, 7, 9}));
  x.mutable_grad() = Tensor();
  sum(x).backward();
  EXPECT_TRUE(all_close(x.grad(), {1, 1, 1}));
}

TEST(G1, DetachAndRetainGrad) {
  Tensor x = tensor({1, 2}, {}, {.requires_grad = true});
  Tensor y = x * 3.0;
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_alias_of(y));
  y.retain_grad();
  Tensor z = y * y;
  sum(z).backward();
  EXPECT_TRUE(all_close(y.grad(), {6, 12}));   // 2y
  EXPECT_TRUE(all_close(x.grad(), {18, 36}));  // 2y * 3
}

TEST(G1, NoGradAndInferenceModeAreScopedAndExceptionSafe) {
  Tensor x = ones({2}, {.requires_grad = true});
  {
    autograd::NoGradGuard g;
    EXPECT_FALSE(autograd::grad_enabled());
    EXPECT_FALSE((x * 2.0).requires_grad());
    {
      autograd::GradModeGuard on(true);
      EXPECT_TRUE((x * 2.0).requires_grad());
    }
    EXPECT_FALSE(autograd::grad_enabled());
  }
  EXPECT_TRUE(autograd::grad_enabled());
  try {
    autograd::InferenceModeGuard g;
    EXPECT_TRUE(autograd::InferenceModeGuard::active());
    uint32_t v = x.version();
    Tensor y = clone(x);
    add_(y, 1.0);
    EXPECT_EQ(y.version(), 0u);  // inference mode counts no versions
    EXPECT_EQ(x.version(), v);
    throw Error(ErrorKind::value, "boom");
  } catch (const Error&) {
  }
  EXPECT_TRUE(autograd::grad_enabled());
  EXPECT_FALSE(autograd::InferenceModeGuard::active());
  EXPECT_TRUE((x * 2.0).requires_grad());
}

// (G6) Inference tensors, as PyTorch's: made under InferenceMode, views of them too;
// outside the mode they may be read but not written in place, saved for backward or made
// to require grad; clone() gives a normal tensor.
TEST(G6, InferenceTensorsAreReadOnlyForAutogradOutsideTheMode) {
  Tensor normal = ones({3});
  Tensor inf, view_of_normal;
  {
    autograd::InferenceModeGuard g;
    inf = ones({3}) * 2.0;
    view_of_normal = view(normal, {3, 1});
    EXPECT_TRUE(inf.is_inference());
    EXPECT_TRUE(view(inf, {1, 3}).is_inference());
    EXPECT_FALSE(view_of_normal.is_inference());  // a view of a normal tensor stays normal
    add_(inf, 1.0);                               // writing it inside the mode is allowed
    add_(normal, 0.0);                            // and normal tensors may be written there
  }
  EXPECT_FALSE(normal.is_inference());
  EXPECT_EQ(to_vector<float>(inf), (std::vector<float>{3, 3, 3}));
  expect_error([&] { add_(inf, 1.0); }, ErrorKind::value,
               "[add_] Inplace update to inference tensor outside InferenceMode is not allowed");
  expect_error(
      [&] {
        Tensor v = view(inf, {3});
        fill_(v, 0.0);
      },
      ErrorKind::value, "inference tensor");
  EXPECT_EQ(to_vector<float>(inf), (std::vector<float>{3, 3, 3}));  // nothing was written
  Tensor w = ones({3}, {.requires_grad = true});
  expect_error([&] { mul(w, inf); }, ErrorKind::value,
               "[mul] Inference tensors cannot be saved for backward (argument 'other'");
  Tensor sum_ok = add(w, inf);  // add saves nothing: allowed, as in PyTorch
  EXPECT_TRUE(sum_ok.requires_grad());
  EXPECT_FALSE(sum_ok.is_inference());
  expect_error(
      [&] { inf.set_requires_grad(true); }, ErrorKind::value,
      "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed");
  Tensor c = clone(inf);  // the way out
  EXPECT_FALSE(c.is_inference());
  add_(c, 1.0);
  Tensor y = mul(w, c);
  sum(y).backward();
  EXPECT_EQ(to_vector<float>(w.grad()), (std::vector<float>{4, 4, 4}));
}

TEST(G4, VersionsCountInPlaceWritesOnTheStorage) {
  Tensor x = zeros({4});
  Tensor v = slice(x, 0, 1, 3);
  EXPECT_EQ(x.version(), 0u);
  add_(x, 1.0);
  fill_(v, 2.0);
  EXPECT_EQ(x.version(), 2u);
  EXPECT_EQ(v.version(), 2u);
  EXPECT_EQ(x.detach().version(), 2u);
}

TEST(G4, ModifiedSavedTensorIsAnErrorNamingTheOp) {
  Tensor x = tensor({1, 2}, {}, {.requires_grad = true});
  Tensor y = x * 2.0;
  Tensor z = exp(y);  // saves its result
  add_(z, 1.0);
  expect_error(
      [&] { sum(z).backward(); }, ErrorKind::value,
      "[ExpBackward0] one of the tensors needed for gradient computation has been "
      "modified by an in-place operation: [f32[2]@cpu:0], which is output 0 of ExpBackward0, is at "
      "version 1; expected version 0 instead (output 0 of exp saved it)");
  EXPECT_FALSE(x.grad().defined());  // nothing was accumulated

  Tensor a = x * 1.0;
  Tensor b = a * a;  // saves a
  mul_(a, 2.0);
  // named by the node that produced it (a = x * 1), as PyTorch; the saver in brackets
  expect_error(
      [&] { sum(b).backward(); }, ErrorKind::value,
      "[MulBackward0] one of the tensors needed for gradient computation has been modified by an "
      "in-place operation: [f32[2]@cpu:0], which is output 0 of MulBackward0, is at version 1; "
      "expected "
      "version 0 instead (argument 'self' of mul saved it)");
  Tensor leaf = tensor({1, 2}, {}, {.requires_grad = true});
  Tensor c = exp(mul(leaf, 1.0));
  Tensor d = tensor({3, 4});
  Tensor e = mul(c, d);  // saves d, which has no history: no "which is" part
  mul_(d, 2.0);
  expect_error([&] { sum(e).backward(); }, ErrorKind::value,
               "in-place operation: [f32[2]@cpu:0] is at version 1; expected version 0 instead "
               "(argument 'other' "
               "of mul saved it)");
}

// PyTorch warns when the .grad of a non-leaf is read (backward never fills it): kiln
// reports it through the warning handler, once per site; leaves and retained gradients
// read silently.
TEST(G1, ReadingTheGradOfANonLeafWarnsOnceThroughTheHandler) {
  reset_warnings();
  std::vector<Warning> got;
  WarningHandlerGuard capture([&](const Warning& w) { got.push_back(w); });
  Tensor x = tensor({1, 2}, {}, {.requires_grad = true});
  Tensor y = x * 2.0;
  Tensor z = x * 3.0;
  z.retain_grad();
  sum(y + z).backward();
  EXPECT_TRUE(x.grad().defined());
  EXPECT_TRUE(z.grad().defined());
  EXPECT_TRUE(got.empty());
  EXPECT_FALSE(y.grad().defined());
  EXPECT_FALSE(y.grad().defined());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].site, "grad of a non-leaf");
  EXPECT_NE(
      got[0].message.find("a tensor that is not a leaf, is read: backward() does not fill it"),
      std::string::npos)
      << got[0].message;
  reset_warnings();
  y.grad();
  EXPECT_EQ(got.size(), 2u);  // reset: the site warns again
}

TEST(G4, InPlaceOnNonLeavesIsDifferentiated) {
  Tensor x = tensor({1, 2, 3}, {}, {.requires_grad = true});
  Tensor y = x * 2.0;
  add_(y, 1.0);  // y = 2x + 1
  mul_(y, y);    // y = (2x + 1)^2: mul_ reads the value before its write
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward0");
  sum(y).backward();
  EXPECT_TRUE(all_close(x.grad(), {12, 20, 28}));  // 4 (2x + 1)

  Tensor buf = zeros({3});  // a tensor without grad written with one that has it
  Tensor w = ones({3}, {.requires_grad = true});
  add_(buf, w * 3.0);
  EXPECT_TRUE(buf.requires_grad());
  sum(buf).backward();
  EXPECT_TRUE(all_close(w.grad(), {3, 3, 3}));
}

TEST(G4, InPlaceOnALeafOrAViewOfOneIsAClearError) {
  Tensor x = ones({3}, {.requires_grad = true});
  expect_error([&] { add_(x, 1.0); }, ErrorKind::value,
               "[add_] cannot modify in place a leaf tensor that requires grad");
  EXPECT_EQ(x.version(), 0u);  // nothing written
  Tensor v = slice(x, 0, 0, 2);
  expect_error([&] { mul_(v, 2.0); }, ErrorKind::value,
               "modifies in place a view (f32[2]@cpu:0) of a leaf");
  EXPECT_EQ(x.version(), 0u);
  {
    autograd::NoGradGuard g;  // the way to update parameters
    add_(x, 1.0);
  }
  EXPECT_TRUE(all_close(x, {2, 2, 2}));
}

// Note [In-place writes through views]; the expected gradients are PyTorch's.
TEST(G4, InPlaceThroughAViewRebasesTheBase) {
  {  // a row of a reshaped intermediate, multiplied in place
    Tensor x = tensor({1, 2, 3, 4}, {}, {.requires_grad = true});
    Tensor y = x * 1.0;
    Tensor row = select(view(y, {2, 2}), 0, 1);
    mul_(row, select(view(x.detach(), {2, 2}), 0, 1));
    ASSERT_NE(y.grad_fn(), nullptr);
    EXPECT_EQ(y.grad_fn()->name(), "CopySlices");  // PyTorch's name for a write through a view
    sum(y * y).backward();
    EXPECT_TRUE(all_close(x.grad(), {2, 4, 54, 128}));
  }
  {  // rows of a buffer without history written with values that have it
    Tensor x = tensor({1, 2, 3}, {}, {.requires_grad = true});
    Tensor out = zeros({2, 3});
    Tensor r0 = select(out, 0, 0);
    copy_(r0, x * 2.0);
    Tensor r1 = select(out, 0, 1);
    copy_(r1, x * x);
    EXPECT_TRUE(out.requires_grad());
    sum(out * out).backward();
    EXPECT_TRUE(all_close(x.grad(), {12, 48, 132}));
  }
  {  // the written view and its base both used afterwards
    Tensor x = tensor({1, 2, 3, 4}, {}, {.requires_grad = true});
    Tensor y = x * 1.0;
    Tensor v = slice(y, 0, 1, 3);
    mul_(v, 3.0);
    EXPECT_TRUE(all_close(y, {1, 6, 9, 4}));
    sum(v * slice(y, 0, 0, 2)).backward();
    EXPECT_TRUE(all_close(x.grad(), {6, 30, 18, 0}));
  }
}

TEST(G4, ViewsMadeBeforeAWriteGetTheBasesNewHistory) {
  {  // an older view of the rows written through another view
    Tensor x = tensor({1, 2, 3}, {}, {.requires_grad = true});
    Tensor out = zeros({2, 3});
    Tensor older = select(out, 0, 0);
    Tensor row = select(out, 0, 0);
    EXPECT_FALSE(older.requires_grad());
    copy_(row, x * x);
    EXPECT_TRUE(older.requires_grad());  // asked, as PyTorch, it sees the write
    EXPECT_NE(older.grad_fn(), nullptr);
    sum(older * 2.0).backward();
    EXPECT_TRUE(all_close(x.grad(), {4, 8, 12}));
  }
  {  // a view made before its base was written in place as a whole
    Tensor x = tensor({1, 2, 3, 4}, {}, {.requires_grad = true});
    Tensor y = x * 2.0;
    Tensor v = slice(y, 0, 0, 2);
    mul_(y, x.detach());
    sum(v * v).backward();
    EXPECT_TRUE(all_close(x.grad(), {8, 64, 0, 0}));
  }
  {  // an in-place op that saves another view of what it writes: its backward reports the
     // write, and no reference cycle is left behind (the ASan build checks leaks)
    Tensor x = tensor({1, 2, 3}, {}, {.requires_grad = true});
    Tensor y = x * 1.0;
    Tensor tail = slice(y, 0, 1, 3);
    mul_(tail, select(y, 0, 0));
    EXPECT_TRUE(all_close(y, {1, 2, 3}));
    expect_error([&] { sum(y).backward(); }, ErrorKind::value,
                 "has been modified by an in-place operation");
  }
  {  // mul_ saves c0, whose storage its own write then changes: PyTorch refuses this too
    Tensor x = tensor({1, 2, 3, 4, 5, 6}, {}, {.requires_grad = true});
    Tensor y = view(x * 1.0, {2, 3});
    Tensor c0 = select(y, 1, 0), c2 = select(y, 1, 2);
    add_(c0, 10.0);
    mul_(c2, c0);
    expect_error([&] { sum(y * y).backward(); }, ErrorKind::value,
                 "has been modified by an in-place operation");
  }
}

TEST(G5, CreateGraphDifferentiatesTheBackward) {
  Tensor x = tensor({1, 2, 3}, {}, {.requires_grad = true});
  Tensor y = sum(x * x * x);
  Tensor dx = autograd::grad({y}, {x}, {}, false, false, /*create_graph=*/true)[0];
  EXPECT_TRUE(all_close(dx, {3, 12, 27}));  // 3 x^2
  EXPECT_TRUE(dx.requires_grad());
  // The forward graph was kept: a second first derivative still runs.
  EXPECT_TRUE(all_close(autograd::grad({y}, {x}, {}, /*retain_graph=*/true)[0], {3, 12, 27}));
  Tensor ddx = autograd::grad({sum(dx)}, {x})[0];
  EXPECT_TRUE(all_close(ddx, {6, 12, 18}));  // 6 x
  // Through a saved output (exp saves its result): d2/dx2 exp = exp.
  Tensor e = exp(x);
  Tensor de = autograd::grad({sum(e)}, {x}, {}, false, false, true)[0];
  EXPECT_TRUE(all_close(autograd::grad({sum(de)}, {x})[0], to_vector<double>(e.detach())));
  // backward(create_graph): grad() keeps a history (a gradient penalty's pattern).
  Tensor w = tensor({1, 2}, {}, {.requires_grad = true});
  sum(w * w * w).backward(Tensor(), false, /*create_graph=*/true);
  Tensor g = w.grad();  // 3 w^2
  EXPECT_TRUE(g.requires_grad());
  EXPECT_TRUE(all_close(autograd::grad({sum(g * g)}, {w})[0], {36, 288}));  // 2 g 6 w = 36 w^3
  w.mutable_grad() = Tensor();  // w -> grad -> its history -> w: a cycle, as in PyTorch
  g = Tensor();
  // Without create_graph the gradient has no history.
  EXPECT_FALSE(autograd::grad({sum(x * x)}, {x})[0].requires_grad());
}

// Second derivatives PyTorch 1.13 gives (test_ops' gradgrad pattern: d/dx sum(g^2) of the
// first gradient g of sum(f(x))), where the first-order formulas once had no history
// (cumprod) or a 0 * NaN in a branch where() does not take (logcumsumexp at -inf, i1/i1e
// at 0).
TEST(G5, SecondDerivativesThroughSpecialCases) {
  auto gradgrad = [](auto f, std::initializer_list<double> values) {
    Tensor x = tensor(values, {}, {.dtype = f64, .requires_grad = true});
    Tensor g = autograd::grad({sum(f(x))}, {x}, {}, true, false, /*create_graph=*/true)[0];
    return autograd::grad({sum(g * g)}, {x})[0];
  };
  EXPECT_TRUE(all_close(gradgrad([](const Tensor& x) { return cumprod(x, 0); }, {1, 2, 0, 3}),
                        {130, 70, 56, 32}));
  EXPECT_TRUE(
      all_close(gradgrad([](const Tensor& x) { return logcumsumexp(x, 0); }, {1, -INFINITY, 0.5}),
                {1.0551284385110193, 0, -1.0551284385110193}, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(gradgrad([](const Tensor& x) { return special_i1(x); }, {0, 1}),
                        {0, 0.6019547659568157}));
  EXPECT_TRUE(all_close(gradgrad([](const Tensor& x) { return special_i1e(x); }, {0, 1}),
                        {0, -0.014963288626146145}));
  // cumprod's first derivative in ops (create_graph) equals the fused kernel's, zeros and all
  manual_seed(5);
  Tensor x = where(rand({4, 6}) < 0.25, zeros({4, 6}), randn({4, 6}));
  x = to(x, f64).set_requires_grad(true);
  Tensor w = randn({4, 6}, {.dtype = f64});
  for (int64_t dim : {0, 1}) {
    Tensor in_ops = autograd::grad({sum(cumprod(x, dim) * w)}, {x}, {}, false, false, true)[0];
    Tensor fused = autograd::grad({sum(cumprod(x, dim) * w)}, {x})[0];
    EXPECT_TRUE(all_close(in_ops, to_vector<double>(fused), 1e-12, 1e-12)) << dim;
  }
}

// convolution's gradients are made of differentiable ops (Note [Convolution's gradients]),
// so a second derivative (a gradient penalty through a CNN) exists: d/d(x, w) of the
// squared first gradients, against central differences, with groups, stride, padding and
// dilation.
TEST(G5, ConvolutionSecondDerivativesMatchFiniteDifferences) {
  manual_seed(6);
  TensorOptions o{.dtype = f64};
  Tensor x0 = randn({2, 4, 5, 4}, o), w0 = randn({4, 2, 3, 2}, o);
  IntList stride{2, 1}, padding{1, 1}, dilation{1, 2};
  Tensor r = randn({2, 4, 3, 4}, o);  // weights the output: the first gradients vary
  auto penalty = [&](const Tensor& x, const Tensor& w) {
    Tensor y = convolution(x, w, Tensor(), stride, padding, dilation, 2);
    TensorList g = autograd::grad({sum(y * r)}, {x, w}, {}, true, false, /*create_graph=*/true);
    return sum(g[0] * g[0]) + sum(g[1] * g[1]);
  };
  Tensor x = clone(x0).set_requires_grad(true), w = clone(w0).set_requires_grad(true);
  TensorList analytic = autograd::grad({penalty(x, w)}, {x, w});
  const double eps = 1e-6;
  auto numeric = [&](int which) {  // d penalty / d (x or w), one element at a time
    const Tensor& base = which == 0 ? x0 : w0;
    std::vector<double> d;
    for (int64_t i = 0; i < base.numel(); ++i) {
      auto at = [&](double step) {
        Tensor b = clone(base);
        b.data<double>()[i] += step;
        Tensor xs = (which == 0 ? b : clone(x0)).set_requires_grad(true);
        Tensor ws = (which == 1 ? b : clone(w0)).set_requires_grad(true);
        return to_vector<double>(penalty(xs, ws))[0];
      };
      d.push_back((at(eps) - at(-eps)) / (2 * eps));
    }
    return d;
  };
  EXPECT_TRUE(all_close(analytic[0], numeric(0), 1e-5, 1e-5));
  EXPECT_TRUE(all_close(analytic[1], numeric(1), 1e-5, 1e-5));
}

TEST(G5, EngineErrors) {
  Tensor x = tensor({1, 2}, {}, {.requires_grad = true});
  Tensor y = x * x;
  expect_error([&] { y.backward(); }, ErrorKind::value,
               "grad can be implicitly created only for scalar outputs");
  expect_error([&] { y.backward(ones({3})); }, ErrorKind::shape, "gradient 0 has shape [3]");
  Tensor loss = sum(y);
  loss.backward();
  expect_error([&] { loss.backward(); }, ErrorKind::value,
               "[MulBackward0] backward through the graph a second time");
  EXPECT_TRUE(all_close(x.grad(), {2, 4}));  // unchanged by the failed call

  Tensor c = tensor({1.0});
  expect_error([&] { c.backward(); }, ErrorKind::value,
               "element 0 of tensors does not require grad and does not have a grad_fn");
  expect_error([&] { autograd::grad({sum(x * 2.0)}, {c}); }, ErrorKind::value,
               "input 0 (f32[1]@cpu:0) does not require grad");
  Tensor unused = ones({1}, {.requires_grad = true});
  expect_error([&] { autograd::grad({sum(x * 2.0)}, {unused}); }, ErrorKind::value,
               "was not used to compute the outputs");
  EXPECT_FALSE(autograd::grad({sum(x * 2.0)}, {unused}, {}, false, true)[0].defined());
}

TEST(G5, RetainGraphAllowsASecondBackward) {
  Tensor x = tensor({1, 2}, {}, {.requires_grad = true});
  Tensor loss = sum(x * x);
  loss.backward({}, /*retain_graph=*/true);
  loss.backward();
  EXPECT_TRUE(all_close(x.grad(), {4, 8}));
}

TEST(G5, GradReturnsWithoutAccumulating) {
  Tensor x = tensor({1, 2}, {}, {.requires_grad = true});
  Tensor h = sin(x);
  Tensor loss = sum(h * h);
  TensorList g = autograd::grad({loss}, {x, h});
  EXPECT_TRUE(all_close(g[0], {std::sin(2.0), std::sin(4.0)}, 1e-5, 1e-6));  // sin 2x
  EXPECT_TRUE(all_close(g[1], {2 * std::sin(1.0), 2 * std::sin(2.0)}, 1e-5, 1e-6));
  EXPECT_FALSE(x.grad().defined());
  // Several outputs with their gradients.
  Tensor a = x * 2.0, b = x * 3.0;
  TensorList gg = autograd::grad({a, b}, {x}, {tensor({1, 1}), tensor({1, 0})});
  EXPECT_TRUE(all_close(gg[0], {5, 2}));
}

// (G3) A mode below autograd that notes, for each op backward dispatches, the op's
// device and the current CPU device at that moment.
struct DeviceLog final : Mode {
  std::vector<std::pair<Device, Device>> seen;  // (op device, current device)
  Outputs handle(ops::OpKind op, std::span<const Value> args) override {
    Outputs outs = dispatch(op, args);
    // Copies between devices run under their source side's node; every other op is
    // on the device of its node.
    if (op == ops::OpKind::_to_copy || op == ops::OpKind::copy_) return outs;
    if (!outs.size() || outs[0].device().type != DeviceType::cpu) return outs;
    seen.push_back({outs[0].device(), current_device(DeviceType::cpu)});
    return outs;
  }
};

TEST(G3, BackwardRunsEachNodeOnItsDeviceAndSendsGradientsBack) {
  Device d1("cpu:1"), d2("cpu:2");
  Tensor w1 = randn({4, 3}, {.device = d1, .requires_grad = true});
  Tensor w2 = randn({2, 4}, {.device = d2, .requires_grad = true});
  Tensor x = randn({5, 3}, {.device = d1});
  Tensor h = relu(linear(x, w1));      // on cpu:1
  Tensor out = linear(to(h, d2), w2);  // on cpu:2
  Tensor loss = sum(out * out);
  DeviceLog log;
  {
    ModeGuard g(log);
    loss.backward();
  }
  ASSERT_TRUE(w1.grad().defined());
  EXPECT_EQ(w1.grad().device(), d1);  // back across the to()
  EXPECT_EQ(w2.grad().device(), d2);
  int on1 = 0, on2 = 0;
  for (auto [op_device, current] : log.seen) {
    if (op_device == d1) ++on1;
    if (op_device == d2) ++on2;
    EXPECT_EQ(current, op_device);
  }
  EXPECT_GT(on1, 0);
  EXPECT_GT(on2, 0);

  // The same model on one device gives the same gradients.
  Tensor w1c = to(w1.detach(), d1).detach(), w2c = to(w2.detach(), d1).detach();
  w1c.set_requires_grad();
  w2c.set_requires_grad();
  Tensor out1 = linear(relu(linear(x, w1c)), w2c);
  sum(out1 * out1).backward();
  EXPECT_TRUE(all_close(to(w1.grad(), d1), values(w1c.grad()), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(to(w2.grad(), d1), values(w2c.grad()), 1e-6, 1e-6));
}

TEST(G3, CopyIntoAnotherDeviceSendsTheGradientBack) {
  Tensor src = randn({3}, {.device = Device("cpu:2"), .requires_grad = true});
  Tensor dst = zeros({2, 3}, {.device = Device("cpu:1")});
  copy_(dst, src);  // broadcast across devices
  sum(dst * 2.0).backward();
  EXPECT_EQ(src.grad().device(), Device("cpu:2"));
  EXPECT_TRUE(all_close(src.grad(), {4, 4, 4}));
}

// (G2) Backward is made of ordinary ops dispatched through the modes: traced, it shows
// up in the graph; under FakeMode it runs on fake tensors.
TEST(G2, BackwardIsTracedThroughTheModeStack) {
  ir::Graph g = make_fx(
      [](const TensorList& in) {
        Tensor x = in[0].detach();
        x.set_requires_grad();
        Tensor loss = sum(sin(x));
        return autograd::grad({loss}, {x});
      },
      {randn({3})});
  std::string text = g.str();
  EXPECT_NE(text.find("sin("), std::string::npos) << text;
  EXPECT_NE(text.find("cos("), std::string::npos) << text;
  EXPECT_NE(text.find("mul("), std::string::npos) << text;

  FakeMode fake;
  Tensor x = fake.from_real(randn({4, 3}, {.device = Device("cpu:1")}));
  x.set_requires_grad();
  Tensor w = fake.from_real(randn({2, 3}, {.device = Device("cpu:1")}));
  Tensor loss = sum(linear(x, w));
  TensorList grads = autograd::grad({loss}, {x});
  EXPECT_TRUE(grads[0].is_fake());
  EXPECT_EQ(grads[0].device(), Device("cpu:1"));
  EXPECT_EQ(grads[0].shape(), x.shape());
}

}  // namespace
}  // namespace kiln

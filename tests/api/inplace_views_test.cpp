// In-place metadata ops, resize_ and set_ (Note [In-place metadata ops]), as PyTorch.
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::expect_error;

std::vector<double> values(const Tensor& t) { return to_vector<double>(t); }

TEST(InplaceViews, EveryHandleSeesTheNewGeometry) {
  Tensor x = reshape(arange(6.0), {2, 3});
  Tensor same = x;  // another handle on the same tensor
  Tensor want = contiguous(transpose(x, 0, 1));
  t_(x);
  EXPECT_EQ(same.shape(), Dims({3, 2}));
  EXPECT_EQ(values(same), values(want));
  transpose_(x, 0, 1);
  EXPECT_EQ(x.shape(), Dims({2, 3}));
  unsqueeze_(x, 1);
  EXPECT_EQ(x.shape(), Dims({2, 1, 3}));
  squeeze_(x, 1);
  EXPECT_EQ(x.shape(), Dims({2, 3}));
  unsqueeze_(x, 0);
  squeeze_(x);
  EXPECT_EQ(x.shape(), Dims({2, 3}));
  as_strided_(x, {2, 2}, {1, 2}, 1);
  EXPECT_EQ(values(x), (std::vector<double>{1, 3, 2, 4}));
  EXPECT_EQ(x.offset(), 1);
  expect_error([&] { squeeze_(x, 5); }, ErrorKind::index, "");  // the view op's own check
}

// The history is the view op's; the gradient reaches the tensor's previous value.
TEST(InplaceViews, AutogradRecordsTheViewAndRefusesALeaf) {
  Tensor a = randn({2, 3}, {.requires_grad = true});
  Tensor x = mul(a, 1.0);
  t_(x);
  EXPECT_EQ(x.grad_fn()->name(), "TransposeBackward0");
  Tensor w = randn({3, 2});
  sum(mul(x, w)).backward();
  EXPECT_EQ(values(a.grad()), values(contiguous(t(w))));
  expect_error([&] { t_(a); }, ErrorKind::value,
               "[t_] a leaf Variable that requires grad (f32[2, 3]@cpu:0) is being used in an "
               "in-place operation.");
  {
    autograd::NoGradGuard no_grad;  // as PyTorch: allowed without grad mode
    Tensor b = randn({2, 3}, {.requires_grad = true});
    t_(b);
    EXPECT_EQ(b.shape(), Dims({3, 2}));
  }
}

// Fake tensors change shape alike; a trace records the view node and reads it for the
// tensor afterwards.
TEST(InplaceViews, FakeAndTraced) {
  {
    FakeMode fake;
    Tensor f = fake.from_real(randn({4, 5}, {.device = Device("cpu:1")}));
    transpose_(f, 0, 1);
    EXPECT_TRUE(f.is_fake());
    EXPECT_EQ(f.shape(), Dims({5, 4}));
  }

  auto fn = [](const TensorList& in) {
    Tensor x = mul(in[0], 2.0);
    t_(x);
    unsqueeze_(x, 0);
    return TensorList{add(x, 1.0)};
  };
  Tensor in = randn({2, 3});
  ir::Graph g = make_fx(fn, {in});
  std::string text = g.str();
  EXPECT_NE(text.find("transpose("), std::string::npos) << text;
  EXPECT_NE(text.find("unsqueeze("), std::string::npos) << text;
  Tensor traced = ir::interpret(g, {in})[0];
  EXPECT_EQ(traced.shape(), Dims({1, 3, 2}));
  EXPECT_EQ(values(traced), values(fn({in})[0]));
}

// Captured: an intermediate's metadata op is an ordinary view in the program; an
// input's is refused with the way out (its replay on later inputs is not built).
TEST(InplaceViews, CaptureKeepsIntermediatesAndRefusesInputs) {
  auto inner = [](const TensorList& in) {
    Tensor x = mul(in[0], 2.0);
    transpose_(x, 0, 1);
    return TensorList{add(x, 1.0)};
  };
  Tensor in = randn({2, 3});
  passes::CapturedProgram p = passes::capture(inner, {in});
  Tensor got = ir::interpret(p.graph, {in})[0];
  EXPECT_EQ(values(got), values(inner({in})[0]));
  auto on_input = [](const TensorList& in) {
    Tensor x = in[0];
    t_(x);
    return TensorList{add(x, 1.0)};
  };
  expect_error(
      [&] {
        passes::capture(on_input, {randn({2, 3})}, {.input_names = {"x"}});
      },
      ErrorKind::unsupported,
      "[capture] input x ([2, 3]) had its shape, strides or offset changed in place (now [3, 2]");
  // An exported program refuses it too, as torch.export does.
  struct Turns : nn::Module {
    TensorList forward(const TensorList& in) override {
      Tensor x = in[0];
      t_(x);
      return {add(x, 1.0)};
    }
  } turns;
  expect_error(
      [&] {
        export_program(turns, {randn({2, 3})});
      },
      ErrorKind::unsupported,
      "an exported program cannot replay that on its inputs (as torch.export refuses it");
}

// (J2) capture_joint replays an input's metadata mutation as AOTAutograd's runtime
// epilogue does: the forward returns the input's new view, and run_joint gives the input
// that shape, strides and offset (as_strided_), then writes any new data into it. The
// caller's tensor ends as eager leaves it, at every geometry given.
TEST(InplaceViews, JointCapturesReplayAnInputsNewGeometry) {
  auto fn = [](const TensorList& in) {
    Tensor x = in[0], y = in[1], w = in[2];
    t_(x);             // metadata only
    unsqueeze_(y, 0);  // metadata, then data through the new geometry
    mul_(y, 2.0);
    return TensorList{sum(mul(matmul(x, w), sum(y)))};
  };
  auto make = [] {
    return TensorList{randn({2, 3}), randn({4}), randn({2, 5}, {.requires_grad = true})};
  };
  TensorList probe = make();
  passes::JointProgram p = passes::capture_joint(fn, probe);
  EXPECT_EQ(probe[0].shape(), Dims({2, 3}));  // the capture leaves its examples alone
  EXPECT_TRUE(p.inputs[0].metadata_mutated);
  EXPECT_FALSE(p.inputs[0].data_mutated);
  EXPECT_TRUE(p.inputs[1].metadata_mutated);
  EXPECT_TRUE(p.inputs[1].data_mutated);
  EXPECT_FALSE(p.inputs[2].metadata_mutated);

  for (int round = 0; round < 2; ++round) {
    TensorList eager = make(), run = {clone(eager[0]), clone(eager[1]), eager[2].detach()};
    if (round == 1) {  // a non-contiguous input: the replay follows its own strides
      Tensor wide = randn({3, 2});
      eager[0] = transpose(wide, 0, 1);
      run[0] = transpose(clone(wide), 0, 1);
    }
    run[2].set_requires_grad();
    Tensor eager_x = eager[0], eager_y = eager[1];
    Tensor loss = fn(eager)[0];
    loss.backward();
    passes::JointRun got = passes::run_joint(p, run);
    EXPECT_TRUE(testing::all_close(got.outputs[0], values(loss))) << round;
    EXPECT_TRUE(testing::all_close(got.grads[2], values(eager[2].grad()))) << round;
    for (int i : {0, 1}) {
      const Tensor &want = i == 0 ? eager_x : eager_y, &have = run[static_cast<size_t>(i)];
      EXPECT_EQ(have.shape(), want.shape()) << round << " input " << i;
      EXPECT_EQ(have.strides(), want.strides()) << round << " input " << i;
      EXPECT_EQ(have.offset(), want.offset()) << round << " input " << i;
      EXPECT_EQ(values(have), values(want)) << round << " input " << i;
    }
  }
  // A leaf that requires grad may not change its geometry, in a capture as in eager.
  expect_error(
      [&] {
        passes::capture_joint(
            [](const TensorList& in) {
              Tensor x = in[0];
              t_(x);
              return TensorList{sum(x)};
            },
            {randn({2, 3}, {.requires_grad = true})});
      },
      ErrorKind::value, "a leaf Variable that requires grad");
}

TEST(InplaceViews, ResizeGrowsTheStorageInPlace) {
  Tensor x = arange(4.0);
  Tensor view = x;                            // sees the resize: same impl
  Tensor other = as_strided(x, {2}, {1}, 0);  // another tensor over the same storage
  resize_(x, {2, 3});
  EXPECT_EQ(view.shape(), Dims({2, 3}));
  EXPECT_TRUE(view.is_contiguous());
  std::vector<double> v = values(x);
  EXPECT_EQ(std::vector<double>(v.begin(), v.begin() + 4), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(values(other),
            (std::vector<double>{0, 1}));  // the grown memory, the old elements first
  fill_(x, 7.0);
  EXPECT_EQ(values(other), (std::vector<double>{7, 7}));
  resize_(x, {2});  // smaller: the storage stays
  EXPECT_EQ(values(x), (std::vector<double>{7, 7}));
  Tensor g = randn({2}, {.requires_grad = true});
  expect_error([&] { resize_(g, {4}); }, ErrorKind::value,
               "[resize_] cannot resize variables that require grad");
  expect_error([&] { resize_(x, {-1}); }, ErrorKind::shape, "negative dimension");
  expect_error(
      [&] {
        resize_(x, {int64_t{1} << 40, int64_t{1} << 40});
      },
      ErrorKind::shape, "do not fit in memory");
  expect_error([&] { resize_(x, {int64_t{1} << 62}); }, ErrorKind::shape, "do not fit in memory");
  expect_error(
      [&] {
        make_fx(
            [](const TensorList& in) {
              Tensor y = mul(in[0], 1.0);
              resize_(y, {9});
              return TensorList{y};
            },
            {randn({3})});
      },
      ErrorKind::unsupported, "[resize_] is not supported while tracing");
}

TEST(InplaceViews, SetViewsWhatTheSourceViews) {
  Tensor src = reshape(arange(6.0), {3, 2});
  Tensor x = zeros({1});
  set_(x, transpose(src, 0, 1));
  EXPECT_EQ(x.shape(), Dims({2, 3}));
  EXPECT_EQ(values(x), values(contiguous(transpose(src, 0, 1))));
  fill_(x, 1.0);  // one storage
  EXPECT_EQ(values(src), std::vector<double>(6, 1.0));
  expect_error([&] { set_(x, zeros({2}, {.dtype = DType::i64})); }, ErrorKind::dtype,
               "[set_] Could not set tensor");
}

}  // namespace
}  // namespace kiln

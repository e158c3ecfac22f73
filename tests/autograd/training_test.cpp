// Eager training: losses, optimizers, modules under autograd, against PyTorch's numbers
// (tests/golden/train_golden.safetensors, written by tools/golden/make_train_golden.py)
// and against formulas computed here in double.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::expect_error;

std::vector<double> values(const Tensor& t) { return to_vector<double>(t); }

// ---- losses -----------------------------------------------------------------------

TEST(Loss, MseLossValueAndGradient) {
  Tensor x = tensor({1, 2, 3, 4}, {2, 2}, {.requires_grad = true});
  Tensor y = tensor({0, 2, 5, 4}, {2, 2});
  Tensor loss = nn::mse_loss(x, y);
  EXPECT_NEAR(item<double>(loss), (1 + 0 + 4 + 0) / 4.0, 1e-6);
  loss.backward();
  EXPECT_TRUE(all_close(x.grad(), {0.5, 0, -1, 0}));  // 2 (x - y) / n
  EXPECT_NEAR(item<double>(nn::mse_loss(x, y, "sum")), 5.0, 1e-6);
  EXPECT_EQ(nn::mse_loss(x, y, "none").shape(), x.shape());
  expect_error([&] { nn::mse_loss(x, tensor({1, 2})); }, ErrorKind::shape, "[mse_loss]");
  expect_error([&] { nn::mse_loss(x, y, "avg"); }, ErrorKind::value, "reduction must be");
}

TEST(Loss, CrossEntropyMatchesLogSoftmaxAndIgnoresIndex) {
  Tensor logits = tensor({1, 2, 3, 1, 0, -1, 0.5, 0.5, 0.5}, {3, 3}, {.requires_grad = true});
  Tensor target = from_vector<int64_t>({2, 0, 1});
  Tensor loss = nn::cross_entropy(logits, target);
  // -log softmax picked, by hand.
  auto lse = [](double a, double b, double c) {
    return std::log(std::exp(a) + std::exp(b) + std::exp(c));
  };
  double want = ((lse(1, 2, 3) - 3) + (lse(1, 0, -1) - 1) + (lse(.5, .5, .5) - .5)) / 3;
  EXPECT_NEAR(item<double>(loss), want, 1e-6);
  loss.backward();
  // d/dlogits = (softmax - onehot) / N; rows sum to zero.
  std::vector<double> g = values(logits.grad());
  for (int r = 0; r < 3; ++r) EXPECT_NEAR(g[r * 3] + g[r * 3 + 1] + g[r * 3 + 2], 0, 1e-6);
  EXPECT_NEAR(g[8 - 1], (1.0 / 3 - 1) / 3, 1e-6);  // row 2, class 1

  Tensor ignored = from_vector<int64_t>({2, -100, 1});
  double two = ((lse(1, 2, 3) - 3) + (lse(.5, .5, .5) - .5)) / 2;
  EXPECT_NEAR(item<double>(nn::cross_entropy(logits, ignored)), two, 1e-6);
  EXPECT_TRUE(all_close(nn::cross_entropy(logits, ignored, "none"),
                        {lse(1, 2, 3) - 3, 0, lse(.5, .5, .5) - .5}, 1e-5, 1e-6));
  // Float targets are class probabilities, shaped like the input (as PyTorch).
  expect_error(
      [&] {
        nn::cross_entropy(logits, tensor({1, 2, 0}));
      },
      ErrorKind::shape, "class-probability targets must be shaped like the input");
  expect_error(
      [&] {
        nn::nll_loss(logits, tensor({1, 2, 0}));
      },
      ErrorKind::dtype, "class indices of an integer dtype");
  expect_error(
      [&] {
        nn::cross_entropy(logits, from_vector<int64_t>({1, 2}));
      },
      ErrorKind::shape, "expects input [N, C, *] with target [N, *]");
  expect_error(
      [&] {
        nn::cross_entropy(logits, from_vector<int64_t>({1, 3, 0}));
      },
      ErrorKind::index, "out of bounds");
}

// ---- optimizers against their formulas, in double ------------------------------------

TEST(Optim, SgdMomentumNesterovWeightDecay) {
  for (bool nesterov : {false, true}) {
    Tensor p = tensor({1.0, -2.0}, {}, {.dtype = f64, .requires_grad = true});
    nn::SGD opt({p}, {.lr = 0.1,
                      .momentum = 0.9,
                      .dampening = nesterov ? 0 : 0.25,
                      .weight_decay = 0.01,
                      .nesterov = nesterov});
    std::vector<double> w = {1.0, -2.0}, buf = {0, 0};
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      sum(p * p * p).backward();  // g = 3 p^2
      opt.step();
      for (int i = 0; i < 2; ++i) {
        double d = 3 * w[i] * w[i] + 0.01 * w[i];
        buf[i] = step == 0 ? d : 0.9 * buf[i] + (1 - (nesterov ? 0 : 0.25)) * d;
        w[i] -= 0.1 * (nesterov ? d + 0.9 * buf[i] : buf[i]);
      }
      EXPECT_TRUE(all_close(p, w, 1e-12, 1e-12)) << "step " << step;
    }
    EXPECT_FALSE(p.requires_grad() && !p.is_leaf());  // updates were not recorded
  }
}

TEST(Optim, AdamWFormula) {
  Tensor p = tensor({0.5, -1.5, 3.0}, {}, {.dtype = f64, .requires_grad = true});
  nn::AdamW opt({p}, {.lr = 0.01, .weight_decay = 0.1});
  std::vector<double> w = {0.5, -1.5, 3.0}, m(3, 0), v(3, 0);
  for (int t = 1; t <= 3; ++t) {
    opt.zero_grad();
    sum(sin(p)).backward();  // g = cos p
    opt.step();
    for (int i = 0; i < 3; ++i) {
      double g = std::cos(w[i]);
      w[i] *= 1 - 0.01 * 0.1;
      m[i] = 0.9 * m[i] + 0.1 * g;
      v[i] = 0.999 * v[i] + 0.001 * g * g;
      double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(0.999, t)) + 1e-8;
      w[i] -= 0.01 / (1 - std::pow(0.9, t)) * m[i] / denom;
    }
    EXPECT_TRUE(all_close(p, w, 1e-12, 1e-12)) << "step " << t;
  }
  nn::OptimizerState state = opt.state_dict();
  ASSERT_EQ(state.size(), 3u);
  EXPECT_EQ(state[0].first, "state.0.step");
  EXPECT_EQ(item<double>(state[0].second), 3.0);
}

TEST(Optim, StateDictRoundTripContinuesTraining) {
  auto make = [] { return tensor({1.0, 2.0}, {}, {.requires_grad = true}); };
  auto loss = [](const Tensor& p) { return sum(p * p); };
  Tensor a = make(), b = make();
  nn::AdamW oa({a}, {}), ob({b}, {});
  for (int i = 0; i < 2; ++i) {
    oa.zero_grad();
    loss(a).backward();
    oa.step();
  }
  {
    autograd::NoGradGuard g;
    copy_(b, a);
  }
  ob.load_state_dict(oa.state_dict());
  for (auto* o : {&oa, &ob}) {
    Tensor& p = o == &oa ? a : b;
    o->zero_grad();
    loss(p).backward();
    o->step();
  }
  EXPECT_TRUE(all_close(b, values(a), 0, 0));
  expect_error(
      [&] {
        ob.load_state_dict({{"state.0.bogus", zeros({2})}});
      },
      ErrorKind::value, "unexpected state key 'state.0.bogus'");
  expect_error(
      [&] {
        ob.load_state_dict({{"state.0.exp_avg", zeros({3})}});
      },
      ErrorKind::shape, "has shape [3], expected [2]");
  expect_error([] { nn::SGD({zeros({2})}, {}); }, ErrorKind::value,
               "must be a leaf that requires grad");
}

// ---- modules ---------------------------------------------------------------------------

// Forward hooks, as PyTorch's: pre hooks replace the inputs, hooks the outputs, in
// registration order; forward sees what the pre hooks made.
TEST(Modules, ForwardHooksReplaceInputsAndOutputs) {
  nn::Linear lin(3, 2);
  Tensor x = randn({4, 3});
  Tensor plain = lin(TensorList{mul(x, 2.0)})[0];
  std::vector<std::string> order;
  lin.register_forward_pre_hook([&](nn::Module&, const TensorList& in) {
    order.push_back("pre");
    return TensorList{mul(in[0], 2.0)};
  });
  lin.register_forward_hook([&](nn::Module&, const TensorList& in, const TensorList& out) {
    order.push_back("post");
    EXPECT_EQ(in[0].shape(), x.shape());
    return TensorList{add(out[0], 1.0)};
  });
  lin.register_forward_hook([&](nn::Module&, const TensorList&, const TensorList& out) {
    order.push_back("post2");
    return TensorList{mul(out[0], 3.0)};
  });
  Tensor got = lin(TensorList{x})[0];
  EXPECT_TRUE(all_close(got, to_vector<double>(mul(add(plain, 1.0), 3.0)), 1e-6, 1e-6));
  EXPECT_EQ(order, (std::vector<std::string>{"pre", "post", "post2"}));
}

TEST(Modules, ParametersRequireGradAndZeroGradResets) {
  nn::Linear lin(3, 2);
  for (auto& [name, p] : lin.named_parameters()) {
    EXPECT_TRUE(p.requires_grad()) << name;
    EXPECT_TRUE(p.is_leaf()) << name;
  }
  sum(lin(ones({4, 3}))).backward();
  EXPECT_TRUE(lin.weight.grad().defined());
  lin.zero_grad();
  EXPECT_FALSE(lin.weight.grad().defined());
  lin.to(Device("cpu:1"));  // moved parameters are leaves that still require grad
  EXPECT_TRUE(lin.weight.is_leaf());
  EXPECT_TRUE(lin.weight.requires_grad());
  EXPECT_EQ(lin.weight.device(), Device("cpu:1"));
}

// The PyTorch-named modules of kiln/nn/modules.h apply their functions with the arguments
// given at construction, see the training flag, and carry PyTorch's parameter names.
TEST(Modules, PyTorchNamedModulesApplyTheirFunctions) {
  manual_seed(9);
  Tensor x = randn({2, 3, 4, 4});
  auto same = [](const Tensor& a, const Tensor& b) { return all_close(a, values(b), 0, 0); };
  EXPECT_TRUE(same(nn::LeakyReLU(0.2)(x), nn::leaky_relu(x, 0.2)));
  EXPECT_TRUE(same(nn::Softplus(2.0, 5.0)(x), nn::softplus(x, 2.0, 5.0)));
  EXPECT_TRUE(same(nn::Threshold(0.1, -1.0)(x), nn::threshold(x, 0.1, -1.0)));
  EXPECT_TRUE(same(nn::MaxPool3d({2})(unsqueeze(x, 0)), nn::max_pool3d(unsqueeze(x, 0), {2})));
  EXPECT_TRUE(same(nn::ReflectionPad({1, 2, 0, 1})(x), nn::pad(x, {1, 2, 0, 1}, "reflect")));
  EXPECT_TRUE(same(nn::ChannelShuffle(3)(x), nn::channel_shuffle(x, 3)));
  Tensor target = randn({2, 3, 4, 4});
  EXPECT_TRUE(
      same(nn::HuberLoss("sum", 0.5)({x, target})[0], nn::huber_loss(x, target, "sum", 0.5)));
  Tensor labels = from_vector<int64_t>({2, 0});
  Tensor logits = randn({2, 3});
  EXPECT_TRUE(same(nn::CrossEntropyLoss({}, -100, "mean", 0.1)({logits, labels})[0],
                   nn::cross_entropy(logits, labels, "mean", -100, 0.1)));
  // The training flag: channel dropout acts in training only.
  nn::Dropout2d drop(0.5);
  drop.eval();
  EXPECT_TRUE(same(drop(x), x));
  drop.train();
  EXPECT_FALSE(all_close(drop(x), values(x), 0, 0));
  // Parameters under PyTorch's names and shapes, and they learn.
  nn::Bilinear bil(3, 4, 5);
  std::vector<std::string> names;
  for (auto& [name, p] : bil.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(bil.weight.shape().vec(), (IntList{5, 3, 4}));
  sum(bil({randn({2, 3}), randn({2, 4})})[0]).backward();
  EXPECT_TRUE(bil.weight.grad().defined());
  nn::PReLU prelu(3);
  EXPECT_TRUE(all_close(prelu.weight, {0.25, 0.25, 0.25}));
  nn::Conv3d conv(3, 2, {2}, {1}, {1});
  EXPECT_EQ(conv.weight.shape().vec(), (IntList{2, 3, 2, 2, 2}));
  EXPECT_EQ(conv(unsqueeze(x, 2)).shape().vec(), (IntList{2, 2, 2, 5, 5}));
}

TEST(Modules, TrainAndEvalModes) {
  nn::Dropout drop(0.5);
  Tensor x = ones({1000});
  drop.eval();
  EXPECT_TRUE(all_close(drop(x), std::vector<double>(1000, 1.0)));
  drop.train();
  std::vector<double> y = values(drop(x));
  int zeros_seen = 0;
  for (double v : y) zeros_seen += v == 0;
  EXPECT_GT(zeros_seen, 350);
  EXPECT_LT(zeros_seen, 650);

  nn::BatchNorm1d bn(3);
  Tensor in = randn({8, 3}, {.requires_grad = true});
  Tensor out = bn(in);
  EXPECT_FALSE(bn.running_mean.requires_grad());  // statistics are not differentiated
  EXPECT_FALSE(all_close(bn.running_mean, {0, 0, 0}));
  sum(out * out).backward();
  EXPECT_TRUE(bn.weight.grad().defined());
  EXPECT_TRUE(in.grad().defined());
  bn.eval();
  Tensor before = clone(bn.running_mean);
  bn(in);
  EXPECT_TRUE(all_close(bn.running_mean, values(before), 0, 0));
}

// ---- against PyTorch ---------------------------------------------------------------------

struct Golden {
  std::map<std::string, Tensor> t;
  Golden() {
    for (auto& [k, v] :
         load_safetensors(std::string(KILN_TEST_DATA) + "/golden/train_golden.safetensors"))
      t[k] = v;
  }
  const Tensor& at(const std::string& k) const {
    auto it = t.find(k);
    if (it == t.end()) throw Error(ErrorKind::value, "golden file has no " + k);
    return it->second;
  }
  nn::StateDict params(const std::string& model, const std::string& tag) const {
    nn::StateDict out;
    std::string prefix = model + "." + tag + ".";
    for (auto& [k, v] : t)
      if (k.rfind(prefix, 0) == 0) out.emplace_back(k.substr(prefix.size()), v);
    return out;
  }
};

struct Case {
  std::shared_ptr<nn::Module> model;
  std::function<Tensor(const Tensor& out, const Tensor& target)> loss;
};

Case make_case(const std::string& name) {
  if (name == "mlp") {
    std::vector<std::shared_ptr<nn::Module>> layers;
    for (int i = 0; i < 3; ++i) {
      layers.push_back(std::make_shared<nn::Linear>(16, 16));
      layers.push_back(std::make_shared<nn::ReLU>());
    }
    return {std::make_shared<nn::Sequential>(layers),
            [](const Tensor& o, const Tensor& t) { return nn::mse_loss(o, t); }};
  }
  if (name == "block")
    return {std::make_shared<nn::BenchBlock>(16, 2, 32),
            [](const Tensor& o, const Tensor& t) { return nn::mse_loss(o, t); }};
  return {std::make_shared<nn::GPT>(
              nn::GPTConfig{.vocab = 32, .context = 8, .layers = 2, .heads = 2, .width = 16}),
          [](const Tensor& o, const Tensor& t) {
            return nn::cross_entropy(reshape(o, {-1, 32}), reshape(t, {-1}));
          }};
}

// Gradients and updated parameters within 1e-5 relative of PyTorch's (f32 sums in
// another order: absolute slack for elements near zero). With `grads`, elements whose
// first gradient is at rounding-noise level (below 1e-4 of the tensor's largest) in
// either library are skipped: AdamW divides a gradient by its own magnitude, so it turns
// noise that differs between any two implementations (or two builds: -march=native or
// not) into a full step. The attention key bias is the clearest case: its exact gradient
// is 0 (softmax ignores a constant shift) and both libraries compute ~1e-10 of either
// sign, or 0 at one step and noise at the next (an exact 0 on both sides at the first
// step proves nothing about the second, so zeros are skipped too).
void expect_params(nn::Module& m, const nn::StateDict& want, const std::string& what,
                   const nn::StateDict* grads = nullptr,
                   const std::map<std::string, Tensor>* ours = nullptr) {
  std::map<std::string, Tensor> got, noise;
  for (auto& [k, v] : m.named_parameters()) got[k] = v;
  if (grads)
    for (auto& [k, g] : *grads) {
      double largest = item<double>(amax(abs(g)));
      noise[k] = logical_not(mul(abs(g) >= 1e-4 * largest, abs(ours->at(k)) >= 1e-4 * largest));
    }
  ASSERT_EQ(got.size(), want.size()) << what;
  for (auto& [k, v] : want) {
    ASSERT_TRUE(got.count(k)) << what << " " << k;
    Tensor have = got[k].detach(), expected = v;
    if (noise.count(k)) {
      have = masked_fill(have, noise[k], 0);
      expected = masked_fill(expected, noise[k], 0);
    }
    EXPECT_TRUE(all_close(have, values(expected), 1e-5, 2e-6)) << what << " " << k;
  }
}

class TorchGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchGolden, GradientsAndOptimizerStepsMatchPyTorch) {
  static const Golden golden;
  const std::string name = GetParam();
  Case c = make_case(name);
  nn::StateDict init = golden.params(name, "param");
  c.model->load_state_dict(init);
  const Tensor &x = golden.at(name + ".input"), &target = golden.at(name + ".target");

  Tensor loss = c.loss((*c.model)(x), target);
  EXPECT_TRUE(all_close(loss, values(golden.at(name + ".loss")), 1e-5, 1e-6));
  loss.backward();
  std::map<std::string, Tensor> grads;
  for (auto& [k, p] : c.model->named_parameters()) grads[k] = p.grad();
  for (auto& [k, want] : golden.params(name, "grad")) {
    ASSERT_TRUE(grads[k].defined()) << k;
    EXPECT_TRUE(all_close(grads[k], values(want), 1e-5, 2e-6)) << "grad " << k;
  }

  auto train = [&](auto make_opt, int steps) {
    c.model->load_state_dict(init);
    TensorList params;
    for (auto& [k, p] : c.model->named_parameters()) params.push_back(p);
    auto opt = make_opt(params);
    for (int s = 0; s < steps; ++s) {
      opt.zero_grad();
      c.loss((*c.model)(x), target).backward();
      opt.step();
    }
  };
  auto sgd = [](TensorList p) {
    return nn::SGD(p, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  };
  auto adamw = [](TensorList p) { return nn::AdamW(p, {.lr = 1e-2, .weight_decay = 0.1}); };
  train(sgd, 1);
  expect_params(*c.model, golden.params(name, "sgd1"), "after 1 SGD step");
  train(sgd, 2);
  expect_params(*c.model, golden.params(name, "sgd2"), "after 2 SGD steps");
  train(adamw, 2);
  nn::StateDict golden_grads = golden.params(name, "grad");
  expect_params(*c.model, golden.params(name, "adamw2"), "after 2 AdamW steps", &golden_grads,
                &grads);
}

INSTANTIATE_TEST_SUITE_P(Models, TorchGolden, ::testing::Values("mlp", "block", "gpt"));

// ---- multi-device and a real training run ---------------------------------------------------

// First half on cpu:1, `to`, second half on cpu:2: trains like the same model on one
// device (same gradients and updates).
TEST(Training, ModelSplitAcrossTwoDevicesEqualsOneDevice) {
  Device d1("cpu:1"), d2("cpu:2");
  manual_seed(3);
  nn::Linear a1(8, 16, true, d1), b1(16, 4, true, d1);
  nn::Linear a2(8, 16, true, d1), b2(16, 4, true, d2);
  a2.load_state_dict(a1.state_dict());
  b2.load_state_dict(b1.state_dict());  // copies across devices
  Tensor x = randn({5, 8}, {.device = d1}), y = randn({5, 4}, {.device = d1});
  TensorList one{a1.weight, *a1.bias, b1.weight, *b1.bias};
  TensorList two{a2.weight, *a2.bias, b2.weight, *b2.bias};
  nn::SGD o1(one, {.lr = 0.05, .momentum = 0.9}), o2(two, {.lr = 0.05, .momentum = 0.9});
  for (int step = 0; step < 3; ++step) {
    o1.zero_grad();
    o2.zero_grad();
    nn::mse_loss(b1(relu(a1(x))), y).backward();
    Tensor h = to(relu(a2(x)), d2);
    nn::mse_loss(b2(h), to(y, d2)).backward();
    o1.step();
    o2.step();
  }
  EXPECT_EQ(b2.weight.grad().device(), d2);
  EXPECT_EQ(a2.weight.grad().device(), d1);
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_TRUE(all_close(to(two[i].grad(), d1), values(one[i].grad()), 1e-6, 1e-7)) << i;
    EXPECT_TRUE(all_close(to(two[i], d1), values(one[i]), 1e-6, 1e-7)) << i;
  }
}

// The reference GPT learns to reverse 6 tokens out of 8 (a task it cannot solve without
// attention): mean cross-entropy falls from ~log(8) to below 0.2 within 150 AdamW steps.
TEST(Training, GptLearnsToReverseTokens) {
  manual_seed(0);
  const int64_t V = 8, T = 6, B = 16;
  nn::GPT model({.vocab = V, .context = 2 * T, .layers = 2, .heads = 2, .width = 32});
  TensorList params;
  for (auto& [k, p] : model.named_parameters()) params.push_back(p);
  nn::AdamW opt(params, {.lr = 3e-3, .weight_decay = 0.0});
  double first = 0, last = 0;
  for (int step = 0; step < 150; ++step) {
    // [a b c ... | f e d ...]: predict the reversed half from the first half.
    Tensor src = to(mul(rand({B, T}), static_cast<double>(V)), i64);
    Tensor rev = index_select(src, 1, arange(T - 1, -1, -1));
    Tensor seq = cat({src, rev}, 1);
    Tensor in = slice(seq, 1, 0, 2 * T - 1), want = slice(seq, 1, 1, 2 * T);
    Tensor logits = model(in);
    Tensor loss = nn::cross_entropy(reshape(slice(logits, 1, T - 1, 2 * T - 1), {-1, V}),
                                    reshape(contiguous(slice(want, 1, T - 1, 2 * T - 1)), {-1}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = item<double>(loss);
  }
  EXPECT_GT(first, 1.5);
  EXPECT_LT(last, 0.2) << "loss went from " << first << " to " << last;
}

}  // namespace
}  // namespace kiln

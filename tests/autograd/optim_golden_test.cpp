// Optimizers and learning-rate schedulers against PyTorch's own trajectories
// (tests/golden/torch_optim.json, written by tools/golden/make_optim_golden.py): five
// steps of each optimizer on one f64 parameter, the state it ends with, and twelve
// epochs of each schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using json = nlohmann::json;
using testing::all_close;
using testing::expect_error;

const json& golden() {
  static const json j = [] {
    std::ifstream in(std::string(KILN_TEST_DATA) + "/golden/torch_optim.json");
    EXPECT_TRUE(in.good()) << "missing tests/golden/torch_optim.json";
    return json::parse(in);
  }();
  return j;
}

template <typename T>
T get(const json& o, const char* key, T fallback) {
  return o.contains(key) ? o[key].get<T>() : fallback;
}

std::unique_ptr<nn::Optimizer> make(const std::string& kind, const json& o, Tensor p) {
  std::pair<double, double> betas{0.9, 0.999};
  if (o.contains("betas")) betas = {o["betas"][0].get<double>(), o["betas"][1].get<double>()};
  if (kind == "SGD")
    return std::make_unique<nn::SGD>(TensorList{p},
                                     nn::SGDOptions{.lr = o["lr"],
                                                    .momentum = get(o, "momentum", 0.0),
                                                    .weight_decay = get(o, "weight_decay", 0.0),
                                                    .nesterov = get(o, "nesterov", false)});
  if (kind == "Adam")
    return std::make_unique<nn::Adam>(TensorList{p},
                                      nn::AdamOptions{.lr = o["lr"],
                                                      .beta1 = betas.first,
                                                      .beta2 = betas.second,
                                                      .eps = get(o, "eps", 1e-8),
                                                      .weight_decay = get(o, "weight_decay", 0.0),
                                                      .amsgrad = get(o, "amsgrad", false),
                                                      .maximize = get(o, "maximize", false)});
  if (kind == "AdamW")
    return std::make_unique<nn::AdamW>(
        TensorList{p}, nn::AdamWOptions{.lr = o["lr"],
                                        .beta1 = betas.first,
                                        .beta2 = betas.second,
                                        .eps = get(o, "eps", 1e-8),
                                        .weight_decay = get(o, "weight_decay", 1e-2),
                                        .amsgrad = get(o, "amsgrad", false),
                                        .maximize = get(o, "maximize", false)});
  if (kind == "RMSprop")
    return std::make_unique<nn::RMSprop>(
        TensorList{p}, nn::RMSpropOptions{.lr = o["lr"],
                                          .alpha = get(o, "alpha", 0.99),
                                          .eps = get(o, "eps", 1e-8),
                                          .weight_decay = get(o, "weight_decay", 0.0),
                                          .momentum = get(o, "momentum", 0.0),
                                          .centered = get(o, "centered", false),
                                          .maximize = get(o, "maximize", false)});
  if (kind == "Adagrad")
    return std::make_unique<nn::Adagrad>(
        TensorList{p},
        nn::AdagradOptions{.lr = o["lr"],
                           .lr_decay = get(o, "lr_decay", 0.0),
                           .weight_decay = get(o, "weight_decay", 0.0),
                           .initial_accumulator_value = get(o, "initial_accumulator_value", 0.0),
                           .eps = get(o, "eps", 1e-10),
                           .maximize = get(o, "maximize", false)});
  ADD_FAILURE() << "unknown optimizer " << kind;
  return nullptr;
}

Tensor loss_of(const Tensor& p) { return add(sum(mul(sin(p), p)), mul(sum(mul(p, p)), 0.5)); }

TEST(OptimGolden, EveryOptimizerFollowsPyTorchsTrajectory) {
  const json& g = golden();
  for (const json& c : g["optimizers"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    Tensor p = from_vector(g["start"].get<std::vector<double>>(), {},
                           {.dtype = f64, .requires_grad = true});
    auto opt = make(c["optimizer"], c["options"], p);
    ASSERT_TRUE(opt);
    for (size_t s = 0; s < c["params"].size(); ++s) {
      opt->zero_grad();
      loss_of(p).backward();
      opt->step();
      EXPECT_TRUE(all_close(p, c["params"][s].get<std::vector<double>>(), 1e-12, 1e-13))
          << "step " << s + 1;
    }
    // The state PyTorch holds, by name (SGD without momentum: none).
    nn::OptimizerState state = opt->state_dict();
    for (auto& [name, want] : c["state"].items()) {
      if (want.is_null()) continue;
      auto it = std::find_if(state.begin(), state.end(),
                             [&](const auto& kv) { return kv.first == "state.0." + name; });
      ASSERT_NE(it, state.end()) << "no state " << name;
      std::vector<double> expected =
          want.is_array() ? want.get<std::vector<double>>() : std::vector{want.get<double>()};
      EXPECT_TRUE(all_close(it->second, expected, 1e-12, 1e-13)) << name;
    }
    EXPECT_EQ(state.size(), std::count_if(c["state"].begin(), c["state"].end(),
                                          [](const json& v) { return !v.is_null(); }));
  }
}

TEST(OptimGolden, SchedulersFollowPyTorchsLearningRates) {
  for (const json& c : golden()["schedulers"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    Tensor p = tensor({1.0}, {}, {.requires_grad = true});
    nn::SGD opt({p}, {.lr = c["base_lr"]});
    const json& o = c["options"];
    std::unique_ptr<nn::LRScheduler> s;
    if (name == "step") s = std::make_unique<nn::StepLR>(opt, o["step_size"], o["gamma"]);
    if (name == "multistep")
      s = std::make_unique<nn::MultiStepLR>(opt, o["milestones"], o["gamma"]);
    if (name == "exponential") s = std::make_unique<nn::ExponentialLR>(opt, o["gamma"]);
    if (name == "cosine")
      s = std::make_unique<nn::CosineAnnealingLR>(opt, o["t_max"], o["eta_min"]);
    if (name.starts_with("linear"))
      s = std::make_unique<nn::LinearLR>(opt, o["start_factor"], o["end_factor"], o["total_iters"]);
    if (name == "lambda")
      s = std::make_unique<nn::LambdaLR>(opt, [](int64_t e) { return 1.0 / double(1 + e); });
    ASSERT_TRUE(s);
    std::vector<double> lrs = c["lrs"];
    for (size_t e = 0; e < lrs.size(); ++e) {
      if (e > 0) s->step();
      EXPECT_NEAR(opt.options.lr, lrs[e], 1e-15) << "epoch " << e;
      EXPECT_EQ(s->last_lr(), opt.options.lr);
      EXPECT_EQ(s->last_epoch(), static_cast<int64_t>(e));
    }
  }
}

TEST(OptimGolden, ScheduledRateIsTheOneTheNextStepUses) {
  Tensor p = tensor({1.0}, {}, {.dtype = f64, .requires_grad = true});
  nn::Adagrad opt({p}, {.lr = 0.5});
  nn::StepLR sched(opt, 1, 0.5);
  for (int e = 0; e < 3; ++e) {
    double before = item<double>(p), lr = sched.last_lr();
    opt.zero_grad();
    sum(p).backward();  // g = 1: Adagrad's first update is lr * g / |g|, then lr / sqrt(t)
    opt.step();
    EXPECT_NEAR(before - item<double>(p), lr / std::sqrt(e + 1.0), 1e-9) << "epoch " << e;
    sched.step();
  }
}

TEST(OptimGolden, BadOptionsAreClearErrors) {
  Tensor p = tensor({1.0}, {}, {.requires_grad = true});
  expect_error([&] { nn::Adam({p}, {.beta2 = 1.0}); }, ErrorKind::value, "[Adam] betas");
  expect_error([&] { nn::RMSprop({p}, {.lr = -1}); }, ErrorKind::value, "[RMSprop]");
  expect_error([&] { nn::Adagrad({p}, {.lr_decay = -0.1}); }, ErrorKind::value, "[Adagrad]");
  nn::SGD sgd({p}, {.lr = 0.1});
  expect_error([&] { nn::StepLR(sgd, 0); }, ErrorKind::value, "step_size");
  expect_error([&] { nn::CosineAnnealingLR(sgd, 0); }, ErrorKind::value, "t_max");
  expect_error([&] { nn::LinearLR(sgd, 0.0); }, ErrorKind::value, "start_factor");
  expect_error([&] { nn::LambdaLR(sgd, nullptr); }, ErrorKind::value, "no lambda");
}

// ---- torch.nn.utils and torch.nn.init ------------------------------------------------------

TEST(NnUtils, ClipGradNormAndValue) {
  Tensor a = tensor({1.0, 1.0}, {}, {.dtype = f64, .requires_grad = true});
  Tensor b = tensor({1.0}, {}, {.dtype = f64, .requires_grad = true});
  Tensor c = tensor({1.0}, {}, {.dtype = f64, .requires_grad = true});  // no gradient: skipped
  auto set = [&] {
    a.mutable_grad() = tensor({3.0, 4.0}, {}, {.dtype = f64});
    b.mutable_grad() = tensor({12.0}, {}, {.dtype = f64});
  };
  set();
  Tensor total = nn::clip_grad_norm_({a, b, c}, 6.5);
  EXPECT_NEAR(item<double>(total), 13.0, 1e-12);
  double coef = 6.5 / (13.0 + 1e-6);
  EXPECT_TRUE(all_close(a.grad(), {3 * coef, 4 * coef}, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(b.grad(), {12 * coef}, 1e-12, 1e-12));
  EXPECT_FALSE(c.grad().defined());
  set();
  EXPECT_NEAR(item<double>(nn::clip_grad_norm_({a, b}, 100.0)), 13.0,
              1e-12);  // below max_norm: unchanged
  EXPECT_TRUE(all_close(b.grad(), {12.0}, 0, 0));
  set();
  EXPECT_NEAR(
      item<double>(nn::clip_grad_norm_({a, b}, 6.0, std::numeric_limits<double>::infinity())), 12.0,
      1e-12);
  EXPECT_TRUE(all_close(a.grad(), {1.5, 2.0}, 1e-6, 1e-6));
  set();
  nn::clip_grad_value_({a, b}, 3.5);
  EXPECT_TRUE(all_close(a.grad(), {3.0, 3.5}, 0, 0));
  EXPECT_TRUE(all_close(b.grad(), {3.5}, 0, 0));
  b.mutable_grad() = tensor({std::numeric_limits<double>::infinity()}, {}, {.dtype = f64});
  expect_error(
      [&] {
        nn::clip_grad_norm_({a, b}, 1.0, 2.0, true);
      },
      ErrorKind::value, "non-finite");
  Tensor v = nn::parameters_to_vector({a, b});
  EXPECT_EQ(v.numel(), 3);
  nn::vector_to_parameters(tensor({5.0, 6.0, 7.0}, {}, {.dtype = f64}), {a, b});
  EXPECT_TRUE(all_close(a, {5.0, 6.0}, 0, 0));
  EXPECT_TRUE(a.is_leaf() && a.requires_grad());
}

TEST(NnInit, BoundsStatisticsAndStructure) {
  manual_seed(21);
  namespace init = nn::init;
  EXPECT_NEAR(init::calculate_gain("relu"), std::sqrt(2.0), 1e-15);
  EXPECT_NEAR(init::calculate_gain("leaky_relu", 0.2), std::sqrt(2.0 / 1.04), 1e-15);
  EXPECT_NEAR(init::calculate_gain("tanh"), 5.0 / 3.0, 1e-15);
  expect_error([] { init::calculate_gain("swish"); }, ErrorKind::value, "unsupported nonlinearity");
  Tensor w = zeros({64, 32, 3, 3}, {.requires_grad = true});
  auto [fan_in, fan_out] = init::calculate_fan_in_and_fan_out(w);
  EXPECT_EQ(fan_in, 32 * 9);
  EXPECT_EQ(fan_out, 64 * 9);
  double bound =
      std::sqrt(3.0) * std::sqrt(2.0) / std::sqrt(32.0 * 9);  // kaiming_uniform_ with relu
  init::kaiming_uniform_(w, 0.0, "fan_in", "relu");
  EXPECT_LE(item<double>(amax(abs(w))), bound);
  EXPECT_GT(item<double>(amax(abs(w))), 0.95 * bound);
  EXPECT_TRUE(w.is_leaf() && w.requires_grad());  // overwritten in place, not recorded
  init::xavier_normal_(w);
  EXPECT_NEAR(item<double>(kiln::std(w)), std::sqrt(2.0 / (32 * 9 + 64 * 9)), 0.003);
  Tensor t = zeros({20000});
  init::trunc_normal_(t, 1.0, 2.0, -1.0, 2.0);
  EXPECT_GE(item<double>(amin(t)), -1.0);
  EXPECT_LE(item<double>(amax(t)), 2.0);
  EXPECT_GT(item<double>(amax(t)), 1.99);
  Tensor q = zeros({3, 5});
  init::orthogonal_(q, 2.0);  // rows orthogonal, each of norm 2
  EXPECT_TRUE(
      all_close(matmul(q, transpose(q, 0, 1)), to_vector<double>(eye(3) * 4.0), 1e-5, 1e-5));
  Tensor e = zeros({2, 3});
  init::eye_(e);
  EXPECT_EQ(to_vector<double>(e), (std::vector<double>{1, 0, 0, 0, 1, 0}));
  expect_error(
      [] {
        Tensor v = zeros({4});
        init::xavier_uniform_(v);
      },
      ErrorKind::shape, "fewer than 2 dimensions");
}

}  // namespace
}  // namespace kiln

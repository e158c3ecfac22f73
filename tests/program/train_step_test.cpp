// A whole train step as one program (J4, J5): export, run N steps like eager training,
// save / load / retarget, the executor, and the errors.
#include <gtest/gtest.h>

#include <filesystem>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::expect_error;

std::vector<double> values(const Tensor& t) { return to_vector<double>(t); }

std::shared_ptr<nn::Module> small_mlp(Device d) {
  manual_seed(7);
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(6, 16, true, d), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 3, true, d)});
}

Tensor mse(nn::Module& m, const TensorList& b) { return nn::mse_loss(m(b[0]), b[1]); }

TensorList params_of(nn::Module& m) {
  TensorList out;
  for (auto& [k, p] : m.named_parameters()) out.push_back(p);
  return out;
}

// N steps of the program equal N eager steps on the same device, bitwise: the program
// is the eager step's own ops (the same kernels in the same order; AdamW's bias
// corrections are tensors in both).
void expect_like_eager(const OptimizerConfig& config, int steps) {
  Device d("cpu:1");
  auto eager = small_mlp(d), traced = small_mlp(d);
  Tensor x = randn({5, 6}, {.device = d}), y = randn({5, 3}, {.device = d});
  ExportedProgram p = export_train_step(*traced, mse, {x, y}, {.optimizer = config});
  std::unique_ptr<nn::Optimizer> opt = make_optimizer(config, params_of(*eager));
  for (int s = 0; s < steps; ++s) {
    opt->zero_grad();
    Tensor loss = mse(*eager, {x, y});
    loss.backward();
    opt->step();
    TensorList out = p.run({x, y});
    ASSERT_EQ(out.size(), 1u + 4u);  // loss, 4 gradients
    EXPECT_TRUE(all_close(out[0], values(loss), 0, 0)) << "step " << s;
  }
  NamedTensors trained = trained_parameters(p);
  ASSERT_EQ(trained.size(), 4u);
  auto named = eager->named_parameters();
  for (size_t i = 0; i < trained.size(); ++i) {
    EXPECT_EQ(trained[i].first, named[i].first);
    EXPECT_TRUE(all_close(trained[i].second, values(named[i].second), 0, 0)) << named[i].first;
  }
}

TEST(J5, SgdStepsEqualEagerBitwise) {
  expect_like_eager(
      nn::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true}, 4);
}

TEST(J5, AdamWStepsEqualEagerBitwise) { expect_like_eager(nn::AdamWOptions{.lr = 1e-2}, 4); }

TEST(J5, AdamRMSpropAdagradStepsEqualEagerBitwise) {
  expect_like_eager(nn::AdamOptions{.lr = 1e-2, .weight_decay = 0.1, .amsgrad = true}, 4);
  expect_like_eager(
      nn::RMSpropOptions{.lr = 1e-2, .weight_decay = 0.1, .momentum = 0.5, .centered = true}, 4);
  expect_like_eager(
      nn::AdagradOptions{.lr = 0.1, .lr_decay = 0.1, .initial_accumulator_value = 0.2}, 4);
}

// Convolution, pooling and group norm (composites over as_strided windows, whose
// gradients add over overlapping windows) in a train-step program: the same steps as eager.
class TinyCnn : public nn::Module {
 public:
  explicit TinyCnn(Device d)
      : w(register_parameter("w", randn({4, 2, 3, 3}, {.device = d}) * 0.3)),
        gamma(register_parameter("gamma", ones({4}, {.device = d}))),
        fc(register_parameter("fc", randn({3, 16}, {.device = d}) * 0.3)) {}
  TensorList forward(const TensorList& in) override {
    Tensor x = nn::conv2d(in[0], w, Tensor(), {1}, {1});
    x = nn::max_pool2d(gelu(nn::group_norm(x, 2, gamma)), {3}, {2}, {1});
    return {linear(flatten(x, 1), fc)};
  }
  Tensor &w, &gamma, &fc;
};

// Three program steps equal three eager steps of the same model (built twice from one
// seed) on cpu:1, bitwise: the losses and the trained parameters.
template <typename M>
void expect_steps_like_eager(uint64_t seed, const Tensor& x, const Tensor& y,
                             const OptimizerConfig& config, size_t expected_params) {
  Device d = x.device();
  manual_seed(seed);
  M eager(d);
  manual_seed(seed);
  M traced(d);
  ExportedProgram p = export_train_step(traced, mse, {x, y}, {.optimizer = config});
  std::unique_ptr<nn::Optimizer> opt = make_optimizer(config, params_of(eager));
  for (int s = 0; s < 3; ++s) {
    opt->zero_grad();
    Tensor loss = mse(eager, {x, y});
    loss.backward();
    opt->step();
    TensorList out = p.run({x, y});
    EXPECT_TRUE(all_close(out[0], values(loss), 0, 0)) << "step " << s;
  }
  NamedTensors trained = trained_parameters(p);
  auto named = eager.named_parameters();
  ASSERT_EQ(trained.size(), named.size());
  EXPECT_EQ(named.size(), expected_params);
  for (size_t i = 0; i < trained.size(); ++i)
    EXPECT_TRUE(all_close(trained[i].second, values(named[i].second), 0, 0)) << named[i].first;
}

TEST(J5, ConvolutionalStepsEqualEager) {
  Device d("cpu:1");
  manual_seed(30);
  Tensor x = randn({2, 2, 4, 4}, {.device = d}), y = randn({2, 3}, {.device = d});
  expect_steps_like_eager<TinyCnn>(3, x, y, nn::SGDOptions{.lr = 0.1, .momentum = 0.9}, 3);
}

// A recurrent model (a 2-layer bidirectional LSTM and a GRU cell unrolled over its
// output, then a linear head) trained by Adam: backpropagation through time in one
// program, the same steps as eager.
class TinySeq : public nn::Module {
 public:
  explicit TinySeq(Device d)
      : lstm(
            register_module("lstm", std::make_shared<nn::LSTM>(nn::RNNOptions{.input_size = 3,
                                                                              .hidden_size = 4,
                                                                              .num_layers = 2,
                                                                              .batch_first = true,
                                                                              .bidirectional = true,
                                                                              .device = d}))),
        cell(register_module("cell", std::make_shared<nn::GRUCell>(8, 5, true, d))),
        head(register_module("head", std::make_shared<nn::Linear>(5, 2, true, d))) {}
  TensorList forward(const TensorList& in) override {
    Tensor seq = (*lstm)(in)[0];  // [N, L, 8]
    Tensor h;
    for (int64_t t = 0; t < seq.size(1); ++t) {
      TensorList args{select(seq, 1, t)};
      if (h.defined()) args.push_back(h);
      h = (*cell)(args)[0];
    }
    return {(*head)(h)};
  }
  std::shared_ptr<nn::LSTM> lstm;
  std::shared_ptr<nn::GRUCell> cell;
  std::shared_ptr<nn::Linear> head;
};

TEST(J5, RecurrentStepsEqualEager) {
  Device d("cpu:1");
  manual_seed(40);
  Tensor x = randn({2, 5, 3}, {.device = d}), y = randn({2, 2}, {.device = d});
  // 2 layers x 2 directions x 4 parameters, the cell's 4, the head's 2.
  expect_steps_like_eager<TinySeq>(4, x, y, nn::AdamOptions{.lr = 1e-2}, 16 + 4 + 2);
}

// (Y1, J5) A train step exported with a dynamic batch trains at every batch size of its
// range -- a short last batch included -- as eager steps do, bitwise, with one program.
void expect_dynamic_batch_like_eager(const OptimizerConfig& config) {
  Device d("cpu:1");
  auto eager = small_mlp(d), traced = small_mlp(d);
  Tensor x = randn({5, 6}, {.device = d}), y = randn({5, 3}, {.device = d});
  Dim batch("batch", 1, 32);
  ExportedProgram p = export_train_step(
      *traced, mse, {x, y}, {.optimizer = config, .dynamic_shapes = {{{0, batch}}, {{0, batch}}}});
  ASSERT_EQ(p.shapes.symbols.size(), 1u) << p.shapes.str();
  EXPECT_TRUE(p.shapes.guards.empty()) << p.shapes.str();
  std::unique_ptr<nn::Optimizer> opt = make_optimizer(config, params_of(*eager));
  runtime::Executor ex(p);
  for (int64_t b : {5, 8, 1, 32, 3, 8}) {
    Tensor xb = randn({b, 6}, {.device = d}), yb = randn({b, 3}, {.device = d});
    opt->zero_grad();
    Tensor loss = mse(*eager, {xb, yb});
    loss.backward();
    opt->step();
    TensorList out = ex.run({xb, yb});
    ASSERT_EQ(out.size(), 1u + 4u);
    EXPECT_TRUE(all_close(out[0], values(loss), 0, 0)) << "batch " << b;
  }
  EXPECT_EQ(ex.plans_built(), 5);  // batch 8 planned once
  expect_error(
      [&] {
        ex.run({randn({33, 6}, {.device = d}), randn({33, 3}, {.device = d})});
      },
      ErrorKind::shape, "outside the range [1, 32]");
  expect_error(
      [&] {
        ex.run({randn({4, 6}, {.device = d}), randn({5, 3}, {.device = d})});
      },
      ErrorKind::shape, "batch");
  NamedTensors trained = trained_parameters(p);
  auto named = eager->named_parameters();
  ASSERT_EQ(trained.size(), named.size());
  for (size_t i = 0; i < trained.size(); ++i)
    EXPECT_TRUE(all_close(trained[i].second, values(named[i].second), 0, 0)) << named[i].first;
}

TEST(Y1, TrainStepWithADynamicBatchTrainsAtEveryBatchLikeEager) {
  expect_dynamic_batch_like_eager(nn::SGDOptions{.lr = 0.1, .momentum = 0.9});
  expect_dynamic_batch_like_eager(nn::AdamWOptions{.lr = 1e-2});
}

// (Y1, J5) A convolutional net's train step exported with a dynamic batch (strided
// convolutions, max pooling through symbolic windows, global average pooling) trains at
// every batch as eager steps do, bitwise. The gradient of the pooling's windows (an
// as_strided view with a symbolic batch) failed inside the variant of its arguments before.
TEST(Y1, TrainStepOfAConvNetTrainsAtEveryBatch) {
  Device d("cpu:1");
  auto conv_net = [&] {
    manual_seed(8);
    return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Conv2d>(3, 4, IntList{3, 3}, IntList{2, 2}, IntList{1, 1}, IntList{1},
                                     1, true, d),
        std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(IntList{2, 2}),
        std::make_shared<nn::Conv2d>(4, 5, IntList{3, 3}, IntList{1}, IntList{1, 1}, IntList{1}, 1,
                                     true, d),
        std::make_shared<nn::AdaptiveAvgPool2d>(IntList{1, 1}), std::make_shared<nn::Flatten>(),
        std::make_shared<nn::Linear>(5, 3, true, d)});
  };
  auto eager = conv_net(), traced = conv_net();
  Tensor x = randn({2, 3, 16, 12}, {.device = d}), y = randn({2, 3}, {.device = d});
  Dim batch("batch", 1, 8);
  OptimizerConfig config = nn::SGDOptions{.lr = 0.1, .momentum = 0.9};
  ExportedProgram p = export_train_step(
      *traced, mse, {x, y}, {.optimizer = config, .dynamic_shapes = {{{0, batch}}, {{0, batch}}}});
  ASSERT_EQ(p.shapes.symbols.size(), 1u) << p.shapes.str();
  EXPECT_TRUE(p.shapes.guards.empty()) << p.shapes.str();
  std::unique_ptr<nn::Optimizer> opt = make_optimizer(config, params_of(*eager));
  runtime::Executor ex(p);
  for (int64_t b : {2, 3, 1, 8, 3}) {
    Tensor xb = randn({b, 3, 16, 12}, {.device = d}), yb = randn({b, 3}, {.device = d});
    opt->zero_grad();
    Tensor loss = mse(*eager, {xb, yb});
    loss.backward();
    opt->step();
    TensorList out = ex.run({xb, yb});
    EXPECT_TRUE(all_close(out[0], values(loss), 0, 0)) << "batch " << b;
  }
  NamedTensors trained = trained_parameters(p);
  auto named = eager->named_parameters();
  ASSERT_EQ(trained.size(), named.size());
  for (size_t i = 0; i < trained.size(); ++i)
    EXPECT_TRUE(all_close(trained[i].second, values(named[i].second), 0, 0)) << named[i].first;
}

TEST(J4, SignatureKinds) {
  auto m = small_mlp(Device("cpu:0"));
  Tensor x = randn({5, 6}), y = randn({5, 3});
  ExportedProgram p = export_train_step(*m, mse, {x, y}, {.optimizer = nn::AdamWOptions{}});
  std::string sig = p.signature_str();
  EXPECT_NE(sig.find("parameter_mutation"), std::string::npos) << sig;
  EXPECT_NE(sig.find("optimizer_state_mutation"), std::string::npos) << sig;
  EXPECT_NE(sig.find("loss_output"), std::string::npos) << sig;
  EXPECT_NE(sig.find("gradient_to_parameter"), std::string::npos) << sig;
  int params = 0, state = 0;
  for (const InputSpec& s : p.signature.inputs) {
    params += s.kind == InputSpec::Kind::parameter;
    state += s.kind == InputSpec::Kind::optimizer_state;
  }
  EXPECT_EQ(params, 4);
  EXPECT_EQ(state, 14);  // step, exp_avg, exp_avg_sq per parameter; lr and weight_decay
  EXPECT_NE(sig.find("optimizer_state optimizer.lr"), std::string::npos) << sig;
  EXPECT_NE(sig.find("optimizer_state optimizer.weight_decay"), std::string::npos) << sig;
  // The module itself is untouched by running the program.
  Tensor w = clone(m->named_parameters()[0].second.detach());
  p.run({x, y});
  EXPECT_TRUE(all_close(m->named_parameters()[0].second, values(w), 0, 0));
}

// The learning rate and weight decay are inputs of the program: changing their state
// between runs changes the update as an eager optimizer given the same tensors would,
// bitwise, without exporting again.
TEST(J4, HyperparametersAreInputsAChangedRateNeedsNoNewExport) {
  manual_seed(5);
  auto eager = small_mlp(Device("cpu:0"));
  manual_seed(5);
  auto traced = small_mlp(Device("cpu:0"));
  Tensor x = randn({5, 6}), y = randn({5, 3});
  ExportedProgram p =
      export_train_step(*traced, mse, {x, y}, {.optimizer = nn::AdamWOptions{.lr = 0.1}});
  Tensor* lr = nullptr;
  for (auto& [name, t] : p.state)
    if (name == "optimizer.lr") lr = &t;
  ASSERT_NE(lr, nullptr);
  std::unique_ptr<nn::Optimizer> opt =
      make_optimizer(nn::AdamWOptions{.lr = 0.1}, params_of(*eager));
  Tensor eager_lr = full({}, 0.1, {.dtype = f64});
  opt->set_hyperparameter("lr", eager_lr);
  for (double rate : {0.1, 0.02, 0.005}) {
    fill_(*lr, rate);
    fill_(eager_lr, rate);
    opt->zero_grad();
    Tensor loss = mse(*eager, {x, y});
    loss.backward();
    opt->step();
    TensorList out = p.run({x, y});
    EXPECT_TRUE(all_close(out[0], values(loss), 0, 0)) << "lr " << rate;
  }
  NamedTensors trained = trained_parameters(p);
  auto named = eager->named_parameters();
  for (size_t i = 0; i < trained.size(); ++i)
    EXPECT_TRUE(all_close(trained[i].second, values(named[i].second), 0, 0)) << named[i].first;
  expect_error([&] { opt->set_hyperparameter("momentum", eager_lr); }, ErrorKind::value,
               "[optimizer] unknown hyperparameter 'momentum'");
  expect_error([&] { opt->set_hyperparameter("lr", full({1}, 0.1, {.dtype = f64})); },
               ErrorKind::value, "must be a 0-dim f64 tensor");
}

// Traced for cuda:0 with fake tensors (no GPU here), saved, loaded onto cpu:1, trained
// there like eager on cpu:1; BatchNorm's statistics are written back too.
TEST(J4, TracedForCudaSavedLoadedAndTrainedOnCpu) {
  manual_seed(3);
  auto make = [] {
    manual_seed(3);
    return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::BatchNorm1d>(8),
        std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 2)});
  };
  auto m = make();
  Tensor x = randn({6, 4}), y = randn({6, 2});
  ExportedProgram p = export_train_step(
      *m, mse, {x, y},
      {.optimizer = nn::SGDOptions{.lr = 0.1, .momentum = 0.9}, .device = Device("cuda:0")});
  EXPECT_EQ(p.devices(), std::vector<Device>{Device("cuda:0")});
  auto path = std::filesystem::temp_directory_path() / "kiln_train_step.kiln";
  save(p, path.string());
  ExportedProgram q = load_program(path.string(), {{Device("cuda:0"), Device("cpu:1")}});
  std::filesystem::remove(path);

  Device d("cpu:1");
  auto eager = make();
  eager->to(d);
  nn::SGD opt(params_of(*eager), {.lr = 0.1, .momentum = 0.9});
  Tensor xd = to(x, d), yd = to(y, d);
  for (int s = 0; s < 3; ++s) {
    opt.zero_grad();
    mse(*eager, {xd, yd}).backward();
    opt.step();
    runtime::Executor exec(q);
    exec.run({xd, yd});
  }
  std::map<std::string, Tensor> state(q.state.begin(), q.state.end());
  for (auto& [k, v] : eager->state_dict())
    EXPECT_TRUE(all_close(state.at(k), values(v), 1e-6, 1e-7)) << k;
}

TEST(J4, ExecutorPlansTheWholeStep) {
  auto m = small_mlp(Device("cpu:0"));
  Tensor x = randn({5, 6}), y = randn({5, 3});
  ExportedProgram p = export_train_step(*m, mse, {x, y}, {.optimizer = nn::AdamWOptions{}});
  ExportedProgram ref = export_train_step(*m, mse, {x, y}, {.optimizer = nn::AdamWOptions{}});
  runtime::Executor exec(p);
  for (int s = 0; s < 3; ++s) {
    TensorList a = exec.run({x, y});
    TensorList b = ref.run({x, y});
    EXPECT_TRUE(all_close(a[0], values(b[0]), 0, 0));
  }
  Device d("cpu:0");
  int64_t before = allocator_stats(d).num_os_allocs;
  exec.run({x, y});
  EXPECT_EQ(allocator_stats(d).num_os_allocs, before) << "a steady-state step took new memory";
}

// The executor's own choices keep a step eager's, bit for bit: the GELU recomputed in
// backward (Note [Recomputed activations]), d input written over a dead linear input
// (Note [Outputs in their input's buffer]), Adam's update fused per parameter (Note
// [Fused pointwise regions]).
TEST(J5, GeluStepsThroughTheExecutorEqualEagerBitwise) {
  auto make = [] {
    manual_seed(8);
    return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(6, 32), std::make_shared<nn::GELU>(),
        std::make_shared<nn::Linear>(32, 3)});
  };
  auto eager = make(), traced = make();
  Tensor x = randn({5, 6}), y = randn({5, 3});
  OptimizerConfig config = nn::AdamOptions{.lr = 1e-2};
  ExportedProgram p = export_train_step(*traced, mse, {x, y}, {.optimizer = config});
  int gelus = 0;
  for (ir::Node* n : p.graph.nodes()) gelus += n->op() == ops::OpKind::gelu;
  EXPECT_EQ(gelus, 2);  // the forward's, and its recomputation for fc2's backward
  runtime::Executor exec(p);
  EXPECT_GE(exec.fused_regions(), 4);
  std::unique_ptr<nn::Optimizer> opt = make_optimizer(config, params_of(*eager));
  for (int s = 0; s < 3; ++s) {
    opt->zero_grad();
    Tensor loss = mse(*eager, {x, y});
    loss.backward();
    opt->step();
    EXPECT_TRUE(all_close(exec.run({x, y})[0], values(loss), 0, 0)) << "step " << s;
  }
  NamedTensors trained = trained_parameters(p);
  auto named = eager->named_parameters();
  for (size_t i = 0; i < trained.size(); ++i)
    EXPECT_TRUE(all_close(trained[i].second, values(named[i].second), 0, 0)) << named[i].first;
}

// The benchmark BLOCK's train step plans 9.5 MiB: its saved activations, with the GELU
// recomputed and d input of fc2 in its input's buffer (11.0 MiB without either).
TEST(J4, BlockTrainStepPlanKeepsOnlyWhatBackwardNeeds) {
  auto ref = nn::make_reference_model("block");
  Tensor x = ref.example_inputs[0], y = randn_like(x);
  ExportedProgram p = export_train_step(*ref.module, mse, {x, y},
                                        {.optimizer = nn::SGDOptions{.lr = 1e-3, .momentum = 0.9}});
  runtime::Executor exec(p);
  EXPECT_LE(exec.stats().planned_bytes, int64_t{19} << 19);  // 9.5 MiB
}

TEST(J4, BadInputIsAnErrorBeforeAnythingRuns) {
  auto m = small_mlp(Device("cpu:0"));
  Tensor x = randn({5, 6}), y = randn({5, 3});
  for (auto& [k, p] : m->named_parameters()) p.set_requires_grad(false);
  expect_error(
      [&] {
        export_train_step(*m, mse, {x, y});
      },
      ErrorKind::value, "has no parameter that requires grad");
  auto m2 = small_mlp(Device("cpu:0"));
  expect_error(
      [&] {
        export_train_step(*m2, [](nn::Module& mm, const TensorList& b) { return mm(b[0]); },
                          {x, y});
      },
      ErrorKind::value, "the loss must be a floating scalar, got f32[5, 3]");
  expect_error(
      [&] {
        export_train_step(*m2, mse, {x, y}, {.optimizer = nn::AdamWOptions{.beta1 = 1.5}});
      },
      ErrorKind::value, "betas must be in [0, 1)");
  expect_error(
      [&] {
        export_train_step(*m2, mse, {x, y}, {.optimizer = nn::SGDOptions{.lr = -1}});
      },
      ErrorKind::value, "must be >= 0");
  expect_error(
      [&] {
        export_train_step(*m2, mse, {x, y},
                          {.optimizer = nn::SGDOptions{.momentum = 0.9, .dampening = 0.1}});
      },
      ErrorKind::unsupported, "use dampening 0");
  ExportedProgram p = export_train_step(*m2, mse, {x, y});
  expect_error([&] { p.run({x, randn({5, 4})}); }, ErrorKind::value, "input 'input_1' expects");
}

}  // namespace
}  // namespace kiln

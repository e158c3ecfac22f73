// Modules, export, the program file and retargeting: (D6), (X1)-(X4), (R3).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "kiln/kiln.h"
#include "program_file.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::edit_header;
using testing::edit_program;
using testing::expect_error;
using testing::read_all;
using testing::write_all;
using json = nlohmann::json;

std::string tmp_path(const std::string& name) {
  return ::testing::TempDir() + "kiln_" + name + ".kiln";
}

// A module with one of each: parameter, persistent buffer mutated in forward,
// non-persistent buffer, workspace, tensor constant, user-input mutation.
class Everything : public nn::Module {
 public:
  explicit Everything(Device d = Device("cpu:0"))
      : w(register_parameter("w", full({4}, 3.0, {.device = d}))),
        count(register_buffer("count", zeros({4}, {.device = d}))),
        scale(register_buffer("scale", full({4}, 2.0, {.device = d}), /*persistent=*/false)),
        scratch(register_workspace("scratch", {4}, f32, d)),
        offset_(tensor({1, 2, 3, 4}, {}, {.device = d})) {}
  TensorList forward(const TensorList& in) override {
    add_(count, 1);
    copy_(scratch, in[0] * w);
    Tensor y = in[1];
    add_(y, 10);
    return {scratch * scale + offset_};
  }
  Tensor &w, &count, &scale, &scratch;

 private:
  Tensor offset_;  // not registered: a tensor constant
};

TEST(Module, RegistryStateDictAndTo) {  // (D6)
  Everything m;
  std::vector<std::string> names;
  for (const auto& t : m.named_tensors()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"w", "count", "scale", "scratch"}));
  nn::StateDict sd = m.state_dict();
  ASSERT_EQ(sd.size(), 2u);
  EXPECT_EQ(sd[0].first, "w");
  EXPECT_EQ(sd[1].first, "count");
  m.to(Device("cpu:2"));
  for (const auto& t : m.named_tensors()) EXPECT_EQ(t.tensor->device(), Device("cpu:2")) << t.name;
  EXPECT_EQ(m.w.device(), Device("cpu:2"));  // the layer's handle follows
  nn::StateDict bad = {{"w", ones({4})}};
  expect_error([&] { m.load_state_dict(bad); }, ErrorKind::value, "missing key(s): count");
  bad.push_back({"count", ones({4})});
  bad.push_back({"extra", ones({1})});
  expect_error([&] { m.load_state_dict(bad); }, ErrorKind::value, "unexpected key(s): extra");
  expect_error(
      [&] {
        m.load_state_dict({{"w", ones({5})}, {"count", ones({4})}});
      },
      ErrorKind::shape, "'w' has shape [5] in the state dict but [4] in the module");
  m.load_state_dict({{"w", ones({4})}, {"count", full({4}, 7.0)}});
  EXPECT_EQ(m.w.device(), Device("cpu:2"));
  EXPECT_EQ(item<float>(sum(m.count)), 28.0f);
  auto gpt = nn::make_reference_model("gpt", {{"layers", 1}}).module;
  std::vector<std::string> mods;
  for (auto& [name, mod] : gpt->named_modules()) mods.push_back(name);
  EXPECT_NE(std::find(mods.begin(), mods.end(), "blocks.0.attn.qkv"), mods.end());
}

TEST(Layers, DropoutRmsNormAndEmbedding) {
  nn::Dropout drop(0.25);
  Tensor x = ones({4000});
  drop.eval();
  EXPECT_TRUE(drop(x).is_same(x));
  drop.train();
  std::vector<float> v = to_vector<float>(drop(x));
  size_t zeros_seen = std::count(v.begin(), v.end(), 0.0f);
  EXPECT_NEAR(zeros_seen / 4000.0, 0.25, 0.03);
  for (float f : v) EXPECT_TRUE(f == 0.0f || std::abs(f - 1.0f / 0.75f) < 1e-6);
  nn::RMSNorm norm(3);
  EXPECT_TRUE(all_close(norm(tensor({3, 4, 0}, {1, 3})),
                        {3 / std::sqrt(25.0 / 3), 4 / std::sqrt(25.0 / 3), 0}, 1e-5));
  nn::Embedding emb(5, 2);
  EXPECT_EQ(emb(from_vector<int64_t>({4, 0, 4})).shape(), (Dims{3, 2}));
  expect_error([] { nn::make_reference_model("resnet"); }, ErrorKind::value,
               "unknown reference model 'resnet'; known: mlp, block, gpt, bn_mlp");
  expect_error(
      [] {
        nn::make_reference_model("gpt", {{"depth", 3}});
      },
      ErrorKind::value, "'gpt' has no setting 'depth'");
}

TEST(Layers, ConvolutionalLayers) {
  manual_seed(2);
  auto conv1 = std::make_shared<nn::Conv2d>(3, 8, IntList{3}, IntList{1}, IntList{1});
  auto conv2 = std::make_shared<nn::Conv2d>(8, 4, IntList{3, 2}, IntList{2}, IntList{0}, IntList{1},
                                            /*groups=*/2, false);
  auto bn = std::make_shared<nn::BatchNorm2d>(8);
  nn::Sequential net({conv1, bn, std::make_shared<nn::ReLU>(),
                      std::make_shared<nn::MaxPool2d>(IntList{2}), conv2,
                      std::make_shared<nn::GroupNorm>(2, 4),
                      std::make_shared<nn::AvgPool2d>(IntList{2}, IntList{1}),
                      std::make_shared<nn::AdaptiveAvgPool2d>(IntList{1}),
                      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(4, 2)});
  EXPECT_EQ(conv1->weight.shape(), (Dims{8, 3, 3, 3}));
  EXPECT_EQ(conv2->weight.shape(), (Dims{4, 4, 3, 2}));
  EXPECT_EQ(conv2->bias, nullptr);
  double bound = 1 / std::sqrt(27.0);  // fan_in = 3 * 3 * 3, as torch.nn.Conv2d
  for (double v : to_vector<double>(conv1->weight)) EXPECT_LE(std::abs(v), bound);
  EXPECT_GT(item<double>(amax(abs(conv1->weight))), 0.8 * bound);
  Tensor x = randn({2, 3, 10, 9});
  net.eval();
  TensorList want = net(TensorList{x});
  EXPECT_EQ(want[0].shape(), (Dims{2, 2}));
  ExportedProgram p = export_program(net, {x});
  EXPECT_TRUE(all_close(p.run({x})[0], to_vector<double>(want[0]), 1e-5, 1e-5));
  net.train();  // batch norm over [N, C, H, W] moves its running statistics
  net(TensorList{x});
  EXPECT_GT(item<double>(amax(abs(bn->running_mean))), 0.0);
}

// A transposed convolution is the gradient of a convolution w.r.t. its input: checked on
// strided, padded, dilated, grouped geometry, with the output_padding that recovers the
// input size; and ConvTranspose2d's weight layout and init bound.
TEST(Layers, TransposedConvolutionIsTheGradientOfConvolution) {
  manual_seed(3);
  Tensor x = randn({2, 4, 9, 8}, {.dtype = f64, .requires_grad = true});
  Tensor w = randn({6, 2, 3, 2}, {.dtype = f64});
  IntList stride{2, 3}, padding{1, 1}, dilation{2, 1};
  Tensor y = nn::conv2d(x, w, Tensor(), stride, padding, dilation, /*groups=*/2);
  Tensor g = randn(IntList(y.shape().begin(), y.shape().end()), {.dtype = f64});
  Tensor dx = autograd::grad({y}, {x}, {g})[0];
  // (9 + 2 - 2*2 - 1) % 2 = 0 and (8 + 2 - 1 - 1) % 3 = 2 rows are left over.
  Tensor t = nn::conv_transpose2d(g, w, Tensor(), stride, padding, {0, 2}, 2, dilation);
  ASSERT_EQ(t.shape(), x.shape());
  EXPECT_TRUE(all_close(t, to_vector<double>(dx), 1e-12, 1e-12));

  nn::ConvTranspose2d up(4, 6, {3}, {2}, {1}, {1}, /*groups=*/2);
  EXPECT_EQ(up.weight.shape(), (Dims{4, 3, 3, 3}));
  double bound = 1 / std::sqrt(27.0);  // fan_in = out / groups * 3 * 3, as torch.nn.ConvTranspose2d
  EXPECT_LE(item<double>(amax(abs(up.weight))), bound);
  EXPECT_EQ(up(randn({1, 4, 5, 5})).shape(), (Dims{1, 6, 10, 10}));
  expect_error([&] { nn::conv_transpose2d(g, w, Tensor(), {1}, {0}, {1}); }, ErrorKind::value,
               "output padding must be smaller than either stride or dilation");
}

TEST(Layers, EmbeddingNormAndActivationModules) {
  manual_seed(9);
  nn::Embedding emb(5, 3, Device("cpu:0"), /*padding_idx=*/1);
  EXPECT_EQ(to_vector<double>(select(emb.weight, 0, 1)), (std::vector<double>{0, 0, 0}));
  Tensor idx = from_vector<int64_t>({1, 3, 1, 0}, {2, 2});
  sum(emb(idx)).backward();
  std::vector<double> g = to_vector<double>(emb.weight.grad());
  EXPECT_EQ(std::vector<double>(g.begin() + 3, g.begin() + 6),
            (std::vector<double>{0, 0, 0}));  // the padding row
  EXPECT_EQ(std::vector<double>(g.begin(), g.begin() + 3), (std::vector<double>{1, 1, 1}));

  nn::EmbeddingBag bag(5, 3, "sum");
  Tensor summed = bag({from_vector<int64_t>({0, 2, 4}), from_vector<int64_t>({0, 1})})[0];
  EXPECT_TRUE(all_close(select(summed, 0, 1),
                        to_vector<double>(select(bag.weight, 0, 2) + select(bag.weight, 0, 4)),
                        1e-6, 1e-6));

  nn::InstanceNorm norm(2, 1e-5, 0.5, /*affine=*/true, /*track_running_stats=*/true);
  Tensor x = randn({4, 2, 6}) * 3.0 + 1.0;
  Tensor y = norm(x);
  EXPECT_TRUE(all_close(mean(y, {2}), std::vector<double>(8, 0.0), 1e-5, 1e-5));
  EXPECT_GT(item<double>(amax(abs(*norm.running_mean))),
            0.1);  // moved halfway to the batch's means
  norm.eval();
  EXPECT_TRUE(
      all_close(norm(x),
                to_vector<double>(nn::instance_norm(x, *norm.running_mean, *norm.running_var,
                                                    *norm.weight, *norm.bias, false)),
                1e-6, 1e-6));

  nn::Sequential act({std::make_shared<nn::Identity>(), std::make_shared<nn::Tanh>(),
                      std::make_shared<nn::Softmax>(-1)});
  EXPECT_TRUE(
      all_close(act(TensorList{x})[0], to_vector<double>(softmax(tanh(x), -1)), 1e-6, 1e-6));
}

TEST(Export, SignatureOfEveryKind) {  // (X4), (M5)
  Everything m;
  ExportedProgram p = export_program(m, {ones({4}), zeros({4})});
  std::vector<std::string> inputs;
  for (const InputSpec& s : p.signature.inputs)
    inputs.push_back(fmt::format("{}:{}:{}:{}", to_string(s.kind), s.name, s.target, s.persistent));
  EXPECT_EQ(inputs, (std::vector<std::string>{
                        "parameter:p_w:w:true", "buffer:b_count:count:true",
                        "buffer:b_scale:scale:false", "workspace:w_scratch:scratch:false",
                        "user_input:input_0:input_0:true", "user_input:input_1:input_1:true"}));
  std::vector<std::string> outputs;
  for (const OutputSpec& s : p.signature.outputs)
    outputs.push_back(fmt::format("{}:{}", to_string(s.kind), s.target));
  EXPECT_EQ(outputs, (std::vector<std::string>{"buffer_mutation:count", "buffer_mutation:scratch",
                                               "user_input_mutation:input_1", "user_output:"}));
  ASSERT_EQ(p.state.size(), 2u);  // parameters and persistent buffers
  EXPECT_EQ(p.state[0].first, "w");
  EXPECT_EQ(p.state[1].first, "count");
  EXPECT_EQ(p.constants[0].first, "scale");  // then the tensor constants of the graph
  EXPECT_GE(p.constants.size(), 2u);
  ASSERT_EQ(p.workspaces.size(), 1u);
  EXPECT_EQ(p.workspaces[0].shape, Dims{4});
  // Running equals eager, including the write-backs.
  Everything eager;
  Tensor ex = ones({4}), ey = zeros({4});
  Tensor want = eager({ex, ey})[0];
  Tensor x = ones({4}), y = zeros({4});
  Tensor got = p.run({x, y})[0];
  EXPECT_EQ(to_vector<float>(got), to_vector<float>(want));
  EXPECT_EQ(to_vector<float>(y), to_vector<float>(ey));
  EXPECT_EQ(to_vector<float>(p.state[1].second), to_vector<float>(eager.count));
  // Workspaces are never in the file's bytes.
  std::string path = tmp_path("everything");
  save(p, path);
  for (const auto& [key, t] : load_safetensors(path))
    EXPECT_EQ(key.find("scratch"), std::string::npos);
  ExportedProgram loaded = load_program(path);
  EXPECT_EQ(to_vector<float>(loaded.run({ones({4}), zeros({4})})[0]), to_vector<float>(want));
  std::remove(path.c_str());
}

// (M5) A parameter written in forward -- an embedding with max_norm renormalizes the rows
// it looks up, in place, as PyTorch's export records with PARAMETER_MUTATION -- is a
// parameter_mutation output: the program writes the parameter back as eager does, and a
// second run (rows already within the norm) gives the same values.
TEST(Export, ParametersWrittenInForwardAreMutationOutputs) {
  manual_seed(9);
  nn::Embedding eager(10, 3, Device("cpu:0"), std::nullopt, 1.0),
      traced(10, 3, Device("cpu:0"), std::nullopt, 1.0);
  {  // rows well beyond the norm, the same in both
    autograd::NoGradGuard no_grad;
    copy_(traced.weight, mul(eager.weight, 3.0));
    copy_(eager.weight, traced.weight);
  }
  Tensor idx = from_vector(std::vector<int64_t>{1, 4, 1, 7}, {2, 2});
  ExportedProgram p = export_program(traced, {idx});
  ASSERT_EQ(p.signature.outputs.size(), 2u) << p.signature_str();
  EXPECT_EQ(p.signature.outputs[0].kind, OutputSpec::Kind::parameter_mutation);
  EXPECT_EQ(p.signature.outputs[0].target, "weight");
  runtime::Executor ex(p);
  Tensor want = eager(TensorList{idx})[0];
  for (int run = 0; run < 2; ++run)
    EXPECT_TRUE(all_close(ex.run({idx})[0], to_vector<double>(want), 0, 0)) << run;
  Tensor written = trained_parameters(p).at(0).second;
  EXPECT_TRUE(all_close(written, to_vector<double>(eager.weight), 0, 0));
  EXPECT_LE(item<float>(amax(vector_norm(index_select(written, 0, reshape(idx, {-1})), 2.0, {1}))),
            1.0f);
}

TEST(Export, ToInForwardIsCapturedAndFrozen) {  // (X1), (X2)
  struct UsesTo : nn::Module {
    bool mutate = false;
    TensorList forward(const TensorList& in) override {
      ScopeName s("head");
      Tensor y = kiln::to(in[0], in[0].device());
      if (mutate) add_(y, 1);
      return {y * 2};
    }
  };
  UsesTo m;
  ExportedProgram p = export_program(m, {ones({2})});
  EXPECT_NE(p.graph.str().find("_to_copy(%input_0, dtype=f32, device=cpu:0)"), std::string::npos);
  m.mutate = true;
  expect_error([&] { export_program(m, {ones({2})}); }, ErrorKind::frozen_mutation, "in 'head'");
}

// Export -> save -> load -> run equals eager for every reference model.
TEST(Export, ReferenceModelsRoundTrip) {
  struct Case {
    std::string name;
    nn::ModelConfig config;
    bool train;
  };
  std::vector<Case> cases = {{"mlp", {{"batch", 4}, {"width", 32}, {"layers", 3}}, false},
                             {"gpt", {}, false},
                             {"bn_mlp", {}, false},
                             {"bn_mlp", {}, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name + (c.train ? " train" : " eval"));
    nn::ReferenceModel ref = nn::make_reference_model(c.name, c.config, 7);
    ref.module->train(c.train);
    ExportedProgram p = export_program(*ref.module, ref.example_inputs);
    std::string path = tmp_path(c.name);
    save(p, path);
    ExportedProgram loaded = load_program(path);
    TensorList got = loaded.run(ref.example_inputs);
    TensorList want = (*ref.module)(ref.example_inputs);  // mutates the module's buffers
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(all_close(got[i], to_vector<double>(want[i]), 1e-5, 1e-5));
    for (const auto& [name, t] : loaded.state)  // buffer mutations (bn running stats)
      for (const auto& [mname, mt] : ref.module->state_dict())
        if (mname == name) {
          EXPECT_TRUE(all_close(t, to_vector<double>(mt), 1e-6, 1e-6)) << name;
        }
    std::remove(path.c_str());
  }
}

// A small convolutional network of composites (windows as as_strided views, batch norm
// updating its running statistics in place): traced, exported, saved, loaded and run
// like eager, in training and in eval mode, also retargeted.
class SmallCnn : public nn::Module {
 public:
  SmallCnn()
      : w1(register_parameter("w1", randn({4, 3, 3, 3}) * 0.3)),
        b1(register_parameter("b1", randn({4}) * 0.1)),
        w2(register_parameter("w2", randn({8, 2, 3, 3}) * 0.3)),
        mean(register_buffer("mean", zeros({8}))),
        var(register_buffer("var", ones({8}))),
        fc(register_parameter("fc", randn({5, 8}) * 0.3)) {}
  TensorList forward(const TensorList& in) override {
    Tensor x = relu(nn::conv2d(in[0], w1, b1, {1}, {1}));
    x = nn::max_pool2d(x, {2}, {}, {0}, {1}, /*ceil_mode=*/true);
    x = nn::conv2d(nn::pad(x, {1, 0, 0, 1}), w2, Tensor(), {2}, {0}, {1}, /*groups=*/2);
    x = nn::batch_norm(x, mean, var, Tensor(), Tensor(), training());
    x = flatten(nn::adaptive_avg_pool2d(nn::avg_pool2d(x, {2}, {1}, {1}), {1}), 1);
    return {linear(x, fc)};
  }
  Tensor &w1, &b1, &w2, &mean, &var, &fc;
};

TEST(Export, ConvolutionalModelRoundTrips) {
  for (bool train : {true, false}) {
    SCOPED_TRACE(train ? "train" : "eval");
    manual_seed(5);
    SmallCnn m;
    m.train(train);
    TensorList in = {randn({2, 3, 9, 7})};
    ExportedProgram p = export_program(m, in);
    std::string path = tmp_path("cnn");
    save(p, path);
    ExportedProgram loaded = load_program(path, {{Device("cpu:0"), Device("cpu:1")}});
    TensorList got = loaded.run({to(in[0], Device("cpu:1"))});
    TensorList want = m(in);  // moves the module's running statistics once, as the program did
    EXPECT_EQ(got[0].device(), Device("cpu:1"));
    EXPECT_TRUE(all_close(got[0], to_vector<double>(want[0]), 1e-5, 1e-5));
    int checked = 0;
    for (const auto& [name, t] : loaded.state)  // the running statistics moved alike
      if (name == "mean" || name == "var") {
        EXPECT_TRUE(all_close(t, to_vector<double>(name == "mean" ? m.mean : m.var), 1e-6, 1e-6))
            << name;
        ++checked;
      }
    EXPECT_EQ(checked, 2);
    std::remove(path.c_str());
  }
}

// A decoder: transposed convolution, reflect padding, bilinear upsampling, pixel shuffle.
// Their index tensors (computed on the host from shapes) are constants of the program,
// traced for an absent cuda:0 and run on cpu:1 (X3).
class SmallDecoder : public nn::Module {
 public:
  SmallDecoder()
      : up(register_module("up", std::make_shared<nn::ConvTranspose2d>(4, 8, IntList{3}, IntList{2},
                                                                       IntList{1}, IntList{1}))),
        resize(register_module(
            "resize", std::make_shared<nn::Upsample>(nn::InterpolateOptions{
                          .scale_factor = {1.5}, .mode = "bilinear", .align_corners = false}))) {}
  TensorList forward(const TensorList& in) override {
    Tensor x = relu((*up)(in[0]));  // [N, 8, 2H, 2W]
    x = nn::pixel_shuffle(nn::pad(x, {1, 1, 2, 0}, "reflect"),
                          2);  // [N, 2, 4H + 4, 4W + 4], then x1.5
    return {(*resize)(x)};
  }
  std::shared_ptr<nn::Module> up, resize;
};

TEST(Export, DecoderModelRoundTrips) {
  manual_seed(6);
  SmallDecoder m;
  TensorList in = {randn({2, 4, 3, 5})};
  ExportedProgram p = export_program(m, in, {.device = Device("cuda:0")});
  std::string path = tmp_path("decoder");
  save(p, path);
  ExportedProgram loaded = load_program(path, {{Device("cuda:0"), Device("cpu:1")}});
  TensorList got = loaded.run({to(in[0], Device("cpu:1"))});
  TensorList want = m(in);
  ASSERT_EQ(want[0].shape(), (Dims{2, 2, 24, 36}));
  EXPECT_EQ(got[0].device(), Device("cpu:1"));
  EXPECT_TRUE(all_close(got[0], to_vector<double>(want[0]), 1e-5, 1e-5));
  std::remove(path.c_str());
}

// PyTorch's encoder stack with a causal mask built inside forward, traced for an absent
// cuda:0 and run on cpu:1; its state keys are PyTorch's.
class CausalEncoder : public nn::Module {
 public:
  CausalEncoder()
      : encoder(register_module(
            "encoder",
            std::make_shared<nn::TransformerEncoder>(
                nn::TransformerLayerOptions{
                    .d_model = 8, .nhead = 2, .dim_feedforward = 16, .batch_first = true},
                2, /*final_norm=*/true))) {}
  TensorList forward(const TensorList& in) override {
    return {encoder->encode(
        in[0], {.attn_mask = nn::square_subsequent_mask(in[0].size(1), in[0].device())})};
  }
  std::shared_ptr<nn::TransformerEncoder> encoder;
};

TEST(Export, TransformerEncoderRoundTrips) {
  manual_seed(8);
  CausalEncoder m;
  m.eval();
  TensorList in = {randn({2, 5, 8})};
  ExportedProgram p = export_program(m, in, {.device = Device("cuda:0")});
  std::vector<std::string> keys;
  for (const auto& [k, t] : m.state_dict()) keys.push_back(k);
  ASSERT_EQ(keys.size(), 2u * 12u + 2u);
  EXPECT_EQ(keys[0], "encoder.layers.0.self_attn.in_proj_weight");
  EXPECT_EQ(keys[3], "encoder.layers.0.self_attn.out_proj.bias");
  EXPECT_EQ(keys.back(), "encoder.norm.bias");
  std::string path = tmp_path("encoder");
  save(p, path);
  ExportedProgram loaded = load_program(path, {{Device("cuda:0"), Device("cpu:1")}});
  TensorList got = loaded.run({to(in[0], Device("cpu:1"))});
  TensorList want = m(in);
  EXPECT_TRUE(all_close(got[0], to_vector<double>(want[0]), 1e-5, 1e-5));
  // The first position attends only to itself: changing later positions leaves it alone.
  Tensor changed = clone(in[0]);
  Tensor later = narrow(changed, 1, 1, 4);
  fill_(later, 3.0);
  EXPECT_TRUE(all_close(select(m(TensorList{changed})[0], 1, 0),
                        to_vector<double>(select(want[0], 1, 0)), 1e-6, 1e-6));
  std::remove(path.c_str());
}

TEST(Export, TracedForAnAbsentDeviceRunsAnywhere) {  // (X3)
  nn::ReferenceModel ref = nn::make_reference_model("gpt", {{"layers", 1}}, 3);
  ExportedProgram p = export_program(*ref.module, ref.example_inputs, {.device = Device("cuda:0")});
  for (Device d : p.devices())
    EXPECT_TRUE(d == Device("cuda:0") || d == Device("cpu:0")) << d.str();
  EXPECT_NE(p.graph.str().find("@cuda:0"), std::string::npos);
  std::string path = tmp_path("gpt_cuda");
  save(p, path);
  expect_error(
      [&] { load_program(path); }, ErrorKind::device,
      "needs cuda:0, which this machine lacks (the program's devices: cuda:0); "
      "map it to a local device: --device-map cuda:0=cpu:0 (kiln run, kiln train), the same "
      "pairs in a DeviceMap");
  ExportedProgram q = load_program(path, {{Device("cuda:0"), Device("cpu:2")}});
  verify_no_device(q, {Device("cuda:0")});
  TensorList in = {to(ref.example_inputs[0], Device("cpu:2"))};
  AllocatorStats before0 = allocator_stats(Device("cpu:0"));
  AllocatorStats before2 = allocator_stats(Device("cpu:2"));
  TensorList got = q.run(in);
  EXPECT_EQ(allocator_stats(Device("cpu:0")).num_allocs, before0.num_allocs);  // (R2)
  EXPECT_GT(allocator_stats(Device("cpu:2")).num_allocs, before2.num_allocs);
  EXPECT_EQ(got[0].device(), Device("cpu:2"));
  TensorList want = (*ref.module)(ref.example_inputs);
  EXPECT_TRUE(all_close(got[0], to_vector<double>(want[0]), 1e-5, 1e-5));
  std::remove(path.c_str());
}

// ZCA whitening with a least-squares readout: eigh and svd (pinv) in a program traced
// for an absent GPU, run on a CPU device (Note [Decompositions on the host]).
TEST(Export, DecompositionsRoundTrip) {  // (X3)
  struct Whiten : nn::Module {
    Tensor& w = register_parameter("w", randn({3, 2}));
    TensorList forward(const TensorList& in) override {
      Tensor x = in[0] - mean(in[0], {0}, true);
      Tensor cov = matmul(transpose(x, 0, 1), x) / static_cast<double>(x.size(0) - 1);
      auto [l, v] = linalg::eigh(cov);
      Tensor white = matmul(x, matmul(v * unsqueeze(rsqrt(l + 1e-5), 0), transpose(v, 0, 1)));
      return {matmul(white, w), matmul(linalg::pinv(white), in[1])};
    }
  };
  manual_seed(5);
  Whiten m;
  TensorList in = {randn({16, 3}) * tensor({1.0f, 3.0f, 0.5f}), randn({16, 2})};
  ExportedProgram p = export_program(m, in, {.device = Device("cuda:0")});
  std::string text = p.graph.str();
  EXPECT_NE(text.find("linalg_eigh"), std::string::npos);
  EXPECT_NE(text.find("linalg_svd"), std::string::npos);
  std::string path = tmp_path("whiten");
  save(p, path);
  ExportedProgram q = load_program(path, {{Device("cuda:0"), Device("cpu:1")}});
  TensorList got = q.run({to(in[0], Device("cpu:1")), to(in[1], Device("cpu:1"))});
  TensorList want = m(in);
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got[i].device(), Device("cpu:1"));
    EXPECT_TRUE(all_close(got[i], to_vector<double>(want[i]), 1e-4, 1e-4));
  }
  std::remove(path.c_str());
}

TEST(Export, MoveToDeviceRebindsEverything) {  // (X3)
  nn::ReferenceModel ref = nn::make_reference_model("bn_mlp", {}, 4);
  ref.module->to(Device("cpu:1"));
  ref.module->eval();
  TensorList in1 = {to(ref.example_inputs[0], Device("cpu:1"))};
  ExportedProgram p = export_program(*ref.module, in1);
  EXPECT_EQ(p.devices()[0], Device("cpu:1"));
  move_to_device(p, Device("cpu:2"));
  verify_no_device(p, {Device("cpu:1")});
  for (const auto& [name, t] : p.state) EXPECT_EQ(t.device(), Device("cpu:2")) << name;
  TensorList got = p.run({to(in1[0], Device("cpu:2"))});
  EXPECT_EQ(got[0].device(), Device("cpu:2"));
  EXPECT_TRUE(all_close(got[0], to_vector<double>((*ref.module)(in1)[0]), 1e-5, 1e-6));
  // By map: back to cpu:3; unmapped devices stay.
  move_to_device(p, {{Device("cpu:2"), Device("cpu:3")}});
  verify_no_device(p, {Device("cpu:2")});
  expect_error([&] { p.run({to(in1[0], Device("cpu:2"))}); }, ErrorKind::device_mismatch,
               "[run] input 'input_0' expects f32[16,16]@cpu:3, got f32[16,16]@cpu:2");  // (R3)
}

// C++ numbers in traced code are scalar arguments of their node, as in PyTorch's graphs
// (`mul(%x, 0.125)`): a program traced for cuda:0 names only cuda:0, and a tensor
// constant that is really needed is stored once however often it is used.
TEST(Export, NumbersAreScalarArgumentsAndConstantsAreStoredOnce) {
  nn::ReferenceModel gpt = nn::make_reference_model("gpt", {{"layers", 1}});
  ExportedProgram p = export_program(*gpt.module, gpt.example_inputs, {.device = Device("cuda:0")});
  EXPECT_EQ(p.devices(), std::vector<Device>{Device("cuda:0")}) << p.str();
  bool scalar_arg = false;
  for (ir::Node* n : p.graph.nodes())
    for (const ir::Arg& a : n->args()) scalar_arg |= std::holds_alternative<Scalar>(a);
  EXPECT_TRUE(scalar_arg) << p.graph.str();

  struct TwoLiterals : nn::Module {
    TensorList forward(const TensorList& in) override {
      Tensor a = in[0] * tensor({1, 2, 3});
      return {a + tensor({1, 2, 3}) + 0.5};  // the same values twice
    }
  } m;
  ExportedProgram q = export_program(m, {ones({3})});
  EXPECT_EQ(q.constants.size(), 1u) << q.str();
  EXPECT_NE(q.graph.str().find("add(%add, 0.5)"), std::string::npos) << q.graph.str();
  std::string path = tmp_path("scalars.kiln");
  save(q, path);
  ExportedProgram back = load_program(path);
  EXPECT_EQ(to_vector<float>(back.run({ones({3})})[0]), (std::vector<float>{2.5, 4.5, 6.5}));
  std::remove(path.c_str());
}

// (M2) Writes whose first reach of a storage is through a view (of a fresh value, of a
// view of an input), read back through the base and other views: the exported program,
// saved, loaded and run by the executor, equals eager.
TEST(Export, WritesThroughViewsRunLikeEager) {
  struct Writes : nn::Module {
    TensorList forward(const TensorList& in) override {
      Tensor h = in[0] * 2.0;
      Tensor row = select(h, 0, 1);
      Tensor col = slice(transpose(h, 0, 1), 0, 1, 3);
      add_(row, 10.0);  // first write to h's storage, through a view
      mul_(col, -1.0);
      Tensor u = transpose(in[1], 0, 1);
      Tensor first = select(u, 0, 0);
      add_(first, 100.0);  // an input written through a view of a view
      return {h + 0.0, row * 1.0, col * 1.0, in[1] * 1.0};
    }
  } m;
  Tensor x = reshape(arange(0, 12, 1, {.dtype = f32}), {3, 4});
  Tensor y = reshape(arange(0, 6, 1, {.dtype = f32}), {2, 3});
  Tensor ye = clone(y);
  TensorList want = m.forward({x, ye});
  ExportedProgram p = export_program(m, {x, y});
  std::string path = tmp_path("writes.kiln");
  save(p, path);
  ExportedProgram back = load_program(path);
  std::remove(path.c_str());
  for (ExportedProgram* q : {&p, &back}) {
    runtime::Executor exec(*q);  // its memory plan aliases views with their bases
    for (bool planned : {false, true}) {
      Tensor yr = clone(y);
      TensorList got = planned ? exec.run({x, yr}) : q->run({x, yr});
      ASSERT_EQ(got.size(), want.size()) << q->str();
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_EQ(to_vector<float>(got[i]), to_vector<float>(want[i])) << i << "\n"
                                                                       << q->graph.str();
      EXPECT_EQ(to_vector<float>(yr), to_vector<float>(ye)) << q->graph.str();  // written back
    }
  }
}

// gelu reads as in PyTorch's graphs: approximate='none'|'tanh', a string argument that
// prints, saves and loads.
TEST(Export, GeluApproximateIsAStringArgument) {
  struct Act : nn::Module {
    TensorList forward(const TensorList& in) override {
      return {gelu(in[0], "tanh") + gelu(in[0])};
    }
  } m;
  Tensor x = tensor({-1, 0.5, 2});
  ExportedProgram p = export_program(m, {x});
  EXPECT_NE(p.graph.str().find("gelu(%input_0, approximate='tanh')"), std::string::npos)
      << p.graph.str();
  EXPECT_NE(p.graph.str().find("= gelu(%input_0)\n"), std::string::npos)
      << p.graph.str();  // the default
  std::string path = tmp_path("gelu.kiln");
  save(p, path);
  ExportedProgram back = load_program(path);
  EXPECT_EQ(back.graph.str(), p.graph.str());
  EXPECT_TRUE(all_close(back.run({x})[0], to_vector<double>(m.forward({x})[0])));
  std::remove(path.c_str());
  expect_error([&] { gelu(x, "fast"); }, ErrorKind::value,
               "[gelu] approximate must be 'none' or 'tanh', got 'fast'");
}

// (X3) Map keys: a type key matches every device of that type, a key with an index wins
// over it, and a key matching no device of the program is an error listing its devices.
TEST(Export, DeviceMapKeysFollowX3) {
  std::vector<Device> devices = {Device("cuda:0"), Device("cpu:0"), Device("cuda:1")};
  DeviceMap m = resolve_device_map(
      devices, {{Device("cuda"), Device("cpu:1")}, {Device("cuda:1"), Device("cpu:2")}});
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0], std::make_pair(Device("cuda:0"), Device("cpu:1")));
  EXPECT_EQ(m[1], std::make_pair(Device("cuda:1"), Device("cpu:2")));
  expect_error(
      [&] {
        resolve_device_map(devices, {{Device("cpu:3"), Device("cpu:1")}});
      },
      ErrorKind::device,
      "[device map] 'cpu:3' matches no device of the program (its devices: cuda:0, cpu:0, cuda:1)");
  expect_error(
      [&] {
        resolve_device_map(devices, {{Device("meta"), Device("cpu:1")}});
      },
      ErrorKind::device, "'meta' matches no device");

  nn::ReferenceModel ref =
      nn::make_reference_model("mlp", {{"batch", 2}, {"width", 8}, {"layers", 2}});
  ExportedProgram p = export_program(*ref.module, ref.example_inputs);  // on cpu:0
  move_to_device(p, {{Device("cpu"), Device("cpu:1")}});                // the type key moves cpu:0
  verify_no_device(p, {Device("cpu:0")});
  EXPECT_EQ(p.devices(), std::vector<Device>{Device("cpu:1")});
  expect_error(
      [&] {
        move_to_device(p, {{Device("cuda"), Device("cpu:2")}});
      },
      ErrorKind::device, "'cuda' matches no device of the program (its devices: cpu:1)");

  std::string path = tmp_path("x3_cuda.kiln");
  {
    ExportedProgram traced =
        export_program(*ref.module, ref.example_inputs, {.device = Device("cuda:0")});
    save(traced, path);
  }
  ExportedProgram q =
      load_program(path, {{Device("cuda"), Device("cpu:1")}});  // no "cuda:0 is not available"
  EXPECT_EQ(q.run({to(ref.example_inputs[0], Device("cpu:1"))})[0].device(), Device("cpu:1"));
  std::remove(path.c_str());
}

// ---- malformed files: each a format error, never a crash ----

class Malformed : public ::testing::Test {
 protected:
  void SetUp() override {
    nn::ReferenceModel ref =
        nn::make_reference_model("mlp", {{"batch", 2}, {"width", 8}, {"layers", 2}});
    save(export_program(*ref.module, ref.example_inputs), path);
  }
  void TearDown() override { std::remove(path.c_str()); }
  // One file per test: ctest runs tests in parallel processes, and truncating a file
  // another process has mapped would fault there.
  std::string path = tmp_path(std::string("malformed_") +
                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
};

TEST_F(Malformed, Truncated) {
  std::string bytes = read_all(path);
  write_all(path, bytes.substr(0, bytes.size() / 2));
  expect_error([&] { load_program(path); }, ErrorKind::format, "truncated");
  write_all(path, bytes.substr(0, 5));
  expect_error([&] { load_program(path); }, ErrorKind::format, "truncated: 5 bytes");
}

TEST_F(Malformed, WrongVersion) {
  edit_header(path, [](json& h) {
    json prog = json::parse(h["__metadata__"]["kiln.program"].get<std::string>());
    prog["format_version"] = 99;
    h["__metadata__"]["kiln.program"] = prog.dump();
  });
  expect_error([&] { load_program(path); }, ErrorKind::format,
               "format_version 99 is not supported (this kiln reads versions 1 to 3); export the "
               "program again with this kiln");
}

TEST_F(Malformed, VersionOneFilesStillLoad) {  // they hold no scalars in tensor positions
  edit_header(path, [](json& h) {
    json prog = json::parse(h["__metadata__"]["kiln.program"].get<std::string>());
    prog["format_version"] = 1;
    h["__metadata__"]["kiln.program"] = prog.dump();
  });
  EXPECT_EQ(load_program(path).graph.inputs().size(), 5u);
}

TEST_F(Malformed, OffsetsOutOfRange) {
  edit_header(path, [](json& h) { h["state/0.weight"]["data_offsets"] = {0, 1 << 30}; });
  expect_error([&] { load_program(path); }, ErrorKind::format,
               "tensor 'state/0.weight': data offsets [0, 1073741824] are out of range");
}

TEST_F(Malformed, ShapeDisagreesWithSignature) {
  edit_header(path, [](json& h) {
    h["state/0.weight"]["shape"] = {4, 16};  // same bytes, another shape
  });
  expect_error([&] { load_program(path); }, ErrorKind::format,
               "'0.weight' is f32[4, 16] in the file but the program expects f32[8, 8]");
}

TEST_F(Malformed, UnknownOp) {
  edit_header(path, [](json& h) {
    json prog = json::parse(h["__metadata__"]["kiln.program"].get<std::string>());
    for (json& n : prog["graph"])
      if (n["op"] == "call") n["target"] = "frobnicate";
    h["__metadata__"]["kiln.program"] = prog.dump();
  });
  expect_error([&] { load_program(path); }, ErrorKind::format, "unknown op 'frobnicate'");
}

TEST_F(Malformed, SaveIsAtomic) {
  std::string before = read_all(path);
  struct Bad : nn::Module {
    TensorList forward(const TensorList& in) override { return {in[0]}; }
  };
  ExportedProgram p;
  {
    FakeMode fake;
    Bad m;
    p = export_program(m, {ones({2})});
  }
  p.constants.emplace_back("fake", [] {
    FakeMode f;
    return empty({2});
  }());
  EXPECT_THROW(save(p, path), Error);  // fails midway: the old file is intact
  EXPECT_EQ(read_all(path), before);
}

// The meta of the program's user input node.
json& user_input_meta(json& prog) {
  std::string name;
  for (const json& s : prog["signature"]["inputs"])
    if (s["kind"] == "user_input") name = s["name"];
  for (json& n : prog["graph"])
    if (n["name"] == name) return n["meta"][0];
  throw std::runtime_error("no user input");
}

// Shapes, strides and offsets in the graph are bounded at load, before anything is
// allocated or indexed from them.
TEST_F(Malformed, TensorDescriptionsAreBoundedAtLoad) {
  std::string good = read_all(path);
  struct Case {
    std::function<void(json&)> edit;
    std::string message;
  } cases[] = {
      {[](json& m) {
         m["shape"] = {int64_t{1} << 62};
         m["strides"] = {1};
       },
       "size [4611686018427387904] of f32 needs more bytes than the address space"},
      {[](json& m) {
         m["shape"] = {int64_t{1} << 32, int64_t{1} << 32};
       },
       "size [4294967296, 4294967296] has more elements than int64 can hold"},
      {[](json& m) {
         m["shape"] = {-2, 8};
       },
       "negative dimension -2"},
      {[](json& m) { m["offset"] = -1; }, "are negative or address more elements than int64"},
      {[](json& m) {
         m["strides"] = {INT64_MAX, 1};
       },
       "address more elements than int64"},
      {[](json& m) { m["strides"] = {1}; }, "1 strides for a shape of rank 2"},
      {[](json& m) {
         m["shape"] = {2.5, 8};
       },
       "must be an integer within int64, got 2.5"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    write_all(path, good);
    edit_program(path, [&](json& prog) { c.edit(user_input_meta(prog)); });
    expect_error([&] { load_program(path); }, ErrorKind::format, c.message);
  }
}

// A number where an integer belongs is a format error, never a truncation (or the
// undefined conversion of 1e300 to int).
TEST_F(Malformed, IntegerFieldsTakeOnlyIntegers) {
  std::string good = read_all(path);
  edit_program(path, [](json& prog) { prog["format_version"] = 1e300; });
  expect_error([&] { load_program(path); }, ErrorKind::format,
               "'format_version' of the program must be an integer within int64, got 1e+300");
  write_all(path, good);
  edit_header(path, [](json& h) { h["state/0.weight"]["data_offsets"] = {0.0, 1e300}; });
  expect_error([&] { load_program(path); }, ErrorKind::format, "must be an integer within int64");
  write_all(path, good);
  edit_header(path, [](json& h) { h["state/0.weight"]["data_offsets"] = {-8, 0}; });
  expect_error([&] { load_program(path); }, ErrorKind::format,
               "data offsets [-8, 0] are out of range");
  write_all(path, good);
  edit_program(path, [](json& prog) {
    for (json& n : prog["graph"])
      for (json& a : n["args"])
        if (a.contains("ref")) a["ref"]["output"] = 1.5;
  });
  expect_error([&] { load_program(path); }, ErrorKind::format, "must be an integer");
}

TEST(Safetensors, BoolBytesAreZeroOrOne) {  // found by make fuzz (undefined bool loads)
  std::string file = tmp_path("bools.safetensors");
  save_safetensors({{"flags", from_vector(std::vector<bool>{true, false, true}, {3}, {})}}, file);
  std::string bytes = read_all(file);
  bytes[bytes.size() - 2] = 61;
  write_all(file, bytes);
  expect_error([&] { load_safetensors(file); }, ErrorKind::format,
               "tensor 'flags': byte 1 of a BOOL tensor is 61, not 0 or 1");
  std::remove(file.c_str());
}

TEST(Format, VersionOneGeluFlagIsReadAsApproximate) {
  struct Act : nn::Module {
    TensorList forward(const TensorList& in) override { return {gelu(in[0], "tanh")}; }
  } m;
  std::string path = tmp_path("gelu_v1.kiln");
  save(export_program(m, {ones({2})}), path);
  std::string v2 = load_program(path).graph.str();
  edit_program(path, [](json& prog) {  // what version 1 wrote
    prog["format_version"] = 1;
    for (json& n : prog["graph"])
      if (n.value("target", "") == "gelu") n["args"][1] = {{"bool", true}};
  });
  EXPECT_EQ(load_program(path).graph.str(), v2);
  std::remove(path.c_str());
}

TEST_F(Malformed, MutationTargetsMustExist) {
  std::string good = read_all(path);
  edit_program(path, [](json& prog) {
    prog["signature"]["outputs"][0] = {{"kind", "user_input_mutation"}, {"target", "input_9"}};
  });
  expect_error([&] { load_program(path); }, ErrorKind::format,
               "the mutated user input 'input_9' is not one of input_0..input_0");
  write_all(path, good);
  edit_program(path, [](json& prog) {
    prog["signature"]["outputs"][0] = {{"kind", "buffer_mutation"}, {"target", "nowhere"}};
  });
  expect_error([&] { load_program(path); }, ErrorKind::format,
               "the mutated state 'nowhere' is not an input of the program");
}

// Random damage to the header (JSON and program text) or the length: every outcome is a
// clean load or a kiln::Error of kind format -- never another exception, never a crash.
TEST_F(Malformed, RandomDamageIsAlwaysAFormatError) {
  static constexpr char kAlphabet[] = "{}[]\":,0-9ea";
  std::string good = read_all(path);
  uint64_t n;
  std::memcpy(&n, good.data(), 8);
  std::mt19937 rng(99);
  int errors = 0;
  for (int i = 0; i < 400; ++i) {
    std::string bad = good;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % (8 + n);  // the length prefix or the header
      bad[at] =
          static_cast<char>(rng() % 2 ? rng() % 256 : kAlphabet[rng() % (sizeof(kAlphabet) - 1)]);
    }
    if (rng() % 5 == 0) bad.resize(rng() % bad.size());
    write_all(path, bad);
    try {
      load_program(path);
    } catch (const Error& err) {
      EXPECT_TRUE(err.kind() == ErrorKind::format || err.kind() == ErrorKind::device) << err.what();
      ++errors;
    }
  }
  EXPECT_GT(errors, 300);
}

// Structural damage to the program JSON: a random member deleted or given a value of
// another type. Same contract: a clean load or a format (or device) error.
TEST_F(Malformed, RandomStructuralDamageIsAlwaysAFormatError) {
  std::string good = read_all(path);
  std::mt19937 rng(7);
  int errors = 0;
  for (int i = 0; i < 300; ++i) {
    write_all(path, good);
    edit_header(path, [&](json& h) {
      json prog = json::parse(h["__metadata__"]["kiln.program"].get<std::string>());
      std::vector<json::json_pointer> paths;
      std::function<void(const json&, const json::json_pointer&)> walk =
          [&](const json& j, const json::json_pointer& at) {
            if (!at.empty()) paths.push_back(at);
            if (j.is_object())
              for (auto it = j.begin(); it != j.end(); ++it) walk(it.value(), at / it.key());
            if (j.is_array())
              for (size_t k = 0; k < j.size(); ++k) walk(j[k], at / k);
          };
      walk(prog, json::json_pointer());
      const json::json_pointer& target = paths[rng() % paths.size()];
      const json replacements[] = {json("x"),     json(7),        json(nullptr),
                                   json::array(), json::object(), json(-1)};
      if (rng() % 3 == 0 && prog.at(target.parent_pointer()).is_object())
        prog.at(target.parent_pointer()).erase(target.back());
      else
        prog.at(target) = replacements[rng() % 6];
      h["__metadata__"]["kiln.program"] = prog.dump();
    });
    try {
      load_program(path);
    } catch (const Error& err) {
      EXPECT_TRUE(err.kind() == ErrorKind::format || err.kind() == ErrorKind::device) << err.what();
      ++errors;
    }
  }
  EXPECT_GT(errors, 200);
}

TEST(Interop, ReadsAnIndependentWriter) {
  NamedTensors ts = load_safetensors(std::string(KILN_TEST_DATA) + "/golden/interop.safetensors");
  ASSERT_EQ(ts.size(), 4u);
  std::map<std::string, Tensor> by(ts.begin(), ts.end());
  EXPECT_EQ(by["weights"].shape(), (Dims{2, 3}));
  EXPECT_EQ(to_vector<float>(by["weights"]), (std::vector<float>{0.5, -1, 2.25, 3, -4.5, 1e-3f}));
  EXPECT_EQ(to_vector<int64_t>(by["ids"]), (std::vector<int64_t>{7, -2, 0, int64_t{1} << 40}));
  EXPECT_EQ(item<double>(by["scale"]), 3.141592653589793);
  EXPECT_EQ(to_vector<bool>(by["flags"]), (std::vector<bool>{true, false, true}));
}

}  // namespace
}  // namespace kiln

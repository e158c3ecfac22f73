// Extension ops (E1-E3): ops registered outside the built-in table go through the same
// dispatch, modes, export and executor. The sample library kx (examples/extension) is
// compiled into this test; the small kxt:: ops below cover the registration rules.
#include "kiln/ops/extension.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "gated_mlp.h"
#include "program_file.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::expect_error;
using json = nlohmann::json;

// ---- kxt::scale(x, w) = x * w, contiguous f32, with an in-place form ----

void scale_meta(const ops::OpCall& c, ops::MetaOut& out) {
  const Tensor &x = c.args.tensor(0), &w = c.args.tensor(1);
  KILN_CHECK(x.shape() == w.shape() && x.dtype() == DType::f32 && w.dtype() == DType::f32, shape,
             "[{}] expects two f32 tensors of one shape, got {} and {}", ops::op_name(c.op),
             x.meta_str(), w.meta_str());
  out.fresh(x.shape(), DType::f32);
}
void scale_cpu(const ops::OpCall& c, std::span<Tensor> outs) {
  Tensor x = c.args.tensor(0), w = c.args.tensor(1);
  KILN_CHECK(x.is_contiguous() && w.is_contiguous(), value, "[kxt::scale] needs contiguous inputs");
  const float *px = x.data<float>(), *pw = w.data<float>();
  float* po = outs[0].data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) po[i] = px[i] * pw[i];
}

ops::OpKind scale_op() {
  static const ops::OpKind k = define_op({.schema = "kxt::scale(Tensor x, Tensor w) -> Tensor",
                                          .meta = scale_meta,
                                          .library = "the kxt test library",
                                          .cpu = scale_cpu});
  return k;
}
// Derived from kxt::scale as built-in in-place ops are from their functional form.
ops::OpKind scale_inplace_op() {
  scale_op();
  static const ops::OpKind k =
      define_op({.schema = "kxt::scale_(Tensor(a!) x, Tensor w) -> Tensor(a!)", .cpu = scale_cpu});
  return k;
}
// A mutating op with its own meta and no functional form: functionalization rejects it (E2).
ops::OpKind bump_op() {
  static const ops::OpKind k = define_op({.schema = "kxt::bump_(Tensor(a!) x) -> Tensor(a!)",
                                          .meta =
                                              [](const ops::OpCall& c, ops::MetaOut& out) {
                                                ops::TensorMeta m;
                                                m.shape = c.args.tensor(0).shape();
                                                m.dtype = c.args.tensor(0).dtype();
                                                m.alias = ops::TensorMeta::Alias::self;
                                                out.outs.push_back(m);
                                              },
                                          .cpu =
                                              [](const ops::OpCall& c, std::span<Tensor>) {
                                                Tensor x = c.args.tensor(0);
                                                for (int64_t i = 0; i < x.numel(); ++i)
                                                  x.data<float>()[i] += 1;
                                              },
                                          .differentiable = false});
  return k;
}

Tensor scale(const Tensor& x, const Tensor& w) { return call_op(scale_op(), {x, w})[0]; }

// kx::gated_mlp composed from built-in ops: the reference its kernels must match.
Tensor reference_mlp(const Tensor& x, const Tensor& wg, const Tensor& wu, const Tensor& wd) {
  return matmul(silu(matmul(x, t(wg))) * matmul(x, t(wu)), t(wd));
}

std::string tmp_path(const std::string& name) {
  return ::testing::TempDir() + "kiln_ext_" + name + ".kiln";
}

TEST(Extension, RegistrationRules) {
  auto rejected = [](std::string_view schema, const std::string& needle) {
    expect_error([&] { define_op({.schema = schema, .meta = scale_meta, .cpu = scale_cpu}); },
                 ErrorKind::value, needle);
  };
  rejected("scale2(Tensor x, Tensor w) -> Tensor", "must be 'namespace::op'");
  rejected("kxt::(Tensor x) -> Tensor", "must be 'namespace::op'");
  rejected("kxt::view_of(Tensor(a) x) -> Tensor(a)", "cannot return a view");
  rejected("kxt::writes(Tensor(a!) x, Tensor w) -> Tensor", "must return it");
  rejected("kxt::writes2(Tensor(a!) x, Tensor(b!) w) -> Tensor(a!)", "returns fresh tensors only");
  rejected("kxt::writes3(Tensor(a!) x, Tensor(b!) w) -> (Tensor, Tensor, Tensor)",
           "writes and returns at most 4 tensors together");
  rejected("kxt::bad(Tensor x", "malformed op schema");
  rejected("kxt::bad2(Blob x) -> Tensor", "unknown type 'Blob'");
  scale_op();
  rejected("kxt::scale(Tensor x, Tensor w) -> Tensor",
           "[kxt::scale] is already registered (by the kxt test library)");
  expect_error([] { define_op({.schema = "kxt::lonely_(Tensor(a!) x) -> Tensor(a!)"}); },
               ErrorKind::value,
               "only an in-place op 'ns::op_' whose functional form 'ns::op' is registered");
  expect_error(
      [] {
        define_op({.schema = "kxt::make(int n) -> Tensor",
                   .meta = scale_meta,
                   .device_rule = ops::DeviceRule::factory});
      },
      ErrorKind::value, "needs a Device argument");
}

TEST(Extension, IsATableEntry) {
  ops::OpKind k = kx::gated_mlp_op();
  EXPECT_FALSE(ops::is_builtin(k));
  EXPECT_EQ(ops::op_from_name("kx::gated_mlp"), k);
  EXPECT_EQ(ops::op_name(k), "kx::gated_mlp");
  const ops::OpInfo& info = ops::op_info(k);
  ASSERT_EQ(info.schema.args.size(), 5u);
  EXPECT_EQ(info.schema.args[4].name, "workspace");
  EXPECT_FALSE(info.is_inplace());
  EXPECT_TRUE(ops::op_info(scale_inplace_op()).is_inplace());
  EXPECT_EQ(ops::op_info(scale_inplace_op()).functional, scale_op());
  auto all = ops::extension_ops();
  EXPECT_NE(std::find(all.begin(), all.end(), k), all.end());
  expect_error([] { ops::op_from_name("kx::nope"); }, ErrorKind::unsupported,
               "no extension registered it");
}

// (E1) Eagerly: the kernel runs on its tensors' device, checked like a built-in.
TEST(Extension, RunsEagerlyOnAVirtualDevice) {
  autograd::NoGradGuard no_grad;
  Device d("cpu:2");
  kx::GatedMLP m(8, 24, 6, 5, d);
  Tensor x = randn({5, 8}, {.device = d});
  Tensor y = m(x);
  EXPECT_EQ(y.device(), d);
  EXPECT_EQ(y.shape(), Dims({5, 6}));
  EXPECT_TRUE(
      all_close(y, to_vector<double>(reference_mlp(x, m.w_gate, m.w_up, m.w_down)), 1e-5, 1e-6));
  // fewer rows than the workspace holds, and a transposed (non-contiguous) input
  Tensor xt = t(randn({8, 3}, {.device = d}));
  EXPECT_TRUE(all_close(m(xt), to_vector<double>(reference_mlp(xt, m.w_gate, m.w_up, m.w_down)),
                        1e-5, 1e-6));

  // (D2) arguments on two devices, before any work
  Tensor x1 = randn({5, 8}, {.device = Device("cpu:1")});
  expect_error(
      [&] { m(x1); }, ErrorKind::device_mismatch,
      "[kx::gated_mlp] Expected all tensors to be on the same device, but found at least two "
      "devices, cpu:1 (argument 'x') and cpu:2 (argument 'w_gate')");
  // the meta function's errors name the op
  expect_error(
      [&] {
        kx::gated_mlp(randn({9, 8}, {.device = d}), m.w_gate, m.w_up, m.w_down, m.workspace);
      },
      ErrorKind::shape, "[kx::gated_mlp] the workspace holds 240 elements; 9 rows need 432");
  // meta tensors: shapes only
  Tensor meta = kx::gated_mlp(empty({5, 8}, {.device = Device("meta")}),
                              to(m.w_gate, Device("meta")), to(m.w_up, Device("meta")),
                              to(m.w_down, Device("meta")), to(m.workspace, Device("meta")));
  EXPECT_EQ(meta.device(), Device("meta"));
  EXPECT_EQ(meta.shape(), Dims({5, 6}));
  // an op without a kernel for a device
  static const ops::OpKind meta_only =
      define_op({.schema = "kxt::meta_only(Tensor x, Tensor w) -> Tensor", .meta = scale_meta});
  expect_error(
      [&] {
        call_op(meta_only, {x, x});
      },
      ErrorKind::unsupported, "[kxt::meta_only] has no kernel for device cpu:2");
}

// (D8) A kernel that takes another device's BLAS handle is stopped, naming both.
TEST(Extension, KernelsAreCheckedLikeBuiltIns) {
  static const ops::OpKind wrong = define_op(
      {.schema = "kxt::mm_on_host_handle(Tensor a, Tensor b) -> Tensor",
       .meta =
           [](const ops::OpCall& c, ops::MetaOut& out) {
             out.fresh(Dims{c.args.tensor(0).shape()[0], c.args.tensor(1).shape()[1]}, DType::f32);
           },
       .cpu =
           [](const ops::OpCall& c, std::span<Tensor> outs) {
             gemm(blas_handle(Device("cpu:0")), c.args.tensor(0), c.args.tensor(1), outs[0]);
           },
       .differentiable = false});
  Tensor a = ones({2, 3}), b = ones({3, 4});
  EXPECT_TRUE(all_close(call_op(wrong, {a, b})[0], std::vector<double>(8, 3.0)));  // right on cpu:0
  Device d("cpu:3");
  expect_error(
      [&] {
        call_op(wrong, {to(a, d), to(b, d)});
      },
      ErrorKind::device_mismatch,
      "[kxt::mm_on_host_handle] kernel for cpu:3 used the BLAS handle of cpu:0");
  // kiln::gemm checks its operands against the handle outside kernels too
  expect_error(
      [&] {
        gemm(blas_handle(Device("cpu:0")), to(a, d), b, zeros({2, 4}));
      },
      ErrorKind::device_mismatch,
      "[gemm] argument 'a' is on cpu:3 but the BLAS handle belongs to cpu:0");
}

// (E1) A kernel whose output is not what its meta function said (here: it swaps in a
// tensor of another shape) is an error, as the same lie by a built-in op would be.
TEST(Extension, KernelOutputsMustMatchTheMetaFunction) {
  static const ops::OpKind liar =
      define_op({.schema = "kxt::liar(Tensor a) -> Tensor",
                 .meta = [](const ops::OpCall& c,
                            ops::MetaOut& out) { out.fresh(c.args.tensor(0).shape(), DType::f32); },
                 .cpu = [](const ops::OpCall& c,
                           std::span<Tensor> outs) { outs[0] = zeros({7}, {.device = c.device}); },
                 .differentiable = false});
  expect_error(
      [&] {
        call_op(liar, {ones({2, 3})});
      },
      ErrorKind::value,
      "[kxt::liar] the kernel's output 0 is f32[7]@cpu:0, but the op's meta function says f32[2, "
      "3]@cpu:0");
}

// (E1) Fake tensors and make_fx: for a device this machine lacks.
TEST(Extension, FakeAndTraced) {
  autograd::NoGradGuard no_grad;
  kx::GatedMLP m(8, 24, 6, 5, Device("cpu:0"));
  Tensor x = randn({5, 8});
  {
    FakeMode fake;
    Device cuda("cuda:0");
    auto on_cuda = [&](const Tensor& t) { return to(fake.from_real(t), cuda); };
    Tensor y = kx::gated_mlp(on_cuda(x), on_cuda(m.w_gate), on_cuda(m.w_up), on_cuda(m.w_down),
                             on_cuda(m.workspace));
    EXPECT_TRUE(y.is_fake());
    EXPECT_EQ(y.device(), cuda);
    EXPECT_EQ(y.shape(), Dims({5, 6}));
  }
  ir::Graph g = make_fx([&](const TensorList& in) { return TensorList{m(in[0])}; }, {x});
  std::string text = g.str();
  EXPECT_NE(text.find("%gated_mlp : f32[5,6]@cpu:0 = kx::gated_mlp(%arg0, %const"),
            std::string::npos)
      << text;
}

// (E2) In-place extension ops: derived ones functionalize, others are rejected by name.
TEST(Extension, Functionalized) {
  Tensor x = full({3}, 2.0), w = full({3}, 5.0);
  call_op(scale_inplace_op(), {x, w});
  EXPECT_TRUE(all_close(x, {10, 10, 10}));
  passes::CapturedProgram p = passes::capture(
      [](const TensorList& in) {
        call_op(scale_inplace_op(), {in[0], in[1]});
        return TensorList{in[0] + 1};
      },
      {x, w});
  std::string text = p.graph.str();
  EXPECT_NE(text.find("= kxt::scale(%arg0, %arg1)"), std::string::npos) << text;
  EXPECT_EQ(text.find("kxt::scale_"), std::string::npos) << text;
  EXPECT_TRUE(p.inputs[0].data_mutated);
  call_op(bump_op(), {x});  // eagerly it runs
  EXPECT_TRUE(all_close(x, {11, 11, 11}));
}

// An in-place op with no functional form is captured through its auto-functionalized
// twin (Note [Auto-functionalized extension ops]), as PyTorch's auto_functionalized:
// the graph stays functional, the write is a write-back, and the program runs like eager.
// `traced` exported with fake tensors for cuda:0, saved, loaded onto cpu:0 and run twice
// by the executor on `x`, each run's output equal to the `eager` module's; the loaded
// program is returned.
ExportedProgram exported_for_gpu_run_on_cpu(nn::Module& traced, nn::Module& eager, const Tensor& x,
                                            const std::string& name) {
  ExportedProgram program = export_program(traced, {x}, {.device = Device("cuda:0")});
  std::string path = tmp_path(name);
  save(program, path);
  ExportedProgram loaded = load_program(path, {{Device("cuda:0"), Device("cpu:0")}});
  std::filesystem::remove(path);
  runtime::Executor exec(loaded);
  for (int step = 0; step < 2; ++step) {
    Tensor want = eager(TensorList{x})[0];
    EXPECT_TRUE(all_close(exec.run({x})[0], to_vector<double>(want))) << name << " " << step;
  }
  return loaded;
}

struct Bumped : nn::Module {
  Tensor& count = register_buffer("count", zeros({3}));
  TensorList forward(const TensorList& in) override {
    call_op(bump_op(), {count});
    return {in[0] * count};
  }
};

TEST(Extension, InPlaceOpsWithoutAFunctionalFormAreAutoFunctionalized) {
  ops::OpKind bump = bump_op();  // registering it registers its twin
  ops::OpKind twin = ops::op_from_name("kxt::auto_functionalized_bump_");
  EXPECT_EQ(twin, *ops::extension_op(bump)->auto_functional);
  EXPECT_EQ(ops::extension_op(twin)->schema_text,
            "kxt::auto_functionalized_bump_(Tensor x) -> Tensor");
  EXPECT_FALSE(ops::op_info(twin).is_inplace());
  passes::CapturedProgram p = passes::capture(
      [](const TensorList& in) {
        call_op(bump_op(), {in[0]});
        return TensorList{in[0] * 2};
      },
      {full({3}, 10.0)}, {.write_back = passes::WriteBack::in_graph});
  std::string text = p.graph.str();
  EXPECT_NE(text.find("= kxt::auto_functionalized_bump_(%arg0)"), std::string::npos) << text;
  EXPECT_EQ(text.find("kxt::bump_("), std::string::npos) << text;
  EXPECT_NE(text.find("copy_(%arg0, %auto_functionalized_bump_)"), std::string::npos) << text;
  Tensor y = full({3}, 10.0);
  TensorList out = ir::interpret(p.graph, {y});
  EXPECT_TRUE(all_close(out[0], {22, 22, 22}));
  EXPECT_TRUE(all_close(y, {11, 11, 11}));  // written back, as eager writes it

  // Exported: the buffer's write is a buffer mutation; saved, loaded and run twice it
  // counts like the eager module.
  Bumped eager, traced;
  ExportedProgram loaded = exported_for_gpu_run_on_cpu(traced, eager, tensor({1, 2, 3}), "bumped");
  EXPECT_NE(loaded.graph.str().find("kxt::auto_functionalized_bump_"), std::string::npos);
  EXPECT_TRUE(all_close(traced.count, {0, 0, 0}));  // the program owns its state
}

// kxt::step2 writes two arguments, as PyTorch custom ops may (mutates_args): x += z and
// y *= z, and returns x + y (fresh). Its kernel walks 1-d tensors by their strides, so it
// runs on views as given.
ops::OpKind step2_op() {
  static const ops::OpKind k =
      define_op({.schema = "kxt::step2(Tensor(a!) x, Tensor(b!) y, Tensor z) -> Tensor",
                 .meta =
                     [](const ops::OpCall& c, ops::MetaOut& out) {
                       for (size_t i = 0; i < 2; ++i)
                         KILN_CHECK(c.args.tensor(i).shape() == c.args.tensor(2).shape(), shape,
                                    "[kxt::step2] argument {} has shape {}, z {}", i,
                                    c.args.tensor(i).shape().str(), c.args.tensor(2).shape().str());
                       out.fresh(c.args.tensor(2).shape(), c.args.tensor(2).dtype());
                     },
                 .library = "the kxt test library",
                 .cpu =
                     [](const ops::OpCall& c, std::span<Tensor> outs) {
                       Tensor x = c.args.tensor(0), y = c.args.tensor(1), z = c.args.tensor(2);
                       auto at = [](const Tensor& t, int64_t i) -> float& {
                         return t.data<float>()[i * t.strides()[0]];
                       };
                       for (int64_t i = 0; i < z.numel(); ++i) {
                         at(x, i) += at(z, i);
                         at(y, i) *= at(z, i);
                         outs[0].data<float>()[i] = at(x, i) + at(y, i);
                       }
                     },
                 .differentiable = false});
  return k;
}

struct TwoStates : nn::Module {
  Tensor& sum = register_buffer("sum", zeros({3}));
  Tensor& prod = register_buffer("prod", ones({3}));
  TensorList forward(const TensorList& in) override {
    Tensor both = call_op(step2_op(), {sum, prod, in[0]})[0];
    return {both * 2};
  }
};

// An op that writes several arguments runs in place eagerly and is captured as its
// functional twin plus one write-back per argument (Note [Extension ops that write
// several arguments]), as PyTorch's auto_functionalized: values equal eager's through a
// view, under capture, and in a saved and loaded program run twice.
TEST(Extension, OpsThatWriteSeveralArgumentsMatchEagerEverywhere) {
  ops::OpKind step2 = step2_op();
  const ops::ExtensionOp& e = *ops::extension_op(step2);
  EXPECT_FALSE(e.info.is_inplace());
  ASSERT_TRUE(e.auto_functional);
  EXPECT_EQ(ops::extension_op(*e.auto_functional)->schema_text,
            "kxt::auto_functionalized_step2(Tensor x, Tensor y, Tensor z) -> (Tensor, Tensor, "
            "Tensor)");

  // Eager: in place on the arguments, one version each, a view's base written.
  Tensor base = tensor({1, 9, 2, 9, 3, 9}), y = tensor({2, 2, 2}), z = tensor({1, 2, 3});
  Tensor x = slice(base, 0, 0, 6, 2);
  uint32_t vx = base.version(), vy = y.version();
  Tensor both = call_op(step2, {x, y, z})[0];
  EXPECT_TRUE(all_close(base, {2, 9, 4, 9, 6, 9}));
  EXPECT_TRUE(all_close(y, {2, 4, 6}));
  EXPECT_TRUE(all_close(both, {4, 8, 12}));
  EXPECT_EQ(base.version(), vx + 1);
  EXPECT_EQ(y.version(), vy + 1);

  // Captured: the twin and two copy_ write-backs, one of them into an input's view.
  passes::CapturedProgram p = passes::capture(
      [&](const TensorList& in) {
        Tensor xv = slice(in[0], 0, 0, 6, 2);
        Tensor r = call_op(step2_op(), {xv, in[1], in[2]})[0];
        return TensorList{r + 1};
      },
      {tensor({1, 9, 2, 9, 3, 9}), tensor({2, 2, 2}), z},
      {.write_back = passes::WriteBack::in_graph});
  std::string text = p.graph.str();
  EXPECT_NE(text.find("kxt::auto_functionalized_step2("), std::string::npos) << text;
  EXPECT_EQ(text.find("kxt::step2("), std::string::npos) << text;
  TensorList in = {tensor({1, 9, 2, 9, 3, 9}), tensor({2, 2, 2}), z};
  TensorList out = ir::interpret(p.graph, in);
  EXPECT_TRUE(all_close(out[0], {5, 9, 13}));
  EXPECT_TRUE(all_close(in[0], {2, 9, 4, 9, 6, 9}));
  EXPECT_TRUE(all_close(in[1], {2, 4, 6}));

  // Exported with fake tensors for another device, saved, loaded, run twice: the buffers'
  // writes are the program's state, as the eager module's are its own.
  TwoStates eager, traced;
  exported_for_gpu_run_on_cpu(traced, eager, tensor({1, 2, 3}), "step2");
  EXPECT_TRUE(all_close(eager.sum, {2, 4, 6}));
  EXPECT_TRUE(all_close(traced.sum, {0, 0, 0}));  // the program owns its state

  // Autograd cannot see into the kernel: a written argument that requires grad is refused
  // by name; one only read may require grad (the result then does not).
  Tensor leaf = tensor({1, 2, 3}).set_requires_grad();
  expect_error(
      [&] {
        call_op(step2, {tensor({0, 0, 0}), leaf, z});
      },
      ErrorKind::unsupported, "[kxt::step2] writes argument 'y', which requires grad");
  Tensor r = call_op(step2, {tensor({0, 0, 0}), tensor({1, 1, 1}), leaf})[0];
  EXPECT_FALSE(r.requires_grad());  // declared not differentiable
  expect_error(
      [] {
        define_op({.schema = "kxt::step3(Tensor(a!) x, Tensor(b!) y) -> ()",
                   .meta = [](const ops::OpCall&, ops::MetaOut&) {},
                   .backward = [](autograd::GradCtx&) {}});
      },
      ErrorKind::unsupported, "[define_op] kxt::step3 writes several arguments");
  expect_error(
      [&] {
        call_op(step2, {tensor({0, 0}), y, z});
      },
      ErrorKind::shape, "[kxt::step2] argument 0 has shape [2]");
  // Written arguments over one memory are refused; disjoint views of one base are not.
  expect_error(
      [&] {
        call_op(step2, {y, y, z});
      },
      ErrorKind::value, "[kxt::step2] writes arguments 'x' and 'y', which overlap in memory");
  Tensor halves = zeros({6});
  call_op(step2, {slice(halves, 0, 0, 3), slice(halves, 0, 3, 6), z});
  EXPECT_TRUE(all_close(halves, {1, 2, 3, 0, 0, 0}));
  Tensor grid = ones({3, 2});  // interleaved columns: their spans meet, their elements not
  call_op(step2, {select(grid, 1, 0), select(grid, 1, 1), z});
  EXPECT_TRUE(all_close(grid, {2, 1, 3, 2, 4, 3}));
  // offsets 0, 2, 4 and 1, 2, 3: one element shared
  expect_error(
      [&] {
        call_op(step2, {select(grid, 1, 0), as_strided(grid, {3}, {1}, 1), z});
      },
      ErrorKind::value, "which overlap in memory");
}

// (E3) Traced for cuda:0 with fake tensors, saved, loaded onto cpu:1, run by the executor.
TEST(Extension, ExportedProgramsRunAnywhere) {
  autograd::NoGradGuard no_grad;
  kx::GatedMLP m(8, 24, 6, 5, Device("cpu:1"));
  Tensor x = randn({5, 8}, {.device = Device("cpu:1")});
  Tensor eager = m(x);
  std::string path = tmp_path("export");
  save(export_program(m, {x}, {.device = Device("cuda:0")}), path);
  json prog;
  testing::edit_program(path, [&](json& p) { prog = p; });
  ASSERT_TRUE(prog.contains("extension_ops"));
  EXPECT_EQ(prog["extension_ops"][0]["name"], "kx::gated_mlp");
  EXPECT_EQ(prog["extension_ops"][0]["schema"],
            "kx::gated_mlp(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down, Tensor workspace) "
            "-> Tensor");
  EXPECT_EQ(prog["extension_ops"][0]["library"], "kx (examples/extension)");

  ExportedProgram loaded = load_program(path, {{Device("cuda:0"), Device("cpu:1")}});
  ASSERT_EQ(loaded.workspaces.size(), 1u);  // (D6) re-created where it runs, never saved
  runtime::Executor exec(loaded);
  for (int i = 0; i < 2; ++i)
    EXPECT_TRUE(all_close(exec.run({x})[0], to_vector<double>(eager), 0, 0));
  EXPECT_TRUE(all_close(loaded.run({x})[0], to_vector<double>(eager), 0, 0));
  std::remove(path.c_str());
}

TEST(Extension, LoadingNeedsTheOpWithItsSchema) {
  autograd::NoGradGuard no_grad;
  kx::GatedMLP m(8, 24, 6, 5, Device("cpu:0"));
  std::string path = tmp_path("load");
  save(export_program(m, {randn({5, 8})}), path);
  std::string good = testing::read_all(path);
  auto rename = [](json& p, const std::string& name) {
    p["extension_ops"][0]["name"] = name;
    for (json& n : p["graph"])
      if (n["op"] == "call" && n["target"] == "kx::gated_mlp") n["target"] = name;
  };
  testing::edit_program(path, [&](json& p) { rename(p, "kx::gone"); });
  expect_error(
      [&] { load_program(path); }, ErrorKind::unsupported,
      "uses the extension op 'kx::gone' (from kx (examples/extension)), which is not registered in "
      "this process");
  testing::write_all(path, good);
  testing::edit_program(path, [](json& p) {
    p["extension_ops"][0]["schema"] =
        "kx::gated_mlp(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down) -> Tensor";
  });
  expect_error(
      [&] { load_program(path); }, ErrorKind::unsupported,
      "was exported with the extension op 'kx::gated_mlp' (from kx (examples/extension)) as "
      "'kx::gated_mlp(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down) -> Tensor', but the "
      "registered op is 'kx::gated_mlp(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down, Tensor "
      "workspace) -> Tensor'");
  testing::write_all(path, good);
  testing::edit_program(path, [](json& p) { p.erase("extension_ops"); });
  expect_error([&] { load_program(path); }, ErrorKind::format,
               "calls the extension op 'kx::gated_mlp', which the program's extension_ops table "
               "does not list");
  testing::write_all(path, good);
  EXPECT_NO_THROW(load_program(path));
  std::remove(path.c_str());
}

// (G) An extension op's backward formula is used like a built-in's.
TEST(Extension, Differentiated) {
  kx::GatedMLP m(8, 24, 6, 5, Device("cpu:1"));
  Tensor x = randn({5, 8}, {.device = Device("cpu:1"), .requires_grad = true});
  sum(m(x) * m(x)).backward();
  TensorList got = {x.grad(), m.w_gate.grad(), m.w_up.grad(), m.w_down.grad()};
  Tensor xr = x.detach();
  xr.set_requires_grad(true);
  Tensor wg = m.w_gate.detach(), wu = m.w_up.detach(), wd = m.w_down.detach();
  for (Tensor* w : {&wg, &wu, &wd}) w->set_requires_grad(true);
  Tensor r = reference_mlp(xr, wg, wu, wd);
  sum(r * r).backward();
  TensorList want = {xr.grad(), wg.grad(), wu.grad(), wd.grad()};
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(all_close(got[i], to_vector<double>(want[i]), 1e-4, 1e-5)) << "gradient " << i;
  EXPECT_FALSE(m.workspace.grad().defined());

  // (E4) As PyTorch: an op without a backward runs forward (with a warning) and fails at
  // backward(), naming the op.
  Tensor a = ones({2}, {.requires_grad = true});
  reset_warnings();
  std::vector<Warning> warned;
  Tensor y;
  {
    WarningHandlerGuard capture([&](const Warning& w) { warned.push_back(w); });
    y = scale(a, a);
  }
  ASSERT_EQ(warned.size(), 1u);
  EXPECT_NE(warned[0].message.find("[kxt::scale] has no backward formula"), std::string::npos);
  EXPECT_TRUE(y.requires_grad());
  expect_error([&] { sum(y).backward(); }, ErrorKind::unsupported,
               "[kxt::scale] has no backward formula: backward() reached it through an argument "
               "that requires grad");
  EXPECT_FALSE(a.grad().defined());
  EXPECT_FALSE(call_op(bump_op(), {ones({2})})[0].requires_grad());
  {
    autograd::NoGradGuard no_grad;
    EXPECT_TRUE(all_close(scale(a, a), {1, 1}));
  }
}

// (E4) Registration in steps, as torch.library: the schema, then the fake function, the
// kernels and the backward, each separately; a missing piece is an error when needed.
TEST(Extension, RegisteredInSteps) {
  ops::OpKind twice = define_schema("kxs::twice(Tensor x) -> Tensor", "the staged test");
  EXPECT_EQ(ops::op_from_name("kxs::twice"), twice);  // it exists: programs can name it
  Tensor x = tensor({1, 2, 3}, {}, {.requires_grad = true});
  expect_error([&] { call_op(twice, {x}); }, ErrorKind::unsupported,
               "[kxs::twice] has no fake (meta) function yet: register_fake(kxs::twice, ...)");
  {
    FakeMode fake;
    Tensor f = empty({3});
    expect_error([&] { call_op(twice, {f}); }, ErrorKind::unsupported,
                 "has no fake (meta) function yet");
  }
  register_fake(twice, [](const ops::OpCall& c, ops::MetaOut& out) {
    out.fresh(c.args.tensor(0).shape(), c.args.tensor(0).dtype());
  });
  {
    FakeMode fake;  // tracing works with the fake function alone
    EXPECT_EQ(call_op(twice, {empty({4, 2})})[0].shape(), Dims({4, 2}));
  }
  expect_error([&] { call_op(twice, {x.detach()}); }, ErrorKind::unsupported,
               "[kxs::twice] has no kernel for device cpu:0");
  register_kernel(twice, DeviceType::cpu, [](const ops::OpCall& c, std::span<Tensor> outs) {
    const Tensor& in = c.args.tensor(0);
    KILN_CHECK(in.is_contiguous(), value, "contiguous inputs only");
    for (int64_t i = 0; i < in.numel(); ++i) outs[0].data<float>()[i] = 2 * in.data<float>()[i];
  });
  EXPECT_TRUE(all_close(call_op(twice, {x.detach()})[0], {2, 4, 6}));
  reset_warnings();
  Tensor y;
  {
    WarningHandlerGuard quiet([](const Warning&) {});
    y = call_op(twice, {x})[0];  // no backward yet: the forward runs, backward() fails
  }
  expect_error([&] { sum(y).backward(); }, ErrorKind::unsupported,
               "[kxs::twice] has no backward formula");
  register_backward(twice, [](autograd::GradCtx& g) { g.set(0, mul(g.grad(), 2.0)); });
  sum(call_op(twice, {x})[0] * x).backward();  // d(2x * x)/dx = 4x
  EXPECT_TRUE(all_close(x.grad(), {4, 8, 12}));
  // each piece once
  expect_error([&] { register_kernel(twice, DeviceType::cpu, scale_cpu); }, ErrorKind::value,
               "[register_kernel] kxs::twice has a cpu kernel already");
  expect_error([&] { register_fake(twice, scale_meta); }, ErrorKind::value,
               "has a fake (meta) function already");
  expect_error([&] { register_fake(ops::OpKind::add, scale_meta); }, ErrorKind::value,
               "add is a built-in op");
}

}  // namespace
}  // namespace kiln

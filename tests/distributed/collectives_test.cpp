// Collectives as ops (C2) in one process: meta functions, tracing for any number of
// ranks with fake tensors, export and load, group binding by name, and running on the
// local group (one rank). The multi-process runs are in mpi_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::expect_error;

TEST(C2, CollectivesTraceForAnyGroupSizeWithFakeTensors) {
  auto fn = [](const TensorList& in) {
    Tensor g = all_gather_into_tensor(in[0], 8, "dp");          // [16, 4]
    Tensor r = reduce_scatter_tensor(g * 2.0, "sum", 8, "dp");  // [2, 4]
    Tensor a = wait_tensor(all_reduce(r, "avg", "tp"));
    return TensorList{a, all_to_all_single(in[0], 2, "dp")};
  };
  ir::Graph g = make_fx(fn, {empty({2, 4}, {.device = Device("cpu:1")})});
  std::string text = g.str();
  EXPECT_NE(text.find("f32[16,4]@cpu:1 = all_gather_into_tensor(%arg0, group_size=8, group='dp')"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("reduce_scatter_tensor("), std::string::npos) << text;
  // (C5) each captured collective is read through its wait_tensor
  EXPECT_NE(text.find("wait_tensor_1 : f32[2,4]@cpu:1 = wait_tensor(%reduce_scatter_tensor)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("all_reduce(%wait_tensor_1, reduce_op='avg', group='tp')"), std::string::npos)
      << text;
  EXPECT_NE(text.find("= wait_tensor(%all_gather_into_tensor)"), std::string::npos) << text;
}

TEST(C2, MetaFunctionsCheckArguments) {
  FakeMode fake;
  Tensor x = empty({6, 2});
  expect_error([&] { reduce_scatter_tensor(x, "sum", 4, "dp"); }, ErrorKind::shape,
               "dim 0 of f32[6, 2]@cpu:0 is not divisible by the group size 4");
  expect_error([&] { all_reduce(x, "mean", "dp"); }, ErrorKind::value, "unknown reduction 'mean'");
  expect_error([&] { all_gather_into_tensor(x, 0, "dp"); }, ErrorKind::value,
               "group_size must be positive");
}

TEST(C2, RunningBindsGroupsByName) {
  Tensor x = tensor({1, 2, 3, 4}, {2, 2});
  dist::bind_group("nowhere", nullptr);
  expect_error([&] { all_reduce(x, "sum", "nowhere"); }, ErrorKind::value,
               "[all_reduce] no process group is bound to 'nowhere'");
  dist::bind_group("one", dist::local_group());
  EXPECT_TRUE(all_close(all_reduce(x, "sum", "one"), {1, 2, 3, 4}));
  EXPECT_TRUE(all_close(all_gather_into_tensor(x, 1, "one"), {1, 2, 3, 4}));
  expect_error([&] { all_gather_into_tensor(x, 2, "one"); }, ErrorKind::value,
               "was traced for a group of 2 ranks, but 'one' has 1");
  // (C1) The fake group moves data as PyTorch's does: as if every rank held this one's input.
  dist::bind_group("pretend", dist::fake_group(1, 2));
  EXPECT_TRUE(all_close(all_reduce(x, "sum", "pretend"), {1, 2, 3, 4}));
  EXPECT_TRUE(all_close(all_gather_into_tensor(x, 2, "pretend"), {1, 2, 3, 4, 1, 2, 3, 4}));
  EXPECT_TRUE(all_close(reduce_scatter_tensor(x, "sum", 2, "pretend"), {3, 4}));  // rank 1's chunk
  EXPECT_TRUE(all_close(all_to_all_single(x, 2, "pretend"), {1, 2, 3, 4}));
  // Gradients flow through collectives (here a group of one).
  Tensor w = tensor({1, 2}, {}, {.requires_grad = true});
  sum(all_reduce(w * w, "sum", "one")).backward();
  EXPECT_TRUE(all_close(w.grad(), {2, 4}));
}

// PyTorch's other functional forms (broadcast, all_reduce_, gather/scatter along a dim,
// _coalesced): traced as PyTorch builds them, and on the fake group moving data as if
// every rank held this one's input (the multi-rank values: Mpi.FunctionalCollectiveForms).
TEST(C2, TheOtherFunctionalFormsTraceAndRunOnTheFakeGroup) {
  auto fn = [](const TensorList& in) {
    Tensor x = in[0];  // [4, 6]
    all_reduce_(x, "sum", "dp");
    TensorList c = all_reduce_coalesced({x, in[1]}, "avg", "dp");
    return TensorList{broadcast(x, 1, "dp"), all_gather_tensor(x, 1, 2, "dp"),
                      reduce_scatter_tensor(x, "sum", 1, 2, "dp"), c[0], c[1]};
  };
  ir::Graph g = make_fx(fn, {empty({4, 6}), empty({3})});
  std::string text = g.str();
  for (const char* part :
       {"all_reduce_(%arg0, reduce_op='sum', group='dp')",
        "broadcast(%all_reduce_, src=1, group='dp')", "f32[8,6]@cpu:0 = all_gather_into_tensor(",
        "f32[4,12]@cpu:0 = cat(", "f32[8,3]@cpu:0 = cat(", "f32[27]@cpu:0 = cat(",
        "f32[27]@cpu:0 = all_reduce("})
    EXPECT_NE(text.find(part), std::string::npos) << part << "\n" << text;
  // Functionalized, the in-place form is the functional op and a write-back of the input.
  passes::CapturedProgram f =
      passes::capture(fn, {empty({4, 6}), empty({3})}, {.write_back = passes::WriteBack::in_graph});
  std::string ftext = f.graph.str();
  EXPECT_EQ(ftext.find("all_reduce_("), std::string::npos) << ftext;
  EXPECT_NE(ftext.find("copy_(%arg0, %all_reduce)"), std::string::npos) << ftext;

  dist::bind_group("pretend", dist::fake_group(1, 2));
  Tensor x = tensor({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(all_close(broadcast(x, 0, "pretend"), {1, 2, 3, 4}));
  Tensor y = clone(x);
  all_reduce_(y, "sum", "pretend");
  EXPECT_TRUE(all_close(y, {1, 2, 3, 4}));
  EXPECT_TRUE(all_close(all_gather_tensor(x, 1, 2, "pretend"), {1, 2, 1, 2, 3, 4, 3, 4}));
  EXPECT_TRUE(
      all_close(reduce_scatter_tensor(x, "sum", 1, 2, "pretend"), {2, 4}));  // rank 1's column
  TensorList gathered = all_gather_into_tensor_coalesced({x, tensor({5})}, 2, "pretend");
  EXPECT_TRUE(all_close(gathered[0], {1, 2, 3, 4, 1, 2, 3, 4}));
  EXPECT_EQ(gathered[0].shape(), Dims({4, 2}));
  EXPECT_TRUE(all_close(gathered[1], {5, 5}));
  TensorList scattered = reduce_scatter_tensor_coalesced({x, tensor({5, 6})}, "sum", 2, "pretend");
  EXPECT_TRUE(all_close(scattered[0], {3, 4}));
  EXPECT_TRUE(all_close(scattered[1], {6}));
  // scatter: what came from src (rank 0) -- the fake group's all_to_all copies its input,
  // as PyTorch's, so that is x's chunk 0
  EXPECT_TRUE(all_close(scatter_tensor(x, 0, 2, "pretend"), {1, 2}));
  expect_error([&] { scatter_tensor(x, 2, 2, "pretend"); }, ErrorKind::index,
               "[scatter_tensor] src 2 is not a rank of a group of 2");
  // uneven all_to_all: the fake group sends what this rank sends (rows 1..2 for rank 1),
  // as if from every rank; the program checks the split sizes against the group
  Tensor rows = tensor({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor got = all_to_all_single(rows, {2, 2}, {1, 2}, "pretend");
  EXPECT_EQ(got.shape(), Dims({4, 2}));
  EXPECT_TRUE(all_close(got, {3, 4, 5, 6, 3, 4, 5, 6}));
  expect_error(
      [&] {
        all_to_all_single(rows, {2, 2, 2}, {1, 1, 1}, "pretend");
      },
      ErrorKind::value, "was traced for a group of 3 ranks, but 'pretend' has 2");
  expect_error(
      [&] {
        all_to_all_single(rows, {2, 2}, {1, 1}, "pretend");
      },
      ErrorKind::shape, "input split sizes sum to 2 rows, but the input f32[3, 2]@cpu:0 has 3");
  expect_error([&] { broadcast(x, 2, "pretend"); }, ErrorKind::index,
               "[broadcast] src 2 is not a rank of 'pretend' (2 ranks)");
  expect_error([&] { reduce_scatter_tensor(x, "sum", 1, 4, "pretend"); }, ErrorKind::shape,
               "dim 1 of f32[2, 2]@cpu:0 is not divisible by the group size 4");
}

// A model whose output is summed over the ranks of axis "dp".
struct AllReduceLinear : nn::Module {
  Tensor& weight = register_parameter("weight", randn({2, 3}));
  TensorList forward(const TensorList& in) override {
    return {all_reduce(linear(in[0], weight), "sum", "dp")};
  }
};

TEST(C2, ProgramsWithCollectivesExportLoadAndRun) {
  manual_seed(1);
  AllReduceLinear m;
  Tensor x = randn({4, 3});
  ExportedProgram p = export_program(m, {x}, {.device = Device("cuda:0")});
  auto path = std::filesystem::temp_directory_path() / "kiln_collective.kiln";
  save(p, path.string());
  ExportedProgram q = load_program(path.string(), {{Device("cuda:0"), Device("cpu:1")}});
  std::filesystem::remove(path);
  std::string text = q.graph.str();
  EXPECT_NE(text.find("all_reduce(%linear, reduce_op='sum', group='dp')"), std::string::npos)
      << text;
  dist::bind_group("dp", dist::local_group());
  runtime::Executor exec(q);
  Tensor got = exec.run({to(x, Device("cpu:1"))})[0];
  autograd::NoGradGuard no_grad;
  EXPECT_TRUE(all_close(got, to_vector<double>(linear(x, m.weight)), 1e-6, 1e-6));
}

// (C1) NCCL for CUDA tensors: compiled with the CUDA backend; here it must say why it
// cannot run, and on a GPU a group of one process moves data on the device.
TEST(C1, NcclGroupOnAGpuOrAClearError) {
  if (device_count(DeviceType::cuda) == 0) {
    EXPECT_FALSE(dist::nccl_available());
    expect_error([] { dist::nccl_group(dist::local_group(), Device("cuda:0")); },
                 KILN_TEST_WITH_CUDA ? ErrorKind::device : ErrorKind::unsupported,
                 KILN_TEST_WITH_CUDA ? "needs a CUDA device" : "without CUDA");
    return;
  }
  auto g = dist::nccl_group(dist::local_group(), Device("cuda:0"));
  EXPECT_EQ(g->engine(), "nccl");
  Tensor x = to(tensor({1, 2, 3}), Device("cuda:0"));
  g->all_reduce(x)->wait();
  EXPECT_TRUE(all_close(x, {1, 2, 3}));
  Tensor out = empty({3, 1}, {.device = Device("cuda:0")});
  g->all_gather(out, to(tensor({4, 5, 6}, {3, 1}), Device("cuda:0")))->wait();
  EXPECT_TRUE(all_close(out, {4, 5, 6}));
}

}  // namespace
}  // namespace kiln

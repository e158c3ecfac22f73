// The MPI engine under mpirun (C1, C3, C4): every rank runs every test; ctest runs this
// at np=2 and np=4 (oversubscribed on 2 cores). Rank r works on the virtual device
// cpu:(r % 4), so collectives move data between devices of different processes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using dist::Launch;
using dist::ReduceOp;
using testing::all_close;
using testing::expect_error;

std::shared_ptr<dist::ProcessGroup> world() { return dist::mpi_world(); }
Device my_device() { return Device(DeviceType::cpu, world()->rank() % 4); }

// Rank r's values: r + 1 + i / 8 (exact in every dtype used here).
Tensor values_of(int r, const IntList& shape, DType dtype) {
  Tensor base = add(div(arange(0, numel_of(Dims(shape)), 1, {.dtype = f64}), 8.0), double(r + 1));
  return to(reshape(base, shape), my_device(), dtype);
}

TEST(Mpi, RankAndSize) {
  EXPECT_GE(world()->size(), 2);
  EXPECT_LT(world()->rank(), world()->size());
  EXPECT_EQ(world()->engine(), "mpi");
}

// Ranks on one machine share its cores: without KILN_NUM_THREADS each takes the hardware
// threads divided by the launcher's local rank count (ctest runs this once without it).
TEST(Mpi, DefaultThreadBudgetSharesTheMachine) {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!local) local = std::getenv("MPI_LOCALNRANKS");
  ASSERT_NE(local, nullptr) << "expected mpirun to say how many ranks share this machine";
  int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const char* set = std::getenv("KILN_NUM_THREADS");
  int want = set ? std::atoi(set) : std::max(1, hardware / std::atoi(local));
  EXPECT_EQ(get_num_threads(), want);
  EXPECT_EQ(get_num_threads(my_device()), want);
}

TEST(Mpi, AllReduceEveryOpAndDtype) {
  int n = world()->size(), r = world()->rank();
  for (DType dtype : {f32, f64, f16, bf16, i64, i32, i16, i8, u8}) {
    for (ReduceOp op :
         {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min, ReduceOp::product}) {
      if (op == ReduceOp::avg && !is_floating(dtype)) continue;
      if (op == ReduceOp::product && n > 2 && (dtype == f16 || dtype == bf16)) continue;  // range
      if (op == ReduceOp::product && (dtype == i8 || dtype == u8) && n > 4) continue;
      SCOPED_TRACE(fmt::format("{} {}", to_string(dtype), dist::to_string(op)));
      bool integral = !is_floating(dtype);
      Tensor t = integral ? to(full({5}, r + 1, {.dtype = f64}), my_device(), dtype)
                          : values_of(r, {5}, dtype);
      world()->all_reduce(t, op)->wait();
      // What every rank must hold, computed here in f64.
      Tensor want;
      for (int k = 0; k < n; ++k) {
        Tensor v = integral ? full({5}, k + 1, {.dtype = f64})
                            : to(values_of(k, {5}, dtype), Device("cpu:0"), f64);
        if (!want.defined())
          want = v;
        else if (op == ReduceOp::max)
          want = maximum(want, v);
        else if (op == ReduceOp::min)
          want = minimum(want, v);
        else if (op == ReduceOp::product)
          want = mul(want, v);
        else
          want = add(want, v);
      }
      if (op == ReduceOp::avg) want = div(want, double(n));
      EXPECT_EQ(t.device(), my_device());
      double tol = dtype == f16 || dtype == bf16 ? 2e-2 : 1e-6;
      EXPECT_TRUE(all_close(t, to_vector<double>(want), tol, tol));
    }
  }
  Tensor flags = to(full({3}, r == 0, {.dtype = b8}), my_device());
  world()->all_reduce(flags, ReduceOp::max)->wait();  // any
  EXPECT_TRUE(all_close(flags, {1, 1, 1}));
}

TEST(Mpi, NonContiguousTensorsAreStagedAndWrittenBack) {
  int n = world()->size(), r = world()->rank();
  Tensor base = values_of(r, {4, 3}, f32);
  Tensor t = transpose(base, 0, 1);  // [3, 4], strided
  world()->all_reduce(t)->wait();
  double sum_ranks = n * (n + 1) / 2.0;
  std::vector<double> got = to_vector<double>(base);
  for (int64_t i = 0; i < 12; ++i) EXPECT_DOUBLE_EQ(got[i], sum_ranks + n * (i / 8.0));
}

TEST(Mpi, GatherScatterAllToAllBroadcast) {
  int n = world()->size(), r = world()->rank();
  Device d = my_device();
  Tensor in = full({2, 3}, r + 0.0, {.device = d});
  Tensor gathered = empty({2 * n, 3}, {.device = d});
  world()->all_gather(gathered, in)->wait();
  for (int k = 0; k < n; ++k)
    EXPECT_TRUE(all_close(slice(gathered, 0, 2 * k, 2 * k + 2), std::vector<double>(6, k)));

  Tensor big = values_of(r, {2 * n, 2}, f64);
  Tensor part = empty({2, 2}, {.dtype = f64, .device = d});
  world()->reduce_scatter(part, big)->wait();
  Tensor sum_all = full({2 * n, 2}, 0.0, {.dtype = f64});
  for (int k = 0; k < n; ++k)
    sum_all = add(sum_all, to(values_of(k, {2 * n, 2}, f64), Device("cpu:0")));
  EXPECT_TRUE(all_close(part, to_vector<double>(slice(sum_all, 0, 2 * r, 2 * r + 2))));

  // all_to_all: chunk j of rank i is (i, j); rank r receives (k, r) from every k.
  Tensor send = empty({n, 2}, {.dtype = i64, .device = d});
  for (int j = 0; j < n; ++j) {
    Tensor row = select(send, 0, j);
    copy_(row, from_vector<int64_t>({r, j}));
  }
  Tensor got = empty({n, 2}, {.dtype = i64, .device = d});
  world()->all_to_all(got, send)->wait();
  for (int k = 0; k < n; ++k) EXPECT_TRUE(all_close(select(got, 0, k), {double(k), double(r)}));

  Tensor b = full({4}, r == 1 ? 7.0 : -1.0, {.device = d});
  world()->broadcast(b, 1)->wait();
  EXPECT_TRUE(all_close(b, {7, 7, 7, 7}));
  world()->barrier();
}

// The functional forms beyond the four ops (C2, PyTorch's _functional_collectives), run on
// the world: each against the values the ranks' inputs give by hand.
TEST(Mpi, FunctionalCollectiveForms) {
  int n = world()->size(), r = world()->rank();
  dist::bind_group("world", world());
  Device d = my_device();
  Tensor mine = full({2, 2 * n}, double(r), {.device = d});  // every element is the rank
  Tensor b = broadcast(mine, n - 1, "world");
  EXPECT_TRUE(all_close(b, std::vector<double>(4 * n, n - 1)));
  Tensor summed = clone(mine);
  all_reduce_(summed, "sum", "world");
  double total = n * (n - 1) / 2.0;
  EXPECT_TRUE(all_close(summed, std::vector<double>(4 * n, total)));
  // gathered along dim 1: [2, 2n * n], column block k from rank k
  Tensor g = all_gather_tensor(mine, 1, n, "world");
  ASSERT_EQ(g.shape(), Dims({2, 2 * n * n}));
  for (int k = 0; k < n; ++k)
    EXPECT_TRUE(all_close(slice(g, 1, 2 * n * k, 2 * n * (k + 1)), std::vector<double>(4 * n, k)));
  // scattered along dim 1: this rank's two columns of the sum
  Tensor s = reduce_scatter_tensor(values_of(r, {2, 2 * n}, f64), "sum", 1, n, "world");
  Tensor want = full({2, 2 * n}, 0.0, {.dtype = f64});
  for (int k = 0; k < n; ++k) want = add(want, to(values_of(k, {2, 2 * n}, f64), Device("cpu:0")));
  EXPECT_TRUE(all_close(s, to_vector<double>(slice(want, 1, 2 * r, 2 * r + 2))));
  // scatter: rank n-1's rows, two per rank; the others' values never arrive
  Tensor rows_of_last =
      r == n - 1 ? values_of(r, {2 * n, 3}, f32) : full({2 * n, 3}, -1.0, {.device = d});
  Tensor mine_rows = scatter_tensor(rows_of_last, n - 1, n, "world");
  EXPECT_TRUE(all_close(
      mine_rows, to_vector<double>(slice(values_of(n - 1, {2 * n, 3}, f32), 0, 2 * r, 2 * r + 2))));
  // uneven all_to_all: rank i sends i + j + 1 rows of 100 i + j to rank j; its gradient
  // sends the rows back
  IntList in_splits, out_splits;
  for (int j = 0; j < n; ++j) in_splits.push_back(r + j + 1), out_splits.push_back(j + r + 1);
  TensorList pieces;
  for (int j = 0; j < n; ++j) pieces.push_back(full({r + j + 1, 2}, 100.0 * r + j, {.device = d}));
  Tensor sent = cat(pieces, 0);
  sent.set_requires_grad(true);
  Tensor received = all_to_all_single(sent, out_splits, in_splits, "world");
  int64_t at = 0;
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(all_close(slice(received, 0, at, at + i + r + 1),
                          std::vector<double>(2 * (i + r + 1), 100.0 * i + r)))
        << "from rank " << i;
    at += i + r + 1;
  }
  sum(received * received).backward();  // d/dsent = 2 * sent, routed back
  EXPECT_TRUE(all_close(sent.grad(), to_vector<double>(sent.detach() * 2)));
  // coalesced: each tensor as its own collective would give it
  Tensor small = full({3}, double(r + 1), {.device = d});
  TensorList reduced = all_reduce_coalesced({mine, small}, "sum", "world");
  EXPECT_TRUE(all_close(reduced[0], to_vector<double>(all_reduce(mine, "sum", "world"))));
  EXPECT_TRUE(all_close(reduced[1], to_vector<double>(all_reduce(small, "sum", "world"))));
  TensorList gathered = all_gather_into_tensor_coalesced({mine, small}, n, "world");
  EXPECT_TRUE(all_close(gathered[0], to_vector<double>(all_gather_into_tensor(mine, n, "world"))));
  EXPECT_TRUE(all_close(gathered[1], to_vector<double>(all_gather_into_tensor(small, n, "world"))));
  Tensor rows = values_of(r, {2 * n, 3}, f32);
  Tensor tall = full({2 * n, 2}, double(r), {.device = d});
  TensorList scattered = reduce_scatter_tensor_coalesced({rows, tall}, "sum", n, "world");
  EXPECT_TRUE(
      all_close(scattered[0], to_vector<double>(reduce_scatter_tensor(rows, "sum", n, "world"))));
  EXPECT_TRUE(all_close(scattered[1], std::vector<double>(4, total)));
  Tensor col = values_of(r, {2 * n, 1}, f32);
  EXPECT_EQ(reduce_scatter_tensor_coalesced({col}, "max", n, "world")[0].shape(), Dims({2, 1}));
  world()->barrier();
}

TEST(Mpi, SendRecvRing) {
  int n = world()->size(), r = world()->rank();
  Tensor out = full({3}, r + 0.0, {.device = my_device()}),
         in = empty({3}, {.device = my_device()});
  auto s = world()->send(out, (r + 1) % n, 5);
  auto v = world()->recv(in, (r + n - 1) % n, 5);
  v->wait();
  s->wait();
  EXPECT_TRUE(all_close(in, std::vector<double>(3, (r + n - 1) % n)));
}

TEST(Mpi, AsyncHandlesOverlap) {
  int n = world()->size(), r = world()->rank();
  Tensor a = full({1000}, 1.0, {.device = my_device()}),
         b = full({1000}, r + 0.0, {.device = my_device()});
  auto wa = world()->all_reduce(a);
  auto wb = world()->all_reduce(b, ReduceOp::max);
  wb->wait();
  wa->wait();
  EXPECT_TRUE(wa->completed());
  EXPECT_TRUE(all_close(a, std::vector<double>(1000, n)));
  EXPECT_TRUE(all_close(b, std::vector<double>(1000, n - 1)));
}

// A blocking call returns complete, after what was queued before it: with the worker
// idle it runs on this thread, behind queued calls it waits for them.
TEST(Mpi, BlockingCallsKeepTheOrderOfQueuedOnes) {
  int n = world()->size(), r = world()->rank();
  Tensor a = full({1 << 16}, 1.0, {.device = my_device()}),
         b = full({8}, r + 0.0, {.device = my_device()});
  auto wa = world()->all_reduce(a);
  auto wb = world()->all_reduce(b, ReduceOp::max, Launch::blocking);
  EXPECT_TRUE(wb->completed());
  EXPECT_TRUE(wa->completed());
  EXPECT_TRUE(all_close(a, std::vector<double>(1 << 16, n)));
  EXPECT_TRUE(all_close(b, std::vector<double>(8, n - 1)));
  Tensor c = full({4}, r + 1.0, {.device = my_device()});
  world()->all_reduce(c, ReduceOp::product, Launch::blocking);
  double product = 1;
  for (int i = 1; i <= n; ++i) product *= i;
  EXPECT_TRUE(all_close(c, std::vector<double>(4, product)));
  Tensor g = empty({4 * n}, {.device = my_device()});
  world()->all_gather(g, full({4}, r + 0.0, {.device = my_device()}), Launch::blocking);
  for (int i = 0; i < n; ++i) EXPECT_EQ(g.data<float>()[4 * i], i);
}

TEST(Mpi, SplitIntoSubGroups) {
  int n = world()->size(), r = world()->rank();
  std::vector<int> even, odd;
  for (int k = 0; k < n; ++k) (k % 2 ? odd : even).push_back(k);
  auto ge = world()->split(even);
  auto go = world()->split(odd);
  auto mine = r % 2 ? go : ge;
  ASSERT_TRUE(mine);
  EXPECT_FALSE(r % 2 ? ge : go);
  EXPECT_EQ(mine->size(), static_cast<int>((r % 2 ? odd : even).size()));
  EXPECT_EQ(mine->rank(), r / 2);
  Tensor t = full({2}, r + 0.0, {.device = my_device()});
  mine->all_reduce(t)->wait();
  double want = 0;
  for (int k : (r % 2 ? odd : even)) want += k;
  EXPECT_TRUE(all_close(t, {want, want}));
}

// (C4) Collectives that do not match across ranks fail on every rank, naming the
// collective and its number; the group stays usable.
TEST(Mpi, MismatchedCollectivesAreAnErrorOnEveryRank) {
  int r = world()->rank();
  Tensor t = zeros({r == 0 ? 3 : 4}, {.device = my_device()});
  expect_error([&] { world()->all_reduce(t)->wait(); }, ErrorKind::value,
               "does not match across the ranks");
  Tensor u = zeros({2}, {.device = my_device()});
  if (r == 0)
    expect_error([&] { world()->all_reduce(u, ReduceOp::max)->wait(); }, ErrorKind::value,
                 "all_reduce");
  else
    expect_error([&] { world()->broadcast(u, 0)->wait(); }, ErrorKind::value, "broadcast");
  Tensor v = zeros({r == 0 ? 5 : 6}, {.device = my_device()});
  expect_error([&] { world()->all_reduce(v, ReduceOp::sum, Launch::blocking); }, ErrorKind::value,
               "does not match across the ranks");
  world()->barrier();
  Tensor ok = ones({2}, {.device = my_device()});
  world()->all_reduce(ok)->wait();
  EXPECT_TRUE(all_close(ok, std::vector<double>(2, world()->size())));
}

TEST(Mpi, BadArgumentsAreClearErrors) {
  Tensor t = zeros({3}, {.device = my_device()});
  expect_error([&] { world()->all_gather(zeros({3}), t); }, ErrorKind::shape,
               "[all_gather] output");
  expect_error([&] { world()->broadcast(t, 99); }, ErrorKind::index, "rank 99 is not in a group");
  expect_error([&] { world()->all_reduce(arange(3), ReduceOp::avg); }, ErrorKind::dtype,
               "avg needs a floating dtype");
  FakeMode fake;
  Tensor f = empty({2});
  expect_error([&] { world()->all_reduce(f); }, ErrorKind::device, "CPU tensors with data");
}

// (C1) The fake group checks metadata only, for tracing N ranks in one process.
TEST(Mpi, FakeGroupChecksMetadataOnly) {
  auto g = dist::fake_group(3, 8);
  EXPECT_EQ(g->rank(), 3);
  EXPECT_EQ(g->size(), 8);
  FakeMode fake;
  Tensor in = empty({2, 4}, {.device = Device("cuda:0")});
  g->all_gather(empty({16, 4}, {.device = Device("cuda:0")}), in)->wait();
  expect_error(
      [&] {
        g->all_gather(empty({8, 4}, {.device = Device("cuda:0")}), in);
      },
      ErrorKind::shape, "must be f32[16, 4]@cuda:0");
  EXPECT_EQ(g->split({1, 3, 5})->rank(), 1);
  EXPECT_EQ(g->split({0, 2}), nullptr);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// (C5) Captured collectives are followed by wait_tensor; the executor launches them
// asynchronously and waits where their result is first read, so the independent compute
// between runs while they are in flight. Their inputs stay alive until the wait: the
// compute after them (values of the same size, which the plan would otherwise place in
// the inputs' buffers) does not disturb what the engine still reads.
struct OverlappedCollectives : nn::Module {
  explicit OverlappedCollectives(int64_t ranks) : ranks(ranks) {}
  int64_t ranks;
  Tensor& w1 = register_parameter("w1", randn({16, 16}));
  Tensor& w2 = register_parameter("w2", randn({16, 16}));
  TensorList forward(const TensorList& in) override {
    Tensor h = linear(in[0], w1);
    Tensor summed = all_reduce(h * 2.0, "sum", "dp");                // input dead after launch
    Tensor gathered = all_gather_into_tensor(h + 1.0, ranks, "dp");  // rank blocks along dim 0
    Tensor local = relu(linear(in[0], w2)) * 3.0;                    // overlaps both
    Tensor more = exp(local * 0.01) + local;                         // reuses freed buffers
    return {summed + more, gathered};
  }
};

TEST(Mpi, CollectivesInProgramsOverlapTheComputeAfterThem) {
  int n = world()->size(), r = world()->rank();
  manual_seed(8);  // the same weights on every rank
  OverlappedCollectives m(n);
  dist::bind_group("dp", world());
  Tensor x = full({8, 16}, r + 1.0);
  ExportedProgram p = export_program(m, {x}, {.device = Device("cuda:0")});
  move_to_device(p, my_device());
  std::string text = p.graph.str();
  EXPECT_NE(text.find("wait_tensor(%all_reduce)"), std::string::npos) << text;
  runtime::Executor exec(p);
  EXPECT_EQ(exec.async_collectives(), 2);
  autograd::NoGradGuard no_grad;
  Tensor xs = to(x, my_device());
  Tensor h_sum = zeros({8, 16}), want_gather;
  TensorList parts;
  for (int k = 0; k < n; ++k) {
    Tensor hk = linear(full({8, 16}, k + 1.0), m.w1);
    h_sum = h_sum + hk * 2.0;
    parts.push_back(hk + 1.0);
  }
  Tensor local = relu(linear(full({8, 16}, r + 1.0), m.w2)) * 3.0;
  Tensor want = h_sum + (exp(local * 0.01) + local);
  want_gather = cat(parts, 0);
  for (int run = 0; run < 3; ++run) {
    TensorList got = exec.run({xs});
    EXPECT_TRUE(all_close(got[0], to_vector<double>(want), 1e-5, 1e-5)) << run;
    EXPECT_TRUE(all_close(got[1], to_vector<double>(want_gather), 1e-5, 1e-5)) << run;
  }
  dist::bind_group("dp", dist::local_group());
}

// (C2) A program with a collective, traced for cuda:0 with fake tensors, run on every
// rank's own device with its group ("dp") bound to the MPI world.
TEST(Mpi, ExportedProgramWithCollectivesRunsOnEveryRank) {
  int n = world()->size(), r = world()->rank();
  nn::ReferenceModel ref = nn::make_reference_model("dp_linear", {}, 3);  // same weights everywhere
  Tensor x = full({4, 8}, r + 1.0);
  ExportedProgram p = export_program(*ref.module, {x}, {.device = Device("cuda:0")});
  move_to_device(p, my_device());
  dist::bind_group("dp", world());
  runtime::Executor exec(p);
  Tensor got = exec.run({to(x, my_device())})[0];
  autograd::NoGradGuard no_grad;
  dist::bind_group("dp", dist::local_group());
  Tensor want = zeros({4, 4});
  for (int k = 0; k < n; ++k) want = add(want, (*ref.module)(full({4, 8}, k + 1.0)));
  EXPECT_TRUE(all_close(got, to_vector<double>(want), 1e-5, 1e-5));
}

}  // namespace
}  // namespace kiln

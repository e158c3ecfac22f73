// DTensors in one process (S1-S3): placements and chunks, meshes of fake groups, tracing
// a tensor-parallel program for 8 ranks with fake tensors (a per-rank graph whose
// collectives name mesh axes), and the errors. The multi-process runs are in
// dtensor_mpi_test.cpp.
#include <gtest/gtest.h>

#include <optional>
#include <thread>
#include <vector>

#include "kiln/distributed/sharding.h"
#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using dist::Partial;
using dist::Replicate;
using dist::Shard;
using testing::expect_error;

TEST(S1, ChunksFollowTorchChunk) {
  // 10 over 4: 3, 3, 3, 1; 5 over 4: 2, 2, 1, 0; 2 over 4: 1, 1, 0, 0
  std::vector<std::pair<int64_t, int64_t>> want = {{0, 3}, {3, 3}, {6, 3}, {9, 1}};
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(dist::chunk_of(10, 4, i), want[i]);
  EXPECT_EQ(dist::chunk_of(5, 4, 3), std::make_pair(int64_t{5}, int64_t{0}));
  EXPECT_EQ(dist::chunk_of(2, 4, 1), std::make_pair(int64_t{1}, int64_t{1}));
  EXPECT_EQ(dist::chunk_of(2, 4, 2), std::make_pair(int64_t{2}, int64_t{0}));
  EXPECT_EQ(Shard(1).str(), "S(1)");
  EXPECT_EQ(Replicate().str(), "R");
  EXPECT_EQ(Partial(dist::ReduceOp::max).str(), "P(max)");
}

TEST(S1, FakeMeshes) {
  dist::DeviceMesh mesh = dist::DeviceMesh::fake({2, 4}, {"dp", "tp"}, 6, Device("cpu:0"));
  EXPECT_EQ(mesh.size(), 8);
  EXPECT_EQ(mesh.coordinate(0), 1);
  EXPECT_EQ(mesh.coordinate(1), 2);
  EXPECT_EQ(mesh.str(), "DeviceMesh((2, 4), names=('dp', 'tp'))");
  dist::DeviceMesh tp = mesh["tp"];
  EXPECT_EQ(tp.str(), "DeviceMesh((4,), names=('tp',))");
  EXPECT_EQ(tp.coordinate(0), 2);
  EXPECT_EQ(dist::bound_group("tp", "test")->size(), 4);
  expect_error([&] { mesh["pp"]; }, ErrorKind::value, "has no dimension 'pp'");
  expect_error(
      [] {
        dist::DeviceMesh::fake({2, 2}, {"a"}, 0, Device("cpu:0"));
      },
      ErrorKind::value, "needs one name per dimension");
  expect_error(
      [] {
        dist::DeviceMesh::fake({2, 2}, {"a", "a"}, 0, Device("cpu:0"));
      },
      ErrorKind::value, "'a' is used twice");
  expect_error([] { dist::DeviceMesh(dist::local_group(), {2}, {"a"}, Device("cpu:0")); },
               ErrorKind::value, "a mesh of 2 ranks over a group of 1");
  // A mesh of NCCL groups for CUDA: where this machine has no GPU (or the build no CUDA),
  // making its communicators is nccl_group's clear error.
  if (!dist::nccl_available()) {
    try {
      dist::DeviceMesh::nccl(dist::local_group(), {1}, {"tp"}, Device("cuda:0"));
      ADD_FAILURE() << "an NCCL mesh without a GPU";
    } catch (const Error& e) {
      EXPECT_TRUE(e.kind() == ErrorKind::device || e.kind() == ErrorKind::unsupported) << e.what();
    }
  }
}

// On a mesh of one rank every placement holds the whole tensor: the rules and the
// redistributions run, and the results are exact.
TEST(S2, OneRankMeshComputesLikePlainTensors) {
  dist::DeviceMesh mesh(dist::local_group(), {1}, {"solo"}, Device("cpu:0"));
  Tensor a = reshape(arange(0, 12, 1, {.dtype = DType::f32}), {3, 4});
  Tensor d = dist::distribute_tensor(a, mesh, {Shard(0)});
  EXPECT_TRUE(d.is_dtensor());
  EXPECT_EQ(dist::describe(d),
            "DTensor(f32[3, 4], mesh=DeviceMesh((1,), names=('solo',)), placements=(S(0)), "
            "local=f32[3, 4]@cpu:0)");
  Tensor y = matmul(relu(d - 2.0), t(d));
  EXPECT_TRUE(
      testing::all_close(dist::full_tensor(y), to_vector<double>(matmul(relu(a - 2.0), t(a)))));
  Tensor z =
      zeros_like(sum(d, {0}));  // *_like of a DTensor is a DTensor (Partial becomes Replicate)
  ASSERT_TRUE(z.is_dtensor());
  EXPECT_TRUE(dist::dtensor_state(z).placements[0].is_replicate());
  expect_error([&] { item<float>(sum(d)); }, ErrorKind::value,
               "is a DTensor: its data is in shards");
}

// (S4, C2) A tensor-parallel MLP traced for rank 3 of 8 with fake tensors on a GPU this
// machine lacks: the per-rank graph has local shapes and exactly one all_reduce on 'tp'.
TEST(S2, TensorParallelMlpTracesForEightRanks) {
  Device gpu("cuda:0");
  dist::DeviceMesh mesh = dist::DeviceMesh::fake({8}, {"tp"}, 3, gpu);
  auto fn = [&](const TensorList& in) {
    Tensor x = dist::from_local(in[0], mesh, {Replicate()});
    Tensor w1 = dist::from_local(in[1], mesh, {Shard(0)}),
           b1 = dist::from_local(in[2], mesh, {Shard(0)});
    Tensor w2 = dist::from_local(in[3], mesh, {Shard(1)}),
           b2 = dist::from_local(in[4], mesh, {Replicate()});
    Tensor y = linear(gelu(linear(x, w1, b1)), w2, b2);
    EXPECT_EQ(y.shape(), Dims({4, 16}));
    // P + R stays partial, as PyTorch: the bias joins rank 0's partial sum, nothing moves
    EXPECT_TRUE(dist::dtensor_state(y).placements[0].is_partial());
    return TensorList{dist::to_local(dist::redistribute(y, {Replicate()}))};
  };
  FakeMode fake;
  TensorList locals = {empty({4, 16}, {.device = gpu}), empty({8, 16}, {.device = gpu}),
                       empty({8}, {.device = gpu}), empty({16, 8}, {.device = gpu}),
                       empty({16}, {.device = gpu})};
  ir::Graph g = make_fx(fn, locals);
  std::string text = g.str();
  size_t reduces = 0;
  for (size_t at = text.find("= all_reduce("); at != std::string::npos;
       at = text.find("= all_reduce(", at + 1))
    ++reduces;
  EXPECT_EQ(reduces, 1u) << text;
  EXPECT_NE(text.find("f32[4,8]@cuda:0 = matmul("), std::string::npos)
      << text;  // this rank's columns
  EXPECT_NE(text.find("reduce_op='sum', group='tp')"), std::string::npos) << text;
}

// addmm as PyTorch's TP linears in the core-ATen dialect write them: colwise (the
// transposed weight sharded on its columns, the bias with it) keeps column shards, and
// rowwise (both on the contracted dim) gives partial products that stay partial through
// the replicated bias's add (P + R); making them replicated reduces once. beta and alpha scale as
// in addmm; values on a one-rank mesh match.
TEST(S2, AddmmShardsLikeItsProduct) {
  Device gpu("cuda:0");
  dist::DeviceMesh mesh = dist::DeviceMesh::fake({8}, {"tp"}, 3, gpu);
  auto fn = [&](const TensorList& in) {
    Tensor x = dist::from_local(in[0], mesh, {Replicate()});
    Tensor w1t = dist::from_local(in[1], mesh, {Shard(1)}),
           b1 = dist::from_local(in[2], mesh, {Shard(0)});
    Tensor w2t = dist::from_local(in[3], mesh, {Shard(0)}),
           b2 = dist::from_local(in[4], mesh, {Replicate()});
    Tensor h = addmm(b1, x, w1t);
    EXPECT_EQ(dist::dtensor_state(h).placements[0], dist::Placement(Shard(1)));
    Tensor y = addmm(b2, relu(h), w2t, 0.5, 2.0);
    EXPECT_EQ(y.shape(), Dims({4, 16}));
    EXPECT_TRUE(dist::dtensor_state(y).placements[0].is_partial());  // P + R: still partial
    return TensorList{dist::to_local(dist::redistribute(y, {Replicate()}))};
  };
  FakeMode fake;
  TensorList locals = {empty({4, 16}, {.device = gpu}), empty({16, 8}, {.device = gpu}),
                       empty({8}, {.device = gpu}), empty({8, 16}, {.device = gpu}),
                       empty({16}, {.device = gpu})};
  std::string text = make_fx(fn, locals).str();
  size_t reduces = 0;
  for (size_t at = text.find("= all_reduce("); at != std::string::npos;
       at = text.find("= all_reduce(", at + 1))
    ++reduces;
  EXPECT_EQ(reduces, 1u) << text;
}

TEST(S2, AddmmOnAOneRankMeshComputesLikePlainTensors) {
  dist::DeviceMesh mesh(dist::local_group(), {1}, {"solo"}, Device("cpu:0"));
  Tensor b = tensor({1, -2, 3}), a = reshape(arange(0, 8, 1, {.dtype = DType::f32}), {2, 4}),
         w = reshape(arange(0, 12, 1, {.dtype = DType::f32}), {4, 3});
  auto d = [&](const Tensor& t) { return dist::distribute_tensor(t, mesh, {Replicate()}); };
  for (auto [beta, alpha] : {std::pair<double, double>{1, 1}, {0.5, 2}, {0, 1}}) {
    Tensor got = dist::full_tensor(addmm(d(b), d(a), d(w), beta, alpha));
    EXPECT_TRUE(testing::all_close(got, to_vector<double>(addmm(b, a, w, beta, alpha))))
        << beta << " " << alpha;
  }
}

// Attention with its heads sharded: q, k and v colwise split into heads without a
// gather, the per-head products shard their batch dim, the heads merge back into column
// shards, and the rowwise projection's all_reduce is the only collective.
struct HeadParallelAttention : nn::Module {
  HeadParallelAttention(int64_t width, int64_t heads, Device d)
      : heads(heads),
        q(register_module("q", std::make_shared<nn::Linear>(width, width, true, d))),
        k(register_module("k", std::make_shared<nn::Linear>(width, width, true, d))),
        v(register_module("v", std::make_shared<nn::Linear>(width, width, true, d))),
        proj(register_module("proj", std::make_shared<nn::Linear>(width, width, true, d))) {}
  TensorList forward(const TensorList& in) override {
    const Tensor& x = in[0];
    int64_t B = x.size(0), T = x.size(1), C = x.size(2);
    auto split = [&](const Tensor& t) {
      return transpose(view(t, {B, T, heads, C / heads}), 1, 2);
    };
    Tensor att = softmax(matmul(split((*q)(x)), transpose(split((*k)(x)), 2, 3)) * 0.5, -1);
    Tensor y = transpose(matmul(att, split((*v)(x))), 1, 2);
    return {(*proj)(reshape(y, {B, T, C}))};
  }
  int64_t heads;
  std::shared_ptr<nn::Linear> q, k, v, proj;
};
std::vector<std::pair<std::string, dist::ParallelStyle>> head_plan() {
  return {{"q", dist::ParallelStyle::colwise},
          {"k", dist::ParallelStyle::colwise},
          {"v", dist::ParallelStyle::colwise},
          {"proj", dist::ParallelStyle::rowwise}};
}

TEST(S2, AttentionHeadsShardedTraceForEightRanks) {
  Device gpu("cuda:0");
  FakeMode fake;
  dist::DeviceMesh mesh = dist::DeviceMesh::fake({8}, {"tp"}, 5, gpu);
  HeadParallelAttention attn(64, 8, gpu);
  dist::parallelize_module(attn, mesh, head_plan());
  Tensor x = dist::distribute_tensor(empty({2, 4, 64}, {.device = gpu}), mesh, {Replicate()});
  // The projection's partial sums stay partial through its bias (P + R); laid out
  // replicated, as RowwiseParallel's default output layout, they are reduced once.
  passes::CapturedProgram p = passes::capture(
      [&](const TensorList& in) {
        return TensorList{dist::redistribute(attn(in)[0], {Replicate()})};
      },
      {x});
  std::string text = p.graph.str();
  size_t reduces = 0;
  for (size_t at = text.find("= all_reduce("); at != std::string::npos;
       at = text.find("= all_reduce(", at + 1))
    ++reduces;
  EXPECT_EQ(reduces, 1u) << text;
  EXPECT_EQ(text.find("all_gather"), std::string::npos) << text;
  EXPECT_NE(text.find("f32[2,1,4,4]@cuda:0 = softmax("), std::string::npos)
      << text;  // one head per rank
}

// Partial -> Shard on a dim the mesh does not divide evenly: one padded reduce_scatter
// (the padding cut off after), as PyTorch, not an all_reduce; each rank gets torch.chunk's
// share, the last one less.
TEST(S2, UnevenPartialToShardIsOnePaddedReduceScatter) {
  for (int64_t rank : {0, 2}) {
    dist::DeviceMesh mesh = dist::DeviceMesh::fake({3}, {"tp"}, rank, Device("cpu:0"));
    auto fn = [&](const TensorList& in) {
      Tensor p = dist::from_local(in[0], mesh, {dist::Partial()}, Dims({7, 2}));
      return TensorList{dist::to_local(dist::redistribute(p, {Shard(0)}))};
    };
    FakeMode fake;
    std::string text = make_fx(fn, {empty({7, 2})}).str();
    EXPECT_EQ(text.find("all_reduce"), std::string::npos) << text;
    EXPECT_NE(text.find("f32[3,2]@cpu:0 = reduce_scatter_tensor("), std::string::npos)
        << text;  // 9 rows / 3
    // torch.chunk's shares are 3, 3 and 1 rows: only the last rank cuts its chunk
    EXPECT_EQ(text.find("f32[1,2]@cpu:0") != std::string::npos, rank == 2) << text;
  }
  // the values, on a one-rank mesh (no padding) and through the uneven path's arithmetic
  dist::DeviceMesh solo(dist::local_group(), {1}, {"solo"}, Device("cpu:0"));
  Tensor a = reshape(arange(0, 14, 1, {.dtype = DType::f32}), {7, 2});
  Tensor p = dist::distribute_tensor(a, solo, {dist::Partial()});
  EXPECT_TRUE(
      testing::all_close(dist::to_local(dist::redistribute(p, {Shard(0)})), to_vector<double>(a)));
}

// Shard(-1) is the last dim (normalized where placements enter, as PyTorch), and a mesh
// dimension of one rank moves nothing: every placement there holds the whole value.
TEST(S1, NegativeShardDimsAndSizeOneMeshDims) {
  dist::DeviceMesh solo(dist::local_group(), {1}, {"solo"}, Device("cpu:0"));
  Tensor a = reshape(arange(0, 12, 1, {.dtype = DType::f32}), {3, 4});
  Tensor d = dist::distribute_tensor(a, solo, {Shard(-1)});
  EXPECT_EQ(dist::dtensor_state(d).placements, dist::Placements({Shard(1)}));
  EXPECT_EQ(dist::dtensor_state(dist::redistribute(d, {Shard(-2)})).placements,
            dist::Placements({Shard(0)}));
  expect_error([&] { dist::distribute_tensor(a, solo, {Shard(-3)}); }, ErrorKind::index,
               "[distribute_tensor] placement S(-3) of a 2-d tensor");
  FakeMode fake;
  dist::DeviceMesh mesh = dist::DeviceMesh::fake({1, 4}, {"one", "tp"}, 2, Device("cpu:0"));
  auto fn = [&](const TensorList& in) {
    Tensor p = dist::from_local(in[0], mesh, {Partial(), Shard(0)}, Dims({8, 2}));
    Tensor r = dist::redistribute(p, {Replicate(), Shard(0)});  // over the 1-rank dim: nothing
    Tensor s = dist::redistribute(r, {Shard(1), Shard(0)});     // a 1-rank shard is the whole dim
    EXPECT_EQ(dist::to_local(s).shape(), Dims({2, 2}));
    return TensorList{dist::to_local(s)};
  };
  std::string text = make_fx(fn, {empty({2, 2})}).str();
  EXPECT_EQ(text.find("all_reduce"), std::string::npos) << text;
  EXPECT_EQ(text.find("all_gather"), std::string::npos) << text;
}

// (Note [Autograd through the DTensor conversions]) Gradients flow through from_local,
// to_local and redistribute with PyTorch's placements: to_local's gradient is a DTensor
// with the source's placements (or grad_placements), from_local's reaches the local
// tensor, redistribute's goes back to the source's placements (partial as Replicate).
TEST(S4, GradientsFlowThroughTheConversions) {
  dist::DeviceMesh solo(dist::local_group(), {1}, {"solo"}, Device("cpu:0"));
  // from_local -> ops -> to_local: the local leaf gets the plain gradient
  Tensor x = tensor({1, 2, 3}, {}, {.requires_grad = true});
  Tensor d = dist::from_local(x, solo, {Shard(0)});
  Tensor y = dist::to_local(dist::redistribute(d * d, {Replicate()}));
  EXPECT_EQ(y.grad_fn()->name(), "ToTorchTensorBackward");
  sum(y).backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_FALSE(x.grad().is_dtensor());
  EXPECT_TRUE(testing::all_close(x.grad(), {2, 4, 6}));
  // a DTensor leaf: its gradient is a DTensor with its placements, or the grad_placements
  // given to to_local (the gradient is laid out so, not redistributed: as PyTorch)
  for (bool given : {false, true}) {
    Tensor leaf = dist::distribute_tensor(tensor({1, -1}), solo, {Shard(0)});
    leaf.set_requires_grad(true);
    Tensor local =
        given ? dist::to_local(leaf, dist::Placements({Replicate()})) : dist::to_local(leaf);
    sum(local * 3.0).backward();
    ASSERT_TRUE(leaf.grad().is_dtensor());
    EXPECT_EQ(dist::dtensor_state(leaf.grad()).placements,
              given ? dist::Placements({Replicate()}) : dist::Placements({Shard(0)}));
    EXPECT_TRUE(testing::all_close(dist::full_tensor(leaf.grad()), {3, 3}));
  }
  // no gradient asked for: nothing recorded
  EXPECT_FALSE(
      dist::to_local(dist::distribute_tensor(tensor({1}), solo, {Replicate()})).requires_grad());
}

// Traced for 4 ranks: the backward of a redistribution is the opposite collective (an
// all_gather's gradient a local chunk; a partial sum's reduction's a no-op on Replicate).
TEST(S4, TheConversionsBackwardTraceForFourRanks) {
  FakeMode fake;
  dist::DeviceMesh mesh = dist::DeviceMesh::fake({4}, {"tp"}, 1, Device("cpu:0"));
  Tensor x = empty({2, 3});
  x.set_requires_grad(true);
  Tensor d = dist::from_local(x, mesh, {Shard(0)});                 // global [8, 3]
  Tensor y = dist::to_local(dist::redistribute(d, {Replicate()}));  // all_gather
  EXPECT_EQ(y.shape(), Dims({8, 3}));
  TensorList g = autograd::grad({sum(y * y)}, {x});
  EXPECT_EQ(g[0].shape(), Dims({2, 3}));  // this rank's rows of the gathered gradient
  EXPECT_FALSE(g[0].is_dtensor());
}

// Sequence parallelism: the sequence-sharded input of an MLP is gathered once before the
// colwise layer, and the rowwise layer's partial sums are reduce-scattered back to
// sequence shards (no all_reduce).
TEST(S2, SequenceParallelMlpTracesForEightRanks) {
  FakeMode fake;
  dist::DeviceMesh mesh = dist::DeviceMesh::fake({8}, {"tp"}, 1, Device("cpu:0"));
  Tensor x = dist::distribute_tensor(empty({2, 16, 64}), mesh, {Shard(1)});
  Tensor w1 = dist::distribute_tensor(empty({256, 64}), mesh, {Shard(0)});
  Tensor w2 = dist::distribute_tensor(empty({64, 256}), mesh, {Shard(1)});
  passes::CapturedProgram p = passes::capture(
      [&](const TensorList& in) {
        Tensor h = gelu(linear(layer_norm(in[0], {64}), in[1]));
        return TensorList{dist::redistribute(linear(h, in[2]), {Shard(1)})};
      },
      {x, w1, w2});
  std::string text = p.graph.str();
  auto count = [&](const std::string& what) {
    size_t c = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++c;
    return c;
  };
  EXPECT_EQ(count("= all_gather_into_tensor("), 1u) << text;
  EXPECT_EQ(count("= reduce_scatter_tensor("), 1u) << text;
  EXPECT_EQ(count("= all_reduce("), 0u) << text;
  EXPECT_NE(text.find("f32[2,2,64]@cpu:0 = layer_norm("), std::string::npos)
      << text;  // on sequence shards
  // With biases: the rowwise layer's replicated bias joins its partial sums (P + R), so
  // the reduce_scatter is still the only reduction.
  Tensor b1 = dist::distribute_tensor(empty({256}), mesh, {Shard(0)});
  Tensor b2 = dist::distribute_tensor(empty({64}), mesh, {Replicate()});
  text = passes::capture(
             [&](const TensorList& in) {
               Tensor h = gelu(linear(layer_norm(in[0], {64}), in[1], in[2]));
               return TensorList{dist::redistribute(linear(h, in[3], in[4]), {Shard(1)})};
             },
             {x, w1, b1, w2, b2})
             .graph.str();
  EXPECT_EQ(count("= all_gather_into_tensor("), 1u) << text;
  EXPECT_EQ(count("= reduce_scatter_tensor("), 1u) << text;
  EXPECT_EQ(count("= all_reduce("), 0u) << text;
}

TEST(S1, UnevenShardsOnAFakeMesh) {
  FakeMode fake;
  Tensor full = empty({10, 4});
  for (auto [rank, rows] : {std::pair{3, 2}, std::pair{4, 2}, std::pair{5, 0}}) {
    dist::DeviceMesh mesh = dist::DeviceMesh::fake({8}, {"tp"}, rank, Device("cpu:0"));
    Tensor d = dist::distribute_tensor(full, mesh, {Shard(0)});
    EXPECT_EQ(dist::to_local(d).shape(), Dims({rows, 4})) << "rank " << rank;
    EXPECT_EQ(d.shape(), Dims({10, 4}));
    EXPECT_EQ(dist::full_tensor(d).shape(), Dims({10, 4}));  // gathered (metadata only)
  }
}

// (S1, S2) Under plain fake propagation the shards of fresh outputs are made from the
// rule (no second dispatch): they must be what running the op on the shards gives. A
// mode that only passes calls on sits between, so that the second run takes the
// dispatching path; every op family, uneven shards and integer outputs are compared.
TEST(S2, ShardsDerivedUnderFakePropagationMatchTheLocalOps) {
  struct PassOn final : Mode {
    Outputs handle(ops::OpKind op, std::span<const Value> args) override {
      return redispatch(op, args);
    }
  };
  auto run = [](int64_t rank, bool dispatch_shards) {
    FakeMode fake;
    std::optional<PassOn> pass;
    std::optional<ModeGuard> guard;
    if (dispatch_shards) pass.emplace(), guard.emplace(*pass);
    dist::DeviceMesh mesh = dist::DeviceMesh::fake({8}, {"tp"}, rank, Device("cpu:0"));
    Tensor x = dist::distribute_tensor(empty({10, 12}), mesh, {Shard(0)});
    Tensor c = dist::distribute_tensor(empty({10, 12}), mesh, {Shard(1)});
    Tensor w = dist::distribute_tensor(empty({12}), mesh, {Replicate()});
    Tensor m = dist::distribute_tensor(empty({12, 6}), mesh, {Replicate()});
    Tensor idx = dist::distribute_tensor(empty({5, 3}, {.dtype = DType::i64}), mesh, {Shard(0)});
    TensorList outs = {mul(x, w),     add(x, 1.0),         relu(c),      sum(x, {1}),
                       sum(c, {1}),   sum(x, {0}, true),   matmul(x, m), matmul(c, m),
                       softmax(x, 1), layer_norm(x, {12}), gt(x, 0.0),   embedding(m, idx),
                       mean(x, {1})};
    auto [values, indices] = max(x, 1, false);
    outs.push_back(values);
    outs.push_back(indices);
    // Scans, orders and products: along a sharded dim (gathered first) or not.
    for (Tensor t : {cumsum(x, 1), cumsum(x, 0), cumprod(c, 0), prod(x, 1), prod(x, 0),
                     remainder(x, 2.0), atan2(x, x), bitwise_and(idx, 3)})
      outs.push_back(t);
    for (auto [v, i] : {sort(c, 0), sort(x, 1, true), topk(x, 3, 1), topk(c, 2, 1)}) {
      outs.push_back(v);
      outs.push_back(i);
    }
    // Decompositions: batches stay sharded, matrices are gathered whole.
    Tensor batch = dist::distribute_tensor(empty({8, 4, 4}), mesh, {Shard(0)});
    Tensor cols = dist::distribute_tensor(empty({4, 16}), mesh, {Shard(1)});
    auto [l, v] = linalg::eigh(batch);
    auto [u, s, vh] = linalg::svd(cols, false);
    for (Tensor t : {l, v, u, s, vh}) outs.push_back(t);
    std::vector<std::string> seen;
    for (const Tensor& t : outs) {
      const Tensor& l = dist::to_local(t);
      seen.push_back(t.meta_str() + " " + dist::to_string(dist::dtensor_state(t).placements) +
                     " local " + l.meta_str() + " strides " + l.strides().str() +
                     (l.is_fake() ? " fake" : " real"));
    }
    return seen;
  };
  for (int64_t rank : {0, 3, 5, 7}) {
    std::vector<std::string> derived = run(rank, false), dispatched = run(rank, true);
    ASSERT_EQ(derived.size(), dispatched.size());
    for (size_t i = 0; i < derived.size(); ++i)
      EXPECT_EQ(derived[i], dispatched[i]) << "rank " << rank << " output " << i;
  }
}

// convolution's rule: each rank convolves its own images; a sharded channel dim and the
// weight are gathered whole.
TEST(S2, ConvolutionKeepsTheBatchSharded) {
  FakeMode fake;
  dist::DeviceMesh mesh = dist::DeviceMesh::fake({4}, {"dp"}, 1, Device("cpu:0"));
  Tensor w = dist::distribute_tensor(empty({6, 3, 3, 3}), mesh, {Replicate()});
  Tensor b = dist::distribute_tensor(empty({6}), mesh, {Replicate()});
  Tensor images = dist::distribute_tensor(empty({8, 3, 10, 10}), mesh, {Shard(0)});
  Tensor y = convolution(images, w, b, {2}, {1}, {1}, 1);
  EXPECT_EQ(y.shape(), Dims({8, 6, 5, 5}));
  EXPECT_EQ(dist::to_string(dist::dtensor_state(y).placements), "(S(0))");
  EXPECT_EQ(dist::to_local(y).shape(), Dims({2, 6, 5, 5}));
  Tensor channels = dist::distribute_tensor(empty({8, 3, 10, 10}), mesh, {Shard(1)});
  Tensor z = convolution(channels, dist::distribute_tensor(empty({6, 3, 3, 3}), mesh, {Shard(0)}),
                         Tensor(), {1}, {0}, {1}, 1);
  EXPECT_EQ(dist::to_string(dist::dtensor_state(z).placements), "(R)");
  EXPECT_EQ(dist::to_local(z).shape(), Dims({8, 6, 8, 8}));
}

// Note [Derived shards]: an output shard under plain fake propagation is made when first
// asked for, once, whichever thread asks; a layout it could not have fails at the op.
TEST(S1, DerivedShardsAreMadeOnceWhenFirstAskedFor) {
  FakeMode fake;
  dist::DeviceMesh mesh = dist::DeviceMesh::fake({8}, {"tp"}, 3, Device("cpu:0"));
  Tensor x = dist::distribute_tensor(empty({10, 12}), mesh, {Shard(0)});
  Tensor y = relu(x);
  const Tensor& first = dist::to_local(y);
  EXPECT_EQ(first.shape(), Dims({2, 12}));
  EXPECT_TRUE(first.is_fake());
  EXPECT_EQ(dist::to_local(y).impl(), first.impl());
  Tensor z = add(y, 1.0);  // reads y's shard as an input: z's own is derived again
  std::vector<TensorImpl*> seen(4, nullptr);
  {
    std::vector<std::thread> readers;
    for (size_t i = 0; i < seen.size(); ++i)
      readers.emplace_back([&, i] { seen[i] = dist::to_local(z).impl(); });
    for (std::thread& t : readers) t.join();
  }
  for (TensorImpl* p : seen) EXPECT_EQ(p, dist::to_local(z).impl());
  EXPECT_NE(seen[0], first.impl());

  dist::DeviceMesh grid = dist::DeviceMesh::fake({2, 2}, {"dp", "tp"}, 0, Device("cpu:0"));
  Tensor a = dist::distribute_tensor(empty({4, 4}), grid, {Shard(0), Replicate()});
  Tensor b = dist::distribute_tensor(empty({4, 4}), grid, {Replicate(), Shard(0)});
  // (Note [Nested shards]) dim 0 sharded by both mesh dims: chunked by dp, then by tp
  Tensor ab = add(a, b);
  EXPECT_EQ(dist::dtensor_state(ab).placements, (dist::Placements{Shard(0), Shard(0)}));
  EXPECT_EQ(dist::to_local(ab).shape(), Dims({1, 4}));
}

// The sharding table (kiln/distributed/sharding.cpp) gives every op a rule, a
// decomposition into other DTensor ops, or `none`: then it runs on replicated arguments
// only, and names itself and the placements otherwise.
TEST(S2, EveryOpHasAShardingRuleOrIsMarked) {
  using dist::detail::ShardingKind;
  std::vector<std::string_view> forgotten;
  for (size_t i = 0; i < ops::kNumOps; ++i) {
    auto op = static_cast<ops::OpKind>(i);
    const dist::detail::ShardingEntry& e = dist::detail::sharding_entry(op);
    if (e.kind == ShardingKind::missing) forgotten.push_back(ops::op_name(op));
    EXPECT_EQ(e.rule != nullptr, e.kind == ShardingKind::rule) << ops::op_name(op);
    EXPECT_EQ(e.decompose != nullptr, e.kind == ShardingKind::decomposed) << ops::op_name(op);
  }
  EXPECT_TRUE(forgotten.empty()) << "no sharding entry for " << ::testing::PrintToString(forgotten);

  FakeMode fake;
  dist::DeviceMesh mesh = dist::DeviceMesh::fake({4}, {"tp"}, 0, Device("cpu:0"));
  Tensor index = dist::distribute_tensor(zeros({2}, {.dtype = DType::i64}), mesh, {Replicate()});
  Tensor replicated = dist::distribute_tensor(empty({8, 4}), mesh, {Replicate()});
  Tensor y = index_select(replicated, 0, index);  // none: the same computation on every rank
  EXPECT_EQ(y.shape(), Dims({2, 4}));
  EXPECT_EQ(dist::to_string(y.impl()->dtensor->placements), "(R)");
  Tensor sharded = dist::distribute_tensor(empty({8, 4}), mesh, {Shard(0)});
  expect_error(
      [&] { index_select(sharded, 0, index); }, ErrorKind::unsupported,
      "[index_select] has no sharding rule for DTensor arguments with placements (S(0)), (R)");
  // a rule (in place, self keeps its shard) and a decomposition (mean as sum / count)
  mul_(sharded, 2.0);
  EXPECT_EQ(dist::to_string(sharded.impl()->dtensor->placements), "(S(0))");
  EXPECT_EQ(dist::to_string(mean(sharded, {0}).impl()->dtensor->placements), "(P(sum))");
}

TEST(S3, Errors) {
  FakeMode fake;
  dist::DeviceMesh a = dist::DeviceMesh::fake({4}, {"tp"}, 0, Device("cpu:0"));
  dist::DeviceMesh b = dist::DeviceMesh::fake({4}, {"tp"}, 0, Device("cpu:0"));
  Tensor x = dist::distribute_tensor(empty({8, 4}), a, {Shard(0)});
  Tensor y = dist::distribute_tensor(empty({8, 4}), b, {Shard(0)});
  expect_error(
      [&] {
        add(x, empty({8, 4}));
      },
      ErrorKind::value,
      "[add] mixed Tensor and DTensor: argument 'other' is a plain tensor f32[8, 4]@cpu:0");
  reset_warnings();
  std::vector<Warning> warned;
  {
    WarningHandlerGuard capture([&](const Warning& w) { warned.push_back(w); });
    EXPECT_NO_THROW(add(x, empty({})));  // a 0-dim tensor joins as a replicated scalar
    EXPECT_TRUE(warned.empty());
    EXPECT_NO_THROW(
        add(x, empty({1, 1})));  // so does a one-element tensor, with a warning (PyTorch's)
    EXPECT_NO_THROW(add(x, empty({1})));  // once per site
  }
  ASSERT_EQ(warned.size(), 1u);
  EXPECT_EQ(warned[0].site, "DTensor implicit replication");
  EXPECT_NE(warned[0].message.find(
                "[add] argument 'other' is a plain one-element tensor f32[1, 1]@cpu:0 with 2 "
                "dim(s): it is replicated over the mesh implicitly"),
            std::string::npos)
      << warned[0].message;
  expect_error([&] { add(x, y); }, ErrorKind::value, "[add] DTensor arguments on different meshes");
  expect_error(
      [&] {
        as_strided(x, {2, 2}, {1, 1});
      },
      ErrorKind::unsupported,
      "[as_strided] has no sharding rule for DTensor arguments with placements (S(0))");
  expect_error(
      [&] {
        dist::from_local(empty({2, 4}, {.device = Device("cpu:1")}), a, {Shard(0)});
      },
      ErrorKind::device_mismatch,
      "[from_local] the local tensor is on cpu:1 but the mesh's device is cpu:0");
  expect_error(
      [&] {
        dist::from_local(empty({3, 4}), a, {Shard(0)}, Dims{8, 4});
      },
      ErrorKind::shape,
      "a [3, 4] shard of a [8, 4] tensor with placements (S(0)) is [2, 4] on this rank");
  expect_error(
      [&] {
        dist::redistribute(x, {Shard(0), Shard(1)});
      },
      ErrorKind::value, "[redistribute] 2 placements for a mesh of 1 dimensions");
  expect_error([&] { dist::to_local(empty({2})); }, ErrorKind::value,
               "[to_local] expected a DTensor");
  Tensor p = dist::distribute_tensor(empty({8}), a, {Partial()});
  EXPECT_NO_THROW(mul_(p, empty({})));  // scaling partial sums keeps them partial
  expect_error([&] { add_(p, empty({})); }, ErrorKind::unsupported,
               "[add_] writes a Partial(sum) DTensor in place, which would mix partial values");
}

// (S4, J3) copy_ into a DTensor from a differently placed source, captured for rank 2 of
// 8: the redistribution (an all_to_all) is traced into fresh nodes, the write-back is
// the epilogue copy_ into y's input node, and no earlier node is rebound.
TEST(S4, CopyFromAnotherPlacementRedistributesInTheCapture) {
  Device gpu("cuda:0");
  dist::DeviceMesh mesh = dist::DeviceMesh::fake({8}, {"tp"}, 2, gpu);
  FakeMode fake;
  Tensor y = dist::distribute_tensor(empty({16, 16}, {.device = gpu}), mesh, {Shard(0)});
  Tensor z = dist::distribute_tensor(empty({16, 16}, {.device = gpu}), mesh, {Shard(1)});
  passes::CapturedProgram p = passes::capture(
      [](const TensorList& in) {
        Tensor y = in[0];
        copy_(y, in[1]);
        return TensorList{mul(in[1], 2.0)};
      },
      {y, z}, {.input_names = {"y", "z"}});
  std::string text = p.graph.str();
  EXPECT_TRUE(p.inputs[0].data_mutated) << text;
  EXPECT_FALSE(p.inputs[1].data_mutated) << text;
  EXPECT_NE(text.find("%y : f32[2,16]@cuda:0 = input()"), std::string::npos)
      << text;  // this rank's shards
  EXPECT_NE(text.find("%z : f32[16,2]@cuda:0 = input()"), std::string::npos) << text;
  EXPECT_NE(text.find("= all_to_all_single("), std::string::npos) << text;
  std::vector<ir::Node*> nodes = p.graph.nodes();
  ir::Node* last = nodes[nodes.size() - 2];  // the epilogue, before the output
  ASSERT_EQ(last->opcode(), ir::Opcode::call) << text;
  EXPECT_EQ(last->op(), ops::OpKind::copy_) << text;
  EXPECT_EQ(std::get<ir::Ref>(last->args()[0]).node->name(), "y") << text;  // into the input
  const auto& outs = std::get<ir::RefList>(p.graph.output()->args()[0]);
  EXPECT_EQ(outs.back().node->op(), ops::OpKind::mul) << text;  // the user output is its own node
  EXPECT_EQ(std::get<ir::Ref>(outs.back().node->args()[0]).node->name(), "z") << text;
}

// The founding program (pytorch#170467) captured with forward and backward for rank 1 of
// 4: y's write-back is the epilogue, the backward is cos(x) * grad on this rank's shard.
TEST(S4, FoundingProgramJointCaptureForOneRank) {
  dist::DeviceMesh mesh = dist::DeviceMesh::fake({4}, {"tp"}, 1, Device("cpu:0"));
  Tensor x = dist::distribute_tensor(randn({8, 3}), mesh, {Shard(0)});
  x.set_requires_grad(true);
  Tensor y = dist::distribute_tensor(randn({8, 3}), mesh, {Shard(0)});
  passes::JointProgram j = passes::capture_joint(
      [](const TensorList& in) {
        Tensor yy = in[1];
        add_(yy, wrapped_number(2.0));
        return TensorList{sin(in[0])};
      },
      {x, y});
  std::string fw = j.forward.str(), bw = j.backward.str();
  EXPECT_NE(fw.find("%primals_0 : f32[2,3]@cpu:0 = input()"), std::string::npos) << fw;
  EXPECT_NE(fw.find("= sin(%primals_0)"), std::string::npos) << fw;
  EXPECT_NE(fw.find("= copy_(%primals_1, %add)"), std::string::npos) << fw;
  EXPECT_NE(bw.find("cos("), std::string::npos) << bw;
  EXPECT_EQ(j.inputs[1].where, passes::InputMutation::Where::in_graph);
}

}  // namespace
}  // namespace kiln

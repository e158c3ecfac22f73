// DTensors across processes (S1-S3) under mpirun at 2 and 4 ranks: every placement
// transition (uneven shards included), sharding propagation of each rule family compared
// with the unsharded computation (integer-valued data: exact), tensor-parallel MLP, the
// founding program with its gradient, and errors on every rank.
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using dist::Partial;
using dist::Placement;
using dist::Placements;
using dist::Replicate;
using dist::Shard;
using testing::expect_error;

std::shared_ptr<dist::ProcessGroup> world() { return dist::mpi_world(); }
Device my_device() { return Device(DeviceType::cpu, world()->rank() % 4); }
dist::DeviceMesh mesh_1d() {
  return dist::DeviceMesh(world(), {world()->size()}, {"tp"}, my_device());
}

// 0, 1, 2, ... in `shape`, the same on every rank, on this rank's device.
Tensor iota(const IntList& shape) {
  return to(reshape(arange(0, numel_of(Dims(shape)), 1, {.dtype = DType::f32}), shape),
            my_device());
}
// Whether a and b hold the same values (exactly, unless tol).
::testing::AssertionResult same(const Tensor& a, const Tensor& b, double tol = 0) {
  if (a.shape() != b.shape())
    return ::testing::AssertionFailure() << a.meta_str() << " vs " << b.meta_str();
  double diff = a.numel() ? item<double>(max(abs(to(a, DType::f64) - to(b, DType::f64)))) : 0;
  if (diff > tol) return ::testing::AssertionFailure() << "max difference " << diff;
  return ::testing::AssertionSuccess();
}
Placements one(Placement p) { return {p}; }
Tensor on_me(const Tensor& t) { return to(t, my_device()); }

TEST(DTensorMpi, EveryTransitionEvenAndUneven) {
  dist::DeviceMesh mesh = mesh_1d();
  int64_t n = mesh.size(0), me = mesh.coordinate(0);
  for (IntList shape : {IntList{8, 4}, IntList{7, 6}, IntList{3, 5}}) {
    Tensor full = iota(shape);
    for (Placement from : {Shard(0), Shard(1), Replicate(), Partial()})
      for (Placement to : {Shard(0), Shard(1), Replicate(), Partial()}) {
        SCOPED_TRACE(fmt::format("{} {} -> {}", Dims(shape).str(), from.str(), to.str()));
        Tensor dt = dist::distribute_tensor(full, mesh, {from});
        if (from.is_shard() && to.is_partial()) {  // as PyTorch's redistribute
          expect_error([&] { dist::redistribute(dt, {to}); }, ErrorKind::unsupported,
                       "is not supported (as in PyTorch); redistribute to Replicate first");
          continue;
        }
        Tensor r = dist::redistribute(dt, {to});
        EXPECT_EQ(dist::dtensor_state(r).placements, one(to));
        EXPECT_EQ(r.shape(), Dims(shape));
        EXPECT_TRUE(same(dist::full_tensor(r), full));
        Tensor local = dist::to_local(r);
        if (to.is_shard()) {
          auto [begin, len] = dist::chunk_of(shape[to.dim], n, me);
          EXPECT_TRUE(same(local, narrow(full, to.dim, begin, len)));  // torch.chunk's piece
        } else if (to.is_replicate()) {
          EXPECT_TRUE(same(local, full));
        }
        EXPECT_EQ(local.device(), my_device());
      }
  }
}

TEST(DTensorMpi, PointwiseBroadcastsAndKeepsShards) {
  dist::DeviceMesh mesh = mesh_1d();
  Tensor a = iota({6, 5}), b = add(iota({5}), 1.0);
  Tensor da = dist::distribute_tensor(a, mesh, {Shard(0)});
  Tensor db = dist::distribute_tensor(b, mesh, {Replicate()});
  Tensor c = mul(add(da, db), 2.0);  // a broadcast vector joins row shards
  EXPECT_EQ(dist::dtensor_state(c).placements, one(Shard(0)));
  EXPECT_TRUE(same(dist::full_tensor(c), (a + b) * 2.0));
  Tensor cols = dist::distribute_tensor(a, mesh, {Shard(1)});
  Tensor mixed = add(da, cols);  // two shardings: one is redistributed
  EXPECT_TRUE(same(dist::full_tensor(mixed), a + a));
  // Partial sums stay partial through sums and scaling, and are reduced before sin.
  Tensor p = dist::distribute_tensor(a, mesh, {Partial()});
  Tensor p2 = mul(add(p, p), 0.5);
  EXPECT_TRUE(dist::dtensor_state(p2).placements[0].is_partial());
  EXPECT_TRUE(same(dist::full_tensor(p2), a));
  Tensor s = sin(p);
  EXPECT_TRUE(dist::dtensor_state(s).placements[0].is_replicate());
  EXPECT_TRUE(same(dist::full_tensor(s), sin(a), 1e-6));
  // in place on shards; a scalar joins as a replicated value
  add_(da, wrapped_number(3.0));
  EXPECT_TRUE(same(dist::full_tensor(da), a + 3.0));
  EXPECT_TRUE(same(dist::full_tensor(ones_like(p)), on_me(ones({6, 5}))));
}

TEST(DTensorMpi, ReductionsGivePartialsOrKeepShards) {
  dist::DeviceMesh mesh = mesh_1d();
  Tensor a = iota({7, 3});
  Tensor rows = dist::distribute_tensor(a, mesh, {Shard(0)});
  Tensor over_rows = sum(rows, {0});
  EXPECT_EQ(dist::dtensor_state(over_rows).placements, one(Partial()));
  EXPECT_TRUE(same(dist::full_tensor(over_rows), sum(a, {0})));
  Tensor over_cols = sum(rows, {1});
  EXPECT_EQ(dist::dtensor_state(over_cols).placements, one(Shard(0)));
  EXPECT_TRUE(same(dist::full_tensor(over_cols), sum(a, {1})));
  EXPECT_TRUE(same(dist::full_tensor(mean(rows)), mean(a), 1e-6));
  Tensor top = amax(rows, {0});
  EXPECT_EQ(dist::dtensor_state(top).placements, one(Partial(dist::ReduceOp::max)));
  EXPECT_TRUE(same(dist::full_tensor(top), amax(a, {0})));
  EXPECT_TRUE(same(dist::full_tensor(softmax(rows, 0)), softmax(a, 0), 1e-6));  // gathers dim 0
  Tensor sm = softmax(rows, 1);
  EXPECT_EQ(dist::dtensor_state(sm).placements, one(Shard(0)));
  EXPECT_TRUE(same(dist::full_tensor(sm), softmax(a, 1), 1e-6));
  Tensor ln = layer_norm(rows, {3});
  EXPECT_EQ(dist::dtensor_state(ln).placements, one(Shard(0)));
  EXPECT_TRUE(same(dist::full_tensor(ln), layer_norm(a, {3}), 1e-5));
}

TEST(DTensorMpi, MatmulStrategies) {
  dist::DeviceMesh mesh = mesh_1d();
  int64_t n = mesh.size(0);
  Tensor x = iota({4 * n, 2 * n}), w = sub(iota({2 * n, 3 * n}), 5.0);
  Tensor want = matmul(x, w);
  struct Case {
    Placement x, w, out;
  };
  for (Case c :
       {Case{Shard(0), Replicate(), Shard(0)}, Case{Replicate(), Shard(1), Shard(1)},
        Case{Shard(1), Shard(0), Partial()}, Case{Replicate(), Replicate(), Replicate()}}) {
    SCOPED_TRACE(c.x.str() + " @ " + c.w.str());
    Tensor y =
        matmul(dist::distribute_tensor(x, mesh, {c.x}), dist::distribute_tensor(w, mesh, {c.w}));
    EXPECT_EQ(dist::dtensor_state(y).placements, one(c.out));
    EXPECT_TRUE(same(dist::full_tensor(y), want));
  }
}

// Colwise then rowwise linear (Megatron's MLP): equal to the unsharded MLP.
TEST(DTensorMpi, TensorParallelMlp) {
  dist::DeviceMesh mesh = mesh_1d();
  int64_t n = mesh.size(0), width = 4, hidden = 4 * n;
  manual_seed(7);  // the same weights on every rank
  Tensor x = on_me(randn({3, width})), w1 = on_me(randn({hidden, width})),
         b1 = on_me(randn({hidden})), w2 = on_me(randn({width, hidden})),
         b2 = on_me(randn({width}));
  Tensor want = linear(gelu(linear(x, w1, b1)), w2, b2);
  Tensor dx = dist::distribute_tensor(x, mesh, {Replicate()});
  Tensor h = gelu(linear(dx, dist::distribute_tensor(w1, mesh, {Shard(0)}),
                         dist::distribute_tensor(b1, mesh, {Shard(0)})));
  EXPECT_EQ(dist::dtensor_state(h).placements, one(Shard(1)));
  Tensor y = linear(h, dist::distribute_tensor(w2, mesh, {Shard(1)}),
                    dist::distribute_tensor(b2, mesh, {Replicate()}));
  // P + R: the bias joins rank 0's partial sum, nothing moves until the value is asked for
  EXPECT_EQ(dist::dtensor_state(y).placements, one(Partial()));
  EXPECT_TRUE(same(dist::full_tensor(y), want, 1e-5));
  EXPECT_TRUE(same(dist::to_local(dist::redistribute(y, one(Replicate()))), want, 1e-5));
}

TEST(DTensorMpi, EmbeddingCatCopyAndTo) {
  dist::DeviceMesh mesh = mesh_1d();
  Tensor table = iota({10, 3});
  Tensor ids = on_me(reshape(arange(0, 12, 1, {.dtype = DType::i64}), {4, 3}));
  ids = to(div(to(ids, DType::f64), 2.0), DType::i64);  // 0, 0, 1, 1, ... < 10
  Tensor e = embedding(dist::distribute_tensor(table, mesh, {Replicate()}),
                       dist::distribute_tensor(ids, mesh, {Shard(0)}));
  EXPECT_EQ(dist::dtensor_state(e).placements, one(Shard(0)));
  EXPECT_TRUE(same(dist::full_tensor(e), embedding(table, ids)));
  Tensor a = iota({4, 6}), b = add(iota({4, 2}), 100.0);
  Tensor c = cat(
      {dist::distribute_tensor(a, mesh, {Shard(0)}), dist::distribute_tensor(b, mesh, {Shard(0)})},
      1);
  EXPECT_EQ(dist::dtensor_state(c).placements,
            one(Shard(0)));  // rows stay sharded along a column cat
  EXPECT_TRUE(same(dist::full_tensor(c), cat({a, b}, 1)));
  Tensor rows = cat(
      {dist::distribute_tensor(a, mesh, {Shard(0)}), dist::distribute_tensor(a, mesh, {Shard(0)})},
      0);
  EXPECT_TRUE(same(dist::full_tensor(rows), cat({a, a}, 0)));
  Tensor dst = dist::distribute_tensor(zeros_like(a), mesh, {Shard(1)});
  copy_(dst,
        dist::distribute_tensor(a, mesh, {Shard(0)}));  // (S4) redistributed to dst's placement
  EXPECT_EQ(dist::dtensor_state(dst).placements, one(Shard(1)));
  EXPECT_TRUE(same(dist::full_tensor(dst), a));
  Tensor half = to(dist::distribute_tensor(a, mesh, {Shard(0)}), DType::f64);
  EXPECT_EQ(half.dtype(), DType::f64);
  EXPECT_TRUE(same(dist::full_tensor(half), to(a, DType::f64)));
}

TEST(DTensorMpi, ViewsMoveShards) {
  dist::DeviceMesh mesh = mesh_1d();
  Tensor a = iota({6, 4, 2});
  Tensor d = dist::distribute_tensor(a, mesh, {Shard(0)});
  Tensor tr = transpose(d, 0, 1);
  EXPECT_EQ(dist::dtensor_state(tr).placements, one(Shard(1)));
  EXPECT_TRUE(same(dist::full_tensor(tr), transpose(a, 0, 1)));
  Tensor v = view(d, {6, 8});  // trailing dims merged: the row shards survive
  EXPECT_EQ(dist::dtensor_state(v).placements, one(Shard(0)));
  EXPECT_TRUE(same(dist::full_tensor(v), view(a, {6, 8})));
  Tensor flat = view(dist::distribute_tensor(a, mesh, {Shard(1)}), {48});
  EXPECT_EQ(dist::dtensor_state(flat).placements, one(Replicate()));
  EXPECT_TRUE(same(dist::full_tensor(flat), view(a, {48})));
}

// pytorch#170467's program on sharded tensors: fn(x, y): y.add_(2); return x.sin(), with
// x requiring grad. Outputs, the mutation of y and x.grad equal the unsharded run.
TEST(DTensorMpi, FoundingProgramEager) {
  dist::DeviceMesh mesh = mesh_1d();
  Tensor xf = div(iota({5, 3}), 7.0), yf = iota({5, 3});
  Tensor x = dist::distribute_tensor(xf, mesh, {Shard(0)});
  x.set_requires_grad(true);
  Tensor y = dist::distribute_tensor(yf, mesh, {Shard(0)});
  add_(y, wrapped_number(2.0));
  Tensor out = sin(x);
  sum(out).backward();
  EXPECT_TRUE(same(dist::full_tensor(out), sin(xf), 1e-6));
  EXPECT_TRUE(same(dist::full_tensor(y), yf + 2.0));
  ASSERT_TRUE(x.grad().defined());
  ASSERT_TRUE(x.grad().is_dtensor());
  EXPECT_EQ(dist::dtensor_state(x.grad()).placements, one(Shard(0)));
  EXPECT_TRUE(same(dist::full_tensor(x.grad()), cos(xf), 1e-6));
}

// The same program captured with fake tensors on every rank (forward + backward, this
// rank's graphs), then run on the real shards: outputs, y and x.grad equal eager.
TEST(DTensorMpi, FoundingProgramCapturedEqualsEager) {
  dist::DeviceMesh mesh = mesh_1d();
  Tensor xf = div(iota({5, 3}), 7.0), yf = iota({5, 3});
  auto fn = [](const TensorList& in) {
    Tensor y = in[1];
    add_(y, wrapped_number(2.0));
    return TensorList{sin(in[0])};
  };
  // eager
  Tensor x = dist::distribute_tensor(xf, mesh, {Shard(0)});
  x.set_requires_grad(true);
  Tensor y = dist::distribute_tensor(yf, mesh, {Shard(0)});
  Tensor out = fn({x, y})[0];
  Tensor tangent = dist::distribute_tensor(add(iota({5, 3}), 1.0), mesh, {Shard(0)});
  out.backward(tangent);
  // captured and run
  Tensor x2 = dist::distribute_tensor(xf, mesh, {Shard(0)});
  x2.set_requires_grad(true);
  Tensor y2 = dist::distribute_tensor(yf, mesh, {Shard(0)});
  passes::JointProgram j = passes::capture_joint(fn, {x2, y2});
  passes::JointRun run = passes::run_joint(j, {x2, y2}, {tangent});
  // (S4) outputs and gradients come back as the DTensors eager gives
  ASSERT_TRUE(run.outputs[0].is_dtensor() && run.grads[0].is_dtensor());
  EXPECT_EQ(dist::dtensor_state(run.outputs[0]).placements, dist::dtensor_state(out).placements);
  EXPECT_EQ(dist::dtensor_state(run.grads[0]).placements, dist::dtensor_state(x.grad()).placements);
  EXPECT_TRUE(same(dist::to_local(run.outputs[0]), dist::to_local(out)));
  EXPECT_TRUE(same(dist::to_local(y2), dist::to_local(y)));  // the epilogue wrote y's shard
  EXPECT_TRUE(same(dist::to_local(run.grads[0]), dist::to_local(x.grad())));
  EXPECT_TRUE(same(dist::full_tensor(run.grads[0]), dist::full_tensor(x.grad())));
  EXPECT_TRUE(same(dist::full_tensor(y2), yf + 2.0));
}

// Gradients of sharded parameters through the TP MLP, reduced where PyTorch reduces.
TEST(DTensorMpi, TensorParallelGradients) {
  dist::DeviceMesh mesh = mesh_1d();
  int64_t n = mesh.size(0), width = 4, hidden = 2 * n;
  manual_seed(11);
  Tensor x = on_me(randn({3, width})), w1 = on_me(randn({hidden, width})),
         w2 = on_me(randn({width, hidden}));
  Tensor rw1 = w1.detach(), rw2 = w2.detach();
  rw1.set_requires_grad(true), rw2.set_requires_grad(true);
  sum(linear(relu(linear(x, rw1)), rw2)).backward();
  Tensor dw1 = dist::distribute_tensor(w1, mesh, {Shard(0)}),
         dw2 = dist::distribute_tensor(w2, mesh, {Shard(1)});
  dw1.set_requires_grad(true), dw2.set_requires_grad(true);
  Tensor dx = dist::distribute_tensor(x, mesh, {Replicate()});
  sum(linear(relu(linear(dx, dw1)), dw2)).backward();
  EXPECT_EQ(dist::dtensor_state(dw1.grad()).placements, one(Shard(0)));
  EXPECT_EQ(dist::dtensor_state(dw2.grad()).placements, one(Shard(1)));
  EXPECT_TRUE(same(dist::full_tensor(dw1.grad()), rw1.grad(), 1e-5));
  EXPECT_TRUE(same(dist::full_tensor(dw2.grad()), rw2.grad(), 1e-5));
}

// The TP MLP's forward and backward captured per rank and run on the shards: the loss
// (a partial sum) and the sharded weight gradients equal eager.
TEST(DTensorMpi, TensorParallelTrainingCaptured) {
  dist::DeviceMesh mesh = mesh_1d();
  int64_t n = mesh.size(0), width = 4, hidden = 2 * n;
  manual_seed(5);
  Tensor x = on_me(randn({3, width})), w1 = on_me(randn({hidden, width})),
         w2 = on_me(randn({width, hidden}));
  auto fn = [](const TensorList& in) {
    return TensorList{sum(linear(relu(linear(in[0], in[1])), in[2]))};
  };
  auto params = [&] {
    Tensor a = dist::distribute_tensor(w1, mesh, {Shard(0)}),
           b = dist::distribute_tensor(w2, mesh, {Shard(1)});
    a.set_requires_grad(true), b.set_requires_grad(true);
    return std::pair{a, b};
  };
  Tensor dx = dist::distribute_tensor(x, mesh, {Replicate()});
  auto [ea, eb] = params();
  Tensor loss = fn({dx, ea, eb})[0];
  loss.backward();
  auto [ca, cb] = params();
  passes::JointProgram j = passes::capture_joint(fn, {dx, ca, cb});
  // the loss stays a partial sum (no bias): the graphs need no collective at all
  EXPECT_EQ(j.forward.str().find("all_reduce("), std::string::npos) << j.forward.str();
  passes::JointRun run = passes::run_joint(j, {dx, ca, cb});
  // (S4) the loss stays a partial sum, the gradients keep the parameters' shards, as eager
  for (auto [got, want] :
       {std::pair{run.outputs[0], loss}, {run.grads[1], ea.grad()}, {run.grads[2], eb.grad()}}) {
    ASSERT_TRUE(got.is_dtensor());
    EXPECT_EQ(dist::dtensor_state(got).placements, dist::dtensor_state(want).placements);
    EXPECT_TRUE(same(dist::to_local(got), dist::to_local(want), 1e-5));
    EXPECT_TRUE(same(dist::full_tensor(got), dist::full_tensor(want), 1e-5));
  }
}

// The reference GPT under tensor parallelism (attention qkv and MLP fc colwise, both
// output projections rowwise): logits and every parameter's gradient equal the
// single-process model's.
TEST(DTensorMpi, TensorParallelGpt) {
  dist::DeviceMesh mesh = mesh_1d();
  nn::GPTConfig cfg{.vocab = 32, .context = 16, .layers = 2, .heads = 2, .width = 16};
  manual_seed(3);
  nn::GPT ref(cfg), tp(cfg);
  tp.load_state_dict(ref.state_dict());
  ref.to(my_device()), tp.to(my_device());
  dist::parallelize_module(tp, mesh,
                           {{"blocks.*.attn.qkv", dist::ParallelStyle::colwise},
                            {"blocks.*.attn.proj", dist::ParallelStyle::rowwise},
                            {"blocks.*.fc", dist::ParallelStyle::colwise},
                            {"blocks.*.proj", dist::ParallelStyle::rowwise}});
  auto params = tp.named_parameters();
  for (const auto& [name, p] : params) {
    ASSERT_TRUE(p.is_dtensor()) << name;
    EXPECT_TRUE(p.requires_grad()) << name;
  }
  for (const auto& [name, p] : params) {
    if (name == "blocks.0.attn.qkv.weight" || name == "blocks.1.fc.bias") {
      EXPECT_EQ(dist::dtensor_state(p).placements, one(Shard(0))) << name;
    }
    if (name == "blocks.0.proj.weight") {
      EXPECT_EQ(dist::dtensor_state(p).placements, one(Shard(1))) << name;
    }
    if (name == "blocks.0.proj.bias" || name == "wte.weight") {
      EXPECT_EQ(dist::dtensor_state(p).placements, one(Replicate())) << name;
    }
  }
  Tensor ids = on_me(reshape(arange(0, 16, 1, {.dtype = DType::i64}), {2, 8}));
  Tensor want = ref(TensorList{ids})[0];
  Tensor got;
  {
    dist::ImplicitReplication implicit;  // positions and masks the model makes in forward
    got = tp(TensorList{dist::distribute_tensor(ids, mesh, {Replicate()})})[0];
    EXPECT_TRUE(same(dist::full_tensor(got), want, 1e-4));
    mean(got * got).backward();
  }
  mean(want * want).backward();
  auto ref_params = ref.named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    SCOPED_TRACE(params[i].first);
    ASSERT_TRUE(params[i].second.grad().defined());
    EXPECT_TRUE(
        same(dist::full_tensor(params[i].second.grad()), ref_params[i].second.grad(), 1e-4));
  }
}

// Attention with heads sharded (q, k, v colwise, proj rowwise): output and gradients
// equal the unsharded module's.
struct HeadAttention : nn::Module {
  HeadAttention(int64_t width, int64_t heads)
      : heads(heads),
        q(register_module("q", std::make_shared<nn::Linear>(width, width, true, Device("cpu:0")))),
        k(register_module("k", std::make_shared<nn::Linear>(width, width, true, Device("cpu:0")))),
        v(register_module("v", std::make_shared<nn::Linear>(width, width, true, Device("cpu:0")))),
        proj(register_module("proj",
                             std::make_shared<nn::Linear>(width, width, true, Device("cpu:0")))) {}
  TensorList forward(const TensorList& in) override {
    const Tensor& x = in[0];
    int64_t B = x.size(0), T = x.size(1), C = x.size(2);
    auto split = [&](const Tensor& t) {
      return transpose(view(t, {B, T, heads, C / heads}), 1, 2);
    };
    Tensor att = softmax(matmul(split((*q)(x)), transpose(split((*k)(x)), 2, 3)) * 0.5, -1);
    return {(*proj)(reshape(transpose(matmul(att, split((*v)(x))), 1, 2), {B, T, C}))};
  }
  int64_t heads;
  std::shared_ptr<nn::Linear> q, k, v, proj;
};

TEST(DTensorMpi, AttentionWithHeadsSharded) {
  dist::DeviceMesh mesh = mesh_1d();
  int64_t n = mesh.size(0);
  manual_seed(13);
  HeadAttention ref(4 * n, n), tp(4 * n, n);
  tp.load_state_dict(ref.state_dict());
  ref.to(my_device()), tp.to(my_device());
  dist::parallelize_module(tp, mesh,
                           {{"q", dist::ParallelStyle::colwise},
                            {"k", dist::ParallelStyle::colwise},
                            {"v", dist::ParallelStyle::colwise},
                            {"proj", dist::ParallelStyle::rowwise}});
  Tensor x = on_me(randn({2, 3, 4 * n}));
  Tensor want = ref(TensorList{x})[0];
  Tensor got = tp(TensorList{dist::distribute_tensor(x, mesh, {Replicate()})})[0];
  EXPECT_EQ(dist::dtensor_state(got).placements, one(Replicate()));
  EXPECT_TRUE(same(dist::to_local(got), want, 1e-5));
  sum(want * want).backward();
  sum(got * got).backward();
  auto a = ref.named_parameters(), b = tp.named_parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a[i].first);
    EXPECT_TRUE(same(dist::full_tensor(b[i].second.grad()), a[i].second.grad(), 1e-4));
  }
}

// The sequence-parallel MLP (sequence shards in and out) equals the unsharded one.
TEST(DTensorMpi, SequenceParallelMlp) {
  dist::DeviceMesh mesh = mesh_1d();
  int64_t n = mesh.size(0);
  manual_seed(17);
  Tensor x = on_me(randn({2, 2 * n, 8})), w1 = on_me(randn({4 * n, 8})),
         w2 = on_me(randn({8, 4 * n}));
  Tensor want = linear(gelu(linear(layer_norm(x, {8}), w1)), w2);
  Tensor h = gelu(linear(layer_norm(dist::distribute_tensor(x, mesh, {Shard(1)}), {8}),
                         dist::distribute_tensor(w1, mesh, {Shard(0)})));
  Tensor y =
      dist::redistribute(linear(h, dist::distribute_tensor(w2, mesh, {Shard(1)})), {Shard(1)});
  EXPECT_TRUE(same(dist::full_tensor(y), want, 1e-4));
}

// (S5) A tensor-parallel MLP saved as a distributed program (global graph, abstract
// mesh, shards with offsets) and loaded onto the same mesh and onto a mesh of another
// size: both run to the single-process result. Missing shards are an error.
struct TpMlp : nn::Module {
  explicit TpMlp(int64_t width, int64_t hidden)
      : fc(register_module("fc",
                           std::make_shared<nn::Linear>(width, hidden, true, Device("cpu:0")))),
        proj(register_module("proj",
                             std::make_shared<nn::Linear>(hidden, width, true, Device("cpu:0")))) {}
  TensorList forward(const TensorList& in) override { return {(*proj)(gelu((*fc)(in[0])))}; }
  std::shared_ptr<nn::Linear> fc, proj;
};

TEST(DTensorMpi, DistributedProgramLoadsAtAnotherWorldSize) {
  int64_t n = world()->size();
  dist::DeviceMesh mesh = mesh_1d();
  manual_seed(21);
  TpMlp ref(4, 3 * n), model(4, 3 * n);  // 3n hidden: uneven shards at the other size
  model.load_state_dict(ref.state_dict());
  ref.to(my_device()), model.to(my_device());
  Tensor x = on_me(randn({5, 4}));
  Tensor want;
  {
    autograd::NoGradGuard no_grad;
    want = ref(TensorList{x})[0];
  }
  dist::parallelize_module(
      model, mesh, {{"fc", dist::ParallelStyle::colwise}, {"proj", dist::ParallelStyle::rowwise}});
  std::string path = ::testing::TempDir() + "kiln_dtensor_mlp_np" + std::to_string(n) + ".kiln";
  dist::save_distributed(model, {dist::distribute_tensor(x, mesh, {Replicate()})}, path);
  // a whole program file refuses to pretend it has its state
  expect_error([&] { load_program(path); }, ErrorKind::unsupported, "is a distributed program");
  // the same mesh, then a mesh of n / 2 ranks (or 1) along 'tp'
  dist::DeviceMesh half(world(), {2, n / 2}, {"dp", "tp"}, my_device());
  for (const dist::DeviceMesh& target : {mesh, half["tp"]}) {
    SCOPED_TRACE(target.str());
    dist::LoadedProgram loaded = dist::load_distributed(path, target);
    ASSERT_EQ(loaded.input_placements.size(), 1u);
    Tensor local_x = dist::to_local(dist::distribute_tensor(x, target, loaded.input_placements[0]));
    Tensor y = loaded.program.run({local_x})[0];
    EXPECT_TRUE(same(y, want, 1e-5));  // rowwise + bias: partial sums, reduced as outputs
  }
  expect_error(
      [&] { dist::load_distributed(path, dist::DeviceMesh(world(), {n}, {"dp"}, my_device())); },
      ErrorKind::value, "was saved for a mesh with axes [\"tp\"]");
  world()->barrier();
  if (world()->rank() == 0)
    std::remove((path + ".shard-" + std::to_string(n - 1) + "-of-" + std::to_string(n)).c_str());
  world()->barrier();
  expect_error([&] { dist::load_distributed(path, mesh); }, ErrorKind::value, "is missing");
}

// (Y1, S5) A distributed program with a dynamic batch: the global graph keeps the batch
// symbol, each rank's lowered graph too, and it runs at every batch size in the range on
// the mesh it was saved for and on a smaller one; a batch outside the range, or a dynamic
// dim that is sharded, is an error naming it.
TEST(DTensorMpi, DistributedProgramWithADynamicBatch) {
  int64_t n = world()->size();
  dist::DeviceMesh mesh = mesh_1d();
  manual_seed(22);
  TpMlp ref(4, 2 * n), model(4, 2 * n);
  model.load_state_dict(ref.state_dict());
  ref.to(my_device()), model.to(my_device());
  dist::parallelize_module(
      model, mesh, {{"fc", dist::ParallelStyle::colwise}, {"proj", dist::ParallelStyle::rowwise}});
  std::string path = ::testing::TempDir() + "kiln_dtensor_dyn_np" + std::to_string(n) + ".kiln";
  Tensor x = on_me(randn({5, 4}));
  dist::save_distributed(model, {dist::distribute_tensor(x, mesh, {Replicate()})}, path,
                         {{{0, Dim("batch", 1, 16)}}});
  dist::DeviceMesh half(world(), {2, n / 2}, {"dp", "tp"}, my_device());
  for (const dist::DeviceMesh& target : {mesh, half["tp"]}) {
    SCOPED_TRACE(target.str());
    dist::LoadedProgram loaded = dist::load_distributed(path, target);
    ASSERT_EQ(loaded.program.shapes.symbols.size(), 1u);
    EXPECT_EQ(loaded.program.shapes.symbols[0].dim_name, "batch");
    EXPECT_EQ(loaded.program.shapes.symbols[0].max, 16);
    for (int64_t b : {1, 3, 5, 16}) {
      SCOPED_TRACE(b);
      Tensor xb = on_me(randn({b, 4}));
      Tensor want;
      {
        autograd::NoGradGuard no_grad;
        want = ref(TensorList{xb})[0];
      }
      Tensor local =
          dist::to_local(dist::distribute_tensor(xb, target, loaded.input_placements[0]));
      Tensor y = loaded.program.run({local})[0];
      EXPECT_TRUE(same(y, want, 1e-5));
      runtime::Executor exec(loaded.program);
      EXPECT_TRUE(same(exec.run({local})[0], want, 1e-5));
    }
    Tensor big = dist::to_local(
        dist::distribute_tensor(on_me(randn({17, 4})), target, loaded.input_placements[0]));
    expect_error([&] { loaded.program.run({big}); }, ErrorKind::shape,
                 "outside the range [1, 16] of s0 ('batch')");
  }
  // the batch of a batch-sharded input cannot be dynamic (each rank's shard size would
  // depend on it): said at save, naming the input and dim
  expect_error(
      [&] {
        dist::save_distributed(model, {dist::distribute_tensor(x, mesh, {Shard(0)})}, path + ".x",
                               {{{0, Dim("batch", 1, 16)}}});
      },
      ErrorKind::unsupported, "input 0 dim 0");
}

TEST(DTensorMpi, TwoDimensionalMesh) {
  int64_t n = world()->size();
  dist::DeviceMesh mesh(world(), {2, n / 2}, {"dp", "tp"}, my_device());
  Tensor a = iota({6, 5});
  Tensor d = dist::distribute_tensor(a, mesh, {Shard(0), Shard(1)});
  EXPECT_TRUE(same(dist::full_tensor(d), a));
  Tensor r = dist::redistribute(d, {Replicate(), Shard(0)});
  EXPECT_TRUE(same(dist::full_tensor(r), a));
  EXPECT_TRUE(same(dist::full_tensor(mul(d, 3.0)), a * 3.0));
  Tensor s = sum(d, {0});  // partial along dp, column shards along tp
  EXPECT_TRUE(dist::dtensor_state(s).placements[0].is_partial());
  EXPECT_TRUE(same(dist::full_tensor(s), sum(a, {0})));
  dist::DeviceMesh tp = mesh["tp"];
  EXPECT_EQ(tp.size(0), n / 2);
  EXPECT_TRUE(same(dist::full_tensor(dist::distribute_tensor(a, tp, {Shard(0)})), a));
}

// Note [Nested shards]: a tensor dim sharded by several mesh dimensions, as PyTorch's
// [Shard(0), Shard(0)]: each mesh dimension chunks what the ones before it left
// (torch.chunk at every level, uneven sizes included). Every transition between the
// placements of a 2-d mesh gives the full value and this rank's nested piece; pointwise
// ops keep nested shards, other ops see them gathered to one mesh dimension first.
TEST(DTensorMpi, NestedShardsEveryTransition) {
  int64_t n = world()->size();
  dist::DeviceMesh mesh(world(), {2, n / 2}, {"dp", "tp"}, my_device());
  auto piece = [&](Tensor x, const Placements& p) {  // the expected local value
    for (int64_t i = 0; i < 2; ++i)
      if (p[static_cast<size_t>(i)].is_shard()) {
        int64_t d = p[static_cast<size_t>(i)].dim;
        auto [begin, len] = dist::chunk_of(x.size(d), mesh.size(i), mesh.coordinate(i));
        x = narrow(x, d, begin, len);
      }
    return x;
  };
  std::vector<Placements> layouts;
  for (Placement a : {Shard(0), Shard(1), Replicate(), Partial()})
    for (Placement b : {Shard(0), Shard(1), Replicate(), Partial()}) layouts.push_back({a, b});
  for (IntList shape : {IntList{8, 4}, IntList{7, 6}, IntList{3, 5}}) {
    Tensor full = iota(shape);
    for (const Placements& from : layouts)
      for (const Placements& to : layouts) {
        SCOPED_TRACE(fmt::format("{} {} -> {}", Dims(shape).str(), dist::to_string(from),
                                 dist::to_string(to)));
        Tensor dt = dist::distribute_tensor(full, mesh, from);
        bool refused = false;  // S -> P, as PyTorch
        for (size_t i = 0; i < 2; ++i)
          refused = refused || (from[i].is_shard() && to[i].is_partial());
        if (refused) {
          expect_error([&] { dist::redistribute(dt, to); }, ErrorKind::unsupported,
                       "to Replicate first");
          continue;
        }
        Tensor r = dist::redistribute(dt, to);
        EXPECT_EQ(dist::dtensor_state(r).placements, to);
        EXPECT_TRUE(same(dist::full_tensor(r), full));
        if (!to[0].is_partial() && !to[1].is_partial()) {
          EXPECT_TRUE(same(dist::to_local(r), piece(full, to)));
        }
      }
  }
  // Ops on nested shards: pointwise keeps them (no collective), a product and a softmax
  // along the nested dim gather the inner shards first; values as unsharded.
  Tensor a = iota({8, 6}), w = iota({6, 3});
  Tensor d = dist::distribute_tensor(a, mesh, {Shard(0), Shard(0)});
  EXPECT_EQ(dist::to_local(d).shape(), Dims({8 / n, 6}));
  Tensor y = add(mul(d, 3.0), d);
  EXPECT_EQ(dist::dtensor_state(y).placements, (Placements{Shard(0), Shard(0)}));
  EXPECT_TRUE(same(dist::to_local(y), piece(a * 4.0, {Shard(0), Shard(0)})));
  Tensor wr = dist::distribute_tensor(w, mesh, {Replicate(), Replicate()});
  EXPECT_TRUE(same(dist::full_tensor(matmul(d, wr)), matmul(a, w)));
  EXPECT_TRUE(same(dist::full_tensor(softmax(d, 0)), softmax(a, 0), 1e-6));
  EXPECT_TRUE(same(dist::full_tensor(sum(d, {0})), sum(a, {0})));
  // Laid out by from_local: shards of an even dim.
  Tensor back = dist::from_local(dist::to_local(d), mesh, {Shard(0), Shard(0)});
  EXPECT_EQ(back.shape(), a.shape());
  EXPECT_TRUE(same(dist::full_tensor(back), a));
}

TEST(DTensorMpi, ErrorsOnEveryRank) {
  dist::DeviceMesh mesh = mesh_1d();
  Tensor d = dist::distribute_tensor(iota({4, 4}), mesh, {Shard(0)});
  expect_error(
      [&] {
        add(d, iota({4, 4}));
      },
      ErrorKind::value, "[add] mixed Tensor and DTensor: argument 'other'");
  dist::DeviceMesh other = mesh_1d();
  Tensor e = dist::distribute_tensor(iota({4, 4}), other, {Shard(0)});
  expect_error([&] { add(d, e); }, ErrorKind::value, "[add] DTensor arguments on different meshes");
  expect_error([&] { index_select(d, 0, arange(0, 2, 1, {.dtype = DType::i64})); },
               ErrorKind::value, "mixed Tensor and DTensor");
  expect_error([&] { dist::redistribute(d, {Shard(2)}); }, ErrorKind::index,
               "placement S(2) of a 2-d tensor");
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// A pre-LN MLP block: LayerNorm, fc1, GELU, fc2, residual.
struct SpMlp : nn::Module {
  std::shared_ptr<nn::LayerNorm> ln = register_module("ln", std::make_shared<nn::LayerNorm>(16));
  std::shared_ptr<nn::Linear> fc1 = register_module("fc1", std::make_shared<nn::Linear>(16, 32));
  std::shared_ptr<nn::Linear> fc2 = register_module("fc2", std::make_shared<nn::Linear>(32, 16));
  TensorList forward(const TensorList& in) override {
    Tensor h = (*ln)(in[0]);
    return {(*fc2)(gelu((*fc1)(h)))};
  }
};

// parallelize_module with layouts (Note [Parallel styles with layouts]): plain tensors in
// and out. Tensor parallel: colwise fc1 takes the replicated input, rowwise fc2 gives a
// replicated output (one all_reduce). Sequence parallel: each rank holds its part of the
// sequence; LayerNorm runs on it, fc1 all_gathers it, fc2 reduce_scatters back to the
// sequence shard. Outputs and gradients equal the single-process module's.
TEST(DTensorMpi, ParallelStylesWithLayouts) {
  dist::DeviceMesh mesh = mesh_1d();
  int64_t n = world()->size(), rank = world()->rank();
  for (bool sequence : {false, true}) {
    SCOPED_TRACE(sequence);
    manual_seed(12);
    SpMlp ref, tp;
    tp.load_state_dict(ref.state_dict());
    ref.to(my_device()), tp.to(my_device());
    std::vector<std::pair<std::string, dist::TensorParallelStyle>> plan;
    if (sequence)
      plan = {{"ln", dist::SequenceParallel{.sequence_dim = 1}},
              {"fc1", dist::ColwiseParallel{.input_layout = Shard(1)}},
              {"fc2", dist::RowwiseParallel{.output_layout = Shard(1)}}};
    else
      plan = {{"fc1", dist::ColwiseParallel{}}, {"fc2", dist::RowwiseParallel{}}};
    dist::parallelize_module(tp, mesh, plan);
    Tensor x = on_me(randn({2, 4 * n, 16}));
    Tensor want = ref(TensorList{x})[0];
    Tensor mine = sequence ? narrow(x, 1, 4 * rank, 4) : x;  // this rank's input
    Tensor got = tp(TensorList{mine})[0];
    ASSERT_FALSE(got.is_dtensor());
    EXPECT_TRUE(same(got, sequence ? narrow(want, 1, 4 * rank, 4) : want, 1e-5));
    // Gradients: each rank's loss is its part (sequence) or the whole mean over ranks.
    sum(got * got).backward();
    sum(want * want).backward();
    auto tp_params = tp.named_parameters(), ref_params = ref.named_parameters();
    for (size_t i = 0; i < tp_params.size(); ++i) {
      SCOPED_TRACE(tp_params[i].first);
      Tensor g = tp_params[i].second.grad();
      ASSERT_TRUE(g.defined());
      Tensor full = g.is_dtensor() ? dist::full_tensor(g) : g;  // ln stays plain in plain TP
      // Sequence-parallel LayerNorm's replicated parameters hold each rank's part of the
      // gradient (PyTorch's SequenceParallel leaves them so too): their sum is the gradient.
      if (sequence && tp_params[i].first.rfind("ln", 0) == 0)
        full = dist::full_tensor(dist::redistribute(
            dist::from_local(dist::to_local(g), mesh, {Partial()}), {Replicate()}));
      EXPECT_TRUE(same(full, ref_params[i].second.grad(), 1e-4));
    }
  }
}

}  // namespace
}  // namespace kiln

// make_fx and ProxyMode: (T1)-(T4), round trips through the interpreter, devices.
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::expect_error;
using Fn = std::function<TensorList(const TensorList&)>;
using Mode = MakeFxOptions::Mode;

TensorList mlp(const TensorList& in) {
  Tensor h = in[0];
  {
    ScopeName s("fc1");
    h = relu(linear(h, in[1], in[2]));
  }
  {
    ScopeName s("fc2");
    h = linear(h, in[3]);
  }
  return {softmax(h, -1)};
}

TensorList views(const TensorList& in) {
  Tensor t = transpose(view(in[0], {4, 3}), 0, 1);
  Tensor row = select(t, 0, 1);  // sequenced: argument evaluation order is unspecified
  Tensor total = sum(sum(slice(t, 1, 0, 4, 2), {1}), {0});
  return {add(row, total)};
}

TensorList copies(const TensorList& in) {
  Tensor x = in[0];
  copy_(x, in[1]);
  copy_(x, in[2]);
  return {x};
}

TEST(MakeFx, GoldenMlp) {  // (T1), provenance
  TensorList in = {randn({8, 16}), randn({32, 16}), randn({32}), randn({4, 32})};
  ir::Graph g = make_fx(mlp, in, {.input_names = {"x", "w1", "b1", "w2"}});
  g.verify();
  EXPECT_EQ(g.str(),
            "%x : f32[8,16]@cpu:0 = input()\n"
            "%w1 : f32[32,16]@cpu:0 = input()\n"
            "%b1 : f32[32]@cpu:0 = input()\n"
            "%w2 : f32[4,32]@cpu:0 = input()\n"
            "%linear : f32[8,32]@cpu:0 = linear(%x, %w1, %b1)  # fc1\n"
            "%relu : f32[8,32]@cpu:0 = relu(%linear)  # fc1\n"
            "%linear_1 : f32[8,4]@cpu:0 = linear(%relu, %w2)  # fc2\n"
            "%softmax : f32[8,4]@cpu:0 = softmax(%linear_1, dim=-1)\n"
            "return %softmax\n");
}

TEST(MakeFx, GoldenViews) {
  ir::Graph g = make_fx(views, {randn({12})}, {.input_names = {"x"}});
  EXPECT_EQ(g.str(),
            "%x : f32[12]@cpu:0 = input()\n"
            "%view : f32[4,3]@cpu:0 = view(%x, size=[4, 3])\n"
            "%transpose : f32[3,4]@cpu:0 = transpose(%view, dim0=0, dim1=1)\n"
            "%select : f32[4]@cpu:0 = select(%transpose, dim=0, index=1)\n"
            "%slice : f32[3,2]@cpu:0 = slice(%transpose, dim=1, start=0, end=4, step=2)\n"
            "%sum : f32[3]@cpu:0 = sum(%slice, dim=[1])\n"
            "%sum_1 : f32[]@cpu:0 = sum(%sum, dim=[0])\n"
            "%add : f32[4]@cpu:0 = add(%select, %sum_1)\n"
            "return %add\n");
}

TEST(MakeFx, InPlaceOpsChainByDefault) {  // (T3)
  TensorList in = {zeros({3}), ones({3}), full({3}, 2.0)};
  ir::Graph g = make_fx(copies, in, {.input_names = {"x", "y", "z"}});
  EXPECT_EQ(g.str(),
            "%x : f32[3]@cpu:0 = input()\n"
            "%y : f32[3]@cpu:0 = input()\n"
            "%z : f32[3]@cpu:0 = input()\n"
            "%copy_ : f32[3]@cpu:0 = copy_(%x, %y)\n"
            "%copy__1 : f32[3]@cpu:0 = copy_(%copy_, %z)\n"
            "return %copy__1\n");
}

TEST(MakeFx, NoClobberScopeKeepsExistingNodes) {  // (T4)
  TensorList in = {zeros({3}), ones({3}), full({3}, 2.0)};
  Fn scoped = [](const TensorList& x) {
    NoClobberScope s;
    return copies(x);
  };
  ir::Graph g = make_fx(scoped, in, {.input_names = {"x", "y", "z"}});
  EXPECT_EQ(g.str(),
            "%x : f32[3]@cpu:0 = input()\n"
            "%y : f32[3]@cpu:0 = input()\n"
            "%z : f32[3]@cpu:0 = input()\n"
            "%copy_ : f32[3]@cpu:0 = copy_(%x, %y)\n"
            "%copy__1 : f32[3]@cpu:0 = copy_(%x, %z)\n"
            "return %x\n");
  EXPECT_FALSE(NoClobberScope::active());
}

// A composite in-place op whose temporary is made without dispatch (so it has no
// node), written to in place, then copied into self -- the shape of a distributed
// tensor's copy_ that redistributes first.
Tensor& add_via_temporary_(Tensor& self, const Tensor& other) {
  Tensor tmp =
      from_vector(std::vector<float>(static_cast<size_t>(self.numel()), 0.0f), self.shape().vec());
  copy_(tmp, add(self, other));  // tmp has no node: it gets this one, scope or not
  return copy_(self, tmp);
}

TEST(MakeFx, NoClobberScopeStillTracksNewIntermediates) {  // (T4), second half
  Fn fn = [](const TensorList& in) {
    Tensor x = in[0];
    NoClobberScope s;
    add_via_temporary_(x, in[1]);
    return TensorList{x};
  };
  TensorList in = {tensor({1, 2, 3}), tensor({10, 20, 30})};
  for (Mode mode : {Mode::real, Mode::fake}) {
    ir::Graph g = make_fx(fn, in, {.mode = mode, .input_names = {"x", "y"}});
    g.verify();
    std::string s = g.str();
    EXPECT_NE(s.find("%copy_ : f32[3]@cpu:0 = copy_(%const, %add)"), std::string::npos) << s;
    EXPECT_NE(s.find("copy_(%x, %copy_)"), std::string::npos) << s;  // reads the new value
    EXPECT_NE(s.find("return %x"), std::string::npos) << s;
    Tensor x = tensor({1, 2, 3});
    TensorList out = ir::interpret(g, {x, tensor({10, 20, 30})});
    EXPECT_EQ(to_vector<float>(out[0]), (std::vector<float>{11, 22, 33}));
    EXPECT_EQ(to_vector<float>(x), (std::vector<float>{11, 22, 33}));  // mutated the input
  }
}

// (T2) A literal made during a fake trace is a constant node holding its real value, so
// the graph runs and saves; the fake tensor the code saw is bound to it.
TEST(MakeFx, LiteralsInAFakeTraceAreRealConstants) {
  Fn fn = [](const TensorList& in) { return TensorList{mul(in[0], tensor({2, 3}))}; };
  ir::Graph g = make_fx(fn, {ones({2})}, {.mode = Mode::fake, .input_names = {"x"}});
  g.verify();
  std::string s = g.str();
  EXPECT_NE(s.find("= constant([2., 3.])"), std::string::npos) << s;
  TensorList out = ir::interpret(g, {tensor({5, 7})});
  EXPECT_EQ(to_vector<float>(out[0]), (std::vector<float>{10, 21}));
}

TEST(MakeFx, OutsideTensorsBecomeConstants) {  // (T2)
  Tensor bias = tensor({0.5, -0.5});
  Fn fn = [&](const TensorList& in) { return TensorList{add(in[0], bias)}; };
  ir::Graph g = make_fx(fn, {ones({2})}, {.mode = Mode::real, .input_names = {"x"}});
  EXPECT_EQ(g.str(),
            "%x : f32[2]@cpu:0 = input()\n"
            "%const : f32[2]@cpu:0 = constant([0.5, -0.5])\n"
            "%add : f32[2]@cpu:0 = add(%x, %const)\n"
            "return %add\n");
  EXPECT_TRUE(g.nodes()[1]->value().is_same(bias));
}

// (T1) detach() of a traced tensor is recorded (an alias without history, as PyTorch
// records aten.detach): never a constant holding the trace-time tensor.
TEST(MakeFx, DetachIsRecorded) {
  Fn fn = [](const TensorList& in) {
    Tensor y = exp(in[0]);
    return TensorList{mul(y.detach(), 2.0), in[0].detach()};
  };
  for (Mode mode : {Mode::fake, Mode::real}) {
    ir::Graph g = make_fx(fn, {ones({2})}, {.mode = mode, .input_names = {"x"}});
    g.verify();
    std::string s = g.str();
    EXPECT_EQ(s.find("constant"), std::string::npos) << s;
    EXPECT_NE(s.find("alias(%exp)"), std::string::npos) << s;
    TensorList out = ir::interpret(g, {tensor({0, 1})});
    EXPECT_TRUE(testing::all_close(out[0], {2.0, 2.0 * std::exp(1.0)})) << s;
    EXPECT_EQ(to_vector<float>(out[1]), (std::vector<float>{0, 1}));
  }
  // Under autograd: the detached value has no history, eagerly and traced.
  Tensor w = ones({2});
  w.set_requires_grad(true);
  EXPECT_FALSE(w.detach().requires_grad());
  {
    FakeMode fake;
    Tensor fw = fake.from_real(w);
    Tensor d = exp(fw).detach();
    EXPECT_FALSE(d.requires_grad());
    EXPECT_TRUE(d.is_fake());
  }
}

TEST(MakeFx, ProxyTableIsWeak) {  // (T2): a dead tensor never lends its node
  Fn fn = [](const TensorList& in) {
    for (int i = 0; i < 50; ++i) {
      Tensor tmp = exp(in[0]);  // traced, then freed
    }
    Tensor outside = from_vector(std::vector<float>{7, 7});  // no node; may reuse an address
    return TensorList{add(in[0], outside)};
  };
  ir::Graph g = make_fx(fn, {ones({2})}, {.mode = Mode::real});
  ir::Node* add = g.output()->inputs()[0].node;
  EXPECT_EQ(add->inputs()[1].node->opcode(), ir::Opcode::constant);
  EXPECT_EQ(to_vector<float>(ir::interpret(g, {ones({2})})[0]), (std::vector<float>{8, 8}));
}

// (T2) The same with the address certainly reused: the proxy table keys on addresses and
// tells impls apart by TensorId.
TEST(MakeFx, ARecycledAddressNeverInheritsANode) {
  Fn fn = [](const TensorList& in) {
    Tensor tmp = exp(in[0]);  // traced: the table has an entry at its address
    const TensorImpl* at = tmp.impl();
    tmp = Tensor();
    Tensor outside = from_vector(std::vector<float>{7, 7});
    EXPECT_EQ(outside.impl(), at);  // the freed descriptor, handed back by the pool
    return TensorList{add(in[0], outside)};
  };
  ir::Graph g = make_fx(fn, {ones({2})}, {.mode = Mode::real});
  ir::Node* add = g.output()->inputs()[0].node;
  EXPECT_EQ(add->inputs()[1].node->opcode(), ir::Opcode::constant) << g.str();
  EXPECT_EQ(to_vector<float>(ir::interpret(g, {ones({2})})[0]), (std::vector<float>{8, 8}));
}

TEST(MakeFx, RoundTripEqualsEagerInBothModes) {
  manual_seed(11);
  struct Case {
    const char* name;
    Fn fn;
    TensorList inputs;
  };
  std::vector<Case> cases = {
      {"mlp", mlp, {randn({8, 16}), randn({32, 16}), randn({32}), randn({4, 32})}},
      {"views", views, {randn({12})}},
      {"batched matmul",
       [](const TensorList& in) { return TensorList{matmul(in[0], in[1]) * 0.5}; },
       {randn({2, 3, 4}), randn({4, 5})}},
      {"cat/split/in-place",
       [](const TensorList& in) {
         TensorList parts = split(in[0], 2, 1);
         Tensor y = cat({parts[1], parts[0]}, 1);
         add_(y, in[1]);
         return TensorList{y, max(y, 1).second};
       },
       {randn({3, 4}), randn({4})}},
      {"layer norm + gelu",
       [](const TensorList& in) { return TensorList{gelu(layer_norm(in[0], {6}, in[1], in[2]))}; },
       {randn({2, 6}), randn({6}), randn({6})}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TensorList eager_in, want;
    for (const Tensor& t : c.inputs) eager_in.push_back(clone(t));
    want = c.fn(eager_in);
    for (Mode mode : {Mode::real, Mode::fake}) {
      TensorList trace_in;
      for (const Tensor& t : c.inputs) trace_in.push_back(clone(t));
      ir::Graph g = make_fx(c.fn, trace_in, {.mode = mode});
      g.verify();
      TensorList run_in;
      for (const Tensor& t : c.inputs) run_in.push_back(clone(t));
      TensorList got = ir::interpret(g, run_in);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(to_vector<double>(got[i]), to_vector<double>(want[i])) << g.str();
    }
  }
}

TEST(MakeFx, FakeTracingAllocatesNothing) {  // (T1)
  Device d("cpu:0");
  TensorList in = {randn({64, 512}), randn({512, 512}), randn({512}), randn({10, 512})};
  AllocatorStats before = allocator_stats(d);
  ir::Graph g = make_fx(mlp, in);
  AllocatorStats after = allocator_stats(d);
  EXPECT_EQ(after.num_allocs, before.num_allocs);
  EXPECT_EQ(g.size(), 9u);
}

TEST(MakeFx, NodeMetaKeepsDevices) {
  {  // a device this machine lacks, traced with fake tensors
    FakeMode fake;
    TensorList in = {empty({4, 8}, {.device = Device("cuda:0")}),
                     empty({3, 8}, {.device = Device("cuda:0")})};
    ir::Graph g =
        make_fx([](const TensorList& x) { return TensorList{relu(linear(x[0], x[1]))}; }, in);
    for (ir::Node* n : g.nodes())
      for (const ir::ValueMeta& m : n->meta()) EXPECT_EQ(m.device, Device("cuda:0"));
    EXPECT_NE(g.str().find("%relu : f32[4,3]@cuda:0 = relu(%linear)"), std::string::npos);
  }
  {  // a virtual CPU device, traced for real, with an explicit transfer
    TensorList in = {ones({2}, {.device = Device("cpu:1")})};
    ir::Graph g =
        make_fx([](const TensorList& x) { return TensorList{to(exp(x[0]), Device("cpu:2"))}; }, in,
                {.mode = Mode::real, .input_names = {"x"}});
    EXPECT_EQ(g.str(),
              "%x : f32[2]@cpu:1 = input()\n"
              "%exp : f32[2]@cpu:1 = exp(%x)\n"
              "%to_copy : f32[2]@cpu:2 = _to_copy(%exp, dtype=f32, device=cpu:2)\n"
              "return %to_copy\n");
  }
}

TEST(MakeFx, TraceErrorsNameTheScope) {
  Fn fn = [](const TensorList& in) {
    ScopeName outer("encoder");
    ScopeName inner("proj");
    return TensorList{mm(in[0], in[0])};
  };
  expect_error(
      [&] {
        make_fx(fn, {randn({2, 3})});
      },
      ErrorKind::shape,
      "[mm] mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3) (while tracing "
      "encoder.proj)");
}

}  // namespace
}  // namespace kiln

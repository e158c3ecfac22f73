// Dynamic shapes (Y1-Y6): symbolic sizes through export, programs and the executor.
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::expect_error;

::testing::AssertionResult close(const Tensor& a, const Tensor& b) {
  if (!(a.shape() == b.shape()))
    return ::testing::AssertionFailure() << a.meta_str() << " vs " << b.meta_str();
  return testing::all_close(a, to_vector<double>(b), 1.3e-6, 1e-5);
}

// A module built from a function of its inputs and two registered weights.
class Fn : public nn::Module {
 public:
  using F = std::function<TensorList(const TensorList&, const Tensor&, const Tensor&)>;
  explicit Fn(F f, int64_t in = 8, int64_t out = 8)
      : w(register_parameter("w", randn({out, in}))),
        b(register_parameter("b", randn({out}))),
        f_(std::move(f)) {}
  TensorList forward(const TensorList& in) override { return f_(in, w, b); }
  Tensor &w, &b;

 private:
  F f_;
};

TEST(Sym, ExpressionsAreCanonicalAndExact) {  // (Y1)
  const sym::Expr* s0 = sym::symbol("s0");
  const sym::Expr* s1 = sym::symbol("s1");
  auto c = sym::constant;
  EXPECT_EQ(sym::add(s0, s1), sym::add(s1, s0));
  EXPECT_EQ(sym::sub(sym::add(s0, c(1)), c(1)), s0);
  EXPECT_EQ(sym::mul(sym::mul(c(4), s0), s1), sym::mul(s1, sym::mul(s0, c(4))));
  EXPECT_EQ(sym::floordiv(sym::mul(c(4), s0), c(2)), sym::mul(c(2), s0));
  EXPECT_EQ(sym::floordiv(sym::mul(s0, s1), s1), s0);
  EXPECT_EQ(sym::mod(sym::add(sym::mul(c(8), s0), c(3)), c(4)), c(3));
  EXPECT_EQ(sym::str(sym::add(sym::mul(c(4), s0), c(1))), "4*s0 + 1");
  EXPECT_EQ(sym::str(sym::sub(s1, sym::mul(c(2), s0))), "-2*s0 + s1");
  EXPECT_EQ(sym::str(sym::floordiv(sym::add(s0, c(1)), c(2))), "(s0 + 1)//2");
  for (const char* text :
       {"4*s0 + 1", "(s0 + 1)//2", "Max(1, s0)", "Mod(s0*s1, 4)", "-2*s0 + s1", "s0*s1 - 3"}) {
    const sym::Expr* e = sym::parse(text, "a test");
    EXPECT_EQ(sym::parse(sym::str(e), "a test"), e) << text;
  }
  auto at = [](const sym::Expr* e, int64_t v0, int64_t v1) {
    return sym::eval(e, [&](const sym::Expr* s) { return s->name == "s0" ? v0 : v1; });
  };
  EXPECT_EQ(at(sym::parse("(s0 - 7)//2", "t"), 2, 0), -3);  // floor, as Python
  EXPECT_EQ(at(sym::parse("Mod(s0 - 7, 4)", "t"), 2, 0), 3);
  EXPECT_EQ(at(sym::parse("Max(s0, s1) * 3", "t"), 2, 5), 15);
  expect_error([] { sym::parse("s0 +", "a test"); }, ErrorKind::format,
               "cannot read the size expression");
  expect_error([] { sym::parse("Foo(s0, 1)", "a test"); }, ErrorKind::format, "unknown function");
  expect_error([] { sym::parse("s0 // 0", "a test"); }, ErrorKind::format, "division by zero");
}

TEST(Sym, DecisionsUseRangesBeforeGuards) {  // (Y2)
  ShapeEnv env;
  ShapeEnvGuard active(&env);
  SymInt s0 = env.new_symbol(8, 1, 64, "input_0.shape[0]");
  EXPECT_TRUE(s0 >= 1);  // settled by the range: no guard
  EXPECT_TRUE(s0 + 1 != 0);
  EXPECT_TRUE(s0 * 4 > 3);
  EXPECT_TRUE(env.guards().empty());
  EXPECT_TRUE(s0 > 4);  // decided by the hint: a guard
  ASSERT_EQ(env.guards().size(), 1u);
  EXPECT_EQ(env.guards()[0].str(), "4 < s0");
  EXPECT_FALSE(s0 == 3);  // the guard records what held
  EXPECT_EQ(env.guards()[1].str(), "s0 != 3");
  EXPECT_TRUE(s0 > 4);  // asked again: no second guard
  EXPECT_EQ(env.guards().size(), 2u);
  EXPECT_EQ(sym_max(s0, 1).str(), "s0");  // Max(s0, 1) is s0 when s0 >= 1
}

TEST(Sym, DimsKeepExpressionsAndSpecializeOnIntegerReads) {  // (Y2, Y6)
  ShapeEnv env;
  ShapeEnvGuard active(&env);
  SymInt s0 = env.new_symbol(5, 1, 64, "input_0.shape[0]");
  Dims d{3, 4};
  d.set(0, s0);
  EXPECT_TRUE(d.is_symbolic());
  EXPECT_EQ(d.str(), "[s0, 4]");
  Dims copy = d;
  EXPECT_EQ(copy, d);
  EXPECT_NE(copy, (Dims{6, 4}));  // differs at the example: not equal, no guard
  EXPECT_TRUE(env.guards().empty());
  const Dims& read = copy;
  EXPECT_EQ(read[1], 4);  // a static entry: no guard
  EXPECT_TRUE(env.guards().empty());
  EXPECT_EQ(read[0], 5);  // read as an integer: pinned
  ASSERT_EQ(env.guards().size(), 1u);
  EXPECT_EQ(env.guards()[0].str(), "s0 == 5");
  {
    ShapeEnv other;  // equal at the example: equal under the guard that says so
    ShapeEnvGuard active_other(&other);
    EXPECT_EQ(d, (Dims{5, 4}));
    ASSERT_EQ(other.guards().size(), 1u);
    EXPECT_EQ(other.guards()[0].str(), "s0 == 5");
  }
  copy[1] = 2;  // written through a mutable accessor: every entry pinned, then static
  EXPECT_FALSE(copy.is_symbolic());
  EXPECT_EQ(copy.str(), "[5, 2]");
  Dims strides;
  contiguous_strides_into(d, strides);
  EXPECT_EQ(strides.str(), "[4, 1]");
  EXPECT_EQ(sym_numel(d).str(), "4*s0");
  Dims static_dims{2, 3};
  EXPECT_FALSE(static_dims.is_symbolic());
}

TEST(Y1, MlpExportedWithADynamicBatchRunsAtEveryBatch) {
  Fn m([](const TensorList& in, const Tensor& w, const Tensor& b) {
    return TensorList{relu(linear(in[0], w, b)) * 2};
  });
  Tensor x = randn({4, 8});
  ExportOptions o;
  o.dynamic_shapes = {{{0, Dim("batch", 1, 64)}}};
  ExportedProgram p = export_program(m, {x}, o);
  ASSERT_EQ(p.shapes.symbols.size(), 1u);
  EXPECT_EQ(p.shapes.symbols[0].dim_name, "batch");
  EXPECT_TRUE(p.shapes.guards.empty()) << p.shapes.str();
  runtime::Executor ex(p);
  for (int64_t b : {1, 2, 3, 17, 64}) {
    Tensor xb = randn({b, 8});
    TensorList want = m(TensorList{xb});
    TensorList got = ex.run({xb});
    ASSERT_EQ(got[0].shape(), (Dims{b, 8}));
    EXPECT_TRUE(close(got[0], want[0])) << b;
    EXPECT_TRUE(close(p.run({xb})[0], want[0])) << b;
  }
  EXPECT_EQ(ex.plans_built(), 5);
  ex.run({randn({3, 8})});  // a binding seen before: its plan again
  EXPECT_EQ(ex.plans_built(), 5);
  expect_error([&] { ex.run({randn({65, 8})}); }, ErrorKind::shape, "outside the range [1, 64]");
  expect_error([&] { ex.run({randn({4, 9})}); }, ErrorKind::shape, "static at 8");
  expect_error([&] { ex.run({randn({4, 8, 1})}); }, ErrorKind::value, "expects");
  expect_error([&] { ex.run({randn({4, 8}, {.dtype = f64})}); }, ErrorKind::value, "expects");
}

// (Y1) expand_as, reshape_as and view_as take the other tensor's sizes as they are,
// expressions included: no guard pins the batch (torchvision's Swin v2 expands a norm as
// its query, F.normalize's form, and imported dynamic programs were pinned to the example).
TEST(Y1, ShapesTakenFromAnotherTensorStaySymbolic) {
  Fn m([](const TensorList& in, const Tensor&, const Tensor&) {
    Tensor x = in[0];
    Tensor norm = amax(x, {-1}, true);
    Tensor flat = reshape(x, {-1});
    return TensorList{x / expand_as(norm, x), reshape_as(flat, x) + view_as(flat, x)};
  });
  ExportOptions o;
  o.dynamic_shapes = {{{0, Dim("batch", 1, 64)}}};
  ExportedProgram p = export_program(m, {randn({4, 8})}, o);
  EXPECT_TRUE(p.shapes.guards.empty()) << p.shapes.str();
  runtime::Executor ex(p);
  for (int64_t b : {1, 5}) {
    Tensor xb = randn({b, 8});
    TensorList want = m(TensorList{xb}), got = ex.run({xb});
    for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(close(got[i], want[i])) << b << " " << i;
  }
}

// (Y1) Composites that reshape by their input's sizes keep a dynamic batch symbolic:
// repeat, also by a symbolic count (BLOOM's ALiBi, XCiT's positions), group_norm (wav2vec2's
// feature extractor), einsum (MaxViT's attention), unfold and fold (timm's VOLO). Each pinned the
// batch before.
TEST(Y1, CompositesKeepADynamicBatch) {
  Tensor w = randn({4}), b = randn({4});
  Fn m([&](const TensorList& in, const Tensor&, const Tensor&) {
    Tensor x = in[0];  // [batch, 4, 6, 6]
    Tensor cols = nn::unfold(x, {2, 2}, {1}, {0}, {2});
    return TensorList{repeat(x, {1, 2, 1, 1}),
                      repeat(x, SymSizes{1, 1, 1, x.sym_size(0)}),
                      nn::group_norm(x, 2, w, b),
                      einsum("bchw,bcvw->bchv", {x, x}),
                      nn::fold(cols, {6, 6}, {2, 2}, {1}, {0}, {2}),
                      kiln::unfold(x, 3, 2, 2)};
  });
  ExportOptions o;
  o.dynamic_shapes = {{{0, Dim("batch", 1, 64)}}};
  ExportedProgram p = export_program(m, {randn({2, 4, 6, 6})}, o);
  EXPECT_TRUE(p.shapes.guards.empty()) << p.shapes.str();
  runtime::Executor ex(p);
  for (int64_t n : {1, 3}) {
    Tensor x = randn({n, 4, 6, 6});
    TensorList want = m(TensorList{x}), got = ex.run({x});
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got[i].shape(), want[i].shape()) << n << " " << i;
      EXPECT_TRUE(close(got[i], want[i])) << n << " " << i;
    }
  }
}

// (Y2) Convolutions, poolings and nearest 2x upsampling keep a dynamic image size: the output sizes
// are expressions ((S + 2 pad - span) // stride + 1), and that the kernel fits is a range guard,
// not a pin. Floor-mode max and average pooling, padding by non-negative amounts and global
// adaptive pooling (a ResNet's stem and head) read no size; ceil mode still pins (its last
// window depends on the size modulo the stride). Each pinned the image size before.
TEST(Y2, ConvolutionsAndPoolingsKeepADynamicImageSize) {
  manual_seed(3);
  Tensor w1 = randn({4, 3, 3, 3}), b1 = randn({4}), w2 = randn({5, 4, 1, 2}), w3 = randn({2, 3, 3});
  Fn m([&](const TensorList& in, const Tensor&, const Tensor&) {
    Tensor x = in[0];  // [batch, 3, h, w]
    Tensor y = relu(nn::conv2d(x, w1, b1, {2, 2}, {1, 1}));
    y = nn::max_pool2d(y, {3, 3}, {2, 2}, {1, 1});
    Tensor z = nn::conv2d(nn::pad(y, {0, 1, 1, 0}), w2, {}, {1, 1}, {0, 0}, {2, 1});
    Tensor line = nn::conv1d(reshape(x, {x.sym_size(0), 3, -1}), w3, {}, {2}, {1});
    Tensor up = nn::interpolate(y, {.scale_factor = {2.0}, .mode = "nearest"});
    return TensorList{nn::adaptive_avg_pool2d(z, {1, 1}), up,
                      nn::avg_pool2d(y, {2, 2}, {1, 1}, {1, 1}, false, true), z, line};
  });
  ExportOptions o;
  o.dynamic_shapes = {{{0, Dim("batch", 1, 8)}, {2, Dim("h", 8, 64)}, {3, Dim("w", 8, 64)}}};
  ExportedProgram p = export_program(m, {randn({2, 3, 16, 12})}, o);
  EXPECT_EQ(p.shapes.symbols.size(), 3u) << p.shapes.str();
  for (const auto& g : p.shapes.guards)  // ranges only: no size pinned or related
    EXPECT_EQ(g.str().find("=="), std::string::npos) << g.str();
  std::string path = ::testing::TempDir() + "kiln_dynamic_image.kiln";
  save(p, path);
  ExportedProgram loaded = load_program(path);
  runtime::Executor ex(loaded);
  for (auto [n, h, w] : {std::array<int64_t, 3>{1, 16, 12}, {3, 23, 9}, {2, 64, 31}}) {
    Tensor x = randn({n, 3, h, w});
    TensorList want = m(TensorList{x}), got = ex.run({x});
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got[i].shape(), want[i].shape()) << h << "x" << w << " output " << i;
      EXPECT_TRUE(close(got[i], want[i])) << h << "x" << w << " output " << i;
    }
  }
  {  // ceil mode reads the size: the symbol is pinned, with a guard
    ShapeEnv env;
    ShapeEnvGuard active(&env);
    FakeMode fake({.allow_non_fake_inputs = true});
    SymInt h = env.new_symbol(10, 4, 64, "x.shape[2]");
    Tensor x = empty(sym_dims({SymInt(1), SymInt(2), h, SymInt(10)}));
    EXPECT_EQ(nn::max_pool2d(x, {3, 3}, {2, 2}, {0, 0}, {1, 1}, /*ceil_mode=*/true).size(2), 5);
    bool pinned = false;
    for (const auto& g : env.guards()) pinned = pinned || g.str() == "s0 == 10";
    EXPECT_TRUE(pinned);
  }
}

// (Y2) A view at a symbolic position keeps its offset an expression: selecting q, k, v
// out of a [3, batch, d] tensor (an attention's packed projection, as torchvision's ViT
// does) is offset*batch*d into the storage, no guard on batch; the offsets survive the
// program file, and only code that needs an integer offset pins them.
TEST(Y2, ViewsAtSymbolicPositionsKeepSymbolicOffsets) {
  Fn m([](const TensorList& in, const Tensor&, const Tensor&) {
    Tensor packed = contiguous(permute(reshape(in[0], {in[0].sym_size(0), 3, 4}), {1, 0, 2}));
    Tensor q = select(packed, 0, 0), k = select(packed, 0, 1), v = slice(packed, 0, 2, 3);
    return TensorList{q * k + squeeze(v, 0)};
  });
  ExportOptions o;
  o.dynamic_shapes = {{{0, Dim("batch", 1, 32)}}};
  ExportedProgram p = export_program(m, {randn({5, 12})}, o);
  EXPECT_TRUE(p.shapes.guards.empty()) << p.shapes.str();
  std::vector<std::string> offsets;
  for (const ir::Node* n : p.graph.nodes())
    if (n->opcode() == ir::Opcode::call && !n->meta().empty() && n->meta()[0].offset.is_symbolic())
      offsets.push_back(n->meta()[0].offset.str());
  EXPECT_EQ(offsets, (std::vector<std::string>{"4*s0", "8*s0", "8*s0"}));
  std::string path = ::testing::TempDir() + "kiln_symbolic_offsets.kiln";
  save(p, path);
  ExportedProgram loaded = load_program(path);
  for (int64_t b : {1, 2, 7, 32}) {
    Tensor x = randn({b, 12});
    Tensor want = m(TensorList{x})[0];
    EXPECT_TRUE(close(runtime::Executor(loaded).run({x})[0], want)) << b;
  }
  {  // an integer read of such an offset pins the symbol, with a guard
    ShapeEnv env;
    ShapeEnvGuard active(&env);
    FakeMode fake({.allow_non_fake_inputs = true});
    SymInt b = env.new_symbol(5, 1, 32, "x.shape[0]");
    Tensor x = empty(sym_dims({SymInt(3), b, SymInt(4)}));
    Tensor y = select(x, 0, 2);
    EXPECT_EQ(y.sym_offset().str(), "8*s0");
    EXPECT_TRUE(env.guards().empty());
    EXPECT_EQ(y.offset(), 40);
    ASSERT_EQ(env.guards().size(), 1u);
    EXPECT_EQ(env.guards()[0].str(), "8*s0 == 40");
  }
}

// (Y3) nonzero's row count is an unbacked size (u0 in [0, numel]): the program runs at
// every count, none and all included, saved and loaded; masked_select and boolean
// selection are nonzero underneath. A branch on such a size is an error naming it and
// check_size; check_size states a fact the program then asserts at run time.
TEST(Y3, NonzeroCountsAreUnbackedSizesBoundAtRunTime) {
  Fn m([](const TensorList& in, const Tensor&, const Tensor&) {
    Tensor positive = in[0] > 0.0;
    Tensor idx = nonzero(positive);                        // [u0, 2]
    Tensor picked = masked_select(in[0], positive) * 2.0;  // [u1]
    Tensor smooth = exp(in[0] * 0.5 + 1.0) - in[0];        // static sizes: one fused region
    return TensorList{sum(idx, {0}), picked, reshape(idx, {-1}) + 1, smooth};
  });
  Tensor x = randn({4, 5});
  ExportedProgram p = export_program(m, {x});
  int unbacked = 0;
  for (const SymbolInfo& s : p.shapes.symbols) unbacked += s.unbacked;
  EXPECT_EQ(unbacked, 2) << p.shapes.str();
  std::string path = ::testing::TempDir() + "kiln_unbacked.kiln";
  save(p, path);
  ExportedProgram loaded = load_program(path);
  runtime::Executor ex(loaded);
  EXPECT_EQ(ex.fused_regions(), 1);  // the data's sizes run op by op, the rest fuse
  for (Tensor input : {randn({4, 5}), full({4, 5}, -1.0), full({4, 5}, 1.0), randn({4, 5})}) {
    TensorList want = m(TensorList{input}), got = ex.run({input});
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].shape(), want[i].shape()) << i;
      EXPECT_TRUE(close(got[i], want[i])) << i;
    }
  }
  // Branching on a data-dependent size: an error naming it, its op and the way out.
  Fn branch([](const TensorList& in, const Tensor&, const Tensor&) {
    Tensor idx = nonzero(in[0] > 0.0);
    return TensorList{idx.sym_size(0) > 3 ? idx * 2 : idx};
  });
  expect_error([&] { export_program(branch, {x}); }, ErrorKind::data_dependent,
               "u0 is a data-dependent size (nonzero, in [0, 20])");
  // check_size: a fact the meta functions may use, asserted when the program runs.
  Fn checked([](const TensorList& in, const Tensor&, const Tensor&) {
    Tensor idx = nonzero(in[0] > 0.0);
    check_size(SymInt(4), Rel::le, idx.sym_size(0));
    return TensorList{idx.sym_size(0) > 3 ? idx * 2 : idx};  // decided by the range now
  });
  ExportedProgram q = export_program(checked, {full({4, 5}, 1.0)});
  runtime::Executor run_checked(q);
  Tensor many = full({4, 5}, 1.0);
  EXPECT_TRUE(close(run_checked.run({many})[0], checked(TensorList{many})[0]));
  expect_error([&] { run_checked.run({full({4, 5}, -1.0)}); }, ErrorKind::value, "4 <= u0");
}

// (Y3) item_size: a tensor's value used as a size (PyTorch's `n = t.item()`) is an
// unbacked size under export; the program reads it when it runs (slices clamp it, as
// Python's do; a factory makes that many elements).
TEST(Y3, ItemSizesAreReadWhenTheProgramRuns) {
  Fn m([](const TensorList& in, const Tensor&, const Tensor&) {
    SymInt n = item_size(in[1]);
    Tensor head = slice(in[0], 0, 0, n);  // the first n rows (all of them when n is larger)
    return TensorList{sum(head, {0}), zeros(sym_dims({n}), {}) + 1.0};
  });
  auto count = [](int64_t n) { return full({1}, n, {.dtype = DType::i64}); };
  Tensor x = randn({6, 3});
  ExportedProgram p = export_program(m, {x, count(2)});
  runtime::Executor ex(p);
  for (int64_t n : {0, 1, 4, 6, 9}) {
    TensorList want = m(TensorList{x, count(n)}), got = ex.run({x, count(n)});
    ASSERT_EQ(got[1].shape(), (Dims{n}));
    EXPECT_TRUE(close(got[0], want[0])) << n;
    EXPECT_TRUE(close(got[1], want[1])) << n;
  }
  expect_error(
      [&] {
        ex.run({x, count(-1)});
      },
      ErrorKind::value, "a size must not be negative, got -1");
}

// (Y3) unique's (sorted or consecutive) number of distinct values and bincount's number
// of bins are the data's, as PyTorch's export makes them: unbacked sizes the program
// reads when it runs, at every count (one value, all distinct, empty input).
TEST(Y3, UniqueAndBincountSizesAreDataDependent) {
  Fn m([](const TensorList& in, const Tensor&, const Tensor&) {
    auto [values, inverse, counts] = unique(in[0], true, true);
    auto [runs, run_of, run_counts] = unique_consecutive(in[0], true, true);
    Tensor bins = bincount(in[0], Tensor(), 3);
    auto [pairs, pair_of, pair_counts] = unique(reshape(in[0], {4, 2}), true, true, 0);
    return TensorList{values * 2, inverse, counts, runs,    run_of,
                      run_counts, bins,    pairs,  pair_of, pair_counts};
  });
  auto ints = [](const std::vector<int64_t>& v) { return from_vector(v); };
  ExportedProgram p = export_program(m, {ints({3, 1, 1, 4, 3, 3, 0, 5})});
  int unbacked = 0;
  for (const SymbolInfo& s : p.shapes.symbols) unbacked += s.unbacked;
  EXPECT_GE(unbacked, 4) << p.shapes.str();
  std::string path = ::testing::TempDir() + "kiln_unique_bincount.kiln";
  save(p, path);
  ExportedProgram loaded = load_program(path);
  runtime::Executor ex(loaded);
  for (std::vector<int64_t> v : std::vector<std::vector<int64_t>>{{3, 1, 1, 4, 3, 3, 0, 5},
                                                                  {2, 2, 2, 2, 2, 2, 2, 2},
                                                                  {0, 1, 2, 3, 4, 5, 6, 7},
                                                                  {9, 9, 1, 1, 9, 9, 1, 1}}) {
    Tensor x = ints(v);
    TensorList want = m(TensorList{x}), got = ex.run({x});
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].shape(), want[i].shape()) << i << " " << x;
      EXPECT_TRUE(close(got[i], want[i])) << i << " " << x;
    }
  }
  expect_error(
      [&] {
        ex.run({from_vector(std::vector<int64_t>{1, 2, -3, 4, 5, 6, 7, 8})});
      },
      ErrorKind::value, "must not be negative");
}

// Exports `f` of inputs shaped `shapes` with `dims`; returns the constraint error text
// (empty when the export succeeds).
std::string violations(Fn::F f, std::vector<IntList> shapes, std::vector<InputDims> dims) {
  Fn m(std::move(f));
  TensorList in;
  for (const IntList& s : shapes) in.push_back(randn(s));
  ExportOptions o;
  o.dynamic_shapes = std::move(dims);
  try {
    export_program(m, in, o);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::constraint) << e.what();
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Y2, SpecializingADeclaredDimIsAnErrorWithItsFix) {
  // Reading a size as an integer pins it (the reshape target is then the number 4).
  std::string e = violations(
      [](const TensorList& in, const Tensor&, const Tensor&) {
        return TensorList{reshape(in[0], {in[0].size(0), 8})};
      },
      {{4, 8}}, {{{0, Dim("batch")}}});
  EXPECT_TRUE(has(e, "Dim 'batch' (input_0.shape[0]) must be 4")) << e;
  EXPECT_TRUE(has(e, "Fix: make it static (batch = 4)")) << e;
  // The same with the size kept symbolic exports.
  EXPECT_EQ(violations(
                [](const TensorList& in, const Tensor&, const Tensor&) {
                  return TensorList{reshape(in[0], {in[0].sym_size(0), 8})};
                },
                {{4, 8}}, {{{0, Dim("batch")}}}),
            "");
}

TEST(Y2, RelationsBetweenDeclaredDimsSuggestTheDerivedForm) {
  std::string e = violations(
      [](const TensorList& in, const Tensor&, const Tensor&) { return TensorList{in[0] + in[1]}; },
      {{5, 8}, {5, 8}}, {{{0, Dim("dx")}}, {{0, Dim("dy")}}});
  EXPECT_TRUE(has(e, "Dim 'dx' (input_0.shape[0]) and Dim 'dy' (input_1.shape[0]) are related"))
      << e;
  EXPECT_TRUE(has(e, "Fix: dy = dx")) << e;
  // x[1:] + y: y's dim is dx - 1; declared as derived, it exports and runs.
  auto f = [](const TensorList& in, const Tensor&, const Tensor&) {
    return TensorList{slice(in[0], 0, 1, std::nullopt, 1) + in[1]};
  };
  e = violations(f, {{6, 8}, {5, 8}}, {{{0, Dim("dx")}}, {{0, Dim("dy")}}});
  EXPECT_TRUE(has(e, "Fix: dy = dx - 1")) << e;
  Fn m(f);
  Dim dx("dx", 2, 32);
  ExportOptions o;
  o.dynamic_shapes = {{{0, dx}}, {{0, dx - 1}}};
  ExportedProgram p = export_program(m, {randn({6, 8}), randn({5, 8})}, o);
  runtime::Executor ex(p);
  Tensor x = randn({10, 8}), y = randn({9, 8});
  EXPECT_TRUE(close(ex.run({x, y})[0], m(TensorList{x, y})[0]));
  expect_error(
      [&] {
        ex.run({x, randn({8, 8})});
      },
      ErrorKind::shape, "input_1.shape[0] is 8, but the program needs it to be s0 - 1 = 9");
}

TEST(Y2, NarrowingAndDivisibilityAreErrorsForNamedDimsAndRangesForAutomaticOnes) {
  auto branchy = [](const TensorList& in, const Tensor&, const Tensor&) {
    return TensorList{in[0].sym_size(0) > 4 ? in[0] * 2 : in[0] * 3};
  };
  std::string e = violations(branchy, {{8, 8}}, {{{0, Dim("b", 1, 64)}}});
  EXPECT_TRUE(
      has(e,
          "must lie in [5, 64], narrower than its declared [1, 64]: user code requires 4 < s0. "
          "Fix: Dim(\"b\", 5, 64)"))
      << e;
  auto quads = [](const TensorList& in, const Tensor&, const Tensor&) {
    return TensorList{reshape(in[0], {-1, 4})};
  };
  e = violations(quads, {{8}}, {{{0, Dim("n")}}});
  EXPECT_TRUE(has(e, "Dim 'n' (input_0.shape[0]) must be a multiple of 4")) << e;
  // An automatic dim takes the guard: the range narrows, the program checks it at run time.
  Fn m(branchy);
  ExportOptions o;
  o.dynamic_shapes = {{{0, Dim::automatic_dim()}}};
  ExportedProgram p = export_program(m, {randn({8, 8})}, o);
  ASSERT_EQ(p.shapes.symbols.size(), 1u);
  EXPECT_EQ(p.shapes.symbols[0].min, 5);
  runtime::Executor ex(p);
  Tensor x = randn({7, 8});
  EXPECT_TRUE(close(ex.run({x})[0], x * 2));
  expect_error([&] { ex.run({randn({3, 8})}); }, ErrorKind::shape, "outside the range [5,");
  // A divisibility guard on an automatic dim stays a guard the program checks.
  Fn q(quads);
  ExportedProgram pq = export_program(q, {randn({8})}, o);
  runtime::Executor exq(pq);
  EXPECT_EQ(exq.run({randn({12})})[0].shape(), (Dims{3, 4}));
  expect_error([&] { exq.run({randn({10})}); }, ErrorKind::shape,
               "break the guard Mod(s0, 4) == 0 that reshape");
}

TEST(Y1, AnExampleOfOneStaysSymbolicAndABranchOnOneIsAGuard) {
  // PyTorch would specialize a batch-1 example; kiln keeps it symbolic.
  Fn m([](const TensorList& in, const Tensor& w, const Tensor& b) {
    return TensorList{linear(in[0], w, b)};
  });
  ExportOptions o;
  o.dynamic_shapes = {{{0, Dim("batch", 1, 16)}}};
  ExportedProgram p = export_program(m, {randn({1, 8})}, o);
  runtime::Executor ex(p);
  Tensor x = randn({6, 8});
  EXPECT_TRUE(close(ex.run({x})[0], m(x)));
  // `if x.shape[0] == 1` is decided with a guard the program keeps (an automatic dim)...
  Fn one([](const TensorList& in, const Tensor&, const Tensor&) {
    return TensorList{in[0].sym_size(0) == 1 ? in[0] + 1 : in[0] - 1};
  });
  o.dynamic_shapes = {{{0, Dim::automatic_dim()}}};
  ExportedProgram p1 = export_program(one, {randn({3, 8})}, o);
  runtime::Executor ex1(p1);
  EXPECT_TRUE(close(ex1.run({ones({2, 8})})[0], zeros({2, 8})));
  expect_error([&] { ex1.run({randn({1, 8})}); }, ErrorKind::shape, "break the guard s0 != 1");
  // ...and is an error for a named one, whose range it narrows.
  std::string e = violations(
      [](const TensorList& in, const Tensor&, const Tensor&) {
        return TensorList{in[0].sym_size(0) == 1 ? in[0] + 1 : in[0] - 1};
      },
      {{3, 8}}, {{{0, Dim("batch", 1, 16)}}});
  EXPECT_TRUE(has(e, "must lie in [2, 16]")) << e;
}

TEST(Y2, GuardsNameTheModulePath) {
  class Inner : public nn::Module {
   public:
    TensorList forward(const TensorList& in) override {
      return {reshape(in[0], {in[0].size(0) * 2, -1})};
    }
  };
  class Outer : public nn::Module {
   public:
    Outer() : inner(register_module("inner", std::make_shared<Inner>())) {}
    TensorList forward(const TensorList& in) override { return (*inner)(in); }
    std::shared_ptr<Inner> inner;
  };
  Outer m;
  ExportOptions o;
  o.dynamic_shapes = {{{0, Dim("batch")}}};
  try {
    export_program(m, {randn({4, 8})}, o);
    ADD_FAILURE() << "expected a constraint error";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "user code at inner requires s0 == 4")) << e.what();
  }
}

// A pre-LN transformer block with a causal mask, written with sizes (sym_size) so that
// batch and sequence stay symbolic through reshape, the mask and attention.
class CausalBlock : public nn::Module {
 public:
  static constexpr int64_t C = 32, H = 4, D = C / H;
  CausalBlock()
      : qkv_w(register_parameter("qkv_w", randn({3 * C, C}) * 0.2)),
        qkv_b(register_parameter("qkv_b", randn({3 * C}))),
        proj_w(register_parameter("proj_w", randn({C, C}) * 0.2)),
        fc_w(register_parameter("fc_w", randn({2 * C, C}) * 0.2)),
        out_w(register_parameter("out_w", randn({C, 2 * C}) * 0.2)) {}
  TensorList forward(const TensorList& in) override {
    const Tensor& x = in[0];
    SymInt B = x.sym_size(0), T = x.sym_size(1);
    Tensor h = layer_norm(x, {C});
    Tensor t = permute(reshape(linear(h, qkv_w, qkv_b), {B, T, 3, H, D}), {2, 0, 3, 1, 4});
    Tensor q = select(t, 0, 0), k = select(t, 0, 1), v = select(t, 0, 2);
    Tensor mask = triu(full({T, T}, -INFINITY), 1);
    Tensor att = softmax(matmul(q, transpose(k, -2, -1)) * (1.0 / std::sqrt(double(D))) + mask, -1);
    Tensor y = reshape(transpose(matmul(att, v), 1, 2), {B, T, C});
    Tensor r = x + linear(y, proj_w);
    return {r + linear(gelu(linear(layer_norm(r, {C}), fc_w)), out_w)};
  }
  Tensor &qkv_w, &qkv_b, &proj_w, &fc_w, &out_w;
};

TEST(Y5, TransformerBlockWithDynamicBatchAndSequenceRunsAtEveryLength) {
  CausalBlock m;
  ExportOptions o;
  o.dynamic_shapes = {{{0, Dim("batch", 1, 4)}, {1, Dim("seq", 1, 24)}}};
  ExportedProgram p = export_program(m, {randn({2, 5, CausalBlock::C})}, o);
  EXPECT_EQ(p.shapes.symbols.size(), 2u);
  EXPECT_TRUE(p.shapes.guards.empty()) << p.shapes.str();
  std::string path = ::testing::TempDir() + "kiln_dynamic_block.kiln";
  save(p, path);
  ExportedProgram loaded = load_program(path);  // (Y4) symbols and ranges survive the file
  EXPECT_EQ(loaded.shapes.str(), p.shapes.str());
  EXPECT_EQ(loaded.graph.str(), p.graph.str());
  // `kiln show` prints symbolic shapes and the symbols with their ranges
  EXPECT_TRUE(has(p.str(), "%input_0 : f32[s0,s1,32]@cpu:0 = input()")) << p.str();
  EXPECT_TRUE(has(
      p.str(),
      "shapes:\n  s0 in [1, 4] (batch: input_0.shape[0])\n  s1 in [1, 24] (seq: input_0.shape[1])"))
      << p.str();
  runtime::Executor ex(p), ex_loaded(loaded);
  for (int64_t b : {1, 3})
    for (int64_t t = 1; t <= 24; ++t) {
      Tensor x = randn({b, t, CausalBlock::C});
      Tensor want = m(x);
      EXPECT_TRUE(close(ex.run({x})[0], want)) << b << "x" << t;
      EXPECT_TRUE(close(ex_loaded.run({x})[0], want)) << b << "x" << t;
      EXPECT_TRUE(close(p.run({x})[0], want)) << b << "x" << t;
    }
  // (Y5) the same values, bitwise, as the program exported static at that shape
  Tensor x = randn({3, 7, CausalBlock::C});
  ExportedProgram fixed = export_program(m, {x});
  runtime::Executor ex_fixed(fixed);
  EXPECT_EQ(to_vector<float>(ex.run({x})[0]), to_vector<float>(ex_fixed.run({x})[0]));
  expect_error(
      [&] {
        ex.run({randn({2, 25, CausalBlock::C})});
      },
      ErrorKind::shape, "input_0.shape[1] is 25, outside the range [1, 24] of s1 ('seq')");
  expect_error(
      [&] {
        ex.run({randn({0, 5, CausalBlock::C})});
      },
      ErrorKind::shape, "outside the range [1, 4]");
}

}  // namespace
}  // namespace kiln

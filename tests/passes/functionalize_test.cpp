// Functionalization and input mutation (M1)-(M5); to() under capture (X1), (X2).
#include <gtest/gtest.h>

#include <random>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln::passes {
namespace {

using kiln::testing::expect_error;
using Fn = std::function<TensorList(const TensorList&)>;
using Mode = MakeFxOptions::Mode;

// (M1) No in-place op but the epilogue copies into input nodes, which come last.
void expect_functional(const ir::Graph& g) {
  g.verify();
  bool in_epilogue = false;
  for (ir::Node* n : g.nodes()) {
    if (n->opcode() != ir::Opcode::call) continue;
    bool inplace = ops::op_info(n->op()).is_inplace();
    if (inplace) {
      EXPECT_EQ(n->op(), ops::OpKind::copy_) << g.str();
      EXPECT_EQ(n->inputs()[0].node->opcode(), ir::Opcode::input) << g.str();
      in_epilogue = true;
    } else {
      EXPECT_FALSE(in_epilogue) << "a functional op after the epilogue:\n" << g.str();
    }
  }
}

TEST(Functionalize, InputMutationInGraph) {  // (M3), (M4)
  Fn fn = [](const TensorList& in) {
    Tensor a = in[0];
    mul_(a, 2);
    return TensorList{a * 3};
  };
  CapturedProgram p = capture(fn, {tensor({1, 2})}, {.input_names = {"a"}});
  expect_functional(p.graph);
  EXPECT_EQ(p.graph.str(),
            "%a : f32[2]@cpu:0 = input()\n"
            "%mul : f32[2]@cpu:0 = mul(%a, 2)\n"  // numbers are scalar arguments, not constants
            "%mul_1 : f32[2]@cpu:0 = mul(%mul, 3)\n"
            "%copy_ : f32[2]@cpu:0 = copy_(%a, %mul)\n"
            "return %mul_1\n");
  ASSERT_EQ(p.inputs.size(), 1u);
  EXPECT_TRUE(p.inputs[0].data_mutated);
  EXPECT_EQ(p.inputs[0].where, InputMutation::Where::in_graph);
  EXPECT_EQ(p.num_mutation_outputs, 0);
  Tensor a = tensor({1, 2});
  EXPECT_EQ(to_vector<float>(ir::interpret(p.graph, {a})[0]), (std::vector<float>{6, 12}));
  EXPECT_EQ(to_vector<float>(a), (std::vector<float>{2, 4}));
}

TEST(Functionalize, InputMutationOutOfGraph) {  // (M3), (M5)
  Fn fn = [](const TensorList& in) {
    Tensor a = in[0];
    mul_(a, 2);
    return TensorList{a * 3};
  };
  CapturedProgram p =
      capture(fn, {tensor({1, 2})}, {.write_back = WriteBack::out_of_graph, .input_names = {"a"}});
  expect_functional(p.graph);
  EXPECT_EQ(p.inputs[0].where, InputMutation::Where::out_of_graph);
  EXPECT_EQ(p.num_mutation_outputs, 1);
  EXPECT_NE(p.graph.str().find("return (%mul, %mul_1)"), std::string::npos) << p.graph.str();
  Tensor a = tensor({1, 2});
  TensorList out = ir::interpret(p.graph, {a});
  EXPECT_EQ(to_vector<float>(a), (std::vector<float>{1, 2}));  // untouched: caller writes back
  EXPECT_EQ(to_vector<float>(out[0]), (std::vector<float>{2, 4}));
  EXPECT_EQ(to_vector<float>(out[1]), (std::vector<float>{6, 12}));
}

TEST(Functionalize, EpilogueOfRepeatedCopies) {  // (M4)
  Fn fn = [](const TensorList& in) {
    Tensor x = in[0];
    copy_(x, in[1]);
    copy_(x, in[2]);
    return TensorList{x};
  };
  CapturedProgram p =
      capture(fn, {zeros({3}), ones({3}), full({3}, 2.0)}, {.input_names = {"x", "y", "z"}});
  expect_functional(p.graph);
  EXPECT_EQ(p.graph.str(),
            "%x : f32[3]@cpu:0 = input()\n"
            "%y : f32[3]@cpu:0 = input()\n"
            "%z : f32[3]@cpu:0 = input()\n"
            "%copy_ : f32[3]@cpu:0 = copy_(%x, %z)\n"
            "return %x\n");
  EXPECT_FALSE(p.inputs[1].data_mutated);
}

TEST(Functionalize, WriteBacksReadValuesBeforeOverwritingInputs) {  // (M4)
  Fn fn = [](const TensorList& in) {
    Tensor x = in[0], y = in[1];
    copy_(x, y);  // x's new value is y's old value ...
    mul_(y, 2);   // ... which y's own write-back overwrites
    return TensorList{};
  };
  for (WriteBack wb : {WriteBack::in_graph, WriteBack::out_of_graph}) {
    CapturedProgram p = capture(fn, {zeros({2}), tensor({1, 2})}, {.write_back = wb});
    expect_functional(p.graph);
    TensorList in = {zeros({2}), tensor({1, 2})};
    TensorList out = ir::interpret(p.graph, in);
    for (size_t i = 0, k = 0; i < in.size(); ++i)
      if (p.inputs[i].where == InputMutation::Where::out_of_graph) copy_(in[i], out[k++]);
    EXPECT_EQ(to_vector<float>(in[0]), (std::vector<float>{1, 2}));
    EXPECT_EQ(to_vector<float>(in[1]), (std::vector<float>{2, 4}));
  }
}

TEST(Functionalize, MutationThroughAStridedViewOfAnInput) {  // (M2)
  Fn fn = [](const TensorList& in) {
    Tensor base = in[0];
    Tensor v = slice(transpose(base, 0, 1), 0, 1, 6, 2);  // columns 1, 3, 5
    Tensor row = select(base, 0, 2);                      // another view of the base
    Tensor before = row * 1.0;
    add_(v, 100);
    Tensor first_col = select(v, 1, 0);
    mul_(first_col, -1);
    return TensorList{before, row * 1.0, v * 1.0};
  };
  Tensor x = view(arange(0, 24, 1, {.dtype = f32}), {4, 6});
  TensorList eager_in = {clone(x)};
  TensorList want = fn(eager_in);
  for (Mode mode : {Mode::fake, Mode::real}) {
    CapturedProgram p = capture(fn, {clone(x)}, {.mode = mode});
    expect_functional(p.graph);
    EXPECT_NE(p.graph.str().find("as_strided_scatter"), std::string::npos);
    TensorList run_in = {clone(x)};
    TensorList got = ir::interpret(p.graph, run_in);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(to_vector<float>(got[i]), to_vector<float>(want[i])) << i;
    EXPECT_EQ(to_vector<float>(run_in[0]), to_vector<float>(eager_in[0]));
  }
}

// (M1) A captured in-place op fails as eagerly, on fresh outputs and on inputs alike.
TEST(Functionalize, InPlaceErrorsAreEagerErrors) {
  for (Mode mode : {Mode::fake, Mode::real}) {
    expect_error(
        [&] {
          capture(
              [](const TensorList& in) {
                Tensor i = in[0] + 1;
                div_(i, 2);
                return TensorList{i};
              },
              {arange(3)}, {.mode = mode});
        },
        ErrorKind::dtype, "[div_] result type f32 can't be cast to the desired output type i64");
    expect_error(
        [&] {
          capture(
              [](const TensorList& in) {
                Tensor x = in[0];
                add_(x, ones({2, 3}));
                return TensorList{x};
              },
              {ones({3})}, {.mode = mode});
        },
        ErrorKind::shape, "[add_] output with shape [3] doesn't match the broadcast shape [2, 3]");
    expect_error(
        [&] {
          capture(
              [](const TensorList& in) {
                Tensor x = in[0] * 2;
                mul_(x, ones({4}));
                return TensorList{x};
              },
              {ones({3})}, {.mode = mode});
        },
        ErrorKind::shape, "[mul]");
  }
}

// Detached handles on a written storage read the written value: detach() (an alias op)
// and a descriptor made without dispatching (found by its storage).
TEST(Functionalize, DetachedHandlesSeeWrites) {  // (M2)
  Fn fn = [](const TensorList& in) {
    Tensor x = in[0], raw_x = x.detach_descriptor();
    Tensor t = x * 1.0;
    Tensor d = t.detach(), raw = t.detach_descriptor();
    Tensor v = select(t, 0, 1);
    add_(v, 10.0);
    add_(x, 1.0);  // an input written after a raw handle on it was taken
    Tensor e = d.detach();
    return TensorList{d * 1.0, e + 0.0, raw * 1.0, raw_x * 1.0};
  };
  Tensor x = arange(0, 3, 1, {.dtype = f32});
  TensorList want = fn({clone(x)});
  for (Mode mode : {Mode::fake, Mode::real}) {
    CapturedProgram p = capture(fn, {clone(x)}, {.mode = mode});
    expect_functional(p.graph);
    TensorList got = ir::interpret(p.graph, {clone(x)});
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(to_vector<float>(got[i]), to_vector<float>(want[i])) << i << "\n" << p.graph.str();
  }
}

// (M3) A fake capture leaves the caller's tensors as they were (neither data nor write
// count, G4, changes); a real one runs the program once, so its in-graph write-backs
// leave the inputs as eager would (as PyTorch's functionalize does when run for real).
TEST(Functionalize, FakeCaptureLeavesTheCallersInputsAlone) {
  Fn fn = [](const TensorList& in) {
    Tensor x = in[0], v = select(in[1], 0, 0);
    add_(x, 1.0);
    mul_(v, 2.0);
    return TensorList{x + in[1]};
  };
  auto make = [] {
    Tensor base = arange(0, 8, 1, {.dtype = f32});
    return TensorList{view(base, {2, 4}), reshape(base, {2, 4}) * 1.0};
  };
  TensorList eager = make();
  fn(eager);
  for (Mode mode : {Mode::fake, Mode::real}) {
    TensorList in = make();
    uint32_t v0 = in[0].version(), v1 = in[1].version();
    TensorList before = {clone(in[0]), clone(in[1])};
    CapturedProgram p = capture(fn, in, {.mode = mode});
    EXPECT_TRUE(p.inputs[0].data_mutated && p.inputs[1].data_mutated);
    const TensorList& want = mode == Mode::fake ? before : eager;
    for (size_t i = 0; i < 2; ++i)
      EXPECT_EQ(to_vector<float>(in[i]), to_vector<float>(want[i])) << i;
    if (mode == Mode::fake) {
      EXPECT_EQ(in[0].version(), v0);
      EXPECT_EQ(in[1].version(), v1);
    }
  }
}

TEST(CaptureTo, IsAlwaysRecorded) {  // (X1)
  Fn fn = [](const TensorList& in) { return TensorList{to(in[0], in[0].device()) + 1}; };
  CapturedProgram p = capture(fn, {ones({2})}, {.input_names = {"x"}});
  EXPECT_NE(p.graph.str().find("%to_copy : f32[2]@cpu:0 = _to_copy(%x, dtype=f32, device=cpu:0)"),
            std::string::npos)
      << p.graph.str();
  Tensor x = ones({2});
  EXPECT_TRUE(to(x, x.device()).is_same(x));  // eager keeps its fast path (D7)
}

TEST(CaptureTo, FrozenResultsRejectEveryMutationPath) {  // (X2)
  auto expect_frozen = [](Fn fn, const std::string& op) {
    expect_error(
        [&] {
          capture(fn, {ones({2, 2}), ones({2, 2})});
        },
        ErrorKind::frozen_mutation,
        "[" + op + "] cannot mutate the result of to(cpu:0) of f32[2, 2]@cpu:0");
  };
  expect_frozen(
      [](const TensorList& in) {
        Tensor y = to(in[0], in[0].device());
        add_(y, 1);
        return TensorList{y};
      },
      "add_");
  expect_frozen(
      [](const TensorList& in) {
        Tensor y = to(in[0], in[0].device());
        Tensor row = select(y, 0, 0);
        mul_(row, 2);
        return TensorList{y};
      },
      "mul_");
  expect_frozen(
      [](const TensorList& in) {
        Tensor y = to(in[0], in[0].device());
        copy_(y, in[1]);
        return TensorList{y};
      },
      "copy_");
  expect_error(
      [] {
        capture(
            [](const TensorList& in) {
              ScopeName s("block.proj");
              Tensor y = to(in[0], in[0].device());
              fill_(y, 0);
              return TensorList{y};
            },
            {ones({2})});
      },
      ErrorKind::frozen_mutation, "in 'block.proj'");
}

TEST(CaptureTo, CopiesMayBeMutated) {  // (X2)
  Fn half = [](const TensorList& in) {
    Tensor y = to(in[0], f16);
    mul_(y, 2);
    return TensorList{y};
  };
  Fn copied = [](const TensorList& in) {
    Tensor y = to(in[0], in[0].device(), std::nullopt, false, /*copy=*/true);
    add_(y, 1);
    return TensorList{y, in[0]};
  };
  CapturedProgram p1 = capture(half, {tensor({1.5, 2})});
  TensorList r1 = ir::interpret(p1.graph, {tensor({1.5, 2})});
  EXPECT_EQ(r1[0].dtype(), f16);
  EXPECT_EQ(to_vector<float>(r1[0]), (std::vector<float>{3, 4}));
  CapturedProgram p2 = capture(copied, {tensor({1, 2})});
  Tensor x = tensor({1, 2});
  TensorList r2 = ir::interpret(p2.graph, {x});
  EXPECT_EQ(to_vector<float>(r2[0]), (std::vector<float>{2, 3}));
  EXPECT_EQ(to_vector<float>(r2[1]), (std::vector<float>{1, 2}));
  EXPECT_FALSE(p2.inputs[0].data_mutated);
}

// ---- property test: random programs of views, in-place ops, copy_ and to() ----

struct Step {
  int kind;         // what to do
  int target;       // index of the tensor it acts on
  int other;        // a second tensor, where used
  int64_t a, b, c;  // parameters
};

struct Program {
  std::vector<Step> steps;
  std::vector<int> outputs;
};

// Runs a program; the same code runs eagerly and under capture. Tensors are tracked by
// index. The generator never mutates either side of a device-preserving to(): not the
// result (kiln rejects that, X2) and not its source afterwards, which X2 leaves to the
// user -- eagerly the result would alias the source, in a captured program it is a copy.
TensorList run(const Program& p, const TensorList& in) {
  std::vector<Tensor> ts(in.begin(), in.end());
  for (const Step& s : p.steps) {
    Tensor& t = ts[s.target];
    switch (s.kind) {
      case 0: ts.push_back(transpose(t, 0, 1)); break;
      case 1: ts.push_back(slice(t, s.a, s.b, std::nullopt, s.c)); break;
      case 2: ts.push_back(select(t, s.a, s.b)); break;
      case 3: add_(t, ts[s.other]); break;
      case 4: mul_(t, static_cast<double>(s.a)); break;
      case 5: copy_(t, ts[s.other]); break;
      case 6: fill_(t, static_cast<double>(s.a)); break;
      case 7: ts.push_back(add(t, 1.0)); break;
      case 8: ts.push_back(to(t, t.device())); break;                    // frozen
      case 9: ts.push_back(to(t, t.dtype() == f64 ? f32 : f64)); break;  // converts: mutable
      case 10: ts.push_back(reshape(t, {-1})); break;
    }
  }
  TensorList out;
  for (int i : p.outputs) out.push_back(ts[i] * 1.0);  // a fresh value for each output
  return out;
}

Program generate(std::mt19937& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::vector<Dims> shapes = {Dims{4, 6}, Dims{4, 6}};
  std::vector<int> base = {0, 1};             // which storage each tensor views
  std::vector<bool> frozen = {false, false};  // per storage: a side of a device-preserving to()
  Program p;
  int n_steps = 4 + pick(10);
  for (int k = 0; k < n_steps; ++k) {
    int target = pick(static_cast<int>(shapes.size()));
    const Dims sh = shapes[target];
    Step s{pick(11), target, 0, 0, 0, 0};
    bool mutating = s.kind >= 3 && s.kind <= 6;
    if (mutating && frozen[base[target]]) s.kind = 7;
    switch (s.kind) {
      case 0:
        if (sh.size() != 2) s.kind = 7;
        break;
      case 1:
        if (sh.empty() || sh[0] < 2) {
          s.kind = 7;
          break;
        }
        s.a = pick(static_cast<int>(sh.size()));
        s.b = pick(static_cast<int>(sh[s.a]));
        s.c = 1 + pick(2);
        break;
      case 2:
        if (sh.empty()) {
          s.kind = 7;
          break;
        }
        s.a = pick(static_cast<int>(sh.size()));
        s.b = pick(static_cast<int>(sh[s.a]));
        break;
      case 3:
      case 5: {
        std::vector<int> same;
        for (size_t j = 0; j < shapes.size(); ++j)
          if (shapes[j] == sh && static_cast<int>(j) != target) same.push_back(static_cast<int>(j));
        if (same.empty()) {
          s.kind = 4;
          s.a = 2;
          break;
        }
        s.other = same[pick(static_cast<int>(same.size()))];
        break;
      }
      case 4: s.a = 2 + pick(2); break;
      case 6: s.a = pick(5); break;
      default: break;
    }
    // Shapes of the results (views, to(), add, reshape), mirrored for later choices.
    Dims out;
    bool adds = true, view = true;
    switch (s.kind) {
      case 0: out = Dims{sh[1], sh[0]}; break;
      case 1:
        out = sh;
        out[s.a] = (sh[s.a] - s.b + s.c - 1) / s.c;
        break;
      case 2:
        out = sh;
        out.erase(s.a);
        break;
      case 7:
      case 8:
      case 9:
        out = sh;
        view = false;
        break;
      case 10: out = Dims{numel_of(sh)}; break;  // a view or a copy: never mutated
      default: adds = false;
    }
    if (s.kind == 1 && out[s.a] == 0) {
      s.kind = 7;
      out = sh;
      view = false;
    }
    if (adds) {
      shapes.push_back(out);
      if (view && s.kind != 10) {
        base.push_back(base[target]);
      } else {
        base.push_back(static_cast<int>(frozen.size()));
        frozen.push_back(s.kind == 8 || s.kind == 10);
      }
      if (s.kind == 8) frozen[base[target]] = true;
    }
    p.steps.push_back(s);
  }
  p.outputs = {0, 1};
  for (int k = 0; k < 2; ++k) p.outputs.push_back(pick(static_cast<int>(shapes.size())));
  return p;
}

TEST(Functionalize, RandomProgramsMatchEager) {  // (M1)-(M5)
  std::mt19937 rng(1234);
  manual_seed(5);
  Tensor x0 = view(arange(0, 24, 1, {.dtype = f32}), {4, 6});
  Tensor y0 = full({4, 6}, 0.5);
  int checked = 0;
  for (int n = 0; n < 300; ++n) {
    Program prog = generate(rng);
    Fn fn = [&prog](const TensorList& in) { return run(prog, in); };
    TensorList eager_in = {clone(x0), clone(y0)};
    TensorList want = fn(eager_in);
    struct Variant {
      Mode mode;
      WriteBack wb;
    };
    for (Variant v :
         {Variant{Mode::fake, WriteBack::in_graph}, Variant{Mode::fake, WriteBack::out_of_graph},
          Variant{Mode::real, WriteBack::in_graph}}) {
      SCOPED_TRACE("program " + std::to_string(n));
      CapturedProgram p = capture(fn, {clone(x0), clone(y0)}, {.mode = v.mode, .write_back = v.wb});
      expect_functional(p.graph);
      TensorList run_in = {clone(x0), clone(y0)};
      TensorList got = ir::interpret(p.graph, run_in);
      size_t m = static_cast<size_t>(p.num_mutation_outputs);
      // Apply out-of-graph write-backs as a runtime would.
      for (size_t i = 0, k = 0; i < run_in.size(); ++i)
        if (p.inputs[i].where == InputMutation::Where::out_of_graph) copy_(run_in[i], got[k++]);
      ASSERT_EQ(got.size(), want.size() + m);
      std::string steps;
      for (const Step& st : prog.steps)
        steps += fmt::format("kind {} target {} other {} a {} b {} c {}\n", st.kind, st.target,
                             st.other, st.a, st.b, st.c);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(to_vector<double>(got[m + i]), to_vector<double>(want[i]))
            << "output " << i << "\n"
            << steps << p.graph.str();
      for (size_t i = 0; i < run_in.size(); ++i) {
        ASSERT_EQ(to_vector<double>(run_in[i]), to_vector<double>(eager_in[i]))
            << "input " << i << "\n"
            << p.graph.str();
        bool changed = to_vector<double>(eager_in[i]) != to_vector<double>(i ? y0 : x0);
        if (changed) {
          EXPECT_TRUE(p.inputs[i].data_mutated);
        }
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 900);
}

}  // namespace
}  // namespace kiln::passes

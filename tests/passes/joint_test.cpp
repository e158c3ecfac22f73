// Joint capture (J1-J3): forward and backward traced together, partitioned, and run.
#include <gtest/gtest.h>

#include <map>

#include "kiln/kiln.h"
#include "kiln/passes/reinplace.h"
#include "test_util.h"

namespace kiln {
namespace {

using passes::capture_joint;
using passes::InputMutation;
using passes::JointProgram;
using passes::JointRun;
using passes::run_joint;
using testing::all_close;
using testing::expect_error;

std::vector<double> values(const Tensor& t) { return to_vector<double>(t); }

// pytorch#170467's function: an input that needs no gradient is mutated in forward
// while another input requires grad.
TensorList founding(const TensorList& in) {
  Tensor y = in[1];
  add_(y, 2.0);
  return {sin(in[0])};
}

TEST(J2, FoundingCaseGraphsAreExact) {
  Tensor x = randn({3}, {.requires_grad = true}), y = randn({3});
  JointProgram p = capture_joint(founding, {x, y}, {.input_names = {"x", "y"}});
  // Forward: sin, add, and the epilogue copy_ into y; nothing earlier is rebound (the
  // output still reads %sin, the backward saves the input %x itself).
  EXPECT_EQ(p.forward.str(),
            "%x : f32[3]@cpu:0 = input()\n"
            "%y : f32[3]@cpu:0 = input()\n"
            "%add : f32[3]@cpu:0 = add(%y, 2)\n"
            "%sin : f32[3]@cpu:0 = sin(%x)\n"
            "%copy_ : f32[3]@cpu:0 = copy_(%y, %add)\n"
            "return (%sin, %x)\n");
  EXPECT_EQ(p.backward.str(),
            "%saved_x : f32[3]@cpu:0 = input()\n"
            "%tangents_0 : f32[3]@cpu:0 = input()\n"
            "%cos : f32[3]@cpu:0 = cos(%saved_x)\n"
            "%mul : f32[3]@cpu:0 = mul(%tangents_0, %cos)\n"
            "return %mul\n");
  EXPECT_EQ(p.inputs[1].where, InputMutation::Where::in_graph);
  EXPECT_EQ(p.num_saved, 1);
  EXPECT_EQ(p.saved_bytes(), 12);
  EXPECT_EQ(p.grad_of, std::vector<int>{0});
}

// Note [Recomputed activations]: the backward recomputes a GELU from its saved input
// instead of saving both.
TEST(J2, GeluIsRecomputedNotSaved) {
  Tensor x = randn({4, 8}, {.requires_grad = true}), w = randn({8, 8}, {.requires_grad = true});
  auto f = [](const TensorList& in) { return TensorList{sum(matmul(gelu(in[0]), in[1]))}; };
  JointProgram p = capture_joint(f, {x, w}, {.input_names = {"x", "w"}});
  EXPECT_EQ(p.num_saved, 2);  // x and w: gelu(x) is made again in backward
  EXPECT_NE(p.backward.str().find("= gelu(%saved_x"), std::string::npos) << p.backward.str();
  JointRun r = run_joint(p, {x, w});
  Tensor xe = clone(x.detach()), we = clone(w.detach());
  xe.set_requires_grad();
  we.set_requires_grad();
  sum(matmul(gelu(xe), we)).backward();
  EXPECT_TRUE(all_close(r.grads[0], to_vector<double>(xe.grad()), 0, 0));
  EXPECT_TRUE(all_close(r.grads[1], to_vector<double>(we.grad()), 0, 0));
}

TEST(J2, FoundingCaseRunsLikeEager) {
  Tensor x = randn({5}, {.requires_grad = true}), y = randn({5});
  JointProgram p = capture_joint(founding, {x, y});
  // Eager on copies.
  Tensor xe = x.detach(), ye = clone(y);
  xe = clone(xe);
  xe.set_requires_grad();
  Tensor out = founding({xe, ye})[0];
  Tensor g = randn({5});
  out.backward(g);
  // The captured pair on the originals.
  Tensor y_before = clone(y);
  passes::JointRun run = run_joint(p, {x.detach(), y}, {g});
  EXPECT_TRUE(all_close(run.outputs[0], values(out), 0, 0));
  EXPECT_TRUE(all_close(y, values(ye), 0, 0));  // the write-back happened, once
  EXPECT_TRUE(all_close(y, values(y_before + 2.0), 0, 0));
  EXPECT_TRUE(all_close(run.grads[0], values(xe.grad()), 0, 0));
  EXPECT_FALSE(run.grads[1].defined());
}

// (J1) detach() inside the captured function stops gradients as eagerly: the joint
// graph's backward sees the alias as a constant of the forward.
// (Y1 under J1) A joint capture with a dynamic batch: both graphs have symbolic sizes, and
// run_joint gives eager's outputs and gradients at every batch of the range, with the
// range checked at run time.
TEST(J1, ADynamicBatchRunsAtEveryBatchLikeEager) {
  auto fn = [](const TensorList& in) {
    Tensor h = gelu(linear(in[0], in[1], in[2]));        // [b, 16]
    Tensor y = softmax(h, -1) * h + mean(h, {0}, true);  // a mean over the batch
    return TensorList{mean(y * y), sum(y, {1})};
  };
  manual_seed(3);
  Tensor w = randn({16, 8}, {.requires_grad = true}), bias = randn({16}, {.requires_grad = true});
  Dim batch("batch", 1, 64);
  JointProgram p = capture_joint(fn, {randn({4, 8}), w, bias}, {.dynamic_shapes = {{{0, batch}}}});
  ASSERT_EQ(p.shapes.symbols.size(), 1u) << p.shapes.str();
  EXPECT_EQ(p.shapes.symbols[0].dim_name, "batch");
  EXPECT_TRUE(p.shapes.guards.empty()) << p.shapes.str();
  EXPECT_NE(p.forward.str().find("[s0,16]"), std::string::npos) << p.forward.str();
  for (int64_t b : {1, 3, 4, 17, 64}) {
    Tensor x = randn({b, 8});
    Tensor we = clone(w.detach()), be = clone(bias.detach());
    we.set_requires_grad();
    be.set_requires_grad();
    TensorList eager = fn({x, we, be});
    Tensor g1 = randn({b});
    autograd::backward({eager[0], eager[1]}, {Tensor(), g1});
    passes::JointRun run = run_joint(p, {x, w.detach(), bias.detach()}, {Tensor(), g1});
    EXPECT_TRUE(all_close(run.outputs[0], values(eager[0]), 1e-5, 1e-6)) << b;
    EXPECT_TRUE(all_close(run.outputs[1], values(eager[1]), 1e-5, 1e-6)) << b;
    EXPECT_TRUE(all_close(run.grads[1], values(we.grad()), 1e-5, 1e-6)) << b;
    EXPECT_TRUE(all_close(run.grads[2], values(be.grad()), 1e-5, 1e-6)) << b;
  }
  expect_error(
      [&] {
        run_joint(p, {randn({65, 8}), w.detach(), bias.detach()});
      },
      ErrorKind::shape, "outside the range [1, 64]");
  expect_error(
      [&] {
        run_joint(p, {randn({4, 9}), w.detach(), bias.detach()});
      },
      ErrorKind::shape, "static at 8");
}

TEST(J1, DetachStopsGradientsLikeEager) {
  auto fn = [](const TensorList& in) {
    Tensor y = in[0] * in[1];
    return TensorList{sum(y + y.detach() * in[1])};
  };
  Tensor x = randn({4}), w = randn({4}, {.requires_grad = true});
  JointProgram p = capture_joint(fn, {x, w});
  Tensor we = clone(w.detach());
  we.set_requires_grad();
  Tensor loss = fn({x, we})[0];
  loss.backward();
  passes::JointRun run = run_joint(p, {x, w.detach()}, {});
  EXPECT_TRUE(all_close(run.outputs[0], values(loss), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(run.grads[1], values(we.grad()), 1e-6, 1e-6)) << p.backward.str();
  EXPECT_NE(p.forward.str().find("alias("), std::string::npos) << p.forward.str();
}

// (G4 under J1) Writes through views of intermediates (a row overwritten, a slice scaled)
// are captured with the base's rebased history: the joint graph's gradients are eager's.
TEST(J1, WritesThroughViewsOfIntermediatesDifferentiateLikeEager) {
  auto fn = [](const TensorList& in) {
    Tensor h = in[0] * in[1];  // [2, 3]
    Tensor row = select(h, 0, 1);
    copy_(row, sin(select(in[0], 0, 0)));  // a row overwritten with another's function
    Tensor part = slice(h, 1, 0, 2);
    mul_(part, 2.0);  // a slice scaled (a view made after the write)
    return TensorList{sum(h * h)};
  };
  Tensor x = randn({2, 3}, {.requires_grad = true}), w = randn({2, 3}, {.requires_grad = true});
  JointProgram p = capture_joint(fn, {x, w});
  Tensor xe = clone(x.detach()), we = clone(w.detach());
  xe.set_requires_grad();
  we.set_requires_grad();
  Tensor loss = fn({xe, we})[0];
  loss.backward();
  passes::JointRun run = run_joint(p, {x.detach(), w.detach()}, {});
  EXPECT_TRUE(all_close(run.outputs[0], values(loss), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(run.grads[0], values(xe.grad()), 1e-5, 1e-6)) << p.backward.str();
  EXPECT_TRUE(all_close(run.grads[1], values(we.grad()), 1e-5, 1e-6)) << p.backward.str();
}

TEST(J2, WriteBackOutOfGraphWhenAsked) {
  Tensor x = randn({3}, {.requires_grad = true}), y = randn({3});
  JointProgram p = capture_joint(founding, {x, y}, {.write_back = passes::WriteBack::out_of_graph});
  EXPECT_EQ(p.inputs[1].where, InputMutation::Where::out_of_graph);
  EXPECT_EQ(p.num_mutation_outputs, 1);
  EXPECT_EQ(p.forward.str().find("copy_"), std::string::npos);
  Tensor y2 = clone(y);
  run_joint(p, {x.detach(), y2}, {ones({3})});
  EXPECT_TRUE(all_close(y2, values(y + 2.0), 0, 0));
}

// (J2) An input that requires grad and is written in place: out of graph, and its
// gradient is the gradient w.r.t. its value before the write.
TEST(J2, MutatedInputThatRequiresGradIsWrittenBackOutOfGraph) {
  auto fn = [](const TensorList& in) {
    Tensor x = in[0];
    mul_(x, 3.0);
    return TensorList{sum(x * x)};
  };
  Tensor x = tensor({1, 2}, {}, {.requires_grad = true});
  JointProgram p = capture_joint(fn, {x});
  EXPECT_EQ(p.inputs[0].where, InputMutation::Where::out_of_graph);
  EXPECT_EQ(p.num_mutation_outputs, 1);
  Tensor data = tensor({1, 2});
  passes::JointRun run = run_joint(p, {data});
  EXPECT_TRUE(all_close(run.outputs[0], {45}));    // (3 + 36) ... 9 + 36
  EXPECT_TRUE(all_close(run.grads[0], {18, 36}));  // d/dx (3x)^2 = 18 x
  EXPECT_TRUE(all_close(data, {3, 6}));            // written back
}

// (J2) An input that requires grad, written only under no-grad: kept in graph as an
// epilogue copy_, as AOTAutograd keeps it; values and gradient as eager's.
TEST(J2, NoGradWriteToAnInputThatRequiresGradStaysInGraph) {
  auto fn = [](const TensorList& in) {
    Tensor x = in[0];
    {
      autograd::NoGradGuard no_grad;
      mul_(x, 2.0);
    }
    return TensorList{sum(sin(x))};
  };
  Tensor xe = tensor({0.5, 1.0}, {}, {.requires_grad = true});
  fn({xe})[0].backward();
  Tensor x = tensor({0.5, 1.0}, {}, {.requires_grad = true});
  JointProgram p = capture_joint(fn, {x});
  EXPECT_EQ(p.inputs[0].where, InputMutation::Where::in_graph);
  EXPECT_EQ(p.num_mutation_outputs, 0);
  EXPECT_NE(p.forward.str().find("copy_(%primals_0, %mul)"), std::string::npos) << p.forward.str();
  Tensor data = tensor({0.5, 1.0});
  passes::JointRun run = run_joint(p, {data});
  EXPECT_TRUE(all_close(data, values(xe.detach()), 0, 0));
  EXPECT_TRUE(all_close(run.grads[0], values(xe.grad()), 0, 0));
  EXPECT_TRUE(all_close(run.outputs[0], values(sum(sin(xe.detach()))), 0, 0));
}

// (J2, Note [Aliased inputs]) Two inputs that are views of one storage. Apart (no
// overlap): traced as independent inputs, so the program is right for separate tensors
// too; overlapping: traced on their shared storage, and a run whose inputs alias
// otherwise is refused, naming both.
TEST(J2, AliasedInputsAreIndependentOrCheckedAtRunTime) {
  auto fn = [](const TensorList& in) {
    Tensor a = in[0];
    add_(a, 1.0);
    return TensorList{sum(mul(in[0], in[1]))};
  };
  auto eager = [&](const Tensor& a, const Tensor& b) {
    TensorList out = fn({a, b});
    return std::pair{item<double>(out[0]), to_vector<double>(a)};
  };
  Tensor base = tensor({1, 2, 3, 4, 5});
  {  // apart: [0, 2) and [2, 4)
    JointProgram p = capture_joint(fn, {narrow(base, 0, 0, 2), narrow(base, 0, 2, 2)});
    EXPECT_TRUE(p.overlapping_inputs.empty());
    Tensor a = tensor({1, 2}), b = tensor({3, 4});  // separate tensors at run time
    auto [want, want_a] = eager(clone(a), clone(b));
    passes::JointRun r = run_joint(p, {a, b});
    EXPECT_DOUBLE_EQ(item<double>(r.outputs[0]), want);  // (2*3 + 3*4) = 18
    EXPECT_EQ(to_vector<double>(a), want_a);
    Tensor other = clone(base);  // views of one storage again: still right
    passes::JointRun r2 = run_joint(p, {narrow(other, 0, 0, 2), narrow(other, 0, 2, 2)});
    EXPECT_DOUBLE_EQ(item<double>(r2.outputs[0]), want);
    Tensor same = clone(base);
    testing::expect_error(
        [&] {
          run_joint(p, {narrow(same, 0, 0, 3), narrow(same, 0, 2, 3)});
        },
        ErrorKind::value,
        "[run_joint] inputs 0 and 1 overlap in memory here, but were captured apart");
  }
  {  // overlapping: [0, 3) and [2, 5): the write to input 0 is seen through input 1
    JointProgram p = capture_joint(fn, {narrow(base, 0, 0, 3), narrow(base, 0, 2, 3)});
    ASSERT_EQ(p.overlapping_inputs.size(), 1u);
    EXPECT_EQ(p.overlapping_inputs[0].first_offset, 0);
    EXPECT_EQ(p.overlapping_inputs[0].second_offset, 2);
    Tensor e = clone(base);
    auto [want, want_a] = eager(narrow(e, 0, 0, 3), narrow(e, 0, 2, 3));
    Tensor r = clone(base);
    passes::JointRun run = run_joint(p, {narrow(r, 0, 0, 3), narrow(r, 0, 2, 3)});
    EXPECT_DOUBLE_EQ(item<double>(run.outputs[0]), want);
    EXPECT_EQ(to_vector<double>(r), to_vector<double>(e));
    testing::expect_error(
        [&] {
          run_joint(p, {tensor({1, 2, 3}), tensor({3, 4, 5})});
        },
        ErrorKind::value,
        "[run_joint] inputs 0 and 1 were captured as overlapping views of one storage (at offsets "
        "0 "
        "and 2), but here they do not share memory");
    Tensor shifted = tensor({0, 1, 2, 3, 4, 5});
    testing::expect_error(
        [&] {
          run_joint(p, {narrow(shifted, 0, 1, 3), narrow(shifted, 0, 3, 3)});
        },
        ErrorKind::value, "but here they sit at offsets 1 and 3");
  }
  {  // three: 0 apart from 1 and 2, which overlap; 1 is written, 2 reads the write
    auto three = [](const TensorList& in) {
      Tensor b = in[1];
      add_(b, 10.0);
      return TensorList{sum(mul(in[0], 1.0)) + sum(mul(in[2], in[2]))};
    };
    Tensor big = tensor({0, 1, 2, 3, 4, 5, 6, 7});
    JointProgram p =
        capture_joint(three, {narrow(big, 0, 0, 2), narrow(big, 0, 3, 3), narrow(big, 0, 4, 4)});
    ASSERT_EQ(p.overlapping_inputs.size(), 1u);
    EXPECT_EQ(p.overlapping_inputs[0].first, 1);
    EXPECT_EQ(p.overlapping_inputs[0].second, 2);
    Tensor e = clone(big), r = clone(big);
    double want =
        item<double>(three({narrow(e, 0, 0, 2), narrow(e, 0, 3, 3), narrow(e, 0, 4, 4)})[0]);
    passes::JointRun run = run_joint(p, {tensor({0, 1}), narrow(r, 0, 3, 3), narrow(r, 0, 4, 4)});
    EXPECT_DOUBLE_EQ(item<double>(run.outputs[0]), want);
    EXPECT_EQ(to_vector<double>(narrow(r, 0, 3, 5)), to_vector<double>(narrow(e, 0, 3, 5)));
  }
}

// Calls `m` with its parameters and buffers replaced by `state` (registration order).
TensorList call_with(nn::Module& m, const TensorList& state, const TensorList& user) {
  std::vector<nn::NamedTensor> named = m.named_tensors();
  TensorList saved;
  for (size_t i = 0; i < state.size(); ++i) {
    saved.push_back(*named[i].tensor);
    *named[i].tensor = state[i];
  }
  TensorList out = m(user);
  for (size_t i = 0; i < state.size(); ++i) *named[i].tensor = saved[i];
  return out;
}

// Captures loss(m(inputs)) w.r.t. the module's parameters and compares a run of the
// pair with eager autograd on the same module.
JointProgram check_module(nn::Module& m, const TensorList& user,
                          std::function<Tensor(const TensorList&)> loss, double tol) {
  TensorList state;
  std::vector<bool> wants;
  for (const nn::NamedTensor& t : m.named_tensors()) {
    state.push_back(*t.tensor);
    wants.push_back(t.kind == nn::SlotKind::parameter);
  }
  size_t n_state = state.size();
  TensorList all = state;
  all.insert(all.end(), user.begin(), user.end());
  wants.resize(all.size(), false);
  auto fn = [&](const TensorList& in) {
    TensorList s(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n_state));
    TensorList u(in.begin() + static_cast<std::ptrdiff_t>(n_state), in.end());
    return TensorList{loss(call_with(m, s, u))};
  };
  JointProgram p = capture_joint(fn, all, {.requires_grad = wants});
  p.forward.verify();  // recorded into two graphs: each well formed on its own
  p.backward.verify();

  TensorList copies;  // the program runs on copies of the state (buffers get written)
  for (const Tensor& t : all) copies.push_back(clone(t.detach()));
  passes::JointRun run = run_joint(p, copies);
  Tensor eager = loss(m(user));
  eager.backward();
  EXPECT_TRUE(all_close(run.outputs[0], values(eager), tol, tol));
  std::vector<nn::NamedTensor> named = m.named_tensors();
  for (size_t i = 0; i < n_state; ++i) {
    if (!wants[i]) {  // buffers: written back like eager's
      EXPECT_TRUE(all_close(copies[i], values(*named[i].tensor), tol, tol)) << named[i].name;
      continue;
    }
    EXPECT_TRUE(run.grads[i].defined()) << named[i].name;
    EXPECT_TRUE(all_close(run.grads[i], values(named[i].tensor->grad()), tol, tol))
        << named[i].name;
  }
  return p;
}

TEST(J1, BatchNormRunningStatisticsAreBufferMutationsInTheJointGraph) {
  manual_seed(1);
  nn::Sequential m({std::make_shared<nn::Linear>(4, 6), std::make_shared<nn::BatchNorm1d>(6),
                    std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(6, 2)});
  Tensor x = randn({8, 4});
  JointProgram p = check_module(
      m, {x}, [](const TensorList& o) { return sum(o[0] * o[0]); }, 1e-5);
  int copies = 0;
  for (ir::Node* n : p.forward.nodes())
    if (n->opcode() == ir::Opcode::call && n->op() == ops::OpKind::copy_) ++copies;
  EXPECT_EQ(copies, 3);  // running_mean, running_var, num_batches_tracked
  for (ir::Node* n : p.backward.nodes())
    EXPECT_FALSE(n->opcode() == ir::Opcode::call && ops::op_info(n->op()).is_inplace())
        << n->name();
}

// The reference BLOCK (the benchmark: 4 x 128 tokens, 256 wide) and GPT (kiln demo's).
TEST(J1, BlockAndGptCaptureLikeEager) {
  manual_seed(2);
  nn::ReferenceModel block = nn::make_reference_model("block");
  Tensor target = randn_like(block.example_inputs[0]);
  JointProgram pb = check_module(
      *block.module, block.example_inputs,
      [&](const TensorList& o) { return nn::mse_loss(o[0], target); }, 1e-4);
  nn::ReferenceModel gpt = nn::make_reference_model("gpt");
  const Tensor& ids = gpt.example_inputs[0];
  Tensor next = to(mul(rand(IntList(ids.shape().begin(), ids.shape().end())), 256.0), i64);
  JointProgram pg = check_module(
      *gpt.module, gpt.example_inputs,
      [&](const TensorList& o) {
        return nn::cross_entropy(reshape(o[0], {-1, 256}), reshape(next, {-1}));
      },
      1e-4);
  std::cout << "saved by forward for backward: BLOCK " << pb.saved_bytes() << " bytes in "
            << pb.num_saved << " values; GPT " << pg.saved_bytes() << " bytes in " << pg.num_saved
            << " values\n";
  EXPECT_GT(pb.num_saved, 0);
  EXPECT_GT(pg.num_saved, 0);
  // Each layer_norm, softmax and linear differentiates through one fused node (as PyTorch's
  // native_layer_norm_backward, _softmax_backward_data and linear_backward: qkv, projection and the
  // MLP's two linears ask for all three gradients), select's gradient is one as_strided_scatter
  // into zeros, and nothing in backward writes in place (no view write for functionalization to
  // undo).
  std::map<ops::OpKind, int> count;
  for (ir::Node* n : pb.backward.nodes())
    if (n->opcode() == ir::Opcode::call) ++count[n->op()];
  EXPECT_EQ(count[ops::OpKind::layer_norm_backward], 2);
  EXPECT_EQ(count[ops::OpKind::linear_backward], 4);
  EXPECT_EQ(count[ops::OpKind::softmax_backward], 1);  // one row pass, not mul/sum/sub/mul
  // mse_loss's d(d*d) = g*d + g*d computes the product once: backward has no repeated call
  EXPECT_EQ(ir::eliminate_common_subexpressions(pb.backward), 0);
  EXPECT_EQ(count[ops::OpKind::sum], 0);
  EXPECT_EQ(count[ops::OpKind::mm], 0);
  EXPECT_EQ(count[ops::OpKind::mean], 0);
  EXPECT_EQ(count[ops::OpKind::as_strided_scatter], 3);  // q, k and v of one qkv projection
  EXPECT_EQ(count[ops::OpKind::as_strided], 0);
  // softmax's saved output is read as the forward's own node (no alias node per saved value)
  EXPECT_EQ(count[ops::OpKind::alias], 0);
  std::map<ops::OpKind, int> fw_count;
  for (ir::Node* n : pb.forward.nodes())
    if (n->opcode() == ir::Opcode::call) ++fw_count[n->op()];
  EXPECT_EQ(fw_count[ops::OpKind::alias], 0);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// passes::reinplace_write_backs: %new = add(mul(%p, 0.9), %g) written back into %p.
struct UpdateGraph {
  ir::Graph g;
  ir::Node *p, *grad, *mul, *add;
  explicit UpdateGraph(bool read_old_value_after) {
    ir::ValueMeta m = ir::ValueMeta::of(zeros({4}));
    p = g.add_input("p", m);
    grad = g.add_input("g", m);
    mul = g.add_call(ops::OpKind::mul, {ir::Ref{p, 0}, Scalar(0.9)}, {m});
    add = g.add_call(ops::OpKind::add, {ir::Ref{mul, 0}, ir::Ref{grad, 0}, Scalar(1)}, {m});
    ir::RefList outs{{add, 0}};
    if (read_old_value_after) {
      ir::Node* s =
          g.add_call(ops::OpKind::sum, {ir::Ref{p, 0}, IntList{}, false, std::monostate{}},
                     {ir::ValueMeta::of(zeros({}))});
      outs.push_back({s, 0});
    }
    g.set_output(outs);
  }
};

// ---- (J2) writes made in backward ----
// kjt::probe(x, seen, log) = 2 x, whose backward writes every kind of saved input in place:
// x (requires grad) += 1, seen (needs no gradient) += 1, and log[1:3] (a view) += sum(g).
void probe_meta(const ops::OpCall& c, ops::MetaOut& out) {
  out.fresh(c.args.tensor(0).shape(), DType::f32);
}
void probe_cpu(const ops::OpCall& c, std::span<Tensor> outs) {
  Tensor x = contiguous(c.args.tensor(0));
  const float* px = x.data<float>();
  float* po = outs[0].data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) po[i] = 2 * px[i];
}
void probe_backward(autograd::GradCtx& c) {
  c.set(0, mul(c.grad(), 2.0));
  Tensor x = c.t(0), seen = c.t(1), log = c.t(2);
  add_(x, 1.0);
  add_(seen, 1.0);
  Tensor window = narrow(log, 0, 1, 2);
  add_(window, sum(c.grad()));
}
ops::OpKind probe_op() {
  static const ops::OpKind k =
      define_op({.schema = "kjt::probe(Tensor x, Tensor seen, Tensor log) -> Tensor",
                 .meta = probe_meta,
                 .library = "the joint test",
                 .cpu = probe_cpu,
                 .backward = probe_backward,
                 .backward_saves = 0b111});
  return k;
}
TensorList probe(const TensorList& in) {
  return {sum(mul(call_op(probe_op(), {in[0], in[1], in[2]})[0], in[0]))};
}

TEST(J2, WritesMadeInBackwardReachTheInputsAsInEager) {
  Tensor x0 = randn({3}), seen0 = zeros({3}), log0 = zeros({4});
  // eager
  Tensor x = clone(x0), seen = clone(seen0), log = clone(log0);
  x.set_requires_grad();
  probe({x, seen, log})[0].backward();
  // captured: forward and backward programs, run on fresh copies
  Tensor cx = clone(x0), cseen = clone(seen0), clog = clone(log0);
  cx.set_requires_grad();
  JointProgram p = capture_joint(probe, {cx, cseen, clog});
  EXPECT_EQ(p.backward_mutated, (std::vector<int>{0, 1, 2}));
  Tensor rx = clone(x0), rseen = clone(seen0), rlog = clone(log0);
  passes::JointRun r = run_joint(p, {rx, rseen, rlog});
  EXPECT_TRUE(all_close(r.grads[0], values(x.grad()), 0, 0));
  EXPECT_TRUE(all_close(rx, values(x), 0, 0));      // x0 + 1: the write to an input requiring grad
  EXPECT_TRUE(all_close(rseen, {1, 1, 1}, 0, 0));   // an input that needs no gradient
  EXPECT_TRUE(all_close(rlog, values(log), 0, 0));  // through a view: log[1:3] += sum(g)
  EXPECT_NE(item<double>(sum(abs(rlog))), 0.0);
  // the gradient read x before backward wrote it: d/dx sum(2x * x) = 4 x0
  EXPECT_TRUE(all_close(r.grads[0], values(mul(x0, 4.0)), 1e-6, 1e-6));
}

TEST(Reinplace, UpdateChainOfWrittenBackStateBecomesInPlace) {
  UpdateGraph u(false);
  EXPECT_EQ(passes::reinplace_write_backs(u.g, {{u.p, 0}}), 2);
  EXPECT_EQ(u.mul->op(), ops::OpKind::mul_);
  EXPECT_EQ(u.add->op(), ops::OpKind::add_);
  Tensor p = tensor({1, 2, 3, 4}), g = ones({4});
  TensorList out = ir::interpret(u.g, {p, g});
  EXPECT_TRUE(out[0].is_alias_of(p));  // the update wrote p itself
  EXPECT_TRUE(all_close(p, {1.9, 2.8, 3.7, 4.6}));
}

TEST(Reinplace, StateReadAfterTheUpdateStaysFunctional) {
  UpdateGraph u(true);
  EXPECT_EQ(passes::reinplace_write_backs(u.g, {{u.p, 0}}), 0);
  EXPECT_EQ(u.mul->op(), ops::OpKind::mul);
}

}  // namespace
}  // namespace kiln

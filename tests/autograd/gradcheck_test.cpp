// (G2) Every op of the table is differentiable or marked not, and every differentiable
// op's backward formula agrees with float64 central finite differences, on the shared
// op samples plus cases for broadcasting, views, non-contiguous inputs, several
// reduced dims, 1-D matmul operands and devices.
#include <gtest/gtest.h>

#include <map>

#include "kiln/kiln.h"
#include "mock_cuda.h"
#include "op_samples.h"
#include "test_util.h"

namespace kiln {
namespace {

using autograd::Differentiable;
using ops::OpKind;

// More calls per op, beyond the shared sample (all floating tensors f64).
std::vector<std::vector<Value>> extra_samples(OpKind op) {
  TensorOptions o{.dtype = f64};
  Tensor a3 = randn({2, 3, 4}, o);
  switch (op) {
    case OpKind::add:
      return {{randn({3, 1}, o), randn({1, 4}, o), Scalar(0.5)},
              {randn({2, 3}, o), scalar_tensor(1.5, o), Scalar(1)}};
    case OpKind::mul: return {{transpose(randn({4, 3}, o), 0, 1), randn({3, 1}, o)}};
    case OpKind::sum: return {{a3, IntList{0, 2}, false, Value()}, {a3, IntList{}, false, Value()}};
    case OpKind::mean: return {{a3, IntList{-1, 0}, true, Value()}};
    case OpKind::amax: return {{a3, IntList{1, 2}, true}};
    case OpKind::max: return {{a3, int64_t{2}, false}};
    case OpKind::var: return {{a3, IntList{0, 2}, int64_t{0}, true}};
    case OpKind::matmul:
      return {{randn({4}, o), randn({4, 5}, o)},
              {randn({3, 4}, o), randn({4}, o)},
              {randn({4}, o), randn({4}, o)},
              {randn({2, 3, 4}, o), randn({4}, o)},
              {randn({3, 4}, o), randn({2, 4, 5}, o)}};
    case OpKind::linear:
      return {{randn({4}, o), randn({6, 4}, o), Value()}, {a3, randn({5, 4}, o), randn({5}, o)}};
    case OpKind::permute: return {{a3, IntList{2, 0, 1}}};
    case OpKind::special_unary: {  // every function with a derivative
      std::vector<std::vector<Value>> all;
      for (const char* fn : {"i0", "i0e", "i1"}) all.push_back({mul(a3, 3.0), Str(fn)});
      for (const char* fn : {"erfcx", "log_ndtr"})
        all.push_back({a3, Str(fn)});  // erfcx(-x) grows as e^{x²}
      return all;
    }
    case OpKind::special_binary:  // w.r.t. the second argument
      return {{from_vector<int64_t>({1, 2, 5, 9}), add(abs(a3), 0.1), Str("gammainc")},
              {from_vector<int64_t>({3, 7, 1, 2}), add(abs(a3), 2.0), Str("gammaincc")}};
    case OpKind::expand: return {{randn({3, 1}, o), IntList{2, 3, 4}}};
    case OpKind::softmax: return {{a3, int64_t{-1}}};
    case OpKind::log_softmax: return {{transpose(a3, 1, 2), int64_t{1}}};
    case OpKind::softmax_backward:  // grad_output strided, output a real softmax
      return {{transpose(randn({2, 4, 3}, o), 1, 2), softmax(a3, -1), int64_t{-1}},
              {randn({2, 3, 4}, o), softmax(a3, 1), int64_t{1}}};
    case OpKind::log_softmax_backward:
      return {
          {randn({2, 3, 4}, o), log_softmax(transpose(randn({2, 4, 3}, o), 1, 2), 1), int64_t{1}}};
    case OpKind::layer_norm: return {{a3, IntList{3, 4}, Value(), Value(), 1e-5}};
    case OpKind::linalg_eigh: {  // the upper triangle, a batch
      Tensor s = randn({2, 3, 3}, o);
      return {{add(add(s, transpose(s, 1, 2)), diag(arange(0.0, 9.0, 3.0, o))), Str("U")}};
    }
    case OpKind::linalg_svd: return {{randn({2, 3, 5}, o), false}, {randn({3, 3}, o), true}};
    case OpKind::linear_backward:
      return {
          {randn({2, 3, 5}, o), a3, randn({5, 4}, o)},
          {randn({3, 5}, o), transpose(randn({4, 3}, o), 0, 1), transpose(randn({4, 5}, o), 0, 1)}};
    case OpKind::layer_norm_backward:
      return {
          {randn({2, 3, 4}, o), transpose(randn({2, 4, 3}, o), 1, 2), IntList{4}, Value(), 1e-5}};
    case OpKind::gelu: return {{a3, Str("none")}};
    case OpKind::gelu_backward: return {{randn({3, 4}, o), randn({4}, o), Str("none")}};
    case OpKind::threshold_backward: return {{randn({3, 1}, o), randn({3, 4}, o), Scalar(0)}};
    case OpKind::index_select: return {{a3, int64_t{2}, from_vector<int64_t>({3, 3, 0})}};
    case OpKind::embedding: return {{randn({5, 3}, o), from_vector<int64_t>({1, 1, 4, 0}, {2, 2})}};
    case OpKind::_to_copy: return {{randn({2, 3}, o), f64, Device("cpu:2"), false}};
    case OpKind::copy_:
      return {{zeros({2, 3}, {.dtype = f64, .device = Device("cpu:1")}), randn({3}, o), false}};
    case OpKind::where:
      return {{gt(randn({3, 1}, o), 0.0), randn({3, 4}, o), scalar_tensor(0.5, o)}};
    case OpKind::slice: return {{a3, int64_t{2}, int64_t{-3}, Value(), int64_t{1}}};
    default: return {};
  }
}

// The numbers gradcheck needs to compute with: f64 samples converted where the shared
// sample uses another dtype (its f16 _to_copy would make finite differences noise).
std::vector<std::vector<Value>> samples(OpKind op) {
  std::vector<std::vector<Value>> all;
  if (op == OpKind::_to_copy)
    all.push_back({randn({3, 4}, {.dtype = f64}), f64, Device("cpu:1"), false});
  else
    all.push_back(testing::sample_args(op, f64));
  for (auto& s : extra_samples(op)) all.push_back(std::move(s));
  return all;
}

bool differentiable_input(const Tensor& t) {
  return t.defined() && is_floating(t.dtype()) && !t.is_wrapped_number();
}

// Calls `op` on `args` where each differentiable tensor is replaced by its leaf (a
// clone of it when the op writes it: leaves requiring grad cannot be written).
Outputs call(OpKind op, const std::vector<Value>& args,
             const std::map<const TensorImpl*, Tensor>& leaf) {
  std::vector<Value> call_args = args;
  int mutated = ops::op_info(op).schema.mutated_arg;
  for (size_t i = 0; i < call_args.size(); ++i) {
    auto swap = [&](Tensor& t) {
      if (auto it = leaf.find(t.impl()); it != leaf.end())
        t = static_cast<int>(i) == mutated ? clone(it->second) : it->second;
    };
    if (auto* t = std::get_if<Tensor>(&call_args[i])) {
      if (t->defined()) swap(*t);
    } else if (auto* list = std::get_if<TensorList>(&call_args[i])) {
      for (Tensor& x : *list) swap(x);
    }
  }
  return dispatch(op, call_args);
}

// sum_i <out_i, w_i> as a double, and as a tensor for backward.
Tensor weighted_loss(const Outputs& outs, const std::vector<Tensor>& weights) {
  Tensor loss;
  size_t k = 0;
  for (const Tensor& out : outs) {
    if (!is_floating(out.dtype())) continue;
    Tensor term = sum(mul(to(out, Device("cpu:0"), f64), weights[k++]));
    loss = loss.defined() ? add(loss, term) : term;
  }
  return loss;
}

// Element i of `t` in row-major order, by its storage offset.
double& element(const Tensor& t, int64_t i) {
  int64_t off = t.offset();
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    off += (i % t.size(d)) * t.stride(d);
    i /= t.size(d);
  }
  return static_cast<double*>(t.storage()->data)[off];
}

// The distinct differentiable tensors of a call, made leaves, and its outputs.
struct Leaves {
  std::map<const TensorImpl*, Tensor> of;  // argument -> its leaf
  TensorList list;
};

Leaves make_leaves(const std::vector<Value>& args) {
  Leaves leaves;
  auto add_leaf = [&](const Tensor& t) {
    if (!differentiable_input(t) || leaves.of.count(t.impl())) return;
    Tensor l = t;
    l.set_requires_grad(true);
    leaves.of[t.impl()] = l;
    leaves.list.push_back(l);
  };
  for (const Value& v : args) {
    if (auto* t = std::get_if<Tensor>(&v))
      add_leaf(*t);
    else if (auto* list = std::get_if<TensorList>(&v))
      for (const Tensor& x : *list) add_leaf(x);
  }
  return leaves;
}

// One f64 weight per floating output (seeded by the caller).
std::vector<Tensor> loss_weights(const Outputs& outs) {
  std::vector<Tensor> weights;
  for (const Tensor& out : outs)
    if (is_floating(out.dtype()))
      weights.push_back(randn(IntList(out.shape().begin(), out.shape().end()), {.dtype = f64}));
  return weights;
}

void gradcheck(OpKind op, const std::vector<Value>& args) {
  Leaves leaves = make_leaves(args);
  const std::map<const TensorImpl*, Tensor>& leaf = leaves.of;
  ASSERT_FALSE(leaves.list.empty()) << "no differentiable input in the sample";
  for (const Tensor& l : leaves.list) ASSERT_EQ(l.dtype(), f64) << "gradcheck needs f64 inputs";

  Outputs outs = call(op, args, leaf);
  std::vector<Tensor> weights = loss_weights(outs);
  ASSERT_FALSE(weights.empty());
  Tensor loss = weighted_loss(outs, weights);
  TensorList analytic = autograd::grad({loss}, leaves.list, {}, false, /*allow_unused=*/true);

  const double eps = 1e-6;
  autograd::NoGradGuard no_grad;
  auto loss_at = [&] { return item<double>(weighted_loss(call(op, args, leaf), weights)); };
  for (size_t k = 0; k < leaves.list.size(); ++k) {
    const Tensor& l = leaves.list[k];
    SCOPED_TRACE("input " + std::to_string(k) + " " + l.meta_str());
    std::vector<double> numeric(static_cast<size_t>(l.numel()));
    for (int64_t i = 0; i < l.numel(); ++i) {
      double& x = element(l, i);
      double keep = x;
      x = keep + eps;
      double up = loss_at();
      x = keep - eps;
      double down = loss_at();
      x = keep;
      numeric[static_cast<size_t>(i)] = (up - down) / (2 * eps);
    }
    // eigh reads one triangle; its gradient (PyTorch's) is the symmetric one, the
    // derivative along symmetric perturbations: the mirrored numeric gradients' mean.
    if (op == OpKind::linalg_eigh) {
      int64_t n = l.size(-1);
      std::vector<double> sym = numeric;
      for (int64_t b = 0; b < l.numel() / (n * n); ++b)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < n; ++j)
            sym[static_cast<size_t>(b * n * n + i * n + j)] =
                (numeric[static_cast<size_t>(b * n * n + i * n + j)] +
                 numeric[static_cast<size_t>(b * n * n + j * n + i)]) /
                2;
      numeric = sym;
    }
    Tensor got = analytic[k].defined() ? analytic[k] : zeros_like(l);
    EXPECT_EQ(got.shape(), l.shape());
    EXPECT_EQ(got.device(), l.device());
    EXPECT_TRUE(testing::all_close(got, numeric, 1e-4, 1e-5));
  }
}

TEST(AutogradTable, EveryOpIsDifferentiableOrMarked) {
  for (int k = 0; k < ops::kNumOps; ++k) {
    auto op = static_cast<OpKind>(k);
    EXPECT_NE(autograd::differentiability(op), Differentiable::missing)
        << ops::op_name(op) << " has no entry in kiln/autograd/derivatives.cpp";
  }
}

TEST(AutogradTable, NonDifferentiableOpsGiveOutputsWithoutGrad) {
  Tensor x = randn({3, 4}, {.requires_grad = true});
  EXPECT_FALSE(gt(x, 0.0).requires_grad());
  EXPECT_FALSE(argmax(x).requires_grad());
  EXPECT_FALSE(max(x, 1).second.requires_grad());  // indices
  EXPECT_TRUE(max(x, 1).first.requires_grad());
  EXPECT_FALSE(to(x, i64).requires_grad());
}

// f(op, args) for every sample of every differentiable op, each under its trace and with
// the op's seed.
template <typename F>
void for_each_differentiable_sample(F f) {
  for (int k = 0; k < ops::kNumOps; ++k) {
    auto op = static_cast<OpKind>(k);
    if (autograd::differentiability(op) != Differentiable::yes) continue;
    SCOPED_TRACE(std::string(ops::op_name(op)));
    manual_seed(static_cast<uint64_t>(k));
    auto all = samples(op);
    ASSERT_FALSE(all[0].empty()) << "no sample for this op: add one to tests/op_samples.h";
    for (size_t s = 0; s < all.size(); ++s) {
      SCOPED_TRACE("sample " + std::to_string(s));
      f(op, all[s]);
    }
  }
}

TEST(G2, GradcheckEveryDifferentiableOp) { for_each_differentiable_sample(gradcheck); }

// `args` with each distinct tensor (0-dim ones too) copied to `device` once, keeping its
// layout's strides where it is dense (aliasing arguments stay one tensor); device
// arguments replaced.
std::vector<Value> on_device(std::vector<Value> args, Device device) {
  autograd::NoGradGuard no_grad;  // fresh tensors, ready to be leaves
  std::map<const TensorImpl*, Tensor> moved;
  auto move = [&](Tensor& t) {
    if (!t.defined()) return;
    auto [it, fresh] = moved.try_emplace(t.impl());
    if (fresh) it->second = to(t, device);
    t = it->second;
  };
  for (Value& v : args) {
    if (auto* t = std::get_if<Tensor>(&v))
      move(*t);
    else if (auto* list = std::get_if<TensorList>(&v))
      for (Tensor& x : *list) move(x);
    else if (auto* d = std::get_if<Device>(&v))
      *d = device;
  }
  return args;
}

// (G2) on another backend: every differentiable op's backward on `gpu` gives the
// gradients it gives on cpu:0 (gradcheck above perturbs host memory, so it runs on the
// CPU; this carries its verdict to the other backend's kernels).
void expect_gradients_match_cpu(Device gpu) {
  for_each_differentiable_sample([&](OpKind op, const std::vector<Value>& args) {
    auto grads = [&](const std::vector<Value>& call_args) {
      Leaves leaves = make_leaves(call_args);
      Outputs outs = call(op, call_args, leaves.of);
      manual_seed(99);
      Tensor loss = weighted_loss(outs, loss_weights(outs));
      return autograd::grad({loss}, leaves.list, {}, false, /*allow_unused=*/true);
    };
    TensorList want = grads(args);
    TensorList got = grads(on_device(args, gpu));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      SCOPED_TRACE("input " + std::to_string(i));
      ASSERT_EQ(got[i].defined(), want[i].defined());
      if (!want[i].defined()) continue;
      EXPECT_EQ(got[i].device(), gpu);
      EXPECT_EQ(got[i].shape(), want[i].shape());
      EXPECT_TRUE(testing::all_close(got[i], to_vector<double>(want[i]), 1e-9, 1e-9));
    }
  });
}

TEST(G2, CudaGradientsMatchCpuOnEveryDifferentiableOp) {
  KILN_REQUIRE_CUDA(1);
  expect_gradients_match_cpu(Device("cuda:0"));
}

// The same harness on the stand-in CUDA backend: backward across the backend boundary
// (outputs copied back to cpu:0 for the loss) on every op, anywhere.
TEST(G2, MockCudaGradientsMatchCpuOnEveryDifferentiableOp) {
  testing::MockCuda mock;
  expect_gradients_match_cpu(Device("cuda:0"));
}

}  // namespace
}  // namespace kiln

#pragma once
// The workloads of bench/peers/models.py, op for op, with parameters created on a
// given device (fake or real, depending on the active mode).

#include <cmath>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::bench {

struct Linear {
  Tensor w, b;
  Linear(int64_t in, int64_t out, Device d)
      : w(empty({out, in}, {.device = d})), b(empty({out}, {.device = d})) {}
  Tensor operator()(const Tensor& x) const { return linear(x, w, b); }
  void params(TensorList& out) const { out.insert(out.end(), {w, b}); }
  void load(const TensorList& p, size_t& at) {
    w = p[at++];
    b = p[at++];
  }
};

/** MLP: 8 x (Linear 512->512 + ReLU). */
struct Mlp {
  std::vector<Linear> layers;
  explicit Mlp(Device d, int64_t dim = 512, int n = 8) {
    for (int i = 0; i < n; ++i) layers.emplace_back(dim, dim, d);
  }
  Tensor forward(Tensor x) const {
    for (const Linear& l : layers) x = relu(l(x));
    return x;
  }
  TensorList params() const {
    TensorList p;
    for (const Linear& l : layers) l.params(p);
    return p;
  }
  /** Takes the tensors of params() back, in that order. */
  void load(const TensorList& p, size_t at = 0) {
    for (Linear& l : layers) l.load(p, at);
  }
};

/** Pre-LN transformer block (BLOCK: C=256, 4 heads, hidden 1024). */
struct Block {
  int64_t C, H, hidden;
  Tensor ln1_w, ln1_b, ln2_w, ln2_b;
  Linear qkv, proj, fc1, fc2;
  Block(Device d, int64_t c = 256, int64_t h = 4, int64_t hid = 1024)
      : C(c),
        H(h),
        hidden(hid),
        ln1_w(empty({c}, {.device = d})),
        ln1_b(empty({c}, {.device = d})),
        ln2_w(empty({c}, {.device = d})),
        ln2_b(empty({c}, {.device = d})),
        qkv(c, 3 * c, d),
        proj(c, c, d),
        fc1(c, hid, d),
        fc2(hid, c, d) {}
  Tensor forward(Tensor x) const {
    int64_t B = x.size(0), T = x.size(1), D = C / H;
    Tensor h = layer_norm(x, {C}, ln1_w, ln1_b);
    Tensor t = permute(reshape(qkv(h), {B, T, 3, H, D}), {2, 0, 3, 1, 4});
    Tensor q = select(t, 0, 0), k = select(t, 0, 1), v = select(t, 0, 2);
    Tensor att = softmax(matmul(q, transpose(k, -2, -1)) * (1.0 / std::sqrt(double(D))), -1);
    Tensor y = reshape(transpose(matmul(att, v), 1, 2), {B, T, C});
    x = x + proj(y);
    return x + fc2(gelu(fc1(layer_norm(x, {C}, ln2_w, ln2_b))));
  }
  TensorList params() const {
    TensorList p = {ln1_w, ln1_b};
    qkv.params(p);
    proj.params(p);
    p.insert(p.end(), {ln2_w, ln2_b});
    fc1.params(p);
    fc2.params(p);
    return p;
  }
  void load(const TensorList& p, size_t at = 0) {
    ln1_w = p[at++];
    ln1_b = p[at++];
    qkv.load(p, at);
    proj.load(p, at);
    ln2_w = p[at++];
    ln2_b = p[at++];
    fc1.load(p, at);
    fc2.load(p, at);
  }
};

// A bench model whose parameters are graph inputs (as functional_call does for the
// PyTorch peers): inputs = {x, parameters...}.
template <typename Model>
struct Functional {
  Model model{Device("cpu:0")};
  TensorList inputs;
  explicit Functional(IntList input_shape) : inputs(model.params()) {
    inputs.insert(inputs.begin(), randn(input_shape));
  }
  TensorList operator()(const TensorList& in) const {
    Model traced = model;  // rebound to the traced tensors
    traced.load(in, 1);
    return {traced.forward(in[0])};
  }
};

// The peer's functionalization workload (a PyTorch functionalization peer (not in bench/peers)):
// in-place ops, mutation through a view of a view, and an input mutation.
inline TensorList mutation_program(const TensorList& in) {
  Tensor x = in[0];
  Tensor t = clone(x);
  for (int i = 0; i < 16; ++i) {
    add_(t, in[1]);
    mul_(t, 0.5);
    Tensor col = select(view(t, {-1, 8}), 1, 0);
    add_(col, 1.0);
    relu_(t);
  }
  add_(x, t);
  return {t};
}

}  // namespace kiln::bench

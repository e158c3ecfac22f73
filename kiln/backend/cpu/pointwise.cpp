// Fused pointwise regions (Note [Fused pointwise regions] in pointwise.h).
#include "kiln/backend/cpu/pointwise.h"

#include <array>

#include "kiln/backend/cpu/loops.h"
#include "kiln/backend/cpu/pointwise_fns.h"

namespace kiln::cpu {

using ops::OpKind;

bool unary_pointwise_op(OpKind op) {
  switch (op) {
    case OpKind::neg:
    case OpKind::abs:
    case OpKind::relu:
    case OpKind::exp:
    case OpKind::log:
    case OpKind::sqrt:
    case OpKind::rsqrt:
    case OpKind::sin:
    case OpKind::cos:
    case OpKind::erf:
    case OpKind::tanh:
    case OpKind::sigmoid:
    case OpKind::silu:
    case OpKind::reciprocal:
    case OpKind::gelu: return true;
    default: return false;
  }
}

bool fusible_pointwise_op(OpKind op) {
  switch (op) {
    case OpKind::add:
    case OpKind::sub:
    case OpKind::mul:
    case OpKind::div:
    case OpKind::maximum:
    case OpKind::minimum:
    case OpKind::gelu_backward:
    case OpKind::threshold_backward:
    case OpKind::clamp: return true;
    default: return unary_pointwise_op(op);
  }
}

namespace {

// One step over one block of n elements: out[j] = f(a[j], b[j]), an operand that is a
// scalar broadcast as the eager loop broadcasts it.
struct Block {
  const float* const* tensor;  // each tensor's first element of this block
  const float* scalar;
  float* const* step;  // where each step's result is: its store's memory, else L1
  int64_t n;

  const float* at(const FusedOperand& o) const {
    return o.kind == FusedOperand::Kind::tensor ? tensor[o.index] : step[o.index];
  }
  template <typename F>
  void unary(const FusedOperand& a, float* out, F f) const {
    const float* x = at(a);
    for (int64_t j = 0; j < n; ++j) out[j] = f(x[j]);
  }
  template <typename F>
  void binary(const FusedOperand& a, const FusedOperand& b, float* out, F f) const {
    using K = FusedOperand::Kind;
    if (a.kind == K::scalar && b.kind == K::scalar) {
      float x = scalar[a.index], y = scalar[b.index];
      for (int64_t j = 0; j < n; ++j) out[j] = f(x, y);
    } else if (b.kind == K::scalar) {
      const float* x = at(a);
      float y = scalar[b.index];
      for (int64_t j = 0; j < n; ++j) out[j] = f(x[j], y);
    } else if (a.kind == K::scalar) {
      float x = scalar[a.index];
      const float* y = at(b);
      for (int64_t j = 0; j < n; ++j) out[j] = f(x, y[j]);
    } else {
      const float* x = at(a);
      const float* y = at(b);
      for (int64_t j = 0; j < n; ++j) out[j] = f(x[j], y[j]);
    }
  }
};

// clamp as the eager kernel computes it (k_clamp): a compare and a select per bound, or
// clamp_value's rules when a bound is NaN.
void clamp_step(const FusedStep& s, const Block& blk, float* out) {
  bool has_lo = s.lo.has_value(), has_hi = s.hi.has_value();
  float lo = has_lo ? scalar_as<float>(*s.lo) : 0.0f, hi = has_hi ? scalar_as<float>(*s.hi) : 0.0f;
  if (lo != lo || hi != hi)
    blk.unary(s.a, out, [=](float v) { return backend::clamp_value(v, has_lo, lo, has_hi, hi); });
  else if (has_lo && has_hi)
    blk.unary(s.a, out, [=](float v) {
      float r = v < lo ? lo : v;
      return r > hi ? hi : r;
    });
  else if (has_lo)
    blk.unary(s.a, out, [=](float v) { return v < lo ? lo : v; });
  else if (has_hi)
    blk.unary(s.a, out, [=](float v) { return v > hi ? hi : v; });
  else
    blk.unary(s.a, out, [](float v) { return v; });
}

void run_step(const FusedStep& s, const Block& blk, float* out) {
  if (s.op == OpKind::clamp) {
    clamp_step(s, blk, out);
    return;
  }
  if (unary_pointwise_op(s.op)) {  // of a full operand: the step's output has its shape
    fns::with_float_unary<float>(s.op, s.tanh, [&](auto f) { blk.unary(s.a, out, f); });
    return;
  }
  switch (s.op) {
    case OpKind::add:
    case OpKind::sub:
      fns::with_add(s.op == OpKind::sub, scalar_as<float>(s.param),
                    [&](auto f) { blk.binary(s.a, s.b, out, f); });
      return;
    case OpKind::mul:
      blk.binary(s.a, s.b, out, [](float x, float y) { return backend::wrap_mul(x, y); });
      return;
    case OpKind::div: blk.binary(s.a, s.b, out, [](float x, float y) { return x / y; }); return;
    case OpKind::maximum: blk.binary(s.a, s.b, out, fns::maximum<float>); return;
    case OpKind::minimum: blk.binary(s.a, s.b, out, fns::minimum<float>); return;
    case OpKind::gelu_backward:
      fns::with_gelu_backward(s.tanh, [&](auto f) { blk.binary(s.a, s.b, out, f); });
      return;
    case OpKind::threshold_backward: {
      float th = static_cast<float>(s.param.to_double());
      blk.binary(s.a, s.b, out, [th](float g, float v) { return v <= th ? 0.0f : g; });
      return;
    }
    default: fail(ErrorKind::internal, "[fused_pointwise] {} is not a pointwise step", s.op);
  }
}

}  // namespace

bool run_fused_pointwise(std::span<const FusedStep> steps, std::span<const Tensor> tensors,
                         std::span<const Tensor> scalars, int64_t numel) {
  KILN_CHECK(steps.size() <= kMaxFusedSteps, internal, "[fused_pointwise] {} steps (at most {})",
             steps.size(), kMaxFusedSteps);
  // Elements [offset, offset + n) of one storage overlap another tensor's other than
  // element for element.
  auto overlap = [](const Tensor& a, const Tensor& b) {
    return a.storage() == b.storage() && a.offset() != b.offset() &&
           a.offset() < b.offset() + b.numel() && b.offset() < a.offset() + a.numel();
  };
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.dtype() != DType::f32 || t.numel() != numel || !t.is_contiguous()) return false;
    for (size_t k = 0; k < i; ++k)
      if (overlap(tensors[k], t)) return false;
  }
  std::vector<float> scalar(scalars.size());
  for (size_t i = 0; i < scalars.size(); ++i) {
    const Tensor& t = scalars[i];
    if (t.numel() != 1) return false;
    for (const Tensor& u : tensors)  // a stored tensor's element read once up front
      if (u.storage() == t.storage() && t.offset() >= u.offset() &&
          t.offset() < u.offset() + u.numel())
        return false;
    switch (t.dtype()) {
      case DType::f32: scalar[i] = *t.data<float>(); break;
      case DType::f64: scalar[i] = convert<float>(*t.data<double>()); break;
      default: return false;
    }
  }
  std::vector<float*> base(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) base[i] = tensors[i].data<float>();
  int64_t blocks = (numel + kFusedBlock - 1) / kFusedBlock;
  parallel_for(
      blocks, kFusedBlock * static_cast<int64_t>(steps.size()), [&](int64_t lo, int64_t hi) {
        alignas(64) float regs[kMaxFusedSteps][kFusedBlock];
        std::vector<const float*> at(base.size());
        std::array<float*, kMaxFusedSteps> out;
        with_best_isa([&] {
          for (int64_t b = lo; b < hi; ++b) {
            int64_t first = b * kFusedBlock;
            for (size_t i = 0; i < base.size(); ++i) at[i] = base[i] + first;
            // A stored step writes its memory directly, and later steps read it there: what
            // they would read unfused, also after an in-place step wrote the same memory.
            for (size_t k = 0; k < steps.size(); ++k)
              out[k] =
                  steps[k].store >= 0 ? base[static_cast<size_t>(steps[k].store)] + first : regs[k];
            Block blk{at.data(), scalar.data(), out.data(), std::min(kFusedBlock, numel - first)};
            for (size_t k = 0; k < steps.size(); ++k) run_step(steps[k], blk, out[k]);
          }
        });
      });
  return true;
}

}  // namespace kiln::cpu

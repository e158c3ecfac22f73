#pragma once
// The CPU kernel of fused pointwise regions: a chain of elementwise ops run as one pass
// over memory (the executor's fusion, kiln/passes/fuse.h).
//
// Note [Fused pointwise regions]
// kiln has no compiler at run time, so a region is not compiled: it is a short list of
// steps -- an elementwise op, where its operands come from, whether its result is
// stored -- interpreted over blocks of kBlock elements. Each step runs its op's loop
// over one block, reading tensors, broadcast scalars or earlier steps' blocks, and
// writing its own block, which stays in L1; only values some other node reads are
// stored. A chain of k ops over n elements thus reads and writes memory once instead of
// k times, and the intermediate tensors are never allocated.
//
// The element functions are the eager kernels' own (pointwise_fns.h), each in a loop of
// its own at the same ISA level, so a fused region's results are bit for bit those of
// its ops run one by one -- fusion never changes a number (tested at every level).
//
// In-place steps (add_ into an optimizer state) store at once, in program order, block
// by block, so a later step that reads the same tensor sees the write as it would
// unfused. That is only true when every tensor is a dense f32 run of the region's
// numel elements and tensors that share memory start at the same element; the kernel
// checks this per run and declines otherwise (the executor then runs the ops one by
// one).

#include <optional>
#include <span>

#include "kiln/core/tensor.h"
#include "kiln/ops/op_table.h"

namespace kiln::cpu {

/** Where a step's operand comes from: a tensor of the region, a scalar (a 0-d tensor
 * read once per run), or the result of an earlier step. */
struct FusedOperand {
  enum class Kind : uint8_t { none, tensor, scalar, step };
  Kind kind = Kind::none;
  int index = 0;
};

/** One elementwise op of a region, in f32. */
struct FusedStep {
  ops::OpKind op = ops::OpKind::add;  // the functional op (add for add_)
  FusedOperand a, b;                  // b only for binary ops
  Scalar param = 1;                   // add/sub: alpha; threshold_backward: threshold
  std::optional<Scalar> lo, hi;       // clamp's bounds
  bool tanh = false;                  // gelu, gelu_backward: approximate="tanh"
  int store = -1;                     // the tensor this step's result is written to, or -1
};

/** Elements per block: a region keeps one block per step, so blocks are small enough
 * for kMaxFusedSteps of them to stay in L1. */
inline constexpr int64_t kFusedBlock = 256;
inline constexpr size_t kMaxFusedSteps = 32;

/** Whether a functional op can be a step (f32 elementwise math, activations, their
 * backward formulas). */
bool fusible_pointwise_op(ops::OpKind op);
/** Whether `op` is unary as a step (its operand b is unused). */
bool unary_pointwise_op(ops::OpKind op);

/** Runs `steps` over `numel` elements on the running kernel's threads. `tensors` are
 * the region's loads and stores, `scalars` its 0-d operands (any float dtype: converted
 * to f32 as the eager kernels convert them). Returns false, having written nothing,
 * when a tensor is not a dense f32 run of `numel` elements or tensors overlap at
 * different offsets (Note [Fused pointwise regions]). */
bool run_fused_pointwise(std::span<const FusedStep> steps, std::span<const Tensor> tensors,
                         std::span<const Tensor> scalars, int64_t numel);

}  // namespace kiln::cpu

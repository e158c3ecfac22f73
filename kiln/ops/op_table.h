#pragma once
// THE op table. Every op kiln knows is one line of KILN_OPS: its name, how its
// output device is chosen, its meta function (shape/strides/dtype inference shared by
// eager, fake and tracing), and its schema with alias annotations. The enum, names,
// parsed schemas, meta table and the per-backend kernel tables all derive from it.
//
// In-place ops (name ending in '_' with a Tensor(a!) self) whose functional form is
// in the table take `nullptr` as meta: dispatch derives them from the functional op
// (compute into a temporary, then copy_ into self), so no shape logic is repeated.

#include <array>
#include <atomic>
#include <string_view>

#include "kiln/ops/schema.h"

namespace kiln::autograd {
class GradCtx;
}  // namespace kiln::autograd

namespace kiln::ops {

/** How an op's device is chosen and checked (D2). */
enum class DeviceRule : uint8_t {
  same,     // all tensor args on one device; 0-dim CPU tensors join any device
  factory,  // from the `device` argument
  to_copy,  // the `device` argument; the source may be anywhere
  copy,     // self's device; the source may be anywhere (copy_)
  index,    // the first tensor's device; later (index) tensors may also be on the CPU
};

struct MetaOut;
struct OpCall;
using MetaFn = void (*)(const OpCall&, MetaOut&);

// clang-format off
#define KILN_OPS(X) \
  /* factories */ \
  X(empty,  factory, meta_factory, "empty(int[] size, *, ScalarType dtype, Device device) -> Tensor") \
  X(full,   factory, meta_factory, "full(int[] size, Scalar fill_value, *, ScalarType dtype, Device device) -> Tensor") \
  X(arange, factory, meta_arange,  "arange(Scalar start, Scalar end, Scalar step=1, *, ScalarType dtype, Device device) -> Tensor") \
  X(rand,   factory, meta_factory, "rand(int[] size, *, ScalarType dtype, Device device) -> Tensor") \
  X(randn,  factory, meta_factory, "randn(int[] size, *, ScalarType dtype, Device device) -> Tensor") \
  /* unary */ \
  X(neg,     same, meta_unary,       "neg(Tensor self) -> Tensor") \
  X(abs,     same, meta_unary,       "abs(Tensor self) -> Tensor") \
  X(relu,    same, meta_unary,       "relu(Tensor self) -> Tensor") \
  X(exp,     same, meta_unary_float, "exp(Tensor self) -> Tensor") \
  X(log,     same, meta_unary_float, "log(Tensor self) -> Tensor") \
  X(sqrt,    same, meta_unary_float, "sqrt(Tensor self) -> Tensor") \
  X(rsqrt,   same, meta_unary_float, "rsqrt(Tensor self) -> Tensor") \
  X(sin,     same, meta_unary_float, "sin(Tensor self) -> Tensor") \
  X(cos,     same, meta_unary_float, "cos(Tensor self) -> Tensor") \
  X(tanh,    same, meta_unary_float, "tanh(Tensor self) -> Tensor") \
  X(sigmoid, same, meta_unary_float, "sigmoid(Tensor self) -> Tensor") \
  X(silu,    same, meta_unary_float, "silu(Tensor self) -> Tensor") \
  X(gelu,    same, meta_unary_float, "gelu(Tensor self, *, str approximate='none') -> Tensor") \
  X(erf,     same, meta_unary_float, "erf(Tensor self) -> Tensor") \
  X(log1p,   same, meta_unary_float, "log1p(Tensor self) -> Tensor") \
  X(expm1,   same, meta_unary_float, "expm1(Tensor self) -> Tensor") \
  X(log2,    same, meta_unary_float, "log2(Tensor self) -> Tensor") \
  X(tan,     same, meta_unary_float, "tan(Tensor self) -> Tensor") \
  X(atan,    same, meta_unary_float, "atan(Tensor self) -> Tensor") \
  X(asin,    same, meta_unary_float, "asin(Tensor self) -> Tensor") \
  X(acos,    same, meta_unary_float, "acos(Tensor self) -> Tensor") \
  X(sinh,    same, meta_unary_float, "sinh(Tensor self) -> Tensor") \
  X(cosh,    same, meta_unary_float, "cosh(Tensor self) -> Tensor") \
  X(reciprocal, same, meta_unary_float, "reciprocal(Tensor self) -> Tensor") \
  X(exp2,    same, meta_unary_float, "exp2(Tensor self) -> Tensor") \
  X(log10,   same, meta_unary_float, "log10(Tensor self) -> Tensor") \
  X(erfc,    same, meta_unary_float, "erfc(Tensor self) -> Tensor") \
  X(asinh,   same, meta_unary_float, "asinh(Tensor self) -> Tensor") \
  X(acosh,   same, meta_unary_float, "acosh(Tensor self) -> Tensor") \
  X(atanh,   same, meta_unary_float, "atanh(Tensor self) -> Tensor") \
  /* special functions (kiln/backend/special_math.h); polygamma's tensor comes first */ \
  X(erfinv,  same, meta_unary_float, "erfinv(Tensor self) -> Tensor") \
  X(lgamma,  same, meta_unary_float, "lgamma(Tensor self) -> Tensor") \
  X(digamma, same, meta_unary_float, "digamma(Tensor self) -> Tensor") \
  X(polygamma, same, meta_unary_float, "polygamma(Tensor self, int n) -> Tensor") \
  /* the other torch.special functions, one op per arity, the function by name
     (kiln/backend/special_functions.h lists them) */ \
  X(special_unary, same, meta_unary_float, "special_unary(Tensor self, str fn) -> Tensor") \
  X(special_binary, same, meta_binary_float, "special_binary(Tensor self, Tensor other, str fn) -> Tensor") \
  X(floor,   same, meta_unary,       "floor(Tensor self) -> Tensor") \
  X(ceil,    same, meta_unary,       "ceil(Tensor self) -> Tensor") \
  X(round,   same, meta_unary,       "round(Tensor self) -> Tensor") \
  X(trunc,   same, meta_unary,       "trunc(Tensor self) -> Tensor") \
  X(sign,    same, meta_unary,       "sign(Tensor self) -> Tensor") \
  X(clamp,   same, meta_clamp,       "clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor") \
  X(logical_not, same, meta_unary_bool, "logical_not(Tensor self) -> Tensor") \
  X(bitwise_not, same, meta_bitwise,    "bitwise_not(Tensor self) -> Tensor") \
  /* binary, broadcasting with type promotion */ \
  X(add,     same, meta_binary,       "add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor") \
  X(sub,     same, meta_binary,       "sub(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor") \
  X(mul,     same, meta_binary,       "mul(Tensor self, Tensor other) -> Tensor") \
  X(div,     same, meta_binary_float, "div(Tensor self, Tensor other) -> Tensor") \
  X(pow,     same, meta_binary,       "pow(Tensor self, Tensor exponent) -> Tensor") \
  X(maximum, same, meta_binary,       "maximum(Tensor self, Tensor other) -> Tensor") \
  X(minimum, same, meta_binary,       "minimum(Tensor self, Tensor other) -> Tensor") \
  /* the division family: fmod keeps self's sign (C's fmod), remainder other's (Python's %) */ \
  X(remainder,    same, meta_binary,       "remainder(Tensor self, Tensor other) -> Tensor") \
  X(fmod,         same, meta_binary,       "fmod(Tensor self, Tensor other) -> Tensor") \
  X(floor_divide, same, meta_binary,       "floor_divide(Tensor self, Tensor other) -> Tensor") \
  X(atan2,        same, meta_binary_float, "atan2(Tensor self, Tensor other) -> Tensor") \
  /* integers and bools only */ \
  X(bitwise_and,  same, meta_bitwise,      "bitwise_and(Tensor self, Tensor other) -> Tensor") \
  X(bitwise_or,   same, meta_bitwise,      "bitwise_or(Tensor self, Tensor other) -> Tensor") \
  X(bitwise_xor,  same, meta_bitwise,      "bitwise_xor(Tensor self, Tensor other) -> Tensor") \
  X(eq,      same, meta_compare,      "eq(Tensor self, Tensor other) -> Tensor") \
  X(ne,      same, meta_compare,      "ne(Tensor self, Tensor other) -> Tensor") \
  X(lt,      same, meta_compare,      "lt(Tensor self, Tensor other) -> Tensor") \
  X(le,      same, meta_compare,      "le(Tensor self, Tensor other) -> Tensor") \
  X(gt,      same, meta_compare,      "gt(Tensor self, Tensor other) -> Tensor") \
  X(ge,      same, meta_compare,      "ge(Tensor self, Tensor other) -> Tensor") \
  X(where,   same, meta_where,        "where(Tensor condition, Tensor self, Tensor other) -> Tensor") \
  /* grad_output * gelu'(self): gelu's gradient in one pass */ \
  X(gelu_backward, same, meta_binary_float, "gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor") \
  X(masked_fill, same, meta_masked_fill, "masked_fill(Tensor self, Tensor mask, Scalar value) -> Tensor") \
  /* grad_output where self > threshold, else 0: relu's gradient in one pass */ \
  X(threshold_backward, same, meta_binary, "threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor") \
  /* in-place: derived from the functional op of the same name without '_' */ \
  X(add_,    same, nullptr, "add_(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)") \
  X(sub_,    same, nullptr, "sub_(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)") \
  X(mul_,    same, nullptr, "mul_(Tensor(a!) self, Tensor other) -> Tensor(a!)") \
  X(div_,    same, nullptr, "div_(Tensor(a!) self, Tensor other) -> Tensor(a!)") \
  X(relu_,   same, nullptr, "relu_(Tensor(a!) self) -> Tensor(a!)") \
  X(masked_fill_, same, nullptr, "masked_fill_(Tensor(a!) self, Tensor mask, Scalar value) -> Tensor(a!)") \
  /* in-place primitives */ \
  X(copy_,   copy, meta_copy_, "copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)") \
  X(fill_,   same, meta_fill_, "fill_(Tensor(a!) self, Scalar value) -> Tensor(a!)") \
  /* reductions */ \
  X(sum,     same, meta_sum,     "sum(Tensor self, int[] dim=[], bool keepdim=False, *, ScalarType? dtype=None) -> Tensor") \
  X(mean,    same, meta_mean,    "mean(Tensor self, int[] dim=[], bool keepdim=False, *, ScalarType? dtype=None) -> Tensor") \
  X(amax,    same, meta_amax,    "amax(Tensor self, int[] dim=[], bool keepdim=False) -> Tensor") \
  X(amin,    same, meta_amax,    "amin(Tensor self, int[] dim=[], bool keepdim=False) -> Tensor") \
  X(max,     same, meta_max_dim, "max(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)") \
  X(min,     same, meta_max_dim, "min(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)") \
  X(argmax,  same, meta_argmax,  "argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor") \
  X(prod,    same, meta_sum,     "prod(Tensor self, int[] dim=[], bool keepdim=False, *, ScalarType? dtype=None) -> Tensor") \
  X(var,     same, meta_var,     "var(Tensor self, int[] dim=[], *, int correction=1, bool keepdim=False) -> Tensor") \
  X(softmax,     same, meta_softmax, "softmax(Tensor self, int dim) -> Tensor") \
  X(log_softmax, same, meta_softmax, "log_softmax(Tensor self, int dim) -> Tensor") \
  /* their gradients from the output in one pass per row (PyTorch's _softmax_backward_data and _log_softmax_backward_data) */ \
  X(softmax_backward,     same, meta_softmax_backward, "softmax_backward(Tensor grad_output, Tensor output, int dim) -> Tensor") \
  X(log_softmax_backward, same, meta_softmax_backward, "log_softmax_backward(Tensor grad_output, Tensor output, int dim) -> Tensor") \
  /* scans along one dim */ \
  X(cumsum,  same, meta_cumulative, "cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor") \
  X(cumprod, same, meta_cumulative, "cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor") \
  X(logcumsumexp, same, meta_logcumsumexp, "logcumsumexp(Tensor self, int dim) -> Tensor") \
  /* running extremes and where they were (NaN wins; ties take the later position) */ \
  X(cummax,  same, meta_cumextreme, "cummax(Tensor self, int dim) -> (Tensor values, Tensor indices)") \
  X(cummin,  same, meta_cumextreme, "cummin(Tensor self, int dim) -> (Tensor values, Tensor indices)") \
  /* orders along one dim: NaN above every number; ties keep their order */ \
  X(sort,    same, meta_sort, "sort(Tensor self, int dim=-1, bool descending=False, bool stable=False) -> (Tensor values, Tensor indices)") \
  X(topk,    same, meta_topk, "topk(Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)") \
  /* cumprod's gradient in one pass per row, exact where self has zeros */ \
  X(cumprod_backward, same, meta_cumprod_backward, "cumprod_backward(Tensor grad_output, Tensor self, int dim) -> Tensor") \
  /* linear algebra */ \
  X(mm,      same, meta_mm,     "mm(Tensor self, Tensor mat2) -> Tensor") \
  X(bmm,     same, meta_bmm,    "bmm(Tensor self, Tensor mat2) -> Tensor") \
  X(matmul,  same, meta_matmul, "matmul(Tensor self, Tensor other) -> Tensor") \
  X(addmm,   same, meta_addmm,  "addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor") \
  X(linear,  same, meta_linear, "linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor") \
  /* linear's three gradients in one node, as PyTorch's linear_backward with every output asked for */ \
  X(linear_backward, same, meta_linear_backward, "linear_backward(Tensor grad_output, Tensor input, Tensor weight) -> (Tensor grad_input, Tensor grad_weight, Tensor grad_bias)") \
  /* convolution of a batched input [N, C, *S] (1 to 3 spatial dims, the weight's rank says
     which) with one value per spatial dim in stride, padding and dilation; f32 and f64 (the
     functional API computes half types in f32) */ \
  X(convolution, same, meta_convolution, "convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, int groups) -> Tensor") \
  /* decompositions through LAPACK (CUDA devices: the host's LAPACK, Note [Decompositions on the host]) */ \
  X(linalg_eigh, same, meta_linalg_eigh, "linalg_eigh(Tensor self, str UPLO='L') -> (Tensor eigenvalues, Tensor eigenvectors)") \
  X(linalg_svd,  same, meta_linalg_svd,  "linalg_svd(Tensor A, bool full_matrices=True) -> (Tensor U, Tensor S, Tensor Vh)") \
  /* views: the output shares self's storage */ \
  X(view,       same, meta_view,       "view(Tensor(a) self, int[] size) -> Tensor(a)") \
  X(permute,    same, meta_permute,    "permute(Tensor(a) self, int[] dims) -> Tensor(a)") \
  X(transpose,  same, meta_transpose,  "transpose(Tensor(a) self, int dim0, int dim1) -> Tensor(a)") \
  X(unsqueeze,  same, meta_unsqueeze,  "unsqueeze(Tensor(a) self, int dim) -> Tensor(a)") \
  X(squeeze,    same, meta_squeeze,    "squeeze(Tensor(a) self, int[] dim=[]) -> Tensor(a)") \
  X(expand,     same, meta_expand,     "expand(Tensor(a) self, int[] size) -> Tensor(a)") \
  X(slice,      same, meta_slice,      "slice(Tensor(a) self, int dim=0, int? start=None, int? end=None, int step=1) -> Tensor(a)") \
  X(select,     same, meta_select,     "select(Tensor(a) self, int dim, int index) -> Tensor(a)") \
  X(as_strided, same, meta_as_strided, "as_strided(Tensor(a) self, int[] size, int[] stride, int? storage_offset=None) -> Tensor(a)") \
  /* the same view of the same data as a new tensor (what autograd saves of an output) */ \
  X(alias,      same, meta_alias,      "alias(Tensor(a) self) -> Tensor(a)") \
  /* functional inverse of as_strided: self with the strided region replaced by src */ \
  X(as_strided_scatter, same, meta_as_strided_scatter, "as_strided_scatter(Tensor self, Tensor src, int[] size, int[] stride, int? storage_offset=None) -> Tensor") \
  /* data movement */ \
  X(cat,          same,  meta_cat,          "cat(Tensor[] tensors, int dim=0) -> Tensor") \
  X(index_select, index, meta_index_select, "index_select(Tensor self, int dim, Tensor index) -> Tensor") \
  X(gather,       same,  meta_gather,       "gather(Tensor self, int dim, Tensor index) -> Tensor") \
  X(embedding,    index, meta_embedding,    "embedding(Tensor weight, Tensor indices) -> Tensor") \
  /* self with src added at the positions index names along dim (gather's gradient) */ \
  X(scatter_add,  same,  meta_scatter_add,  "scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor") \
  X(clone,        same,  meta_clone,        "clone(Tensor self) -> Tensor") \
  /* normalization */ \
  X(layer_norm, same, meta_layer_norm, "layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) -> Tensor") \
  X(rms_norm,   same, meta_layer_norm, "rms_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor") \
  /* layer_norm's gradients in one pass, the statistics recomputed from input (weight and bias gradients summed over the rows) */ \
  X(layer_norm_backward, same, meta_layer_norm_backward, "layer_norm_backward(Tensor grad_output, Tensor input, int[] normalized_shape, Tensor? weight=None, float eps=1e-05) -> (Tensor grad_input, Tensor grad_weight, Tensor grad_bias)") \
  /* collectives (C2): functional, run on the process group bound to `group` (a mesh axis) */ \
  X(all_reduce,             same, meta_all_reduce,     "all_reduce(Tensor self, str reduce_op, str group) -> Tensor") \
  X(all_gather_into_tensor, same, meta_all_gather,     "all_gather_into_tensor(Tensor self, int group_size, str group) -> Tensor") \
  X(reduce_scatter_tensor,  same, meta_reduce_scatter, "reduce_scatter_tensor(Tensor self, str reduce_op, int group_size, str group) -> Tensor") \
  X(all_to_all_single,      same, meta_all_to_all,     "all_to_all_single(Tensor self, int group_size, str group) -> Tensor") \
  X(wait_tensor,            same, meta_alias,          "wait_tensor(Tensor(a) self) -> Tensor(a)") \
  /* uneven: input_split_sizes[j] rows to rank j, output_split_sizes[i] rows from rank i (PyTorch's all_to_all_single with split sizes) */ \
  X(all_to_all_single_v,    same, meta_all_to_all_v,   "all_to_all_single_v(Tensor self, int[] output_split_sizes, int[] input_split_sizes, str group) -> Tensor") \
  /* every rank gets rank src's self; and all_reduce in place (PyTorch's _c10d_functional names) */ \
  X(broadcast,              same, meta_broadcast,      "broadcast(Tensor self, int src, str group) -> Tensor") \
  X(all_reduce_,            same, nullptr,             "all_reduce_(Tensor(a!) self, str reduce_op, str group) -> Tensor(a!)") \
  /* (Y3) data-dependent: i64 [n, self.dim()], the coordinates of the n non-zero elements (n an unbacked size under a symbolic trace) */ \
  X(nonzero, same, meta_nonzero, "nonzero(Tensor self) -> Tensor") \
  /* (Y3) a one-element integer tensor's value v as a size: self viewed as [v] with stride 0 (no data), so a program binds v's unbacked symbol from its shape */ \
  X(value_as_size, same, meta_value_as_size, "value_as_size(Tensor(a) self) -> Tensor(a)") \
  /* conversion */ \
  X(_to_copy, to_copy, meta_to_copy, "_to_copy(Tensor self, *, ScalarType dtype, Device device, bool non_blocking=False) -> Tensor")
// clang-format on

/** Every op, in table order. */
enum class OpKind : uint16_t {
#define KILN_OP_ENUM(name, rule, meta, schema) name,
  KILN_OPS(KILN_OP_ENUM)
#undef KILN_OP_ENUM
};

/** (Y3) Ops whose output size is their input's data (an unbacked symbol in a trace): a
 * program keeps each such node (it binds its symbol when it runs), never merging two. */
inline bool is_data_dependent(OpKind op) {
  return op == OpKind::nonzero || op == OpKind::value_as_size;
}

inline constexpr int kNumOps = 0
#define KILN_OP_COUNT(name, rule, meta, schema) +1
    KILN_OPS(KILN_OP_COUNT)
#undef KILN_OP_COUNT
    ;

/** Whether each op is in-place, known at compile time (the table's in-place ops are the
 * names ending in '_'; a test checks this agrees with their schemas). */
inline constexpr bool kOpIsInplace[] = {
#define KILN_OP_INPLACE(name, rule, meta, schema) \
  (sizeof(#name) > 2 && #name[sizeof(#name) - 2] == '_'),
    KILN_OPS(KILN_OP_INPLACE)
#undef KILN_OP_INPLACE
};

/** Whether `op` is one of the table's (the others are registered extension ops, see
 * kiln/ops/extension.h; their OpKind values follow the table's). */
inline bool is_builtin(OpKind op) { return static_cast<int>(op) < kNumOps; }

/** What the table knows about one op. */
struct OpInfo {
  // Every member initialized: an extension op's entry is built field by field, and one
  // defined by its schema alone (define_schema) leaves `meta` null until register_fake.
  OpKind kind{};
  std::string_view name;
  DeviceRule device_rule{};
  MetaFn meta = nullptr;  // null for in-place ops derived from `functional`
  Schema schema;
  OpKind functional{};  // add_ -> add; itself for every other op
  bool is_inplace() const { return schema.mutated_arg >= 0; }
  bool is_view() const { return schema.view_of_arg >= 0; }
};

namespace detail {
// The built-in table, published once it is built (null before: op_info_slow builds it).
extern std::atomic<const OpInfo*> g_builtin_ops;
const OpInfo& op_info_slow(OpKind op);
}  // namespace detail
/** The table entry of an op (built-in or registered). */
inline const OpInfo& op_info(OpKind op) {
  const OpInfo* builtins = detail::g_builtin_ops.load(std::memory_order_acquire);
  if (is_builtin(op) && builtins) [[likely]]
    return builtins[static_cast<size_t>(op)];
  return detail::op_info_slow(op);
}
inline std::string_view op_name(OpKind op) { return op_info(op).name; }
/** Looks an op up by name (built-in or registered); throws an unsupported Error for
 * unknown names. */
OpKind op_from_name(std::string_view name);
/** Whether `op` writes its `Tensor(a!)` argument; a table lookup for built-ins. */
inline bool op_is_inplace(OpKind op) {
  return is_builtin(op) ? kOpIsInplace[static_cast<size_t>(op)] : op_info(op).is_inplace();
}

/** One op call as dispatch sees it: which op, its arguments, and the device it
 * runs on (chosen by the op's DeviceRule). */
struct OpCall {
  OpKind op;
  Args args;
  Device device;
};

/** Metadata of one output, computed by a meta function. */
struct TensorMeta {
  enum class Alias : uint8_t { none, view, self };
  Dims shape;
  Dims strides;       // for views; fresh outputs are contiguous
  SymInt offset = 0;  // for views (symbolic at a symbolic position, Y2)
  DType dtype = DType::f32;
  Alias alias = Alias::none;  // view: a view of the aliased arg; self: the arg itself
};
struct MetaOut {
  InlineVec<TensorMeta, kMaxOutputs> outs;
  /** Appends a fresh contiguous output. */
  void fresh(Dims shape, DType dtype) {
    // Built in its slot: the strides, written entry by entry, are not moved again
    // (vector loads of just-written entries stall: no store forwarding).
    TensorMeta& m = outs.append_slot();
    m.shape = std::move(shape);
    contiguous_strides_into(m.shape, m.strides);
    m.offset = SymInt();
    m.dtype = dtype;
    m.alias = TensorMeta::Alias::none;
  }
};

/** A backend's implementation of one op: reads `call.args`, writes `outs` (already
 * allocated from the meta function, on `call.device`). */
using Kernel = void (*)(const OpCall& call, std::span<Tensor> outs);
/** One backend's kernels, indexed by OpKind; a null entry means "unsupported". */
using KernelTable = std::array<Kernel, kNumOps>;

}  // namespace kiln::ops

template <>
struct fmt::formatter<kiln::ops::OpKind> : fmt::formatter<std::string_view> {
  auto format(kiln::ops::OpKind op, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(kiln::ops::op_name(op), ctx);
  }
};

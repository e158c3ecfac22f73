#pragma once
// Meta functions: the single source of shape, stride and dtype truth (one per op
// family). Eager kernels allocate from their answer, fake mode returns it, tracing
// records it. Each cites the docs/rules.md rule or PyTorch behaviour it implements.

#include <array>

#include "kiln/ops/op_table.h"

namespace kiln::ops {

/** The broadcast of two shapes (numpy rules); throws a shape Error naming `op`. */
Dims broadcast_shapes(const Dims& a, const Dims& b, std::string_view op);
/** The same when a shape is symbolic (Y2: each decision a guard where it must be one). */
Dims broadcast_symbolic(const Dims& a, const Dims& b, std::string_view op);
/** The promoted dtype of tensor operands, honouring 0-dim and wrapped-number ranks. */
DType result_type(std::span<const Tensor> tensors);
DType result_type(const Tensor& a, const Tensor& b);
/** Whether a value of dtype `from` may be written into a tensor of dtype `to`. */
bool can_cast(DType from, DType to);
/** Validates a view's reshape target (one -1 allowed); returns the concrete shape. */
Dims infer_size(const IntList& size, int64_t numel, std::string_view op);
/** The same for a count that may be symbolic (Y2: a divisibility guard where needed). */
Dims infer_size(const IntList& size, const SymInt& numel, std::string_view op);
Dims infer_symbolic_size(const IntList& size, const SymInt& numel, std::string_view op);
/** The same for target sizes that may themselves be symbolic (`{x.sym_size(0), -1}`). */
Dims infer_size(const Dims& size, const SymInt& numel, std::string_view op);
/** Strides for viewing (shape, strides) as `new_shape` without a copy, if possible. */
bool compute_view_strides(const Dims& shape, const Dims& strides, const Dims& new_shape, Dims& out);
bool symbolic_view_strides(const Dims& shape, const Dims& strides, const Dims& new_shape,
                           Dims& out);
/** The broadcast of matmul's batch dims and its output shape. */
Dims matmul_shape(const Dims& a, const Dims& b);
/** A convolution's sizes as its meta function reads and checks them (the kernels read the
 * same): 1 to 3 spatial dims, one value per spatial dim for stride, padding and dilation.
 * The batch is the input's example value (meta_convolution keeps a symbolic batch). */
struct ConvGeometry {
  int rank = 0;  // spatial dims
  int64_t batch = 0, in_channels = 0, out_channels = 0, groups = 1;
  std::array<int64_t, 3> in{}, kernel{}, out{}, stride{}, padding{}, dilation{};
  int64_t positions() const;  // output positions per image and channel
  int64_t taps() const;       // kernel taps per channel
};
ConvGeometry conv_geometry(const OpCall& c);
/** The index of gather/scatter/take/put/index_copy/index_fill must be i64, as PyTorch's
 * (index_select, index_add and embedding also take i32). */
void check_long_index(std::string_view op, const Tensor& index);

// The meta functions the op table names (one per op family).
void meta_factory(const OpCall&, MetaOut&);
void meta_arange(const OpCall&, MetaOut&);
void meta_unary(const OpCall&, MetaOut&);
void meta_unary_float(const OpCall&, MetaOut&);
void meta_unary_bool(const OpCall&, MetaOut&);
void meta_clamp(const OpCall&, MetaOut&);
void meta_binary(const OpCall&, MetaOut&);
void meta_binary_float(const OpCall&, MetaOut&);
void meta_compare(const OpCall&, MetaOut&);
void meta_where(const OpCall&, MetaOut&);
void meta_masked_fill(const OpCall&, MetaOut&);
void meta_copy_(const OpCall&, MetaOut&);
void meta_fill_(const OpCall&, MetaOut&);
void meta_sum(const OpCall&, MetaOut&);
void meta_mean(const OpCall&, MetaOut&);
void meta_amax(const OpCall&, MetaOut&);
void meta_max_dim(const OpCall&, MetaOut&);
void meta_argmax(const OpCall&, MetaOut&);
void meta_var(const OpCall&, MetaOut&);
void meta_softmax(const OpCall&, MetaOut&);
void meta_cumulative(const OpCall&, MetaOut&);
void meta_logcumsumexp(const OpCall&, MetaOut&);
void meta_cumextreme(const OpCall&, MetaOut&);
void meta_sort(const OpCall&, MetaOut&);
void meta_topk(const OpCall&, MetaOut&);
void meta_bitwise(const OpCall&, MetaOut&);
void meta_cumprod_backward(const OpCall&, MetaOut&);
void meta_softmax_backward(const OpCall&, MetaOut&);
void meta_mm(const OpCall&, MetaOut&);
void meta_bmm(const OpCall&, MetaOut&);
void meta_matmul(const OpCall&, MetaOut&);
void meta_addmm(const OpCall&, MetaOut&);
void meta_linear(const OpCall&, MetaOut&);
void meta_linear_backward(const OpCall&, MetaOut&);
void meta_convolution(const OpCall&, MetaOut&);
void meta_nonzero(const OpCall&, MetaOut&);
void meta_value_as_size(const OpCall&, MetaOut&);
void meta_linalg_eigh(const OpCall&, MetaOut&);
void meta_linalg_svd(const OpCall&, MetaOut&);
void meta_view(const OpCall&, MetaOut&);
void meta_permute(const OpCall&, MetaOut&);
void meta_transpose(const OpCall&, MetaOut&);
void meta_alias(const OpCall&, MetaOut&);
void meta_unsqueeze(const OpCall&, MetaOut&);
void meta_squeeze(const OpCall&, MetaOut&);
void meta_expand(const OpCall&, MetaOut&);
void meta_slice(const OpCall&, MetaOut&);
void meta_select(const OpCall&, MetaOut&);
void meta_as_strided(const OpCall&, MetaOut&);
void meta_as_strided_scatter(const OpCall&, MetaOut&);
void meta_cat(const OpCall&, MetaOut&);
void meta_index_select(const OpCall&, MetaOut&);
void meta_gather(const OpCall&, MetaOut&);
void meta_embedding(const OpCall&, MetaOut&);
void meta_scatter_add(const OpCall&, MetaOut&);
void meta_all_reduce(const OpCall&, MetaOut&);
void meta_all_gather(const OpCall&, MetaOut&);
void meta_reduce_scatter(const OpCall&, MetaOut&);
void meta_all_to_all(const OpCall&, MetaOut&);
void meta_broadcast(const OpCall&, MetaOut&);
void meta_all_to_all_v(const OpCall&, MetaOut&);
void meta_clone(const OpCall&, MetaOut&);
void meta_layer_norm(const OpCall&, MetaOut&);
void meta_layer_norm_backward(const OpCall&, MetaOut&);
void meta_to_copy(const OpCall&, MetaOut&);

/** Reduction helper shared by meta functions and kernels: which dims are reduced
 * (empty list = all) and the output shape. */
struct ReduceDims {
  std::vector<bool> reduced;  // per input dim
  Dims out_shape;
};
ReduceDims reduce_dims(const Dims& shape, const IntList& dims, bool keepdim, std::string_view op);

}  // namespace kiln::ops

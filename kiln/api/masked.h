#pragma once
// torch.masked's reductions and normalizations on strided tensors: each takes a `mask`
// (bool, or converted to bool; broadcast to the input's shape, never of more dims) whose
// false elements are left out. The masked-out elements are replaced by the operation's
// identity (0 for sums and norms, 1 for products, -inf / +inf, or the integer type's
// extremes, for max-like / min-like ones, NaN for median) and the ordinary op runs: the
// same definition as PyTorch's, so an all-masked row gives what the op gives on its
// identity (a -inf amax, a NaN mean or softmax row). An undefined mask keeps everything.
// Written with table ops, so they differentiate (0 at masked-out elements), trace and
// export as those. `dims` empty means every dim, as in kiln::sum. Where `dtype` is
// absent the result keeps the input's dtype, as PyTorch's masked ops do (so argmax of a
// float input gives float indices), except sum and prod, which sum small integers in
// i64, and var/std, which give f32 for integers.

#include <optional>

#include "kiln/api/functional.h"

namespace kiln::masked {

Tensor sum(const Tensor& input, const IntList& dims = {}, bool keepdim = false,
           std::optional<DType> dtype = std::nullopt, const Tensor& mask = {});
Tensor prod(const Tensor& input, const IntList& dims = {}, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt, const Tensor& mask = {});
Tensor amax(const Tensor& input, const IntList& dims = {}, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt, const Tensor& mask = {});
Tensor amin(const Tensor& input, const IntList& dims = {}, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt, const Tensor& mask = {});
/** The index of the largest (smallest) element left in, along `dim` or of the flattened
 * input. */
Tensor argmax(const Tensor& input, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
              std::optional<DType> dtype = std::nullopt, const Tensor& mask = {});
Tensor argmin(const Tensor& input, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
              std::optional<DType> dtype = std::nullopt, const Tensor& mask = {});
/** The sum of the elements left in over their count (NaN where none is). */
Tensor mean(const Tensor& input, const IntList& dims = {}, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt, const Tensor& mask = {});
/** The lower median of the elements left in along `dim` (NaN where none is; an integer
 * input with such a row is an Error). */
Tensor median(const Tensor& input, int64_t dim = -1, bool keepdim = false,
              std::optional<DType> dtype = std::nullopt, const Tensor& mask = {});
Tensor logsumexp(const Tensor& input, const IntList& dims = {}, bool keepdim = false,
                 std::optional<DType> dtype = std::nullopt, const Tensor& mask = {});
/** logaddexp with each operand's masked-out elements as -inf. */
Tensor logaddexp(const Tensor& input, const Tensor& other,
                 std::optional<DType> dtype = std::nullopt, const Tensor& input_mask = {},
                 const Tensor& other_mask = {});
/** The vector norm of order `ord` of the elements left in. */
Tensor norm(const Tensor& input, double ord = 2.0, const IntList& dims = {}, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt, const Tensor& mask = {});
/** Variance (standard deviation) of the elements left in; unbiased divides by count - 1,
 * clamped at 0 (so one element gives inf or NaN). */
Tensor var(const Tensor& input, const IntList& dims = {}, bool unbiased = false,
           bool keepdim = false, std::optional<DType> dtype = std::nullopt,
           const Tensor& mask = {});
Tensor std(const Tensor& input, const IntList& dims = {}, bool unbiased = false,
           bool keepdim = false, std::optional<DType> dtype = std::nullopt,
           const Tensor& mask = {});
/** Running sum (product) along dim with masked-out elements as 0 (1). */
Tensor cumsum(const Tensor& input, int64_t dim, std::optional<DType> dtype = std::nullopt,
              const Tensor& mask = {});
Tensor cumprod(const Tensor& input, int64_t dim, std::optional<DType> dtype = std::nullopt,
               const Tensor& mask = {});
/** softmax / log_softmax / softmin along dim over the elements left in (masked-out ones
 * get probability 0). */
Tensor softmax(const Tensor& input, int64_t dim, std::optional<DType> dtype = std::nullopt,
               const Tensor& mask = {});
Tensor log_softmax(const Tensor& input, int64_t dim, std::optional<DType> dtype = std::nullopt,
                   const Tensor& mask = {});
Tensor softmin(const Tensor& input, int64_t dim, std::optional<DType> dtype = std::nullopt,
               const Tensor& mask = {});
/** input (masked-out elements 0) over max(masked norm(input, ord, {dim}, keepdim), eps). */
Tensor normalize(const Tensor& input, double ord, int64_t dim, double eps = 1e-12,
                 std::optional<DType> dtype = std::nullopt, const Tensor& mask = {});

}  // namespace kiln::masked

// torch.masked on strided tensors: masked-out elements become the op's identity, then
// the ordinary op runs (see masked.h).
#include "kiln/api/masked.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::masked {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Identity { zero, one, lowest, highest, nan };

/** The mask as bool, broadcast to the input's shape (PyTorch's canonical input mask). */
Tensor input_mask(const Tensor& input, const Tensor& mask, const char* op) {
  KILN_CHECK(
      mask.dim() <= input.dim(), shape,
      "[masked.{}] the mask must broadcast to the input: mask {} has more dims than input {}", op,
      mask.meta_str(), input.meta_str());
  Tensor m = mask.dtype() == DType::b8 ? mask : to(mask, DType::b8);
  return broadcast_to(m, IntList(input.shape().begin(), input.shape().end()));
}

/** The identity as a scalar of input's dtype: -inf / +inf for floats, the type's extremes
 * for integers (bool has none: an Error, as PyTorch has no identity for it either). */
Scalar identity_value(Identity id, DType dtype, const char* op) {
  switch (id) {
    case Identity::zero: return int64_t{0};
    case Identity::one: return int64_t{1};
    case Identity::nan: return std::numeric_limits<double>::quiet_NaN();
    case Identity::lowest:
    case Identity::highest: break;
  }
  bool low = id == Identity::lowest;
  if (is_floating(dtype)) return low ? -kInf : kInf;
  switch (dtype) {
    case DType::i64:
      return low ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
    case DType::i32:
      return low ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max();
    case DType::i16:
      return low ? std::numeric_limits<int16_t>::min() : std::numeric_limits<int16_t>::max();
    case DType::i8:
      return low ? std::numeric_limits<int8_t>::min() : std::numeric_limits<int8_t>::max();
    case DType::u8: return low ? int64_t{0} : int64_t{255};
    default: break;
  }
  fail(ErrorKind::dtype, "[masked.{}] no identity for {} input", op, dtype);
}

/** input with its masked-out elements replaced by the identity. */
Tensor combine(const Tensor& input, const Tensor& mask, Identity id, const char* op) {
  if (!mask.defined()) return input;
  return where(input_mask(input, mask, op), input, identity_value(id, input.dtype(), op));
}

/** Sums and products of small integers and bools accumulate in i64 unless asked. */
DType accumulate_type(const Tensor& input, std::optional<DType> dtype) {
  if (dtype) return *dtype;
  return is_integral(input.dtype(), true) && input.dtype() != DType::i64 ? DType::i64
                                                                         : input.dtype();
}

/** dims (empty: all) wrapped and sorted; a repeated dim is an Error. */
IntList canonical_dims(const IntList& dims, int64_t rank, const char* op) {
  IntList out;
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, std::max<int64_t>(rank, 1), op);
    KILN_CHECK(std::find(out.begin(), out.end(), w) == out.end(), value,
               "[masked.{}] dim={} appears multiple times in the list of dims", op, d);
    out.push_back(w);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/** The elements left in, counted over dims (i64), as the masked sum of ones; `mask` is
 * canonical (input_mask's) or undefined. */
Tensor count(const Tensor& input, const IntList& dims, bool keepdim, const Tensor& mask) {
  Tensor ones_ = ones(IntList(input.shape().begin(), input.shape().end()),
                      TensorOptions{.dtype = DType::i64, .device = input.device()});
  return sum(ones_, dims, keepdim, DType::i64, mask);
}

Tensor var_std(const Tensor& input, const IntList& dims, bool unbiased, bool keepdim,
               std::optional<DType> dtype, const Tensor& mask, bool take_sqrt) {
  DType out_type = dtype.value_or(is_floating(input.dtype()) ? input.dtype() : DType::f32);
  DType compute_type = is_floating(out_type) ? out_type : DType::f32;
  Tensor in_mask = mask.defined() ? input_mask(input, mask, take_sqrt ? "std" : "var") : mask;
  Tensor n = count(input, dims, true, in_mask);
  Tensor sample_mean = div(sum(input, dims, true, out_type, in_mask), n);
  Tensor x = input - sample_mean;
  Tensor total = sum(x * x, dims, keepdim, compute_type, in_mask);
  if (!keepdim) n = reshape(n, IntList(total.shape().begin(), total.shape().end()));
  if (unbiased) n = clamp_min(n - int64_t{1}, int64_t{0});
  Tensor out = to(div(total, n), out_type);
  return take_sqrt ? kiln::sqrt(out) : out;
}

}  // namespace

Tensor sum(const Tensor& input, const IntList& dims, bool keepdim, std::optional<DType> dtype,
           const Tensor& mask) {
  IntList d = canonical_dims(dims, input.dim(), "sum");
  Tensor x = combine(input, mask, Identity::zero, "sum");
  if (d.empty()) return to(x, accumulate_type(input, dtype));  // a 0-dim input: nothing to reduce
  return kiln::sum(x, d, keepdim, accumulate_type(input, dtype));
}

Tensor prod(const Tensor& input, const IntList& dims, bool keepdim, std::optional<DType> dtype,
            const Tensor& mask) {
  IntList d = canonical_dims(dims, input.dim(), "prod");
  Tensor out = to(combine(input, mask, Identity::one, "prod"), accumulate_type(input, dtype));
  for (auto it = d.rbegin(); it != d.rend(); ++it) out = kiln::prod(out, *it, keepdim);
  return out;
}

Tensor amax(const Tensor& input, const IntList& dims, bool keepdim, std::optional<DType> dtype,
            const Tensor& mask) {
  Tensor x = combine(input, mask, Identity::lowest, "amax");
  return to(kiln::amax(x, canonical_dims(dims, input.dim(), "amax"), keepdim),
            dtype.value_or(input.dtype()));
}

Tensor amin(const Tensor& input, const IntList& dims, bool keepdim, std::optional<DType> dtype,
            const Tensor& mask) {
  Tensor x = combine(input, mask, Identity::highest, "amin");
  return to(kiln::amin(x, canonical_dims(dims, input.dim(), "amin"), keepdim),
            dtype.value_or(input.dtype()));
}

Tensor argmax(const Tensor& input, std::optional<int64_t> dim, bool keepdim,
              std::optional<DType> dtype, const Tensor& mask) {
  Tensor x = combine(input, mask, Identity::lowest, "argmax");
  return to(kiln::argmax(x, dim, keepdim), dtype.value_or(input.dtype()));
}

Tensor argmin(const Tensor& input, std::optional<int64_t> dim, bool keepdim,
              std::optional<DType> dtype, const Tensor& mask) {
  Tensor x = combine(input, mask, Identity::highest, "argmin");
  return to(kiln::argmin(x, dim, keepdim), dtype.value_or(input.dtype()));
}

Tensor mean(const Tensor& input, const IntList& dims, bool keepdim, std::optional<DType> dtype,
            const Tensor& mask) {
  Tensor in_mask = mask.defined() ? input_mask(input, mask, "mean") : mask;
  return div(sum(input, dims, keepdim, dtype.value_or(input.dtype()), in_mask),
             count(input, dims, keepdim, in_mask));
}

Tensor median(const Tensor& input, int64_t dim, bool keepdim, std::optional<DType> dtype,
              const Tensor& mask) {
  int64_t d = wrap_dim(dim, std::max<int64_t>(input.dim(), 1), "masked.median");
  bool floating = is_floating(input.dtype());
  Tensor x = combine(floating ? input : to(input, DType::f32), mask, Identity::nan, "median");
  Tensor out = nanmedian(x, d, keepdim).first;
  if (floating) return out;
  if (!out.is_fake())
    KILN_CHECK(!item<bool>(any(isnan(out))), value,
               "[masked.median] expects no fully masked-out rows if dtype is not floating point");
  return to(out, dtype.value_or(input.dtype()));
}

Tensor logsumexp(const Tensor& input, const IntList& dims, bool keepdim, std::optional<DType> dtype,
                 const Tensor& mask) {
  Tensor x = combine(input, mask, Identity::lowest, "logsumexp");
  return to(kiln::logsumexp(x, canonical_dims(dims, input.dim(), "logsumexp"), keepdim),
            dtype.value_or(input.dtype()));
}

Tensor logaddexp(const Tensor& input, const Tensor& other, std::optional<DType> dtype,
                 const Tensor& input_mask, const Tensor& other_mask) {
  Tensor a = combine(input, input_mask, Identity::lowest, "logaddexp");
  Tensor b = combine(other, other_mask, Identity::lowest, "logaddexp");
  return to(kiln::logaddexp(a, b), dtype.value_or(input.dtype()));
}

Tensor norm(const Tensor& input, double ord, const IntList& dims, bool keepdim,
            std::optional<DType> dtype, const Tensor& mask) {
  Tensor x = combine(input, mask, ord == -kInf ? Identity::highest : Identity::zero, "norm");
  return vector_norm(to(x, dtype.value_or(input.dtype())), ord,
                     canonical_dims(dims, input.dim(), "norm"), keepdim);
}

Tensor var(const Tensor& input, const IntList& dims, bool unbiased, bool keepdim,
           std::optional<DType> dtype, const Tensor& mask) {
  return var_std(input, dims, unbiased, keepdim, dtype, mask, false);
}

Tensor std(const Tensor& input, const IntList& dims, bool unbiased, bool keepdim,
           std::optional<DType> dtype, const Tensor& mask) {
  return var_std(input, dims, unbiased, keepdim, dtype, mask, true);
}

Tensor cumsum(const Tensor& input, int64_t dim, std::optional<DType> dtype, const Tensor& mask) {
  int64_t d = wrap_dim(dim, std::max<int64_t>(input.dim(), 1), "masked.cumsum");
  return kiln::cumsum(combine(input, mask, Identity::zero, "cumsum"), d,
                      dtype.value_or(input.dtype()));
}

Tensor cumprod(const Tensor& input, int64_t dim, std::optional<DType> dtype, const Tensor& mask) {
  int64_t d = wrap_dim(dim, std::max<int64_t>(input.dim(), 1), "masked.cumprod");
  return kiln::cumprod(combine(input, mask, Identity::one, "cumprod"), d,
                       dtype.value_or(input.dtype()));
}

Tensor softmax(const Tensor& input, int64_t dim, std::optional<DType> dtype, const Tensor& mask) {
  Tensor x = combine(input, mask, Identity::lowest, "softmax");
  return kiln::softmax(to(x, dtype.value_or(input.dtype())), dim);
}

Tensor log_softmax(const Tensor& input, int64_t dim, std::optional<DType> dtype,
                   const Tensor& mask) {
  Tensor x = combine(input, mask, Identity::lowest, "log_softmax");
  return kiln::log_softmax(to(x, dtype.value_or(input.dtype())), dim);
}

Tensor softmin(const Tensor& input, int64_t dim, std::optional<DType> dtype, const Tensor& mask) {
  Tensor x = combine(input, mask, Identity::highest, "softmin");
  return kiln::softmax(neg(to(x, dtype.value_or(input.dtype()))), dim);
}

Tensor normalize(const Tensor& input, double ord, int64_t dim, double eps,
                 std::optional<DType> dtype, const Tensor& mask) {
  Tensor x = combine(input, mask, Identity::zero, "normalize");
  Tensor n = norm(input, ord, {dim}, true, dtype, mask);
  return div(x, clamp_min(n, eps));
}

}  // namespace kiln::masked

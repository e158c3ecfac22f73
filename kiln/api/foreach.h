#pragma once
// The _foreach_* ops of PyTorch (torch._foreach_add and kin), which optimizers use to
// update every parameter in one call: the same op on each tensor of a list, with a
// second list, one scalar, or one scalar per tensor. As PyTorch, the lists must be
// non-empty and of one length; the in-place forms (trailing `_`) write each tensor of
// `self` and follow the in-place op's rules (dtype, autograd, version counting). Each is
// the per-tensor op called once per element, so eager, fake tensors, tracing and
// autograd treat them exactly as those ops (a traced graph shows the per-tensor ops).

#include <vector>

#include "kiln/core/scalar.h"
#include "kiln/core/tensor.h"
#include "kiln/ops/value.h"

namespace kiln {

TensorList _foreach_add(const TensorList& self, const TensorList& other, Scalar alpha = 1);
TensorList _foreach_add(const TensorList& self, Scalar other);
TensorList _foreach_add(const TensorList& self, const std::vector<Scalar>& others);
void _foreach_add_(const TensorList& self, const TensorList& other, Scalar alpha = 1);
void _foreach_add_(const TensorList& self, Scalar other);
void _foreach_add_(const TensorList& self, const std::vector<Scalar>& others);
TensorList _foreach_sub(const TensorList& self, const TensorList& other, Scalar alpha = 1);
TensorList _foreach_sub(const TensorList& self, Scalar other);
void _foreach_sub_(const TensorList& self, const TensorList& other, Scalar alpha = 1);
void _foreach_sub_(const TensorList& self, Scalar other);
TensorList _foreach_mul(const TensorList& self, const TensorList& other);
TensorList _foreach_mul(const TensorList& self, Scalar other);
TensorList _foreach_mul(const TensorList& self, const std::vector<Scalar>& others);
TensorList _foreach_mul(const TensorList& self, const Tensor& other);  // one tensor for all
void _foreach_mul_(const TensorList& self, const TensorList& other);
void _foreach_mul_(const TensorList& self, Scalar other);
void _foreach_mul_(const TensorList& self, const std::vector<Scalar>& others);
void _foreach_mul_(const TensorList& self, const Tensor& other);
TensorList _foreach_div(const TensorList& self, const TensorList& other);
TensorList _foreach_div(const TensorList& self, Scalar other);
TensorList _foreach_div(const TensorList& self, const std::vector<Scalar>& others);
void _foreach_div_(const TensorList& self, const TensorList& other);
void _foreach_div_(const TensorList& self, Scalar other);
void _foreach_div_(const TensorList& self, const std::vector<Scalar>& others);
TensorList _foreach_maximum(const TensorList& self, const TensorList& other);
void _foreach_maximum_(const TensorList& self, const TensorList& other);
TensorList _foreach_minimum(const TensorList& self, const TensorList& other);
void _foreach_minimum_(const TensorList& self, const TensorList& other);

/** self + value * t1 * t2 and self + value * t1 / t2, per tensor (value: one, or one per
 * tensor). */
TensorList _foreach_addcmul(const TensorList& self, const TensorList& t1, const TensorList& t2,
                            Scalar value = 1);
void _foreach_addcmul_(const TensorList& self, const TensorList& t1, const TensorList& t2,
                       Scalar value = 1);
void _foreach_addcmul_(const TensorList& self, const TensorList& t1, const TensorList& t2,
                       const std::vector<Scalar>& values);
TensorList _foreach_addcdiv(const TensorList& self, const TensorList& t1, const TensorList& t2,
                            Scalar value = 1);
void _foreach_addcdiv_(const TensorList& self, const TensorList& t1, const TensorList& t2,
                       Scalar value = 1);
void _foreach_addcdiv_(const TensorList& self, const TensorList& t1, const TensorList& t2,
                       const std::vector<Scalar>& values);
/** self + weight * (end - self), per tensor. */
TensorList _foreach_lerp(const TensorList& self, const TensorList& end, Scalar weight);
void _foreach_lerp_(const TensorList& self, const TensorList& end, Scalar weight);

TensorList _foreach_neg(const TensorList& self);
void _foreach_neg_(const TensorList& self);
TensorList _foreach_abs(const TensorList& self);
void _foreach_abs_(const TensorList& self);
TensorList _foreach_sqrt(const TensorList& self);
void _foreach_sqrt_(const TensorList& self);
TensorList _foreach_exp(const TensorList& self);
void _foreach_exp_(const TensorList& self);
TensorList _foreach_reciprocal(const TensorList& self);
void _foreach_reciprocal_(const TensorList& self);
void _foreach_zero_(const TensorList& self);
void _foreach_copy_(const TensorList& self, const TensorList& src);
/** The ord-norm of each tensor, each 0-dim (torch._foreach_norm). */
TensorList _foreach_norm(const TensorList& self, double ord = 2.0);

}  // namespace kiln

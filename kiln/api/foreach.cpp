// The _foreach_* family (foreach.h): each the per-tensor op, once per list element.
#include "kiln/api/foreach.h"

#include "kiln/api/functional.h"
#include "kiln/core/error.h"

namespace kiln {

namespace {

void check_lists(const char* op, const TensorList& self,
                 std::initializer_list<const TensorList*> others) {
  KILN_CHECK(!self.empty(), value, "[{}] Tensor list must have at least one tensor.", op);
  for (const TensorList* o : others)
    KILN_CHECK(o->size() == self.size(), value,
               "[{}] Tensor lists must have the same number of tensors, got {} and {}", op,
               self.size(), o->size());
}

void check_scalars(const char* op, const TensorList& self, const std::vector<Scalar>& scalars) {
  check_lists(op, self, {});
  KILN_CHECK(
      scalars.size() == self.size(), value,
      "[{}] Tensor list must have same number of elements as scalar list ({} tensors, {} scalars).",
      op, self.size(), scalars.size());
}

// out[i] = f(i) for each tensor of `self` (the lists `others` checked against it first),
// under the op's name for errors.
template <typename F>
TensorList each(const char* op, const TensorList& self,
                std::initializer_list<const TensorList*> others, F&& f) {
  check_lists(op, self, others);
  OpNameScope scope(op);
  TensorList out;
  out.reserve(self.size());
  for (size_t i = 0; i < self.size(); ++i) out.push_back(f(i));
  return out;
}

// self[i] written by g(self_i, i), the lists checked as by each().
template <typename G>
void each_(const char* op, const TensorList& self, std::initializer_list<const TensorList*> others,
           G&& g) {
  check_lists(op, self, others);
  OpNameScope scope(op);
  for (size_t i = 0; i < self.size(); ++i) {
    Tensor t = self[i];
    g(t, i);
  }
}

}  // namespace

// ---- binary: list, scalar, scalar list ----------------------------------------------

TensorList _foreach_add(const TensorList& self, const TensorList& other, Scalar alpha) {
  return each("_foreach_add", self, {&other},
              [&](size_t i) { return add(self[i], other[i], alpha); });
}
TensorList _foreach_add(const TensorList& self, Scalar other) {
  return each("_foreach_add", self, {}, [&](size_t i) { return add(self[i], other); });
}
TensorList _foreach_add(const TensorList& self, const std::vector<Scalar>& others) {
  check_scalars("_foreach_add", self, others);
  return each("_foreach_add", self, {}, [&](size_t i) { return add(self[i], others[i]); });
}
void _foreach_add_(const TensorList& self, const TensorList& other, Scalar alpha) {
  each_("_foreach_add_", self, {&other}, [&](Tensor& t, size_t i) { add_(t, other[i], alpha); });
}
void _foreach_add_(const TensorList& self, Scalar other) {
  each_("_foreach_add_", self, {}, [&](Tensor& t, size_t) { add_(t, other); });
}
void _foreach_add_(const TensorList& self, const std::vector<Scalar>& others) {
  check_scalars("_foreach_add_", self, others);
  each_("_foreach_add_", self, {}, [&](Tensor& t, size_t i) { add_(t, others[i]); });
}
TensorList _foreach_sub(const TensorList& self, const TensorList& other, Scalar alpha) {
  return each("_foreach_sub", self, {&other},
              [&](size_t i) { return sub(self[i], other[i], alpha); });
}
TensorList _foreach_sub(const TensorList& self, Scalar other) {
  return each("_foreach_sub", self, {}, [&](size_t i) { return sub(self[i], other); });
}
void _foreach_sub_(const TensorList& self, const TensorList& other, Scalar alpha) {
  each_("_foreach_sub_", self, {&other}, [&](Tensor& t, size_t i) { sub_(t, other[i], alpha); });
}
void _foreach_sub_(const TensorList& self, Scalar other) {
  each_("_foreach_sub_", self, {}, [&](Tensor& t, size_t) { copy_(t, sub(t, other)); });
}
TensorList _foreach_mul(const TensorList& self, const TensorList& other) {
  return each("_foreach_mul", self, {&other}, [&](size_t i) { return mul(self[i], other[i]); });
}
TensorList _foreach_mul(const TensorList& self, Scalar other) {
  return each("_foreach_mul", self, {}, [&](size_t i) { return mul(self[i], other); });
}
TensorList _foreach_mul(const TensorList& self, const std::vector<Scalar>& others) {
  check_scalars("_foreach_mul", self, others);
  return each("_foreach_mul", self, {}, [&](size_t i) { return mul(self[i], others[i]); });
}
TensorList _foreach_mul(const TensorList& self, const Tensor& other) {
  return each("_foreach_mul", self, {}, [&](size_t i) { return mul(self[i], other); });
}
void _foreach_mul_(const TensorList& self, const TensorList& other) {
  each_("_foreach_mul_", self, {&other}, [&](Tensor& t, size_t i) { mul_(t, other[i]); });
}
void _foreach_mul_(const TensorList& self, Scalar other) {
  each_("_foreach_mul_", self, {}, [&](Tensor& t, size_t) { mul_(t, other); });
}
void _foreach_mul_(const TensorList& self, const std::vector<Scalar>& others) {
  check_scalars("_foreach_mul_", self, others);
  each_("_foreach_mul_", self, {}, [&](Tensor& t, size_t i) { mul_(t, others[i]); });
}
void _foreach_mul_(const TensorList& self, const Tensor& other) {
  each_("_foreach_mul_", self, {}, [&](Tensor& t, size_t) { mul_(t, other); });
}
TensorList _foreach_div(const TensorList& self, const TensorList& other) {
  return each("_foreach_div", self, {&other}, [&](size_t i) { return div(self[i], other[i]); });
}
TensorList _foreach_div(const TensorList& self, Scalar other) {
  return each("_foreach_div", self, {}, [&](size_t i) { return div(self[i], other); });
}
TensorList _foreach_div(const TensorList& self, const std::vector<Scalar>& others) {
  check_scalars("_foreach_div", self, others);
  return each("_foreach_div", self, {}, [&](size_t i) { return div(self[i], others[i]); });
}
void _foreach_div_(const TensorList& self, const TensorList& other) {
  each_("_foreach_div_", self, {&other}, [&](Tensor& t, size_t i) { div_(t, other[i]); });
}
void _foreach_div_(const TensorList& self, Scalar other) {
  each_("_foreach_div_", self, {}, [&](Tensor& t, size_t) { div_(t, other); });
}
void _foreach_div_(const TensorList& self, const std::vector<Scalar>& others) {
  check_scalars("_foreach_div_", self, others);
  each_("_foreach_div_", self, {}, [&](Tensor& t, size_t i) { div_(t, others[i]); });
}
TensorList _foreach_maximum(const TensorList& self, const TensorList& other) {
  return each("_foreach_maximum", self, {&other},
              [&](size_t i) { return maximum(self[i], other[i]); });
}
void _foreach_maximum_(const TensorList& self, const TensorList& other) {
  each_("_foreach_maximum_", self, {&other},
        [&](Tensor& t, size_t i) { copy_(t, maximum(t, other[i])); });
}
TensorList _foreach_minimum(const TensorList& self, const TensorList& other) {
  return each("_foreach_minimum", self, {&other},
              [&](size_t i) { return minimum(self[i], other[i]); });
}
void _foreach_minimum_(const TensorList& self, const TensorList& other) {
  each_("_foreach_minimum_", self, {&other},
        [&](Tensor& t, size_t i) { copy_(t, minimum(t, other[i])); });
}

// ---- ternary ------------------------------------------------------------------------

TensorList _foreach_addcmul(const TensorList& self, const TensorList& t1, const TensorList& t2,
                            Scalar value) {
  return each("_foreach_addcmul", self, {&t1, &t2},
              [&](size_t i) { return addcmul(self[i], t1[i], t2[i], value); });
}
void _foreach_addcmul_(const TensorList& self, const TensorList& t1, const TensorList& t2,
                       Scalar value) {
  _foreach_addcmul_(self, t1, t2, std::vector<Scalar>(self.size(), value));
}
void _foreach_addcmul_(const TensorList& self, const TensorList& t1, const TensorList& t2,
                       const std::vector<Scalar>& values) {
  check_scalars("_foreach_addcmul_", self, values);
  each_("_foreach_addcmul_", self, {&t1, &t2},
        [&](Tensor& t, size_t i) { copy_(t, addcmul(t, t1[i], t2[i], values[i])); });
}
TensorList _foreach_addcdiv(const TensorList& self, const TensorList& t1, const TensorList& t2,
                            Scalar value) {
  return each("_foreach_addcdiv", self, {&t1, &t2},
              [&](size_t i) { return addcdiv(self[i], t1[i], t2[i], value); });
}
void _foreach_addcdiv_(const TensorList& self, const TensorList& t1, const TensorList& t2,
                       Scalar value) {
  _foreach_addcdiv_(self, t1, t2, std::vector<Scalar>(self.size(), value));
}
void _foreach_addcdiv_(const TensorList& self, const TensorList& t1, const TensorList& t2,
                       const std::vector<Scalar>& values) {
  check_scalars("_foreach_addcdiv_", self, values);
  each_("_foreach_addcdiv_", self, {&t1, &t2},
        [&](Tensor& t, size_t i) { copy_(t, addcdiv(t, t1[i], t2[i], values[i])); });
}
TensorList _foreach_lerp(const TensorList& self, const TensorList& end, Scalar weight) {
  return each("_foreach_lerp", self, {&end},
              [&](size_t i) { return lerp(self[i], end[i], weight); });
}
void _foreach_lerp_(const TensorList& self, const TensorList& end, Scalar weight) {
  each_("_foreach_lerp_", self, {&end},
        [&](Tensor& t, size_t i) { copy_(t, lerp(t, end[i], weight)); });
}

// ---- unary --------------------------------------------------------------------------

#define KILN_FOREACH_UNARY(name)                                                           \
  TensorList _foreach_##name(const TensorList& self) {                                     \
    return each("_foreach_" #name, self, {}, [&](size_t i) { return name(self[i]); });     \
  }                                                                                        \
  void _foreach_##name##_(const TensorList& self) {                                        \
    each_("_foreach_" #name "_", self, {}, [&](Tensor& t, size_t) { copy_(t, name(t)); }); \
  }
KILN_FOREACH_UNARY(neg)
KILN_FOREACH_UNARY(abs)
KILN_FOREACH_UNARY(sqrt)
KILN_FOREACH_UNARY(exp)
KILN_FOREACH_UNARY(reciprocal)
#undef KILN_FOREACH_UNARY

void _foreach_zero_(const TensorList& self) {
  each_("_foreach_zero_", self, {}, [&](Tensor& t, size_t) { zero_(t); });
}
void _foreach_copy_(const TensorList& self, const TensorList& src) {
  each_("_foreach_copy_", self, {&src}, [&](Tensor& t, size_t i) { copy_(t, src[i]); });
}
TensorList _foreach_norm(const TensorList& self, double ord) {
  return each("_foreach_norm", self, {}, [&](size_t i) { return vector_norm(self[i], ord); });
}

}  // namespace kiln

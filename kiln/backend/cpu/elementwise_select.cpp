// Comparison and selection kernels (compare, where, masked_fill).
#include "kiln/backend/cpu/elementwise.h"
#include "kiln/backend/cpu/vmath.h"
#include "kiln/backend/special_functions.h"
#include "kiln/backend/special_math.h"
#include "kiln/ops/meta.h"

namespace kiln::cpu {

using ops::OpKind;
using namespace elementwise;

void k_compare(const OpCall& c, std::span<Tensor> outs) {
  DType cd = compute_dtype(ops::result_type(c.args.tensor(0), c.args.tensor(1)));
  Tensor ta, tb;
  const Tensor& a = cast_ref(c.args.tensor(0), cd, ta);
  const Tensor& b = cast_ref(c.args.tensor(1), cd, tb);
  auto run = [&]<typename T>(T*) {
    const Tensor& o = outs[0];
    switch (c.op) {
      case OpKind::eq: binary_loop<bool, T>(o, a, b, [](T x, T y) { return x == y; }); return;
      case OpKind::ne: binary_loop<bool, T>(o, a, b, [](T x, T y) { return x != y; }); return;
      case OpKind::lt: binary_loop<bool, T>(o, a, b, [](T x, T y) { return x < y; }); return;
      case OpKind::le: binary_loop<bool, T>(o, a, b, [](T x, T y) { return x <= y; }); return;
      case OpKind::gt: binary_loop<bool, T>(o, a, b, [](T x, T y) { return x > y; }); return;
      case OpKind::ge: binary_loop<bool, T>(o, a, b, [](T x, T y) { return x >= y; }); return;
      default: fail(ErrorKind::internal, "[{}] is not a comparison", c.op);
    }
  };
  KILN_DISPATCH_COMPUTE(cd, c.op, run(static_cast<T*>(nullptr)));
}

void k_where(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& out = outs[0];
  DType cd = compute_dtype(out.dtype());
  const Tensor& cond = c.args.tensor(0);
  Tensor a = cast(c.args.tensor(1), cd), b = cast(c.args.tensor(2), cd);
  Staged s(out, cd);
  KILN_DISPATCH_COMPUTE(cd, "where", {
    T* o = static_cast<T*>(s.dst.storage()->data);
    const bool* pc = static_cast<const bool*>(cond.storage()->data);
    const T* pa = static_cast<const T*>(a.storage()->data);
    const T* pb = static_cast<const T*>(b.storage()->data);
    const Dims& shape = out.shape();
    // Both sides loaded before the choice, the condition read as bytes widened to int:
    // GCC then vectorizes the select (a bool load keeps it a branch, which the
    // condition's data mispredicts half the time).
    for_each_run<4>(shape,
                    {s.dst.strides(), broadcast_strides(cond, shape), broadcast_strides(a, shape),
                     broadcast_strides(b, shape)},
                    {s.dst.offset(), cond.offset(), a.offset(), b.offset()},
                    [&](int64_t n, std::array<int64_t, 4> off, std::array<int64_t, 4> st) {
                      T* oo = o + off[0];
                      const auto* c = reinterpret_cast<const uint8_t*>(pc + off[1]);
                      const T* x = pa + off[2];
                      const T* y = pb + off[3];
                      with_best_isa([&] {
                        if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1) {
                          for (int64_t i = 0; i < n; ++i) {
                            T u = x[i], v = y[i];
                            int32_t m = c[i];
                            oo[i] = m != 0 ? u : v;
                          }
                        } else if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 0) {
                          T v = *y;
                          for (int64_t i = 0; i < n; ++i) {
                            T u = x[i];
                            int32_t m = c[i];
                            oo[i] = m != 0 ? u : v;
                          }
                        } else if (st[0] == 1 && st[1] == 1 && st[2] == 0 && st[3] == 1) {
                          T u = *x;
                          for (int64_t i = 0; i < n; ++i) {
                            T v = y[i];
                            int32_t m = c[i];
                            oo[i] = m != 0 ? u : v;
                          }
                        } else {
                          for (int64_t i = 0; i < n; ++i) {
                            T u = x[i * st[2]], v = y[i * st[3]];
                            int32_t m = c[i * st[1]];
                            oo[i * st[0]] = m != 0 ? u : v;
                          }
                        }
                      });
                    });
  });
  s.finish();
}

void k_masked_fill(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& out = outs[0];
  const Tensor& self = c.args.tensor(0);
  const Tensor& mask = c.args.tensor(1);
  if (self.dtype() == out.dtype() && self.shape() == out.shape() && mask.shape() == out.shape() &&
      self.is_contiguous() && mask.is_contiguous() && out.is_contiguous()) {
    // The dense case (relu's gradient): one branch-free pass.
    KILN_DISPATCH_ALL(out.dtype(), "masked_fill", {
      T value = scalar_as<T>(c.args.scalar(2));
      T* o = out.data<T>();
      const T* s = self.data<T>();
      const bool* m = mask.data<bool>();
      parallel_for(out.numel(), 1, [&](int64_t b, int64_t e) {
        with_best_isa([&] {
          for (int64_t i = b; i < e; ++i) {  // both loaded first: a select, not a branch
            T keep = s[i];
            o[i] = m[i] ? value : keep;
          }
        });
      });
    });
    return;
  }
  bool in_place = self.storage() == out.storage() && self.offset() == out.offset() &&
                  self.strides() == out.strides() && self.shape() == out.shape();
  if (!in_place) copy_into(out, self);
  KILN_DISPATCH_ALL(out.dtype(), "masked_fill", {
    T value = scalar_as<T>(c.args.scalar(2));
    T* o = static_cast<T*>(out.storage()->data);
    const bool* m = static_cast<const bool*>(mask.storage()->data);
    for_each_run<2>(out.shape(), {out.strides(), broadcast_strides(mask, out.shape())},
                    {out.offset(), mask.offset()},
                    [&](int64_t n, std::array<int64_t, 2> off, std::array<int64_t, 2> st) {
                      for (int64_t i = 0; i < n; ++i)
                        if (m[off[1] + i * st[1]]) o[off[0] + i * st[0]] = value;
                    });
  });
}

}  // namespace kiln::cpu

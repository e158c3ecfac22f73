// Copies, conversions, fills and factories.
#include "kiln/backend/collective.h"
#include "kiln/backend/cpu/convert.h"
#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/loops.h"
#include "kiln/device/kernel_scope.h"

namespace kiln::cpu {

namespace {

template <typename D, typename S>
void copy_typed(const Tensor& dst, const Tensor& src) {
  D* d = static_cast<D*>(dst.storage()->data);
  const S* s = static_cast<const S*>(src.storage()->data);
  for_each_run<2>(dst.shape(), {dst.strides(), broadcast_strides(src, dst.shape())},
                  {dst.offset(), src.offset()},
                  [&](int64_t n, std::array<int64_t, 2> off, std::array<int64_t, 2> st) {
                    D* dp = d + off[0];
                    const S* sp = s + off[1];
                    if (st[0] == 1 && st[1] == 1) {
                      if constexpr (std::is_same_v<D, S>) {
                        std::memcpy(dp, sp, n * sizeof(D));
                      } else if constexpr (requires { convert_dense(sp, dp, n); }) {
                        convert_dense(sp, dp,
                                      n);  // float <-> f16/bf16: F16C (Note [Portable kernels])
                      } else {
                        with_best_isa([&] {
                          for (int64_t i = 0; i < n; ++i) dp[i] = convert<D>(sp[i]);
                        });
                      }
                    } else {
                      with_best_isa([&] {
                        for (int64_t i = 0; i < n; ++i) dp[i * st[0]] = convert<D>(sp[i * st[1]]);
                      });
                    }
                  });
}

}  // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  // Reading and writing the same elements (a.copy_(a)) is a no-op.
  if (dst.is_alias_of(src) && dst.offset() == src.offset() && dst.shape() == src.shape() &&
      dst.strides() == src.strides() && dst.dtype() == src.dtype())
    return;
  KILN_DISPATCH_ALL(dst.dtype(), "copy_", {
    using D = T;
    KILN_DISPATCH_ALL(src.dtype(), "copy_", { copy_typed<D, T>(dst, src); });
  });
}

Tensor cast(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  // On the running kernel's device: a 0-dim CPU scalar joining an op on cpu:2 (D2) is
  // converted into cpu:2's memory, never cpu:0's.
  const KernelFrame* k = current_kernel();
  Tensor out = empty(t.shape(), dtype, k ? k->device : t.device());
  copy_into(out, t);
  return out;
}

Tensor contiguous(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor out = empty(t.shape(), t.dtype(), t.device());
  copy_into(out, t);
  return out;
}

void k_copy_(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& dst = outs[0];
  backend::copy_overlapping(dst, c.args.tensor(1), copy_into, [&](const Tensor& t) {
    return empty(t.shape(), t.dtype(), t.device());
  });
}

void fill(const Tensor& t, const Scalar& v) {
  KILN_DISPATCH_ALL(t.dtype(), "fill_", {
    T value = scalar_as<T>(v);
    T* p = static_cast<T*>(t.storage()->data);
    for_each_run<1>(t.shape(), {t.strides()}, {t.offset()},
                    [&](int64_t n, std::array<int64_t, 1> off, std::array<int64_t, 1> st) {
                      T* q = p + off[0];
                      if (st[0] == 1)
                        std::fill(q, q + n, value);
                      else
                        for (int64_t i = 0; i < n; ++i) q[i * st[0]] = value;
                    });
  });
}

void k_fill_(const OpCall& c, std::span<Tensor> outs) { fill(outs[0], c.args.scalar(1)); }

void k_clone(const OpCall& c, std::span<Tensor> outs) { copy_into(outs[0], c.args.tensor(0)); }

void k_to_copy(const OpCall& c, std::span<Tensor> outs) { copy_into(outs[0], c.args.tensor(0)); }

void k_collective(const OpCall& c, std::span<Tensor> outs) {
  backend::run_collective(c, outs, [](const Tensor& d, const Tensor& s) { copy_into(d, s); });
}

void k_cat(const OpCall& c, std::span<Tensor> outs) {
  backend::cat_into(outs[0], c.args.tensors(0), c.args.i64(1), copy_into);
}

void k_as_strided_scatter(const OpCall& c, std::span<Tensor> outs) {
  backend::as_strided_scatter_into(outs[0], c, copy_into);
}

void k_empty(const OpCall&, std::span<Tensor>) {}

void k_full(const OpCall& c, std::span<Tensor> outs) { fill(outs[0], c.args.scalar(1)); }

void k_arange(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& out = outs[0];
  double start = c.args.scalar(0).to_double(), step = c.args.scalar(2).to_double();
  // Integer steps (integer scalars or an integer output, which truncates them: meta_arange)
  // count exactly in int64.
  bool integral = (!c.args.scalar(0).is_floating() && !c.args.scalar(2).is_floating()) ||
                  is_integral(out.dtype(), false);
  int64_t istart = c.args.scalar(0).to_int(), istep = c.args.scalar(2).to_int();
  KILN_DISPATCH_ALL(out.dtype(), "arange", {
    T* p = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      if (integral)
        p[i] = convert<T>(istart + i * istep);
      else
        p[i] = convert<T>(start + static_cast<double>(i) * step);
    }
  });
}

namespace {
template <bool Normal>
void fill_random(const OpCall& c, const Tensor& out) {
  Generator& g = device_generator(c.device);
  std::lock_guard lock(g.mutex());
  KILN_DISPATCH_ALL(out.dtype(), Normal ? "randn" : "rand", {
    T* p = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) p[i] = convert<T>(Normal ? g.normal() : g.uniform());
  });
}
}  // namespace

void k_rand(const OpCall& c, std::span<Tensor> outs) { fill_random<false>(c, outs[0]); }
void k_randn(const OpCall& c, std::span<Tensor> outs) { fill_random<true>(c, outs[0]); }

}  // namespace kiln::cpu

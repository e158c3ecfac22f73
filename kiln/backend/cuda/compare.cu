// Comparisons on CUDA devices: inputs in their promoted dtype, a bool result.
#include "kiln/backend/cuda/common.cuh"
#include "kiln/backend/cuda/element_ops.h"
#include "kiln/ops/meta.h"

namespace kiln::cuda {

using ops::OpKind;

void k_compare(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& out = outs[0];
  DType cd = ops::result_type(c.args.tensor(0), c.args.tensor(1));
  auto prep = [&](const Tensor& t) {
    return t.device().is_cpu() || t.dtype() == cd ? t : dense(t, cd, out.device());
  };
  Tensor a = prep(c.args.tensor(0)), b = prep(c.args.tensor(1));
  const Dims& shape = out.shape();
  auto g = make_geometry<3>(shape, {out.strides(), in_strides(a, shape), in_strides(b, shape)},
                            {out.offset(), in_offset(a), in_offset(b)});
  OpKind op = c.op;
  bool* o = out_ptr<bool>(out);
  KILN_CUDA_DISPATCH_ALL(cd, op, {
    In<T> pa = input<T>(a), pb = input<T>(b);
    launch_elementwise<3>(out.numel(), g, [=] __device__(const int64_t* off) {
      o[off[0]] = compare_w(op, load(pa[off[1]]), load(pb[off[2]]));
    });
  });
}

}  // namespace kiln::cuda

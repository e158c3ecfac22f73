#pragma once
// The built-in add's meta function and CPU kernel, registered as an extension op
// (define_op, E1): what going through the registry costs per call, against add().

#include "kiln/backend/cpu/kernels.h"
#include "kiln/kiln.h"
#include "kiln/ops/meta.h"

namespace kiln::bench {

inline ops::OpKind extension_add_op() {
  static const ops::OpKind op =
      define_op({.schema = "bench::add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
                 .meta = ops::meta_binary,
                 .cpu = [](const ops::OpCall& c, std::span<Tensor> outs) {
                   cpu::k_binary(ops::OpCall{ops::OpKind::add, c.args, c.device}, outs);
                 }});
  return op;
}

}  // namespace kiln::bench

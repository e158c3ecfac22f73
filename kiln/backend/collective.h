#pragma once
// The kernel of the collective ops (C2), the same for every backend: it runs the call on
// the process group bound to the op's `group` argument (kiln/device/process_group.h);
// the group's engine moves the data. `copy_into` is the backend's copy.

#include <span>

#include "kiln/device/process_group.h"
#include "kiln/ops/op_table.h"

namespace kiln::backend {

template <typename CopyInto>
void run_collective(const ops::OpCall& c, std::span<Tensor> outs, CopyInto copy_into) {
  using ops::OpKind;
  std::string_view op = ops::op_name(c.op);
  const Tensor& self = c.args.tensor(0);
  const Tensor& out = outs[0];
  auto group = dist::bound_group(c.args.str(c.args.size() - 1), op);
  if (c.op != OpKind::all_reduce && c.op != OpKind::broadcast &&
      c.op != OpKind::all_to_all_single_v) {
    int64_t n = c.args.i64(c.op == OpKind::reduce_scatter_tensor ? 2 : 1);
    KILN_CHECK(n == group->size(), value,
               "[{}] was traced for a group of {} ranks, but '{}' has {}", op, n,
               c.args.str(c.args.size() - 1), group->size());
  }
  switch (c.op) {
    case OpKind::all_reduce:
      copy_into(out, self);
      group->all_reduce(out, dist::reduce_op_from_name(c.args.str(1)), dist::Launch::blocking)
          ->wait();
      return;
    case OpKind::all_gather_into_tensor:
      group->all_gather(out, self, dist::Launch::blocking)->wait();
      return;
    case OpKind::reduce_scatter_tensor:
      group
          ->reduce_scatter(out, self, dist::reduce_op_from_name(c.args.str(1)),
                           dist::Launch::blocking)
          ->wait();
      return;
    case OpKind::broadcast: {
      int64_t src = c.args.i64(1);
      KILN_CHECK(src < group->size(), index, "[broadcast] src {} is not a rank of '{}' ({} ranks)",
                 src, c.args.str(2), group->size());
      copy_into(out, self);
      group->broadcast(out, static_cast<int>(src), dist::Launch::blocking)->wait();
      return;
    }
    case OpKind::all_to_all_single_v: {
      const IntList &outs = c.args.ints(1), &ins = c.args.ints(2);
      KILN_CHECK(static_cast<int64_t>(ins.size()) == group->size(), value,
                 "[{}] was traced for a group of {} ranks, but '{}' has {}", op, ins.size(),
                 c.args.str(3), group->size());
      group
          ->all_to_all_v(out, self, std::vector<int64_t>(outs.begin(), outs.end()),
                         std::vector<int64_t>(ins.begin(), ins.end()), dist::Launch::blocking)
          ->wait();
      return;
    }
    case OpKind::all_to_all_single:
      group->all_to_all(out, self, dist::Launch::blocking)->wait();
      return;
    default: fail(ErrorKind::internal, "[{}] is not a collective", op);
  }
}

}  // namespace kiln::backend

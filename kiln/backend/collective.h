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
  // (C5) Left pending where the executor asked for it, else complete before returning.
  std::shared_ptr<dist::Work>* pending = dist::pending_work_slot();
  dist::Launch launch = pending ? dist::Launch::async : dist::Launch::blocking;
  auto finish = [&](std::shared_ptr<dist::Work> work) {
    if (pending)
      *pending = std::move(work);
    else
      work->wait();
  };
  switch (c.op) {
    case OpKind::all_reduce:
      copy_into(out, self);
      finish(group->all_reduce(out, dist::reduce_op_from_name(c.args.str(1)), launch));
      return;
    case OpKind::all_gather_into_tensor: finish(group->all_gather(out, self, launch)); return;
    case OpKind::reduce_scatter_tensor:
      finish(group->reduce_scatter(out, self, dist::reduce_op_from_name(c.args.str(1)), launch));
      return;
    case OpKind::broadcast: {
      int64_t src = c.args.i64(1);
      KILN_CHECK(src < group->size(), index, "[broadcast] src {} is not a rank of '{}' ({} ranks)",
                 src, c.args.str(2), group->size());
      copy_into(out, self);
      finish(group->broadcast(out, static_cast<int>(src), launch));
      return;
    }
    case OpKind::all_to_all_single_v: {
      const IntList &outs = c.args.ints(1), &ins = c.args.ints(2);
      KILN_CHECK(static_cast<int64_t>(ins.size()) == group->size(), value,
                 "[{}] was traced for a group of {} ranks, but '{}' has {}", op, ins.size(),
                 c.args.str(3), group->size());
      finish(group->all_to_all_v(out, self, std::vector<int64_t>(outs.begin(), outs.end()),
                                 std::vector<int64_t>(ins.begin(), ins.end()), launch));
      return;
    }
    case OpKind::all_to_all_single: finish(group->all_to_all(out, self, launch)); return;
    default: fail(ErrorKind::internal, "[{}] is not a collective", op);
  }
}

}  // namespace kiln::backend

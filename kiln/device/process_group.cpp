#include "kiln/device/process_group.h"

#include <map>
#include <mutex>

namespace kiln::dist {

std::string_view to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
    case ReduceOp::product: return "product";
  }
  return "?";
}

ReduceOp reduce_op_from_name(std::string_view name) {
  for (ReduceOp op :
       {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min, ReduceOp::product})
    if (to_string(op) == name) return op;
  fail(ErrorKind::value, "[collective] unknown reduction '{}' (sum, avg, max, min or product)",
       name);
}

void ProcessGroup::check_rank(std::string_view op, int r) const {
  KILN_CHECK(r >= 0 && r < size(), index, "[{}] rank {} is not in a group of {} ranks", op, r,
             size());
}

void ProcessGroup::check_output(std::string_view op, const Tensor& out, const Tensor& in,
                                Rows rows) const {
  int64_t n = size();
  KILN_CHECK(in.dim() > 0 && (rows == Rows::gather || in.size(0) % n == 0), shape,
             "[{}] input {} needs a dim 0 that divides into {} chunks", op, in.meta_str(), n);
  Dims want = in.shape();
  if (rows == Rows::gather) want[0] *= n;
  if (rows == Rows::scatter) want[0] /= n;
  KILN_CHECK(out.shape() == want && out.dtype() == in.dtype() && out.device() == in.device(), shape,
             "[{}] output {} must be {}{}@{} for input {} on {} ranks", op, out.meta_str(),
             to_string(in.dtype()), want.str(), in.device(), in.meta_str(), n);
}

void ProcessGroup::check_splits(std::string_view op, const Tensor& out, const Tensor& in,
                                const std::vector<int64_t>& out_splits,
                                const std::vector<int64_t>& in_splits) const {
  auto n = static_cast<size_t>(size());
  KILN_CHECK(out_splits.size() == n && in_splits.size() == n, shape,
             "[{}] needs one split size per rank ({}), got {} output and {} input split sizes", op,
             n, out_splits.size(), in_splits.size());
  int64_t rows_out = 0, rows_in = 0;
  for (size_t r = 0; r < n; ++r) {
    KILN_CHECK(out_splits[r] >= 0 && in_splits[r] >= 0, shape, "[{}] a negative split size", op);
    rows_out += out_splits[r];
    rows_in += in_splits[r];
  }
  KILN_CHECK(in.dim() > 0 && in.size(0) == rows_in && out.dim() == in.dim() &&
                 out.size(0) == rows_out && out.dtype() == in.dtype() &&
                 out.device() == in.device(),
             shape,
             "[{}] input {} and output {} do not fit the split sizes (input rows {}, output rows "
             "{})",
             op, in.meta_str(), out.meta_str(), rows_in, rows_out);
  for (int64_t d = 1; d < in.dim(); ++d)
    KILN_CHECK(out.size(d) == in.size(d), shape, "[{}] input {} and output {} differ past dim 0",
               op, in.meta_str(), out.meta_str());
}

namespace {
std::mutex g_mutex;
std::map<std::string, std::shared_ptr<ProcessGroup>, std::less<>>& groups() {
  static std::map<std::string, std::shared_ptr<ProcessGroup>, std::less<>> g;
  return g;
}
}  // namespace

void bind_group(const std::string& name, std::shared_ptr<ProcessGroup> group) {
  std::lock_guard lock(g_mutex);
  if (group)
    groups()[name] = std::move(group);
  else
    groups().erase(name);
}

std::shared_ptr<Work>*& pending_work_slot() {
  thread_local std::shared_ptr<Work>* slot = nullptr;
  return slot;
}

std::shared_ptr<ProcessGroup> bound_group(std::string_view name, std::string_view op) {
  std::lock_guard lock(g_mutex);
  auto it = groups().find(name);
  KILN_CHECK(
      it != groups().end(), value,
      "[{}] no process group is bound to '{}': bind one before running (dist::bind_group, or "
      "`kiln run`, which binds every group of a program to the MPI world)",
      op, name);
  return it->second;
}

}  // namespace kiln::dist

#include "kiln/runtime/executor.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "kiln/ir/interpreter.h"

namespace kiln::runtime {

namespace {

// A tensor over `storage` with contiguous layout.
Tensor over(const Storage& storage, const ir::ValueMeta& m) {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = m.shape;
  impl->strides = contiguous_strides(m.shape);
  impl->dtype = m.dtype;
  impl->device = m.device;
  impl->storage = storage;
  return Tensor(std::move(impl));
}

}  // namespace

Executor::Executor(ExportedProgram& program) : program_(program) {
  nodes_ = program.graph.nodes();
  std::unordered_map<const ir::Node*, int> pos;
  for (size_t i = 0; i < nodes_.size(); ++i) pos[nodes_[i]] = static_cast<int>(i);
  planned_.resize(nodes_.size());

  // Aliasing root of each node's values: views and in-place ops share their input's.
  std::vector<int> root(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    ir::Node* n = nodes_[i];
    root[i] = static_cast<int>(i);
    if (n->opcode() != ir::Opcode::call) continue;
    const ops::OpInfo& info = ops::op_info(n->op());
    int alias = info.is_view() ? info.schema.view_of_arg : info.schema.mutated_arg;
    if (alias >= 0) root[i] = root[pos.at(std::get<ir::Ref>(n->args()[alias]).node)];
  }
  // A root dies after the last use of any value sharing it; program outputs never die.
  const int kForever = static_cast<int>(nodes_.size());
  std::vector<int> death(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) death[i] = static_cast<int>(i);
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (const ir::Ref& r : nodes_[i]->inputs()) {
      int& d = death[root[pos.at(r.node)]];
      d = nodes_[i]->opcode() == ir::Opcode::output ? kForever : std::max(d, static_cast<int>(i));
    }

  // Greedy best fit over free buffers of the same device, in program order.
  struct Buffer {
    Storage storage;
    size_t bytes;
  };
  std::vector<Buffer> buffers;
  std::multimap<std::pair<uint32_t, size_t>, int> free;  // (device, bytes) -> buffer
  std::map<int, std::vector<int>> release_at;             // position -> buffers
  for (size_t i = 0; i < nodes_.size(); ++i) {
    ir::Node* n = nodes_[i];
    bool plannable = n->opcode() == ir::Opcode::call && death[i] != kForever;
    if (plannable) {
      const ops::OpInfo& info = ops::op_info(n->op());
      plannable = info.meta && !info.is_view() && !info.is_inplace();
    }
    if (plannable) {
      for (const ir::ValueMeta& m : n->meta()) {
        size_t bytes = static_cast<size_t>(numel_of(m.shape)) * itemsize(m.dtype);
        auto it = free.lower_bound({m.device.key(), bytes});
        int b;
        if (it != free.end() && it->first.first == m.device.key()) {
          b = it->second;
          free.erase(it);
        } else {
          Allocator& a = device_allocator(m.device);
          b = static_cast<int>(buffers.size());
          size_t size = std::max<size_t>(bytes, 1);
          buffers.push_back({std::make_shared<StorageImpl>(a.allocate(size), size, m.device, &a, false), size});
          stats_.planned_bytes += static_cast<int64_t>(size);
        }
        planned_[i].push_back(over(buffers[b].storage, m));
        release_at[death[i]].push_back(b);
        ++stats_.planned_values;
      }
    } else if (n->opcode() == ir::Opcode::call && death[i] == kForever && root[i] == static_cast<int>(i)) {
      for (const ir::ValueMeta& m : n->meta())
        stats_.unplanned_bytes += numel_of(m.shape) * static_cast<int64_t>(itemsize(m.dtype));
    }
    for (int b : release_at[static_cast<int>(i)])
      free.insert({{buffers[b].storage->device.key(), buffers[b].bytes}, b});
  }
  stats_.buffers = static_cast<int>(buffers.size());
}

TensorList Executor::run(const TensorList& user_inputs) {
  KILN_CHECK(!running_.exchange(true), value,
             "[run] this Executor is already running on another thread; an Executor owns its "
             "planned buffers, so use one Executor per thread (they may share the program)");
  struct Done {
    std::atomic<bool>& flag;
    ~Done() { flag = false; }
  } done{running_};
  auto lock = program_.lock_for_run();
  TensorList inputs = program_.bind_inputs(user_inputs);  // (R3) before anything runs
  std::vector<Outputs> env(nodes_.size());
  std::unordered_map<const ir::Node*, size_t> index;
  index.reserve(nodes_.size());
  size_t next_input = 0;
  TensorList outs;
  std::vector<Value> args;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    ir::Node* n = nodes_[i];
    index[n] = i;
    auto value_of = [&](const ir::Ref& r) -> const Tensor& { return env[index.at(r.node)][r.output]; };
    switch (n->opcode()) {
      case ir::Opcode::input: env[i].push_back(inputs[next_input++]); break;
      case ir::Opcode::constant: env[i].push_back(n->value()); break;
      case ir::Opcode::call: {
        args.clear();
        ir::call_args(*n, value_of, args);
        if (!planned_[i].size()) {
          env[i] = dispatch(n->op(), args);
        } else {
          dispatch_into(n->op(), args, planned_[i]);
          env[i] = planned_[i];
        }
        break;
      }
      case ir::Opcode::output:
        for (const ir::Ref& r : std::get<ir::RefList>(n->args()[0])) outs.push_back(value_of(r));
        break;
    }
  }
  return program_.write_back(outs, user_inputs);
}

}  // namespace kiln::runtime

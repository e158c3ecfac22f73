// The reference GPT's training step (forward + mean-square loss + backward) under tensor
// parallelism at mpirun -np N vs the same step in this process alone (rank 0 runs both
// and prints one JSON line). Also the bytes the step's collectives move per rank, read
// from its captured per-rank graph, vs Megatron's analytical minimum (two all_reduces of
// the activations per layer in forward, two in backward).
#include <chrono>
#include <cstdio>

#include "kiln/kiln.h"

int main() {
  using namespace kiln;
  auto world = dist::mpi_world();
  int n = world->size();
  Device device(DeviceType::cpu, 0);
  nn::GPTConfig cfg{.vocab = 256, .context = 64, .layers = 2, .heads = 4, .width = 128};
  int64_t batch = 4, seq = 64;
  manual_seed(1);
  nn::GPT single(cfg, device), tp(cfg, device);
  tp.load_state_dict(single.state_dict());
  dist::DeviceMesh mesh(world, {n}, {"tp"}, device);
  dist::parallelize_module(tp, mesh, {{"blocks.*.attn.qkv", dist::ParallelStyle::colwise},
                                      {"blocks.*.attn.proj", dist::ParallelStyle::rowwise},
                                      {"blocks.*.fc", dist::ParallelStyle::colwise},
                                      {"blocks.*.proj", dist::ParallelStyle::rowwise}});
  Tensor ids = reshape(arange(0, batch * seq, 1, {.dtype = DType::i64}), {batch, seq});  // < vocab
  Tensor dids = dist::distribute_tensor(ids, mesh, {dist::Replicate()});
  auto step_tp = [&] {
    dist::ImplicitReplication implicit;
    tp.zero_grad();
    Tensor y = tp(TensorList{dids})[0];
    mean(y * y).backward();
  };
  auto step_single = [&] {
    single.zero_grad();
    Tensor y = single(TensorList{ids})[0];
    mean(y * y).backward();
  };
  auto time = [&](auto&& step, bool collective) {
    for (int i = 0; i < 2; ++i) step();
    if (collective) world->barrier();
    int reps = 10;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) step();
    if (collective) world->barrier();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
  };
  double tp_ms = time(step_tp, true);
  double single_ms = world->rank() == 0 ? time(step_single, false) : 0;
  // Bytes moved per rank: every collective of the captured step, ring algorithms.
  std::vector<nn::NamedTensor> slots;
  TensorList inputs{dids}, kept;
  for (const nn::NamedTensor& nt : tp.named_tensors())
    if (nt.kind == nn::SlotKind::parameter) slots.push_back(nt), inputs.push_back(*nt.tensor), kept.push_back(*nt.tensor);
  dist::ImplicitReplication implicit;  // for the backward formulas too, traced after fn
  passes::JointProgram j = passes::capture_joint(
      [&](const TensorList& in) {
        for (size_t k = 0; k < slots.size(); ++k) *slots[k].tensor = in[k + 1];  // the traced parameters
        Tensor y = tp(TensorList{in[0]})[0];
        return TensorList{mean(y * y)};
      },
      inputs);
  for (size_t k = 0; k < slots.size(); ++k) *slots[k].tensor = kept[k];
  double moved = 0;
  for (const ir::Graph* g : {&j.forward, &j.backward})
    for (const ir::Node* node : g->nodes()) {
      if (node->opcode() != ir::Opcode::call) continue;
      const ir::ValueMeta& m = node->meta()[0];
      double bytes = double(numel_of(m.shape)) * double(itemsize(m.dtype)), f = double(n - 1) / n;
      switch (node->op()) {
        case ops::OpKind::all_reduce: moved += 2 * f * bytes; break;
        case ops::OpKind::all_gather_into_tensor: moved += f * bytes; break;
        case ops::OpKind::reduce_scatter_tensor: moved += f * bytes * n; break;
        case ops::OpKind::all_to_all_single: moved += f * bytes; break;
        default: break;
      }
    }
  double minimum = 4.0 * cfg.layers * 2 * double(n - 1) / n * double(batch * seq * cfg.width) * 4;
  if (world->rank() == 0)
    std::printf("{\"bench\": \"tp_gpt_step\", \"ranks\": %d, \"tp_ms\": %.3f, \"single_ms\": %.3f, "
                "\"bytes_moved\": %.0f, \"bytes_minimum\": %.0f}\n",
                n, tp_ms, single_ms, moved, minimum);
}

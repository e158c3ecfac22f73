// The reference GPT's training step (forward + mean-square loss + backward) under tensor
// parallelism at mpirun -np N, and (with --single, a plain process) the same step on one
// process; run_bench.py launches the two in turn, so neither runs beside the other's idle
// ranks, and each uses the machine's cores (the TP ranks one share each, the default
// budget under a launcher). The TP run also prints the bytes its collectives move per rank,
// read from its captured per-rank graph, vs Megatron's analytical minimum (two
// all_reduces of the activations per layer in forward, two in backward).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kiln/kiln.h"

namespace {

constexpr kiln::nn::GPTConfig kConfig{
    .vocab = 256, .context = 64, .layers = 2, .heads = 4, .width = 128};
constexpr int64_t kBatch = 4, kSeq = 64;

// Milliseconds per step: 2 warm-up steps, then the median of 5 blocks of 10.
template <typename Step, typename Sync>
double time_steps(Step&& step, Sync&& sync) {
  for (int i = 0; i < 2; ++i) step();
  std::vector<double> blocks;
  for (int b = 0; b < 5; ++b) {
    sync();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 10; ++i) step();
    sync();
    blocks.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
        10);
  }
  std::sort(blocks.begin(), blocks.end());
  return blocks[blocks.size() / 2];
}

int run_single() {
  using namespace kiln;
  manual_seed(1);
  nn::GPT single(kConfig, Device(DeviceType::cpu, 0));
  Tensor ids =
      reshape(arange(0, kBatch * kSeq, 1, {.dtype = DType::i64}), {kBatch, kSeq});  // < vocab
  double ms = time_steps(
      [&] {
        single.zero_grad();
        Tensor y = single(TensorList{ids})[0];
        mean(y * y).backward();
      },
      [] {});
  std::printf("{\"bench\": \"single_gpt_step\", \"single_ms\": %.3f}\n", ms);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kiln;
  if (argc > 1 && std::strcmp(argv[1], "--single") == 0) return run_single();
  auto world = dist::mpi_world();
  int n = world->size();
  Device device(DeviceType::cpu, 0);
  nn::GPTConfig cfg = kConfig;
  int64_t batch = kBatch, seq = kSeq;
  manual_seed(1);
  nn::GPT tp(cfg, device);
  dist::DeviceMesh mesh(world, {n}, {"tp"}, device);
  dist::parallelize_module(tp, mesh,
                           {{"blocks.*.attn.qkv", dist::ParallelStyle::colwise},
                            {"blocks.*.attn.proj", dist::ParallelStyle::rowwise},
                            {"blocks.*.fc", dist::ParallelStyle::colwise},
                            {"blocks.*.proj", dist::ParallelStyle::rowwise}});
  Tensor ids = reshape(arange(0, batch * seq, 1, {.dtype = DType::i64}), {batch, seq});  // < vocab
  Tensor dids = dist::distribute_tensor(ids, mesh, {dist::Replicate()});
  double tp_ms = time_steps(
      [&] {
        dist::ImplicitReplication implicit;
        tp.zero_grad();
        Tensor y = tp(TensorList{dids})[0];
        mean(y * y).backward();
      },
      [&] { world->barrier(); });
  // Bytes moved per rank: every collective of the captured step, ring algorithms.
  std::vector<nn::NamedTensor> slots;
  TensorList inputs{dids}, kept;
  for (const nn::NamedTensor& nt : tp.named_tensors())
    if (nt.kind == nn::SlotKind::parameter)
      slots.push_back(nt), inputs.push_back(*nt.tensor), kept.push_back(*nt.tensor);
  dist::ImplicitReplication implicit;  // for the backward formulas too, traced after fn
  passes::JointProgram j = passes::capture_joint(
      [&](const TensorList& in) {
        for (size_t k = 0; k < slots.size(); ++k)
          *slots[k].tensor = in[k + 1];  // the traced parameters
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
    std::printf(
        "{\"bench\": \"tp_gpt_step\", \"ranks\": %d, \"tp_ms\": %.3f, "
        "\"bytes_moved\": %.0f, \"bytes_minimum\": %.0f}\n",
        n, tp_ms, moved, minimum);
}

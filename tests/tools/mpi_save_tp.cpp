// Saves a tensor-parallel GPT as a distributed program (S5), for the CLI tests that then
// run it with `mpirun -np N kiln run` at another world size. Usage (under mpirun):
// mpi_save_tp PATH
#include <cstdio>

#include "kiln/kiln.h"

int main(int argc, char** argv) {
  using namespace kiln;
  if (argc != 2) {
    std::fprintf(stderr, "usage: mpi_save_tp PATH\n");
    return 2;
  }
  try {
    auto world = dist::mpi_world();
    Device device(DeviceType::cpu, world->rank() % device_count(DeviceType::cpu));
    dist::DeviceMesh mesh(world, {world->size()}, {"tp"}, device);
    manual_seed(1);
    nn::GPT gpt({.vocab = 32, .context = 16, .layers = 1, .heads = 2, .width = 16});
    gpt.to(device);
    dist::parallelize_module(gpt, mesh,
                             {{"blocks.*.attn.qkv", dist::ParallelStyle::colwise},
                              {"blocks.*.attn.proj", dist::ParallelStyle::rowwise},
                              {"blocks.*.fc", dist::ParallelStyle::colwise},
                              {"blocks.*.proj", dist::ParallelStyle::rowwise}});
    Tensor ids = zeros({2, 8}, {.dtype = DType::i64, .device = device});
    dist::save_distributed(gpt, {dist::distribute_tensor(ids, mesh, {dist::Replicate()})}, argv[1]);
  } catch (const Error& e) {
    std::fprintf(stderr, "mpi_save_tp: %s\n", e.what());
    return 1;
  }
  return 0;
}

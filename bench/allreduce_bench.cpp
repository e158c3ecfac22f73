// all_reduce through kiln's MPI engine vs message size (run under mpirun -np 2; rank 0
// prints one JSON line per size): microseconds per call and bus bandwidth
// (2 (n - 1) / n * bytes / time). Compare bench/mpi_allreduce_peer.c, the same loop
// over MPI_Allreduce on the same buffers. KILN_CHECK_COLLECTIVES=0 turns off the
// cross-rank check (one 16-byte all-reduce per call).
#include <chrono>
#include <cstdio>

#include "kiln/kiln.h"

int main() {
  using namespace kiln;
  auto world = dist::mpi_world();
  int n = world->size();
  for (int64_t bytes = 4096; bytes <= (64 << 20); bytes *= 4) {
    Tensor t = ones({bytes / 4});
    int reps = bytes >= (16 << 20) ? 10 : bytes >= (1 << 20) ? 40 : 400;
    for (int i = 0; i < 3; ++i) world->all_reduce(t)->wait();
    world->barrier();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) world->all_reduce(t)->wait();
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps;
    if (world->rank() == 0)
      std::printf("{\"bench\": \"kiln_allreduce\", \"bytes\": %lld, \"us\": %.2f, \"busbw_GBps\": %.3f}\n",
                  static_cast<long long>(bytes), us, 2.0 * (n - 1) / n * static_cast<double>(bytes) / us / 1e3);
  }
}

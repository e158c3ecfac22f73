// all_reduce through kiln's MPI engine vs a plain MPI_Allreduce loop, by message size
// (run under mpirun -np 2; rank 0 prints one JSON line per size). kiln's call is timed as
// the collective ops run it (Launch::blocking) and as an asynchronous Work waited for at
// once (the worker's hand-off included). All three run in this process on the same buffer,
// in-place float sums, one call of each in turn (the order rotates), each call timed: the
// machine's drift hits all alike, and a call the VM preempted moves no median.
// Reported: each side's median microseconds per call and kiln's bus bandwidth
// (2 (n - 1) / n * bytes / time). KILN_CHECK_COLLECTIVES=0 turns off kiln's cross-rank
// check (one 16-byte all-reduce per call).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "kiln/kiln.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  using namespace kiln;
  auto world = dist::mpi_world();  // initialises MPI
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int n = world->size();
  for (int64_t bytes = 4096; bytes <= (64 << 20); bytes *= 4) {
    Tensor t = ones({bytes / 4});
    float* data = t.data<float>();
    int count = static_cast<int>(t.numel());
    int calls = bytes >= (64 << 20)   ? 11
                : bytes >= (16 << 20) ? 25
                : bytes >= (4 << 20)  ? 30
                : bytes >= (1 << 20)  ? 60
                                      : 400;
    std::function<void()> sides[3] = {
        [&] { world->all_reduce(t, dist::ReduceOp::sum, dist::Launch::blocking); },
        [&] { world->all_reduce(t)->wait(); },
        [&] { MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, comm); },
    };
    for (int i = 0; i < 3; ++i)
      for (auto& side : sides) side();
    MPI_Barrier(comm);
    std::vector<double> us[3];
    for (int i = 0; i < calls; ++i)
      for (int j = 0; j < 3; ++j) {
        int s = (i + j) % 3;  // each side first, second and third in turn
        auto t0 = std::chrono::steady_clock::now();
        sides[s]();
        us[s].push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count());
      }
    double kus = median(us[0]), wus = median(us[1]), mus = median(us[2]);
    if (world->rank() == 0)
      std::printf(
          "{\"bench\": \"allreduce\", \"bytes\": %lld, \"kiln_us\": %.2f, \"kiln_async_us\": %.2f, "
          "\"mpi_us\": %.2f, \"busbw_GBps\": %.3f}\n",
          static_cast<long long>(bytes), kus, wus, mus,
          2.0 * (n - 1) / n * static_cast<double>(bytes) / kus / 1e3);
  }
  MPI_Comm_free(&comm);
}

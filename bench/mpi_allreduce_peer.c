/* The peer of bench/allreduce_bench.cpp: the same sizes, repetitions and in-place float
 * sums, straight MPI_Allreduce from C (run under mpirun -np 2; rank 0 prints JSON lines). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  for (long long bytes = 4096; bytes <= (64LL << 20); bytes *= 4) {
    int count = (int)(bytes / 4);
    float* x = malloc((size_t)bytes);
    for (int i = 0; i < count; ++i) x[i] = 1.0f;
    int reps = bytes >= (16 << 20) ? 10 : bytes >= (1 << 20) ? 40 : 400;
    for (int i = 0; i < 3; ++i) MPI_Allreduce(MPI_IN_PLACE, x, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < reps; ++i) MPI_Allreduce(MPI_IN_PLACE, x, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double us = (MPI_Wtime() - t0) * 1e6 / reps;
    if (rank == 0)
      printf("{\"bench\": \"mpi_allreduce\", \"bytes\": %lld, \"us\": %.2f, \"busbw_GBps\": %.3f}\n", bytes, us,
             2.0 * (n - 1) / n * (double)bytes / us / 1e3);
    free(x);
  }
  MPI_Finalize();
  return 0;
}

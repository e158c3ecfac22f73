/* The machine's memory bandwidth as a STREAM-style triad, a[i] = b[i] + s * c[i], over
 * arrays well beyond the caches, on OMP_NUM_THREADS threads: the bound an elementwise op
 * of that size cannot beat. Prints one JSON line (GB/s counts the three arrays moved). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define N (1L << 25) /* 32 Mi floats per array: 128 MiB each */

int main(void) {
  float *a = malloc(N * sizeof(float)), *b = malloc(N * sizeof(float)), *c = malloc(N * sizeof(float));
  if (!a || !b || !c) return 1;
#pragma omp parallel for
  for (long i = 0; i < N; ++i) a[i] = 0, b[i] = 1, c[i] = 2;
  double best = 1e30;
  for (int rep = 0; rep < 10; ++rep) {
    double t0 = omp_get_wtime();
#pragma omp parallel for
    for (long i = 0; i < N; ++i) a[i] = b[i] + 3.0f * c[i];
    double t = omp_get_wtime() - t0;
    if (t < best) best = t;
  }
  printf("{\"case\": \"triad threads=%d\", \"unit\": \"GB/s\", \"median\": %.2f, \"check\": %.1f}\n",
         omp_get_max_threads(), 3.0 * N * sizeof(float) / best / 1e9, (double)a[N / 2]);
  free(a), free(b), free(c);
  return 0;
}

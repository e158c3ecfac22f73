// The elementwise part of kx::gated_mlp on CUDA: g = silu(g) * u, queued on the stream
// the kernel was given (the current stream of the op's device, D4). Plain CUDA: no kiln
// headers are needed on the device side.
#include <cuda_runtime.h>

#include <cstdint>

namespace {
__global__ void silu_mul(float* g, const float* u, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) g[i] = g[i] / (1.0f + __expf(-g[i])) * u[i];
}
}  // namespace

namespace kx {
// Returns the launch's CUDA error code (0 on success).
int launch_silu_mul(float* g, const float* u, int64_t n, void* stream) {
  if (n == 0) return 0;
  int threads = 256;
  auto blocks = static_cast<unsigned>((n + threads - 1) / threads);
  silu_mul<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(g, u, n);
  return static_cast<int>(cudaGetLastError());
}
}  // namespace kx

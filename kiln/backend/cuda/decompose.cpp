// linalg_eigh and linalg_svd on CUDA devices.
//
// Note [Decompositions on the host]
// The decompositions run on the host's LAPACK: the input is copied to pageable host
// memory once the device's current stream has reached it, decomposed there (the CPU
// backend's lapack.h, so a GPU and the CPU give the same vectors and signs for the same
// input), and the factors are copied back on the same stream. The matrices of model code
// (covariances, small Gram matrices, orthogonalisation) are small enough that the round
// trip costs less than the launches of a device solver; cuSOLVER would be the next step
// for large ones. The stream is synchronised, as PyTorch's solvers do to check LAPACK's
// info.
#include <cuda_runtime_api.h>

#include <vector>

#include "kiln/backend/cpu/lapack.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/device/cuda_runtime.h"
#include "kiln/device/registry.h"
#include "kiln/device/stream.h"

namespace kiln::cuda {

using ops::OpCall;

namespace {

cudaStream_t current(Device d) {
  set_device(d.index);
  return static_cast<cudaStream_t>(current_stream(d).native_handle());
}

// The elements of a dense device tensor on the host (after the stream's earlier work).
template <typename T>
std::vector<T> to_host(const Tensor& t, cudaStream_t s) {
  std::vector<T> host(static_cast<size_t>(t.numel()));
  if (!host.empty())
    check(cudaMemcpyAsync(host.data(), t.data<T>(), host.size() * sizeof(T), cudaMemcpyDeviceToHost,
                          s),
          "cudaMemcpyAsync");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  return host;
}

// Host results into `out` (any layout) through a dense device buffer.
template <typename T>
void from_host(const std::vector<T>& host, const Tensor& out, cudaStream_t s) {
  if (host.empty()) return;
  Tensor dense_out = out.is_contiguous() ? out : empty(out.shape(), out.dtype(), out.device());
  check(cudaMemcpyAsync(dense_out.data<T>(), host.data(), host.size() * sizeof(T),
                        cudaMemcpyHostToDevice, s),
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");  // `host` is pageable and goes away
  if (!dense_out.is_same(out)) copy_into(out, dense_out);
}

template <typename T>
void eigh(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  cudaStream_t s = current(self.device());
  std::vector<T> a = to_host<T>(dense(self, self.dtype(), self.device()), s);
  int64_t n = self.size(-1), batch = n ? self.numel() / (n * n) : 0;
  std::vector<T> w(static_cast<size_t>(outs[0].numel())), v(static_cast<size_t>(outs[1].numel()));
  cpu::lapack::eigh(a.data(), w.data(), v.data(), batch, n, c.args.str(1) == "U" ? 'U' : 'L',
                    "linalg.eigh");
  from_host(w, outs[0], s);
  from_host(v, outs[1], s);
}

template <typename T>
void svd(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  cudaStream_t s = current(self.device());
  std::vector<T> a = to_host<T>(dense(self, self.dtype(), self.device()), s);
  int64_t m = self.size(-2), n = self.size(-1), batch = 1;
  for (int64_t i = 0; i < self.dim() - 2; ++i) batch *= self.size(i);
  std::vector<T> u(static_cast<size_t>(outs[0].numel())), sv(static_cast<size_t>(outs[1].numel())),
      vh(static_cast<size_t>(outs[2].numel()));
  cpu::lapack::svd(a.data(), u.data(), sv.data(), vh.data(), batch, m, n, c.args.flag(1),
                   "linalg.svd");
  from_host(u, outs[0], s);
  from_host(sv, outs[1], s);
  from_host(vh, outs[2], s);
}

}  // namespace

void k_linalg_eigh(const OpCall& c, std::span<Tensor> outs) {
  if (c.args.tensor(0).dtype() == DType::f64)
    eigh<double>(c, outs);
  else
    eigh<float>(c, outs);
}

void k_linalg_svd(const OpCall& c, std::span<Tensor> outs) {
  if (c.args.tensor(0).dtype() == DType::f64)
    svd<double>(c, outs);
  else
    svd<float>(c, outs);
}

}  // namespace kiln::cuda

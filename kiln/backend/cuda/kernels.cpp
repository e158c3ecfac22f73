#include "kiln/backend/cuda/kernels.h"

#include "kiln/backend/collective.h"

namespace kiln::cuda {

// Collectives on CUDA tensors: the bound group's engine moves them (a local group copies;
// the MPI engine refuses device memory with a clear error; NCCL is not built yet).
void k_collective(const ops::OpCall& c, std::span<Tensor> outs) {
  backend::run_collective(c, outs, [](const Tensor& d, const Tensor& s) { copy_into(d, s); });
}

// Every kernel of KILN_KERNELS (backend/shared.h), bound to the ops it serves.
const ops::KernelTable& kernels() {
  static const ops::KernelTable table = KILN_BUILD_KERNEL_TABLE();
  return table;
}

}  // namespace kiln::cuda

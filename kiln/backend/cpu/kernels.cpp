#include "kiln/backend/cpu/kernels.h"

#include "kiln/backend/cpu/onednn.h"

namespace kiln::cpu {

// Every kernel of KILN_KERNELS (backend/shared.h), bound to the ops it serves.
const ops::KernelTable& kernels() {
  static const ops::KernelTable table = [] {
    if (gemm_library() != GemmLibrary::openblas) onednn_warm_up();  // with the backend
    return KILN_BUILD_KERNEL_TABLE();
  }();
  return table;
}

}  // namespace kiln::cpu

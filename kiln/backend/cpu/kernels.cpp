#include "kiln/backend/cpu/kernels.h"

namespace kiln::cpu {

// Every kernel of KILN_KERNELS (backend/shared.h), bound to the ops it serves.
const ops::KernelTable& kernels() {
  static const ops::KernelTable table = KILN_BUILD_KERNEL_TABLE();
  return table;
}

}  // namespace kiln::cpu

#include "kiln/backend/cpu/kernels.h"

#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/onednn.h"
#include "kiln/device/threads.h"

namespace kiln::cpu {

// Every kernel of KILN_KERNELS (backend/shared.h), bound to the ops it serves. Made on
// the first CPU kernel, which is where a malformed KILN_NUM_THREADS, KILN_GEMM or
// KILN_CPU_ISA is reported (as KILN_CPU_DEVICES is): a throwing initializer runs again
// on the next call, so every CPU op reports it.
const ops::KernelTable& kernels() {
  static const ops::KernelTable table = [] {
    get_num_threads();
    check_gemm_environment();
    check_isa_environment();
    if (gemm_library() != GemmLibrary::openblas) onednn_warm_up();  // with the backend
    return KILN_BUILD_KERNEL_TABLE();
  }();
  return table;
}

}  // namespace kiln::cpu

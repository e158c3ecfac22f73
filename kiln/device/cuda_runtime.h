#pragma once
// Internal: the CUDA device runtime's entry points for the CUDA backend (built only
// with KILN_WITH_CUDA; no CUDA headers here).

namespace kiln::cuda {

/** Makes device `index` the CUDA runtime's current device on this thread (a no-op
 * when it already is). Every CUDA runtime call that depends on the current device
 * goes through this first. */
void set_device(int index);

/** Throws a backend Error naming `what` and CUDA's message unless `status` (a
 * cudaError_t) is success. */
void check(int status, const char* what);

}  // namespace kiln::cuda

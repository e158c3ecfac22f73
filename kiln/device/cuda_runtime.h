#pragma once
// Internal: the CUDA device runtime's entry points for the CUDA backend (built only
// with KILN_WITH_CUDA; no CUDA headers here).

#include <string>

namespace kiln::cuda {

/** Makes device `index` the CUDA runtime's current device on this thread (a no-op
 * when it already is). Every CUDA runtime call that depends on the current device
 * goes through this first. */
void set_device(int index);

/** Throws a backend Error naming `what` and CUDA's message unless `status` (a
 * cudaError_t) is success. */
void check(int status, const char* what);

/** A CUDA library loaded on first use (dlopen by soname, else from the toolkit kiln was
 * built against), so processes that never need it do not map it; `what` names it in
 * errors ("cuBLAS", "NCCL"). */
void* load_library(const std::string& soname, const char* what);
/** A symbol of a library from load_library; a backend Error when it is missing. */
void* library_symbol(void* lib, const char* symbol, const std::string& soname, const char* what);

}  // namespace kiln::cuda

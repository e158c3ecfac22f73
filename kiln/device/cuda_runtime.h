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

// Note [Index errors found by kernels]
// An index tensor on a GPU can only be checked by the kernel that reads it. PyTorch's
// kernels stop with a device assert there, which leaves the process's CUDA context
// unusable. kiln's record the first bad index of the device in a small block of mapped
// host memory, skip the access (a gathered element reads as 0, a scatter is dropped),
// and every host wait on that device (stream and event synchronisation, blocking
// copies, hence every host read of a value) throws it as an `index` Error. The process
// and its context stay usable; the error surfaces at the first wait after the kernel,
// which may be a wait on another stream of the same device. An integer divisor of 0
// (remainder, fmod, floor_divide; PyTorch's CPU raises ZeroDivisionError) is reported
// the same way, as a `value` Error; its element reads as 0.
struct KernelError {
  int code;         // 0: none; 1: an index was out of range; 2: an integer division by zero
  const char* op;   // the op's name (a host string literal, carried through)
  long long value;  // the bad index
  long long bound;  // the size it indexes
};

/** The device's error block, mapped into its address space (allocated on first use);
 * kernels take it as an argument. */
KernelError* kernel_error_block(int device);

/** Throws the `index` Error a kernel of `device` recorded since the last call, and
 * clears it; returns when there is none. Call after a host wait on the device. */
void raise_kernel_error(int device);

}  // namespace kiln::cuda

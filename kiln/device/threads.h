#pragma once
// Intra-op threads: how many threads one CPU kernel may use.
//
// Note [Intra-op threads]
// A CPU kernel above a grain size splits its work over an OpenMP team (the runtime
// oneDNN, kiln's GEMM, uses too, so the two never compete with separate pools); when
// another process takes a core, the team steps aside for a while (Note [Threads on a
// shared machine] in kiln/backend/cpu/parallel.cpp). The team size is a budget:
//  - the process budget, set_num_threads (default: KILN_NUM_THREADS when set, else the
//    machine's hardware threads divided among the processes a launcher started on it:
//    mpirun -np 2 on 2 cores gives each rank 1);
//  - a per-device budget for virtual CPU devices, set_num_threads(device, n): kernels of
//    cpu:1 and cpu:2 driven from two host threads each use their own share instead of
//    both taking the whole machine. 0 (the default) means "the process budget".
// OpenBLAS (f64 GEMMs and small f32 ones) is told the same count before each call.
// Without OpenMP in the build every kernel runs on its calling thread.

#include "kiln/core/device.h"
#include "kiln/core/scope.h"

namespace kiln {

/** Sets the process's intra-op budget (>= 1). */
void set_num_threads(int n);
/** The process's intra-op budget; a value Error when KILN_NUM_THREADS is malformed. */
int get_num_threads();
/** Sets `device`'s budget (a CPU device; 0 = use the process budget). */
void set_num_threads(Device device, int n);
/** The budget of kernels running on `device`. */
int get_num_threads(Device device);

/** Sets the process budget for a scope and restores the previous one. */
class NumThreadsGuard : ScopeGuard {
 public:
  explicit NumThreadsGuard(int n) : before_(get_num_threads()) { set_num_threads(n); }
  ~NumThreadsGuard() { set_num_threads(before_); }

 private:
  int before_;
};

}  // namespace kiln

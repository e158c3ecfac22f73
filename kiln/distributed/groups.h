#pragma once
// Process groups and collectives on real engines (C1, C3, C4): MPI across processes for
// CPU tensors (any cpu:N device, virtual ones included), and a fake group that computes
// metadata only, so programs for N ranks can be traced in one process.
//
// Note [Collectives on the engine]
// An MPI group runs its engine calls on a worker thread of its own, one after another in
// call order (so every rank issues them in the same order, and MPI's tuned blocking
// algorithms do the work); a call returns a Work at once, and wait() blocks on its
// completion. A caller that would only wait for the worker runs the call itself, in the
// same order: a Launch::blocking call when nothing is queued or running, a wait() on the
// call the idle worker would run next (two thread wake-ups fewer, ~7 us a call here). A collective
// reads and writes dense buffers of an engine dtype: inputs that are not contiguous (or whose dtype
// the engine lacks: f16, bf16 go through f32) are staged in a dense copy, after the stream that
// last wrote them (D4), and outputs staged that way are copied back before the work completes; the
// outputs then carry no pending stream. Callers must not touch a collective's tensors before
// wait(). Each collective is numbered per group; unless KILN_CHECK_COLLECTIVES=0, the ranks first
// compare what they are about to call (kind, reduction, dtype, shape, root) with one 16-byte
// all-reduce, so a mismatch is an Error on every rank, raised by wait(), naming the collective and
// its number instead of a hang or garbage (C4). A wait longer than KILN_COLLECTIVE_TIMEOUT seconds
// (default 300) is an Error too, after which the broken job ends at exit (no MPI finalize).

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/api/functional.h"
#include "kiln/device/process_group.h"

namespace kiln::dist {

/** Whether this build has the MPI engine. */
bool mpi_available();
/** All processes of the job (MPI_COMM_WORLD), initialising MPI on first use; an
 * unsupported Error in a build without MPI. */
std::shared_ptr<ProcessGroup> mpi_world();
/** A group of `size` ranks seen from `rank` in one process: collectives check their
 * arguments' metadata (shapes, dtypes, devices), then move data as PyTorch's fake process
 * group does, as if every rank held this one's input (an all_gather gives `size` copies),
 * and complete at once (C1). */
std::shared_ptr<ProcessGroup> fake_group(int rank, int size);
/** The group of this process alone (size 1, any device): what a program for one rank
 * binds its groups to. */
std::shared_ptr<ProcessGroup> local_group();
/** Whether this build has the NCCL engine and this machine a CUDA device. */
bool nccl_available();
/** NCCL for CUDA tensors on `device` (one device per process), for the ranks of
 * `bootstrap` (e.g. mpi_world()), which carries NCCL's unique id from rank 0. Collectives
 * queue on the device's current stream (C3). A device Error without that CUDA device;
 * unsupported in a build without CUDA. */
std::shared_ptr<ProcessGroup> nccl_group(const std::shared_ptr<ProcessGroup>& bootstrap,
                                         Device device);

}  // namespace kiln::dist

// Helper of CliMpi.*: rank 1 leaves before a collective that rank 0 waits in, either
// dying (`die`: the MPI runtime ends the job) or finishing cleanly (`leave`: rank 0's
// wait runs into KILN_COLLECTIVE_TIMEOUT; `leave-blocking`: the same for a blocking call,
// which rank 0 runs on its own thread). Either way the job must end with an error naming
// what happened, never hang.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kiln/kiln.h"

int main(int argc, char** argv) {
  std::string mode = argc < 2 ? "die" : argv[1];
  bool die = mode == "die";
  auto world = kiln::dist::mpi_world();
  if (world->rank() == 1) {
    std::fprintf(stderr, "rank 1: %s before the collective\n", die ? "dying" : "leaving");
    if (die) std::_Exit(3);
    return 0;
  }
  kiln::Tensor t = kiln::ones({4});
  try {
    if (mode == "leave-blocking")
      world->all_reduce(t, kiln::dist::ReduceOp::sum, kiln::dist::Launch::blocking);
    else
      world->all_reduce(t)->wait();
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
    return 1;
  }
  std::printf("rank %d: the collective completed without rank 1\n", world->rank());
  return 0;
}

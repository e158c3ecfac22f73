// Helper of CliMpi.*: rank 1 leaves before a collective that rank 0 waits in, either
// dying (`die`: the MPI runtime ends the job) or finishing cleanly (`leave`: rank 0's
// wait runs into KILN_COLLECTIVE_TIMEOUT). Either way the job must end with an error
// naming what happened, never hang.
#include <cstdio>
#include <cstdlib>

#include "kiln/kiln.h"

#include <string>

int main(int argc, char** argv) {
  bool die = argc < 2 || std::string(argv[1]) == "die";
  auto world = kiln::dist::mpi_world();
  if (world->rank() == 1) {
    std::fprintf(stderr, "rank 1: %s before the collective\n", die ? "dying" : "leaving");
    if (die) std::_Exit(3);
    return 0;
  }
  kiln::Tensor t = kiln::ones({4});
  try {
    world->all_reduce(t)->wait();
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
    return 1;
  }
  std::printf("rank %d: the collective completed without rank 1\n", world->rank());
  return 0;
}

// Test helper for the crash-safety test: saves programs A and B alternately to TARGET
// until it is killed (kill -9 lands at random moments of a save).
#include <cstdio>

#include "kiln/kiln.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: save_loop A B TARGET\n");
    return 2;
  }
  kiln::ExportedProgram programs[2] = {kiln::read_program(argv[1]), kiln::read_program(argv[2])};
  std::printf("ready\n");
  std::fflush(stdout);
  for (unsigned i = 0;; ++i) kiln::save(programs[i % 2], argv[3]);
}

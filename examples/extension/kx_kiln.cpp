// `kx-kiln`: the kiln command with kx's ops registered, so that `show`, `run` and
// `train` work on programs that call them (plain `kiln` names the missing op instead).
#include <kiln/cli.h>

#include "gated_mlp.h"

int main(int argc, char** argv) {
  kx::register_ops();
  return kiln::cli_main(argc, argv);
}

// The kiln command (tools/kiln/cli.cpp).
#include "kiln/cli.h"

int main(int argc, char** argv) { return kiln::cli_main(argc, argv); }

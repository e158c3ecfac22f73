#pragma once
// The `kiln` command line tool as a function. An extension library builds its own
// command with its ops registered (see examples/extension/kx_kiln.cpp):
//
//   int main(int argc, char** argv) {
//     mylib::register_ops();
//     return kiln::cli_main(argc, argv);
//   }
//
// so `show`, `run` and `train` work on programs that call its ops (E1, E3).

#include <string>
#include <string_view>

namespace kiln {

class ExportedProgram;

/** What `kiln show --format FORMAT` prints for `program`: "text", "json", "dot" or
 * "html" (one self-contained page). */
std::string show_program(const ExportedProgram& program, std::string_view format = "text");

/** Runs the kiln command; returns its exit status (0, 1 on a failed command, 2 for
 * usage errors). Link kiln::cli. */
int cli_main(int argc, char** argv);

}  // namespace kiln

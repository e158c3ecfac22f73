#pragma once
// Programs that torch.export wrote (.pt2 archives) as kiln programs (I1-I4).
//
// The importer reads the archive and its serialized ExportedProgram, then *runs* the
// graph node by node on fake tensors under kiln's own capture: every ATen overload goes
// through one table to kiln's functional API (kiln/interop/ops.cpp), in-place writes to
// buffers and inputs become the program's mutation outputs (functionalization), and the
// file's devices become device slots. What comes out is an ordinary ExportedProgram:
// kiln run, kiln show, save, device maps and the executor need nothing new.

#include <span>
#include <string>
#include <vector>

#include "kiln/program/program.h"

namespace kiln {

struct ImportedProgram {
  ExportedProgram program;
  /** What the import decided that a user should know, one line each: symbolic sizes
   * specialized to the file's example values, tied weights stored once. */
  std::vector<std::string> notes;
};

/** (I1-I4) Reads a .pt2 file into a program on the devices the file names (fake tracing:
 * the machine need not have them). Throws a format Error for a malformed archive, an
 * unsupported Error listing every op kiln lacks with its node and module path. */
ImportedProgram read_pt2(const std::string& path);
/** The same from bytes in memory; `name` stands for the file in errors. */
ImportedProgram read_pt2(std::span<const unsigned char> bytes, const std::string& name);
/** read_pt2, then `map` applied and every device checked as load_program does (X3). */
ExportedProgram load_pt2(const std::string& path, const DeviceMap& map = {});

/** Whether `path` looks like a .pt2 archive (a zip) rather than a kiln program file. */
bool is_pt2_file(const std::string& path);

}  // namespace kiln

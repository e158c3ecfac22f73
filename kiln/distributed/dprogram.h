#pragma once
// (S5) Distributed programs: a model laid out with DTensors, saved once for any world
// size and loaded onto another mesh.
//
// Note [Distributed programs are global graphs plus shards]
// What a DTensor model computes does not depend on how it is laid out, so the program
// keeps the *global* graph: the model traced on plain tensors of the global shapes. Next
// to it: the abstract mesh (shape and axis names, never ranks) and every state tensor's
// placements. The state is saved sharded: each rank writes its shards with their global
// offsets (a replicated shard once). Loading onto a mesh with the same axis names and
// any sizes reads every shard (checking they cover each tensor exactly once), lays each
// tensor out on the new mesh with its placements (resharding), and lowers the global
// graph to this rank's graph by running it through the DTensor layer under capture (S4):
// local shapes, functional collectives naming mesh axes.
//
// Note [Distributed programs with dynamic dims]
// A dynamic dim (a batch, a sequence) that no placement shards has the same size on
// every rank, so it stays one symbol from the global graph to each rank's: loading
// rebuilds the saved symbols (names, ranges, example values) in a ShapeEnv and lowers
// the global graph on symbolic fake DTensors under it. What the lowering decides on a
// symbol is a guard of the rank's program, settled as export settles its own (a
// named dim the lowering would specialize is an error saying so), and the saved guards
// stay. A sharded dim cannot be dynamic: each rank's shard size would be an expression
// of the mesh size, and the layouts of the shards (uneven last shards) would differ per
// binding; save refuses it.

#include <string>
#include <vector>

#include "kiln/distributed/dtensor.h"
#include "kiln/program/program.h"

namespace kiln::dist {

/** Saves `module` (its parameters, buffers and workspaces DTensors on one mesh, e.g.
 * after parallelize_module) called on `example_inputs` (DTensors, or plain tensors:
 * replicated). `path` gets the global program with the abstract mesh and placements
 * (written by the mesh's first rank); `path.shard-R-of-N` rank R's shards. Every rank
 * of the mesh calls it; it returns when every file is written. (Y1) `dynamic_shapes`
 * declares dynamic dims of the inputs as export_program's do; a dim an input is sharded
 * along cannot be one (an unsupported Error naming it). */
void save_distributed(nn::Module& module, const TensorList& example_inputs, const std::string& path,
                      const std::vector<InputDims>& dynamic_shapes = {});

/** A distributed program lowered for this rank. */
struct LoadedProgram {
  ExportedProgram program;                   // run it with this rank's shards of the inputs
  std::vector<Placements> input_placements;  // how the user inputs were laid out at export
  std::vector<ir::ValueMeta> input_meta;     // their global metadata
};

/** The mesh a distributed program was saved for: its shape and axis names. */
struct SavedMesh {
  std::vector<int64_t> shape;
  std::vector<std::string> names;
};
/** The saved mesh of the distributed program at `path`, or nullopt when the file is a
 * whole program (errors for unreadable files as load_program's). */
std::optional<SavedMesh> saved_mesh(const std::string& path);

/** Every rank of `mesh` calls it: reads the program and every shard file, lays the
 * state out on `mesh` (the saved axis names, any sizes), lowers the global graph to
 * this rank's program, and binds the mesh's axis names to its groups (mesh.bind()). Missing or
 * incomplete shards, or other axis names, are errors naming the file or tensor. */
LoadedProgram load_distributed(const std::string& path, const DeviceMesh& mesh);

}  // namespace kiln::dist

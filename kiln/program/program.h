#pragma once
// Exported programs: a functional graph, its signature, state and constants (X1-X4),
// device-agnostic files, and retargeting.

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/nn/module.h"
#include "kiln/passes/functionalize.h"
#include "kiln/trace/dynamic.h"

namespace kiln {

/** (X4) What a graph input is. */
struct InputSpec {
  enum class Kind : uint8_t { parameter, buffer, constant, workspace, user_input, optimizer_state };
  Kind kind;
  std::string name;        // the input node's name
  std::string target;      // module path ("blocks.0.ln1.weight") or "input_N"
  bool persistent = true;  // buffers: part of the state (else a constant)
};

/** (X4, M5, J4) What a graph output is; mutations come first. A train step adds its
 * loss, the parameters' gradients, and the writes of parameters and optimizer state. */
struct OutputSpec {
  enum class Kind : uint8_t {
    user_output,
    buffer_mutation,
    user_input_mutation,
    loss_output,
    gradient_to_parameter,
    parameter_mutation,
    optimizer_state_mutation
  };
  Kind kind;
  std::string target;  // the state / input written, the parameter of a gradient, or ""
  /** Whether the runtime writes this output into state or an input (else it is returned). */
  bool is_mutation() const {
    return kind == Kind::buffer_mutation || kind == Kind::user_input_mutation ||
           kind == Kind::parameter_mutation || kind == Kind::optimizer_state_mutation;
  }
};

std::string_view to_string(InputSpec::Kind kind);
std::string_view to_string(OutputSpec::Kind kind);

struct GraphSignature {
  std::vector<InputSpec> inputs;
  std::vector<OutputSpec> outputs;
};

/** (D6) A workspace is stored as a recipe and re-created where the program runs. */
struct WorkspaceRecipe {
  std::string name;
  Dims shape;
  DType dtype;
  Device device;
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Note [Programs across threads]
// A program's state, constants and workspaces are shared by everything that runs it: its
// own run(), every Executor over it, and copies of it (a copy shares the tensors). A
// program that writes its own state (buffer mutations, e.g. BatchNorm in training) or
// has workspaces therefore runs one call at a time: run() and Executor::run hold the
// program's run lock from binding the inputs to the last write-back, so concurrent
// callers queue and every update lands exactly once. Programs that write nothing of
// their own run concurrently. An Executor owns its planned buffers, so one Executor
// serves one thread at a time; a second concurrent run on it is an Error, not a race.
class ExportedProgram {
 public:
  ir::Graph graph;
  GraphSignature signature;
  NamedTensors state;      // parameters, persistent buffers, optimizer state
  NamedTensors constants;  // non-persistent buffers and tensor constants (by constant node name)
  std::vector<WorkspaceRecipe> workspaces;
  /** (Y4) The symbols and guards of a program with dynamic shapes (empty if static). */
  ShapeSpec shapes;

  /** Runs the program through the IR interpreter: applies buffer mutations to the state
   * (or constants, workspaces) and user-input mutations to `user_inputs`; returns the
   * user outputs. (R3) Inputs are checked first, with errors naming the input. */
  TensorList run(const TensorList& user_inputs);
  /** (R3) Checks `user_inputs` against the signature (count, shape, dtype, device),
   * naming the input, and returns the full graph input list: state, constants,
   * workspaces (created on first use) and user inputs, in signature order. */
  TensorList bind_inputs(const TensorList& user_inputs, std::vector<int64_t>* binding = nullptr);
  /** (Y4) The value of each symbol of `shapes` for these user inputs: every symbol bound
   * from the input sizes, then every bound, static dim, repeated symbol, derived dim and
   * guard checked, with an Error naming the input, dim, symbol and range that failed.
   * Empty for a static program. */
  std::vector<int64_t> bind_symbols(const TensorList& user_inputs) const;
  /** Applies the mutation outputs (buffers, workspaces, user inputs) and returns the
   * user outputs. */
  TensorList write_back(const TensorList& graph_outputs, const TensorList& user_inputs);
  /** Every distinct device the program refers to, in first-seen order. */
  std::vector<Device> devices() const;
  /** The lock a run holds (see Note [Programs across threads]): the program's run lock
   * when it writes its own state or has workspaces, else an empty lock. */
  std::unique_lock<std::mutex> lock_for_run() const;
  /** The graph followed by the signature, one line per input and output. */
  std::string str() const;
  /** "signature:" and one line per input and output. */
  std::string signature_str() const;

 private:
  NamedTensors workspace_values_;
  std::shared_ptr<std::mutex> run_mutex_ = std::make_shared<std::mutex>();
};

struct ExportOptions {
  /** Trace for this device (fake tensors: the machine need not have it). Default: the
   * device of the module's first tensor. */
  std::optional<Device> device;
  /** (Y1) Per user input, its dynamic dims (fewer entries than inputs: the rest static). */
  std::vector<InputDims> dynamic_shapes;
};

/** Captures `module.forward(example_inputs)` into a program: fake tracing, functional,
 * parameters / buffers / workspaces lifted to inputs, mutations as outputs (X4, M5). */
ExportedProgram export_program(nn::Module& module, const TensorList& example_inputs,
                               const ExportOptions& options = {});

/** The end of every capture into a program (export_program, the .pt2 importer): takes
 * the captured graph, adds the mutation outputs (first, in input order: user inputs',
 * buffers' and parameters' writes, M5) and the user outputs to the signature, whose
 * inputs the caller has filled, and stores the graph's constants. */
void finish_program(ExportedProgram& program, passes::CapturedProgram captured);

/** Old device -> new device. Devices not listed stay as they are. A key without an
 * index ("cpu", "cuda") stands for every device of that type (X3). */
using DeviceMap = std::vector<std::pair<Device, Device>>;
/** (X3) `map` made concrete for a program with `devices`: one entry per program device
 * it moves, keyed by that device. A key with an index wins over a type key; a key that
 * matches no device of the program is a device Error listing the program's devices
 * (a typo must not silently leave a program where it was). */
DeviceMap resolve_device_map(const std::vector<Device>& devices, const DeviceMap& map);
/** (X3) Rebinds every device of the program to `target`; moves state and constants. */
void move_to_device(ExportedProgram& program, Device target);
/** (X3) Rebinds the mapped devices; moves state and constants; then verifies that
 * nothing refers to a device mapped away. */
void move_to_device(ExportedProgram& program, const DeviceMap& map);
/** Throws a device Error naming the first reference (node, argument, state entry,
 * constant, workspace) to one of `gone`. */
void verify_no_device(const ExportedProgram& program, const std::vector<Device>& gone);

/** Writes the program as ONE safetensors file (weights and constants as tensors, the
 * graph, signature and device table as versioned JSON in its metadata). Atomic: a
 * temporary file is renamed into place. */
void save(const ExportedProgram& program, const std::string& path);
/** Reads a program; validates everything (format errors, never a crash); applies
 * `map`; fails if the machine lacks a device the program uses, naming the map to pass.
 * Weights are mapped from the file without copying where alignment allows. */
ExportedProgram load_program(const std::string& path, const DeviceMap& map = {});
/** (X3) What load_program does after reading: applies `map`, then fails if this machine
 * lacks a device the program uses, naming `path` and the map to pass. */
void bind_devices(ExportedProgram& program, const DeviceMap& map, const std::string& path);
/** How read_program treats what a reader for inspection can do without. */
struct ReadOptions {
  /** (E3) An extension op the program lists but this process has not registered: an
   * error (the default; running needs the op), or `show`: registered from the schema the
   * file stores as a placeholder that has no kernel and whose meta function refuses to
   * run, so the program can be printed (`kiln show`). */
  enum class Unregistered : uint8_t { error, show };
  Unregistered unregistered_extension_ops = Unregistered::error;
};
/** Reads and validates a program without binding its devices (for inspection). */
ExportedProgram read_program(const std::string& path, const ReadOptions& options = {});
/** A program without its state: graph, signature, the graph's constants, and
 * `distribution` (JSON: how the state is laid out in shard files). What
 * dist::save_distributed writes next to the shards; read_graph reads it back. */
void save_graph(const ExportedProgram& program, const std::string& path,
                const std::string& distribution);
ExportedProgram read_graph(const std::string& path, std::string& distribution,
                           const ReadOptions& options = {});
/** Reads a plain safetensors file (any writer). */
NamedTensors load_safetensors(const std::string& path);
/** Writes tensors as a plain safetensors file (atomically). */
void save_safetensors(const NamedTensors& tensors, const std::string& path);
/** The program as the JSON a file stores (format version, device table, graph nodes
 * with op, arguments, output metadata and scope, signature, workspaces; devices as slots
 * of the table). See docs/program-format.md. */
std::string program_json(const ExportedProgram& program);
/** The user inputs of `program` from a safetensors file holding input_0, input_1, ...
 * (what `kiln run --inputs` reads), each moved to the device the program takes it on; a
 * missing tensor is a value Error naming it. Shapes and dtypes are checked when the
 * program runs (R3). */
TensorList load_inputs(const ExportedProgram& program, const std::string& path);

}  // namespace kiln

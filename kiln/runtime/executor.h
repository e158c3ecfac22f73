#pragma once
// The runtime: runs an ExportedProgram on its devices with a static memory plan.

#include <atomic>

#include "kiln/program/program.h"

namespace kiln::runtime {

/** What the memory plan does. */
struct PlanStats {
  int planned_values = 0;      // outputs written into planned buffers
  int buffers = 0;             // distinct buffers they share
  int64_t planned_bytes = 0;   // bytes of those buffers (the plan's footprint)
  int64_t unplanned_bytes = 0; // bytes of values allocated per run (program outputs)
};

/** Runs a program: (R3) inputs checked against the signature first; (R1) every node
 * through dispatch, so under its device's guard, current stream and BLAS handle;
 * (R2) intermediates on their node's device, transfers only where the graph has
 * _to_copy. Intermediates live in buffers planned once by liveness and reused across
 * nodes and runs, so a steady-state run allocates only its outputs. */
class Executor {
 public:
  explicit Executor(ExportedProgram& program);
  /** Runs once; applies mutations as the signature says; returns the user outputs.
   * One thread at a time per Executor (see Note [Programs across threads]). */
  TensorList run(const TensorList& user_inputs);
  const PlanStats& stats() const { return stats_; }

 private:
  ExportedProgram& program_;
  std::vector<ir::Node*> nodes_;
  std::vector<Outputs> planned_;  // per node: preallocated outputs, or empty
  PlanStats stats_;
  std::atomic<bool> running_{false};
};

}  // namespace kiln::runtime

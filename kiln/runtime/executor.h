#pragma once
// The runtime: runs an ExportedProgram on its devices with a static memory plan.

#include <atomic>
#include <list>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/program/program.h"

namespace kiln::runtime {

/** What the memory plan does. */
struct PlanStats {
  int planned_values = 0;       // outputs written into planned buffers
  int buffers = 0;              // distinct buffers they share
  int64_t planned_bytes = 0;    // bytes of those buffers (the plan's footprint)
  int64_t unplanned_bytes = 0;  // bytes of values allocated per run (program outputs)
};

/** The time one op of a program took, summed over its nodes and the profiled runs. */
struct OpTime {
  std::string op;
  std::string inputs;    // its input shapes, when grouped by them ("f32[512, 256], ...")
  int64_t calls = 0;     // node executions
  double seconds = 0.0;  // wall time inside dispatch, device synchronized after each
};

/** How an Executor runs its program. */
struct ExecutorOptions {
  /** Runs chains of elementwise ops on the CPU as one pass over memory (Note [Fused
   * pointwise regions] in kiln/backend/cpu/pointwise.h); results are bit for bit the
   * same either way. KILN_FUSION=0 in the environment turns it off for every Executor. */
  bool fuse = true;
  /** Attention runs blocked over query rows (Note [Blocked attention] in executor.cpp)
   * when its scores would take at least this many bytes. */
  int64_t min_attention_bytes = 4 << 20;
};

/** Runs a program: (R3) inputs checked against the signature first; (R1) every node
 * through dispatch, so under its device's guard, current stream and BLAS handle;
 * (R2) intermediates on their node's device, transfers only where the graph has
 * _to_copy. Intermediates live in buffers planned once by liveness and reused across
 * nodes and runs, so a steady-state run allocates only its outputs. */
class Executor {
 public:
  explicit Executor(ExportedProgram& program, ExecutorOptions options = {});
  ~Executor();
  /** Runs once; applies mutations as the signature says; returns the user outputs.
   * One thread at a time per Executor (see Note [Programs across threads]). */
  TensorList run(const TensorList& user_inputs);
  /** The memory plan of the last run (of construction, for a static program). */
  const PlanStats& stats() const { return current_ ? current_->stats : empty_stats_; }
  /** The fused regions it runs (each several elementwise nodes in one pass). */
  int fused_regions() const;
  /** The attentions it runs blocked over query rows (Note [Blocked attention]). */
  int fused_attention() const;
  /** The linear products it runs with their ReLU and residual add (Note [Product
   * epilogues]). */
  int fused_epilogues() const;
  /** (Y5) Plans made for new bindings of a program with dynamic shapes so far. */
  int plans_built() const { return plans_built_; }
  /** The collectives it launches asynchronously, each waited for where its result is
   * first read (Note [Asynchronous collectives in programs] in executor.cpp). */
  int async_collectives() const;
  /** Times every call node of the runs that follow (kiln run/train --profile). A node
   * with outputs on a CUDA device has that device synchronized after it, so the time is
   * its own and not its successor's: a profiled run is slower than a plain one. */
  void set_profiling(bool on);
  /** The profiled runs' time per op (or per op and input shapes), the most expensive
   * first. */
  std::vector<OpTime> profile(bool by_input_shapes = false) const;

 private:
  struct Plan {
    std::vector<Outputs> planned;                   // per node: preallocated outputs, or empty
    std::vector<std::vector<ir::ValueMeta>> metas;  // per node at the binding (empty: static)
    PlanStats stats;
  };
  struct Region;     // a fused region (executor.cpp)
  struct Attention;  // a blocked attention (executor.cpp)
  struct Epilogue;   // a product with its epilogue (executor.cpp)
  static constexpr size_t kMaxPlans = 8;
  void find_regions();
  void run_region(const Region& region, const Plan& plan, std::vector<Outputs>& env,
                  std::vector<Value>& args);
  void find_attention();
  void run_attention(const Attention& attention, const Plan& plan, std::vector<Outputs>& env);
  void find_epilogues();
  void run_epilogue(const Epilogue& epilogue, const Plan& plan, std::vector<Outputs>& env,
                    std::vector<Value>& args);
  Tensor output_of(const Plan& plan, size_t node, size_t k = 0) const;
  void claim(std::vector<int>& group_of, size_t index, std::span<const size_t> members, size_t last,
             std::string label);
  void run_nodes_one_by_one(std::span<const size_t> members, std::vector<Outputs>& env,
                            std::vector<Value>& args);
  void find_async_collectives();
  void build_plan(Plan& plan);
  const Plan& plan_for(const std::vector<int64_t>& binding);

  ExportedProgram& program_;
  std::vector<ir::Node*> nodes_;
  std::unordered_map<const ir::Node*, size_t> pos_;  // node -> index in nodes_
  std::vector<Region> regions_;
  std::vector<int> region_of_;  // per node: its region, or -1
  std::vector<Attention> attention_;
  int64_t min_attention_bytes_ = 0;
  std::vector<int> attention_of_;  // per node: its blocked attention, or -1
  std::vector<Epilogue> epilogues_;
  std::vector<int> epilogue_of_;  // per node: its product epilogue, or -1
  // (Y3) Per node: whether an output's size depends on an unbacked symbol (never planned),
  // and the unbacked symbols its outputs bind when it has run: (output, dim, symbol).
  std::vector<bool> data_dependent_;
  std::vector<std::vector<std::array<size_t, 3>>> binds_;
  std::vector<size_t> runs_at_;  // per node: where it runs (its fused group's last node)
  // Note [Asynchronous collectives in programs]: per collective node, where it is waited
  // for (kNone: not asynchronous); per node, the collectives to wait for before it runs.
  std::vector<size_t> wait_at_;
  std::vector<std::vector<size_t>> waits_before_;
  bool any_async_ = false;
  std::vector<std::string> labels_;  // per node: a fused group's name in profiles, or empty
  std::list<std::pair<std::vector<int64_t>, Plan>> plans_;  // most recently used first
  const Plan* current_ = nullptr;
  PlanStats empty_stats_;
  int plans_built_ = 0;
  bool profiling_ = false;
  std::vector<double> node_seconds_;  // per node, while profiling
  std::vector<int64_t> node_calls_;
  std::atomic<bool> running_{false};
};

}  // namespace kiln::runtime

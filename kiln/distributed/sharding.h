#pragma once
// Sharding propagation (S2) as one table: for each op, how the placements of its DTensor
// arguments decide the placements it runs them at and the placements of its outputs.
// The DTensor layer (dtensor.cpp) asks the table for every call; the rules live in
// sharding.cpp, one entry per op of kiln/ops/op_table.h, grouped by family, in the style
// of kiln/autograd/derivatives.cpp. An op either has a rule, runs as other DTensor ops
// (`decomposed`: linear, mean, addmm), or is marked `none`: it then runs only when
// every DTensor argument is replicated (the same computation on every rank), as PyTorch
// falls back for an op without a registered strategy. S2.EveryOpHasAShardingRuleOrIsMarked
// fails for an op the table forgets.

#include <span>

#include "kiln/core/pool.h"
#include "kiln/distributed/dtensor.h"
#include "kiln/ops/op_table.h"
#include "kiln/ops/value.h"

namespace kiln::dist::detail {

/** What a rule decided: the placements each DTensor argument is redistributed to (one
 * per DTensor argument, list elements in order) and the outputs' placements. */
struct Decision {
  PoolVector<Placements> inputs;
  Placements output;
};

/** The DTensor arguments of a call, in order (list elements included). */
struct Operands {
  SmallVector<const Tensor*, 4> tensors;
  SmallVector<int, 4> arg;  // the argument each came from
};

/** One call as a rule sees it. */
struct ShardingCall {
  ops::OpKind op;
  std::span<const Value> args;
  const Operands& in;
  const Dims& out;  // the first output's global shape
  const DeviceMesh& mesh;
  /** The caller needs the output placements alone (Decision::inputs may stay empty). */
  bool outputs_only;

  const Tensor& tensor(size_t k) const { return *in.tensors[k]; }
  const Placements& placements(size_t k) const {
    return in.tensors[k]->impl()->dtensor->placements;
  }
};

enum class ShardingKind : uint8_t { missing, rule, decomposed, none };

struct ShardingEntry {
  ShardingKind kind = ShardingKind::missing;
  Decision (*rule)(const ShardingCall&) = nullptr;
  /** `decomposed`: the op as other DTensor ops, whose rules then decide. Runs below
   * autograd (grad mode off), on the call's arguments. */
  Outputs (*decompose)(std::span<const Value> args) = nullptr;
};

/** `op`'s entry; an extension op has none (replicated arguments only). */
const ShardingEntry& sharding_entry(ops::OpKind op);

/** (Note [Nested shards] in dtensor.cpp) Whether the call keeps DTensor operands whose
 * tensor dims are sharded by several mesh dimensions as they are: a pointwise op whose
 * DTensor operands all have the output's shape and one set of placements. */
bool keeps_nested_shards(const ShardingCall& call);

/** The decision for a call whose op has a rule or none: for `none`, every DTensor
 * argument must be replicated (an unsupported Error naming the op and the placements
 * otherwise). */
Decision decide(const ShardingCall& call);

}  // namespace kiln::dist::detail

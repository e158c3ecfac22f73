#pragma once
// FakeMode: run programs on metadata only, for any device (F1-F5).

#include <memory>
#include <unordered_map>
#include <vector>

#include "kiln/core/pool.h"
#include "kiln/dispatch/dispatch.h"

namespace kiln {

struct FakeModeOptions {
  /** (F2) Convert real tensors that reach an op automatically instead of failing. */
  bool allow_non_fake_inputs = false;
  /** (F4) How device mismatches between arguments are resolved while the mode lives. */
  DevicePolicy policy = DevicePolicy::strict();
};

/** While alive, every op on this thread computes metadata only: outputs are fake
 * tensors (See Note [Fake tensors keep their device]) on whatever device the op's
 * device rule picks, present on this machine or not. */
class FakeMode final : public Mode {
 public:
  explicit FakeMode(FakeModeOptions options = {});
  FakeMode(const FakeMode&) = delete;
  FakeMode& operator=(const FakeMode&) = delete;

  /** (F2) The fake twin of a real tensor: the same real tensor always gives the same
   * fake tensor, and tensors sharing a real storage share one fake storage, so views
   * stay views of the converted base. Fake tensors are returned as they are. */
  Tensor from_real(const Tensor& real);

  Outputs handle(ops::OpKind op, std::span<const Value> args) override;
  /** (F1) A tensor literal made inside the mode is fake (its data is dropped here; a
   * tracer above keeps it as a constant). */
  Tensor lift(const Tensor& literal) override;
  /** True when every tensor argument is already fake (handle() is dispatch_meta). */
  bool only_propagates(std::span<const Value> args) const override;

 private:
  Value convert(const Value& v, ops::OpKind op, std::string_view arg);

  FakeModeOptions options_;
  struct Memo {
    uint64_t real;  // the real impl's id
    Tensor fake;
  };
  PoolMap<const TensorImpl*, Memo> tensors_;
  struct StorageMemo {
    std::weak_ptr<StorageImpl> real;
    Storage fake;
  };
  PoolMap<const StorageImpl*, StorageMemo> storages_;
  DevicePolicyGuard policy_;
  ModeGuard guard_;  // last: pushed after everything else is ready
};

}  // namespace kiln

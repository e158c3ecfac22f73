#pragma once
// Note [Scope guards]
// kiln's guards (DeviceGuard, StreamGuard, NoGradGuard, NumThreadsGuard, ModeGuard, ...)
// set some state for a C++ scope and put the previous state back when the scope ends,
// exceptions included. Each derives from ScopeGuard, which makes it neither copyable nor
// movable: a copy would put the state back twice.

namespace kiln {

class ScopeGuard {
 public:
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 protected:
  ScopeGuard() = default;
  ~ScopeGuard() = default;
};

}  // namespace kiln

#pragma once
// Library handles (cuBLAS) pooled per (device, thread).
//
// A handle is not thread-safe, and creating one costs far more than a kernel launch,
// so each thread gets its own handle per device, created on first use and kept. When a
// thread exits, its handles go back to the pool and the next thread that asks for the
// same device reuses them. The handle is bound to the caller's current stream at each
// use (cublasSetStream), not at creation: D5.

#include <functional>
#include <memory>
#include <string>

#include "kiln/core/device.h"

namespace kiln {

class HandlePool {
 public:
  using Create = std::function<void*(Device)>;
  /** `name` is used in D8 errors ("cuBLAS handle"); `create` makes a handle for a
   * device (with that device current). Pools live as long as the process. */
  HandlePool(std::string name, Create create);
  ~HandlePool();
  HandlePool(const HandlePool&) = delete;
  HandlePool& operator=(const HandlePool&) = delete;

  /** This thread's handle for `device`. Inside a kernel, `device` must be the
   * kernel's device (D8). */
  void* acquire(Device device);
  /** Handles created so far for `device`, and how many are parked for reuse. */
  int created(Device device) const;
  int available(Device device) const;

  struct State;

 private:
  std::string name_;
  std::shared_ptr<State> state_;
};

/** (D5) Whether f32 matmuls may use TF32 tensor cores (10-bit mantissa inputs, f32
 * accumulation). Off by default: f32 means f32 unless the user opts in, as with
 * torch.backends.cuda.matmul.allow_tf32 = False. The CPU backend ignores it. */
bool allow_tf32();
void set_allow_tf32(bool allow);

}  // namespace kiln

#pragma once
// A lock for critical sections of a few instructions.

#include <atomic>
#include <thread>

namespace kiln {

/** For critical sections of a few instructions that never block. Taking it is one
 * atomic exchange and releasing it a plain store, where std::mutex pays a locked
 * instruction each way; contended, it spins on a plain load for a while, then yields the
 * core. Satisfies Lockable (std::lock_guard, std::unique_lock). */
class SpinLock {
 public:
  void lock() noexcept {
    while (flag_.exchange(true, std::memory_order_acquire)) {
      for (int spins = 0; flag_.load(std::memory_order_relaxed); ++spins) {
        if (spins < 64)
          pause();
        else
          std::this_thread::yield();
      }
    }
  }
  bool try_lock() noexcept {
    return !flag_.load(std::memory_order_relaxed) &&
           !flag_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { flag_.store(false, std::memory_order_release); }

 private:
  static void pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  std::atomic<bool> flag_{false};
};

}  // namespace kiln

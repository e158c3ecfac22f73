#pragma once
// Generator: a seeded, reproducible random stream (one per device).

#include <cstdint>
#include <mutex>

namespace kiln {

/** xoshiro256** seeded through splitmix64; uniform and normal draws are computed
 * here (not by <random>'s distributions) so results are the same on every platform. */
class Generator {
 public:
  explicit Generator(uint64_t seed = kDefaultSeed) { manual_seed(seed); }
  static constexpr uint64_t kDefaultSeed = 67280421310721ull;

  void manual_seed(uint64_t seed);
  uint64_t seed() const { return seed_; }
  uint64_t next_u64();
  /** Uniform in [0, 1) with 53 random bits. */
  double uniform();
  /** Standard normal (Box-Muller). */
  double normal();
  /** Callers drawing many numbers hold this lock. */
  std::mutex& mutex() { return mu_; }

 private:
  uint64_t seed_ = 0;
  uint64_t s_[4] = {};
  std::mutex mu_;
};

}  // namespace kiln

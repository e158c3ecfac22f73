#include "kiln/device/threads.h"

#include <sched.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

#include "kiln/core/error.h"

namespace kiln {

namespace {

// How many processes of one job share this machine, as the launcher says: OpenMPI's
// mpirun, MPICH's Hydra, torchrun-style launchers. 1 outside a launcher or when the value
// is not a positive integer.
int local_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "LOCAL_WORLD_SIZE"}) {
    const char* env = std::getenv(name);
    if (!env || !*env) continue;
    char* end = nullptr;
    long n = std::strtol(env, &end, 10);
    if (*end == '\0' && n >= 1 && n <= 1 << 20) return static_cast<int>(n);
  }
  return 1;
}

// The CPUs this process may run on (its affinity mask: a container's or taskset's limit).
int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// KILN_NUM_THREADS, read once; a malformed value is kept as an error for the first use
// (as KILN_CPU_DEVICES), the budget then being the default. The default is the hardware
// threads shared among the job's processes on this machine (at least 1 each): ranks that
// each took every core would run cores x ranks threads and wait on each other's spinning
// teams (torchrun likewise sets one thread per rank).
struct EnvBudget {
  int threads = std::max(
      1, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) / local_ranks());
  std::string error;
};

const EnvBudget& env_budget() {
  static const EnvBudget b = [] {
    EnvBudget r;
    if (const char* env = std::getenv("KILN_NUM_THREADS"); env && *env) {
      // More threads than CPUs only queue behind each other (and spin at every barrier).
      int cpus = usable_cpus();
      char* end = nullptr;
      long n = std::strtol(env, &end, 10);
      if (*end == '\0' && n >= 1 && n <= cpus)
        r.threads = static_cast<int>(n);
      else
        r.error = fmt::format(
            "KILN_NUM_THREADS must be an integer in 1..{} (the CPUs this process may run on), got "
            "'{}'",
            cpus, env);
    }
    return r;
  }();
  return b;
}

std::atomic<int>& process_budget() {
  static std::atomic<int> n{env_budget().threads};
  return n;
}

// Per-device budgets of the first virtual CPU devices (more are rare; they share the
// process budget).
constexpr int kMaxBudgets = 64;
std::array<std::atomic<int>, kMaxBudgets>& device_budgets() {
  static std::array<std::atomic<int>, kMaxBudgets> b{};
  return b;
}

}  // namespace

void set_num_threads(int n) {
  KILN_CHECK(n >= 1, value, "[set_num_threads] needs at least 1 thread, got {}", n);
  process_budget().store(n, std::memory_order_relaxed);
}

int get_num_threads() {
  if (!env_budget().error.empty()) [[unlikely]]
    fail(ErrorKind::value, "{}", env_budget().error);
  return process_budget().load(std::memory_order_relaxed);
}

void set_num_threads(Device device, int n) {
  KILN_CHECK(device.type == DeviceType::cpu && device.index >= 0, value,
             "[set_num_threads] per-device budgets are for CPU devices with an index, got {}",
             device);
  KILN_CHECK(device.index < kMaxBudgets, value,
             "[set_num_threads] per-device budgets cover cpu:0..cpu:{}, got {}", kMaxBudgets - 1,
             device);
  KILN_CHECK(n >= 0, value,
             "[set_num_threads] needs 0 (the process budget) or more threads, got {}", n);
  device_budgets()[static_cast<size_t>(device.index)].store(n, std::memory_order_relaxed);
}

int get_num_threads(Device device) {
  if (device.type == DeviceType::cpu && device.index >= 0 && device.index < kMaxBudgets) {
    int n = device_budgets()[static_cast<size_t>(device.index)].load(std::memory_order_relaxed);
    if (n > 0) return n;
  }
  return get_num_threads();
}

}  // namespace kiln

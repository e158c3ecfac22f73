#include "kiln/backend/cpu/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "kiln/device/kernel_scope.h"
#include "kiln/device/threads.h"

#if KILN_WITH_OPENMP
#include <omp.h>
#endif

namespace kiln::cpu {

// Note [Intra-op thread pool]
// Kernels split their loops over kiln's own pool rather than an OpenMP team. An OpenMP
// team (GNU's) waits at every region's end by spinning, and splits work into one fixed
// slice per thread: when another process takes one of the cores, a whole region waits
// for the descheduled thread's slice, while the other threads burn their core spinning,
// and a forward pass of a few hundred small regions ran 3-36x slower than on one thread.
// The pool does three things instead:
//  - a region is cut into more chunks than threads (kChunksPerThread), claimed one at a
//    time from a shared counter, the calling thread included: a thread that is not
//    running claims nothing, and the others take its share;
//  - an idle worker spins only briefly (kSpin), then sleeps on a futex (atomic wait), so
//    it gives its core back to whoever else wants it;
//  - one region at a time: a second thread that asks while one runs (virtual devices
//    driven from several host threads, CPU side streams) runs its loop alone;
//  - when a region's caller had to wait long for a thread that lost its core, the next
//    regions (for kSerialFor) run on the caller alone, then the pool is tried again.
// The claim counter carries the region's number in its high half, so a worker that
// wakes late for an old region can never claim a chunk of the next. Chunk boundaries
// depend only on n and the chunk count, and kernels are written so that their results
// do not depend on which thread runs a chunk (Note [Intra-op threads]).
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kChunksPerThread = 4;
constexpr auto kSpin = std::chrono::microseconds(200);
// A region whose caller waited this long for other threads (and longer than its own
// share took) had a thread without a core: later regions run on the caller alone for
// kSerialFor, then the pool is tried again (a budget that follows the machine's load).
constexpr auto kStraggler = std::chrono::microseconds(500);
constexpr auto kSerialFor = std::chrono::milliseconds(200);
std::atomic<Clock::rep> g_serial_until{0};

thread_local bool t_in_region = false;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Spins for at most kSpin while `ready()` is false; true once it is.
template <typename F>
bool spin_until(F ready) {
  auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) return false;
  }
}

class Pool {
 public:
  // Runs fn over [0, n) on up to `threads` threads (the caller one of them).
  void run(int threads, int64_t n, detail::ChunkFn fn, void* ctx, int64_t chunks) {
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) {  // another thread's region is running: this one runs alone
      fn(ctx, 0, n);
      return;
    }
    grow(threads - 1);
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    chunks_.store(chunks, std::memory_order_relaxed);
    helpers_ = threads - 1;
    error_ = nullptr;
    done_.store(0, std::memory_order_relaxed);
    uint64_t region = ++region_;
    claim_.store(region << 32, std::memory_order_seq_cst);  // publishes the fields above
    if (sleepers_.load(std::memory_order_seq_cst) > 0) claim_.notify_all();

    auto t0 = Clock::now();
    t_in_region = true;
    work(region);
    t_in_region = false;
    // Wait for the chunks other threads claimed.
    auto t1 = Clock::now();
    auto finished = [&] { return done_.load(std::memory_order_acquire) == chunks; };
    if (!spin_until(finished))
      for (int64_t d = done_.load(std::memory_order_acquire); d != chunks; d = done_.load(std::memory_order_acquire))
        done_.wait(d, std::memory_order_acquire);
    // A straggler: a thread holding a chunk lost its core (another process runs there).
    // Regions stay on the calling thread for a while, then try again.
    auto waited = Clock::now() - t1;
    if (waited > kStraggler && waited > t1 - t0)
      g_serial_until.store((Clock::now() + kSerialFor).time_since_epoch().count(), std::memory_order_relaxed);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // Claims and runs chunks of region `region` until none is left.
  void work(uint64_t region) {
    for (;;) {
      uint64_t c = claim_.load(std::memory_order_acquire);
      // chunks_ may already be the next region's (atomic: a stale read only makes the
      // exchange below fail, as the claim word has moved on too).
      do {
        if (c >> 32 != region || static_cast<int64_t>(c & 0xffffffffu) >= chunks_.load(std::memory_order_relaxed))
          return;
      } while (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel));
      // The region's fields stay valid: it cannot end before this chunk is done.
      int64_t k = static_cast<int64_t>(c & 0xffffffffu), chunks = chunks_.load(std::memory_order_relaxed);
      int64_t begin = n_ * k / chunks, end = n_ * (k + 1) / chunks;
      try {
        fn_(ctx_, begin, end);
      } catch (...) {  // kept, rethrown by the caller: exceptions must not leave a worker
        std::lock_guard g(error_mu_);
        if (!error_) error_ = std::current_exception();
      }
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) done_.notify_one();
    }
  }

  void worker(int index) {
    t_in_region = true;  // a kernel inside a chunk never starts a region of its own
    uint64_t seen = 0;
    for (;;) {
      auto moved = [&] { return claim_.load(std::memory_order_acquire) >> 32 != seen; };
      if (!spin_until(moved)) {
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        for (uint64_t c = claim_.load(std::memory_order_seq_cst); c >> 32 == seen;
             c = claim_.load(std::memory_order_seq_cst))
          claim_.wait(c, std::memory_order_seq_cst);
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      }
      seen = claim_.load(std::memory_order_acquire) >> 32;
      if (index < helpers_.load(std::memory_order_relaxed)) work(seen);
    }
  }

  // Starts workers until there are `want` (they live as long as the process).
  void grow(int want) {
    while (static_cast<int>(workers_) < want) {
      int index = static_cast<int>(workers_++);
      std::thread([this, index] { worker(index); }).detach();
    }
  }

  std::mutex mu_;  // one region at a time
  size_t workers_ = 0;
  uint64_t region_ = 0;
  std::atomic<uint64_t> claim_{0};  // region << 32 | next chunk
  std::atomic<int64_t> done_{0};    // chunks finished
  std::atomic<int> sleepers_{0};
  std::atomic<int> helpers_{0};     // workers taking part in the current region
  detail::ChunkFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  std::atomic<int64_t> chunks_{0};
  std::mutex error_mu_;
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: detached workers may still wait on it at exit
  return *p;
}

}  // namespace

int kernel_threads() {
  const KernelFrame* k = current_kernel();
  return k ? get_num_threads(k->device) : get_num_threads();
}

int detail::threads_for_large(int64_t work, int64_t grain) {
  if (work < 2 * grain || t_in_region) return 1;
  int budget = kernel_threads();
  if (budget <= 1) return 1;
  if (Clock::now().time_since_epoch().count() < g_serial_until.load(std::memory_order_relaxed)) return 1;
  return static_cast<int>(std::min<int64_t>(budget, work / grain));
}

void use_one_openmp_thread() {
#if KILN_WITH_OPENMP
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);
#endif
}

namespace detail {

void run_parallel(int threads, int64_t n, ChunkFn fn, void* ctx, int64_t chunks) {
  pool().run(threads, n, fn, ctx, chunks > 0 ? chunks : std::min<int64_t>(n, int64_t{threads} * kChunksPerThread));
}

}  // namespace detail

}  // namespace kiln::cpu

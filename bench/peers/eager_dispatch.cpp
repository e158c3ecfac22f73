// libtorch C++ on kiln's BM_TinyAdd and BM_TinyAddMeta: at::add of two f32[8] tensors per
// call (a fresh result each time), on the CPU and on the meta device (shapes only), one
// thread. Prints one JSON line per case, the median over REPS repetitions of ITERS calls in
// ns/call. Built by bench/run_bench.py against the libtorch of the PyTorch peer:
//   eager_dispatch_cpp [ITERS] [REPS]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

template <typename F>
void report(const char* name, long iters, int reps, F&& call) {
  for (long i = 0; i < 2000; ++i) call();  // warm-up
  std::vector<double> ns;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < iters; ++i) call();
    auto t1 = std::chrono::steady_clock::now();
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / double(iters));
  }
  std::sort(ns.begin(), ns.end());
  std::printf(
      "{\"bench\": \"eager_dispatch\", \"case\": \"%s\", \"unit\": \"ns/call\", \"median\": %.1f, "
      "\"min\": %.1f, \"max\": %.1f}\n",
      name, ns[ns.size() / 2], ns.front(), ns.back());
}

}  // namespace

int main(int argc, char** argv) {
  long iters = argc > 1 ? std::atol(argv[1]) : 100000;
  int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  at::set_num_threads(1);
  at::Tensor a = at::randn({8}), b = at::randn({8});
  report("at::add(a,b)  [a+b, allocates]", iters, reps, [&] { at::Tensor r = at::add(a, b); });
  at::Tensor ma = at::empty({8}, at::TensorOptions().device(at::kMeta));
  at::Tensor mb = at::empty({8}, at::TensorOptions().device(at::kMeta));
  report("meta: at::add(a,b) [8]", iters, reps, [&] { at::Tensor r = at::add(ma, mb); });
}

// libtorch C++ on kiln's BM_TinyAddBackward: a + b with `a` requiring grad, forward then
// backward with a given gradient, per call. Prints one JSON line (median over REPS
// repetitions of ITERS calls). Built by bench/run_bench.py against the PyTorch peer's own
// libtorch (the PyPI wheel's headers and libraries, or Debian's libtorch-dev without it).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  long iters = argc > 1 ? std::atol(argv[1]) : 50000;
  int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  at::set_num_threads(1);
  torch::Tensor a = torch::randn({8}, torch::requires_grad());
  torch::Tensor b = torch::randn({8}), g = torch::ones({8});
  auto body = [&](long n) {
    for (long i = 0; i < n; ++i) {
      torch::Tensor r = a + b;
      r.backward(g);
    }
  };
  body(2000);  // warm-up
  std::vector<double> ns;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    body(iters);
    auto t1 = std::chrono::steady_clock::now();
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / double(iters));
  }
  std::sort(ns.begin(), ns.end());
  std::printf(
      "{\"bench\": \"autograd_peer\", \"case\": \"a+b requires_grad fwd+bwd\", \"unit\": "
      "\"ns/call\", \"median\": %.1f, \"min\": %.1f, \"max\": %.1f}\n",
      ns[ns.size() / 2], ns.front(), ns.back());
}

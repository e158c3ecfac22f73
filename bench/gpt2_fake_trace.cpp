// Peak resident memory while fake-tracing a GPT-2-small-sized model (124M parameters:
// vocab 50257, context 1024, 12 blocks of width 768, 12 heads) for cuda:0 on a machine
// without CUDA. Prints one JSON line. Run: ./build/bench/kiln_gpt2_fake_trace
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "models.h"

namespace {

long vm_hwm_kib() {  // peak resident set size so far
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

}  // namespace

int main() {
  using namespace kiln;
  long before = vm_hwm_kib();
  int64_t params = 0;
  size_t nodes = 0;
  {
    FakeMode fake;
    Device gpu("cuda:0");
    const int64_t V = 50257, T = 1024, C = 768, L = 12;
    Tensor wte = empty({V, C}, {.device = gpu}), wpe = empty({T, C}, {.device = gpu});
    std::vector<bench::Block> blocks;
    for (int i = 0; i < L; ++i) blocks.emplace_back(gpu, C, 12, 4 * C);
    Tensor lnf_w = empty({C}, {.device = gpu}), lnf_b = empty({C}, {.device = gpu});
    TensorList inputs = {empty({1, T}, {.dtype = i64, .device = gpu}), wte, wpe, lnf_w, lnf_b};
    for (const auto& b : blocks)
      for (const Tensor& p : b.params()) inputs.push_back(p);
    for (size_t i = 1; i < inputs.size(); ++i) params += inputs[i].numel();
    auto fn = [&](const TensorList& in) {
      Tensor pos = arange(0, T, 1, {.device = gpu});
      Tensor x = add(embedding(in[1], in[0]), embedding(in[2], pos));
      size_t at = 5;
      for (int i = 0; i < L; ++i) {
        bench::Block b = blocks[i];
        b.load(in, at);
        at += b.params().size();
        x = b.forward(x);
      }
      x = layer_norm(x, {C}, in[3], in[4]);
      return TensorList{matmul(x, transpose(in[1], 0, 1))};  // tied output projection
    };
    ir::Graph g = make_fx(fn, inputs);
    nodes = g.size();
  }
  long after = vm_hwm_kib();
  std::printf(
      "{\"bench\": \"gpt2_fake_trace\", \"params\": %lld, \"param_bytes_f32_MB\": %.1f, "
      "\"graph_nodes\": %zu, \"peak_rss_before_MB\": %.1f, \"peak_rss_after_MB\": %.1f, "
      "\"peak_rss_increase_MB\": %.1f}\n",
      static_cast<long long>(params), params * 4 / 1048576.0, nodes, before / 1024.0,
      after / 1024.0, (after - before) / 1024.0);
  return 0;
}

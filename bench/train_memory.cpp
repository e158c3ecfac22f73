// Peak extra resident memory of one training step of the benchmark BLOCK (or MLP) in a
// fresh process, measured as bench/train_peer.py --memory measures PyTorch: VmHWM after
// the step minus VmRSS before it (/proc/self/clear_refs resets the high-water mark).
// Also reports the allocator's own peak above its baseline. One JSON line.
//   kiln_train_memory [block|mlp] [eager|program|forward]
// `program`: the step as one exported train-step program run by the executor (its
// planned buffers are allocated by the first run, which is the step measured).
// `forward`: no training; the inference program's first run (planned buffers included),
// against bench/train_peer.py --forward-memory (PyTorch's eager forward, no_grad).
#include <cblas.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

#include "kiln/kiln.h"

namespace {
long status_kib(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace kiln;
  std::string name = argc > 1 ? argv[1] : "block";
  std::string mode = argc > 2 ? argv[2] : "eager";
  bool program = mode == "program", forward = mode == "forward";
  kiln::set_num_threads(1);
  manual_seed(0);
  auto ref = nn::make_reference_model(name);
  Tensor x = ref.example_inputs[0], target = randn_like(x);
  TensorList params;
  for (auto& [k, p] : ref.module->named_parameters()) params.push_back(p);
  nn::SGD opt(params, {.lr = 1e-3, .momentum = 0.9});
  std::optional<ExportedProgram> p;
  std::optional<runtime::Executor> exec;
  if (forward) {
    ref.module->eval();
    p.emplace(export_program(*ref.module, {x}));
    exec.emplace(*p);
  } else if (program) {
    p.emplace(export_train_step(
        *ref.module, [](nn::Module& m, const TensorList& b) { return nn::mse_loss(m(b[0]), b[1]); },
        {x, target}, {.optimizer = nn::SGDOptions{.lr = 1e-3, .momentum = 0.9}}));
    exec.emplace(*p);
  }
  Device d("cpu:0");
  device_allocator(d).reset_peak();
  int64_t base = allocator_stats(d).bytes_in_use;
  std::ofstream("/proc/self/clear_refs") << "5";
  long before = status_kib("VmRSS");
  if (forward) {
    exec->run({x});
  } else if (program) {
    exec->run({x, target});
  } else {
    opt.zero_grad();
    nn::mse_loss((*ref.module)(x), target).backward();
    opt.step();
  }
  long peak = status_kib("VmHWM");
  std::string what = forward ? " forward program" : program ? " train step program" : " train step";
  std::printf(
      "{\"bench\": \"kiln_train_memory\", \"case\": \"%s%s peak extra RSS\", "
      "\"unit\": \"MiB\", \"median\": %.2f, \"allocator_peak_MiB\": %.2f, "
      "\"planned_MiB\": %.2f}\n",
      name.c_str(), what.c_str(), (peak - before) / 1024.0,
      static_cast<double>(allocator_stats(d).peak_bytes - base) / 1048576.0,
      exec ? static_cast<double>(exec->stats().planned_bytes) / 1048576.0 : 0.0);
}

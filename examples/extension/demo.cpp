// kx::gated_mlp end to end: traced for cuda:0 with fake tensors (no GPU needed),
// exported, saved, loaded onto cpu:1, run by the executor, and compared with eager.
// Exit status 0 when the program's output equals eager's.
#include <cstdio>
#include <string>

#include "gated_mlp.h"

using namespace kiln;

// Usage: kx_demo [PROGRAM]: with a path, the program is kept there (for kx-kiln show/run).
int main(int argc, char** argv) {
  bool keep = argc > 1;
  std::string path = keep ? argv[1] : "gated_mlp.kiln";
  kx::register_ops();
  try {
    autograd::NoGradGuard no_grad;
    kx::GatedMLP model(/*dim=*/16, /*hidden=*/48, /*out=*/16, /*max_rows=*/8, Device("cpu:1"));
    Tensor x = randn({8, 16}, {.device = Device("cpu:1")});
    Tensor eager = model(x);

    ExportedProgram traced = export_program(model, {x}, {.device = Device("cuda:0")});
    std::printf("%s\n", traced.graph.str().c_str());
    save(traced, path);

    ExportedProgram loaded = load_program(path, {{Device("cuda:0"), Device("cpu:1")}});
    runtime::Executor executor(loaded);
    Tensor ran = executor.run({x})[0];
    double diff = item<double>(max(abs(ran - eager)));
    std::printf("traced for cuda:0, ran on %s: max |program - eager| = %g\n",
                ran.device().str().c_str(), diff);
    if (!keep) std::remove(path.c_str());
    return diff <= 1e-6 ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    std::remove(path.c_str());
    return 1;
  }
}

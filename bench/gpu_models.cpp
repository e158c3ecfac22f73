// GPU model benchmark (issue #9): the reference MLP and a GPT forward on cuda:0, kiln
// eager and kiln's exported program (traced with fake tensors, run by the executor).
// Writes the weights, the input and kiln's output to a safetensors file so that
// bench/gpu_peer.py runs PyTorch eager on identical work and compares the numbers.
//
//   kiln_gpu_models OUT_DIR [REPS] [DEVICE]   (one JSON line per measurement)
//
// DEVICE defaults to cuda:0; a CPU device runs the same pipeline with the small default
// GPT, which is how the script pair is checked on machines without a GPU.
#include <chrono>
#include <cstdio>
#include <string>

#include "kiln/kiln.h"

using namespace kiln;

namespace {

Device kGpu("cuda:0");

template <typename F>
double ms_per_call(F&& f, int reps) {
  for (int i = 0; i < 3; ++i) f();  // warm-up: caches, cuBLAS heuristics, memory plan
  synchronize_device(kGpu);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  synchronize_device(kGpu);
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(t1 - t0).count() / reps;
}

struct Case {
  std::string name;  // the reference model
  nn::ModelConfig config;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR [REPS]\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  int reps = argc > 2 ? std::atoi(argv[2]) : 50;
  if (argc > 3) kGpu = Device(argv[3]);
  if (kGpu.type == DeviceType::cuda && device_count(DeviceType::cuda) == 0) {
    std::printf("{\"skipped\": \"no CUDA device\"}\n");
    return 0;
  }
  // mlp: the benchmark MLP; gpt: GPT-2-small-sized blocks (12 x 768, 12 heads), 8 x 256 tokens.
  std::vector<Case> cases = {{"mlp", {}},
                             {"gpt",
                              {{"vocab", 50304},
                               {"context", 1024},
                               {"layers", 12},
                               {"heads", 12},
                               {"width", 768},
                               {"batch", 8},
                               {"seq", 256}}}};
  if (kGpu.is_cpu()) cases[1].config = {};
  for (const Case& c : cases) {
    nn::ReferenceModel ref = nn::make_reference_model(c.name, c.config, 1);
    ref.module->eval();
    nn::StateDict state = ref.module->state_dict();
    ref.module->to(kGpu);
    TensorList inputs;
    for (const Tensor& t : ref.example_inputs) inputs.push_back(to(t, kGpu));

    Tensor out;
    autograd::NoGradGuard no_grad;  // inference, as the peer's torch.no_grad
    double eager = ms_per_call([&] { out = (*ref.module)(inputs)[0]; }, reps);
    std::printf("{\"model\": \"%s\", \"impl\": \"kiln eager\", \"device\": \"%s\", \"ms\": %.4f}\n",
                c.name.c_str(), kGpu.str().c_str(), eager);

    ExportedProgram p = export_program(*ref.module, inputs, {.device = kGpu});
    runtime::Executor exec(p);
    Tensor pout;
    double program = ms_per_call([&] { pout = exec.run(inputs)[0]; }, reps);
    double diff = to_vector<double>(amax(abs(sub(pout, out)), {}))[0];
    std::printf(
        "{\"model\": \"%s\", \"impl\": \"kiln program\", \"ms\": %.4f, "
        "\"max_abs_diff_vs_eager\": %.3g}\n",
        c.name.c_str(), program, diff);
    std::fflush(stdout);

    NamedTensors file = state;
    file.emplace_back("__input__", ref.example_inputs[0]);
    file.emplace_back("__output__", to(out, Device("cpu:0")));
    if (auto* gpt = dynamic_cast<nn::GPT*>(ref.module.get()))
      file.emplace_back("__heads__", full({1}, Scalar(gpt->config.heads), {.dtype = i64}));
    save_safetensors(file, dir + "/" + c.name + ".safetensors");
  }
  return 0;
}

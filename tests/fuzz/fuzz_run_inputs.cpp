// `kiln run --inputs FILE`: a fixed program run on fuzzed input files. Set
// KILN_FUZZ_SEED_DIR to have a valid inputs file written there first (the seed corpus).
#include <cstdlib>

#include "fuzz_util.h"

namespace {
kiln::ExportedProgram* g_program;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::nn::ReferenceModel ref =
      kiln::nn::make_reference_model("mlp", {{"batch", 2}, {"width", 8}, {"layers", 2}});
  g_program = new kiln::ExportedProgram(kiln::export_program(*ref.module, ref.example_inputs));
  if (const char* dir = std::getenv("KILN_FUZZ_SEED_DIR"))
    kiln::save_safetensors({{"input_0", ref.example_inputs[0]}},
                           std::string(dir) + "/inputs.safetensors");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::MemFile file(data, size);
  kiln::fuzz::expect_clean([&] {
    kiln::TensorList inputs = kiln::load_inputs(*g_program, file.path());
    kiln::runtime::Executor exec(*g_program);
    exec.run(inputs);
  });
  return 0;
}

// safetensors files as raw bytes: every tensor read back must be fully readable.
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::MemFile file(data, size);
  kiln::fuzz::expect_clean([&] {
    for (const auto& [name, t] : kiln::load_safetensors(file.path()))
      if (t.numel() > 0 && t.numel() < (1 << 20)) (void)kiln::to_vector<double>(t);
  });
  return 0;
}

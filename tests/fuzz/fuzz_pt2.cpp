// .pt2 archives as raw bytes: the zip reader, the payload configs, the program JSON and
// the interpretation under capture, all from bytes in memory.
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::expect_clean(
      [&] { kiln::read_pt2(std::span<const unsigned char>(data, size), "fuzz.pt2"); });
  return 0;
}

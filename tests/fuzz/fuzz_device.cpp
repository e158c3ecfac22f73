// Device strings: parse, print, resolve; a parsed device prints back to what parses again.
#include <string_view>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::fuzz::expect_clean([&] {
    kiln::Device d(text);
    if (kiln::Device(d.str()) != d) __builtin_trap();
    (void)kiln::resolve_device(d);
  });
  return 0;
}

// Device strings: parse, print, resolve; a parsed device prints back to what parses to
// the same device (meta prints without its index, as kiln always has).
#include <string_view>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::fuzz::expect_clean([&] {
    kiln::Device d(text);
    kiln::Device again(d.str());
    if (again.type != d.type || (d.type != kiln::DeviceType::meta && again != d)) __builtin_trap();
    (void)kiln::resolve_device(d);
  });
  return 0;
}

// Program files as raw bytes: read, then retarget every device to cpu:0.
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::read_and_retarget(data, size);
  return 0;
}

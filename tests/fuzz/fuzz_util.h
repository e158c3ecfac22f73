#pragma once
// Shared by kiln's libFuzzer targets: inputs as files, and the one rule every target
// checks -- a call either succeeds or throws kiln::Error. Any other exception escapes
// LLVMFuzzerTestOneInput and libFuzzer reports it as a crash, as it does sanitizer reports.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "kiln/kiln.h"

namespace kiln::fuzz {

/** The bytes as a file the loader can open by path (an anonymous in-memory file). */
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) : fd_(memfd_create("kiln-fuzz", 0)) {
    for (size_t at = 0; at < size;) {
      ssize_t n = ::write(fd_, data + at, size - at);
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
  }
  ~MemFile() { ::close(fd_); }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

/** Runs `f`, accepting success or a kiln::Error. */
template <typename F>
void expect_clean(F&& f) {
  try {
    f();
  } catch (const Error&) {
  }
}

/** The program loader's path as `kiln run` takes it: read the file, then retarget every
 * device to cpu:0 (moves state, re-creates workspaces, verifies the graph). */
inline void read_and_retarget(const uint8_t* data, size_t size) {
  MemFile file(data, size);
  expect_clean([&] {
    ExportedProgram p = read_program(file.path());
    DeviceMap map;
    for (Device d : p.devices()) map.emplace_back(d, Device("cpu:0"));
    move_to_device(p, map);
  });
}

}  // namespace kiln::fuzz

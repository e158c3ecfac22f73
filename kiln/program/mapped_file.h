#pragma once
// A whole file mapped into memory, privately: tensors may point into it (zero-copy
// weights), and writes to them never reach the file.

#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace kiln {

struct MappedFile {
  void* data = nullptr;
  size_t size = 0;
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();
  std::span<const unsigned char> bytes() const {
    return {static_cast<const unsigned char*>(data), size};
  }
};

/** Maps `path` (a regular file only: a FIFO or a directory is a format Error, never a
 * wait); `what` names the caller in errors ("load", "import"). */
std::shared_ptr<MappedFile> map_file(const std::string& path, std::string_view what = "load");

}  // namespace kiln

#pragma once
// The zip archive of a .pt2 file (torch.export.save), read with minizip over a mapping of
// the file: stored entries are spans of the mapping (weights are not copied), deflated
// ones are inflated once on first read. Every offset and size is checked against the
// file before use (I1).

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/program/mapped_file.h"

namespace kiln::interop {

class Archive {
 public:
  /** Maps and indexes `path`; a format Error names the file and what is wrong. */
  static Archive open(const std::string& path);
  /** The same over bytes in memory (`bytes` must outlive the archive); `name` is used in
   * errors. The fuzzer's way in. */
  static Archive from_bytes(std::span<const unsigned char> bytes, std::string name);

  /** The folder every entry lives under: the stem of the file when torch wrote it. */
  const std::string& root() const { return root_; }
  const std::string& name() const { return name_; }
  /** Whether `<root>/<path>` is in the archive. */
  bool has(const std::string& path) const { return entries_.count(path) != 0; }
  /** The bytes of `<root>/<path>`; a format Error when it is missing. */
  std::span<const unsigned char> bytes(const std::string& path) const;
  std::string text(const std::string& path) const;
  /** The entries directly or indirectly under `folder` (relative to the root). */
  std::vector<std::string> list(const std::string& folder) const;
  /** What keeps the bytes of `<root>/<path>` alive, for tensors that view them: the
   * mapped file for a stored entry, the inflated copy for a deflated one; null when the
   * archive was read from bytes it does not own. */
  std::shared_ptr<const void> owner(const std::string& path) const;

 private:
  struct Entry {
    uint64_t offset = 0;  // of the data in the file (stored entries)
    uint64_t size = 0;    // uncompressed
    bool stored = true;
    std::shared_ptr<std::vector<unsigned char>> inflated;  // deflated entries, once read
  };
  void index(std::span<const unsigned char> file);

  std::string name_, root_;
  std::span<const unsigned char> file_;
  std::shared_ptr<const void> owner_;
  std::map<std::string, Entry> entries_;  // by path under the root
};

}  // namespace kiln::interop

#pragma once
// Reading and writing zip archives in tests (minizip): crafted .pt2 files are real
// archives with one entry changed.

#include <minizip/unzip.h>
#include <minizip/zip.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kiln::testing {

using ZipEntries = std::vector<std::pair<std::string, std::string>>;  // name, bytes

inline ZipEntries read_zip(const std::string& path) {
  ZipEntries out;
  unzFile z = unzOpen64(path.c_str());
  if (!z) throw std::runtime_error("cannot open " + path);
  for (int rc = unzGoToFirstFile(z); rc == UNZ_OK; rc = unzGoToNextFile(z)) {
    char name[1024];
    unz_file_info64 info{};
    unzGetCurrentFileInfo64(z, &info, name, sizeof name, nullptr, 0, nullptr, 0);
    std::string bytes(info.uncompressed_size, '\0');
    unzOpenCurrentFile(z);
    if (!bytes.empty()) unzReadCurrentFile(z, bytes.data(), static_cast<unsigned>(bytes.size()));
    unzCloseCurrentFile(z);
    out.emplace_back(name, std::move(bytes));
  }
  unzClose(z);
  return out;
}

/** Writes `entries` as stored (uncompressed) entries, as torch.export.save does, or
 * deflated. */
inline void write_zip(const std::string& path, const ZipEntries& entries, bool deflate = false) {
  zipFile z = zipOpen64(path.c_str(), APPEND_STATUS_CREATE);
  if (!z) throw std::runtime_error("cannot create " + path);
  for (const auto& [name, bytes] : entries) {
    zip_fileinfo info{};
    zipOpenNewFileInZip64(z, name.c_str(), &info, nullptr, 0, nullptr, 0, nullptr,
                          deflate ? Z_DEFLATED : 0, deflate ? Z_DEFAULT_COMPRESSION : 0, 1);
    zipWriteInFileInZip(z, bytes.data(), static_cast<unsigned>(bytes.size()));
    zipCloseFileInZip(z);
  }
  zipClose(z, nullptr);
}

/** `src` rewritten to `dst` with `edit(name, bytes)` applied to every entry (names are
 * full paths, root folder included); an edit returning false drops the entry. */
inline void rewrite_zip(const std::string& src, const std::string& dst,
                        const std::function<bool(const std::string&, std::string&)>& edit) {
  ZipEntries kept;
  for (auto& [name, bytes] : read_zip(src))
    if (edit(name, bytes)) kept.emplace_back(name, bytes);
  write_zip(dst, kept);
}

}  // namespace kiln::testing

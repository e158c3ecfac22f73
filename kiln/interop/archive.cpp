#include "kiln/interop/archive.h"

#include <minizip/unzip.h>

#include <algorithm>
#include <cstring>

#include "kiln/core/error.h"

namespace kiln::interop {
namespace {

[[noreturn]] void bad(const std::string& name, const std::string& what) {
  fail(ErrorKind::format, "[import] {}: {}", name, what);
}

// minizip reads through these callbacks: a cursor over bytes in memory (a mapped file or
// a fuzzer's input), so one code path serves both and nothing is read twice from disk.
struct Cursor {
  std::span<const unsigned char> bytes;
  uint64_t pos = 0;
};

voidpf cursor_open(voidpf opaque, const void*, int) { return opaque; }
uLong cursor_read(voidpf, voidpf stream, void* buf, uLong size) {
  auto* c = static_cast<Cursor*>(stream);
  uint64_t n = c->pos >= c->bytes.size() ? 0 : std::min<uint64_t>(size, c->bytes.size() - c->pos);
  if (n) std::memcpy(buf, c->bytes.data() + c->pos, n);
  c->pos += n;
  return static_cast<uLong>(n);
}
uLong cursor_write(voidpf, voidpf, const void*, uLong) { return 0; }
ZPOS64_T cursor_tell(voidpf, voidpf stream) { return static_cast<Cursor*>(stream)->pos; }
long cursor_seek(voidpf, voidpf stream, ZPOS64_T offset, int origin) {
  auto* c = static_cast<Cursor*>(stream);
  uint64_t base = origin == ZLIB_FILEFUNC_SEEK_SET   ? 0
                  : origin == ZLIB_FILEFUNC_SEEK_CUR ? c->pos
                                                     : c->bytes.size();
  if (offset > c->bytes.size() || base > c->bytes.size() - offset) return -1;
  c->pos = base + offset;
  return 0;
}
int cursor_close(voidpf, voidpf) { return 0; }
int cursor_error(voidpf, voidpf) { return 0; }

// The zip, open for the duration of indexing.
struct Unzip {
  unzFile z = nullptr;
  ~Unzip() {
    if (z) unzClose(z);
  }
};

}  // namespace

Archive Archive::open(const std::string& path) {
  std::shared_ptr<MappedFile> m = map_file(path, "import");
  Archive a;
  a.name_ = path;
  a.owner_ = m;
  a.index(m->bytes());
  return a;
}

Archive Archive::from_bytes(std::span<const unsigned char> bytes, std::string name) {
  Archive a;
  a.name_ = std::move(name);
  a.index(bytes);
  return a;
}

void Archive::index(std::span<const unsigned char> file) {
  file_ = file;
  Cursor cursor{file, 0};
  zlib_filefunc64_def io{cursor_open, cursor_read,  cursor_write, cursor_tell,
                         cursor_seek, cursor_close, cursor_error, &cursor};
  Unzip zip;
  zip.z = unzOpen2_64(name_.c_str(), &io);
  if (!zip.z) bad(name_, "not a zip archive (a .pt2 file is one, as torch.export.save writes it)");
  for (int rc = unzGoToFirstFile(zip.z); rc != UNZ_END_OF_LIST_OF_FILE;
       rc = unzGoToNextFile(zip.z)) {
    if (rc != UNZ_OK) bad(name_, "the zip's central directory is damaged");
    unz_file_info64 info{};
    char raw_name[1024];
    if (unzGetCurrentFileInfo64(zip.z, &info, raw_name, sizeof raw_name, nullptr, 0, nullptr, 0) !=
        UNZ_OK)
      bad(name_, "an entry of the zip's central directory cannot be read");
    if (info.size_filename >= sizeof raw_name) bad(name_, "an entry's name is over 1023 bytes");
    std::string full(raw_name, info.size_filename);
    if (info.compression_method != 0 && info.compression_method != Z_DEFLATED)
      bad(name_, fmt::format("entry '{}' uses compression method {} (stored or deflated only)",
                             full, info.compression_method));
    if (unzOpenCurrentFile(zip.z) != UNZ_OK)
      bad(name_, fmt::format("entry '{}' has a damaged local header", full));
    Entry e;
    e.offset = unzGetCurrentFileZStreamPos64(zip.z);
    e.size = info.uncompressed_size;
    e.stored = info.compression_method == 0;
    uint64_t span = e.stored ? info.uncompressed_size : info.compressed_size;
    if (e.stored && info.compressed_size != info.uncompressed_size)
      bad(name_, fmt::format("stored entry '{}' claims {} bytes compressed but {} uncompressed",
                             full, info.compressed_size, info.uncompressed_size));
    if (e.offset > file.size() || span > file.size() - e.offset)
      bad(name_, fmt::format(
                     "entry '{}' reaches past the end of the file ({} bytes at offset {}; the file "
                     "has {})",
                     full, span, e.offset, file.size()));
    if (!e.stored) {  // inflate now, into memory the archive owns
      if (e.size > (uint64_t{1} << 34))
        bad(name_, fmt::format("deflated entry '{}' claims {} bytes", full, e.size));
      auto out = std::make_shared<std::vector<unsigned char>>(e.size);
      uint64_t done = 0;
      while (done < e.size) {
        int n =
            unzReadCurrentFile(zip.z, out->data() + done,
                               static_cast<unsigned>(std::min<uint64_t>(e.size - done, 1u << 30)));
        if (n <= 0) bad(name_, fmt::format("deflated entry '{}' is damaged", full));
        done += static_cast<uint64_t>(n);
      }
      e.inflated = std::move(out);
    }
    if (unzCloseCurrentFile(zip.z) == UNZ_CRCERROR && !e.stored)
      bad(name_, fmt::format("entry '{}' fails its CRC check", full));
    // Every entry lives under one root folder (the archive's name when torch wrote it).
    size_t slash = full.find('/');
    if (slash == std::string::npos || slash == 0)
      bad(name_, fmt::format("entry '{}' is not under the archive's root folder", full));
    std::string root = full.substr(0, slash);
    if (root_.empty())
      root_ = root;
    else if (root != root_)
      bad(name_, fmt::format("entries under two root folders, '{}' and '{}'", root_, root));
    entries_[full.substr(slash + 1)] = std::move(e);
  }
  if (entries_.empty()) bad(name_, "the archive is empty");
}

std::span<const unsigned char> Archive::bytes(const std::string& path) const {
  auto it = entries_.find(path);
  if (it == entries_.end())
    bad(name_, fmt::format("the archive has no entry '{}/{}'", root_, path));
  const Entry& e = it->second;
  if (e.inflated) return {e.inflated->data(), e.inflated->size()};
  return file_.subspan(e.offset, e.size);
}

std::shared_ptr<const void> Archive::owner(const std::string& path) const {
  auto it = entries_.find(path);
  if (it == entries_.end())
    bad(name_, fmt::format("the archive has no entry '{}/{}'", root_, path));
  if (it->second.inflated) return it->second.inflated;
  return owner_;
}

std::string Archive::text(const std::string& path) const {
  std::span<const unsigned char> b = bytes(path);
  return std::string(b.begin(), b.end());
}

std::vector<std::string> Archive::list(const std::string& folder) const {
  std::vector<std::string> out;
  std::string prefix = folder.empty() || folder.back() == '/' ? folder : folder + "/";
  for (const auto& [path, e] : entries_)
    if (path.rfind(prefix, 0) == 0) out.push_back(path);
  return out;
}

}  // namespace kiln::interop

// The program JSON of a .pt2 archive: the input replaces models/model.json of a real
// archive from the corpus (its weights stay), so every mutation reaches the JSON reader,
// the signature mapping and the op adapters instead of failing in the zip layer. Set
// KILN_FUZZ_SEED_DIR to have that archive's own model.json written there (the seed). The
// archive has a dynamic batch, so its size expressions and range_constraints are fuzzed
// too (fuzz_pt2 mutates the other archives byte by byte).
#include <cstdlib>
#include <fstream>

#include "fuzz_util.h"
#include "interop/zip_util.h"

namespace {
const kiln::testing::ZipEntries& base() {
  static const kiln::testing::ZipEntries entries = kiln::testing::read_zip(KILN_FUZZ_PT2_BASE);
  return entries;
}
bool is_model_json(const std::string& name) {
  return name.size() > 17 && name.compare(name.size() - 17, 17, "models/model.json") == 0;
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("KILN_FUZZ_SEED_DIR"))
    for (const auto& [name, bytes] : base())
      if (is_model_json(name))
        std::ofstream(std::string(dir) + "/model.json", std::ios::binary) << bytes;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::testing::ZipEntries entries = base();
  for (auto& [name, bytes] : entries)
    if (is_model_json(name)) bytes.assign(reinterpret_cast<const char*>(data), size);
  kiln::fuzz::MemFile file(nullptr, 0);
  kiln::testing::write_zip(file.path(), entries);
  kiln::fuzz::expect_clean([&] { kiln::read_pt2(file.path()); });
  return 0;
}

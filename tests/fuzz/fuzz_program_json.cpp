// Structure-aware: the program is JSON inside the safetensors header, which byte-level
// mutation rarely keeps valid. This mutator parses a program file, changes its program
// JSON as a tree (a value replaced by a boundary number or another type, a member
// deleted, an array element duplicated or dropped), and writes the file back; the target
// then reads and retargets it like fuzz_program_bytes.
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "fuzz_util.h"

using json = nlohmann::json;

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

// Splits a program file into its header JSON and the data after it.
bool split(const uint8_t* data, size_t size, json& header, std::string& rest) {
  if (size < 8) return false;
  uint64_t n = 0;
  std::memcpy(&n, data, 8);
  if (n > size - 8) return false;
  header = json::parse(data + 8, data + 8 + n, nullptr, false);
  if (header.is_discarded() || !header.is_object()) return false;
  rest.assign(reinterpret_cast<const char*>(data) + 8 + n, size - 8 - n);
  return true;
}

void collect(json& j, std::vector<json*>& out) {
  out.push_back(&j);
  if (j.is_object() || j.is_array())
    for (json& child : j) collect(child, out);
}

void mutate_tree(json& prog, std::mt19937_64& rng) {
  std::vector<json*> values;
  collect(prog, values);
  json& v = *values[rng() % values.size()];
  const json replacements[] = {json(-1), json(0), json(1), json(int64_t{1} << 32),
                               json(int64_t{1} << 62), json(INT64_MAX), json(INT64_MIN),
                               json(1e300), json(2.5), json("x"), json(nullptr), json(true),
                               json::array(), json::object(), json::array({0, 0}),
                               // size expressions (Y4): unknown symbols, bad syntax, overflow
                               json("s0"), json("s9 + 1"), json("(s0"), json("s0 // 0"),
                               json("Mod(s0, s0 - s0)"), json("9223372036854775807*s0*s0")};
  switch (rng() % 4) {
    case 0: v = replacements[rng() % std::size(replacements)]; break;
    case 1:
      if (v.is_object() && !v.empty()) {
        auto it = v.begin();
        std::advance(it, static_cast<long>(rng() % v.size()));
        v.erase(it);
      }
      break;
    case 2:
      if (v.is_array() && !v.empty()) v.push_back(v[rng() % v.size()]);
      break;
    default:
      if (v.is_array() && !v.empty())
        v.erase(rng() % v.size());
      else if (v.is_number_integer())  // one step up or down, wrapping (no overflow here)
        v = static_cast<int64_t>(static_cast<uint64_t>(v.get<int64_t>()) + rng() % 3 - 1);
      break;
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  std::mt19937_64 rng(seed);
  json header;
  std::string rest;
  if (rng() % 8 == 0 || !split(data, size, header, rest) || !header.contains("__metadata__") ||
      !header["__metadata__"].contains("kiln.program") ||
      !header["__metadata__"]["kiln.program"].is_string())
    return LLVMFuzzerMutate(data, size, max_size);
  json prog =
      json::parse(header["__metadata__"]["kiln.program"].get<std::string>(), nullptr, false);
  if (prog.is_discarded()) return LLVMFuzzerMutate(data, size, max_size);
  for (int k = 1 + static_cast<int>(rng() % 3); k-- > 0;) mutate_tree(prog, rng);
  header["__metadata__"]["kiln.program"] = prog.dump();
  std::string text = header.dump();
  uint64_t n = text.size();
  if (8 + n + rest.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, &n, 8);
  std::memcpy(data + 8, text.data(), n);
  std::memcpy(data + 8 + n, rest.data(), rest.size());
  return 8 + n + rest.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::read_and_retarget(data, size);
  return 0;
}

#pragma once
// Helpers for tests that take a saved program file apart: raw bytes, and its JSON
// header or program edited in place.

#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace kiln::testing {

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
inline void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}
/** Rewrites the JSON header of a safetensors file with `edit` applied. */
inline void edit_header(const std::string& path, const std::function<void(nlohmann::json&)>& edit) {
  std::string bytes = read_all(path);
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  nlohmann::json h = nlohmann::json::parse(bytes.substr(8, n));
  edit(h);
  std::string text = h.dump();
  uint64_t m = text.size();
  write_all(path, std::string(reinterpret_cast<char*>(&m), 8) + text + bytes.substr(8 + n));
}
/** Rewrites the program JSON a saved program file holds with `edit` applied. */
inline void edit_program(const std::string& path,
                         const std::function<void(nlohmann::json&)>& edit) {
  edit_header(path, [&](nlohmann::json& h) {
    nlohmann::json prog =
        nlohmann::json::parse(h["__metadata__"]["kiln.program"].get<std::string>());
    edit(prog);
    h["__metadata__"]["kiln.program"] = prog.dump();
  });
}

}  // namespace kiln::testing

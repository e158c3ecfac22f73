#pragma once
// Reading the golden files PyTorch wrote (tests/golden/*.json, from tools/golden): tensors
// as {dtype, shape, data}, with "inf" / "-inf" / "nan" as strings where JSON has no number.
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::testing {

using json = nlohmann::json;

/** tests/golden/<name>, parsed (a test failure when missing). */
inline json load_golden(const std::string& name) {
  std::ifstream in(std::string(KILN_TEST_DATA) + "/golden/" + name);
  EXPECT_TRUE(in.good()) << "missing tests/golden/" << name;
  return json::parse(in);
}

/** Numbers, or "inf" / "-inf" / "nan" for what JSON cannot hold. */
inline std::vector<double> numbers(const json& j) {
  std::vector<double> out;
  for (const json& v : j) {
    if (v.is_boolean())
      out.push_back(v.get<bool>() ? 1.0 : 0.0);
    else
      out.push_back(v.is_string() ? std::stod(v.get<std::string>()) : v.get<double>());
  }
  return out;
}

inline Tensor from_json(const json& j, Device device) {
  DType dtype = dtype_from_string(j.at("dtype").get<std::string>());
  IntList shape = j.at("shape").get<IntList>();
  std::vector<double> data = numbers(j.at("data"));
  Tensor t = from_vector(data, shape, {.dtype = dtype});
  return to(shape.empty() ? view(t, {}) : t, device);  // from_vector reads an empty shape as 1-D
}

/** A JSON number or bool as the Scalar of the same kind (3 -> int, 3.0 -> float); "nan"
 * and "inf" (which JSON cannot hold) as floats. */
inline Scalar scalar(const json& v) {
  if (v.is_boolean()) return Scalar(v.get<bool>());
  if (v.is_string()) return Scalar(std::stod(v.get<std::string>()));  // "nan", "inf"
  if (v.is_number_integer()) return Scalar(v.get<int64_t>());
  return Scalar(v.get<double>());
}

}  // namespace kiln::testing

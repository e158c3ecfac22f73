// Compares kiln with results PyTorch produced (tests/golden/torch_ops.json, written by
// tools/golden/make_golden.py and committed, so no torch is needed at test time).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using json = nlohmann::json;

json load_golden() {
  std::ifstream in(std::string(KILN_TEST_DATA) + "/golden/torch_ops.json");
  EXPECT_TRUE(in.good()) << "missing tests/golden/torch_ops.json";
  return json::parse(in);
}

// Numbers, or "inf" / "-inf" / "nan" for what JSON cannot hold.
std::vector<double> numbers(const json& j) {
  std::vector<double> out;
  for (const json& v : j) out.push_back(v.is_string() ? std::stod(v.get<std::string>()) : v.get<double>());
  return out;
}

Tensor from_json(const json& j) {
  DType dtype = dtype_from_string(j.at("dtype").get<std::string>());
  IntList shape = j.at("shape").get<IntList>();
  std::vector<double> data = numbers(j.at("data"));
  return from_vector(data, shape, {.dtype = dtype});
}

// Runs one recorded case through kiln's functional API by name.
Tensor run(const std::string& op, const std::vector<Tensor>& in, const json& a) {
  if (op == "add") return add(in[0], in[1], a.contains("alpha") ? Scalar(a["alpha"].get<double>()) : Scalar(1));
  if (op == "add_scalar") return add(in[0], Scalar(a.at("other").get<double>()));
  if (op == "add_int_scalar") return add(in[0], Scalar(a.at("other").get<int64_t>()));
  if (op == "sub") return sub(in[0], in[1]);
  if (op == "mul") return mul(in[0], in[1]);
  if (op == "div") return div(in[0], in[1]);
  if (op == "pow") return pow(in[0], in[1]);
  if (op == "maximum") return maximum(in[0], in[1]);
  if (op == "lt") return lt(in[0], in[1]);
  if (op == "eq") return eq(in[0], in[1]);
  if (op == "where") return where(in[0], in[1], in[2]);
  if (op == "exp") return exp(in[0]);
  if (op == "gelu") return gelu(in[0], a.value("approximate", "none"));
  if (op == "silu") return silu(in[0]);
  if (op == "sigmoid") return sigmoid(in[0]);
  if (op == "tanh") return tanh(in[0]);
  if (op == "rsqrt") return rsqrt(in[0]);
  if (op == "sum") return sum(in[0], a.at("dim").get<IntList>(), a.value("keepdim", false));
  if (op == "mean") return mean(in[0], a.at("dim").get<IntList>(), a.value("keepdim", false));
  if (op == "var") return var(in[0], a.at("dim").get<IntList>(), a.value("correction", 1));
  if (op == "amax") return amax(in[0], a.at("dim").get<IntList>(), a.value("keepdim", false));
  if (op == "argmax") return argmax(in[0], a.at("dim").get<int64_t>());
  if (op == "softmax") return softmax(in[0], a.at("dim").get<int64_t>());
  if (op == "log_softmax") return log_softmax(in[0], a.at("dim").get<int64_t>());
  if (op == "matmul") return matmul(in[0], in[1]);
  if (op == "linear") return linear(in[0], in[1], in[2]);
  if (op == "layer_norm") return layer_norm(in[0], a.at("shape").get<IntList>(), in[1], in[2]);
  if (op == "transpose_add") return add(transpose(in[0], 0, 1), in[1]);
  if (op == "cat") return cat({in[0], in[1]}, a.at("dim").get<int64_t>());
  if (op == "index_select") return index_select(in[0], a.at("dim").get<int64_t>(), in[1]);
  if (op == "gather") return gather(in[0], a.at("dim").get<int64_t>(), in[1]);
  if (op == "embedding") return embedding(in[0], in[1]);
  if (op == "masked_fill") return masked_fill(in[0], in[1], a.at("value").get<double>());
  if (op == "to_f16") return to(in[0], f16);
  ADD_FAILURE() << "golden file has an op this test does not know: " << op;
  return Tensor();
}

TEST(Golden, MatchesPyTorch) {
  json golden = load_golden();
  ASSERT_GE(golden.at("cases").size(), 30u);
  for (const json& c : golden.at("cases")) {
    std::string op = c.at("op");
    SCOPED_TRACE(op + " " + c.value("note", ""));
    std::vector<Tensor> in;
    for (const json& t : c.at("inputs")) in.push_back(from_json(t));
    Tensor got = run(op, in, c.value("args", json::object()));
    if (!got.defined()) continue;
    const json& want = c.at("output");
    EXPECT_EQ(to_string(got.dtype()), want.at("dtype").get<std::string>());
    EXPECT_EQ(got.shape().vec(), want.at("shape").get<IntList>());
    EXPECT_TRUE(testing::all_close(got, numbers(want.at("data")),
                                   c.value("rtol", 1e-5), c.value("atol", 1e-6)));
  }
}

}  // namespace
}  // namespace kiln

// PyTorch-like printing of tensors.
#include <fmt/format.h>

#include <cmath>
#include <ostream>

#include "kiln/dispatch/functional.h"

namespace kiln {

namespace {

std::string format_values(const Tensor& x) {
  if (x.is_fake()) return "...";
  std::vector<double> v = to_vector<double>(x);
  bool integral_dtype = is_integral(x.dtype(), false);
  bool whole = std::all_of(v.begin(), v.end(), [](double d) { return std::isfinite(d) && d == std::floor(d); });
  auto fmt_one = [&](double d) -> std::string {
    if (x.dtype() == DType::b8) return d != 0 ? "True" : "False";
    if (integral_dtype) return fmt::format("{}", static_cast<int64_t>(d));
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    if (whole) return fmt::format("{}.", static_cast<int64_t>(d));
    return fmt::format("{:.4f}", d);
  };
  size_t width = 0;
  std::vector<std::string> cells;
  for (double d : v) width = std::max(width, (cells.emplace_back(fmt_one(d))).size());
  if (x.dim() == 0) return cells.empty() ? "" : cells[0];
  std::string out;
  size_t at = 0;
  const Dims& shape = x.shape();
  // Recursive walk over dims; rows after the first are indented under "tensor(".
  auto walk = [&](auto&& self, size_t d, size_t indent) -> void {
    out += "[";
    for (int64_t i = 0; i < shape[d]; ++i) {
      if (i) {
        out += ",";
        if (d + 1 < shape.size()) out += std::string(shape.size() - d - 1, '\n') + std::string(indent + 1, ' ');
        else out += " ";
      }
      if (d + 1 == shape.size()) {
        out += fmt::format("{:>{}}", cells[at++], width);
      } else {
        self(self, d + 1, indent + 1);
      }
    }
    out += "]";
  };
  walk(walk, 0, 7);
  return out;
}

}  // namespace

std::string to_string(const Tensor& x) {
  if (!x.defined()) return "tensor(undefined)";
  std::string out = "tensor(" + format_values(x);
  if (x.device() != Device(DeviceType::cpu, 0)) out += fmt::format(", device='{}'", x.device());
  bool default_dtype = x.dtype() == DType::f32 || x.dtype() == DType::i64 || x.dtype() == DType::b8;
  if (!default_dtype) out += fmt::format(", dtype={}", x.dtype());
  if (x.is_fake()) out += fmt::format(", size={}", x.shape().str());
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& x) { return os << to_string(x); }

}  // namespace kiln

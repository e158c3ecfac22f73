// Printing tensors the way PyTorch does: one number format chosen for the whole tensor
// (integer-valued floats as "1.", fixed "0.1000", or scientific "1.0000e-05"), right-
// aligned to a common width, rows wrapped at 80 columns, and tensors of more than 1000
// elements summarised to their first and last 3 entries along every dimension.
#include <fmt/format.h>

#include <cmath>
#include <ostream>

#include "kiln/api/functional.h"
#include "kiln/dispatch/grad_mode.h"

namespace kiln {

namespace {

constexpr int64_t kThreshold = 1000;  // more elements than this are summarised
constexpr int64_t kEdgeItems = 3;
constexpr size_t kLineWidth = 80;

// The number format of one tensor, chosen from all the values that will be printed.
class Formatter {
 public:
  Formatter(const std::vector<double>& values, DType dtype)
      : floating_(is_floating(dtype)), bool_(dtype == DType::b8) {
    if (!floating_) {
      for (double v : values) width_ = std::max(width_, raw(v).size());
      return;
    }
    double lo = INFINITY, hi = 0;
    bool any = false;
    for (double v : values) {
      if (!std::isfinite(v) || v == 0) continue;
      any = true;
      lo = std::min(lo, std::abs(v));
      hi = std::max(hi, std::abs(v));
      int_mode_ = int_mode_ && v == std::ceil(v);
    }
    if (!any) return;
    sci_ = hi / lo > 1000.0 || hi > 1.0e8 || (!int_mode_ && lo < 1.0e-4);
    for (double v : values)  // zeros and non-finite values do not set the width
      if (std::isfinite(v) && v != 0) width_ = std::max(width_, raw(v).size());
  }

  std::string operator()(double v) const {
    std::string s = raw(v);
    return std::string(width_ > s.size() ? width_ - s.size() : 0, ' ') + s;
  }
  size_t width() const { return width_; }

 private:
  std::string raw(double v) const {
    if (bool_) return v != 0 ? "True" : "False";
    if (!floating_) return fmt::format("{}", static_cast<int64_t>(v));
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci_) return fmt::format("{:.4e}", v);
    if (int_mode_) return fmt::format("{:.0f}.", v);
    return fmt::format("{:.4f}", v);
  }

  bool floating_, bool_;
  bool int_mode_ = true, sci_ = false;
  size_t width_ = 1;
};

// `x` cut to its first and last kEdgeItems entries along every longer dimension.
Tensor summarized(const Tensor& x) {
  Tensor s = x;
  for (int64_t d = 0; d < s.dim(); ++d) {
    int64_t n = s.shape()[d];
    if (n > 2 * kEdgeItems)
      s = cat({slice(s, d, 0, kEdgeItems), slice(s, d, n - kEdgeItems, n)}, d);
  }
  return s;
}

// Prints the (possibly summarised) values `v` of a tensor whose original shape is `shape`.
struct Printer {
  const std::vector<double>& v;
  const Dims& shape;  // the original shape
  bool summarize;
  const Formatter& format;
  size_t next = 0;  // index into v

  bool cut(size_t d) const { return summarize && shape[d] > 2 * kEdgeItems; }
  int64_t shown(size_t d) const { return cut(d) ? 2 * kEdgeItems : shape[d]; }

  std::string tensor(size_t d, size_t indent) {
    if (d + 1 == shape.size()) return vector(d, indent);
    std::vector<std::string> slices;
    for (int64_t i = 0; i < shown(d); ++i) {
      if (cut(d) && i == kEdgeItems) slices.push_back("...");
      slices.push_back(tensor(d + 1, indent + 1));
    }
    std::string sep = "," + std::string(shape.size() - d - 1, '\n') + std::string(indent + 1, ' ');
    return "[" + fmt::format("{}", fmt::join(slices, sep)) + "]";
  }

  std::string vector(size_t d, size_t indent) {
    std::vector<std::string> items;
    for (int64_t i = 0; i < shown(d); ++i) {
      if (cut(d) && i == kEdgeItems) items.push_back(" ...");
      items.push_back(format(v[next++]));
    }
    size_t per_line =
        std::max<size_t>(1, (kLineWidth - std::min(indent, kLineWidth)) / (format.width() + 2));
    std::vector<std::string> lines;
    for (size_t i = 0; i < items.size(); i += per_line) {
      auto end = items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), i + per_line));
      lines.push_back(
          fmt::format("{}", fmt::join(items.begin() + static_cast<std::ptrdiff_t>(i), end, ", ")));
    }
    return "[" + fmt::format("{}", fmt::join(lines, ",\n" + std::string(indent + 1, ' '))) + "]";
  }
};

// A shape as PyTorch prints it: "(0, 3)", "(5,)", "()".
std::string shape_tuple(const Dims& shape) {
  return fmt::format("({}{})", fmt::join(shape, ", "), shape.size() == 1 ? "," : "");
}

}  // namespace

std::string to_string(const Tensor& x) {
  if (!x.defined()) return "tensor(undefined)";
  constexpr size_t kIndent = 7;  // "tensor("
  std::vector<std::string> suffixes;
  if (x.device() != Device(DeviceType::cpu, 0))
    suffixes.push_back(fmt::format("device='{}'", x.device()));
  bool default_dtype = x.dtype() == DType::f32 || x.dtype() == DType::i64 || x.dtype() == DType::b8;
  std::string body;
  if (x.is_fake()) {
    body = "...";
    if (!default_dtype) suffixes.push_back(fmt::format("dtype={}", x.dtype()));
    suffixes.push_back("size=" + shape_tuple(x.shape()));
  } else if (x.numel() == 0) {  // nothing shows the dtype or the shape, so say them
    body = "[]";
    if (x.dim() != 1) suffixes.push_back("size=" + shape_tuple(x.shape()));
    if (x.dtype() != DType::f32) suffixes.push_back(fmt::format("dtype={}", x.dtype()));
  } else {
    bool summarize = x.numel() > kThreshold;
    std::vector<double> values = to_vector<double>(summarize ? summarized(x) : x);
    Formatter format(values, x.dtype());
    body = x.dim() == 0 ? format(values[0])
                        : Printer{values, x.shape(), summarize, format}.tensor(0, kIndent);
    if (!default_dtype) suffixes.push_back(fmt::format("dtype={}", x.dtype()));
  }
  // PyTorch's order: device, dtype, then the gradient state.
  if (std::string fn = x.grad_fn_name(); !fn.empty())
    suffixes.push_back("grad_fn=<" + fn + ">");
  else if (x.requires_grad())
    suffixes.push_back("requires_grad=True");
  std::string out = "tensor(" + body;
  for (const std::string& s : suffixes) out += ", " + s;
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& x) { return os << to_string(x); }

}  // namespace kiln

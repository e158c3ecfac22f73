#include "kiln/core/device.h"

#include <ostream>

#include "kiln/core/error.h"

namespace kiln {

std::string_view to_string(DeviceType type) {
  switch (type) {
    case DeviceType::cpu: return "cpu";
    case DeviceType::cuda: return "cuda";
    case DeviceType::meta: return "meta";
  }
  return "?";
}

namespace {
constexpr std::string_view kValidTypes = "cpu, cuda, meta";

DeviceType parse_type(std::string_view name, std::string_view spec) {
  for (auto t : {DeviceType::cpu, DeviceType::cuda, DeviceType::meta})
    if (name == to_string(t)) return t;
  fail(ErrorKind::device, "[Device] unknown device type '{}' in '{}'; valid types are: {}", name,
       spec, kValidTypes);
}
}  // namespace

// (D1) The grammar is TYPE or TYPE:INDEX, INDEX a decimal without sign or leading zero.
Device::Device(std::string_view spec) {
  KILN_CHECK(!spec.empty(), device, "[Device] empty device string; expected one of: {}",
             kValidTypes);
  auto colon = spec.find(':');
  type = parse_type(spec.substr(0, colon), spec);
  index = type == DeviceType::meta ? 0 : kAnyIndex;
  if (colon == std::string_view::npos) return;
  std::string_view digits = spec.substr(colon + 1);
  bool ok = !digits.empty() && digits.size() <= 4 && (digits[0] != '0' || digits.size() == 1);
  for (char c : digits) ok = ok && c >= '0' && c <= '9';
  KILN_CHECK(ok, device,
             "[Device] malformed device index in '{}': expected TYPE:N with N a non-negative "
             "integer without leading zeros",
             spec);
  int value = 0;
  for (char c : digits) value = value * 10 + (c - '0');
  index = static_cast<int16_t>(value);
}

std::ostream& operator<<(std::ostream& os, Device d) { return os << d.str(); }

std::string Device::str() const {
  if (!has_index() || type == DeviceType::meta) return std::string(to_string(type));
  return fmt::format("{}:{}", to_string(type), index);
}

}  // namespace kiln

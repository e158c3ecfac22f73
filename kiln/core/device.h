#pragma once
// Device and DeviceType, parsed and printed per (D1).

#include <fmt/format.h>

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

namespace kiln {

/** The kinds of device kiln knows. `meta` holds metadata only. */
enum class DeviceType : uint8_t { cpu, cuda, meta };
inline constexpr int kNumDeviceTypes = 3;

std::string_view to_string(DeviceType type);

/** A device: a type and an index. An index of kAnyIndex is a request ("cuda" = the
 * current cuda device) that is resolved when a tensor is created; a tensor's device
 * always has a concrete index. */
struct Device {
  static constexpr int16_t kAnyIndex = -1;

  DeviceType type = DeviceType::cpu;
  int16_t index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceType t, int idx = kAnyIndex)
      : type(t), index(static_cast<int16_t>(t == DeviceType::meta && idx < 0 ? 0 : idx)) {}
  /** Parses "cpu", "cpu:N", "cuda", "cuda:N", "meta" (D1); throws kiln::Error. */
  Device(std::string_view spec);  // NOLINT: implicit on purpose, like torch::Device
  Device(const char* spec) : Device(std::string_view(spec)) {}  // NOLINT

  bool has_index() const { return index >= 0; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool operator==(const Device&) const = default;
  /** A small integer unique per (type, index), for keying per-device tables. */
  uint32_t key() const { return static_cast<uint32_t>(type) << 16 | static_cast<uint16_t>(index); }
  std::string str() const;
};

/** Prints "cpu:1" (as Device::str). */
std::ostream& operator<<(std::ostream& os, Device d);

}  // namespace kiln

template <>
struct fmt::formatter<kiln::Device> : fmt::formatter<std::string_view> {
  auto format(const kiln::Device& d, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(d.str(), ctx);
  }
};
template <>
struct fmt::formatter<kiln::DeviceType> : fmt::formatter<std::string_view> {
  auto format(kiln::DeviceType t, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(kiln::to_string(t), ctx);
  }
};

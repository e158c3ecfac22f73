#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::expect_error;

TEST(Device, ParsesEveryForm) {  // (D1)
  EXPECT_EQ(Device("cpu"), Device(DeviceType::cpu));
  EXPECT_FALSE(Device("cpu").has_index());
  EXPECT_EQ(Device("cpu:3"), Device(DeviceType::cpu, 3));
  EXPECT_EQ(Device("cuda:12").index, 12);
  EXPECT_EQ(Device("cuda").type, DeviceType::cuda);
  EXPECT_EQ(Device("meta"), Device(DeviceType::meta, 0));
  EXPECT_EQ(Device("cuda:0").str(), "cuda:0");
  EXPECT_EQ(Device("cuda").str(), "cuda");
  EXPECT_EQ(Device("meta").str(), "meta");
  EXPECT_NE(Device("cuda:0"), Device("cuda:1"));
  EXPECT_NE(Device("cuda:0"), Device("cpu:0"));
}

TEST(Device, RejectsMalformedStrings) {  // (D1)
  expect_error([] { Device(""); }, ErrorKind::device, "empty device string");
  for (const char* bad : {"cuda:", "cuda:01", "cuda:-1", "cuda:1:2", "cpu:x", "cuda: 1"})
    expect_error([bad] { Device{std::string_view(bad)}; }, ErrorKind::device,
                 "malformed device index");
  expect_error([] { Device(":0"); }, ErrorKind::device, "unknown device type ''");
  expect_error([] { Device("tpu:0"); }, ErrorKind::device, "valid types are: cpu, cuda, meta");
}

TEST(Device, IndexBeyondCountFailsAtUseNotParse) {  // (D1)
  Device d("cpu:7");                                // parses fine
  EXPECT_EQ(d.index, 7);
  expect_error([&] { zeros({2}, {.device = d}); }, ErrorKind::device,
               "cpu:7 is not available: 4 cpu device(s)");
  expect_error([] { zeros({2}, {.device = Device("cuda:0")}); }, ErrorKind::device,
               "cuda:0 is not available");
}

TEST(Device, CountsNeverThrow) {
  EXPECT_EQ(device_count(DeviceType::cpu), 4);  // KILN_CPU_DEVICES=4 in ctest
  EXPECT_EQ(device_count(DeviceType::cuda), 0);
  EXPECT_EQ(device_count(DeviceType::meta), 1);
}

TEST(DeviceGuard, SetsAndRestores) {  // (D3)
  EXPECT_EQ(current_device(DeviceType::cpu), Device("cpu:0"));
  {
    DeviceGuard g(Device("cpu:2"));
    EXPECT_EQ(current_device(DeviceType::cpu), Device("cpu:2"));
    EXPECT_EQ(g.original_device(), Device("cpu:0"));
    Tensor t = zeros({1}, {.device = Device("cpu")});  // "cpu" = the current cpu device
    EXPECT_EQ(t.device(), Device("cpu:2"));
    {
      DeviceGuard inner(Device("cpu:3"));
      EXPECT_EQ(current_device(DeviceType::cpu), Device("cpu:3"));
    }
    EXPECT_EQ(current_device(DeviceType::cpu), Device("cpu:2"));
  }
  EXPECT_EQ(current_device(DeviceType::cpu), Device("cpu:0"));
}

TEST(OptionalDeviceGuard, EmptyChangesNothing) {  // (D3)
  {
    OptionalDeviceGuard g;
    EXPECT_FALSE(g.engaged());
    EXPECT_EQ(current_device(DeviceType::cpu), Device("cpu:0"));
    g.set_device(Device("cpu:1"));
    EXPECT_TRUE(g.engaged());
    EXPECT_EQ(current_device(DeviceType::cpu), Device("cpu:1"));
    g.set_device(Device("cpu:3"));
    EXPECT_EQ(current_device(DeviceType::cpu), Device("cpu:3"));
  }
  EXPECT_EQ(current_device(DeviceType::cpu), Device("cpu:0"));
}

TEST(VirtualCpuDevices, CountIsFixedAfterUse) {
  zeros({1});
  set_cpu_device_count(4);  // unchanged: fine
  expect_error([] { set_cpu_device_count(2); }, ErrorKind::value, "after CPU devices were used");
}

}  // namespace
}  // namespace kiln

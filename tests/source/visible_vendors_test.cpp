// SPDX-License-Identifier: Apache-2.0
// Which vendor each *_VISIBLE_DEVICES variable applies to, the bare MIG-<uuid>
// form, and the CUDA_DEVICE_ORDER check (docs/contract.md section 2,
// source/visible.hpp).
#include <gpuaff/source/visible.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "support/check.hpp"

using gpuaff::Errc;
using gpuaff::Gpu;
using gpuaff::PciAddress;
using gpuaff::select_visible_gpus;
using gpuaff::VisibleDevices;

namespace {

constexpr std::uint16_t nvidia = 0x10de;
constexpr std::uint16_t amd = 0x1002;
constexpr std::uint16_t intel = 0x8086;

Gpu make(const char* bdf, std::uint16_t vendor, std::uint16_t device = 0, const char* uuid = "") {
  Gpu g;
  g.pci.address = PciAddress::parse(bdf).value();
  g.pci.vendor = vendor;
  g.pci.device = device;
  g.pci.class_code = 0x030200;
  g.uuid = std::string_view(uuid);
  return g;
}

std::vector<int> buses(const std::vector<Gpu>& gs) {
  std::vector<int> b;
  for (const auto& g : gs) b.push_back(g.pci.address.bus);
  return b;
}

std::vector<Gpu> four_nvidia() {
  return {make("0000:10:00.0", nvidia, 0x2330, "GPU-aaaa"), make("0000:20:00.0", nvidia, 0x2330, "GPU-bbbb"),
          make("0000:30:00.0", nvidia, 0x2330, "GPU-cccc"), make("0000:40:00.0", nvidia, 0x2330, "GPU-dddd")};
}

std::vector<Gpu> four_amd() {
  return {make("0000:05:00.0", amd), make("0000:26:00.0", amd), make("0000:46:00.0", amd), make("0000:65:00.0", amd)};
}

std::string message(const gpuaff::Result<std::vector<Gpu>>& r) {
  return r ? std::string() : std::string(r.error().message());
}

}  // namespace

TEST_CASE("on a machine without AMD GPUs, ROCR_ and HIP_VISIBLE_DEVICES are checked, then ignored") {
  // Slurm sets every vendor's variable to the same list; CUDA reads only its own.
  auto r = select_visible_gpus(four_nvidia(), VisibleDevices{.use_environment = false,
                                                             .cuda_visible_devices = "2",
                                                             .hip_visible_devices = "7",
                                                             .rocr_visible_devices = "2"});
  REQUIRE_MESSAGE(r, message(r));
  CHECK(buses(*r) == std::vector<int>{0x30});

  // A malformed value is still a usage error, naming the variable and the entry.
  for (const char* bad : {"abc", "0,,1", "GPU-1234", "-1"}) {
    CAPTURE(bad);
    auto e = select_visible_gpus(four_nvidia(), VisibleDevices{.use_environment = false, .rocr_visible_devices = bad});
    REQUIRE_FALSE(e);
    CHECK(e.error().code() == Errc::invalid_argument);
    CHECK(message(e).find("ROCR_VISIBLE_DEVICES") != std::string::npos);
    auto h = select_visible_gpus(four_nvidia(), VisibleDevices{.use_environment = false, .hip_visible_devices = bad});
    REQUIRE_FALSE(h);
    CHECK(message(h).find("HIP_VISIBLE_DEVICES") != std::string::npos);
  }
}

TEST_CASE("on a machine without NVIDIA GPUs, CUDA_VISIBLE_DEVICES is checked, then ignored (HIP aside)") {
  std::vector<Gpu> intel_only = {make("0000:10:00.0", intel), make("0000:20:00.0", intel)};
  auto r = select_visible_gpus(intel_only, VisibleDevices{.use_environment = false, .cuda_visible_devices = "5"});
  REQUIRE_MESSAGE(r, message(r));
  CHECK(buses(*r) == std::vector<int>{0x10, 0x20});
  auto bad = select_visible_gpus(intel_only, VisibleDevices{.use_environment = false, .cuda_visible_devices = "0,x"});
  REQUIRE_FALSE(bad);
  CHECK(message(bad).find("CUDA_VISIBLE_DEVICES") != std::string::npos);
}

TEST_CASE("on an AMD machine HIP reads CUDA_VISIBLE_DEVICES when HIP_VISIBLE_DEVICES is unset") {
  // CUDA_VISIBLE_DEVICES=1 alone: the second AMD GPU, as HIP numbers it.
  auto r = select_visible_gpus(four_amd(), VisibleDevices{.use_environment = false, .cuda_visible_devices = "1"});
  REQUIRE_MESSAGE(r, message(r));
  CHECK(buses(*r) == std::vector<int>{0x26});

  // HIP_VISIBLE_DEVICES set: CUDA_VISIBLE_DEVICES is not read.
  auto h = select_visible_gpus(
      four_amd(), VisibleDevices{.use_environment = false, .cuda_visible_devices = "1", .hip_visible_devices = "3"});
  REQUIRE_MESSAGE(h, message(h));
  CHECK(buses(*h) == std::vector<int>{0x65});

  // ROCr filters first (GPUs 2 and 3 left), then CUDA_VISIBLE_DEVICES=1 indexes
  // what ROCr left: the host's GPU 3.
  auto both = select_visible_gpus(
      four_amd(), VisibleDevices{.use_environment = false, .cuda_visible_devices = "1", .rocr_visible_devices = "2,3"});
  REQUIRE_MESSAGE(both, message(both));
  CHECK(buses(*both) == std::vector<int>{0x65});

  // Slurm's every-vendor variables for the first GPU: ROCr keeps GPU 0, HIP's index 0 is it.
  auto slurm = select_visible_gpus(
      four_amd(), VisibleDevices{.use_environment = false, .cuda_visible_devices = "0", .rocr_visible_devices = "0"});
  REQUIRE_MESSAGE(slurm, message(slurm));
  CHECK(buses(*slurm) == std::vector<int>{0x05});

  // The same list in both for GPU 2: ROCr leaves one GPU, and HIP's index 2 is
  // beyond it (a HIP program would see no GPU): an error that says why.
  auto clash = select_visible_gpus(
      four_amd(), VisibleDevices{.use_environment = false, .cuda_visible_devices = "2", .rocr_visible_devices = "2"});
  REQUIRE_FALSE(clash);
  CHECK(clash.error().code() == Errc::invalid_argument);
  CHECK(message(clash).find("HIP reads CUDA_VISIBLE_DEVICES") != std::string::npos);
  CHECK(message(clash).find("index 2") != std::string::npos);
}

TEST_CASE("on a machine with both vendors CUDA_VISIBLE_DEVICES selects NVIDIA GPUs only") {
  std::vector<Gpu> mixed = {make("0000:17:00.0", nvidia, 0x2230), make("0000:65:00.0", nvidia, 0x2684),
                            make("0000:b3:00.0", amd, 0x7448)};
  auto r = select_visible_gpus(mixed, VisibleDevices{.use_environment = false, .cuda_visible_devices = "1"});
  REQUIRE_MESSAGE(r, message(r));
  CHECK(buses(*r) == std::vector<int>{0x65, 0xb3});  // the AMD GPU is left to ROCR/HIP
  auto hidden = select_visible_gpus(
      mixed, VisibleDevices{.use_environment = false, .cuda_visible_devices = "1", .rocr_visible_devices = ""});
  REQUIRE_MESSAGE(hidden, message(hidden));
  CHECK(buses(*hidden) == std::vector<int>{0x65});
}

TEST_CASE("a bare MIG-<uuid> names the process's one NVIDIA GPU, and is an error with several") {
  // A MIG container: the driver lists one GPU; other vendors do not count.
  std::vector<Gpu> one = {make("0000:05:00.0", amd), make("0000:3a:00.0", nvidia, 0x2330, "GPU-3a3a")};
  auto r = select_visible_gpus(
      one, VisibleDevices{.use_environment = false, .cuda_visible_devices = "MIG-5c3f0a2e-1111-2222-3333-444455556666"});
  REQUIRE_MESSAGE(r, message(r));
  CHECK(buses(*r) == std::vector<int>{0x05, 0x3a});
  // Two instances of that GPU: two CUDA devices on the same PCI device.
  auto two = select_visible_gpus(
      {one[1]}, VisibleDevices{.use_environment = false, .cuda_visible_devices = "MIG-aaaa-1,MIG-bbbb-2"});
  REQUIRE_MESSAGE(two, message(two));
  CHECK(buses(*two) == std::vector<int>{0x3a, 0x3a});
  // No UUID is needed for this form (binding detail reads no information file).
  Gpu no_uuid = make("0000:3a:00.0", nvidia);
  auto bare = select_visible_gpus({no_uuid}, VisibleDevices{.use_environment = false, .cuda_visible_devices = "MIG-ab"});
  REQUIRE_MESSAGE(bare, message(bare));
  CHECK(bare->size() == 1);

  auto several = select_visible_gpus(four_nvidia(), VisibleDevices{.use_environment = false,
                                                                   .cuda_visible_devices = "MIG-5c3f0a2e"});
  REQUIRE_FALSE(several);
  CHECK(several.error().code() == Errc::invalid_argument);
  CHECK(message(several).find("4 NVIDIA GPUs, not one") != std::string::npos);
  CHECK(message(several).find("visible_devices=LIST") != std::string::npos);
}

TEST_CASE("device_order_warning: only when CUDA's order is not PCI_BUS_ID and the NVIDIA GPUs differ") {
  std::vector<Gpu> unlike = {make("0000:17:00.0", nvidia, 0x2230), make("0000:65:00.0", nvidia, 0x2684),
                             make("0000:b3:00.0", amd, 0x7448)};
  auto w = gpuaff::device_order_warning(unlike, std::string());
  REQUIRE(w);
  CHECK(w->find("CUDA_DEVICE_ORDER=PCI_BUS_ID") != std::string::npos);
  CHECK(w->find("0x2230, 0x2684") != std::string::npos);
  CHECK(w->find("0x7448") == std::string::npos);  // the AMD GPU is not CUDA's
  CHECK(gpuaff::device_order_warning(unlike, std::string("FASTEST_FIRST")));
  CHECK_FALSE(gpuaff::device_order_warning(unlike, std::string("PCI_BUS_ID")));
  CHECK_FALSE(gpuaff::device_order_warning(unlike, std::nullopt));  // not known: nothing is checked
  CHECK_FALSE(gpuaff::device_order_warning(four_nvidia(), std::string()));  // alike: the orders agree
  // One NVIDIA GPU beside an AMD one with another id: nothing to reorder.
  CHECK_FALSE(gpuaff::device_order_warning({unlike[0], unlike[2]}, std::string()));
}

TEST_CASE("CUDA_DEVICE_ORDER comes from the environment: unset is CUDA's default") {
  const char* saved = std::getenv("CUDA_DEVICE_ORDER");
  std::string keep = saved != nullptr ? saved : "";
  ::unsetenv("CUDA_DEVICE_ORDER");
  CHECK(VisibleDevices::from_environment().cuda_device_order == std::string());
  ::setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
  CHECK(VisibleDevices::from_environment().cuda_device_order == std::string("PCI_BUS_ID"));
  CHECK_FALSE(VisibleDevices{.use_environment = false}.with_environment().cuda_device_order);
  if (saved != nullptr) ::setenv("CUDA_DEVICE_ORDER", keep.c_str(), 1);
  else ::unsetenv("CUDA_DEVICE_ORDER");
}

// SPDX-License-Identifier: Apache-2.0
// GPU visibility: docs/contract.md section 2, with the entry rules of source/visible.hpp.
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

Gpu make(const char* bdf, std::uint16_t vendor, const char* uuid = "") {
  Gpu g;
  g.pci.address = PciAddress::parse(bdf).value();
  g.pci.vendor = vendor;
  g.pci.class_code = 0x030200;
  g.uuid = std::string_view(uuid);
  return g;
}

// Four NVIDIA GPUs, given out of bus order on purpose.
std::vector<Gpu> four_nvidia() {
  return {make("0000:b0:00.0", 0x10de, "GPU-dddd0000-0000"), make("0000:10:00.0", 0x10de, "GPU-aaaa1111-0000"),
          make("0000:50:00.0", 0x10de, "GPU-aaaa2222-0000"), make("0000:90:00.0", 0x10de, "GPU-cccc0000-0000")};
}

std::vector<int> buses(const std::vector<Gpu>& gs) {
  std::vector<int> b;
  for (const auto& g : gs) b.push_back(g.pci.address.bus);
  return b;
}

VisibleDevices cuda(const char* v) { return VisibleDevices{.use_environment = false, .cuda_visible_devices = v}; }

std::string select_error(std::vector<Gpu> all, const VisibleDevices& v) {
  auto r = select_visible_gpus(std::move(all), v);
  if (r) return "";
  return std::string(r.error().message());
}

}  // namespace

TEST_CASE("without any selector every GPU is visible in bus order, index = position") {
  auto r = select_visible_gpus(four_nvidia(), VisibleDevices{.use_environment = false});
  REQUIRE(r);
  CHECK(buses(*r) == std::vector<int>{0x10, 0x50, 0x90, 0xb0});
  for (int i = 0; i < 4; ++i) CHECK((*r)[static_cast<std::size_t>(i)].index == i);
}

TEST_CASE("CUDA_VISIBLE_DEVICES integers index the NVIDIA GPUs in the listed order") {
  auto r = select_visible_gpus(four_nvidia(), cuda("3, 1"));
  REQUIRE(r);
  CHECK(buses(*r) == std::vector<int>{0xb0, 0x50});
  CHECK((*r)[1].index == 1);
}

TEST_CASE("CUDA_VISIBLE_DEVICES set but empty hides every NVIDIA GPU") {
  auto r = select_visible_gpus(four_nvidia(), cuda(""));
  REQUIRE(r);
  CHECK(r->empty());
}

TEST_CASE("UUID prefixes select the one GPU they match") {
  auto r = select_visible_gpus(four_nvidia(), cuda("GPU-cccc,GPU-aaaa1"));
  REQUIRE(r);
  CHECK(buses(*r) == std::vector<int>{0x90, 0x10});
}

TEST_CASE("a MIG instance in the /GI/CI forms means its parent GPU") {
  auto r = select_visible_gpus(four_nvidia(), cuda("MIG-GPU-dddd0000-0000/1/0"));
  REQUIRE(r);
  CHECK(buses(*r) == std::vector<int>{0xb0});
  auto r2 = select_visible_gpus(four_nvidia(), cuda("MIG-aaaa2222-0000/3/0,MIG-aaaa2222-0000/4/0"));
  REQUIRE(r2);  // two instances of one GPU: two CUDA devices on the same PCI device
  CHECK(buses(*r2) == std::vector<int>{0x50, 0x50});
  CHECK((*r2)[1].index == 1);
}

TEST_CASE("bad CUDA_VISIBLE_DEVICES values are rejected, naming the variable and the entry") {
  struct Case {
    const char* value;
    const char* entry;
  };
  for (Case c : {Case{"0,abc", "abc"}, Case{"-1", "-1"}, Case{"0,,1", "entry 2"}, Case{"4", "4"}, Case{"1,1", "1"},
                 Case{"GPU-aaaa", "GPU-aaaa"} /* ambiguous */, Case{"GPU-ffff", "GPU-ffff"} /* unknown */,
                 Case{"GPU-cccc,GPU-cccc0", "GPU-cccc0"} /* duplicate */, Case{"0,GPU-cccc", "0"} /* mixed */,
                 Case{"MIG-5c3f0a2e-1111-2222-3333-444455556666", "MIG-5c3f"} /* bare MIG UUID */,
                 Case{"99999999999999999999", "9999"}}) {
    CAPTURE(c.value);
    std::string msg = select_error(four_nvidia(), cuda(c.value));
    CAPTURE(msg);
    CHECK(msg.find("CUDA_VISIBLE_DEVICES") != std::string::npos);
    CHECK(msg.find(c.entry) != std::string::npos);
  }
}

TEST_CASE("an entry that is no index and no UUID is named as such, not as a mix of the two") {
  // "1,-1,2" holds indices and one entry, -1, that is neither: CUDA stops its
  // list at -1 (GPU 1 only); gpuaff names -1 and says what it is not.
  std::string msg = select_error(four_nvidia(), cuda("1,-1,2"));
  CHECK(msg == "CUDA_VISIBLE_DEVICES='1,-1,2': entry '-1' is neither a GPU index nor a GPU-/MIG- UUID prefix (CUDA and "
               "HIP would silently stop the list there; gpuaff refuses): fix or unset CUDA_VISIBLE_DEVICES");
  // A real mix (an index beside a UUID) is still called one.
  CHECK(select_error(four_nvidia(), cuda("GPU-cccc,1")).find("mixes index '1' with UUIDs") != std::string::npos);
}

TEST_CASE("UUID entries when no UUID is known say where UUIDs come from") {
  std::vector<Gpu> gs = {make("0000:10:00.0", 0x10de), make("0000:20:00.0", 0x10de)};
  auto r = select_visible_gpus(gs, cuda("GPU-1234"));
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == Errc::not_found);
  CHECK(std::string(r.error().message()).find("information") != std::string::npos);
}

TEST_CASE("CUDA_VISIBLE_DEVICES leaves AMD and Intel GPUs alone; HIP and ROCR select AMD GPUs") {
  std::vector<Gpu> gs = {make("0000:10:00.0", 0x10de), make("0000:20:00.0", 0x1002), make("0000:30:00.0", 0x10de),
                         make("0000:40:00.0", 0x1002), make("0000:50:00.0", 0x1002), make("0000:60:00.0", 0x8086)};
  auto r = select_visible_gpus(gs, VisibleDevices{.use_environment = false, .cuda_visible_devices = "1"});
  REQUIRE(r);
  // NVIDIA slots (0x10, 0x30) refilled by the selection {0x30}; the rest in bus order.
  CHECK(buses(*r) == std::vector<int>{0x30, 0x20, 0x40, 0x50, 0x60});

  // ROCR first selects AMD 2,0 -> {0x50, 0x20}; HIP then indexes into that: 1 -> 0x20.
  auto a = select_visible_gpus(
      gs, VisibleDevices{.use_environment = false, .hip_visible_devices = "1", .rocr_visible_devices = "2,0"});
  REQUIRE(a);
  CHECK(buses(*a) == std::vector<int>{0x10, 0x20, 0x30, 0x60});

  auto bad = select_visible_gpus(gs, VisibleDevices{.use_environment = false, .hip_visible_devices = "GPU-abcd"});
  REQUIRE_FALSE(bad);
  CHECK(std::string(bad.error().message()).find("HIP_VISIBLE_DEVICES") != std::string::npos);
  auto range = select_visible_gpus(gs, VisibleDevices{.use_environment = false, .rocr_visible_devices = "3"});
  REQUIRE_FALSE(range);
  CHECK(std::string(range.error().message()).find("ROCR_VISIBLE_DEVICES") != std::string::npos);
}

TEST_CASE("--visible-devices overrides the environment and indexes every GPU in bus order") {
  std::vector<Gpu> gs = {make("0000:20:00.0", 0x1002), make("0000:10:00.0", 0x10de, "GPU-1111"),
                         make("0000:30:00.0", 0x8086)};
  auto r = select_visible_gpus(gs, VisibleDevices{.list = "2,0", .cuda_visible_devices = "garbage"});
  REQUIRE(r);
  CHECK(buses(*r) == std::vector<int>{0x30, 0x10});
  auto u = select_visible_gpus(gs, VisibleDevices{.list = "GPU-1111"});
  REQUIRE(u);
  CHECK(buses(*u) == std::vector<int>{0x10});
  auto bad = select_visible_gpus(gs, VisibleDevices{.list = "3"});
  REQUIRE_FALSE(bad);
  CHECK(std::string(bad.error().message()).find("visible_devices") != std::string::npos);
}

TEST_CASE("the environment is read only through with_environment and from_environment") {
  ::setenv("CUDA_VISIBLE_DEVICES", "1", 1);
  ::unsetenv("HIP_VISIBLE_DEVICES");
  ::setenv("ROCR_VISIBLE_DEVICES", "", 1);
  VisibleDevices pure{};  // use_environment = true, but select_visible_gpus itself reads nothing
  auto r = select_visible_gpus(four_nvidia(), pure);
  REQUIRE(r);
  CHECK(r->size() == 4);
  VisibleDevices env = pure.with_environment();
  CHECK(env.cuda_visible_devices == std::optional<std::string>("1"));
  CHECK_FALSE(env.hip_visible_devices.has_value());
  CHECK(env.rocr_visible_devices == std::optional<std::string>(""));
  CHECK(VisibleDevices::from_environment().cuda_visible_devices == std::optional<std::string>("1"));
  VisibleDevices off{.use_environment = false};
  CHECK_FALSE(off.with_environment().cuda_visible_devices.has_value());
  VisibleDevices explicit_value{.cuda_visible_devices = "0"};
  CHECK(explicit_value.with_environment().cuda_visible_devices == std::optional<std::string>("0"));
  auto sel = select_visible_gpus(four_nvidia(), env);
  REQUIRE(sel);
  CHECK(buses(*sel) == std::vector<int>{0x50});
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  ::unsetenv("ROCR_VISIBLE_DEVICES");
}

TEST_CASE("selection errors count GPUs in correct English") {
  std::vector<Gpu> one{make("0000:06:00.0", 0x10de, "GPU-d187a728-6ccc-1c8f-94bd-16688587736a")};
  // One GPU: singular; a prefix that matches none: "no NVIDIA GPU has".
  CHECK(select_error(one, cuda("1")).find("there is 1 NVIDIA GPU (index 0)") != std::string::npos);
  CHECK(select_error(one, cuda("GPU-ffff")).find("no NVIDIA GPU has a UUID starting with 'GPU-ffff'") !=
        std::string::npos);
  // Four GPUs: plural; an ambiguous prefix names how many it matches.
  // The valid range is spelled out: four GPUs are indices 0-3.
  CHECK(select_error(four_nvidia(), cuda("7")).find("there are 4 NVIDIA GPUs (indices 0-3)") != std::string::npos);
  // No candidate left (ROCR_VISIBLE_DEVICES hid the one AMD GPU): no index is valid.
  // (CUDA_VISIBLE_DEVICES=0 on an AMD-only machine is no longer an error: HIP
  // reads it in place of an unset HIP_VISIBLE_DEVICES, docs/contract.md section 2.)
  std::vector<Gpu> amd_only{make("0000:07:00.0", 0x1002)};
  CHECK(select_error(amd_only, VisibleDevices{.use_environment = false, .hip_visible_devices = "0",
                                              .rocr_visible_devices = ""})
            .find("there is no AMD GPU;") != std::string::npos);
  CHECK(select_error(amd_only, cuda("0")).empty());
  CHECK(select_error(four_nvidia(), cuda("GPU-aaaa")).find("matches 2 NVIDIA GPUs") != std::string::npos);
}

TEST_CASE("a MIG instance listed twice is an error, however it is spelled") {
  // Forty copies of one instance once made forty visible GPUs (gpu=39 valid).
  std::string forty;
  for (int i = 0; i < 40; ++i) forty += std::string(i == 0 ? "" : ",") + "MIG-GPU-dddd0000-0000/1/0";
  for (std::string value : {forty, std::string("MIG-GPU-dddd0000-0000/1/0,MIG-dddd0000-0000/1/0"),
                            std::string("MIG-aaaa2222-0000/3/0,MIG-GPU-AAAA2222-0000/03/0")}) {
    CAPTURE(value);
    auto r = select_visible_gpus(four_nvidia(), cuda(value.c_str()));
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == Errc::invalid_argument);
    CHECK(std::string(r.error().message()).find("twice") != std::string::npos);
  }
  // The bare form too, on a MIG container's one GPU.
  std::vector<Gpu> one = {make("0000:3a:00.0", 0x10de, "GPU-3a3a")};
  auto bare = select_visible_gpus(one, cuda("MIG-5c3f0a2e-1111,mig-5C3F0A2E-1111"));
  REQUIRE_FALSE(bare);
  CHECK(std::string(bare.error().message()).find("twice") != std::string::npos);
  // Two instances of one GPU are still two devices.
  CHECK(select_visible_gpus(four_nvidia(), cuda("MIG-GPU-dddd0000-0000/1/0,MIG-GPU-dddd0000-0000/2/0")));
}

TEST_CASE("a MIG entry not of the form MIG-<uuid> or MIG-GPU-<uuid>/<gi>/<ci> is refused, naming it") {
  for (const char* value : {"MIG-GPU-x/zz", "MIG-GPU-dddd0000-0000/1", "MIG-GPU-dddd0000-0000/1/0/2",
                            "MIG-GPU-dddd0000-0000/a/0", "MIG-GPU-dddd0000-0000/1/", "MIG-", "MIG-GPU-/1/0",
                            "MIG-zz", "MIG-GPU-dddd0000-0000//0", "MIG-GPU-dddd 0000/1/0"}) {
    CAPTURE(value);
    std::vector<Gpu> one = {make("0000:3a:00.0", 0x10de, "GPU-dddd0000-0000")};
    for (const auto& gpus : {four_nvidia(), one}) {
      auto r = select_visible_gpus(gpus, cuda(value));
      REQUIRE_FALSE(r);
      std::string msg(r.error().message());
      CAPTURE(msg);
      CHECK(r.error().code() == Errc::invalid_argument);
      CHECK(msg.find(std::string("'") + value + "'") != std::string::npos);
      CHECK(msg.find("MIG-GPU-<uuid>/<gi>/<ci>") != std::string::npos);
    }
  }
}

// SPDX-License-Identifier: Apache-2.0
// `gpuaff record` captures what hwloc needs: a recording of this machine loads
// through hwloc (HWLOC_FSROOT) into the topology hwloc sees live.
#include <gpuaff/source/hwloc.hpp>
#include <gpuaff/record/record.hpp>

#include <dirent.h>
#include <cstdlib>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "hwloc/temp_root.hpp"
#include "support/check.hpp"

using gpuaff::Errc;
using gpuaff::HwlocInput;
using gpuaff::HwlocOptions;
using gpuaff::HwlocSource;
using gpuaff::PciAddress;
using gpuaff::RecordOptions;
using gpuaff::Topology;
using gpuaff_test::TempDir;

namespace {

gpuaff::VisibleDevices no_env() { return gpuaff::VisibleDevices{.use_environment = false}; }

// Every PCI device of this machine, so that the comparison covers PCI locality
// even where the machine has no GPU.
std::vector<PciAddress> all_pci_devices() {
  std::vector<PciAddress> out;
  if (DIR* d = ::opendir("/sys/bus/pci/devices")) {
    while (dirent* e = ::readdir(d))
      if (auto a = PciAddress::parse(e->d_name)) out.push_back(*a);
    ::closedir(d);
  }
  return out;
}

bool is_symlink(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}
bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("a recording of this machine loads with hwloc into the topology hwloc sees live") {
  // A recording holds sysfs. Where the kernel lists no caches (cpuN/cache/ is
  // missing in some VMs), hwloc's x86 backend reads them live from CPUID,
  // which no file can carry: both loads then use what Linux reports alone.
  const char* before = std::getenv("HWLOC_COMPONENTS");
  struct Restore {
    bool had;
    std::string value;
    ~Restore() { had ? ::setenv("HWLOC_COMPONENTS", value.c_str(), 1) : ::unsetenv("HWLOC_COMPONENTS"); }
  } restore{before != nullptr, before ? before : ""};
  ::setenv("HWLOC_COMPONENTS", "-x86", 1);
  TempDir dir;
  auto pci = all_pci_devices();
  auto rec = gpuaff::record_topology(RecordOptions{.out_dir = dir / "rec", .extra_pci = pci});
  REQUIRE_MESSAGE(rec, rec.error().message());

  auto live = HwlocSource(HwlocOptions{.visible = no_env(), .extra_pci = pci}).load();
  REQUIRE_MESSAGE(live, live.error().message());
  auto replay =
      HwlocSource(HwlocOptions{.input = HwlocInput::root, .path = dir / "rec", .visible = no_env(), .extra_pci = pci})
          .load();
  REQUIRE_MESSAGE(replay, replay.error().message());

  Topology a = *live;
  Topology b = *replay;
  CHECK(b.origin.view().find("rec") != std::string_view::npos);
  b.origin = a.origin;
  CHECK(a.online == b.online);
  CHECK(a.allowed == b.allowed);
  CHECK(a.packages == b.packages);
  CHECK(a.nodes == b.nodes);
  CHECK(a.cores == b.cores);
  CHECK(a.core_complexes == b.core_complexes);
  CHECK(a.pci_devices == b.pci_devices);
  CHECK(a == b);
}

TEST_CASE("the recording holds the hex masks hwloc reads and keeps PCI devices as links") {
  TempDir dir;
  auto rec = gpuaff::record_topology(RecordOptions{.out_dir = dir / "rec"});
  REQUIRE_MESSAGE(rec, rec.error().message());
  CHECK(exists(dir / "rec/sys/devices/system/cpu/cpu0/topology/thread_siblings"));
  CHECK(exists(dir / "rec/sys/devices/system/node/node0/cpumap"));
  CHECK(exists(dir / "rec/proc/self/status"));
  for (const auto& a : all_pci_devices()) {
    std::string bdf(a.to_string().view());
    CHECK_MESSAGE(is_symlink(dir / ("rec/sys/bus/pci/devices/" + bdf)), bdf);
    CHECK_MESSAGE(exists(dir / ("rec/sys/bus/pci/devices/" + bdf + "/class")), bdf);
  }
  // a process's links in /proc are not recreated: proc/self stays a directory
  CHECK(!is_symlink(dir / "rec/proc/self"));
}

TEST_CASE("without for_hwloc a recording has only the sysfs reader's files, which hwloc cannot load") {
  TempDir dir;
  auto rec = gpuaff::record_topology(RecordOptions{.out_dir = dir / "rec", .for_hwloc = false});
  REQUIRE_MESSAGE(rec, rec.error().message());
  auto t = HwlocSource(HwlocOptions{.input = HwlocInput::root, .path = dir / "rec", .visible = no_env()}).load();
  REQUIRE(!t);
  CHECK(t.error().code() == Errc::unsupported);
  CHECK(t.error().message().find(dir / "rec") != std::string_view::npos);
}

TEST_CASE("copying hwloc's files into a missing directory names it") {
  TempDir dir;
  auto r = gpuaff::copy_hwloc_extras("/", dir / "missing");
  REQUIRE(!r);
  CHECK(r.error().code() == Errc::io_error);
  CHECK(r.error().message().find(dir / "missing") != std::string_view::npos);
}

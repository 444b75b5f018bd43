// SPDX-License-Identifier: Apache-2.0
// The live machine ("/"), checked against facts read another way, and the
// recorder: a recording of this machine loads back to the same Topology.
#include <gpuaff/record/record.hpp>
#include <gpuaff/source/cgroup.hpp>
#include <gpuaff/source/reserved.hpp>
#include <gpuaff/source/sysfs.hpp>

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "source/tree.hpp"
#include "support/check.hpp"

using gpuaff::CpuSet;
using gpuaff::RecordOptions;
using gpuaff::SysfsOptions;
using gpuaff::SysfsSource;
using gpuaff::Topology;
using gpuaff_test::TempTree;

namespace {

SysfsOptions live_options() { return SysfsOptions{.root = "/", .visible = {.use_environment = false}}; }

CpuSet affinity_via_glibc() {
  cpu_set_t s;
  CPU_ZERO(&s);
  REQUIRE(::sched_getaffinity(0, sizeof s, &s) == 0);
  return CpuSet::from_cpu_set_t(s);
}

std::string status_line(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return line.substr(key.size() + 1);
  return "";
}

bool is_symlink(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

}  // namespace

TEST_CASE("the live machine loads and agrees with sysconf, sched_getaffinity and /proc") {
  SysfsSource s(live_options());
  auto r = s.load();
  REQUIRE_MESSAGE(r, r.error().message());
  CHECK(r->online.count() == ::sysconf(_SC_NPROCESSORS_ONLN));
  CHECK(r->allowed == affinity_via_glibc());
  CHECK(r->mems_allowed == CpuSet::parse_list(status_line("Mems_allowed_list")).value());
  CHECK(r->origin == "/");
  // Every online CPU is in exactly one core and one package.
  int in_cores = 0;
  for (const auto& c : r->cores) in_cores += c.threads.count();
  CHECK(in_cores == r->online.count());
  for (int cpu : r->online) CHECK(r->package_of_cpu(cpu) != nullptr);
  CHECK_FALSE(r->nodes.empty());
}

TEST_CASE("live, the allowed set is the calling thread's, not the process's") {
  CpuSet all = affinity_via_glibc();
  if (all.count() < 2) return;  // nothing to narrow on a one-CPU machine
  int first = all.first();
  Topology seen;
  std::thread th([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(static_cast<std::size_t>(first), &one);
    REQUIRE(::sched_setaffinity(0, sizeof one, &one) == 0);
    SysfsSource s(SysfsOptions{.root = "/tmp/..", .visible = {.use_environment = false}});  // canonicalises to "/"
    auto r = s.load();
    REQUIRE(r);
    seen = *r;
  });
  th.join();
  CHECK(seen.allowed == CpuSet::single(first));  // /proc/self/status still shows the main thread's set
}

TEST_CASE("a recording of this machine loads back to the same topology") {
  TempTree out;
  auto sum = gpuaff::record_topology(RecordOptions{.out_dir = out.path("rec"), .for_hwloc = false});
  REQUIRE_MESSAGE(sum, sum.error().message());
  SysfsSource live(live_options());
  auto a = live.load();
  REQUIRE(a);
  SysfsSource replay(SysfsOptions{.root = out.path("rec"), .visible = {.use_environment = false}});
  auto b = replay.load();
  REQUIRE_MESSAGE(b, b.error().message());
  Topology expected = *a;
  expected.origin = out.path("rec");
  CHECK(*b == expected);
  CHECK(b->allowed == a->allowed);
  // Exactly the files read were written (proc/self/status freshly), each once:
  // the topology's, and the cgroup cpuset's (docs/contract.md section 1), which
  // the topology reader does not read.
  auto cgroup = gpuaff::read_cgroup_cpuset("/");
  REQUIRE(cgroup);
  // And what the system reserved (cpu/isolated, cpu/nohz_full, the cgroup
  // partitions), which overlaps the cgroup's files: each file written once.
  auto reserved = gpuaff::read_system_reservations("/");
  REQUIRE(reserved);
  // proc/self/status is written whether or not the live load read it (live,
  // the allowed memory nodes come from get_mempolicy where the kernel
  // answers it): a replay reads the allowed set from it.
  std::set<std::string> wrote(cgroup->files_read.begin(), cgroup->files_read.end());
  for (const auto& rel : live.files_read()) wrote.insert(std::string(rel));
  for (const auto& rel : reserved->files_read) wrote.insert(rel);
  wrote.insert("proc/self/status");
  CHECK(sum->files == static_cast<int>(wrote.size()));
  for (const auto& rel : reserved->files_read) CHECK(std::filesystem::exists(out.path("rec") + "/" + rel));
  for (const auto& rel : cgroup->files_read) CHECK(std::filesystem::exists(out.path("rec") + "/" + rel));
  std::vector<std::string> replayed = replay.files_read();
  std::vector<std::string> live_read = live.files_read();
  auto status_at = [](std::vector<std::string>& v) { return std::find(v.begin(), v.end(), "proc/self/status"); };
  REQUIRE(status_at(replayed) != replayed.end());
  replayed.erase(status_at(replayed));
  if (status_at(live_read) != live_read.end()) live_read.erase(status_at(live_read));
  CHECK(replayed == live_read);
  CHECK(sum->bytes > 0);
  // PCI entries are relative symlinks into sys/devices, as in real sysfs.
  std::vector<std::string> devs;
  REQUIRE(gpuaff::detail::list_directory(out.path("rec/sys/bus/pci/devices"), devs) == 0);
  for (const auto& d : devs) {
    std::string p = out.path("rec/sys/bus/pci/devices/" + d);
    CHECK(is_symlink(p));
    char target[512] = {};
    REQUIRE(::readlink(p.c_str(), target, sizeof target - 1) > 0);
    CHECK(std::string(target).rfind("../../../devices/", 0) == 0);
  }
  // Each class entry the NIC list named (sys/class/net/eth0, sys/class/infiniband/mlx5_0)
  // is a link too, and so is the `device` link inside it: two each.
  std::size_t class_links = 0;
  for (const char* cls : {"net", "infiniband"}) {
    std::vector<std::string> names;
    if (gpuaff::detail::list_directory(out.path(std::string("rec/sys/class/") + cls), names) == 0)
      class_links += 2 * names.size();
  }
  CHECK(sum->symlinks == static_cast<int>(devs.size() + class_links));
}

TEST_CASE("a recording with the hwloc extras (the default) loads back to the same topology too") {
  TempTree out;
  auto sum = gpuaff::record_topology(RecordOptions{.out_dir = out.path("rec")});
  REQUIRE_MESSAGE(sum, sum.error().message());
  auto a = SysfsSource(live_options()).load();
  auto b = SysfsSource(SysfsOptions{.root = out.path("rec"), .visible = {.use_environment = false}}).load();
  REQUIRE(a);
  REQUIRE_MESSAGE(b, b.error().message());
  Topology expected = *a;
  expected.origin = out.path("rec");
  CHECK(*b == expected);
  // Each path once; proc/self/status is ours (the allowed set), not the process's copy.
  CHECK(std::adjacent_find(sum->paths.begin(), sum->paths.end()) == sum->paths.end());
  std::string status;
  REQUIRE(gpuaff::detail::read_whole_file(out.path("rec/proc/self/status"), status) == 0);
  CHECK(status.rfind("Cpus_allowed:\t", 0) == 0);
}

TEST_CASE("the recorder refuses a non-empty directory unless asked") {
  TempTree out;
  out.write("rec/something", "x");
  auto r = gpuaff::record_topology(RecordOptions{.out_dir = out.path("rec")});
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == gpuaff::Errc::invalid_argument);
  CHECK(std::string(r.error().message()).find(out.path("rec")) != std::string::npos);
  auto ok = gpuaff::record_topology(RecordOptions{.out_dir = out.path("rec"), .allow_non_empty = true});
  CHECK(ok);
  auto again = gpuaff::record_topology(RecordOptions{.out_dir = out.path("rec"), .allow_non_empty = true});
  CHECK(again);  // same links and files again: fine
}

TEST_CASE("recording a recording with absolute links reproduces it, links made relative") {
  TempTree src;
  src.write("sys/devices/system/cpu/online", "0-1\n");
  for (int c = 0; c < 2; ++c) {
    std::string d = "sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    src.write(d + "core_cpus_list", "0-1\n").write(d + "physical_package_id", "0\n").write(d + "package_cpus_list", "0-1\n");
  }
  src.write("sys/devices/pci0000:3b/0000:3b:00.0/class", "0x030200\n");
  src.write("sys/devices/pci0000:3b/0000:3b:00.0/vendor", "0x10de\n");
  src.write("sys/devices/pci0000:3b/0000:3b:00.0/numa_node", "-1\n");
  src.link("sys/bus/pci/devices/0000:3b:00.0", "/sys/devices/pci0000:3b/0000:3b:00.0");
  src.write("proc/self/status", "Cpus_allowed_list:\t1\n");
  TempTree out;
  auto sum = gpuaff::record_topology(RecordOptions{.out_dir = out.path("rec"), .root = src.root()});
  REQUIRE_MESSAGE(sum, sum.error().message());
  char target[512] = {};
  REQUIRE(::readlink(out.path("rec/sys/bus/pci/devices/0000:3b:00.0").c_str(), target, sizeof target - 1) > 0);
  CHECK(std::string(target) == "../../../devices/pci0000:3b/0000:3b:00.0");
  auto a = SysfsSource(SysfsOptions{.root = src.root(), .visible = {.use_environment = false}}).load();
  auto b = SysfsSource(SysfsOptions{.root = out.path("rec"), .visible = {.use_environment = false}}).load();
  REQUIRE(a);
  REQUIRE(b);
  CHECK(b->allowed == CpuSet{1});
  Topology expected = *a;
  expected.origin = out.path("rec");
  CHECK(*b == expected);
  CHECK(sum->topology.gpus.size() == 1);
}

TEST_CASE("recording a broken root fails and says why") {
  TempTree src;
  src.write("sys/devices/system/cpu/online", "garbage\n");
  TempTree out;
  auto r = gpuaff::record_topology(RecordOptions{.out_dir = out.path("rec"), .root = src.root()});
  REQUIRE_FALSE(r);
  CHECK(std::string(r.error().message()).find("cannot record") != std::string::npos);
  CHECK(std::string(r.error().message()).find(src.path("sys/devices/system/cpu/online")) != std::string::npos);
}

TEST_CASE("extra_pci devices are recorded too, so --pci works on the recording") {
  TempTree src;
  src.write("sys/devices/system/cpu/online", "0-1\n");
  for (int c = 0; c < 2; ++c) {
    std::string d = "sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    src.write(d + "core_cpus_list", std::to_string(c) + "\n")
        .write(d + "physical_package_id", "0\n")
        .write(d + "package_cpus_list", "0-1\n");
  }
  gpuaff_test::add_pci(src, "0000:05:00.0", "0x020000", "0x15b3", "0", "1");  // a NIC
  auto nic = gpuaff::PciAddress::parse("0000:05:00.0").value();
  TempTree out;
  auto sum = gpuaff::record_topology(
      RecordOptions{.out_dir = out.path("rec"), .root = src.root(), .extra_pci = {nic}, .for_hwloc = false});
  REQUIRE_MESSAGE(sum, sum.error().message());
  auto b = SysfsSource(SysfsOptions{.root = out.path("rec"), .visible = {.use_environment = false}, .extra_pci = {nic}})
               .load();
  REQUIRE_MESSAGE(b, b.error().message());
  const gpuaff::PciDevice* d = b->find_pci(nic);
  REQUIRE(d != nullptr);
  CHECK(d->vendor == 0x15b3);
  CHECK(d->local_cpus == CpuSet{1});
  CHECK(d->numa_node == 0);
}

// A recording copied out of a container, or handed over in a bug report, may
// hold absolute links. Recording from it must resolve them inside it, /proc
// included: the hwloc extras (proc/self/cgroup, proc/mounts, ...) must never
// copy a file of the machine that runs the recorder.
TEST_CASE("recording a root never copies a host file that an absolute link in its proc/ names") {
  TempTree host;  // stands for the machine's own files, outside the root
  host.write("secret", "host-only\n");
  TempTree src;
  src.write("sys/devices/system/cpu/online", "0\n");
  src.write("sys/devices/system/cpu/cpu0/topology/core_cpus_list", "0\n")
      .write("sys/devices/system/cpu/cpu0/topology/physical_package_id", "0\n")
      .write("sys/devices/system/cpu/cpu0/topology/package_cpus_list", "0\n");
  src.link("proc/self/cgroup", host.path("secret"));  // absolute: outside the root unless re-rooted
  src.link("proc/meminfo", "/etc/meminfo");           // re-rooted: the root's own etc/meminfo
  src.write("etc/meminfo", "MemTotal: 1 kB\n");
  TempTree out;
  auto sum = gpuaff::record_topology(RecordOptions{.out_dir = out.path("rec"), .root = src.root()});
  REQUIRE_MESSAGE(sum, sum.error().message());

  std::string text;
  CHECK(gpuaff::detail::read_whole_file(out.path("rec/proc/self/cgroup"), text) == ENOENT);
  for (const auto& p : sum->paths) {
    REQUIRE(gpuaff::detail::read_whole_file(out.path("rec/" + p), text) == 0);
    CHECK_MESSAGE(text.find("host-only") == std::string::npos, p);
  }
  // The link that stays inside the root is followed there, and the file keeps its name.
  REQUIRE(gpuaff::detail::read_whole_file(out.path("rec/proc/meminfo"), text) == 0);
  CHECK(text == "MemTotal: 1 kB\n");
}

// SPDX-License-Identifier: Apache-2.0
// The limits that refuse a host buffer, said before a page is faulted: the
// memory cgroup, the node's free memory, huge pages, and how a node's meminfo
// is read. No kernel involved: the limits are written here.
#include <gpuaff/memory/host_buffer.hpp>

#include <string>

#include "support/check.hpp"

using gpuaff::Errc;
using gpuaff::HostBufferOptions;
using gpuaff::HostLimits;
using gpuaff::HugePages;
using gpuaff::NodeSet;

namespace {
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("the limits that refuse an allocation are named: cgroup, node memory, huge pages") {
  HostLimits l;
  l.mems_allowed = NodeSet::single(0);
  HostBufferOptions o{.nodes = NodeSet::single(0)};
  SUBCASE("memory cgroup") {
    l.cgroup_room = 1024 * 1024;
    l.cgroup_file = "/sys/fs/cgroup/job/memory.max";
    auto r = gpuaff::check_host_room(8 * 1024 * 1024, o, l);
    REQUIRE(!r);
    CHECK(r.error().code() == Errc::empty_result);
    CHECK(has(std::string(r.error().message()), "/sys/fs/cgroup/job/memory.max leaves 1 MiB"));
    CHECK(gpuaff::check_host_room(512 * 1024, o, l));  // half the room fits
  }
  SUBCASE("free memory on the node") {
    l.free_bytes[0] = 2 * 1024 * 1024;
    auto r = gpuaff::check_host_room(3 * 1024 * 1024, o, l);
    REQUIRE(!r);
    CHECK(has(std::string(r.error().message()), "does not fit on NUMA node(s) 0: 2 MiB free"));
  }
  SUBCASE("hugetlb pool") {
    o.huge = HugePages::hugetlb;
    l.huge_page_size = 2 * 1024 * 1024;
    l.free_huge[0] = 1;
    auto r = gpuaff::check_host_room(3 * 1024 * 1024, o, l);  // two 2 MiB pages needed, one free
    REQUIRE(!r);
    CHECK(r.error().code() == Errc::unsupported);
    CHECK(has(std::string(r.error().message()), "have 1 free 2048 kB huge pages and 2 are needed"));
  }
  SUBCASE("transparent huge pages switched off") {
    o.huge = HugePages::transparent;
    l.thp_enabled = "always madvise [never]";
    auto r = gpuaff::check_host_room(4096, o, l);
    REQUIRE(!r);
    CHECK(has(std::string(r.error().message()), "says 'always madvise [never]'"));
  }
  SUBCASE("no nodes, no bytes") {
    CHECK(gpuaff::check_host_room(4096, HostBufferOptions{}, l).error().code() == Errc::invalid_argument);
    CHECK(gpuaff::check_host_room(0, o, l).error().code() == Errc::invalid_argument);
  }
}

TEST_CASE("a node's meminfo lines are read by key, in bytes") {
  // The layout of /sys/devices/system/node/node1/meminfo: "Node N Key:  value kB".
  std::string text = "Node 1 MemTotal:       65536 kB\nNode 1 MemFree:        2048 kB\n"
                     "Node 1 Active(file):     100 kB\nNode 1 Inactive(file):   28 kB\nNode 1 HugePages_Free:     3\n";
  CHECK(gpuaff::detail::meminfo_value(text, "MemFree") == 2048LL * 1024);
  CHECK(gpuaff::detail::meminfo_value(text, "Active(file)") == 100LL * 1024);  // not Inactive(file)'s
  CHECK(gpuaff::detail::meminfo_value(text, "Inactive(file)") == 28LL * 1024);
  CHECK(gpuaff::detail::meminfo_value(text, "HugePages_Free") == 3);  // a count, no unit
  CHECK(!gpuaff::detail::meminfo_value(text, "SReclaimable").has_value());
}

// SPDX-License-Identifier: Apache-2.0
// Hostile roots: trees that no kernel writes but that an edited, damaged or
// planted recording may hold. Each is refused with one error naming the files
// involved, or read the one way that cannot be wrong and noted; none may give
// a duplicate GPU, shift an index or bind a GPU to every CPU.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gpuaff/gpuaff.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "source/tree.hpp"
#include "support/check.hpp"
#include "support/notes.hpp"

using gpuaff::CpuSet;
using gpuaff::SysfsOptions;
using gpuaff::SysfsSource;
using gpuaff::Topology;
using gpuaff_test::add_cpu;
using gpuaff_test::add_node;
using gpuaff_test::add_pci;
using gpuaff_test::cpu_root;
using gpuaff_test::has_note;
using gpuaff_test::node_root;
using gpuaff_test::TempTree;

namespace {

const std::string pci_dir = "sys/bus/pci/devices/";

// 8 CPUs without SMT, one package; node 0 = 0-3, node 1 = 4-7; NVIDIA GPUs
// 0000:10:00.0 (node 0) and 0000:90:00.0 (node 1).
void base(TempTree& t) {
  t.write(cpu_root + "online", "0-7\n");
  for (int c = 0; c < 8; ++c) add_cpu(t, c, std::to_string(c), 0, "0-7");
  t.write(node_root + "online", "0-1\n");
  add_node(t, 0, "0-3", "10 20");
  add_node(t, 1, "4-7", "20 10");
  add_pci(t, "0000:10:00.0", "0x030200", "0x10de", "0", "0-3");
  add_pci(t, "0000:90:00.0", "0x030200", "0x10de", "1", "4-7");
  t.write("proc/self/status", "Cpus_allowed_list:\t0-7\n");
}

/// A second entry for device 0000:10:00.0 under another name, as a copy would make it.
void copy_of_first_gpu(TempTree& t, const std::string& name) {
  t.link(pci_dir + name, "../../../devices/pci0000:10/0000:10:00.0");
}

struct Refused {
  std::string what;
  std::function<void(TempTree&)> mutate;
  std::vector<std::string> named;  // root-relative paths and words the one-line error must hold
};

std::vector<Refused> refused() {
  return {
      {"node 1 lists CPUs 2-3 of node 0", [](TempTree& t) { t.write(node_root + "node1/cpulist", "2-7\n"); },
       {node_root + "node0/cpulist", node_root + "node1/cpulist", "nodes 0 and 1 both list CPUs 2-3"}},
      {"node 1 lists every CPU (the DGX H100 edit of the report)",
       [](TempTree& t) { t.write(node_root + "node1/cpulist", "0-7\n"); },
       {node_root + "node0/cpulist", node_root + "node1/cpulist", "CPUs 0-3"}},
      {"overlap through the mask twin", [](TempTree& t) {
         t.remove(node_root + "node1/cpulist");
         t.write(node_root + "node1/cpumap", "f8\n");  // CPUs 3-7
       },
       {node_root + "node0/cpulist", node_root + "node1/cpumap", "CPUs 3"}},
      {"a domain-less name beside the real entry", [](TempTree& t) { copy_of_first_gpu(t, "10:00.0"); },
       {pci_dir + "0000:10:00.0", pci_dir + "10:00.0", "0000:10:00.0"}},
      {"an 8-digit domain beside the real entry", [](TempTree& t) { copy_of_first_gpu(t, "00000000:10:00.0"); },
       {pci_dir + "0000:10:00.0", pci_dir + "00000000:10:00.0"}},
      {"upper-case hex beside the real entry", [](TempTree& t) {
         t.remove(pci_dir + "0000:90:00.0");
         add_pci(t, "0000:1a:00.0", "0x030200", "0x10de", "0", "0-3");
         t.link(pci_dir + "0000:1A:00.0", "../../../devices/pci0000:1a/0000:1a:00.0");
       },
       {pci_dir + "0000:1a:00.0", pci_dir + "0000:1A:00.0"}},
      {"a leading space beside the real entry", [](TempTree& t) { copy_of_first_gpu(t, " 0000:10:00.0"); },
       {pci_dir + "0000:10:00.0", pci_dir + " 0000:10:00.0"}},
      {"a GPU on node 2, which has no directory, and no local_cpulist", [](TempTree& t) {
         t.write("sys/devices/pci0000:90/0000:90:00.0/numa_node", "2\n");
         t.remove("sys/devices/pci0000:90/0000:90:00.0/local_cpulist");
       },
       {node_root + "node2", pci_dir + "0000:90:00.0/numa_node"}},
      // A numa_node file exists only on kernels with NUMA: the node tree was lost.
      {"GPUs on nodes 0 and 1 in a tree whose node directory is gone", [](TempTree& t) {
         t.remove("sys/devices/system/node");
         t.remove("sys/devices/pci0000:90/0000:90:00.0/local_cpulist");
       },
       {pci_dir + "0000:90:00.0/numa_node", "names NUMA node 1", "the recording lost its node tree"}},
  };
}

Topology load_ok(const TempTree& t) {
  SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}});
  auto r = s.load();
  if (!r) FAIL(r.error().message());
  return *r;
}

}  // namespace

TEST_CASE("the base tree of the hostile table loads with two GPUs and no notes") {
  TempTree t;
  base(t);
  Topology topo = load_ok(t);
  REQUIRE(topo.gpus.size() == 2);
  CHECK(topo.notes.empty());
}

TEST_CASE("hostile roots are refused with one error naming the files involved") {
  int cases = 0;
  for (const Refused& c : refused()) {
    CAPTURE(c.what);
    TempTree t;
    base(t);
    c.mutate(t);
    SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}});
    auto r = s.load();
    REQUIRE_FALSE(r);
    std::string msg(r.error().message());
    CAPTURE(msg);
    CHECK(msg.find('\n') == std::string::npos);
    for (const auto& part : c.named) {
      CAPTURE(part);
      bool is_path = part.find('/') != std::string::npos;
      CHECK(msg.find(is_path ? t.path(part) : part) != std::string::npos);
    }
    ++cases;
  }
  CHECK(cases == 9);
}

TEST_CASE("a non-canonical PCI name alone is read as its address, noted, and keeps GPU order") {
  // " 0000:10:00.0" (a leading space), "10:00.0" and upper case all name 0000:10:00.0;
  // alone, each is that device, still GPU 0 before 0000:90:00.0.
  for (const char* name : {"10:00.0", "00000000:10:00.0", " 0000:10:00.0"}) {
    CAPTURE(name);
    TempTree t;
    base(t);
    t.remove(pci_dir + "0000:10:00.0");
    copy_of_first_gpu(t, name);
    Topology topo = load_ok(t);
    REQUIRE(topo.gpus.size() == 2);
    CHECK(topo.gpus[0].address().to_string().view() == "0000:10:00.0");
    CHECK(topo.gpus[1].address().to_string().view() == "0000:90:00.0");
    CHECK(has_note(topo, {std::string("'") + name + "'", "not the kernel's name", "read as 0000:10:00.0"}));
  }
}

TEST_CASE("a control character in a PCI name is escaped in the note, which stays one line") {
  TempTree t;
  base(t);
  t.remove(pci_dir + "0000:10:00.0");
  copy_of_first_gpu(t, "\n0000:10:00.0");
  Topology topo = load_ok(t);
  REQUIRE(topo.gpus.size() == 2);
  CHECK(has_note(topo, {"'\\x0a0000:10:00.0'"}));
  for (const auto& n : topo.notes) CHECK(n.find('\n') == std::string::npos);
}

TEST_CASE("a GPU whose node has no directory is an error naming the node and the GPU's numa_node, local_cpulist or not") {
  // numa_node says 2, which the tree does not have; local_cpulist says 4-7, the CPUs
  // of node 1. The tree lost a node (a cut recording): the GPU's own node is what
  // its binding depends on, so no guess from its local CPUs, however close.
  TempTree t;
  base(t);
  t.write("sys/devices/pci0000:90/0000:90:00.0/numa_node", "2\n");
  for (bool local : {true, false}) {
    CAPTURE(local);
    if (!local) t.remove("sys/devices/pci0000:90/0000:90:00.0/local_cpulist");
    auto topo = gpuaff::SysfsSource(gpuaff::SysfsOptions{.root = t.root(), .visible = {.use_environment = false}}).load();
    REQUIRE_FALSE(topo);
    std::string msg(topo.error().message());
    INFO(msg);
    CHECK(topo.error().code() == gpuaff::Errc::parse_error);  // a damaged root: exit 3
    CHECK(msg.find(node_root + "node2") != std::string::npos);
    CHECK(msg.find(pci_dir + "0000:90:00.0/numa_node") != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("online CPUs in no node's cpulist are noted; node bindings leave them out") {
  // node 1 lists 4-5: CPUs 6-7 are online but in no node.
  TempTree t;
  base(t);
  t.write(node_root + "node1/cpulist", "4-5\n");
  Topology topo = load_ok(t);
  CHECK(has_note(topo, {"online CPUs 6-7 are in no node's cpulist"}));
  auto r = gpuaff::bind(topo, 1, gpuaff::NodePolicy{});
  REQUIRE_MESSAGE(r, r.error().message());
  CHECK(*r == CpuSet::parse_list("4-5").value());
}

TEST_CASE("online CPUs from the cpuN directories when cpu/online, present and possible are all missing") {
  // cpu0-cpu7 exist; cpu3/online reads 0; cpufreq and cpuidle are no CPUs.
  TempTree t;
  base(t);
  t.remove(cpu_root + "online");
  t.write(cpu_root + "cpu3/online", "0\n");
  t.mkdir(cpu_root + "cpufreq").mkdir(cpu_root + "cpuidle");
  // cpu3 offline: the kernel removes its topology, and no node lists it.
  t.remove(cpu_root + "cpu3/topology");
  t.write(node_root + "node0/cpulist", "0-2\n");
  Topology topo = load_ok(t);
  CHECK(topo.online == CpuSet::parse_list("0-2,4-7").value());
  CHECK(has_note(topo, {"sys/devices/system/cpu/online is missing", "cpuN directories", "(0-7)", "minus CPUs 3"}));
}

TEST_CASE("a link target longer than 256 bytes is followed whole, by openat2 and by the user-space resolver") {
  // sysfs reports a link's st_size as 0, so a buffer sized from it (or any
  // fixed size) cut long targets silently. A GPU behind a deep bridge chain
  // has such a target. (A test tree's filesystem reports the real st_size, so
  // this guards against a fixed or too small buffer, not sysfs's 0 itself.)
  TempTree t;
  base(t);
  std::string deep = "sys/devices/pci0000:10";
  for (int i = 0; i < 12; ++i) deep += "/0000:1" + std::to_string(i % 10) + ":0" + std::to_string(i % 10) + ".0-bridge-level";
  std::string gpu = deep + "/0000:10:00.0/";
  t.remove(pci_dir + "0000:10:00.0");
  t.write(gpu + "class", "0x030200\n");
  t.write(gpu + "vendor", "0x10de\n");
  t.write(gpu + "device", "0x2330\n");
  t.write(gpu + "numa_node", "0\n");
  t.write(gpu + "local_cpulist", "0-3\n");
  std::string target = "../../../" + deep.substr(4) + "/0000:10:00.0";
  REQUIRE(target.size() > 256);
  t.link(pci_dir + "0000:10:00.0", target);
  for (bool user_space : {false, true}) {
    gpuaff::detail::sysfs_force_user_space_resolution = user_space;
    auto topo = SysfsSource(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}}).load();
    gpuaff::detail::sysfs_force_user_space_resolution = false;
    REQUIRE_MESSAGE(topo, (topo ? "" : std::string(topo.error().message())));
    REQUIRE(topo->gpus.size() == 2);
    CHECK(topo->gpus[0].address().to_string().view() == "0000:10:00.0");
    CHECK(topo->gpus[0].numa_node() == 0);
  }
}

TEST_CASE("the user-space resolver's folder cache grows in linear time: 120,000 folders in seconds, not minutes") {
  // The fuzzer's finding: cpu/online "0-7000" in a small tree took a minute
  // to load without openat2, each folder looked up inserted into a sorted
  // vector (quadratic). A kernel before 5.6 resolves every root this way.
  TempTree t;
  t.mkdir("sys/devices/system/cpu");
  gpuaff::detail::RootResolver resolver(t.root());
  auto start = std::chrono::steady_clock::now();
  std::string out;
  for (int c = 0; c < 40000; ++c) {
    std::string cpu = "sys/devices/system/cpu/cpu" + std::to_string(c);
    for (const std::string& dir : {cpu, cpu + "/cache", cpu + "/cache/index0"}) {
      REQUIRE(resolver.resolve_dir(dir, out) == 0);
      REQUIRE(out == dir);
    }
  }
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("took ", took, " s");
  CHECK(took < 15.0);
  // The fuzzer's tree itself, read as a kernel without openat2 reads it.
  TempTree f;
  base(f);
  f.write(cpu_root + "online", "0-7000\n");
  gpuaff::detail::sysfs_force_user_space_resolution = true;
  auto begin = std::chrono::steady_clock::now();
  auto topo = SysfsSource(SysfsOptions{.root = f.root(), .visible = {.use_environment = false}}).load();
  double load = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  gpuaff::detail::sysfs_force_user_space_resolution = false;
  INFO("load took ", load, " s");
  CHECK(load < 15.0);
  (void)topo;  // loaded or refused: only the time matters here
}

TEST_CASE("no node directory, GPUs with local CPUs on nodes 0 and 1: refused, not read as one node of every CPU") {
  // The stand-in node 0 of a kernel without NUMA would give GPU 0 both
  // sockets (0-7); a numa_node file says the kernel has NUMA, so the recording
  // lost its node tree.
  TempTree t;
  base(t);
  TempTree::remove_all(t.root() + "/sys/devices/system/node");
  auto topo = SysfsSource(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}}).load();
  REQUIRE(!topo);
  CHECK(topo.error().code() == gpuaff::Errc::parse_error);
  std::string m(topo.error().message());
  CHECK(m.find("0000:90:00.0/numa_node: names NUMA node 1, but the tree has no sys/devices/system/node") !=
        std::string::npos);
}

// read_fd asks what a file is (fstat) only when a read does not look like a
// regular file's. Each kind below must still be told apart: a FIFO whether or
// not a writer holds it open, a directory, a device, an empty file, and files
// at and past one read's buffer (4096 bytes).
TEST_CASE("whole-file reads refuse FIFOs, devices and directories without asking each file what it is") {
  TempTree t;
  t.write("empty", "");
  t.write("page", std::string(4096, '1'));
  t.write("long", std::string(10000, '2') + "end");
  t.write("dir/x", "x");
  REQUIRE(::mkfifo(t.path("fifo").c_str(), 0644) == 0);
  std::string out = "stale";
  using gpuaff::detail::read_whole_file;
  using gpuaff::detail::ShortRead;

  CHECK(read_whole_file(t.path("empty"), out) == 0);
  CHECK(out.empty());
  for (ShortRead mode : {ShortRead::more, ShortRead::end}) {
    CHECK(read_whole_file(t.path("page"), out, 0, mode) == 0);
    CHECK(out == std::string(4096, '1'));  // a full first read is not the end, even for sysfs
    CHECK(read_whole_file(t.path("long"), out, 0, mode) == 0);
    CHECK(out.size() == 10003);
    CHECK(out.substr(out.size() - 3) == "end");
  }
  CHECK(read_whole_file(t.path("dir"), out) == EISDIR);
  CHECK(read_whole_file("/dev/zero", out, 0, ShortRead::end) == gpuaff::detail::not_regular_file);
  CHECK(read_whole_file("/dev/null", out) == gpuaff::detail::not_regular_file);
  // No writer: the read says "nothing", which an empty file also says.
  CHECK(read_whole_file(t.path("fifo"), out) == gpuaff::detail::not_regular_file);
  // A writer that holds the FIFO open and writes nothing: the non-blocking
  // read says EAGAIN, which no regular file says.
  int writer_side_reader = ::open(t.path("fifo").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  REQUIRE(writer_side_reader >= 0);
  int writer = ::open(t.path("fifo").c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  REQUIRE(writer >= 0);
  CHECK(read_whole_file(t.path("fifo"), out, 0, ShortRead::end) == gpuaff::detail::not_regular_file);
  CHECK(read_whole_file(t.path("fifo"), out, 0, ShortRead::more) == gpuaff::detail::not_regular_file);
  ::close(writer);
  ::close(writer_side_reader);
  // The permission bits, when asked for, come from the same check.
  mode_t bits = 0;
  int fd = ::open(t.path("page").c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::fchmod(fd, 0640) == 0);
  CHECK(gpuaff::detail::read_fd(fd, out, ShortRead::end, &bits) == 0);
  ::close(fd);
  CHECK(bits == 0640);
  CHECK(out.size() == 4096);
}

// SPDX-License-Identifier: Apache-2.0
// The gpuaff binary on recorded machines: bind, topo, record, and the error
// contract (exit code per class, one stderr line, empty stdout).
//
// Machine facts used below (fixtures/README and the recordings):
//   p4d.24xlarge: 96 CPUs, SMT2, node 0 = 0-23,48-71 (cores 0-23, sibling of c is c+48),
//                 node 1 = 24-47,72-95; GPUs 0-3 on node 0 (0000:10:1c.0 ...), 4-7 on node 1;
//                 NVMe 0000:90:1e.0 on node 1; ENA 0000:00:05.0 with numa_node -1.
//   dgx-h100:     224 CPUs, SMT2, node 0 = 0-55,112-167, node 1 = 56-111,168-223; GPUs 0-3 node 0.
//   gb200-tray:   nodes 0 and 1 with CPUs, memory-only nodes 2, 10, 18, 26.
//   cloud-vm-numa-unknown: GPUs with numa_node -1; nodes 0 = 0-15, 1 = 16-31.

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuaff/detail/fs.hpp"
#include "gpuaff/detail/parse.hpp"
#include "run_tool.hpp"
#include "gpuaff/version.hpp"
#include "support/check.hpp"

using cli_test::tool;
using cli_test::Run;
using gpuaff_test::fixture;

namespace {

const std::string p4d = fixture("p4d.24xlarge");
const std::string h100 = fixture("dgx-h100");

/// A small two-node machine written by the test (fast to copy and record):
/// 8 CPUs, cores {0,4} {1,5} on node 0 (package 0), {2,6} {3,7} on node 1
/// (package 1), one GPU per node.
cli_test::FakeMachine small_machine() {
  cli_test::FakeMachine m;
  m.cores = {"0,4", "1,5", "2,6", "3,7"};
  m.core_package = {0, 0, 1, 1};
  m.node_cpus = {"0-1,4-5", "2-3,6-7"};
  m.node_distances = {"10 21", "21 10"};
  m.online = "0-7";
  m.allowed = "0-7";
  m.mems_allowed = "0-1";
  m.devices = {{.bdf = "0000:17:00.0", .node = 0, .local_cpus = "0-1,4-5"},
               {.bdf = "0000:b1:00.0", .node = 1, .local_cpus = "2-3,6-7"}};
  return m;
}

std::string bind_line(const std::string& root, std::vector<std::string> extra,
                      const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> args{"bind", "--root", root};
  args.insert(args.end(), extra.begin(), extra.end());
  Run r = tool(args, env);
  INFO("stderr: " << r.err);
  CHECK(r.rc == 0);
  CHECK(r.err.empty());
  return r.out;
}

/// bind_line for a process that sees one GPU of several on its node under a
/// policy that splits the node: the result, and one warning suggesting
/// --share machine (docs/contract.md section 3).
std::string bind_line_warned(const std::string& root, std::vector<std::string> extra) {
  std::vector<std::string> args{"bind", "--root", root};
  args.insert(args.end(), extra.begin(), extra.end());
  Run r = tool(args);
  INFO("stderr: " << r.err);
  CHECK(r.rc == 0);
  REQUIRE(r.err_lines().size() == 1);
  CHECK(r.err_lines()[0].rfind("gpuaff: warning: ", 0) == 0);
  CHECK(r.err.find("--share machine") != std::string::npos);
  return r.out;
}

/// The error contract: expected exit code, one "gpuaff: ..." line on stderr, nothing on stdout.
void check_error(const std::vector<std::string>& args, int rc, const std::map<std::string, std::string>& env = {}) {
  Run r = tool(args, env);
  std::string cmd;
  for (const auto& a : args) cmd += a + " ";
  INFO("gpuaff " << cmd << "-> rc " << r.rc << ", stderr: " << r.err);
  CHECK(r.rc == rc);
  CHECK(r.out.empty());
  CHECK(r.one_error_line());
}

}  // namespace

TEST_CASE("the test knows where the gpuaff binary is") {
  REQUIRE_MESSAGE(!cli_test::exe().empty(), "GPUAFF_EXE is not set (CMake sets it for ctest)");
  REQUIRE(std::filesystem::exists(cli_test::exe()));
}

TEST_CASE("bind --format cpulist prints the GPU's node CPUs as one line") {
  CHECK(bind_line(p4d, {"--gpu", "0"}) == "0-23,48-71\n");
  CHECK(bind_line(p4d, {"--gpu", "3"}) == "0-23,48-71\n");
  CHECK(bind_line(p4d, {"--gpu", "4", "--format", "cpulist"}) == "24-47,72-95\n");
  CHECK(bind_line(h100, {"--gpu", "7", "--policy", "node"}) == "56-111,168-223\n");
}

TEST_CASE("bind --policy exclusive splits the node's cores among its GPUs") {
  // p4d: 24 cores per node, 4 GPUs per node -> 6 cores each, with their SMT siblings (+48).
  CHECK(bind_line(p4d, {"--gpu", "0", "--policy", "exclusive"}) == "0-5,48-53\n");
  CHECK(bind_line(p4d, {"--gpu", "1", "--policy", "exclusive"}) == "6-11,54-59\n");
  CHECK(bind_line(p4d, {"--gpu", "3", "--policy", "exclusive"}) == "18-23,66-71\n");
  CHECK(bind_line(p4d, {"--gpu", "4", "--policy", "exclusive"}) == "24-29,72-77\n");
  // dgx-h100: 56 cores per node, 4 GPUs per node -> 14 each; siblings are +112.
  CHECK(bind_line(h100, {"--gpu", "1", "--policy", "exclusive"}) == "14-27,126-139\n");
}

TEST_CASE("bind passes the NVIDIA options through") {
  // --nproc 2: only GPUs 0 and 1 (node 0) take part: 24 cores / 2 = 12 each.
  CHECK(bind_line(p4d, {"--gpu", "1", "--policy", "unique-contiguous", "--nproc", "2"}) == "12-23,60-71\n");
  CHECK(bind_line(p4d, {"--gpu", "0", "--policy", "unique-contiguous", "--nproc", "2", "--smt", "one"}) == "0-11\n");
  CHECK(bind_line(p4d, {"--gpu", "0", "--policy", "unique-contiguous", "--nproc", "2", "--max-cores", "2"}) ==
        "0-1,48-49\n");
  // Visible 0,1,2,4: node 0 has three GPUs (24 cores / 3 = 8 each), node 1 one GPU (24 cores).
  // Balanced, every GPU gets the smallest share, 8 cores; unbalanced, node 1's GPU keeps all 24.
  // GPU 3 is the only visible GPU of node 1's four: warned.
  std::vector<std::string> uneven{"--gpu", "3", "--policy", "unique-contiguous", "--visible-devices", "0,1,2,4"};
  CHECK(bind_line_warned(p4d, uneven) == "24-31,72-79\n");
  uneven.push_back("--balanced");
  CHECK(bind_line_warned(p4d, uneven) == "24-31,72-79\n");
  uneven.back() = "--no-balanced";
  CHECK(bind_line_warned(p4d, uneven) == "24-47,72-95\n");
  // single: the node's first core, shared.
  CHECK(bind_line(p4d, {"--gpu", "2", "--policy", "single"}) == "0,48\n");
}

TEST_CASE("bind --format mask, numactl and json describe the same binding") {
  // 0-23,48-71 as 32-bit words, most significant first: bits 64-71, 48-63, 0-23.
  CHECK(bind_line(p4d, {"--gpu", "0", "--format", "mask"}) == "000000ff,ffff0000,00ffffff\n");
  // The memory option only with --membind (docs/contract.md section 3).
  CHECK(bind_line(p4d, {"--gpu", "5", "--format", "numactl"}) == "--physcpubind=24-47,72-95\n");
  CHECK(bind_line(p4d, {"--gpu", "5", "--format", "numactl", "--membind", "local"}) ==
        "--physcpubind=24-47,72-95 --membind=1\n");
  std::string text = bind_line(p4d, {"--gpu", "4", "--policy", "exclusive", "--format", "json"});
  auto j = nlohmann::json::parse(text);
  CHECK(j["gpu"] == 4);
  CHECK(j["bdf"] == "0000:90:1c.0");
  CHECK(j["node"] == 1);
  CHECK(j["policy"] == "exclusive");
  CHECK(j["cpus"] == "24-29,72-77");
  CHECK(j["mask"] == "00003f00,00000000,3f000000");
  CHECK(j["memory_nodes"] == "1");
  CHECK(j["recommended_threads"].get<int>() >= 1);
}

TEST_CASE("bind follows --visible-devices and CUDA_VISIBLE_DEVICES") {
  // Visible GPU 0 is physical GPU 6 (node 1).
  CHECK(bind_line(p4d, {"--gpu", "0", "--visible-devices", "6,1"}) == "24-47,72-95\n");
  CHECK(bind_line(p4d, {"--gpu", "1", "--visible-devices", "6,1"}) == "0-23,48-71\n");
  CHECK(bind_line(p4d, {"--gpu", "0"}, {{"CUDA_VISIBLE_DEVICES", "5"}}) == "24-47,72-95\n");
  // A UUID prefix selects that GPU (GPU 4's UUID in the recording).
  CHECK(bind_line(p4d, {"--gpu", "0"}, {{"CUDA_VISIBLE_DEVICES", "GPU-1ddcdbbc"}}) == "24-47,72-95\n");
  // The flag wins over the environment.
  CHECK(bind_line(p4d, {"--gpu", "0", "--visible-devices", "0"}, {{"CUDA_VISIBLE_DEVICES", "5"}}) == "0-23,48-71\n");
}

TEST_CASE("bind --visible-devices with a UUID prefix reads the recorded UUIDs") {
  // bind reads only what a binding needs; a list naming UUIDs still needs the
  // driver's information files. h100-vm-1gpu (recorded on a real VM): one H100,
  // UUID GPU-d187a728-..., numa_node -1 on the VM's only node (CPUs 0-15).
  const std::string vm = fixture("h100-vm-1gpu");
  CHECK(bind_line(vm, {"--gpu", "0", "--visible-devices", "GPU-d187a728"}) == "0-15\n");
  CHECK(bind_line(vm, {"--gpu", "0", "--visible-devices", "gpu-D187"}) == "0-15\n");  // prefixes ignore case
  CHECK(bind_line(vm, {"--gpu", "0"}, {{"CUDA_VISIBLE_DEVICES", "MIG-GPU-d187a728-6ccc-1c8f-94bd-16688587736a/1/0"}}) ==
        "0-15\n");
  // p4d.24xlarge: GPU 4 (0000:90:1c.0, node 1) has UUID GPU-1ddcdbbc-..., GPU 0 (node 0) GPU-eca30164-...
  CHECK(bind_line(p4d, {"--gpu", "0", "--visible-devices", "GPU-1ddcdbbc"}) == "24-47,72-95\n");
  CHECK(bind_line(p4d, {"--gpu", "1", "--visible-devices", "GPU-1ddcdbbc,GPU-eca30164"}) == "0-23,48-71\n");
  // An unknown prefix is "no such GPU" (4) naming the prefix, not "no UUID is known".
  Run r = tool({"bind", "--root", vm, "--gpu", "0", "--visible-devices", "GPU-ffff"});
  CHECK(r.rc == 4);
  CHECK(r.err.find("no GPU has a UUID starting with 'GPU-ffff'") != std::string::npos);
}

TEST_CASE("bind --pci binds any PCI device by its node") {
  CHECK(bind_line(p4d, {"--pci", "0000:90:1e.0"}) == "24-47,72-95\n");  // an NVMe drive on node 1
  CHECK(bind_line(p4d, {"--pci", "0000:10:1d.0"}) == "0-23,48-71\n");   // GPU 1, by address
  auto j = nlohmann::json::parse(bind_line(p4d, {"--pci", "0000:90:1e.0", "--format", "json"}));
  CHECK(j["gpu"].is_null());
  CHECK(j["bdf"] == "0000:90:1e.0");
  CHECK(j["node"] == 1);
}

TEST_CASE("bind --unknown-node settles a numa_node of -1") {
  const std::string vm = fixture("cloud-vm-numa-unknown");
  check_error({"bind", "--root", vm, "--gpu", "1"}, 4);
  CHECK(bind_line(vm, {"--gpu", "1", "--unknown-node", "1"}) == "16-31\n");
  // node0 is PyTorch's behaviour.
  CHECK(bind_line(vm, {"--gpu", "1", "--unknown-node", "node0"}) == "0-15\n");
  check_error({"bind", "--root", p4d, "--pci", "0000:00:05.0"}, 4);
}

TEST_CASE("bad flags and values are usage errors (exit 2)") {
  check_error({}, 2);
  check_error({"frobnicate"}, 2);
  check_error({"bind"}, 2);                                         // no target
  check_error({"bind", "--root", p4d, "--gpu", "x"}, 2);
  check_error({"bind", "--root", p4d, "--gpu", "-1"}, 2);
  check_error({"bind", "--root", p4d, "--gpu", "0", "--pci", "0000:10:1c.0"}, 2);
  check_error({"bind", "--root", p4d, "--gpu", "0", "--policy", "nearest"}, 2);
  check_error({"bind", "--root", p4d, "--gpu", "0", "--scope", "rack"}, 2);
  check_error({"bind", "--root", p4d, "--gpu", "0", "--smt", "two"}, 2);
  check_error({"bind", "--root", p4d, "--gpu", "0", "--format", "xml"}, 2);
  check_error({"bind", "--root", p4d, "--gpu", "0", "--nproc", "many"}, 2);
  check_error({"bind", "--root", p4d, "--gpu", "0", "--min-cores", "1.5"}, 2);
  check_error({"bind", "--root", p4d, "--gpu", "0", "--unknown-node", "nowhere"}, 2);
  check_error({"bind", "--root", p4d, "--pci", "10:1c"}, 2);
  check_error({"bind", "--root", p4d, "--topology", "x.json", "--gpu", "0"}, 2);
  check_error({"bind", "--root", p4d, "--gpu", "0", "stray"}, 2);
  check_error({"bind", "--root", p4d, "--gpu", "0", "--no-such-flag"}, 2);
  check_error({"bind", "--root", p4d, "--gpu", "0", "--visible-devices", "0,0"}, 2);
  check_error({"bind", "--root", p4d, "--gpu", "0"}, 2, {{"CUDA_VISIBLE_DEVICES", "zero"}});
  check_error({"topo", "--root", p4d, "--format", "yaml"}, 2);
  check_error({"topo", "--root", p4d, "--color", "sometimes"}, 2);
  check_error({"record"}, 2);
}

TEST_CASE("gpuaff does not read through hwloc: --source hwloc and --hwloc-xml name gpuaff-hwloc (exit 2)") {
  std::vector<std::vector<std::string>> calls{{"bind", "--source", "hwloc", "--root", h100, "--gpu", "5"},
                                              {"bind", "--hwloc-xml", h100 + ".xml", "--gpu", "5"},
                                              {"topo", "--source", "hwloc"},
                                              {"exec", "--hwloc-xml", h100 + ".xml", "--gpu", "0", "--", "true"}};
  for (const auto& args : calls) {
    check_error(args, 2);
    Run r = tool(args);
    CHECK(r.err.find("run the same command with gpuaff-hwloc") != std::string::npos);
  }
}

TEST_CASE("an unreadable topology exits 3") {
  check_error({"bind", "--root", "/nonexistent/gpuaff-root", "--gpu", "0"}, 3);
  check_error({"topo", "--root", "/nonexistent/gpuaff-root"}, 3);
  // A root that is a directory but not a recording.
  auto empty = cli_test::temp_dir("empty-root");
  check_error({"bind", "--root", empty.string(), "--gpu", "0"}, 3);
  check_error({"topo", "--root", empty.string()}, 3);
  // A malformed required file.
  auto broken = cli_test::temp_dir("broken-root");
  cli_test::write_machine(broken, small_machine());
  CHECK(bind_line(broken.string(), {"--gpu", "1"}) == "2-3,6-7\n");  // sound before the damage
  cli_test::write_file(broken / "sys/devices/system/cpu/online", "0-banana\n");
  check_error({"bind", "--root", broken.string(), "--gpu", "0"}, 3);
  check_error({"topo", "--root", broken.string()}, 3);
}

TEST_CASE("a GPU or device that does not exist exits 4") {
  check_error({"bind", "--root", p4d, "--gpu", "8"}, 4);
  check_error({"bind", "--root", p4d, "--pci", "0000:ee:00.0"}, 4);
  check_error({"bind", "--root", p4d, "--gpu", "0"}, 4, {{"CUDA_VISIBLE_DEVICES", "GPU-ffffffff"}});
  // Hidden GPUs do not count: two visible, index 2 does not exist.
  check_error({"bind", "--root", p4d, "--gpu", "2", "--visible-devices", "0,1"}, 4);
}

TEST_CASE("a binding that cannot be made exits 5") {
  // single-unique on one core per GPU works; --min-cores above the share fails.
  check_error({"bind", "--root", p4d, "--gpu", "0", "--policy", "unique-contiguous", "--min-cores", "7"}, 5);
}

TEST_CASE("topo --format text reports the machine, the policies and a picture") {
  Run r = tool({"topo", "--root", p4d});
  REQUIRE(r.rc == 0);
  CHECK(r.err.empty());
  const std::string& t = r.out;
  CHECK(t.find("origin:") != std::string::npos);
  CHECK(t.find(p4d) != std::string::npos);
  CHECK(t.find("0-95 (96)") != std::string::npos);  // online and allowed
  CHECK(t.find("GPUs (8 visible, numbered as CUDA (NVIDIA) numbers them)") != std::string::npos);
  for (const char* bdf : {"0000:10:1c.0", "0000:10:1d.0", "0000:20:1c.0", "0000:20:1d.0", "0000:90:1c.0",
                          "0000:90:1d.0", "0000:a0:1c.0", "0000:a0:1d.0"})
    CHECK(t.find(bdf) != std::string::npos);
  CHECK(t.find("GPU-eca30164-e7eb-3987-dc05-ffea2bdf36d1") != std::string::npos);  // GPU 0's UUID
  CHECK(t.find("0-5,48-53") != std::string::npos);                                  // exclusive, GPU 0
  for (const char* policy : {"node", "socket", "exclusive", "core-complex", "all", "single", "single-unique",
                             "unique-interleaved", "unique-contiguous"})
    CHECK(t.find(std::string("  ") + policy + "\n") != std::string::npos);
  // The picture (exclusive): node 0's 24 cores, six per GPU 0..3.
  CHECK(t.find("package 0, node 0:\n    cpu    0  0 0 0 0 0 0 1 1 1 1 1 1 2 2 2 2 2 2 3 3 3 3 3 3\n") !=
        std::string::npos);
  CHECK(t.find("package 1, node 1:\n    cpu   24  4 4 4 4 4 4 5 5 5 5 5 5 6 6 6 6 6 6 7 7 7 7 7 7\n") !=
        std::string::npos);
  // Not a terminal: no colour.
  CHECK(t.find('\033') == std::string::npos);
}

TEST_CASE("topo shows memory-only nodes and the distance matrix") {
  Run r = tool({"topo", "--root", fixture("gb200-tray")});
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("(memory only)") != std::string::npos);
  CHECK(r.out.find("distances:") != std::string::npos);
  Run p = tool({"topo", "--root", p4d});
  // p4d's SLIT: 10 local, 21 remote.
  CHECK(p.out.find("from\\to  0   1\n  0        10  21\n  1        21  10\n") != std::string::npos);
}

TEST_CASE("topo shows what the reader assumed: a notes: section in text, a notes list in JSON") {
  // allowed-all-possible: the recorded allowed set 0-127 names CPUs 16-127, which do not exist.
  Run r = tool({"topo", "--root", fixture("allowed-all-possible")});
  REQUIRE(r.rc == 0);
  auto at = r.out.find("notes:\n  - proc/self/status: the allowed CPUs 0-127");
  CHECK(at != std::string::npos);
  CHECK(r.out.find("(recorded: 0-127") != std::string::npos);
  Run j = tool({"topo", "--root", fixture("allowed-all-possible"), "--format", "json"});
  REQUIRE(j.rc == 0);
  CHECK(j.out.find("\"recorded_allowed_cpus\": \"0-127\"") != std::string::npos);
  CHECK(j.out.find("\"notes\": [\n    \"proc/self/status: the allowed CPUs 0-127") != std::string::npos);
  // A machine read without assumptions: no notes section, an empty list.
  Run plain = tool({"topo", "--root", p4d});
  CHECK(plain.out.find("notes:") == std::string::npos);
  Run plain_json = tool({"topo", "--root", p4d, "--format", "json"});
  CHECK(plain_json.out.find("\"notes\": []") != std::string::npos);
}

TEST_CASE("topo --policy chooses the picture; --color always colours it") {
  Run r = tool({"topo", "--root", p4d, "--policy", "single-unique", "--color", "always"});
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("Picture: policy single-unique") != std::string::npos);
  CHECK(r.out.find('\033') != std::string::npos);
  // single-unique: GPU r of a node takes the node's r-th core; the other cores stay free.
  Run s = tool({"topo", "--root", p4d, "--policy", "single-unique"});
  CHECK(s.out.find("cpu    0  0 1 2 3 . . . . . . . . . . . . . . . . . . . .\n") != std::string::npos);
  Run never = tool({"topo", "--root", p4d, "--color", "never"});
  CHECK(never.out.find('\033') == std::string::npos);
  // Under node, four GPUs share each core: every cell is '+'.
  Run plain = tool({"topo", "--root", p4d, "--policy", "node"});
  CHECK(plain.out.find("cpu    0  + + + + + + + + + + + + + + + + + + + + + + + +\n") != std::string::npos);
}

TEST_CASE("topo colours the picture on a terminal unless NO_COLOR is set") {
  Run tty = cli_test::tool_on_terminal({"topo", "--root", p4d});
  if (tty.rc == -1) {
    MESSAGE("skipped: script(1) from util-linux is not installed");
    return;
  }
  CHECK(tty.rc == 0);
  CHECK(tty.out.find("\033[") != std::string::npos);
  Run no_color = cli_test::tool_on_terminal({"topo", "--root", p4d}, {{"NO_COLOR", "1"}});
  CHECK(no_color.rc == 0);
  CHECK(no_color.out.find("Picture:") != std::string::npos);
  CHECK(no_color.out.find("\033[") == std::string::npos);
  Run never = cli_test::tool_on_terminal({"topo", "--root", p4d, "--color", "never"});
  CHECK(never.out.find("\033[") == std::string::npos);
}

TEST_CASE("topo says how the node of a GPU with numa_node -1 was settled") {
  const std::string vm = fixture("cloud-vm-numa-unknown");
  // GPU 0's local_cpulist 16-31 is exactly node 1; GPU 1's 0-31 spans both nodes.
  Run r = tool({"topo", "--root", vm});
  CHECK(r.out.find("0000:00:03.0  10de:27b8      1 (inferred; numa_node -1)") != std::string::npos);
  CHECK(r.out.find("0000:00:04.0  10de:27b8      unknown (-1)") != std::string::npos);
  Run u = tool({"topo", "--root", vm, "--unknown-node", "0"});
  CHECK(u.out.find("0 (--unknown-node; numa_node -1)") != std::string::npos);
}

TEST_CASE("topo lists policy errors as footnotes instead of failing") {
  Run r = tool({"topo", "--root", fixture("cloud-vm-numa-unknown")});
  CHECK(r.rc == 0);
  CHECK(r.out.find("error [1]") != std::string::npos);
  CHECK(r.out.find("  [1] ") != std::string::npos);
}

TEST_CASE("topo's footnotes name the option given, spelled as a flag: --domains-per-gpu, not ranks_per_gpu=") {
  // 29 domains of a 14-core share: refused for every GPU under the splitting
  // policies, each footnote once named ranks_per_gpu=29, an option not given.
  Run r = tool({"topo", "--root", fixture("dgx-h100"), "--domains-per-gpu", "29"});
  INFO(r.err);
  CHECK(r.rc == 0);
  CHECK(r.out.find("] --domains-per-gpu 29: the share 0-13,112-125 has 14 physical core(s)") != std::string::npos);
  CHECK(r.out.find("ranks_per_gpu") == std::string::npos);
  CHECK(r.out.find("ranks-per-gpu") == std::string::npos);
  CHECK(r.out.find("domains_per_gpu=") == std::string::npos);
}

TEST_CASE("topo --format json prints the contract's object and bind reads it back") {
  Run r = tool({"topo", "--root", p4d, "--format", "json"});
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"root", "allowed_cpus", "online_cpus", "packages", "numa_nodes", "cores", "core_complexes",
                          "pci_devices", "gpus"})
    CHECK(j.contains(key));
  CHECK(j["online_cpus"] == "0-95");
  CHECK(j["gpus"].size() == 8);
  CHECK(j["gpus"][0]["bdf"] == "0000:10:1c.0");
  auto file = cli_test::temp_dir("json") / "p4d.json";
  cli_test::write_file(file, r.out);
  Run b = tool({"bind", "--topology", file.string(), "--gpu", "4", "--policy", "exclusive"});
  CHECK(b.rc == 0);
  CHECK(b.out == "24-29,72-77\n");
  check_error({"bind", "--topology", (file.parent_path() / "missing.json").string(), "--gpu", "0"}, 3);
  cli_test::write_file(file, "{ not json");
  check_error({"bind", "--topology", file.string(), "--gpu", "0"}, 3);
}

TEST_CASE("record writes a root that reproduces the machine") {
  auto dir = cli_test::temp_dir("record");
  cli_test::write_machine(dir / "machine", small_machine());
  std::string machine = (dir / "machine").string();
  auto out = dir / "copy";
  Run r = tool({"record", "--root", machine, "--out", out.string()});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find(out.string()) != std::string::npos);
  CHECK(bind_line(out.string(), {"--gpu", "1"}) == "2-3,6-7\n");
  CHECK(bind_line(out.string(), {"--gpu", "0", "--format", "numactl", "--membind", "local"}) ==
        "--physcpubind=0-1,4-5 --membind=0\n");
  // Again into the same, now non-empty, directory: refused unless --force.
  Run again = tool({"record", "--root", machine, "--out", out.string()});
  CHECK(again.rc == 2);
  CHECK(again.out.empty());
  CHECK(again.one_error_line());
  CHECK(again.err.find("--force") != std::string::npos);
  CHECK(tool({"record", "--root", machine, "--out", out.string(), "--force"}).rc == 0);
}

TEST_CASE("record of this machine replays with the same allowed CPUs") {
  auto out = cli_test::temp_dir("record-live") / "here";
  Run r = tool({"record", "--out", out.string()});
  REQUIRE(r.rc == 0);
  Run live = tool({"topo", "--format", "text"});
  Run replay = tool({"topo", "--root", out.string()});
  REQUIRE(replay.rc == 0);
  auto line = [](const std::string& t, const std::string& key) {
    auto at = t.find(key);
    return at == std::string::npos ? std::string() : t.substr(at, t.find('\n', at) - at);
  };
  CHECK(line(live.out, "CPUs allowed:") == line(replay.out, "CPUs allowed:"));
  CHECK(line(live.out, "CPUs online:") == line(replay.out, "CPUs online:"));
  CHECK(line(live.out, "NUMA nodes (") == line(replay.out, "NUMA nodes ("));
}

TEST_CASE("--help for every command shows examples and exit codes; --version") {
  for (std::vector<std::string> args : {std::vector<std::string>{"--help"}, {"bind", "--help"}, {"topo", "--help"},
                                        {"exec", "--help"}, {"record", "--help"}}) {
    Run r = tool(args);
    INFO(args[0]);
    CHECK(r.rc == 0);
    CHECK(r.err.empty());
    CHECK(r.out.find("Examples:") != std::string::npos);
    CHECK(r.out.find("Exit codes:\n  0    success\n") != std::string::npos);
    // exec's own codes, listed where exec can end with them (tests/cli/help_test.sh: only there)
    bool exec_codes = args[0] == "--help" || args[0] == "exec";
    CHECK((r.out.find("\n  127  exec: ") != std::string::npos) == exec_codes);
  }
  Run v = tool({"--version"});
  CHECK(v.rc == 0);
  CHECK(v.out == std::string("gpuaff ") + GPUAFF_VERSION_STRING + "\n");
}

TEST_CASE("typos get a 'did you mean' for commands, flags, policies and option words") {
  struct Case {
    std::vector<std::string> args;
    const char* says;
  };
  const std::string root = fixture("dgx-h100");
  for (const Case& c : {Case{{"bnd", "--gpu", "0"}, "unknown command 'bnd'; did you mean bind?"},
                        Case{{"bind", "--root", root, "--gpu", "0", "--polcy", "exclusive"},
                             "unknown option '--polcy'; did you mean --policy?"},
                        Case{{"bind", "--root", root, "--gpu", "0", "--policy", "exclusiv"},
                             "unknown policy 'exclusiv'; did you mean exclusive?"},
                        Case{{"bind", "--root", root, "--gpu", "0", "--policy", "excl"},
                             "unknown policy 'excl'; did you mean exclusive?"},
                        Case{{"bind", "--root", root, "--gpu", "0", "--baseline", "cgroups"},
                             "--baseline cgroups is not valid; did you mean cgroup?"},
                        Case{{"topo", "--root", root, "--colour", "never"}, "unknown option '--colour'; did you mean --color?"},
                        Case{{"bind", "--root", root, "--gpu", "0", "--frobnicate"},
                             "unknown option '--frobnicate'; see 'gpuaff bind --help'"},
                        // The parser's own words for an option given twice or without its value, as what to do.
                        Case{{"bind", "--root", root, "--gpu", "3", "--gpu", "4"}, "--gpu is given 2 times; give it once"},
                        Case{{"bind", "--root", root, "--gpu="}, "--gpu= gives --gpu no value; write --gpu VALUE or --gpu=VALUE"},
                        Case{{"bind", "--root", root, "--policy=", "--gpu", "1"},
                             "--policy= gives --policy no value; write --policy VALUE"},
                        Case{{"exec", "--root", root, "--gpu", "0", "--policy"}, "--policy needs a value: P"}}) {
    Run r = tool(c.args);
    INFO(r.err);
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(r.one_error_line());
    CHECK(r.err.find(c.says) != std::string::npos);
  }
}

TEST_CASE("exec names the missing '--' when COMMAND's own option was read as gpuaff's") {
  Run r = tool({"exec", "--root", fixture("dgx-h100"), "--gpu", "0", "python3", "-c", "print(1)"});
  INFO(r.err);
  CHECK(r.rc == 2);
  CHECK(r.one_error_line());
  CHECK(r.err.find("'-c' follows the command 'python3'") != std::string::npos);
  CHECK(r.err.find("-- python3 -c") != std::string::npos);
}

TEST_CASE("doctor's errors quote the process's variables as they are, never respelled as flags") {
  // A value holding option words ("gpu=3") was shown as "--gpu 3": a value
  // the process never had. A quote inside a value cannot end the quoting.
  struct Case {
    std::string var;
    std::string says;
  };
  for (const Case& c : {Case{"LOCAL_RANK=2 gpu=3", "LOCAL_RANK='2 gpu=3' is not a non-negative integer"},
                        Case{"LOCAL_RANK=a' gpu=3 nic_env=true 'b",
                             "LOCAL_RANK='a\\x27 gpu=3 nic_env=true \\x27b' is not a non-negative integer"},
                        Case{"GPUAFF_PLAN=v9 gpu=3 policy=node", "GPUAFF_PLAN='v9 gpu=3 policy=node' is not a plan gpuaff "
                                                                 "wrote"}}) {
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      char* argv[] = {const_cast<char*>("sleep"), const_cast<char*>("30"), nullptr};
      std::string var = c.var;
      char* envp[] = {const_cast<char*>("PATH=/usr/bin:/bin"), var.data(), nullptr};
      ::execve("/bin/sleep", argv, envp);
      ::_exit(127);
    }
    for (int i = 0; i < 500; ++i) {  // until it runs sleep, with its own environment
      std::string comm;
      if (gpuaff::detail::read_whole_file("/proc/" + std::to_string(child) + "/comm", comm) == 0 &&
          comm.rfind("sleep", 0) == 0)
        break;
      ::usleep(10000);
    }
    Run r = tool({"doctor", "--pid", std::to_string(child), "--root", fixture("dgx-h100")});
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    INFO(r.err);
    CHECK(r.rc != 0);
    CHECK(r.one_error_line());
    CHECK(r.err.find(c.says) != std::string::npos);
    CHECK(r.err.find("--gpu 3") == std::string::npos);
    CHECK(r.err.find("--nic-env") == std::string::npos);
  }
  CHECK(gpuaff::detail::quotable("a'b") == "a\\x27b");
}

TEST_CASE("messages say what is so: a machine without GPUs, a process without a launcher, a shortened command") {
  // build-machine-2cpu has no PCI device of a GPU class at all: that is said,
  // not a hint that CUDA_VISIBLE_DEVICES hid them.
  Run none = tool({"bind", "--root", fixture("build-machine-2cpu"), "--gpu", "0"});
  CHECK(none.rc == 4);
  CHECK(none.one_error_line());
  CHECK(none.err.find("has no GPU at all") != std::string::npos);
  CHECK(none.err.find("CUDA_VISIBLE_DEVICES") == std::string::npos);
  // doctor --pid of a process that no launcher started: it guessed the GPU
  // from the process's own rank variables, and blamed a --local-rank the
  // user never passed when there was none.
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    char* argv[] = {const_cast<char*>("sleep"), const_cast<char*>("30"), nullptr};
    char* envp[] = {const_cast<char*>("PATH=/usr/bin:/bin"), nullptr};
    ::execve("/bin/sleep", argv, envp);
    ::_exit(127);
  }
  Run guess = tool({"doctor", "--pid", std::to_string(child), "--root", fixture("dgx-h100")});
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  CHECK(guess.rc == 2);
  CHECK(guess.one_error_line());
  CHECK(guess.err.find("carries no GPUAFF_PLAN and none of LOCAL_RANK") != std::string::npos);
  CHECK(guess.err.find("--local-rank") == std::string::npos);
  CHECK(guess.err.find("pass --gpu N") != std::string::npos);
  // A command shortened for a message ends with "...", which stays (it was
  // stripped as a sentence's dots, so the command looked cut).
  CHECK(gpuaff::detail::one_line("running 'python3 train.py --a-long-argumen...") ==
        "running 'python3 train.py --a-long-argumen...");
  CHECK(gpuaff::detail::one_line("done. ") == "done");
  CHECK(gpuaff::detail::one_line("done.") == "done");
}

TEST_CASE("bind --gpu-nodes FILE settles a numa_node of -1 from probe's file; host_nodes follows it") {
  // cloud-vm-numa-unknown: GPU 1 (0000:00:04.0) has numa_node -1 and a local_cpulist
  // of both nodes, so nothing settles its node (exit 4); the file names node 1
  // (CPUs 16-31), which must then be its CPUs and its host buffers' node.
  const std::string vm = fixture("cloud-vm-numa-unknown");
  auto dir = cli_test::temp_dir("gpu-nodes");
  std::string file = (dir / "nodes.txt").string();
  gpuaff::detail::write_whole_file(file, "# gpuaff probe --gpu-nodes\n0000:00:04.0 1\n\n0000:99:00.0 0  # another machine's GPU\n");
  CHECK(bind_line(vm, {"--gpu", "1", "--gpu-nodes", file}) == "16-31\n");
  Run r = tool({"bind", "--root", vm, "--gpu", "1", "--gpu-nodes", file, "--format", "json"});
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["node"] == 1);
  CHECK(j["host_nodes"] == "1");
  // A malformed line, a node the machine lacks, a missing file: named, never ignored.
  gpuaff::detail::write_whole_file(file, "0000:00:04.0\n");
  check_error({"bind", "--root", vm, "--gpu", "1", "--gpu-nodes", file}, 3);
  CHECK(tool({"bind", "--root", vm, "--gpu", "1", "--gpu-nodes", file}).err.find("line 1") != std::string::npos);
  gpuaff::detail::write_whole_file(file, "0000:00:04.0 7\n");
  check_error({"bind", "--root", vm, "--gpu", "1", "--gpu-nodes", file}, 4);
  check_error({"bind", "--root", vm, "--gpu", "1", "--gpu-nodes", (dir / "absent").string()}, 3);
}

TEST_CASE("bind --format json carries host_nodes, the GPU's node") {
  // p4d.24xlarge: GPU 0 (0000:10:1c.0) is on node 0 (fixtures/README).
  Run r = tool({"bind", "--root", p4d, "--gpu", "0", "--format", "json"});
  REQUIRE(r.rc == 0);
  CHECK(nlohmann::json::parse(r.out)["host_nodes"] == "0");
}

TEST_CASE("probe: usage mistakes exit 2, a missing GPU runtime exits 8 after the memory tables") {
  check_error({"probe", "--seconds", "0"}, 2);
  check_error({"probe", "--seconds", "soon"}, 2);
  check_error({"probe", "--size", "0"}, 2);
  check_error({"probe", "--gpu", "x"}, 2);
  check_error({"probe", "--gpu-nodes", "/tmp/x"}, 2);  // writes what --gpu measured: needs --gpu
  // A runtime that cannot exist stands for a machine without a GPU driver.
  Run r = tool({"probe", "--size", "8", "--seconds", "0.05", "--gpu", "0", "--format", "json"},
               {{"GPUAFF_GPU_RUNTIME", "/nonexistent/libcuda.so.1"}});
  CHECK(r.rc == 8);
  CHECK(r.err.find("no GPU runtime or no GPU here") != std::string::npos);
  auto j = nlohmann::json::parse(r.out);
  CHECK(!j["memory"].empty());  // at least this machine's own node
  CHECK(j["gpus"][0]["error"].get<std::string>().find("/nonexistent/libcuda.so.1") != std::string::npos);
}

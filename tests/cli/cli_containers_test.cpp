// SPDX-License-Identifier: Apache-2.0
// The gpuaff binary in containers and one-GPU processes: the driver's GPU
// list, --share, Slurm's every-vendor variables, MIG, and the warnings
// (docs/contract.md sections 2 and 3, docs/containers.md).
//
// Machine facts (fixtures/README.md): dgx-h100 node 0 = 0-55,112-167 with GPUs
// 0-3, node 1 = 56-111,168-223 with GPUs 4-7 (0000:9d:00.0 is GPU 4); core c =
// CPUs c, c+112. dgx-h100-container-gpus45: the driver lists host GPUs 4 and 5.
// mi300x: node 0 = 0-95,192-287 with AMD GPUs 0-3. workstation-mixed-gpus: two
// unlike NVIDIA GPUs and an AMD one on one node, CPUs 0-31.

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "run_tool.hpp"
#include "support/check.hpp"

using cli_test::Run;
using cli_test::tool;
using gpuaff_test::fixture;

namespace {

const std::string h100 = fixture("dgx-h100");
const std::string container = fixture("dgx-h100-container-gpus45");

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("bind in a container given host GPUs 4 and 5: --gpu 0 is host GPU 4 on node 1") {
  Run r = tool({"bind", "--root", container, "--gpu", "0"});
  CHECK(r.rc == 0);
  CHECK(r.out == "56-111,168-223\n");
  CHECK(r.err.empty());
  Run j = tool({"bind", "--root", container, "--gpu", "1", "--format", "json"});
  REQUIRE(j.rc == 0);
  auto doc = nlohmann::json::parse(j.out);
  CHECK(doc["bdf"] == "0000:c3:00.0");
  CHECK(doc["node"] == 1);
  // --visible-devices selects among the container's GPUs: its index 1 is host GPU 5.
  Run v = tool({"bind", "--root", container, "--gpu", "0", "--visible-devices", "1", "--format", "json"});
  REQUIRE(v.rc == 0);
  CHECK(nlohmann::json::parse(v.out)["bdf"] == "0000:c3:00.0");
  Run none = tool({"bind", "--root", container, "--gpu", "2"});
  CHECK(none.rc == 4);
  CHECK(none.out.empty());
  CHECK(none.one_error_line());
}

TEST_CASE("bind --share machine gives a one-GPU process its share among the host's GPUs") {
  // CUDA_VISIBLE_DEVICES=5: host GPU 5, the second of node 1's four: cores 70-83.
  Run m = tool({"bind", "--root", h100, "--gpu", "0", "--policy", "exclusive", "--share", "machine"},
               {{"CUDA_VISIBLE_DEVICES", "5"}});
  CHECK(m.rc == 0);
  CHECK(m.out == "70-83,182-195\n");
  CHECK(m.err.empty());
  // --share visible (the default): the whole node, and a warning that suggests --share machine.
  Run v = tool({"bind", "--root", h100, "--gpu", "0", "--policy", "exclusive"}, {{"CUDA_VISIBLE_DEVICES", "5"}});
  CHECK(v.rc == 0);
  CHECK(v.out == "56-111,168-223\n");
  REQUIRE(v.err_lines().size() == 1);
  CHECK(v.err_lines()[0].rfind("gpuaff: warning: ", 0) == 0);
  CHECK(has(v.err, "--share machine"));
  // The container's GPU 1 (host GPU 5) gets the same slice.
  Run cb = tool({"bind", "--root", container, "--gpu", "1", "--policy", "exclusive", "--share", "machine"});
  CHECK(cb.rc == 0);
  CHECK(cb.out == m.out);
}

TEST_CASE("--share where it does not apply is a usage error naming the policies it applies to") {
  Run p = tool({"bind", "--root", h100, "--gpu", "0", "--share", "machine"});
  CHECK(p.rc == 2);
  CHECK(p.out.empty());
  CHECK(p.one_error_line());
  CHECK(has(p.err, "exclusive, core-complex, single-unique, unique-interleaved or unique-contiguous"));
  Run n = tool({"bind", "--root", h100, "--gpu", "0", "--policy", "exclusive", "--share", "machine", "--nproc", "2"});
  CHECK(n.rc == 2);
  CHECK(has(n.err, "--nproc 2"));
  Run word = tool({"bind", "--root", h100, "--gpu", "0", "--policy", "exclusive", "--share", "host"});
  CHECK(word.rc == 2);
  Run topo = tool({"topo", "--root", h100, "--share", "machine"});
  CHECK(topo.rc == 2);
  // exec refuses before running anything.
  Run e = tool({"exec", "--root", h100, "--gpu", "0", "--share", "machine", "--", "true"});
  CHECK(e.rc == 2);
  CHECK(e.one_error_line());
}

TEST_CASE("Slurm's every-vendor variables: CUDA_VISIBLE_DEVICES=0 ROCR_VISIBLE_DEVICES=0 on NVIDIA and AMD machines") {
  std::map<std::string, std::string> slurm{{"CUDA_VISIBLE_DEVICES", "0"}, {"ROCR_VISIBLE_DEVICES", "0"}};
  Run n = tool({"bind", "--root", h100, "--gpu", "0"}, slurm);
  CHECK(n.rc == 0);
  CHECK(n.out == "0-55,112-167\n");
  CHECK(n.err.empty());
  Run a = tool({"bind", "--root", fixture("mi300x"), "--gpu", "0"}, slurm);
  CHECK(a.rc == 0);
  CHECK(a.out == "0-95,192-287\n");
  // A malformed value of the other vendor's variable is still a usage error.
  Run bad = tool({"bind", "--root", h100, "--gpu", "0"}, {{"ROCR_VISIBLE_DEVICES", "0,gpu1"}});
  CHECK(bad.rc == 2);
  CHECK(bad.one_error_line());
  CHECK(has(bad.err, "ROCR_VISIBLE_DEVICES"));
}

TEST_CASE("MIG-<uuid>: the one GPU of a MIG container; an error on a machine with several") {
  std::map<std::string, std::string> mig{{"CUDA_VISIBLE_DEVICES", "MIG-7d1e1a1c-2b2b-3c3c-4d4d-5e5e6f6f7a7a"}};
  Run ok = tool({"bind", "--root", fixture("dgx-h100-mig-container"), "--gpu", "0", "--format", "json"}, mig);
  REQUIRE(ok.rc == 0);
  auto doc = nlohmann::json::parse(ok.out);
  CHECK(doc["bdf"] == "0000:52:00.0");
  CHECK(doc["cpus"] == "0-55,112-167");
  Run bad = tool({"bind", "--root", h100, "--gpu", "0"}, mig);
  CHECK(bad.rc == 2);
  CHECK(bad.one_error_line());
  CHECK(has(bad.err, "8 NVIDIA GPUs"));
}

TEST_CASE("unlike NVIDIA GPUs: a CUDA_DEVICE_ORDER warning unless it is PCI_BUS_ID") {
  const std::string ws = fixture("workstation-mixed-gpus");
  Run w = tool({"bind", "--root", ws, "--gpu", "0"});
  CHECK(w.rc == 0);
  CHECK(w.out == "0-31\n");
  REQUIRE(w.err_lines().size() == 1);
  CHECK(has(w.err, "CUDA_DEVICE_ORDER=PCI_BUS_ID"));
  Run quiet = tool({"bind", "--root", ws, "--gpu", "0"}, {{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}});
  CHECK(quiet.rc == 0);
  CHECK(quiet.err.empty());
  // Named by address, the GPU is the same whatever CUDA's numbering: no warning.
  for (const char* policy : {"node", "socket"}) {
    CAPTURE(policy);
    Run by_address = tool({"bind", "--root", ws, "--pci", "0000:65:00.0", "--policy", policy});
    CHECK(by_address.rc == 0);
    CHECK(by_address.out == "0-31\n");
    CHECK(by_address.err.empty());
  }
  // CUDA_VISIBLE_DEVICES=1 on the mixed machine: CUDA's GPU 0 is its NVIDIA
  // GPU 1 (65:00.0), and there is no GPU 1: the AMD GPU is HIP's, not CUDA's
  // (contract section 6; it was GPU 1 by the rule of section 2).
  Run j = tool({"bind", "--root", ws, "--gpu", "0", "--format", "json"},
               {{"CUDA_VISIBLE_DEVICES", "1"}, {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}});
  REQUIRE(j.rc == 0);
  CHECK(nlohmann::json::parse(j.out)["bdf"] == "0000:65:00.0");
  Run none = tool({"bind", "--root", ws, "--gpu", "1"}, {{"CUDA_VISIBLE_DEVICES", "1"}, {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}});
  CHECK(none.rc == 4);
}

TEST_CASE("topo --format json of a container lists the hidden GPUs; --topology replays the container") {
  Run t = tool({"topo", "--root", container, "--format", "json"});
  REQUIRE(t.rc == 0);
  auto doc = nlohmann::json::parse(t.out);
  REQUIRE(doc["gpus"].size() == 2);
  CHECK(doc["hidden_gpus"].size() == 6);
  auto path = cli_test::temp_dir("container-json") / "container.json";
  cli_test::write_file(path, t.out);
  Run b = tool({"bind", "--topology", path.string(), "--gpu", "0"});
  CHECK(b.rc == 0);
  CHECK(b.out == "56-111,168-223\n");
}

TEST_CASE("topo in a container says which host GPUs are not the process's, apart from those a variable hides") {
  // The container has host GPUs 4 and 5 (9d, c3); the other six of the DGX
  // H100 are the host's only. With CUDA_VISIBLE_DEVICES=1 the container's GPU
  // 0 (9a) is hidden by the variable instead.
  Run r = tool({"topo", "--root", container}, {{"CUDA_VISIBLE_DEVICES", "1"}});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  auto count = [&](const std::string& part) {
    std::size_t n = 0;
    for (auto at = r.out.find(part); at != std::string::npos; at = r.out.find(part, at + 1)) ++n;
    return n;
  };
  CHECK(count("not this process's (not in proc/driver/nvidia/gpus)") == 6);
  CHECK(count("GPU, not visible (*_VISIBLE_DEVICES)") == 1);
  for (const char* host_only : {"0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0", "0000:d1:00.0",
                                "0000:df:00.0"}) {
    auto line = r.out.substr(r.out.find(host_only), 200);
    CHECK(has(line.substr(0, line.find('\n')), "not this process's"));
  }
  auto line = r.out.substr(r.out.find("0000:9d:00.0", r.out.find("other PCI devices")), 200);
  CHECK(has(line.substr(0, line.find('\n')), "*_VISIBLE_DEVICES"));
}

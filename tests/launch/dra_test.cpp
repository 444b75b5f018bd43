// SPDX-License-Identifier: Apache-2.0
// A pod's DRA device metadata (KEP-5304; docs/contract.md section 7) on
// fixtures/dgx-h100: the claimed GPUs by PCI address are the GPUs, the
// claimed CPUs the set shares are drawn from; a mismatch is named. The
// metadata files are tests/launch/dra/ (its README says what each claims).
//
// dgx-h100: GPUs 0-3 on node 0 (CPUs 0-55,112-167), 4-7 on node 1 (56-111,
// 168-223); GPU 3 is 0000:61:00.0, GPU 4 0000:9d:00.0; the recorded process
// may use every CPU.

#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "gpuaff/launch/front.hpp"
#include "gpuaff/launch/options.hpp"
#include "gpuaff/source/json.hpp"
#include "gpuaff/source/json_dra.hpp"
#include "support/check.hpp"

using gpuaff::Errc;
using gpuaff::LaunchOptions;

namespace {

std::string pod(const std::string& mode) { return std::string(GPUAFF_SOURCE_DIR) + "/tests/launch/dra/" + mode; }

gpuaff::Result<gpuaff::LaunchPlan> plan_in_pod(const std::string& mode, const std::string& gpu,
                                               const std::string& policy = "node",
                                               std::optional<std::string> visible = std::nullopt) {
  LaunchOptions o;
  REQUIRE(gpuaff::set_option(o, "root", gpuaff_test::fixture("dgx-h100")));
  REQUIRE(gpuaff::set_option(o, "dra_metadata", pod(mode)));
  REQUIRE(gpuaff::set_option(o, "gpu", gpu));
  REQUIRE(gpuaff::set_option(o, "policy", policy));
  if (visible) REQUIRE(gpuaff::set_option(o, "visible_devices", *visible));
  gpuaff::Readers readers{.json = &gpuaff::read_json_topology, .dra = &gpuaff::read_dra_metadata};
  return gpuaff::plan(o, [](std::string_view) -> std::optional<std::string> { return std::nullopt; }, readers);
}

}  // namespace

TEST_CASE("the DRA metadata reader takes the claimed GPUs and CPUs, in both CPU driver modes") {
  auto individual = gpuaff::read_dra_metadata(pod("individual"));
  REQUIRE_MESSAGE(individual, individual.error().message());
  CHECK(individual->files.size() == 2);
  REQUIRE(individual->pci.size() == 2);
  CHECK(individual->pci[0].to_string().view() == "0000:61:00.0");
  CHECK(individual->cpus.to_list() == "40-47,60-67,152-159,172-179");
  auto grouped = gpuaff::read_dra_metadata(pod("grouped"));
  REQUIRE(grouped);
  CHECK(grouped->cpus.empty());
  CHECK(grouped->cpu_nodes == std::vector<int>{0, 1});
  CHECK(grouped->pci.size() == 2);  // read from the second object: the first's version is unknown
  // No directory: no claim at all.
  auto none = gpuaff::read_dra_metadata(pod("absent"));
  REQUIRE(none);
  CHECK(none->files.empty());
}

TEST_CASE("a pod with 2 of 8 GPUs binds each rank to its claimed CPUs nearest its claimed GPU") {
  // Individual mode: the claimed GPUs are 0 (0000:61:00.0, node 0) and 1 (0000:9d:00.0, node 1);
  // node 0's claimed CPUs are cores 40-47, node 1's cores 60-67.
  for (const char* policy : {"node", "exclusive"}) {
    auto g0 = plan_in_pod("individual", "0", policy);
    REQUIRE_MESSAGE(g0, g0.error().message());
    CHECK(g0->target().address().to_string().view() == "0000:61:00.0");
    CHECK(g0->cpus.to_list() == "40-47,152-159");
    auto g1 = plan_in_pod("individual", "1", policy);
    REQUIRE(g1);
    CHECK(g1->target().address().to_string().view() == "0000:9d:00.0");
    CHECK(g1->cpus.to_list() == "60-67,172-179");
  }
  // Grouped by NUMA node: the claim names nodes 0 and 1, the cpuset (every CPU here) the CPUs.
  auto grouped = plan_in_pod("grouped", "1");
  REQUIRE(grouped);
  CHECK(grouped->cpus.to_list() == "56-111,168-223");
  // Only two GPUs are claimed: a third is no GPU of this pod.
  auto third = plan_in_pod("individual", "2");
  REQUIRE_FALSE(third);
  CHECK(third.error().code() == Errc::not_found);
}

TEST_CASE("a mismatch between the DRA metadata and what the process sees is named") {
  // The claim names GPU 0000:1b:00.0, which visible_devices=3,4 hides.
  auto hidden = plan_in_pod("mismatch", "0", "node", std::string("3,4"));
  REQUIRE_FALSE(hidden);
  std::string m(hidden.error().message());
  CHECK(m.find("claims GPU 0000:1b:00.0, which this process does not see") != std::string::npos);
  // Every GPU visible: the GPUs agree, and CPU 300 of the claim is outside the process's CPUs (0-223).
  auto cpus = plan_in_pod("mismatch", "0");
  REQUIRE_FALSE(cpus);
  CHECK(std::string(cpus.error().message()).find("CPUs 300 of the claim are outside its cpuset") != std::string::npos);
}

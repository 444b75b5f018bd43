// SPDX-License-Identifier: Apache-2.0
// The front door's exit, gpuaff::launch(): one set of rules for every front
// end (exec, the SPANK plugin, Python). Each rule is checked here once; the
// front ends' tests check only how they spell the result.
//
// dgx-h100 (fixtures/dgx-h100): node 0 = 0-55,112-167 with GPUs 0-3; exclusive
// gives each of node 0's four GPUs 56 / 4 = 14 cores with their siblings
// (+112): GPU 1 = 14-27,126-139. Its CPU ids reach 223, more than a test
// machine has, so applying a plan of it here is what the machine refuses.
#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>

#include "gpuaff/apply/affinity.hpp"
#include "gpuaff/launch/launch.hpp"
#include "support/check.hpp"

using gpuaff::Errc;
using gpuaff::LaunchApply;
using gpuaff::LaunchCall;
using gpuaff::Launched;
using gpuaff::LaunchOptions;
using gpuaff::LaunchStage;

namespace {

gpuaff::Environment env_of(std::map<std::string, std::string> vars) {
  return [vars](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

LaunchOptions options(std::initializer_list<std::pair<const char*, const char*>> kv) {
  LaunchOptions o;
  for (const auto& [k, v] : kv) {
    auto ok = gpuaff::set_option(o, k, v);
    REQUIRE_MESSAGE(ok, (ok ? "" : std::string(ok.error().message())));
  }
  return o;
}

const std::string h100 = gpuaff_test::fixture("dgx-h100");

/// The calling thread's mask, to check that a launch that fails changed nothing.
gpuaff::CpuSet mask_now() {
  auto m = gpuaff::thread_affinity();
  REQUIRE(m);
  return *m;
}

}  // namespace

TEST_CASE("a launch binds only a device that is named: no default GPU 0, anywhere") {
  auto before = mask_now();
  Launched none = gpuaff::launch(options({{"root", h100.c_str()}}), env_of({}), {}, {.apply = LaunchApply::none});
  REQUIRE(!none.ok());
  CHECK(none.error->code() == Errc::invalid_argument);
  CHECK(std::string(none.error->message()).find("gpu=N, pci=BDF or local_rank=true") != std::string::npos);
  CHECK(none.usage_mistake());
  CHECK(none.exit_code() == 2);
  CHECK(!none.plan);
  CHECK(none.env.empty());
  // The library's plan() applies the same rule: it was GPU 0 before.
  auto plan = gpuaff::plan(options({{"root", h100.c_str()}}), env_of({}));
  REQUIRE(!plan);
  CHECK(plan.error().code() == Errc::invalid_argument);
  // gpu=all is for bind only.
  Launched all = gpuaff::launch(options({{"root", h100.c_str()}, {"gpu", "all"}}), env_of({}));
  REQUIRE(!all.ok());
  CHECK(all.exit_code() == 2);
  CHECK(mask_now() == before);
}

TEST_CASE("fallback=unbound never covers a usage mistake") {
  auto before = mask_now();
  // No device, a memory node choice without a policy, a launcher variable that is not a number.
  for (auto o : {options({{"root", h100.c_str()}, {"fallback", "unbound"}}),
                 options({{"root", h100.c_str()}, {"gpu", "0"}, {"mem_nodes", "socket"}, {"fallback", "unbound"}}),
                 options({{"root", h100.c_str()}, {"local_rank", "true"}, {"fallback", "unbound"}})}) {
    Launched l = gpuaff::launch(o, env_of({{"LOCAL_RANK", "x"}}), {}, {.running = "running 'true'"});
    REQUIRE(!l.ok());
    CHECK(l.usage_mistake());
    CHECK(l.exit_code() == 2);
    CHECK(!l.unbound);
    CHECK(l.warnings.empty());
  }
  CHECK(mask_now() == before);
}

TEST_CASE("what the machine refuses is an error with its exit code, or under fallback=unbound one warning") {
  auto before = mask_now();
  // GPU 9 of 8: the machine's answer (not found, exit 4), not a usage mistake.
  Launched missing = gpuaff::launch(options({{"root", h100.c_str()}, {"gpu", "9"}}), env_of({}));
  REQUIRE(!missing.ok());
  CHECK(missing.error->code() == Errc::not_found);
  CHECK(missing.stage == LaunchStage::plan);
  CHECK(!missing.usage_mistake());
  CHECK(missing.exit_code() == 4);

  Launched covered = gpuaff::launch(options({{"root", h100.c_str()}, {"gpu", "9"}, {"fallback", "unbound"}}),
                                    env_of({}), {}, {.running = "running 'python3 train.py'"});
  CHECK(covered.ok());
  CHECK(covered.exit_code() == 0);
  CHECK(covered.unbound);
  CHECK(covered.env.empty());  // an unbound program is not told a plan it does not have
  REQUIRE(covered.warnings.size() == 1);
  CHECK(covered.warnings[0].rfind("no GPU 9", 0) == 0);
  CHECK(covered.warnings[0].find("; running 'python3 train.py' unbound (fallback=unbound)") != std::string::npos);
  CHECK(mask_now() == before);
}

TEST_CASE("a plan of CPUs this machine does not have is refused at apply, as the machine's answer") {
  // dgx-h100's GPU 7 gets CPUs on node 1 (from 56 up); apply_plan first checks
  // a plan from a recording against this machine's online CPUs. A machine with
  // all of them online is not a test machine: then there is nothing to refuse.
  auto online = gpuaff::live_online_cpus();
  REQUIRE(online);
  if (online->count() >= 224) return;
  auto before = mask_now();
  for (LaunchApply apply : {LaunchApply::process, LaunchApply::thread}) {
    Launched l = gpuaff::launch(options({{"root", h100.c_str()}, {"gpu", "7"}}), env_of({}), {}, {.apply = apply});
    REQUIRE(!l.ok());
    CHECK(l.stage == LaunchStage::apply);
    CHECK(l.error->code() == Errc::empty_result);
    CHECK(l.exit_code() == 5);
    CHECK(!l.binding);
    CHECK(!l.guard);
    CHECK(mask_now() == before);
    Launched unbound = gpuaff::launch(options({{"root", h100.c_str()}, {"gpu", "7"}, {"fallback", "unbound"}}),
                                      env_of({}), {}, {.apply = apply, .running = "running the task"});
    CHECK(unbound.ok());
    CHECK(unbound.unbound);
    REQUIRE(unbound.warnings.size() == 1);
    CHECK(unbound.warnings[0].find("do not exist here") != std::string::npos);
    CHECK(unbound.warnings[0].find("; running the task unbound (fallback=unbound)") != std::string::npos);
    CHECK(mask_now() == before);
  }
}

TEST_CASE("the program is given OMP_NUM_THREADS first, the plan's own variables, and GPUAFF_PLAN last") {
  // local rank 1 of 8 under torchrun: GPU 1, exclusive: 14 cores (14-27) and
  // their siblings; roles main=1,comm=1 leave 12 compute cores.
  auto o = options({{"root", h100.c_str()}, {"local_rank", "true"}, {"policy", "exclusive"},
                    {"omp_threads", "true"}, {"roles", "main=1,comm=1"}});
  Launched l = gpuaff::launch(o, env_of({{"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "8"}}), {},
                              {.apply = LaunchApply::none});
  REQUIRE_MESSAGE(l.ok(), (l.ok() ? "" : std::string(l.error->message())));
  REQUIRE(l.plan);
  CHECK(l.plan->cpus == *gpuaff::CpuSet::parse_list("14-27,126-139"));
  CHECK(l.plan->rank_source == "LOCAL_RANK=1");
  CHECK(!l.binding);
  REQUIRE(l.env.size() == 4);
  CHECK(l.env[0] == std::pair<std::string, std::string>{"OMP_NUM_THREADS", "12"});
  CHECK(l.env[1].first == "OMP_PLACES");
  CHECK(l.env[2] == std::pair<std::string, std::string>{"OMP_PROC_BIND", "close"});
  CHECK(l.env[3].first == "GPUAFF_PLAN");
  CHECK(l.env[3].second.find("cpus=14-27,126-139") != std::string::npos);
  // LaunchApply::none is a question: fallback=unbound does not turn its refusal into an answer.
  o.gpu.reset();
  o.local_rank = false;
  o.gpu = 9;
  o.fallback = gpuaff::Fallback::unbound;
  Launched none = gpuaff::launch(o, env_of({}), {}, {.apply = LaunchApply::none});
  CHECK(!none.ok());
  CHECK(!none.unbound);
}

TEST_CASE("a plan made earlier is applied by the same rules") {
  auto o = options({{"root", h100.c_str()}, {"gpu", "1"}, {"policy", "exclusive"}});
  auto plan = gpuaff::plan(o, env_of({}));
  REQUIRE(plan);
  Launched later = gpuaff::launch(*plan, o, {.apply = LaunchApply::later});
  CHECK(later.ok());
  CHECK(!later.binding);
  REQUIRE(!later.env.empty());
  CHECK(later.env.back().first == "GPUAFF_PLAN");
}

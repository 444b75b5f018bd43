// SPDX-License-Identifier: Apache-2.0
// Local rank and local size from launcher variables: the first variable set
// wins, garbage in it is an error that names it, and Slurm's task list is
// read for this node.
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "gpuaff/launch/launcher.hpp"

using gpuaff::Environment;
using gpuaff::Errc;

namespace {

Environment env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace

TEST_CASE("the local rank variables are listed in launcher order, as the contract names them") {
  CHECK(gpuaff::variable_list(gpuaff::local_rank_variables) ==
        "LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, PMI_LOCAL_RANK, PALS_LOCAL_RANKID");
  CHECK(gpuaff::variable_list(gpuaff::local_size_variables) ==
        "LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS, PMI_LOCAL_SIZE, PALS_LOCAL_SIZE");
}

TEST_CASE("each launcher's rank variable alone gives the local rank") {
  int value = 0;
  for (std::string_view name : gpuaff::local_rank_variables) {
    ++value;
    auto r = gpuaff::local_rank(env_of({{std::string(name), std::to_string(value)}}));
    INFO(name);
    REQUIRE(r);
    CHECK(r->value == value);
    CHECK(r->variable == name);
    CHECK(r->source() == std::string(name) + "=" + std::to_string(value));
  }
}

TEST_CASE("the first rank variable that is set wins over the later ones") {
  auto r = gpuaff::local_rank(env_of({{"PALS_LOCAL_RANKID", "5"}, {"SLURM_LOCALID", "3"}, {"MPI_LOCALRANKID", "4"}}));
  REQUIRE(r);
  CHECK(r->value == 3);
  CHECK(r->source() == "SLURM_LOCALID=3");
  auto t = gpuaff::local_rank(env_of({{"LOCAL_RANK", "0"}, {"SLURM_LOCALID", "7"}}));
  REQUIRE(t);
  CHECK(t->value == 0);
  CHECK(t->variable == "LOCAL_RANK");
}

TEST_CASE("garbage in the first rank variable set is an error naming it, never skipped for a later one") {
  for (std::string bad : {"x1", "-1", "", " 1", "1 ", "1e3", "0x1", "1234567890"}) {
    auto r = gpuaff::local_rank(env_of({{"LOCAL_RANK", bad}, {"SLURM_LOCALID", "2"}}));
    INFO("LOCAL_RANK='" << bad << "'");
    REQUIRE(!r);
    CHECK(r.error().code() == Errc::invalid_argument);
    CHECK(r.error().message() == "LOCAL_RANK='" + bad + "' is not a non-negative integer; fix or unset LOCAL_RANK");
  }
}

TEST_CASE("no rank variable set is an error listing every variable") {
  auto r = gpuaff::local_rank(env_of({{"RANK", "3"}, {"LOCAL_WORLD_SIZE", "8"}}));
  REQUIRE(!r);
  CHECK(r.error().code() == Errc::invalid_argument);
  CHECK(r.error().message() ==
        "none of LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, PMI_LOCAL_RANK, "
        "PALS_LOCAL_RANKID is set; run under torchrun, srun or mpirun");
}

TEST_CASE("a long garbage value is cut in the message") {
  std::string bad(100, 'x');
  auto r = gpuaff::local_rank(env_of({{"MPI_LOCALRANKID", bad}}));
  REQUIRE(!r);
  CHECK(r.error().message() == "MPI_LOCALRANKID='" + std::string(40, 'x') +
                                   "' is not a non-negative integer; fix or unset MPI_LOCALRANKID");
}

TEST_CASE("no local size variable gives no local size") {
  auto r = gpuaff::local_size(env_of({{"LOCAL_RANK", "1"}}));
  REQUIRE(r);
  CHECK(!r->has_value());
}

TEST_CASE("the first local size variable that is set wins, Slurm's task list last") {
  auto r = gpuaff::local_size(
      env_of({{"PMI_LOCAL_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}, {"SLURM_TASKS_PER_NODE", "16"}}));
  REQUIRE(r);
  REQUIRE(r->has_value());
  CHECK((*r)->value == 4);
  CHECK((*r)->source() == "OMPI_COMM_WORLD_LOCAL_SIZE=4");
  auto t = gpuaff::local_size(env_of({{"LOCAL_WORLD_SIZE", "8"}, {"PALS_LOCAL_SIZE", "2"}}));
  REQUIRE(t);
  REQUIRE(t->has_value());
  CHECK((*t)->variable == "LOCAL_WORLD_SIZE");
  CHECK((*t)->value == 8);
}

TEST_CASE("a local size that is not a positive integer is an error naming the variable") {
  for (std::string bad : {"0", "-2", "eight", ""}) {
    auto r = gpuaff::local_size(env_of({{"MPI_LOCALNRANKS", bad}, {"PMI_LOCAL_SIZE", "4"}}));
    INFO("MPI_LOCALNRANKS='" << bad << "'");
    REQUIRE(!r);
    CHECK(r.error().code() == Errc::invalid_argument);
    CHECK(r.error().message() == "MPI_LOCALNRANKS='" + bad + "' is not a positive integer; fix or unset MPI_LOCALNRANKS");
  }
}

TEST_CASE("Slurm's local size is this node's entry of SLURM_TASKS_PER_NODE") {
  // "2(x3),1": nodes 0, 1 and 2 run two tasks each, node 3 runs one.
  auto size_on = [](const std::string& list, const std::string& node) {
    return gpuaff::local_size(env_of({{"SLURM_TASKS_PER_NODE", list}, {"SLURM_NODEID", node}}));
  };
  for (auto entry : {std::pair{"0", 2}, std::pair{"2", 2}, std::pair{"3", 1}}) {
    const std::string node = entry.first;  // not a structured binding: INFO's lambda captures it (Clang 14)
    const int tasks = entry.second;
    auto r = size_on("2(x3),1", node);
    INFO("node " << node);
    REQUIRE(r);
    REQUIRE(r->has_value());
    CHECK((*r)->value == tasks);
    CHECK((*r)->variable == "SLURM_TASKS_PER_NODE");
  }
  auto same = size_on("8", "0");
  REQUIRE(same);
  CHECK((*same)->value == 8);
  // Without SLURM_NODEID the first entry is this node's (a one-node allocation).
  auto alone = gpuaff::local_size(env_of({{"SLURM_TASKS_PER_NODE", "4(x2)"}}));
  REQUIRE(alone);
  CHECK((*alone)->value == 4);
}

TEST_CASE("the job step's task list comes before the job's") {
  // A job of 8 tasks per node on 2 nodes ("8(x2)") runs a step of 2 tasks on
  // its second node only: the step's list is "2" and the node's index in the
  // step is 0. Under srun -E the task keeps the job's SLURM_TASKS_PER_NODE,
  // whose entry 0 (8) is another node's and the wrong count: the step's list
  // gives 2.
  auto r = gpuaff::local_size(env_of({{"SLURM_STEP_TASKS_PER_NODE", "2"}, {"SLURM_TASKS_PER_NODE", "8(x2)"},
                                      {"SLURM_NODEID", "0"}}));
  REQUIRE(r);
  REQUIRE(r->has_value());
  CHECK((*r)->value == 2);
  CHECK((*r)->variable == "SLURM_STEP_TASKS_PER_NODE");
  CHECK((*r)->source() == "SLURM_STEP_TASKS_PER_NODE=2");
  // Step lists are compressed like the job's: node 2 of "3(x2),1" runs one task.
  auto third = gpuaff::local_size(env_of({{"SLURM_STEP_TASKS_PER_NODE", "3(x2),1"}, {"SLURM_NODEID", "2"}}));
  REQUIRE(third);
  CHECK((*third)->value == 1);
  // A broken step list is named, never passed over for the job's.
  auto bad = gpuaff::local_size(env_of({{"SLURM_STEP_TASKS_PER_NODE", "2(x"}, {"SLURM_TASKS_PER_NODE", "2"}}));
  REQUIRE(!bad);
  CHECK(bad.error().message() == "SLURM_STEP_TASKS_PER_NODE='2(x' gives no task count for node 0 (SLURM_NODEID); fix "
                                 "or unset SLURM_STEP_TASKS_PER_NODE");
  // The launchers' own local size variables still come first.
  auto torchrun = gpuaff::local_size(env_of({{"LOCAL_WORLD_SIZE", "4"}, {"SLURM_STEP_TASKS_PER_NODE", "1"}}));
  REQUIRE(torchrun);
  CHECK((*torchrun)->value == 4);
}

TEST_CASE("a Slurm task list without this node's entry, or garbage in it, is an error") {
  auto beyond = gpuaff::local_size(env_of({{"SLURM_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "4"}}));
  REQUIRE(!beyond);
  CHECK(beyond.error().code() == Errc::invalid_argument);
  CHECK(beyond.error().message() ==
        "SLURM_TASKS_PER_NODE='2(x3),1' gives no task count for node 4 (SLURM_NODEID); fix or unset SLURM_TASKS_PER_NODE");
  for (std::string bad : {"two", "2(x", "2(x0)", "0", "2,,1"}) {
    auto r = gpuaff::local_size(env_of({{"SLURM_TASKS_PER_NODE", bad}, {"SLURM_NODEID", "1"}}));
    INFO("SLURM_TASKS_PER_NODE='" << bad << "'");
    CHECK(!r);
  }
  auto node = gpuaff::local_size(env_of({{"SLURM_TASKS_PER_NODE", "2"}, {"SLURM_NODEID", "n1"}}));
  REQUIRE(!node);
  CHECK(node.error().message() == "SLURM_NODEID='n1' is not a non-negative integer; fix or unset SLURM_NODEID");
}

TEST_CASE("process_environment reads this process's environment") {
  ::setenv("GPUAFF_LAUNCH_TEST_VARIABLE", "17", 1);
  Environment env = gpuaff::process_environment();
  CHECK(env("GPUAFF_LAUNCH_TEST_VARIABLE") == std::optional<std::string>("17"));
  ::unsetenv("GPUAFF_LAUNCH_TEST_VARIABLE");
  CHECK(!env("GPUAFF_LAUNCH_TEST_VARIABLE").has_value());
}

// SPDX-License-Identifier: Apache-2.0
// The /proc parsing behind `gpuaff doctor` (doctor/doctor.hpp); the command
// itself is tested against live processes in tests/cli/cli_nics_test.cpp.
#include <gpuaff/doctor/all.hpp>
#include <gpuaff/doctor/doctor.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "support/check.hpp"

using namespace std::string_literals;

TEST_CASE("numa_maps: pages per node summed over every mapping") {
  // Two mappings as the kernel prints them (fs/proc/task_mmu.c show_numa_map):
  // policy, then key=value fields; N<node>=<pages> per node with resident pages.
  std::string text =
      "55d0c0a00000 default file=/usr/bin/python3.11 mapped=800 mapmax=3 N0=700 N1=100 kernelpagesize_kB=4\n"
      "7f1200000000 bind:1 anon=2048 dirty=2048 active=0 N1=2000 N3=48 kernelpagesize_kB=4\n"
      "7f1300000000 default stack anon=3 dirty=3 N0=3 kernelpagesize_kB=4\n";
  auto pages = gpuaff::detail::parse_numa_maps(text);
  CHECK(pages == std::map<int, long long>{{0, 703}, {1, 2100}, {3, 48}});
  // Fields that only look similar are not pages of a node.
  CHECK(gpuaff::detail::parse_numa_maps("0 default N=5 Nx=3 N2= N4=7x\n").empty());
}

TEST_CASE("environ: NUL-separated NAME=VALUE entries; fighting settings named with the reason") {
  std::string text = "PATH=/bin\0LOCAL_RANK=3\0OMP_PLACES=cores\0EMPTY=\0noequals\0"s;
  auto vars = gpuaff::detail::parse_environ(text);
  CHECK(vars.size() == 4);
  CHECK(vars.at("LOCAL_RANK") == "3");
  CHECK(vars.at("EMPTY").empty());
  auto fights = gpuaff::fighting_settings(vars);
  REQUIRE(fights.size() == 1);
  CHECK(fights[0].name == "OMP_PLACES");
  CHECK(fights[0].value == "cores");
  CHECK_FALSE(fights[0].why.empty());
  CHECK(gpuaff::thread_owner("pt_autograd_0") == "PyTorch");
  CHECK(gpuaff::thread_owner("worker").empty());
}

TEST_CASE("a process's scheduler job: SLURM_JOB_ID, PBS_JOBID or LSB_JOBID, matched whole") {
  using gpuaff::detail::environ_in_job;
  using gpuaff::detail::environ_value;
  // /proc/PID/environ: entries end in NUL, the last one too.
  const std::string env = "PATH=/bin\0SLURM_JOB_ID_OLD=9\0SLURM_JOB_ID=4242\0EMPTY=\0"s;
  CHECK(environ_value(env, "SLURM_JOB_ID") == "4242");  // not SLURM_JOB_ID_OLD, listed first
  CHECK(environ_value(env, "PATH") == "/bin");
  CHECK(environ_value(env, "EMPTY") == "");
  CHECK_FALSE(environ_value(env, "SLURM_JOB").has_value());  // a prefix of a name is not the name
  CHECK_FALSE(environ_value(env, "HOME").has_value());
  CHECK(environ_value("LSB_JOBID=7"s, "LSB_JOBID") == "7");  // no final NUL
  CHECK(environ_in_job(env, "4242"));
  CHECK_FALSE(environ_in_job(env, "424"));   // the whole value, not a prefix
  CHECK_FALSE(environ_in_job(env, "9"));     // SLURM_JOB_ID_OLD is not a job variable
  CHECK(environ_in_job("PBS_JOBID=12[3].pbs01\0"s, "12[3].pbs01"));
  CHECK(environ_in_job("X=1\0LSB_JOBID=88\0"s, "88"));
  CHECK_FALSE(environ_in_job("X=1\0"s, "1"));
}

TEST_CASE("this process: its threads and its environment from /proc") {
  auto threads = gpuaff::process_threads(::getpid());
  REQUIRE(threads.has_value());
  REQUIRE_FALSE(threads->empty());
  CHECK(threads->front().tid == ::getpid());
  CHECK_FALSE(threads->front().cpus.empty());
  auto env = gpuaff::process_environ(::getpid());
  REQUIRE(env.has_value());
  auto none = gpuaff::process_environ(999999999);
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().code() == gpuaff::Errc::not_found);
}

TEST_CASE("a process that has exited but is not yet reaped is called a zombie, with its parent, not missing") {
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);
  // Wait until the child is a zombie (it exits at once), without reaping it.
  siginfo_t info{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT) == 0);
  auto env = gpuaff::process_environ(child);
  REQUIRE_FALSE(env.has_value());
  CHECK(env.error().code() == gpuaff::Errc::not_found);
  CHECK(env.error().message().find("has exited: it is a zombie") != std::string_view::npos);
  CHECK(env.error().message().find("(PID " + std::to_string(::getpid()) + ")") != std::string_view::npos);
  ::waitpid(child, nullptr, 0);
  // Reaped: now it is missing.
  auto gone = gpuaff::process_environ(child);
  REQUIRE_FALSE(gone.has_value());
  CHECK(gone.error().message().find("no process") != std::string_view::npos);
}

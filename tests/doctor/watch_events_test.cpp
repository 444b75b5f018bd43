// SPDX-License-Identifier: Apache-2.0
// doctor --watch's diff (doctor/watch.hpp) and its remedy (doctor/rebind.hpp):
// two checks of a node, as /proc showed them, in; the events out. No sleeping:
// the process states are written here as /proc/PID/task/TID/status gives
// them (tid, comm name, Cpus_allowed_list).
#include <gpuaff/doctor/rebind.hpp>
#include <gpuaff/doctor/watch.hpp>
#include <gpuaff/launch/repin_guards.hpp>

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "support/check.hpp"

namespace {

gpuaff::CpuSet cpus(std::string_view list) { return gpuaff::CpuSet::parse_list(list).value(); }

gpuaff::ThreadState thread(int tid, std::string name, std::string_view list) { return {tid, std::move(name), cpus(list)}; }

/// Rank `gpu` of an 8-GPU node planned on CPUs `plan`, memory node 0, with
/// `threads` and `pages` as numa_maps summed them; `vars` its environment.
gpuaff::Verdict rank(int pid, int gpu, std::string_view plan, std::vector<gpuaff::ThreadState> threads,
                     std::map<int, long long> pages = {{0, 1000}}, std::map<std::string, std::string> vars = {},
                     std::optional<gpuaff::Roles> roles = std::nullopt) {
  gpuaff::Expectation e;
  e.gpu = gpu;
  e.gpu_source = "LOCAL_RANK=" + std::to_string(gpu);
  e.cpus = cpus(plan);
  e.memory_nodes = gpuaff::NodeSet::single(0);
  e.origin = gpuaff::PlanOrigin::recorded;
  e.roles = std::move(roles);
  return gpuaff::judge(pid, std::move(e), std::move(threads), std::move(pages), vars, {});
}

gpuaff::NodeReport node(std::vector<gpuaff::Verdict> v) {
  gpuaff::NodeReport r;
  r.node = "n1";
  r.verdicts = std::move(v);
  return r;
}

std::vector<std::string> kinds(const std::vector<gpuaff::WatchEvent>& ev) {
  std::vector<std::string> out;
  for (const auto& e : ev) out.emplace_back(gpuaff::to_string(e.kind));
  return out;
}

}  // namespace

TEST_CASE("watch: the first check reports each process and the threads already outside; then only changes") {
  // Rank 0 planned on 0-3: its main thread inside, an OpenMP worker on 0-7
  // (outside: CPUs 4-7 are not the rank's). Rank 1 planned on 4-7, all inside.
  auto a = node({rank(100, 0, "0-3", {thread(100, "python", "0-3"), thread(105, "omp_worker", "0-7")}),
                 rank(200, 1, "4-7", {thread(200, "python", "4-7")})});
  auto first = gpuaff::watch_events({}, a);
  CHECK(kinds(first) == std::vector<std::string>{"process_started", "thread_new", "process_started"});
  CHECK(first[1].tid == 105);
  CHECK(first[1].name == "omp_worker");
  CHECK(first[1].runtime.find("OpenMP") == 0);  // the name tells (thread_owner's "omp_" prefix)
  // The same node again: nothing changed, nothing printed.
  CHECK(gpuaff::watch_events(a, a).empty());
}

TEST_CASE("watch: a thread moved off its plan is named, with the runtime its process's variables point at") {
  std::map<std::string, std::string> vars{{"KMP_AFFINITY", "granularity=fine,explicit,proclist=[8-11]"}};
  auto a = node({rank(100, 0, "0-3", {thread(100, "python", "0-3"), thread(101, "worker", "0-3")}, {{0, 1000}}, vars)});
  auto b = node({rank(100, 0, "0-3", {thread(100, "python", "0-3"), thread(101, "worker", "8-11")}, {{0, 1000}}, vars)});
  auto ev = gpuaff::watch_events(a, b);
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == gpuaff::WatchEventKind::thread_moved);
  CHECK(ev[0].pid == 100);
  CHECK(ev[0].tid == 101);
  CHECK(ev[0].name == "worker");
  CHECK(ev[0].cpus == cpus("8-11"));
  REQUIRE(ev[0].previous_cpus.has_value());
  CHECK(*ev[0].previous_cpus == cpus("0-3"));
  CHECK(ev[0].expected == cpus("0-3"));
  // "worker" names no runtime; KMP_AFFINITY is Intel/LLVM OpenMP's variable.
  CHECK(ev[0].runtime.find("Intel/LLVM OpenMP (KMP_AFFINITY=") == 0);
  CHECK(ev[0].message.find("thread 101 'worker' moved off its plan (0-3): CPUs 0-3 -> 8-11") != std::string::npos);
  // Back inside at the next check: thread_back, without a culprit.
  auto back = gpuaff::watch_events(b, a);
  REQUIRE(back.size() == 1);
  CHECK(back[0].kind == gpuaff::WatchEventKind::thread_back);
  CHECK(back[0].runtime.empty());
}

TEST_CASE("watch: roles: the main thread off main, an NCCL thread off comm, though inside the rank") {
  gpuaff::Roles roles{.main = cpus("0"), .comm = cpus("1"), .data = cpus("2"), .compute = cpus("3")};
  auto a = node({rank(100, 0, "0-3", {thread(100, "python", "0"), thread(110, "NCCL Proxy", "1")}, {{0, 10}}, {}, roles)});
  // Both still inside the rank's CPUs 0-3, each outside its role.
  auto b = node({rank(100, 0, "0-3", {thread(100, "python", "0-3"), thread(110, "NCCL Proxy", "2-3")}, {{0, 10}}, {}, roles)});
  auto ev = gpuaff::watch_events(a, b);
  REQUIRE(ev.size() == 2);
  CHECK(ev[0].tid == 100);
  CHECK(ev[0].role == "main");
  CHECK(ev[0].expected == cpus("0"));
  CHECK(ev[1].tid == 110);
  CHECK(ev[1].role == "comm");
  CHECK(ev[1].runtime == "NCCL (thread name 'NCCL Proxy')");
}

TEST_CASE("watch: processes started and gone, new threads, pages drifting off the planned node") {
  auto a = node({rank(100, 0, "0-3", {thread(100, "python", "0-3")}, {{0, 900}, {1, 100}})});
  // pid 100: a new thread outside (thread_new) and one inside (not reported);
  // 700 of 1000 pages now on node 1: 30% local, below min_local 50%.
  // pid 300 starts; pid 100 stays; nothing is gone.
  auto b = node({rank(100, 0, "0-3", {thread(100, "python", "0-3"), thread(120, "cuda-EvtHandlr", "0-7"), thread(121, "x", "2")},
                      {{0, 300}, {1, 700}}),
                 rank(300, 2, "8-11", {thread(300, "python", "8-11")})});
  auto ev = gpuaff::watch_events(a, b);
  CHECK(kinds(ev) == std::vector<std::string>{"thread_new", "pages_off", "process_started"});
  CHECK(ev[0].tid == 120);
  CHECK(ev[0].runtime == "CUDA runtime (thread name 'cuda-EvtHandlr')");
  CHECK(ev[1].message.find("30.0% of its resident pages on node(s) 0") != std::string::npos);
  // Then pid 100 ends and its pages no longer matter.
  auto c = node({rank(300, 2, "8-11", {thread(300, "python", "8-11")})});
  auto gone = gpuaff::watch_events(b, c);
  REQUIRE(gone.size() == 1);
  CHECK(gone[0].kind == gpuaff::WatchEventKind::process_gone);
  CHECK(gone[0].pid == 100);
  // A process whose plan cannot be read is reported once, when it appears.
  gpuaff::NodeReport d = c;
  d.invalid_plans.push_back({400, "GPUAFF_PLAN='x' is not a plan"});
  CHECK(kinds(gpuaff::watch_events(c, d)) == std::vector<std::string>{"plan_invalid"});
  CHECK(gpuaff::watch_events(d, d).empty());
}

TEST_CASE("watch: each interval's extra checks add their events (the place for NIC and interrupt checks)") {
  // watch_once reads the live node; here only the shape of a check is tried.
  gpuaff::WatchCheck check = [](const gpuaff::NodeReport& r) {
    gpuaff::WatchEvent e;
    e.message = "checked " + std::to_string(r.verdicts.size());
    return std::vector<gpuaff::WatchEvent>{e};
  };
  CHECK(check(node({}))[0].message == "checked 0");
}

TEST_CASE("rebind_targets: back to the CPUs a thread had while it was well placed, else its role's or the plan's") {
  gpuaff::Roles roles{.main = cpus("0"), .comm = cpus("1"), .data = cpus("2"), .compute = cpus("3")};
  auto before = rank(100, 0, "0-3", {thread(100, "python", "0"), thread(101, "omp", "3"), thread(110, "NCCL x", "1")}, {{0, 1}}, {}, roles);
  auto now = rank(100, 0, "0-3",
                  {thread(100, "python", "0-7"), thread(101, "omp", "5"), thread(102, "new", "6"), thread(110, "NCCL x", "1")},
                  {{0, 1}}, {}, roles);
  auto t = gpuaff::rebind_targets(now, &before);
  REQUIRE(t.size() == 3);
  CHECK(t[0].tid == 100);
  CHECK(t[0].to == cpus("0"));    // it had 0, its role main
  CHECK(t[1].tid == 101);
  CHECK(t[1].to == cpus("3"));    // it had core 3 (one compute core), not the whole plan
  CHECK(t[2].tid == 102);
  CHECK(t[2].to == cpus("0-3"));  // new: the plan
  CHECK(gpuaff::rebind_targets(now).at(1).to == cpus("0-3"));  // no previous check: the plan
}

TEST_CASE("rebind_threads: a thread of this process moved back, read back from the kernel; a bad set reported") {
  cpu_set_t mine;
  REQUIRE(::sched_getaffinity(0, sizeof mine, &mine) == 0);
  auto allowed = gpuaff::CpuSet::from_cpu_set_t(mine);
  if (allowed.count() < 2) return;  // needs two CPUs to move between
  int first = *allowed.begin();
  std::atomic<int> tid{0};
  std::atomic<bool> stop{false};
  std::thread worker([&] {
    tid = static_cast<int>(::gettid());
    while (!stop) ::usleep(1000);
  });
  while (tid == 0) ::usleep(100);
  gpuaff::ThreadMove m{tid, "worker", allowed, gpuaff::CpuSet::single(first)};
  // CPU 4095 exists on no machine this runs on: EINVAL, reported, not applied.
  gpuaff::ThreadMove bad{tid, "worker", allowed, gpuaff::CpuSet::single(4095)};
  auto r = gpuaff::rebind_threads(::getpid(), {m, bad});
  cpu_set_t now;
  REQUIRE(::sched_getaffinity(tid, sizeof now, &now) == 0);
  stop = true;
  worker.join();
  REQUIRE(r.moved.size() == 1);
  CHECK(r.moved[0].to == gpuaff::CpuSet::single(first));
  CHECK(gpuaff::CpuSet::from_cpu_set_t(now) == gpuaff::CpuSet::single(first));
  REQUIRE(r.failed.size() == 1);
  CHECK_FALSE(r.failed[0].error.empty());
  CHECK_FALSE(r.complete());
  // A thread id that is not (or no longer) the process's: counted as ended.
  auto gone = gpuaff::rebind_threads(::getpid(), {{999999999, "x", {}, gpuaff::CpuSet::single(first)}});
  CHECK(gone.exited == 1);
  CHECK(gone.complete());
}

TEST_CASE("repin guards: exported only for a runtime found, never over the user's value") {
  // TensorRT-LLM found by one of its own variables, MVAPICH2 by its launcher's.
  std::map<std::string, std::string> vars{{"TLLM_LOG_LEVEL", "info"}, {"MV2_COMM_WORLD_LOCAL_RANK", "3"}};
  auto g = gpuaff::repin_guard_variables(vars, "/usr/bin/python3");
  REQUIRE(g.size() == 2);
  CHECK(g[0].name == "TLLM_NUMA_AWARE_WORKER_AFFINITY");
  CHECK(g[0].value == "0");
  CHECK(g[0].found_by == "TLLM_LOG_LEVEL");
  CHECK(g[1].name == "MV2_ENABLE_AFFINITY");
  CHECK(g[1].value == "0");
  // Found by the command's name alone.
  auto serve = gpuaff::repin_guard_variables({}, "/opt/bin/trtllm-serve");
  REQUIRE(serve.size() == 1);
  CHECK(serve[0].found_by == "command trtllm-serve");
  // Nothing found: nothing exported; a value the user set (even "1"): kept.
  CHECK(gpuaff::repin_guard_variables({{"PATH", "/bin"}}, "python").empty());
  CHECK(gpuaff::repin_guard_variables({{"TLLM_NUMA_AWARE_WORKER_AFFINITY", "1"}}, "trtllm-serve").empty());
  // Every row cites where its runtime documents the variable.
  for (const auto& row : gpuaff::repin_guards) CHECK_FALSE(row.source.empty());
  // doctor does not count a guard's own value as a setting that fights the binding.
  auto v = rank(100, 0, "0-3", {thread(100, "python", "0-3")}, {{0, 1}},
                {{"MV2_ENABLE_AFFINITY", "0"}, {"KMP_AFFINITY", "compact"}});
  REQUIRE(v.environment.size() == 1);
  CHECK(v.environment[0].name == "KMP_AFFINITY");
}

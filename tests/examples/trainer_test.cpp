// SPDX-License-Identifier: Apache-2.0
// examples/trainer on a recorded p4d.24xlarge, its plan mapped onto this
// machine's CPUs (--map-to-local): every worker must run on exactly its CPUs.
#include <gpuaff/apply/spawn.hpp>

#include <fcntl.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "support/check.hpp"

using gpuaff::CpuSet;

namespace {
struct Run {
  std::string out;
  std::string err;
  int exit_code = -1;
};

std::string drain(int fd) {
  std::string s;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<std::size_t>(n));
  close(fd);
  return s;
}

Run trainer(std::vector<std::string> args) {
  args.insert(args.begin(), GPUAFF_TRAINER);
  int out[2];
  int err[2];
  REQUIRE(pipe2(out, O_CLOEXEC) == 0);
  REQUIRE(pipe2(err, O_CLOEXEC) == 0);
  // stderr is small (a line or two): read stdout to the end first.
  auto child = gpuaff::spawn(args, {.stdout_fd = out[1], .stderr_fd = err[1]});
  close(out[1]);
  close(err[1]);
  REQUIRE(child);
  Run r;
  r.out = drain(out[0]);
  r.err = drain(err[0]);
  auto s = child->wait();
  REQUIRE(s);
  r.exit_code = s->exit_code;
  return r;
}

CpuSet here() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("Cpus_allowed_list:", 0) == 0) return CpuSet::parse_list(line.substr(18)).value();
  return {};
}

// The test mode's documented rule: recorded CPU k runs on the (k mod n)-th local CPU.
CpuSet mapped(const CpuSet& recorded) {
  CpuSet local = here();
  CpuSet out;
  for (int k : recorded) out.set(local.nth(k % local.count()));
  return out;
}

// "worker G expected LIST Cpus_allowed_list LIST" -> G -> {expected, actual}
std::map<int, std::pair<CpuSet, CpuSet>> workers(const std::string& out) {
  std::map<int, std::pair<CpuSet, CpuSet>> w;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::string word, expected_key, expected, actual_key, actual;
    int g = -1;
    if (!(l >> word) || word != "worker") continue;
    l >> g >> expected_key >> expected >> actual_key >> actual;
    w[g] = {CpuSet::parse_list(expected).value(), CpuSet::parse_list(actual).value()};
  }
  return w;
}
}  // namespace

TEST_CASE("each worker of a p4d.24xlarge plan runs on exactly its CPU") {
  Run r = trainer({"--root", gpuaff_test::fixture("p4d.24xlarge"), "--policy", "single-unique", "--smt", "one",
                   "--visible-devices", "0,1,2,3,4,5,6,7", "--map-to-local"});
  INFO(r.out, r.err);
  REQUIRE(r.exit_code == 0);
  // p4d.24xlarge: node 0 holds cores 0-23 (siblings 48-71) and GPUs 0-3, node 1
  // cores 24-47 (72-95) and GPUs 4-7. single-unique with one thread per core
  // gives each GPU the next free core of its node, lowest thread:
  const int recorded[8] = {0, 1, 2, 3, 24, 25, 26, 27};
  auto w = workers(r.out);
  REQUIRE(w.size() == 8);
  for (int g = 0; g < 8; ++g) {
    CAPTURE(g);
    CpuSet want = mapped(CpuSet::single(recorded[g]));  // on a 2-CPU machine: CPU 0, 1, 0, 1, ...
    CHECK(w[g].first == want);
    CHECK(w[g].second == want);
  }
  CHECK(r.out.find("all 8 workers ran on their CPUs") != std::string::npos);
}

TEST_CASE("node policy with memory binding: workers get their node's CPUs, memory refusals degrade") {
  Run r = trainer({"--root", gpuaff_test::fixture("p4d.24xlarge"), "--policy", "node", "--membind", "bind",
                   "--cpu-only-if-refused", "--visible-devices", "0,4", "--map-to-local"});
  INFO(r.out, r.err);
  REQUIRE(r.exit_code == 0);
  // Visible GPU 0 is the first on node 0 (0-23,48-71), visible GPU 1 the first on node 1 (24-47,72-95).
  auto w = workers(r.out);
  REQUIRE(w.size() == 2);
  CHECK(w[0].second == mapped(CpuSet::parse_list("0-23,48-71").value()));
  CHECK(w[1].second == mapped(CpuSet::parse_list("24-47,72-95").value()));
}

TEST_CASE("a root without a topology stops the launch before any worker starts") {
  Run r = trainer({"--root", "/nonexistent-gpuaff-root"});
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("worker") == std::string::npos);
  CHECK(r.err.find("/nonexistent-gpuaff-root") != std::string::npos);
}

// SPDX-License-Identifier: Apache-2.0
// gpuaff exec: binds itself, then execs the command. The plan comes from a
// recorded tree written here: one node with CPUs 0 and 1 (two cores, no SMT)
// and two GPUs on that node. Under --policy exclusive the node's two cores
// are split between its two GPUs: GPU 0 gets CPU 0, GPU 1 gets CPU 1. Those
// CPU ids exist on any Linux machine with two CPUs, so the plan applies here
// as is, and the child reads its own Cpus_allowed_list.

#include <doctest/doctest.h>

#include "run_tool.hpp"

using cli_test::tool;
using cli_test::Run;

namespace {

std::string two_cpu_root() {
  static const std::string root = [] {
    auto dir = cli_test::temp_dir("two-cpu");
    cli_test::write_machine(dir, cli_test::two_cpu_machine());
    // NVIDIA driver files with the GPUs' UUIDs, for visibility lists that name them.
    cli_test::write_file(dir / "proc/driver/nvidia/gpus/0000:17:00.0/information",
                         "Model: \t\t NVIDIA H100\nGPU UUID: \t GPU-aaaa1111-0000-0000-0000-000000000000\n");
    cli_test::write_file(dir / "proc/driver/nvidia/gpus/0000:65:00.0/information",
                         "Model: \t\t NVIDIA H100\nGPU UUID: \t GPU-bbbb2222-0000-0000-0000-000000000000\n");
    return dir.string();
  }();
  return root;
}

/// A machine whose GPU sits on CPUs 32-63: none of them exist on a small test machine.
std::string far_cpu_root() {
  static const std::string root = [] {
    auto dir = cli_test::temp_dir("far-cpu");
    cli_test::FakeMachine m;
    for (int c = 0; c < 64; ++c) {
      m.cores.push_back(std::to_string(c));
      m.core_package.push_back(c < 32 ? 0 : 1);
    }
    m.node_cpus = {"0-31", "32-63"};
    m.node_distances = {"10 20", "20 10"};
    m.online = "0-63";
    m.allowed = "0-63";
    m.mems_allowed = "0-1";
    m.devices = {{.bdf = "0000:81:00.0", .node = 1, .local_cpus = "32-63"}};
    cli_test::write_machine(dir, m);
    return dir.string();
  }();
  return root;
}

const std::vector<std::string> show_cpus{"--", "grep", "Cpus_allowed_list", "/proc/self/status"};

std::vector<std::string> exec_args(std::vector<std::string> options, const std::vector<std::string>& command = show_cpus) {
  std::vector<std::string> args{"exec", "--root", two_cpu_root(), "--policy", "exclusive"};
  args.insert(args.end(), options.begin(), options.end());
  args.insert(args.end(), command.begin(), command.end());
  return args;
}

bool can_test_binding() { return cli_test::cpus_allowed_here({0, 1}); }

}  // namespace

TEST_CASE("the tree used for exec binds GPU 0 to CPU 0 and GPU 1 to CPU 1") {
  Run r0 = tool({"bind", "--root", two_cpu_root(), "--policy", "exclusive", "--gpu", "0"});
  INFO(r0.err);
  CHECK(r0.out == "0\n");
  CHECK(tool({"bind", "--root", two_cpu_root(), "--policy", "exclusive", "--gpu", "1"}).out == "1\n");
}

TEST_CASE("exec binds the command to the GPU's CPUs") {
  if (!can_test_binding()) {
    MESSAGE("skipped: CPUs 0 and 1 are not both allowed for this test process");
    return;
  }
  Run r0 = tool(exec_args({"--gpu", "0"}));
  INFO(r0.err);
  CHECK(r0.rc == 0);
  CHECK(r0.out == "Cpus_allowed_list:\t0\n");
  CHECK(r0.err.empty());
  Run r1 = tool(exec_args({"--gpu", "1"}));
  CHECK(r1.out == "Cpus_allowed_list:\t1\n");
}

TEST_CASE("exec --local-rank takes the GPU from the first launcher variable that is set") {
  if (!can_test_binding()) return;
  for (const char* var : {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                          "PMI_LOCAL_RANK", "PALS_LOCAL_RANKID"}) {
    INFO(var);
    Run r = tool(exec_args({"--local-rank"}), {{var, "1"}});
    CHECK(r.rc == 0);
    CHECK(r.out == "Cpus_allowed_list:\t1\n");
  }
  // LOCAL_RANK comes first, then SLURM_LOCALID, and so on down the list.
  CHECK(tool(exec_args({"--local-rank"}), {{"LOCAL_RANK", "0"}, {"SLURM_LOCALID", "1"}}).out ==
        "Cpus_allowed_list:\t0\n");
  CHECK(tool(exec_args({"--local-rank"}), {{"PALS_LOCAL_RANKID", "0"}, {"SLURM_LOCALID", "1"}}).out ==
        "Cpus_allowed_list:\t1\n");
  CHECK(tool(exec_args({"--local-rank"}), {{"MPI_LOCALRANKID", "1"}, {"PMI_LOCAL_RANK", "0"}}).out ==
        "Cpus_allowed_list:\t1\n");
}

TEST_CASE("exec --local-rank rejects a garbage or missing variable, naming it") {
  for (const char* value : {"abc", "-1", "", "1x", " 1", "99999999999"}) {
    INFO("LOCAL_RANK='" << value << "'");
    Run r = tool(exec_args({"--local-rank"}, {"--", "true"}), {{"LOCAL_RANK", value}});
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(r.one_error_line());
    CHECK(r.err.find("LOCAL_RANK") != std::string::npos);
  }
  Run slurm = tool(exec_args({"--local-rank"}, {"--", "true"}), {{"SLURM_LOCALID", "two"}});
  CHECK(slurm.rc == 2);
  CHECK(slurm.err.find("SLURM_LOCALID='two'") != std::string::npos);
  Run none = tool(exec_args({"--local-rank"}, {"--", "true"}));
  CHECK(none.rc == 2);
  CHECK(none.one_error_line());
  CHECK(none.err.find("LOCAL_RANK") != std::string::npos);
  // A rank beyond the visible GPUs: no such GPU, and the message says which variable.
  Run beyond = tool(exec_args({"--local-rank"}, {"--", "true"}), {{"LOCAL_RANK", "5"}});
  CHECK(beyond.rc == 4);
  CHECK(beyond.one_error_line());
  CHECK(beyond.err.find("LOCAL_RANK=5") != std::string::npos);
}

TEST_CASE("exec --fallback unbound runs the command with exactly one warning line") {
  Run r = tool(exec_args({"--gpu", "7", "--fallback", "unbound"}, {"--", "echo", "ran"}));
  CHECK(r.rc == 0);
  CHECK(r.out == "ran\n");
  CHECK(r.one_error_line());
  CHECK(r.err.find("warning") != std::string::npos);
  // Without it the same failure stops before the command runs.
  Run e = tool(exec_args({"--gpu", "7"}, {"--", "echo", "ran"}));
  CHECK(e.rc == 4);
  CHECK(e.out.empty());
  CHECK(e.one_error_line());
  // A bad launcher variable is a usage mistake, not something the machine
  // refused: it exits 2 and runs nothing, --fallback unbound or not.
  Run v = tool(exec_args({"--local-rank", "--fallback", "unbound"}, {"--", "echo", "ran"}), {{"LOCAL_RANK", "x"}});
  CHECK(v.rc == 2);
  CHECK(v.out.empty());
  CHECK(v.one_error_line());
}

TEST_CASE("exec refuses a plan whose CPUs do not exist or are not allowed here") {
  if (cli_test::cpus_allowed_here({32})) {
    MESSAGE("skipped: this machine has CPU 32");
    return;
  }
  std::vector<std::string> args{"exec", "--root", far_cpu_root(), "--gpu", "0", "--", "true"};
  Run r = tool(args);
  CHECK(r.rc == 5);
  CHECK(r.out.empty());
  CHECK(r.one_error_line());
  CHECK(r.err.find("32-63") != std::string::npos);
  args.insert(args.begin() + 1, {"--fallback", "unbound"});
  Run f = tool(args);
  CHECK(f.rc == 0);
  CHECK(f.one_error_line());
}

TEST_CASE("exec exits 127 for a command that is not found and 126 for one that cannot run") {
  Run missing = tool(exec_args({"--gpu", "0"}, {"--", "gpuaff-no-such-command-here"}));
  CHECK(missing.rc == 127);
  CHECK(missing.out.empty());
  CHECK(missing.one_error_line());
  CHECK(missing.err.find("gpuaff-no-such-command-here") != std::string::npos);
  auto dir = cli_test::temp_dir("noexec");
  cli_test::write_file(dir / "script", "#!/bin/sh\necho no\n");  // not executable
  Run denied = tool(exec_args({"--gpu", "0"}, {"--", (dir / "script").string()}));
  CHECK(denied.rc == 126);
  CHECK(denied.out.empty());
  CHECK(denied.one_error_line());
}

TEST_CASE("exec needs a target and a command") {
  Run no_target = tool({"exec", "--root", two_cpu_root(), "--", "true"});
  CHECK(no_target.rc == 2);
  CHECK(no_target.one_error_line());
  Run no_command = tool({"exec", "--root", two_cpu_root(), "--gpu", "0"});
  CHECK(no_command.rc == 2);
  CHECK(no_command.one_error_line());
  Run both = tool({"exec", "--root", two_cpu_root(), "--gpu", "0", "--local-rank", "--", "true"});
  CHECK(both.rc == 2);
  CHECK(both.one_error_line());
  Run membind = tool({"exec", "--root", two_cpu_root(), "--gpu", "0", "--membind", "far", "--", "true"});
  CHECK(membind.rc == 2);
  CHECK(membind.one_error_line());
}

TEST_CASE("exec passes the command's arguments and exit code through unchanged") {
  Run r = tool(exec_args({"--gpu", "0"}, {"--", "sh", "-c", "echo \"$0|$1\"; exit 7", "a b", "--gpu"}));
  CHECK(r.rc == 7);
  CHECK(r.out == "a b|--gpu\n");
}

TEST_CASE("exec sets OMP_NUM_THREADS only with --omp-threads") {
  if (!can_test_binding()) return;
  Run without = tool(exec_args({"--gpu", "0"}, {"--", "sh", "-c", "echo \"${OMP_NUM_THREADS-unset}\""}));
  CHECK(without.out == "unset\n");
  // One CPU bound: one thread.
  Run with = tool(exec_args({"--gpu", "0", "--omp-threads"}, {"--", "sh", "-c", "echo \"${OMP_NUM_THREADS-unset}\""}));
  CHECK(with.rc == 0);
  CHECK(with.out == "1\n");
}

TEST_CASE("exec --verbose says what it bound in one stderr line") {
  if (!can_test_binding()) return;
  Run r = tool(exec_args({"--local-rank", "--verbose"}, {"--", "true"}), {{"SLURM_LOCALID", "1"}});
  CHECK(r.rc == 0);
  CHECK(r.out.empty());
  auto lines = r.err_lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("0000:65:00.0") != std::string::npos);
  CHECK(lines[0].find("SLURM_LOCALID=1") != std::string::npos);
  CHECK(lines[0].find("CPUs 1") != std::string::npos);
}

TEST_CASE("exec selects GPUs by UUID from --visible-devices and CUDA_VISIBLE_DEVICES") {
  // exec reads only what a binding needs, but a list that names UUIDs needs the
  // driver's information files. GPU-bbbb is the GPU at 0000:65:00.0; exclusive
  // splits the node's two cores among the visible GPUs on it, in visible order.
  // Alone, it is GPU 0 and gets both CPUs.
  if (!can_test_binding()) return;
  Run flag = tool(exec_args({"--gpu", "0", "--visible-devices", "GPU-bbbb", "--verbose"}));
  INFO(flag.err);
  CHECK(flag.rc == 0);
  CHECK(flag.out == "Cpus_allowed_list:\t0-1\n");
  // The only visible GPU of the node's two under exclusive: a warning first, then --verbose's line.
  REQUIRE(flag.err_lines().size() == 2);
  CHECK(flag.err_lines()[0].find("--share machine") != std::string::npos);
  CHECK(flag.err_lines()[1].find("GPU 0 0000:65:00.0 node 0") != std::string::npos);
  Run env = tool(exec_args({"--gpu", "1"}), {{"CUDA_VISIBLE_DEVICES", "GPU-bbbb,GPU-aaaa"}});
  INFO(env.err);
  CHECK(env.rc == 0);
  CHECK(env.out == "Cpus_allowed_list:\t1\n");  // visible GPU 1 (GPU-aaaa, 0000:17:00.0) is second on the node
  // A UUID that no GPU has is "no such GPU" (4), not "no UUID is known".
  Run none = tool(exec_args({"--gpu", "0", "--visible-devices", "GPU-cccc"}, {"--", "true"}));
  CHECK(none.rc == 4);
  CHECK(none.err.find("no GPU has a UUID starting with 'GPU-cccc'") != std::string::npos);
}

TEST_CASE("exec --membind local binds the command's memory to the GPU's node") {
  if (!can_test_binding()) return;
  // The kernel shows the task's policy in numa_maps for mappings without their own.
  Run r = tool(exec_args({"--gpu", "1", "--membind", "local"}, {"--", "cat", "/proc/self/numa_maps"}));
  if (r.rc == 6) {
    MESSAGE("skipped: the kernel refused set_mempolicy here: " << r.err);
    return;
  }
  INFO(r.err);
  CHECK(r.rc == 0);
  CHECK(r.out.find("bind:0") != std::string::npos);
  Run none = tool(exec_args({"--gpu", "1"}, {"--", "cat", "/proc/self/numa_maps"}));
  CHECK(none.out.find("bind:0") == std::string::npos);
}

TEST_CASE("exec: an option gpuaff does not know, before '--', is a typo named as such") {
  // The words before '--' are gpuaff's: '--polcy' was read as the end of
  // gpuaff's options, 'exclusive' as COMMAND ("The following argument was not
  // expected: true"), and '--verbos' got advice to move it after the command.
  Run typo = tool({"exec", "--root", two_cpu_root(), "--gpu", "0", "--polcy", "exclusive", "--", "true"});
  CHECK(typo.rc == 2);
  CHECK(typo.out.empty());
  CHECK(typo.one_error_line());
  CHECK(typo.err.find("unknown option '--polcy' before '--'; did you mean --policy?") != std::string::npos);
  Run verbos = tool({"exec", "--root", two_cpu_root(), "--gpu", "0", "--verbos", "--", "true"});
  CHECK(verbos.rc == 2);
  CHECK(verbos.err.find("did you mean --verbose?") != std::string::npos);
  CHECK(verbos.err.find("after the command") == std::string::npos);
  Run eq = tool({"exec", "--root", two_cpu_root(), "--gpu", "0", "--polcy=exclusive", "--", "true"});
  CHECK(eq.rc == 2);
  CHECK(eq.err.find("unknown option '--polcy' before '--'") != std::string::npos);
  // After '--' every word is the command's, whatever it looks like.
  Run after = tool({"exec", "--root", two_cpu_root(), "--gpu", "0", "--dry-run", "--", "true", "--polcy"});
  CHECK(after.rc == 0);
  CHECK(after.err.empty());
}

// SPDX-License-Identifier: Apache-2.0
// The launch options of the gpuaff binary: --baseline, --unreachable, the
// launcher's local size, --gpu all, exec --dry-run, the numactl format, and
// usage mistakes that exit 2 whatever --fallback says.
//
// Machines (fixtures/generate.py):
//   dgx-h100: node 0 = 0-55,112-167 (GPUs 0-3), node 1 = 56-111,168-223 (GPUs 4-7).
//   mpirun-narrowed-h100: dgx-h100, the process allowed 0,112 (mpirun's core
//     binding), its cgroup cpuset 0-223.
//   pod-far-socket-h100: dgx-h100, the process (and its cgroup v1 cpuset)
//     allowed 56-63,168-175 on node 1 only.

#include <doctest/doctest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "run_tool.hpp"
#include "support/check.hpp"

using cli_test::Run;
using cli_test::tool;
using gpuaff_test::fixture;

namespace {

const std::string h100 = fixture("dgx-h100");
const std::string narrowed = fixture("mpirun-narrowed-h100");
const std::string pod = fixture("pod-far-socket-h100");

/// Runs `gpuaff bind ARGS`, expecting success with nothing on stderr.
std::string bind_ok(std::vector<std::string> args, const std::map<std::string, std::string>& env = {}) {
  args.insert(args.begin(), "bind");
  Run r = tool(args, env);
  INFO("stderr: " << r.err);
  CHECK(r.rc == 0);
  CHECK(r.err.empty());
  return r.out;
}

/// Expects a usage error: exit 2, one stderr line holding `text`, nothing on stdout.
void usage_error(const Run& r, const std::string& text) {
  INFO("stderr: " << r.err);
  CHECK(r.rc == 2);
  CHECK(r.out.empty());
  CHECK(r.one_error_line());
  CHECK(r.err.find(text) != std::string::npos);
}

}  // namespace

TEST_CASE("--baseline cgroup gives an mpirun-bound rank its GPU's node; affinity keeps the core and warns") {
  Run narrow = tool({"bind", "--root", narrowed, "--gpu", "0"});
  CHECK(narrow.rc == 0);
  CHECK(narrow.out == "0,112\n");
  CHECK(narrow.one_error_line());
  CHECK(narrow.err.find("warning") != std::string::npos);
  CHECK(narrow.err.find("--baseline cgroup") != std::string::npos);

  CHECK(bind_ok({"--root", narrowed, "--gpu", "0", "--baseline", "cgroup"}) == "0-55,112-167\n");
  CHECK(bind_ok({"--root", narrowed, "--gpu", "6", "--baseline", "cgroup"}) == "56-111,168-223\n");
  auto j = nlohmann::json::parse(bind_ok({"--root", narrowed, "--gpu", "0", "--baseline", "cgroup", "--format", "json"}));
  CHECK(j["baseline"] == "cgroup");
}

TEST_CASE("--baseline takes only its words, and cgroup needs a root") {
  usage_error(tool({"bind", "--root", narrowed, "--gpu", "0", "--baseline", "cgroups"}), "--baseline");
  auto json = fixture("dgx-h100.json");
  usage_error(tool({"bind", "--topology", json, "--gpu", "0", "--baseline", "cgroup"}), "--baseline cgroup");
}

TEST_CASE("--unreachable nearest binds a pod on the far socket; the default error says how") {
  Run refused = tool({"bind", "--root", pod, "--gpu", "0"});
  CHECK(refused.rc == 5);
  CHECK(refused.out.empty());
  CHECK(refused.one_error_line());
  CHECK(refused.err.find("--unreachable nearest") != std::string::npos);

  CHECK(bind_ok({"--root", pod, "--gpu", "0", "--unreachable", "nearest"}) == "56-63,168-175\n");
  auto j = nlohmann::json::parse(bind_ok({"--root", pod, "--gpu", "0", "--unreachable", "nearest", "--format", "json"}));
  CHECK(j["node"] == 0);
  CHECK(j["nearest_nodes"] == nlohmann::json::array({1}));
  CHECK(j["memory_nodes"] == "1");
  usage_error(tool({"bind", "--root", pod, "--gpu", "0", "--unreachable", "closest"}), "--unreachable");
}

TEST_CASE("bind --gpu all prints every GPU: one 'N cpulist' line each, or a JSON array") {
  // exclusive on dgx-h100: each node's 56 cores split among its 4 GPUs, 14 each.
  CHECK(bind_ok({"--root", h100, "--gpu", "all", "--policy", "exclusive"}) ==
        "0 0-13,112-125\n1 14-27,126-139\n2 28-41,140-153\n3 42-55,154-167\n"
        "4 56-69,168-181\n5 70-83,182-195\n6 84-97,196-209\n7 98-111,210-223\n");
  auto a = nlohmann::json::parse(bind_ok({"--root", h100, "--gpu", "all", "--format", "json", "--nproc", "2"}));
  REQUIRE(a.is_array());
  REQUIRE(a.size() == 2);  // --nproc 2: GPUs 0 and 1 only
  CHECK(a[0]["gpu"] == 0);
  CHECK(a[1]["gpu"] == 1);
  CHECK(a[1]["cpus"] == "0-55,112-167");
  usage_error(tool({"bind", "--root", h100, "--gpu", "every"}), "--gpu");
  usage_error(tool({"exec", "--root", h100, "--gpu", "all", "--", "true"}), "--gpu");
}

TEST_CASE("bind --format numactl adds a memory option only for --membind") {
  std::vector<std::string> base{"--root", h100, "--gpu", "5", "--format", "numactl"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return bind_ok(args);
  };
  CHECK(with({}) == "--physcpubind=56-111,168-223\n");
  CHECK(with({"--membind", "none"}) == "--physcpubind=56-111,168-223\n");
  CHECK(with({"--membind", "local"}) == "--physcpubind=56-111,168-223 --membind=1\n");
  CHECK(with({"--membind", "preferred"}) == "--physcpubind=56-111,168-223 --preferred=1\n");
  CHECK(with({"--membind", "interleave"}) == "--physcpubind=56-111,168-223 --interleave=1\n");
}

TEST_CASE("flags that do not apply to the policy are usage errors naming the policies they apply to") {
  usage_error(tool({"bind", "--root", h100, "--gpu", "0", "--policy", "exclusive", "--smt", "one"}),
              "--smt does not apply to --policy exclusive");
  usage_error(tool({"bind", "--root", h100, "--gpu", "0", "--max-cores", "4"}), "unique-contiguous");
  usage_error(tool({"exec", "--root", h100, "--gpu", "0", "--policy", "socket", "--no-balanced", "--fallback",
                    "unbound", "--", "echo", "ran"}),
              "--no-balanced");
  CHECK(bind_ok({"--root", h100, "--gpu", "0", "--policy", "unique-contiguous", "--smt", "one", "--max-cores", "4"}) ==
        "0-3\n");
}

TEST_CASE("usage mistakes exit 2 and run nothing under --fallback unbound") {
  for (std::vector<std::string> bad : {std::vector<std::string>{"--policy", "exclusve"},
                                       std::vector<std::string>{"--unknown-node", "nod0"}}) {
    std::vector<std::string> args{"exec", "--root", h100, "--gpu", "0", "--fallback", "unbound"};
    args.insert(args.end(), bad.begin(), bad.end());
    args.insert(args.end(), {"--", "echo", "ran"});
    usage_error(tool(args), bad[1]);
  }
  Run size = tool({"exec", "--root", h100, "--local-rank", "--fallback", "unbound", "--", "echo", "ran"},
                  {{"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "two"}});
  usage_error(size, "LOCAL_WORLD_SIZE");
  // A visibility list naming no GPU of the machine is the list's mistake, not
  // the machine's refusal: its own error (exit 4, as without --fallback), nothing run.
  Run typo = tool({"exec", "--root", fixture("p4d.24xlarge"), "--gpu", "0", "--fallback", "unbound", "--", "echo", "ran"},
                  {{"CUDA_VISIBLE_DEVICES", "GPU-typo"}});
  CHECK(typo.rc == 4);
  CHECK(typo.out.empty());
  CHECK(typo.one_error_line());
  CHECK(typo.err.find("GPU-typo") != std::string::npos);
  // What the machine refuses still falls back: GPU 9 of 8.
  Run refused = tool({"exec", "--root", h100, "--gpu", "9", "--fallback", "unbound", "--", "echo", "ran"});
  CHECK(refused.rc == 0);
  CHECK(refused.out == "ran\n");
}

TEST_CASE("under --local-rank the launcher's local size stands for --nproc") {
  // torchrun --nproc-per-node 2 on dgx-h100: GPUs 0 and 1 split node 0, 28 cores each.
  Run r = tool({"exec", "--root", h100, "--local-rank", "--policy", "exclusive", "--dry-run", "--", "true"},
               {{"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}});
  INFO("stderr: " << r.err);
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["cpus"] == "28-55,140-167");
  CHECK(j["nproc_from"] == "LOCAL_WORLD_SIZE=2");
  // Slurm: SLURM_TASKS_PER_NODE "4(x2)", this node 1: 4 local tasks, 14 cores each.
  Run s = tool({"exec", "--root", h100, "--local-rank", "--policy", "exclusive", "--dry-run", "--", "true"},
               {{"SLURM_LOCALID", "3"}, {"SLURM_TASKS_PER_NODE", "4(x2)"}, {"SLURM_NODEID", "1"}});
  REQUIRE(s.rc == 0);
  CHECK(nlohmann::json::parse(s.out)["cpus"] == "42-55,154-167");
}

TEST_CASE("16 local ranks on 8 GPUs: two ranks per GPU, each half of its GPU's exclusive share") {
  // exclusive gives GPU 3 cores 42-55 (14 of node 0's 56, a quarter); LOCAL_RANK 7
  // is GPU 7 / 2 = 3, part 7 % 2 = 1: its last 7 cores, 49-55 and siblings 161-167.
  Run r = tool({"exec", "--root", h100, "--local-rank", "--policy", "exclusive", "--dry-run", "--", "true"},
               {{"LOCAL_RANK", "7"}, {"LOCAL_WORLD_SIZE", "16"}});
  INFO("stderr: " << r.err);
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["gpu"] == 3);
  CHECK(j["cpus"] == "49-55,161-167");
  CHECK(j["share"] == "42-55,154-167");
  CHECK(j["part"] == nlohmann::json::array({1, 2}));
  CHECK(j["plan_variable"].get<std::string>().find(" part=1/2") != std::string::npos);
  // named, with bind: --gpu 3 --ranks-per-gpu 2 --part 0 is the other half
  CHECK(bind_ok({"--root", h100, "--gpu", "3", "--policy", "exclusive", "--ranks-per-gpu", "2", "--part", "0"}) ==
        "42-48,154-160\n");
  // --ranks-per-gpu without --part names the fix; exit 2
  Run no_part = tool({"bind", "--root", h100, "--gpu", "3", "--ranks-per-gpu", "2"});
  CHECK(no_part.rc == 2);
  CHECK(no_part.err.find("--ranks-per-gpu 2 needs --part P (0..1)") != std::string::npos);
}

TEST_CASE("--gpu 0,4: one process on two GPUs of both sockets gets the union, memory on both nodes") {
  // exclusive: GPU 0 has cores 0-13 of node 0, GPU 4 cores 56-69 of node 1.
  CHECK(bind_ok({"--root", h100, "--gpu", "0,4", "--policy", "exclusive", "--membind", "local", "--format",
                 "numactl"}) == "--physcpubind=0-13,56-69,112-125,168-181 --membind=0-1\n");
  auto j = nlohmann::json::parse(bind_ok({"--root", h100, "--gpu", "0,4", "--format", "json"}));
  CHECK(j["gpu"] == 0);
  CHECK(j["gpus"] == nlohmann::json::array({0, 4}));
  CHECK(j["cpus"] == "0-223");  // node policy: both nodes whole
  Run twice = tool({"bind", "--root", h100, "--gpu", "4,4"});
  CHECK(twice.rc == 2);
  CHECK(twice.err.find("names GPU 4 twice") != std::string::npos);
}

TEST_CASE("an MI300X in CPX mode: bind and topo's table agree on each partition's part of its device") {
  // mi300x-cpx (tests/launch/placement_test.cpp reasons it): GPU 13 is partition 5
  // of device 1 (0000:26:00.0), whose exclusive share is cores 24-47; its part is 39-41.
  const std::string cpx = fixture("mi300x-cpx");
  CHECK(bind_ok({"--root", cpx, "--gpu", "13", "--policy", "exclusive"}) == "39-41,231-233\n");
  Run t = tool({"topo", "--root", cpx});
  REQUIRE(t.rc == 0);
  CHECK(t.out.find("GPUs (64 visible, numbered as HIP (AMD) numbers them)") != std::string::npos);
  CHECK(t.out.find("  13     0000:26:00.0 (5/8)") != std::string::npos);
  std::size_t exclusive = t.out.find("\n  exclusive\n");
  REQUIRE(exclusive != std::string::npos);
  CHECK(t.out.find("    GPU 13  39-41,231-233\n", exclusive) != std::string::npos);
}

TEST_CASE("--domains-per-gpu: topo lists each domain, bind and exec --dry-run give its part") {
  // dgx-h100, exclusive: GPU 3's share is cores 42-55 (+112); with 2 domains per
  // GPU it is units 6 and 7, and unit 7 (domain 1) gets the upper 7 cores.
  Run topo = tool({"topo", "--root", h100, "--domains-per-gpu", "2"});
  REQUIRE(topo.rc == 0);
  CHECK(topo.out.find("GPUs (16 visible, numbered as CUDA (NVIDIA) numbers them)") != std::string::npos);
  CHECK(topo.out.find("  7      0000:61:00.0 (1/2)") != std::string::npos);
  Run bind = tool({"bind", "--root", h100, "--gpu", "7", "--policy", "exclusive", "--domains-per-gpu", "2"});
  CHECK(bind.out == "49-55,161-167\n");
  Run dry = tool({"exec", "--root", h100, "--gpu", "7", "--policy", "exclusive", "--domains-per-gpu", "2", "--dry-run",
                  "--", "true"});
  REQUIRE(dry.rc == 0);
  auto j = nlohmann::json::parse(dry.out);
  CHECK(j["part"] == nlohmann::json::array({1, 2}));
  CHECK(j["share"] == "42-55,154-167");
  CHECK(j["plan_variable"].get<std::string>().find(" part=1/2") != std::string::npos);
  Run typo = tool({"bind", "--root", h100, "--gpu", "0", "--domains-per-gpu", "0"});
  CHECK(typo.rc == 2);
}

TEST_CASE("--roles: bind shows each role, exec --dry-run the OMP variables and the plan's role fields") {
  // dgx-h100, exclusive: GPU 3's share is cores 42-55 (+112). main=1 -> 42,
  // data=2 -> 43-44, compute 45-55: 11 cores for OMP_NUM_THREADS.
  Run dry = tool({"exec", "--root", h100, "--gpu", "3", "--policy", "exclusive", "--roles", "main=1,data=2",
                  "--omp-threads", "--dry-run", "--", "true"});
  INFO(dry.err);
  REQUIRE(dry.rc == 0);
  auto j = nlohmann::json::parse(dry.out);
  CHECK(j["roles"] == nlohmann::json::parse(R"({"main": "42,154", "data": "43-44,155-156", "compute": "45-55,157-167"})"));
  CHECK(j["env"]["OMP_PROC_BIND"] == "close");
  CHECK(j["env"]["OMP_PLACES"].get<std::string>().rfind("{45,157},{46,158},", 0) == 0);
  CHECK(j["omp_num_threads"] == 11);
  CHECK(j["plan_variable"].get<std::string>().find(" main=42,154 data=43-44,155-156 compute=45-55,157-167") !=
        std::string::npos);
  // --format env prints the OMP variables (no --nic-env needed), quoted where a shell needs it.
  Run env = tool({"bind", "--root", h100, "--gpu", "3", "--policy", "exclusive", "--roles", "main=1", "--format", "env"});
  REQUIRE(env.rc == 0);
  CHECK(env.out.rfind("OMP_PLACES='{43,155},", 0) == 0);
  CHECK(env.out.find("\nOMP_PROC_BIND=close\n") != std::string::npos);
  Run typo = tool({"bind", "--root", h100, "--gpu", "3", "--roles", "mian=1"});
  CHECK(typo.rc == 2);
  CHECK(typo.err.find("did you mean main?") != std::string::npos);
}

TEST_CASE("topo draws ranks per GPU as local ranks and lists each GPU's roles") {
  // dgx-h100, exclusive: GPU g's share is cores 14g..14g+13; two ranks per GPU
  // cut it 7/7, so local rank 7 (GPU 3, part 1) owns cores 49-55 and the
  // picture's first row reads rank 0 x7, rank 1 x7, ... rank 4 from core 28.
  Run parts = tool({"topo", "--root", h100, "--ranks-per-gpu", "2"});
  INFO(parts.err);
  REQUIRE(parts.rc == 0);
  // (the report wraps at 120 columns: the phrase may continue on the next line)
  std::string joined;
  for (char c : parts.out)
    if (!(c == ' ' || c == '\n') || (!joined.empty() && joined.back() != ' ')) joined += c == '\n' ? ' ' : c;
  CHECK(joined.find("ranks per GPU 2: each GPU's share cut in 2 parts") != std::string::npos);
  CHECK(parts.out.find("  7      0000:61:00.0 (1/2)") != std::string::npos);
  CHECK(parts.out.find("    cpu    0   0  0  0  0  0  0  0  1  1  1  1  1  1  1  2") != std::string::npos);
  // --roles: each GPU's share of the drawn policy (exclusive) cut into roles.
  Run roles = tool({"topo", "--root", h100, "--roles", "main=1,comm=1,data=4"});
  REQUIRE(roles.rc == 0);
  CHECK(roles.out.find("Roles (main=1,comm=1,data=4, policy exclusive; the rest is compute):\n") != std::string::npos);
  CHECK(roles.out.find("  GPU 3: main 42,154; comm 43,155; data 44-47,156-159; compute 48-55,160-167\n") !=
        std::string::npos);
  Run both = tool({"topo", "--root", h100, "--ranks-per-gpu", "2", "--domains-per-gpu", "2"});
  CHECK(both.rc == 2);
}

TEST_CASE("exec --dry-run prints the plan and the command, and runs nothing") {
  auto marker = cli_test::temp_dir("dry-run") / "ran";
  Run r = tool({"exec", "--root", h100, "--gpu", "4", "--membind", "preferred", "--dry-run", "--", "touch",
                marker.string()});
  INFO("stderr: " << r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.err.empty());
  CHECK_FALSE(std::filesystem::exists(marker));
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["gpu"] == 4);
  CHECK(j["cpus"] == "56-111,168-223");
  CHECK(j["membind"] == "preferred");
  CHECK(j["memory_nodes"] == "1");
  CHECK(j["command"] == nlohmann::json::array({"touch", marker.string()}));
  // A plan that fails is still an error.
  Run bad = tool({"exec", "--root", h100, "--gpu", "9", "--dry-run", "--", "true"});
  CHECK(bad.rc == 4);
  CHECK(bad.out.empty());
}

TEST_CASE("a recording keeps the cgroup cpuset, so --baseline cgroup replays it") {
  auto out = cli_test::temp_dir("record-cgroup") / "rec";
  Run rec = tool({"record", "--root", narrowed, "--out", out.string()});
  INFO("stderr: " << rec.err);
  REQUIRE(rec.rc == 0);
  CHECK(std::filesystem::exists(out / "proc/self/cgroup"));
  CHECK(std::filesystem::exists(out / "sys/fs/cgroup/cpuset.cpus.effective"));
  CHECK(bind_ok({"--root", out.string(), "--gpu", "0", "--baseline", "cgroup"}) == "0-55,112-167\n");
  // The v1 layout of the pod, walked up from the host's path, too.
  auto pod_out = cli_test::temp_dir("record-cgroup-v1") / "rec";
  REQUIRE(tool({"record", "--root", pod, "--out", pod_out.string()}).rc == 0);
  CHECK(std::filesystem::exists(pod_out / "sys/fs/cgroup/cpuset/cpuset.effective_cpus"));
  CHECK(bind_ok({"--root", pod_out.string(), "--gpu", "4", "--baseline", "cgroup"}) == "56-63,168-175\n");
}

TEST_CASE("a policy that fails inside a launcher's narrowed mask names the fix: --baseline cgroup or an unbound start") {
  // mpirun bound the recorded rank to core 0 (0,112) of a 224-CPU machine:
  // exclusive splits node 0's one allowed core among its four GPUs, and GPU 1
  // gets nothing. The fix is not another policy but the launcher's binding.
  Run r = tool({"bind", "--root", narrowed, "--gpu", "1", "--policy", "exclusive"});
  INFO(r.err);
  CHECK(r.rc == 5);
  CHECK(r.out.empty());
  CHECK(r.one_error_line());
  CHECK(r.err.find("narrower than its cgroup's 0-223") != std::string::npos);
  CHECK(r.err.find("pass --baseline cgroup") != std::string::npos);
  CHECK(r.err.find("mpirun --bind-to none") != std::string::npos);
  // With the cgroup as baseline it binds: node 0's 56 cores split four ways, GPU 1 the second quarter.
  CHECK(bind_ok({"--root", narrowed, "--gpu", "1", "--policy", "exclusive", "--baseline", "cgroup"}) ==
        "14-27,126-139\n");
}

TEST_CASE("GPU N is the N-th GPU of one runtime: a display device of another vendor never takes an index") {
  // dgx-h100-intel-vga: the dgx-h100 with an Intel VGA at 0000:00:02.0 (node 0)
  // instead of the BMC's ASPEED one. CUDA counts the 8 NVIDIA GPUs only, so
  // GPU 0 is 0000:1b:00.0 and exclusive splits node 0 among its 4 NVIDIA GPUs,
  // 14 cores each, exactly as on the dgx-h100. Counting the Intel device too
  // made it GPU 0 and left 56 / 5 = 11 cores per GPU.
  const std::string vga = fixture("dgx-h100-intel-vga");
  auto j = nlohmann::json::parse(bind_ok({"--root", vga, "--gpu", "0", "--format", "json"}));
  CHECK(j["bdf"] == "0000:1b:00.0");
  CHECK(bind_ok({"--root", vga, "--gpu", "0", "--policy", "exclusive"}) ==
        bind_ok({"--root", h100, "--gpu", "0", "--policy", "exclusive"}));
  CHECK(bind_ok({"--root", vga, "--gpu", "0", "--policy", "exclusive"}) == "0-13,112-125\n");
  Run eight = tool({"bind", "--root", vga, "--gpu", "8"});
  CHECK(eight.rc == 4);
  // --vendor intel: Level Zero's numbering, the Intel device alone.
  auto intel = nlohmann::json::parse(bind_ok({"--root", vga, "--gpu", "0", "--vendor", "intel", "--format", "json"}));
  CHECK(intel["bdf"] == "0000:00:02.0");
  CHECK(tool({"bind", "--root", vga, "--gpu", "1", "--vendor", "intel"}).rc == 4);
  // A vendor the machine has no GPU of is the machine's answer, named.
  Run amd = tool({"bind", "--root", vga, "--gpu", "0", "--vendor", "amd"});
  CHECK(amd.rc == 4);
  CHECK(amd.one_error_line());
  CHECK(amd.err.find("--vendor amd") != std::string::npos);
  CHECK(amd.err.find("8 of CUDA (NVIDIA)") != std::string::npos);
  usage_error(tool({"bind", "--root", vga, "--gpu", "0", "--vendor", "nvdia"}), "did you mean nvidia?");
  // topo says whose numbering it shows, and why the Intel device has no index.
  Run topo = tool({"topo", "--root", vga, "--color", "never"});
  CHECK(topo.rc == 0);
  CHECK(topo.out.find("GPUs (8 visible, numbered as CUDA (NVIDIA) numbers them)") != std::string::npos);
  CHECK(topo.out.find("GPU of another runtime than CUDA (NVIDIA)") != std::string::npos);
}

TEST_CASE("an AMD machine's ASPEED BMC display and a workstation's two vendors") {
  // mi300x-aspeed: 8 MI300X (class 0x1200) and an ASPEED VGA (vendor 0x1a03,
  // not a GPU vendor): HIP's numbering, GPU 0 = 0000:05:00.0 on node 0.
  const std::string aspeed = fixture("mi300x-aspeed");
  auto j = nlohmann::json::parse(bind_ok({"--root", aspeed, "--gpu", "0", "--format", "json"}));
  CHECK(j["bdf"] == "0000:05:00.0");
  CHECK(tool({"bind", "--root", aspeed, "--gpu", "8"}).rc == 4);
  // workstation-mixed-gpus: NVIDIA at 17:00.0 and 65:00.0, an AMD Radeon at
  // b3:00.0. CUDA sees two GPUs; HIP (--vendor amd) sees the Radeon as GPU 0.
  // (Its two NVIDIA models differ: PCI_BUS_ID keeps CUDA's order gpuaff's.)
  const std::string mixed = fixture("workstation-mixed-gpus");
  const std::map<std::string, std::string> bus_order{{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}};
  CHECK(nlohmann::json::parse(bind_ok({"--root", mixed, "--gpu", "1", "--format", "json"}, bus_order))["bdf"] ==
        "0000:65:00.0");
  CHECK(tool({"bind", "--root", mixed, "--gpu", "2"}, bus_order).rc == 4);
  CHECK(nlohmann::json::parse(bind_ok({"--root", mixed, "--gpu", "0", "--vendor", "amd", "--format", "json"},
                                      bus_order))["bdf"] == "0000:b3:00.0");
}

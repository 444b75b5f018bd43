// SPDX-License-Identifier: Apache-2.0
// --nic-env on bind and exec, and topo's NIC report, run as a user would.
// The exec tests plan on a tree written here: CPUs 0 and 1, two GPUs and two
// RDMA NICs, all on one root bus (PHB to each other), so that the plan
// applies on any machine with two CPUs.

#include <doctest/doctest.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "run_tool.hpp"

using cli_test::Run;
using cli_test::tool;

namespace {

std::string two_nic_root() {
  static const std::string root = [] {
    auto dir = cli_test::temp_dir("two-nic");
    cli_test::FakeMachine m = cli_test::two_cpu_machine();
    m.devices = {{.bdf = "0000:17:00.0", .local_cpus = "0-1"},
                 {.bdf = "0000:18:00.0", .vendor = "0x15b3", .cls = "0x020700", .local_cpus = "0-1"},
                 {.bdf = "0000:19:00.0", .vendor = "0x15b3", .cls = "0x020700", .local_cpus = "0-1"},
                 {.bdf = "0000:65:00.0", .local_cpus = "0-1"}};
    cli_test::write_machine(dir, m);
    for (auto [bdf, name] : {std::pair{"0000:18:00.0", "mlx5_0"}, std::pair{"0000:19:00.0", "mlx5_1"}}) {
      std::string dev = "devices/pci0000:00/" + std::string(bdf) + "/infiniband/" + name;
      cli_test::write_file(dir / "sys" / dev / "ports/1/link_layer", "InfiniBand\n");
      std::filesystem::create_directory_symlink("../../../" + std::string(bdf), dir / "sys" / dev / "device");
      std::filesystem::create_directories(dir / "sys/class/infiniband");
      std::filesystem::create_directory_symlink("../../" + dev, dir / "sys/class/infiniband" / name);
    }
    return dir.string();
  }();
  return root;
}

const char* print_env = "echo \"${NCCL_IB_HCA-unset}|${UCX_NET_DEVICES-unset}|${NVSHMEM_HCA_LIST-unset}\"";

}  // namespace

TEST_CASE("bind --nic-env --format json shows each GPU its own NIC under env") {
  // Both GPUs reach both NICs through the host bridge (PHB): two candidates,
  // two competitors, one each; GPU 0 takes the lower address (mlx5_0), GPU 1
  // the one GPU 0 did not take. NCCL_IB_HCA is left to NCCL by default.
  for (auto [gpu, nic] : {std::pair{"0", "mlx5_0:1"}, std::pair{"1", "mlx5_1:1"}}) {
    Run r = tool({"bind", "--root", two_nic_root(), "--gpu", gpu, "--nic-env", "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK_FALSE(j["env"].contains("NCCL_IB_HCA"));
    CHECK(j["nic_set"] == nlohmann::json::array({nic}));
    CHECK(j["nic_path"] == "PHB");
    CHECK(j["env"]["UCX_NET_DEVICES"] == nic);
    CHECK(j["env"]["NVSHMEM_HCA_LIST"] == nic);
  }
  Run plain = tool({"bind", "--root", two_nic_root(), "--gpu", "0", "--format", "json"});
  REQUIRE(plain.rc == 0);
  CHECK(nlohmann::json::parse(plain.out)["env"].empty());
  CHECK_FALSE(nlohmann::json::parse(plain.out).contains("nic_set"));
  // --nic-libs names the variables: NCCL's set or its rails when a site wants them.
  Run nccl = tool({"bind", "--root", two_nic_root(), "--gpu", "1", "--nic-env", "--nic-libs", "nccl-set", "--format", "json"});
  REQUIRE(nccl.rc == 0);
  CHECK(nlohmann::json::parse(nccl.out)["env"] == nlohmann::json::parse(R"({"NCCL_IB_HCA": "=mlx5_1:1"})"));
  Run rails = tool({"bind", "--root", two_nic_root(), "--gpu", "1", "--nic-env", "--nic-libs", "nccl-rails,ucx", "--format", "json"});
  REQUIRE(rails.rc == 0);
  // GPU 0's set is mlx5_0, GPU 1's mlx5_1: rails 0 and 1, each NIC plane 0 of its set.
  CHECK(nlohmann::json::parse(rails.out)["env"] ==
        nlohmann::json::parse(R"({"NCCL_IB_HCA": "=mlx5_0:1:0:0,mlx5_1:1:1:0", "NCCL_NET_MERGE_POLICY": "RAIL",
                                  "UCX_NET_DEVICES": "mlx5_1:1"})"));
}

TEST_CASE("Slingshot NICs: topo names them by CXI name, bind exports FI_CXI_DEVICE_NAME and the host set") {
  // cray-ex-4gpu-slingshot: GPU k and NIC k (cxik, hsnk) share a host bridge on
  // node 3 - k; the NICs have no RDMA name. GPU 1's set and host set are cxi1.
  std::string root = std::string(GPUAFF_FIXTURES_DIR) + "/cray-ex-4gpu-slingshot";
  Run env = tool({"bind", "--root", root, "--gpu", "1", "--nic-env", "--format", "env"});
  INFO(env.err);
  REQUIRE(env.rc == 0);
  CHECK(env.out == "FI_CXI_DEVICE_NAME=cxi1\n");
  Run json = tool({"bind", "--root", root, "--gpu", "1", "--nic-env", "--format", "json"});
  REQUIRE(json.rc == 0);
  auto j = nlohmann::json::parse(json.out);
  CHECK(j["nic_set"] == nlohmann::json::array({"cxi1"}));
  CHECK(j["host_nic_set"] == nlohmann::json::array({"cxi1"}));
  CHECK(j["nic_path"] == "PHB");
  // UCX has no RDMA NIC to use here: an error naming the set, not an empty list.
  Run ucx = tool({"bind", "--root", root, "--gpu", "1", "--nic-env", "--nic-libs", "ucx", "--format", "env"});
  CHECK(ucx.rc == 4);
  CHECK(ucx.err.find("can use none of the NICs cxi1") != std::string::npos);
  Run topo = tool({"topo", "--root", root});
  // The NIC table row of 0000:04:00.0: "cxi" in the rdma column, its names, GPU 0's rail.
  auto at = topo.out.find("0000:04:00.0  3");
  REQUIRE(at != std::string::npos);
  std::string row = topo.out.substr(at, topo.out.find('\n', at) - at);
  CHECK(row.find(" cxi ") != std::string::npos);
  CHECK(row.find("cxi0 hsn0") != std::string::npos);
  CHECK(row.find("GPU 0") != std::string::npos);
  auto t = nlohmann::json::parse(tool({"topo", "--root", root, "--format", "json"}).out);
  CHECK(t["nics"][0]["cxi"] == nlohmann::json::array({"cxi0"}));
}

TEST_CASE("dgx-b300: bind gives GPU k its SuperNIC, nccl-rails every SuperNIC as rail k plane 0, ucx-host its socket's four") {
  // dgx-b300 (fixtures/README.md): GPU k below its ConnectX-8's own switch with
  // the NIC's one function (PIX); names in PCI order put the slot-1 BlueField-3
  // (mlx5_1, mlx5_2) after GPU 0's NIC and the slot-2 one (mlx5_7, mlx5_8)
  // after GPU 4's, so GPU 5's NIC is mlx5_9 and node 1's SuperNICs are
  // mlx5_6, 9, 10, 11. The BlueField-3s are nearer no GPU than its SuperNIC:
  // no rail, not in NCCL_IB_HCA, not in the host set.
  std::string root = std::string(GPUAFF_FIXTURES_DIR) + "/dgx-b300";
  Run r = tool({"bind", "--root", root, "--gpu", "5", "--nic-env", "--nic-libs", "nccl-rails,ucx-host", "--format", "json"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["nic_set"] == nlohmann::json::array({"mlx5_9:1"}));
  CHECK(j["nic_path"] == "PIX");
  CHECK(j["host_nodes"] == "1");
  CHECK(j["host_nic_set"] == nlohmann::json::array({"mlx5_6:1", "mlx5_9:1", "mlx5_10:1", "mlx5_11:1"}));
  CHECK(j["env"] == nlohmann::json::parse(R"({
    "NCCL_IB_HCA": "=mlx5_0:1:0:0,mlx5_3:1:1:0,mlx5_4:1:2:0,mlx5_5:1:3:0,mlx5_6:1:4:0,mlx5_9:1:5:0,mlx5_10:1:6:0,mlx5_11:1:7:0",
    "NCCL_NET_MERGE_POLICY": "RAIL",
    "UCX_NET_DEVICES": "mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1"})"));
  // GPU 0's rank writes the same rail list: it describes the node, not the rank.
  Run r0 = tool({"bind", "--root", root, "--gpu", "0", "--nic-env", "--nic-libs", "nccl-rails", "--format", "json"});
  REQUIRE(r0.rc == 0);
  auto j0 = nlohmann::json::parse(r0.out);
  CHECK(j0["env"]["NCCL_IB_HCA"] == j["env"]["NCCL_IB_HCA"]);
  CHECK(j0["host_nic_set"] == nlohmann::json::array({"mlx5_0:1", "mlx5_3:1", "mlx5_4:1", "mlx5_5:1"}));
}

TEST_CASE("bind --nic-env --format env prints lines a shell can eval") {
  Run r = tool({"bind", "--root", two_nic_root(), "--gpu", "1", "--nic-env", "--format", "env"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  // The contract's NAME=value form: these values need no quotes.
  CHECK(r.out == "UCX_NET_DEVICES=mlx5_1:1\nNVSHMEM_HCA_LIST=mlx5_1:1\n");
  Run sh = cli_test::run_program("/bin/sh", {"-c", "eval \"$(" + cli_test::exe() + " bind --root " + two_nic_root() +
                               " --gpu 1 --nic-env --nic-libs ucx,nccl-set --format env)\" && " + print_env});
  CHECK(sh.out == "=mlx5_1:1|mlx5_1:1|unset\n");
}

TEST_CASE("--format env and --nic-libs are usage mistakes without --nic-env; a bad list names the item") {
  struct Case {
    std::vector<std::string> args;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {{"--format", "env"}, "--nic-env"},
           {{"--nic-libs", "ucx", "--format", "json"}, "--nic-env"},
           {{"--nic-env", "--nic-libs", "nccl", "--format", "json"}, "nccl-set or nccl-rails"},
           {{"--nic-env", "--nic-libs", "ucx,nvshmm", "--format", "json"}, "did you mean nvshmem?"},
           {{"--nic-env", "--nic-libs", "nccl-set,nccl-rails", "--format", "json"}, "name one"},
           {{"--nic-env", "--nic-libs", "", "--format", "json"}, "names no library"},
           {{"--nic-env", "--format", "numactl"}, "--format json"},
       }) {
    std::vector<std::string> args{"bind", "--root", two_nic_root(), "--gpu", "0"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    Run r = tool(args);
    INFO(r.err);
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(r.one_error_line());
    CHECK(r.err.find(c.says) != std::string::npos);
  }
  Run all = tool({"bind", "--root", two_nic_root(), "--gpu", "all", "--nic-env", "--format", "env"});
  CHECK(all.rc == 2);
  CHECK(all.err.find("one GPU") != std::string::npos);
}

TEST_CASE("--format env under eval: a crafted NIC name never reaches the shell") {
  // An RDMA name is a directory entry of the recording, or a string of a JSON
  // topology: it could hold a quote and a command substitution. The reader
  // keeps only names the kernel gives (letters, digits, '_', '.', '-'), so
  // the NIC is unnamed (exit 4, no RDMA NIC), and the JSON is refused; a
  // value holding any other character would be single-quoted besides.
  auto dir = cli_test::temp_dir("quote-nic");
  cli_test::FakeMachine m = cli_test::two_cpu_machine();
  m.devices = {{.bdf = "0000:17:00.0", .local_cpus = "0-1"},
               {.bdf = "0000:18:00.0", .vendor = "0x15b3", .cls = "0x020700", .local_cpus = "0-1"}};
  cli_test::write_machine(dir, m);
  std::string name = "mlx5_0'$(touch owned)'";
  std::string dev = "devices/pci0000:00/0000:18:00.0/infiniband/" + name;
  cli_test::write_file(dir / "sys" / dev / "ports/1/link_layer", "InfiniBand\n");
  std::filesystem::create_directory_symlink("../../../0000:18:00.0", dir / "sys" / dev / "device");
  std::filesystem::create_directories(dir / "sys/class/infiniband");
  std::filesystem::create_directory_symlink("../../" + dev, dir / "sys/class/infiniband" / name);
  auto cwd = cli_test::temp_dir("quote-nic-cwd");
  Run sh = cli_test::run_program("/bin/sh", {"-c", "cd " + cwd.string() + " && eval \"$(" + cli_test::exe() +
                                                       " bind --root " + dir.string() +
                                                       " --gpu 0 --nic-env --format env)\"; echo \"${UCX_NET_DEVICES-unset}\""});
  CHECK(sh.out == "unset\n");
  CHECK(sh.err.find("no RDMA NIC") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(cwd / "owned"));
  // The same name in a JSON topology: refused where it is.
  Run j = tool({"topo", "--root", two_nic_root(), "--format", "json"});
  REQUIRE(j.rc == 0);
  auto doc = nlohmann::json::parse(j.out);
  doc["nics"][0]["names"][0] = name;
  doc["nics"][0]["rdma"][0] = name;
  auto file = cwd / "crafted.json";
  cli_test::write_file(file, doc.dump());
  Run r = tool({"bind", "--topology", file.string(), "--gpu", "0", "--nic-env", "--format", "env"});
  CHECK(r.rc != 0);
  CHECK(r.out.empty());
  CHECK(r.err.find("nics[0].names[0]") != std::string::npos);
}

TEST_CASE("exec --nic-env exports the GPU's NIC to the command, and nothing without it") {
  if (!cli_test::cpus_allowed_here({0, 1})) {
    MESSAGE("skipped: CPUs 0 and 1 are not both allowed for this test process");
    return;
  }
  Run with = tool({"exec", "--root", two_nic_root(), "--gpu", "1", "--nic-env", "--", "sh", "-c", print_env});
  INFO(with.err);
  CHECK(with.rc == 0);
  CHECK(with.out == "unset|mlx5_1:1|mlx5_1:1\n");
  Run without = tool({"exec", "--root", two_nic_root(), "--gpu", "1", "--", "sh", "-c", print_env});
  CHECK(without.out == "unset|unset|unset\n");
}

TEST_CASE("topo shows each GPU's compute NIC with class PIX on the DGX H100") {
  Run r = tool({"topo", "--root", std::string(GPUAFF_FIXTURES_DIR) + "/dgx-h100"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  // the row of GPU 5: its set mlx5_9, nearest PIX: mlx5_9 alone
  CHECK(r.out.find("  5    mlx5_9   PIX: mlx5_9; NODE:") != std::string::npos);
  // the NIC table says which NICs are rails, and why the others are not
  auto row_of = [&](const std::string& name) {
    std::size_t at = r.out.find(" " + name + " ");
    REQUIRE(at != std::string::npos);
    return r.out.substr(at, r.out.find('\n', at) - at);
  };
  CHECK(row_of("ibp24s0").find("GPU 0") != std::string::npos);
  CHECK(row_of("ibp192s0").find("GPU 5") != std::string::npos);
  CHECK(row_of("enp41s0f0np0").find("every GPU has a nearer RDMA NIC: not a rail") != std::string::npos);
  CHECK(row_of("enp12s0").find("no RDMA (sys/class/infiniband) or CXI device: not a rail") != std::string::npos);
  CHECK(r.out.find("package 1, node 1; RDMA NICs: mlx5_6 mlx5_7 mlx5_8 mlx5_9 mlx5_10 mlx5_11:") != std::string::npos);
  Run j = tool({"topo", "--root", std::string(GPUAFF_FIXTURES_DIR) + "/dgx-h100", "--format", "json"});
  REQUIRE(j.rc == 0);
  auto doc = nlohmann::json::parse(j.out);
  CHECK(doc["gpus"][0]["nics"][0] ==
        nlohmann::json::parse(R"({"bdf": "0000:18:00.0", "names": ["mlx5_0", "ibp24s0"], "path": "PIX"})"));
  CHECK(doc["nics"][0]["numa_node"] == 0);
}

TEST_CASE("--mem-nodes gpu on bind, and exec refuses it without a memory policy") {
  Run r = tool({"bind", "--root", std::string(GPUAFF_FIXTURES_DIR) + "/gb200-tray-numa", "--gpu", "3", "--mem-nodes",
                "gpu", "--membind", "local", "--format", "numactl"});
  INFO(r.err);
  CHECK(r.rc == 0);
  // GPU 3 sits on Grace 1 (CPUs 72-143); its memory is node 26 (numactl's
  // format names memory only when --membind is given: docs/contract.md)
  CHECK(r.out == "--physcpubind=72-143 --membind=26\n");
  Run e = tool({"exec", "--root", two_nic_root(), "--gpu", "0", "--mem-nodes", "socket", "--", "true"});
  CHECK(e.rc == 2);
  CHECK(e.one_error_line());
  CHECK(e.err.find("--membind") != std::string::npos);
}

// ---- gpuaff doctor against live processes. On the two-NIC tree, policy
// exclusive gives GPU 0 CPU 0 and GPU 1 CPU 1 (one core each on the one node),
// and the plan's memory node is 0: on a one-node test machine every page is local.

namespace {

/// A child of this test: `setup` runs in it (pin it, start threads), then it
/// says it is ready and sleeps until killed.
struct Child {
  pid_t pid = -1;
  template <class Setup>
  explicit Child(Setup setup) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      setup();
      char c = 'r';
      if (::write(fds[1], &c, 1) != 1) ::_exit(3);
      for (;;) ::pause();
    }
    ::close(fds[1]);
    char c = 0;
    REQUIRE(::read(fds[0], &c, 1) == 1);
    ::close(fds[0]);
  }
  ~Child() {
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
};

void pin_process(int cpu, int also = -1) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (also >= 0) CPU_SET(also, &set);
  if (::sched_setaffinity(0, sizeof set, &set) != 0) ::_exit(4);
}

/// A second thread named `name`, which pins itself to `cpu` after it starts.
void start_repinned_thread(const char* name, int cpu) {
  pthread_t t;
  static const char* thread_name = nullptr;
  static int thread_cpu = 0;
  thread_name = name;
  thread_cpu = cpu;
  auto body = [](void*) -> void* {
    ::pthread_setname_np(::pthread_self(), thread_name);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(thread_cpu, &set);
    ::pthread_setaffinity_np(::pthread_self(), sizeof set, &set);
    for (;;) ::pause();
    return nullptr;
  };
  if (::pthread_create(&t, nullptr, body, nullptr) != 0) ::_exit(5);
  // wait until the thread has pinned itself
  for (int i = 0; i < 1000; ++i) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/self/task");
    auto tasks = std::filesystem::directory_iterator(path);
    int n = 0;
    bool pinned = false;
    for (const auto& e : tasks) {
      ++n;
      std::ifstream in(e.path() / "comm");
      std::string comm;
      std::getline(in, comm);
      if (comm == name) {
        cpu_set_t got;
        pid_t tid = std::stoi(e.path().filename().string());
        if (::sched_getaffinity(tid, sizeof got, &got) == 0 && CPU_COUNT(&got) == 1 && CPU_ISSET(cpu, &got)) pinned = true;
      }
    }
    if (n == 2 && pinned) return;
    ::usleep(1000);
  }
  ::_exit(6);
}

Run doctor(pid_t pid, std::vector<std::string> extra) {
  std::vector<std::string> args{"doctor", "--root", two_nic_root(), "--policy", "exclusive", "--pid", std::to_string(pid)};
  args.insert(args.end(), extra.begin(), extra.end());
  return tool(args);
}

}  // namespace

TEST_CASE("doctor: a process bound as planned is healthy") {
  if (!cli_test::cpus_allowed_here({0, 1})) return;
  Child c([] { pin_process(0); });
  Run r = doctor(c.pid, {"--gpu", "0", "--format", "json"});
  INFO(r.out, r.err);
  CHECK(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["pid"] == c.pid);
  CHECK(j["gpu"] == 0);
  CHECK(j["expected_cpus"] == "0");
  CHECK(j["healthy"] == true);
  REQUIRE(j["threads"].size() == 1);
  CHECK(j["threads"][0]["tid"] == c.pid);
  CHECK(j["threads"][0]["cpus"] == "0");
  CHECK(j["threads"][0]["inside"] == true);
  CHECK(j["memory"]["pages_by_node"].is_object());
  CHECK(j["environment"].is_array());
  // the text form says so too
  Run t = doctor(c.pid, {"--gpu", "0"});
  CHECK(t.rc == 0);
  CHECK(t.out.find("healthy\n") != std::string::npos);
}

TEST_CASE("doctor: a process bound to another GPU's CPUs is not healthy (exit 7)") {
  if (!cli_test::cpus_allowed_here({0, 1})) return;
  Child c([] { pin_process(1); });  // GPU 1's CPU
  Run r = doctor(c.pid, {"--gpu", "0", "--format", "json"});
  INFO(r.out, r.err);
  CHECK(r.rc == 7);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["healthy"] == false);
  CHECK(j["threads"][0]["inside"] == false);
  CHECK(j["threads"][0]["cpus"] == "1");
  // planned for GPU 1 instead, the same process is where it should be
  CHECK(doctor(c.pid, {"--gpu", "1"}).rc == 0);
}

TEST_CASE("doctor: a thread re-pinned after start is named, with who it is") {
  if (!cli_test::cpus_allowed_here({0, 1})) return;
  Child c([] {
    pin_process(0);
    start_repinned_thread("pt_autograd_0", 1);
  });
  Run r = doctor(c.pid, {"--gpu", "0", "--format", "json"});
  INFO(r.out, r.err);
  CHECK(r.rc == 7);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["threads"].size() == 2);
  // the main thread stayed on CPU 0; the other moved to CPU 1
  CHECK(j["threads"][0]["tid"] == c.pid);
  CHECK(j["threads"][0]["inside"] == true);
  CHECK(j["threads"][1]["name"] == "pt_autograd_0");
  CHECK(j["threads"][1]["owner"] == "PyTorch");
  CHECK(j["threads"][1]["cpus"] == "1");
  CHECK(j["threads"][1]["inside"] == false);
  Run t = doctor(c.pid, {"--gpu", "0"});
  CHECK(t.out.find("'pt_autograd_0' (PyTorch): CPUs 1") != std::string::npos);
}

TEST_CASE("doctor: the GPU from the process's own rank variable, and its fighting settings") {
  if (!cli_test::cpus_allowed_here({0, 1})) return;
  // `gpuaff exec --local-rank` started with LOCAL_RANK=1 binds to GPU 1's CPU, then
  // becomes `sleep`: its environ still holds LOCAL_RANK=1 and OMP_PROC_BIND.
  auto dir = cli_test::temp_dir("doctor-rank");
  std::string exe = cli_test::exe();
  std::string root = two_nic_root();
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<std::string> args{exe, "exec", "--root", root, "--policy", "exclusive", "--local-rank", "--", "sleep", "60"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string e1 = "LOCAL_RANK=1";
    std::string e2 = "OMP_PROC_BIND=close";
    std::string e3 = "PATH=/usr/bin:/bin";
    char* envp[] = {e1.data(), e2.data(), e3.data(), nullptr};
    ::execve(exe.c_str(), argv.data(), envp);
    ::_exit(201);
  }
  // wait until it is `sleep`
  for (int i = 0; i < 2000; ++i) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
    std::string comm;
    std::getline(in, comm);
    if (comm == "sleep") break;
    ::usleep(1000);
  }
  Run r = tool({"doctor", "--root", root, "--policy", "exclusive", "--pid", std::to_string(pid), "--format", "json"});
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  INFO(r.out, r.err);
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["gpu"] == 1);
  CHECK(j["gpu_source"] == "LOCAL_RANK=1");
  CHECK(j["expected_cpus"] == "1");
  REQUIRE(j["environment"].size() == 1);
  CHECK(j["environment"][0]["name"] == "OMP_PROC_BIND");
  CHECK(j["environment"][0]["value"] == "close");
}

namespace {

/// `gpuaff exec ARGS -- sleep 60` started with `env`, once it has become `sleep`.
pid_t exec_sleeping(std::vector<std::string> args, std::vector<std::string> env) {
  std::string exe = cli_test::exe();
  args.insert(args.begin(), {exe, "exec"});
  for (const char* a : {"--", "sleep", "60"}) args.emplace_back(a);
  env.emplace_back("PATH=/usr/bin:/bin");
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    ::execve(exe.c_str(), argv.data(), envp.data());
    ::_exit(201);
  }
  for (int i = 0; i < 2000; ++i) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
    std::string comm;
    std::getline(in, comm);
    if (comm == "sleep") break;
    ::usleep(1000);
  }
  return pid;
}

void end(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

}  // namespace

TEST_CASE("doctor --pid alone checks the plan exec applied: an exclusive rank that drifted inside its node is unhealthy") {
  if (!cli_test::cpus_allowed_here({0, 1})) return;
  // exec --policy exclusive gives GPU 0 CPU 0 (one core each for the node's two
  // GPUs) and leaves that plan in the command's GPUAFF_PLAN.
  pid_t pid = exec_sleeping({"--root", two_nic_root(), "--policy", "exclusive", "--gpu", "0"}, {});
  Run healthy = tool({"doctor", "--pid", std::to_string(pid), "--format", "json"});
  INFO(healthy.out, healthy.err);
  CHECK(healthy.rc == 0);
  // Then it drifts to CPU 1: still its NUMA node, but GPU 1's share.
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(1, &one);
  REQUIRE(::sched_setaffinity(pid, sizeof one, &one) == 0);
  Run r = tool({"doctor", "--pid", std::to_string(pid), "--format", "json"});
  Run text = tool({"doctor", "--pid", std::to_string(pid)});
  // With --policy node the guess would call it healthy: the whole node is 0-1.
  Run guessed = tool({"doctor", "--root", two_nic_root(), "--policy", "node", "--gpu", "0", "--pid", std::to_string(pid)});
  end(pid);
  INFO(r.out, r.err);
  REQUIRE(r.rc == 7);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["plan_from"] == "GPUAFF_PLAN");
  CHECK(j["policy"] == "exclusive");
  CHECK(j["expected_cpus"] == "0");
  CHECK(j["gpu"] == 0);
  CHECK(j["gpu_source"] == "gpu=0");
  CHECK(j["threads"][0]["cpus"] == "1");
  CHECK(j["healthy"] == false);
  CHECK(text.out.find("plan: checked against the plan it was bound with (GPUAFF_PLAN)") != std::string::npos);
  CHECK(text.out.find("(0000:17:00.0, --gpu 0)") != std::string::npos);
  CHECK(guessed.rc == 0);
}

TEST_CASE("doctor's text holds no control byte from the process: its thread names and environment are escaped") {
  if (!cli_test::cpus_allowed_here({0, 1})) return;
  // An environment value with a newline that would forge a "healthy" line and a
  // terminal escape that would set the window title, in a variable doctor prints.
  pid_t pid = exec_sleeping({"--root", two_nic_root(), "--policy", "exclusive", "--gpu", "0"},
                            {"OMP_PLACES=x\nhealthy\n\x1b]0;owned\x07"});
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(1, &one);
  REQUIRE(::sched_setaffinity(pid, sizeof one, &one) == 0);  // drifted: not healthy
  Run r = tool({"doctor", "--pid", std::to_string(pid)});
  end(pid);
  // A thread name that would clear the screen (a process names its own threads).
  Child c([] {
    pin_process(1);
    ::pthread_setname_np(::pthread_self(), "\x1b[2Jevil");
  });
  Run named = tool({"doctor", "--root", two_nic_root(), "--policy", "exclusive", "--gpu", "0", "--pid", std::to_string(c.pid)});
  INFO(r.out);
  CHECK(r.rc == 7);
  CHECK(r.out.find('\x1b') == std::string::npos);
  CHECK(r.out.find('\x07') == std::string::npos);
  CHECK(r.out.find("\nhealthy\n") == std::string::npos);  // the only verdict line is the real one
  CHECK(r.out.find("NOT healthy:") != std::string::npos);
  CHECK(r.out.find("OMP_PLACES=x\\x0ahealthy\\x0a\\x1b]0;owned\\x07") != std::string::npos);
  CHECK(named.rc == 7);
  CHECK(named.out.find('\x1b') == std::string::npos);
  CHECK(named.out.find("'\\x1b[2Jevil'") != std::string::npos);
}

TEST_CASE("doctor says it is guessing when the process carries no plan") {
  if (!cli_test::cpus_allowed_here({0, 1})) return;
  // A rank started without gpuaff: LOCAL_RANK=0, pinned to CPU 0, no GPUAFF_PLAN.
  pid_t pid = ::fork();
  if (pid == 0) {
    pin_process(0);
    std::string e1 = "LOCAL_RANK=0";
    char* envp[] = {e1.data(), nullptr};
    char sleep_path[] = "/bin/sleep";
    char sixty[] = "60";
    char* argv[] = {sleep_path, sixty, nullptr};
    ::execve(sleep_path, argv, envp);
    ::_exit(201);
  }
  for (int i = 0; i < 2000; ++i) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
    std::string comm;
    std::getline(in, comm);
    if (comm == "sleep") break;
    ::usleep(1000);
  }
  Run guess = tool({"doctor", "--root", two_nic_root(), "--pid", std::to_string(pid), "--format", "json"});
  Run given = tool({"doctor", "--root", two_nic_root(), "--policy", "exclusive", "--pid", std::to_string(pid), "--format", "json"});
  end(pid);
  INFO(guess.out, guess.err);
  REQUIRE(guess.rc == 0);  // policy node: the whole node 0-1
  auto j = nlohmann::json::parse(guess.out);
  CHECK(j["plan_from"] == "guess");
  CHECK(j["expected_cpus"] == "0-1");
  REQUIRE(j["notes"].size() == 1);
  CHECK(j["notes"][0].get<std::string>().find("a guess") != std::string::npos);
  CHECK(j["notes"][0].get<std::string>().find("--policy node") != std::string::npos);
  REQUIRE(given.rc == 0);
  CHECK(nlohmann::json::parse(given.out)["plan_from"] == "options");
}

TEST_CASE("doctor blames the process's own rank variable, not a --gpu nobody passed") {
  if (!cli_test::cpus_allowed_here({0, 1})) return;
  pid_t pid = exec_sleeping({"--root", two_nic_root(), "--local-rank"}, {"LOCAL_RANK=1"});
  // doctor with another visibility: the process's LOCAL_RANK=1 names a GPU that
  // one visible GPU does not have.
  Run r = tool({"doctor", "--root", two_nic_root(), "--visible-devices", "0", "--pid", std::to_string(pid)});
  end(pid);
  INFO(r.out, r.err);
  CHECK(r.rc == 4);
  CHECK(r.err.find("LOCAL_RANK=1") != std::string::npos);
  CHECK(r.err.find("(--gpu") == std::string::npos);
}

TEST_CASE("doctor: a missing process and a process without rank variable are errors") {
  Run gone = doctor(999999999, {"--gpu", "0"});
  CHECK(gone.rc == 4);
  CHECK(gone.one_error_line());
  CHECK(gone.out.empty());
  Child c([] {});
  Run norank = doctor(c.pid, {});
  CHECK(norank.rc == 2);
  CHECK(norank.err.find("--gpu N") != std::string::npos);
}

TEST_CASE("exec --local-rank --nic-env --dry-run gives each local rank its own compute NIC on the DGX H100") {
  // The DGX H100 user guide pairs GPU k with compute port k behind the same
  // PCIe switch (PIX): ports 0..7 are mlx5_0, mlx5_3..mlx5_6, mlx5_9..mlx5_11
  // (mlx5_1/2 and mlx5_7/8 are the storage ports). So local rank k, which is
  // GPU k, exports the k-th of those, and no two ranks share one.
  const char* expected[] = {"mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"};
  std::string root = std::string(GPUAFF_FIXTURES_DIR) + "/dgx-h100";
  for (int rank = 0; rank < 8; ++rank) {
    Run r = tool({"exec", "--root", root, "--local-rank", "--nic-env", "--dry-run", "--", "python", "train.py"},
                 {{"LOCAL_RANK", std::to_string(rank)}, {"LOCAL_WORLD_SIZE", "8"}});
    INFO("rank ", rank, ": ", r.err);
    REQUIRE(r.rc == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["gpu"] == rank);
    CHECK(j["env"]["UCX_NET_DEVICES"] == std::string(expected[rank]) + ":1");
    CHECK_FALSE(j["env"].contains("NCCL_IB_HCA"));  // NCCL picks its rails itself
    CHECK(j["nic_set"] == nlohmann::json::array({std::string(expected[rank]) + ":1"}));
    CHECK(j["nic_path"] == "PIX");
    CHECK(j["command"] == nlohmann::json::array({"python", "train.py"}));
  }
  // A process that sees only GPU 5 (a pod, a Ray actor) under --share machine
  // still gets GPU 5's own NIC, not the first NIC of the machine.
  Run one = tool({"exec", "--root", root, "--gpu", "0", "--policy", "exclusive", "--share", "machine", "--nic-env",
                  "--dry-run", "--", "true"},
                 {{"CUDA_VISIBLE_DEVICES", "5"}});
  INFO(one.err);
  REQUIRE(one.rc == 0);
  CHECK(nlohmann::json::parse(one.out)["env"]["UCX_NET_DEVICES"] == "mlx5_9:1");
}

TEST_CASE("doctor names a rank whose UCX or NVSHMEM device list points away from its GPU's NIC set") {
  if (!cli_test::cpus_allowed_here({0, 1})) return;
  // On the two-NIC tree GPU 0's set is mlx5_0, GPU 1's mlx5_1 (one each, by
  // address). exec --nic-env sets the lists right: healthy.
  std::string root = two_nic_root();
  pid_t right = exec_sleeping({"--root", root, "--policy", "exclusive", "--gpu", "0", "--nic-env"}, {});
  Run ok = tool({"doctor", "--root", root, "--pid", std::to_string(right), "--format", "json"});
  end(right);
  INFO(ok.out, ok.err);
  CHECK(ok.rc == 0);
  // A rank of GPU 0 started with GPU 1's NIC in UCX_NET_DEVICES (a copied job
  // script): not healthy, the problem names the variable and the set.
  pid_t wrong = exec_sleeping({"--root", root, "--policy", "exclusive", "--gpu", "0"},
                              {"UCX_NET_DEVICES=mlx5_1:1", "NVSHMEM_HCA_LIST=mlx5_0:1,mlx5_1:1"});
  Run bad = tool({"doctor", "--root", root, "--pid", std::to_string(wrong), "--format", "json"});
  Run text = tool({"doctor", "--root", root, "--pid", std::to_string(wrong)});
  end(wrong);
  INFO(bad.out, bad.err);
  REQUIRE(bad.rc == 7);
  auto j = nlohmann::json::parse(bad.out);
  REQUIRE(j["problems"].size() == 1);
  std::string p = j["problems"][0];
  CHECK(p.find("UCX_NET_DEVICES=mlx5_1:1 points away from the NIC set of 0000:17:00.0: it names mlx5_1") == 0);
  CHECK(p.find("mlx5_0:1, PHB") != std::string::npos);
  CHECK(p.find("--nic-env") != std::string::npos);
  // NVSHMEM's list holds the set and one more: a note, not a problem.
  bool noted = false;
  for (const auto& n : j["notes"]) noted = noted || n.get<std::string>().find("NVSHMEM_HCA_LIST=mlx5_0:1,mlx5_1:1 also names mlx5_1") == 0;
  CHECK(noted);
  CHECK(text.out.find("NOT healthy:\n  UCX_NET_DEVICES=mlx5_1:1 points away") != std::string::npos);
}

// ---- doctor with roles. GPUs 0 and 1 together (--gpu 0,1) are CPUs 0 and 1,
// one core each: main=1 makes main CPU 0 and compute CPU 1; comm=1 makes comm
// CPU 0 and compute CPU 1.

TEST_CASE("doctor with roles: the main thread belongs on main, NCCL's threads on comm") {
  if (!cli_test::cpus_allowed_here({0, 1})) return;
  {
    Child on_main([] { pin_process(0); });
    Run r = doctor(on_main.pid, {"--gpu", "0,1", "--roles", "main=1", "--format", "json"});
    INFO(r.out, r.err);
    CHECK(r.rc == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["roles"] == nlohmann::json::parse(R"({"main": "0", "compute": "1"})"));
    CHECK(j["threads"][0]["role"] == "main");
  }
  {
    Child anywhere([] { pin_process(0, 1); });  // inside the plan (CPUs 0-1), but not on its role
    Run r = doctor(anywhere.pid, {"--gpu", "0,1", "--roles", "main=1"});
    INFO(r.out, r.err);
    CHECK(r.rc == 7);
    CHECK(r.out.find("roles: rank 1 (threads per role; the plan's roles: main 0, compute 1)") != std::string::npos);
    CHECK(r.out.find("the main thread " + std::to_string(anywhere.pid) + " may run on CPUs 0-1, not only its role "
                     "main (0)") != std::string::npos);
  }
  {
    Child proxy_off_role([] {
      pin_process(0, 1);
      start_repinned_thread("NCCL Proxy", 1);
    });
    Run r = doctor(proxy_off_role.pid, {"--gpu", "0,1", "--roles", "comm=1", "--format", "json"});
    INFO(r.out, r.err);
    CHECK(r.rc == 7);
    auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["threads"].size() == 2);
    CHECK(j["threads"][1]["role"] == "compute");
    CHECK(j["problems"][0].get<std::string>().find("'NCCL Proxy' (NCCL) may run on CPUs 1, not only the role comm (0)") !=
          std::string::npos);
  }
  {
    Child proxy_on_role([] {
      pin_process(0, 1);
      start_repinned_thread("NCCL Proxy", 0);
    });
    Run r = doctor(proxy_on_role.pid, {"--gpu", "0,1", "--roles", "comm=1"});
    INFO(r.out, r.err);
    CHECK(r.rc == 0);
    CHECK(r.out.find("roles: comm 1 rank 1") != std::string::npos);
  }
}

// ---- doctor --all, --format prometheus, --merge, and topo --format dra.

namespace {

/// `gpuaff exec ARGS -- sleep 60` in the background; the pid once its
/// environment carries GPUAFF_PLAN (the exec happened). Killed on destruction.
struct PlannedChild {
  pid_t pid = -1;
  explicit PlannedChild(std::vector<std::string> args, std::vector<std::pair<std::string, std::string>> vars = {}) {
    args.insert(args.begin(), "exec");
    for (const char* a : {"--", "sleep", "60"}) args.emplace_back(a);
    std::string program = cli_test::exe();
    pid = ::fork();
    if (pid == 0) {
      std::vector<char*> argv{program.data()};
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      for (const auto& [name, value] : vars) ::setenv(name.c_str(), value.c_str(), 1);
      ::execv(program.c_str(), argv.data());
      ::_exit(127);
    }
    for (int i = 0; i < 2000; ++i) {
      std::ifstream in("/proc/" + std::to_string(pid) + "/environ");
      std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (env.find("GPUAFF_PLAN=") != std::string::npos) return;
      ::usleep(2000);
    }
    FAIL("the child never carried GPUAFF_PLAN");
  }
  ~PlannedChild() {
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  PlannedChild(const PlannedChild&) = delete;
  PlannedChild& operator=(const PlannedChild&) = delete;
};

const nlohmann::json* process_of(const nlohmann::json& report, pid_t pid) {
  for (const auto& p : report["processes"])
    if (p["pid"] == pid) return &p;
  return nullptr;
}

}  // namespace

TEST_CASE("doctor --all checks every process that carries a plan; json, prometheus and text agree") {
  if (!cli_test::cpus_allowed_here({0, 1})) return;
  // Two ranks bound by gpuaff exec on the two-NIC tree: GPU 0 -> CPU 0, GPU 1 -> CPU 1,
  // memory node 0 (this machine's node 0 holds every page): both healthy.
  PlannedChild a({"--root", two_nic_root(), "--gpu", "0", "--policy", "exclusive"});
  PlannedChild b({"--root", two_nic_root(), "--gpu", "1", "--policy", "exclusive"});
  Run r = tool({"doctor", "--all", "--root", two_nic_root(), "--format", "json"});
  INFO(r.out, r.err);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["node"].is_string());
  const nlohmann::json* pa = process_of(j, a.pid);
  const nlohmann::json* pb = process_of(j, b.pid);
  REQUIRE(pa != nullptr);
  REQUIRE(pb != nullptr);
  CHECK((*pa)["expected_cpus"] == "0");
  CHECK((*pb)["expected_cpus"] == "1");
  CHECK((*pa)["plan_from"] == "GPUAFF_PLAN");
  CHECK((*pa)["healthy"] == true);
  CHECK((*pb)["healthy"] == true);
  // The machine's NIC sets, per GPU index: what --merge compares between nodes.
  CHECK(j["gpu_rails"] == nlohmann::json::parse(R"({"0": "mlx5_0:1", "1": "mlx5_1:1"})"));
  // Each GPU's set is one NIC: GPU k's is rail k, plane 0 (NCCL_IB_HCA's syntax).
  CHECK(j["gpu_rail_ids"] == nlohmann::json::parse(R"({"0": "mlx5_0:1:0:0", "1": "mlx5_1:1:1:0"})"));
  std::string labels_a = "{pid=\"" + std::to_string(a.pid) + "\",gpu=\"0\",pci=\"0000:17:00.0\",rank=\"gpu=0\",policy=\"exclusive\"}";
  Run p = tool({"doctor", "--all", "--root", two_nic_root(), "--format", "prometheus"});
  CHECK(p.out.find("# TYPE gpuaff_healthy gauge\n") != std::string::npos);
  CHECK(p.out.find("gpuaff_healthy" + labels_a + " 1\n") != std::string::npos);
  CHECK(p.out.find("gpuaff_threads_outside_plan" + labels_a + " 0\n") != std::string::npos);
  CHECK(p.out.find("gpuaff_plan_present" + labels_a + " 1\n") != std::string::npos);
  Run t = tool({"doctor", "--all", "--root", two_nic_root()});
  CHECK(t.out.find("NIC sets: GPU 0 mlx5_0:1; GPU 1 mlx5_1:1\n") != std::string::npos);
  CHECK(t.out.find("rail:plane by GPU: GPU 0 mlx5_0:1:0:0; GPU 1 mlx5_1:1:1:0\n") != std::string::npos);
  CHECK(t.out.find("  " + std::to_string(a.pid) + "  gpu=0") != std::string::npos);
  // --pid with prometheus: one process's series.
  Run one = tool({"doctor", "--pid", std::to_string(a.pid), "--root", two_nic_root(), "--format", "prometheus"});
  CHECK(one.rc == 0);
  CHECK(one.out.find("gpuaff_plan_processes") == std::string::npos);
  CHECK(one.out.find("gpuaff_healthy" + labels_a + " 1\n") != std::string::npos);
  // Which process to check is said once.
  CHECK(tool({"doctor", "--all", "--pid", "1"}).rc == 2);
  CHECK(tool({"doctor"}).rc == 2);
}

TEST_CASE("doctor --all judges each process's NIC lists on the one read of the machine") {
  if (!cli_test::cpus_allowed_here({0, 1})) return;
  // GPU 0's NIC set on the two-NIC tree is mlx5_0; a rank of GPU 0 started
  // with GPU 1's NIC in UCX_NET_DEVICES is named, beside a healthy rank of GPU 1.
  PlannedChild wrong({"--root", two_nic_root(), "--gpu", "0", "--policy", "exclusive"}, {{"UCX_NET_DEVICES", "mlx5_1:1"}});
  PlannedChild right({"--root", two_nic_root(), "--gpu", "1", "--policy", "exclusive"}, {{"UCX_NET_DEVICES", "mlx5_1:1"}});
  Run r = tool({"doctor", "--all", "--root", two_nic_root(), "--format", "json"});
  INFO(r.out, r.err);
  CHECK(r.rc == 7);
  auto j = nlohmann::json::parse(r.out);
  const nlohmann::json* pw = process_of(j, wrong.pid);
  const nlohmann::json* pr = process_of(j, right.pid);
  REQUIRE(pw != nullptr);
  REQUIRE(pr != nullptr);
  CHECK((*pw)["healthy"] == false);
  REQUIRE((*pw)["problems"].size() == 1);
  CHECK((*pw)["problems"][0].get<std::string>().find("UCX_NET_DEVICES=mlx5_1:1 points away from the NIC set of "
                                                     "0000:17:00.0") == 0);
  CHECK((*pr)["healthy"] == true);
  CHECK(j["gpu_rails"] == nlohmann::json::parse(R"({"0": "mlx5_0:1", "1": "mlx5_1:1"})"));
}

TEST_CASE("doctor --all counts a process whose GPUAFF_PLAN is garbled as a problem, and exits 7") {
  // Once only a note: such a node reported itself healthy with exit 0.
  struct GarbledChild {
    pid_t pid = ::fork();
    GarbledChild() {
      if (pid == 0) {
        ::setenv("GPUAFF_PLAN", "v1 gpu=zero pci=0000:17:00.0 cpus=0", 1);
        ::execlp("sleep", "sleep", "60", static_cast<char*>(nullptr));
        ::_exit(127);
      }
      for (int i = 0; i < 2000; ++i) {
        std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
        std::string comm;
        std::getline(in, comm);
        if (comm == "sleep") return;
        ::usleep(2000);
      }
    }
    ~GarbledChild() {
      ::kill(pid, SIGKILL);
      int status = 0;
      ::waitpid(pid, &status, 0);
    }
  } garbled;
  REQUIRE(garbled.pid > 0);
  std::string pid = std::to_string(garbled.pid);
  Run j = tool({"doctor", "--all", "--root", two_nic_root(), "--format", "json"});
  INFO(j.out, j.err);
  CHECK(j.rc == 7);
  auto report = nlohmann::json::parse(j.out);
  CHECK(process_of(report, garbled.pid) == nullptr);  // no verdict: there is no plan to judge against
  bool listed = false;
  for (const auto& p : report["invalid_plans"])
    if (p["pid"] == garbled.pid) {
      listed = true;
      CHECK(p["problem"].get<std::string>().find("GPUAFF_PLAN='v1 gpu=zero") != std::string::npos);
    }
  CHECK(listed);
  for (const auto& n : report["notes"]) CHECK(n.get<std::string>().find("gpu=zero") == std::string::npos);

  Run t = tool({"doctor", "--all", "--root", two_nic_root()});
  CHECK(t.rc == 7);
  CHECK(t.out.find("  pid " + pid + ": GPUAFF_PLAN='v1 gpu=zero") != std::string::npos);
  CHECK(t.out.find("note: process " + pid) == std::string::npos);
  CHECK(t.out.find(" not healthy\n") != std::string::npos);
  CHECK(t.out.find(" 0 not healthy\n") == std::string::npos);

  Run p = tool({"doctor", "--all", "--root", two_nic_root(), "--format", "prometheus"});
  CHECK(p.rc == 7);
  const std::string invalid = "\ngpuaff_plan_invalid_processes ";
  auto at = p.out.find(invalid);
  REQUIRE(at != std::string::npos);
  CHECK(std::stoi(p.out.substr(at + invalid.size())) >= 1);

  // --merge of that report: the node is not healthy.
  auto dir = cli_test::temp_dir("merge-garbled");
  cli_test::write_file(dir / "node.json", j.out);
  Run m = tool({"doctor", "--merge", (dir / "node.json").string()});
  CHECK(m.rc == 7);
  CHECK(m.out.find(pid) != std::string::npos);
}

TEST_CASE("doctor --merge: one table by node and rank, and whether each GPU index keeps its rail") {
  auto dir = cli_test::temp_dir("merge");
  auto write = [&](const std::string& name, const std::string& json) {
    cli_test::write_file(dir / name, json);
    return (dir / name).string();
  };
  std::string proc = R"({"pid": 7, "gpu": 0, "gpu_source": "LOCAL_RANK=0", "healthy": true, "problems": []})";
  std::string off = R"({"pid": 8, "gpu": 1, "gpu_source": "LOCAL_RANK=1", "healthy": false, "problems": ["thread 9 'x' may run on CPUs 5 outside the plan"]})";
  std::string a = write("a.json", R"({"node": "a", "processes": [)" + proc + R"(], "gpu_rails": {"0": "mlx5_0:1"}})");
  std::string b = write("b.json", R"({"node": "b", "processes": [)" + proc + R"(], "gpu_rails": {"0": "mlx5_0:1"}})");
  std::string c = write("c.json", R"({"node": "c", "processes": [)" + proc + "," + off + R"(], "gpu_rails": {"0": "mlx5_1:1"}})");
  Run same = tool({"doctor", "--merge", a, "--merge", b});
  INFO(same.out, same.err);
  CHECK(same.rc == 0);
  CHECK(same.out.find("  a     LOCAL_RANK=0  0    7    healthy") != std::string::npos);
  CHECK(same.out.find("GPU 0: NIC set mlx5_0:1 on every node\n") != std::string::npos);
  Run differ = tool({"doctor", "--merge", a, "--merge", b, "--merge", c});
  CHECK(differ.rc == 7);
  CHECK(differ.out.find("GPU 0: NOT the same rail on every node: mlx5_0:1 on a,b; mlx5_1:1 on c\n") != std::string::npos);
  CHECK(differ.out.find("NOT healthy  thread 9 'x' may run on CPUs 5 outside the plan") != std::string::npos);
  // The same NICs, another rail or plane: node e's GPU 1 set is mlx5_1 and
  // mlx5_2 like d's, but numbered rail 2 (as when a NIC of GPU 0 was missing
  // there and the sets before it counted differently) and with its planes
  // swapped. NCCL would pair the wrong NICs: the node and the GPU are named.
  std::string d = write("d.json", R"({"node": "d", "processes": [], "gpu_rails": {"0": "mlx5_0:1", "1": "mlx5_1:1,mlx5_2:1"},
      "gpu_rail_ids": {"0": "mlx5_0:1:0:0", "1": "mlx5_1:1:1:0,mlx5_2:1:1:1"}})");
  std::string e = write("e.json", R"({"node": "e", "processes": [], "gpu_rails": {"0": "mlx5_0:1", "1": "mlx5_1:1,mlx5_2:1"},
      "gpu_rail_ids": {"0": "mlx5_0:1:0:0", "1": "mlx5_1:1:2:1,mlx5_2:1:2:0"}})");
  std::string old_gpuaff = write("f.json", R"({"node": "f", "processes": [], "gpu_rails": {"0": "mlx5_0:1", "1": "mlx5_1:1,mlx5_2:1"}})");
  Run ids_same = tool({"doctor", "--merge", d, "--merge", old_gpuaff});
  INFO(ids_same.out, ids_same.err);
  CHECK(ids_same.rc == 0);  // a report without identities (an older gpuaff) is compared on its NIC sets only
  CHECK(ids_same.out.find("rail and plane") == std::string::npos);
  Run ids_differ = tool({"doctor", "--merge", d, "--merge", e});
  INFO(ids_differ.out);
  CHECK(ids_differ.rc == 7);
  CHECK(ids_differ.out.find("GPU 1: NIC set mlx5_1:1,mlx5_2:1 on every node\n") != std::string::npos);
  CHECK(ids_differ.out.find("GPU 1: NOT the same rail and plane (NIC:port:rail:plane) on every node: "
                            "mlx5_1:1:1:0,mlx5_2:1:1:1 on d; mlx5_1:1:2:1,mlx5_2:1:2:0 on e\n") != std::string::npos);
  CHECK(ids_differ.out.find("GPU 0: NOT") == std::string::npos);
  Run bad = tool({"doctor", "--merge", write("bad.json", R"({"processes": []})")});
  CHECK(bad.rc != 0);
  CHECK(bad.err.find("is not the output of gpuaff doctor --all --format json") != std::string::npos);
}

TEST_CASE("doctor --merge: a report with a key of the wrong type is one error naming the file and the key") {
  auto dir = cli_test::temp_dir("merge-types");
  std::string proc = R"("pid": 7, "gpu": 0, "gpu_source": "LOCAL_RANK=0", "healthy": true, "problems": [])";
  struct Case {
    const char* name;
    std::string json;
    const char* key;
  };
  const Case cases[] = {
      {"healthy", R"({"node": "a", "processes": [{"pid": 7, "gpu": 0, "healthy": "yes"}]})", "processes[0].healthy"},
      {"gpu-text", R"({"node": "a", "processes": [{"pid": 7, "gpu": "0", "healthy": true}]})", "processes[0].gpu"},
      {"gpu-huge", R"({"node": "a", "processes": [{"pid": 7, "gpu": 1e300, "healthy": true}]})", "processes[0].gpu"},
      {"gpu-big", R"({"node": "a", "processes": [{"pid": 7, "gpu": 18446744073709551615, "healthy": true}]})",
       "processes[0].gpu"},
      {"pid", R"({"node": "a", "processes": [{)" + proc + R"(}, {"pid": [], "gpu": 0, "healthy": true}]})",
       "processes[1].pid"},
      {"source", R"({"node": "a", "processes": [{"pid": 7, "gpu": 0, "gpu_source": 5, "healthy": true}]})",
       "processes[0].gpu_source"},
      {"process", R"({"node": "a", "processes": [5]})", "processes[0]"},
      {"problems", R"({"node": "a", "processes": [{"pid": 7, "gpu": 0, "healthy": false, "problems": "x"}]})",
       "processes[0].problems"},
      {"problem", R"({"node": "a", "processes": [{"pid": 7, "gpu": 0, "healthy": false, "problems": [1]}]})",
       "processes[0].problems[0]"},
      {"rails", R"({"node": "a", "processes": [], "gpu_rails": []})", "gpu_rails"},
      {"rail", R"({"node": "a", "processes": [], "gpu_rails": {"0": 5}})", "gpu_rails.0"},
      {"ids", R"({"node": "a", "processes": [], "gpu_rail_ids": "mlx5_0:1:0:0"})", "gpu_rail_ids"},
      {"id", R"({"node": "a", "processes": [], "gpu_rail_ids": {"0": [0, 0]}})", "gpu_rail_ids.0"},
      {"invalid", R"({"node": "a", "processes": [], "invalid_plans": [{"pid": "x", "problem": "p"}]})",
       "invalid_plans[0].pid"},
      {"node", R"({"node": 3, "processes": []})", "node"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    std::string file = (dir / (std::string(c.name) + ".json")).string();
    cli_test::write_file(file, c.json);
    Run r = tool({"doctor", "--merge", file});
    INFO(r.out, r.err);
    CHECK(r.rc == 3);
    CHECK(r.err.find("internal error") == std::string::npos);
    REQUIRE(r.err_lines().size() == 1);
    CHECK(r.err.find(file) != std::string::npos);
    CHECK(r.err.find(std::string("'") + c.key + "'") != std::string::npos);
  }
}

TEST_CASE("doctor --merge: the same node's report given twice is refused, naming both files") {
  auto dir = cli_test::temp_dir("merge-twice");
  std::string json = R"({"node": "a", "processes": [], "gpu_rails": {"0": "mlx5_0:1"}})";
  cli_test::write_file(dir / "a.json", json);
  cli_test::write_file(dir / "copy.json", json);
  Run r = tool({"doctor", "--merge", (dir / "a.json").string(), "--merge", (dir / "copy.json").string()});
  INFO(r.out, r.err);
  CHECK(r.rc == 2);
  CHECK(r.out.find("NOT the same rail") == std::string::npos);
  REQUIRE(r.err_lines().size() == 1);
  CHECK(r.err.find("node 'a'") != std::string::npos);
  CHECK(r.err.find((dir / "a.json").string()) != std::string::npos);
  CHECK(r.err.find((dir / "copy.json").string()) != std::string::npos);
}

TEST_CASE("doctor --merge reads a large report in time linear in its size") {
  // 150,000 GPU indices in gpu_rails (2.4 MB): once minutes, each key looked up in a list.
  auto dir = cli_test::temp_dir("merge-large");
  std::string rails;
  for (int i = 0; i < 150000; ++i) rails += (i == 0 ? "" : ",") + ("\"" + std::to_string(i) + "\": \"mlx5_0:1\"");
  cli_test::write_file(dir / "a.json", R"({"node": "a", "processes": [], "gpu_rails": {)" + rails + "}}");
  auto start = std::chrono::steady_clock::now();
  Run r = tool({"doctor", "--merge", (dir / "a.json").string()});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(r.rc == 0);
  // Not a benchmark: the bound only tells linear from quadratic. The quadratic
  // parse took minutes here; the linear one about 1 s at -O1 and up to 22 s
  // under AddressSanitizer on a machine shared with three builds.
  CHECK(seconds < 60);
}

TEST_CASE("topo --format dra: the standard DRA attributes and gpuaff's own, per GPU") {
  // gb200-tray-numa: GPU 1 (0009:01:00.0) sits on Grace 0 (node 0, the only CPU
  // node of its socket), its own memory is node 10, its NIC mlx5_1.
  Run gb = tool({"topo", "--root", std::string(GPUAFF_FIXTURES_DIR) + "/gb200-tray-numa", "--format", "dra"});
  INFO(gb.err);
  REQUIRE(gb.rc == 0);
  auto g1 = nlohmann::json::parse(gb.out)["gpus"][1];
  CHECK(g1["pci"] == "0009:01:00.0");
  CHECK(g1["attributes"]["resource.kubernetes.io/pciBusID"] == "0009:01:00.0");
  CHECK(g1["attributes"]["resource.kubernetes.io/numaNode"] == nlohmann::json::array({0}));
  CHECK(g1["cpu_node"] == 0);
  CHECK(g1["memory_nodes"] == nlohmann::json::array({10}));
  CHECK(g1["nic_set"] == nlohmann::json::array({"mlx5_1:1"}));
  // pcieRoot: the recorded link sys/bus/pci/devices/0009:01:00.0 ->
  // ../../../devices/pci0009:00/0009:00:01.0/0009:01:00.0 names root pci0009:00.
  CHECK(g1["attributes"]["resource.kubernetes.io/pcieRoot"] == "pci0009:00");
  // Every GPU and every NIC has one: the tray's devices each sit under a root of their own domain.
  auto all = nlohmann::json::parse(gb.out);
  REQUIRE(all["nics"].size() > 0);
  for (const auto& g : all["gpus"]) CHECK(g["attributes"].contains("resource.kubernetes.io/pcieRoot"));
  for (const auto& n : all["nics"]) CHECK(n["attributes"].contains("resource.kubernetes.io/pcieRoot"));
  // mlx5_1 is 0002:01:00.0 (sys/class/infiniband/mlx5_1 -> ../../devices/pci0002:00/...): root pci0002:00.
  bool mlx5_1 = false;
  for (const auto& n : all["nics"])
    if (n["pci"] == "0002:01:00.0") {
      mlx5_1 = true;
      CHECK(n["attributes"]["resource.kubernetes.io/pcieRoot"] == "pci0002:00");
    }
  CHECK(mlx5_1);
  // The CPU groups as the CPU driver's grouped mode publishes them: one per node with CPUs.
  REQUIRE(all["cpu_groups"].size() >= 1);
  CHECK(all["cpu_groups"][0]["attributes"]["dra.cpu/numaNodeID"] == 0);
  // A GPU whose numa_node is -1 publishes no numaNode (the attribute's rule); gpuaff's cpu_node is inferred.
  Run vm = tool({"topo", "--root", std::string(GPUAFF_FIXTURES_DIR) + "/h100-vm-1gpu", "--format", "dra"});
  REQUIRE(vm.rc == 0);
  auto v0 = nlohmann::json::parse(vm.out)["gpus"][0];
  CHECK_FALSE(v0["attributes"].contains("resource.kubernetes.io/numaNode"));
  CHECK(v0["cpu_node"] == 0);
}

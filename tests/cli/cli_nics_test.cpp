// --nic-env on bind and exec, and topo's NIC report, run as a user would.
// The exec tests plan on a tree written here: CPUs 0 and 1, two GPUs and two
// RDMA NICs, all on one root bus (PHB to each other), so that the plan
// applies on any machine with two CPUs.

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "run_tool.hpp"

using cli_test::Run;
using cli_test::tool;

namespace {

std::string two_nic_root() {
  static const std::string root = [] {
    auto dir = cli_test::temp_dir("two-nic");
    cli_test::FakeMachine m;
    m.cores = {"0", "1"};
    m.core_package = {0, 0};
    m.node_cpus = {"0-1"};
    m.node_distances = {"10"};
    m.online = "0-1";
    m.allowed = "0-1";
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
  // Both GPUs reach both NICs through the host bridge (PHB): GPU 0 takes the
  // lower address (mlx5_0), GPU 1 the one GPU 0 did not take.
  for (auto [gpu, nic] : {std::pair{"0", "mlx5_0:1"}, std::pair{"1", "mlx5_1:1"}}) {
    Run r = tool({"bind", "--root", two_nic_root(), "--gpu", gpu, "--nic-env", "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["env"]["NCCL_IB_HCA"] == std::string("=") + nic);
    CHECK(j["env"]["UCX_NET_DEVICES"] == nic);
    CHECK(j["env"]["NVSHMEM_HCA_LIST"] == nic);
  }
  Run plain = tool({"bind", "--root", two_nic_root(), "--gpu", "0", "--format", "json"});
  REQUIRE(plain.rc == 0);
  CHECK(nlohmann::json::parse(plain.out)["env"].empty());
}

TEST_CASE("bind --nic-env needs --format json; a root without RDMA NIC is an error") {
  Run text = tool({"bind", "--root", two_nic_root(), "--gpu", "0", "--nic-env"});
  CHECK(text.rc == 2);
  CHECK(text.out.empty());
  CHECK(text.one_error_line());
  CHECK(text.err.find("--format json") != std::string::npos);
  // dgx-h100's NICs have no sys/class/infiniband names: nothing to export.
  Run none = tool({"bind", "--root", std::string(GPUAFF_FIXTURES_DIR) + "/dgx-h100", "--gpu", "0", "--nic-env",
                   "--format", "json"});
  CHECK(none.rc == 4);
  CHECK(none.out.empty());
  CHECK(none.err.find("no RDMA NIC") != std::string::npos);
}

TEST_CASE("exec --nic-env exports the GPU's NIC to the command, and nothing without it") {
  if (!cli_test::cpus_allowed_here({0, 1})) {
    MESSAGE("skipped: CPUs 0 and 1 are not both allowed for this test process");
    return;
  }
  Run with = tool({"exec", "--root", two_nic_root(), "--gpu", "1", "--nic-env", "--", "sh", "-c", print_env});
  INFO(with.err);
  CHECK(with.rc == 0);
  CHECK(with.out == "=mlx5_1:1|mlx5_1:1|mlx5_1:1\n");
  Run without = tool({"exec", "--root", two_nic_root(), "--gpu", "1", "--", "sh", "-c", print_env});
  CHECK(without.out == "unset|unset|unset\n");
}

TEST_CASE("topo shows each GPU's compute NIC with class PIX on the DGX H100") {
  Run r = tool({"topo", "--root", std::string(GPUAFF_FIXTURES_DIR) + "/dgx-h100-nics"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  // the row of GPU 5: --nic-env mlx5_9, nearest PIX: mlx5_9 alone
  CHECK(r.out.find("  5    mlx5_9     PIX: mlx5_9; NODE:") != std::string::npos);
  CHECK(r.out.find("package 1, node 1; RDMA NICs: mlx5_6 mlx5_7 mlx5_8 mlx5_9 mlx5_10 mlx5_11:") != std::string::npos);
  Run j = tool({"topo", "--root", std::string(GPUAFF_FIXTURES_DIR) + "/dgx-h100-nics", "--format", "json"});
  REQUIRE(j.rc == 0);
  auto doc = nlohmann::json::parse(j.out);
  CHECK(doc["gpus"][0]["nics"][0] ==
        nlohmann::json::parse(R"({"bdf": "0000:18:00.0", "names": ["mlx5_0", "ibp24s0"], "path": "PIX"})"));
  CHECK(doc["nics"][0]["numa_node"] == 0);
}

TEST_CASE("--mem-nodes gpu on bind, and exec refuses it without a memory policy") {
  Run r = tool({"bind", "--root", std::string(GPUAFF_FIXTURES_DIR) + "/gb200-tray-numa", "--gpu", "3", "--mem-nodes",
                "gpu", "--format", "numactl"});
  INFO(r.err);
  CHECK(r.rc == 0);
  // GPU 3 sits on Grace 1 (CPUs 72-143); its memory is node 26
  CHECK(r.out == "--physcpubind=72-143 --membind=26\n");
  Run e = tool({"exec", "--root", two_nic_root(), "--gpu", "0", "--mem-nodes", "socket", "--", "true"});
  CHECK(e.rc == 2);
  CHECK(e.one_error_line());
  CHECK(e.err.find("--membind") != std::string::npos);
}

// SPDX-License-Identifier: Apache-2.0
// Placement beyond one process per GPU (docs/contract.md section 3): several
// ranks per GPU (ranks_per_gpu=N: the GPU's share cut into N disjoint parts of
// whole cores; which rank gets which GPU and part), and several GPUs per
// process (gpu=0,4: the union of their shares).
//
// fixtures/dgx-h100: 2 sockets x 56 cores, SMT2, core c = CPUs {c, c+112};
// node 0 = cores 0-55 holds GPUs 0-3, node 1 = cores 56-111 holds GPUs 4-7.
// Policy exclusive splits a node's 56 cores among its 4 GPUs: 14 each, so
// GPU g's share is cores 14g .. 14g+13 (GPU 4: 56-69).

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "gpuaff/launch/front.hpp"
#include "gpuaff/launch/options.hpp"
#include "gpuaff/launch/plan_variable.hpp"
#include "gpuaff/policy/split.hpp"
#include "gpuaff/source/json.hpp"
#include "source/tree.hpp"
#include "support/check.hpp"

using gpuaff::CpuSet;
using gpuaff::Errc;
using gpuaff::LaunchOptions;

namespace {

gpuaff::Environment env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

/// Cores a..b of the DGX H100 with their SMT siblings.
CpuSet cores(int a, int b) { return CpuSet::range(a, b) | CpuSet::range(a + 112, b + 112); }

LaunchOptions dgx(std::map<std::string, std::string> options) {
  LaunchOptions o;
  REQUIRE(gpuaff::set_option(o, "root", gpuaff_test::fixture("dgx-h100")));
  for (const auto& kv : options) REQUIRE_MESSAGE(gpuaff::set_option(o, kv.first, kv.second), kv.first);
  return o;
}

gpuaff::LaunchPlan plan_of(const LaunchOptions& o, std::map<std::string, std::string> env = {}) {
  auto p = gpuaff::plan(o, env_of(std::move(env)));
  REQUIRE_MESSAGE(p.has_value(), p.error().message());
  return *p;
}

}  // namespace

TEST_CASE("16 ranks on the DGX H100's 8 GPUs: rank r is GPU r/2, part r%2, each part 7 of the GPU's 14 cores") {
  LaunchOptions o = dgx({{"local_rank", "true"}, {"policy", "exclusive"}});
  for (int rank = 0; rank < 16; ++rank) {
    CAPTURE(rank);
    // ranks_per_gpu is left out: LOCAL_WORLD_SIZE 16 over 8 GPUs makes it 2.
    auto p = plan_of(o, {{"LOCAL_RANK", std::to_string(rank)}, {"LOCAL_WORLD_SIZE", "16"}});
    int gpu = rank / 2, part = rank % 2;
    CHECK(p.visible_gpu == gpu);
    CHECK(p.ranks_per_gpu == 2);
    CHECK(p.part == part);
    CHECK(p.gpu_share == cores(14 * gpu, 14 * gpu + 13));
    // part 0 is the first 7 cores of the share, part 1 the last 7
    CHECK(p.cpus == cores(14 * gpu + 7 * part, 14 * gpu + 7 * part + 6));
    CHECK(p.job.nproc == 8);  // the GPUs taking part: 16 ranks / 2
    CHECK(gpuaff::plan_variable_value(p).find(" part=" + std::to_string(part) + "/2") != std::string::npos);
  }
}

TEST_CASE("three ranks per GPU: 14 cores cut 5, 5, 4, the larger parts first") {
  LaunchOptions o = dgx({{"policy", "exclusive"}, {"gpu", "3"}, {"ranks_per_gpu", "3"}});
  // GPU 3's share is cores 42-55.
  const CpuSet expected[] = {cores(42, 46), cores(47, 51), cores(52, 55)};
  CpuSet all;
  for (int part = 0; part < 3; ++part) {
    CAPTURE(part);
    LaunchOptions one = o;
    REQUIRE(gpuaff::set_option(one, "part", std::to_string(part)));
    auto p = plan_of(one);
    CHECK(p.cpus == expected[part]);
    CHECK_FALSE(p.cpus.intersects(all));  // disjoint
    all |= p.cpus;
    CHECK(p.memory_nodes == gpuaff::NodeSet{0});
  }
  CHECK(all == cores(42, 55));  // together the whole share
}

TEST_CASE("ranks_per_gpu with policy node cuts the node's 56 cores in halves; with share=machine too") {
  auto p = plan_of(dgx({{"gpu", "5"}, {"ranks_per_gpu", "2"}, {"part", "1"}}));
  // node policy: GPU 5's share is all of node 1 (cores 56-111); part 1 is cores 84-111.
  CHECK(p.gpu_share == cores(56, 111));
  CHECK(p.cpus == cores(84, 111));
  // share=machine (a process that sees GPU 6 only): its exclusive share is cores
  // 84-97 of the host's split; part 0 is 84-90.
  auto m = gpuaff::plan(dgx({{"gpu", "0"}, {"policy", "exclusive"}, {"share", "machine"}, {"ranks_per_gpu", "2"},
                             {"part", "0"}}),
                        env_of({{"CUDA_VISIBLE_DEVICES", "6"}}));
  REQUIRE_MESSAGE(m.has_value(), m.error().message());
  CHECK(m->gpu_share == cores(84, 97));
  CHECK(m->cpus == cores(84, 90));
}

TEST_CASE("split_share: whole cores only; a core's SMT siblings are never split between parts") {
  gpuaff::Topology t;
  for (int c = 0; c < 2; ++c) t.cores.push_back(gpuaff::Core{.threads = CpuSet{c, c + 2}});
  CpuSet share = CpuSet::range(0, 3);  // 2 cores of 2 threads: {0,2}, {1,3}
  auto two = gpuaff::split_share(t, share, 2);
  REQUIRE(two);
  CHECK(*two == std::vector<CpuSet>{CpuSet{0, 2}, CpuSet{1, 3}});
  // Three parts of two cores were cut by threads ({0, 2} | {1} | {3}): two
  // parts competed for core {1, 3}. Refused, naming what asked and what fits.
  for (int parts : {3, 4, 5}) {
    auto more = gpuaff::split_share(t, share, parts);
    REQUIRE_FALSE(more);
    CHECK(more.error().code() == Errc::insufficient_cores);
    std::string m(more.error().message());
    CHECK(m.find("ranks_per_gpu=" + std::to_string(parts) + ": the share 0-3 has 2 physical core(s)") == 0);
    CHECK(m.find("SMT siblings") != std::string::npos);
    CHECK(m.find("cut it in at most 2 part(s)") != std::string::npos);
  }
  auto named = gpuaff::split_share(t, share, 3, "domains_per_gpu=3");
  REQUIRE_FALSE(named);
  CHECK(named.error().message().find("domains_per_gpu=3: the share") == 0);
  // Without SMT there are no siblings to speak of.
  gpuaff::Topology flat;
  for (int c = 0; c < 2; ++c) flat.cores.push_back(gpuaff::Core{.threads = CpuSet{c}});
  auto one_thread = gpuaff::split_share(flat, CpuSet::range(0, 1), 3);
  REQUIRE_FALSE(one_thread);
  CHECK(one_thread.error().message().find("SMT") == std::string_view::npos);
}

TEST_CASE("ranks_per_gpu=28 on a 14-core share is refused; 14 ranks get a whole core each") {
  // dgx-h100, exclusive: GPU 3's share is cores 42-55 (28 threads). 28 ranks
  // got one thread each, two ranks on every core.
  auto many = gpuaff::plan(dgx({{"gpu", "3"}, {"policy", "exclusive"}, {"ranks_per_gpu", "28"}, {"part", "0"}}),
                           env_of({}));
  REQUIRE_FALSE(many);
  CHECK(many.error().code() == Errc::insufficient_cores);
  std::string m(many.error().message());
  CHECK(m.find("ranks_per_gpu=28: the share 42-55,154-167 has 14 physical core(s)") == 0);
  CHECK(m.find("SMT siblings") != std::string::npos);
  for (int part : {0, 13}) {
    auto p = plan_of(dgx({{"gpu", "3"}, {"policy", "exclusive"}, {"ranks_per_gpu", "14"}, {"part", std::to_string(part)}}));
    CHECK(p.cpus == cores(42 + part, 42 + part));
  }
  // Locality domains cut the same way, and a refusal names domains_per_gpu, the option given.
  auto domains = gpuaff::plan(dgx({{"gpu", "0"}, {"policy", "exclusive"}, {"domains_per_gpu", "16"}}), env_of({}));
  REQUIRE_FALSE(domains);
  std::string d(domains.error().message());
  CHECK(d.find("domains_per_gpu=16: the share 0-13,112-125 has 14 physical core(s)") == 0);
  CHECK(d.find("ranks_per_gpu") == std::string::npos);
}

TEST_CASE("ranks per GPU: the usage mistakes are named") {
  struct Case {
    std::map<std::string, std::string> options;
    std::map<std::string, std::string> env;
    const char* says;
  };
  const Case cases[] = {
      {{{"gpu", "1"}, {"ranks_per_gpu", "2"}}, {}, "ranks_per_gpu=2 needs part=P (0..1)"},
      {{{"gpu", "1"}, {"part", "1"}}, {}, "part=1 needs ranks_per_gpu=N above 1"},
      {{{"gpu", "1"}, {"ranks_per_gpu", "2"}, {"part", "2"}}, {}, "part=2 is not below ranks_per_gpu=2"},
      {{{"local_rank", "true"}, {"ranks_per_gpu", "2"}, {"part", "0"}}, {{"LOCAL_RANK", "0"}}, "leave part out"},
      // 12 ranks over 8 GPUs is no whole multiple: the old error, now naming ranks_per_gpu
      {{{"local_rank", "true"}}, {{"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "12"}}, "ranks_per_gpu=N"},
      {{{"local_rank", "true"}, {"ranks_per_gpu", "3"}}, {{"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "16"}},
       "LOCAL_WORLD_SIZE=16 (the launcher's processes on this machine) is not a multiple of ranks_per_gpu=3"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.says);
    LaunchOptions o = dgx({});
    bool set = true;
    for (const auto& [k, v] : c.options) set = set && gpuaff::set_option(o, k, v).has_value();
    REQUIRE(set);
    auto p = gpuaff::plan(o, env_of(c.env));
    REQUIRE_FALSE(p.has_value());
    CHECK(p.error().code() == Errc::invalid_argument);
    CHECK(p.error().message().find(c.says) != std::string_view::npos);
  }
}

TEST_CASE("a process that sees one GPU never guesses ranks per GPU from the local size") {
  // srun --gpus-per-task=1 with 2 tasks looks like MPS with 2 ranks on one GPU:
  // without ranks_per_gpu the old error stands (rank 1 has no GPU 1) ...
  LaunchOptions o = dgx({{"local_rank", "true"}});
  auto p = gpuaff::plan(o, env_of({{"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}, {"CUDA_VISIBLE_DEVICES", "2"}}));
  REQUIRE_FALSE(p.has_value());
  // ... and with it, rank 1 is part 1 of the one GPU (host GPU 2: node 0, node policy).
  REQUIRE(gpuaff::set_option(o, "ranks_per_gpu", "2"));
  auto two = gpuaff::plan(o, env_of({{"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}, {"CUDA_VISIBLE_DEVICES", "2"}}));
  REQUIRE_MESSAGE(two.has_value(), two.error().message());
  CHECK(two->part == 1);
  CHECK(two->cpus == cores(28, 55));
}

TEST_CASE("one process on 4 GPUs: the union of their shares and memory nodes") {
  // exclusive: GPUs 0-3 together hold all of node 0's 56 cores (14 each).
  auto four = plan_of(dgx({{"gpu", "0,1,2,3"}, {"policy", "exclusive"}}));
  CHECK(four.cpus == cores(0, 55));
  CHECK(four.memory_nodes == gpuaff::NodeSet{0});
  CHECK(four.more_visible_gpus == std::vector<int>{1, 2, 3});
  // GPUs 0 and 4 sit on both sockets: cores 0-13 and 56-69, memory over nodes 0 and 1,
  // and with nic_env both GPUs' NICs (mlx5_0 under GPU 0's switch, mlx5_6 under GPU 4's).
  auto two = plan_of(dgx({{"gpu", "0,4"}, {"policy", "exclusive"}, {"membind", "local"}, {"nic_env", "true"}}));
  CHECK(two.cpus == (cores(0, 13) | cores(56, 69)));
  CHECK(two.memory_nodes == gpuaff::NodeSet{0, 1});
  CHECK(two.nic_set == std::vector<std::string>{"mlx5_0:1", "mlx5_6:1"});
  CHECK(two.env == std::vector<std::pair<std::string, std::string>>{{"UCX_NET_DEVICES", "mlx5_0:1,mlx5_6:1"},
                                                                    {"NVSHMEM_HCA_LIST", "mlx5_0:1,mlx5_6:1"}});
  CHECK(gpuaff::plan_variable_value(two).find(" gpus=0,4") != std::string::npos);
  // share=machine in a container given host GPUs 4 and 5: visible 0,1 are host 4,5,
  // whose exclusive shares are cores 56-69 and 70-83.
  auto m = gpuaff::plan(dgx({{"gpu", "0,1"}, {"policy", "exclusive"}, {"share", "machine"}}),
                        env_of({{"CUDA_VISIBLE_DEVICES", "4,5"}}));
  REQUIRE_MESSAGE(m.has_value(), m.error().message());
  CHECK(m->cpus == cores(56, 83));
}

TEST_CASE("several GPUs per process: the mistakes are named") {
  LaunchOptions o;
  auto twice = gpuaff::set_option(o, "gpu", "0,4,0");
  REQUIRE_FALSE(twice);
  CHECK(twice.error().message().find("names GPU 0 twice") != std::string_view::npos);
  std::string long_list = "0";
  for (int g = 1; g < 100000; ++g) long_list += "," + std::to_string(g);  // a runaway script: refused at once
  auto too_many = gpuaff::set_option(o, "gpu", long_list);
  REQUIRE_FALSE(too_many);
  CHECK(too_many.error().message().find("more than 1024 GPUs") != std::string_view::npos);
  for (const char* bad : {"0,", ",4", "0,,4", "0,x"}) {
    CAPTURE(bad);
    CHECK_FALSE(gpuaff::set_option(o, "gpu", bad));
  }
  auto far = gpuaff::plan(dgx({{"gpu", "0,9"}}), env_of({}));
  REQUIRE_FALSE(far);
  CHECK(far.error().code() == Errc::not_found);
  CHECK(far.error().message().find("no GPU 9") != std::string_view::npos);
  LaunchOptions both = dgx({{"gpu", "0,4"}, {"ranks_per_gpu", "2"}, {"part", "0"}});
  auto p = gpuaff::plan(both, env_of({}));
  REQUIRE_FALSE(p);
  CHECK(p.error().message().find("use one of them") != std::string_view::npos);
}

TEST_CASE("mi300x-cpx: 64 GPUs, each an eighth of its device's share") {
  // fixtures/mi300x-cpx: 2x EPYC 9654, 96 cores each (SMT2: core c = CPUs c and
  // c+192), node 0 = cores 0-95 with devices 0-3, node 1 = cores 96-191 with
  // devices 4-7; every device in CPX mode: 8 GPUs each, 64 in all, device d's
  // partitions being GPUs 8d..8d+7 (HIP's numbering).
  auto mi = [](int a, int b) { return CpuSet::range(a, b) | CpuSet::range(a + 192, b + 192); };
  LaunchOptions o;
  REQUIRE(gpuaff::set_option(o, "root", gpuaff_test::fixture("mi300x-cpx")));
  auto t = gpuaff::load(o, env_of({}));
  REQUIRE_MESSAGE(t.has_value(), t.error().message());
  REQUIRE(t->gpus.size() == 64);
  CHECK(t->gpus[13].address().to_string().view() == "0000:26:00.0");  // device 1
  CHECK(t->gpus[13].partition == 5);
  // exclusive splits node 0's 96 cores among its 4 devices (24 each: device 1 has
  // cores 24-47), then GPU 13, partition 5 of device 1, gets 24 / 8 = 3 of them:
  // cores 24 + 15 .. 24 + 17.
  REQUIRE(gpuaff::set_option(o, "policy", "exclusive"));
  LaunchOptions g13 = o;
  REQUIRE(gpuaff::set_option(g13, "gpu", "13"));
  auto p = plan_of(g13);
  CHECK(p.cpus == mi(39, 41));
  CHECK(p.gpu_share == mi(24, 47));
  CHECK(p.part == 5);
  CHECK(p.ranks_per_gpu == 8);
  CHECK(p.memory_nodes == gpuaff::NodeSet{0});
  // The same from a launcher: 64 local ranks are the 64 GPUs (8 devices take part).
  LaunchOptions ranked = o;
  REQUIRE(gpuaff::set_option(ranked, "local_rank", "true"));
  auto r63 = plan_of(ranked, {{"LOCAL_RANK", "63"}, {"LOCAL_WORLD_SIZE", "64"}});
  // GPU 63: device 7, the last of node 1's four (cores 96 + 72 .. 191), partition 7: 189-191.
  CHECK(r63.cpus == mi(189, 191));
  CHECK(r63.visible_gpu == 63);
  // policy node shares the node: a partition gets what any GPU of node 0 gets,
  // its 96 cores (contract section 6; it was an eighth, 60-71, and GPU 0 and
  // GPU 8, partition 0 of devices 0 and 1, both got cores 0-11).
  LaunchOptions node = g13;
  REQUIRE(gpuaff::set_option(node, "policy", "node"));
  CHECK(plan_of(node).cpus == mi(0, 95));
  CHECK(plan_of(node).ranks_per_gpu == 1);
  LaunchOptions node8 = node;
  REQUIRE(gpuaff::set_option(node8, "gpu", "8"));
  CHECK(plan_of(node8).cpus == mi(0, 95));
  LaunchOptions socket = node;
  REQUIRE(gpuaff::set_option(socket, "policy", "socket"));
  REQUIRE(gpuaff::set_option(socket, "gpu", "40"));  // device 5, node 1
  CHECK(plan_of(socket).cpus == mi(96, 191));
  // partitions are GPUs already: ranks_per_gpu on one is a mistake
  LaunchOptions twice = g13;
  REQUIRE(gpuaff::set_option(twice, "ranks_per_gpu", "2"));
  REQUIRE(gpuaff::set_option(twice, "part", "0"));
  auto bad = gpuaff::plan(twice, env_of({}));
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message().find("(8 compute partitions), a GPU of its own: ranks_per_gpu=2 cannot cut it again; "
                                   "leave out ranks_per_gpu=N") != std::string_view::npos);
}

TEST_CASE("a JSON topology keeps the partitions; a garbled mode names its file") {
  LaunchOptions o;
  REQUIRE(gpuaff::set_option(o, "root", gpuaff_test::fixture("mi300x-cpx")));
  auto t = gpuaff::load(o, env_of({}));
  REQUIRE(t.has_value());
  auto back = gpuaff::topology_from_json(gpuaff::to_json(*t), "mi300x-cpx.json");
  REQUIRE_MESSAGE(back.has_value(), back.error().message());
  CHECK(back->host_gpus.size() == 64);
  CHECK(back->host_gpus[63].partition == 7);
  // A root whose mode file holds another word: the numbering depends on it.
  gpuaff_test::TempTree tree;
  std::filesystem::copy(gpuaff_test::fixture("mi300x-cpx"), tree.path("root"),
                        std::filesystem::copy_options::recursive | std::filesystem::copy_options::copy_symlinks);
  std::string file = tree.path("root") + "/sys/bus/pci/devices/0000:26:00.0/current_compute_partition";
  std::filesystem::remove(file);  // a link's target in the copy: write a fresh file in its place
  std::ofstream(file) << "XPX\n";
  LaunchOptions g;
  REQUIRE(gpuaff::set_option(g, "root", tree.path("root")));
  auto garbled = gpuaff::load(g, env_of({}));
  REQUIRE_FALSE(garbled);
  CHECK(garbled.error().code() == Errc::parse_error);
  CHECK(garbled.error().message().find("current_compute_partition") != std::string_view::npos);
  CHECK(garbled.error().message().find("'XPX'") != std::string_view::npos);
}

TEST_CASE("mi300x in DPX and QPX under a launcher: splitting policies cut each device's part, sharing ones do not") {
  // The mi300x root with every device's current_compute_partition rewritten:
  // DPX gives 2 GPUs per device (16 in all), QPX 4 (32). Node 0 = cores 0-95
  // (+192) with devices 0-3. exclusive splits node 0 among its 4 devices, 24
  // cores each (device d: 24d .. 24d+23), then the device's 24 among its
  // partitions: DPX 12 each, QPX 6 each. node gives every partition the
  // whole node, as any GPU of node 0 gets it.
  auto mi = [](int a, int b) { return CpuSet::range(a, b) | CpuSet::range(a + 192, b + 192); };
  for (const auto& mode_parts : {std::pair{"DPX", 2}, std::pair{"QPX", 4}}) {
    const char* mode = mode_parts.first;
    int parts = mode_parts.second;
    CAPTURE(mode);
    gpuaff_test::TempTree tree;
    std::filesystem::copy(gpuaff_test::fixture("mi300x"), tree.path("root"),
                          std::filesystem::copy_options::recursive | std::filesystem::copy_options::copy_symlinks);
    for (const char* dev : {"0000:05:00.0", "0000:26:00.0", "0000:46:00.0", "0000:65:00.0", "0000:85:00.0",
                            "0000:a6:00.0", "0000:c6:00.0", "0000:e5:00.0"}) {
      std::string file = tree.path("root") + "/sys/bus/pci/devices/" + dev + "/current_compute_partition";
      std::ofstream(file) << mode << "\n";
    }
    LaunchOptions o;
    REQUIRE(gpuaff::set_option(o, "root", tree.path("root")));
    REQUIRE(gpuaff::set_option(o, "local_rank", "true"));
    REQUIRE(gpuaff::set_option(o, "policy", "exclusive"));
    std::string size = std::to_string(8 * parts);
    // Local rank 5: device 5 / parts, partition 5 % parts.
    int device = 5 / parts, part = 5 % parts, width = 24 / parts;
    auto p = plan_of(o, {{"LOCAL_RANK", "5"}, {"LOCAL_WORLD_SIZE", size}});
    CHECK(p.visible_gpu == 5);
    CHECK(p.cpus == mi(24 * device + width * part, 24 * device + width * (part + 1) - 1));
    CHECK(p.ranks_per_gpu == parts);
    CHECK(p.part == part);
    // The last rank: device 7 (node 1's last, cores 96 + 72 .. 191), its last partition.
    auto last = plan_of(o, {{"LOCAL_RANK", std::to_string(8 * parts - 1)}, {"LOCAL_WORLD_SIZE", size}});
    CHECK(last.cpus == mi(192 - width, 191));
    REQUIRE(gpuaff::set_option(o, "policy", "node"));
    CHECK(plan_of(o, {{"LOCAL_RANK", "5"}, {"LOCAL_WORLD_SIZE", size}}).cpus == mi(0, 95));
    // One rank past the GPUs is named.
    auto beyond = gpuaff::plan(o, env_of({{"LOCAL_RANK", size}, {"LOCAL_WORLD_SIZE", size}}));
    CHECK_FALSE(beyond.has_value());
  }
}

TEST_CASE("topo --format json lists every GPU as bind numbers it, each partition with its device") {
  LaunchOptions o;
  REQUIRE(gpuaff::set_option(o, "root", gpuaff_test::fixture("mi300x-cpx")));
  auto t = gpuaff::load(o, env_of({}));
  REQUIRE(t.has_value());
  auto doc = nlohmann::json::parse(gpuaff::to_json(*t));
  REQUIRE(doc["gpus"].size() == 64);  // it listed the 8 devices, while bind took --gpu 63
  CHECK(doc["gpus"][13]["index"] == 13);
  CHECK(doc["gpus"][13]["bdf"] == "0000:26:00.0");
  CHECK(doc["gpus"][13]["partition"] == nlohmann::json{{"index", 5}, {"of", 8}});
  CHECK(doc["gpus"][63]["partition"]["index"] == 7);
  auto back = gpuaff::topology_from_json(doc.dump(), "mi300x-cpx.json");
  REQUIRE_MESSAGE(back.has_value(), back.error().message());
  CHECK(back->gpus == t->gpus);
  // A partition beyond its device's mode, or listed twice, is named.
  auto bad = doc;
  bad["gpus"][13]["partition"]["index"] = 8;
  CHECK_FALSE(gpuaff::topology_from_json(bad.dump(), "x.json").has_value());
  auto twice = doc;
  twice["gpus"][14]["partition"]["index"] = 5;
  auto t2 = gpuaff::topology_from_json(twice.dump(), "x.json");
  REQUIRE_FALSE(t2.has_value());
  CHECK(t2.error().message().find("partition 5 is listed twice") != std::string_view::npos);
}

// Locality domains (domains_per_gpu=N): sysfs shows one device; each GPU
// counts as N GPUs in a row, GPU g's domain k being unit g*N+k, and domain k
// gets part k of the GPU's share, cut on whole cores as ranks_per_gpu cuts it.
TEST_CASE("locality domains: 2 per DGX H100 GPU make 16 units, each half of its GPU's 14 cores") {
  for (int unit = 0; unit < 16; ++unit) {
    CAPTURE(unit);
    auto p = plan_of(dgx({{"gpu", std::to_string(unit)}, {"policy", "exclusive"}, {"domains_per_gpu", "2"}}));
    int gpu = unit / 2;
    // GPU g's share: cores 14g..14g+13; domain 0 the lower 7, domain 1 the upper 7.
    int first = 14 * gpu + 7 * (unit % 2);
    CHECK(p.cpus == cores(first, first + 6));
    CHECK(p.part == unit % 2);
    CHECK(p.ranks_per_gpu == 2);
    CHECK(p.node == (gpu < 4 ? 0 : 1));
  }
  // Under a launcher: 16 local ranks, one per domain (local size 16 = units, one rank each).
  LaunchOptions o = dgx({{"local_rank", "true"}, {"policy", "exclusive"}, {"domains_per_gpu", "2"}});
  auto p = plan_of(o, {{"LOCAL_RANK", "7"}, {"LOCAL_WORLD_SIZE", "16"}});
  CHECK(p.cpus == cores(49, 55));  // GPU 3 (cores 42-55), domain 1
  // The units count after visibility: CUDA_VISIBLE_DEVICES=2,3 leaves two GPUs
  // on node 0, which exclusive splits 28/28 (GPU 3: cores 28-55); unit 3 is
  // GPU 3's domain 1: cores 42-55.
  auto v = plan_of(dgx({{"gpu", "3"}, {"policy", "exclusive"}, {"domains_per_gpu", "2"}}),
                   {{"CUDA_VISIBLE_DEVICES", "2,3"}});
  CHECK(v.cpus == cores(42, 55));
  // Policy node: every domain cuts its GPU's node; GPU 4 (node 1, cores 56-111), domain 1: cores 84-111.
  auto n = plan_of(dgx({{"gpu", "9"}, {"domains_per_gpu", "2"}}));
  CHECK(n.cpus == cores(84, 111));
}

TEST_CASE("locality domains: the mistakes are named") {
  LaunchOptions o;
  auto many = gpuaff::set_option(o, "domains_per_gpu", "65");
  REQUIRE_FALSE(many.has_value());
  CHECK(many.error().message() == "domains_per_gpu=65 is more than 64 domains per GPU");
  auto zero = gpuaff::set_option(o, "domains_per_gpu", "0");
  CHECK_FALSE(zero.has_value());
  // 16 units: a 17th is no GPU, and the list says which domain each unit is.
  auto beyond = gpuaff::plan(dgx({{"gpu", "16"}, {"domains_per_gpu", "2"}}), env_of({}));
  REQUIRE_FALSE(beyond.has_value());
  CHECK(beyond.error().code() == Errc::not_found);
  CHECK(beyond.error().message().find("15 0000:df:00.0 (1/2)") != std::string::npos);
  // An AMD GPU in CPX mode is split already: its partitions are the units.
  LaunchOptions amd;
  REQUIRE(gpuaff::set_option(amd, "root", gpuaff_test::fixture("mi300x-cpx")));
  REQUIRE(gpuaff::set_option(amd, "domains_per_gpu", "2"));
  REQUIRE(gpuaff::set_option(amd, "gpu", "0"));
  auto cpx = gpuaff::plan(amd, env_of({}));
  REQUIRE_FALSE(cpx.has_value());
  CHECK(cpx.error().code() == Errc::invalid_argument);
  CHECK(cpx.error().message().find("compute partitions already") != std::string::npos);
  // Domains and ranks per GPU both cut the share: one of them.
  auto both = gpuaff::plan(dgx({{"gpu", "1"}, {"domains_per_gpu", "2"}, {"ranks_per_gpu", "2"}, {"part", "1"}}),
                           env_of({}));
  REQUIRE_FALSE(both.has_value());
  CHECK(both.error().code() == Errc::invalid_argument);
  // Named as the user made them: domains, not partitions.
  std::string b(both.error().message());
  CHECK(b.find("is domain 1 of 0000:") != std::string::npos);
  CHECK(b.find("(domains_per_gpu=2), a GPU of its own: ranks_per_gpu=2 cannot cut it again") != std::string::npos);
  CHECK(b.find("partition") == std::string::npos);
}

TEST_CASE("locality domains from a loaded machine equal the per-call plans") {
  LaunchOptions load_options;
  REQUIRE(gpuaff::set_option(load_options, "root", gpuaff_test::fixture("dgx-h100")));
  auto m = gpuaff::load_for_plans(load_options, env_of({}));
  REQUIRE(m.has_value());
  for (int unit : {0, 5, 10, 15}) {
    LaunchOptions o = load_options;
    REQUIRE(gpuaff::set_option(o, "gpu", std::to_string(unit)));
    REQUIRE(gpuaff::set_option(o, "policy", "exclusive"));
    REQUIRE(gpuaff::set_option(o, "domains_per_gpu", "2"));
    auto loaded = gpuaff::plan(*m, o, env_of({}));
    REQUIRE(loaded.has_value());
    CHECK(loaded->cpus == plan_of(o).cpus);
  }
}

TEST_CASE("two ranks per GPU on the GB200 tray and the MI300X (SPX): halves of each GPU's exclusive share") {
  struct Case {
    const char* fixture;
    int gpu, part;
    CpuSet expect;
  };
  // gb200-tray: Grace 0 = node 0 = CPUs 0-71 (no SMT) holds GPUs 0 and 1;
  // exclusive gives each 36 cores (GPU 1: 36-71), and two ranks cut 18/18.
  // mi300x (SPX): node 0 = cores 0-95 (+192) holds GPUs 0-3: 24 cores each
  // (GPU 1: 24-47), two ranks 12/12 with their SMT siblings.
  for (const Case& c : std::vector<Case>{
           {"gb200-tray", 0, 0, CpuSet::range(0, 17)},
           {"gb200-tray", 1, 1, CpuSet::range(54, 71)},
           {"mi300x", 0, 1, CpuSet::range(12, 23) | CpuSet::range(204, 215)},
           {"mi300x", 1, 0, CpuSet::range(24, 35) | CpuSet::range(216, 227)},
       }) {
    CAPTURE(c.fixture);
    CAPTURE(c.gpu);
    LaunchOptions o;
    REQUIRE(gpuaff::set_option(o, "root", gpuaff_test::fixture(c.fixture)));
    REQUIRE(gpuaff::set_option(o, "gpu", std::to_string(c.gpu)));
    REQUIRE(gpuaff::set_option(o, "policy", "exclusive"));
    REQUIRE(gpuaff::set_option(o, "ranks_per_gpu", "2"));
    REQUIRE(gpuaff::set_option(o, "part", std::to_string(c.part)));
    CHECK(plan_of(o).cpus == c.expect);
  }
}

// SPDX-License-Identifier: Apache-2.0
// doctor --nics's verdict (gpuaff/doctor/nic_traffic.hpp) on recorded counter
// sequences (tests/doctor/nic_counters/NAME.txt) for three fixtures, each
// rank's NIC set computed from the fixture (launch/nics.hpp) and checked
// against the set reasoned from the machine first; every expected finding is
// reasoned in the test case. Then the counter reader on a written root, and
// hostile sequences and counter files.
#include <gpuaff/doctor/nic_traffic.hpp>
#include <gpuaff/doctor/watch.hpp>
#include <gpuaff/launch/nics.hpp>
#include <gpuaff/source/sysfs.hpp>

#include <stdlib.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support/check.hpp"

using gpuaff::NicFinding;
using gpuaff::NicFindingKind;
using gpuaff::NicSample;
using gpuaff::RankNics;

namespace {

gpuaff::Topology load_fixture(const std::string& name) {
  gpuaff::SysfsOptions o{.root = gpuaff_test::fixture(name), .visible = {.use_environment = false}};
  auto t = gpuaff::SysfsSource(o).load();
  REQUIRE_MESSAGE(t.has_value(), t.error().message());
  return *t;
}

std::vector<NicSample> sequence(const std::string& name) {
  std::string text;
  std::string path = std::string(GPUAFF_SOURCE_DIR) + "/tests/doctor/nic_counters/" + name + ".txt";
  REQUIRE(gpuaff::detail::read_whole_file(path, text) == 0);
  auto s = gpuaff::parse_nic_sequence(text, path);
  REQUIRE_MESSAGE(s.has_value(), s.error().message());
  return *s;
}

/// Rank k drives GPU k; its planned set is the GPU's NIC set, "DEV:PORT".
std::vector<RankNics> ranks_of(const gpuaff::Topology& t) {
  std::vector<RankNics> out;
  for (const auto& g : t.gpus) {
    RankNics r{.rank = "LOCAL_RANK=" + std::to_string(g.index), .pid = 1000 + g.index};
    for (const gpuaff::Nic* n : gpuaff::nic_set_of(t, g).nics)
      r.planned.push_back(std::string(n->rdma_names.front().view()) + ":" + std::to_string(n->rdma_port));
    out.push_back(std::move(r));
  }
  return out;
}

gpuaff::NicTrafficOptions options_of(const gpuaff::Topology& t) {
  gpuaff::NicTrafficOptions o;
  for (const gpuaff::Nic* n : gpuaff::nic_rails(t))
    o.rails.push_back(std::string(n->rdma_names.front().view()) + ":" + std::to_string(n->rdma_port));
  return o;
}

/// "kind nic ranks [idle]" per finding, "(note)" for one that is no problem.
std::vector<std::string> summary(const gpuaff::NicTrafficReport& r) {
  std::vector<std::string> out;
  for (const NicFinding& f : r.findings) {
    std::string s = std::string(gpuaff::to_string(f.kind)) + " " + f.nic;
    for (const auto& k : f.ranks) s += " " + k;
    for (const auto& i : f.idle) s += " idle:" + i;
    if (!f.problem) s += " (note)";
    out.push_back(s);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("dgx-h100: a rank's traffic piled on its neighbour's NIC, then fixed") {
  // One ConnectX-7 under each GPU's switch (PIX), so GPU k's set is that one
  // NIC: mlx5_0, 3, 4, 5, 6, 9, 10, 11 by GPU; mlx5_1, 2, 7, 8 are the storage
  // and in-band ports, no GPU's rail.
  gpuaff::Topology t = load_fixture("dgx-h100");
  auto ranks = ranks_of(t);
  REQUIRE(ranks.size() == 8);
  const std::vector<std::string> rails{"mlx5_0:1", "mlx5_3:1", "mlx5_4:1", "mlx5_5:1",
                                       "mlx5_6:1", "mlx5_9:1", "mlx5_10:1", "mlx5_11:1"};
  for (std::size_t k = 0; k < 8; ++k) CHECK(ranks[k].planned == std::vector<std::string>{rails[k]});
  auto s = sequence("dgx-h100");
  REQUIRE(s.size() == 3);
  // 0 -> 10 s. Rank 1 carries UCX_NET_DEVICES=mlx5_0:1 (GPU 0's NIC), as on the
  // A3 Ultra hosts of DeepEP#466. Its own mlx5_3 moved 40 kB in 10 s (4 kB/s,
  // below the 1 MB/s idle line) while mlx5_0 moved 400 GB each way:
  // - idle_in_set mlx5_3, rank 1: in its set, idle, while it moves data (mlx5_0, which it uses, is busy);
  // - piled mlx5_0, ranks 0 and 1 (both use it: rank 0 by its plan, rank 1 by
  //   its variable) while mlx5_3 of rank 1's set is idle;
  // - outside_sets mlx5_1, a note: 1 GB/s on a port no rank plans or lists and
  //   no GPU's rail (storage traffic).
  // mlx5_2, 7, 8 are idle and in no set: nothing to say.
  ranks[1].listed = {"mlx5_0"};
  auto bad = gpuaff::judge_nic_traffic(s[0], s[1], ranks, options_of(t));
  CHECK(bad.seconds == doctest::Approx(10.0));
  CHECK(summary(bad) == std::vector<std::string>{"idle_in_set mlx5_3:1 LOCAL_RANK=1",
                                                 "outside_sets mlx5_1:1 (note)",
                                                 "piled mlx5_0:1 LOCAL_RANK=0 LOCAL_RANK=1 idle:mlx5_3:1"});
  CHECK_FALSE(bad.healthy());
  // Bytes are four times the counters' words: mlx5_0 moved 2 x 50e9 words each way.
  auto row0 = std::find_if(bad.nics.begin(), bad.nics.end(), [](const auto& n) { return n.nic == "mlx5_0:1"; });
  REQUIRE(row0 != bad.nics.end());
  CHECK(row0->tx == 400'000'000'000ULL);
  CHECK(row0->rx == 400'000'000'000ULL);
  CHECK(row0->owners == std::vector<std::string>{"LOCAL_RANK=0"});
  CHECK(row0->users == std::vector<std::string>{"LOCAL_RANK=0", "LOCAL_RANK=1"});
  // 10 -> 20 s, rank 1 restarted without the variable: each rail 200 GB each
  // way, only the storage note left: healthy.
  ranks[1].listed.clear();
  auto good = gpuaff::judge_nic_traffic(s[1], s[2], ranks, options_of(t));
  CHECK(summary(good) == std::vector<std::string>{"outside_sets mlx5_1:1 (note)"});
  CHECK(good.healthy());
  // The same counters with no planned process: shown, not judged.
  auto none = gpuaff::judge_nic_traffic(s[0], s[1], {}, options_of(t));
  CHECK(none.findings.empty());
  CHECK(none.nics.size() == 12);
}

TEST_CASE("b300-16nics: one plane of every GPU's two NICs carries everything") {
  // Each GPU's switch holds two NIC functions (PIX), mlx5_2k and mlx5_2k+1, and
  // no other GPU reaches them as near: GPU k's set is both. The sequence has
  // mlx5_2k moving 40 GB each way in 2 s and mlx5_2k+1 4 kB: every rank moves
  // data over its first NIC while its second idles, so eight idle_in_set, one
  // per rank; no port is used by two ranks (nothing piled) and every busy port
  // is in a set (nothing outside).
  gpuaff::Topology t = load_fixture("b300-16nics");
  auto ranks = ranks_of(t);
  REQUIRE(ranks.size() == 8);
  std::vector<std::string> expected;
  for (int k = 0; k < 8; ++k) {
    CHECK(ranks[static_cast<std::size_t>(k)].planned ==
          std::vector<std::string>{"mlx5_" + std::to_string(2 * k) + ":1", "mlx5_" + std::to_string(2 * k + 1) + ":1"});
    expected.push_back("idle_in_set mlx5_" + std::to_string(2 * k + 1) + ":1 LOCAL_RANK=" + std::to_string(k));
  }
  std::sort(expected.begin(), expected.end());
  auto s = sequence("b300-16nics");
  REQUIRE(s.size() == 2);
  auto r = gpuaff::judge_nic_traffic(s[0], s[1], ranks, options_of(t));
  CHECK(summary(r) == expected);
  CHECK_FALSE(r.healthy());
  CHECK(r.nics.size() == 16);
}

TEST_CASE("p4d.24xlarge-efa: two ranks share each EFA by plan; a reset counter is not judged") {
  // GPUs 2k and 2k+1 share EFA k on their root bus (PHB), their only nearest
  // RDMA device, so ranks 2k and 2k+1 both have the set {EFA k}. The EFA
  // driver's hw_counters count bytes (no factor 4). rdmap16s27, rdmap32s27 and
  // rdmap144s27 each move 100 GB: used by two ranks each, but no port of those
  // ranks' sets is idle, so nothing is piled (sharing is the plan). rdmap160s27's
  // counters went backwards: a note, not judged, so ranks 6 and 7 get no
  // finding. No problem: healthy.
  gpuaff::Topology t = load_fixture("p4d.24xlarge-efa");
  auto ranks = ranks_of(t);
  REQUIRE(ranks.size() == 8);
  const std::vector<std::string> efa{"rdmap16s27:1", "rdmap32s27:1", "rdmap144s27:1", "rdmap160s27:1"};
  for (std::size_t k = 0; k < 8; ++k) CHECK(ranks[k].planned == std::vector<std::string>{efa[k / 2]});
  auto s = sequence("p4d.24xlarge-efa");
  auto r = gpuaff::judge_nic_traffic(s[0], s[1], ranks, options_of(t));
  CHECK(r.findings.empty());
  CHECK(r.healthy());
  REQUIRE(r.nics.size() == 3);
  CHECK(r.nics[0].nic == "rdmap144s27:1");  // by name
  CHECK(r.nics[0].tx == 100'000'000'000ULL);
  CHECK(r.nics[0].source == "hw_counters/tx_bytes");
  CHECK(r.nics[2].users == std::vector<std::string>{"LOCAL_RANK=2", "LOCAL_RANK=3"});
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0].find("rdmap160s27:1: a counter went backwards") != std::string::npos);
}

/// "kind nic ranks" per event of doctor --watch --nics, in the order given.
std::vector<std::string> event_summary(const std::vector<gpuaff::WatchEvent>& ev) {
  std::vector<std::string> out;
  for (const auto& e : ev) {
    std::string s = std::string(gpuaff::to_string(e.kind)) + " " + e.nic;
    for (const auto& k : e.ranks) s += " " + k;
    out.push_back(s);
  }
  return out;
}

TEST_CASE("doctor --watch --nics: a NIC problem is an event when it appears and when it clears") {
  // dgx-h100's sequence fed one sample per watch interval, with the ranks of
  // the first test case (rank 1 lists mlx5_0 through UCX_NET_DEVICES).
  gpuaff::Topology t = load_fixture("dgx-h100");
  auto ranks = ranks_of(t);
  ranks[1].listed = {"mlx5_0"};
  auto s = sequence("dgx-h100");
  REQUIRE(s.size() == 3);
  gpuaff::NicWatch w{.options = options_of(t)};
  // First interval: one sample, nothing to compare it with: no event, no verdict.
  CHECK(w.step(s[0], ranks).empty());
  CHECK_FALSE(w.report.has_value());
  // Second (0 -> 10 s): the two problems reasoned in the first test case, in
  // the verdict's order (idle_in_set first, then piled); mlx5_1's storage
  // traffic is a note, not an event.
  auto bad = w.step(s[1], ranks);
  CHECK(event_summary(bad) == std::vector<std::string>{"nic_idle_in_set mlx5_3:1 LOCAL_RANK=1",
                                                       "nic_piled mlx5_0:1 LOCAL_RANK=0 LOCAL_RANK=1"});
  REQUIRE(bad.size() == 2);
  CHECK(bad[0].pid == 0);
  CHECK(bad[0].gpu == -1);
  CHECK(bad[1].rank == "LOCAL_RANK=0,LOCAL_RANK=1");
  REQUIRE(w.report.has_value());
  CHECK_FALSE(w.report->healthy());
  // The same problems again in a later interval would be no news: replaying
  // 0 -> 10 s as a fresh watch's second interval after a first at 10 s is not
  // possible (times must increase), so the persistence is checked with the
  // counters shifted: s[1] -> s[1] + the same words again gives the same verdict.
  gpuaff::NicSample again = s[1];
  again.at = 20;
  for (auto& [port, b] : again.ports) {
    const auto& b0 = s[0].ports.at(port);
    b.tx += b.tx - b0.tx;
    b.rx += b.rx - b0.rx;
  }
  gpuaff::NicWatch w2{.options = options_of(t)};
  CHECK(w2.step(s[0], ranks).empty());
  CHECK(w2.step(s[1], ranks).size() == 2);
  CHECK(w2.step(again, ranks).empty());
  // Third interval (10 -> 20 s), rank 1 restarted without the variable: every
  // rail busy, both problems cleared, each one event, in the order found.
  ranks[1].listed.clear();
  auto good = w.step(s[2], ranks);
  CHECK(event_summary(good) == std::vector<std::string>{"nic_cleared mlx5_3:1 LOCAL_RANK=1",
                                                        "nic_cleared mlx5_0:1 LOCAL_RANK=0 LOCAL_RANK=1"});
  CHECK(w.open.empty());
  CHECK(w.report->healthy());
}

TEST_CASE("doctor --watch --nics: a port this interval cannot judge keeps its problem open") {
  // b300-16nics: the second sample gives eight idle_in_set (the second test
  // case's reasoning), one per rank on mlx5_2k+1. A third sample at 4 s where
  // mlx5_1's counters went backwards (a driver reload) leaves mlx5_1 unjudged:
  // its problem is neither cleared nor reported again. Every other port moves
  // nothing more in 2 s, so no rank moves data: the seven other idle_in_set
  // clear.
  gpuaff::Topology t = load_fixture("b300-16nics");
  auto ranks = ranks_of(t);
  auto s = sequence("b300-16nics");
  REQUIRE(s.size() == 2);
  gpuaff::NicWatch w{.options = options_of(t)};
  CHECK(w.step(s[0], ranks).empty());
  CHECK(w.step(s[1], ranks).size() == 8);
  gpuaff::NicSample later = s[1];
  later.at = s[1].at + 2;
  later.ports.at("mlx5_1:1").tx = 0;
  auto ev = w.step(later, ranks);
  CHECK(ev.size() == 7);
  for (const auto& e : ev) {
    CHECK(e.kind == gpuaff::WatchEventKind::nic_cleared);
    CHECK(e.nic != "mlx5_1:1");
  }
  REQUIRE(w.open.size() == 1);
  CHECK(w.open[0].nic == "mlx5_1:1");
}

TEST_CASE("NCCL_IB_HCA and the libraries' lists as the ranks' NICs") {
  const std::vector<std::string> known{"mlx5_0", "mlx5_1", "mlx5_10", "mlx5_11", "mlx5_2"};
  using V = std::vector<std::string>;
  // A prefix selects every device it starts (NCCL's documented matching); "=" exact names; "^" excludes.
  CHECK(gpuaff::nccl_hca_devices("mlx5_1", known) == V{"mlx5_1", "mlx5_10", "mlx5_11"});
  CHECK(gpuaff::nccl_hca_devices("=mlx5_1:1", known) == V{"mlx5_1"});
  CHECK(gpuaff::nccl_hca_devices("^=mlx5_1,mlx5_2", known) == V{"mlx5_0", "mlx5_10", "mlx5_11"});
  CHECK(gpuaff::nccl_hca_devices("", known).empty());
  std::vector<std::string> notes;
  std::map<std::string, std::string> vars{{"UCX_NET_DEVICES", "mlx5_2:1"}, {"NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1"}};
  // The NCCL list names 2 devices, more than the rank's 1: a menu, left out with a note.
  CHECK(gpuaff::rank_listed_nics(vars, known, 1, &notes) == V{"mlx5_2"});
  CHECK(notes.size() == 1);
  CHECK(gpuaff::rank_listed_nics(vars, known, 2) == V{"mlx5_0", "mlx5_1", "mlx5_2"});
  CHECK(gpuaff::rank_listed_nics({{"UCX_NET_DEVICES", "all"}}, known, 1).empty());
}

TEST_CASE("the counter reader on a root: port_xmit_data x4, EFA's bytes, garbage named") {
  char dir[] = "/tmp/gpuaff-nic-counters-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  std::string root = dir;
  auto write = [&](const std::string& rel, const std::string& text) {
    std::string path = root + "/sys/class/infiniband/" + rel;
    REQUIRE(gpuaff::detail::make_directories(path.substr(0, path.rfind('/'))) == 0);
    REQUIRE(gpuaff::detail::write_whole_file(path, text) == 0);
  };
  write("mlx5_0/ports/1/counters/port_xmit_data", "100\n");
  write("mlx5_0/ports/1/counters/port_rcv_data", "7\n");
  write("efa_0/ports/1/hw_counters/tx_bytes", "123456\n");
  write("efa_0/ports/1/hw_counters/rx_bytes", "654321\n");
  write("bad_0/ports/1/counters/port_xmit_data", "0x10\n");
  write("bad_0/ports/1/counters/port_rcv_data", "1\n");
  write("big_0/ports/1/counters/port_xmit_data", "99999999999999999999999\n");  // past 2^64
  write("big_0/ports/1/counters/port_rcv_data", "1\n");
  write("none_0/ports/1/counters/symbol_error", "0\n");
  NicSample s = gpuaff::sample_nic_counters(root, 5.0);
  CHECK(s.at == 5.0);
  REQUIRE(s.ports.size() == 2);
  CHECK(s.ports["mlx5_0:1"].tx == 400);
  CHECK(s.ports["mlx5_0:1"].rx == 28);
  CHECK(s.ports["efa_0:1"].tx == 123456);
  CHECK(s.ports["efa_0:1"].rx == 654321);
  REQUIRE(s.notes.size() == 3);
  CHECK(s.notes[0].find("bad_0:1: counters/port_xmit_data holds '0x10'") != std::string::npos);
  CHECK(s.notes[1].find("big_0:1") != std::string::npos);
  CHECK(s.notes[2].find("none_0:1: no byte counters") != std::string::npos);
  // A machine without sys/class/infiniband: no port, no error.
  CHECK(gpuaff::sample_nic_counters(root + "/sys/class/infiniband/mlx5_0", 0).ports.empty());
  std::string rm = "rm -rf '" + root + "'";
  CHECK(std::system(rm.c_str()) == 0);
}

TEST_CASE("hostile counter sequences: clear errors naming the line") {
  auto err = [](const char* text) {
    auto r = gpuaff::parse_nic_sequence(text, "x.txt");
    REQUIRE_FALSE(r.has_value());
    return std::string(r.error().message());
  };
  CHECK(err("sample 0\n").find("holds 1 sample(s)") != std::string::npos);
  CHECK(err("mlx5_0/ports/1/counters/port_xmit_data 1\n").find("line 1: a counter before the first") != std::string::npos);
  CHECK(err("sample zero\n").find("line 1: 'sample' takes the time") != std::string::npos);
  CHECK(err("sample 5\nsample 5\n").find("line 2: the samples' times must increase") != std::string::npos);
  CHECK(err("sample 0\n../../etc/passwd/ports/x 1\n").find("line 2:") != std::string::npos);
  CHECK(err("sample 0\nmlx5_0/ports/1/counters/port_xmit_data\n").find("is not 'DEV/ports/N/FILE VALUE'") !=
        std::string::npos);
  // Garbage counters are notes of the sample, not errors; a zero interval judges nothing.
  auto ok = gpuaff::parse_nic_sequence("sample 0\nm/ports/1/counters/port_xmit_data -5\nm/ports/1/counters/port_rcv_data 1\n"
                                       "sample 1\n", "y");
  REQUIRE(ok.has_value());
  CHECK((*ok)[0].ports.empty());
  CHECK((*ok)[0].notes.size() == 1);
  NicSample a, b;
  a.ports["m:1"] = {.tx = 1, .rx = 1};
  b.ports["m:1"] = {.tx = 2, .rx = 2};
  auto r = gpuaff::judge_nic_traffic(a, b, {});
  CHECK(r.nics.empty());
  CHECK(r.notes.back().find("not apart in time") != std::string::npos);
}

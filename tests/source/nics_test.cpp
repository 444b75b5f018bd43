// SPDX-License-Identifier: Apache-2.0
// NICs near each GPU (source/nics.hpp), the --nic-env choice (launch/nics.hpp),
// GPU memory nodes, the JSON form and the recorder round trip. Expected
// classes and choices are reasoned from the published topology of each
// fixture (fixtures/README.md cites it), not copied from the code's output.
#include <gpuaff/launch/nics.hpp>
#include <gpuaff/launch/plan.hpp>
#include <gpuaff/record/record.hpp>
#include <gpuaff/source/json.hpp>
#include <gpuaff/source/nics.hpp>
#include <gpuaff/source/sysfs.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "support/check.hpp"
#include "tree.hpp"

using gpuaff::Errc;
using gpuaff::Gpu;
using gpuaff::Nic;
using gpuaff::NicPath;
using gpuaff::PciAddress;
using gpuaff::PciPath;
using gpuaff::SysfsOptions;
using gpuaff::SysfsSource;
using gpuaff::Topology;
using gpuaff::detail::classify_path;
using gpuaff::detail::pci_chain;

namespace {

Topology load(const std::string& name, const char* cuda_visible = nullptr) {
  SysfsOptions o{.root = gpuaff_test::fixture(name), .visible = {.use_environment = false}};
  if (cuda_visible != nullptr) o.visible.cuda_visible_devices = cuda_visible;
  auto t = SysfsSource(o).load();
  REQUIRE_MESSAGE(t.has_value(), t.error().message());
  return *t;
}

PciAddress bdf(const char* s) { return PciAddress::parse(s).value(); }

Nic make_nic(const char* address, const std::string& rdma, std::string_view net) {
  Nic n;
  n.address = bdf(address);
  n.numa_node = 0;
  if (!rdma.empty()) n.rdma_names.emplace_back(rdma);
  if (!net.empty()) n.net_names.emplace_back(net);
  return n;
}

/// The first name of a NIC (its RDMA name where it has one, else its CXI name).
std::string name_of(const Topology& t, const PciAddress& a) {
  const Nic* n = t.find_nic(a);
  REQUIRE(n != nullptr);
  if (!n->rdma_names.empty()) return std::string(n->rdma_names.front().view());
  if (!n->cxi_names.empty()) return std::string(n->cxi_names.front().view());
  return n->net_names.empty() ? std::string() : std::string(n->net_names.front().view());
}

/// The path class from GPU `g` to the NIC named `nic`.
PciPath path_to(const Topology& t, int g, const std::string& nic) {
  for (const auto& np : t.gpus[static_cast<std::size_t>(g)].nics)
    if (name_of(t, np.nic) == nic) return np.path;
  FAIL("GPU ", g, " has no NIC ", nic);
  return PciPath::sys;
}

/// The NIC set of each GPU of the process, as "mlx5_0 mlx5_1" ("-": none).
std::vector<std::string> chosen(const Topology& t) {
  std::vector<std::string> out;
  for (const auto& g : t.gpus) {
    std::string names;
    for (const Nic* n : gpuaff::nic_set_of(t, g).nics) names += (names.empty() ? "" : " ") + name_of(t, n->address);
    out.push_back(names.empty() ? std::string("-") : names);
  }
  return out;
}

}  // namespace

TEST_CASE("path classes from bridge chains, as nvidia-smi topo -m names them") {
  // A PCIe switch: root port 15:01.0, upstream port 16:00.0, downstream ports 17:00.0, 17:01.0.
  auto nic = pci_chain("sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0");
  auto gpu = pci_chain("sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:1b:00.0");
  REQUIRE(nic.has_value());
  CHECK(nic->host == "sys/devices/pci0000:15");
  CHECK(nic->chain.size() == 4);
  // Both one downstream port below the same switch: one switch crossed.
  CHECK(classify_path(gpu, 0, nic, 0) == PciPath::pix);
  // A second switch below downstream port 17:02.0: the GPU is three bridges below the common one.
  auto deep = pci_chain("sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:02.0/0000:20:00.0/0000:21:00.0/"
                        "0000:22:00.0");
  CHECK(classify_path(deep, 0, nic, 0) == PciPath::pxb);
  // Another root port of the same host bridge: nothing in common below the host bridge.
  auto other_port = pci_chain("sys/devices/pci0000:15/0000:15:02.0/0000:30:00.0");
  CHECK(classify_path(other_port, 0, nic, 0) == PciPath::phb);
  // Devices straight on a root bus (VMs): PHB too.
  CHECK(classify_path(pci_chain("sys/devices/pci0000:00/0000:00:03.0"), -1, pci_chain("sys/devices/pci0000:00/0000:00:04.0"),
                      -1) == PciPath::phb);
  // Another host bridge: NODE on the same node, SYS across nodes.
  auto far = pci_chain("sys/devices/pci0000:97/0000:97:01.0/0000:9a:00.0");
  CHECK(classify_path(far, 0, nic, 0) == PciPath::node);
  CHECK(classify_path(far, 1, nic, 0) == PciPath::sys);
  // Hyper-V puts the host bridge below the VMBus device.
  auto vmbus = pci_chain("sys/devices/LNXSYSTM:00/LNXSYBUS:00/PNP0A03:00/device:07/VMBUS:01/x/pci0001:00/0001:00:00.0");
  REQUIRE(vmbus.has_value());
  CHECK(vmbus->host.ends_with("pci0001:00"));
  // No host bridge in the path (a root without the links): the NUMA node decides.
  CHECK_FALSE(pci_chain("sys/bus/pci/devices/0000:18:00.0").has_value());
  CHECK(classify_path(std::nullopt, 0, nic, 0) == PciPath::node);
  CHECK(classify_path(std::nullopt, 0, nic, 1) == PciPath::sys);
}

TEST_CASE("dgx-h100: each GPU's compute NIC is PIX, the socket's others NODE, the other socket's SYS") {
  // DGX H100 user guide: GPU k shares a PCIe switch with compute NIC k
  // (mlx5_0, 3, 4, 5 on socket 0; mlx5_6, 9, 10, 11 on socket 1); every PCIe
  // stack has its own host bridge, so a NIC under another stack of the same
  // socket is NODE (storage NICs mlx5_1, 2 on socket 0 and mlx5_7, 8 on
  // socket 1 included), and one of the other socket SYS. The onboard management
  // port (enp12s0, no RDMA name) has its own root port on socket 0.
  Topology t = load("dgx-h100");
  REQUIRE(t.gpus.size() == 8);
  REQUIRE(t.nics.size() == 13);
  const std::vector<std::string> compute{"mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5",
                                         "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"};
  const std::vector<std::string> storage{"mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"};
  for (int g = 0; g < 8; ++g) {
    CAPTURE(g);
    int socket = g / 4;
    const auto& near = t.gpus[static_cast<std::size_t>(g)].nics;
    REQUIRE(near.size() == 13);
    CHECK(path_to(t, g, "enp12s0") == (socket == 0 ? PciPath::node : PciPath::sys));
    CHECK(name_of(t, near.front().nic) == compute[static_cast<std::size_t>(g)]);
    CHECK(near.front().path == PciPath::pix);
    for (int k = 0; k < 8; ++k) {
      if (k == g) continue;
      CHECK(path_to(t, g, compute[static_cast<std::size_t>(k)]) == (k / 4 == socket ? PciPath::node : PciPath::sys));
    }
    for (int s = 0; s < 4; ++s)
      CHECK(path_to(t, g, storage[static_cast<std::size_t>(s)]) == (s / 2 == socket ? PciPath::node : PciPath::sys));
    // nearest first: the classes never go back to a nearer one
    for (std::size_t i = 1; i < near.size(); ++i) CHECK(near[i - 1].path <= near[i].path);
  }
  // The names of the user guide's port table, both kinds.
  const Nic* n0 = t.find_nic(bdf("0000:18:00.0"));
  REQUIRE(n0 != nullptr);
  CHECK(n0->numa_node == 0);
  REQUIRE(n0->rdma_names.size() == 1);
  CHECK(n0->rdma_names[0].view() == "mlx5_0");
  REQUIRE(n0->net_names.size() == 1);
  CHECK(n0->net_names[0].view() == "ibp24s0");
  // NIC sets: every GPU its own compute NIC, alone under its switch (the storage
  // NICs are never nearest; the management port has no RDMA name).
  CHECK(chosen(t) == compute);
  // The rails are the eight compute NICs; each other NIC says why it is not one.
  std::vector<std::string> rails;
  for (const Nic* n : gpuaff::nic_rails(t)) rails.push_back(name_of(t, n->address));
  CHECK(rails == std::vector<std::string>{"mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"});
  for (const auto& n : t.nics) {
    std::string name = name_of(t, n.address);
    CAPTURE(name);
    bool rail = std::find(rails.begin(), rails.end(), name) != rails.end();
    std::string why(gpuaff::not_a_rail(t, n));
    if (rail) CHECK(why.empty());
    else if (name == "enp12s0") CHECK(why.find("no RDMA (sys/class/infiniband) or CXI device") != std::string::npos);
    else CHECK(why.find("every GPU has a nearer RDMA NIC") != std::string::npos);
  }
}

TEST_CASE("--nic-env is decided by the visible GPU, whatever else is visible") {
  // CUDA_VISIBLE_DEVICES=5,6: visible GPU 0 is bus c3 (its switch holds mlx5_9), GPU 1 is d1 (mlx5_10).
  Topology t = load("dgx-h100", "5,6");
  REQUIRE(t.gpus.size() == 2);
  CHECK(chosen(t) == std::vector<std::string>{"mlx5_9", "mlx5_10"});
  // By default UCX and NVSHMEM get the set and NCCL_IB_HCA is left to NCCL.
  auto env = gpuaff::nic_environment(t, 1);
  REQUIRE(env.has_value());
  CHECK(*env == std::vector<std::pair<std::string, std::string>>{{"UCX_NET_DEVICES", "mlx5_10:1"},
                                                                 {"NVSHMEM_HCA_LIST", "mlx5_10:1"}});
  // nccl-set: the GPU's own set, "=" for exact names; nccl-rails: every compute
  // NIC of the machine (the storage NICs mlx5_1, 2, 7, 8 left out), whatever is visible.
  auto set = gpuaff::nic_environment(t, 1, gpuaff::nic_lib_nccl_set);
  REQUIRE(set.has_value());
  CHECK(*set == std::vector<std::pair<std::string, std::string>>{{"NCCL_IB_HCA", "=mlx5_10:1"}});
  // Each compute NIC is its GPU's whole set: host GPU k (bus order) is rail k,
  // plane 0 (CUDA_VISIBLE_DEVICES changes nothing: the rails are the host's).
  auto rails = gpuaff::nic_environment(t, 1, gpuaff::nic_lib_nccl_rails | gpuaff::nic_lib_ucx);
  REQUIRE(rails.has_value());
  CHECK(*rails == std::vector<std::pair<std::string, std::string>>{
                      {"NCCL_IB_HCA", "=mlx5_0:1:0:0,mlx5_3:1:1:0,mlx5_4:1:2:0,mlx5_5:1:3:0,mlx5_6:1:4:0,mlx5_9:1:5:0,"
                                      "mlx5_10:1:6:0,mlx5_11:1:7:0"},
                      {"NCCL_NET_MERGE_POLICY", "RAIL"},
                      {"UCX_NET_DEVICES", "mlx5_10:1"}});
}

namespace {

/// One NCCL_IB_HCA entry as NCCL reads it.
struct HcaEntry {
  std::string name;
  int port = -1, rail = -1, plane = -1;
  bool operator==(const HcaEntry&) const = default;
};

/// NCCL_IB_HCA read by the rules of NCCL 2.30.5 (docs/userguide env.rst,
/// src/misc/utils.cc parseStringList, src/transport/net_ib/init.cc): a
/// leading "^" then "=" are flags; entries split at ","; each at ":" into
/// `<hca>[:<port>[:<rail>[:<plane>]]]`, an empty or absent field -1; an entry
/// with an empty name is skipped; at most 32 entries.
std::vector<HcaEntry> nccl_2_30_read(std::string_view v) {
  if (!v.empty() && v.front() == '^') v.remove_prefix(1);
  if (!v.empty() && v.front() == '=') v.remove_prefix(1);
  std::vector<HcaEntry> out;
  auto field = [](std::string_view f) { return f.empty() ? -1 : std::stoi(std::string(f)); };
  while (!v.empty() && out.size() < 32) {
    std::string_view entry = v.substr(0, v.find(','));
    v.remove_prefix(std::min(v.size(), entry.size() + 1));
    std::vector<std::string_view> parts;
    for (std::size_t at = 0;;) {
      std::size_t colon = entry.find(':', at);
      parts.push_back(entry.substr(at, colon == std::string_view::npos ? std::string_view::npos : colon - at));
      if (colon == std::string_view::npos) break;
      at = colon + 1;
    }
    if (parts[0].empty()) continue;
    HcaEntry e{std::string(parts[0])};
    if (parts.size() > 1) e.port = field(parts[1]);
    if (parts.size() > 2) e.rail = field(parts[2]);
    if (parts.size() > 3) e.plane = field(parts[3]);
    out.push_back(e);
  }
  return out;
}

/// The same value read by a release before 2.30.5 (src/misc/utils.cc
/// parseStringList then): the name up to ":", the port by atoi of what
/// follows, the rest of the entry skipped.
std::vector<HcaEntry> nccl_older_read(std::string_view v) {
  if (!v.empty() && (v.front() == '^' || v.front() == '=')) v.remove_prefix(1);
  std::vector<HcaEntry> out;
  while (!v.empty()) {
    std::string_view entry = v.substr(0, v.find(','));
    v.remove_prefix(std::min(v.size(), entry.size() + 1));
    std::size_t colon = entry.find(':');
    HcaEntry e{std::string(entry.substr(0, colon))};
    if (colon != std::string_view::npos) e.port = std::atoi(std::string(entry.substr(colon + 1)).c_str());
    if (!e.name.empty()) out.push_back(e);
  }
  return out;
}

std::string hca_value(const Topology& t, int gpu) {
  auto env = gpuaff::nic_environment(t, gpu, gpuaff::nic_lib_nccl_rails);
  REQUIRE_MESSAGE(env.has_value(), env.error().message());
  REQUIRE(env->size() == 2);
  CHECK((*env)[1] == std::pair<std::string, std::string>{"NCCL_NET_MERGE_POLICY", "RAIL"});
  return (*env)[0].second;
}

}  // namespace

TEST_CASE("nccl-rails: rail and plane as NCCL 2.30.5 reads them, and what an older release makes of them") {
  // NCCL's own documented example reads as the docs say (our reader is right).
  CHECK(nccl_2_30_read("=mlx5_0:1:0:0,mlx5_1:1:0:1") == std::vector<HcaEntry>{{"mlx5_0", 1, 0, 0}, {"mlx5_1", 1, 0, 1}});
  CHECK(nccl_2_30_read("=mlx5_0::0:0") == std::vector<HcaEntry>{{"mlx5_0", -1, 0, 0}});
  // An empty port reads as port 0 in an older release: a port no device has.
  CHECK(nccl_older_read("=mlx5_0::0:0") == std::vector<HcaEntry>{{"mlx5_0", 0}});

  // b300-16nics: GPU k's set is mlx5_2k, mlx5_2k+1 (its switch's two functions):
  // one rail per GPU, the two functions its planes 0 and 1 by address.
  Topology b300 = load("b300-16nics");
  std::vector<HcaEntry> expected;
  for (int k = 0; k < 8; ++k) {
    expected.push_back({"mlx5_" + std::to_string(2 * k), 1, k, 0});
    expected.push_back({"mlx5_" + std::to_string(2 * k + 1), 1, k, 1});
  }
  std::string value = hca_value(b300, 3);
  CHECK(value.front() == '=');
  CHECK(nccl_2_30_read(value) == expected);
  // An older release selects the same sixteen NICs on the same port and
  // ignores rail and plane: nothing misread, the identity just unused.
  std::vector<HcaEntry> names_ports;
  for (const auto& e : expected) names_ports.push_back({e.name, e.port});
  CHECK(nccl_older_read(value) == names_ports);
  // The same value whichever GPU the rank serves: it describes the node.
  CHECK(hca_value(b300, 0) == value);

  // dgx-h100: one NIC per GPU, so rail k plane 0; two nodes of one shape (the
  // same machine read whole, through a JSON topology, and by a process that
  // sees GPUs 5 and 6 only) give every NIC the same identity.
  Topology h = load("dgx-h100");
  auto ids = gpuaff::rail_identities(h);
  REQUIRE(ids.size() == 8);
  const std::vector<std::string> compute{"mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5",
                                         "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"};
  for (int k = 0; k < 8; ++k) {
    CHECK(name_of(h, ids[static_cast<std::size_t>(k)].nic->address) == compute[static_cast<std::size_t>(k)]);
    CHECK(ids[static_cast<std::size_t>(k)].rail == k);
    CHECK(ids[static_cast<std::size_t>(k)].plane == 0);
  }
  auto other = gpuaff::topology_from_json(gpuaff::to_json(h), "node2.json");
  REQUIRE(other.has_value());
  CHECK(hca_value(*other, 4) == hca_value(h, 4));
  CHECK(hca_value(load("dgx-h100", "5,6"), 0) == hca_value(h, 0));
  // The storage NICs are no rail: no identity.
  const Nic* storage = h.find_nic(bdf("0000:29:00.0"));
  REQUIRE(storage != nullptr);
  CHECK(gpuaff::rail_identity_of(ids, storage).rail == -1);

  // p4d.24xlarge-efa: GPUs 2k and 2k+1 share EFA k, one set counted once:
  // four rails, plane 0 each.
  CHECK(nccl_2_30_read(hca_value(load("p4d.24xlarge-efa"), 0)) ==
        std::vector<HcaEntry>{{"rdmap16s27", 1, 0, 0}, {"rdmap32s27", 1, 1, 0}, {"rdmap144s27", 1, 2, 0},
                              {"rdmap160s27", 1, 3, 0}});
}

TEST_CASE("nccl-rails refuses a list longer than NCCL reads") {
  // 33 GPUs each alone with its own NIC at PIX: 33 rails, one past NCCL's 32.
  Topology t;
  t.origin = "hand-made";
  for (int i = 0; i < 33; ++i) {
    char nic[16], gpu[16];
    std::snprintf(nic, sizeof nic, "0000:%02x:00.0", i + 1);
    std::snprintf(gpu, sizeof gpu, "0000:%02x:00.0", i + 0x41);
    t.nics.push_back(make_nic(nic, "mlx5_" + std::to_string(i), ""));
    Gpu g;
    g.index = i;
    g.pci.address = bdf(gpu);
    g.nics.push_back(NicPath{bdf(nic), PciPath::pix});
    t.gpus.push_back(g);
  }
  auto env = gpuaff::nic_environment(t, 0, gpuaff::nic_lib_nccl_rails);
  REQUIRE_FALSE(env.has_value());
  CHECK(env.error().message().find("33 rail NICs and NCCL reads at most 32") != std::string_view::npos);
  t.nics.pop_back();
  t.gpus.pop_back();
  CHECK(gpuaff::nic_environment(t, 0, gpuaff::nic_lib_nccl_rails).has_value());
}

TEST_CASE("b300-16nics: each GPU's set is the two NICs under its switch") {
  // Each GPU shares its ConnectX-8's switch with two NIC functions, mlx5_2k and
  // mlx5_2k+1 (PIX); no other GPU reaches them at PIX, so the GPU is their only
  // competitor and takes both (k = 2 candidates, n = 1): all 16 NICs are rails.
  Topology t = load("b300-16nics");
  REQUIRE(t.gpus.size() == 8);
  std::vector<std::string> expected;
  for (int k = 0; k < 8; ++k) expected.push_back("mlx5_" + std::to_string(2 * k) + " mlx5_" + std::to_string(2 * k + 1));
  CHECK(chosen(t) == expected);
  CHECK(gpuaff::nic_set_of(t, t.gpus[5]).path == PciPath::pix);
  CHECK(gpuaff::nic_rails(t).size() == 16);
  auto env = gpuaff::nic_environment(t, 5);
  REQUIRE(env.has_value());
  CHECK(*env == std::vector<std::pair<std::string, std::string>>{{"UCX_NET_DEVICES", "mlx5_10:1,mlx5_11:1"},
                                                                 {"NVSHMEM_HCA_LIST", "mlx5_10:1,mlx5_11:1"}});
  // The management port has no RDMA name: never a rail.
  for (const auto& n : t.nics)
    if (!n.rdma()) CHECK(std::string(gpuaff::not_a_rail(t, n)).find("no RDMA (sys/class/infiniband) or CXI device") != std::string::npos);
}

TEST_CASE("nic sets are the host's: a process that sees one GPU gets that GPU's share") {
  // gb200-tray-numa: host GPUs 0 and 1 share mlx5_0 and mlx5_1 (both NODE, one each
  // by GPU order). A process that sees host GPU 1 only (CUDA_VISIBLE_DEVICES=1)
  // still gets mlx5_1: the sets are computed over every GPU of the host, so two
  // one-GPU processes never pile onto the same NIC.
  Topology t = load("gb200-tray-numa", "1");
  REQUIRE(t.gpus.size() == 1);
  CHECK(chosen(t) == std::vector<std::string>{"mlx5_1"});
}

TEST_CASE("nic_libs: the words, and the mistakes") {
  CHECK(gpuaff::parse_nic_libs("ucx,nvshmem,cxi").value() == gpuaff::default_nic_libs);
  CHECK(gpuaff::parse_nic_libs("ucx,ucx-host").error().message().find("both set UCX_NET_DEVICES") != std::string_view::npos);
  CHECK(gpuaff::parse_nic_libs("nccl-rails").value() == gpuaff::nic_lib_nccl_rails);
  CHECK(gpuaff::nic_libs_text(gpuaff::nic_lib_ucx | gpuaff::nic_lib_nccl_set) == "ucx,nccl-set");
  for (const char* bad : {"", "ucx,", "nccl", "ucxx", "nccl-set,nccl-rails", "UCX"}) {
    CAPTURE(bad);
    auto r = gpuaff::parse_nic_libs(bad);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code() == Errc::invalid_argument);
    CHECK(r.error().message().find("nic_libs=") != std::string_view::npos);
  }
  CHECK(gpuaff::parse_nic_libs("nccl").error().message().find("nccl-set or nccl-rails") != std::string_view::npos);
  CHECK(gpuaff::parse_nic_libs("ucxx").error().message().find("did you mean ucx?") != std::string_view::npos);
}

TEST_CASE("listed_devices: the names a UCX or NVSHMEM list holds") {
  using V = std::vector<std::string>;
  CHECK(gpuaff::listed_devices("mlx5_0:1,mlx5_3") == V{"mlx5_0", "mlx5_3"});
  CHECK(gpuaff::listed_devices("all").empty());
  CHECK(gpuaff::listed_devices("^mlx5_1").empty());  // an exclusion names no device it uses
  CHECK(gpuaff::listed_devices("").empty());
  CHECK(gpuaff::listed_devices(",mlx5_2:1,") == V{"mlx5_2"});
}

TEST_CASE("p4d.24xlarge-efa: two GPUs share each EFA device on their root bus") {
  // The fixture puts GPUs 1c.0, 1d.0 and EFA 1b.0 on each of the root buses 10, 20
  // (node 0), 90, a0 (node 1), each bus its own host bridge: a GPU and the EFA of its
  // bus meet at the host bridge (PHB); the other EFAs are NODE or SYS. The ENA (no
  // RDMA name) sits on bus 00 with numa_node -1: SYS to every GPU (-1 is not their node).
  Topology t = load("p4d.24xlarge-efa");
  REQUIRE(t.gpus.size() == 8);
  const std::vector<std::string> efa{"rdmap16s27", "rdmap32s27", "rdmap144s27", "rdmap160s27"};
  for (int g = 0; g < 8; ++g) {
    CAPTURE(g);
    CHECK(path_to(t, g, efa[static_cast<std::size_t>(g / 2)]) == PciPath::phb);
    for (int k = 0; k < 4; ++k)
      if (k != g / 2) CHECK(path_to(t, g, efa[static_cast<std::size_t>(k)]) == (k / 2 == g / 4 ? PciPath::node : PciPath::sys));
    CHECK(path_to(t, g, "ens5") == PciPath::sys);
  }
  // One PHB candidate each: GPUs 2k and 2k+1 share EFA k (sharing, not reaching further).
  CHECK(chosen(t) == std::vector<std::string>{efa[0], efa[0], efa[1], efa[1], efa[2], efa[2], efa[3], efa[3]});
}

TEST_CASE("gb200-tray-numa: GPU memory nodes from numa_status; NICs by Grace") {
  // numa_status names node 2 + 8k for GPU k (the first of its block of 8).
  Topology t = load("gb200-tray-numa");
  REQUIRE(t.gpus.size() == 4);
  for (int g = 0; g < 4; ++g) CHECK(t.gpus[static_cast<std::size_t>(g)].memory_nodes == std::vector<int>{2 + 8 * g});
  // Every device has its own PCI domain: a NIC of the same Grace is NODE, the
  // other Grace's SYS. GPUs 0, 1 share mlx5_0 and mlx5_1 as their nearest:
  // one each, in GPU order; GPUs 2, 3 likewise mlx5_2 and mlx5_3.
  CHECK(path_to(t, 0, "mlx5_1") == PciPath::node);
  CHECK(path_to(t, 0, "mlx5_2") == PciPath::sys);
  CHECK(path_to(t, 3, "mlx5_2") == PciPath::node);
  CHECK(chosen(t) == std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"});
  // The gb200-tray root without numa_status: no memory nodes.
  Topology plain = load("gb200-tray");
  for (const auto& g : plain.gpus) CHECK(g.memory_nodes.empty());
}

TEST_CASE("fair sharing when NICs are fewer than GPUs, by GPU index") {
  // Four GPUs, two RDMA NICs both NODE to all of them, one Ethernet-only NIC nearer
  // (PIX to GPU 3): it has no RDMA name, so it is never chosen.
  Topology t;
  t.origin = "hand-made";
  Nic a = make_nic("0000:20:00.0", "mlx5_0", "");
  Nic b = make_nic("0000:40:00.0", "mlx5_1", "");
  Nic eth = make_nic("0000:60:00.0", "", "eth0");
  t.nics = {a, b, eth};
  for (int i = 0; i < 4; ++i) {
    Gpu g;
    g.index = i;
    g.pci.address = bdf(("0000:" + std::to_string(70 + i) + ":00.0").c_str());
    if (i == 3) g.nics.push_back(NicPath{eth.address, PciPath::pix});
    // listed with the farther address first: the choice must not depend on list order within a class
    g.nics.push_back(NicPath{b.address, PciPath::node});
    g.nics.push_back(NicPath{a.address, PciPath::node});
    t.gpus.push_back(g);
  }
  // Two candidates, four competitors: one NIC each. GPU 0 takes the least used with
  // the lowest address (mlx5_0, though listed second), GPU 1 the other, then again in turn.
  CHECK(chosen(t) == std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_0", "mlx5_1"});
  // Three NICs for two GPUs: the first competitor gets 3 / 2 + 1 = 2, the second 1.
  Topology three = t;
  three.gpus.resize(2);
  Nic c = make_nic("0000:50:00.0", "mlx5_2", "");
  three.nics = {a, b, c, eth};
  for (auto& g : three.gpus) g.nics = {NicPath{a.address, PciPath::pxb}, NicPath{b.address, PciPath::pxb},
                                       NicPath{c.address, PciPath::pxb}};
  CHECK(chosen(three) == std::vector<std::string>{"mlx5_0 mlx5_1", "mlx5_2"});
  // Overlapping candidates: GPU 0 has mlx5_0 alone at PIX, GPU 1 both at NODE. They
  // compete for mlx5_0; GPU 1's quota is 2 / 2 = 1 and mlx5_0 is taken: mlx5_1.
  Topology overlap = three;
  overlap.nics = {a, b};
  overlap.gpus[0].nics = {NicPath{a.address, PciPath::pix}, NicPath{b.address, PciPath::node}};
  overlap.gpus[1].nics = {NicPath{a.address, PciPath::node}, NicPath{b.address, PciPath::node}};
  CHECK(chosen(overlap) == std::vector<std::string>{"mlx5_0", "mlx5_1"});
  // A GPU with no RDMA NIC at all: an error naming it.
  t.gpus[2].nics.clear();
  auto env = gpuaff::nic_environment(t, 2);
  REQUIRE_FALSE(env.has_value());
  CHECK(env.error().code() == Errc::not_found);
  CHECK(env.error().message().find("GPU 2") != std::string_view::npos);
  // No NIC known at all (a JSON without "nics"): the error says so.
  t.nics.clear();
  auto none = gpuaff::nic_environment(t, 0);
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().message().find("lists no network device") != std::string_view::npos);
}

TEST_CASE("the plan carries the NIC variables only when asked") {
  Topology t = load("dgx-h100");
  auto plain = gpuaff::make_plan(t, gpuaff::LaunchOptions{.gpu = 2});
  REQUIRE(plain.has_value());
  CHECK(plain->env.empty());
  CHECK(plain->nic_set.empty());
  CHECK_FALSE(plain->nic_path.has_value());
  auto with = gpuaff::make_plan(t, gpuaff::LaunchOptions{.gpu = 2, .nic_env = true});
  REQUIRE(with.has_value());
  REQUIRE(with->env.size() == 2);
  CHECK(with->env[0] == std::pair<std::string, std::string>{"UCX_NET_DEVICES", "mlx5_4:1"});
  CHECK(with->nic_set == std::vector<std::string>{"mlx5_4:1"});
  CHECK(with->nic_path == PciPath::pix);
}

TEST_CASE("JSON keeps the NICs, the path classes and the memory nodes") {
  for (const char* name : {"dgx-h100", "gb200-tray-numa", "p4d.24xlarge-efa"}) {
    CAPTURE(name);
    Topology t = load(name);
    auto back = gpuaff::topology_from_json(gpuaff::to_json(t), t.origin.view());
    REQUIRE_MESSAGE(back.has_value(), back.error().message());
    CHECK(back->nics == t.nics);
    REQUIRE(back->gpus.size() == t.gpus.size());
    for (std::size_t g = 0; g < t.gpus.size(); ++g) {
      CHECK(back->gpus[g].nics == t.gpus[g].nics);
      CHECK(back->gpus[g].memory_nodes == t.gpus[g].memory_nodes);
    }
  }
  // Bad input: an unknown class word, a GPU NIC missing from the top-level list.
  std::string base = R"({"online_cpus": "0-1", "numa_nodes": [{"id": 0, "cpus": "0-1"}],
    "pci_devices": [{"bdf": "0000:01:00.0", "class": "0x030200", "vendor": "0x10de", "numa_node": 0}],
    "nics": [{"bdf": "0000:02:00.0", "names": ["mlx5_0"], "rdma": ["mlx5_0"], "numa_node": 0}],)";
  auto bad_word = gpuaff::topology_from_json(base + R"("gpus": [{"bdf": "0000:01:00.0", "nics": [{"bdf": "0000:02:00.0", "path": "NEAR"}]}]})", "t.json");
  REQUIRE_FALSE(bad_word.has_value());
  CHECK(bad_word.error().message().find("gpus[0].nics[0].path") != std::string_view::npos);
  CHECK(bad_word.error().message().find("PIX, PXB, PHB, NODE or SYS") != std::string_view::npos);
  auto unknown = gpuaff::topology_from_json(base + R"("gpus": [{"bdf": "0000:01:00.0", "nics": [{"bdf": "0000:03:00.0", "path": "PIX"}]}]})", "t.json");
  REQUIRE_FALSE(unknown.has_value());
  CHECK(unknown.error().message().find("not among the top-level nics") != std::string_view::npos);
  auto bad_node = gpuaff::topology_from_json(base + R"("gpus": [{"bdf": "0000:01:00.0", "memory_nodes": [5]}]})", "t.json");
  REQUIRE_FALSE(bad_node.has_value());
  CHECK(bad_node.error().message().find("memory_nodes[0]") != std::string_view::npos);
  auto good = gpuaff::topology_from_json(base + R"("gpus": [{"bdf": "0000:01:00.0", "nics": [{"bdf": "0000:02:00.0", "path": "PXB"}]}]})", "t.json");
  REQUIRE_MESSAGE(good.has_value(), good.error().message());
  REQUIRE(good->gpus[0].nics.size() == 1);
  CHECK(good->gpus[0].nics[0].path == PciPath::pxb);
}

TEST_CASE("a recording keeps the class links and bridge directories the NICs need") {
  gpuaff_test::TempTree out;
  auto rec = gpuaff::record_topology(gpuaff::RecordOptions{
      .out_dir = out.path("rec"), .root = gpuaff_test::fixture("dgx-h100"), .for_hwloc = false});
  REQUIRE_MESSAGE(rec.has_value(), rec.error().message());
  auto again = SysfsSource(SysfsOptions{.root = out.path("rec"), .visible = {.use_environment = false}}).load();
  REQUIRE_MESSAGE(again.has_value(), again.error().message());
  Topology t = load("dgx-h100");
  CHECK(again->nics == t.nics);
  REQUIRE(again->gpus.size() == t.gpus.size());
  for (std::size_t g = 0; g < t.gpus.size(); ++g) CHECK(again->gpus[g].nics == t.gpus[g].nics);
  // and the GPU memory nodes of a GB200 tray
  auto rec2 = gpuaff::record_topology(gpuaff::RecordOptions{
      .out_dir = out.path("rec2"), .root = gpuaff_test::fixture("gb200-tray-numa"), .for_hwloc = false});
  REQUIRE(rec2.has_value());
  auto gb = SysfsSource(SysfsOptions{.root = out.path("rec2"), .visible = {.use_environment = false}}).load();
  REQUIRE(gb.has_value());
  CHECK(gb->gpus[3].memory_nodes == std::vector<int>{26});
  // and the sys/class/cxi entries of Slingshot NICs
  auto rec3 = gpuaff::record_topology(gpuaff::RecordOptions{
      .out_dir = out.path("rec3"), .root = gpuaff_test::fixture("cray-ex-4gpu-slingshot"), .for_hwloc = false});
  REQUIRE_MESSAGE(rec3.has_value(), rec3.error().message());
  auto cray = SysfsSource(SysfsOptions{.root = out.path("rec3"), .visible = {.use_environment = false}}).load();
  REQUIRE(cray.has_value());
  CHECK(cray->nics == load("cray-ex-4gpu-slingshot").nics);
  CHECK(chosen(*cray) == std::vector<std::string>{"cxi0", "cxi1", "cxi2", "cxi3"});
}

TEST_CASE("binding detail reads no NIC; a class entry without a PCI device is skipped") {
  auto lean = SysfsSource(SysfsOptions{.root = gpuaff_test::fixture("dgx-h100"),
                                       .visible = {.use_environment = false},
                                       .detail = gpuaff::SysfsDetail::binding})
                  .load();
  REQUIRE(lean.has_value());
  CHECK(lean->nics.empty());
  CHECK(lean->gpus[0].nics.empty());

  // A hand-made root: a GPU and a NIC on one root bus, plus "lo" and a soft-RoCE
  // "rxe0" whose class entries lead to no PCI device.
  gpuaff_test::TempTree tree;
  gpuaff_test::add_cpu(tree, 0, "0", 0, "0", "0");
  tree.write("sys/devices/system/cpu/online", "0\n");
  gpuaff_test::add_node(tree, 0, "0", "10");
  tree.write("sys/devices/system/node/online", "0\n");
  gpuaff_test::add_pci(tree, "0000:00:03.0", "0x030200", "0x10de", "0", "0");
  gpuaff_test::add_pci(tree, "0000:00:04.0", "0x020000", "0x15b3", "0", "0");
  tree.write("sys/devices/pci0000:00/0000:00:04.0/infiniband/mlx5_0/ports/1/link_layer", "Ethernet\n");
  tree.link("sys/devices/pci0000:00/0000:00:04.0/infiniband/mlx5_0/device", "../../../0000:00:04.0");
  tree.link("sys/class/infiniband/mlx5_0", "../../devices/pci0000:00/0000:00:04.0/infiniband/mlx5_0");
  tree.write("sys/devices/virtual/net/lo/type", "772\n");
  tree.link("sys/class/net/lo", "../../devices/virtual/net/lo");
  tree.write("sys/devices/virtual/infiniband/rxe0/ports/1/link_layer", "Ethernet\n");
  tree.link("sys/class/infiniband/rxe0", "../../devices/virtual/infiniband/rxe0");
  // virtio-net: the interface's device link leads to virtio0, below the PCI device (no class file there).
  tree.write("sys/devices/pci0000:00/0000:00:04.0/virtio0/uevent", "DRIVER=virtio_net\n");
  tree.write("sys/devices/pci0000:00/0000:00:04.0/virtio0/net/eth0/type", "1\n");
  tree.link("sys/devices/pci0000:00/0000:00:04.0/virtio0/net/eth0/device", "../../../virtio0");
  tree.link("sys/class/net/eth0", "../../devices/pci0000:00/0000:00:04.0/virtio0/net/eth0");
  auto t = SysfsSource(SysfsOptions{.root = tree.root(), .visible = {.use_environment = false}}).load();
  REQUIRE_MESSAGE(t.has_value(), t.error().message());
  REQUIRE(t->nics.size() == 1);
  CHECK(t->nics[0].rdma_names.size() == 1);
  REQUIRE(t->nics[0].net_names.size() == 1);
  CHECK(t->nics[0].net_names[0].view() == "eth0");
  REQUIRE(t->gpus.size() == 1);
  REQUIRE(t->gpus[0].nics.size() == 1);
  CHECK(t->gpus[0].nics[0].path == PciPath::phb);
}

TEST_CASE("a NIC name no kernel gives is left out with a note; port numbers past 255 are no ports") {
  // A recording that names its HCA "mlx5_0,mlx5_5" would become two HCAs in
  // NCCL_IB_HCA; a port "300" would saturate to 255 if it were taken.
  gpuaff_test::TempTree tree;
  gpuaff_test::add_cpu(tree, 0, "0", 0, "0", "0");
  tree.write("sys/devices/system/cpu/online", "0\n");
  gpuaff_test::add_node(tree, 0, "0", "10");
  tree.write("sys/devices/system/node/online", "0\n");
  gpuaff_test::add_pci(tree, "0000:00:03.0", "0x030200", "0x10de", "0", "0");
  gpuaff_test::add_pci(tree, "0000:00:04.0", "0x020700", "0x15b3", "0", "0");
  gpuaff_test::add_pci(tree, "0000:00:05.0", "0x020700", "0x15b3", "0", "0");
  std::string bad = "mlx5_0,mlx5_5";
  tree.write("sys/devices/pci0000:00/0000:00:04.0/infiniband/" + bad + "/ports/1/link_layer", "InfiniBand\n");
  tree.link("sys/devices/pci0000:00/0000:00:04.0/infiniband/" + bad + "/device", "../../../0000:00:04.0");
  tree.link("sys/class/infiniband/" + bad, "../../devices/pci0000:00/0000:00:04.0/infiniband/" + bad);
  tree.write("sys/devices/pci0000:00/0000:00:05.0/infiniband/mlx5_1/ports/300/link_layer", "InfiniBand\n");
  tree.write("sys/devices/pci0000:00/0000:00:05.0/infiniband/mlx5_1/ports/2/link_layer", "InfiniBand\n");
  tree.link("sys/devices/pci0000:00/0000:00:05.0/infiniband/mlx5_1/device", "../../../0000:00:05.0");
  tree.link("sys/class/infiniband/mlx5_1", "../../devices/pci0000:00/0000:00:05.0/infiniband/mlx5_1");
  auto t = SysfsSource(SysfsOptions{.root = tree.root(), .visible = {.use_environment = false}}).load();
  REQUIRE_MESSAGE(t.has_value(), t.error().message());
  REQUIRE(t->nics.size() == 2);
  CHECK(t->nics[0].rdma_names.empty());  // the crafted name is no RDMA device of 00:04.0
  REQUIRE(t->nics[1].rdma_names.size() == 1);
  CHECK(t->nics[1].rdma_port == 2);  // 300 is no InfiniBand port; 2 is the first one
  bool noted = false;
  for (const auto& n : t->notes) noted |= n.find("sys/class/infiniband/mlx5_0,mlx5_5") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("--mem-nodes: the GPU's own memory nodes, or every CPU node of its socket") {
  using gpuaff::LaunchOptions;
  using gpuaff::MemNodes;
  // gb200-tray-numa: GPU 1's memory is node 10 (numa_status); its CPU node is Grace 0 (node 0),
  // alone in its package.
  Topology gb = load("gb200-tray-numa");
  auto own = gpuaff::make_plan(gb, LaunchOptions{.gpu = 1, .mem_nodes = MemNodes::gpu});
  REQUIRE_MESSAGE(own.has_value(), own.error().message());
  CHECK(own->memory_nodes.to_list() == "10");
  auto cpu = gpuaff::make_plan(gb, LaunchOptions{.gpu = 1});
  REQUIRE(cpu.has_value());
  CHECK(cpu->memory_nodes.to_list() == "0");
  // dgx-a100 runs NPS4: four nodes per socket; GPU 0 is on node 3, in socket 0 with nodes 0-3.
  auto socket = gpuaff::make_plan(load("dgx-a100"), LaunchOptions{.gpu = 0, .mem_nodes = MemNodes::socket});
  REQUIRE(socket.has_value());
  CHECK(socket->memory_nodes.to_list() == "0-3");
  // A GPU without memory of its own: an error that says where such nodes come from.
  auto none = gpuaff::make_plan(load("dgx-h100"), LaunchOptions{.gpu = 0, .mem_nodes = MemNodes::gpu});
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().code() == Errc::not_found);
  CHECK(none.error().message().find("numa_status") != std::string_view::npos);
}

namespace {

/// The plan's host NIC set for `gpu` of `name` with nic_env (and the plan).
gpuaff::LaunchPlan nic_plan(const std::string& name, int gpu, unsigned libs = gpuaff::default_nic_libs) {
  gpuaff::LaunchOptions o{.gpu = gpu, .nic_env = true};
  o.nic_libs = libs;
  auto p = gpuaff::make_plan(load(name), o);
  REQUIRE_MESSAGE(p.has_value(), p.error().message());
  return *p;
}

std::string env_of(const gpuaff::LaunchPlan& p, const std::string& name) {
  for (const auto& [k, v] : p.env)
    if (k == name) return v;
  return "unset";
}

}  // namespace

TEST_CASE("p5.48xlarge: four EFA devices per GPU, one rail each with four planes, sixteen per host node") {
  // GPU k's switch (host bridge 0x10+0x10k) holds its four EFAs at buses
  // 0x13+0x10k .. 0x16+0x10k (rdmap(19+16k)s0 .. rdmap(22+16k)s0) and no other
  // GPU: four candidates, one competitor, all four (PIX). Rail k, planes 0-3 by
  // address; 32 rail NICs, exactly what NCCL reads.
  Topology t = load("p5.48xlarge");
  REQUIRE(t.gpus.size() == 8);
  std::vector<std::string> expected;
  std::vector<HcaEntry> entries;
  for (int k = 0; k < 8; ++k) {
    std::string set;
    for (int i = 0; i < 4; ++i) {
      std::string name = "rdmap" + std::to_string(19 + 16 * k + i) + "s0";
      set += (i == 0 ? "" : " ") + name;
      entries.push_back({name, 1, k, i});
    }
    expected.push_back(set);
  }
  CHECK(chosen(t) == expected);
  CHECK(gpuaff::nic_set_of(t, t.gpus[3]).path == PciPath::pix);
  CHECK(nccl_2_30_read(hca_value(t, 6)) == entries);
  // The ENA has no RDMA name: never a rail.
  const Nic* ena = t.find_nic(bdf("0000:00:05.0"));
  REQUIRE(ena != nullptr);
  CHECK(std::string(gpuaff::not_a_rail(t, *ena)).find("no RDMA (sys/class/infiniband) or CXI device") != std::string::npos);
  // Host buffers of GPU 1 (node 0) and GPU 5 (node 1): the sixteen EFAs of
  // their node, GPUs 0-3's and 4-7's.
  auto p1 = nic_plan("p5.48xlarge", 1);
  CHECK(p1.host_nodes.to_list() == "0");
  REQUIRE(p1.host_nic_set.size() == 16);
  CHECK(p1.host_nic_set.front() == "rdmap19s0:1");
  CHECK(p1.host_nic_set.back() == "rdmap70s0:1");
  auto p5 = nic_plan("p5.48xlarge", 5, gpuaff::nic_lib_ucx_host);
  REQUIRE(p5.host_nic_set.size() == 16);
  CHECK(p5.host_nic_set.front() == "rdmap83s0:1");
  // ucx-host: UCX_NET_DEVICES is the host set, for a process moving host buffers.
  std::string host;
  for (const auto& n : p5.host_nic_set) host += (host.empty() ? "" : ",") + n;
  CHECK(env_of(p5, "UCX_NET_DEVICES") == host);
  CHECK(p5.nic_set == std::vector<std::string>{"rdmap99s0:1", "rdmap100s0:1", "rdmap101s0:1", "rdmap102s0:1"});
}

TEST_CASE("a3-ultragpu-8g: one ConnectX-7 per GPU, the gVNICs no rail") {
  // GPU k and mlx5_k share a switch (PIX); the gVNICs (enp12s0 on node 0,
  // enp156s0 on node 1) have no RDMA name.
  Topology t = load("a3-ultragpu-8g");
  REQUIRE(t.gpus.size() == 8);
  std::vector<std::string> expected;
  for (int k = 0; k < 8; ++k) expected.push_back("mlx5_" + std::to_string(k));
  CHECK(chosen(t) == expected);
  for (const auto& n : t.nics)
    if (!n.rdma()) CHECK(std::string(gpuaff::not_a_rail(t, n)).find("no RDMA (sys/class/infiniband) or CXI device") != std::string::npos);
  CHECK(nccl_2_30_read(hca_value(t, 0)).size() == 8);
  CHECK(nccl_2_30_read(hca_value(t, 0))[5] == HcaEntry{"mlx5_5", 1, 5, 0});
  // GPU 2 is on node 0: the host set is node 0's four ConnectX-7, not the gVNIC.
  auto p = nic_plan("a3-ultragpu-8g", 2);
  CHECK(p.host_nic_set == std::vector<std::string>{"mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1"});
  CHECK(env_of(p, "UCX_NET_DEVICES") == "mlx5_2:1");
}

TEST_CASE("dgx-b300: one ConnectX-8 per GPU through the SuperNIC's own switch; the BlueField-3s no rail") {
  // GPU k sits below its ConnectX-8's PCIe switch with that NIC's one function
  // (the 800G XDR port): the two share a switch (PIX), and no other GPU reaches
  // that switch, so each GPU's set is its own SuperNIC. The NICs are named in
  // PCI order with the slot-1 BlueField-3 (22:00.0/.1) after GPU 0's NIC (13)
  // and the slot-2 one (a2:00.0/.1) after GPU 4's (93): GPU k's NIC is
  // mlx5_0, 3, 4, 5 (node 0) and mlx5_6, 9, 10, 11 (node 1).
  Topology t = load("dgx-b300");
  REQUIRE(t.gpus.size() == 8);
  const std::vector<std::string> compute{"mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5",
                                         "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"};
  CHECK(chosen(t) == compute);
  for (int k = 0; k < 8; ++k) CHECK(path_to(t, k, compute[static_cast<std::size_t>(k)]) == PciPath::pix);
  // The BlueField-3 of GPU 0's socket is on another host bridge of node 0
  // (NODE); the other socket's is SYS. Each GPU has a PIX NIC, so neither is
  // in any GPU's set: RDMA names, but no rail.
  CHECK(path_to(t, 0, "mlx5_1") == PciPath::node);
  CHECK(path_to(t, 0, "mlx5_7") == PciPath::sys);
  CHECK(path_to(t, 6, "mlx5_8") == PciPath::node);
  auto ids = gpuaff::rail_identities(t);
  REQUIRE(ids.size() == 8);
  for (const char* bf3 : {"0000:22:00.0", "0000:22:00.1", "0000:a2:00.0", "0000:a2:00.1"}) {
    CAPTURE(bf3);
    const Nic* n = t.find_nic(bdf(bf3));
    REQUIRE(n != nullptr);
    CHECK(n->rdma());
    CHECK(gpuaff::rail_identity_of(ids, n).rail == -1);
    CHECK(std::string(gpuaff::not_a_rail(t, *n)).find("every GPU has a nearer RDMA NIC") != std::string::npos);
  }
  // nccl-rails: one NIC per set, so GPU k's NIC is rail k, plane 0; by address
  // that is GPU order (the stacks' buses grow with k); the same value for every
  // GPU's rank, and no BlueField-3 in it.
  std::vector<HcaEntry> entries;
  for (int k = 0; k < 8; ++k) entries.push_back({compute[static_cast<std::size_t>(k)], 1, k, 0});
  CHECK(nccl_2_30_read(hca_value(t, 0)) == entries);
  CHECK(hca_value(t, 7) == hca_value(t, 0));
  // The two-function reading (b300-16nics) keeps GPU k on rail k too, with two
  // planes: the rail of a GPU index does not depend on how its port is split.
  Topology two = load("b300-16nics");
  auto two_ids = gpuaff::rail_identities(two);
  REQUIRE(two_ids.size() == 16);
  for (int k = 0; k < 8; ++k)
    for (int fn = 0; fn < 2; ++fn) {
      const auto& r = two_ids[static_cast<std::size_t>(2 * k + fn)];
      CHECK(name_of(two, r.nic->address) == "mlx5_" + std::to_string(2 * k + fn));
      CHECK(r.rail == k);
      CHECK(r.plane == fn);
    }
  // Host buffers: the rails on the buffer's node, the four SuperNICs of the
  // socket; the BlueField-3 of that node is no rail and stays out.
  auto p2 = nic_plan("dgx-b300", 2);
  CHECK(p2.host_nodes.to_list() == "0");
  CHECK(p2.host_nic_set == std::vector<std::string>{"mlx5_0:1", "mlx5_3:1", "mlx5_4:1", "mlx5_5:1"});
  CHECK(p2.nic_set == std::vector<std::string>{"mlx5_4:1"});
  auto p6 = nic_plan("dgx-b300", 6, gpuaff::nic_lib_ucx_host);
  CHECK(p6.host_nodes.to_list() == "1");
  CHECK(p6.host_nic_set == std::vector<std::string>{"mlx5_6:1", "mlx5_9:1", "mlx5_10:1", "mlx5_11:1"});
  CHECK(env_of(p6, "UCX_NET_DEVICES") == "mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1");
}

TEST_CASE("cray-ex-4gpu-slingshot: Slingshot NICs are rails by their CXI names") {
  // GPU k (buses 03, 41, 81, c1) and NIC k (cxik, hsnk) share a host bridge on
  // node 3 - k, each under its own root port: PHB, one candidate each. The NICs
  // have no RDMA name; their CXI name is what libfabric's cxi provider opens.
  Topology t = load("cray-ex-4gpu-slingshot");
  REQUIRE(t.gpus.size() == 4);
  REQUIRE(t.nics.size() == 4);
  for (int k = 0; k < 4; ++k) {
    const Nic& n = t.nics[static_cast<std::size_t>(k)];
    CHECK_FALSE(n.rdma());
    REQUIRE(n.cxi_names.size() == 1);
    CHECK(n.cxi_names[0].view() == "cxi" + std::to_string(k));
    REQUIRE(n.net_names.size() == 1);
    CHECK(n.net_names[0].view() == "hsn" + std::to_string(k));
    CHECK(n.numa_node == 3 - k);
    CHECK(path_to(t, k, "cxi" + std::to_string(k)) == PciPath::phb);
  }
  CHECK(chosen(t) == std::vector<std::string>{"cxi0", "cxi1", "cxi2", "cxi3"});
  auto ids = gpuaff::rail_identities(t);
  CHECK(gpuaff::rail_id_text(ids) == "cxi0:0:0,cxi1:1:0,cxi2:2:0,cxi3:3:0");
  // The default libraries: FI_CXI_DEVICE_NAME (fi_cxi(7): a comma-separated
  // list of CXI devices); UCX and NVSHMEM have no RDMA NIC here and are left out.
  auto p = nic_plan("cray-ex-4gpu-slingshot", 1);
  CHECK(p.env == std::vector<std::pair<std::string, std::string>>{{"FI_CXI_DEVICE_NAME", "cxi1"}});
  CHECK(p.nic_set == std::vector<std::string>{"cxi1"});
  CHECK(p.host_nodes.to_list() == "2");
  CHECK(p.host_nic_set == std::vector<std::string>{"cxi1"});
  CHECK(p.warnings.empty());
  // A library that can use none of them is an error naming the set, never an empty variable.
  auto ucx = gpuaff::make_plan(t, gpuaff::LaunchOptions{.gpu = 1, .nic_env = true, .nic_libs = gpuaff::nic_lib_ucx});
  REQUIRE_FALSE(ucx.has_value());
  CHECK(ucx.error().message().find("can use none of the NICs cxi1") != std::string_view::npos);
  auto rails = gpuaff::nic_environment(t, 0, gpuaff::nic_lib_nccl_rails);
  REQUIRE_FALSE(rails.has_value());
  CHECK(rails.error().message().find("has an RDMA name") != std::string_view::npos);
  // The JSON topology keeps the CXI names apart from the interfaces.
  auto back = gpuaff::topology_from_json(gpuaff::to_json(t), "cray.json");
  REQUIRE_MESSAGE(back.has_value(), back.error().message());
  CHECK(back->nics == t.nics);
}

// SPDX-License-Identifier: Apache-2.0
#pragma once
// The NIC set of each GPU, and the variables that tell the communication
// libraries (`--nic-env`, `--nic-libs`; docs/nics.md, docs/contract.md
// section 4).
//
// The rule. A GPU's candidates are the NICs GPU traffic can use (those with
// a sys/class/infiniband name, or HPE Slingshot NICs with a sys/class/cxi
// name) at its nearest path class to any of them. GPUs
// whose candidates overlap compete: with k candidates and n competitors
// (itself included), a GPU gets k / n of them, the first k mod n competitors
// (by GPU order) one more, and at least one; it takes them one at a time, each
// time the candidate the fewest GPUs before it took, the lowest PCI address on
// a tie. The sets are computed over every GPU of the host in bus order
// (Topology::host_gpus), so they depend only on the machine's shape and
// addresses, never on which GPUs a process sees: servers of one shape give
// GPU k the same NICs (the same rails), and a GPU alone under its switch gets
// every NIC there (two on a host with two NICs per GPU switch).

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/detail/parse.hpp"
#include "gpuaff/detail/suggest.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

/// A GPU's NIC set: the NICs (pointers into Topology::nics, by address) and
/// their path class from the GPU. Empty when no RDMA NIC reaches the GPU.
struct NicSet {
  std::vector<const Nic*> nics{};
  PciPath path = PciPath::sys;

  bool empty() const { return nics.empty(); }
  bool holds(const Nic* n) const { return std::find(nics.begin(), nics.end(), n) != nics.end(); }
};

/// The libraries `--nic-env` writes for (`nic_libs=`, a bit set).
enum NicLib : unsigned {
  nic_lib_ucx = 1u,         ///< UCX_NET_DEVICES = the set's RDMA NICs
  nic_lib_nvshmem = 2u,     ///< NVSHMEM_HCA_LIST = the set's RDMA NICs
  nic_lib_nccl_set = 4u,    ///< NCCL_IB_HCA = the set's RDMA NICs
  nic_lib_nccl_rails = 8u,  ///< NCCL_IB_HCA = every rail of the machine
  nic_lib_cxi = 16u,        ///< FI_CXI_DEVICE_NAME = the set's Slingshot NICs (libfabric's cxi provider)
  nic_lib_ucx_host = 32u,   ///< UCX_NET_DEVICES = the host NIC set (host-staged transfers)
};
inline constexpr unsigned default_nic_libs = nic_lib_ucx | nic_lib_nvshmem | nic_lib_cxi;
inline constexpr std::array<std::pair<std::string_view, unsigned>, 6> nic_lib_names{{{"ucx", nic_lib_ucx},
                                                                                      {"nvshmem", nic_lib_nvshmem},
                                                                                      {"nccl-set", nic_lib_nccl_set},
                                                                                      {"nccl-rails", nic_lib_nccl_rails},
                                                                                      {"cxi", nic_lib_cxi},
                                                                                      {"ucx-host", nic_lib_ucx_host}}};

/// Parses a `nic_libs=` list ("ucx,nvshmem", "nccl-rails").
/// Errors: Errc::invalid_argument for an empty list or item, an unknown item
/// (with the closest name), or both NCCL items (one variable, one value).
inline Result<unsigned> parse_nic_libs(std::string_view text) {
  if (text.empty())
    return fail(Errc::invalid_argument,
                "nic_libs='' names no library; use a list of ucx, nvshmem, nccl-set, nccl-rails, cxi, ucx-host");
  std::array<std::string_view, nic_lib_names.size()> words{};
  for (std::size_t i = 0; i < words.size(); ++i) words[i] = nic_lib_names[i].first;
  unsigned libs = 0;
  for (std::string_view item : detail::comma_items(text)) {
    const auto* known = std::find_if(nic_lib_names.begin(), nic_lib_names.end(), [&](const auto& n) { return n.first == item; });
    if (known == nic_lib_names.end()) {
      std::string_view guess = item == "nccl" ? std::string_view("nccl-set or nccl-rails") : detail::closest(item, words);
      return fail(Errc::invalid_argument, "nic_libs=", text.substr(0, 60), ": '", item.substr(0, 40), "' is not a library",
                  guess.empty() ? std::string() : std::string("; did you mean ") + std::string(guess) + "?",
                  " (use a list of ucx, nvshmem, nccl-set, nccl-rails, cxi, ucx-host)");
    }
    libs |= known->second;
  }
  if ((libs & nic_lib_nccl_set) != 0 && (libs & nic_lib_nccl_rails) != 0)
    return fail(Errc::invalid_argument, "nic_libs=", text.substr(0, 60),
                ": nccl-set and nccl-rails both set NCCL_IB_HCA; name one");
  if ((libs & nic_lib_ucx) != 0 && (libs & nic_lib_ucx_host) != 0)
    return fail(Errc::invalid_argument, "nic_libs=", text.substr(0, 60),
                ": ucx and ucx-host both set UCX_NET_DEVICES; name one");
  return libs;
}

/// "ucx,nvshmem": the words of a nic_libs bit set.
inline std::string nic_libs_text(unsigned libs) {
  std::string out;
  for (const auto& [name, bit] : nic_lib_names)
    if ((libs & bit) != 0) out += std::string(out.empty() ? "" : ",") + std::string(name);
  return out;
}

namespace detail {

/// A GPU's candidates: indexes into topo.nics of the RDMA NICs at its nearest
/// class (g.nics is nearest first), and that class.
inline std::pair<std::vector<std::size_t>, PciPath> nic_candidates(const Topology& topo, const Gpu& g) {
  std::vector<std::size_t> out;
  PciPath path = PciPath::sys;
  for (const auto& np : g.nics) {
    const Nic* n = topo.find_nic(np.nic);
    if (n == nullptr || !n->rail_capable()) continue;
    if (!out.empty() && np.path != path) break;  // only the nearest class
    path = np.path;
    out.push_back(static_cast<std::size_t>(n - topo.nics.data()));
  }
  std::sort(out.begin(), out.end());  // by address (topo.nics is sorted), whatever the list's order
  return {out, path};
}

inline bool overlap(const std::vector<std::size_t>& a, const std::vector<std::size_t>& b) {
  return std::any_of(a.begin(), a.end(), [&](std::size_t x) { return std::find(b.begin(), b.end(), x) != b.end(); });
}

}  // namespace detail

/// The NIC set of each GPU of `gpus` (in that order, which is the order
/// ties and remainders go by), under the rule at the top of this file.
inline std::vector<NicSet> nic_sets(const Topology& topo, std::span<const Gpu> gpus) {
  std::vector<std::pair<std::vector<std::size_t>, PciPath>> cand;
  for (const auto& g : gpus) cand.push_back(detail::nic_candidates(topo, g));
  std::vector<int> uses(topo.nics.size(), 0);
  std::vector<NicSet> out(gpus.size());
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const auto& [mine, path] = cand[i];
    if (mine.empty()) continue;
    std::size_t competitors = 0, before = 0;
    for (std::size_t j = 0; j < gpus.size(); ++j) {
      if (!detail::overlap(mine, cand[j].first)) continue;
      ++competitors;
      if (j < i) ++before;
    }
    std::size_t k = mine.size();
    std::size_t quota = k >= competitors ? k / competitors + (before < k % competitors ? 1 : 0) : 1;
    std::vector<std::size_t> taken;
    for (std::size_t q = 0; q < quota; ++q) {
      std::optional<std::size_t> best;
      for (std::size_t c : mine) {
        if (std::find(taken.begin(), taken.end(), c) != taken.end()) continue;
        if (!best || uses[c] < uses[*best]) best = c;
      }
      taken.push_back(*best);  // quota <= k: a candidate is left
      ++uses[*best];
    }
    std::sort(taken.begin(), taken.end());  // topo.nics is sorted by address
    out[i].path = path;
    for (std::size_t c : taken) out[i].nics.push_back(&topo.nics[c]);
  }
  return out;
}

/// The GPUs the sets are computed over: every GPU of the host when the source
/// knows them, else the process's.
inline std::span<const Gpu> nic_set_gpus(const Topology& topo) {
  return topo.host_gpus.empty() ? std::span<const Gpu>(topo.gpus) : std::span<const Gpu>(topo.host_gpus);
}

/// The NIC set of `g` (a GPU of `topo`, or a device planned as one): its set
/// among nic_set_gpus(), found by address; a device not among them (a PCI
/// device named as the target) competes with none.
inline NicSet nic_set_of(const Topology& topo, const Gpu& g) {
  std::span<const Gpu> all = nic_set_gpus(topo);
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].address() != g.address()) continue;
    return nic_sets(topo, all)[i];
  }
  return nic_sets(topo, std::span<const Gpu>(&g, 1)).front();
}

/// The rails: every NIC in some GPU's set, by address.
inline std::vector<const Nic*> nic_rails(const Topology& topo) {
  std::vector<const Nic*> out;
  for (const auto& s : nic_sets(topo, nic_set_gpus(topo)))
    for (const Nic* n : s.nics)
      if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  std::sort(out.begin(), out.end());  // pointers into topo.nics, which is sorted by address
  return out;
}

/// "mlx5_0:1" (an RDMA NIC: name`:`port, as the libraries name a port),
/// "cxi0" (a Slingshot NIC: its libfabric domain), else its address.
inline std::string nic_label(const Nic& n) {
  if (n.rdma()) return std::string(n.rdma_names.front().view()) + ':' + std::to_string(n.rdma_port);
  if (n.cxi()) return std::string(n.cxi_names.front().view());
  return std::string(n.address.to_string().view());
}

/// A rail NIC's identity as NCCL_IB_HCA spells it (`<hca>:<port>:<rail>:<plane>`,
/// NCCL 2.30.5 and later): `rail` is the index of the first NIC set that holds
/// the NIC among the distinct sets of nic_set_gpus() in GPU order (equal sets,
/// such as two GPUs sharing one NIC, count once), `plane` its place by address
/// in that set. Both depend only on the machine's shape and addresses, so GPU
/// k's NICs are the same rail and plane on every node of one shape.
struct RailIdentity {
  const Nic* nic = nullptr;
  int rail = -1;
  int plane = -1;
};

/// The identity of every rail (nic_rails()), by address.
inline std::vector<RailIdentity> rail_identities(const Topology& topo) {
  std::vector<std::vector<const Nic*>> distinct;
  std::vector<RailIdentity> out;
  for (const auto& s : nic_sets(topo, nic_set_gpus(topo))) {
    if (s.empty() || std::find(distinct.begin(), distinct.end(), s.nics) != distinct.end()) continue;
    int rail = static_cast<int>(distinct.size());
    distinct.push_back(s.nics);
    for (std::size_t p = 0; p < s.nics.size(); ++p) {
      const Nic* n = s.nics[p];
      if (std::any_of(out.begin(), out.end(), [&](const RailIdentity& r) { return r.nic == n; })) continue;
      out.push_back(RailIdentity{n, rail, static_cast<int>(p)});
    }
  }
  std::sort(out.begin(), out.end(), [](const RailIdentity& a, const RailIdentity& b) { return a.nic < b.nic; });
  return out;
}

/// "mlx5_0:1:0:0,cxi0:1:0": each NIC's label (nic_label) with its rail and
/// plane, RDMA and Slingshot NICs alike (what doctor compares across nodes).
inline std::string rail_id_text(const std::vector<RailIdentity>& ids) {
  std::string out;
  for (const auto& r : ids) {
    if (r.nic == nullptr) continue;
    if (!out.empty()) out += ',';
    out += nic_label(*r.nic) + ':' + std::to_string(r.rail) + ':' + std::to_string(r.plane);
  }
  return out;
}

/// The identity of `n` among `ids` (rail_identities()); rail and plane -1 when
/// it is not a rail.
inline RailIdentity rail_identity_of(const std::vector<RailIdentity>& ids, const Nic* n) {
  for (const auto& r : ids)
    if (r.nic == n) return r;
  return RailIdentity{n, -1, -1};
}

/// "mlx5_0:1:0:0,mlx5_1:1:0:1": NICs with their rail and plane in
/// NCCL_IB_HCA's syntax (`<hca>:<port>:<rail>:<plane>`); only NICs with an
/// RDMA name (NCCL's IB transport knows no other). The port is always
/// written: a release before 2.30.5 reads `<hca>:<port>` and skips the rest of
/// the entry, where an empty port (`mlx5_0::0:0`) would read as port 0, a
/// port no device has.
inline std::string nccl_rail_list(const std::vector<RailIdentity>& ids) {
  std::string out;
  for (const auto& r : ids) {
    if (r.nic == nullptr || !r.nic->rdma()) continue;
    if (!out.empty()) out += ',';
    out += r.nic->rdma_names.front().view();
    out += ':' + std::to_string(r.nic->rdma_port) + ':' + std::to_string(r.rail) + ':' + std::to_string(r.plane);
  }
  return out;
}

/// NCCL reads at most this many NCCL_IB_HCA entries (MAX_IB_DEVS in
/// src/transport/net_ib); it drops the others without a word.
inline constexpr std::size_t nccl_ib_hca_max = 32;

/// Why `n` is not a rail ("" when it is one): no RDMA name, or every GPU has
/// nearer RDMA NICs (or none competes for it).
inline std::string_view not_a_rail(const Topology& topo, const Nic& n) {
  if (!n.rail_capable()) return "no RDMA (sys/class/infiniband) or CXI device: not a rail";
  auto rails = nic_rails(topo);
  if (std::find(rails.begin(), rails.end(), &n) != rails.end()) return {};
  if (nic_set_gpus(topo).empty()) return "no GPU: not a rail";
  return "every GPU has a nearer RDMA NIC: not a rail";
}

/// "mlx5_0:1,mlx5_3:1" ("cxi0" for a Slingshot NIC): NICs by nic_label.
inline std::string nic_port_list(const std::vector<const Nic*>& nics) {
  std::string out;
  for (const Nic* n : nics) {
    if (!out.empty()) out += ',';
    out += nic_label(*n);
  }
  return out;
}

/// The RDMA NICs of `nics` as UCX, NVSHMEM and NCCL name them ("mlx5_0:1,mlx5_3:1").
inline std::string rdma_port_list(const std::vector<const Nic*>& nics) {
  std::vector<const Nic*> rdma;
  for (const Nic* n : nics)
    if (n->rdma()) rdma.push_back(n);
  return nic_port_list(rdma);
}

/// The Slingshot NICs of `nics` as libfabric's cxi provider names its domains ("cxi0,cxi1").
inline std::string cxi_list(const std::vector<const Nic*>& nics) {
  std::string out;
  for (const Nic* n : nics)
    if (n->cxi()) out += (out.empty() ? "" : ",") + std::string(n->cxi_names.front().view());
  return out;
}

/// The host NIC set of a process whose pinned host buffers live on `nodes`
/// (LaunchPlan::host_nodes): every rail (nic_rails()) whose PCI numa_node is
/// one of them, by address. Empty when no rail sits on those nodes.
inline std::vector<const Nic*> host_nic_set(const Topology& topo, const NodeSet& nodes) {
  std::vector<const Nic*> out;
  for (const Nic* n : nic_rails(topo))
    if (n->numa_node >= 0 && nodes.contains(n->numa_node)) out.push_back(n);
  return out;
}

/// The NICs a process serving `gpus` (indexes into topo.gpus) uses: the union
/// of their sets, by address, and the farthest of their path classes (the sets
/// computed once).
/// Errors: Errc::not_found when a GPU has no RDMA NIC (or the topology lists
/// no NIC at all), naming where it was read.
inline Result<NicSet> served_nic_set(const Topology& topo, const std::vector<int>& gpus) {
  std::span<const Gpu> all = nic_set_gpus(topo);
  std::vector<NicSet> sets = nic_sets(topo, all);
  NicSet out;
  bool first = true;
  for (int gpu : gpus) {
    if (gpu < 0 || static_cast<std::size_t>(gpu) >= topo.gpus.size())
      return fail(Errc::not_found, "nic_env=true: no GPU ", gpu, " in ", topo.origin.view());
    const Gpu& g = topo.gpus[static_cast<std::size_t>(gpu)];
    auto at = std::find_if(all.begin(), all.end(), [&](const Gpu& x) { return x.address() == g.address(); });
    NicSet set = at != all.end() ? sets[static_cast<std::size_t>(at - all.begin())]
                                 : nic_sets(topo, std::span<const Gpu>(&g, 1)).front();
    if (set.empty()) {
      if (topo.nics.empty())
        return fail(Errc::not_found, "nic_env=true: ", topo.origin.view(),
                    " lists no network device (read it from sysfs: root=DIR or this machine, or a JSON topology "
                    "that has \"nics\"); leave out nic_env=true");
      return fail(Errc::not_found, "nic_env=true: no RDMA NIC (sys/class/infiniband) or Slingshot NIC (sys/class/cxi) reaches GPU ", g.index, " (",
                  g.address().to_string().view(), ") in ", topo.origin.view(), "; leave out nic_env=true");
    }
    out.nics.insert(out.nics.end(), set.nics.begin(), set.nics.end());
    out.path = first ? set.path : std::max(out.path, set.path);
    first = false;
  }
  std::sort(out.nics.begin(), out.nics.end());  // pointers into topo.nics, which is sorted by address
  out.nics.erase(std::unique(out.nics.begin(), out.nics.end()), out.nics.end());
  return out;
}

/// The variables `libs` (NicLib bits) ask for, pointing at `set` (one GPU's,
/// or served_nic_set's union), each with the NICs its library can use:
/// UCX_NET_DEVICES and NVSHMEM_HCA_LIST the set's RDMA NICs
/// ("mlx5_0:1,mlx5_1:1"); NCCL_IB_HCA with a leading "=" (NCCL then matches
/// names exactly, not as prefixes: mlx5_1 would also select mlx5_10), holding
/// the set's RDMA NICs (nccl-set) or every rail with its rail and plane
/// (nccl-rails, "=mlx5_0:1:0:0,...", and NCCL_NET_MERGE_POLICY=RAIL: NCCL
/// 2.30.5 fuses only NICs of one rail; earlier releases ignore it);
/// FI_CXI_DEVICE_NAME the set's Slingshot NICs ("cxi0", cxi); UCX_NET_DEVICES
/// the RDMA NICs of `host` (ucx-host: the host NIC set). A variable whose list
/// would be empty is left out; when `notes` is given, each left out is said
/// there (a library the user named).
/// Errors: Errc::invalid_argument when nccl-rails would list more NICs than
/// NCCL reads (nccl_ib_hca_max), or none; Errc::not_found when no variable is
/// left to write.
inline Result<std::vector<std::pair<std::string, std::string>>> nic_variables(
    const Topology& topo, const NicSet& set, unsigned libs, const std::vector<const Nic*>& host = {},
    std::vector<std::string>* notes = nullptr) {
  std::string mine = rdma_port_list(set.nics);
  std::vector<std::pair<std::string, std::string>> env;
  auto add = [&](std::string_view lib, const char* name, std::string value, std::string_view whose) {
    if (!value.empty()) {
      env.emplace_back(name, std::move(value));
    } else if (notes != nullptr) {
      notes->push_back(std::string("nic_libs=") + std::string(lib) + ": " + std::string(whose) + " holds no NIC " +
                       std::string(lib) + " can use; " + name + " is not set");
    }
  };
  if ((libs & nic_lib_nccl_set) != 0) add("nccl-set", "NCCL_IB_HCA", mine.empty() ? mine : "=" + mine, "the NIC set");
  if ((libs & nic_lib_nccl_rails) != 0) {
    auto ids = rail_identities(topo);
    std::size_t listed = static_cast<std::size_t>(
        std::count_if(ids.begin(), ids.end(), [](const RailIdentity& r) { return r.nic->rdma(); }));
    if (listed == 0)
      return fail(Errc::invalid_argument, "nic_libs=nccl-rails: no rail of ", topo.origin.view(),
                  " has an RDMA name (sys/class/infiniband) for NCCL_IB_HCA; leave nccl-rails out");
    if (listed > nccl_ib_hca_max)
      return fail(Errc::invalid_argument, "nic_libs=nccl-rails: ", topo.origin.view(), " has ", listed,
                  " rail NICs and NCCL reads at most ", nccl_ib_hca_max,
                  " NCCL_IB_HCA entries (the others would be dropped unsaid); use nccl-set");
    env.emplace_back("NCCL_IB_HCA", "=" + nccl_rail_list(ids));
    env.emplace_back("NCCL_NET_MERGE_POLICY", "RAIL");
  }
  if ((libs & nic_lib_ucx) != 0) add("ucx", "UCX_NET_DEVICES", mine, "the NIC set");
  if ((libs & nic_lib_ucx_host) != 0) add("ucx-host", "UCX_NET_DEVICES", rdma_port_list(host), "the host NIC set");
  if ((libs & nic_lib_nvshmem) != 0) add("nvshmem", "NVSHMEM_HCA_LIST", mine, "the NIC set");
  if ((libs & nic_lib_cxi) != 0) add("cxi", "FI_CXI_DEVICE_NAME", cxi_list(set.nics), "the NIC set");
  if (env.empty())
    return fail(Errc::not_found, "nic_env=true: nic_libs=", nic_libs_text(libs), " can use none of the NICs ",
                nic_port_list(set.nics), " (", topo.origin.view(),
                "): name a library for them (ucx, nvshmem, nccl-set for RDMA NICs; cxi for Slingshot NICs)");
  return env;
}

/// The variables for the NIC sets of `gpus` (indexes into topo.gpus).
/// Errors: those of served_nic_set() and nic_variables().
inline Result<std::vector<std::pair<std::string, std::string>>> nic_environment(const Topology& topo,
                                                                                const std::vector<int>& gpus,
                                                                                unsigned libs = default_nic_libs) {
  GPUAFF_TRY(NicSet set, served_nic_set(topo, gpus));
  return nic_variables(topo, set, libs);
}

/// The variables for one GPU's set (an index into topo.gpus).
inline Result<std::vector<std::pair<std::string, std::string>>> nic_environment(const Topology& topo, int gpu,
                                                                                unsigned libs = default_nic_libs) {
  return nic_environment(topo, std::vector<int>{gpu}, libs);
}

/// The RDMA device names a UCX_NET_DEVICES or NVSHMEM_HCA_LIST value lists
/// ("mlx5_0:1,mlx5_3" -> mlx5_0, mlx5_3), ports dropped. A value that
/// excludes ("^mlx5_1") or names no device ("all", "") gives none.
inline std::vector<std::string> listed_devices(std::string_view value) {
  std::vector<std::string> out;
  if (value.empty() || value.front() == '^' || value == "all") return out;
  for (std::string_view item : detail::comma_items(value)) {
    item = item.substr(0, item.find(':'));
    if (!item.empty()) out.emplace_back(item);
  }
  return out;
}

}  // namespace v0
}  // namespace gpuaff

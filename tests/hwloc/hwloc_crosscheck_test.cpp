// SPDX-License-Identifier: Apache-2.0
// Cross-check: for every fixture root under fixtures/, the hwloc source and the
// sysfs source describe the same machine and give the same bindings for every
// policy and GPU. Where they differ by design, the difference is named in the
// table below with its reason; the test fails both on a difference the table
// does not name and on a table entry that no longer happens (so the table
// stays exactly the set of differences).
#include <gpuaff/policy/policy.hpp>
#include <gpuaff/source/hwloc.hpp>
#include <gpuaff/source/sysfs.hpp>

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "support/check.hpp"

using gpuaff::CpuSet;
using gpuaff::Topology;

namespace {

// ---- the differences by design ----------------------------------------------

enum class Diff {
  // hwloc reads no PCI numa_node file: a device's node is where hwloc attaches
  // it by its local_cpus. Where the firmware says -1 but local_cpus names one
  // node, hwloc reports that node; sysfs reports -1 (and the policies infer the
  // same node from local_cpulist, so bindings agree).
  numa_node_from_local_cpus,
  // hwloc's objects hold online CPUs only; the kernel's local_cpulist of a
  // device also names offline CPUs of its node.
  local_cpus_online_only,
  // A recorded allowed set may name CPUs the machine does not have or that are
  // offline; the sysfs source keeps it to the online CPUs (docs/contract.md
  // section 1), hwloc bounds it by the machine's CPUs, offline ones included.
  // The usable set (allowed and online) is the same.
  allowed_bounded_by_machine,
  // Without a recorded Mems_allowed the sysfs source says "unknown" (empty);
  // hwloc reports every node as allowed.
  mems_allowed_unknown,
  // hwloc 2.x keeps 16 bits of PCI class (no programming interface byte).
  pci_class_no_prog_if,
  // The fixture has cache shared_cpu_list but not its mask twin
  // shared_cpu_map, the only file hwloc reads: hwloc sees no caches, so no
  // core complexes, and the core-complex policy has nothing to group by.
  no_cache_masks,
  // hwloc gives every device below one PCI host bridge the locality it reads
  // for the first device on that bus; the kernel reports each device's own.
  // They differ only where a (virtual) machine gives devices on one root bus
  // different local_cpus, e.g. a hypervisor that gives one GPU an affinity and
  // not the next. Bindings then follow hwloc's locality for those devices.
  host_bridge_shared_locality,
  // Without physical_package_id the sysfs source puts every CPU of unknown
  // package into one package -1 (docs/contract.md section 1: `socket` then
  // spans them all); hwloc makes packages of the core_siblings lists. Bindings
  // are compared on the sysfs packages.
  package_unknown,
};

constexpr std::string_view name(Diff d) {
  switch (d) {
    case Diff::numa_node_from_local_cpus: return "numa_node_from_local_cpus";
    case Diff::local_cpus_online_only: return "local_cpus_online_only";
    case Diff::allowed_bounded_by_machine: return "allowed_bounded_by_machine";
    case Diff::mems_allowed_unknown: return "mems_allowed_unknown";
    case Diff::pci_class_no_prog_if: return "pci_class_no_prog_if";
    case Diff::no_cache_masks: return "no_cache_masks";
    case Diff::host_bridge_shared_locality: return "host_bridge_shared_locality";
    case Diff::package_unknown: return "package_unknown";
  }
  return "?";
}

struct Known {
  std::string_view fixture;
  std::vector<Diff> diffs;
};

// Exactly the differences each fixture shows (fixtures not listed: none).
const std::vector<Known>& known_differences() {
  static const std::vector<Known> table = {
      {"cloud-vm-numa-unknown", {Diff::numa_node_from_local_cpus, Diff::host_bridge_shared_locality}},
      {"h100-vm-1gpu", {Diff::numa_node_from_local_cpus}},
      {"hybrid", {Diff::numa_node_from_local_cpus}},
      {"single-node-numa-minus1", {Diff::numa_node_from_local_cpus}},
      // kernel variants (docs/contract.md section 1)
      {"no-node-dir", {Diff::numa_node_from_local_cpus}},
      {"power-no-package-id", {Diff::package_unknown}},
  };
  return table;
}

// Fixtures hwloc cannot load at all, with the reason.
struct NotLoadable {
  std::string_view fixture;
  std::string_view reason;
};
const std::vector<NotLoadable> not_loadable = {};

// Fixtures whose shape the sysfs reader reads with a note (docs/contract.md
// section 1) where hwloc reads something else: nothing to compare, but hwloc
// must still load them.
const std::vector<NotLoadable> read_otherwise = {
    {"empty-cpu-online", "hwloc takes an empty cpu/online as CPU 0 alone; gpuaff reads cpu/present"},
    {"l3-type-missing", "hwloc keeps an L3 index without `type`; gpuaff cannot tell it is the last level and "
                        "reads no core complex"},
    {"llc-not-own-cpu", "hwloc groups CPUs by a shared_cpu_map that does not name its CPU; gpuaff ignores that level"},
    {"duplicate-node-cpus", "both merge the nodes, but hwloc also drops the merged ids from the allowed memory nodes"},
    {"mi300x-cpx", "hwloc has no notion of AMD compute partitions: 8 GPUs where gpuaff (and HIP) count 64"},
};

bool compared(const std::string& fx) {
  return std::none_of(read_otherwise.begin(), read_otherwise.end(), [&](const auto& n) { return n.fixture == fx; });
}

// ---- helpers ------------------------------------------------------------------

std::vector<std::string> fixture_roots() {
  std::vector<std::string> out;
  std::string base = GPUAFF_FIXTURES_DIR;
  if (DIR* d = ::opendir(base.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      struct stat st {};
      if (::stat((base + "/" + n + "/sys/devices/system/cpu").c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        out.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

bool has_cache_masks(const std::string& root, const Topology& t) {
  std::string cache = root + "/sys/devices/system/cpu/cpu" + std::to_string(t.online.first()) + "/cache/";
  for (int k = 0; k < 8; ++k)
    if (exists(cache + "index" + std::to_string(k) + "/shared_cpu_map")) return true;
  return false;
}

gpuaff::VisibleDevices no_env() { return gpuaff::VisibleDevices{.use_environment = false}; }

struct Loaded {
  gpuaff::Result<Topology> sysfs;
  gpuaff::Result<Topology> hwloc;
};

/// Both sources' view of a fixture, loaded once for the whole test program.
const Loaded& load(const std::string& fx) {
  static std::vector<std::pair<std::string, Loaded>> cache;
  for (const auto& [name, l] : cache)
    if (name == fx) return l;
  std::string root = gpuaff_test::fixture(fx);
  Loaded l{gpuaff::SysfsSource(gpuaff::SysfsOptions{.root = root, .visible = no_env()}).load(),
           gpuaff::HwlocSource(
               gpuaff::HwlocOptions{.input = gpuaff::HwlocInput::root, .path = root, .visible = no_env()})
               .load()};
  cache.emplace_back(fx, std::move(l));
  return cache.back().second;
}

/// host_bridge_shared_locality: hwloc's locality of `h` is not the kernel's but
/// that of the lowest-addressed device on the same root bus.
bool shares_first_locality(const Topology& sysfs, const gpuaff::PciDevice& h, const gpuaff::PciDevice& s) {
  CpuSet own = s.local_cpus & sysfs.online;
  if (h.local_cpus == own) return false;
  for (const auto& first : sysfs.pci_devices) {
    if (first.address.domain != s.address.domain || first.address.bus != s.address.bus) continue;
    return first.address < s.address && h.local_cpus == (first.local_cpus & sysfs.online);
  }
  return false;
}

/// The sysfs topology with the localities hwloc gives by host_bridge_shared_locality,
/// so that bindings can be compared on the same locality.
Topology with_hwloc_bridge_locality(Topology sysfs, const Topology& hw) {
  for (std::size_t i = 0; i < sysfs.gpus.size() && i < hw.gpus.size(); ++i) {
    auto& s = sysfs.gpus[i].pci;
    if (shares_first_locality(sysfs, hw.gpus[i].pci, s)) {
      s.local_cpus = hw.gpus[i].pci.local_cpus;
      s.numa_node = hw.gpus[i].pci.numa_node;
    }
  }
  return sysfs;
}

/// package_unknown: `hw` with the sysfs source's packages, where the sysfs
/// source found no package ids.
bool unknown_packages(const Topology& sysfs, const Topology& hw) {
  return hw.packages != sysfs.packages && sysfs.packages.size() == 1 && sysfs.packages[0].id == -1;
}
Topology with_sysfs_packages(const Topology& sysfs, Topology hw) {
  if (!unknown_packages(sysfs, hw)) return hw;
  hw.packages = sysfs.packages;
  for (auto& c : hw.cores) c.package = -1;
  return hw;
}

/// Rewrites hwloc's topology into the sysfs source's conventions wherever a
/// difference by design explains the gap, and records which ones did.
std::set<Diff> normalise(const std::string& root, const Topology& sysfs, Topology& hw) {
  std::set<Diff> seen;
  hw.origin = sysfs.origin;
  // What the sysfs reader assumed, and the allowed set as recorded, are its own.
  hw.notes = sysfs.notes;
  hw.recorded_allowed = sysfs.recorded_allowed;
  if (unknown_packages(sysfs, hw)) {
    hw = with_sysfs_packages(sysfs, hw);
    seen.insert(Diff::package_unknown);
  }
  if (hw.allowed != sysfs.allowed && hw.usable() == sysfs.usable() && sysfs.allowed.is_subset_of(hw.allowed)) {
    hw.allowed = sysfs.allowed;
    seen.insert(Diff::allowed_bounded_by_machine);
  }
  if (sysfs.mems_allowed.empty() && !hw.mems_allowed.empty()) {
    CpuSet all_nodes;
    for (const auto& n : sysfs.nodes) all_nodes.set(n.id);
    if (hw.mems_allowed == all_nodes) {
      hw.mems_allowed = {};
      seen.insert(Diff::mems_allowed_unknown);
    }
  }
  if (hw.core_complexes.empty() && !sysfs.core_complexes.empty() && !has_cache_masks(root, sysfs)) {
    hw.core_complexes = sysfs.core_complexes;
    seen.insert(Diff::no_cache_masks);
  }
  auto fix_device = [&](gpuaff::PciDevice& h, const gpuaff::PciDevice& s) {
    if (shares_first_locality(sysfs, h, s)) {
      h.local_cpus = s.local_cpus;
      h.numa_node = s.numa_node;
      seen.insert(Diff::host_bridge_shared_locality);
      return;
    }
    if (h.class_code != s.class_code && (h.class_code >> 8) == (s.class_code >> 8) && (h.class_code & 0xff) == 0) {
      h.class_code = s.class_code;
      seen.insert(Diff::pci_class_no_prog_if);
    }
    if (h.local_cpus != s.local_cpus && h.local_cpus == (s.local_cpus & sysfs.online)) {
      h.local_cpus = s.local_cpus;
      seen.insert(Diff::local_cpus_online_only);
    }
    if (s.numa_node == -1 && h.numa_node >= 0) {
      // hwloc's node must be the one node with CPUs whose CPUs are the local ones
      const auto* n = sysfs.find_node(h.numa_node);
      if (n != nullptr && (n->cpus & sysfs.online) == (s.local_cpus & sysfs.online)) {
        h.numa_node = -1;
        seen.insert(Diff::numa_node_from_local_cpus);
      }
    }
  };
  for (auto& h : hw.pci_devices)
    if (const auto* s = sysfs.find_pci(h.address)) fix_device(h, *s);
  for (std::size_t i = 0; i < hw.gpus.size() && i < sysfs.gpus.size(); ++i) fix_device(hw.gpus[i].pci, sysfs.gpus[i].pci);
  for (std::size_t i = 0; i < hw.host_gpus.size() && i < sysfs.host_gpus.size(); ++i)
    fix_device(hw.host_gpus[i].pci, sysfs.host_gpus[i].pci);
  return seen;
}

std::string describe(const Topology& a, const Topology& b) {
  std::string s;
  if (a.online != b.online) s += " online";
  if (a.allowed != b.allowed) s += " allowed(" + a.allowed.to_list() + " vs " + b.allowed.to_list() + ")";
  if (a.mems_allowed != b.mems_allowed) s += " mems_allowed";
  if (a.packages != b.packages) s += " packages";
  if (a.nodes != b.nodes) s += " nodes";
  if (a.cores != b.cores) s += " cores";
  if (a.core_complexes != b.core_complexes) s += " core_complexes";
  if (a.pci_devices != b.pci_devices) s += " pci_devices";
  if (a.gpus != b.gpus) s += " gpus";
  if (a.host_gpus != b.host_gpus) s += " host_gpus";
  if (a.hidden_gpus != b.hidden_gpus) s += " hidden_gpus";
  return s;
}

std::string result_text(const gpuaff::Result<CpuSet>& r) {
  return r ? r->to_list() : "error(" + std::string(gpuaff::to_string(r.error().code())) + ")";
}

std::vector<gpuaff::PolicySpec> all_specs() {
  std::vector<gpuaff::PolicySpec> specs;
  for (auto kind : gpuaff::all_policy_kinds) {
    specs.push_back({kind, {}});
    bool nvidia = kind != gpuaff::PolicyKind::node && kind != gpuaff::PolicyKind::socket &&
                  kind != gpuaff::PolicyKind::exclusive && kind != gpuaff::PolicyKind::core_complex;
    if (nvidia) {
      specs.push_back({kind, {.scope = gpuaff::Scope::socket}});
      specs.push_back({kind, {.smt = gpuaff::Smt::one}});
      specs.push_back({kind, {.balanced = false}});
    }
  }
  return specs;
}

}  // namespace

TEST_CASE("hwloc and sysfs describe every fixture alike, except for the listed differences by design") {
  auto roots = fixture_roots();
  REQUIRE_MESSAGE(!roots.empty(), "no fixture roots under " GPUAFF_FIXTURES_DIR);
  for (const auto& fx : roots) {
    CAPTURE(fx);
    std::string root = gpuaff_test::fixture(fx);
    const auto& sysfs = load(fx).sysfs;
    if (!sysfs) {
      // a fixture the sysfs reader rejects (a fault case) has nothing to compare with
      MESSAGE(fx, ": skipped, the sysfs source rejects it: ", sysfs.error().message());
      continue;
    }
    const auto& hw = load(fx).hwloc;
    auto nl = std::find_if(not_loadable.begin(), not_loadable.end(), [&](const auto& n) { return n.fixture == fx; });
    if (nl != not_loadable.end()) {
      CHECK_MESSAGE(!hw, fx, " is listed as not loadable by hwloc (", nl->reason, ") but loads");
      continue;
    }
    REQUIRE_MESSAGE(hw, hw.error().message());
    if (!compared(fx)) continue;

    Topology h = *hw;
    // The hwloc source reads no NICs and no GPU memory nodes (docs/nics.md): compare the rest.
    Topology s = *sysfs;
    s.nics.clear();
    for (auto* gpus : {&s.gpus, &s.host_gpus}) {
      for (auto& g : *gpus) {
        g.nics.clear();
        g.memory_nodes.clear();
      }
    }
    std::set<Diff> seen = normalise(root, s, h);
    CHECK_MESSAGE(h == s, fx, ": hwloc and sysfs differ in:", describe(h, s));

    std::set<Diff> expected;
    for (const auto& k : known_differences())
      if (k.fixture == fx) expected.insert(k.diffs.begin(), k.diffs.end());
    for (Diff d : seen)
      CHECK_MESSAGE(expected.count(d) == 1, fx, ": difference ", name(d),
                    " happens but the table does not list it; if it is by design, add {\"", fx, "\", {Diff::", name(d),
                    "}} to known_differences()");
    for (Diff d : expected)
      CHECK_MESSAGE(seen.count(d) == 1, fx, ": the table lists ", name(d), " but it no longer happens");
  }
}

TEST_CASE("hwloc and sysfs give the same binding for every fixture, policy and GPU") {
  auto specs = all_specs();
  for (const auto& fx : fixture_roots()) {
    CAPTURE(fx);
    if (std::any_of(not_loadable.begin(), not_loadable.end(), [&](const auto& n) { return n.fixture == fx; }))
      continue;
    std::string root = gpuaff_test::fixture(fx);
    const auto& sysfs = load(fx).sysfs;
    const auto& hw = load(fx).hwloc;
    if (!sysfs || !compared(fx)) continue;  // see the test above
    REQUIRE_MESSAGE(hw, hw.error().message());
    bool cache_masks = has_cache_masks(root, *sysfs);
    // host_bridge_shared_locality: compare on hwloc's locality for those devices
    Topology reference = with_hwloc_bridge_locality(*sysfs, *hw);
    // package_unknown: compare on the sysfs packages
    Topology hw_packages = with_sysfs_packages(*sysfs, *hw);
    int gpus = static_cast<int>(sysfs->gpus.size());
    REQUIRE(static_cast<int>(hw->gpus.size()) == gpus);
    for (const auto& spec : specs) {
      for (int g = 0; g < gpus; ++g) {
        for (auto unknown : {gpuaff::UnknownNode::error, gpuaff::UnknownNode::node0}) {
          gpuaff::JobOptions job{.unknown_node = unknown};
          auto a = gpuaff::bind(reference, g, spec, job);
          auto b = gpuaff::bind(hw_packages, g, spec, job);
          if (spec.kind == gpuaff::PolicyKind::core_complex && !cache_masks) {
            // no_cache_masks: hwloc has no cache groups, so no core complex to hand out
            CHECK_MESSAGE(!b, fx, " GPU ", g, ": core-complex without caches should fail, got ", result_text(b));
            continue;
          }
          CHECK_MESSAGE(result_text(a) == result_text(b), fx, " GPU ", g, " policy ", gpuaff::to_string(spec.kind),
                        ": sysfs ", result_text(a), " hwloc ", result_text(b));
        }
        auto ma = gpuaff::memory_nodes(reference, g, {});
        auto mb = gpuaff::memory_nodes(*hw, g, {});
        CHECK_MESSAGE(result_text(ma) == result_text(mb), fx, " GPU ", g, ": memory nodes differ");
      }
    }
  }
}

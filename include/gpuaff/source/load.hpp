// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one way to get a Topology from what a user names: this machine, a
// recorded root (the sysfs reader), a JSON file, or hwloc (a root or an XML
// file). The CLI, the Python module and any C++ launcher load through here, so
// each failure is classified once, where it happens (LoadStage), and no caller
// reads the machine again to find out what went wrong.
//
// The JSON and hwloc readers have dependencies of their own (nlohmann_json,
// libhwloc): they are plugged in through Readers by the program that links
// them (read_json_topology() from source/json.hpp; an hwloc reader from
// source/hwloc.hpp), so this header needs neither.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuaff/result.hpp"
#include "gpuaff/source/dra.hpp"
#include "gpuaff/source/archive.hpp"
#include "gpuaff/source/sysfs.hpp"
#include "gpuaff/source/visible.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

/// Which machine to read. At most one of root, topology and hwloc_xml is set;
/// none: this machine.
struct MachineSource {
  std::string root{};       ///< a directory laid out like `/` (a recording); empty: this machine ("/")
  std::string topology{};   ///< a JSON file written by `gpuaff topo --format json`
  std::string reader = "sysfs";  ///< which reader reads `root` (or this machine): sysfs or hwloc
  std::string hwloc_xml{};  ///< an hwloc XML file (lstopo --of xml)
  /// Whose GPUs an index counts (numbered_vendor): the other vendors' GPUs
  /// are PCI devices, not GPUs, of the machine read.
  GpuVendor vendor = GpuVendor::automatic;

  /// Whether this names another machine than the one running (a recording, a
  /// JSON or XML file): a plan from it is checked against this machine before
  /// it is applied.
  bool another_machine() const {
    return !hwloc_xml.empty() || !topology.empty() || (!root.empty() && root != "/");
  }
  /// Whether the hwloc reader is asked for.
  bool wants_hwloc() const { return !hwloc_xml.empty() || reader == "hwloc"; }
  /// The root the sysfs reader (and the cgroup reader) reads: "/" when none is named.
  std::string root_or_live() const { return root.empty() ? std::string("/") : root; }
};

/// Where a load failed; the class of a failure is the stage's, whatever its Errc.
enum class LoadStage {
  machine,     ///< the machine cannot be read: a broken root or file (exit code 3 in the CLI)
  device,      ///< a named PCI device is not there
  visibility,  ///< the visibility list is wrong: malformed, or names GPUs that are not there (a usage mistake)
};

/// Readers with their own dependencies, plugged in by the program that links them.
struct Readers {
  /// Reads a JSON topology file (source/json.hpp: read_json_topology).
  Result<Topology> (*json)(const std::string& path) = nullptr;
  /// Reads through hwloc (a root, this machine, or source.hwloc_xml) with every
  /// GPU visible, plus `extra_pci` (source/hwloc.hpp: read_hwloc_topology).
  Result<Topology> (*hwloc)(const MachineSource& source, const std::vector<PciAddress>& extra_pci) = nullptr;
  /// Reads the Kubernetes DRA device metadata under a directory
  /// (source/json_dra.hpp: read_dra_metadata).
  Result<DraClaims> (*dra)(const std::string& dir) = nullptr;
};

/// What to load.
struct LoadRequest {
  MachineSource source{};
  VisibleDevices visible{};             ///< the visibility list and variables, already filled in
  std::vector<PciAddress> extra_pci{};  ///< devices that are not GPUs the answer needs (a NIC named by address)
  SysfsDetail detail = SysfsDetail::full;
  /// What the answer needs (SysfsOptions::needs): with binding detail only
  /// these parts are read; with full detail a part outside it that cannot be
  /// read is left out with a note.
  TopologyParts needs = TopologyParts::policies();
  Readers readers{};
  bool priorities = false;  ///< read each core's priority too (SysfsOptions::priorities)
  /// SysfsOptions::probe_device_nodes (the sysfs reader only): drop the NVIDIA
  /// GPUs whose device node the process may not open.
  bool probe_device_nodes = false;
  /// SysfsOptions::focus (the sysfs reader only): the one answer the load is for.
  std::optional<LoadFocus> focus{};
};

namespace detail {

inline const VisibleDevices every_gpu_visible{.list = std::nullopt, .use_environment = false};

inline Unexpected<Error> load_failure(Error e, LoadStage stage, LoadStage* failed_at) {
  if (failed_at != nullptr) *failed_at = stage;
  return Unexpected<Error>(std::move(e));
}

/// Keeps the GPUs of the vendor whose runtime numbers them (numbered_vendor):
/// a display device of another vendor (an Intel or AMD VGA beside NVIDIA
/// GPUs) never takes an index.
/// Errors: Errc::not_found when `asked` names a vendor the machine has no GPU of.
inline Result<void> keep_runtime_gpus(Topology& t, GpuVendor asked) {
  const std::vector<Gpu>& host = t.host_gpus.empty() ? t.gpus : t.host_gpus;
  std::uint16_t vendor = numbered_vendor(host, asked);
  // The GPU devices of every vendor: a reader that numbers one vendor's (the
  // sysfs reader) keeps the others among the PCI devices.
  auto devices_of = [&t, &host](std::uint16_t v) {
    long n = std::count_if(host.begin(), host.end(), [v](const Gpu& g) { return g.pci.vendor == v && g.partition == 0; });
    for (const PciDevice& d : t.pci_devices)
      if (d.is_gpu() && d.vendor == v &&
          std::none_of(host.begin(), host.end(), [&d](const Gpu& g) { return g.address() == d.address; }))
        ++n;
    return n;
  };
  std::string_view asked_name = asked == GpuVendor::nvidia ? "nvidia" : asked == GpuVendor::amd ? "amd" : "intel";
  if (asked != GpuVendor::automatic && devices_of(vendor) == 0) {
    std::string there;
    for (std::uint16_t v : {pci_vendor::nvidia, pci_vendor::amd, pci_vendor::intel})
      if (long n = devices_of(v); n > 0)
        there += std::string(there.empty() ? "" : ", ") + std::to_string(n) + " of " + std::string(runtime_of(v));
    if (there.empty()) there = "none";
    return fail(Errc::not_found, "vendor=", asked_name, ": ", t.origin.view(), " has no GPU of that vendor (it has ", there, "); leave vendor= out or name "
                "the vendor whose runtime the job uses");
  }
  if (asked != GpuVendor::automatic && std::none_of(host.begin(), host.end(), [vendor](const Gpu& g) { return g.pci.vendor == vendor; }))
    return fail(Errc::not_found, "vendor=", asked_name, ": ", t.origin.view(), " numbers the GPUs of ", host.empty() ? std::string_view("no runtime") : runtime_of(host.front().pci.vendor),
                " only (a JSON file lists one runtime's GPUs); read the machine itself, or write the file with that vendor= option");
  // The readers number one vendor's GPUs already; a reader plugged in by
  // another program may not: only then is a list filtered (and copied).
  auto other = [vendor](const Gpu& g) { return g.pci.vendor != vendor; };
  if (vendor == 0 || std::none_of(host.begin(), host.end(), other)) return {};
  t.gpus = runtime_gpus(std::move(t.gpus), vendor);
  t.host_gpus = runtime_gpus(std::move(t.host_gpus), vendor);
  return {};
}

/// Reads the machine with every GPU visible (and `extra_pci`) into `t` (as
/// default-constructed).
inline Result<void> read_machine(Topology& t, const LoadRequest& r, const std::vector<PciAddress>& extra_pci) {
  const MachineSource& s = r.source;
  if (s.reader != "sysfs" && s.reader != "hwloc")
    return fail(Errc::invalid_argument, "source=", s.reader.substr(0, 40), " is not a reader; use source=sysfs or source=hwloc");
  if (s.wants_hwloc()) {
    if (r.readers.hwloc == nullptr)
      return fail(Errc::invalid_argument, "reading through hwloc (", s.hwloc_xml.empty() ? "source=hwloc" : "hwloc_xml=FILE",
                  ") needs libhwloc, which this program does not load; run the same command with gpuaff-hwloc "
                  "(docs/hwloc.md), or read with source=sysfs");
    return read_into(t, r.readers.hwloc, s, extra_pci);  // a plugged reader: out of line
  }
  if (!s.topology.empty()) {
    if (r.readers.json == nullptr)
      return fail(Errc::invalid_argument, "reading topology=", s.topology.substr(0, 80),
                  " needs the JSON reader (gpuaff/source/json.hpp, target gpuaff::json), which this program does "
                  "not include; read a root instead (root=DIR)");
    return read_into(t, r.readers.json, s.topology);
  }
  // A root that is neither a directory nor a file is refused by the reader
  // itself (is_live_root), named, before anything is read.
  SysfsOptions o{.root = s.root_or_live(),
                 .visible = every_gpu_visible,
                 .extra_pci = extra_pci,
                 .detail = r.detail,
                 .visible_later = r.visible,
                 .needs = r.needs,
                 .priorities = r.priorities,
                 .probe_device_nodes = r.probe_device_nodes,
                 .vendor = s.vendor,
                 .focus = r.focus};
  return SysfsSource(std::move(o)).load(t);
}

/// load_machine() into `topo` (as default-constructed).
inline Result<void> load_machine_into(Topology& topo, const LoadRequest& r, LoadStage* failed_at = nullptr) {
  if (auto read = read_machine(topo, r, {}); !read) {
    Error e = read.error();
    if (e.code() == Errc::not_found) e = Error(Errc::io_error, e.message(), e.sys_errno());
    return detail::load_failure(e, LoadStage::machine, failed_at);
  }
  std::vector<PciAddress> missing;
  for (const auto& a : r.extra_pci)
    if (topo.find_pci(a) == nullptr) missing.push_back(a);
  if (!missing.empty()) {
    // The readers load devices that are not GPUs only when asked: ask once more for those.
    if (!r.source.topology.empty())
      return detail::load_failure(make_error(Errc::not_found, "PCI device ", missing.front().to_string(), " is not in ",
                                             r.source.topology.substr(0, 200), "; list its devices with gpuaff topo"),
                                  LoadStage::device, failed_at);
    detail::reset_in_place(topo);
    if (auto again = detail::read_machine(topo, r, r.extra_pci); !again)
      return detail::load_failure(again.error(), again.error().code() == Errc::not_found ? LoadStage::device : LoadStage::machine, failed_at);
    for (const auto& a : r.extra_pci)
      if (topo.find_pci(a) == nullptr)
        return detail::load_failure(make_error(Errc::not_found, "PCI device ", a.to_string(), " is not in ",
                                               topo.origin.view(), "; list the devices with 'lspci -D'"),
                                    LoadStage::device, failed_at);
  }
  if (auto kept = detail::keep_runtime_gpus(topo, r.source.vendor); !kept)
    return detail::load_failure(kept.error(), LoadStage::device, failed_at);
  auto gpus = select_visible_gpus(std::move(topo.gpus), r.visible);
  if (!gpus) return detail::load_failure(gpus.error(), LoadStage::visibility, failed_at);
  topo.gpus = std::move(*gpus);
  return {};
}

}  // namespace detail

/// Loads the machine a request names, in three stages: read the machine with
/// every GPU (LoadStage::machine: a missing file there is a broken root, so
/// Errc::not_found is reported as Errc::io_error); the `extra_pci` devices
/// (LoadStage::device, Errc::not_found when one is absent); the visibility
/// list (LoadStage::visibility: Errc::invalid_argument for a malformed list,
/// Errc::not_found for a UUID or index that matches no GPU). On failure the
/// stage is stored in `*failed_at` when given.
inline Result<Topology> load_machine(const LoadRequest& r, LoadStage* failed_at = nullptr) {
  return detail::built_in_place<Topology>([&](Topology& t) { return detail::load_machine_into(t, r, failed_at); });
}

}  // namespace v0
}  // namespace gpuaff

#include "load.hpp"

#include <sys/stat.h>

#include <utility>

#include "gpuaff/source/json.hpp"

namespace gpuaff::cli {
namespace {

const VisibleDevices every_gpu{.list = std::nullopt, .use_environment = false};

std::string root_of(const SourceOptions& o) { return o.root.empty() ? std::string("/") : o.root; }

/// The sysfs reader's options: every GPU visible (load_topology applies the
/// visibility list itself), and the list passed on as visible_later so that
/// binding detail still reads the UUIDs when the list (or the environment) names them.
SysfsOptions sysfs_options(const SourceOptions& o, std::vector<PciAddress> extra_pci) {
  return SysfsOptions{.root = root_of(o),
                      .visible = every_gpu,
                      .extra_pci = std::move(extra_pci),
                      .detail = o.detail,
                      .visible_later = o.visible};
}

/// Reads the machine with every GPU visible. A file that is missing here is a
/// broken root, not a missing device, so Errc::not_found becomes Errc::io_error
/// (exit code 3, "the topology cannot be read").
Result<Topology> read_machine(const SourceOptions& o, const std::vector<PciAddress>& extra_pci) {
  if (o.source != "sysfs" && o.source != "hwloc")
    return fail(Errc::invalid_argument, "--source '", o.source, "' is not a reader; use sysfs or hwloc");
  Result<Topology> topo = Unexpected<Error>(make_error(Errc::io_error, "no source"));
  if (wants_hwloc(o)) {
    topo = read_with_hwloc(o, extra_pci);
  } else if (!o.topology_file.empty()) {
    JsonSource source(JsonSource::Options{.path = o.topology_file, .visible = every_gpu});
    topo = source.load();
  } else {
    std::string root = root_of(o);
    struct stat st {};
    if (::stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return fail(Errc::io_error, "topology root '", root,
                  "' is not a directory; pass --root with a tree made by 'gpuaff record --out DIR', or leave "
                  "--root out to read this machine");
    }
    topo = SysfsSource(sysfs_options(o, extra_pci)).load();
  }
  if (!topo && topo.error().code() == Errc::not_found) {
    return Unexpected<Error>(Error(Errc::io_error, topo.error().message(), topo.error().sys_errno()));
  }
  return topo;
}

/// Reads the --pci devices the first read did not hold (the readers load
/// non-GPU devices only when asked).
Result<Topology> read_extra_devices(const SourceOptions& o, const std::vector<PciAddress>& missing) {
  if (!o.topology_file.empty()) {
    return fail(Errc::not_found, "PCI device ", missing.front().to_string(), " is not in ", o.topology_file,
                "; list the devices with 'gpuaff topo --topology ", o.topology_file, "'");
  }
  if (wants_hwloc(o)) {  // hwloc reports what it has; absent ones stay absent
    GPUAFF_TRY(Topology topo, read_machine(o, o.extra_pci));
    for (const auto& a : o.extra_pci)
      if (topo.find_pci(a) == nullptr)
        return fail(Errc::not_found, "PCI device ", a.to_string(), " is not in ", topo.origin.view(),
                    "; list the devices with 'lspci -D'");
    return topo;
  }
  return SysfsSource(sysfs_options(o, o.extra_pci)).load();
}

}  // namespace

bool wants_hwloc(const SourceOptions& o) { return !o.hwloc_xml.empty() || o.source == "hwloc"; }

Result<Topology> load_topology(const SourceOptions& o) {
  GPUAFF_TRY(Topology topo, read_machine(o, {}));
  std::vector<PciAddress> missing;
  for (const auto& a : o.extra_pci)
    if (topo.find_pci(a) == nullptr) missing.push_back(a);
  if (!missing.empty()) {
    GPUAFF_TRY(topo, read_extra_devices(o, missing));
  }
  GPUAFF_TRY(topo.gpus, select_visible_gpus(topo.gpus, o.visible.with_environment()));
  return topo;
}

bool reads_another_machine(const SourceOptions& o) {
  return !o.hwloc_xml.empty() || !o.topology_file.empty() || (!o.root.empty() && o.root != "/");
}

}  // namespace gpuaff::cli

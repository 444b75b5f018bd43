#pragma once
// The one place where gpuaff's commands get a Topology. Every command that
// reads a machine registers its source flags with add_source_options() and
// loads with load_topology(), so a new source (hwloc) is added here and
// nowhere else.

#include <sys/stat.h>

#include <string>
#include <utility>
#include <vector>

#include "gpuaff/source/visible.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/source/json.hpp"
#include "gpuaff/source/sysfs.hpp"
#include "gpuaff/topology.hpp"
#ifdef GPUAFF_HAS_HWLOC
#include "gpuaff/source/hwloc.hpp"  // --source hwloc, --hwloc-xml (docs/hwloc.md)
#endif

namespace gpuaff::cli {

struct SourceOptions {
  std::string root;           ///< --root DIR; empty: the live machine ("/")
  std::string topology_file;  ///< --topology FILE.json
  VisibleDevices visible{};   ///< --visible-devices, else the environment
  std::vector<PciAddress> extra_pci{};  ///< --pci targets the reader must also read
  /// What the sysfs reader reads: full for topo (it shows everything), binding for
  /// bind and exec (a rank needs no more; see SysfsDetail). Other sources ignore it.
  SysfsDetail detail = SysfsDetail::full;
#ifdef GPUAFF_HAS_HWLOC
  std::string source = "sysfs";  ///< --source sysfs|hwloc: which reader reads --root (or this machine)
  std::string hwloc_xml;         ///< --hwloc-xml FILE: an hwloc XML topology (lstopo --of xml)
#endif
};

/// Registers --root and --topology (they exclude each other). App is CLI::App;
/// a template so that this header does not need CLI11.
template <class App>
void add_source_options(App& app, SourceOptions& o) {
  auto* root = app.add_option("--root", o.root,
                              "Read the machine from a recorded root (a directory laid out like /, see "
                              "'gpuaff record'); default: this machine")
                   ->type_name("DIR");
  auto* json = app.add_option("--topology", o.topology_file,
                              "Read the machine from a JSON file written by 'gpuaff topo --format json'")
                   ->type_name("FILE.json");
  root->excludes(json);
  json->excludes(root);
#ifdef GPUAFF_HAS_HWLOC
  app.add_option("--source", o.source,
                 "Which reader reads --root or this machine: sysfs (gpuaff's own) or hwloc (see docs/hwloc.md)")
      ->type_name("sysfs|hwloc")
      ->capture_default_str();
  auto* xml = app.add_option("--hwloc-xml", o.hwloc_xml, "Read the machine from an hwloc XML file (lstopo --of xml)")
                  ->type_name("FILE.xml");
  xml->excludes(root)->excludes(json);
#endif
}

namespace detail {

/// The sysfs reader's options: every GPU visible (load_topology applies the
/// visibility list itself), and the list passed on as visible_later so that
/// binding detail still reads the UUIDs when the list (or the environment) names them.
inline SysfsOptions sysfs_options(const SourceOptions& o, std::string root, std::vector<PciAddress> extra_pci) {
  return SysfsOptions{.root = std::move(root),
                      .visible = VisibleDevices{.list = std::nullopt, .use_environment = false},
                      .extra_pci = std::move(extra_pci),
                      .detail = o.detail,
                      .visible_later = o.visible};
}

/// Reads the machine with every GPU visible. A file that is missing here is a
/// broken root, not a missing device, so Errc::not_found becomes Errc::io_error
/// (exit code 3, "the topology cannot be read").
inline Result<Topology> read_machine(const SourceOptions& o, const std::vector<PciAddress>& extra_pci) {
  VisibleDevices every_gpu{.list = std::nullopt, .use_environment = false};
  Result<Topology> topo = Unexpected<Error>(make_error(Errc::io_error, "no source"));
#ifdef GPUAFF_HAS_HWLOC
  if (o.source != "sysfs" && o.source != "hwloc")
    return fail(Errc::invalid_argument, "--source '", o.source, "' is not a reader; use sysfs or hwloc");
  if (!o.hwloc_xml.empty() || o.source == "hwloc") {
    HwlocOptions h{.visible = every_gpu, .extra_pci = extra_pci};
    if (!o.hwloc_xml.empty()) h = HwlocOptions{.input = HwlocInput::xml, .path = o.hwloc_xml, .visible = every_gpu, .extra_pci = extra_pci};
    else if (!o.root.empty() && o.root != "/") h = HwlocOptions{.input = HwlocInput::root, .path = o.root, .visible = every_gpu, .extra_pci = extra_pci};
    topo = HwlocSource(h).load();
  } else
#endif
  if (!o.topology_file.empty()) {
    JsonSource source(JsonSource::Options{.path = o.topology_file, .visible = every_gpu});
    topo = source.load();
  } else {
    std::string root = o.root.empty() ? std::string("/") : o.root;
    struct stat st {};
    if (::stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return fail(Errc::io_error, "topology root '", root,
                  "' is not a directory; pass --root with a tree made by 'gpuaff record --out DIR', or leave "
                  "--root out to read this machine");
    }
    SysfsSource source(sysfs_options(o, root, extra_pci));
    topo = source.load();
  }
  if (!topo && topo.error().code() == Errc::not_found) {
    return Unexpected<Error>(Error(Errc::io_error, topo.error().message(), topo.error().sys_errno()));
  }
  return topo;
}

}  // namespace detail

/// Loads the topology the options name, in three steps whose errors fall in
/// different classes (and exit codes): read the machine with every GPU
/// (Errc::io_error, parse_error, out_of_range: the topology is broken); read the
/// --pci devices that are not GPUs (Errc::not_found: no such device); apply
/// --visible-devices or CUDA_/HIP_/ROCR_VISIBLE_DEVICES (Errc::invalid_argument
/// for a garbage list, Errc::not_found for a UUID that matches no GPU).
inline Result<Topology> load_topology(const SourceOptions& o) {
  GPUAFF_TRY(Topology topo, detail::read_machine(o, {}));
  std::vector<PciAddress> missing;
  for (const auto& a : o.extra_pci)
    if (topo.find_pci(a) == nullptr) missing.push_back(a);
  if (!missing.empty()) {
    if (!o.topology_file.empty()) {
      return fail(Errc::not_found, "PCI device ", missing.front().to_string(), " is not in ", o.topology_file,
                  "; list the devices with 'gpuaff topo --topology ", o.topology_file, "'");
    }
#ifdef GPUAFF_HAS_HWLOC
    if (!o.hwloc_xml.empty() || o.source == "hwloc") {  // hwloc reports what it has; absent ones stay absent
      GPUAFF_TRY(topo, detail::read_machine(o, o.extra_pci));
      for (const auto& a : o.extra_pci)
        if (topo.find_pci(a) == nullptr)
          return fail(Errc::not_found, "PCI device ", a.to_string(), " is not in ", topo.origin.view(),
                      "; list the devices with 'lspci -D'");
    } else
#endif
    {
    SysfsSource source(detail::sysfs_options(o, o.root.empty() ? std::string("/") : o.root, o.extra_pci));
    GPUAFF_TRY(topo, source.load());
    }
  }
  GPUAFF_TRY(topo.gpus, select_visible_gpus(topo.gpus, o.visible.with_environment()));
  return topo;
}

/// Whether the options read another machine (a recording, a JSON or XML file)
/// rather than this one: `exec` then checks that the planned CPUs exist here.
inline bool reads_another_machine(const SourceOptions& o) {
#ifdef GPUAFF_HAS_HWLOC
  if (!o.hwloc_xml.empty()) return true;
#endif
  return !o.topology_file.empty() || (!o.root.empty() && o.root != "/");
}

}  // namespace gpuaff::cli

#pragma once
// The one place where gpuaff's commands get a Topology: from this machine or a
// recorded root (the sysfs reader), a JSON file, or through hwloc. main.cpp
// registers the flags that fill SourceOptions; a new source is added here.

#include <string>
#include <vector>

#include "gpuaff/result.hpp"
#include "gpuaff/source/sysfs.hpp"
#include "gpuaff/source/visible.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff::cli {

struct SourceOptions {
  std::string root;           ///< --root DIR; empty: the live machine ("/")
  std::string topology_file;  ///< --topology FILE.json
  VisibleDevices visible{};   ///< --visible-devices, else the environment
  std::vector<PciAddress> extra_pci{};  ///< --pci targets the reader must also read
  /// What the sysfs reader reads: full for topo (it shows everything), binding for
  /// bind and exec (a rank needs no more; see SysfsDetail). Other sources ignore it.
  SysfsDetail detail = SysfsDetail::full;
  std::string source = "sysfs";  ///< --source sysfs|hwloc: which reader reads --root (or this machine)
  std::string hwloc_xml;         ///< --hwloc-xml FILE: an hwloc XML topology (lstopo --of xml)
};

/// Loads the topology the options name, in three steps whose errors fall in
/// different classes (and exit codes): read the machine with every GPU
/// (Errc::io_error, parse_error, out_of_range: the topology is broken); read the
/// --pci devices that are not GPUs (Errc::not_found: no such device); apply
/// --visible-devices or CUDA_/HIP_/ROCR_VISIBLE_DEVICES (Errc::invalid_argument
/// for a garbage list, Errc::not_found for a UUID that matches no GPU).
Result<Topology> load_topology(const SourceOptions& o);

/// Whether the options read another machine (a recording, a JSON or XML file)
/// rather than this one: `exec` then checks that the planned CPUs exist here.
bool reads_another_machine(const SourceOptions& o);

/// Whether the options ask for hwloc (--source hwloc or --hwloc-xml).
bool wants_hwloc(const SourceOptions& o);

/// Reads the machine through hwloc with every GPU visible, plus `extra_pci`.
/// Defined by hwloc_reader.cpp in gpuaff-hwloc; in gpuaff, which does not load
/// hwloc, by no_hwloc.cpp as an Errc::invalid_argument that names gpuaff-hwloc.
Result<Topology> read_with_hwloc(const SourceOptions& o, const std::vector<PciAddress>& extra_pci);

}  // namespace gpuaff::cli

// gpuaff-hwloc's reader: --source hwloc and --hwloc-xml (docs/hwloc.md).
// Linked into gpuaff-hwloc only, so that gpuaff itself loads no libhwloc.
#include "gpuaff/source/hwloc.hpp"
#include "load.hpp"

namespace gpuaff::cli {

Result<Topology> read_with_hwloc(const SourceOptions& o, const std::vector<PciAddress>& extra_pci) {
  VisibleDevices every_gpu{.list = std::nullopt, .use_environment = false};
  HwlocOptions h{.visible = every_gpu, .extra_pci = extra_pci};
  if (!o.hwloc_xml.empty()) {
    h = HwlocOptions{.input = HwlocInput::xml, .path = o.hwloc_xml, .visible = every_gpu, .extra_pci = extra_pci};
  } else if (!o.root.empty() && o.root != "/") {
    h = HwlocOptions{.input = HwlocInput::root, .path = o.root, .visible = every_gpu, .extra_pci = extra_pci};
  }
  return HwlocSource(h).load();
}

}  // namespace gpuaff::cli

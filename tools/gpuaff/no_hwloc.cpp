// gpuaff's answer to --source hwloc and --hwloc-xml: gpuaff does not load
// libhwloc (nor the libudev that comes with it) on any run; gpuaff-hwloc, the
// same CLI linked with hwloc, reads through it (docs/hwloc.md).
#include "load.hpp"

namespace gpuaff::cli {

Result<Topology> read_with_hwloc(const SourceOptions& o, const std::vector<PciAddress>&) {
  std::string_view flag = o.hwloc_xml.empty() ? "--source hwloc" : "--hwloc-xml";
  return fail(Errc::invalid_argument, flag, " reads through hwloc, which this gpuaff does not load; run the same "
              "command with gpuaff-hwloc (see docs/hwloc.md)");
}

}  // namespace gpuaff::cli

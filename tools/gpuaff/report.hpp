// SPDX-License-Identifier: Apache-2.0
#pragma once
// The text report of `gpuaff topo`: what a machine looks like and what each
// policy gives each GPU, in a form that can be pasted into a bug report.
// Rendering is pure: the bindings are computed by the caller and passed in,
// so the renderer only formats a Topology and those results.

#include <functional>
#include <string>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/source/cgroup.hpp"
#include "gpuaff/source/reserved.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff::cli {

/// What one policy gives each visible GPU (index = GPU index).
struct PolicyRow {
  std::string policy;
  std::vector<Result<CpuSet>> per_gpu;
};

enum class Color { never, always };

struct ReportOptions {
  Color color = Color::never;
  std::string job;                 ///< one line describing the job options used for the table
  std::vector<PolicyRow> table;    ///< every policy
  PolicyRow picture;               ///< the policy drawn in the core grid
  /// Per GPU, the node the policies use (resolve_gpu_node): differs from the PCI
  /// numa_node when that is -1 and the node is inferred. Empty: not shown.
  std::vector<Result<int>> resolved_nodes;
  /// Per GPU, the node inferred without --unknown-node (from local_cpulist and the like).
  std::vector<Result<int>> inferred_nodes;
  int wrap_cells = 32;             ///< cores per line in the picture
};

/// A fixed-width table, each line starting with `indent`: the first row is the header.
std::string render_table(const std::vector<std::vector<std::string>>& rows, std::string_view indent);

/// The widest line of the report, in columns.
inline constexpr std::size_t report_width = 120;

/// The whole report, ending in a newline, no line wider than report_width.
std::string render_report(const Topology& topo, const ReportOptions& options);

// report_nics.cpp
/// The NICs and each GPU's NICs by path class, drawn with `table`; "" without NICs.
std::string nics_section(const Topology& topo,
                         const std::function<std::string(const std::vector<std::vector<std::string>>&)>& table);
/// "GPU memory nodes: GPU 0: 2; ..." and a newline; "" when no GPU has any.
std::string memory_nodes_line(const Topology& topo);
/// "; RDMA NICs: mlx5_0 mlx5_3" for the picture's header of `node`; "" when none.
std::string nics_of_node(const Topology& topo, int node);

/// "System reservations:" lines for topo and doctor: the CPUs isolcpus,
/// nohz_full and an isolated cgroup partition keep free of housekeeping, the
/// housekeeping CPUs --reserve-os-cores auto keeps for the OS, and the online
/// CPUs the cgroup cpuset leaves out (a Slurm step's specialized cores among
/// them). `reserved` nullopt: not read (a topology file); an error: its message.
std::string reservations_section(const CpuSet& online, const Result<SystemReservations>* reserved,
                                 const std::optional<CgroupCpuset>& cgroup);

}  // namespace gpuaff::cli

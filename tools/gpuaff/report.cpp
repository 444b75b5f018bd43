// SPDX-License-Identifier: Apache-2.0
#include "report.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <utility>

#include "cli_options.hpp"
#include "gpuaff/detail/parse.hpp"
#include "gpuaff/source/visible.hpp"
#include "gpuaff/version.hpp"
#include "wrap.hpp"

namespace gpuaff::cli {
namespace {

std::string list_or(const CpuSet& s, std::string_view empty) { return s.empty() ? std::string(empty) : s.to_list(); }

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}
std::string pad_left(std::string s, std::size_t width) {
  if (s.size() < width) s.insert(0, width - s.size(), ' ');
  return s;
}

std::string hex(unsigned value, int digits) {
  static constexpr char d[] = "0123456789abcdef";
  std::string s(static_cast<std::size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, value >>= 4) s[static_cast<std::size_t>(i)] = d[value & 0xf];
  return "0x" + s;
}

/// The node of GPU `index` in a list of resolutions, or -1 when unknown.
int node_at(const std::vector<Result<int>>& nodes, int index) {
  if (index < 0 || static_cast<std::size_t>(index) >= nodes.size()) return -1;
  const auto& r = nodes[static_cast<std::size_t>(index)];
  return r ? *r : -1;
}

std::string smt_summary(const Topology& topo) {
  if (topo.cores.empty()) return "unknown (no cores read)";
  int lo = topo.cores.front().threads.count();
  int hi = lo;
  for (const auto& c : topo.cores) {
    lo = std::min(lo, c.threads.count());
    hi = std::max(hi, c.threads.count());
  }
  std::string cores = std::to_string(topo.cores.size()) + " physical cores";
  if (hi == 1) return "off, " + cores;
  if (lo == hi) return "on, " + std::to_string(hi) + " threads per core, " + cores;
  return "mixed, " + std::to_string(lo) + " to " + std::to_string(hi) + " threads per core, " + cores;
}

// ANSI colours for GPU cells, cycled; bold on a coloured background reads on
// light and dark terminals alike.
constexpr std::string_view palette[] = {"\033[1;97;41m", "\033[1;30;42m", "\033[1;30;43m", "\033[1;97;44m",
                                        "\033[1;97;45m", "\033[1;30;46m", "\033[1;30;47m", "\033[1;97;100m"};
constexpr std::string_view reset = "\033[0m";
constexpr std::string_view dim = "\033[2m";
constexpr std::string_view shared = "\033[1m";

std::string picture(const Topology& topo, const ReportOptions& o) {
  std::string out;
  const auto& row = o.picture;
  std::size_t gpus = row.per_gpu.size();
  int max_index = gpus == 0 ? 0 : static_cast<int>(gpus) - 1;
  std::size_t cell = std::to_string(max_index).size();
  bool color = o.color == Color::always;

  out += "Picture: policy " + row.policy +
         ", one cell per physical core in CPU order; the cell is the GPU the core goes to\n"
         "  ('.' no GPU, '+' several GPUs, 'x' not usable: offline or outside the allowed set)\n";
  std::vector<std::string> failed;
  for (std::size_t g = 0; g < gpus; ++g)
    if (!row.per_gpu[g]) failed.push_back("GPU " + std::to_string(g) + ": " + std::string(row.per_gpu[g].error().message()));
  for (const auto& f : failed) out += "  not drawn, " + detail::escape_control(cli_spelling(f)) + '\n';

  // Group the cores by (package, node) in the order of the ids.
  std::map<std::pair<int, int>, std::vector<const Core*>> groups;
  for (const auto& core : topo.cores) groups[{core.package, topo.node_of_cpu(core.first())}].push_back(&core);
  CpuSet usable = topo.usable();
  for (const auto& [key, cores] : groups) {
    auto [package, node] = key;
    out += "  package " + (package < 0 ? std::string("?") : std::to_string(package)) + ", node " +
           (node < 0 ? std::string("?") : std::to_string(node)) + nics_of_node(topo, node) + ":\n";
    for (std::size_t start = 0; start < cores.size(); start += static_cast<std::size_t>(std::max(1, o.wrap_cells))) {
      std::size_t end = std::min(cores.size(), start + static_cast<std::size_t>(std::max(1, o.wrap_cells)));
      std::string line = "    cpu " + pad_left(std::to_string(cores[start]->first()), 4) + " ";
      for (std::size_t i = start; i < end; ++i) {
        const Core& core = *cores[i];
        int owner = -1;
        int owners = 0;
        for (std::size_t g = 0; g < gpus; ++g)
          if (row.per_gpu[g] && row.per_gpu[g]->intersects(core.threads)) {
            if (owners++ == 0) owner = static_cast<int>(g);
          }
        std::string text;
        std::string_view style;
        if (!core.threads.intersects(usable)) {
          text = "x";
          style = dim;
        } else if (owners == 0) {
          text = ".";
          style = dim;
        } else if (owners > 1) {
          text = "+";
          style = shared;
        } else {
          text = std::to_string(owner);
          style = palette[static_cast<std::size_t>(owner) % std::size(palette)];
        }
        text = pad_left(text, cell);
        line += ' ';
        if (color && !style.empty()) line += std::string(style) + text + std::string(reset);
        else line += text;
      }
      out += line + '\n';
    }
  }
  if (groups.empty()) out += "  (no cores)\n";
  return out;
}

std::string bindings_table(const Topology& topo, const ReportOptions& o) {
  std::string out = "Bindings per policy";
  if (!o.job.empty()) out += " (" + o.job + ")";
  out += ":\n";
  if (topo.gpus.empty()) return out + "  (no visible GPUs)\n";
  // Errors become footnotes so the table stays narrow; equal messages share one.
  std::vector<std::string> notes;
  auto note = [&](const Error& e) {
    std::string m(e.message());
    auto it = std::find(notes.begin(), notes.end(), m);
    std::size_t n = static_cast<std::size_t>(it - notes.begin());
    if (it == notes.end()) notes.push_back(m);
    return "error [" + std::to_string(n + 1) + "]";
  };
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header{"policy"};
  for (std::size_t g = 0; g < topo.gpus.size(); ++g) header.push_back("GPU " + std::to_string(g));
  rows.push_back(header);
  for (const auto& p : o.table) {
    std::vector<std::string> r{p.policy};
    for (const auto& res : p.per_gpu) r.push_back(res ? list_or(*res, "(empty)") : note(res.error()));
    rows.push_back(r);
  }
  std::size_t width = 0;
  for (const auto& r : rows) {
    std::size_t w = 2;
    for (const auto& c : r) w += c.size() + 2;
    width = std::max(width, w);
  }
  if (width <= 120) {
    out += render_table(rows, "  ");
  } else {
    // Too wide for a terminal or an issue tracker: one line per policy and GPU.
    for (std::size_t i = 1; i < rows.size(); ++i) {
      out += "  " + rows[i][0] + '\n';
      std::vector<std::vector<std::string>> sub;
      for (std::size_t g = 1; g < rows[i].size(); ++g) sub.push_back({rows[0][g], rows[i][g]});
      out += render_table(sub, "    ");
    }
  }
  // As every message of the command line: escaped, options spelled as flags.
  for (std::size_t i = 0; i < notes.size(); ++i)
    out += "  [" + std::to_string(i + 1) + "] " + detail::escape_control(cli_spelling(notes[i])) + '\n';
  return out;
}

/// The report's head: version, origin, CPU sets, packages, SMT, core
/// complexes and the source's notes.
std::string machine_summary(const Topology& topo) {
  std::string out;
  out += "gpuaff " + std::string(version_string) + " topology report\n";
  out += "origin:        " + detail::escape_control(topo.origin.view()) + '\n';
  CpuSet usable = topo.usable();
  out += "CPUs online:   " + list_or(topo.online, "(none)") + " (" + std::to_string(topo.online.count()) + ")\n";
  out += "CPUs allowed:  " + list_or(topo.allowed, "(none)") + " (" + std::to_string(topo.allowed.count()) +
         "; usable, allowed and online: " + std::to_string(usable.count()) + ")\n";
  if (!topo.recorded_allowed.empty())
    out += "               (recorded: " + topo.recorded_allowed.to_list() + "; only the online CPUs count)\n";
  out += "memory nodes allowed: " + (topo.mems_allowed.empty() ? std::string("unknown") : topo.mems_allowed.to_list()) +
         '\n';
  out += "packages:      " + std::to_string(topo.packages.size());
  for (const auto& p : topo.packages)
    out += (&p == &topo.packages.front() ? "  " : "; ") + (p.id < 0 ? std::string("?") : std::to_string(p.id)) + ": " +
           list_or(p.cpus, "(none)");
  out += '\n';
  out += "SMT:           " + smt_summary(topo) + '\n';
  if (!topo.core_complexes.empty()) {
    out += "core complexes: " + std::to_string(topo.core_complexes.size()) + " (L" +
           std::to_string(topo.core_complexes.front().level) + " groups)\n";
  }
  // What the source assumed where the machine did not say.
  if (!topo.notes.empty()) {
    out += "notes:\n";
    // Escaped: a --topology JSON file's notes are its author's text, as a recording's contents are.
    for (const auto& n : topo.notes) out += "  - " + detail::escape_control(n) + '\n';
  }
  return out;
}

/// The visible GPUs, one row each; a GPU whose numa_node is -1 shows the node
/// it was given (inferred, or by --unknown-node).
std::string gpus_section(const Topology& topo, const ReportOptions& o) {
  std::string out = "\nGPUs (" + std::to_string(topo.gpus.size()) + " visible";
  if (topo.gpu_vendor() != 0) out += ", numbered as " + std::string(runtime_of(topo.gpu_vendor())) + " numbers them";
  out += "):\n";
  if (topo.gpus.empty()) return out + "  (none)\n";
  std::vector<std::vector<std::string>> rows{{"index", "pci", "vendor:device", "node", "local CPUs", "uuid"}};
  for (const auto& g : topo.gpus) {
    std::string node = std::to_string(g.numa_node());
    if (g.numa_node() < 0) {
      int inferred = node_at(o.inferred_nodes, g.index);
      int r = node_at(o.resolved_nodes, g.index);
      node = inferred >= 0 ? std::to_string(inferred) + " (inferred; numa_node -1)"
             : r >= 0      ? std::to_string(r) + " (--unknown-node; numa_node -1)"
                           : std::string("unknown (-1)");
    }
    std::string pci(g.address().to_string().view());
    if (g.pci.compute_partitions > 1)  // an AMD partition: which of its device's
      pci += " (" + std::to_string(g.partition) + "/" + std::to_string(g.pci.compute_partitions) + ")";
    rows.push_back({std::to_string(g.index), pci,
                    hex(g.pci.vendor, 4).substr(2) + ":" + hex(g.pci.device, 4).substr(2), node,
                    g.pci.has_local_cpus ? list_or(g.pci.local_cpus, "(none)") : std::string("-"),
                    g.uuid.size() == 0 ? std::string("-") : detail::escape_control(g.uuid.view())});
  }
  return out + render_table(rows, "  ");
}

/// Devices read but not visible as GPUs: the host's GPUs a container did not
/// give this process (the driver's list), those *_VISIBLE_DEVICES hide, and
/// devices named with --pci. Empty when there are none.
std::string other_devices_section(const Topology& topo) {
  std::vector<std::vector<std::string>> others{{"pci", "class", "vendor:device", "node", "note"}};
  for (const auto& d : topo.pci_devices) {
    bool visible = std::any_of(topo.gpus.begin(), topo.gpus.end(), [&](const Gpu& g) { return g.address() == d.address; });
    if (visible) continue;
    others.push_back({std::string(d.address.to_string().view()), hex(d.class_code, 6),
                      hex(d.vendor, 4).substr(2) + ":" + hex(d.device, 4).substr(2),
                      d.numa_node < 0 ? std::string("unknown (-1)") : std::to_string(d.numa_node),
                      !d.is_gpu() ? "not a GPU"
                      : topo.gpu_vendor() != 0 && d.vendor != topo.gpu_vendor()
                          ? "GPU of another runtime than " + std::string(runtime_of(topo.gpu_vendor())) + " (see --vendor)"
                      : std::find(topo.hidden_gpus.begin(), topo.hidden_gpus.end(), d.address) != topo.hidden_gpus.end()
                          ? "GPU of the host, not this process's (not in proc/driver/nvidia/gpus)"
                          : "GPU, not visible (*_VISIBLE_DEVICES)"});
  }
  if (others.size() <= 1) return {};
  return "other PCI devices:\n" + render_table(others, "  ");
}

/// The NUMA distance matrix, "?" where the machine gave none.
std::string distances_table(const Topology& topo) {
  std::vector<std::vector<std::string>> d{{"from\\to"}};
  for (const auto& n : topo.nodes) d[0].push_back(std::to_string(n.id));
  for (const auto& from : topo.nodes) {
    std::vector<std::string> r{std::to_string(from.id)};
    for (const auto& to : topo.nodes) {
      int v = topo.distance(from.id, to.id);
      r.push_back(v < 0 ? "?" : std::to_string(v));
    }
    d.push_back(r);
  }
  return "distances:\n" + render_table(d, "  ");
}

/// The NUMA nodes: CPUs, the usable ones, packages and the GPUs near each (a
/// GPU's own memory node says so), then the distances when any were read.
std::string numa_nodes_section(const Topology& topo, const ReportOptions& o) {
  std::string out = "\nNUMA nodes (" + std::to_string(topo.nodes.size()) + "):\n";
  if (topo.nodes.empty()) return out + "  (none)\n";
  CpuSet usable = topo.usable();
  std::vector<std::vector<std::string>> rows{{"node", "cpus", "usable", "package", "gpus"}};
  for (const auto& n : topo.nodes) {
    std::string packages;
    for (const auto& p : topo.packages)
      if (p.cpus.intersects(n.cpus)) packages += (packages.empty() ? "" : ",") + std::to_string(p.id);
    std::string gpus;
    for (const auto& g : topo.gpus) {
      int node = g.numa_node() >= 0 ? g.numa_node() : node_at(o.resolved_nodes, g.index);
      if (node == n.id) gpus += (gpus.empty() ? "" : ",") + std::to_string(g.index);
      if (std::find(g.memory_nodes.begin(), g.memory_nodes.end(), n.id) != g.memory_nodes.end())
        gpus += (gpus.empty() ? "" : ",") + std::to_string(g.index) + " (its memory)";
    }
    rows.push_back({std::to_string(n.id), n.memory_only() ? std::string("(memory only)") : n.cpus.to_list(),
                    n.memory_only() ? std::string("-") : list_or(n.cpus & usable, "(none)"),
                    packages.empty() ? std::string("-") : packages, gpus.empty() ? std::string("-") : gpus});
  }
  out += render_table(rows, "  ");
  bool any_distance = std::any_of(topo.nodes.begin(), topo.nodes.end(), [](const NumaNode& n) { return !n.distances.empty(); });
  if (any_distance) out += distances_table(topo);
  return out;
}

}  // namespace

/// A fixed-width table: the first row is the header.
std::string render_table(const std::vector<std::vector<std::string>>& rows, std::string_view indent) {
  std::vector<std::size_t> width;
  for (const auto& r : rows) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line(indent);
    for (std::size_t i = 0; i < r.size(); ++i) line += i + 1 == r.size() ? r[i] : pad(r[i], width[i] + 2);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + '\n';
  }
  return out;
}


std::string render_report(const Topology& topo, const ReportOptions& o) {
  std::string out = machine_summary(topo);
  out += gpus_section(topo, o);
  out += other_devices_section(topo);
  out += memory_nodes_line(topo);
  out += nics_section(topo, [](const std::vector<std::vector<std::string>>& rows) { return render_table(rows, "  "); });
  out += numa_nodes_section(topo, o);
  out += '\n' + bindings_table(topo, o);
  out += '\n' + picture(topo, o);
  // Long cpulists, NIC lists and notes (1152 CPUs, 16 NICs, 64 partitions)
  // continue on lines of their own, so that the report fits a bug tracker and
  // a terminal beside another.
  return wrap_lines(out, report_width);
}

std::string reservations_section(const CpuSet& online, const Result<SystemReservations>* reserved,
                                 const std::optional<CgroupCpuset>& cgroup) {
  std::string out = "\nSystem reservations:\n";
  if (reserved == nullptr) return out + "  not read (the machine comes from a file that does not carry them)\n";
  if (!*reserved) return out + "  cannot be read: " + detail::escape_control(reserved->error().message()) + '\n';
  const SystemReservations& r = **reserved;
  auto list = [](const CpuSet& c) { return c.empty() ? std::string("none") : c.to_list(); };
  out += "  isolated (isolcpus=): " + list(r.isolated) + "; nohz_full: " + list(r.nohz_full) + '\n';
  if (!r.partition.empty())
    out += "  cgroup partition: " + detail::escape_control(r.partition) + " (" + r.partition_file + ")" +
           (r.partition_cpus.empty() ? std::string() : ", isolated CPUs " + r.partition_cpus.to_list()) + '\n';
  if (!r.cgroup_isolated.empty()) out += "  cpuset.cpus.isolated: " + r.cgroup_isolated.to_list() + '\n';
  if (r.declared())
    out += "  housekeeping CPUs: " + list(r.housekeeping(online)) +
           "\n    (--reserve-os-cores auto keeps them for the OS; --roles puts main and comm on isolated cores)\n";
  else
    out += "  housekeeping CPUs: not declared (every online CPU; --reserve-os-cores auto is an error here)\n";
  if (cgroup) {
    CpuSet outside = outside_cgroup(online, *cgroup);
    if (!outside.empty())
      out += "  outside the cgroup cpuset: " + outside.to_list() + "\n    (" + cgroup->cpus_file +
             "; a Slurm node's specialized cores and other jobs' cores are among them)\n";
  }
  return out;
}

}  // namespace gpuaff::cli

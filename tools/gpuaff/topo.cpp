// SPDX-License-Identifier: Apache-2.0
// gpuaff topo: describe the machine, and what every policy gives every GPU.
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string_view>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "irqs.hpp"
#include "gpuaff/source/json.hpp"  // to_json
#include "output.hpp"
#include "policies.hpp"
#include "report.hpp"

namespace gpuaff::cli {
namespace {

bool use_color(ColorMode mode) {
  if (mode != ColorMode::automatic) return mode == ColorMode::always;
  const char* no_color = std::getenv("NO_COLOR");
  return ::isatty(STDOUT_FILENO) == 1 && (no_color == nullptr || *no_color == '\0');
}

/// One line describing the job options the table was computed with.
std::string job_line(const LaunchOptions& a) {
  const NvidiaOptions& n = a.policy.nvidia;
  const JobOptions& j = a.job;
  std::string unknown = j.assume_node >= 0 ? std::to_string(j.assume_node)
                        : j.unknown_node == UnknownNode::node0 ? std::string("node0") : std::string("error");
  return "nproc " + (j.nproc > 0 ? std::to_string(j.nproc) : std::string("all")) + ", unknown node " +
         unknown + "; NVIDIA modes: scope " + std::string(name_of(scope_choices, n.scope)) + ", smt " +
         std::string(name_of(smt_choices, n.smt)) + ", " + (n.balanced ? "balanced" : "not balanced") +
         (n.min_cores > 0 ? ", min cores " + std::to_string(n.min_cores) : std::string()) +
         (n.max_cores > 0 ? ", max cores " + std::to_string(n.max_cores) : std::string());
}

}  // namespace

/// The CPU nodes of the package that holds `node`'s CPUs (those
/// `--mem-nodes socket` binds memory to), `node` first and the others by id;
/// `nearest` keeps only those at the smallest distance from `node` (when the
/// distances were read). A node without CPUs or package: itself alone.
std::vector<int> socket_cpu_nodes(const Topology& topo, int node, bool nearest) {
  std::vector<int> out{node};
  auto same = detail::socket_memory_nodes(topo, node);
  if (!same) return out;
  int best = -1;
  for (int id : *same)
    if (int d = topo.distance(node, id); id != node && d >= 0 && (best < 0 || d < best)) best = d;
  for (int id : *same) {
    int d = topo.distance(node, id);
    if (id == node || (nearest && d >= 0 && best >= 0 && d > best)) continue;
    out.push_back(id);
  }
  return out;
}

/// `topo --format dra`: per visible GPU, what a Kubernetes DRA driver or a
/// node labeller publishes. resource.kubernetes.io/numaNode follows the
/// standard attribute's list form: the device's own node (the PCI numa_node),
/// then the same socket's nodes at the smallest distance; a device whose
/// numa_node is -1 has none. gpuaff's own fields add what that one attribute
/// cannot say: the CPU node gpuaff binds to (also inferred where numa_node is
/// -1), every CPU node of that socket, the GPU's own memory nodes (GB200's
/// coherent memory), and its NIC set.
/// resource.kubernetes.io/pcieRoot of the device at `a` under `root`: the
/// first component below sys/devices/ of its sysfs path ("pci0000:00"), as
/// k8s.io/dynamic-resource-allocation/deviceattribute derives it; "" when the
/// path is not under a PCI root (a recording without the link).
std::string pcie_root(detail::SysfsReader& r, const PciAddress& a) {
  std::string path = r.resolve("sys/bus/pci/devices/" + std::string(a.to_string().view()));
  constexpr std::string_view devices = "sys/devices/";
  std::size_t at = path.find(devices);
  if (at == std::string::npos) return {};
  std::string_view rest = std::string_view(path).substr(at + devices.size());
  rest = rest.substr(0, rest.find('/'));
  return rest.starts_with("pci") ? std::string(rest) : std::string();
}

std::string dra_json(const Topology& topo, const JobOptions& job, const std::string& root) {
  std::optional<detail::SysfsReader> reader;
  if (!root.empty())
    if (auto live = detail::is_live_root(root)) reader.emplace(root, *live);
  auto root_of = [&](const PciAddress& a) -> nlohmann::ordered_json {
    std::string r = reader ? pcie_root(*reader, a) : std::string();
    return r.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r);
  };
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (std::size_t g = 0; g < topo.gpus.size(); ++g) {
    const Gpu& gpu = topo.gpus[g];
    nlohmann::ordered_json attributes;
    std::string bdf(gpu.address().to_string().view());
    attributes["resource.kubernetes.io/pciBusID"] = bdf;
    if (gpu.numa_node() >= 0) attributes["resource.kubernetes.io/numaNode"] = socket_cpu_nodes(topo, gpu.numa_node(), true);
    if (auto r = root_of(gpu.address()); !r.is_null()) attributes["resource.kubernetes.io/pcieRoot"] = r;
    nlohmann::ordered_json o;
    o["index"] = gpu.index;
    o["pci"] = bdf;
    o["attributes"] = std::move(attributes);
    auto node = resolve_gpu_node(topo, static_cast<int>(g), job);
    o["cpu_node"] = node ? nlohmann::ordered_json(*node) : nlohmann::ordered_json(nullptr);
    o["socket_cpu_nodes"] = node ? nlohmann::ordered_json(socket_cpu_nodes(topo, *node, false))
                                 : nlohmann::ordered_json::array();
    o["memory_nodes"] = gpu.memory_nodes;
    nlohmann::ordered_json nic_set = nlohmann::ordered_json::array();
    if (!topo.nics.empty()) {
      if (auto set = served_nic_set(topo, {static_cast<int>(g)}))
        for (const Nic* n : set->nics) nic_set.push_back(nic_port_list({n}));
    }
    o["nic_set"] = std::move(nic_set);
    gpus.push_back(std::move(o));
  }
  // Every NIC, with the attributes a network DRA driver publishes for it.
  nlohmann::ordered_json nics = nlohmann::ordered_json::array();
  for (const Nic& n : topo.nics) {
    nlohmann::ordered_json attributes;
    std::string bdf(n.address.to_string().view());
    attributes["resource.kubernetes.io/pciBusID"] = bdf;
    if (n.numa_node >= 0) attributes["resource.kubernetes.io/numaNode"] = socket_cpu_nodes(topo, n.numa_node, true);
    if (auto r = root_of(n.address); !r.is_null()) attributes["resource.kubernetes.io/pcieRoot"] = r;
    nlohmann::ordered_json o;
    o["pci"] = bdf;
    o["attributes"] = std::move(attributes);
    nlohmann::ordered_json names = nlohmann::ordered_json::array();
    for (const auto& name : n.rdma_names) names.push_back(std::string(name.view()));
    for (const auto& name : n.net_names) names.push_back(std::string(name.view()));
    o["names"] = std::move(names);
    nics.push_back(std::move(o));
  }
  // The CPU groups as the CPU DRA driver (dra.cpu) publishes them in grouped
  // mode by NUMA node: one device per node with CPUs, its CPUs as a cpulist.
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  for (const NumaNode& node : topo.nodes) {
    if (node.memory_only()) continue;
    nlohmann::ordered_json attributes;
    attributes["dra.cpu/numaNodeID"] = node.id;
    const Package* p = topo.package_of_cpu(node.cpus.first());
    if (p != nullptr && p->id >= 0) attributes["dra.cpu/socketID"] = p->id;
    attributes["dra.cpu/numCPUs"] = node.cpus.count();
    nlohmann::ordered_json o;
    o["attributes"] = std::move(attributes);
    o["cpus"] = node.cpus.to_list();
    groups.push_back(std::move(o));
  }
  nlohmann::ordered_json j;
  j["origin"] = std::string(topo.origin.view());
  j["gpus"] = std::move(gpus);
  j["nics"] = std::move(nics);
  j["cpu_groups"] = std::move(groups);
  return j.dump(2) + '\n';
}

/// "Roles (policy P): one line per GPU" for --roles: each GPU's share of the
/// drawn policy cut as a rank's CPUs are (policy/roles.hpp).
std::string roles_section(const Topology& topo, const PolicyRow& row, const RoleSizes& sizes, const CpuSet& isolated) {
  std::string out = "\nRoles (" + roles_text(sizes) + ", policy " + row.policy + "; the rest is compute):\n";
  for (std::size_t g = 0; g < row.per_gpu.size(); ++g) {
    out += "  GPU " + std::to_string(g) + ": ";
    if (!row.per_gpu[g]) {
      out += "no binding\n";
      continue;
    }
    auto roles = split_roles(topo, *row.per_gpu[g], sizes, false, isolated);
    if (!roles) {
      out += detail::escape_control(cli_spelling(roles.error().message())) + '\n';
      continue;
    }
    std::string line;
    for (std::size_t k = 0; k < role_names.size(); ++k) {
      const CpuSet& cpus = roles->of(static_cast<Role>(k));
      if (!cpus.empty()) line += (line.empty() ? "" : "; ") + std::string(role_names[k]) + " " + cpus.to_list();
    }
    out += line + '\n';
  }
  return out;
}

/// --irqs: per GPU, its and its NIC set's vectors, against its share's roles
/// under the drawn policy when --roles is given.
std::string irqs_section(const Topology& topo, const PolicyRow& row, const LaunchOptions& o) {
  std::string out = "\nInterrupts (policy " + row.policy + (o.roles.given() ? ", roles " + roles_text(o.roles) : std::string()) + "):\n";
  const std::string root = o.machine.root_or_live();
  for (std::size_t g = 0; g < topo.gpus.size(); ++g) {
    const Gpu& gpu = topo.gpus[g];
    out += "GPU " + std::to_string(g) + ":\n";
    auto devices = plan_device_irqs(root, &topo, gpu.address().to_string().view(), "GPU " + std::to_string(g));
    Roles roles;
    CpuSet share;
    if (g < row.per_gpu.size() && row.per_gpu[g]) {
      share = *row.per_gpu[g];
      if (o.roles.given()) {
        if (auto r = split_roles(topo, share, o.roles)) roles = *r;
        else out += "  roles not cut: " + detail::escape_control(cli_spelling(r.error().message())) + '\n';
      }
    }
    mark_irq_roles(devices, roles);
    out += irqs_text(devices, irq_steering(devices, roles, share), "  ");
  }
  return out;
}

int run_topo(const TopoArgs& args) {
  const PolicySpec* spec = &args.options.policy;
  const JobOptions* job = &args.options.job;
  // Several ranks per GPU: each GPU's parts are drawn as units of their own,
  // numbered as the local ranks that use them (rank r: GPU r/N, part r%N).
  int parts = args.options.ranks_per_gpu;
  if (parts > 1 && args.options.domains_per_gpu > 1)
    return report_error(make_error(Errc::invalid_argument, "ranks_per_gpu=", parts, " and domains_per_gpu=",
                                   args.options.domains_per_gpu, " both cut each GPU's share; draw one of them"));
  LaunchOptions machine = args.options;
  machine.ranks_per_gpu = 0;  // no part to name: topo draws them all
  // Everything is read; what no answer asked for needs is left out with a note when broken.
  auto topo = load(machine, process_environment(), cli_readers(), SysfsDetail::full, nullptr, TopologyParts::none());
  if (!topo) return report_error(topo.error());
  if (args.format == TopoFormat::json) {
    return write_result(to_json(*topo) + '\n');
  }
  if (args.format == TopoFormat::dra) {
    bool from_root = machine.machine.topology.empty() && machine.machine.hwloc_xml.empty();
    return write_result(dra_json(*topo, *job, from_root ? machine.machine.root_or_live() : std::string()));
  }
  // Locality domains are placement units, not part of the machine's
  // description: the report shows them, the JSON (which reads back) does not.
  if (auto split = detail::split_domains(*topo, std::max(args.options.domains_per_gpu, parts)); !split)
    return report_error(split.error());
  ReportOptions o;
  o.color = use_color(args.color) ? Color::always : Color::never;
  // Every GPU under each policy, with the job's NVIDIA options: one bind_table,
  // so the facts the bindings share are derived once.
  std::vector<PolicySpec> specs;
  for (PolicyKind kind : all_policy_kinds) specs.push_back(PolicySpec{.kind = kind, .nvidia = spec->nvidia});
  // AMD partitions and the units the options cut: parts of their device's
  // binding, a refusal naming the option that asked for them.
  std::string asked = parts > 1                             ? "ranks_per_gpu=" + std::to_string(parts)
                      : args.options.domains_per_gpu > 1 ? "domains_per_gpu=" + std::to_string(args.options.domains_per_gpu)
                                                          : std::string();
  auto table = bind_table_by_device(*topo, specs, *job, asked);
  for (std::size_t k = 0; k < specs.size(); ++k) {
    o.table.push_back(PolicyRow{.policy = std::string(to_string(specs[k].kind)), .per_gpu = std::move(table[k])});
    if (specs[k].kind == spec->kind) o.picture = o.table.back();
  }
  for (std::size_t g = 0; g < topo->gpus.size(); ++g) {
    o.resolved_nodes.push_back(resolve_gpu_node(*topo, static_cast<int>(g), *job));
    o.inferred_nodes.push_back(resolve_gpu_node(*topo, static_cast<int>(g), JobOptions{.nproc = job->nproc}));
  }
  o.job = job_line(args.options);
  if (parts > 1)
    o.job += "; ranks per GPU " + std::to_string(parts) + ": each GPU's share cut in " + std::to_string(parts) +
             " parts, listed and drawn as local ranks (rank r: GPU r/" + std::to_string(parts) + ", part r%" +
             std::to_string(parts) + ")";
  std::string report = render_report(*topo, o);
  Result<SystemReservations> reserved = fail(Errc::not_found, "not read");
  bool from_root = machine.machine.topology.empty() && machine.machine.hwloc_xml.empty();
  if (from_root) reserved = read_system_reservations(machine.machine.root_or_live());
  CpuSet isolated = reserved ? reserved->reserved() : CpuSet{};
  if (args.options.roles.given()) report += roles_section(*topo, o.picture, args.options.roles, isolated);
  if (args.irqs) report += irqs_section(*topo, o.picture, args.options);
  std::optional<CgroupCpuset> cgroup;
  if (from_root)
    if (auto c = read_cgroup_cpuset(machine.machine.root_or_live())) cgroup = std::move(*c);
  report += reservations_section(topo->online, from_root ? &reserved : nullptr, cgroup);
  return write_result(report);
}

}  // namespace gpuaff::cli

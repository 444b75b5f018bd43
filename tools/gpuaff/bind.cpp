// SPDX-License-Identifier: Apache-2.0
// gpuaff bind: print the binding of one GPU or PCI device (or every GPU with
// --gpu all); nothing is applied.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuaff/policy/threads.hpp"
#include "output.hpp"
#include "policies.hpp"

namespace gpuaff::cli {
namespace {

std::string mask_of(const Topology& topo, const CpuSet& cpus) {
  // As wide as the machine, like the kernel's masks.
  int bits = std::max(topo.online.last(), topo.allowed.last()) + 1;
  return cpus.to_mask(std::max(bits, 1));
}

/// numactl's arguments: the CPUs, and a memory option only when --membind
/// was given (docs/contract.md section 3): none adds nothing, local is
/// numactl's strict --membind, preferred its --preferred (one node).
std::string numactl_of(const LaunchPlan& p, bool membind_given) {
  std::string s = "--physcpubind=" + p.cpus.to_list();
  if (membind_given) {
    switch (p.membind) {
      case MemPolicy::none:
      case MemPolicy::first_touch: break;
      case MemPolicy::bind: s += " --membind=" + p.memory_nodes.to_list(); break;
      case MemPolicy::preferred: s += " --preferred=" + std::to_string(p.memory_nodes.first()); break;
      case MemPolicy::interleave: s += " --interleave=" + p.memory_nodes.to_list(); break;
    }
  }
  return s;
}

/// `text` as a POSIX shell word: bare when every character is one a shell
/// takes literally in a word (the names and lists gpuaff writes: letters,
/// digits and `_.,:+-=/`), else in single quotes, so a name read from a recording
/// cannot end the quote and run something under `eval`.
std::string shell_word(std::string_view text) {
  auto plain = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == ',' || c == ':' || c == '+' || c == '-' || c == '=' || c == '/';
  };
  if (!text.empty() && std::all_of(text.begin(), text.end(), plain)) return std::string(text);
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

/// `--format env`: one NAME=value line per variable the plan sets (the value
/// quoted only when a shell would otherwise read it differently).
std::string env_lines(const LaunchPlan& p) {
  std::string out;
  for (const auto& [name, value] : p.env) {
    if (!out.empty()) out += '\n';
    out += name;
    out += '=';
    out += shell_word(value);
  }
  return out;
}

/// One plan in the chosen format (json: an object).
std::string format_plan(const LaunchPlan& p, const BindArgs& args) {
  switch (args.format) {
    case BindFormat::cpulist: return p.cpus.to_list();
    case BindFormat::mask: return mask_of(p.topo, p.cpus);
    case BindFormat::numactl: return numactl_of(p, args.options.was_given("membind"));
    case BindFormat::json: return plan_json(p, args.options).dump(2);
    case BindFormat::env: return env_lines(p);
  }
  return {};
}

}  // namespace

nlohmann::ordered_json plan_json(const LaunchPlan& p, const LaunchOptions& o, std::optional<Topology>* cores) {
  nlohmann::ordered_json j;
  j["gpu"] = p.visible_gpu >= 0 ? nlohmann::ordered_json(p.visible_gpu) : nlohmann::ordered_json(nullptr);
  if (!p.more_visible_gpus.empty()) {  // several GPUs per process: all of them, the first being "gpu"
    std::vector<int> all{p.visible_gpu};
    all.insert(all.end(), p.more_visible_gpus.begin(), p.more_visible_gpus.end());
    j["gpus"] = all;
  }
  j["bdf"] = std::string(p.target().address().to_string().view());
  j["node"] = p.node;
  j["policy"] = std::string(to_string(p.policy.kind));
  j["cpus"] = p.cpus.to_list();
  j["mask"] = mask_of(p.topo, p.cpus);
  j["memory_nodes"] = p.memory_nodes.to_list();
  j["membind"] = std::string(name_of(membind_choices, p.membind));
  j["host_nodes"] = p.host_nodes.to_list();  // where the rank's pinned host buffers belong
  j["baseline"] = std::string(name_of(baseline_choices, p.baseline));
  // Present only when --unreachable nearest was needed: the nodes the CPUs came from.
  if (!p.nearest_nodes.empty()) j["nearest_nodes"] = p.nearest_nodes;
  if (!p.nproc_source.empty()) j["nproc_from"] = p.nproc_source;
  if (p.ranks_per_gpu > 1) {
    j["part"] = {p.part, p.ranks_per_gpu};
    j["share"] = p.gpu_share.to_list();  // the GPU's whole share, of which cpus is the part
  }
  // null when the core siblings the count needs cannot be read (the binding did not need them)
  auto threads = plan_threads(p, o, process_environment(), cli_readers(), cores);
  j["recommended_threads"] = threads ? nlohmann::ordered_json(*threads) : nlohmann::ordered_json(nullptr);
  j["origin"] = std::string(p.topo.origin.view());
  nlohmann::ordered_json env = nlohmann::ordered_json::object();
  for (const auto& [name, value] : p.env) env[name] = value;
  j["env"] = std::move(env);
  if (p.nic_path) {
    j["nic_set"] = p.nic_set;
    j["nic_path"] = std::string(to_string(*p.nic_path));
    j["host_nic_set"] = p.host_nic_set;  // the rails on host_nodes, for host-buffer transfers
  }
  if (p.roles) {
    nlohmann::ordered_json roles = nlohmann::ordered_json::object();
    for (std::size_t k = 0; k < role_names.size(); ++k) {
      const CpuSet& cpus = p.roles->of(static_cast<Role>(k));
      if (!cpus.empty()) roles[std::string(role_names[k])] = cpus.to_list();
    }
    j["roles"] = std::move(roles);
    if (o.priority_cores)  // which per-CPU file ordered the cores; null: none stated
      j["priority_source"] = p.topo.priority_source.empty() ? nlohmann::ordered_json(nullptr)
                                                            : nlohmann::ordered_json(std::string(p.topo.priority_source.view()));
  }
  return j;
}

void print_warnings(const LaunchPlan& p) {
  for (const auto& w : p.warnings) print_warning(w);
}

int run_bind(const BindArgs& args) {
  const LaunchOptions& o = args.options;
  if (!o.gpu && !o.all_gpus && !o.pci)
    return report_error(make_error(Errc::invalid_argument, "bind needs gpu=N, gpu=all or pci=BDF; see 'gpuaff bind --help'"));
  if (o.nic_env && args.format != BindFormat::json && args.format != BindFormat::env) {
    return report_error(make_error(Errc::invalid_argument, "nic_env=true is shown by format=json (under \"env\") and "
                                                           "format=env only; add one, or use it with gpuaff exec"));
  }
  if (args.format == BindFormat::env && !o.nic_env && !o.roles.given())
    return report_error(make_error(Errc::invalid_argument, "format=env prints the variables nic_env=true and roles= "
                                                           "set, and neither is given; add one"));
  if (args.format == BindFormat::env && o.all_gpus)
    return report_error(make_error(Errc::invalid_argument, "format=env prints one process's variables; name one GPU "
                                                           "with gpu=N (or use format=json for every GPU)"));
  if (o.all_gpus) {
    auto plans = plan_every_gpu(o, process_environment(), cli_readers());
    if (!plans) return report_error(plans.error());
    std::string out;
    if (args.format == BindFormat::json) {
      nlohmann::ordered_json a = nlohmann::ordered_json::array();
      std::optional<Topology> cores;  // read once for every GPU's thread count, when the plans read none
      for (const auto& p : *plans) a.push_back(plan_json(p, args.options, &cores));
      out = a.dump(2) + '\n';
    } else {
      // One line per GPU: its visible index, a space, then the format's text.
      for (const auto& p : *plans) out += std::to_string(p.visible_gpu) + ' ' + format_plan(p, args) + '\n';
    }
    if (!plans->empty()) print_warnings(plans->front());
    return write_result(out);
  }
  auto plan = gpuaff::plan(o, process_environment(), cli_readers());
  if (!plan) return report_error(plan.error());
  print_warnings(*plan);
  return write_result(format_plan(*plan, args) + '\n');
}

}  // namespace gpuaff::cli

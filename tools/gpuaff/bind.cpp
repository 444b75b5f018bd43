// gpuaff bind: print the binding of one GPU or PCI device; nothing is applied.
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

std::string json_of(const LaunchPlan& p) {
  nlohmann::ordered_json j;
  j["gpu"] = p.visible_gpu >= 0 ? nlohmann::ordered_json(p.visible_gpu) : nlohmann::ordered_json(nullptr);
  j["bdf"] = std::string(p.target().address().to_string().view());
  j["node"] = p.node;
  j["policy"] = std::string(to_string(p.policy.kind));
  j["cpus"] = p.cpus.to_list();
  j["mask"] = mask_of(p.topo, p.cpus);
  j["memory_nodes"] = p.memory_nodes.to_list();
  j["recommended_threads"] = recommended_threads(p.topo, p.cpus);
  j["origin"] = std::string(p.topo.origin.view());
  nlohmann::ordered_json env = nlohmann::ordered_json::object();
  for (const auto& [name, value] : p.env) env[name] = value;
  j["env"] = std::move(env);
  return j.dump(2);
}

}  // namespace

int run_bind(const BindArgs& args) {
  if (args.plan.nic_env && args.format != BindFormat::json) {
    return report_error(make_error(Errc::invalid_argument, "--nic-env is shown by --format json only (under \"env\"); "
                                                           "add --format json, or use it with gpuaff exec"));
  }
  auto plan = plan_binding(args.plan, MemPolicy::none);
  if (!plan) return report_error(plan.error());
  const LaunchPlan& p = *plan;
  switch (args.format) {
    case BindFormat::cpulist: write_stdout(p.cpus.to_list() + '\n'); break;
    case BindFormat::mask: write_stdout(mask_of(p.topo, p.cpus) + '\n'); break;
    case BindFormat::numactl:
      write_stdout("--physcpubind=" + p.cpus.to_list() + " --membind=" + p.memory_nodes.to_list() + '\n');
      break;
    case BindFormat::json: write_stdout(json_of(p) + '\n'); break;
  }
  return exit_ok;
}

}  // namespace gpuaff::cli

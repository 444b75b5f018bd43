// gpuaff doctor: is a running process where its plan says? Its GPU (from
// --gpu, or its own rank variables and *_VISIBLE_DEVICES), the plan for it,
// and what /proc says: each thread's allowed CPUs, its pages per node, and
// settings in its environment known to fight a binding (docs/doctor.md).
#include <cstdio>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuaff/doctor/doctor.hpp"
#include "output.hpp"
#include "policies.hpp"

namespace gpuaff::cli {
namespace {

struct Verdict {
  const LaunchPlan* plan = nullptr;
  std::string gpu_source;  ///< "--gpu", or the rank variable, e.g. "LOCAL_RANK=3"
  std::vector<ThreadState> threads;
  std::vector<bool> inside;
  std::map<int, long long> pages;
  long long total = 0;
  long long local = 0;
  std::vector<FightingSetting> environment;
  std::vector<std::string> problems;

  bool healthy() const { return problems.empty(); }
  double local_fraction() const { return total > 0 ? static_cast<double>(local) / static_cast<double>(total) : 1.0; }
};

std::string percent(double f) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f%%", f * 100.0);
  return buf;
}

std::string text_of(const DoctorArgs& args, const Verdict& v) {
  const LaunchPlan& p = *v.plan;
  std::string out = "pid " + std::to_string(args.pid) + ": GPU " + std::to_string(p.visible_gpu) + " (" +
                    std::string(p.target().address().to_string().view()) + ", " + v.gpu_source + "), policy " +
                    std::string(to_string(p.policy.kind)) + ": expected CPUs " + p.cpus.to_list() + ", memory node(s) " +
                    p.memory_nodes.to_list() + '\n';
  std::size_t drifted = 0;
  for (bool b : v.inside) drifted += b ? 0 : 1;
  out += "threads: " + std::to_string(v.threads.size()) + ", " + std::to_string(v.threads.size() - drifted) +
         " inside the plan" + (drifted > 0 ? ", " + std::to_string(drifted) + " outside:" : std::string()) + '\n';
  for (std::size_t i = 0; i < v.threads.size(); ++i) {
    if (v.inside[i]) continue;
    const auto& t = v.threads[i];
    std::string_view who = thread_owner(t.name);
    out += "  tid " + std::to_string(t.tid) + " '" + t.name + "'" + (who.empty() ? "" : " (" + std::string(who) + ")") +
           ": CPUs " + t.cpus.to_list() + '\n';
  }
  out += "memory: " + std::to_string(v.total) + " resident pages";
  if (v.total > 0) {
    out += ", " + percent(v.local_fraction()) + " on node(s) " + p.memory_nodes.to_list() + " (";
    bool first = true;
    for (const auto& [node, n] : v.pages) {
      out += (first ? "" : ", ") + std::string("node ") + std::to_string(node) + ": " + std::to_string(n);
      first = false;
    }
    out += ")";
  }
  out += '\n';
  for (const auto& s : v.environment) out += "environment: " + s.name + "=" + s.value + " (" + std::string(s.why) + ")\n";
  if (v.healthy()) {
    out += "healthy\n";
  } else {
    out += "NOT healthy:\n";
    for (const auto& pr : v.problems) out += "  " + pr + '\n';
  }
  return out;
}

std::string json_of(const DoctorArgs& args, const Verdict& v) {
  using J = nlohmann::ordered_json;
  const LaunchPlan& p = *v.plan;
  J j;
  j["pid"] = args.pid;
  j["gpu"] = p.visible_gpu;
  j["bdf"] = std::string(p.target().address().to_string().view());
  j["gpu_source"] = v.gpu_source;
  j["policy"] = std::string(to_string(p.policy.kind));
  j["expected_cpus"] = p.cpus.to_list();
  j["memory_nodes"] = p.memory_nodes.to_list();
  j["healthy"] = v.healthy();
  J threads = J::array();
  for (std::size_t i = 0; i < v.threads.size(); ++i) {
    const auto& t = v.threads[i];
    J o{{"tid", t.tid}, {"name", t.name}, {"cpus", t.cpus.to_list()}, {"inside", static_cast<bool>(v.inside[i])}};
    if (std::string_view who = thread_owner(t.name); !who.empty()) o["owner"] = std::string(who);
    threads.push_back(std::move(o));
  }
  j["threads"] = std::move(threads);
  J pages = J::object();
  for (const auto& [node, n] : v.pages) pages[std::to_string(node)] = n;
  j["memory"] = J{{"pages_by_node", std::move(pages)},
                  {"local_fraction", v.total > 0 ? J(v.local_fraction()) : J(nullptr)}};
  J env = J::array();
  for (const auto& s : v.environment) env.push_back(J{{"name", s.name}, {"value", s.value}, {"why", std::string(s.why)}});
  j["environment"] = std::move(env);
  j["problems"] = v.problems;
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// The plan of the process: its GPU from --gpu or its own environment.
Result<LaunchPlan> plan_of(const DoctorArgs& args, const std::map<std::string, std::string>& vars, std::string& source) {
  PlanOptions o = args.plan;
  Environment env = environment_of(vars);
  if (o.gpu) {
    source = "--gpu";
  } else {
    auto rank = local_rank(env);
    if (!rank) {
      Error e = rank.error();
      e.prepend("process " + std::to_string(args.pid) + ": ").append(", or pass --gpu N");
      return Unexpected<Error>(e);
    }
    o.gpu = rank->value;
    source = rank->source();
  }
  // The GPUs that process sees, unless --visible-devices says otherwise.
  if (!o.source.visible.list) {
    o.source.visible.use_environment = false;
    o.source.visible.cuda_visible_devices = env("CUDA_VISIBLE_DEVICES");
    o.source.visible.hip_visible_devices = env("HIP_VISIBLE_DEVICES");
    o.source.visible.rocr_visible_devices = env("ROCR_VISIBLE_DEVICES");
  }
  return plan_binding(o, MemPolicy::none);
}

}  // namespace

int run_doctor(const DoctorArgs& args) {
  if (args.pid <= 0)
    return report_error(make_error(Errc::invalid_argument, "--pid must be a process id above 0, not ", args.pid));
  auto vars = process_environ(args.pid);
  if (!vars) return report_error(vars.error());
  Verdict v;
  auto plan = plan_of(args, *vars, v.gpu_source);
  if (!plan) return report_error(plan.error());
  v.plan = &*plan;
  auto threads = process_threads(args.pid);
  if (!threads) return report_error(threads.error());
  v.threads = std::move(*threads);
  auto pages = process_pages_by_node(args.pid);
  if (!pages) return report_error(pages.error());
  v.pages = std::move(*pages);
  v.environment = fighting_settings(*vars);

  for (const auto& t : v.threads) {
    bool in = t.cpus.is_subset_of(plan->cpus);
    v.inside.push_back(in);
    if (!in)
      v.problems.push_back("thread " + std::to_string(t.tid) + " '" + t.name + "' may run on CPUs " +
                           (t.cpus - plan->cpus).to_list() + " outside the plan");
  }
  for (const auto& [node, n] : v.pages) {
    v.total += n;
    if (NodeSet::valid_id(node) && plan->memory_nodes.test(node)) v.local += n;
  }
  if (v.total > 0 && v.local_fraction() < args.min_local)
    v.problems.push_back(percent(1.0 - v.local_fraction()) + " of the resident pages are on nodes other than " +
                         plan->memory_nodes.to_list() + " (--min-local " + percent(args.min_local) + ")");

  write_stdout(args.format == TopoFormat::json ? json_of(args, v) + '\n' : text_of(args, v));
  return v.healthy() ? exit_ok : exit_unhealthy;
}

}  // namespace gpuaff::cli

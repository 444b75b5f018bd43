// gpuaff doctor: is a running process where its plan says? The verdict is the
// library's (gpuaff/doctor/verdict.hpp: its own GPUAFF_PLAN, or the plan the
// options give its GPU); this file prints it as text or JSON (docs/doctor.md).
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuaff/doctor/verdict.hpp"
#include "output.hpp"

namespace gpuaff::cli {
namespace {

std::string_view origin_name(PlanOrigin o) {
  switch (o) {
    case PlanOrigin::recorded: return "GPUAFF_PLAN";
    case PlanOrigin::options: return "options";
    case PlanOrigin::guess: return "guess";
  }
  return "guess";
}

/// Text that came from the process (its thread names, its environment, its
/// GPUAFF_PLAN) or from a recording, safe on an administrator's terminal:
/// control characters as \xHH, so a newline cannot forge a line.
std::string safe(std::string_view text) { return detail::escape_control(text); }

std::string text_of(const Verdict& v) {
  const Expectation& e = v.expected;
  std::string out = "pid " + std::to_string(v.pid) + ": GPU " + std::to_string(e.gpu) + " (" + safe(e.pci) + ", " +
                    safe(cli_spelling(e.gpu_source)) + "), policy " + std::string(to_string(e.policy)) + ": expected CPUs " +
                    e.cpus.to_list() + ", memory node(s) " + e.memory_nodes.to_list() + '\n';
  for (const auto& n : v.notes) out += "plan: " + safe(cli_spelling(n)) + '\n';
  std::size_t drifted = 0;
  for (bool b : v.inside) drifted += b ? 0 : 1;
  out += "threads: " + std::to_string(v.threads.size()) + ", " + std::to_string(v.threads.size() - drifted) +
         " inside the plan" + (drifted > 0 ? ", " + std::to_string(drifted) + " outside:" : std::string()) + '\n';
  if (e.roles) {  // how many threads sit in each role ("rank": spread over several)
    std::map<std::string, int> count;
    for (const auto& r : v.roles) count[r.empty() ? "outside" : r] += 1;
    out += "roles:";
    for (std::string_view name : {"main", "comm", "data", "compute", "rank", "outside"}) {
      auto it = count.find(std::string(name));
      if (it != count.end()) out += " " + std::string(name) + " " + std::to_string(it->second);
    }
    out += " (threads per role; the plan's roles: ";
    bool first = true;
    for (std::size_t k = 0; k < role_names.size(); ++k) {
      const CpuSet& cpus = e.roles->of(static_cast<Role>(k));
      if (cpus.empty()) continue;
      out += (first ? "" : ", ") + std::string(role_names[k]) + " " + cpus.to_list();
      first = false;
    }
    out += ")\n";
  }
  for (std::size_t i = 0; i < v.threads.size(); ++i) {
    if (v.inside[i]) continue;
    const auto& t = v.threads[i];
    std::string_view who = thread_owner(t.name);
    out += "  tid " + std::to_string(t.tid) + " '" + safe(t.name) + "'" + (who.empty() ? "" : " (" + std::string(who) + ")") +
           ": CPUs " + t.cpus.to_list() + '\n';
  }
  out += "memory: " + std::to_string(v.total) + " resident pages";
  if (v.total > 0) {
    out += ", " + detail::percent(v.local_fraction()) + " on node(s) " + e.memory_nodes.to_list() + " (";
    bool first = true;
    for (const auto& [node, n] : v.pages) {
      out += (first ? "" : ", ") + std::string("node ") + std::to_string(node) + ": " + std::to_string(n);
      first = false;
    }
    out += ")";
  }
  out += '\n';
  for (const auto& s : v.environment)
    out += "environment: " + safe(s.name) + "=" + safe(s.value) + " (" + std::string(s.why) + ")\n";
  if (v.healthy()) {
    out += "healthy\n";
  } else {
    out += "NOT healthy:\n";
    for (const auto& pr : v.problems) out += "  " + safe(cli_spelling(pr)) + '\n';
  }
  return out;
}

std::string json_of(const Verdict& v) {
  using J = nlohmann::ordered_json;
  const Expectation& e = v.expected;
  J j;
  j["pid"] = v.pid;
  j["gpu"] = e.gpu;
  j["bdf"] = e.pci;
  j["gpu_source"] = e.gpu_source;
  j["plan_from"] = std::string(origin_name(e.origin));
  j["policy"] = std::string(to_string(e.policy));
  j["expected_cpus"] = e.cpus.to_list();
  j["memory_nodes"] = e.memory_nodes.to_list();
  if (e.roles) {
    J roles = J::object();
    for (std::size_t k = 0; k < role_names.size(); ++k) {
      const CpuSet& cpus = e.roles->of(static_cast<Role>(k));
      if (!cpus.empty()) roles[std::string(role_names[k])] = cpus.to_list();
    }
    j["roles"] = std::move(roles);
  }
  j["healthy"] = v.healthy();
  J threads = J::array();
  for (std::size_t i = 0; i < v.threads.size(); ++i) {
    const auto& t = v.threads[i];
    J o{{"tid", t.tid}, {"name", t.name}, {"cpus", t.cpus.to_list()}, {"inside", static_cast<bool>(v.inside[i])}};
    if (std::string_view who = thread_owner(t.name); !who.empty()) o["owner"] = std::string(who);
    if (e.roles) o["role"] = v.roles[i].empty() ? J(nullptr) : J(v.roles[i]);
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
  J problems = J::array();
  for (const auto& p : v.problems) problems.push_back(cli_spelling(p));
  j["problems"] = std::move(problems);
  J notes = J::array();
  for (const auto& n : v.notes) notes.push_back(cli_spelling(n));
  j["notes"] = std::move(notes);
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

int run_doctor(const DoctorArgs& args) {
  if (args.options.all_gpus)
    return report_error(make_error(Errc::invalid_argument, "gpu=all is for bind: doctor checks one process; name its GPU with gpu=N"));
  auto v = examine_process(args.pid, args.options, DoctorOptions{.min_local = args.min_local}, cli_readers());
  if (!v) return report_error(v.error());
  return write_result(args.format == TopoFormat::json ? json_of(*v) + '\n' : text_of(*v),
                      v->healthy() ? exit_ok : exit_unhealthy);
}

}  // namespace gpuaff::cli

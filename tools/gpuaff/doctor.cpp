// SPDX-License-Identifier: Apache-2.0
// gpuaff doctor: is a running process where its plan says? The verdict is the
// library's (gpuaff/doctor/verdict.hpp: its own GPUAFF_PLAN, or the plan the
// options give its GPU); this file prints it as text or JSON (docs/doctor.md).
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "irqs.hpp"
#include "gpuaff/detail/errno.hpp"
#include "gpuaff/doctor/all.hpp"
#include "gpuaff/doctor/document.hpp"
#include "gpuaff/doctor/rebind.hpp"
#include "gpuaff/doctor/verdict.hpp"
#include "gpuaff/doctor/watch.hpp"
#include "output.hpp"
#include "prometheus.hpp"
#include "report.hpp"
#include "watch_nics.hpp"

namespace gpuaff::cli {
namespace {

/// "node 0: 99.2%, node 1: 0.8%": where a mapping's pages are.
std::string node_shares(const Mapping& m) {
  long long all = m.resident_pages();
  std::string out;
  for (const auto& [node, n] : m.pages)
    out += (out.empty() ? "" : ", ") + std::string("node ") + std::to_string(node) + ": " +
           detail::percent(all > 0 ? static_cast<double>(n) / static_cast<double>(all) : 0.0);
  return out;
}

/// The verdict's mappings as a table under a "mappings:" line; "" without any.
std::string mappings_text(const Verdict& v) {
  if (v.mappings.empty()) return {};
  const NodeSet& host = v.expected.host_nodes;
  std::string out = "mappings: " + std::to_string(v.mapping_count) + " with resident pages; the largest" +
                    (std::any_of(v.mappings.begin(), v.mappings.end(), [](const Mapping& m) { return m.off_host; })
                         ? std::string(" and the host buffers off the host nodes")
                         : std::string()) +
                    " (host nodes " + (host.empty() ? std::string("not in the plan") : host.to_list()) + "):\n";
  std::vector<std::vector<std::string>> rows{{"address", "kind", "resident", "pages on", "policy", "file", ""}};
  for (const auto& m : v.mappings)
    rows.push_back({m.address_text(), std::string(m.kind()), detail::mib_text(m.bytes()), node_shares(m), safe(m.policy),
                    m.file.empty() ? std::string("-") : safe(m.file.substr(0, 60)), m.off_host ? "OFF the host nodes" : ""});
  return out + render_table(rows, "  ");
}

std::string text_of(const Verdict& v) {
  const Expectation& e = v.expected;
  std::string out = "pid " + std::to_string(v.pid) + ": GPU " + std::to_string(e.gpu) + " (" + safe(e.pci) + ", " +
                    safe(cli_spelling(e.gpu_source)) + "), policy " + std::string(to_string(e.policy)) + ": expected CPUs " +
                    e.cpus.to_list() + ", memory node(s) " + e.memory_nodes.to_list() +
                    (e.host_nodes.empty() ? std::string() : ", host buffers on node(s) " + e.host_nodes.to_list()) + '\n';
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
  out += mappings_text(v);
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

using J = nlohmann::ordered_json;

/// The library's document (gpuaff/doctor/document.hpp) as JSON: messages as
/// the command line spells them, id sets as cpulists, node ids as keys.
J json_of(const DocValue& d) {
  return std::visit(
      [](const auto& x) -> J {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, DocMessage>) {
          return cli_spelling(x.text);
        } else if constexpr (std::is_same_v<T, DocIds>) {
          return x.list;
        } else if constexpr (std::is_same_v<T, DocNodeCounts>) {
          J o = J::object();
          for (const auto& [node, n] : x) o[std::to_string(node)] = n;
          return o;
        } else if constexpr (std::is_same_v<T, DocArray>) {
          J a = J::array();
          for (const auto& e : x) a.push_back(json_of(e));
          return a;
        } else if constexpr (std::is_same_v<T, DocObject>) {
          J o = J::object();
          for (const auto& [k, e] : x) o[k] = json_of(e);
          return o;
        } else {
          return J(x);
        }
      },
      d.v);
}

J json_object(const Verdict& v) { return json_of(verdict_document(v)); }

std::string dump(const J& j) { return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + '\n'; }

// ---- --format prometheus: the text exposition format (version 0.0.4), one
// series per process, for node_exporter's textfile collector.

std::string series_labels(const Verdict& v) {
  const Expectation& e = v.expected;
  return "{pid=\"" + std::to_string(v.pid) + "\",gpu=\"" + std::to_string(e.gpu) + "\",pci=\"" + label_value(e.pci) +
         "\",rank=\"" + label_value(e.gpu_source) + "\",policy=\"" + std::string(to_string(e.policy)) + "\"}";
}

/// `processes` and `invalid` (processes whose plan cannot be read): for --all only.
std::string prometheus_of(const std::vector<Verdict>& verdicts, std::optional<int> processes,
                          std::optional<int> invalid = std::nullopt) {
  std::string out;
  auto metric = [&](std::string_view name, std::string_view help, auto&& value) {
    out += "# HELP " + std::string(name) + " " + std::string(help) + "\n# TYPE " + std::string(name) + " gauge\n";
    for (const auto& v : verdicts) out += std::string(name) + series_labels(v) + " " + value(v) + "\n";
  };
  if (processes) {
    out += "# HELP gpuaff_plan_processes Processes of this machine that carry a GPUAFF_PLAN.\n"
           "# TYPE gpuaff_plan_processes gauge\ngpuaff_plan_processes " + std::to_string(*processes) + "\n";
  }
  if (invalid) {
    out += "# HELP gpuaff_plan_invalid_processes Processes whose GPUAFF_PLAN is not a plan gpuaff wrote, so not checked.\n"
           "# TYPE gpuaff_plan_invalid_processes gauge\ngpuaff_plan_invalid_processes " + std::to_string(*invalid) + "\n";
  }
  metric("gpuaff_plan_present", "1 when the process carries the GPUAFF_PLAN it was checked against, 0 when it was "
         "checked against the options given.",
         [](const Verdict& v) { return std::string(v.expected.origin == PlanOrigin::recorded ? "1" : "0"); });
  metric("gpuaff_healthy", "1 when every thread is inside the plan and enough memory is on the GPU's node(s).",
         [](const Verdict& v) { return std::string(v.healthy() ? "1" : "0"); });
  metric("gpuaff_threads", "Threads of the process.", [](const Verdict& v) { return std::to_string(v.threads.size()); });
  metric("gpuaff_threads_outside_plan", "Threads that may run on CPUs outside the plan.", [](const Verdict& v) {
    return std::to_string(std::count(v.inside.begin(), v.inside.end(), false));
  });
  metric("gpuaff_local_memory_fraction", "Fraction of the resident pages on the GPU's memory node(s).",
         [](const Verdict& v) {
           char buf[32];
           std::snprintf(buf, sizeof buf, "%.6f", v.local_fraction());
           return std::string(buf);
         });
  metric("gpuaff_resident_pages", "Resident pages of the process.", [](const Verdict& v) { return std::to_string(v.total); });
  metric("gpuaff_host_buffers_off_node", "Anonymous mappings of at least 16 MiB resident with most pages off the plan's "
         "host nodes.",
         [](const Verdict& v) {
           return std::to_string(std::count_if(v.mappings.begin(), v.mappings.end(), [](const Mapping& m) { return m.off_host; }));
         });
  metric("gpuaff_host_buffer_off_node_bytes", "Resident bytes of those mappings.", [](const Verdict& v) {
    long long bytes = 0;
    for (const auto& m : v.mappings)
      if (m.off_host) bytes += m.bytes();
    return std::to_string(bytes);
  });
  return out;
}

// ---- --all and --merge.

std::string all_text(const NodeReport& r) {
  std::size_t off = r.invalid_plans.size();
  for (const auto& v : r.verdicts) off += v.healthy() ? 0 : 1;
  std::string out = "node " + safe(r.node) + ": " + std::to_string(r.planned()) + " process(es)" +
                    (r.job.empty() ? std::string() : " of job " + safe(r.job)) + " carry a GPUAFF_PLAN" +
                    (r.planned() == 0 ? std::string() : ", " + std::to_string(off) + " not healthy") + '\n';
  std::vector<std::vector<std::string>> rows{{"pid", "rank", "gpu", "pci", "planned CPUs", "threads out", "memory local", "verdict"}};
  for (const auto& v : r.verdicts) {
    const Expectation& e = v.expected;
    rows.push_back({std::to_string(v.pid), safe(e.gpu_source), std::to_string(e.gpu), safe(e.pci), e.cpus.to_list(),
                    std::to_string(std::count(v.inside.begin(), v.inside.end(), false)) + "/" +
                        std::to_string(v.threads.size()),
                    v.total > 0 ? detail::percent(v.local_fraction()) : std::string("-"),
                    v.healthy() ? "healthy" : "NOT healthy"});
  }
  for (const auto& b : r.invalid_plans)
    rows.push_back({std::to_string(b.pid), "-", "-", "-", "-", "-", "-", "NOT healthy (plan unreadable)"});
  if (r.planned() > 0) out += render_table(rows, "  ");
  for (const auto& v : r.verdicts)
    for (const auto& p : v.problems) out += "  pid " + std::to_string(v.pid) + ": " + safe(cli_spelling(p)) + '\n';
  // Not spelled as flags: the plan's own text ("gpu=x") is quoted in it.
  for (const auto& b : r.invalid_plans) out += "  pid " + std::to_string(b.pid) + ": " + safe(b.problem) + '\n';
  if (!r.gpu_rails.empty()) {
    out += "NIC sets:";
    for (const auto& [g, rail] : r.gpu_rails) out += " GPU " + std::to_string(g) + " " + rail + ";";
    out.back() = '\n';
  }
  if (!r.gpu_rail_ids.empty()) {
    out += "rail:plane by GPU:";
    for (const auto& [g, ids] : r.gpu_rail_ids) out += " GPU " + std::to_string(g) + " " + ids + ";";
    out.back() = '\n';
  }
  for (const auto& n : r.notes) out += "note: " + safe(cli_spelling(n)) + '\n';
  return out;
}

J all_json(const NodeReport& r) {
  J j;
  j["node"] = r.node;
  if (!r.job.empty()) j["job"] = r.job;  // --job: the scheduler job whose processes these are
  J processes = J::array();
  for (const auto& v : r.verdicts) processes.push_back(json_object(v));
  j["processes"] = std::move(processes);
  J invalid = J::array();
  for (const auto& b : r.invalid_plans) invalid.push_back(J{{"pid", b.pid}, {"problem", b.problem}});
  j["invalid_plans"] = std::move(invalid);
  J rails = J::object();
  for (const auto& [g, rail] : r.gpu_rails) rails[std::to_string(g)] = rail;
  j["gpu_rails"] = std::move(rails);
  J ids = J::object();
  for (const auto& [g, text] : r.gpu_rail_ids) ids[std::to_string(g)] = text;
  j["gpu_rail_ids"] = std::move(ids);
  J notes = J::array();
  for (const auto& n : r.notes) notes.push_back(cli_spelling(n));
  j["notes"] = std::move(notes);
  return j;
}

/// One process of a merged report: the keys --merge reads.
struct MergedProcess {
  std::string gpu_source;
  long long gpu = -1;
  long long pid = 0;
  bool healthy = false;
  std::string first_problem;
};

/// One node's --all --format json report, its types checked.
struct MergedReport {
  std::string file;
  std::string node;
  std::string job;  // --job of the report; empty: every planned process of the node
  std::vector<MergedProcess> processes;
  std::vector<std::pair<std::string, std::string>> invalid_plans;  // pid (or "?"), problem
  std::vector<std::pair<std::string, std::string>> gpu_rails;      // GPU index, NIC set
  std::vector<std::pair<std::string, std::string>> gpu_rail_ids;   // GPU index, rail and plane of each NIC
};

/// Reads one report. The JSON is held in std::map objects (lookups in
/// log time: an ordered_json object looks a key up in a list, and a report
/// of 150,000 GPU indices took minutes). A key of the wrong type, or a number
/// out of range (a float such as 1e300 read as an int is undefined), is an
/// error naming the file and the key; absent optional keys keep their
/// defaults (reports of older gpuaff versions lack some).
Result<MergedReport> read_merge_report(const std::string& file) {
  std::string text;
  if (int e = detail::read_whole_file(file, text); e != 0)
    return unexpected(make_sys_error(Errc::io_error, e, "--merge: cannot read " + safe(file)));
  const std::string what = "; give the output of gpuaff doctor --all --format json";
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("node") || !j.contains("processes"))
    return fail(Errc::parse_error, "--merge: ", safe(file), " is not the output of gpuaff doctor --all --format json "
                "(an object with node and processes)");
  auto wrong = [&](const std::string& key, std::string_view should) {
    return fail(Errc::parse_error, "--merge: ", safe(file), ": the key '", safe(key), "' must be ", should, what);
  };
  // An integer in [lo, hi], never a float or a number past it.
  auto integer = [](const nlohmann::json& v, long long lo, long long hi, long long& out) {
    if (v.is_number_unsigned()) {
      if (v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) return false;
      out = static_cast<long long>(v.get<std::uint64_t>());
    } else if (v.is_number_integer()) {
      out = v.get<long long>();
    } else {
      return false;
    }
    return out >= lo && out <= hi;
  };
  MergedReport r;
  r.file = file;
  if (!j["node"].is_string()) return wrong("node", "a string");
  r.node = j["node"].get<std::string>();
  if (auto it = j.find("job"); it != j.end()) {
    if (!it->is_string()) return wrong("job", "a string");
    r.job = it->get<std::string>();
  }
  const auto& procs = j["processes"];
  if (!procs.is_array()) return wrong("processes", "an array");
  r.processes.reserve(procs.size());
  for (std::size_t i = 0; i < procs.size(); ++i) {
    const std::string at = "processes[" + std::to_string(i) + "]";
    const auto& p = procs[i];
    if (!p.is_object()) return wrong(at, "an object");
    MergedProcess m;
    if (auto it = p.find("gpu_source"); it != p.end()) {
      if (!it->is_string()) return wrong(at + ".gpu_source", "a string");
      m.gpu_source = it->get<std::string>();
    }
    if (auto it = p.find("healthy"); it != p.end()) {
      if (!it->is_boolean()) return wrong(at + ".healthy", "true or false");
      m.healthy = it->get<bool>();
    }
    if (auto it = p.find("gpu"); it != p.end() && !integer(*it, -1, CpuSet::capacity, m.gpu))
      return wrong(at + ".gpu", "an integer from -1 to " + std::to_string(CpuSet::capacity));
    if (auto it = p.find("pid"); it != p.end() && !integer(*it, 0, std::numeric_limits<int>::max(), m.pid))
      return wrong(at + ".pid", "a process id (an integer from 0 to " +
                                    std::to_string(std::numeric_limits<int>::max()) + ")");
    if (auto it = p.find("problems"); it != p.end()) {
      if (!it->is_array()) return wrong(at + ".problems", "an array of strings");
      for (std::size_t k = 0; k < it->size(); ++k)
        if (!(*it)[k].is_string()) return wrong(at + ".problems[" + std::to_string(k) + "]", "a string");
      if (!it->empty()) m.first_problem = (*it)[0].get<std::string>();
    }
    r.processes.push_back(std::move(m));
  }
  // Processes whose plan could not be read (a report from an older gpuaff has no such list).
  if (auto it = j.find("invalid_plans"); it != j.end()) {
    if (!it->is_array()) return wrong("invalid_plans", "an array");
    for (std::size_t i = 0; i < it->size(); ++i) {
      const std::string at = "invalid_plans[" + std::to_string(i) + "]";
      const auto& b = (*it)[i];
      if (!b.is_object()) return wrong(at, "an object");
      long long pid = 0;
      std::string shown = "?";
      if (auto p = b.find("pid"); p != b.end()) {
        if (!integer(*p, 0, std::numeric_limits<int>::max(), pid)) return wrong(at + ".pid", "a process id");
        shown = std::to_string(pid);
      }
      std::string problem;
      if (auto p = b.find("problem"); p != b.end()) {
        if (!p->is_string()) return wrong(at + ".problem", "a string");
        problem = p->get<std::string>();
      }
      r.invalid_plans.emplace_back(std::move(shown), std::move(problem));
    }
  }
  if (auto it = j.find("gpu_rails"); it != j.end()) {
    if (!it->is_object()) return wrong("gpu_rails", "an object of GPU index to NIC set");
    for (const auto& [g, rail] : it->items()) {
      if (!rail.is_string()) return wrong("gpu_rails." + g, "a string");
      r.gpu_rails.emplace_back(g, rail.get<std::string>());
    }
  }
  if (auto it = j.find("gpu_rail_ids"); it != j.end()) {
    if (!it->is_object()) return wrong("gpu_rail_ids", "an object of GPU index to rail and plane identities");
    for (const auto& [g, ids] : it->items()) {
      if (!ids.is_string()) return wrong("gpu_rail_ids." + g, "a string");
      r.gpu_rail_ids.emplace_back(g, ids.get<std::string>());
    }
  }
  return r;
}

/// "mlx5_0 on node-a,node-b; mlx5_1 on node-c": each value of a per-node
/// answer and the nodes that gave it (--merge, where the nodes disagree).
/// Appended piece by piece: GCC 12 at -O3 warns -Wrestrict on `"; " +
/// std::string&&` (a false positive that -Werror turns into a failed build).
std::string values_on_nodes(const std::map<std::string, std::vector<std::string>>& nodes_of) {
  std::string parts;
  for (const auto& [value, nodes] : nodes_of) {
    std::string list;
    for (const auto& n : nodes) {
      if (!list.empty()) list += ',';
      list += safe(n);
    }
    if (!parts.empty()) parts += "; ";
    parts += safe(value) + " on " + list;
  }
  return parts;
}

/// One table by node and rank from several nodes' --all --format json
/// reports, and whether each GPU index has the same NIC set on every node.
/// Exit 7 when a process is off or a GPU index changes rail between nodes.
/// The same node twice (one report given twice, or two of one host) is a
/// usage error naming both files: merged, it would compare the node with
/// itself and count it twice.
int run_merge(const std::vector<std::string>& files) {
  std::vector<MergedReport> reports;
  std::map<std::string, std::string> file_of_node;
  for (const auto& f : files) {
    auto r = read_merge_report(f);
    if (!r) return report_error(r.error());
    auto [at, fresh] = file_of_node.emplace(r->node, f);
    if (!fresh)
      return report_error(make_error(Errc::invalid_argument, "--merge: ", safe(at->second), " and ", safe(f),
                                     " are both the report of node '", safe(r->node),
                                     "'; give each node's report once"));
    reports.push_back(std::move(*r));
  }
  // Reports of two different jobs (--job) are two jobs' tables, not one.
  const MergedReport* with_job = nullptr;
  for (const auto& r : reports) {
    if (r.job.empty()) continue;
    if (with_job == nullptr) with_job = &r;
    else if (r.job != with_job->job)
      return report_error(make_error(Errc::invalid_argument, "--merge: ", safe(with_job->file), " is job ",
                                     safe(with_job->job), "'s report and ", safe(r.file), " job ", safe(r.job),
                                     "'s; merge the reports of one job"));
  }
  std::sort(reports.begin(), reports.end(), [](const MergedReport& a, const MergedReport& b) { return a.node < b.node; });
  std::vector<std::vector<std::string>> rows{{"node", "rank", "gpu", "pid", "verdict", "problems"}};
  bool all_healthy = true;
  for (auto& r : reports) {
    std::stable_sort(r.processes.begin(), r.processes.end(),
                     [](const MergedProcess& a, const MergedProcess& b) { return a.gpu_source < b.gpu_source; });
    for (const auto& p : r.processes) {
      all_healthy = all_healthy && p.healthy;
      rows.push_back({safe(r.node), p.gpu_source.empty() ? std::string("?") : safe(p.gpu_source),
                      std::to_string(p.gpu), std::to_string(p.pid), p.healthy ? "healthy" : "NOT healthy",
                      safe(p.first_problem.substr(0, 100))});
    }
    for (const auto& [pid, problem] : r.invalid_plans) {
      all_healthy = false;
      rows.push_back({safe(r.node), "-", "-", pid, "NOT healthy", safe(problem.substr(0, 100))});
    }
  }
  std::string out = render_table(rows, "  ");
  // GPU index -> node -> NIC set
  std::map<std::string, std::map<std::string, std::string>> rails;
  for (const auto& r : reports)
    for (const auto& [g, rail] : r.gpu_rails) rails[g][r.node] = rail;
  bool same_rails = true;
  for (const auto& [g, by_node] : rails) {
    std::map<std::string, std::vector<std::string>> nodes_of;
    for (const auto& [node, rail] : by_node) nodes_of[rail].push_back(node);
    bool everywhere = nodes_of.size() == 1 && by_node.size() == reports.size();
    same_rails = same_rails && everywhere;
    out += "GPU " + safe(g) + ": ";
    if (everywhere) {
      out += "NIC set " + safe(nodes_of.begin()->first) + " on every node\n";
      continue;
    }
    std::string parts = values_on_nodes(nodes_of);
    if (by_node.size() < reports.size()) parts += "; no RDMA NIC set on the other node(s)";
    out += "NOT the same rail on every node: " + parts + "\n";
  }
  // GPU index -> node -> rail and plane of each NIC. Compared among the nodes
  // whose report has them (an older gpuaff wrote none): the same NICs under
  // another rail or plane number make NCCL pair the wrong NICs across nodes.
  std::map<std::string, std::map<std::string, std::string>> ids;
  for (const auto& r : reports)
    for (const auto& [g, text] : r.gpu_rail_ids) ids[g][r.node] = text;
  for (const auto& [g, by_node] : ids) {
    std::map<std::string, std::vector<std::string>> nodes_of;
    for (const auto& [node, text] : by_node) nodes_of[text].push_back(node);
    if (nodes_of.size() == 1) continue;
    same_rails = false;
    std::string parts = values_on_nodes(nodes_of);
    out += "GPU " + safe(g) + ": NOT the same rail and plane (NIC:port:rail:plane) on every node: " + parts + "\n";
  }
  return write_result(out, all_healthy && same_rails ? exit_ok : exit_unhealthy);
}

}  // namespace

/// Writes `text` to `path` as node_exporter's textfile collector needs it: a
/// file beside it (in the same directory, so the rename is atomic), synced,
/// then renamed over `path`; the collector never reads half a file, and no
/// temporary file is left on failure. Returns `code`, or an error's.
int write_textfile(const std::string& path, const std::string& text, int code) {
  std::string dir = path.find('/') == std::string::npos ? std::string(".") : path.substr(0, path.rfind('/') + 1);
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  auto fail_with = [&](const std::string& what, int e) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    return report_error(make_sys_error(Errc::system_error, e, "--textfile ", detail::escape_control(path), ": cannot ",
                                       what, " (", detail::errno_text(e), "); check that ", detail::escape_control(dir),
                                       " exists and is writable (node_exporter's --collector.textfile.directory)"));
  };
  if (fd < 0) {
    int e = errno;
    fd = -1;
    return fail_with("create " + tmp, e);
  }
  for (std::size_t done = 0; done < text.size();) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail_with("write " + tmp, n < 0 ? errno : EIO);
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) return fail_with("sync " + tmp, errno);
  if (::close(fd) != 0) {
    fd = -1;
    return fail_with("close " + tmp, errno);
  }
  fd = -1;
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail_with("rename " + tmp + " to it", errno);
  return code;
}

/// topo's "System reservations" section for the machine the options name
/// (this one, or a root): what the system keeps from housekeeping.
std::string system_reservations(const LaunchOptions& o) {
  if (!o.machine.topology.empty() || !o.machine.hwloc_xml.empty()) return reservations_section(CpuSet{}, nullptr, {});
  std::string root = o.machine.root_or_live();
  Result<SystemReservations> reserved = read_system_reservations(root);
  CpuSet online;
  if (auto t = load(o, process_environment(), cli_readers(), SysfsDetail::binding, nullptr, TopologyParts::none()))
    online = t->online;
  std::optional<CgroupCpuset> cgroup;
  if (auto c = read_cgroup_cpuset(root)) cgroup = std::move(*c);
  return reservations_section(online, &reserved, cgroup);
}

namespace {

// ---- --watch: a check each interval, the changes printed (gpuaff/doctor/watch.hpp).

/// Now, in UTC, as ISO 8601 to the second ("2026-11-28T13:40:05Z").
std::string utc_now() {
  ::timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  std::tm tm{};
  ::gmtime_r(&ts.tv_sec, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

/// One event as one JSON object on one line (docs/contract.md, "doctor --watch").
std::string watch_json_line(const WatchEvent& e, const std::string& node, const std::string& time) {
  J j;
  j["time"] = time;
  j["node"] = node;
  j["event"] = std::string(to_string(e.kind));
  j["pid"] = e.pid;
  j["rank"] = e.rank;
  j["gpu"] = e.gpu;
  if (e.tid != 0) {
    j["tid"] = e.tid;
    j["name"] = e.name;
    j["cpus"] = e.cpus.to_list();
    j["previous_cpus"] = e.previous_cpus ? J(e.previous_cpus->to_list()) : J(nullptr);
    j["role"] = e.role;
    j["runtime"] = e.runtime;
  }
  if (!e.nic.empty()) {
    j["nic"] = e.nic;
    j["ranks"] = e.ranks;
  }
  j["expected_cpus"] = e.expected.to_list();
  j["message"] = cli_spelling(e.message);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + '\n';
}

std::string watch_text_line(const WatchEvent& e, const std::string& time) {
  return time + " " + std::string(to_string(e.kind)) + " " + safe(cli_spelling(e.message)) + '\n';
}

/// The watch's own series, after the processes' (prometheus_of).
std::string watch_prometheus(const std::map<WatchEventKind, long long>& totals, long long checks, double last_check,
                             double check_seconds, std::size_t tids_watched) {
  std::string out =
      "# HELP gpuaff_watch_events_total Changes doctor --watch reported since it started, by kind.\n"
      "# TYPE gpuaff_watch_events_total counter\n";
  for (WatchEventKind k : watch_event_kinds) {
    auto it = totals.find(k);
    out += "gpuaff_watch_events_total{kind=\"" + std::string(to_string(k)) + "\"} " +
           std::to_string(it == totals.end() ? 0 : it->second) + "\n";
  }
  char buf[64];
  out += "# HELP gpuaff_watch_checks_total Checks doctor --watch made since it started.\n"
         "# TYPE gpuaff_watch_checks_total counter\ngpuaff_watch_checks_total " + std::to_string(checks) + "\n";
  std::snprintf(buf, sizeof buf, "%.3f", last_check);
  out += "# HELP gpuaff_watch_last_check_timestamp_seconds When the last check ended (Unix time).\n"
         "# TYPE gpuaff_watch_last_check_timestamp_seconds gauge\ngpuaff_watch_last_check_timestamp_seconds " +
         std::string(buf) + "\n";
  std::snprintf(buf, sizeof buf, "%.6f", check_seconds);
  out += "# HELP gpuaff_watch_check_seconds How long the last check took (wall time).\n"
         "# TYPE gpuaff_watch_check_seconds gauge\ngpuaff_watch_check_seconds " + std::string(buf) + "\n";
  out += "# HELP gpuaff_watch_threads Threads of the planned processes at the last check.\n"
         "# TYPE gpuaff_watch_threads gauge\ngpuaff_watch_threads " + std::to_string(tids_watched) + "\n";
  return out;
}

/// doctor --watch: examine_all each interval until SIGINT or SIGTERM (or
/// --count checks), the changes printed; exit 0 when stopped so. The signals
/// are blocked and waited for with sigtimedwait, which is also the sleep: a
/// signal during a check ends the watch after that check, never half-way
/// through writing a line or the textfile.
int run_watch(const DoctorArgs& args, const DoctorOptions& d) {
  if (args.format == DoctorFormat::prometheus && args.textfile.empty())
    return report_error(make_error(Errc::invalid_argument, "--watch --format prometheus rewrites a file each interval: "
                                   "add --textfile PATH (in node_exporter's --collector.textfile.directory)"));
  ::sigset_t stop;
  ::sigemptyset(&stop);
  ::sigaddset(&stop, SIGINT);
  ::sigaddset(&stop, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  NodeReport before;
  std::optional<WatchNics> nics;
  if (args.nics) nics = watch_nics_start(args);
  std::map<WatchEventKind, long long> totals;
  long long checks = 0;
  bool first = true;
  for (;;) {
    double start = monotonic_seconds();
    NodeReport now = examine_all(args.options, d, cli_readers());
    std::vector<WatchEvent> events = watch_events(before, now, WatchOptions{.min_local = d.min_local});
    if (args.rebind) {
      std::map<int, const Verdict*> old;
      for (const auto& v : before.verdicts) old[v.pid] = &v;
      for (const auto& v : now.verdicts) {
        auto targets = rebind_targets(v, old.count(v.pid) != 0 ? old[v.pid] : nullptr);
        if (targets.empty()) continue;
        auto more = rebind_events(v, rebind_threads(v.pid, targets));
        events.insert(events.end(), more.begin(), more.end());
      }
    }
    std::vector<std::string> nic_notes;
    if (nics) {
      auto more = watch_nics_step(*nics, args, now, nic_notes);
      events.insert(events.end(), more.begin(), more.end());
    }
    ++checks;
    std::string time = utc_now();
    std::string out;
    if (first && args.format == DoctorFormat::text)
      out += time + " watching node " + safe(now.node) + ": " + std::to_string(now.planned()) +
             " planned process(es), a check every " + seconds_text(args.interval) + " s" +
             (nics ? ", NIC traffic from the second check" : "") + "\n";
    if (first || now.notes != before.notes)
      for (const auto& n : now.notes)
        if (args.format == DoctorFormat::text) out += time + " note " + safe(cli_spelling(n)) + '\n';
    for (const auto& n : nic_notes)
      if (args.format == DoctorFormat::text) out += time + " note " + safe(cli_spelling(n)) + '\n';
    for (const auto& e : events) {
      ++totals[e.kind];
      if (args.format == DoctorFormat::json) out += watch_json_line(e, now.node, time);
      else if (args.format == DoctorFormat::text) out += watch_text_line(e, time);
    }
    if (args.format == DoctorFormat::prometheus) {
      std::size_t tids = 0;
      for (const auto& v : now.verdicts) tids += v.threads.size();
      ::timespec wall{};
      ::clock_gettime(CLOCK_REALTIME, &wall);
      std::string text = prometheus_of(now.verdicts, static_cast<int>(now.planned()), static_cast<int>(now.invalid_plans.size())) +
                         watch_prometheus(totals, checks, static_cast<double>(wall.tv_sec) + static_cast<double>(wall.tv_nsec) * 1e-9,
                                          monotonic_seconds() - start, tids);
      if (nics && nics->watch.report) text += nic_prometheus(*nics->watch.report);
      if (int code = write_textfile(args.textfile, with_job_label(text, args.job), exit_ok); code != exit_ok) return code;
    }
    if (!out.empty()) {
      std::fputs(out.c_str(), stdout);
      std::fflush(stdout);
    }
    before = std::move(now);
    first = false;
    if (args.count > 0 && checks >= args.count) return exit_ok;
    double left = args.interval - (monotonic_seconds() - start);
    if (left < 0) left = 0;
    ::timespec wait{};
    wait.tv_sec = static_cast<time_t>(left);
    wait.tv_nsec = static_cast<long>((left - static_cast<double>(wait.tv_sec)) * 1e9);
    for (;;) {
      int sig = ::sigtimedwait(&stop, nullptr, &wait);
      if (sig > 0) return exit_ok;
      if (errno == EINTR) continue;  // another signal (SIGWINCH, a debugger): wait again
      break;                          // EAGAIN: the interval is over
    }
  }
}

}  // namespace

int run_doctor(const DoctorArgs& args) {
  if (args.options.all_gpus)
    return report_error(make_error(Errc::invalid_argument, "gpu=all is for bind: doctor checks one process; name its GPU with gpu=N"));
  if (!args.merge.empty()) return run_merge(args.merge);
  if (args.nics && !args.watch) return run_doctor_nics(args);
  DoctorOptions d{.min_local = args.min_local, .job = args.job};
  if (args.watch) return run_watch(args, d);
  if (args.all) {
    NodeReport r = examine_all(args.options, d, cli_readers());
    std::string out = args.format == DoctorFormat::json ? dump(all_json(r))
                      : args.format == DoctorFormat::prometheus
                          ? with_job_label(prometheus_of(r.verdicts, static_cast<int>(r.planned()),
                                                         static_cast<int>(r.invalid_plans.size())),
                                           args.job)
                          : all_text(r) + system_reservations(args.options);
    int code = r.healthy() ? exit_ok : exit_unhealthy;
    return args.textfile.empty() ? write_result(out, code) : write_textfile(args.textfile, out, code);
  }
  auto v = examine_process(args.pid, args.options, d, cli_readers());
  if (!v) return report_error(v.error());
  int code = v->healthy() ? exit_ok : exit_unhealthy;
  std::optional<J> irqs;
  std::string irqs_out;
  if (args.irqs) {
    // The plan's GPU and its NIC set on the machine named (the NICs read once).
    auto topo = load(args.options, process_environment(), cli_readers(), SysfsDetail::full, nullptr,
                     TopologyParts::only(&TopologyParts::nics));
    auto devices = plan_device_irqs(args.options.machine.root_or_live(), topo ? &*topo : nullptr, v->expected.pci,
                                    "GPU " + std::to_string(v->expected.gpu));
    Roles roles = v->expected.roles.value_or(Roles{});
    mark_irq_roles(devices, roles);
    IrqSteering steering = irq_steering(devices, roles, v->expected.cpus);
    irqs = irqs_json(devices, steering);
    irqs_out = irqs_text(devices, steering);
    if (args.steer_irqs) {
      auto failed = apply_irq_steering(args.options.machine.root_or_live(), steering);
      if (!failed) return report_error(failed.error());
      J applied = J::array();
      for (const auto& [irq, cpus] : steering.moves) applied.push_back(irq);
      (*irqs)["applied"] = std::move(applied);
      (*irqs)["failed"] = *failed;
      irqs_out += "steered: " + std::to_string(steering.moves.size() - failed->size()) + " of " +
                  std::to_string(steering.moves.size()) + " vector(s)\n";
      for (const auto& f : *failed) irqs_out += "  " + safe(f) + '\n';
      if (!failed->empty()) code = exit_system;
    }
  }
  std::string out;
  if (args.format == DoctorFormat::json) {
    J j = json_object(*v);
    if (irqs) j["interrupts"] = std::move(*irqs);
    out = dump(j);
  } else if (args.format == DoctorFormat::prometheus) {
    out = prometheus_of({*v}, std::nullopt);
  } else {
    out = text_of(*v) + irqs_out + system_reservations(args.options);
  }
  return args.textfile.empty() ? write_result(out, code) : write_textfile(args.textfile, out, code);
}

}  // namespace gpuaff::cli

// SPDX-License-Identifier: Apache-2.0
// gpuaff doctor: is a running process where its plan says? The verdict is the
// library's (gpuaff/doctor/verdict.hpp: its own GPUAFF_PLAN, or the plan the
// options give its GPU); this file prints it as text or JSON (docs/doctor.md).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuaff/detail/errno.hpp"
#include "gpuaff/doctor/all.hpp"
#include "gpuaff/doctor/document.hpp"
#include "gpuaff/doctor/verdict.hpp"
#include "output.hpp"
#include "prometheus.hpp"
#include "report.hpp"

namespace gpuaff::cli {
namespace {


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
  return out;
}

// ---- --all and --merge.

std::string all_text(const NodeReport& r) {
  std::size_t off = r.invalid_plans.size();
  for (const auto& v : r.verdicts) off += v.healthy() ? 0 : 1;
  std::string out = "node " + safe(r.node) + ": " + std::to_string(r.planned()) +
                    " process(es) carry a GPUAFF_PLAN" +
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
  for (const auto& n : r.notes) out += "note: " + safe(cli_spelling(n)) + '\n';
  return out;
}

J all_json(const NodeReport& r) {
  J j;
  j["node"] = r.node;
  J processes = J::array();
  for (const auto& v : r.verdicts) processes.push_back(json_object(v));
  j["processes"] = std::move(processes);
  J invalid = J::array();
  for (const auto& b : r.invalid_plans) invalid.push_back(J{{"pid", b.pid}, {"problem", b.problem}});
  j["invalid_plans"] = std::move(invalid);
  J rails = J::object();
  for (const auto& [g, rail] : r.gpu_rails) rails[std::to_string(g)] = rail;
  j["gpu_rails"] = std::move(rails);
  J notes = J::array();
  for (const auto& n : r.notes) notes.push_back(cli_spelling(n));
  j["notes"] = std::move(notes);
  return j;
}

/// One table by node and rank from several nodes' --all --format json
/// reports, and whether each GPU index has the same NIC set on every node.
/// Exit 7 when a process is off or a GPU index changes rail between nodes.
int run_merge(const std::vector<std::string>& files) {
  std::vector<J> reports;
  for (const auto& f : files) {
    std::string text;
    if (int e = detail::read_whole_file(f, text); e != 0)
      return report_error(make_sys_error(Errc::io_error, e, "--merge: cannot read " + safe(f)));
    J j = J::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("node") || !j["node"].is_string() || !j.contains("processes") ||
        !j["processes"].is_array())
      return report_error(make_error(Errc::parse_error, "--merge: ", safe(f), " is not the output of gpuaff doctor --all "
                                     "--format json (an object with node and processes)"));
    reports.push_back(std::move(j));
  }
  std::sort(reports.begin(), reports.end(), [](const J& a, const J& b) { return a["node"] < b["node"]; });
  std::vector<std::vector<std::string>> rows{{"node", "rank", "gpu", "pid", "verdict", "problems"}};
  bool all_healthy = true;
  for (const auto& r : reports) {
    std::vector<const J*> procs;
    for (const auto& p : r["processes"]) procs.push_back(&p);
    std::sort(procs.begin(), procs.end(), [](const J* a, const J* b) {
      return a->value("gpu_source", std::string()) < b->value("gpu_source", std::string());
    });
    for (const J* p : procs) {
      bool healthy = p->value("healthy", false);
      all_healthy = all_healthy && healthy;
      std::string first = p->contains("problems") && (*p)["problems"].is_array() && !(*p)["problems"].empty() &&
                                  (*p)["problems"][0].is_string()
                              ? (*p)["problems"][0].get<std::string>()
                              : std::string();
      rows.push_back({safe(r["node"].get<std::string>()), safe(p->value("gpu_source", std::string("?"))),
                      std::to_string(p->value("gpu", -1)), std::to_string(p->value("pid", 0)),
                      healthy ? "healthy" : "NOT healthy", safe(first.substr(0, 100))});
    }
    // Processes whose plan could not be read (a report from an older gpuaff has no such list).
    if (r.contains("invalid_plans") && r["invalid_plans"].is_array()) {
      for (const auto& b : r["invalid_plans"]) {
        all_healthy = false;
        std::string pid = b.contains("pid") && b["pid"].is_number_integer() ? std::to_string(b["pid"].get<long long>()) : "?";
        std::string problem = b.contains("problem") && b["problem"].is_string() ? b["problem"].get<std::string>() : "";
        rows.push_back({safe(r["node"].get<std::string>()), "-", "-", pid, "NOT healthy", safe(problem.substr(0, 100))});
      }
    }
  }
  std::string out = render_table(rows, "  ");
  // GPU index -> node -> NIC set
  std::map<std::string, std::map<std::string, std::string>> rails;
  for (const auto& r : reports)
    if (r.contains("gpu_rails") && r["gpu_rails"].is_object())
      for (const auto& [g, rail] : r["gpu_rails"].items())
        if (rail.is_string()) rails[g][r["node"].get<std::string>()] = rail.get<std::string>();
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
    std::string parts;
    for (const auto& [rail, nodes] : nodes_of) {
      std::string list;
      for (const auto& n : nodes) list += (list.empty() ? "" : ",") + safe(n);
      parts += (parts.empty() ? "" : "; ") + safe(rail) + " on " + list;
    }
    if (by_node.size() < reports.size()) parts += "; no RDMA NIC set on the other node(s)";
    out += "NOT the same rail on every node: " + parts + "\n";
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

int run_doctor(const DoctorArgs& args) {
  if (args.options.all_gpus)
    return report_error(make_error(Errc::invalid_argument, "gpu=all is for bind: doctor checks one process; name its GPU with gpu=N"));
  if (!args.merge.empty()) return run_merge(args.merge);
  DoctorOptions d{.min_local = args.min_local};
  if (args.all) {
    NodeReport r = examine_all(args.options, d, cli_readers());
    std::string out = args.format == DoctorFormat::json ? dump(all_json(r))
                      : args.format == DoctorFormat::prometheus
                          ? prometheus_of(r.verdicts, static_cast<int>(r.planned()), static_cast<int>(r.invalid_plans.size()))
                          : all_text(r);
    int code = r.healthy() ? exit_ok : exit_unhealthy;
    return args.textfile.empty() ? write_result(out, code) : write_textfile(args.textfile, out, code);
  }
  auto v = examine_process(args.pid, args.options, d, cli_readers());
  if (!v) return report_error(v.error());
  std::string out = args.format == DoctorFormat::json         ? dump(json_object(*v))
                    : args.format == DoctorFormat::prometheus ? prometheus_of({*v}, std::nullopt)
                                                              : text_of(*v);
  int code = v->healthy() ? exit_ok : exit_unhealthy;
  return args.textfile.empty() ? write_result(out, code) : write_textfile(args.textfile, out, code);
}

}  // namespace gpuaff::cli

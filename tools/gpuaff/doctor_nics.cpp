// SPDX-License-Identifier: Apache-2.0
// gpuaff doctor --nics: the RDMA NICs' byte counters sampled twice (or read
// from a recorded counter sequence, --counters), the node's planned
// processes' NIC sets, and the library's verdict (gpuaff/doctor/nic_traffic.hpp)
// printed as text, JSON or Prometheus text (docs/doctor.md, "NIC traffic").
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuaff/detail/fs.hpp"
#include "gpuaff/doctor/all.hpp"
#include "gpuaff/doctor/nic_traffic.hpp"
#include "gpuaff/launch/nics.hpp"
#include "gpuaff/launch/plan_variable.hpp"
#include "output.hpp"
#include "prometheus.hpp"
#include "report.hpp"
#include "watch_nics.hpp"

namespace gpuaff::cli {
namespace {

void sleep_seconds(double s) {
  timespec left{.tv_sec = static_cast<time_t>(s), .tv_nsec = static_cast<long>((s - static_cast<double>(static_cast<time_t>(s))) * 1e9)};
  while (::nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

std::string port_name(const Nic& n) { return std::string(n.rdma_names.front().view()) + ":" + std::to_string(n.rdma_port); }

/// The planned processes `pids` as ranks: each one's GPU's NIC set on `topo`
/// (found by the plan's PCI address) and the NICs its variables list.
std::vector<RankNics> planned_ranks(const Topology* topo, const std::vector<int>& pids, std::vector<std::string>& notes) {
  std::vector<RankNics> out;
  std::vector<std::string> known;
  if (topo != nullptr)
    for (const auto& n : topo->nics)
      for (const auto& name : n.rdma_names) known.emplace_back(name.view());
  std::set<std::string> names;
  for (int pid : pids) {
    auto vars = process_environ(pid);
    if (!vars) {
      notes.push_back(std::string(vars.error().message()));
      continue;
    }
    auto it = vars->find(std::string(plan_variable));
    if (it == vars->end()) continue;  // it changed its environment since
    auto p = parse_plan_variable(it->second);
    if (!p) {
      notes.push_back("pid " + std::to_string(pid) + ": " + std::string(p.error().message()) + "; not counted");
      continue;
    }
    RankNics r{.rank = p->from.empty() ? "pid " + std::to_string(pid) : p->from, .pid = pid};
    if (!names.insert(r.rank).second) {
      r.rank += " pid " + std::to_string(pid);
      names.insert(r.rank);
    }
    const Gpu* gpu = nullptr;
    if (topo != nullptr)
      for (const auto* list : {&topo->host_gpus, &topo->gpus})
        for (const auto& g : *list)
          if (gpu == nullptr && g.address().to_string().view() == p->pci) gpu = &g;
    if (gpu != nullptr) {
      for (const Nic* n : nic_set_of(*topo, *gpu).nics) r.planned.push_back(port_name(*n));
    } else if (topo != nullptr) {
      notes.push_back(r.rank + ": no GPU " + p->pci + " in " + std::string(topo->origin.view()) + ": no NIC set");
    }
    std::vector<std::string> why;
    r.listed = rank_listed_nics(*vars, known, r.planned.size(), &why);
    for (const auto& w : why) notes.push_back(r.rank + ": " + w);
    out.push_back(std::move(r));
  }
  return out;
}

std::string rate(std::uint64_t bytes, double seconds) {
  return detail::rate_text(seconds > 0 ? static_cast<double>(bytes) / seconds : 0.0);
}

std::string text_of(const NicTrafficReport& r, const std::vector<RankNics>& ranks) {
  std::size_t problems = 0;
  for (const auto& f : r.findings) problems += f.problem ? 1 : 0;
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", r.seconds);
  std::string out = "NIC traffic over " + std::string(secs) + " s: " + std::to_string(r.nics.size()) + " port(s), " +
                    std::to_string(ranks.size()) + " planned process(es), " + std::to_string(problems) + " problem(s)\n";
  std::vector<std::vector<std::string>> rows{{"nic", "sent", "received", "set of", "used by", "state"}};
  for (const auto& n : r.nics)
    rows.push_back({safe(n.nic), rate(n.tx, n.seconds), rate(n.rx, n.seconds),
                    n.owners.empty() ? "-" : safe(detail::joined(n.owners, ",")),
                    n.users.empty() ? "-" : safe(detail::joined(n.users, ",")), n.busy ? "busy" : "idle"});
  if (!r.nics.empty()) out += render_table(rows, "  ");
  for (const auto& f : r.findings) out += std::string(f.problem ? "problem: " : "note: ") + safe(cli_spelling(f.message)) + '\n';
  for (const auto& n : r.notes) out += "note: " + safe(cli_spelling(n)) + '\n';
  out += r.healthy() ? "healthy\n" : "NOT healthy\n";
  return out;
}

using J = nlohmann::ordered_json;

J json_of(const NicTrafficReport& r, const std::vector<RankNics>& ranks) {
  J j;
  j["seconds"] = r.seconds;
  j["healthy"] = r.healthy();
  J nics = J::array();
  for (const auto& n : r.nics)
    nics.push_back(J{{"nic", n.nic}, {"tx_bytes", n.tx}, {"rx_bytes", n.rx}, {"bytes_per_second", n.bytes_per_second()},
                     {"busy", n.busy}, {"rail", n.rail}, {"set_of", n.owners}, {"used_by", n.users}, {"source", n.source}});
  j["nics"] = std::move(nics);
  J rs = J::array();
  for (const auto& k : ranks) rs.push_back(J{{"rank", k.rank}, {"pid", k.pid}, {"planned", k.planned}, {"listed", k.listed}});
  j["ranks"] = std::move(rs);
  J fs = J::array();
  for (const auto& f : r.findings)
    fs.push_back(J{{"kind", std::string(to_string(f.kind))}, {"nic", f.nic}, {"ranks", f.ranks}, {"idle", f.idle},
                   {"problem", f.problem}, {"message", cli_spelling(f.message)}});
  j["findings"] = std::move(fs);
  J notes = J::array();
  for (const auto& n : r.notes) notes.push_back(cli_spelling(n));
  j["notes"] = std::move(notes);
  return j;
}

}  // namespace

std::string nic_prometheus(const NicTrafficReport& r) {
  std::string out;
  auto labels = [](const NicTrafficRow& n) {
    return "{nic=\"" + label_value(n.nic) + "\",ranks=\"" + label_value(detail::joined(n.owners, ",")) + "\"}";
  };
  auto number = [](double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return std::string(buf);
  };
  out += "# HELP gpuaff_nic_interval_seconds Seconds between the two counter samples.\n"
         "# TYPE gpuaff_nic_interval_seconds gauge\ngpuaff_nic_interval_seconds " + number(r.seconds) + "\n";
  out += "# HELP gpuaff_nic_transmit_bytes_per_second Bytes an RDMA port sent per second over the interval; ranks: "
         "the planned processes whose NIC set holds it.\n# TYPE gpuaff_nic_transmit_bytes_per_second gauge\n";
  for (const auto& n : r.nics)
    out += "gpuaff_nic_transmit_bytes_per_second" + labels(n) + " " + number(static_cast<double>(n.tx) / n.seconds) + "\n";
  out += "# HELP gpuaff_nic_receive_bytes_per_second Bytes an RDMA port received per second over the interval; ranks: "
         "the planned processes whose NIC set holds it.\n# TYPE gpuaff_nic_receive_bytes_per_second gauge\n";
  for (const auto& n : r.nics)
    out += "gpuaff_nic_receive_bytes_per_second" + labels(n) + " " + number(static_cast<double>(n.rx) / n.seconds) + "\n";
  out += "# HELP gpuaff_nic_problem 1 per NIC traffic problem: kind idle_in_set, outside_sets or piled.\n"
         "# TYPE gpuaff_nic_problem gauge\n";
  for (const auto& f : r.findings)
    if (f.problem)
      out += "gpuaff_nic_problem{nic=\"" + label_value(f.nic) + "\",kind=\"" + std::string(to_string(f.kind)) +
             "\",ranks=\"" + label_value(detail::joined(f.ranks, ",")) + "\"} 1\n";
  out += "# HELP gpuaff_nic_healthy 1 when the NIC traffic shows no problem.\n# TYPE gpuaff_nic_healthy gauge\n"
         "gpuaff_nic_healthy " + std::string(r.healthy() ? "1" : "0") + "\n";
  return out;
}

namespace {

std::vector<std::string> rails_of(const Topology& t) {
  std::vector<std::string> out;
  for (const Nic* n : nic_rails(t)) out.push_back(port_name(*n));
  return out;
}

}  // namespace

WatchNics watch_nics_start(const DoctorArgs& args) {
  WatchNics w;
  auto topo = load(args.options, process_environment(), cli_readers(), SysfsDetail::full, nullptr,
                   TopologyParts::only(&TopologyParts::nics));
  if (topo) {
    w.watch.options.rails = rails_of(*topo);
    w.topo = std::move(*topo);
  } else {
    w.topo_notes.push_back("NIC sets unknown: " + std::string(topo.error().message()));
  }
  return w;
}

std::vector<WatchEvent> watch_nics_step(WatchNics& w, const DoctorArgs& args, const NodeReport& now,
                                        std::vector<std::string>& notes) {
  std::vector<std::string> all = w.topo_notes;
  NicSample sample = sample_nic_counters(args.options.machine.root_or_live(), monotonic_seconds());
  bool first = !w.watch.last.has_value();
  w.any_port = w.any_port || !sample.ports.empty();
  if (!w.any_port && sample.notes.empty())
    all.push_back("no RDMA NIC under sys/class/infiniband: --nics has no counters to watch");
  std::vector<int> pids;
  for (const auto& v : now.verdicts) pids.push_back(v.pid);
  std::vector<RankNics> ranks = planned_ranks(w.topo ? &*w.topo : nullptr, pids, all);
  if (first) all.insert(all.end(), sample.notes.begin(), sample.notes.end());
  std::vector<WatchEvent> events = w.watch.step(std::move(sample), ranks);
  if (!first && w.any_port && w.watch.report) all.insert(all.end(), w.watch.report->notes.begin(), w.watch.report->notes.end());
  std::set<std::string> shown;
  for (auto& n : all) {
    if (w.shown.count(n) == 0 && shown.count(n) == 0) notes.push_back("NICs: " + n);
    shown.insert(std::move(n));
  }
  w.shown = std::move(shown);
  return events;
}

int run_doctor_nics(const DoctorArgs& args) {
  std::vector<std::string> notes;
  auto topo = load(args.options, process_environment(), cli_readers(), SysfsDetail::full, nullptr,
                   TopologyParts::only(&TopologyParts::nics));
  if (!topo) notes.push_back("NIC sets unknown: " + std::string(topo.error().message()));
  NicSample before, after;
  if (!args.counters.empty()) {
    std::string text;
    if (int e = detail::read_whole_file(args.counters, text); e != 0)
      return report_error(make_sys_error(Errc::io_error, e, "--counters: cannot read ", safe(args.counters), " (",
                                         detail::errno_text(e), ")"));
    auto seq = parse_nic_sequence(text, args.counters);
    if (!seq) return report_error(seq.error());
    before = seq->front();
    after = seq->back();
  } else {
    const std::string root = args.options.machine.root_or_live();
    before = sample_nic_counters(root, monotonic_seconds());
    sleep_seconds(args.interval);
    after = sample_nic_counters(root, monotonic_seconds());
  }
  std::vector<int> pids = detail::planned_processes_of_job(args.job, "read", notes);
  std::vector<RankNics> ranks = planned_ranks(topo ? &*topo : nullptr, pids, notes);
  NicTrafficOptions o;
  if (topo) o.rails = rails_of(*topo);
  NicTrafficReport r = judge_nic_traffic(before, after, ranks, o);
  r.notes.insert(r.notes.begin(), notes.begin(), notes.end());
  std::string out = args.format == DoctorFormat::json
                        ? json_of(r, ranks).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + '\n'
                        : args.format == DoctorFormat::prometheus ? with_job_label(nic_prometheus(r), args.job)
                                                                  : text_of(r, ranks);
  int code = r.healthy() ? exit_ok : exit_unhealthy;
  return args.textfile.empty() ? write_result(out, code) : write_textfile(args.textfile, out, code);
}

}  // namespace gpuaff::cli

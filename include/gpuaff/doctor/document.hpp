// SPDX-License-Identifier: Apache-2.0
#pragma once
// A doctor verdict as one document: its keys, their order and their values,
// written once. `gpuaff doctor --format json` writes it as JSON and Python's
// gpuaff.doctor() returns it as a dict, so both carry the same keys
// (docs/contract.md section 4). The front ends choose only how three kinds of
// value look to their users: a message (respelled: `--nproc 4` or `nproc=4`),
// a CPU or node list (a cpulist string in JSON, a set in Python) and the
// pages per node (JSON keys are strings; Python's are ints).

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/doctor/doctor.hpp"
#include "gpuaff/doctor/mappings.hpp"
#include "gpuaff/doctor/verdict.hpp"
#include "gpuaff/policy/roles.hpp"

namespace gpuaff {
inline namespace v0 {

struct DocValue;
/// Members in order (JSON objects keep the order they are written in).
using DocObject = std::vector<std::pair<std::string, DocValue>>;
using DocArray = std::vector<DocValue>;
/// A message in the library's spelling (`nproc=4`): each front end respells it.
struct DocMessage {
  std::string text;
};
/// A set of CPU or node ids, as a cpulist.
struct DocIds {
  std::string list;
};
/// A count per NUMA node id.
using DocNodeCounts = std::vector<std::pair<int, long long>>;

struct DocValue {
  std::variant<std::nullptr_t, bool, long long, double, std::string, DocMessage, DocIds, DocNodeCounts, DocArray,
               DocObject>
      v;
};

/// Where a verdict's expectation came from, as the document names it.
constexpr std::string_view plan_origin_name(PlanOrigin o) {
  switch (o) {
    case PlanOrigin::recorded: return "GPUAFF_PLAN";
    case PlanOrigin::options: return "options";
    case PlanOrigin::guess: return "guess";
  }
  return "guess";
}

/// The verdict's document: pid, gpu, bdf, gpu_source, plan_from, policy,
/// expected_cpus, memory_nodes, host_nodes, roles (when the plan has roles),
/// healthy, threads (tid, name, cpus, inside, owner when a runtime's name
/// tells, role with roles), memory (pages_by_node, local_fraction,
/// mapping_count, mappings: address, kind, file, policy, bytes, page_bytes,
/// pages_by_node, off_host), environment (name, value, why), problems, notes.
inline DocValue verdict_document(const Verdict& v) {
  const Expectation& e = v.expected;
  auto ids = [](const CpuSet& s) { return DocValue{DocIds{s.to_list()}}; };
  DocObject d;
  d.emplace_back("pid", DocValue{static_cast<long long>(v.pid)});
  d.emplace_back("gpu", DocValue{static_cast<long long>(e.gpu)});
  d.emplace_back("bdf", DocValue{e.pci});
  d.emplace_back("gpu_source", DocValue{e.gpu_source});
  d.emplace_back("plan_from", DocValue{std::string(plan_origin_name(e.origin))});
  d.emplace_back("policy", DocValue{std::string(to_string(e.policy))});
  d.emplace_back("expected_cpus", ids(e.cpus));
  d.emplace_back("memory_nodes", ids(e.memory_nodes));
  d.emplace_back("host_nodes", ids(e.host_nodes));
  if (e.roles) {
    DocObject roles;
    for (std::size_t k = 0; k < role_names.size(); ++k) {
      const CpuSet& cpus = e.roles->of(static_cast<Role>(k));
      if (!cpus.empty()) roles.emplace_back(std::string(role_names[k]), ids(cpus));
    }
    d.emplace_back("roles", DocValue{std::move(roles)});
  }
  d.emplace_back("healthy", DocValue{v.healthy()});
  DocArray threads;
  for (std::size_t i = 0; i < v.threads.size(); ++i) {
    const ThreadState& t = v.threads[i];
    DocObject o{{"tid", DocValue{static_cast<long long>(t.tid)}},
                {"name", DocValue{t.name}},
                {"cpus", ids(t.cpus)},
                {"inside", DocValue{static_cast<bool>(v.inside[i])}}};
    if (std::string_view who = thread_owner(t.name); !who.empty()) o.emplace_back("owner", DocValue{std::string(who)});
    if (e.roles) o.emplace_back("role", v.roles[i].empty() ? DocValue{nullptr} : DocValue{v.roles[i]});
    threads.push_back(DocValue{std::move(o)});
  }
  d.emplace_back("threads", DocValue{std::move(threads)});
  DocNodeCounts pages(v.pages.begin(), v.pages.end());
  DocArray mappings;
  for (const Mapping& m : v.mappings)
    mappings.push_back(DocValue{DocObject{
        {"address", DocValue{m.address_text()}},
        {"kind", DocValue{std::string(m.kind())}},
        {"file", m.file.empty() ? DocValue{nullptr} : DocValue{m.file}},
        {"policy", DocValue{m.policy}},
        {"bytes", DocValue{m.bytes()}},
        {"page_bytes", DocValue{m.page_bytes}},
        {"pages_by_node", DocValue{DocNodeCounts(m.pages.begin(), m.pages.end())}},
        {"off_host", DocValue{m.off_host}}}});
  d.emplace_back("memory", DocValue{DocObject{{"pages_by_node", DocValue{std::move(pages)}},
                                              {"local_fraction", v.total > 0 ? DocValue{v.local_fraction()}
                                                                             : DocValue{nullptr}},
                                              {"mapping_count", DocValue{static_cast<long long>(v.mapping_count)}},
                                              {"mappings", DocValue{std::move(mappings)}}}});
  DocArray env;
  for (const auto& s : v.environment)
    env.push_back(DocValue{DocObject{{"name", DocValue{s.name}},
                                     {"value", DocValue{s.value}},
                                     {"why", DocValue{std::string(s.why)}}}});
  d.emplace_back("environment", DocValue{std::move(env)});
  DocArray problems;
  for (const auto& p : v.problems) problems.push_back(DocValue{DocMessage{p}});
  d.emplace_back("problems", DocValue{std::move(problems)});
  DocArray notes;
  for (const auto& n : v.notes) notes.push_back(DocValue{DocMessage{n}});
  d.emplace_back("notes", DocValue{std::move(notes)});
  return DocValue{std::move(d)};
}

}  // namespace v0
}  // namespace gpuaff

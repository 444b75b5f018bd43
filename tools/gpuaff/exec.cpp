// SPDX-License-Identifier: Apache-2.0
// gpuaff exec: bind this process (every thread, and memory when asked), then
// replace it with COMMAND through execvp.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"
#include "gpuaff/detail/errno.hpp"
#include "gpuaff/launch/launch.hpp"
#include "gpuaff/launch/plan_variable.hpp"
#include "gpuaff/launch/repin_guards.hpp"
#include "gpuaff/policy/threads.hpp"
#include "output.hpp"
#include "policies.hpp"

namespace gpuaff::cli {
namespace {

std::string command_text(const std::vector<std::string>& command) {
  std::string s;
  for (const auto& a : command) s += (s.empty() ? "" : " ") + a;
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

/// Replaces this process with the command; returns only on failure.
int exec_command(const std::vector<std::string>& command) {
  std::vector<char*> argv;
  argv.reserve(command.size() + 1);
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  int e = errno;
  bool missing = e == ENOENT || e == ENOTDIR;
  std::string_view hint = missing              ? "; check the command name and PATH"
                          : e == ENAMETOOLONG ? "; the command's name or path is longer than the system allows"
                          : e == E2BIG        ? "; its arguments and environment are larger than the system allows"
                                              : "; check that it is an executable file";
  std::string name = command.front().size() > 120 ? command.front().substr(0, 117) + "..." : command.front();
  print_line(stderr, "gpuaff: cannot run '" + name + "': " + detail::errno_text(e) + std::string(hint));
  return missing ? exit_command_not_found : exit_cannot_execute;
}

/// What --verbose says was bound.
/// (The command's own thread count is unknown until it runs; gpuaff's own
/// threads, which the binding also covered, say nothing about it.)
std::string bound_text(const LaunchPlan& plan, const ProcessBinding& done, const ExecArgs& args, int threads) {
  std::string what = (plan.visible_gpu >= 0 ? "GPU " + std::to_string(plan.visible_gpu) : std::string("device")) +
                     " " + std::string(plan.target().address().to_string().view()) + " node " +
                     std::to_string(plan.node);
  if (!plan.rank_source.empty()) what += " (" + plan.rank_source + ")";
  for (int g : plan.more_visible_gpus) what += " + GPU " + std::to_string(g);
  if (plan.ranks_per_gpu > 1)
    what += ", part " + std::to_string(plan.part) + " of " + std::to_string(plan.ranks_per_gpu) + " of its share " +
            plan.gpu_share.to_list();
  what += ", policy " + std::string(to_string(plan.policy.kind)) + ": CPUs " + plan.cpus.to_list() + ", memory " +
          std::string(to_string(plan.membind));
  if (plan.membind != MemPolicy::none) what += " nodes " + plan.memory_nodes.to_list();
  if (plan.membind != MemPolicy::none && !done.memory_applied) what += " (not applied)";
  if (!plan.nearest_nodes.empty()) what += " (no allowed CPU on node " + std::to_string(plan.node) + ": nearest)";
  if (args.options.omp_threads) what += ", OMP_NUM_THREADS=" + std::to_string(threads);
  for (const auto& [name, value] : plan.env) what += ", " + name + "=" + value;
  return what;
}

/// --dry-run: the plan as `bind --format json` prints it, plus "command".
/// This process's environment, as a map.
std::map<std::string, std::string> own_environment() {
  std::map<std::string, std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    std::size_t eq = entry.find('=');
    if (eq != std::string_view::npos && eq > 0) out.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return out;
}

/// The runtimes' own switches against re-pinning (gpuaff/launch/repin_guards.hpp) for this command.
std::vector<RepinGuardSetting> guards_for(const ExecArgs& args) {
  return repin_guard_variables(own_environment(), args.command.empty() ? std::string_view() : std::string_view(args.command.front()));
}

int print_dry_run(const LaunchPlan& plan, const ExecArgs& args) {
  nlohmann::ordered_json j = plan_json(plan, args.options);
  nlohmann::ordered_json guards = nlohmann::ordered_json::array();
  for (const auto& g : guards_for(args))
    guards.push_back({{"name", g.name}, {"value", g.value}, {"runtime", g.runtime}, {"found_by", g.found_by}, {"source", g.source}});
  j["repin_guards"] = std::move(guards);
  j["command"] = args.command;
  j["plan_variable"] = plan_variable_value(plan);
  if (args.options.omp_threads) j["omp_num_threads"] = omp_thread_count(plan);
  return write_result(j.dump(2) + '\n');
}

}  // namespace

int run_exec(const ExecArgs& args) {
  const LaunchOptions& o = args.options;
  if (args.command.empty()) {
    return report_error(make_error(Errc::invalid_argument, "exec needs a command after '--'; e.g. gpuaff exec "
                                                           "--local-rank -- python train.py"));
  }
  // The library's launch (gpuaff/launch/launch.hpp) holds every rule: the
  // device named, the fallback, the variables, the exit code. exec prints.
  LaunchCall call{.apply = args.dry_run ? LaunchApply::none : LaunchApply::process,
                  .running = "running '" + command_text(args.command) + "'",
                  .publish = false};  // the command carries GPUAFF_PLAN in the environment it is exec'd with
  Launched l = launch(o, process_environment(), cli_readers(), call);
  for (const auto& w : l.warnings) print_warning(w);
  if (!l.ok()) return report_error(*l.error);
  if (args.dry_run) return print_dry_run(*l.plan, args);
  for (const auto& [name, value] : l.env) ::setenv(name.c_str(), value.c_str(), 1);
  // A runtime found that would re-pin the bound threads gets its documented
  // switch; a value the user set is never replaced (setenv's 0).
  std::string guarded;
  if (!l.unbound)
    for (const auto& g : guards_for(args))
      if (::setenv(g.name.c_str(), g.value.c_str(), 0) == 0)
        guarded += ", " + g.name + "=" + g.value + " (" + std::string(g.runtime) + ", found by " + g.found_by + ")";
  if (args.verbose && !l.unbound)
    print_line(stderr, "gpuaff: " + cli_spelling(bound_text(*l.plan, *l.binding, args, omp_thread_count(*l.plan))) +
                           guarded + "; exec " + command_text(args.command));
  return exec_command(args.command);
}

}  // namespace gpuaff::cli

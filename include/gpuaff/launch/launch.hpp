// SPDX-License-Identifier: Apache-2.0
#pragma once
// The front door's exit: from what a user asks (LaunchOptions) and the
// process's environment to a bound process, or to the one error that says why
// not, in one call. `gpuaff exec`, the SPANK plugin and Python's bind(),
// bound() and use_executable() call it and only print and export what it
// returns; the rules live here once:
//
//   - a device must be named (gpu=N, pci=BDF or local_rank=true): never GPU 0
//     by default;
//   - a memory node choice needs a memory policy (check_apply_options);
//   - fallback=unbound covers what the machine refuses (a plan it cannot
//     give, a binding the kernel refuses), never a usage mistake, and says so
//     in one warning; a refused memory policy then keeps the CPU binding;
//   - the kernel's EINVAL while applying (a CPU outside the cgroup's cpuset)
//     is the machine refusing, not a usage mistake;
//   - a process bound in place publishes its plan for doctor
//     (launch/published_plan.hpp); a launched program is given GPUAFF_PLAN
//     (for doctor) in its environment, the plan's own
//     variables (NIC sets, OMP_PLACES) and OMP_NUM_THREADS under omp_threads;
//   - each failure carries its exit code (launch/exit_codes.hpp).
//
//   gpuaff::LaunchOptions o;
//   o.local_rank = true;
//   o.policy.kind = gpuaff::PolicyKind::exclusive;
//   gpuaff::Launched l = gpuaff::launch(o);            // binds every thread of this process
//   for (const auto& w : l.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
//   if (!l.ok()) return l.exit_code();                  // l.error: what is wrong and what to do
//   for (const auto& [name, value] : l.env) setenv(name.c_str(), value.c_str(), 1);
//   execvp(...);
//
// Messages and warnings are in the library's spelling (`nproc=4`); a front
// end respells them for its users (spell_options).

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuaff/apply/process.hpp"
#include "gpuaff/apply/scoped_affinity.hpp"
#include "gpuaff/detail/parse.hpp"
#include "gpuaff/launch/exit_codes.hpp"
#include "gpuaff/launch/front.hpp"
#include "gpuaff/launch/plan_variable.hpp"
#include "gpuaff/launch/published_plan.hpp"
#include "gpuaff/policy/threads.hpp"

namespace gpuaff {
inline namespace v0 {

/// What a launch applies.
enum class LaunchApply {
  process,  ///< every thread of this process, and the calling thread's memory policy (exec, the SPANK plugin, bind())
  thread,   ///< the calling thread only, until Launched::guard goes (a scope: Python's bound())
  later,    ///< nothing now: the variables are for processes that bind themselves (use_executable())
  none,     ///< nothing: the plan only, and no fallback (exec --dry-run)
};

/// How a front end asks for a launch.
struct LaunchCall {
  LaunchApply apply = LaunchApply::process;
  /// What runs unbound when fallback=unbound covers a refusal, for its
  /// warning: "running 'python train.py'", "running the task".
  std::string running = "running";
  /// LaunchApply::process: also publish the plan where `gpuaff doctor` reads
  /// it (launch/published_plan.hpp), for a process that goes on running
  /// bound. A front end that execs the program, which then carries
  /// GPUAFF_PLAN in its environment, leaves it out.
  bool publish = true;
};

/// What a launch did: bound (ok()), ran into an error (the program must not
/// run: exit with exit_code()), or was refused and, under fallback=unbound,
/// runs unbound (`unbound`, with a warning saying why).
struct Launched {
  std::optional<LaunchPlan> plan{};         ///< the plan, once one was made
  std::optional<ProcessBinding> binding{};  ///< LaunchApply::process: what was bound
  std::optional<ScopedAffinity> guard{};    ///< LaunchApply::thread: restores the thread when it goes
  /// One line each, in order, in the library's spelling: the plan's, the
  /// binding's, and the fallback's.
  std::vector<std::string> warnings{};
  /// The variables the launched program is given, in order (none when it
  /// runs unbound or nothing was planned).
  std::vector<std::pair<std::string, std::string>> env{};
  std::optional<Error> error{};  ///< why the program must not run
  LaunchStage stage = LaunchStage::options;  ///< where `error` (or the refusal `unbound` covers) happened
  bool unbound = false;          ///< fallback=unbound covered a refusal: the program runs unbound

  bool ok() const { return !error.has_value(); }
  /// Whether `error` is the user's mistake (an option, a launcher variable, a
  /// visibility list) rather than the machine's answer.
  bool usage_mistake() const { return error && gpuaff::usage_mistake(*error, stage); }
  /// exit_ok, or the exit code of `error`'s class.
  int exit_code() const { return error ? gpuaff::exit_code(error->code()) : int(exit_ok); }
};

namespace detail {

/// The variables a bound program is given: OMP_NUM_THREADS under
/// omp_threads, the plan's own (NIC sets, OMP_PLACES), and GPUAFF_PLAN last.
inline std::vector<std::pair<std::string, std::string>> launch_variables(const LaunchPlan& plan,
                                                                         const LaunchOptions& o) {
  std::vector<std::pair<std::string, std::string>> env;
  if (o.omp_threads) env.emplace_back("OMP_NUM_THREADS", std::to_string(omp_thread_count(plan)));
  env.insert(env.end(), plan.env.begin(), plan.env.end());
  env.emplace_back(std::string(plan_variable), plan_variable_value(plan));
  return env;
}

/// Ends a launch on `e` at `stage`: fallback=unbound turns what the machine
/// refuses into one warning and an unbound run; a usage mistake stays an error.
inline void refuse(Launched& l, Error e, LaunchStage stage, const LaunchOptions& o, const LaunchCall& call) {
  // The kernel's EINVAL (a CPU outside the cgroup's cpuset) is the machine
  // refusing the binding, not a mistake in the options.
  if (stage == LaunchStage::apply && e.code() == Errc::invalid_argument) e = Error(Errc::empty_result, e.message(), e.sys_errno());
  l.stage = stage;
  l.env.clear();
  bool covered = o.fallback == Fallback::unbound && call.apply != LaunchApply::none && !usage_mistake(e, stage);
  if (!covered) {
    l.error = std::move(e);
    return;
  }
  l.unbound = true;
  l.warnings.push_back(one_line(e.message()) + "; " + call.running + " unbound (fallback=unbound)");
}

}  // namespace detail

/// Applies a plan made earlier (from the options `o`) as `call` asks.
inline Launched launch(LaunchPlan plan, const LaunchOptions& o, const LaunchCall& call = {}) {
  Launched l;
  l.stage = LaunchStage::apply;
  l.warnings = plan.warnings;
  const LaunchPlan& p = l.plan.emplace(std::move(plan));
  OnRefused on_refused = o.fallback == Fallback::unbound ? OnRefused::cpu_only : OnRefused::error;
  PlannedOn where = o.machine.another_machine() ? PlannedOn::another_machine : PlannedOn::this_machine;
  if (call.apply == LaunchApply::process) {
    auto done = apply_plan(p, on_refused, where);
    if (!done) {
      detail::refuse(l, done.error(), LaunchStage::apply, o, call);
      return l;
    }
    l.warnings.insert(l.warnings.end(), done->warnings.begin(), done->warnings.end());
    l.binding = std::move(*done);
    // The binding holds without it; only doctor's view of the process is lost.
    if (call.publish)
      if (auto published = publish_plan_value(plan_variable_value(p)); !published)
        l.warnings.push_back(detail::one_line(published.error().message()) + "; gpuaff doctor will not see this process's plan");
  } else if (call.apply == LaunchApply::thread) {
    auto there = check_planned_here(p, where);
    auto guard = there ? ScopedAffinity::create(p.cpus, p.memory(on_refused)) : Result<ScopedAffinity>(Unexpected<Error>(there.error()));
    if (!guard) {
      detail::refuse(l, guard.error(), LaunchStage::apply, o, call);
      return l;
    }
    l.guard.emplace(std::move(*guard));
  }
  l.env = detail::launch_variables(p, o);
  return l;
}

/// Plans the device the options name in the environment `env` and applies
/// the plan as `call` asks: the whole launch, every rule above.
inline Launched launch(const LaunchOptions& o, const Environment& env = process_environment(),
                       const Readers& readers = {}, const LaunchCall& call = {}) {
  Launched l;
  if (auto ok = check_apply_options(o); !ok) {
    detail::refuse(l, ok.error(), LaunchStage::options, o, call);
    return l;
  }
  LaunchStage stage = LaunchStage::plan;
  auto plan = gpuaff::plan(o, env, readers, &stage);
  if (!plan) {
    detail::refuse(l, plan.error(), stage, o, call);
    return l;
  }
  return launch(std::move(*plan), o, call);
}

}  // namespace v0
}  // namespace gpuaff

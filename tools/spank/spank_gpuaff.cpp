// SPDX-License-Identifier: Apache-2.0
// spank_gpuaff.so: a Slurm SPANK plugin that binds each task of a step as
// `gpuaff exec --local-rank` would, in the task itself, just before Slurm
// execs the task's program (docs/slurm.md, "The SPANK plugin").
//
//   plugstack.conf:  optional /PATH/spank_gpuaff.so [policy=P] [root=DIR] [default=on|off] [KEY=VALUE...]
//   srun --gpuaff[=POLICY] ...      bind this step's tasks (POLICY overrides policy=P)
//   srun --gpuaff=off ...           do not, even under default=on
//
// Where it runs: slurm_spank_task_init is called in the forked task, after
// Slurm put it in the step's cgroup and its task plugins bound it
// (task_g_pre_launch), after the GRES plugin set the task's
// CUDA_VISIBLE_DEVICES, and just before execve. The calling process is the
// task, with one thread: apply_plan binds it, and the binding (CPU mask and
// memory policy) survives the exec.
//
// Failure: the messages are exec's, one line each on the task's stderr. A
// failed binding ends the task before it runs with exec's exit code (2 usage,
// 3 topology, 4 not found, 5 cannot bind, 6 system): the plugin calls _exit()
// in the task process, as slurmstepd itself does there for its own failures,
// because a plugin listed `optional` cannot stop a task by returning an
// error. With fallback=unbound what the machine refuses is a warning and the
// task runs unbound; a usage mistake always ends the task. Nothing here runs
// in slurmd or in slurmstepd's own process, and no exception leaves the
// plugin.
//
// It links no library beyond the C and C++ runtimes: the spank_* and slurm_*
// functions are slurmstepd's (and srun's), found when Slurm loads the plugin.

extern "C" {
#include <slurm/spank.h>
}

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuaff/detail/parse.hpp"
#include "gpuaff/launch/launch.hpp"

// SPANK_PLUGIN defines these as `const`, which has internal linkage in C++;
// declared here first, they are the exported C symbols Slurm's loader reads.
extern "C" {
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
}
SPANK_PLUGIN(gpuaff, 1)

namespace {

using namespace gpuaff;

/// What plugstack.conf and `srun --gpuaff` ask for. Kept per process: srun
/// and slurmstepd each load the plugin, and a task inherits slurmstepd's.
struct Settings {
  bool site_default = false;                            ///< default=on
  std::vector<std::pair<std::string, std::string>> kv;  ///< the other KEY=VALUE arguments, in order
  std::vector<std::string> config_errors;               ///< reported only when the plugin binds a task
  bool flag_given = false;                              ///< srun --gpuaff[=...]
  bool flag_off = false;                                ///< srun --gpuaff=off
  std::string flag_policy;                              ///< srun --gpuaff=POLICY
};
Settings settings;

constexpr std::string_view prefix = "gpuaff: ";

/// One line for the task's stderr: the text Slurm's own messages show, with
/// control characters escaped as exec escapes them.
void say(const std::string& text) {
  std::string line = detail::one_line(text);
  // Written to the task's stderr (srun shows it with --label's task number),
  // byte for byte the line `gpuaff exec` prints.
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

/// Ends the task with exec's exit code for `e`, after its message. Only
/// called in slurm_spank_task_init, which runs in the task's own process.
[[noreturn]] void end_task(int code) {
  std::fflush(stderr);
  std::fflush(stdout);
  ::_exit(code);
}

/// Whether `key` is a gpuaff option the plugin passes on (every option of
/// `gpuaff exec`).
bool exec_option(std::string_view key) {
  const OptionInfo* o = find_option(key);
  return o != nullptr && o->set != nullptr && (o->commands & for_exec) != 0;
}

/// The binding types an srun --cpu-bind value asks for: its comma-separated
/// words less the reporting ones (quiet, verbose). "none"/"no" asks for none.
std::vector<std::string> cpu_bind_types(std::string_view value) {
  std::vector<std::string> types;
  for (std::string_view word : detail::comma_items(value))
    if (word != "quiet" && word != "q" && word != "verbose" && word != "v" && !word.empty())
      types.emplace_back(word);
  return types;
}

/// srun's own --cpu-bind (or --cpu_bind) value, read from its command line in
/// srun's process; nullopt when it was not given. Slurm passes a task no trace
/// of whether its binding was asked for or is task/affinity's default (both
/// read SLURM_CPU_BIND_TYPE=mask_cpu:), so only srun can tell.
std::optional<std::string> srun_cpu_bind() {
  std::FILE* f = std::fopen("/proc/self/cmdline", "re");
  if (f == nullptr) return std::nullopt;
  std::string all;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && all.size() < (1u << 20)) all.append(buf, n);
  std::fclose(f);
  std::vector<std::string> args;
  for (std::size_t at = 0; at < all.size();) {
    std::size_t end = all.find('\0', at);
    if (end == std::string::npos) end = all.size();
    args.emplace_back(all.substr(at, end - at));
    at = end + 1;
  }
  std::optional<std::string> value;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    for (std::string_view flag : {"--cpu-bind", "--cpu_bind"}) {
      if (a == flag && i + 1 < args.size()) value = args[i + 1];
      else if (a.size() > flag.size() && a.compare(0, flag.size(), flag) == 0 && a[flag.size()] == '=')
        value = a.substr(flag.size() + 1);
    }
  }
  return value;
}

/// The one line that names the conflict of --gpuaff with srun's own
/// --cpu-bind, when srun was given one that binds (cores, threads, a mask...);
/// none and the reporting words (quiet, verbose) do not.
std::optional<std::string> cpu_bind_conflict() {
  auto value = srun_cpu_bind();
  if (!value) return std::nullopt;
  auto types = cpu_bind_types(*value);
  bool binds = !types.empty() && !(types.size() == 1 && (types[0] == "none" || types[0] == "no"));
  if (!binds) return std::nullopt;
  return "gpuaff: srun --cpu-bind=" + detail::one_line(*value).substr(0, 80) +
         " binds each task, and --gpuaff binds it to its GPU's CPUs instead; use --cpu-bind=none with --gpuaff "
         "(or leave --cpu-bind out)";
}

int option_callback(int, const char* optarg, int remote) {
  try {
    settings.flag_given = true;
    std::string_view value = optarg == nullptr ? std::string_view() : std::string_view(optarg);
    settings.flag_off = value == "off";
    settings.flag_policy = value == "off" ? std::string() : std::string(value);
    // In srun: a policy that is not one is the user's mistake, said before
    // anything is allocated, with gpuaff's words ("did you mean ...?").
    if (remote == 0 && !settings.flag_policy.empty()) {
      LaunchOptions o;
      if (auto ok = set_option(o, "policy", settings.flag_policy); !ok) {
        std::string text = detail::one_line(ok.error().message());
        slurm_error("gpuaff: --gpuaff=%s: %s", detail::one_line(settings.flag_policy).c_str(), text.c_str());
        return -1;
      }
    }
    // In srun: --gpuaff with srun's own binding asks for two bindings of each task.
    if (remote == 0 && !settings.flag_off) {
      if (auto conflict = cpu_bind_conflict()) {
        slurm_error("%s", conflict->c_str());
        return -1;
      }
    }
    return 0;
  } catch (...) {
    return -1;
  }
}

spank_option gpuaff_option{
    const_cast<char*>("gpuaff"), const_cast<char*>("POLICY"),
    const_cast<char*>("bind each task to its GPU's CPUs (and memory) as 'gpuaff exec --local-rank' does; POLICY "
                      "(optional) overrides the site's policy=, 'off' turns a site default off"),
    2, 0, option_callback};

/// The task's environment, read through slurmstepd (the variables Slurm set
/// for this task: SLURM_LOCALID, SLURM_TASKS_PER_NODE, CUDA_VISIBLE_DEVICES...).
Environment raw_task_environment(spank_t sp) {
  return [sp](std::string_view name) -> std::optional<std::string> {
    std::string key(name);
    std::vector<char> buf(4096);
    for (int tries = 0; tries < 6; ++tries) {
      spank_err_t rc = spank_getenv(sp, key.c_str(), buf.data(), static_cast<int>(buf.size()));
      if (rc == ESPANK_SUCCESS) return std::string(buf.data());
      if (rc != ESPANK_NOSPACE) return std::nullopt;
      buf.resize(buf.size() * 4);
    }
    return std::nullopt;
  };
}

/// The options as `gpuaff exec --local-rank` with the site's and the user's
/// choices. Errors: the first bad argument of plugstack.conf, or a bad value.
Result<LaunchOptions> task_options() {
  if (!settings.config_errors.empty()) return fail(Errc::invalid_argument, settings.config_errors.front());
  LaunchOptions o;
  for (const auto& [key, value] : settings.kv) GPUAFF_TRY_VOID(set_option(o, key, value));
  if (!settings.flag_policy.empty()) GPUAFF_TRY_VOID(set_option(o, "policy", settings.flag_policy));
  if (o.was_given("local_rank") && !o.local_rank && !o.gpu && !o.pci && !o.all_gpus)
    return fail(Errc::invalid_argument, "plugstack.conf: local_rank=false leaves each task without a device: the "
                "plugin binds a task by its local rank unless gpu=N or pci=BDF names one; leave local_rank out");
  if (!o.gpu && !o.pci && !o.all_gpus) GPUAFF_TRY_VOID(set_option(o, "local_rank", "true"));
  // The plugin replaces Slurm's default task binding (contract section 6):
  // task/affinity has already bound the task to its own cores, and the share
  // is drawn from the step's cgroup instead. An explicit srun --cpu-bind that
  // binds was refused in srun (option_callback, slurm_spank_init_post_opt).
  if (!o.was_given("baseline")) GPUAFF_TRY_VOID(set_option(o, "baseline", "cgroup"));
  if (o.all_gpus)
    return fail(Errc::invalid_argument, "gpu=all is for bind: a task is bound to one device; name it with gpu=N, "
                "pci=BDF or local_rank=true in plugstack.conf");
  return o;
}

/// The task's environment as the plan reads it: inside a Slurm task, Slurm's
/// own rank and size variables win. Another launcher's (LOCAL_RANK,
/// OMPI_COMM_WORLD_LOCAL_RANK, ...) in a task's environment were inherited
/// from where srun ran (`export LOCAL_RANK=0; srun ...` gives every task the
/// same one): they are hidden, and one that contradicts SLURM_LOCALID is
/// named in `warnings`.
Environment task_environment(spank_t sp, std::vector<std::string>& warnings) {
  Environment raw = raw_task_environment(sp);
  std::optional<std::string> slurm_rank = raw("SLURM_LOCALID");
  if (!slurm_rank) return raw;
  for (std::string_view v : local_rank_variables) {
    if (v == "SLURM_LOCALID") continue;
    if (auto other = raw(v); other && *other != *slurm_rank)
      warnings.push_back(std::string(v) + "=" + other->substr(0, 20) + " in the task's environment (inherited from "
                         "where srun ran) is not this task's SLURM_LOCALID=" + *slurm_rank +
                         ": the task is bound by SLURM_LOCALID; unset " + std::string(v) + " before srun");
  }
  return [raw](std::string_view name) -> std::optional<std::string> {
    auto listed = [name](const auto& list) { return std::find(list.begin(), list.end(), name) != list.end(); };
    if (name != "SLURM_LOCALID" && (listed(local_rank_variables) || listed(local_size_variables))) return std::nullopt;
    return raw(name);
  };
}

int bind_task(spank_t sp) {
  auto options = task_options();
  if (!options) {
    say(std::string(prefix) + std::string(options.error().message()));
    end_task(exit_code(options.error().code()));
  }
  // The library's launch (gpuaff/launch/launch.hpp) holds every rule, as for
  // `gpuaff exec`; the plugin prints and sets the task's variables.
  std::vector<std::string> inherited;
  Environment env = task_environment(sp, inherited);
  for (const auto& w : inherited) say(std::string(prefix) + "warning: " + w);
  Launched l = launch(*options, env, Readers{}, LaunchCall{.apply = LaunchApply::process, .running = "running the task",
                                                                    .publish = false});  // the task gets GPUAFF_PLAN
  for (const auto& w : l.warnings) say(std::string(prefix) + "warning: " + w);
  if (!l.ok()) {
    say(std::string(prefix) + std::string(l.error->message()));
    end_task(l.exit_code());
  }
  for (const auto& [name, value] : l.env) {
    if (spank_setenv(sp, name.c_str(), value.c_str(), 1) != ESPANK_SUCCESS && name == plan_variable)
      say(std::string(prefix) + "warning: cannot set " + name + " in the task's environment; "
          "'gpuaff doctor --pid PID' will not find the plan");
  }
  return 0;
}

bool active() {
  if (settings.flag_off) return false;
  return settings.flag_given || settings.site_default;
}

}  // namespace

extern "C" {

int slurm_spank_init(spank_t sp, int ac, char** av) {
  try {
    settings = Settings{};
    for (int i = 0; i < ac; ++i) {
      std::string_view arg(av[i] == nullptr ? "" : av[i]);
      auto eq = arg.find('=');
      std::string key(arg.substr(0, eq));
      std::string value(eq == std::string_view::npos ? std::string_view() : arg.substr(eq + 1));
      if (key == "default") {
        if (value == "on") settings.site_default = true;
        else if (value == "off") settings.site_default = false;
        else settings.config_errors.push_back("plugstack.conf: default=" + value + " is not on or off");
      } else if (eq == std::string_view::npos) {
        settings.config_errors.push_back("plugstack.conf: '" + std::string(arg) +
                                         "' is not KEY=VALUE (policy=P, root=DIR, default=on|off, or any option "
                                         "of 'gpuaff exec' as KEY=VALUE)");
      } else if (exec_option(key)) {
        settings.kv.emplace_back(key, value);
      } else {
        std::string hint;
        std::vector<std::string_view> keys{"default"};
        for (const auto& o : launch_options)
          if (o.set != nullptr && (o.commands & for_exec) != 0) keys.push_back(o.key);
        if (std::string_view guess = detail::closest(key, keys); !guess.empty())
          hint = "; did you mean " + std::string(guess) + "?";
        settings.config_errors.push_back("plugstack.conf: unknown option '" + key.substr(0, 40) + "'" + hint +
                                         " (policy=P, root=DIR, default=on|off, or any option of 'gpuaff exec' "
                                         "as KEY=VALUE)");
      }
    }
    spank_context_t context = spank_context();
    if (context == S_CTX_LOCAL || context == S_CTX_REMOTE) {
      if (spank_option_register(sp, &gpuaff_option) != ESPANK_SUCCESS) {
        slurm_error("gpuaff: cannot register the --gpuaff option with Slurm");
        return -1;
      }
    }
    return 0;
  } catch (const std::exception& e) {
    slurm_error("gpuaff: plugin start failed: %s", e.what());
    return -1;
  } catch (...) {
    slurm_error("gpuaff: plugin start failed");
    return -1;
  }
}

/// In srun, under site default=on without --gpuaff: an explicit --cpu-bind
/// that binds conflicts as in option_callback. An optional plugin's error is
/// ignored here, so srun is ended, as srun itself ends on a bad option,
/// before anything is allocated.
int slurm_spank_init_post_opt(spank_t, int, char**) {
  try {
    if (spank_context() != S_CTX_LOCAL || !active() || settings.flag_given) return 0;
    if (auto conflict = cpu_bind_conflict()) {
      slurm_error("%s", conflict->c_str());
      std::exit(1);
    }
    return 0;
  } catch (...) {
    return -1;
  }
}

int slurm_spank_task_init(spank_t sp, int, char**) {
  if (!active()) return 0;
  try {
    return bind_task(sp);
  } catch (const std::exception& e) {
    say("gpuaff: internal error (a bug in gpuaff; please report it): " + std::string(e.what()));
  } catch (...) {
    say("gpuaff: internal error (a bug in gpuaff; please report it)");
  }
  end_task(exit_internal);
}

}  // extern "C"

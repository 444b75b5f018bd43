// SPDX-License-Identifier: Apache-2.0
// gpuaff: bind GPU processes to the right CPUs and NUMA memory.
// This file only wires the command line (CLI11) to the commands (bind.cpp,
// topo.cpp, exec.cpp, record.cpp, doctor.cpp): every flag is registered from
// the option tables (the library's launch_options, cli_options.hpp) and set
// through the library's set_option; policy names and exit codes come from the
// tables they are defined in. The CLI contract is docs/cli.md and
// docs/contract.md sections 3 and 5.

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_options.hpp"
#include "commands.hpp"
#include "gpuaff/detail/suggest.hpp"
#include "exit_codes.hpp"
#include "gpuaff/version.hpp"
#include "help.hpp"
#include "output.hpp"
#include "policies.hpp"

namespace {

using namespace gpuaff::cli;
using gpuaff::LaunchOptions;
using gpuaff::OptionInfo;
using gpuaff::OptionType;

/// What the command line gave for each option of one command, as text; the
/// library's set_option parses and checks the launch options, main() the rest.
struct Given {
  CLI::App* app = nullptr;
  unsigned command = 0;
  std::map<std::string, std::string, std::less<>> text{};
  std::vector<std::string> record_pci{};
  std::vector<std::string> doctor_merge{};

  /// The option was given (a row not written on the command line was not
  /// registered: add_rows).
  bool has(const OptionInfo& o) const {
    auto given = [&](std::string_view name) {
      if (name.empty()) return false;
      const CLI::Option* opt = app->get_option_no_throw(std::string(name));
      return opt != nullptr && opt->count() > 0;
    };
    return given(o.flag) || given(o.negation);
  }
  /// What the flag `name` was last given: "true" when written bare, VALUE for
  /// --name=VALUE; nullopt when it was not given.
  std::optional<std::string> flag_text(std::string_view name) const {
    if (name.empty()) return std::nullopt;
    const CLI::Option* opt = app->get_option_no_throw(std::string(name));
    if (opt == nullptr || opt->count() == 0 || opt->results().empty()) return std::nullopt;
    return opt->results().back();
  }
  /// The option's text: for a flag, "true" or "false" as written (--no-X=true
  /// is "false"), or the word written after '=' when it is neither (see
  /// flag_values, which refuses it).
  std::string value(const OptionInfo& o) const {
    if (o.type == OptionType::flag) {
      if (auto t = flag_text(o.flag)) return *t;
      auto t = flag_text(o.negation);
      if (!t) return "true";
      return *t == "true" ? "false" : *t == "false" ? "true" : *t;
    }
    auto it = text.find(o.key);
    return it == text.end() ? std::string() : it->second;
  }
};

/// Registers one option row on `g.app`.
void add_row(Given& g, const OptionInfo& o) {
  CLI::App& app = *g.app;
  std::string help(o.help);
  if (o.key == "policy") help += ": " + gpuaff::cli::policies_help();
  if (o.type == OptionType::flag) {
    auto* flag = app.add_flag(std::string(o.flag))->description(help);
    if (!o.negation.empty()) {
      auto* negation = app.add_flag(std::string(o.negation))->description("the opposite of " + std::string(o.flag));
      flag->excludes(negation);
      negation->excludes(flag);
    }
    return;
  }
  CLI::Option* opt = nullptr;
  if (g.command == gpuaff::for_record && o.key == "pci") {
    opt = app.add_option(std::string(o.flag), g.record_pci, help);
  } else if (g.command == gpuaff::for_doctor && o.key == "merge") {
    opt = app.add_option(std::string(o.flag), g.doctor_merge, help);
  } else {
    std::string& slot = g.text[std::string(o.key)];
    opt = app.add_option_function<std::string>(std::string(o.flag), [&slot](const std::string& v) { slot = v; }, help);
  }
  std::string type_name(o.value_name);
  if (g.command == gpuaff::for_bind && o.key == "gpu") type_name = "N[,N...]|all";
  opt->type_name(type_name);
  if (std::string_view d = option_default(o, g.command); !d.empty()) opt->default_str(std::string(d));
}

/// Registers the rows of both tables that belong to `command` and are
/// written in `words` (the command line: a row is registered when its flag or
/// its negation is a word, or a word up to its '='), or every row when
/// `words` is null (--help). The parser then compares each option it adds
/// with every option already added, and each word with every option: with
/// the forty rows of `bind` that was half of a whole `gpuaff bind` process's
/// instructions (benchmarks/README.md, row S). What a row not registered
/// would have said is said from the tables: table_flags().
Given add_rows(CLI::App& app, unsigned command, const std::vector<std::string_view>* words) {
  Given g{.app = &app, .command = command};
  auto written = [&](const OptionInfo& o) {
    if (words == nullptr) return true;
    for (std::string_view w : *words) {
      std::string_view name = w.substr(0, w.find('='));
      if ((!o.flag.empty() && name == o.flag) || (!o.negation.empty() && name == o.negation)) return true;
    }
    return false;
  };
  for (const auto& o : gpuaff::launch_options)
    if ((o.commands & command) != 0 && !o.flag.empty() && written(o)) add_row(g, o);
  for (const auto& o : cli_options)
    if ((o.commands & command) != 0 && written(o)) add_row(g, o);
  return g;
}

/// Every flag (and negation) `command` takes, from the tables, and --help:
/// for "did you mean" and for the checks made before parsing, which must not
/// depend on which rows add_rows() registered.
std::vector<std::string> table_flags(unsigned command) {
  std::vector<std::string> out;
  auto add = [&](const OptionInfo& o) {
    if ((o.commands & command) == 0) return;
    if (!o.flag.empty()) out.emplace_back(o.flag);
    if (!o.negation.empty()) out.emplace_back(o.negation);
  };
  for (const auto& o : gpuaff::launch_options) add(o);
  for (const auto& o : cli_options) add(o);
  out.emplace_back("--help");
  return out;
}

/// The bit of the command named `name`; 0 for none.
unsigned command_bit(std::string_view name) {
  for (const CommandInfo& c : commands)
    if (c.name == name) return c.bit;
  return 0;
}

/// The launch options given on the command line, set through the library.
/// Errors: those of set_option, spelled as flags by the caller.
gpuaff::Result<void> fill(const Given& g, LaunchOptions& options) {
  for (const auto& o : gpuaff::launch_options)
    if ((o.commands & g.command) != 0 && !o.flag.empty() && g.has(o))
      GPUAFF_TRY_VOID(gpuaff::set_option(options, o.key, g.value(o)));
  return {};
}

/// The CLI-only option `key` of `g`, as text; nullopt when not given.
std::optional<std::string> cli_value(const Given& g, std::string_view key) {
  for (const auto& o : cli_options)
    if (o.key == key && (o.commands & g.command) != 0 && g.has(o)) return g.value(o);
  return std::nullopt;
}

/// Sets `target` from the CLI-only choice option `key` when it was given.
/// Errors: Errc::invalid_argument for a word that is not one of `choices`.
template <class E, std::size_t N>
gpuaff::Result<void> take_choice(const Given& g, std::string_view key, const std::array<gpuaff::Choice<E>, N>& choices,
                                 E& target) {
  if (auto text = cli_value(g, key)) {
    GPUAFF_TRY(target, gpuaff::parse_choice(key, *text, choices));
  }
  return {};
}

/// The parser's words for two mistakes, said as what to do: an option given
/// twice ("--gpu: At Most 1 required but received 2") and one without its
/// value ("--gpu: 1 required N[,N...]|all missing", from `--gpu=`). Other
/// messages are kept.
std::string usage_text(const std::string& text) {
  std::size_t colon = text.find(": ");
  if (colon == std::string::npos || text.rfind("--", 0) != 0) return text;
  std::string name = text.substr(0, colon);
  std::string rest = text.substr(colon + 2);
  const std::string twice = "At Most 1 required but received ";
  if (rest.rfind(twice, 0) == 0) return name + " is given " + rest.substr(twice.size()) + " times; give it once";
  const std::string needs = "1 required ", missing = " missing";
  if (rest.rfind(needs, 0) == 0 && rest.size() > needs.size() + missing.size() &&
      rest.compare(rest.size() - missing.size(), missing.size(), missing) == 0)
    return name + " needs a value: " + rest.substr(needs.size(), rest.size() - needs.size() - missing.size());
  return text;
}

/// "gpuaff: <what>; see 'gpuaff <command> --help'" for a parse error.
int usage_error(const CLI::App& app, const CLI::Error& e) {
  std::string where = "gpuaff";
  for (const CLI::App* sub : app.get_subcommands()) where += " " + sub->get_name();
  std::string line = "gpuaff: " + usage_text(one_line(e.what())) + "; see '" + where + " --help'\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  return exit_usage;
}

/// "--gpu=" with nothing after '=' (before the '--' that ends gpuaff's own
/// options, and only for a flag of the command): the parser would take the
/// next word for its value and report that word's neighbour instead, so it is
/// said here, by name. Returns exit_usage after printing, 0 when there is none.
int empty_values(const CLI::App& app, int argc, char** argv) {
  for (int i = 2; i < argc && std::string_view(argv[i]) != "--"; ++i) {
    std::string_view a = argv[i];
    std::size_t eq = a.find('=');
    if (a.rfind("--", 0) != 0 || eq == std::string_view::npos || eq + 1 != a.size()) continue;
    std::string name(a.substr(0, eq));
    for (const CLI::App* sub : app.get_subcommands({})) {
      if (!sub->check_name(argv[1])) continue;
      std::vector<std::string> flags = table_flags(command_bit(sub->get_name()));
      if (std::find(flags.begin(), flags.end(), name) == flags.end()) continue;
      print_line(stderr, "gpuaff: " + name + "= gives " + name + " no value; write " + name + " VALUE or " + name +
                             "=VALUE; see 'gpuaff " + sub->get_name() + " --help'");
      return exit_usage;
    }
  }
  return 0;
}

/// "--force=VALUE" for a flag: only true and false say what is meant (the
/// parser would take any word, "--force=no" included, as the flag given).
/// Returns exit_usage after printing, 0 when every flag's value is one of them.
int flag_values(const Given& g) {
  auto check = [&](const OptionInfo& o) {
    for (std::string_view name : {o.flag, o.negation}) {
      auto t = g.flag_text(name);
      if (!t || *t == "true" || *t == "false") continue;
      std::string n(name);
      print_line(stderr, "gpuaff: " + n + "=" + t->substr(0, 40) + ": a flag takes true or false; write " + n + ", " +
                             n + "=true or " + n + "=false; see 'gpuaff " + g.app->get_name() + " --help'");
      return false;
    }
    return true;
  };
  for (const auto& o : gpuaff::launch_options)
    if ((o.commands & g.command) != 0 && o.type == OptionType::flag && !o.flag.empty() && !check(o)) return exit_usage;
  for (const auto& o : cli_options)
    if ((o.commands & g.command) != 0 && o.type == OptionType::flag && !check(o)) return exit_usage;
  return 0;
}

/// "--help=VALUE" and "--version=VALUE": the parser answers both whatever
/// VALUE says ("--help=false" printed the help). Returns exit_usage after
/// printing, 0 when there is none.
int help_values(int argc, char** argv) {
  for (int i = 1; i < argc && std::string_view(argv[i]) != "--"; ++i) {
    std::string_view a = argv[i];
    for (std::string_view name : {"--help", "--version"}) {
      if (a.size() <= name.size() || a.substr(0, name.size()) != name || a[name.size()] != '=') continue;
      print_line(stderr, "gpuaff: " + std::string(a.substr(0, 60)) + ": " + std::string(name) +
                             " takes no value; write " + std::string(name) + " alone");
      return exit_usage;
    }
  }
  return 0;
}

/// `gpuaff exec ... -- COMMAND`: every word before the '--' that looks like an
/// option is gpuaff's, so one exec does not know is a typo to name ("did you
/// mean --policy?"), never a word of COMMAND (the parser would take the word
/// after it as COMMAND and say something else). Returns exit_usage after
/// printing, 0 when there is none or no '--'.
int exec_unknown_options(const CLI::App& exec, int argc, char** argv) {
  if (argc < 2 || std::string_view(argv[1]) != "exec") return 0;
  int end = 2;
  while (end < argc && std::string_view(argv[end]) != "--") ++end;
  if (end == argc) return 0;
  std::vector<std::string> flags = table_flags(command_bit(exec.get_name()));
  std::vector<std::string_view> views(flags.begin(), flags.end());
  for (int i = 2; i < end; ++i) {
    std::string_view a = argv[i];
    if (a.rfind("--", 0) != 0) continue;
    std::string_view name = a.substr(0, a.find('='));
    if (std::find(views.begin(), views.end(), name) != views.end()) continue;
    std::string_view guess = gpuaff::detail::closest(name, views);
    print_line(stderr, "gpuaff: unknown option '" + std::string(name.substr(0, 60)) + "' before '--'" +
                           (guess.empty() ? std::string() : "; did you mean " + std::string(guess) + "?") +
                           " (gpuaff's own options come before '--', the command's after it; see 'gpuaff exec --help')");
    return exit_usage;
  }
  return 0;
}

/// The error for arguments `app` did not take: an unknown flag (with the
/// closest known one), or, for exec, an option of COMMAND written without the
/// '--' that ends gpuaff's own options.
int unexpected_arguments(const CLI::App& app, const std::vector<std::string>& extra,
                         const std::vector<std::string>& command) {
  const std::string& first = extra.front();
  std::string where = "gpuaff " + app.get_name();
  std::string line;
  if (app.get_name() == "exec" && !command.empty()) {
    line = "'" + first + "' follows the command '" + command.front() +
           "' but was read as gpuaff's own option; end gpuaff's options with '--': " + where + " [options] -- " +
           command.front() + " " + first + " ...";
  } else if (first.rfind("--", 0) == 0) {
    std::string name = first.substr(0, first.find('='));
    std::vector<std::string> flags = table_flags(command_bit(app.get_name()));
    std::vector<std::string_view> views(flags.begin(), flags.end());
    std::string_view guess = gpuaff::detail::closest(name, views);
    line = "unknown option '" + name + "'" +
           (guess.empty() ? "; see '" + where + " --help'"
                          : "; did you mean " + std::string(guess) + "? (see '" + where + " --help')");
  } else {
    line = "unexpected argument '" + first + "'; see '" + where + " --help'";
  }
  print_line(stderr, "gpuaff: " + line);
  return exit_usage;
}

/// "bind, topo, exec or record": the commands, for messages.
std::string command_names(const CLI::App& app) {
  std::vector<const CLI::App*> subs = app.get_subcommands({});
  std::string out;
  for (std::size_t i = 0; i < subs.size(); ++i)
    out += (i == 0 ? "" : i + 1 == subs.size() ? " or " : ", ") + subs[i]->get_name();
  return out;
}

/// `gpuaff bind`: the launch options and --format, then run_bind.
int bind_command(const Given& given) {
  BindArgs args;
  if (auto ok = fill(given, args.options); !ok) return report_error(ok.error());
  if (auto ok = take_choice(given, "format", gpuaff::bind_format_choices, args.format); !ok)
    return report_error(ok.error());
  return run_bind(args);
}

/// `gpuaff topo`: the launch options, --format and --color, then run_topo.
int topo_command(const Given& given) {
  TopoArgs args;
  if (auto ok = fill(given, args.options); !ok) return report_error(ok.error());
  // topo draws every part of --ranks-per-gpu N: no part to name
  gpuaff::LaunchOptions checked = args.options;
  checked.ranks_per_gpu = 0;
  if (auto ok = gpuaff::check_options(checked); !ok) return report_error(ok.error());
  if (auto ok = take_choice(given, "format", gpuaff::topo_format_choices, args.format); !ok)
    return report_error(ok.error());
  if (auto ok = take_choice(given, "color", gpuaff::color_choices, args.color); !ok) return report_error(ok.error());
  args.irqs = cli_value(given, "irqs") == "true";
  return run_topo(args);
}

/// `gpuaff exec`: the launch options, --dry-run and --verbose, then run_exec
/// with COMMAND (already in `args`, registered before parsing).
int exec_command(const Given& given, ExecArgs& args) {
  if (auto ok = fill(given, args.options); !ok) return report_error(ok.error());
  args.dry_run = cli_value(given, "dry_run") == "true";
  args.verbose = cli_value(given, "verbose") == "true";
  return run_exec(args);
}

/// `gpuaff record`: --out (required), --root, --pci and --force, then run_record.
int record_command(const Given& given) {
  RecordArgs args;
  auto out = cli_value(given, "out");
  if (!out) return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, "record needs --out DIR or --out FILE.tar; see 'gpuaff record --help'"));
  if (out->empty()) return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, "--out '' is not a path; name a directory or FILE.tar"));
  args.out = *out;
  if (auto root = cli_value(given, "root")) {
    if (root->empty()) return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, "--root '' is not a path; leave it out to record this machine"));
    args.root = *root;
  }
  args.pci = given.record_pci;
  args.force = cli_value(given, "force") == "true";
  return run_record(args);
}

/// `gpuaff doctor`: exactly one of --pid, --all and --merge says what to
/// check; then --format and --min-local, then run_doctor.
int doctor_command(const Given& given) {
  DoctorArgs args;
  if (auto ok = fill(given, args.options); !ok) return report_error(ok.error());
  auto pid = cli_value(given, "pid");
  args.all = cli_value(given, "all") == "true";
  args.merge = given.doctor_merge;
  args.watch = cli_value(given, "watch") == "true";
  args.nics = cli_value(given, "nics") == "true";
  // --watch watches what --all checks: with --all it says the same. --nics is
  // a mode of its own, or one more check of each --watch interval.
  int modes = (pid ? 1 : 0) + (args.all || args.watch ? 1 : 0) + (args.merge.empty() ? 0 : 1) +
              (args.nics && !args.watch ? 1 : 0);
  if (modes != 1)
    return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, modes == 0 ? "doctor needs --pid PID, --all, --watch, --merge FILE or --nics; see 'gpuaff doctor --help'"
                                                                                     : "--pid, --all (or --watch), --merge and --nics each say what to check; give one (--nics may go with --watch)"));
  for (std::string_view key : {"count", "rebind"})
    if (!args.watch && cli_value(given, key))
      return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, "--", key,
                                             " is for --watch (a check each interval); add --watch or leave it out"));
  if (auto iv = cli_value(given, "interval")) {
    char* end = nullptr;
    double s = std::strtod(iv->c_str(), &end);
    if (iv->empty() || end != iv->c_str() + iv->size() || !(s >= 0.1 && s <= 86400.0))
      return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, "--interval '", std::string_view(*iv).substr(0, 40),
                                             "' is not a duration in seconds from 0.1 to 86400 (such as 10 or 0.5)"));
    if (!args.watch && !args.nics)
      return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument,
                                             "--interval is the time between two checks of --watch or two samples of --nics: add one of them or leave it out"));
    args.interval = s;
  }
  if (auto c = cli_value(given, "count")) {
    long long n = gpuaff::detail::parse_count(*c);
    if (n <= 0)
      return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, "--count '", std::string_view(*c).substr(0, 40),
                                             "' is not a number of checks (a positive integer)"));
    args.count = n;
  }
  if (auto job = cli_value(given, "job")) {
    if (!args.all && !args.watch && !args.nics)
      return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument,
                                             "--job picks the processes --all, --watch or --nics check; --pid names "
                                             "one and --merge reads reports: leave --job out"));
    // A job id as the schedulers write it: digits, and for PBS a server name
    // and an array index ("1234[5].pbs01"); never blank or a list.
    bool ok = !job->empty() && job->size() <= 128;
    for (char c : *job)
      ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '-' ||
                  c == '_' || c == '[' || c == ']');
    if (!ok)
      return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, "--job '", std::string_view(*job).substr(0, 40),
                                             "' is not a job id (the SLURM_JOB_ID, PBS_JOBID or LSB_JOBID of the "
                                             "job's processes, such as 4242)"));
    args.job = *job;
  }
  args.rebind = cli_value(given, "rebind") == "true";
  args.irqs = cli_value(given, "irqs") == "true";
  args.steer_irqs = cli_value(given, "steer_irqs") == "true";
  if (args.steer_irqs && (!args.irqs || !pid))
    return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, "--steer-irqs applies what --irqs suggests for one process: add --irqs and --pid PID"));
  if (args.irqs && !pid)
    return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, "--irqs looks at one process's devices: use it with --pid PID (or topo --irqs)"));
  if (auto c = cli_value(given, "counters")) {
    if (!args.nics)
      return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, "--counters replays NIC counters: add --nics"));
    if (args.watch)
      return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, "--counters replays a recorded sequence once; --watch samples this machine: leave one out"));
    args.counters = *c;
  }
  if (pid) {
    int p = gpuaff::detail::parse_count(*pid);
    if (p <= 0) return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, "--pid '", std::string_view(*pid).substr(0, 40), "' is not a process id (a positive integer)"));
    args.pid = p;
  }
  if (auto ok = take_choice(given, "format", gpuaff::doctor_format_choices, args.format); !ok)
    return report_error(ok.error());
  if (args.irqs && args.format == gpuaff::DoctorFormat::prometheus)
    return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, "--irqs prints interrupt routes in text or JSON: "
                                           "use --format text or json"));
  if (auto t = cli_value(given, "textfile")) {
    if (args.format != gpuaff::DoctorFormat::prometheus)
      return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, "--textfile is for node_exporter's "
                                             "textfile collector: add --format prometheus"));
    args.textfile = *t;
  }
  if (auto m = cli_value(given, "min_local")) {
    char* end = nullptr;
    double f = std::strtod(m->c_str(), &end);
    if (m->empty() || end != m->c_str() + m->size() || !(f >= 0.0 && f <= 1.0))
      return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, "--min-local '", std::string_view(*m).substr(0, 40), "' is not a fraction between 0 and 1"));
    args.min_local = f;
  }
  return run_doctor(args);
}

/// `gpuaff probe`: --format, --size, --seconds, --threads, --gpu and --gpu-nodes, then run_probe.
int probe_command(const Given& given) {
  ProbeArgs args;
  auto usage = [](const std::string& what) {
    return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, what));
  };
  if (auto ok = take_choice(given, "format", gpuaff::probe_format_choices, args.format); !ok)
    return report_error(ok.error());
  if (auto s = cli_value(given, "size")) {
    int n = gpuaff::detail::parse_count(*s);
    if (n <= 0 || n > 1024 * 1024) return usage("--size '" + s->substr(0, 40) + "' is not a size in MiB (1 to 1048576)");
    args.size_mib = static_cast<std::size_t>(n);
  }
  if (auto s = cli_value(given, "seconds")) {
    char* end = nullptr;
    double f = std::strtod(s->c_str(), &end);
    if (s->empty() || end != s->c_str() + s->size() || !(f > 0.0 && f <= 60.0))
      return usage("--seconds '" + s->substr(0, 40) + "' is not a duration in seconds (above 0, at most 60)");
    args.seconds = f;
  }
  if (auto s = cli_value(given, "threads")) {
    int n = gpuaff::detail::parse_count(*s);
    if (n <= 0 || n > 1024) return usage("--threads '" + s->substr(0, 40) + "' is not a thread count (1 to 1024)");
    args.threads = n;
  }
  if (auto s = cli_value(given, "probe_gpu")) {
    std::string_view rest = *s;
    while (true) {
      std::string_view word = rest.substr(0, rest.find(','));
      int n = gpuaff::detail::parse_count(word);
      if (n < 0 || word.empty())
        return usage("--gpu '" + s->substr(0, 40) + "' is not a list of GPU indexes (0,1,...)");
      args.gpus.push_back(n);
      if (rest.find(',') == std::string_view::npos) break;
      rest = rest.substr(rest.find(',') + 1);
    }
  }
  if (auto s = cli_value(given, "gpu_nodes")) {
    if (s->empty()) return usage("--gpu-nodes '' is not a path; name the file to write");
    if (args.gpus.empty()) return usage("--gpu-nodes FILE writes what --gpu measured: add --gpu N");
    args.gpu_nodes_out = *s;
  }
  return run_probe(args);
}

/// The usage mistakes said before the parser runs, which would otherwise
/// report them as something else: no command or an unknown one, a flag with
/// an empty '=', a value given to --help or --version, exec's unknown options
/// before '--'. Returns exit_usage after printing, 0 when there is none.
int early_usage_error(const CLI::App& app, const CLI::App& exec, int argc, char** argv) {
  auto is_command = [&](const std::string& name) {
    for (const CLI::App* sub : app.get_subcommands({}))
      if (sub->check_name(name)) return true;
    return false;
  };
  if (argc == 1) {
    std::string line = "gpuaff: a command is needed: " + command_names(app) + "; see 'gpuaff --help'\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    return exit_usage;
  }
  if (argv[1][0] != '-' && !is_command(argv[1])) {
    std::vector<std::string_view> names;
    for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    std::string_view guess = gpuaff::detail::closest(argv[1], names);
    std::string line = "gpuaff: " + one_line(std::string("unknown command '") + argv[1] + "'; " +
                                             (guess.empty() ? std::string() : "did you mean " + std::string(guess) + "? ") +
                                             "use " + command_names(app) + " (see 'gpuaff --help')") + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    return exit_usage;
  }
  if (int rc = empty_values(app, argc, argv); rc != 0) return rc;
  if (int rc = help_values(argc, argv); rc != 0) return rc;
  return exec_unknown_options(exec, argc, argv);
}

}  // namespace

int main(int argc, char** argv) try {
  // `gpuaff --version` answers before the command line's parser is built: it is
  // what an image build or a health check runs to see that the binary works.
  if (argc == 2 && std::string_view(argv[1]) == "--version") {
    return write_result(std::string(gpuaff::cli::program_name()) + " " + gpuaff::version_string + "\n");
  }
  CLI::App app{"gpuaff binds GPU processes to the CPUs and NUMA memory closest to their GPU.", "gpuaff"};
  app.set_version_flag("--version", std::string(gpuaff::cli::program_name()) + " " + gpuaff::version_string);
  app.require_subcommand(1);
  // Every --help is written from the tables (help.hpp), wrapped to the
  // terminal; set before the commands are added, which take it from here.
  app.formatter_fn([](const CLI::App* a, const std::string&, CLI::AppFormatMode) {
    return help_text(a->get_parent() == nullptr ? std::string_view() : std::string_view(a->get_name()), help_width());
  });

  // Only the command that was named gets its options, and of those only the
  // ones written on the command line (every one with --help): registering
  // options is most of the parser's start-up, on every run of every rank.
  const std::string_view named = argc > 1 ? std::string_view(argv[1]) : std::string_view();
  std::vector<std::string_view> words;
  bool help = false;
  for (int i = 2; i < argc && std::string_view(argv[i]) != "--"; ++i) {
    std::string_view w = argv[i];
    if (w.rfind("--", 0) == 0) words.push_back(w);
    help = help || w == "-h" || w.substr(0, w.find('=')) == "--help";
  }
  auto command = [&](std::string_view name) {
    for (const CommandInfo& c : commands) {
      if (c.name != name) continue;
      CLI::App* sub = app.add_subcommand(std::string(c.name), std::string(c.summary));
      return c.name == named ? add_rows(*sub, c.bit, help ? nullptr : &words) : Given{.app = sub, .command = c.bit};
    }
    throw std::logic_error("no command " + std::string(name) + " in cli_options.hpp");
  };
  Given bind_given = command("bind");
  Given topo_given = command("topo");
  Given exec_given = command("exec");
  Given record_given = command("record");
  Given doctor_given = command("doctor");
  Given probe_given = command("probe");
  CLI::App* bind = bind_given.app;
  CLI::App* topo = topo_given.app;
  CLI::App* exec = exec_given.app;
  CLI::App* record = record_given.app;
  CLI::App* doctor = doctor_given.app;
  CLI::App* probe = probe_given.app;
  ExecArgs exec_args;
  exec->add_option("command", exec_args.command, "the command and its arguments, after --")->type_name("COMMAND...");

  if (int rc = early_usage_error(app, *exec, argc, argv); rc != 0) return rc;
  // Arguments no option takes are checked below, to say what was meant.
  for (CLI::App* sub : {bind, topo, exec, record, doctor, probe}) sub->allow_extras();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help, --version (CLI::Success): on stdout, exit 0, unless stdout
    // cannot take it, which write_result says as it does for any result.
    if (e.get_exit_code() != 0) return usage_error(app, e);
    std::ostringstream out, err;
    int rc = app.exit(e, out, err);
    if (std::string text = err.str(); !text.empty()) std::fwrite(text.data(), 1, text.size(), stderr);
    return write_result(out.str(), rc);
  }

  for (CLI::App* sub : {bind, topo, exec, record, doctor, probe}) {
    if (!sub->parsed()) continue;
    std::vector<std::string> extra;
    for (const std::string& a : sub->remaining())
      if (a != "--") extra.push_back(a);  // the separator before exec's COMMAND
    if (!extra.empty()) return unexpected_arguments(*sub, extra, exec_args.command);
  }
  for (const Given* g : {&bind_given, &topo_given, &exec_given, &record_given, &doctor_given, &probe_given})
    if (g->app->parsed())
      if (int rc = flag_values(*g); rc != 0) return rc;
  if (bind->parsed()) return bind_command(bind_given);
  if (topo->parsed()) return topo_command(topo_given);
  if (exec->parsed()) return exec_command(exec_given, exec_args);
  if (record->parsed()) return record_command(record_given);
  if (doctor->parsed()) return doctor_command(doctor_given);
  if (probe->parsed()) return probe_command(probe_given);
  return exit_usage;
} catch (const std::exception& e) {
  std::string line = "gpuaff: internal error: " + one_line(e.what()) + "; please report this with 'gpuaff topo' output\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  return exit_internal;
}

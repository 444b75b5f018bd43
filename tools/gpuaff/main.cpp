// SPDX-License-Identifier: Apache-2.0
// gpuaff: bind GPU processes to the right CPUs and NUMA memory.
// This file only wires the command line (command_line.hpp, which reads it
// against the option tables: the library's launch_options and
// cli_options.hpp) to the commands (bind.cpp, topo.cpp, exec.cpp, record.cpp,
// doctor.cpp, probe.cpp): launch options are set through the library's
// set_option; policy names and exit codes come from the tables they are
// defined in. The CLI contract is docs/cli.md and docs/contract.md sections 3
// and 5.

#include <array>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cli_options.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "exit_codes.hpp"
#include "gpuaff/version.hpp"
#include "help.hpp"
#include "output.hpp"
#include "policies.hpp"

namespace {

using namespace gpuaff::cli;
using gpuaff::LaunchOptions;

/// The launch options given on the command line, set through the library.
/// Errors: those of set_option, spelled as flags by the caller.
gpuaff::Result<void> fill(const CommandLine& g, LaunchOptions& options) {
  for (const auto& o : gpuaff::launch_options)
    if ((o.commands & g.command->bit) != 0 && !o.flag.empty())
      if (auto text = g.last(o.key)) GPUAFF_TRY_VOID(gpuaff::set_option(options, o.key, *text));
  return {};
}

/// The CLI-only option `key` of `g`, as text; nullopt when not given.
std::optional<std::string> cli_value(const CommandLine& g, std::string_view key) {
  for (const auto& o : cli_options)
    if (o.key == key && (o.commands & g.command->bit) != 0) return g.last(key);
  return std::nullopt;
}

/// Sets `target` from the CLI-only choice option `key` when it was given.
/// Errors: Errc::invalid_argument for a word that is not one of `choices`.
template <class E, std::size_t N>
gpuaff::Result<void> take_choice(const CommandLine& g, std::string_view key, const std::array<gpuaff::Choice<E>, N>& choices,
                                 E& target) {
  if (auto text = cli_value(g, key)) {
    GPUAFF_TRY(target, gpuaff::parse_choice(key, *text, choices));
  }
  return {};
}

/// `gpuaff bind`: the launch options and --format, then run_bind.
int bind_command(const CommandLine& given) {
  BindArgs args;
  if (auto ok = fill(given, args.options); !ok) return report_error(ok.error());
  if (auto ok = take_choice(given, "format", gpuaff::bind_format_choices, args.format); !ok)
    return report_error(ok.error());
  return run_bind(args);
}

/// `gpuaff topo`: the launch options, --format and --color, then run_topo.
int topo_command(const CommandLine& given) {
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
/// with COMMAND (the words after `--`).
int exec_command(const CommandLine& given) {
  ExecArgs args;
  args.command = given.words;
  if (auto ok = fill(given, args.options); !ok) return report_error(ok.error());
  args.dry_run = cli_value(given, "dry_run") == "true";
  args.verbose = cli_value(given, "verbose") == "true";
  return run_exec(args);
}

/// `gpuaff record`: --out (required), --root, --pci and --force, then run_record.
int record_command(const CommandLine& given) {
  RecordArgs args;
  auto out = cli_value(given, "out");
  if (!out) return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, "record needs --out DIR or --out FILE.tar; see 'gpuaff record --help'"));
  if (out->empty()) return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, "--out '' is not a path; name a directory or FILE.tar"));
  args.out = *out;
  if (auto root = cli_value(given, "root")) {
    if (root->empty()) return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument, "--root '' is not a path; leave it out to record this machine"));
    args.root = *root;
  }
  args.pci = given.all("pci");
  args.force = cli_value(given, "force") == "true";
  return run_record(args);
}

/// `gpuaff doctor`: exactly one of --pid, --all and --merge says what to
/// check; then --format and --min-local, then run_doctor.
int doctor_command(const CommandLine& given) {
  DoctorArgs args;
  if (auto ok = fill(given, args.options); !ok) return report_error(ok.error());
  auto pid = cli_value(given, "pid");
  args.all = cli_value(given, "all") == "true";
  args.merge = given.all("merge");
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
int probe_command(const CommandLine& given) {
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

}  // namespace

int main(int argc, char** argv) try {
  std::vector<std::string_view> args(argv + (argc > 0 ? 1 : argc), argv + argc);
  const CommandLine line = read_command_line(args);
  if (!line.error.empty()) {
    print_line(stderr, "gpuaff: " + line.error);
    return exit_usage;
  }
  // --help and --version: on stdout, exit 0, unless stdout cannot take it,
  // which write_result says as it does for any result.
  if (line.version) return write_result(std::string(program_name()) + " " + gpuaff::version_string + "\n");
  if (line.help)
    return write_result(help_text(line.command == nullptr ? std::string_view() : line.command->name, help_width()));
  switch (line.command->bit) {
    case gpuaff::for_bind: return bind_command(line);
    case gpuaff::for_topo: return topo_command(line);
    case gpuaff::for_exec: return exec_command(line);
    case gpuaff::for_record: return record_command(line);
    case gpuaff::for_doctor: return doctor_command(line);
    case gpuaff::for_probe: return probe_command(line);
    default: break;
  }
  throw std::logic_error("no command for " + std::string(line.command->name));
} catch (const std::exception& e) {
  std::string line = "gpuaff: internal error: " + one_line(e.what()) + "; please report this with 'gpuaff topo' output\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  return exit_internal;
}

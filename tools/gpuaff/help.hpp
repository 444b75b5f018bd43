// SPDX-License-Identifier: Apache-2.0
#pragma once
// `gpuaff --help` and `gpuaff COMMAND --help`, written from the same tables
// the command line is registered from (the option tables, the commands, the
// policy registry, the exit codes) and wrapped to the terminal (help_width:
// 80 columns when stdout is not one). Each command lists only what it
// takes: gpuaff leaves out the options only gpuaff-hwloc reads, and each
// command the exit codes it can end with.

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "cli_options.hpp"
#include "commands.hpp"  // program_name
#include "exit_codes.hpp"
#include "gpuaff/policy/dispatch.hpp"
#include "gpuaff/version.hpp"
#include "wrap.hpp"

namespace gpuaff::cli {

/// Options only gpuaff-hwloc reads: gpuaff takes --source sysfs (its only
/// reader) and answers the rest with an error naming gpuaff-hwloc, so its
/// help does not offer them.
constexpr bool hwloc_only(const OptionInfo& o) { return o.key == "source" || o.key == "hwloc_xml"; }

/// A command's usage line and examples, for its --help.
struct Example {
  std::string_view what;
  std::string_view command;
};
struct CommandHelp {
  std::string_view name;
  std::string_view usage;
  std::array<Example, 7> examples;
  std::string_view notes;
};

inline constexpr std::array<CommandHelp, 6> command_help{{
    {"",
     "COMMAND [OPTIONS]",
     {{{"this machine: GPUs, nodes, every policy's binding", "gpuaff topo"},
       {"the CPUs for GPU 0, one line", "gpuaff bind --gpu 0 --policy exclusive"},
       {"every rank of torchrun on its GPU's CPUs",
        "torchrun --nproc-per-node 8 --no-python gpuaff exec --local-rank -- python3 train.py"},
       {"record this machine for a bug report", "gpuaff record --out /tmp/machine.tar"}}},
     "Run 'gpuaff COMMAND --help' for a command's options."},
    {"bind",
     "bind [OPTIONS] (--gpu N[,N...]|all | --pci BDF)",
     {{{"the CPUs of GPU 0's NUMA node", "gpuaff bind --gpu 0"},
       {"GPU 3's share of its node's cores", "gpuaff bind --gpu 3 --policy exclusive"},
       {"numactl's --physcpubind=...", "gpuaff bind --pci 0000:17:00.0 --format numactl"},
       {"every GPU, one line each", "gpuaff bind --gpu all"},
       {"an NVIDIA mode, one thread per core, 4 processes",
        "gpuaff bind --gpu 1 --policy unique-contiguous --smt one --nproc 4"},
       {"a recorded machine (from the source tree)",
        "gpuaff bind --topology fixtures/dgx-h100.json --gpu 7 --format json"},
       {"export GPU 2's NIC set (UCX, NVSHMEM)", "eval \"$(gpuaff bind --gpu 2 --nic-env --format env)\""}}},
     ""},
    {"topo",
     "topo [OPTIONS]",
     {{{"this machine", "gpuaff topo"},
       {"a recorded machine (from the source tree)", "gpuaff topo --root fixtures/p4d.24xlarge.tar.xz"},
       {"a root written by gpuaff record --out /tmp/node17", "gpuaff topo --root /tmp/node17"},
       {"the picture of another policy, for 4 processes", "gpuaff topo --policy unique-contiguous --nproc 4"},
       {"the machine as JSON, for gpuaff bind --topology machine.json",
        "gpuaff topo --format json > machine.json"}}},
     ""},
    {"exec",
     "exec [OPTIONS] (--gpu N | --pci BDF | --local-rank) -- COMMAND [ARGS...]",
     {{{"GPU 0's CPUs for one command", "gpuaff exec --gpu 0 -- ./trainer --epochs 3"},
       {"torchrun", "torchrun --nproc-per-node 8 --no-python gpuaff exec --local-rank --policy exclusive -- python3 train.py"},
       {"Slurm", "srun --ntasks-per-node 8 --cpu-bind=none gpuaff exec --local-rank -- ./trainer"},
       {"Open MPI", "mpirun -np 8 --bind-to none gpuaff exec --local-rank --policy core-complex -- ./trainer"},
       {"Open MPI's own binding left in place, the cgroup's CPUs drawn from",
        "mpirun -np 8 gpuaff exec --local-rank --baseline cgroup -- ./trainer"},
       {"show the plan, run nothing", "gpuaff exec --gpu 0 --dry-run -- ./trainer"}}},
     "COMMAND is run with execvp (PATH is searched; no shell, no temporary files). It finds the applied plan in "
     "GPUAFF_PLAN, which gpuaff doctor --pid checks."},
    {"record",
     "record --out DIR|FILE.tar [OPTIONS]",
     {{{"this machine into a directory", "gpuaff record --out /tmp/node17"},
       {"replay it anywhere", "gpuaff topo --root /tmp/node17"},
       {"one file for a bug report", "gpuaff record --out node17.tar"},
       {"replay it as it is (never unpacked; xz or gzip compressed too)", "gpuaff topo --root node17.tar"}}},
     ""},
    {"doctor",
     "doctor (--pid PID | --all | --merge FILE...) [OPTIONS]",
     {{{"a process against the plan gpuaff exec left in its GPUAFF_PLAN", "gpuaff doctor --pid 4242"},
       {"a process against a plan named here", "gpuaff doctor --pid 4242 --gpu 3 --policy exclusive --format json"},
       {"every planned process of this machine, for node_exporter",
        "gpuaff doctor --all --format prometheus --textfile /var/lib/node_exporter/gpuaff.prom"}}},
     ""},
}};

/// Whether `command` (an OptionCommand bit; 0 for gpuaff itself) can end with `e`.
constexpr bool returns(unsigned command, const ExitCodeMeaning& e) {
  return command == 0 || (e.commands & command) != 0;
}

/// A command line of an example, broken with " \" where it is wider than
/// the line (never inside a quoted word), so that it pastes as it is.
inline std::string example_command(std::string_view command, std::size_t width) {
  std::vector<std::string> words;
  bool quoted = false;
  for (std::size_t i = 0; i < command.size(); ++i) {
    if (command[i] == ' ' && !quoted) continue;
    if (i == 0 || (command[i - 1] == ' ' && !quoted)) words.emplace_back();
    if (command[i] == '"') quoted = !quoted;
    words.back() += command[i];
  }
  // An option and its value stay on one line: "--policy exclusive".
  for (std::size_t w = 0; w + 1 < words.size(); ++w)
    if (words[w].size() > 2 && words[w].rfind("--", 0) == 0 && words[w + 1][0] != '-') {
      words[w] += " " + words[w + 1];
      words.erase(words.begin() + static_cast<std::ptrdiff_t>(w) + 1);
    }
  std::string out = "    ";
  std::size_t col = out.size();
  for (std::size_t w = 0; w < words.size(); ++w) {
    if (w > 0 && col + 1 + words[w].size() + 2 > width) {
      out += " \\\n        ";
      col = 8;
    } else if (w > 0) {
      out += ' ';
      ++col;
    }
    out += words[w];
    col += words[w].size();
  }
  return out + '\n';
}

/// The help of `command` ("" for gpuaff itself), `width` columns wide.
inline std::string help_text(std::string_view command, std::size_t width) {
  const std::string program(program_name());
  const CommandInfo* info = nullptr;
  for (const CommandInfo& c : commands)
    if (c.name == command) info = &c;
  const CommandHelp* h = &command_help[0];
  for (const CommandHelp& c : command_help)
    if (c.name == command) h = &c;
  const unsigned bit = info != nullptr ? info->bit : 0u;
  std::string out;
  if (info == nullptr) {
    out += wrap_words(program + " " + std::string(version_string) +
                          ": binds GPU processes to the CPUs and NUMA memory closest to their GPU.",
                      width, "", 0);
  } else {
    std::string summary(info->summary);  // "Print the CPUs ..." as the rest of a sentence
    if (!summary.empty() && summary[0] >= 'A' && summary[0] <= 'Z') summary[0] = static_cast<char>(summary[0] - 'A' + 'a');
    out += wrap_words(program + " " + std::string(info->name) + ": " + summary + ".", width, "", 0);
  }
  out += '\n' + wrap_words(program + " " + std::string(h->usage), width, "Usage: ", 7 + program.size() + 1);
  if (info == nullptr) {
    out += "\nCommands:\n";
    for (const CommandInfo& c : commands) out += wrap_entry(c.name, c.summary, width, 12);
  }
  out += "\nOptions:\n";
  const std::size_t column = std::min<std::size_t>(28, width / 3);  // a narrow terminal keeps room for the text
  out += wrap_entry("-h, --help", info == nullptr ? "print this help; 'gpuaff COMMAND --help' prints a command's"
                                                  : "print this help",
                    width, column);
  if (info == nullptr) out += wrap_entry("--version", "print the version", width, column);
  bool takes_policy = false;
  auto option = [&](const OptionInfo& o) {
    takes_policy = takes_policy || o.key == "policy";
    if (hwloc_only(o) && program != "gpuaff-hwloc") return;
    std::string term(o.flag);
    if (o.type != OptionType::flag) term += " " + std::string(option_value_name(o, bit));
    if (!o.negation.empty()) term += ", " + std::string(o.negation);
    std::string text(o.help);
    if (std::string_view d = option_default(o, bit); !d.empty()) text += " (default: " + std::string(d) + ")";
    out += wrap_entry(term, text, width, column);
  };
  if (info != nullptr) {
    for (const auto& o : launch_options)
      if ((o.commands & bit) != 0 && !o.flag.empty()) option(o);
    for (const auto& o : cli_options)
      if ((o.commands & bit) != 0) option(o);
  }
  out += "\nExamples:\n";
  for (const Example& e : h->examples) {
    if (e.command.empty()) continue;
    out += wrap_words(std::string(e.what) + ":", width, "  ", 2);
    out += example_command(e.command, width);
  }
  if (takes_policy) {
    out += "\nPolicies (--policy):\n";
    for (const PolicyInfo& p : policy_registry)
      out += wrap_entry(p.name, std::string(p.description) + (p.nvidia_options ? " (NVIDIA options apply)" : ""),
                        width, 22);
  }
  if (!h->notes.empty()) out += '\n' + wrap_words(h->notes, width, "", 0);
  out += "\nExit codes:\n";
  for (const ExitCodeMeaning& e : exit_code_meanings)
    if (returns(bit, e)) out += wrap_entry(std::to_string(e.code), e.meaning, width, 7);
  out += wrap_words("Errors are one line on stderr, \"" + program +
                        ": <what is wrong>; <what to do>\"; stdout stays empty.",
                    width, "", 0);
  return out;
}

}  // namespace gpuaff::cli

// SPDX-License-Identifier: Apache-2.0
// gpuaff-docgen: writes the man page gpuaff(1) and the bash completion from the
// tables the command line is registered from (cli_options.hpp's commands and
// options, the library's launch_options, the policy registry, the exit codes),
// so that neither can drift from the tool. Run by the build; not installed.
//   gpuaff-docgen man DOCDIR FIXTUREDIR > gpuaff.1   (where the install puts them)
//   gpuaff-docgen bash   > gpuaff        (share/bash-completion/completions/)

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "cli_options.hpp"
#include "exit_codes.hpp"
#include "policies.hpp"
#include "gpuaff/launch/launcher.hpp"
#include "gpuaff/policy/dispatch.hpp"
#include "gpuaff/version.hpp"

namespace {

using gpuaff::OptionInfo;
using gpuaff::OptionType;
using gpuaff::cli::CommandInfo;

/// Appends every piece to `out`. Strings are built this way, never with +:
/// GCC 12 at -O3 reports a false -Wrestrict on std::string's operator+.
template <class... Pieces>
void cat(std::string& out, const Pieces&... pieces) {
  (out.append(std::string_view(pieces)), ...);
}

/// Every option `command` takes on the command line: the library's rows, then the CLI's own.
std::vector<const OptionInfo*> options_of(const CommandInfo& command) {
  std::vector<const OptionInfo*> out;
  for (const auto& o : gpuaff::launch_options)
    if ((o.commands & command.bit) != 0 && !o.flag.empty()) out.push_back(&o);
  for (const auto& o : gpuaff::cli::cli_options)
    if ((o.commands & command.bit) != 0) out.push_back(&o);
  return out;
}

// ---- the man page -----------------------------------------------------------

/// Text made safe for roff: backslashes escaped, a line never starting with a
/// control character ('.' or '\''), and '-' as the minus sign option names need.
std::string roff(std::string_view text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
    line_start = c == '\n';
  }
  return out;
}

/// "\\fBA\\fR, \\fBB\\fR": names in bold, for a .TP tag.
template <std::size_t N>
std::string bold_list(const std::array<std::string_view, N>& names) {
  std::string out;
  for (std::string_view n : names) cat(out, out.empty() ? "" : ", ", "\\fB", roff(n), "\\fR");
  return out;
}

/// The man page; `docdir` and `fixturedir` are where the install puts the
/// documentation and the fixtures.
std::string man_page(std::string_view docdir, std::string_view fixturedir) {
  std::string m;
  cat(m, ".TH GPUAFF 1 \"\" \"gpuaff ", gpuaff::version_string, "\" \"User Commands\"\n");
  m += ".SH NAME\ngpuaff \\- bind GPU processes to the CPUs and NUMA memory closest to their GPU\n";
  m += ".SH SYNOPSIS\n";
  for (const CommandInfo& c : gpuaff::cli::commands) {
    cat(m, ".B gpuaff ", roff(c.name), "\n.RI [ options ]\n");
    if (c.name == "exec") m += ".B \\-\\-\n.I command\n.RI [ args ...]\n";
    m += ".br\n";
  }
  m += ".SH DESCRIPTION\n"
       "gpuaff computes, for a GPU, the CPUs and NUMA memory nodes a process using it should run on, with the "
       "binding modes of PyTorch's numa binding and NVIDIA's gpu_affinity, and applies them: it reads the machine "
       "from sysfs (or a recorded root), honours the visibility variables, cgroups and the launcher's local rank, "
       "and fails loudly rather than run a command unbound.\n";
  m += ".SH COMMANDS\n";
  for (const CommandInfo& c : gpuaff::cli::commands) {
    cat(m, ".SS \"gpuaff ", roff(c.name), "\"\n", roff(c.summary), ".\n");
    for (const OptionInfo* o : options_of(c)) {
      if (o->type == OptionType::flag)
        cat(m, ".TP\n.B ", roff(o->flag), "\n");
      else  // the flag bold, its value italic
        cat(m, ".TP\n.BI ", roff(o->flag), " \" ", roff(gpuaff::cli::option_value_name(*o, c.bit)), "\"\n");
      std::string help(o->help);
      if (o->key == "policy") cat(help, ": ", gpuaff::cli::policies_help());
      std::string_view d = gpuaff::cli::option_default(*o, c.bit);
      if (!d.empty()) cat(help, std::string(" (default: "), d, ")");
      cat(m, roff(help), "\n");
      if (!o->negation.empty())
        cat(m, ".TP\n.B ", roff(o->negation), "\nthe opposite of ", roff(o->flag), "\n");
    }
  }
  m += ".SH POLICIES\n";
  for (const auto& p : gpuaff::policy_registry)
    cat(m, ".TP\n.B ", roff(p.name), "\n", roff(p.description), " (", roff(p.origin), ")\n");
  m += ".SH EXIT STATUS\n";
  for (const auto& e : gpuaff::cli::exit_code_meanings)
    cat(m, ".TP\n.B ", std::to_string(e.code), "\n", roff(e.meaning), "\n");
  m += ".SH ENVIRONMENT\n"
       ".TP\n.B CUDA_VISIBLE_DEVICES\\fR, \\fBHIP_VISIBLE_DEVICES\\fR, \\fBROCR_VISIBLE_DEVICES\n"
       "The GPUs the process may use; \\-\\-gpu N counts among them (\\-\\-visible\\-devices overrides them).\n";
  // The launcher variables in the order the library reads them (launch/launcher.hpp).
  cat(m, ".TP\n", bold_list(gpuaff::local_rank_variables), "\n",
      "The rank on this node, read with \\-\\-local\\-rank: the first of these that is set, in this order "
      "(torchrun, Slurm, Open MPI, MPICH and Intel MPI, PMI, HPE PALS); a later one is never read instead of a "
      "malformed earlier one.\n");
  std::array<std::string_view, gpuaff::local_size_variables.size() + 2> sizes{};
  std::copy(gpuaff::local_size_variables.begin(), gpuaff::local_size_variables.end(), sizes.begin());
  sizes[sizes.size() - 2] = gpuaff::slurm_step_tasks_per_node_variable;
  sizes[sizes.size() - 1] = gpuaff::slurm_tasks_per_node_variable;
  cat(m, ".TP\n", bold_list(sizes), "\n",
      "The job's processes on this node, which stand for \\-\\-nproc under \\-\\-local\\-rank: the first that is "
      "set, in this order; Slurm's task lists are read at the entry of this node (", roff(gpuaff::slurm_node_id_variable),
      ").\n");
  m += ".TP\n.B GPUAFF_PLAN\n"
       "Set by gpuaff exec for the command: the plan that was applied, which gpuaff doctor \\-\\-pid checks.\n"
       ".TP\n.B COLUMNS\n"
       "The width \\-\\-help wraps to (else the terminal's, or 80 columns when the output is not a terminal).\n"
       ".TP\n.B NO_COLOR\n"
       "When set and not empty, gpuaff topo draws its picture without colour (\\-\\-color auto).\n";
  m += ".SH FILES\n";
  cat(m, ".TP\n.I ", roff(docdir), "\n",
      "README.md and docs/*.md: every command, flag and exit code (cli.md), the policies, deployments (Docker, "
      "Kubernetes, Slurm, MPI, torchrun, Ray), doctor, NICs and GPU memory, placement.\n");
  cat(m, ".TP\n.I ", roff(fixturedir), "\n",
      "Recorded and modelled machines to try gpuaff without their GPUs, each a compressed root read as it is, with "
      "its topo \\-\\-format json beside it: gpuaff topo \\-\\-root ", roff(fixturedir), "/dgx\\-h100.tar.xz\n");
  m += ".SH EXAMPLES\n.nf\n"
       "gpuaff topo\n"
       "gpuaff bind \\-\\-gpu 3 \\-\\-policy exclusive\n"
       "torchrun \\-\\-nproc\\-per\\-node 8 \\-\\-no\\-python gpuaff exec \\-\\-local\\-rank \\-\\- python3 train.py\n"
       "gpuaff doctor \\-\\-pid 4242\n"
       ".fi\n";
  m += ".SH SEE ALSO\n.BR numactl (8),\n.BR taskset (1),\n.BR cpuset (7)\n";
  return m;
}

// ---- bash completion --------------------------------------------------------

/// The words a value of `o` may be, for completion; empty when not a closed list.
std::string value_words(const OptionInfo& o) {
  std::string out;
  if (o.key == "policy") {
    for (const auto& p : gpuaff::policy_registry) {
      if (!out.empty()) out += ' ';
      out += p.name;
    }
  } else if (o.type == OptionType::choice) {
    for (char c : o.value_name) out += c == '|' ? ' ' : c;
  }
  return out;
}

std::string bash_completion() {
  std::string commands;
  for (const CommandInfo& c : gpuaff::cli::commands) {
    if (!commands.empty()) commands += ' ';
    commands += c.name;
  }
  std::string b;
  cat(b, "# bash completion for gpuaff ", gpuaff::version_string,
      ", generated by gpuaff-docgen from the tool's option tables\n");
  // File and command names: one word each (mapfile: no splitting on blanks,
  // no glob expansion), and quoted by readline when inserted (-o filenames).
  b += "_gpuaff_names() {  # -f (files) or -c (commands)\n"
       "  mapfile -t COMPREPLY < <(compgen \"$1\" -- \"$cur\")\n"
       "  compopt -o filenames 2>/dev/null\n"
       "}\n";
  cat(b, "_gpuaff() {\n"
       "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} i\n"
       "  COMPREPLY=()\n"
       "  if ((COMP_CWORD == 1)); then\n"
       "    COMPREPLY=($(compgen -W '", commands, " --help --version' -- \"$cur\"))\n"
       "    return\n"
       "  fi\n"
       "  # exec: after '--' comes the command and its own arguments.\n"
       "  for ((i = 2; i < COMP_CWORD; i++)); do\n"
       "    if [[ ${COMP_WORDS[i]} == -- ]]; then\n"
       "      if ((i + 1 == COMP_CWORD)); then _gpuaff_names -c; else _gpuaff_names -f; fi\n"
       "      return\n"
       "    fi\n"
       "  done\n"
       "  case ${COMP_WORDS[1]}:$prev in\n");
  for (const CommandInfo& c : gpuaff::cli::commands) {
    for (const OptionInfo* o : options_of(c)) {
      if (o->type == OptionType::flag) continue;
      std::string words = value_words(*o);
      cat(b, "    ", c.name, ":", o->flag, ") ");
      if (!words.empty())
        cat(b, std::string("COMPREPLY=($(compgen -W '"), words, "' -- \"$cur\"))");
      else if (o->type == OptionType::path)
        b += "_gpuaff_names -f";
      else
        b += ":";  // a number, a list, an address: nothing to offer
      b += "; return ;;\n";
    }
  }
  b += "  esac\n"
       "  case ${COMP_WORDS[1]} in\n";
  for (const CommandInfo& c : gpuaff::cli::commands) {
    std::string flags = "--help";
    for (const OptionInfo* o : options_of(c)) {
      cat(flags, " ", o->flag);
      if (!o->negation.empty()) cat(flags, " ", o->negation);
    }
    cat(b, "    ", c.name, ") COMPREPLY=($(compgen -W '", flags, "' -- \"$cur\")) ;;\n");
  }
  b += "  esac\n"
       "}\n"
       "complete -F _gpuaff gpuaff gpuaff-hwloc\n";
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  std::string_view what = argc >= 2 ? argv[1] : "";
  std::string text;
  if (what == "man" && argc == 4) {
    text = man_page(argv[2], argv[3]);
  } else if (what == "bash") {
    text = bash_completion();
  } else {
    std::fputs("usage: gpuaff-docgen man DOCDIR FIXTUREDIR | gpuaff-docgen bash\n", stderr);
    return 2;
  }
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    std::perror("gpuaff-docgen: stdout");
    return 1;
  }
  return 0;
}

// SPDX-License-Identifier: Apache-2.0
#pragma once
// The command line, read against the option tables (the library's
// launch_options, cli_options.hpp): `gpuaff COMMAND [OPTIONS] [-- COMMAND...]`.
//
// The grammar is small and fixed, so it is read here rather than by a
// general parser: long options only (--name VALUE, --name=VALUE), flags bare
// or =true/=false, a flag's negation (--no-balanced), `-h`/`--help`
// anywhere before `--`, and for exec the words of COMMAND. Each mistake is
// named as what to do. No stream or locale is touched: a rank's `bind` or
// `exec` pays only for the words it was given (benchmarks/README.md, row S).

#include <algorithm>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli_options.hpp"
#include "gpuaff/detail/suggest.hpp"

namespace gpuaff::cli {

/// What one command line asks for.
struct CommandLine {
  const CommandInfo* command = nullptr;  ///< null: no command (`gpuaff --help`, `--version`)
  bool help = false;                     ///< print the help of `command` (or the top-level one)
  bool version = false;                  ///< print the version
  /// Each option given, by key: the values as written, in order (a flag's is
  /// "true" or "false", its negation already applied).
  std::map<std::string, std::vector<std::string>, std::less<>> values{};
  std::vector<std::string> words{};  ///< exec: COMMAND and its arguments
  std::string error{};               ///< a usage mistake, said as what to do; empty when none

  /// The option `key` was given.
  bool has(std::string_view key) const { return values.find(key) != values.end(); }
  /// The last value given to `key`; nullopt when it was not given.
  std::optional<std::string> last(std::string_view key) const {
    auto it = values.find(key);
    if (it == values.end() || it->second.empty()) return std::nullopt;
    return it->second.back();
  }
  /// Every value given to `key`, in order (record --pci, doctor --merge).
  std::vector<std::string> all(std::string_view key) const {
    auto it = values.find(key);
    return it == values.end() ? std::vector<std::string>() : it->second;
  }
};

namespace detail_cli {

/// "bind, topo, exec, record, doctor or probe".
inline std::string command_names() {
  std::string out;
  for (std::size_t i = 0; i < commands.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == commands.size() ? " or " : ", ") + std::string(commands[i].name);
  return out;
}

/// The row of `command` whose flag or negation is `name`: launch options
/// first, then the command line's own (no flag is in both for one command).
inline const OptionInfo* find_row(unsigned command, std::string_view name) {
  auto match = [&](const OptionInfo& o) {
    return (o.commands & command) != 0 && !o.flag.empty() && (o.flag == name || o.negation == name);
  };
  for (const OptionInfo& o : launch_options)
    if (match(o)) return &o;
  for (const OptionInfo& o : cli_options)
    if (match(o)) return &o;
  return nullptr;
}

/// Every flag (and negation) `command` takes, and --help: what "did you mean"
/// picks from.
inline std::vector<std::string_view> flags_of(unsigned command) {
  std::vector<std::string_view> out;
  auto add = [&](const OptionInfo& o) {
    if ((o.commands & command) == 0 || o.flag.empty()) return;
    out.push_back(o.flag);
    if (!o.negation.empty()) out.push_back(o.negation);
  };
  for (const OptionInfo& o : launch_options) add(o);
  for (const OptionInfo& o : cli_options) add(o);
  out.emplace_back("--help");
  return out;
}

/// "unknown option '--polcy'<where>; did you mean --policy? (see 'gpuaff
/// bind --help')", or "...; see 'gpuaff bind --help'" when no flag is close.
inline std::string unknown_option(std::string_view name, const CommandInfo& command, std::string_view where,
                                  std::string_view note) {
  std::vector<std::string_view> flags = flags_of(command.bit);
  std::string_view guess = gpuaff::detail::closest(name, flags);
  std::string see = std::string(note) + "see 'gpuaff " + std::string(command.name) + " --help'";
  std::string line = "unknown option '" + std::string(name.substr(0, 60)) + "'" + std::string(where);
  if (guess.empty()) return line + "; " + see;
  return line + "; did you mean " + std::string(guess) + "? (" + see + ")";
}

/// A word that is an option's name rather than a value: `-x`, `--name`, but
/// neither `-` (a file name by convention) nor `-1` (a number, which the
/// option then refuses by name).
constexpr bool looks_like_option(std::string_view w) {
  return w.size() > 1 && w[0] == '-' && !(w[1] >= '0' && w[1] <= '9');
}

/// Rows whose value may be given more than once, each kept (record --pci,
/// doctor --merge); a value of any other option is given once.
inline bool repeatable(const OptionInfo& o, unsigned command) {
  return (command == for_record && o.key == "pci") || (command == for_doctor && o.key == "merge");
}

/// ": a flag takes true or false; write --x, --x=true or --x=false".
inline std::string flag_words(std::string_view flag) {
  std::string n(flag);
  return ": a flag takes true or false; write " + n + ", " + n + "=true or " + n + "=false";
}

/// The words before the options: `--help`/`--version` given a value
/// (anywhere before `end`, the first `--`), the top-level help or version,
/// and the command. Sets `line`'s command, help or version; returns the
/// mistake, or "".
inline std::string read_command(std::span<const std::string_view> args, std::size_t end, CommandLine& line) {
  if (args.empty()) return "a command is needed: " + command_names() + "; see 'gpuaff --help'";
  // --help=VALUE and --version=VALUE: both answer whatever VALUE says, so a
  // value is a mistake to name, wherever it is.
  for (std::size_t i = 0; i < end; ++i) {
    for (std::string_view name : {"--help", "--version", "-h"}) {
      std::string_view a = args[i];
      if (a.size() <= name.size() || a.substr(0, name.size()) != name || a[name.size()] != '=') continue;
      return std::string(a.substr(0, 60)) + ": " + std::string(name) + " takes no value; write " + std::string(name) +
             " alone";
    }
  }
  std::string_view first = args[0];
  if (first == "--help" || first == "-h") {
    // `gpuaff --help bind` shows bind's help, as `gpuaff bind --help` does.
    line.help = true;
    for (const CommandInfo& c : commands)
      if (args.size() > 1 && c.name == args[1]) line.command = &c;
    return "";
  }
  if (first == "--version") {
    line.version = true;
    return "";
  }
  for (const CommandInfo& c : commands)
    if (c.name == first) line.command = &c;
  if (line.command != nullptr) return "";
  if (looks_like_option(first))
    return "'" + std::string(first.substr(0, 60)) + "' comes before a command; write gpuaff COMMAND [OPTIONS], " +
           "COMMAND one of " + command_names() + " (see 'gpuaff --help')";
  std::vector<std::string_view> names;
  for (const CommandInfo& c : commands) names.push_back(c.name);
  std::string_view guess = gpuaff::detail::closest(first, names);
  return "unknown command '" + std::string(first.substr(0, 60)) + "'; " +
         (guess.empty() ? std::string() : "did you mean " + std::string(guess) + "? ") + "use " + command_names() +
         " (see 'gpuaff --help')";
}

/// The mistakes said before the help: an empty value (`--gpu=`, which would
/// otherwise take no value silently) and, for exec with `--`, an option
/// gpuaff does not know before it (a typo of gpuaff's, never COMMAND's).
/// Returns the first, or "".
inline std::string said_before_help(std::span<const std::string_view> args, std::size_t end,
                                    const CommandInfo& command) {
  const std::string see = "; see 'gpuaff " + std::string(command.name) + " --help'";
  for (std::size_t i = 1; i < end; ++i) {
    std::string_view a = args[i];
    if (!looks_like_option(a)) continue;
    std::size_t eq = a.find('=');
    std::string_view name = a.substr(0, eq);
    const OptionInfo* row = find_row(command.bit, name);
    if (row == nullptr) {
      if (command.bit == for_exec && end < args.size() && name != "--help" && name != "-h")
        return unknown_option(name, command, " before '--'",
                              "gpuaff's own options come before '--', the command's after it; ");
      continue;
    }
    if (eq + 1 != a.size() || eq == std::string_view::npos) continue;
    std::string n(name);
    if (row->type == OptionType::flag) return n + "= gives " + n + " no value" + flag_words(n) + see;
    return n + "= gives " + n + " no value; write " + n + " VALUE or " + n + "=VALUE" + see;
  }
  return "";
}

/// The options and, for exec, COMMAND's words, into `line`. Returns the
/// first mistake, or "".
inline std::string read_options(std::span<const std::string_view> args, std::size_t end, const CommandInfo& command,
                                CommandLine& line) {
  const bool exec = command.bit == for_exec;
  const std::string see = "; see 'gpuaff " + std::string(command.name) + " --help'";
  std::map<const OptionInfo*, std::string_view> spelled;  // the flag or negation a flag row was given as
  for (std::size_t i = 1; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (i >= end) {  // `--` and what follows it
      if (i == end) continue;
      if (!exec) return "unexpected argument '" + std::string(a.substr(0, 60)) + "' after '--'" + see;
      line.words.emplace_back(a);
      continue;
    }
    if (!looks_like_option(a)) {
      if (!exec) return "unexpected argument '" + std::string(a.substr(0, 60)) + "'" + see;
      line.words.emplace_back(a);  // COMMAND without `--`: its words, up to an option
      continue;
    }
    std::size_t eq = a.find('=');
    std::string_view name = a.substr(0, eq);
    const OptionInfo* row = find_row(command.bit, name);
    if (row == nullptr) {
      if (!exec || line.words.empty()) return unknown_option(name, command, "", "");
      std::string w(a.substr(0, 60)), c(std::string_view(line.words.front()).substr(0, 60));
      return "'" + w + "' follows the command '" + c +
             "' but was read as gpuaff's own option; end gpuaff's options with '--': gpuaff exec [options] -- " + c +
             " " + w + " ...";
    }
    std::string key(row->key);
    if (row->type == OptionType::flag) {
      std::string_view text = eq == std::string_view::npos ? std::string_view("true") : a.substr(eq + 1);
      if (text != "true" && text != "false")
        return std::string(name) + "=" + std::string(text.substr(0, 40)) + flag_words(name) + see;
      auto [it, added] = spelled.emplace(row, name);
      if (!added && it->second != name) return std::string(row->flag) + " excludes " + std::string(row->negation) + see;
      bool on = (text == "true") == (name == row->flag);
      line.values[key] = {on ? "true" : "false"};
      continue;
    }
    std::vector<std::string>& values = line.values[key];
    if (!values.empty() && !repeatable(*row, command.bit)) {
      long times = 0;
      for (std::size_t j = 1; j < end; ++j) times += args[j].substr(0, args[j].find('=')) == name ? 1 : 0;
      return std::string(name) + " is given " + std::to_string(times) + " times; give it once" + see;
    }
    if (eq != std::string_view::npos) {
      values.emplace_back(a.substr(eq + 1));
    } else if (i + 1 < end && !looks_like_option(args[i + 1])) {
      values.emplace_back(args[++i]);
    } else {
      return std::string(name) + " needs a value: " + std::string(option_value_name(*row, command.bit)) + see;
    }
    // --pci A B: a repeatable option takes the words that follow it, up to an option.
    while (repeatable(*row, command.bit) && eq == std::string_view::npos && i + 1 < end &&
           !looks_like_option(args[i + 1]))
      values.emplace_back(args[++i]);
  }
  return "";
}

}  // namespace detail_cli

/// Reads `args` (argv without the program's name). Mistakes end in `error`
/// (the first one, as it comes before the others on the line): no command
/// or an unknown one, an unknown option (with the closest known one), an
/// option given twice, a value missing or empty, a flag given neither true
/// nor false or with its negation, a word no option takes, and for exec an
/// unknown option before `--` or one of COMMAND's options written without it.
inline CommandLine read_command_line(std::span<const std::string_view> args) {
  using namespace detail_cli;
  CommandLine line;
  // The words of gpuaff itself: up to the first `--`.
  const std::size_t end = static_cast<std::size_t>(std::find(args.begin(), args.end(), "--") - args.begin());
  line.error = read_command(args, end, line);
  if (!line.error.empty() || line.help || line.version) return line;
  for (std::size_t i = 1; i < end; ++i)
    if (args[i] == "-h" || args[i] == "--help") line.help = true;
  line.error = said_before_help(args, end, *line.command);
  if (!line.error.empty() || line.help) return line;
  line.error = read_options(args, end, *line.command, line);
  return line;
}

}  // namespace gpuaff::cli

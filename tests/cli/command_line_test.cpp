// SPDX-License-Identifier: Apache-2.0
// The command line's grammar (tools/gpuaff/command_line.hpp), read without
// running the tool: what each word is taken as, and each mistake's words.
// The tool's own tests (cli_test.cpp and the others) run the same lines end
// to end.

#include <doctest/doctest.h>

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "command_line.hpp"

namespace {

using gpuaff::cli::CommandLine;

CommandLine read(std::initializer_list<std::string_view> words) {
  std::vector<std::string_view> args(words);
  return gpuaff::cli::read_command_line(args);
}

std::vector<std::string> values(const CommandLine& line, std::string_view key) {
  auto it = line.values.find(key);
  return it == line.values.end() ? std::vector<std::string>() : it->second;
}

using Strings = std::vector<std::string>;

}  // namespace

TEST_CASE("options are read as --name VALUE and --name=VALUE, by the row's key") {
  CommandLine line = read({"bind", "--gpu", "3", "--policy=exclusive", "--root", "/r"});
  REQUIRE(line.error.empty());
  REQUIRE(line.command != nullptr);
  CHECK(line.command->name == "bind");
  CHECK(values(line, "gpu") == Strings{"3"});
  CHECK(values(line, "policy") == Strings{"exclusive"});
  CHECK(values(line, "root") == Strings{"/r"});
  CHECK_FALSE(line.has("smt"));
  CHECK_FALSE(line.help);
  // probe's --gpu is another row than bind's (a list of GPUs to measure).
  CommandLine probe = read({"probe", "--gpu", "0,1"});
  REQUIRE(probe.error.empty());
  CHECK(values(probe, "probe_gpu") == Strings{"0,1"});
  CHECK_FALSE(probe.has("gpu"));
}

TEST_CASE("every option row of every command is read under its own key") {
  // Each row of both tables, given alone (a flag bare, any other with a
  // value), comes back under its key: no flag shadows another of its command.
  int checked = 0;
  for (const gpuaff::cli::CommandInfo& c : gpuaff::cli::commands) {
    auto one = [&](const gpuaff::OptionInfo& o) {
      if ((o.commands & c.bit) == 0 || o.flag.empty()) return;
      CommandLine line = o.type == gpuaff::OptionType::flag ? read({c.name, o.flag}) : read({c.name, o.flag, "x"});
      INFO(c.name << " " << o.flag);
      CHECK(line.error.empty());
      CHECK(values(line, o.key) == Strings{o.type == gpuaff::OptionType::flag ? "true" : "x"});
      ++checked;
    };
    for (const auto& o : gpuaff::launch_options) one(o);
    for (const auto& o : gpuaff::cli::cli_options) one(o);
  }
  CHECK(checked > 60);  // six commands of some ten to forty options each
}

TEST_CASE("a flag is true or false, its negation the opposite, the last one given counts") {
  CHECK(values(read({"bind", "--balanced"}), "balanced") == Strings{"true"});
  CHECK(values(read({"bind", "--balanced=false"}), "balanced") == Strings{"false"});
  CHECK(values(read({"bind", "--no-balanced"}), "balanced") == Strings{"false"});
  CHECK(values(read({"bind", "--no-balanced=false"}), "balanced") == Strings{"true"});
  CHECK(values(read({"bind", "--balanced=true", "--balanced=false"}), "balanced") == Strings{"false"});
  CHECK(read({"bind", "--balanced", "--no-balanced"}).error ==
        "--balanced excludes --no-balanced; see 'gpuaff bind --help'");
  CHECK(read({"bind", "--no-balanced", "--balanced"}).error ==
        "--balanced excludes --no-balanced; see 'gpuaff bind --help'");
  CHECK(read({"bind", "--balanced=no"}).error ==
        "--balanced=no: a flag takes true or false; write --balanced, --balanced=true or --balanced=false; see "
        "'gpuaff bind --help'");
  // A flag never takes the next word: "true" is a word no option takes.
  CHECK(read({"bind", "--nic-env", "true"}).error == "unexpected argument 'true'; see 'gpuaff bind --help'");
  CHECK(read({"bind", "--nic-env="}).error.find("--nic-env= gives --nic-env no value: a flag takes true or false") == 0);
}

TEST_CASE("a value is given once, and never taken from the next option") {
  CHECK(read({"bind", "--gpu", "3", "--gpu=4", "--gpu", "5"}).error ==
        "--gpu is given 3 times; give it once; see 'gpuaff bind --help'");
  // --policy is an option, not --gpu's value.
  CHECK(read({"bind", "--gpu", "--policy", "node"}).error ==
        "--gpu needs a value: N[,N...]|all; see 'gpuaff bind --help'");
  CHECK(read({"exec", "--policy"}).error == "--policy needs a value: P; see 'gpuaff exec --help'");
  CHECK(read({"bind", "--gpu", "--"}).error.find("--gpu needs a value") == 0);
  CHECK(read({"bind", "--gpu="}).error ==
        "--gpu= gives --gpu no value; write --gpu VALUE or --gpu=VALUE; see 'gpuaff bind --help'");
  // "-1" is a number, which --gpu then refuses by name; "-" is a word.
  CHECK(values(read({"bind", "--gpu", "-1"}), "gpu") == Strings{"-1"});
  CHECK(values(read({"bind", "--root", "-"}), "root") == Strings{"-"});
  // record --pci and doctor --merge keep every value, one or several per flag.
  CHECK(values(read({"record", "--pci", "a", "b", "--pci", "c", "--out", "d"}), "pci") == Strings{"a", "b", "c"});
  CHECK(values(read({"doctor", "--merge", "x", "--merge=y"}), "merge") == Strings{"x", "y"});
}

TEST_CASE("exec's COMMAND: after '--', or its words up to an option") {
  CommandLine line = read({"exec", "--gpu", "0", "--", "python3", "--gpu", "1", "--", "-x"});
  REQUIRE(line.error.empty());
  CHECK(values(line, "gpu") == Strings{"0"});
  CHECK(line.words == Strings{"python3", "--gpu", "1", "--", "-x"});
  CHECK(read({"exec", "--dry-run", "python3", "train.py"}).words == Strings{"python3", "train.py"});
  // --help after '--' is COMMAND's.
  CommandLine child_help = read({"exec", "--gpu", "0", "--", "true", "--help"});
  CHECK_FALSE(child_help.help);
  CHECK(child_help.words == Strings{"true", "--help"});
  CHECK(read({"exec", "--gpu", "0", "python3", "-c", "x"}).error ==
        "'-c' follows the command 'python3' but was read as gpuaff's own option; end gpuaff's options with '--': "
        "gpuaff exec [options] -- python3 -c ...");
  CHECK(read({"exec", "--polcy", "node", "--", "true"}).error ==
        "unknown option '--polcy' before '--'; did you mean --policy? (gpuaff's own options come before '--', the "
        "command's after it; see 'gpuaff exec --help')");
  // Any other command takes nothing after '--'.
  CHECK(read({"bind", "--gpu", "0", "--", "x"}).error == "unexpected argument 'x' after '--'; see 'gpuaff bind --help'");
  CHECK(read({"bind", "--gpu", "0", "--"}).error.empty());
}

TEST_CASE("unknown words are named, with the closest option or command") {
  CHECK(read({"bind", "--polcy", "node"}).error ==
        "unknown option '--polcy'; did you mean --policy? (see 'gpuaff bind --help')");
  CHECK(read({"bind", "--frobnicate=3"}).error == "unknown option '--frobnicate'; see 'gpuaff bind --help'");
  CHECK(read({"bind", "-gpu", "0"}).error == "unknown option '-gpu'; did you mean --gpu? (see 'gpuaff bind --help')");
  // An option of another command is unknown to this one.
  CHECK(read({"bind", "--dry-run"}).error.find("unknown option '--dry-run'") == 0);
  CHECK(read({"bind", "extra"}).error == "unexpected argument 'extra'; see 'gpuaff bind --help'");
  CHECK(read({"bnd"}).error.find("unknown command 'bnd'; did you mean bind?") == 0);
  // A word far too long to be a typo gets no suggestion (it once got the
  // first flag of the table), and is shown cut.
  std::string huge = "--frob" + std::string(100000, 'x');
  CHECK(read({"bind", huge}).error ==
        "unknown option '" + huge.substr(0, 60) + "'; see 'gpuaff bind --help'");
  CHECK(read({std::string_view(huge).substr(2)}).error.find("did you mean") == std::string::npos);
  CHECK(read({}).error.find("a command is needed: bind, topo, exec, record, doctor or probe") == 0);
  CHECK(read({"--root", "/r", "bind"}).error.find("'--root' comes before a command") == 0);
}

TEST_CASE("--help anywhere before '--' wins over what else is wrong, --version alone") {
  CommandLine help = read({"bind", "--frob", "--help"});
  CHECK(help.error.empty());
  CHECK(help.help);
  REQUIRE(help.command != nullptr);
  CHECK(help.command->name == "bind");
  CHECK(read({"topo", "-h"}).help);
  CommandLine top = read({"--help"});
  CHECK((top.help && top.command == nullptr));
  CommandLine named = read({"--help", "exec"});
  CHECK((named.help && named.command != nullptr && named.command->name == "exec"));
  CHECK(read({"--version"}).version);
  // A value given to --help, --version or -h is named: each answers whatever it says.
  CHECK(read({"bind", "--help=no"}).error == "--help=no: --help takes no value; write --help alone");
  CHECK(read({"--version=1"}).error == "--version=1: --version takes no value; write --version alone");
  // An empty value is said before the help it would otherwise hide.
  CHECK(read({"bind", "--gpu=", "--help"}).error.find("--gpu= gives --gpu no value") == 0);
}

// SPDX-License-Identifier: Apache-2.0
// Each option is described once, in the option tables (the library's
// launch_options, the command line's cli_options): docs/cli.md's and
// docs/python.md's option references must be exactly what the tables say, and
// no message of the library may name a command-line flag (the CLI and Python
// spell the library's option words, `nproc=4`, their own way).
//
// GPUAFF_UPDATE_DOCS=1 rewrites the generated blocks of the docs instead of
// failing.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_options.hpp"
#include "gpuaff/launch/options.hpp"
#include "gpuaff/policy/dispatch.hpp"

namespace {

using gpuaff::OptionInfo;
using gpuaff::OptionType;

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string commands_of(unsigned bits) {
  std::string out;
  for (auto [bit, name] : {std::pair{gpuaff::for_bind, "bind"}, std::pair{gpuaff::for_exec, "exec"},
                           std::pair{gpuaff::for_topo, "topo"}, std::pair{gpuaff::for_doctor, "doctor"},
                           std::pair{gpuaff::for_record, "record"}, std::pair{gpuaff::for_probe, "probe"}})
    if ((bits & bit) != 0) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

std::string python_type(const OptionInfo& o) {
  switch (o.type) {
    case OptionType::flag: return "bool";
    case OptionType::count:
    case OptionType::positive: return "int";
    case OptionType::fraction: return "float";
    case OptionType::choice: {
      std::string out;
      std::string_view words = o.value_name;
      while (!words.empty()) {
        auto bar = words.find('|');
        out += (out.empty() ? "" : ", ") + std::string("\"") + std::string(words.substr(0, bar)) + "\"";
        words = bar == std::string_view::npos ? std::string_view() : words.substr(bar + 1);
      }
      return out;
    }
    default: return "str";
  }
}

std::string cli_table() {
  std::string t = "| option | value | default | commands | meaning |\n| --- | --- | --- | --- | --- |\n";
  auto row = [&](const OptionInfo& o) {
    std::string flag = "`" + std::string(o.flag) + "`";
    if (!o.negation.empty()) flag += ", `" + std::string(o.negation) + "`";
    t += "| " + flag + " | " + (o.value_name.empty() ? std::string() : "`" + cell(o.value_name) + "`") + " | " +
         cell(o.default_text) + " | " + commands_of(o.commands) + " | " + cell(o.help) + " |\n";
  };
  for (const auto& o : gpuaff::launch_options)
    if (!o.flag.empty()) row(o);
  for (const auto& o : gpuaff::cli::cli_options) row(o);
  return t;
}

std::string python_table() {
  std::string t = "| keyword | type | default | command line | meaning |\n| --- | --- | --- | --- | --- |\n";
  for (const auto& o : gpuaff::launch_options) {
    if ((o.commands & gpuaff::for_python) == 0 || o.set == nullptr) continue;
    t += "| `" + std::string(o.key) + "` | " + cell(python_type(o)) + " | " + cell(o.default_text) + " | `" +
         std::string(o.flag) + "` | " + cell(o.help) + " |\n";
  }
  return t;
}

std::string policy_table() {
  std::string t = "| policy | whose mode | rule |\n| --- | --- | --- |\n";
  for (const auto& p : gpuaff::policy_registry)
    t += "| `" + std::string(p.name) + "` | " + cell(p.origin) + " | " + cell(p.description) + " |\n";
  return t;
}

/// Checks (or, with GPUAFF_UPDATE_DOCS=1, rewrites) the block between the markers of `doc`.
void check_block(const std::string& doc, const std::string& block,
                 const std::string& begin = "<!-- BEGIN options: generated from the option tables; tests/cli/options_doc_test -->\n",
                 const std::string& end = "<!-- END options -->\n") {
  std::filesystem::path path = std::filesystem::path(GPUAFF_SOURCE_DIR) / doc;
  std::string text = read(path);
  auto b = text.find(begin);
  auto e = text.find(end);
  REQUIRE_MESSAGE(b != std::string::npos, doc, " has no generated option block");
  REQUIRE(e != std::string::npos);
  std::string now = text.substr(b + begin.size(), e - b - begin.size());
  if (now != block && std::getenv("GPUAFF_UPDATE_DOCS") != nullptr) {
    std::ofstream(path) << text.substr(0, b + begin.size()) << block << text.substr(e);
    now = block;
  }
  CHECK_MESSAGE(now == block, doc, " differs from the option tables; expected:\n", block);
}

/// The string literals of a C++ source, comments left out.
std::vector<std::string> literals(const std::string& src) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < src.size(); ++i) {
    if (src.compare(i, 2, "//") == 0) {
      i = src.find('\n', i);
      if (i == std::string::npos) break;
    } else if (src[i] == '\'' ) {
      i = src.find('\'', i + (src[i + 1] == '\\' ? 3 : 2));
      if (i == std::string::npos) break;
    } else if (src[i] == '"') {
      std::string lit;
      for (++i; i < src.size() && src[i] != '"'; ++i) {
        if (src[i] == '\\') lit += src[i++];
        lit += src[i];
      }
      out.push_back(lit);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("docs/cli.md's option reference is the option tables") { check_block("docs/cli.md", cli_table()); }

TEST_CASE("docs/python.md's keyword reference is the option table") { check_block("docs/python.md", python_table()); }

TEST_CASE("docs/cli.md's policy list is the policy registry") {
  check_block("docs/cli.md", policy_table(), "<!-- BEGIN policies: generated from policy_registry; tests/cli/options_doc_test -->\n",
              "<!-- END policies -->\n");
}

TEST_CASE("no message of the library names a command-line flag") {
  std::vector<std::string> flags;
  for (const auto& o : gpuaff::launch_options)
    if (!o.flag.empty()) flags.emplace_back(o.flag);
  for (const auto& o : gpuaff::cli::cli_options) flags.emplace_back(o.flag);
  int headers = 0;
  std::vector<std::string> named_flags;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(std::filesystem::path(GPUAFF_SOURCE_DIR) / "include")) {
    if (entry.path().extension() != ".hpp") continue;
    ++headers;
    // The table itself holds the flags and the help lines the command line shows.
    if (entry.path().filename() == "options.hpp") continue;
    for (const auto& lit : literals(read(entry.path())))
      for (const auto& flag : flags) {
        auto at = lit.find(flag);
        bool named = at != std::string::npos &&
                     (at + flag.size() == lit.size() || !(std::isalnum(static_cast<unsigned char>(lit[at + flag.size()])) ||
                                                          lit[at + flag.size()] == '-'));
        if (named) named_flags.push_back(entry.path().string() + ": \"" + lit + "\" names " + flag);
      }
  }
  CHECK(named_flags == std::vector<std::string>{});
  CHECK(headers > 40);  // the scan saw the library
}

TEST_CASE("the scan finds a flag in a message, and not in a comment") {
  auto found = literals("  // \"--nproc\" in a comment\n  fail(x, \"use --nproc 2\", 'a', '\\\"');\n");
  REQUIRE(found.size() == 1);
  CHECK(found[0] == "use --nproc 2");
}

// SPDX-License-Identifier: Apache-2.0
// The exit code table (tools/gpuaff/exit_codes.hpp) is the one list: every
// library error class has one code, and docs/cli.md's table says the same
// (tests/cli/help_test.sh checks what each command's --help lists).
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "exit_codes.hpp"

using namespace gpuaff::cli;

namespace {

/// Rows of the table under "## Exit codes" in docs/cli.md: code -> the
/// backquoted error class names of its last column.
std::map<int, std::set<std::string>> documented_exit_codes() {
  std::ifstream in(std::string(GPUAFF_SOURCE_DIR) + "/docs/cli.md");
  REQUIRE(in);
  std::map<int, std::set<std::string>> rows;
  bool in_section = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Exit codes";
    if (!in_section || line.rfind("| ", 0) != 0) continue;
    std::vector<std::string> cells;
    std::stringstream s(line.substr(1));
    for (std::string cell; std::getline(s, cell, '|');) cells.push_back(cell);
    if (cells.size() < 3 || cells[0].find_first_not_of(" 0123456789") != std::string::npos) continue;  // header, rule
    std::set<std::string> classes;
    const std::string& last = cells[2];
    // Only the backquoted names before a parenthesis are classes; a note in parentheses is prose.
    std::string names = last.substr(0, last.find('('));
    for (std::size_t b = names.find('`'); b != std::string::npos; b = names.find('`', b)) {
      std::size_t e = names.find('`', b + 1);
      classes.insert(names.substr(b + 1, e - b - 1));
      b = e + 1;
    }
    rows[std::stoi(cells[0])] = classes;
  }
  return rows;
}

}  // namespace

TEST_CASE("every library error class maps to exactly one exit code") {
  for (int c = static_cast<int>(gpuaff::Errc::invalid_argument); c <= static_cast<int>(gpuaff::Errc::unsupported); ++c) {
    int seen = 0;
    for (const auto& e : error_classes) seen += static_cast<int>(e.errc) == c;
    INFO("Errc " << c);
    CHECK(seen == 1);
  }
  CHECK(exit_code(gpuaff::Errc::invalid_argument) == 2);
  CHECK(exit_code(gpuaff::Errc::io_error) == 3);
  CHECK(exit_code(gpuaff::Errc::unknown_locality) == 4);
  CHECK(exit_code(gpuaff::Errc::insufficient_cores) == 5);
  CHECK(exit_code(gpuaff::Errc::permission_denied) == 6);
}

TEST_CASE("each error class's exit code has a meaning in the table") {
  for (const auto& e : error_classes) {
    bool listed = false;
    for (const auto& m : exit_code_meanings) listed = listed || m.code == e.code;
    INFO(e.name);
    CHECK(listed);
  }
}

TEST_CASE("docs/cli.md's exit code table has the same codes and error classes as the tool") {
  auto documented = documented_exit_codes();
  std::map<int, std::set<std::string>> table;
  for (const auto& m : exit_code_meanings) table[m.code];
  for (const auto& e : error_classes) table[e.code].insert(std::string(e.name));
  CHECK(documented.size() == exit_code_meanings.size());
  for (const auto& entry : table) {
    const int code = entry.first;  // not a structured binding: INFO's lambda captures it (Clang 14)
    const auto& classes = entry.second;
    INFO("exit code " << code);
    REQUIRE(documented.count(code) == 1);
    CHECK(documented[code] == classes);
  }
}

// SPDX-License-Identifier: Apache-2.0
// doctor --format prometheus: a label value as the text exposition format
// (version 0.0.4) requires it: backslash, double quote and newline escaped, and
// valid UTF-8 whatever the process's GPUAFF_PLAN held. The expectations are
// read back the way Prometheus reads a label value (decode below).

#include <iconv.h>


#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "prometheus.hpp"

namespace {

/// A label value as Prometheus reads it: \\, \" and \n unescaped; any other
/// backslash, or an unescaped quote or newline, is a parse error (nullopt).
std::optional<std::string> decode(const std::string& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    char c = v[i];
    if (c == '"' || c == '\n') return std::nullopt;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i == v.size()) return std::nullopt;
    if (v[i] == '\\') out += '\\';
    else if (v[i] == '"') out += '"';
    else if (v[i] == 'n') out += '\n';
    else return std::nullopt;
  }
  return out;
}

/// Whether glibc's iconv reads `s` as UTF-8 (it stops at the first ill-formed sequence).
bool valid_utf8(const std::string& s) {
  iconv_t cd = ::iconv_open("UTF-32LE", "UTF-8");
  REQUIRE(cd != reinterpret_cast<iconv_t>(-1));
  std::string in = s;
  std::string out(4 * in.size() + 4, '\0');
  char* ip = in.data();
  char* op = out.data();
  std::size_t il = in.size();
  std::size_t ol = out.size();
  std::size_t r = ::iconv(cd, &ip, &il, &op, &ol);
  ::iconv_close(cd);
  return r != static_cast<std::size_t>(-1) && il == 0;
}

using gpuaff::cli::label_value;

}  // namespace

TEST_CASE("a label value keeps plain text and reads back the same") {
  for (std::string s : {"LOCAL_RANK=3", "gpu=0", "0000:17:00.0", "", "SLURM_LOCALID=7 (rang \xc3\xa9t\xc3\xa9)"}) {
    CAPTURE(s);
    CHECK(label_value(s) == s);
    CHECK(decode(label_value(s)) == s);
  }
}

TEST_CASE("a label value escapes backslash and double quote so that it reads back the same") {
  for (std::string s : {"say=\"hi\"", "back\\slash", "\\", "\"", "a\\\"b", "\\n"}) {
    CAPTURE(s);
    CHECK(decode(label_value(s)) == s);
  }
}

TEST_CASE("a label value holds no raw newline") {
  std::string v = label_value("new\nline");
  CHECK(v.find('\n') == std::string::npos);
  REQUIRE(decode(v));
  CHECK(decode(v)->find("new") == 0);
  CHECK(decode(v)->find("line") != std::string::npos);
}

TEST_CASE("a label value is valid UTF-8 whatever bytes it is made from, each bad byte shown as \\xHH") {
  struct Case {
    std::string in;
    std::string shown;  ///< the value Prometheus reads
  };
  for (const Case& c : {Case{"LOCAL_RANK=\xff\xfe", "LOCAL_RANK=\\xff\\xfe"}, Case{"a\xc3(", "a\\xc3("},
                        Case{"\xed\xa0\x80", "\\xed\\xa0\\x80"} /* a surrogate */,
                        Case{"\xc0\xaf", "\\xc0\\xaf"} /* overlong '/' */, Case{"x\x80", "x\\x80"}}) {
    CAPTURE(c.in);
    std::string v = label_value(c.in);
    CHECK(valid_utf8(v));
    CHECK(decode(v) == c.shown);
  }
}

// doctor --job ID --format prometheus: every sample carries job_id="ID", so
// two jobs' watchers on one node write series node_exporter can tell apart.
TEST_CASE("with --job every sample carries job_id, comments and values unchanged") {
  using gpuaff::cli::with_job_label;
  const std::string text =
      "# HELP gpuaff_plan_processes Processes.\n"
      "# TYPE gpuaff_plan_processes gauge\n"
      "gpuaff_plan_processes 2\n"
      "gpuaff_healthy{pid=\"41\",rank=\"LOCAL_RANK=1\"} 1\n"
      "gpuaff_healthy{pid=\"42\",rank=\"gpu=} 3\"} 0\n";  // a plan's text may hold "} "
  CHECK(with_job_label(text, "") == text);  // without --job: byte for byte what it was
  CHECK(with_job_label(text, "1234") ==
        "# HELP gpuaff_plan_processes Processes.\n"
        "# TYPE gpuaff_plan_processes gauge\n"
        "gpuaff_plan_processes{job_id=\"1234\"} 2\n"
        "gpuaff_healthy{pid=\"41\",rank=\"LOCAL_RANK=1\",job_id=\"1234\"} 1\n"
        "gpuaff_healthy{pid=\"42\",rank=\"gpu=} 3\",job_id=\"1234\"} 0\n");
  // A job id is a label value like any other: escaped as the format asks.
  CHECK(with_job_label("gpuaff_nic_healthy 1\n", "a\"b") == "gpuaff_nic_healthy{job_id=\"a\\\"b\"} 1\n");
  // No sample line of one job's text is a sample line of another's.
  std::string a = with_job_label(text, "7"), b = with_job_label(text, "8");
  for (std::size_t at = 0, end; (end = a.find('\n', at)) != std::string::npos; at = end + 1) {
    std::string line = a.substr(at, end - at);
    if (line[0] != '#') CHECK(b.find(line) == std::string::npos);
  }
}

// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the text exposition format of Prometheus (version 0.0.4) asks of the
// text gpuaff writes into it (doctor --format prometheus, doctor.cpp).

#include <string>
#include <string_view>

#include "gpuaff/detail/parse.hpp"

namespace gpuaff::cli {

/// A label value: valid UTF-8 with no control character (what is not, a
/// byte of a garbled plan's text, is written \xHH as the text output writes
/// it), then backslash, double quote and newline escaped as the format asks.
/// Prometheus refuses a whole report for one label value that is not UTF-8.
inline std::string label_value(std::string_view raw) {
  std::string text = detail::escape_control(raw);
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

/// `text` (series gpuaff wrote) with label job_id="`job`" added to every
/// sample, or unchanged when `job` is empty. With `--job`, each job's watcher
/// on a shared node writes its own textfile, and node_exporter refuses a
/// series that two files both hold (gpuaff_plan_processes, the watch's
/// counters, the NICs' rates): the label keeps each job's series apart.
/// ("job" itself is the label Prometheus gives every scraped target.)
inline std::string with_job_label(std::string_view text, std::string_view job) {
  if (job.empty()) return std::string(text);
  const std::string label = "job_id=\"" + label_value(job) + "\"";
  std::string out;
  while (!text.empty()) {
    std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    std::size_t cut = line.find_first_of("{ ");
    if (line.empty() || line[0] == '#' || cut == std::string_view::npos) {
      out.append(line);
    } else if (line[cut] == '{') {  // name{a="x"} value: the label after the others; a value may hold '}'
      std::size_t close = line.rfind('}');
      out.append(line.substr(0, close)).append(",").append(label).append(line.substr(close));
    } else {  // name value
      out.append(line.substr(0, cut)).append("{").append(label).append("}").append(line.substr(cut));
    }
    if (end != std::string_view::npos) out += '\n';
  }
  return out;
}

}  // namespace gpuaff::cli

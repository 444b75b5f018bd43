// SPDX-License-Identifier: Apache-2.0
#pragma once
// Text that fits a width: --help's paragraphs and two-column lists, and
// topo's report lines. Widths count what a terminal shows: a UTF-8 character
// is one column, a colour escape (ESC [ ... m) none.

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <string_view>

namespace gpuaff::cli {

/// The columns `text` takes on a terminal.
inline std::size_t visible_width(std::string_view text) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c == 0x1B && i + 1 < text.size() && text[i + 1] == '[') {
      i += 2;
      while (i < text.size() && !(text[i] >= '@' && text[i] <= '~')) ++i;
      continue;
    }
    if ((c & 0xC0) != 0x80) ++n;  // not a UTF-8 continuation byte
  }
  return n;
}

/// The width help is wrapped to: COLUMNS when it holds a number (as git and
/// less read it), else the terminal's when stdout is one, else 80; at most
/// 100, as long lines read badly, and at least 40.
inline std::size_t help_width() {
  std::size_t width = 0;
  if (const char* c = std::getenv("COLUMNS"); c != nullptr && *c != '\0') {
    char* end = nullptr;
    long v = std::strtol(c, &end, 10);
    if (*end == '\0' && v > 0) width = static_cast<std::size_t>(v);
  }
  winsize ws{};
  if (width == 0 && ::isatty(STDOUT_FILENO) == 1 && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    width = ws.ws_col;
  if (width == 0) width = 80;
  return width < 40 ? 40 : width > 100 ? 100 : width;
}

/// `text` (one paragraph; runs of blanks are one) in lines of at most
/// `width` columns: the first starts with `first`, the others with `indent`
/// blanks. A word longer than a line is left whole.
inline std::string wrap_words(std::string_view text, std::size_t width, std::string_view first, std::size_t indent) {
  std::string out(first), line_indent(indent, ' ');
  std::size_t col = visible_width(first);
  bool line_empty = true;  // nothing after the indent yet
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    if (i == text.size()) break;
    std::size_t end = text.find(' ', i);
    if (end == std::string_view::npos) end = text.size();
    std::string_view word = text.substr(i, end - i);
    std::size_t w = visible_width(word);
    if (!line_empty && col + 1 + w > width) {
      out += '\n';
      out += line_indent;
      col = indent;
      line_empty = true;
    }
    if (!line_empty) {
      out += ' ';
      ++col;
    }
    out.append(word);
    col += w;
    line_empty = false;
    i = end;
  }
  return out + '\n';
}

/// A two-column entry: `term` after two blanks, then `text` from column
/// `column` (on the next line when the term reaches it), wrapped under itself.
inline std::string wrap_entry(std::string_view term, std::string_view text, std::size_t width, std::size_t column) {
  std::string first = "  " + std::string(term);
  std::size_t w = visible_width(first);
  if (text.empty()) return first + '\n';
  if (w + 2 > column) return first + '\n' + wrap_words(text, width, std::string(column, ' '), column);
  return wrap_words(text, width, first + std::string(column - w, ' '), column);
}

/// Every line of `text` longer than `width` columns broken into lines that
/// fit: after a blank (dropped) or a comma, the rest indented under the field
/// it continues (the column after the line's last run of two blanks before the
/// break, else the line's own indent and four more). A run without a blank or
/// comma longer than a line is cut where it must be.
inline std::string wrap_lines(std::string_view text, std::size_t width) {
  std::string out;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t nl = text.find('\n', at);
    std::string_view line = text.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
    at = nl == std::string_view::npos ? text.size() : nl + 1;
    std::string prefix;  // the continuation indent, once the line was broken
    while (visible_width(prefix) + visible_width(line) > width && prefix.size() < width) {
      std::size_t room = width - visible_width(prefix), col = 0, cut = std::string_view::npos, field = 0;
      std::size_t indent = line.find_first_not_of(' ');
      if (indent == std::string_view::npos) indent = 0;
      std::size_t last_fit = 0;  // the byte after the last character that fits
      for (std::size_t i = 0; i < line.size(); ++i) {
        auto c = static_cast<unsigned char>(line[i]);
        if (c == 0x1B) {  // an escape takes no column
          while (i < line.size() && !(line[i] >= '@' && line[i] <= '~' && line[i] != '[')) ++i;
          continue;
        }
        if ((c & 0xC0) != 0x80) {
          if (col == room) break;
          ++col;
        }
        last_fit = i + 1;
        if (i > indent && line[i] == ' ') cut = i;
        if (line[i] == ',' && i + 1 < line.size() && line[i + 1] != ' ') cut = i + 1;
        if (i > indent && line[i] == ' ' && line[i - 1] == ' ' && i + 1 < line.size() && line[i + 1] != ' ')
          field = visible_width(line.substr(0, i + 1));
      }
      if (cut == std::string_view::npos || cut <= indent) cut = last_fit;
      std::string_view head = line.substr(0, cut);
      while (!head.empty() && head.back() == ' ') head.remove_suffix(1);
      out += prefix;
      out.append(head);
      out += '\n';
      std::size_t next = cut;
      while (next < line.size() && line[next] == ' ') ++next;
      if (prefix.empty()) {  // the first break sets the indent of every continuation
        std::size_t hang = field != 0 ? field : indent + 4;
        if (hang + 20 > width) hang = indent + 4 + 20 > width ? 0 : indent + 4;  // too deep to leave room
        prefix.assign(hang, ' ');
      }
      line = line.substr(next);
    }
    out += prefix;
    out.append(line);
    if (nl != std::string_view::npos) out += '\n';
  }
  return out;
}

}  // namespace gpuaff::cli

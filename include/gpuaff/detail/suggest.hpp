// SPDX-License-Identifier: Apache-2.0
#pragma once
// "Did you mean ...?": the word of a list closest to a mistyped one, for
// messages about an unknown policy, option word or flag.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <array>
#include <cstddef>
#include <string_view>

namespace gpuaff {
inline namespace v0 {
namespace detail {

/// Words this long are not compared: edit_distance() gives them the cap.
inline constexpr std::size_t edit_distance_cap = 64;

/// The edit distance (insertions, deletions, substitutions, and swaps of two
/// neighbouring letters) between two words of at most 63 characters; 64
/// (edit_distance_cap) for longer ones, which are never close.
template <class = void>
constexpr int edit_distance(std::string_view a, std::string_view b) {
  constexpr std::size_t cap = edit_distance_cap;
  if (a.size() >= cap || b.size() >= cap) return static_cast<int>(cap);
  std::array<std::array<int, cap>, cap> d{};
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = static_cast<int>(i);
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = static_cast<int>(j);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      int best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
      if (d[i - 1][j - 1] + cost < best) best = d[i - 1][j - 1] + cost;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  }
  return d[a.size()][b.size()];
}

/// The candidate closest to `word` when it is close enough to be a typo of it
/// (at most a third of its letters off, at least one), or a candidate that
/// starts with `word` (an abbreviation of three letters or more); "" otherwise.
template <class Range>
constexpr std::string_view closest(std::string_view word, const Range& candidates) {
  const int limit = word.size() / 3 > 1 ? static_cast<int>(word.size() / 3) : 1;
  std::string_view best;
  int best_distance = limit + 1;
  for (std::string_view c : candidates) {
    int d = edit_distance(word, c);
    if (word.size() >= 3 && c.substr(0, word.size()) == word && d > 1) d = 1;  // an abbreviation
    // A word too long to compare is no typo of anything (its allowed distance,
    // a third of its length, would otherwise take the first candidate).
    if (d >= static_cast<int>(edit_distance_cap)) continue;
    if (d > 0 && d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff

// SPDX-License-Identifier: Apache-2.0
#pragma once
// A constexpr, allocation-free string with a fixed capacity. Errors and
// topology names use it so they can be built during constant evaluation
// (clang 14 rejects constexpr std::string) and copied without allocating.

#include "gpuaff/config.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gpuaff {
inline namespace v0 {

template <std::size_t N>
class FixedString {
 public:
  static constexpr std::size_t capacity = N;

  constexpr FixedString() = default;
  constexpr explicit FixedString(std::string_view s) { append(s); }
  constexpr FixedString& operator=(std::string_view s) {
    clear();
    return append(s);
  }

  // append, append_int and append_hex are out of line: error messages call
  // them a dozen times per function, and inlining every copy loop made each
  // TU that instantiates a policy spend about 0.4 s more in the optimizer
  // (and twice the code) for paths that only run on errors.

  /// Appends as much of `s` as fits; a string that had to be cut ends in "...".
  [[gnu::noinline]] constexpr FixedString& append(std::string_view s) {
    for (char c : s) push_back(c);
    return *this;
  }

  constexpr FixedString& push_back(char c) {
    if (size_ < N) {
      data_[size_++] = c;
    } else if (!truncated_) {
      truncated_ = true;
      for (std::size_t i = N >= 3 ? N - 3 : 0; i < N; ++i) data_[i] = '.';
    }
    data_[size_ < N ? size_ : N] = '\0';
    return *this;
  }

  [[gnu::noinline]] constexpr FixedString& append_int(long long v) {
    char buf[24]{};
    int n = 0;
    unsigned long long u = v < 0 ? 0ULL - static_cast<unsigned long long>(v)
                                 : static_cast<unsigned long long>(v);
    do {
      buf[n++] = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u != 0);
    if (v < 0) push_back('-');
    while (n > 0) push_back(buf[--n]);
    return *this;
  }

  [[gnu::noinline]] constexpr FixedString& append_hex(unsigned long long v, int min_digits = 1) {
    char buf[20]{};
    int n = 0;
    do {
      buf[n++] = "0123456789abcdef"[v & 0xf];
      v >>= 4;
    } while (v != 0 || n < min_digits);
    while (n > 0) push_back(buf[--n]);
    return *this;
  }

  constexpr std::string_view view() const { return {data_.data(), size_}; }
  constexpr const char* c_str() const { return data_.data(); }
  constexpr std::size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr bool truncated() const { return truncated_; }
  constexpr void clear() {
    size_ = 0;
    truncated_ = false;
    data_[0] = '\0';
  }

  constexpr operator std::string_view() const { return view(); }  // NOLINT
  friend constexpr bool operator==(const FixedString& a, const FixedString& b) {
    return a.view() == b.view();
  }
  friend constexpr bool operator==(const FixedString& a, std::string_view b) {
    return a.view() == b;
  }

 private:
  std::array<char, N + 1> data_{};
  std::size_t size_ = 0;
  bool truncated_ = false;
};

}  // namespace v0
}  // namespace gpuaff

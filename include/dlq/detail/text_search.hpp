// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file detail/text_search.hpp
/// The one substring search of dlq's text conditions: the library's filters
/// (Filter::error_contains, payload_contains: exact bytes) and the console's
/// (case-insensitive for ASCII letters). Linear in the stored text whatever the condition
/// holds: a condition of up to 32 bytes is compared at each position (at most 32 compares a
/// byte; exact ones through std::string_view::find), a longer one by Knuth-Morris-Pratt (a
/// table of its length, each stored byte compared an amortised twice). A condition that
/// repeats the text's start ("AAAA…", the base64 of zeros) so costs no more than a short one:
/// a plain find compared the whole condition at each byte (4000 bytes against 1 MiB: 4 s
/// folding case, round 12; 64 KiB exact: seconds a MiB).
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace dlq {
namespace detail {

/// True when `needle` occurs in `hay`; `fold_case`: ASCII letters compare case-insensitively.
inline bool contains(std::string_view hay, std::string_view needle, bool fold_case) {
  if (needle.empty()) return true;
  if (needle.size() > hay.size()) return false;
  const auto fold = [fold_case](char c) {
    return fold_case && c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  };
  const std::size_t m = needle.size();
  if (m <= 32) {
    if (!fold_case) return hay.find(needle) != std::string_view::npos;
    for (std::size_t i = 0; i + m <= hay.size(); ++i) {
      std::size_t j = 0;
      while (j < m && fold(hay[i + j]) == fold(needle[j]))
        ++j;
      if (j == m) return true;
    }
    return false;
  }
  // border[i]: the length of the longest proper prefix of needle[0, i] that ends at i
  std::vector<std::size_t> border(m, 0);
  for (std::size_t i = 1, k = 0; i < m; ++i) {
    while (k > 0 && fold(needle[i]) != fold(needle[k]))
      k = border[k - 1];
    if (fold(needle[i]) == fold(needle[k])) ++k;
    border[i] = k;
  }
  for (std::size_t i = 0, k = 0; i < hay.size(); ++i) {
    while (k > 0 && fold(hay[i]) != fold(needle[k]))
      k = border[k - 1];
    if (fold(hay[i]) == fold(needle[k]) && ++k == m) return true;
  }
  return false;
}

}  // namespace detail
}  // namespace dlq

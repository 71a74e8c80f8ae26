// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redact.hpp
/// Masking credentials in URLs before they are printed: one rule, used by every message of
/// the library (the Redis URL parser's errors), the operator console (its JSON errors and
/// log) and dlqctl (its banners and errors). No dependencies.
///
/// The rule follows the Redis URL parser (dlq::redis::parse_url), which takes everything
/// before the last '@' ahead of the query as the user-info, so a password may hold '@', '/'
/// and ':':
///  - the whole user-info is replaced: `scheme://user:password@host` → `scheme://***@host`
///    (the user too: with a lone password, or a password written without its leading ':',
///    what looks like a user name is a secret);
///  - a URL whose part after `://` starts with '/' (sqlite:///path, unix:///path) has no
///    user-info: an '@' in its path stays;
///  - every `password=` value is replaced (`?password=…` of unix:// and redis:// URLs);
///  - %-escapes are not decoded: `%40` stays inside the masked part.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dlq {

namespace detail {

/// True for a character that ends a URL inside free text: whitespace or a quote.
inline bool ends_url_in_text(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\'' || c == '"';
}

/// Masks the user-info of the URL whose authority starts at `from` and that ends at `to`
/// (exclusive) in `text` (see the file comment); returns the new end.
inline std::size_t mask_userinfo(std::string& text, std::size_t from, std::size_t to) {
  std::size_t end = text.find('?', from);
  if (end == std::string::npos || end > to) end = to;
  if (end <= from || text[from] == '/') return to;
  const std::size_t at = text.rfind('@', end - 1);
  if (at == std::string::npos || at < from) return to;
  text.replace(from, at - from, "***");
  return to + 3 - (at - from);
}

/// Masks every `password=` value in `text` from `from`: up to '&', or also up to a
/// character that ends a URL in free text when `in_text`.
inline void mask_password_values(std::string& text, std::size_t from, bool in_text) {
  static constexpr std::string_view key = "password=";
  while ((from = text.find(key, from)) != std::string::npos) {
    const std::size_t start = from + key.size();
    std::size_t end = start;
    while (end < text.size() && text[end] != '&' && !(in_text && ends_url_in_text(text[end])))
      ++end;
    text.replace(start, end - start, "***");
    from = start + 3;
  }
}

}  // namespace detail

/// `url` (one URL, the whole string) with its credentials replaced by "***" (see the file
/// comment): "redis://:p@ss/w:rd@host:6379/0" → "redis://***@host:6379/0".
inline std::string redact_url(std::string_view url) {
  std::string out(url);
  const std::size_t scheme = out.find("://");
  if (scheme != std::string::npos) detail::mask_userinfo(out, scheme + 3, out.size());
  detail::mask_password_values(out, 0, false);
  return out;
}

/// `text` (a message) with the credentials of every URL in it replaced by "***" (see the
/// file comment); a URL ends at whitespace or a quote.
inline std::string redact_secrets(std::string text) {
  std::size_t from = 0;
  while ((from = text.find("://", from)) != std::string::npos) {
    const std::size_t start = from + 3;
    std::size_t end = start;
    while (end < text.size() && !detail::ends_url_in_text(text[end]))
      ++end;
    from = detail::mask_userinfo(text, start, end);
  }
  detail::mask_password_values(text, 0, true);
  return text;
}

}  // namespace dlq

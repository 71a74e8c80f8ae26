// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redact.hpp
/// Masking credentials in URLs before they are printed: one rule, used by every message of
/// the library (the Redis URL parser's errors), the operator console (its JSON errors and
/// log) and dlqctl (its banners and errors). No dependencies.
///
/// The rule errs on the side of masking too much: a URL may be garbled (a password holding
/// '?', '#', '&' or ' ' that was not %-encoded), and no part of a secret may be printed.
///  - the user-info is everything after `://` up to the LAST '@' of the URL, whatever stands
///    between ('?', '#', '/', ':', more '@'): it is replaced, user name too
///    (`scheme://user:pa?ss@host` → `scheme://***@host`). An '@' in a query value (a
///    `ca_file=/a@b` path) therefore masks the host too — never a leak;
///  - a URL without '@' whose authority reads as `user:password` (no port number after its
///    ':') is masked up to its path: `redis://alice:pw` → `redis://***`; a comma-separated
///    list of hosts (redis+sentinel://h1:26379,h2:26379/m) is kept when every item is
///    `host`, `host:port` or `[ipv6]:port`;
///  - a URL of a file scheme (`unix`, `redis+unix`, `sqlite`, `file`) whose part after `://`
///    starts with '/' (sqlite:///path, unix:///path) has no user-info: an '@' in its path
///    stays. Any other scheme's `:///` is masked like `://` (redis:///:pw@host is parsed as
///    user '/' and password 'pw');
///  - a whole string (redact_url) without `://` holding an '@' (a mistyped scheme:
///    `redis:/:pw@host`, `:pw@host`) is masked up to its last '@': `***@host`;
///  - the value of every `key=value` parameter whose key names a secret — it contains
///    `pass` (password, passwd, sentinel-password, tls_key_passphrase), `pwd`, `secret`,
///    `token`, `auth` or `credential`, in any case — is replaced up to the next `&key=`
///    (so a value holding '&', ';', '#' or '@' is masked whole) or the end of the URL;
///  - in a message (redact_secrets) a URL and a value end at whitespace or a quote;
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

/// True for a character of a parameter name (`key` of `key=value`).
inline bool is_parameter_name_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '-' || c == '.';
}

/// True when the parameter name `key` names a secret (see the file comment), in any case.
inline bool is_secret_parameter(std::string_view key) {
  std::string lower(key);
  for (char& c : lower)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  for (const std::string_view word : {"pass", "pwd", "secret", "token", "auth", "credential"})
    if (lower.find(word) != std::string::npos) return true;
  return false;
}

/// True when `text` at `i` holds a parameter: a name then '='.
inline bool starts_parameter(const std::string& text, std::size_t i) noexcept {
  const std::size_t name = i;
  while (i < text.size() && is_parameter_name_char(text[i]))
    ++i;
  return i > name && i < text.size() && text[i] == '=';
}

/// Masks the authority (up to '/', '?' or '#') starting at `from` of a URL ending at `to`
/// that has no '@' but reads as `user:password` (after its first ':' stands something that
/// is not a port number; `[ipv6]` excepted): a password whose "@host" was forgotten.
/// Returns the new end.
inline std::size_t mask_lost_userinfo(std::string& text, std::size_t from, std::size_t to) {
  std::size_t end = from;
  while (end < to && text[end] != '/' && text[end] != '?' && text[end] != '#')
    ++end;
  // A list of hosts (redis+sentinel://h1:26379,h2:26379/…) reads as addresses when every
  // item does: `host`, `host:port` or `[ipv6]:port`.
  bool addresses = true;
  for (std::size_t item = from; item < end && addresses;) {
    std::size_t stop = text.find(',', item);
    if (stop == std::string::npos || stop > end) stop = end;
    std::size_t colon = text.find(':', text[item] == '[' ? text.find(']', item) : item);
    if (colon != std::string::npos && colon < stop) {
      bool port = colon + 1 < stop;
      for (std::size_t i = colon + 1; i < stop; ++i)
        port = port && text[i] >= '0' && text[i] <= '9';
      addresses = port;
    }
    item = stop + 1;
  }
  if (addresses) return to;
  text.replace(from, end - from, "***");
  return to + 3 - (end - from);
}

/// True when the scheme that ends at `colon` (the ':' of "://") in `text` names files
/// (unix, redis+unix, sqlite, file; any case): after "://" + '/' comes a path, no user-info.
inline bool is_file_scheme(const std::string& text, std::size_t colon) {
  std::size_t start = colon;
  while (start > 0 && (is_parameter_name_char(text[start - 1]) || text[start - 1] == '+'))
    --start;
  std::string scheme = text.substr(start, colon - start);
  for (char& c : scheme)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return scheme == "unix" || scheme == "redis+unix" || scheme == "sqlite" || scheme == "file";
}

/// Masks the user-info of the URL whose authority starts at `from` and that ends at `to`
/// (exclusive) in `text`: everything up to the last '@' before `to` (see the file
/// comment); returns the new end.
inline std::size_t mask_userinfo(std::string& text, std::size_t from, std::size_t to) {
  if (to <= from || (text[from] == '/' && is_file_scheme(text, from - 3))) return to;
  const std::size_t at = text.rfind('@', to - 1);
  if (at == std::string::npos || at < from) return mask_lost_userinfo(text, from, to);
  text.replace(from, at - from, "***");
  return to + 3 - (at - from);
}

/// Masks the value of every secret parameter in `text` (see the file comment): up to the
/// next `&name=`, the end, or also a character that ends a URL in free text when `in_text`.
inline void mask_secret_values(std::string& text, bool in_text) {
  std::size_t eq = 0;
  while ((eq = text.find('=', eq)) != std::string::npos) {
    std::size_t name = eq;
    while (name > 0 && is_parameter_name_char(text[name - 1]))
      --name;
    const std::size_t start = eq + 1;
    if (name == eq || !is_secret_parameter(std::string_view(text).substr(name, eq - name))) {
      eq = start;
      continue;
    }
    std::size_t end = start;
    while (end < text.size() && !(in_text && ends_url_in_text(text[end])) &&
           !(text[end] == '&' && starts_parameter(text, end + 1)))
      ++end;
    text.replace(start, end - start, "***");
    eq = start + 3;
  }
}

}  // namespace detail

/// `url` (one URL, the whole string) with its credentials replaced by "***" (see the file
/// comment): "redis://:p?ss/w:rd@host:6379/0" → "redis://***@host:6379/0".
inline std::string redact_url(std::string_view url) {
  std::string out(url);
  detail::mask_secret_values(out, false);
  const std::size_t scheme = out.find("://");
  if (scheme != std::string::npos) {
    detail::mask_userinfo(out, scheme + 3, out.size());
  } else if (const std::size_t at = out.rfind('@'); at != std::string::npos) {
    out.replace(0, at, "***");  // a mistyped scheme: redis:/:pw@host (see the file comment)
  }
  return out;
}

/// `text` (a message) with the credentials of every URL in it replaced by "***" (see the
/// file comment); a URL ends at whitespace or a quote.
inline std::string redact_secrets(std::string text) {
  detail::mask_secret_values(text, true);
  std::size_t from = 0;
  while ((from = text.find("://", from)) != std::string::npos) {
    const std::size_t start = from + 3;
    std::size_t end = start;
    while (end < text.size() && !detail::ends_url_in_text(text[end]))
      ++end;
    from = detail::mask_userinfo(text, start, end);
  }
  return text;
}

}  // namespace dlq

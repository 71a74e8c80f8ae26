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
///  - a URL without '@' whose authority reads as `user:password` (no host before its ':', or
///    no port after it: 1..65535 without a leading zero, detail::is_port_text, the parser's
///    rule too) is masked to its end (the password may hold '/', '?', '#':
///    `redis://u:pa/ss` → `redis://***`): `redis://alice:pw` → `redis://***`, and so are
///    all-digit passwords `redis://:12345`, `redis://u:123456`; a comma-separated list of
///    hosts (redis+sentinel://h1:26379,h2:26379/m) is kept when every item is `host`,
///    `host:port` or `[ipv6]:port`;
///  - a URL of a file scheme (`unix`, `redis+unix`, `sqlite`, `file`) whose part after `://`
///    starts with '/' (sqlite:///path, unix:///path) has no user-info: an '@' in its path
///    stays. Any other scheme's `:///` is masked like `://` (redis:///:pw@host is parsed as
///    user '/' and password 'pw');
///  - a whole string (redact_url) without `://` holding an '@' (a mistyped scheme:
///    `redis:/:pw@host`, `:pw@host`) is masked up to its last '@': `***@host`;
///  - the value of every `key=value` parameter whose key names a secret — it contains
///    `pass` (password, passwd, sentinel-password, tls_key_passphrase), `pwd`, `secret`,
///    `token`, `auth` or `credential`, in any case — is replaced up to the next `&key=`
///    whose key is a parameter a dlq URL knows (detail::is_url_parameter) or a secret's
///    (so a value holding '&', ';', '#', '@' or `&x=` is masked whole) or the end of the
///    URL: `?password=pa&x=y&db=1` → `?password=***&db=1`;
///  - in a message (redact_secrets) a URL and a value end at whitespace or a quote — except
///    a URL whose first word ends inside its authority (no '/', '?' or '#' after `://`): a
///    password may hold a space (`redis://u:pa ss@host`), so it runs on to the last '@'
///    before the end of the line, a quote or the next `://`. That may mask a host too
///    (`redis://h:1 is down, ask ops@example.com` → `redis://***@example.com`) — never a
///    leak;
///  - %-escapes are not decoded: `%40` stays inside the masked part.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dlq {

namespace detail {

/// Test hook: the characters the redaction of this thread has examined, copied or moved since
/// it was last set to 0 (tests/test_redact.cpp bounds it by the input's length: linear work).
inline std::size_t& redact_work() noexcept {
  static thread_local std::size_t work = 0;
  return work;
}

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

/// True when `key` is a parameter a dlq URL knows: those of dlq::redis::parse_url (exact
/// case, as the parser reads them; sqlite:// URLs take none). Any other `&key=` after a
/// secret value may be a piece of it — a password holding an unencoded "&x=", which the
/// parser refuses without naming it — so it does not end the value.
inline bool is_url_parameter(std::string_view key) noexcept {
  for (const std::string_view known :
       {"db", "user", "username", "password", "ca_file", "ca_dir", "cert_file", "key_file",
        "server_name", "insecure_skip_verify", "sentinel_user", "sentinel_username",
        "sentinel_password"})
    if (key == known) return true;
  return false;
}

/// True when `text` at `i` holds a parameter that ends a secret value: a name then '=',
/// the name one a dlq URL knows (is_url_parameter) or itself a secret's (masked in turn).
inline bool starts_parameter(const std::string& text, std::size_t i) {
  const std::size_t name = i;
  while (i < text.size() && is_parameter_name_char(text[i]))
    ++i;
  if (i == name || i >= text.size() || text[i] != '=') return false;
  const std::string_view key = std::string_view(text).substr(name, i - name);
  return is_url_parameter(key) || is_secret_parameter(key);
}

/// True when `text` is a TCP port as a URL writes it: 1..65535 in decimal, without a leading
/// zero. The one rule of the URL parser (dlq::redis::parse_url refuses any other port) and of
/// the redaction (anything else after `host:` may be a password whose "@host" was lost —
/// an all-digit password included: `redis://:12345`, `redis://u:123456`).
inline bool is_port_text(std::string_view text) noexcept {
  if (text.empty() || text.size() > 5 || text.front() == '0') return false;
  long v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  return v <= 65535;
}

/// Masks the rest, from `from` to `to`, of a URL without '@' whose authority (up to '/', '?'
/// or '#') reads as `user:password` (before its first ':' stands no host, or after it
/// something that is not a port, is_port_text; `[ipv6]` excepted): a password whose "@host"
/// was forgotten, and that may hold '/', '?' or '#' itself. Returns the new end.
inline std::size_t mask_lost_userinfo(std::string& text, std::size_t from, std::size_t to) {
  std::size_t end = from;
  while (end < to && text[end] != '/' && text[end] != '?' && text[end] != '#')
    ++end;
  // Each item of a list of hosts (redis+sentinel://h1:26379,h2:26379/…) must read as an
  // address: `host`, `host:port` (a host before the ':', is_port_text after it) or
  // `[ipv6]` with an optional `:port`.
  bool addresses = true;
  for (std::size_t item = from; item < end && addresses; ) {
    std::size_t stop = text.find(',', item);
    redact_work() += (stop == std::string::npos ? text.size() : stop) - item;
    if (stop == std::string::npos || stop > end) stop = end;
    std::size_t after_host = item;
    if (text[item] == '[') {
      const std::size_t close = text.find(']', item);
      addresses = close != std::string::npos && close < stop;
      after_host = addresses ? close + 1 : stop;
    }
    const std::size_t colon = text.find(':', after_host);
    if (addresses && colon != std::string::npos && colon < stop) {
      const std::string_view port = std::string_view(text).substr(colon + 1, stop - colon - 1);
      addresses = colon > item && is_port_text(port);  // not `:secret`, `user:secret`
    }
    item = stop + 1;
  }
  if (addresses) return to;
  // a password may hold '/', '?' and '#': what follows its first one is no path to show
  text.replace(from, to - from, "***");
  return from + 3;
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
  redact_work() += to - (at == std::string::npos ? 0 : at) + text.size() - from;
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
    redact_work() += end - name + text.size() - start;
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

namespace detail {

/// The end of the URL in free text whose authority starts at `start` and whose first word
/// ends at `end` (whitespace or a quote): `end`, unless that word ends inside the authority
/// (no '/', '?' or '#') and an '@' follows before the end of the line, a quote or the next
/// "://" — a password with a space, `redis://u:pa ss@host` — then the end of the word of the
/// last such '@'.
inline std::size_t url_end_in_text(const std::string& text, std::size_t start, std::size_t end) {
  for (std::size_t i = start; i < end; ++i)
    if (text[i] == '/' || text[i] == '?' || text[i] == '#') return end;
  std::size_t last_at = std::string::npos;
  for (std::size_t i = end; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n' || c == '\r' || c == '\'' || c == '"' || text.compare(i, 3, "://") == 0) break;
    if (c == '@') last_at = i;
  }
  if (last_at == std::string::npos) return end;
  std::size_t word_end = last_at;
  while (word_end < text.size() && !ends_url_in_text(text[word_end]))
    ++word_end;
  return word_end;
}

}  // namespace detail

/// `text` (a message) with the credentials of every URL in it replaced by "***" (see the
/// file comment); a URL ends at whitespace or a quote, unless its first word ends inside its
/// authority and an '@' follows on the line (detail::url_end_in_text).
inline std::string redact_secrets(std::string text) {
  detail::mask_secret_values(text, true);
  std::size_t from = 0;
  while ((from = text.find("://", from)) != std::string::npos) {
    const std::size_t start = from + 3;
    std::size_t end = start;
    while (end < text.size() && !detail::ends_url_in_text(text[end]))
      ++end;
    from = detail::mask_userinfo(text, start, detail::url_end_in_text(text, start, end));
  }
  return text;
}

}  // namespace dlq

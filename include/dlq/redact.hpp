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
///  - a user name may hold '/', '?', '#' or '@' too (`redis://us/er:pw`, `redis://us@er:pw`
///    with their "@host" lost): the whole URL is masked when what follows its last '@' (or,
///    without one, its authority) is no list of addresses (after an '@' any digits pass for
///    a port: `h:99999` is the parser's complaint and stays readable), or — in a URL of a
///    scheme of dlq::redis::parse_url, whose path is only a db or a master name — when a
///    ':' stands after the host list outside every parameter value (`/er:pw`, `?er:pw`,
///    `#er:pw`, `?x=1&er:pw`): `redis://us/er:pw` → `redis://***`. In a message, closing
///    punctuation after a URL (`)`, `,`, `.`, `:` …) is no part of it;
///  - a URL of a file scheme (`unix`, `redis+unix`, `sqlite`, `file`) whose part after `://`
///    starts with '/' (sqlite:///path, unix:///path) has no user-info: an '@' in its path
///    stays. Any other scheme's `:///` is masked like `://` (redis:///:pw@host is parsed as
///    user '/' and password 'pw');
///  - a whole string (redact_url) without `://` holding an '@' (a mistyped scheme:
///    `redis:/:pw@host`, `:pw@host`) is masked up to its last '@': `***@host`;
///  - the value of every `key=value` parameter whose key names a secret — it contains
///    `pass` (password, passwd, sentinel-password, tls_key_passphrase), `pwd`, `secret`,
///    `token`, `auth` or `credential`, in any case — is replaced up to the first '&' after
///    which every parameter to the URL's end is a secret's (masked in turn) or one the
///    parser takes as it stands (detail::takes_parameter): a key a dlq URL knows
///    (detail::is_url_parameter) with a value dlq::redis::parse_url accepts (db 0..1048576,
///    insecure_skip_verify a boolean, a TLS text not empty, whole %-escapes), in a URL whose
///    scheme takes it (TLS keys in rediss://, sentinel_ keys in redis+sentinel://; a text
///    naming no scheme, or another one: any). Else to the URL's end. A password may hold an
///    unencoded "&db=x": what the parser refuses after the value may be a piece of it, so a
///    value holding '&', ';', '#', '@', `&x=` or `&db=x` is masked whole
///    (`?password=pa&db=x` → `?password=***`), while what it takes is what the URL means and
///    stays readable (`?password=pa&x=y&db=1` → `?password=***&db=1`: a password ending in a
///    valid "&db=1" is read as the parser reads it — write '&' as %26). Checks across
///    parameters (cert_file without key_file) are not made;
///  - in a message (redact_secrets) a password may hold whitespace and quotes (parse_url
///    takes them), and nothing tells where it ends, so the rule over-masks to the end of the
///    line rather than leak (round 10):
///     - a URL's first word ends at whitespace or a quote, and ends the URL when it reached
///       its path ('/', '?' or '#' after `://`) — unless it holds no '@' and reads as
///       `user:password` whose "@host" was lost (masked whole: `redis://u:pa/ss pa@host`),
///       or holds an '@' and is garbled (detail::garbled_word: its user-info holds '/', '?',
///       '#' or a character RFC 3986 refuses there, its hosts are not plain names or
///       `[ipv6]` with digits for ports, or its path and query hold '#' or a character RFC
///       3986 refuses: `redis://:pa@?ss wd@host`). A password holding an '@' followed by a
///       plain host and a well-formed path or query, and then a space or a quote
///       (`redis://:pa@h/0 ss@host`), cannot be told from a URL and the next word: that
///       one form still shows the part after the space (fuzz, passwords of letters and all
///       punctuation: 8 of 100,000 messages).
///       Else (it ended inside its authority, or reads so) the URL runs on, over whitespace
///       and quotes, to the word of the last '@' before the end of the line or the next
///       `://` (`redis://u:pa'ss@host` → `redis://***@host`) — past a `://` too when the
///       first word holds no '@' and reads as `user:password` (`redis://:pa ss://x@host`
///       → `redis://***@host`, round 11; a first word holding an '@', `redis://:p@a
///       ss://x@host`, still stops there, so two URLs on a line stay apart). That may mask a
///       host too (`'redis://h:1' is down, ask ops@example.com` → `'redis://***@example.com`);
///     - a secret parameter's value runs to the end of its line, whitespace and quotes
///       included (`?password=pa ss now` → `?password=***`; the rule of '&' above applies at
///       the line's end), unless it is `***` before whitespace, a quote or the end (a value
///       masked already, by redact_url: the message after it stays). A password that is
///       itself `***` followed by a space is the one form this reads wrongly;
///  - %-escapes are not decoded: `%40` stays inside the masked part.
#pragma once

#include <algorithm>
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
/// parser refuses without naming it — so it does not end the value (takes_parameter).
inline bool is_url_parameter(std::string_view key) noexcept {
  for (const std::string_view known :
       {"db", "user", "username", "password", "ca_file", "ca_dir", "cert_file", "key_file",
        "server_name", "insecure_skip_verify", "sentinel_user", "sentinel_username",
        "sentinel_password"})
    if (key == known) return true;
  return false;
}

/// The first position of `c` in `text` within [from, to), or `to`; counted (redact_work).
inline std::size_t find_in(std::string_view text, char c, std::size_t from, std::size_t to) {
  std::size_t i = from;
  while (i < to && text[i] != c)
    ++i;
  redact_work() += i - from;
  return i;
}

/// Appends `text`'s [from, to) to `out`; counted (redact_work).
inline void copy_to(std::string& out, std::string_view text, std::size_t from, std::size_t to) {
  redact_work() += to - from;
  out.append(text.substr(from, to - from));
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

/// A part of a text to replace by "***": [from, to) when `any` (it may be empty: "://@").
struct Mask {
  std::size_t from = 0, to = 0;
  bool any = false;
};

/// True when `text`'s [from, end), an authority, is a list of addresses: each item (a
/// comma-separated list of hosts, redis+sentinel://h1:26379,h2:26379/…) is `host`,
/// `host:port` (a host before the ':') or `[ipv6]` with an optional `:port`. The port is
/// is_port_text, or any digits when `any_digits` (after an '@': `h:99999` is the parser's
/// complaint, shown). Else the authority may be `user:password` whose "@host" was lost.
inline bool reads_as_addresses(std::string_view text, std::size_t from, std::size_t end,
                               bool any_digits) {
  for (std::size_t item = from; item < end;) {
    const std::size_t stop = find_in(text, ',', item, end);
    std::size_t after_host = item;
    if (text[item] == '[') {
      const std::size_t close = find_in(text, ']', item, stop);
      if (close == stop) return false;
      after_host = close + 1;
    }
    const std::size_t colon = find_in(text, ':', after_host, stop);
    if (colon < stop) {
      const std::string_view port = text.substr(colon + 1, stop - colon - 1);
      bool digits = !port.empty();
      for (const char c : port)
        digits = digits && c >= '0' && c <= '9';
      if (colon == item || !(any_digits ? digits : is_port_text(port))) return false;
    }
    item = stop + 1;
  }
  return true;
}

/// True when `text`'s [from, to) — what follows the host list of a Redis URL: its path and
/// query — holds a ':' outside every parameter value (the part after '=' of a `key=value`
/// after the first '?'): the ':' between a user name holding '/', '?', '#' or '@' and its
/// password, whose "@host" was lost (`redis://us/er:pw`).
inline bool stray_colon(std::string_view text, std::size_t from, std::size_t to) {
  bool query = false;
  bool value = false;
  for (std::size_t i = from; i < to; ++i) {
    const char c = text[i];
    if (c == ':' && !value) {
      redact_work() += i - from;
      return true;
    }
    if (c == '?' && !query) query = true;
    if (query && (c == '&' || c == '=')) value = c == '=';
  }
  redact_work() += to - from;
  return false;
}

/// True for a scheme (lower case) of dlq::redis::parse_url: redis, rediss, unix, redis+unix,
/// redis+sentinel.
inline bool is_redis_scheme(std::string_view scheme) noexcept {
  return scheme == "redis" || scheme == "rediss" || scheme == "unix" || scheme == "redis+unix" ||
         scheme == "redis+sentinel";
}

/// The scheme that ends at `colon` (the ':' of "://") in `text`, in lower case.
inline std::string scheme_before(std::string_view text, std::size_t colon) {
  std::size_t start = colon;
  while (start > 0 && (is_parameter_name_char(text[start - 1]) || text[start - 1] == '+'))
    --start;
  redact_work() += 2 * (colon - start);
  std::string scheme(text.substr(start, colon - start));
  for (char& c : scheme)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return scheme;
}

/// True when the scheme that ends at `colon` (the ':' of "://") in `text` names files
/// (unix, redis+unix, sqlite, file; any case): after "://" + '/' comes a path, no user-info.
inline bool is_file_scheme(std::string_view text, std::size_t colon) {
  const std::string scheme = scheme_before(text, colon);
  return scheme == "unix" || scheme == "redis+unix" || scheme == "sqlite" || scheme == "file";
}

/// The end of `text`'s [from, to) without the punctuation that may close a sentence or a
/// bracket after a URL in a message: `(store redis://h:6379)`.
inline std::size_t without_closing_punctuation(std::string_view text, std::size_t from,
                                               std::size_t to) {
  const std::string_view closing = ")]}>,.;:!";
  while (to > from && closing.find(text[to - 1]) != std::string_view::npos)
    --to;
  return to;
}

/// The mask of the user-info of the URL whose authority starts at `from` and that ends at
/// `to` (exclusive) in `text`: everything up to the last '@' before `to` (searched for back
/// to `from` only), or the whole URL when what follows that '@' (or, without one, the
/// authority) reads as `user:password` whose "@host" was lost (see the file comment).
/// `in_text`: a message, whose closing punctuation after the URL is no part of it.
inline Mask userinfo_mask(std::string_view text, std::size_t from, std::size_t to,
                          bool in_text) {
  if (to <= from || (text[from] == '/' && is_file_scheme(text, from - 3))) return {};
  std::size_t at = to;
  while (at > from && text[at - 1] != '@')
    --at;
  redact_work() += to - at;
  const std::size_t end = in_text ? without_closing_punctuation(text, at, to) : to;
  std::size_t authority = at;
  while (authority < end && text[authority] != '/' && text[authority] != '?' &&
         text[authority] != '#')
    ++authority;
  redact_work() += authority - at;
  // a password may hold '/', '?' and '#': what follows its first one is no path to show
  if (!reads_as_addresses(text, at, authority, at > from) ||
      (is_redis_scheme(scheme_before(text, from - 3)) && stray_colon(text, authority, end)))
    return Mask{from, to, true};
  return at > from ? Mask{from, at - 1, true} : Mask{};
}

/// True when `text` is a db number dlq::redis::parse_url takes: 1..9 digits, 0..1048576.
inline bool is_db_text(std::string_view text) noexcept {
  if (text.empty() || text.size() > 9) return false;
  long v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  return v <= (1L << 20);
}

/// True when every '%' of `text` starts an escape of two hex digits, as the parser requires.
inline bool decodes(std::string_view text) noexcept {
  const auto hex = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') continue;
    if (i + 2 >= text.size() || !hex(text[i + 1]) || !hex(text[i + 2])) return false;
    i += 2;
  }
  return true;
}

/// True when `piece` (`key=value`, after a '&') is a parameter that ends a secret value in a
/// URL of `scheme` (lower case; empty when none is named): a secret's (masked in turn), or one
/// dlq::redis::parse_url takes as it stands (see the file comment).
inline bool takes_parameter(std::string_view scheme, std::string_view piece) {
  redact_work() += 2 * piece.size();
  const std::size_t eq = piece.find('=');
  if (eq == std::string_view::npos || eq == 0) return false;
  const std::string_view key = piece.substr(0, eq);
  const std::string_view value = piece.substr(eq + 1);
  for (const char c : key)
    if (!is_parameter_name_char(c)) return false;
  if (is_secret_parameter(key)) return true;
  if (!is_url_parameter(key) || !decodes(value)) return false;
  const bool redis = is_redis_scheme(scheme);
  const bool tls = key == "ca_file" || key == "ca_dir" || key == "cert_file" ||
                   key == "key_file" || key == "server_name" || key == "insecure_skip_verify";
  if (redis && tls && scheme != "rediss") return false;
  if (redis && key.substr(0, 9) == "sentinel_" && scheme != "redis+sentinel") return false;
  if (key == "db") return is_db_text(value);
  if (key == "insecure_skip_verify") {
    for (const std::string_view b : {"true", "1", "yes", "false", "0", "no"})
      if (value == b) return true;
    return false;
  }
  return !tls || !value.empty();
}

/// The first '&' of `text`'s [from, to) after which every parameter up to `to` is one that
/// ends a secret value in a URL of `scheme` (takes_parameter); `to` when there is none.
inline std::size_t taken_tail(std::string_view text, std::string_view scheme, std::size_t from,
                              std::size_t to) {
  std::size_t tail = to;
  for (std::size_t piece_end = to; piece_end > from;) {
    std::size_t amp = piece_end;
    while (amp > from && text[amp - 1] != '&')
      --amp;
    redact_work() += piece_end - amp;
    if (amp == from || !takes_parameter(scheme, text.substr(amp, piece_end - amp))) break;
    tail = amp - 1;
    piece_end = amp - 1;
  }
  return tail;
}

/// Masks the value of every secret parameter in `text`'s [from, to) — one URL, or one word
/// of a message — into `out` (text[0, copied) is in it already); returns the new `copied`.
inline std::size_t mask_values_in(std::string& out, std::string_view text, std::size_t copied,
                                  std::size_t from, std::size_t to) {
  const std::size_t colon = text.substr(0, to).find("://", from);
  redact_work() += (colon == std::string_view::npos ? to : colon) - from;
  const std::string scheme = colon == std::string_view::npos ? "" : scheme_before(text, colon);
  const std::size_t tail = taken_tail(text, scheme, from, to);
  for (std::size_t eq = from; (eq = find_in(text, '=', eq, to)) < to;) {
    std::size_t name = eq;
    while (name > from && is_parameter_name_char(text[name - 1]))
      --name;
    redact_work() += 2 * (eq - name);  // the walk back, and the key's copy in lower case
    const std::size_t start = eq + 1;
    if (name == eq || !is_secret_parameter(text.substr(name, eq - name))) {
      eq = start;
      continue;
    }
    // up to the first '&' after which the parser takes every parameter
    const std::size_t end = tail >= start ? tail : find_in(text, '&', start, to);
    copy_to(out, text, copied, start);
    out += "***";
    copied = end;
    eq = end;
  }
  return copied;
}

/// True for a character that ends a line of a message: a secret value in free text runs on
/// to it (a password may hold whitespace and quotes).
inline bool ends_line(char c) noexcept {
  return c == '\n' || c == '\r';
}

/// True when `text` at `at` is a value already masked: "***" at the end of `text` or before
/// whitespace or a quote (a message built from a redacted URL keeps what follows it).
inline bool masked_already(std::string_view text, std::size_t at) {
  redact_work() += 4;
  return text.compare(at, 3, "***") == 0 &&
         (at + 3 == text.size() || ends_url_in_text(text[at + 3]));
}

/// Masks the value of every secret parameter in `text` (see the file comment): a whole URL,
/// or, when `in_text`, a message, each of whose lines is one piece (a value runs on over
/// whitespace and quotes), except that a value already masked ("***") ends there.
inline void mask_secret_values(std::string& text, bool in_text) {
  std::string out;
  std::size_t copied = 0;  // text[0, copied) is in `out`
  for (std::size_t from = 0; from < text.size();) {
    std::size_t to = from;
    while (to < text.size() && !(in_text && (ends_line(text[to]) ||
                                             (text[to] == '=' && masked_already(text, to + 1)))))
      ++to;
    // "=***" ends the piece (it is masked again, to the same text)
    if (to < text.size() && text[to] == '=') to += 4;
    redact_work() += to - from;
    copied = mask_values_in(out, text, copied, from, std::min(to, text.size()));
    from = to + 1;
  }
  if (copied == 0) return;
  copy_to(out, text, copied, text.size());
  text = std::move(out);
}

/// `text` with the parts `mask` names replaced by "***", appended to `out` from `copied`
/// (text[0, copied) is in `out` already); returns the new `copied`.
inline std::size_t apply_mask(std::string& out, std::string_view text, std::size_t copied,
                              Mask mask) {
  if (!mask.any) return copied;
  copy_to(out, text, copied, mask.from);
  out += "***";
  return mask.to;
}

/// The position of the next "://" in `text` from `from`, or npos; counted (redact_work).
inline std::size_t find_scheme_end(std::string_view text, std::size_t from) {
  const std::size_t at = text.find("://", from);
  redact_work() += (at == std::string_view::npos ? text.size() : at) - from;
  return at;
}

}  // namespace detail

/// `url` (one URL, the whole string) with its credentials replaced by "***" (see the file
/// comment): "redis://:p?ss/w:rd@host:6379/0" → "redis://***@host:6379/0".
inline std::string redact_url(std::string_view url) {
  std::string text(url);
  detail::mask_secret_values(text, false);
  detail::Mask mask;
  if (const std::size_t scheme = detail::find_scheme_end(text, 0); scheme != std::string::npos) {
    mask = detail::userinfo_mask(text, scheme + 3, text.size(), false);
  } else {
    // a mistyped scheme: redis:/:pw@host (see the file comment)
    const std::size_t at = text.rfind('@');
    detail::redact_work() += text.size();
    if (at != std::string::npos) mask = detail::Mask{0, at, true};
  }
  std::string out;
  detail::copy_to(out, text, detail::apply_mask(out, text, 0, mask), text.size());
  return out;
}

namespace detail {

/// True for a character RFC 3986 allows in a URL's user-info (unreserved, sub-delims, ':',
/// '%'), or in its path and query when `rest` (those and '@', '/', '?').
inline bool is_uri_char(char c, bool rest) noexcept {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  if (std::string_view("-._~!$&'()*+,;=:%").find(c) != std::string_view::npos) return true;
  return rest && (c == '@' || c == '/' || c == '?');
}

/// True when `text`'s [from, to), a list of hosts, is plain: each comma-separated item a
/// non-empty host of letters, digits, '.', '-', '_' (or `[ipv6]`), with an optional `:digits`.
inline bool plain_hosts(std::string_view text, std::size_t from, std::size_t to) {
  redact_work() += to - from;
  bool host = false, port = false, digits = false, v6 = false;
  for (std::size_t i = from; i <= to; ++i) {
    const char c = i < to ? text[i] : ',';
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (c == ',') {
      if (!host || v6 || (port && !digits)) return false;
      host = port = digits = false;
    } else if (v6) {
      v6 = c != ']';
    } else if (port) {
      if (c < '0' || c > '9') return false;
      digits = true;
    } else if (c == '[' && !host) {
      host = v6 = true;
    } else if (c == ':' && host) {
      port = true;
    } else if (alnum || c == '.' || c == '-' || c == '_') {
      host = true;
    } else {
      return false;
    }
  }
  return true;
}

/// True when the first word [start, end) of a URL in free text, holding an '@', is garbled
/// (its password may go on after a space or a quote): its user-info (up to the last '@') holds
/// '/', '?', '#' or a character RFC 3986 refuses there, its hosts are not plain_hosts, or
/// what follows them holds a '#' or a character refused in a path or query.
inline bool garbled_word(std::string_view text, std::size_t start, std::size_t end) {
  end = without_closing_punctuation(text, start, end);
  std::size_t at = end;
  while (at > start && text[at - 1] != '@')
    --at;
  redact_work() += 2 * (end - start);
  for (std::size_t i = start; i + 1 < at; ++i)
    if (!is_uri_char(text[i], false)) return true;
  std::size_t hosts = at;
  while (hosts < end && text[hosts] != '/' && text[hosts] != '?' && text[hosts] != '#')
    ++hosts;
  if (!plain_hosts(text, at, hosts)) return true;
  for (std::size_t i = hosts; i < end; ++i)
    if (!is_uri_char(text[i], true)) return true;
  return false;
}

/// What the last run-on past "://" of redact_secrets found: the last '@' of the line in
/// [from, line_end), so that the run-ons of many URLs on one line stay linear together.
struct LineScan {
  std::size_t from = std::string::npos, line_end = 0, last_at = std::string::npos;
};
/// The end of the URL in free text whose authority starts at `start` and whose first word
/// ends at `end` (whitespace or a quote): `end`, unless that word ends inside the authority
/// (no '/', '?' or '#'), or holds no '@' and is masked whole (`user:password`, "@host" lost),
/// and an '@' follows before the end of the line or the next "://" — a password with a space
/// or a quote, `redis://u:pa ss@host` — then the end of the word of the last such '@'.
/// `line`: the last such scan (see LineScan).
inline std::size_t url_end_in_text(std::string_view text, std::size_t start, std::size_t end,
                                   LineScan& line) {
  redact_work() += end - start;
  bool at_in_word = false;
  bool path = false;
  for (std::size_t i = start; i < end; ++i) {
    path = path || text[i] == '/' || text[i] == '?' || text[i] == '#';
    at_in_word = at_in_word || text[i] == '@';
  }
  // a first word reaching its path ends the URL unless it is garbled (with an '@') or reads
  // as a `user:password` whose "@host" was lost (without: `redis://u:pa/ss pa@host`)
  if (path && at_in_word && !garbled_word(text, start, end)) return end;
  // a word without '@' read as `user:password` (its "@host" lost): the password goes on
  // after the space or quote, and may hold "://" (`redis://:pa ss://x@host`, round 11)
  bool lost_host = false;
  if (!at_in_word) {
    const Mask whole = userinfo_mask(text, start, end, true);
    lost_host = whole.any && whole.from == start && whole.to == end;
    if (path && !lost_host) return end;
  }
  std::size_t last_at = std::string::npos;
  if (lost_host && line.from <= end && end < line.line_end) {
    // scanned already to the end of this line: its last '@', if it is after `end`
    last_at =
        line.last_at != std::string::npos && line.last_at >= end ? line.last_at : std::string::npos;
  } else {
    std::size_t i = end;
    for (; i < text.size(); ++i) {
      const char c = text[i];
      if (c == '\n' || c == '\r' || (!lost_host && text.compare(i, 3, "://") == 0)) break;
      if (c == '@') last_at = i;
    }
    redact_work() += i - end;
    if (lost_host) line = LineScan{end, i, last_at};
  }
  if (last_at == std::string::npos) return end;
  std::size_t word_end = last_at;
  while (word_end < text.size() && !ends_url_in_text(text[word_end]))
    ++word_end;
  redact_work() += word_end - last_at;
  return word_end;
}

}  // namespace detail

/// `text` (a message) with the credentials of every URL in it replaced by "***" (see the
/// file comment); a URL ends at whitespace or a quote, unless its first word ends inside its
/// authority (or reads as `user:password`) and an '@' follows on the line
/// (detail::url_end_in_text); a secret value runs to the end of its line. Linear in the
/// length of `text`.
inline std::string redact_secrets(std::string text) {
  detail::mask_secret_values(text, true);
  std::string out;
  std::size_t copied = 0;  // text[0, copied) is in `out`
  std::size_t from = 0;
  detail::LineScan line;
  while ((from = detail::find_scheme_end(text, from)) != std::string::npos) {
    const std::size_t start = from + 3;
    std::size_t end = start;
    while (end < text.size() && !detail::ends_url_in_text(text[end]))
      ++end;
    from = detail::url_end_in_text(text, start, end, line);
    copied = detail::apply_mask(out, text, copied, detail::userinfo_mask(text, start, from, true));
  }
  detail::copy_to(out, text, copied, text.size());
  return out;
}

}  // namespace dlq

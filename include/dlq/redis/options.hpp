// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/options.hpp
/// Where and how to connect to Redis: dlq::redis::ConnectionOptions, dlq::redis::TlsOptions,
/// dlq::redis::PoolOptions and dlq::redis::parse_url. This header includes neither hiredis
/// nor OpenSSL.
///
///     auto opts = dlq::redis::parse_url("redis://worker:s3cret@10.0.0.5:6380/2");
///     opts.command_timeout = std::chrono::milliseconds(250);
///     auto tls = dlq::redis::parse_url("rediss://cache.example.com:6380?ca_file=/etc/ca.pem");
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "dlq/errors.hpp"
#include "dlq/redact.hpp"

namespace dlq::redis {

/// TLS for a connection (`rediss://`). Verification is on by default: the server's
/// certificate must chain to a trusted CA and name the host connected to (or server_name).
/// Needs a build with OpenSSL (dlq::redis::tls_available()); without it a TLS connection
/// fails with dlq::tls_error (cause not_built), never falling back to plain TCP.
struct TlsOptions {
  /// Speak TLS. Default false; `rediss://` URLs set it.
  bool enabled = false;
  /// PEM file of the CA certificates to trust. Default empty: with ca_dir also empty, the
  /// system's default trust store (Debian: /etc/ssl/certs) is used.
  std::string ca_file;
  /// Directory of CA certificates (hashed names, as `openssl rehash` makes). Default empty.
  std::string ca_dir;
  /// PEM file of this client's certificate, for servers that require one (mutual TLS,
  /// `tls-auth-clients yes`). Default empty (= no client certificate). Needs key_file.
  std::string cert_file;
  /// PEM file of the private key of cert_file. Default empty. Needs cert_file.
  std::string key_file;
  /// The name sent as SNI and checked against the server's certificate. Default empty
  /// (= the host connected to; an IP address is checked against the certificate's IP
  /// entries and sent without SNI).
  std::string server_name;
  /// DANGER — test setups only: accept any server certificate (any CA, any name, expired).
  /// The connection is encrypted but the server is not authenticated: anyone in the path
  /// can read and change every dead letter. Default false.
  bool insecure_skip_verify = false;
};

/// The certificate a TLS server presented (Connection::peer_certificate): what an operator
/// checks before it expires (`dlqctl doctor` prints it).
struct PeerCertificate {
  std::string subject;  ///< the subject, RFC 2253 ("CN=cache.example.com,O=Example")
  std::string issuer;   ///< the issuer, RFC 2253
  /// When it expires (notAfter); the epoch when the certificate's date cannot be read.
  std::chrono::system_clock::time_point not_after{};
};

/// One Redis Sentinel to ask where the master is.
struct SentinelAddress {
  std::string host;  ///< host name or IP address
  int port = 26379;  ///< TCP port. Default 26379 (Sentinel's).
};

/// Redis Sentinel (the master of a replicated Redis found through its sentinels): on in
/// ConnectionOptions when master_name is set. Every connect asks the sentinels in order
/// (`SENTINEL get-master-addr-by-name`), connects to the address given and checks that the
/// server's ROLE is master; a lost connection, a `READONLY` answer (a demoted master) or a
/// role mismatch makes the next connect find the master again. `redis+sentinel://` URLs set
/// it. The blocking connection and pool (RedisListStorage) support it; Cluster and the
/// async API refuse it with dlq::invalid_argument.
struct SentinelOptions {
  /// The sentinels, asked in this order (starting with the last one that answered).
  std::vector<SentinelAddress> sentinels;
  /// The master's name in the sentinels' configuration (`sentinel monitor <name> …`).
  /// Default empty (= no Sentinel: host and port are the server).
  std::string master_name;
  /// ACL user for `AUTH` on the sentinels. Default empty.
  std::string user;
  /// Password for `AUTH` on the sentinels (`requirepass` of the sentinels, not of the
  /// master: that is ConnectionOptions::password). Default empty (= no AUTH). Never appears
  /// in any message.
  std::string password;
  /// How often a connection in use asks a sentinel whether its server is still the master
  /// (before a request, once this long after the last check). A master that the sentinels
  /// replaced but that is still up keeps accepting writes until they reconfigure it (up to
  /// ~10 s: their INFO period), and those writes are lost; the check bounds that window to
  /// about this interval after the promotion. Default 1000 ms; 0 = never (only a lost
  /// connection, READONLY or a role mismatch then leads to the new master).
  std::chrono::milliseconds check_interval{1000};

  /// True when the connection goes through sentinels.
  bool enabled() const noexcept { return !master_name.empty(); }
};

/// How to reach one Redis server and how patient to be with it. Every default is stated;
/// a zero duration means "no limit" where said so.
struct ConnectionOptions {
  /// Host name or IP address for TCP. Default "127.0.0.1". Ignored when unix_socket is set.
  std::string host = "127.0.0.1";
  /// TCP port. Default 6379. Ignored when unix_socket is set.
  int port = 6379;
  /// Path of a unix-domain socket. Default empty (= use TCP host:port).
  std::string unix_socket;
  /// ACL user name for `AUTH user password` (Redis >= 6). Default empty (= `AUTH password`
  /// as the default user, when a password is set).
  std::string user;
  /// Password for AUTH. Default empty (= no AUTH). Never appears in any message.
  std::string password;
  /// Database index for SELECT. Default 0 (= no SELECT is sent).
  int db = 0;
  /// Limit for establishing a connection (TCP connect). Default 1000 ms; 0 = no limit.
  std::chrono::milliseconds connect_timeout{1000};
  /// Limit for each command's answer (socket send/receive timeout), re-applied after every
  /// reconnect. Default 2000 ms; 0 = no limit (a frozen server blocks the caller forever).
  std::chrono::milliseconds command_timeout{2000};
  /// Enable TCP keepalive so dead peers are noticed on idle connections. Default true.
  /// Ignored for unix sockets.
  bool keepalive = true;
  /// How many times a lost or refused connection is re-established before an operation
  /// gives up (with backoff between tries). Default 4; 0 = one try, no retry.
  /// A timeout is never retried: it is reported at once.
  int reconnect_attempts = 4;
  /// Wait before the first reconnect try; doubled for each further try. Default 50 ms;
  /// 0 = retry at once.
  std::chrono::milliseconds reconnect_backoff{50};
  /// Upper bound of the doubled backoff. Default 1000 ms; 0 (or anything below
  /// reconnect_backoff) = the backoff does not grow.
  std::chrono::milliseconds reconnect_backoff_max{1000};
  /// TLS (off by default; `rediss://` turns it on). connect_timeout bounds the TCP connect
  /// and the TLS handshake together.
  TlsOptions tls;
  /// Redis Sentinel (off by default; `redis+sentinel://` turns it on): host and port are
  /// then those of the master the sentinels named at the last connect. The reconnect
  /// options above bound how long a failover is waited for (each try asks the sentinels).
  SentinelOptions sentinel;

  /// "host:port", "unix:/path" or "master 'name' via sentinels h1:p1,h2:p2" — for
  /// messages; never contains the password.
  std::string endpoint() const {
    if (sentinel.enabled()) {
      std::string e = "master '" + sentinel.master_name + "' via sentinels ";
      for (std::size_t i = 0; i < sentinel.sentinels.size(); ++i) {
        const SentinelAddress& a = sentinel.sentinels[i];
        if (i > 0) e += ",";
        e += (a.host.find(':') != std::string::npos ? "[" + a.host + "]" : a.host) + ":" +
             std::to_string(a.port);
      }
      if (db != 0) e += "/" + std::to_string(db);
      return e;
    }
    std::string e = unix_socket.empty() ? host_for_display() + ":" + std::to_string(port)
                                        : "unix:" + unix_socket;
    if (db != 0) e += "/" + std::to_string(db);
    return e;
  }

 private:
  std::string host_for_display() const {
    return host.find(':') != std::string::npos ? "[" + host + "]" : host;
  }
};

/// How many connections a storage may open to one server, shared by all threads.
struct PoolOptions {
  /// Most connections open at once; a thread that finds all of them busy waits.
  /// Default 8; 0 = 1.
  std::size_t size = 8;
  /// How long a thread waits for a free connection before a dlq::timeout_error.
  /// Default 5000 ms; 0 = wait without limit.
  std::chrono::milliseconds wait_timeout{5000};
  /// The most batches of concurrent sends on the wire at once (see
  /// ConnectionPool::run_shared: RedisListStorage::push — send_to_dlq without a retention
  /// limit — goes through it). Within it the number follows the senders: a sender opens
  /// another batch while few commands wait (a few threads each send at once), and a batch
  /// slot closes while many wait (many threads share a few pipelines, so N threads cost the
  /// server a few writes instead of N round trips). A lone sender never waits. Default 8
  /// (measured on 2 cores against 1, 8 and 32 sending threads, docs/benchmarks.md); at most
  /// PoolOptions::size are used; 0 = no batching (every send leases a connection of its own
  /// and makes one round trip).
  std::size_t send_batches = 8;
};

/// The Redis URL forms parse_url accepts, for messages and help texts that list them
/// (parse_url's own errors say this; dlqctl adds its other stores).
///
/// Written so that dlq::redact_secrets leaves it as it is: the console and dlqctl pass every
/// message through it whole, hints included, and a URL-shaped example with a user-info or a
/// placeholder port (`redis://[user:password@]host[:port]`) is what the redaction must mask
/// in a user's URL — it came out as `redis://***@]host[:port][/db]`. The redaction cannot
/// tell an example from a secret, so the examples carry none: a real port, and the user-info
/// named in words outside the URL.
/// Options to talk to one sentinel of `s`: its address, the sentinel credentials, the given
/// timeouts, no reconnect tries (the caller moves on to the next sentinel). One rule for the
/// library's master lookups, the pool's shared view and dlqctl doctor; keepalive is the
/// caller's (a short question turns it off).
inline ConnectionOptions sentinel_connection_options(const SentinelAddress& a,
                                                     const SentinelOptions& s,
                                                     std::chrono::milliseconds connect_timeout,
                                                     std::chrono::milliseconds command_timeout) {
  ConnectionOptions o;
  o.host = a.host;
  o.port = a.port;
  o.user = s.user;
  o.password = s.password;
  o.connect_timeout = connect_timeout;
  o.command_timeout = command_timeout;
  o.reconnect_attempts = 0;
  return o;
}

inline constexpr std::string_view url_forms =
    "redis://host:6379/0 (port and db optional; a password as user:password@ or :password@ "
    "before the host), rediss://… (TLS), redis+sentinel://host:26379,host:26379/master_name "
    "(Sentinel; the master's password as in redis://) or unix:///path/redis.sock?db=N (also "
    "redis+unix://)";

namespace detail {

inline int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// The URL with its credentials replaced by "***", for messages (dlq::redact_url).
inline std::string redact_url(std::string_view url) {
  return dlq::redact_url(url);
}

[[noreturn]] inline void bad_url(std::string_view url, const std::string& what) {
  throw dlq::invalid_argument(dlq::detail::message("redis", "URL '" + redact_url(url) + "'", what,
                                                   "expected " + std::string(url_forms)));
}

/// A scheme parse_url accepts, with what it means.
struct UrlScheme {
  std::string_view prefix;  ///< "redis://", …
  bool unix_socket;         ///< the rest is a socket path
  bool tls;                 ///< TlsOptions::enabled
  bool sentinel = false;    ///< the hosts are sentinels, the path names the master
};

/// Every scheme parse_url accepts: the one list (parse_url and is_url read it).
inline constexpr UrlScheme url_schemes[] = {{"redis://", false, false},
                                            {"rediss://", false, true},
                                            {"unix://", true, false},
                                            {"redis+unix://", true, false},
                                            {"redis+sentinel://", false, false, true}};

/// The entry of url_schemes `url` begins with; nullptr when none.
inline const UrlScheme* find_url_scheme(std::string_view url) noexcept {
  for (const UrlScheme& s : url_schemes)
    if (url.substr(0, s.prefix.size()) == s.prefix) return &s;
  return nullptr;
}

/// What is wrong with `o`'s TLS settings taken together; empty when nothing. parse_url and
/// Connection (for options built in code) both refuse such options.
inline std::string tls_problem(const ConnectionOptions& o) {
  const TlsOptions& t = o.tls;
  if (!t.enabled) return {};
  if (!o.unix_socket.empty()) return "TLS over a unix socket is not supported (Redis has none)";
  if (t.cert_file.empty() != t.key_file.empty()) {
    return t.cert_file.empty() ? "key_file without cert_file: give both for a client certificate"
                               : "cert_file without key_file: give both for a client certificate";
  }
  return {};
}

inline std::string percent_decode(std::string_view url, std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      if (i + 2 >= s.size()) bad_url(url, "truncated %-escape");
      const int hi = hex_digit(s[i + 1]);
      const int lo = hex_digit(s[i + 2]);
      if (hi < 0 || lo < 0) bad_url(url, "bad %-escape");
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The text is not echoed: in a garbled URL (a password without its '@') it may be a secret.
inline long parse_number(std::string_view url, std::string_view s, const char* what, long lo,
                         long hi) {
  const std::string range = " (" + std::to_string(lo) + ".." + std::to_string(hi) + ")";
  if (s.empty() || s.size() > 9) bad_url(url, std::string(what) + " must be a number" + range);
  long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') bad_url(url, std::string(what) + " is not a number" + range);
    v = v * 10 + (c - '0');
  }
  if (v < lo || v > hi) bad_url(url, std::string(what) + " is out of range" + range);
  return v;
}

// The text is not echoed either: after a password it may be a piece of it (dlq/redact.hpp).
inline bool parse_bool(std::string_view url, std::string_view key, std::string_view v) {
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  bad_url(url, std::string(key) + " must be true or false (or 1/0, yes/no)");
}

/// Applies one TLS query parameter (ca_file, ca_dir, cert_file, key_file, server_name,
/// insecure_skip_verify) to `t`. False when `key` is not one.
inline bool apply_tls_parameter(std::string_view url, std::string_view key, std::string_view value,
                                TlsOptions& t) {
  std::string* text = nullptr;
  if (key == "ca_file") {
    text = &t.ca_file;
  } else if (key == "ca_dir") {
    text = &t.ca_dir;
  } else if (key == "cert_file") {
    text = &t.cert_file;
  } else if (key == "key_file") {
    text = &t.key_file;
  } else if (key == "server_name") {
    text = &t.server_name;
  } else if (key == "insecure_skip_verify") {
    t.insecure_skip_verify = parse_bool(url, key, value);
    return true;
  } else {
    return false;
  }
  *text = percent_decode(url, value);
  if (text->empty()) bad_url(url, std::string(key) + " is empty");
  return true;
}

/// True for a parameter name made of [a-z0-9_-], short enough to be echoed in a message.
inline bool echoable_parameter_name(std::string_view key) {
  if (key.empty() || key.size() > 32) return false;
  for (char c : key)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

/// Refuses the query part `pair` (key `key`) that is no known parameter, echoing the key
/// only when it cannot be a piece of a password (`after_secret`: it follows a password or
/// user value, which may have held an unencoded '&').
[[noreturn]] inline void bad_parameter(std::string_view url, std::string_view pair,
                                       std::string_view key, bool after_secret) {
  static constexpr const char* known =
      " (known: db, user, password; for rediss (TLS): ca_file, ca_dir, cert_file, key_file, "
      "server_name, insecure_skip_verify; for redis+sentinel: sentinel_user, "
      "sentinel_password)";
  if (pair.find('=') == std::string_view::npos || after_secret) {
    bad_url(url, std::string("a query part that is no parameter") +
                     (after_secret ? " follows the password or user" : " (no '=')") +
                     ": write a '&' in a password or user name as %26, '#' as %23" + known);
  }
  if (!echoable_parameter_name(key)) bad_url(url, std::string("unknown parameter") + known);
  bad_url(url, "unknown parameter '" + std::string(key) + "'" + known);
}

/// Applies `a=b&c=d` query parameters (db, password, user, and the TLS ones) to `o`.
inline void apply_query(std::string_view url, std::string_view query, ConnectionOptions& o) {
  bool after_secret = false;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    const std::string_view key = pair.substr(0, eq);
    const std::string_view value =
        eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1);
    const bool secret = key == "password" || key == "user" || key == "username" ||
                        key == "sentinel_password" || key == "sentinel_user" ||
                        key == "sentinel_username";
    if (key.substr(0, 9) == "sentinel_" && secret) {
      if (!o.sentinel.enabled()) {
        bad_url(url, "parameter '" + std::string(key) +
                         "' outside a redis+sentinel:// URL (it is for the sentinels)");
      }
      (key == "sentinel_password" ? o.sentinel.password : o.sentinel.user) =
          percent_decode(url, value);
    } else if (key == "db") {
      o.db = static_cast<int>(parse_number(url, value, "db", 0, 1 << 20));
    } else if (key == "password") {
      o.password = percent_decode(url, value);
    } else if (secret) {
      o.user = percent_decode(url, value);
    } else if (apply_tls_parameter(url, key, value, o.tls)) {
      if (!o.tls.enabled) {
        bad_url(url, "TLS parameter '" + std::string(key) +
                         "' in a plain-TCP URL; use rediss:// to connect with TLS");
      }
    } else {
      bad_parameter(url, pair, key, after_secret);
    }
    after_secret = secret;
  }
}

// The user-info of a Redis URL (parse_url) at the start of `rest`, stored in `o` and taken
// off `rest`: for TCP everything before the last '@' (the path is only a db number, so a
// password may contain '/'); for a socket everything before an '@' that precedes the path.
inline void parse_user_info(std::string_view url, std::string_view& rest, bool unix_form,
                            ConnectionOptions& o) {
  const auto first_slash = rest.find('/');
  const auto at = unix_form ? rest.find('@') : rest.rfind('@');
  if (at != std::string_view::npos &&
      (!unix_form || first_slash == std::string_view::npos || at < first_slash)) {
    const std::string_view info = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const auto colon = info.find(':');
    if (colon == std::string_view::npos) {
      // "redis://password@host" is ambiguous; treat a lone word as the password (redis-py
      // and redis-cli treat it the same way).
      o.password = percent_decode(url, info);
    } else {
      o.user = percent_decode(url, info.substr(0, colon));
      o.password = percent_decode(url, info.substr(colon + 1));
    }
  }
}

// Refuses a URL whose query (after the first '?') holds the '@' that ends the user-info,
// which `rest` (before the '?') lacks: a '?' in a user name or password that was not
// %-encoded. An '@' in the value of a text parameter (user=a@b, ca_file=/a@b) is no sign.
inline void refuse_query_in_user_info(std::string_view url, std::string_view rest,
                                      std::string_view query) {
  const auto at = query.rfind('@');
  if (at == std::string_view::npos || rest.find('@') != std::string_view::npos) return;
  const auto pair_start = query.rfind('&', at);
  const std::string_view pair =
      query.substr(pair_start == std::string_view::npos ? 0 : pair_start + 1);
  const std::string_view key = pair.substr(0, pair.find('='));
  if (pair.find('=') < pair.find('@')) {
    for (const std::string_view text_key :
         {"user", "username", "password", "ca_file", "ca_dir", "cert_file", "key_file",
          "server_name", "sentinel_user", "sentinel_username", "sentinel_password"})
      if (key == text_key) return;
  }
  bad_url(url,
          "the '@' that ends the user name and password comes after a '?', which starts "
          "the query: write a '?' in a user name or password as %3F (and '#' as %23, "
          "'&' as %26, '@' as %40)");
}

// The TCP part of a Redis URL (parse_url) after the user-info: host (or [ipv6]), port and
// db path, stored in `o`.
inline void parse_tcp_address(std::string_view url, std::string_view rest, ConnectionOptions& o) {
  std::string_view hostport = rest.substr(0, rest.find('/'));
  std::string_view path = rest.find('/') == std::string_view::npos
                              ? std::string_view{}
                              : rest.substr(rest.find('/') + 1);
  std::string_view port_text;
  if (!hostport.empty() && hostport.front() == '[') {
    const auto close = hostport.find(']');
    if (close == std::string_view::npos) bad_url(url, "unclosed '[' in the host");
    o.host = std::string(hostport.substr(1, close - 1));
    const std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') bad_url(url, "unexpected text after ']'");
      port_text = after.substr(1);
      if (port_text.empty()) bad_url(url, "empty port");
    }
  } else {
    const auto colon = hostport.find(':');
    o.host = std::string(hostport.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = hostport.substr(colon + 1);
      if (port_text.empty()) bad_url(url, "empty port");
    }
  }
  if (o.host.empty()) bad_url(url, "empty host");
  if (!port_text.empty()) {
    // the one rule of a port (dlq/redact.hpp): what the redaction does not take for a port
    // (redis://u:012345, redis://u:123456) may be a password whose "@host" was lost
    if (!dlq::detail::is_port_text(port_text))
      bad_url(url, "port must be a number 1..65535 without a leading zero");
    o.port = static_cast<int>(parse_number(url, port_text, "port", 1, 65535));
  }
  if (!path.empty()) o.db = static_cast<int>(parse_number(url, path, "db", 0, 1 << 20));
}

// The part of a redis+sentinel:// URL (parse_url) after the user-info:
// `host[:port][,host[:port]…]/master_name[/db]`, stored in `o.sentinel` (and o.db).
inline void parse_sentinel_address(std::string_view url, std::string_view rest,
                                   ConnectionOptions& o) {
  const auto slash = rest.find('/');
  std::string_view hosts = rest.substr(0, slash);
  const std::string_view path =
      slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
  while (true) {
    const auto comma = hosts.find(',');
    ConnectionOptions one;
    one.port = 26379;
    parse_tcp_address(url, hosts.substr(0, comma), one);
    o.sentinel.sentinels.push_back(SentinelAddress{one.host, one.port});
    if (comma == std::string_view::npos) break;
    hosts = hosts.substr(comma + 1);
  }
  const auto db_slash = path.find('/');
  o.sentinel.master_name = percent_decode(url, path.substr(0, db_slash));
  if (o.sentinel.master_name.empty()) {
    bad_url(url, "no master name: the sentinels' addresses, then /master_name (and /db)");
  }
  if (db_slash != std::string_view::npos) {
    o.db = static_cast<int>(parse_number(url, path.substr(db_slash + 1), "db", 0, 1 << 20));
  }
  o.host.clear();  // the master's address is what the sentinels say at each connect
  o.port = 0;
}

}  // namespace detail

/// Parses a Redis URL into connection options (timeouts and retries keep their defaults).
///
/// Accepted forms:
///  - `redis://[[user]:password@]host[:port][/db][?db=N]` — TCP; host may be `[ipv6]`;
///    default port 6379, default db 0; user and password are %-decoded.
///  - `rediss://…` — the same over TLS (TlsOptions::enabled), with the optional parameters
///    `ca_file=`, `ca_dir=`, `cert_file=`, `key_file=` (paths, %-encoded where needed),
///    `server_name=` and `insecure_skip_verify=true` (test setups only). They are refused
///    in a `redis://` URL (never a silent plain-TCP connection).
///  - `unix:///path/redis.sock[?db=N&user=U&password=P]`, also `redis+unix://` and
///    `unix://[[user]:password@]/path`.
///  - `redis+sentinel://[[user]:password@]host[:port][,host[:port]…]/master_name[/db]`
///    `[?sentinel_user=U&sentinel_password=P]` — Redis Sentinel (SentinelOptions): the
///    hosts are the sentinels (default port 26379), user and password are the master's,
///    sentinel_user and sentinel_password those of the sentinels.
/// @throws dlq::invalid_argument for anything else (other schemes, a bad port or db, an
///         empty host or path, cert_file without key_file). The message never contains the
///         password. A build without OpenSSL parses `rediss://` too; connecting then fails
///         with dlq::tls_error (cause not_built).
inline ConnectionOptions parse_url(std::string_view url) {
  using detail::bad_url;
  ConnectionOptions o;
  const detail::UrlScheme* scheme = detail::find_url_scheme(url);
  if (scheme == nullptr) bad_url(url, "unknown scheme");
  std::string_view rest = url.substr(scheme->prefix.size());
  const bool unix_form = scheme->unix_socket;
  o.tls.enabled = scheme->tls;

  std::string_view query;
  if (const auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }

  detail::refuse_query_in_user_info(url, rest, query);
  detail::parse_user_info(url, rest, unix_form, o);

  if (unix_form) {
    if (rest.empty() || rest.front() != '/') bad_url(url, "the socket path must be absolute");
    o.unix_socket = detail::percent_decode(url, rest);
    o.host.clear();
    o.port = 0;
  } else if (scheme->sentinel) {
    detail::parse_sentinel_address(url, rest, o);
  } else {
    detail::parse_tcp_address(url, rest, o);
  }
  detail::apply_query(url, query, o);
  if (const std::string problem = detail::tls_problem(o); !problem.empty()) bad_url(url, problem);
  return o;
}

/// True when `url` begins with a scheme parse_url accepts — `redis://`, `rediss://`,
/// `redis+sentinel://`, `unix://` or `redis+unix://` (case-sensitive, as parse_url) — so a program
/// that takes several kinds of store URL can tell a Redis one without a list of its own. Says
/// nothing about the rest: parse_url checks that (and throws).
inline bool is_url(std::string_view url) noexcept {
  return detail::find_url_scheme(url) != nullptr;
}

}  // namespace dlq::redis

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file http/console_guard.hpp
/// Who may use the console and what its answers and logs may show: the listen check, the
/// loopback Host rule, the token, the security headers of every answer and the masking of
/// secrets in logged lines (the rules are listed in dlq/http/console.hpp's file comment).
#pragma once

#include <httplib.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <dlq/errors.hpp>
#include <dlq/http/console_identity.hpp>
#include <dlq/http/console_options.hpp>
#include <dlq/http/console_views.hpp>
#include <dlq/policies.hpp>
#include <dlq/redact.hpp>

namespace dlq {
namespace http {

/// True when `host` (a name or address, without port) is a loopback name: 127.0.0.0/8,
/// ::1 or localhost.
inline bool is_loopback_host(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host == "localhost" || host == "::1") return true;
  if (host.substr(0, 4) != "127.") return false;
  int dots = 0;
  for (const char c : host) {
    if (c == '.') {
      ++dots;
    } else if (c < '0' || c > '9') {
      return false;
    }
  }
  return dots == 3;
}

/// True when the Content-Type `value` names the media type application/json exactly (in
/// lower case as every client sends it, whitespace around it ignored), with or without
/// parameters such as `; charset=utf-8`: "application/jsonfoo",
/// "application/json-patch+json" and "Application/JSON" are not.
inline bool is_json_content_type(std::string_view value) {
  value = value.substr(0, value.find(';'));
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
    value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
    value.remove_suffix(1);
  return value == "application/json";
}

/// Refuses to serve the console on a non-loopback address without a token of any kind
/// (`has_token`: ConsoleOptions::token or ConsoleOptions::tokens is set).
/// @throws dlq::invalid_argument when `host` is not a loopback address and `has_token` is false.
inline void check_listen_with(std::string_view host, bool has_token) {
  if (!is_loopback_host(host) && !has_token)
    throw dlq::invalid_argument(dlq::detail::message(
        "http", "listen " + std::string(host),
        "the console would be reachable from other machines without a token",
        "give it a token (dlqctl serve --token-file FILE) or listen on 127.0.0.1"));
}

/// Refuses to serve the console on a non-loopback address without a token.
/// @throws dlq::invalid_argument when `host` is not a loopback address and `token` is empty.
inline void check_listen(std::string_view host, std::string_view token) {
  check_listen_with(host, !token.empty());
}

/// Refuses to serve a console with these options on a non-loopback address without a token
/// of any kind (ConsoleOptions::token or ConsoleOptions::tokens).
/// @throws dlq::invalid_argument when `host` is not a loopback address and neither is set.
inline void check_listen(std::string_view host, const ConsoleOptions& options) {
  check_listen_with(host, !options.token.empty() || !options.tokens.empty());
}

/// Masks the credentials of every URL in `text` (dlq::redact_secrets, dlq/redact.hpp: the one
/// rule the library and dlqctl use too).
using dlq::redact_secrets;

namespace detail {

// `line` for a log: URL passwords masked and control characters (a line break from a queue
// name, a request path or an exception's message) shown as '?', so that no text in it can
// split or forge a line. The console's lines and, in dlqctl serve, the library's own
// (Options::log) go through it.
inline std::string log_text(const std::string& line) { return masked_line(line); }

// One line to the console's log (ConsoleOptions::log), through log_text.
inline void log_line(const std::function<void(LogLevel, std::string_view)>& sink, LogLevel level,
                     const std::string& line) {
  if (!sink) return;
  try {
    sink(level, log_text("[dlq.http] " + line));
  } catch (...) {  // a failing logger never breaks a request
  }
}

// The headers of every answer: no sniffing, no framing, no caching, and a
// Content-Security-Policy that allows the page's own files only (no inline script).
inline void security_headers(httplib::Response& r) {
  r.set_header("X-Content-Type-Options", "nosniff");
  r.set_header("X-Frame-Options", "DENY");
  r.set_header("Referrer-Policy", "no-referrer");
  r.set_header("Cache-Control", "no-store");
  r.set_header("Content-Security-Policy",
               "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
               "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
}

// The Host header is exactly a loopback host, optionally followed by ':' and a port.
inline bool loopback_host_header(const httplib::Request& q) {
  const std::string host = q.get_header_value("Host");
  std::size_t name_end = host.find(':');
  if (!host.empty() && host.front() == '[') {
    const auto close = host.find(']');
    if (close == std::string::npos) return false;
    name_end = close + 1;
  }
  if (name_end == std::string::npos) name_end = host.size();
  const std::string_view port = std::string_view(host).substr(name_end);
  if (!port.empty()) {
    if (port.size() < 2 || port.size() > 6 || port.front() != ':') return false;
    for (const char c : port.substr(1))
      if (c < '0' || c > '9') return false;
  }
  return !host.empty() && is_loopback_host(std::string_view(host).substr(0, name_end));
}

// `a` equals the secret `b` (not empty), compared in time independent of where they differ.
inline bool same_secret(std::string_view a, std::string_view b) {
  return same_text_constant_time(a, b) && !b.empty();
}

// The secret a request carries: X-DLQ-Token, else `Authorization: Bearer <secret>`.
inline std::string given_secret(const httplib::Request& q) {
  std::string given = q.get_header_value("X-DLQ-Token");
  const std::string auth = q.get_header_value("Authorization");
  if (given.empty() && auth.size() > 7 && auth.compare(0, 7, "Bearer ") == 0)
    given = auth.substr(7);
  return given;
}

// The token and loopback rules for one request: the refusal, or nothing when it may go on
// (then `caller` says who asks: the named token's name and role; admin without a name for
// the single `token` and for loopback without any token).
inline std::optional<http_error> gate(const httplib::Request& q, const std::string& token,
                                      const std::vector<NamedToken>& tokens, bool needs_token,
                                      Caller& caller) {
  caller = Caller{};
  if (token.empty() && tokens.empty()) {
    if (!loopback_host_header(q))
      return bad("forbidden_host", "Host " + printable(q.get_header_value("Host")),
                 "this console has no token and answers loopback names only",
                 // no placeholder port in the example: the redaction of messages would take
                 // "127.0.0.1:PORT" for "user:password" (dlq::redis::url_forms)
                 "open it as http://127.0.0.1 or http://localhost on the port it listens on, "
                 "or serve it with a token",
                 403);
    return std::nullopt;
  }
  if (!needs_token) return std::nullopt;
  const std::string given = given_secret(q);
  // Both checks always run, so the time taken does not say which kind of token matched.
  const NamedToken* named = find_token(tokens, given);
  const bool single = same_secret(given, token);
  if (named != nullptr) {
    caller = Caller{named->name, named->role};
    return std::nullopt;
  }
  if (single) return std::nullopt;
  return bad("unauthorized", q.path, given.empty() ? "no token given" : "the token does not match",
             "send it as 'Authorization: Bearer TOKEN' (the page asks for it)", 401);
}

// Answers the exception being handled (call it in a catch block) with its HTTP status and
// JSON error: the library's errors by kind, an unexpected one as 500 with the detail in the
// log only. An exception not derived from std::exception is thrown on.
inline void send_current_exception(httplib::Response& r, const std::string& request_path,
                                   const std::function<void(LogLevel, std::string_view)>& log) {
  try {
    throw;
  } catch (const http_error& e) {
    send_error(r, e);
  } catch (const dlq::invalid_argument& e) {
    send_error(r, {400, "invalid_argument", e.what()});
  } catch (const dlq::format_error& e) {
    send_error(r, {422, "format_error", e.what()});
  } catch (const dlq::queue_full_error& e) {
    send_error(r, {409, "queue_full", e.what()});
  } catch (const dlq::connection_error& e) {
    send_error(r, {503, "store_unavailable", e.what()});
  } catch (const dlq::timeout_error& e) {
    send_error(r, {504, "store_timeout", e.what()});
  } catch (const dlq::conflict_error& e) {
    send_error(r, {409, "conflict", e.what()});
  } catch (const dlq::reply_error& e) {
    send_error(r, {502, "store_refused", e.what()});
  } catch (const dlq::storage_error& e) {
    send_error(r, {502, "store_error", e.what()});
  } catch (const dlq::error& e) {
    send_error(r, {500, "dlq_error", e.what()});
  } catch (const std::exception& e) {
    const std::string path = printable(request_path);
    log_line(log, LogLevel::error, path + ": unexpected error: " + e.what());
    send_error(r,
               {500, "internal", "[dlq.http] " + path + ": unexpected error; see the console's log"});
  }
}

// The role rule for one request let in by gate(): 403 when `caller` may not use `route`
// (the path after the prefix) with this method (required_role() is the table).
inline std::optional<http_error> check_role(const Caller& caller, std::string_view route,
                                            bool mutation) {
  const Role need = required_role(route, mutation);
  if (role_allows(caller.role, need)) return std::nullopt;
  return bad("forbidden_role", std::string(mutation ? "POST " : "GET ") + printable(route),
             "the token '" + printable(caller.name) + "' has the role " + role_name(caller.role) +
                 "; this needs " + role_name(need),
             "ask for a token with that role", 403);
}

// The owner rule of /api/cancel (may_cancel()): 403 forbidden_owner, naming the owner,
// when `who` may not cancel operation `id` started by `actor`.
inline std::optional<http_error> check_cancel(const Caller& who, const std::string& id,
                                              const std::string& actor) {
  if (may_cancel(who, actor)) return std::nullopt;
  return bad("forbidden_owner", "POST /api/cancel",
             "operation " + id + " was started by '" +
                 printable(actor.empty() ? "the console's token" : actor) + "'; the token '" +
                 printable(who.name) + "' (" + role_name(who.role) + ") may cancel only its own",
             "ask its owner or an admin to cancel it", 403);
}

}  // namespace detail
}  // namespace http
}  // namespace dlq

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file http/console.hpp
/// dlq::http::Console — the operator console: a JSON API and a one-page web UI that mount
/// onto the application's own cpp-httplib server.
///
///     dlq::DeadLetterQueue<dlq::RedisListStorage> dlq(...);
///     dlq::http::QueueBackend backend(dlq);
///     dlq::http::Console console(backend, {});      // options: token, read_only, limits
///     dlq::http::GuardedServer server;              // an httplib::Server that slow clients
///     console.mount(server);                        // cannot stall (dlq/http/server.hpp);
///                                                   // routes under ConsoleOptions::prefix
///     server.listen("127.0.0.1", 8080);             // loopback: see check_listen()
///
/// The API is documented in docs/console.md. Security rules, enforced on the server:
/// - with ConsoleOptions::token set, every /api request and /metrics needs it
///   (`Authorization: Bearer <token>` or `X-DLQ-Token: <token>`), else 401;
/// - without a token the console answers only requests whose Host is a loopback name
///   (127.0.0.1, localhost, [::1]; defeats DNS rebinding), and check_listen() refuses a
///   non-loopback bind;
/// - mutations are POSTs with a JSON object body (`Content-Type: application/json`, which a
///   cross-site form cannot send), at most ConsoleOptions::max_body_bytes long;
/// - ConsoleOptions::read_only refuses every mutation with 403;
/// - the page renders every stored field as text (textContent, never innerHTML) and is served
///   with a Content-Security-Policy that forbids inline script;
/// - errors are JSON {"error":{"code","message"}} carrying the library's message (URLs'
///   passwords masked), never a stack trace.
///
/// Replays run as background operations (one thread each, at most
/// ConsoleOptions::max_operations at once) with progress and cancel; the destructor cancels
/// the running ones between batches and waits for them (nothing is lost either way).
#pragma once

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <dlq/detail/base64.hpp>
#include <dlq/detail/json_scan.hpp>
#include <dlq/detail/time.hpp>
#include <dlq/dlq.hpp>
#include <dlq/http/backend.hpp>
#include <dlq/http/page.hpp>
#include <dlq/http/search.hpp>
#include <dlq/redact.hpp>
#include <nlohmann/json.hpp>

namespace dlq {
namespace http {

/// Settings of a Console. Every default is usable as is on loopback.
struct ConsoleOptions {
  /// Path prefix the routes are mounted under, e.g. "/dlq"; "" (the default) = the root.
  /// Letters, digits, '/', '_' and '-' only.
  std::string prefix;
  /// Token every /api request and /metrics must carry; "" (the default) = none (loopback
  /// only: requests must name a loopback Host).
  std::string token;
  /// Refuse every mutation with 403 (the page hides its buttons). Default false.
  bool read_only = false;
  /// Largest request body accepted, in bytes. Default 1 MiB.
  std::size_t max_body_bytes = std::size_t{1} << 20;
  /// Largest page of entries (`limit`). Default 500.
  std::size_t max_page = 500;
  /// Entries one page request examines at most when filtering. Default 20000.
  std::size_t max_examined = 20000;
  /// Most ids one replay or delete request may name. Default 1000.
  std::size_t max_ids = 1000;
  /// Most background operations running at once (more gets 429). Default 2.
  std::size_t max_operations = 2;
  /// Finished operations kept for polling. Default 50.
  std::size_t keep_operations = 50;
  /// Largest text of any one field of /api/entry, in bytes: the payload views (payload_text,
  /// payload_base64 of that many bytes, payload_hex of a fifth of them), stored_text,
  /// context and every string field are cut to it; `truncated` says the payload was cut and
  /// `truncated_fields` names every field that was. Default 256 KiB.
  std::size_t max_payload_view = std::size_t{256} << 10;
  /// Stored bytes of the entries one /api/entries page holds: a page stops after the entry
  /// that reaches this many (at least one entry per page), and its `next` goes on from there.
  /// Default 8 MiB.
  std::size_t max_page_bytes = std::size_t{8} << 20;
  /// Where the console logs mutations and unexpected errors (one line each, URL passwords
  /// masked). Called from the server's threads and the replay threads, possibly at once; an
  /// exception it throws is swallowed. Empty (the default) = nowhere.
  std::function<void(LogLevel, std::string_view)> log;
};

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

/// Refuses to serve the console on a non-loopback address without a token.
/// @throws dlq::invalid_argument when `host` is not a loopback address and `token` is empty.
inline void check_listen(std::string_view host, std::string_view token) {
  if (!is_loopback_host(host) && token.empty())
    throw dlq::invalid_argument(dlq::detail::message(
        "http", "listen " + std::string(host),
        "the console would be reachable from other machines without a token",
        "give it a token (dlqctl serve --token-file FILE) or listen on 127.0.0.1"));
}

/// Masks the credentials of every URL in `text` (dlq::redact_secrets, dlq/redact.hpp: the one
/// rule the library and dlqctl use too).
using dlq::redact_secrets;

/// The operator console over a ConsoleBackend (see the file comment).
class Console {
 public:
  /// @param backend the store (kept by reference; must outlive the console)
  /// @param options security and limits (see ConsoleOptions)
  /// @throws dlq::invalid_argument for a prefix with characters other than letters, digits,
  ///         '/', '_' and '-'.
  Console(ConsoleBackend& backend, ConsoleOptions options)
      : backend_(backend), opts_(std::move(options)) {
    while (!opts_.prefix.empty() && opts_.prefix.back() == '/')
      opts_.prefix.pop_back();
    for (const char c : opts_.prefix) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '/' || c == '_' || c == '-';
      if (!ok)
        throw dlq::invalid_argument(
            dlq::detail::message("http", "ConsoleOptions::prefix '" + opts_.prefix + "'",
                                 "has a character other than letters, digits, '/', '_' and '-'",
                                 "use a plain path such as /dlq"));
    }
    if (!opts_.prefix.empty() && opts_.prefix.front() != '/') opts_.prefix.insert(0, "/");
    if (opts_.max_page == 0) opts_.max_page = 500;
    if (opts_.max_examined == 0) opts_.max_examined = 20000;
    if (opts_.max_operations == 0) opts_.max_operations = 2;
  }

  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;

  /// Cancels running operations (they stop between batches) and waits for them.
  ~Console() { shutdown(); }

  /// Cancels every running operation and waits until they have stopped. Idempotent.
  void shutdown() {
    std::vector<std::shared_ptr<operation>> ops;
    {
      std::lock_guard<std::mutex> lock(ops_mutex_);
      stopping_ = true;
      for (auto& op : ops_)
        ops.push_back(op);
    }
    for (auto& op : ops)
      op->cancel.store(true);
    for (auto& op : ops)
      if (op->thread.joinable()) op->thread.join();
  }

  /// The options in effect (prefix normalized).
  const ConsoleOptions& options() const noexcept { return opts_; }

  /// Adds the console's routes to `server` (see docs/console.md for the list).
  void mount(httplib::Server& server) {
    const std::string p = opts_.prefix;
    server.Get(p + "/", [this](const httplib::Request& q, httplib::Response& r) {
      asset(q, r, page_html(), "text/html; charset=utf-8");
    });
    if (!p.empty())  // the page loads its parts relative to its URL: it must end with '/'
      server.Get(p,
                 [p](const httplib::Request&, httplib::Response& r) { r.set_redirect(p + "/"); });
    server.Get(p + "/console.js", [this](const httplib::Request& q, httplib::Response& r) {
      asset(q, r, page_js(), "text/javascript; charset=utf-8");
    });
    server.Get(p + "/console.css", [this](const httplib::Request& q, httplib::Response& r) {
      asset(q, r, page_css(), "text/css; charset=utf-8");
    });
    server.Get(p + "/healthz", [this](const httplib::Request& q, httplib::Response& r) {
      handle(q, r, false, false, [&] { health(r); });
    });
    server.Get(p + "/metrics", [this](const httplib::Request& q, httplib::Response& r) {
      handle(q, r, true, false, [&] {
        r.set_content(backend_.metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
      });
    });
    get(server, "/api/info",
        [this](const httplib::Request&, httplib::Response& r) { send_json(r, 200, info()); });
    get(server, "/api/queues", [this](const httplib::Request&, httplib::Response& r) {
      const QueueNames found = backend_.list_queues();  // names dlq refuses are skipped
      nlohmann::json out = info();
      out["queues"] = nlohmann::json::array();
      for (const auto& s : backend_.stats(found.names))
        out["queues"].push_back(stats_json(s));
      out["skipped_queues"] = found.skipped.size();
      send_json(r, 200, out);
    });
    get(server, "/api/queue", [this](const httplib::Request& q, httplib::Response& r) {
      const std::string name = queue_param(q);
      const auto s = backend_.stats({name});
      send_json(r, 200, stats_json(s.at(0)));
    });
    get(server, "/api/entries",
        [this](const httplib::Request& q, httplib::Response& r) { entries(q, r); });
    get(server, "/api/entry",
        [this](const httplib::Request& q, httplib::Response& r) { entry(q, r); });
    get(server, "/api/corrupt",
        [this](const httplib::Request& q, httplib::Response& r) { corrupt(q, r); });
    get(server, "/api/operations", [this](const httplib::Request&, httplib::Response& r) {
      nlohmann::json list = nlohmann::json::array();
      std::lock_guard<std::mutex> lock(ops_mutex_);
      for (auto it = ops_.rbegin(); it != ops_.rend(); ++it)
        list.push_back(op_json(**it));
      send_json(r, 200, {{"operations", list}});
    });
    get(server, "/api/operation", [this](const httplib::Request& q, httplib::Response& r) {
      const auto op = find_op(required_param(q, "id"));
      send_json(r, 200, op_json(*op));
    });
    post(server, "/api/replay",
         [this](const nlohmann::json& body, httplib::Response& r) { start_replay(body, r); });
    post(server, "/api/discard",
         [this](const nlohmann::json& body, httplib::Response& r) { start_discard(body, r); });
    post(server, "/api/cancel", [this](const nlohmann::json& body, httplib::Response& r) {
      const auto op = find_op(string_field(body, "id", true));
      op->cancel.store(true);
      log(LogLevel::info, "operation " + op->id + ": cancel requested");
      send_json(r, 202, op_json(*op));
    });
    post(server, "/api/delete",
         [this](const nlohmann::json& body, httplib::Response& r) { remove_ids(body, r); });
    post(server, "/api/purge",
         [this](const nlohmann::json& body, httplib::Response& r) { purge(body, r); });
    post(server, "/api/recover", [this](const nlohmann::json& body, httplib::Response& r) {
      const std::string queue = string_field(body, "queue", true);
      const std::size_t fixed = backend_.recover(queue);
      log(LogLevel::info, "recover " + printable(queue) + ": " + std::to_string(fixed) + " fixed");
      send_json(r, 200, {{"queue", queue}, {"fixed", fixed}});
    });
  }

 private:
  // --- errors ------------------------------------------------------------------------------
  struct http_error {
    int status;
    std::string code;
    std::string message;
  };

  static http_error bad(std::string code, const std::string& where, const std::string& what,
                        const std::string& hint, int status = 400) {
    return {status, std::move(code), dlq::detail::message("http", where, what, hint)};
  }

  // One background operation (a replay).
  struct operation {
    std::string id;
    std::string kind = "replay";
    std::string queue;
    std::string to;
    std::string mode;  // ids | filter | all
    bool dry_run = false;
    double rate = 0;
    std::size_t requested = 0;  // ids named, or the depth when it started
    std::atomic<bool> cancel{false};
    std::chrono::system_clock::time_point started, finished;
    mutable std::mutex m;
    std::string state = "running";  // running | done | cancelled | failed
    ReplayProgress progress;
    std::optional<ReplayReport> report;
    DiscardReport discarded;  // kind "delete": progress, then the report
    std::optional<http_error> error;
    std::thread thread;
  };

  // --- request plumbing ----------------------------------------------------------------------
  void log(LogLevel level, const std::string& line) const {
    if (!opts_.log) return;
    try {
      opts_.log(level, "[dlq.http] " + redact_secrets(line));
    } catch (...) {  // a failing logger never breaks a request
    }
  }

  static std::string printable(std::string_view s) {
    std::string out;
    for (const char c : s.substr(0, 200))
      out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
    return out;
  }

  static void security_headers(httplib::Response& r) {
    r.set_header("X-Content-Type-Options", "nosniff");
    r.set_header("X-Frame-Options", "DENY");
    r.set_header("Referrer-Policy", "no-referrer");
    r.set_header("Cache-Control", "no-store");
    r.set_header("Content-Security-Policy",
                 "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                 "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
  }

  static std::string dump(const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  static void send_json(httplib::Response& r, int status, const nlohmann::json& j) {
    r.status = status;
    r.set_content(dump(j) + "\n", "application/json; charset=utf-8");
  }

  void send_error(httplib::Response& r, const http_error& e) const {
    send_json(r, e.status, {{"error", {{"code", e.code}, {"message", redact_secrets(e.message)}}}});
    if (e.status == 401) r.set_header("WWW-Authenticate", "Bearer realm=\"dlq\"");
  }

  // The Host header is exactly a loopback host, optionally followed by ':' and a port.
  static bool loopback_host_header(const httplib::Request& q) {
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

  static bool same_secret(std::string_view a, std::string_view b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (std::size_t i = 0; i < a.size(); ++i)
      diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
    return diff == 0 && !b.empty();
  }

  std::optional<http_error> gate(const httplib::Request& q, bool needs_token) const {
    if (opts_.token.empty()) {
      if (!loopback_host_header(q))
        return bad("forbidden_host", "Host " + printable(q.get_header_value("Host")),
                   "this console has no token and answers loopback names only",
                   "open it as http://127.0.0.1:PORT/, or serve it with a token", 403);
      return std::nullopt;
    }
    if (!needs_token) return std::nullopt;
    std::string given = q.get_header_value("X-DLQ-Token");
    const std::string auth = q.get_header_value("Authorization");
    if (given.empty() && auth.size() > 7 && auth.compare(0, 7, "Bearer ") == 0)
      given = auth.substr(7);
    if (!same_secret(given, opts_.token))
      return bad("unauthorized", q.path,
                 given.empty() ? "no token given" : "the token does not match",
                 "send it as 'Authorization: Bearer TOKEN' (the page asks for it)", 401);
    return std::nullopt;
  }

  template <class F>
  void handle(const httplib::Request& q, httplib::Response& r, bool needs_token, bool mutation,
              F&& body) {
    security_headers(r);
    try {
      if (auto e = gate(q, needs_token)) return send_error(r, *e);
      if (mutation && opts_.read_only)
        return send_error(r, bad("read_only", q.path, "this console is read-only",
                                 "ask for a console started without --read-only", 403));
      body();
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
      log(LogLevel::error, std::string(q.path) + ": unexpected error: " + e.what());
      send_error(r, {500, "internal",
                     "[dlq.http] " + q.path + ": unexpected error; see the console's log"});
    }
  }

  void asset(const httplib::Request& q, httplib::Response& r, const char* text, const char* type) {
    handle(q, r, false, false, [&] { r.set_content(text, type); });
  }

  template <class F>
  void get(httplib::Server& s, const std::string& path, F f) {
    s.Get(opts_.prefix + path, [this, f](const httplib::Request& q, httplib::Response& r) {
      handle(q, r, true, false, [&] { f(q, r); });
    });
  }

  // Mutations: token, read-only, a JSON object body within the size limit.
  template <class F>
  void post(httplib::Server& s, const std::string& path, F f) {
    s.Post(opts_.prefix + path, [this, f](const httplib::Request& q, httplib::Response& r,
                                          const httplib::ContentReader& reader) {
      bool consumed = false;
      handle(q, r, true, true, [&] {
        if (!is_json_content_type(q.get_header_value("Content-Type")))
          throw bad("unsupported_media_type", q.path, "the body must be JSON",
                    "send Content-Type: application/json and a JSON object", 415);
        // An oversize body is read to its end and dropped (up to the server's own
        // payload_max_length), so that the client gets the 413 answer, not a reset.
        std::string text;
        bool over = false;
        consumed = true;
        reader([&](const char* data, std::size_t n) {
          if (over || text.size() + n > opts_.max_body_bytes) {
            over = true;
            text.clear();
            return true;
          }
          text.append(data, n);
          return true;
        });
        if (over) throw too_large(q, r);
        auto body = nlohmann::json::parse(text, nullptr, false);
        if (body.is_discarded() || !body.is_object())
          throw bad("bad_json", q.path, "the body is not a JSON object",
                    "send a JSON object such as {\"queue\":\"orders\"}");
        f(body, r);
      });
      // Refused before reading (401, 403, 415): drop the body so the connection stays in step.
      // A multipart body must be read through the multipart form of the reader (the plain
      // form would call httplib's empty part-header receiver and throw).
      if (!consumed) {
        const auto drop = [](const char*, std::size_t) { return true; };
        if (q.is_multipart_form_data()) {
          reader([](const httplib::MultipartFormData&) { return true; }, drop);
        } else {
          reader(drop);
        }
      }
    });
  }

  http_error too_large(const httplib::Request& q, httplib::Response&) const {
    return bad("body_too_large", q.path,
               "the body is larger than " + std::to_string(opts_.max_body_bytes) + " bytes",
               "send fewer ids per request", 413);
  }

  static std::string required_param(const httplib::Request& q, const char* name) {
    if (!q.has_param(name) || q.get_param_value(name).empty())
      throw bad("missing_parameter", q.path, std::string("the parameter '") + name + "' is missing",
                std::string("add ?") + name + "=...");
    return q.get_param_value(name);
  }

  std::string queue_param(const httplib::Request& q) const {
    std::string name = required_param(q, "queue");
    known_queue(name);
    return name;
  }

  // 404 for a queue with nothing in it (a typo must not look like an empty queue).
  void known_queue(const std::string& name) const {
    if (backend_.size(name) == 0 && backend_.corrupt_size(name) == 0)
      throw bad("unknown_queue", "queue '" + printable(name) + "'",
                "no dead letters or corrupt items under this name",
                "see /api/queues for the queues that have some", 404);
  }

  static std::size_t size_param(const httplib::Request& q, const char* name, std::size_t dflt,
                                std::size_t max) {
    if (!q.has_param(name)) return dflt;
    const std::string v = q.get_param_value(name);
    std::size_t n = 0;
    const bool too_long = v.size() > 12;  // more digits than any limit: never accumulated
    for (const char c : v) {
      if (c < '0' || c > '9')
        throw bad("bad_parameter", q.path, std::string("'") + name + "' is not a whole number",
                  "use digits only, e.g. " + std::string(name) + "=50");
      if (!too_long) n = n * 10 + static_cast<std::size_t>(c - '0');
    }
    if (v.empty())
      throw bad("bad_parameter", q.path, std::string("'") + name + "' is empty",
                "use digits only, e.g. " + std::string(name) + "=50");
    if (too_long || n > max)
      throw bad("bad_parameter", q.path,
                std::string("'") + name + "' is larger than " + std::to_string(max),
                "ask for at most " + std::to_string(max));
    return n;
  }

  static std::string string_field(const nlohmann::json& body, const char* name, bool required) {
    const auto it = body.find(name);
    if (it == body.end() || it->is_null()) {
      if (required)
        throw bad("missing_field", "body", std::string("the field '") + name + "' is missing",
                  std::string("add \"") + name + "\": \"...\"");
      return {};
    }
    if (!it->is_string())
      throw bad("bad_field", "body", std::string("the field '") + name + "' is not a string",
                "send it as a JSON string");
    if (required && it->get_ref<const std::string&>().empty())
      throw bad("missing_field", "body", std::string("the field '") + name + "' is empty",
                "give a value");
    return it->get<std::string>();
  }

  std::vector<std::string> ids_field(const nlohmann::json& body) const {
    const auto it = body.find("ids");
    if (it == body.end() || !it->is_array() || it->empty())
      throw bad("bad_field", "body", "'ids' must be a non-empty array of entry ids",
                "send \"ids\": [\"019acb7e-…\", …]");
    if (it->size() > opts_.max_ids)
      throw bad("too_many_ids", "body",
                "more than " + std::to_string(opts_.max_ids) + " ids in one request",
                "split the selection, or act on the filter instead", 413);
    std::vector<std::string> ids;  // in the order given, each once
    std::set<std::string> seen;
    for (const auto& v : *it) {
      if (!v.is_string() || v.get_ref<const std::string&>().empty() ||
          v.get_ref<const std::string&>().size() > 200)
        throw bad("bad_id", "body", "every id must be a non-empty string of at most 200 bytes",
                  "take ids from /api/entries");
      if (seen.insert(v.get<std::string>()).second) ids.push_back(v.get<std::string>());
    }
    return ids;
  }

  // Parses an age such as "90", "90s", "15m", "2h", "7d" (seconds when unitless), at most
  // 100 years.
  static std::optional<std::chrono::seconds> age_value(const std::string& v, const char* name) {
    if (v.empty()) return std::nullopt;
    std::size_t i = 0;
    std::int64_t n = 0;
    while (i < v.size() && v[i] >= '0' && v[i] <= '9' && i < 12)
      n = n * 10 + (v[i++] - '0');
    std::int64_t unit = 0;
    const std::string rest = v.substr(i);
    if (rest.empty() || rest == "s") unit = 1;
    if (rest == "m") unit = 60;
    if (rest == "h") unit = 3600;
    if (rest == "d") unit = 86400;
    if (i == 0 || unit == 0)
      throw bad("bad_parameter", name, "'" + printable(v) + "' is not an age",
                "use a number with s, m, h or d, e.g. 15m or 2d");
    constexpr std::int64_t max_seconds = std::int64_t{36500} * 86400;  // 100 years
    if (n > max_seconds / unit)
      throw bad("bad_parameter", name, "'" + printable(v) + "' is longer than 100 years",
                "use an age of at most 36500d");
    return std::chrono::seconds(n * unit);
  }

  static EntryQuery filter_from_query(const httplib::Request& q) {
    EntryQuery f;
    auto param = [&](const char* n) {
      return q.has_param(n) ? q.get_param_value(n) : std::string();
    };
    f.error = param("error");
    f.error_type = param("error_type");
    f.worker = param("worker");
    f.job_id = param("job_id");
    f.payload = param("payload");
    f.min_age = age_value(param("min_age"), "min_age");
    f.max_age = age_value(param("max_age"), "max_age");
    return f;
  }

  static EntryQuery filter_from_json(const nlohmann::json& body) {
    EntryQuery f;
    const auto it = body.find("filter");
    if (it == body.end()) return f;
    if (!it->is_object())
      throw bad("bad_field", "body", "'filter' must be an object",
                "send {\"error\": \"timeout\", \"worker\": \"w1\", …}");
    f.error = string_field(*it, "error", false);
    f.error_type = string_field(*it, "error_type", false);
    f.worker = string_field(*it, "worker", false);
    f.job_id = string_field(*it, "job_id", false);
    f.payload = string_field(*it, "payload", false);
    f.min_age = age_value(string_field(*it, "min_age", false), "filter.min_age");
    f.max_age = age_value(string_field(*it, "max_age", false), "filter.max_age");
    return f;
  }

  // --- JSON views ----------------------------------------------------------------------------
  nlohmann::json info() const {
    return {
        {"read_only", opts_.read_only},
        {"auth", !opts_.token.empty()},
        {"version", std::to_string(DLQ_VERSION_MAJOR) + "." + std::to_string(DLQ_VERSION_MINOR) +
                        "." + std::to_string(DLQ_VERSION_PATCH)},
        {"limits",
         {{"max_page", opts_.max_page},
          {"max_ids", opts_.max_ids},
          {"max_examined", opts_.max_examined},
          {"max_operations", opts_.max_operations},
          {"max_body_bytes", opts_.max_body_bytes}}}};
  }

  static double age_seconds(std::chrono::system_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::system_clock::now() - t).count();
  }

  static nlohmann::json stats_json(const QueueStats& s) {
    nlohmann::json j = {{"name", s.name}, {"dead", s.dead}, {"corrupt", s.corrupt}};
    j["waiting"] = s.waiting ? nlohmann::json(*s.waiting) : nlohmann::json(nullptr);
    j["oldest_at"] = s.oldest_at.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.oldest_at);
    j["oldest_age_seconds"] =
        s.oldest_time ? nlohmann::json(age_seconds(*s.oldest_time)) : nlohmann::json(nullptr);
    return j;
  }

  static std::string preview(const Entry& e) {
    const std::string& bytes = e.ok() ? e.payload : e.raw;
    std::string out;
    const std::size_t n = std::min<std::size_t>(bytes.size(), 160);
    std::string_view head(bytes.data(), n);
    // keep whole UTF-8 sequences: cut back to a valid prefix
    while (!head.empty() && !dlq::detail::json::is_valid_utf8(head))
      head.remove_suffix(1);
    if (head.size() + 4 < n || head.empty()) {  // binary: printable ASCII, '.' elsewhere
      for (std::size_t i = 0; i < n; ++i) {
        const auto c = static_cast<unsigned char>(bytes[i]);
        out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '.';
      }
    } else {
      for (const char c : head)
        out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
    }
    if (bytes.size() > n) out += "…";
    return out;
  }

  // Text fields of a row of /api/entries or /api/corrupt are cut to this many bytes (the
  // entry's own answer shows up to max_payload_view of each).
  static constexpr std::size_t list_field_bytes = 1024;

  // `text` cut to at most `limit` bytes at a UTF-8 sequence boundary, with "…" appended when
  // cut; `cut` is set then.
  static std::string cut_text(std::string_view text, std::size_t limit, bool& cut) {
    if (text.size() <= limit) return std::string(text);
    cut = true;
    std::size_t n = limit;
    for (int back = 0; back < 3 && n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80;
         ++back)
      --n;
    return std::string(text.substr(0, n)) + "…";
  }

  // The row of an entry; each text field cut to `limit` bytes ("…" appended), the names of
  // the cut fields added to `cut` (may be null).
  static nlohmann::json summary_json(const Entry& e, std::size_t limit = list_field_bytes,
                                     nlohmann::json* cut = nullptr) {
    const auto text = [&](const char* name, const std::string& value) {
      bool was_cut = false;
      std::string shown = cut_text(value, limit, was_cut);
      if (was_cut && cut) cut->push_back(name);
      return shown;
    };
    nlohmann::json j = {{"id", text("id", e.id)}, {"ok", e.ok()}};
    if (!e.ok()) {
      j["problem"] = text("problem", e.problem);
      j["size"] = e.raw.size();
      j["preview"] = preview(e);
      return j;
    }
    j["error"] = text("error", e.error);
    j["error_type"] = text("error_type", e.error_type);
    j["worker"] = text("worker", e.worker);
    j["job_id"] = text("job_id", e.job_id);
    j["attempt"] = e.attempt;
    j["queue"] = text("queue", e.queue);
    j["dead_lettered_at"] = text("dead_lettered_at", e.dead_lettered_at);
    j["age_seconds"] = e.dead_lettered_time ? nlohmann::json(age_seconds(*e.dead_lettered_time))
                                            : nlohmann::json(nullptr);
    j["parked"] = e.parked;
    j["size"] = e.payload.size();
    j["preview"] = preview(e);
    return j;
  }

  static std::string hex_dump(std::string_view bytes) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (std::size_t off = 0; off < bytes.size(); off += 16) {
      char addr[32];
      std::snprintf(addr, sizeof addr, "%08zx  ", off);
      out += addr;
      std::string text;
      for (std::size_t i = 0; i < 16; ++i) {
        if (off + i < bytes.size()) {
          const auto c = static_cast<unsigned char>(bytes[off + i]);
          out += digits[c >> 4];
          out += digits[c & 15];
          out += ' ';
          text += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '.';
        } else {
          out += "   ";
        }
        if (i == 7) out += ' ';
      }
      out += " |" + text + "|\n";
    }
    return out;
  }

  // /api/entry: every field within max_payload_view (see ConsoleOptions::max_payload_view).
  // Nothing here copies a whole large entry: the envelope is parsed and pretty-printed only
  // when it is within the limit, the payload only when it is shown whole.
  nlohmann::json full_json(const Entry& e) const {
    const std::size_t view = std::max<std::size_t>(opts_.max_payload_view, 64);
    nlohmann::json cut_fields = nlohmann::json::array();
    nlohmann::json j = summary_json(e, view, &cut_fields);
    const std::string& bytes = e.ok() ? e.payload : e.raw;
    const bool cut = bytes.size() > view;
    const std::string_view shown(bytes.data(), cut ? view : bytes.size());
    if (cut) cut_fields.push_back("payload");
    j["truncated"] = cut;
    j["payload_base64"] = dlq::detail::base64::encode(shown);
    const auto text_field = [&](const char* name, std::string_view value) {
      bool was_cut = false;
      std::string out = cut_text(value, view, was_cut);
      if (was_cut && std::find(cut_fields.begin(), cut_fields.end(), name) == cut_fields.end())
        cut_fields.push_back(name);
      return out;
    };
    if (e.ok() && e.payload_encoding == PayloadEncoding::json && !cut) {
      const auto parsed = e.payload_json();
      j["payload_kind"] = "json";
      j["payload_text"] = text_field(
          "payload", parsed.is_discarded()
                         ? e.payload
                         : parsed.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    } else if (dlq::detail::json::is_valid_utf8(shown)) {
      j["payload_kind"] = "text";
      j["payload_text"] = std::string(shown);
    } else {
      j["payload_kind"] = "binary";
      // a hex dump line holds 16 bytes in 78 characters: a fifth of the limit fits in it
      const std::string_view hex_part = shown.substr(
          0, std::min<std::size_t>(shown.size(), std::min<std::size_t>(64 << 10, view / 5)));
      j["payload_hex"] = hex_dump(hex_part);
      std::string text;
      for (const char c : shown) {
        const auto u = static_cast<unsigned char>(c);
        text += (u >= 0x20 && u < 0x7f) || c == '\n' ? c : '.';
      }
      j["payload_text"] = text;
    }
    if (e.ok()) {
      const std::string context =
          e.context.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      if (context.size() <= view) {
        j["context"] = e.context;
      } else {
        j["context"] = text_field("context", context);  // the start of its JSON text
      }
      j["dead_letter_count"] = e.dead_letter_count;
      j["payload_encoding"] = e.payload_encoding == PayloadEncoding::json ? "json" : "base64";
    }
    if (e.raw.size() <= view) {
      j["stored_text"] = text_field(
          "stored_text",
          e.to_json().dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
    } else {
      bool was_cut = false;
      std::string head = cut_text(e.raw, view, was_cut);
      head += "\n(the stored envelope is " + std::to_string(e.raw.size()) + " bytes; the first " +
              std::to_string(view) + " are shown)";
      cut_fields.push_back("stored_text");
      j["stored_text"] = std::move(head);
    }
    j["truncated_fields"] = std::move(cut_fields);
    return j;
  }

  static nlohmann::json report_json(const ReplayReport& rep) {
    nlohmann::json skipped = nlohmann::json::array();
    for (std::size_t i = 0; i < rep.skipped.size() && i < 100; ++i) {
      const auto& s = rep.skipped[i];
      const char* why = s.reason == SkipReason::corrupt  ? "corrupt"
                        : s.reason == SkipReason::parked ? "parked"
                                                         : "not_found";
      skipped.push_back({{"id", s.id}, {"reason", why}, {"detail", s.detail}});
    }
    nlohmann::json moved = nlohmann::json::array();
    for (const auto& id : rep.replayed_ids)
      moved.push_back(id);
    nlohmann::json out = {{"examined", rep.examined},           {"replayed", rep.replayed},
                          {"set_aside", rep.set_aside},         {"batches", rep.batches},
                          {"conflicts", rep.conflicts},         {"dry_run", rep.dry_run},
                          {"cancelled", rep.cancelled},         {"skipped", skipped},
                          {"skipped_total", rep.skipped.size()}};
    out["replayed_ids"] = moved;
    return out;
  }

  static std::string iso(std::chrono::system_clock::time_point t) {
    return dlq::detail::iso_time::format(t);
  }

  nlohmann::json op_json(const operation& op) const {
    std::lock_guard<std::mutex> lock(op.m);
    nlohmann::json j = {{"id", op.id},
                        {"kind", op.kind},
                        {"queue", op.queue},
                        {"to", op.to.empty() ? nlohmann::json(nullptr) : nlohmann::json(op.to)},
                        {"mode", op.mode},
                        {"dry_run", op.dry_run},
                        {"rate", op.rate},
                        {"requested", op.requested},
                        {"state", op.state},
                        {"cancel_requested", op.cancel.load()},
                        {"started_at", iso(op.started)}};
    j["finished_at"] =
        op.state == "running" ? nlohmann::json(nullptr) : nlohmann::json(iso(op.finished));
    if (op.kind == "delete") {
      const auto& d = op.discarded;
      j["progress"] = {{"examined", d.examined}, {"matched", d.matched}, {"deleted", d.deleted}};
      j["report"] = op.state == "running" || op.error
                        ? nlohmann::json(nullptr)
                        : nlohmann::json({{"examined", d.examined},
                                          {"matched", d.matched},
                                          {"deleted", d.deleted},
                                          {"dry_run", d.dry_run},
                                          {"cancelled", d.cancelled}});
      j["error"] = op.error ? nlohmann::json({{"code", op.error->code},
                                              {"message", redact_secrets(op.error->message)}})
                            : nlohmann::json(nullptr);
      return j;
    }
    j["progress"] = {{"examined", op.progress.examined},
                     {"replayed", op.progress.replayed},
                     {"set_aside", op.progress.set_aside},
                     {"remaining", op.progress.remaining}};
    j["report"] = op.report ? report_json(*op.report) : nlohmann::json(nullptr);
    j["error"] = op.error ? nlohmann::json({{"code", op.error->code},
                                            {"message", redact_secrets(op.error->message)}})
                          : nlohmann::json(nullptr);
    return j;
  }

  // --- handlers --------------------------------------------------------------------------------
  void health(httplib::Response& r) {
    try {
      (void)backend_.queues();
      send_json(r, 200, {{"status", "ok"}});
    } catch (const dlq::error& e) {
      send_json(
          r, 503,
          {{"status", "unavailable"},
           {"error", {{"code", "store_unavailable"}, {"message", redact_secrets(e.what())}}}});
    }
  }

  void entries(const httplib::Request& q, httplib::Response& r) {
    const std::string queue = queue_param(q);
    const EntryQuery filter = filter_from_query(q);
    ScanLimits limits;
    limits.limit = std::max<std::size_t>(1, size_param(q, "limit", 50, opts_.max_page));
    limits.max_examined = opts_.max_examined;
    limits.max_bytes = opts_.max_page_bytes;
    std::optional<Cursor> from;
    if (q.has_param("cursor") && !q.get_param_value("cursor").empty())
      from = Cursor::decode(q.get_param_value("cursor"));
    SearchPage page = backend_.search(queue, filter, from, limits);
    nlohmann::json list = nlohmann::json::array();
    for (const auto& e : page.entries)
      list.push_back(summary_json(e));
    nlohmann::json out = {{"queue", queue},
                          {"entries", list},
                          {"examined", page.examined},
                          {"start", page.start},
                          {"total", backend_.size(queue)},
                          {"filtered", !filter.empty()}};
    out["next"] = page.next ? nlohmann::json(page.next->encode()) : nlohmann::json(nullptr);
    out["position"] = page.next ? page.next->position : page.start + page.examined;
    out["restarted"] = page.restarted;
    send_json(r, 200, out);
  }

  void entry(const httplib::Request& q, httplib::Response& r) {
    const std::string queue = required_param(q, "queue");
    const std::string id = required_param(q, "id");
    auto e = backend_.get(queue, id);
    if (!e)
      throw bad("not_found", "queue '" + printable(queue) + "'",
                "no entry with id '" + printable(id) + "'",
                "it may have been replayed or deleted; reload the list", 404);
    send_json(r, 200, full_json(*e));
  }

  void corrupt(const httplib::Request& q, httplib::Response& r) {
    const std::string queue = required_param(q, "queue");
    const std::size_t start = size_param(q, "start", 0, std::size_t{1} << 40);
    const std::size_t limit = size_param(q, "limit", 50, opts_.max_page);
    nlohmann::json list = nlohmann::json::array();
    for (const auto& e : backend_.corrupt(queue, start, limit)) {
      nlohmann::json j = summary_json(e);
      j["problem"] = e.ok() ? std::string() : e.problem;
      // the raw bytes as in /api/entry: at most max_payload_view of them
      const std::string_view raw(e.raw.data(), std::min(e.raw.size(), opts_.max_payload_view));
      j["truncated"] = raw.size() < e.raw.size();
      j["raw_text"] = dlq::detail::json::is_valid_utf8(raw) ? std::string(raw) : std::string();
      j["raw_base64"] = dlq::detail::base64::encode(raw);
      list.push_back(j);
    }
    send_json(r, 200,
              {{"queue", queue},
               {"start", start},
               {"items", list},
               {"total", backend_.corrupt_size(queue)}});
  }

  std::shared_ptr<operation> find_op(const std::string& id) {
    std::lock_guard<std::mutex> lock(ops_mutex_);
    for (auto& op : ops_)
      if (op->id == id) return op;
    throw bad("unknown_operation", "operation '" + printable(id) + "'", "no such operation",
              "see /api/operations (finished ones are kept for a while)", 404);
  }

  void start_replay(const nlohmann::json& body, httplib::Response& r) {
    auto op = std::make_shared<operation>();
    op->queue = string_field(body, "queue", true);
    op->to = string_field(body, "to", false);
    const bool has_ids = body.contains("ids");
    const bool has_filter = body.contains("filter");
    if (body.contains("all") && !body["all"].is_boolean())
      throw bad("bad_field", "body", "'all' must be true or false", "send \"all\": true");
    const bool all = body.value("all", false);
    if (static_cast<int>(has_ids) + static_cast<int>(has_filter) + static_cast<int>(all) != 1)
      throw bad("bad_request", "replay", "say what to replay: exactly one of ids, filter or all",
                "send {\"queue\":\"q\",\"ids\":[…]} or {\"filter\":{…}} or {\"all\":true}");
    ReplayOptions ro;
    EntryQuery filter;
    if (has_ids) {
      ro.ids = ids_field(body);
      ro.record_ids = true;  // at most max_ids: the report names every id it moved
      op->mode = "ids";
      op->requested = ro.ids.size();
    } else if (has_filter) {
      filter = filter_from_json(body);
      op->mode = filter.empty() ? "all" : "filter";
    } else {
      op->mode = "all";
    }
    if (body.contains("rate")) {
      const bool number = body["rate"].is_number();
      const double rate = number ? body["rate"].get<double>() : -1;
      if (!number || rate < 0 || (rate > 0 && rate < 0.001) || rate > 1e6)
        throw bad("bad_field", "body",
                  "'rate' must be 0 or a number from 0.001 to 1000000 (entries per second)",
                  "send e.g. \"rate\": 100, or 0 for no limit");
      op->rate = body["rate"].get<double>();
    }
    if (body.contains("dry_run") && !body["dry_run"].is_boolean())
      throw bad("bad_field", "body", "'dry_run' must be true or false", "send a JSON boolean");
    op->dry_run = body.value("dry_run", false);
    if (body.contains("limit")) {
      if (!body["limit"].is_number_unsigned())
        throw bad("bad_field", "body", "'limit' must be a whole number >= 0", "0 = no limit");
      ro.limit = body["limit"].get<std::size_t>();
    }
    known_queue(op->queue);
    if (op->mode != "ids") op->requested = backend_.size(op->queue);
    ro.to_queue = op->to;
    ro.rate = op->rate;
    ro.dry_run = op->dry_run;
    if (!filter.empty())
      ro.filter = [filter](const Entry& e) {
        return filter.matches(e, std::chrono::system_clock::now());
      };
    ro.cancel = &op->cancel;
    operation* raw = op.get();
    ro.on_progress = [raw](const ReplayProgress& p) {
      std::lock_guard<std::mutex> lock(raw->m);
      raw->progress = p;
    };
    launch(op, [this, op, ro] { run(*op, ro); });
    log(LogLevel::info, "operation " + op->id + ": replay " + op->mode + " of '" +
                            printable(op->queue) + "'" +
                            (op->to.empty() ? "" : " to '" + printable(op->to) + "'") +
                            (op->dry_run ? " (dry run)" : "") +
                            (op->rate > 0 ? " at " + std::to_string(op->rate) + "/s" : ""));
    send_json(r, 202, op_json(*op));
  }

  // Registers `op` and starts `body` on its own thread (429 beyond max_operations).
  template <class F>
  void launch(const std::shared_ptr<operation>& op, F body) {
    {
      std::lock_guard<std::mutex> lock(ops_mutex_);
      if (stopping_)
        throw bad("shutting_down", op->kind, "the console is stopping", "try again later", 503);
      std::size_t running = 0;
      for (const auto& o : ops_) {
        std::lock_guard<std::mutex> l(o->m);
        if (o->state == "running") ++running;
      }
      if (running >= opts_.max_operations)
        throw bad("too_many_operations", op->kind,
                  std::to_string(running) + " operations are running (the limit is " +
                      std::to_string(opts_.max_operations) + ")",
                  "wait for one to finish or cancel it", 429);
      op->id = "op-" + std::to_string(++next_op_);
      op->started = std::chrono::system_clock::now();
      forget_finished_locked();
      ops_.push_back(op);
      op->thread = std::thread(std::move(body));
    }
  }

  void start_discard(const nlohmann::json& body, httplib::Response& r) {
    auto op = std::make_shared<operation>();
    op->kind = "delete";
    op->mode = "filter";
    op->queue = string_field(body, "queue", true);
    const EntryQuery query = filter_from_json(body);
    if (query.empty())
      throw bad("bad_request", "discard", "'filter' has no condition",
                "give at least one condition, or purge the whole queue");
    if (body.contains("dry_run") && !body["dry_run"].is_boolean())
      throw bad("bad_field", "body", "'dry_run' must be true or false", "send a JSON boolean");
    op->dry_run = body.value("dry_run", false);
    known_queue(op->queue);
    op->requested = backend_.size(op->queue);
    op->discarded.dry_run = op->dry_run;
    launch(op, [this, op, query] { run_discard(*op, query); });
    log(LogLevel::info, "operation " + op->id + ": delete by filter from '" + printable(op->queue) +
                            "'" + (op->dry_run ? " (dry run)" : ""));
    send_json(r, 202, op_json(*op));
  }

  void run_discard(operation& op, const EntryQuery& query) {
    std::optional<http_error> error;
    DiscardReport report;
    try {
      report =
          backend_.discard(op.queue, query, op.dry_run, &op.cancel, [&op](const DiscardReport& d) {
            std::lock_guard<std::mutex> lock(op.m);
            op.discarded = d;
          });
    } catch (const dlq::storage_error& e) {
      error = http_error{502, "store_error", e.what()};
    } catch (const std::exception& e) {
      error = http_error{500, "internal", std::string("[dlq.http] delete: ") + e.what()};
    }
    std::string line;
    {
      std::lock_guard<std::mutex> lock(op.m);
      op.finished = std::chrono::system_clock::now();
      op.error = error;
      if (!error) op.discarded = report;
      op.state = error ? "failed" : report.cancelled ? "cancelled" : "done";
      line = "operation " + op.id + ": " + op.state + ", deleted " +
             std::to_string(op.discarded.deleted) + " of " + std::to_string(op.discarded.examined) +
             " examined" + (error ? ", " + error->message : "");
    }
    log(error ? LogLevel::error : LogLevel::info, line);
  }

  void run(operation& op, const ReplayOptions& ro) {
    std::optional<ReplayReport> report;
    std::optional<http_error> error;
    try {
      report = backend_.replay(op.queue, ro);
    } catch (const dlq::invalid_argument& e) {
      error = http_error{400, "invalid_argument", e.what()};
    } catch (const dlq::conflict_error& e) {
      error = http_error{409, "conflict", e.what()};
    } catch (const dlq::storage_error& e) {
      error = http_error{502, "store_error", e.what()};
    } catch (const std::exception& e) {
      error = http_error{500, "internal", std::string("[dlq.http] replay: ") + e.what()};
    }
    std::string line;
    {
      std::lock_guard<std::mutex> lock(op.m);
      op.finished = std::chrono::system_clock::now();
      op.report = report;
      op.error = error;
      if (error) {
        op.state = "failed";
      } else if (report->cancelled) {
        op.state = "cancelled";
      } else {
        op.state = "done";
      }
      if (report) {
        op.progress.examined = report->examined;
        op.progress.replayed = report->replayed;
        op.progress.set_aside = report->set_aside;
      }
      line = "operation " + op.id + ": " + op.state +
             (report ? ", replayed " + std::to_string(report->replayed) + " of " +
                           std::to_string(report->examined) + " examined"
                     : ", " + error->message);
    }
    log(error ? LogLevel::error : LogLevel::info, line);
  }

  // Drops the oldest finished operations beyond keep_operations (joins their threads).
  void forget_finished_locked() {
    std::size_t finished = 0;
    for (const auto& o : ops_) {
      std::lock_guard<std::mutex> l(o->m);
      if (o->state != "running") ++finished;
    }
    for (auto it = ops_.begin(); it != ops_.end() && finished > opts_.keep_operations;) {
      bool done = false;
      {
        std::lock_guard<std::mutex> l((*it)->m);
        done = (*it)->state != "running";
      }
      if (done) {
        if ((*it)->thread.joinable()) (*it)->thread.join();
        it = ops_.erase(it);
        --finished;
      } else {
        ++it;
      }
    }
  }

  // One backend call for the whole request: one scan, one audit record naming the ids
  // removed, none when nothing was (issue 27: a record per id let a flood of made-up ids
  // flush the trail).
  void remove_ids(const nlohmann::json& body, httplib::Response& r) {
    const std::string queue = string_field(body, "queue", true);
    const auto ids = ids_field(body);
    const RemoveReport done = backend_.remove_ids(queue, ids);
    log(LogLevel::info, "delete from '" + printable(queue) +
                            "': " + std::to_string(done.removed.size()) + " of " +
                            std::to_string(ids.size()) + " ids deleted");
    send_json(r, 200,
              {{"queue", queue}, {"deleted", done.removed.size()}, {"missing", done.not_found}});
  }

  void purge(const nlohmann::json& body, httplib::Response& r) {
    const std::string queue = string_field(body, "queue", true);
    const std::string confirm = string_field(body, "confirm", false);
    const std::string list = body.contains("list") ? string_field(body, "list", false) : "dead";
    if (list != "dead" && list != "corrupt")
      throw bad("bad_field", "body", "'list' must be \"dead\" or \"corrupt\"",
                "leave it out for the dead-letter list");
    if (confirm != queue)
      throw bad("confirmation_mismatch", "purge '" + printable(queue) + "'",
                "'confirm' does not repeat the queue's name",
                "type the queue's name exactly to confirm");
    const std::size_t n = list == "dead" ? backend_.purge(queue) : backend_.purge_corrupt(queue);
    log(LogLevel::warning,
        "purge '" + printable(queue) + "' " + list + " list: " + std::to_string(n) + " deleted");
    send_json(r, 200, {{"queue", queue}, {"list", list}, {"deleted", n}});
  }

  ConsoleBackend& backend_;
  ConsoleOptions opts_;
  std::mutex ops_mutex_;
  std::deque<std::shared_ptr<operation>> ops_;
  std::uint64_t next_op_ = 0;
  bool stopping_ = false;
};

}  // namespace http
}  // namespace dlq

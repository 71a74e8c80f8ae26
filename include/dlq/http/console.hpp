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
/// - with ConsoleOptions::tokens (named tokens, dlq/http/console_identity.hpp) the same, and
///   the token's role decides each route (required_role(); 403 forbidden_role) and its name
///   is the audit trail's actor for the changes it makes;
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
///
/// This header holds the routes: which path answers what, how a request's parameters and
/// body are read, and the exceptions' HTTP statuses. The rest of the console is split by
/// concern: its settings (console_options.hpp), who may ask and what answers carry
/// (console_guard.hpp), the JSON shapes (console_views.hpp) and the background operations,
/// the part that owns threads (console_operations.hpp).
#pragma once

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <dlq/detail/base64.hpp>
#include <dlq/detail/json_scan.hpp>
#include <dlq/dlq.hpp>
#include <dlq/http/backend.hpp>
#include <dlq/http/console_guard.hpp>
#include <dlq/http/health_probe.hpp>
#include <dlq/http/console_operations.hpp>
#include <dlq/http/console_options.hpp>
#include <dlq/http/console_views.hpp>
#include <dlq/http/page.hpp>
#include <dlq/http/search.hpp>
#include <dlq/redact.hpp>
#include <nlohmann/json.hpp>

namespace dlq {
namespace http {

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
    if (opts_.max_listed_queues == 0) opts_.max_listed_queues = default_max_listed_queues;
    if (opts_.max_listed_name_bytes == 0)
      opts_.max_listed_name_bytes = default_max_listed_name_bytes;
    backend_.set_listing_limits({opts_.max_listed_queues, opts_.max_listed_name_bytes});
  }

  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;

  /// Cancels running operations (they stop between batches) and waits for them.
  ~Console() { shutdown(); }

  /// Cancels every running operation and waits until they have stopped. Idempotent.
  void shutdown() { ops_.shutdown(); }

  /// The options in effect (prefix normalized; `tokens` as constructed — set_tokens() does
  /// not change them).
  const ConsoleOptions& options() const noexcept { return opts_; }

  /// Replaces the named tokens while the console serves (TokenSet::set; `dlqctl serve`
  /// re-reads its --tokens file on SIGHUP). Thread-safe.
  /// @throws dlq::invalid_argument as TokenSet::set; the old tokens stay.
  void set_tokens(std::vector<NamedToken> tokens) { tokens_.set(std::move(tokens)); }

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
        // one read of the store shared by requests at once (health_probe.hpp)
        auto got = metrics_.run([this] { return backend_.metrics_text(); });
        if (got.failure) std::rethrow_exception(got.failure);
        r.set_content(std::move(got.result), "text/plain; version=0.0.4; charset=utf-8");
      });
    });
    get(server, "/api/info",
        [this](const httplib::Request&, httplib::Response& r, const Caller& who) {
          detail::send_json(r, 200, detail::info_json(opts_, who));
        });
    get(server, "/api/queues", [this](const httplib::Request&, httplib::Response& r,
                                      const Caller& who) {
      QueueNames found = backend_.list_queues();  // names dlq refuses are skipped
      cap_queue_names(found, backend_.listing_limits());  // the rest counted
      nlohmann::json out = detail::info_json(opts_, who);
      out["queues"] = nlohmann::json::array();
      for (const auto& s :
           listed_stats(found, [this](const auto& names) { return backend_.stats(names); }))
        out["queues"].push_back(detail::stats_json(s));
      out["skipped_queues"] = found.skipped.size();
      out["omitted_queues"] = found.omitted;
      detail::send_json(r, 200, out);
    });
    get(server, "/api/queue", [this](const httplib::Request& q, httplib::Response& r) {
      const std::string name = queue_param(q);
      const auto s = backend_.stats({name});
      detail::send_json(r, 200, detail::stats_json(s.at(0)));
    });
    get(server, "/api/entries",
        [this](const httplib::Request& q, httplib::Response& r) { entries(q, r); });
    get(server, "/api/entry",
        [this](const httplib::Request& q, httplib::Response& r) { entry(q, r); });
    get(server, "/api/corrupt",
        [this](const httplib::Request& q, httplib::Response& r) { corrupt(q, r); });
    get(server, "/api/operations", [this](const httplib::Request&, httplib::Response& r) {
      detail::send_json(r, 200, {{"operations", ops_.list_json()}});
    });
    get(server, "/api/operation", [this](const httplib::Request& q, httplib::Response& r) {
      const auto op = ops_.find(required_param(q, "id"));
      detail::send_json(r, 200, detail::op_json(*op));
    });
    mount_changes(server);
  }

 private:
  // The POST routes (mutations) of mount().
  void mount_changes(httplib::Server& server) {
    post(server, "/api/replay",
         [this](const nlohmann::json& body, httplib::Response& r, const Caller& who) {
           start_replay(body, r, who);
         });
    post(server, "/api/discard",
         [this](const nlohmann::json& body, httplib::Response& r, const Caller& who) {
           start_discard(body, r, who);
         });
    post(server, "/api/cancel",
         [this](const nlohmann::json& body, httplib::Response& r, const Caller& who) {
      const auto op = ops_.find(string_field(body, "id", true));
      if (auto e = detail::check_cancel(who, op->id, op->actor)) return detail::send_error(r, *e);
      op->cancel.store(true);
      log(LogLevel::info, "operation " + op->id + ": cancel requested" + by(who));
      detail::send_json(r, 202, detail::op_json(*op));
    });
    post(server, "/api/delete",
         [this](const nlohmann::json& body, httplib::Response& r, const Caller& who) {
           remove_ids(body, r, who);
         });
    post(server, "/api/purge",
         [this](const nlohmann::json& body, httplib::Response& r, const Caller& who) {
           purge(body, r, who);
         });
    post(server, "/api/recover", [this](const nlohmann::json& body, httplib::Response& r,
                                        const Caller& who) {
      const std::string queue = string_field(body, "queue", true);
      const std::size_t fixed = backend_.recover_as(queue, who.name);
      log(LogLevel::info, "recover " + detail::printable(queue) + ": " + std::to_string(fixed) +
                              " fixed" + by(who));
      detail::send_json(r, 200, {{"queue", queue}, {"fixed", fixed}});
    });
  }

  // " by NAME" for a named token's change in a log line ("" otherwise: the log of a console
  // without named tokens is unchanged). Names are letters, digits and ._@- only.
  static std::string by(const Caller& who) { return who.name.empty() ? "" : " by " + who.name; }

  // One line to ConsoleOptions::log (URL passwords masked).
  void log(LogLevel level, const std::string& line) const {
    detail::log_line(opts_.log, level, line);
  }

  template <class F>
  void handle(const httplib::Request& q, httplib::Response& r, bool needs_token, bool mutation,
              F&& body) {
    detail::security_headers(r);
    try {
      Caller caller;
      const auto tokens = tokens_.get();
      if (auto e = detail::gate(q, opts_.token, *tokens, needs_token, caller))
        return detail::send_error(r, *e);
      if (needs_token) {
        const std::string_view route = std::string_view(q.path).substr(
            q.path.compare(0, opts_.prefix.size(), opts_.prefix) == 0 ? opts_.prefix.size() : 0);
        if (auto e = detail::check_role(caller, route, mutation)) return detail::send_error(r, *e);
      }
      if (mutation && opts_.read_only)
        return detail::send_error(
            r, detail::bad("read_only", q.path, "this console is read-only",
                           "ask for a console started without --read-only", 403));
      if constexpr (std::is_invocable_v<F&, const Caller&>) {
        body(caller);
      } else {
        body();
      }
    } catch (...) {
      detail::send_current_exception(r, q.path, opts_.log);
    }
  }

  void asset(const httplib::Request& q, httplib::Response& r, const char* text, const char* type) {
    handle(q, r, false, false, [&] { r.set_content(text, type); });
  }

  template <class F>
  void get(httplib::Server& s, const std::string& path, F f) {
    s.Get(opts_.prefix + path, [this, f](const httplib::Request& q, httplib::Response& r) {
      handle(q, r, true, false, [&](const Caller& who) {
        if constexpr (std::is_invocable_v<F&, const httplib::Request&, httplib::Response&,
                                          const Caller&>) {
          f(q, r, who);
        } else {
          f(q, r);
        }
      });
    });
  }

  // Mutations: token, read-only, a JSON object body within the size limit.
  template <class F>
  void post(httplib::Server& s, const std::string& path, F f) {
    s.Post(opts_.prefix + path, [this, f](const httplib::Request& q, httplib::Response& r,
                                          const httplib::ContentReader& reader) {
      bool consumed = false;
      handle(q, r, true, true, [&](const Caller& caller) {
        if (!is_json_content_type(q.get_header_value("Content-Type")))
          throw detail::bad("unsupported_media_type", q.path, "the body must be JSON",
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
          throw detail::bad("bad_json", q.path, "the body is not a JSON object",
                            "send a JSON object such as {\"queue\":\"orders\"}");
        if constexpr (std::is_invocable_v<F&, const nlohmann::json&, httplib::Response&,
                                          const Caller&>) {
          f(body, r, caller);
        } else {
          f(body, r);
        }
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

  detail::http_error too_large(const httplib::Request& q, httplib::Response&) const {
    return detail::bad("body_too_large", q.path,
                       "the body is larger than " + std::to_string(opts_.max_body_bytes) + " bytes",
                       "send fewer ids per request", 413);
  }

  static std::string required_param(const httplib::Request& q, const char* name) {
    if (!q.has_param(name) || q.get_param_value(name).empty())
      throw detail::bad("missing_parameter", q.path,
                        std::string("the parameter '") + name + "' is missing",
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
      throw detail::bad("unknown_queue", "queue '" + detail::printable(name) + "'",
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
        throw detail::bad("bad_parameter", q.path,
                          std::string("'") + name + "' is not a whole number",
                          "use digits only, e.g. " + std::string(name) + "=50");
      if (!too_long) n = n * 10 + static_cast<std::size_t>(c - '0');
    }
    if (v.empty())
      throw detail::bad("bad_parameter", q.path, std::string("'") + name + "' is empty",
                        "use digits only, e.g. " + std::string(name) + "=50");
    if (too_long || n > max)
      throw detail::bad("bad_parameter", q.path,
                        std::string("'") + name + "' is larger than " + std::to_string(max),
                        "ask for at most " + std::to_string(max));
    return n;
  }

  static std::string string_field(const nlohmann::json& body, const char* name, bool required) {
    const auto it = body.find(name);
    if (it == body.end() || it->is_null()) {
      if (required)
        throw detail::bad("missing_field", "body",
                          std::string("the field '") + name + "' is missing",
                          std::string("add \"") + name + "\": \"...\"");
      return {};
    }
    if (!it->is_string())
      throw detail::bad("bad_field", "body",
                        std::string("the field '") + name + "' is not a string",
                        "send it as a JSON string");
    if (required && it->get_ref<const std::string&>().empty())
      throw detail::bad("missing_field", "body", std::string("the field '") + name + "' is empty",
                        "give a value");
    return it->get<std::string>();
  }

  std::vector<std::string> ids_field(const nlohmann::json& body) const {
    const auto it = body.find("ids");
    if (it == body.end() || !it->is_array() || it->empty())
      throw detail::bad("bad_field", "body", "'ids' must be a non-empty array of entry ids",
                        "send \"ids\": [\"019acb7e-…\", …]");
    if (it->size() > opts_.max_ids)
      throw detail::bad("too_many_ids", "body",
                        "more than " + std::to_string(opts_.max_ids) + " ids in one request",
                        "split the selection, or act on the filter instead", 413);
    std::vector<std::string> ids;  // in the order given, each once
    std::set<std::string> seen;
    for (const auto& v : *it) {
      if (!v.is_string() || v.get_ref<const std::string&>().empty() ||
          v.get_ref<const std::string&>().size() > 200)
        throw detail::bad("bad_id", "body",
                          "every id must be a non-empty string of at most 200 bytes",
                          "take ids from /api/entries");
      if (seen.insert(v.get<std::string>()).second) ids.push_back(v.get<std::string>());
    }
    return ids;
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
    f.min_age = detail::age_value(param("min_age"), "min_age");
    f.max_age = detail::age_value(param("max_age"), "max_age");
    return f;
  }

  static EntryQuery filter_from_json(const nlohmann::json& body) {
    EntryQuery f;
    const auto it = body.find("filter");
    if (it == body.end()) return f;
    if (!it->is_object())
      throw detail::bad("bad_field", "body", "'filter' must be an object",
                        "send {\"error\": \"timeout\", \"worker\": \"w1\", …}");
    f.error = string_field(*it, "error", false);
    f.error_type = string_field(*it, "error_type", false);
    f.worker = string_field(*it, "worker", false);
    f.job_id = string_field(*it, "job_id", false);
    f.payload = string_field(*it, "payload", false);
    f.min_age = detail::age_value(string_field(*it, "min_age", false), "filter.min_age");
    f.max_age = detail::age_value(string_field(*it, "max_age", false), "filter.max_age");
    return f;
  }

  // --- handlers --------------------------------------------------------------------------------
  void health(httplib::Response& r) {
    try {
      // cheap: never a listing of the store; one probe shared by requests at once
      const std::exception_ptr failure = health_.check([this] { backend_.check_reachable(); });
      if (failure) std::rethrow_exception(failure);
      detail::send_json(r, 200, {{"status", "ok"}});
    } catch (const dlq::error& e) {
      detail::send_json(
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
      list.push_back(detail::summary_json(e));
    nlohmann::json out = {{"queue", queue},
                          {"entries", list},
                          {"examined", page.examined},
                          {"start", page.start},
                          {"total", backend_.size(queue)},
                          {"filtered", !filter.empty()}};
    out["next"] = page.next ? nlohmann::json(page.next->encode()) : nlohmann::json(nullptr);
    out["position"] = page.next ? page.next->position : page.start + page.examined;
    out["restarted"] = page.restarted;
    detail::send_json(r, 200, out);
  }

  void entry(const httplib::Request& q, httplib::Response& r) {
    const std::string queue = required_param(q, "queue");
    const std::string id = required_param(q, "id");
    auto e = backend_.get(queue, id);
    if (!e)
      throw detail::bad("not_found", "queue '" + detail::printable(queue) + "'",
                        "no entry with id '" + detail::printable(id) + "'",
                        "it may have been replayed or deleted; reload the list", 404);
    detail::send_json(r, 200, detail::full_json(*e, opts_.max_payload_view));
  }

  void corrupt(const httplib::Request& q, httplib::Response& r) {
    const std::string queue = required_param(q, "queue");
    const std::size_t start = size_param(q, "start", 0, std::size_t{1} << 40);
    ScanLimits limits;  // bounded by count and by bytes, as /api/entries (page_full)
    limits.limit = std::max<std::size_t>(1, size_param(q, "limit", 50, opts_.max_page));
    limits.max_bytes = opts_.max_page_bytes;
    nlohmann::json list = nlohmann::json::array();
    std::size_t bytes = 0;
    std::size_t next = start;
    bool at_end = false;
    std::size_t largest = 0;  // stored bytes of the largest item read (ScanLimits::read_bytes)
    while (!at_end && !page_full(list.size(), bytes, limits)) {
      // at most 16 items a read, bounded by read_bytes in the store (peek_bounded), else
      // about read_bytes: 2 items of 4 MiB, not 16 (read_entries)
      std::size_t want = std::min(std::size_t{16}, limits.limit - list.size());
      std::optional<PeekWindow> bounded =
          backend_.peek_bounded(ListKind::corrupt, queue, next, want, 1, limits.read_bytes);
      if (!bounded) want = std::min(want, largest == 0 ? 1 : read_entries(limits, largest));
      const std::vector<Entry> window =
          bounded ? std::move(bounded->entries) : backend_.corrupt(queue, next, want);
      std::size_t used = 0;
      for (const auto& e : window)
        largest = std::max<std::size_t>({largest, 1, e.raw.size()});
      for (const auto& e : window) {
        nlohmann::json j = detail::summary_json(e);
        j["problem"] = e.ok() ? std::string() : e.problem;
        // the raw bytes as in /api/entry: at most max_payload_view of them
        const std::string_view raw(e.raw.data(), std::min(e.raw.size(), opts_.max_payload_view));
        j["truncated"] = raw.size() < e.raw.size();
        j["raw_text"] = dlq::detail::json::is_valid_utf8(raw) ? std::string(raw) : std::string();
        j["raw_base64"] = dlq::detail::base64::encode(raw);
        list.push_back(j);
        bytes += e.raw.size();
        ++next;
        ++used;
        if (page_full(list.size(), bytes, limits)) break;
      }
      at_end = window.size() < want && used == window.size() &&  // the list ended in it
               !(bounded && bounded->capped);
    }
    const std::size_t total = backend_.corrupt_size(queue);
    detail::send_json(
        r, 200,
        {{"queue", queue},
         {"start", start},
         {"items", list},
         {"next", at_end || next >= total ? nlohmann::json(nullptr) : nlohmann::json(next)},
         {"total", total}});
  }

  void start_replay(const nlohmann::json& body, httplib::Response& r, const Caller& who) {
    auto op = std::make_shared<detail::operation>();
    op->actor = who.name;
    op->queue = string_field(body, "queue", true);
    op->to = string_field(body, "to", false);
    if (!op->to.empty())  // refused now, not by the replay thread (dlq/queue_names.hpp)
      if (const char* problem = queue_name_problem(op->to))
        throw detail::bad("bad_field", "body", std::string("'to': ") + problem,
                          "name the queue to replay into, or leave 'to' out");
    const bool has_ids = body.contains("ids");
    const bool has_filter = body.contains("filter");
    if (body.contains("all") && !body["all"].is_boolean())
      throw detail::bad("bad_field", "body", "'all' must be true or false", "send \"all\": true");
    const bool all = body.value("all", false);
    if (static_cast<int>(has_ids) + static_cast<int>(has_filter) + static_cast<int>(all) != 1)
      throw detail::bad("bad_request", "replay",
                        "say what to replay: exactly one of ids, filter or all",
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
        throw detail::bad("bad_field", "body",
                          "'rate' must be 0 or a number from 0.001 to 1000000 (entries per second)",
                          "send e.g. \"rate\": 100, or 0 for no limit");
      op->rate = body["rate"].get<double>();
    }
    if (body.contains("dry_run") && !body["dry_run"].is_boolean())
      throw detail::bad("bad_field", "body", "'dry_run' must be true or false",
                        "send a JSON boolean");
    op->dry_run = body.value("dry_run", false);
    if (body.contains("limit")) {
      if (!body["limit"].is_number_unsigned())
        throw detail::bad("bad_field", "body", "'limit' must be a whole number >= 0",
                          "0 = no limit");
      ro.limit = body["limit"].get<std::size_t>();
    }
    known_queue(op->queue);
    if (op->mode != "ids") op->requested = backend_.size(op->queue);
    ro.to_queue = op->to;
    ro.actor = op->actor;  // "" = the backend's own actor
    ro.rate = op->rate;
    ro.dry_run = op->dry_run;
    if (!filter.empty()) {
      ro.filter = [filter](const Entry& e) {
        return filter.matches(e, std::chrono::system_clock::now());
      };
      ro.predicate_terms = filter.describe();  // the audit shows the filter as given
    }
    ro.cancel = &op->cancel;
    detail::operation* raw = op.get();
    ro.on_progress = [raw](const ReplayProgress& p) {
      std::lock_guard<std::mutex> lock(raw->m);
      raw->progress = p;
    };
    ops_.launch(op, [this, op, ro] { detail::run_replay(*op, ro, backend_, opts_.log); });
    log(LogLevel::info, "operation " + op->id + ": replay " + op->mode + " of '" +
                            detail::printable(op->queue) + "'" +
                            (op->to.empty() ? "" : " to '" + detail::printable(op->to) + "'") +
                            (op->dry_run ? " (dry run)" : "") +
                            (op->rate > 0 ? " at " + std::to_string(op->rate) + "/s" : "") +
                            by(who));
    detail::send_json(r, 202, detail::op_json(*op));
  }

  void start_discard(const nlohmann::json& body, httplib::Response& r, const Caller& who) {
    auto op = std::make_shared<detail::operation>();
    op->actor = who.name;
    op->kind = "delete";
    op->mode = "filter";
    op->queue = string_field(body, "queue", true);
    const EntryQuery query = filter_from_json(body);
    if (query.empty())
      throw detail::bad("bad_request", "discard", "'filter' has no condition",
                        "give at least one condition, or purge the whole queue");
    if (body.contains("dry_run") && !body["dry_run"].is_boolean())
      throw detail::bad("bad_field", "body", "'dry_run' must be true or false",
                        "send a JSON boolean");
    op->dry_run = body.value("dry_run", false);
    known_queue(op->queue);
    op->requested = backend_.size(op->queue);
    op->discarded.dry_run = op->dry_run;
    ops_.launch(op, [this, op, query] { detail::run_discard(*op, query, backend_, opts_.log); });
    log(LogLevel::info, "operation " + op->id + ": delete by filter from '" +
                            detail::printable(op->queue) + "'" +
                            (op->dry_run ? " (dry run)" : "") + by(who));
    detail::send_json(r, 202, detail::op_json(*op));
  }

  // One backend call for the whole request: one scan, one audit record naming the ids
  // removed, none when nothing was (issue 27: a record per id let a flood of made-up ids
  // flush the trail).
  void remove_ids(const nlohmann::json& body, httplib::Response& r, const Caller& who) {
    const std::string queue = string_field(body, "queue", true);
    const auto ids = ids_field(body);
    const RemoveReport done = backend_.remove_ids_as(queue, ids, who.name);
    log(LogLevel::info, "delete from '" + detail::printable(queue) +
                            "': " + std::to_string(done.removed.size()) + " of " +
                            std::to_string(ids.size()) + " ids deleted" + by(who));
    detail::send_json(
        r, 200, {{"queue", queue}, {"deleted", done.removed.size()}, {"missing", done.not_found}});
  }

  void purge(const nlohmann::json& body, httplib::Response& r, const Caller& who) {
    const std::string queue = string_field(body, "queue", true);
    const std::string confirm = string_field(body, "confirm", false);
    const std::string list = body.contains("list") ? string_field(body, "list", false) : "dead";
    if (list != "dead" && list != "corrupt")
      throw detail::bad("bad_field", "body", "'list' must be \"dead\" or \"corrupt\"",
                        "leave it out for the dead-letter list");
    if (confirm != queue)
      throw detail::bad("confirmation_mismatch", "purge '" + detail::printable(queue) + "'",
                        "'confirm' does not repeat the queue's name",
                        "type the queue's name exactly to confirm");
    const bool dead = list == "dead";
    const std::size_t n =
        dead ? backend_.purge_as(queue, who.name) : backend_.purge_corrupt_as(queue, who.name);
    log(LogLevel::warning, "purge '" + detail::printable(queue) + "' " + list +
                               " list: " + std::to_string(n) + " deleted" + by(who));
    detail::send_json(r, 200, {{"queue", queue}, {"list", list}, {"deleted", n}});
  }

  ConsoleBackend& backend_;
  detail::HealthProbe health_;  // /healthz: one probe for requests at once (health_probe.hpp)
  detail::SharedRead<std::string> metrics_;  // /metrics: one read for requests at once
  ConsoleOptions opts_;
  TokenSet tokens_{opts_.tokens, !opts_.token.empty() || opts_.tokens.empty()};  // after opts_
  detail::operation_registry ops_{opts_};  // after opts_: it reads them
};

}  // namespace http
}  // namespace dlq

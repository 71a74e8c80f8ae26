// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file dlqctl/serve.hpp
/// `dlqctl serve`: the operator console (dlq::http::Console) on its own HTTP server, over the
/// store the global options name.
///
///     dlqctl [--store URL] [--actor NAME] serve [--listen 127.0.0.1:8080] [--token-file FILE]
///                                               [--tokens FILE] [--read-only]
///                                               [--max-connections-per-client N]
///
/// The global options (commands.hpp, add_global_options) go before or after `serve`;
/// --actor (default: the OS user) is who the audit trail names for the console's changes
/// made with --token-file's token (role admin) or without a token; with --tokens a named
/// token's changes are recorded under its name, and its role decides what it may do.
///
/// It serves on a dlq::http::GuardedServer (dlq/http/server.hpp): request heads must arrive
/// within 10 s, one client address may hold at most 16 connections (0 = no cap, behind a
/// reverse proxy) and at most 4 of its requests are handled at once.
///
/// It prints `dlqctl serve: listening on http://HOST:PORT/` on stdout once it accepts
/// connections (port 0 picks a free port), logs every mutation on stderr, and stops on
/// SIGINT/SIGTERM: running replays are cancelled between batches (nothing is lost).
/// SIGHUP: the --tokens file is read again (a bad file keeps the tokens in effect).
/// Exit codes as the other commands (see commands.hpp): 1 bad usage (a non-loopback
/// --listen without --token-file or --tokens, an unreadable or malformed token file), 2 the store or the port failed.
#pragma once

#include <atomic>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <pthread.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <dlq/http.hpp>

#include "commands.hpp"
#include "store.hpp"

namespace dlqctl {

/// A dlq::http::ConsoleBackend over a dlqctl::Store (any backend dlqctl opens).
class StoreBackend final : public dlq::http::ConsoleBackend {
 public:
  explicit StoreBackend(Store& store) : s_(store) {}
  std::vector<std::string> queues() override { return s_.queues(); }
  dlq::QueueNames list_queues() override { return s_.list_queues(); }
  std::size_t size(std::string_view q) override { return s_.size(q); }
  std::size_t corrupt_size(std::string_view q) override { return s_.corrupt_size(q); }
  std::vector<dlq::Entry> peek(std::string_view q, std::size_t start, std::size_t n) override {
    return s_.peek(q, start, n);
  }
  std::vector<dlq::Entry> corrupt(std::string_view q, std::size_t start, std::size_t n) override {
    return s_.corrupt(q, start, n);
  }
  std::optional<dlq::PeekWindow> peek_bounded(dlq::ListKind kind, std::string_view q,
                                              std::size_t start, std::size_t n,
                                              std::size_t min_count,
                                              std::size_t max_bytes) override {
    return s_.peek_bounded(kind, q, start, n, min_count, max_bytes);
  }
  std::optional<dlq::Entry> get(std::string_view q, std::string_view id) override {
    return s_.get(q, id);
  }
  bool remove(std::string_view q, std::string_view id) override { return s_.remove(q, id); }
  dlq::RemoveReport remove_ids(std::string_view q, const std::vector<std::string>& ids) override {
    return s_.remove_ids(q, ids);
  }
  std::size_t purge(std::string_view q) override { return s_.purge(q); }
  std::size_t purge_corrupt(std::string_view q) override { return s_.purge_corrupt(q); }
  dlq::ReplayReport replay(std::string_view q, const dlq::ReplayOptions& o) override {
    return s_.replay(q, o);
  }
  std::size_t recover(std::string_view q) override { return s_.recover(q); }
  /// The changes of a named token, its name the audit's actor.
  std::size_t purge_as(std::string_view q, const std::string& actor) override {
    return s_.purge(q, actor);
  }
  std::size_t purge_corrupt_as(std::string_view q, const std::string& actor) override {
    return s_.purge_corrupt(q, actor);
  }
  std::size_t recover_as(std::string_view q, const std::string& actor) override {
    return s_.recover(q, actor);
  }
  std::optional<std::size_t> waiting(std::string_view q) override { return s_.waiting(q); }
  /// The library's discard: exactly the entries present when it starts (dlq/operations.hpp).
  dlq::http::DiscardReport discard(
      std::string_view q, const dlq::http::EntryQuery& query, bool dry_run,
      const std::atomic<bool>* cancel,
      const std::function<void(const dlq::http::DiscardReport&)>& progress) override {
    return dlq::http::discard_with(
        [this, q](const dlq::DiscardOptions& o) { return s_.discard(q, o); }, query, dry_run,
        cancel, progress);
  }
  /// The same, the audit record naming `actor` (the console's named token).
  dlq::http::DiscardReport discard_as(
      std::string_view q, const dlq::http::EntryQuery& query, bool dry_run,
      const std::atomic<bool>* cancel,
      const std::function<void(const dlq::http::DiscardReport&)>& progress,
      const std::string& actor) override {
    return dlq::http::discard_with(
        [this, q](const dlq::DiscardOptions& o) { return s_.discard(q, o); }, query, dry_run,
        cancel, progress, actor);
  }
  dlq::RemoveReport remove_ids_as(std::string_view q, const std::vector<std::string>& ids,
                                  const std::string& actor) override {
    return s_.remove_ids(q, ids, actor);
  }

 private:
  Store& s_;
};

namespace serve_detail {

struct Listen {
  std::string host;
  int port = 0;
};

/// Parses HOST:PORT ("127.0.0.1:8080", "[::1]:8080", "0.0.0.0:0").
inline Listen parse_listen(const std::string& text) {
  const auto colon = text.rfind(':');
  const auto bad = [&] {
    return usage_error("--listen '" + text + "' is not HOST:PORT (e.g. 127.0.0.1:8080)");
  };
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) throw bad();
  Listen l;
  l.host = text.substr(0, colon);
  if (l.host.size() > 2 && l.host.front() == '[' && l.host.back() == ']')
    l.host = l.host.substr(1, l.host.size() - 2);
  long port = 0;
  for (std::size_t i = colon + 1; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9' || port > 65535) throw bad();
    port = port * 10 + (text[i] - '0');
  }
  if (port > 65535) throw bad();
  l.port = static_cast<int>(port);
  return l;
}

/// The token: the file's first line without surrounding whitespace.
inline std::string read_token(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw usage_error("--token-file '" + path + "' cannot be read");
  std::string line;
  std::getline(in, line);
  const auto b = line.find_first_not_of(" \t\r\n");
  const auto e = line.find_last_not_of(" \t\r\n");
  if (b == std::string::npos) throw usage_error("--token-file '" + path + "' is empty");
  std::string token = line.substr(b, e - b + 1);
  if (token.size() < 16)
    throw usage_error("--token-file '" + path +
                      "': the token is shorter than 16 characters; use a long random one "
                      "(e.g. openssl rand -hex 24)");
  return token;
}

/// The named tokens of a token file (dlq/http/console_identity.hpp: NAME ROLE SHA256-HEX
/// lines). @throws usage_error for a file that cannot be read or does not parse.
inline std::vector<dlq::http::NamedToken> read_tokens(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw usage_error("--tokens '" + path + "' cannot be read");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    return dlq::http::parse_token_file(text);
  } catch (const dlq::invalid_argument& e) {
    throw usage_error("--tokens '" + path + "': " + e.what());
  }
}

inline std::string stamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// What `dlqctl serve` is told on its command line.
struct Settings {
  StoreSettings store;
  std::string timeout = "5s";
  std::string audit_max_age_text = "90d";
  std::string listen = "127.0.0.1:8080";
  std::string token_file;
  std::string tokens_file;
  std::string prefix;
  bool read_only = false;
  std::size_t max_operations = 2;
  dlq::http::ServerLimits limits;
};

/// The console's log: to stderr, one line each, from any thread.
using Log = std::function<void(dlq::LogLevel, std::string_view)>;

/// Adds the global options and the `serve` subcommand with its options to `app`; returns
/// the subcommand.
inline CLI::App* add_options(CLI::App& app, Settings& s) {
  add_global_options(app, s.store, s.timeout, s.audit_max_age_text);
  app.fallthrough();  // before add_subcommand: `serve` inherits it (global options after it)
  auto* sub = app.add_subcommand("serve", detail::serve_summary);
  sub->add_option("--listen", s.listen,
                  "HOST:PORT to listen on (port 0 = any free port); a non-loopback host needs "
                  "--token-file")
      ->capture_default_str();
  sub->add_option("--token-file", s.token_file,
                  "file whose first line is the access token every API request must carry "
                  "(role admin; the audit names --actor)");
  sub->add_option("--tokens", s.tokens_file,
                  "token file: one 'NAME ROLE SHA256-HEX' line per caller (role viewer, operator "
                  "or admin); the audit names the caller (docs/console.md)");
  sub->add_flag("--read-only", s.read_only, "refuse every change (replay, delete, purge) with 403");
  sub->add_option("--prefix", s.prefix, "serve under this path, e.g. /dlq (default: the root)");
  sub->add_option("--max-operations", s.max_operations, "replays running at once")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--max-connections-per-client", s.limits.max_connections_per_client,
                  "connections one client address may hold open (0 = no cap: behind a reverse "
                  "proxy, where every request comes from the proxy)")
      ->capture_default_str();
  app.require_subcommand(1);
  return sub;
}

/// Where to listen and the console's options, from the settings (which it completes: the
/// store's timeout, actor, audit retention, pool size and log).
struct Setup {
  Listen where;
  dlq::http::ConsoleOptions options;
};

/// Checks the settings and makes the Setup.
/// @throws usage_error, dlq::invalid_argument for a bad setting.
inline Setup configure(Settings& s, const Log& log) {
  Setup setup;
  StoreSettings& store = s.store;
  store.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(parse_duration(s.timeout));
  if (store.timeout.count() <= 0) throw usage_error("--timeout must be more than 0");
  if (store.actor.empty()) store.actor = detail::os_user();  // as every other command
  store.audit_retention.max_age = audit_max_age(s.audit_max_age_text);
  store.pool_size = 4 + 2 * s.max_operations;  // page requests and replays at once
  setup.where = parse_listen(s.listen);
  dlq::http::ConsoleOptions& options = setup.options;
  if (!s.token_file.empty()) {
    options.token = read_token(s.token_file);
    struct stat st {};
    if (::stat(s.token_file.c_str(), &st) == 0 && (st.st_mode & 077) != 0)
      log(dlq::LogLevel::warning,
          "[dlq.http] --token-file " + s.token_file + " can be read by other users; chmod 600 it");
  }
  if (!s.tokens_file.empty()) {
    options.tokens = read_tokens(s.tokens_file);
    struct stat st {};
    if (::stat(s.tokens_file.c_str(), &st) == 0 && (st.st_mode & 022) != 0)
      log(dlq::LogLevel::warning, "[dlq.http] --tokens " + s.tokens_file +
                                      " can be written by other users; chmod 644 it or less");
  }
  dlq::http::check_listen(setup.where.host, options);
  options.read_only = s.read_only;
  options.prefix = s.prefix;
  options.max_operations = s.max_operations;
  options.log = log;
  // The library's own messages (e.g. [dlq.audit] when the trail's cap removed records)
  // go to the same log as the console's: URL passwords masked, control characters as '?'
  // (a queue name may hold a line break).
  store.log = [log](dlq::LogLevel level, std::string_view line) {
    log(level, dlq::http::detail::log_text(std::string(line)));
  };
  return setup;
}

/// Answers the requests the console has no route for (and other refusals without a body)
/// with a JSON error.
inline void set_json_errors(dlq::http::GuardedServer& server) {
  server.set_error_handler([](const httplib::Request& q, httplib::Response& r) {
    if (!r.body.empty()) return;
    const std::string code = r.status == 404   ? "not_found"
                             : r.status == 413 ? "body_too_large"
                             : r.status == 405 ? "method_not_allowed"
                             : r.status == 414 ? "uri_too_long"
                                               : "bad_request";
    // A line the server refused before parsing it has no method or path: say what it was.
    const std::string where = q.method.empty() && q.path.empty()
                                  ? std::string("the request")
                                  : q.method + " " + dlq::http::detail::printable(q.path);
    const std::string what =
        r.status == 404   ? "no such route; see docs/console.md"
        : r.status == 414 ? "its target (path and query) is longer than 8 KiB; send long filters "
                            "in a POST body (POST /api/replay, /api/discard take them)"
                          : "request refused (HTTP " + std::to_string(r.status) + ")";
    nlohmann::json j = {{"error", {{"code", code}, {"message", "[dlq.http] " + where + ": " + what}}}};
    r.set_content(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                  "application/json; charset=utf-8");
  });
}

/// Binds the server to `where` (port 0: any free port) and returns the port.
/// @throws dlq::connection_error when it cannot bind.
inline int bind(dlq::http::GuardedServer& server, const Listen& where, const std::string& listen) {
  int port = where.port;
  if (port == 0) {
    port = server.bind_to_any_port(where.host);
    if (port <= 0)
      throw dlq::connection_error("[dlq.http] listen " + listen +
                                  ": cannot bind; is the address local?");
  } else if (!server.bind_to_port(where.host, port)) {
    throw dlq::connection_error("[dlq.http] listen " + listen +
                                ": cannot bind (port in use, or not a local address); pick "
                                "another --listen");
  }
  return port;
}

/// SIGHUP: re-reads the --tokens file into the running console (secrets rotated without a
/// restart, which would cancel running replays). A file that cannot be read, is malformed or
/// lists no token changes nothing: the console keeps its tokens and the log says why.
/// Without --tokens, SIGHUP is logged and ignored.
inline void reload_tokens(dlq::http::Console& console, const std::string& path, const Log& log) {
  if (path.empty()) {
    log(dlq::LogLevel::warning, "[dlq.http] SIGHUP ignored: serve has no --tokens file");
    return;
  }
  try {
    auto tokens = read_tokens(path);
    const std::size_t n = tokens.size();
    console.set_tokens(std::move(tokens));
    log(dlq::LogLevel::info, "[dlq.http] --tokens " + path + " reloaded: " +
                                 std::to_string(n) + " token" + (n == 1 ? "" : "s"));
  } catch (const std::exception& e) {
    log(dlq::LogLevel::error, "[dlq.http] --tokens " + path + " not reloaded (" +
                                  dlq::http::detail::log_text(e.what()) +
                                  "); the console keeps its tokens");
  }
}

/// Serves the console over `backend` until SIGINT or SIGTERM; returns the exit code.
/// @throws dlq::connection_error when it cannot listen.
inline int run_console(Io& io, const Settings& s, const Setup& setup, StoreBackend& backend,
                       const Store& opened, const Log& log) {
  // SIGINT/SIGTERM: blocked in every thread, taken by one waiting thread that stops the
  // server (the replays are then cancelled by the console's destructor).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);  // re-read --tokens FILE (reload_tokens)
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const dlq::http::ConsoleOptions& options = setup.options;
  dlq::http::GuardedServer server(s.limits);
  // Bodies beyond this are cut off by the server itself; up to it the console reads an
  // oversize body to its end and answers 413 in JSON.
  server.set_payload_max_length(64 * options.max_body_bytes);
  server.set_keep_alive_max_count(100);
  set_json_errors(server);
  auto console = std::make_unique<dlq::http::Console>(backend, options);
  console->mount(server);
  const Listen& where = setup.where;
  const int port = bind(server, where, s.listen);
  std::thread stopper([&server, &console, &s, &log, signals] {
    int sig = 0;
    while (sigwait(&signals, &sig) == 0 && sig == SIGHUP)
      reload_tokens(*console, s.tokens_file, log);
    server.stop();
  });
  const std::string host_text =
      where.host.find(':') != std::string::npos ? "[" + where.host + "]" : where.host;
  io.out << "dlqctl serve: listening on http://" << host_text << ':' << port
         << console->options().prefix << "/ (store " << dlq::redact_url(s.store.url)
         << (options.read_only ? ", read-only" : "")
         << (options.token.empty() && options.tokens.empty() ? "" : ", token required") << ")"
         << std::endl;
  log(dlq::LogLevel::info,
      "[dlq.http] serving " + opened.where() + (options.read_only ? " read-only" : ""));
  const bool ok = server.listen_after_bind();
  console->shutdown();
  // Wake the signal thread when the server stopped for another reason (a no-op otherwise:
  // the signal stays blocked and pending).
  pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();
  if (!ok) throw dlq::connection_error("[dlq.http] listen " + s.listen + ": the server failed");
  log(dlq::LogLevel::info, "[dlq.http] stopped");
  return exit_ok;
}

}  // namespace serve_detail

/// Runs `dlqctl serve` with `args` (the whole command line without the program name, which
/// contains the word `serve`). Returns the exit code.
inline int serve(const std::vector<std::string>& args, Io& io, const Opener& open) {
  serve_detail::Settings s;
  CLI::App app("dlqctl serve: the operator console (web page and JSON API, see docs/console.md)",
               "dlqctl");
  CLI::App* sub = serve_detail::add_options(app, s);

  // Every error goes out as one line through dlq::redact_secrets (dlq/redact.hpp).
  const auto say = [&io](const std::string& what) {
    io.err << "dlqctl serve: " << dlq::redact_secrets(detail::one_line(what)) << '\n';
  };
  std::vector<const char*> argv{"dlqctl"};
  for (const auto& a : args)
    argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    io.out << sub->help();
    return exit_ok;
  } catch (const CLI::ParseError& e) {
    say(std::string(e.what()) + "; see: dlqctl serve --help");
    return exit_usage;
  }

  // The log goes to stderr, one line each, from any thread.
  auto log_mutex = std::make_shared<std::mutex>();
  std::ostream& err = io.err;
  const serve_detail::Log log = [log_mutex, &err](dlq::LogLevel level, std::string_view line) {
    static const char* names[] = {"debug", "info", "warning", "error"};
    std::lock_guard<std::mutex> lock(*log_mutex);
    err << serve_detail::stamp() << ' ' << names[static_cast<int>(level)] << ' ' << line << '\n';
    err.flush();
  };

  try {
    const serve_detail::Setup setup = serve_detail::configure(s, log);
    std::unique_ptr<Store> opened = open(s.store);
    StoreBackend backend(*opened);
    (void)backend.queues();  // fail now, not on the first page load, when the store is down
    return serve_detail::run_console(io, s, setup, backend, *opened, log);
  } catch (const usage_error& e) {
    say(e.what());
    return exit_usage;
  } catch (const dlq::invalid_argument& e) {
    say(e.what());
    return exit_usage;
  } catch (const dlq::error& e) {
    say(std::string(e.what()) + " (store " + dlq::redact_url(s.store.url) + ")");
    return exit_store;
  } catch (const std::exception& e) {
    say(std::string("unexpected error: ") + e.what());
    return exit_store;
  }
}

}  // namespace dlqctl

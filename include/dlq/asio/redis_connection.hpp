// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/redis_connection.hpp
/// dlq::asio::RedisConnection: one non-blocking Redis connection driven by an Asio executor
/// — its own RESP2 codec (asio/detail/resp.hpp) over an Asio stream (a TCP or unix socket,
/// asio/detail/redis_stream.hpp). CMake: dlq::asio and dlq::redis. The machinery is
/// detail::redis_link (asio/detail/redis_link*.hpp); this header is its public face.
///
///     asio::io_context io;
///     dlq::asio::RedisConnection conn(io.get_executor(), "redis://127.0.0.1:6379/0");
///     conn.execute({"RPUSH", "k", "v"}, true, "RPUSH k",
///                  [](std::exception_ptr e, dlq::asio::RedisReply r) { … });
///
/// Behaviour:
/// - Connects on the first command (same URL forms and ConnectionOptions as the blocking
///   connection: dlq::redis::parse_url), then sends AUTH (when a password is set) and SELECT
///   (db != 0) before any command. Commands issued meanwhile wait and go out once it is ready.
///   A host name is resolved on each connect with Asio's asynchronous resolver (it runs
///   getaddrinfo on a thread of Asio's own, so the loop never waits for DNS), within
///   connect_timeout; its IPv4 addresses are tried, its IPv6 ones when it has none (as
///   the blocking connection), each in turn until one accepts. An IP address is used as it is.
/// - Any number of commands in flight, pipelined; replies come back in order. Commands are
///   formatted into one output buffer; what is issued while a write is pending goes out
///   with it (one write for a burst), and replies are parsed from one input buffer.
/// - Timeouts: ConnectionOptions::connect_timeout bounds the connect plus the handshake;
///   command_timeout bounds each command from the moment it is issued on a ready
///   connection, and again from the moment it is handed to the kernel. When a limit passes,
///   what the socket holds is handled first (output the loop had no turn to write, answers
///   not read yet: the loop may have been busy), and if there was any the limit starts
///   again; a command still without its answer then drops the connection: it and every
///   other one in flight complete with dlq::timeout_error (outcome_unknown() == true for
///   writes: they were sent). A zero limit means none.
/// - Failures: a lost connection (or bytes that are not RESP) fails the commands in flight
///   with dlq::connection_error (outcome_unknown() for writes), except reads: as on the
///   blocking connection, a read (a command issued with write == false) in flight on an
///   established connection is sent again, once, on a fresh one. A write is never re-sent,
///   nor anything after a time limit passed or close().
///   The next command reconnects, with the blocking connection's rules: a connect that is
///   refused or closed (during the TCP connect or the handshake) is tried again up to
///   ConnectionOptions::reconnect_attempts times, after reconnect_backoff, doubled for each
///   further try up to reconnect_backoff_max — waited on the executor's timer, never by
///   blocking the loop; commands issued meanwhile wait with the first. A connect timeout,
///   or AUTH/SELECT refused, is not retried. When the tries are used up every waiting command
///   fails with dlq::connection_error (never outcome_unknown(): nothing was sent).
/// - Redis Cluster: the handshake asks CLUSTER SLOTS (an error reply: a plain server) and
///   hands the answer to the hook set with on_cluster_slots() — dlq::asio::RedisListStorage's
///   router learns the slot map from it. The connection itself talks to one node: a command
///   for a slot another node serves gets its MOVED/ASK answer as a dlq::reply_error.
/// - Error replies become dlq::reply_error (code() = Redis's first word).
///
/// Thread-safety: not thread-safe. Call it from its executor, which must be single-threaded
/// (an io_context run by one thread, or a strand). execute()'s callbacks run on the
/// executor, posted: never inside execute(). Destroying it (or close()) completes every
/// pending command.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>

#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/asio/detail/completion.hpp"
#include "dlq/asio/detail/redis_link.hpp"
#include "dlq/asio/detail/resp.hpp"
#include "dlq/redis/options.hpp"

namespace dlq::asio {

/// A non-blocking Redis connection (see the file comment). Movable, not copyable.
class RedisConnection {
 public:
  using executor_type = ::asio::any_io_executor;
  /// Called once per command, on the executor: (null, reply) or (error, empty reply).
  using callback = std::function<void(std::exception_ptr, RedisReply)>;
  /// The internal completion of execute_inline (move-only, stored without allocation when
  /// small).
  using inline_callback = detail::redis_callback;

  /// Connects lazily to `options`' server; completions run on `executor`.
  /// @throws dlq::invalid_argument for TLS options (not supported here yet).
  RedisConnection(executor_type executor, redis::ConnectionOptions options)
      : impl_(std::make_shared<detail::redis_link>(std::move(executor), std::move(options))) {}
  /// Parses `url` (dlq::redis::parse_url). @throws dlq::invalid_argument for a bad URL.
  RedisConnection(executor_type executor, std::string_view url)
      : RedisConnection(std::move(executor), redis::parse_url(url)) {}
  RedisConnection(RedisConnection&&) noexcept = default;
  RedisConnection& operator=(RedisConnection&&) noexcept = default;
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;
  /// Closes the connection (see close()).
  ~RedisConnection() {
    if (impl_) impl_->close();
  }

  /// The executor callbacks run on.
  executor_type get_executor() const noexcept { return impl_->executor; }
  /// The connection options (timeouts, credentials).
  const redis::ConnectionOptions& options() const noexcept { return impl_->options; }
  /// "host:port" or "unix:/path", for messages.
  const std::string& endpoint() const noexcept { return impl_->endpoint; }
  /// Commands issued and not completed yet.
  std::size_t pending() const noexcept { return impl_->pending(); }

  /// Sends `args` as one command. `write`: the command may change data (a lost answer is
  /// then reported with outcome_unknown()). `label` names it in messages ("RPUSH dlq:{q}").
  /// `done` is called exactly once, posted to the executor.
  void execute(std::vector<std::string> args, bool write, std::string label, callback done) {
    impl_->submit(
        [&args](std::string& out) {
          detail::resp_command(out, args.size());
          for (const auto& a : args)
            detail::resp_arg(out, a);
        },
        write, "", std::move(label),
        [done = std::move(done)](std::exception_ptr e, RedisReply&& r) { done(e, std::move(r)); },
        true);
  }

  /// execute() with an Asio completion token; completes with
  /// `void(std::exception_ptr, RedisReply)`.
  template <class CompletionToken>
  auto async_execute(std::vector<std::string> args, bool write, CompletionToken&& token) {
    return ::asio::async_initiate<CompletionToken, void(std::exception_ptr, RedisReply)>(
        [self = impl_](auto handler, std::vector<std::string> a, bool w) {
          std::string label = a.empty() ? std::string() : a.front();
          auto done = detail::make_done<RedisReply>(self->executor, std::move(handler));
          self->submit(
              [&a](std::string& out) {
                detail::resp_command(out, a.size());
                for (const auto& x : a)
                  detail::resp_arg(out, x);
              },
              w, "", std::move(label),
              [done = std::move(done)](std::exception_ptr e, RedisReply&& r) mutable {
                done(e, std::move(r));
              },
              false);
        },
        token, std::move(args), write);
  }

  /// For dlq's own storages: `format(std::string& out)` appends the command in RESP
  /// (detail::resp_command, detail::resp_arg) to the output buffer, at once; `done` runs on
  /// the executor, never inside this call, but directly from the read handler when the
  /// reply arrives (errors of the connection itself are posted). The label is
  /// `label_prefix` (a string literal) followed by `label`.
  template <class Format>
  void execute_inline(Format&& format, bool write, const char* label_prefix, std::string label,
                      inline_callback done) {
    impl_->submit(std::forward<Format>(format), write, label_prefix, std::move(label),
                  std::move(done), false);
  }

  /// execute_inline(), but an error reply is delivered as the reply (type reply_type::error,
  /// its text in `str`) instead of a dlq::reply_error — for a caller that acts on it (the
  /// cluster router follows MOVED and ASK). Errors of the connection itself are unchanged.
  template <class Format>
  void execute_inline_raw(Format&& format, bool write, const char* label_prefix, std::string label,
                          inline_callback done) {
    impl_->submit(std::forward<Format>(format), write, label_prefix, std::move(label),
                  std::move(done), false, true);
  }

  /// Called on the executor with the answer to CLUSTER SLOTS of each handshake (an error
  /// reply from a plain server, the slot ranges from a cluster node), before any command's
  /// completion. One hook per connection; it must not throw.
  void on_cluster_slots(std::function<void(const RedisReply&)> hook) {
    impl_->cluster_hook = std::move(hook);
  }

  /// Drops the connection: every pending command completes with dlq::connection_error
  /// (outcome_unknown() for writes already sent), and every later one too. Idempotent.
  void close() noexcept { impl_->close(); }

 private:
  std::shared_ptr<detail::redis_link> impl_;
};

}  // namespace dlq::asio

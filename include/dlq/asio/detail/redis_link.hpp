// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/detail/redis_link.hpp
/// Internal to dlq::asio: the state of one dlq::asio::RedisConnection (detail::redis_link) —
/// its commands, buffers and phases — and the declaration of its steps. Their definitions
/// live by concern, included at the end: redis_link_connect.hpp (resolving, connecting, the
/// handshake, reconnecting), redis_link_io.hpp (writing and reading), redis_link_limits.hpp
/// (time limits), redis_link_failures.hpp (a lost or closed connection). Not part of the API.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "dlq/asio/detail/read_buffer.hpp"
#include "dlq/asio/detail/redis_stream.hpp"
#include "dlq/asio/detail/resp.hpp"
#include "dlq/asio/detail/small.hpp"
#include "dlq/errors.hpp"
#include "dlq/redis/options.hpp"

namespace dlq::asio::detail {

/// The completion of one command: (null, reply) or (error, empty reply). Move-only, stored
/// without allocation when small.
using redis_callback = unique_fn<void(std::exception_ptr, RedisReply&&), 256>;

/// One command, from its issue to its completion.
struct redis_op {
  redis_callback done;
  const char* label_prefix = "";
  std::string label_rest;
  std::chrono::steady_clock::time_point deadline;
  bool write = false;
  bool sent = false;        // in the output buffer (or on the wire)
  bool written = false;     // handed to the kernel (the output buffer drained after it)
  bool post = true;         // completion posted (execute) or run from the read handler
  bool raw_errors = false;  // an error reply is delivered as the reply (execute_inline_raw)
  bool retried = false;     // a read already sent again after a lost connection
  std::string resend;       // a read's command, formatted: sent again once if the link is lost
  enum class kind : unsigned char { command, handshake, cluster } what = kind::command;

  std::string label() const { return label_prefix + label_rest; }
};

/// One connection's state (see RedisConnection's file comment for the behaviour). Shared
/// by the handlers in flight; every step runs on `executor`, which is single-threaded.
class redis_link : public std::enable_shared_from_this<redis_link> {
 public:
  redis_link(::asio::any_io_executor ex, redis::ConnectionOptions o)
      : executor(std::move(ex)),
        options(std::move(o)),
        endpoint(options.endpoint()),
        command_timer(executor),
        connect_timer(executor),
        backoff_timer(executor),
        resolver(executor) {
    if (options.tls.enabled) {  // never a silent plain-TCP connection
      throw dlq::invalid_argument(dlq::detail::message(
          "redis", endpoint, "TLS (rediss://) is not supported by the asynchronous connection yet",
          "use the blocking dlq::RedisListStorage for a TLS server"));
    }
    if (options.sentinel.enabled()) {
      throw dlq::invalid_argument(dlq::detail::message(
          "redis", endpoint,
          "Redis Sentinel (redis+sentinel://) is not supported by the asynchronous connection "
          "yet",
          "use the blocking dlq::RedisListStorage, or the master's redis:// URL"));
    }
  }
  ~redis_link() { close(); }
  redis_link(const redis_link&) = delete;
  redis_link& operator=(const redis_link&) = delete;

  ::asio::any_io_executor executor;
  redis::ConnectionOptions options;
  std::string endpoint;
  std::function<void(const RedisReply&)> cluster_hook;  // the handshake's CLUSTER SLOTS

  /// Commands issued and not completed yet.
  std::size_t pending() const noexcept {
    return waiting.size() + inflight.size() - (state == phase::connecting ? handshake_left : 0);
  }

  /// Issues one command: `format(std::string& out)` appends it in RESP. `done` runs once:
  /// posted (`post`), or from the read handler when the reply arrives.
  template <class Format>
  void submit(Format&& format, bool write, const char* label_prefix, std::string label,
              redis_callback done, bool post, bool raw_errors = false);

  /// Drops the connection; every command completes (redis_link_failures.hpp). Idempotent.
  void close() noexcept;

 private:
  enum class phase { idle, connecting, ready };

  std::string msg(const std::string& what, const std::string& hint) const {
    return dlq::detail::message("redis", endpoint, what, hint);
  }
  // Completes `o` through the executor (errors, and execute()'s callbacks).
  void post_done(redis_op& o, std::exception_ptr e, RedisReply r = {}) {
    if (!o.done) return;
    ::asio::post(executor, [done = std::move(o.done), e, r = std::move(r)]() mutable {
      done(e, std::move(r));
    });
  }

  // --- redis_link_connect.hpp ----------------------------------------------------------------
  bool idle_connection_alive();
  void start_connect();
  bool retry_connect();
  std::string tries() const;
  bool needs_resolving() const;
  void resolve(std::uint64_t gen);
  void connect_failed(const std::string& error);
  void connect();
  void queue_handshake();
  void on_connected(const std::error_code& ec);
  void on_handshake(bool is_cluster, std::exception_ptr e, const RedisReply& r);
  void arm_connect_timer(std::uint64_t gen);
  void wait_connect_timer(std::uint64_t gen);
  void on_connect_timer(std::uint64_t gen);

  // --- redis_link_io.hpp -----------------------------------------------------------------------
  void send(redis_op&& o);
  void enqueue(redis_op&& o);
  bool has_output() const noexcept { return writing_off < writing.size() || !out.empty(); }
  void schedule_flush();
  void flush();
  void write_async();
  void on_flushed();
  void start_read();
  void stop_reading();
  void on_read(const std::error_code& ec, std::size_t n, bool filled);
  void drain(std::string& down);
  void process();
  void complete(redis_op& o, RedisReply&& r);

  // --- redis_link_limits.hpp ---------------------------------------------------------------
  bool pump();
  void arm_command_timer();
  void restart_limits();
  void on_command_timer();

  // --- redis_link_failures.hpp -------------------------------------------------------------
  std::exception_ptr closed_error(const redis_op& o) const;
  void fail_waiting(const std::exception_ptr& e);
  void close_socket();
  void drop(const std::exception_ptr& e);
  template <class MakeError>
  void drop_with(MakeError make);
  void lost(const std::string& text);

  ::asio::steady_timer command_timer;
  ::asio::steady_timer connect_timer;
  ::asio::steady_timer backoff_timer;                // the wait before the next connect try
  ::asio::ip::tcp::resolver resolver;                // a host name, resolved on each connect
  std::vector<::asio::ip::tcp::endpoint> addresses;  // what it resolved to, for one try
  bool resolved = false;                             // `addresses` are for this try
  int connect_tries = 0;                             // failed tries of the connect in progress
  std::chrono::milliseconds backoff{0};              // the wait before the next try
  bool command_timer_armed = false;
  phase state = phase::idle;
  bool closed = false;
  std::shared_ptr<redis_stream> stream;  // the socket, while there is one
  bool connected = false;                // the stream's connect completed
  bool flush_posted = false;             // a flush() is posted
  bool write_waiting = false;            // an async write of `writing` is in flight
  bool reading = false;                  // an async read is in flight
  std::uint64_t read_seq = 0;            // one per read (a cancelled one is stale)
  std::uint64_t generation = 0;          // one per connection attempt
  std::size_t handshake_left = 0;        // replies of the handshake still expected
  std::exception_ptr handshake_error;
  std::string connect_error;  // the text of a failed connect
  ring<redis_op> waiting;     // issued while connecting
  ring<redis_op> inflight;    // sent, in order (the handshake's first)
  std::string out;            // output not handed to the stream yet (appended to at will)
  std::string writing;        // output being written, from writing_off (stable meanwhile)
  std::size_t writing_off = 0;
  std::string waiting_out;  // the waiting commands, formatted
  read_buffer input;        // input not parsed yet
  reply_parser parser;
  std::chrono::steady_clock::time_point connect_deadline;  // of the attempt in progress
};

template <class Format>
void redis_link::submit(Format&& format, bool write, const char* label_prefix, std::string label,
                        redis_callback done, bool post, bool raw_errors) {
  redis_op o;
  o.raw_errors = raw_errors;
  o.done = std::move(done);
  o.label_prefix = label_prefix;
  o.label_rest = std::move(label);
  o.write = write;
  o.post = post;
  if (closed) return post_done(o, closed_error(o));
  if (state == phase::ready && inflight.empty() && !idle_connection_alive()) {
    drop(nullptr);  // nothing in flight: nothing to report; reconnect below
  }
  // A read keeps a copy of its command (reads are small): the blocking connection's
  // rule, a read is sent again once on a fresh connection after a connection loss.
  if (state == phase::ready) {
    const std::size_t at = out.size();
    format(out);
    if (!write) o.resend.assign(out, at, std::string::npos);
    return send(std::move(o));
  }
  const std::size_t at = waiting_out.size();
  format(waiting_out);
  if (!write) o.resend.assign(waiting_out, at, std::string::npos);
  waiting.push_back(std::move(o));
  if (state == phase::idle) start_connect();
}

}  // namespace dlq::asio::detail

#include "dlq/asio/detail/redis_link_connect.hpp"
#include "dlq/asio/detail/redis_link_failures.hpp"
#include "dlq/asio/detail/redis_link_io.hpp"
#include "dlq/asio/detail/redis_link_limits.hpp"

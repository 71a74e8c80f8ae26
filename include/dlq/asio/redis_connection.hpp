// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/redis_connection.hpp
/// dlq::asio::RedisConnection: one non-blocking Redis connection driven by an Asio executor
/// (its own socket and RESP2 codec, see asio/detail/resp.hpp). CMake: dlq::asio and
/// dlq::redis.
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
///   the blocking connection). An IP address is used as it is.
/// - Any number of commands in flight, pipelined; replies come back in order. Commands are
///   formatted into one output buffer; what is issued while a write is pending goes out
///   with it (one send() for a burst), and replies are parsed from one input buffer.
/// - Timeouts: ConnectionOptions::connect_timeout bounds the TCP connect plus the handshake;
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

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/asio/detail/completion.hpp"
#include "dlq/asio/detail/resp.hpp"
#include "dlq/asio/detail/small.hpp"
#include "dlq/errors.hpp"
#include "dlq/redis/error_mapping.hpp"
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
  using inline_callback = detail::unique_fn<void(std::exception_ptr, RedisReply&&), 256>;

  /// Connects lazily to `options`' server; completions run on `executor`.
  RedisConnection(executor_type executor, redis::ConnectionOptions options)
      : impl_(std::make_shared<impl>(std::move(executor), std::move(options))) {}
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
  struct op {
    inline_callback done;
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

  struct impl : std::enable_shared_from_this<impl> {
    impl(executor_type ex, redis::ConnectionOptions o)
        : executor(std::move(ex)),
          options(std::move(o)),
          endpoint(options.endpoint()),
          command_timer(executor),
          connect_timer(executor),
          backoff_timer(executor),
          resolver(executor) {}
    ~impl() { close(); }

    executor_type executor;
    redis::ConnectionOptions options;
    std::string endpoint;
    ::asio::steady_timer command_timer;
    ::asio::steady_timer connect_timer;
    ::asio::steady_timer backoff_timer;                // the wait before the next connect try
    ::asio::ip::tcp::resolver resolver;                // a host name, resolved on each connect
    std::vector<::asio::ip::tcp::endpoint> addresses;  // what it resolved to, for one try
    bool resolved = false;                             // `addresses` are for this try
    int connect_tries = 0;                             // failed tries of the connect in progress
    std::chrono::milliseconds backoff{0};              // the wait before the next try
    bool command_timer_armed = false;
    enum class phase { idle, connecting, ready } state = phase::idle;
    bool closed = false;
    std::optional<::asio::posix::stream_descriptor> sd;  // owns the socket
    bool connected = false;                              // the TCP connect completed
    bool flush_posted = false;                           // a flush() is posted
    bool write_waiting = false;      // waiting for the socket to take more output
    bool reading = false;            // waiting for input
    std::uint64_t read_seq = 0;      // one per read wait (a cancelled one is stale)
    std::uint64_t generation = 0;    // one per connection attempt
    std::size_t handshake_left = 0;  // replies of the handshake still expected
    std::exception_ptr handshake_error;
    std::string connect_error;  // the text of a failed connect
    detail::ring<op> waiting;   // issued while connecting
    detail::ring<op> inflight;  // sent, in order (the handshake's first)
    std::string out;            // output not handed to the kernel yet, from out_off
    std::size_t out_off = 0;
    std::string waiting_out;     // the waiting commands, formatted
    std::unique_ptr<char[]> in;  // input not parsed yet: [in_begin, in_end)
    std::size_t in_cap = 0, in_begin = 0, in_end = 0;
    std::size_t in_need = 0;  // bytes the incomplete reply needs at least (a hint)
    detail::reply_parser parser;
    std::function<void(const RedisReply&)> cluster_hook;     // the handshake's CLUSTER SLOTS
    std::chrono::steady_clock::time_point connect_deadline;  // of the attempt in progress

    std::size_t pending() const noexcept {
      return waiting.size() + inflight.size() - (state == phase::connecting ? handshake_left : 0);
    }
    int fd() { return sd ? sd->native_handle() : -1; }

    std::string msg(const std::string& what, const std::string& hint) const {
      return dlq::detail::message("redis", endpoint, what, hint);
    }

    // Completes `o` through the executor (errors, and execute()'s callbacks).
    void post_done(op& o, std::exception_ptr e, RedisReply r = {}) {
      if (!o.done) return;
      ::asio::post(executor, [done = std::move(o.done), e, r = std::move(r)]() mutable {
        done(e, std::move(r));
      });
    }

    std::exception_ptr closed_error(const op& o) const {
      const bool unknown = o.write && o.sent;
      return std::make_exception_ptr(dlq::connection_error(
          msg(o.label() + ": the connection was closed with the command in flight",
              unknown ? "the write was sent and may or may not have been applied (outcome "
                        "unknown); check the data before sending it again"
                      : "nothing was sent; open a new queue or connection to go on"),
          unknown));
    }

    template <class Format>
    void submit(Format&& format, bool write, const char* label_prefix, std::string label,
                inline_callback done, bool post, bool raw_errors = false) {
      op o;
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

    // An idle connection is not read (reads wait only while answers are expected), so a
    // server that closed it (restart, idle timeout) is noticed here, before a write is sent
    // into a dead socket: one non-blocking peek when a command follows a quiet spell.
    bool idle_connection_alive() {
      if (!sd) return false;
      char byte;
      const ssize_t n = ::recv(fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0) return true;    // unexpected data; read with the next reply
      if (n == 0) return false;  // the peer closed it
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    }

    // --- connecting ----------------------------------------------------------------------
    // A non-blocking socket connecting to the server, or -1 with `error` set.
    int open_socket(std::string& error, bool& done) {
      done = false;
      if (!options.unix_socket.empty()) {
        sockaddr_un sa{};
        sa.sun_family = AF_UNIX;
        if (options.unix_socket.size() >= sizeof(sa.sun_path)) {
          error = "unix socket path too long";
          return -1;
        }
        std::memcpy(sa.sun_path, options.unix_socket.c_str(), options.unix_socket.size() + 1);
        const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (s < 0) {
          error = std::strerror(errno);
          return -1;
        }
        if (::connect(s, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0) {
          done = true;
          return s;
        }
        if (errno == EINPROGRESS || errno == EAGAIN) return s;
        error = std::strerror(errno);
        ::close(s);
        return -1;
      }
      if (resolved) {  // a host name, resolved by resolve()
        resolved = false;
        int s = -1;
        error = "no address";
        for (const auto& a : addresses) {
          s = ::socket(a.protocol().family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
          if (s < 0) {
            error = std::strerror(errno);
            continue;
          }
          const int yes = 1;
          ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
          if (::connect(s, a.data(), static_cast<socklen_t>(a.size())) == 0) {
            done = true;
            return s;
          }
          if (errno == EINPROGRESS) return s;
          error = std::strerror(errno);
          ::close(s);
          s = -1;
        }
        return s;
      }
      // An IP address (numeric: getaddrinfo does not block). IPv4 first, as the blocking one.
      addrinfo* list = nullptr;
      addrinfo hints{};
      hints.ai_flags = AI_NUMERICHOST;
      hints.ai_socktype = SOCK_STREAM;
      const std::string port = std::to_string(options.port);
      hints.ai_family = AF_INET;
      int rc = ::getaddrinfo(options.host.c_str(), port.c_str(), &hints, &list);
      if (rc != 0) {
        hints.ai_family = AF_INET6;
        rc = ::getaddrinfo(options.host.c_str(), port.c_str(), &hints, &list);
      }
      if (rc != 0) {
        error = ::gai_strerror(rc);
        return -1;
      }
      int s = -1;
      error = "no address";
      for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
        s = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (s < 0) {
          error = std::strerror(errno);
          continue;
        }
        const int yes = 1;
        ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
        if (::connect(s, a->ai_addr, a->ai_addrlen) == 0) {
          done = true;
          break;
        }
        if (errno == EINPROGRESS) break;
        error = std::strerror(errno);
        ::close(s);
        s = -1;
      }
      ::freeaddrinfo(list);
      return s;
    }

    // A connect on demand: 1 + reconnect_attempts tries (see retry_connect).
    void start_connect() {
      connect_tries = 0;
      backoff = options.reconnect_backoff;
      connect();
    }

    // A try failed with a connection error (refused, or closed before the handshake was
    // answered): true when another one is scheduled — after the back-off, on the executor's
    // timer — as the blocking connection does: at most reconnect_attempts more tries, the
    // wait doubled each time up to reconnect_backoff_max. The waiting commands (none of them
    // was sent) stay waiting, with their formatted output.
    bool retry_connect() {
      ++connect_tries;
      if (closed || waiting.empty() || connect_tries > options.reconnect_attempts) return false;
      state = phase::connecting;
      handshake_left = 0;
      const auto delay = std::max(backoff, std::chrono::milliseconds(0));
      backoff = std::min(backoff * 2, std::max(options.reconnect_backoff_max, backoff));
      backoff_timer.expires_after(delay);
      backoff_timer.async_wait(
          [self = shared_from_this(), gen = generation](const std::error_code& ec) {
            if (ec || self->generation != gen || self->closed || self->state != phase::connecting)
              return;
            self->connect();
          });
      return true;
    }

    std::string tries() const {
      return connect_tries == 1 ? std::string() : " (" + std::to_string(connect_tries) + " tries)";
    }

    // A host name (not an IP address, not a unix socket): resolved before each try.
    bool needs_resolving() const {
      if (!options.unix_socket.empty()) return false;
      unsigned char buf[sizeof(in6_addr)];
      return ::inet_pton(AF_INET, options.host.c_str(), buf) != 1 &&
             ::inet_pton(AF_INET6, options.host.c_str(), buf) != 1;
    }

    // Resolves the host name on Asio's resolver thread, then connects (connect_timeout
    // bounds the resolution too). A failed resolution is a failed try: retried as a refused
    // connect is.
    void resolve(std::uint64_t gen) {
      arm_connect_timer(gen);
      resolver.async_resolve(
          options.host, std::to_string(options.port),
          [self = shared_from_this(), gen](const std::error_code& ec,
                                           ::asio::ip::tcp::resolver::results_type results) {
            if (self->generation != gen || self->state != phase::connecting) return;
            self->addresses.clear();
            for (const auto& r : results)
              if (r.endpoint().address().is_v4()) self->addresses.push_back(r.endpoint());
            if (self->addresses.empty())
              for (const auto& r : results)
                self->addresses.push_back(r.endpoint());
            if (ec || self->addresses.empty()) {
              self->connect_timer.cancel();
              return self->connect_failed("resolving " + self->options.host + ": " +
                                          (ec ? ec.message() : std::string("no address")));
            }
            self->resolved = true;
            self->connect();
          });
    }

    // A try failed before a socket was open: retried, or every waiting command fails.
    void connect_failed(const std::string& error) {
      connect_error = error;
      if (retry_connect()) return;
      fail_waiting(std::make_exception_ptr(
          dlq::connection_error(msg("connecting: " + error + tries(),
                                    "is redis-server running and listening on this address?"),
                                false)));
    }

    void connect() {
      state = phase::connecting;
      const std::uint64_t gen = ++generation;
      connect_error.clear();
      handshake_error = nullptr;
      if (!resolved && needs_resolving()) return resolve(gen);
      std::string error;
      bool done = false;
      const int s = open_socket(error, done);
      if (s < 0) {
        connect_timer.cancel();  // armed by resolve()
        return connect_failed(error);
      }
      sd.emplace(executor, s);
      connected = false;
      flush_posted = write_waiting = reading = false;
      out.clear();
      out_off = 0;
      in_begin = in_end = in_need = 0;
      arm_connect_timer(gen);
      // The handshake: AUTH, SELECT, and CLUSTER SLOTS (for the hook: the slot map).
      auto handshake = [&](op::kind what, const char* label,
                           std::initializer_list<std::string_view> args) {
        detail::resp_command(out, args.size());
        for (auto a : args)
          detail::resp_arg(out, a);
        op o;
        o.what = what;
        o.label_prefix = label;
        o.sent = true;
        inflight.push_back(std::move(o));
      };
      if (!options.password.empty()) {
        if (options.user.empty()) {
          handshake(op::kind::handshake, "AUTH", {"AUTH", options.password});
        } else {
          handshake(op::kind::handshake, "AUTH", {"AUTH", options.user, options.password});
        }
      }
      const std::string db = std::to_string(options.db);
      if (options.db != 0) handshake(op::kind::handshake, "SELECT", {"SELECT", db});
      handshake(op::kind::cluster, "CLUSTER", {"CLUSTER", "SLOTS"});
      handshake_left = inflight.size();
      if (done) return on_connected();
      write_waiting = true;
      sd->async_wait(::asio::posix::stream_descriptor::wait_write,
                     [self = shared_from_this(), gen](const std::error_code& ec) {
                       if (self->generation != gen) return;
                       self->write_waiting = false;
                       if (!ec && !self->connected) self->on_connected();
                     });
    }

    // The TCP connect completed (or failed): the handshake goes out.
    void on_connected() {
      int err = 0;
      socklen_t len = sizeof err;
      if (::getsockopt(fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err != 0) {
        connect_error = std::strerror(err);
        return lost(connect_error);
      }
      connected = true;
      flush();
    }

    // connect_timeout runs from the attempt, and again from the moment the handshake is
    // handed to the kernel (the loop may have been busy before it wrote it).
    void arm_connect_timer(std::uint64_t gen) {
      if (options.connect_timeout.count() <= 0) return;
      connect_deadline = std::chrono::steady_clock::now() + options.connect_timeout;
      wait_connect_timer(gen);
    }
    void wait_connect_timer(std::uint64_t gen) {
      connect_timer.expires_at(connect_deadline);
      connect_timer.async_wait([self = shared_from_this(), gen](const std::error_code& ec) {
        if (ec || self->generation != gen || self->state != phase::connecting) return;
        if (self->connect_deadline > std::chrono::steady_clock::now())
          return self->wait_connect_timer(gen);
        // Progress the loop had not handled yet (it was busy): handled now, and the limit
        // starts again for the answers still to come.
        if (self->pump()) {
          if (self->generation != gen || self->state != phase::connecting) return;
          self->connect_deadline =
              std::max(self->connect_deadline,
                       std::chrono::steady_clock::now() + self->options.connect_timeout);
          return self->wait_connect_timer(gen);
        }
        self->drop(std::make_exception_ptr(dlq::timeout_error(
            self->msg(std::string(self->sd ? "connecting" : "resolving the host name") +
                          ": no answer within " +
                          std::to_string(self->options.connect_timeout.count()) + " ms",
                      "the server is frozen, overloaded or unreachable; check it or raise "
                      "ConnectionOptions::connect_timeout"),
            false)));
      });
    }

    // --- writing -------------------------------------------------------------------------
    // The flush policy: a command issued while no other awaits its answer goes out at once
    // (the server has nothing else to do; no loop turn is spent before it gets it — a send
    // awaited one at a time, or the first of a burst after a quiet spell); while answers are
    // awaited, commands are coalesced and go out at the end of the current handler (one
    // posted flush: a burst in one send()). While the socket does not take more (a write
    // waits for it), everything joins the waiting output. Writing each chunk of a burst
    // early (so that the server works while the client builds the rest) was measured and
    // lost on this 2-core machine: more send()s, and no idle core for the overlap.
    void schedule_flush() {
      if (write_waiting || !connected) return;
      if (inflight.size() == 1 && out_off < out.size()) {
        const std::uint64_t gen = generation;
        flush();
        if (generation != gen || write_waiting || out_off == out.size()) return;
      }
      if (flush_posted) return;
      flush_posted = true;
      ::asio::post(executor, [self = shared_from_this(), gen = generation] {
        if (self->generation != gen) return;
        self->flush_posted = false;
        if (!self->write_waiting) self->flush();
      });
    }

    // Hands the output buffer to the kernel, as much as it takes.
    void flush() {
      const int s = fd();
      while (out_off < out.size()) {
        const ssize_t n =
            ::send(s, out.data() + out_off, out.size() - out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
          out_off += static_cast<std::size_t>(n);
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          if (out_off > out.size() / 2) {  // keep the buffer from growing without bound
            out.erase(0, out_off);
            out_off = 0;
          }
          wait_write();
          start_read();
          return;
        }
        return lost(n == 0 ? std::string("write returned 0") : std::strerror(errno));
      }
      out.clear();
      out_off = 0;
      on_flushed();
      start_read();
    }

    void wait_write() {
      if (write_waiting || !sd) return;
      write_waiting = true;
      sd->async_wait(::asio::posix::stream_descriptor::wait_write,
                     [self = shared_from_this(), gen = generation](const std::error_code& ec) {
                       if (self->generation != gen) return;
                       self->write_waiting = false;
                       if (!ec) self->flush();
                     });
    }

    // The output buffer drained: every command issued so far is with the kernel, and its
    // command_timeout (the handshake's connect_timeout) counts from now at the latest.
    void on_flushed() {
      const auto now = std::chrono::steady_clock::now();
      if (state == phase::connecting && options.connect_timeout.count() > 0)
        connect_deadline = std::max(connect_deadline, now + options.connect_timeout);
      for (std::size_t i = inflight.size(); i-- > 0;) {
        op& o = inflight[i];
        if (o.written) break;
        o.written = true;
        if (options.command_timeout.count() > 0 && o.what == op::kind::command)
          o.deadline = std::max(o.deadline, now + options.command_timeout);
      }
    }

    // --- reading -------------------------------------------------------------------------
    // Input is awaited only while answers are expected, so an idle connection holds no
    // outstanding operation and io_context::run() can return.
    void start_read() {
      if (reading || !sd || !connected || inflight.empty()) return;
      reading = true;
      sd->async_wait(::asio::posix::stream_descriptor::wait_read,
                     [self = shared_from_this(), gen = generation,
                      seq = ++read_seq](const std::error_code& ec) {
                       if (self->generation != gen || self->read_seq != seq) return;
                       self->reading = false;
                       if (!ec) self->on_readable();
                     });
    }

    // Nothing in flight any more, but a read wait is still registered: the last answers
    // were handled outside the read handler (by a time limit's poll of the socket). It is
    // cancelled, or io_context::run() would not return while the connection is idle.
    void stop_reading() {
      if (!reading || write_waiting || !sd || !inflight.empty()) return;
      reading = false;
      ++read_seq;
      std::error_code ec;
      sd->cancel(ec);
    }

    // Reads what the socket holds and completes the commands whose answers are complete.
    // When the stream ended (or failed) in the same pass, the replies that arrived before
    // it complete first: a write whose answer came is not reported as outcome unknown.
    void on_readable() {
      std::string down;
      read_some(down);
      const std::uint64_t gen = generation;
      process();
      if (!down.empty() && generation == gen) lost(down);
    }

    // Reads until the socket is drained; `down` is set when the connection went down (the
    // caller reports it after the replies already read).
    void read_some(std::string& down) {
      // Until the socket is drained (a short read or EAGAIN): the reactor's readiness is
      // edge-triggered, so bytes left in the socket would wait for the next edge.
      for (;;) {
        if (in_begin == in_end) in_begin = in_end = 0;
        // Room for 16 KB more, or for the incomplete reply's announced length — grown by
        // doubling at most, so that a length announced by a hostile server is not
        // allocated before its bytes arrive.
        const std::size_t have = in_end - in_begin;
        std::size_t want = have + 16384;
        if (in_need > want) want = std::min(in_need, std::max(want, have * 2));
        if (in_cap - in_begin < want) {
          if (in_cap >= want) {  // room at the front
            std::memmove(in.get(), in.get() + in_begin, in_end - in_begin);
          } else {
            const std::size_t cap = std::max(want, in_cap * 2);
            std::unique_ptr<char[]> bigger(new char[cap]);
            if (in_end > in_begin)
              std::memcpy(bigger.get(), in.get() + in_begin, in_end - in_begin);
            in = std::move(bigger);
            in_cap = cap;
          }
          in_end -= in_begin;
          in_begin = 0;
        }
        const std::size_t room = in_cap - in_end;
        const ssize_t n = ::recv(fd(), in.get() + in_end, room, MSG_DONTWAIT);
        if (n > 0) {
          in_end += static_cast<std::size_t>(n);
          if (static_cast<std::size_t>(n) < room) return;
          continue;  // the buffer filled up: more may be waiting (it grows next round)
        }
        if (n == 0) {
          down = "Server closed the connection";
          return;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        down = std::strerror(errno);
        return;
      }
    }

    // Completes the commands whose replies are in the input buffer, oldest first. A
    // completion may issue commands, close the connection or drop the last handle to it.
    void process() {
      const auto self = shared_from_this();
      const std::uint64_t gen = generation;
      while (!inflight.empty()) {
        // A reply known to need more bytes than have arrived is not parsed again (a big
        // reply would otherwise be re-parsed, and its first items copied, per read).
        if (in_need > in_end - in_begin) break;
        RedisReply r;
        const detail::parse_status s = parser.parse(in.get() + in_begin, in_end - in_begin, r);
        if (s == detail::parse_status::incomplete) {
          in_need = parser.need;
          break;
        }
        if (s == detail::parse_status::bad) return lost("Protocol error: " + parser.why);
        in_begin += parser.used;
        in_need = 0;
        op o = inflight.pop_front();
        if (o.what == op::kind::command && inflight.empty() && command_timer_armed)
          command_timer.cancel();
        try {
          complete(o, std::move(r));
        } catch (...) {
          // A completion threw: it leaves run(); the replies still buffered are handled
          // on the executor's next turn.
          if (generation == gen)
            ::asio::post(executor, [self, gen] {
              if (self->generation != gen) return;
              self->process();
            });
          throw;
        }
        if (generation != gen) return;  // closed or dropped by the completion
      }
      if (inflight.empty()) return stop_reading();
      start_read();
    }

    void complete(op& o, RedisReply&& r) {
      std::exception_ptr e;
      if (o.what == op::kind::cluster) return on_handshake(true, e, r);  // the reply as is
      if (r.type == reply_type::error && !o.raw_errors) {
        // The blocking paths' mapping (code, hints), with the async path's own word on a
        // cluster redirection.
        const std::string code = redis::detail::reply_code(r.str);
        const bool redirected = code == "MOVED" || code == "ASK";
        e = std::make_exception_ptr(redis::detail::reply_error_of(
            r.str, endpoint, o.label(), false,
            redirected ? "the server is a Redis Cluster node: a RedisConnection talks to one "
                         "node; dlq::asio::RedisListStorage routes by slot"
                       : ""));
        r = RedisReply{};
      }
      if (o.what != op::kind::command) return on_handshake(o.what == op::kind::cluster, e, r);
      if (o.post) return post_done(o, e, std::move(r));
      o.done(e, std::move(r));
    }

    void on_handshake(bool is_cluster, std::exception_ptr e, const RedisReply& r) {
      if (state != phase::connecting) return;
      if (is_cluster && cluster_hook) {
        // An error reply: no cluster support, a plain server. Either way the hook learns it.
        const auto self = shared_from_this();
        const std::uint64_t gen = generation;
        try {
          cluster_hook(r);
        } catch (...) {  // NOLINT(bugprone-empty-catch): documented not to throw
        }
        if (generation != gen || state != phase::connecting) return;
      }
      if (e && !handshake_error) handshake_error = e;
      if (--handshake_left != 0) return;
      if (handshake_error) return drop(handshake_error);
      connect_timer.cancel();
      state = phase::ready;
      out.append(waiting_out);
      waiting_out.clear();
      if (waiting.empty()) return;
      // All of them in flight before any is written (a failed write reports them as sent).
      while (!waiting.empty())
        enqueue(waiting.pop_front());
      arm_command_timer();
      schedule_flush();
    }

    // --- commands ------------------------------------------------------------------------
    // `o` is formatted at the end of the output buffer.
    void send(op&& o) {
      enqueue(std::move(o));
      arm_command_timer();
      schedule_flush();
    }
    void enqueue(op&& o) {
      o.sent = true;
      if (options.command_timeout.count() > 0)
        o.deadline = std::chrono::steady_clock::now() + options.command_timeout;
      inflight.push_back(std::move(o));
    }

    // Handles the socket's readiness at once, ahead of the loop's turn: writes what is
    // still buffered (or completes the TCP connect) when the socket takes it, reads the
    // answers that have arrived. True when there was something to handle. Called when a
    // time limit passes: the loop may have been busy with other work while the server did
    // answer.
    bool pump() {
      if (!sd) return false;
      pollfd p{fd(), POLLIN | POLLOUT, 0};
      if (::poll(&p, 1, 0) <= 0) return false;
      const auto self = shared_from_this();
      const std::uint64_t gen = generation;
      const bool out_ready = (p.revents & (POLLOUT | POLLERR | POLLHUP)) != 0;
      if (!connected) {
        if (!out_ready) return false;
        on_connected();
        return true;
      }
      bool progressed = false;
      if (out_off < out.size() && out_ready) {
        flush();
        progressed = true;
        if (generation != gen) return true;
      }
      if (!inflight.empty() && (p.revents & (POLLIN | POLLERR | POLLHUP)) != 0) {
        on_readable();
        progressed = true;
      }
      return progressed;
    }

    void arm_command_timer() {
      if (command_timer_armed || state != phase::ready || inflight.empty() ||
          options.command_timeout.count() <= 0)
        return;
      command_timer_armed = true;
      command_timer.expires_at(inflight.front().deadline);
      command_timer.async_wait(
          [self = shared_from_this(), gen = generation](const std::error_code& ec) {
            self->command_timer_armed = false;
            if (ec == ::asio::error::operation_aborted && self->generation != gen) {
              self->arm_command_timer();
              return;
            }
            self->on_command_timer();
          });
    }

    // The commands in flight get their limit again from now, and the timer is armed.
    void restart_limits() {
      if (inflight.empty()) return;
      const auto again = std::chrono::steady_clock::now() + options.command_timeout;
      for (std::size_t i = 0; i < inflight.size(); ++i)
        inflight[i].deadline = std::max(inflight[i].deadline, again);
      arm_command_timer();
    }

    void on_command_timer() {
      if (inflight.empty() || state != phase::ready) return;
      if (inflight.front().deadline <= std::chrono::steady_clock::now()) {
        // The loop may have been busy (the application's work, a burst of sends) while the
        // commands waited in the output buffer or their answers in the socket: handle those
        // first. There was something to handle: the server is answering (or had no chance
        // yet), and the commands still waiting get their limit again from now — as the
        // blocking connection, whose limit is per read.
        const std::uint64_t gen = generation;
        bool progressed = false;
        try {
          progressed = pump();
        } catch (...) {
          // A completion called from the check threw (it leaves run()): the answers were
          // progress, and the commands still in flight keep a limit — the timer is armed
          // again before the exception goes on, or they would wait without one.
          if (generation == gen) restart_limits();
          throw;
        }
        if (progressed) {
          if (generation != gen) return;  // the connection went down: already reported
          return restart_limits();
        }
      }
      if (inflight.empty()) return;
      const op& front = inflight.front();
      if (front.deadline <= std::chrono::steady_clock::now()) {
        const std::string limit = std::to_string(options.command_timeout.count()) + " ms";
        drop_with([&](const op& o) {
          const bool unknown = o.write && o.sent;
          return std::make_exception_ptr(dlq::timeout_error(
              msg(o.label() + ": no answer within " + limit +
                      (&o == &front ? "" : " (another command on the connection timed out)"),
                  unknown ? "the write was sent and may or may not have been applied (outcome "
                            "unknown); it was not retried — check the data before sending it "
                            "again"
                          : "the server is frozen, overloaded or unreachable; check it or raise "
                            "ConnectionOptions::command_timeout"),
              unknown));
        });
        return;
      }
      arm_command_timer();
    }

    // --- failures ------------------------------------------------------------------------
    void fail_waiting(const std::exception_ptr& e) {
      state = phase::idle;
      waiting_out.clear();
      while (!waiting.empty()) {
        op o = waiting.pop_front();
        post_done(o, e);
      }
    }

    // Closes the socket and forgets its buffers (their commands are reported by the caller).
    void close_socket() {
      ++generation;
      state = phase::idle;
      connected = flush_posted = write_waiting = reading = false;
      connect_timer.cancel();
      command_timer.cancel();
      backoff_timer.cancel();
      resolver.cancel();
      resolved = false;
      if (sd) {
        std::error_code ec;
        sd->close(ec);
        sd.reset();
      }
      out.clear();
      out_off = 0;
      in_begin = in_end = in_need = 0;
    }

    // Drops the connection: every command in flight and waiting completes with `e`.
    void drop(const std::exception_ptr& e) {
      drop_with([&](const op&) { return e; });
    }

    template <class MakeError>
    void drop_with(MakeError make) {
      close_socket();
      // The rings are emptied before any completion is posted.
      detail::ring<op> f = std::move(inflight);
      detail::ring<op> w = std::move(waiting);
      waiting_out.clear();
      for (std::size_t i = 0; i < f.size(); ++i)
        if (f[i].what == op::kind::command) post_done(f[i], make(f[i]));
      for (std::size_t i = 0; i < w.size(); ++i)
        post_done(w[i], make(w[i]));
    }

    void close() noexcept {
      closed = true;
      try {
        drop_with([this](const op& o) { return closed_error(o); });
      } catch (...) {  // NOLINT(bugprone-empty-catch): close must not throw
      }
    }

    // The connection failed under the commands (EOF, an I/O error, a failed connect, bytes
    // that are not RESP): those in flight fail with connection_error, those waiting for the
    // connect with its error. As on the blocking connection, a read in flight on an
    // established connection is sent again, once, on a fresh one (it changes nothing, so
    // it cannot double anything); a write never is (outcome unknown), nor anything after a
    // time limit passed (drop_with) or close().
    void lost(const std::string& text) {
      const bool connecting = state == phase::connecting;
      const bool was_ready = state == phase::ready;
      close_socket();
      detail::ring<op> f = std::move(inflight);
      for (std::size_t i = 0; i < f.size(); ++i) {
        op& o = f[i];
        if (o.what != op::kind::command) continue;
        if (was_ready && !closed && !o.write && !o.retried && !o.resend.empty()) {
          o.retried = true;
          o.sent = o.written = false;
          waiting_out.append(o.resend);
          waiting.push_back(std::move(o));
          continue;
        }
        const bool unknown = o.write;
        post_done(o, std::make_exception_ptr(dlq::connection_error(
                         msg(o.label() + ": the connection was lost (" + text + ")",
                             unknown ? "the write was sent and may or may not have been applied "
                                       "(outcome unknown); check the data before sending it again"
                                     : "the server restarted or is unreachable; retry"),
                         unknown)));
      }
      if (was_ready && !waiting.empty()) return start_connect();  // the reads sent again
      if (!waiting.empty()) {
        if (connecting && retry_connect()) return;  // the waiting output is kept for it
        const std::string why =
            connect_error.empty() ? "the connection was lost (" + text + ")" : connect_error;
        fail_waiting(std::make_exception_ptr(
            dlq::connection_error(msg("connecting: " + why + tries(),
                                      "is redis-server running and listening on this address?"),
                                  false)));
      }
      waiting_out.clear();
    }
  };

  std::shared_ptr<impl> impl_;
};

}  // namespace dlq::asio

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/redis_connection.hpp
/// dlq::asio::RedisConnection: one non-blocking Redis connection driven by an Asio executor
/// (hiredis's async API under a small Asio adapter). CMake: dlq::asio and dlq::redis.
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
///   Host names are resolved by hiredis with getaddrinfo (blocking): give an IP address or
///   a unix socket where the event loop must never block.
/// - Any number of commands in flight: each is written as soon as it is issued (pipelined);
///   replies come back in order.
/// - Timeouts: ConnectionOptions::connect_timeout bounds the TCP connect plus the handshake;
///   command_timeout bounds each command from the moment it is issued on a ready
///   connection, and again from the moment it is handed to the kernel. When a limit passes,
///   what the socket holds is handled first (output the loop had no turn to write, answers
///   not read yet: the loop may have been busy), and if there was any the limit starts
///   again; a command still without its answer then drops the connection: it and every
///   other one in flight complete with dlq::timeout_error (outcome_unknown() == true for
///   writes: they were sent). A zero limit means none.
/// - Failures: a lost connection fails the commands in flight with dlq::connection_error
///   (outcome_unknown() for writes). No command is ever re-sent. The next command reconnects
///   (one try; it fails with the connect error when that try fails).
/// - A Redis Cluster node is refused: the handshake asks CLUSTER SLOTS, and a node that
///   answers with slots fails every command with dlq::invalid_argument — the async path
///   does not route by slot yet; use the blocking dlq::RedisListStorage there.
/// - Error replies become dlq::reply_error (code() = Redis's first word).
///
/// Thread-safety: not thread-safe. Call it from its executor, which must be single-threaded
/// (an io_context run by one thread, or a strand). Callbacks run on the executor, posted:
/// never inside execute(). Destroying it (or close()) completes every pending command.
#pragma once

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <vector>
#include "dlq/redis/error_mapping.hpp"

#include "dlq/asio/dead_letter_queue.hpp"
#include "dlq/errors.hpp"
#include "dlq/redis/error_mapping.hpp"
#include "dlq/redis/options.hpp"

namespace dlq::asio {

/// An owned copy of a Redis reply (hiredis frees its own after the callback).
struct RedisReply {
  int type = REDIS_REPLY_NIL;        ///< REDIS_REPLY_STRING, _ARRAY, _INTEGER, _NIL, _STATUS
  long long integer = 0;             ///< for REDIS_REPLY_INTEGER
  std::string str;                   ///< for strings and status replies
  std::vector<RedisReply> elements;  ///< for arrays

  /// Copies a hiredis reply.
  static RedisReply copy(const redisReply& r) {
    RedisReply out;
    out.type = r.type;
    out.integer = r.integer;
    if (r.str != nullptr) out.str.assign(r.str, r.len);
    out.elements.reserve(r.elements);
    for (std::size_t i = 0; i < r.elements; ++i)
      out.elements.push_back(copy(*r.element[i]));
    return out;
  }
};

/// A non-blocking Redis connection (see the file comment). Movable, not copyable.
class RedisConnection {
 public:
  using executor_type = ::asio::any_io_executor;
  /// Called once per command, on the executor: (null, reply) or (error, empty reply).
  using callback = std::function<void(std::exception_ptr, RedisReply)>;

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
  std::size_t pending() const noexcept { return impl_->waiting.size() + impl_->inflight.size(); }

  /// Sends `args` as one command. `write`: the command may change data (a lost answer is
  /// then reported with outcome_unknown()). `label` names it in messages ("RPUSH dlq:{q}").
  /// `done` is called exactly once, posted to the executor.
  void execute(std::vector<std::string> args, bool write, std::string label, callback done) {
    impl_->execute(std::move(args), write, std::move(label), std::move(done));
  }

  /// execute() with an Asio completion token; completes with
  /// `void(std::exception_ptr, RedisReply)`.
  template <class CompletionToken>
  auto async_execute(std::vector<std::string> args, bool write, CompletionToken&& token) {
    return ::asio::async_initiate<CompletionToken, void(std::exception_ptr, RedisReply)>(
        [self = impl_](auto handler, std::vector<std::string> a, bool w) {
          std::string label = a.empty() ? std::string() : a.front();
          self->execute(std::move(a), w, std::move(label),
                        detail::make_done<RedisReply>(self->executor, std::move(handler)));
        },
        token, std::move(args), write);
  }

  /// Drops the connection: every pending command completes with dlq::connection_error
  /// (outcome_unknown() for writes already sent), and every later one too. Idempotent.
  void close() noexcept { impl_->close(); }

 private:
  struct op {
    std::vector<std::string> args;
    std::string label;
    bool write = false;
    bool sent = false;
    bool written = false;  // handed to the kernel (hiredis's buffer drained after it)
    bool finished = false;
    callback done;
    std::chrono::steady_clock::time_point deadline;
  };
  using op_ptr = std::shared_ptr<op>;

  // The Asio side of one hiredis context: the socket's readiness waits.
  struct adapter : std::enable_shared_from_this<adapter> {
    adapter(const executor_type& ex, int fd, redisAsyncContext* c, const std::size_t* expected)
        : sd(ex, fd), ctx(c), expected_replies(expected) {}
    ::asio::posix::stream_descriptor sd;
    redisAsyncContext* ctx;  // null once hiredis cleaned up
    // Replies the connection waits for: reading only while there are some, so an idle
    // connection holds no outstanding operation and io_context::run() can return.
    const std::size_t* expected_replies;
    bool want_read = false, reading = false, want_write = false, writing = false;
    bool handling_read = false;

    void start(::asio::posix::stream_descriptor::wait_type type) {
      const bool read = type == ::asio::posix::stream_descriptor::wait_read;
      bool& busy = read ? reading : writing;
      // hiredis asks for reads before it hands out the replies it just read: the read
      // handler decides after them whether to wait again.
      if (busy || ctx == nullptr || (read && (handling_read || *expected_replies == 0))) return;
      busy = true;
      sd.async_wait(type, [self = shared_from_this(), read, type](const std::error_code& ec) {
        (read ? self->reading : self->writing) = false;
        if (ec || self->ctx == nullptr) return;
        if (read ? self->want_read : self->want_write) self->handle(read);
        if (self->ctx != nullptr && (read ? self->want_read : self->want_write)) self->start(type);
      });
    }
    // Lets hiredis read or write (it may free the context: ctx is then null).
    void handle(bool read) {
      if (read) {
        handling_read = true;
        redisAsyncHandleRead(ctx);
        handling_read = false;
      } else {
        redisAsyncHandleWrite(ctx);
        if (ctx != nullptr && !want_write) flushed(ctx);  // hiredis's buffer is empty
      }
    }
    // Handles the socket's readiness at once, ahead of the loop's turn: writes what hiredis
    // still holds (or completes the TCP connect) when the socket takes it, reads the answers
    // that have arrived. True when there was something to handle. Called when a time limit
    // passes: the loop may have been busy with other work while the server did answer.
    bool pump() {
      if (ctx == nullptr) return false;
      pollfd p{ctx->c.fd, POLLIN | POLLOUT, 0};
      if (::poll(&p, 1, 0) <= 0) return false;
      bool progressed = false;
      if (want_write && (p.revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
        handle(false);
        progressed = true;
        if (ctx != nullptr && want_write) start(::asio::posix::stream_descriptor::wait_write);
      }
      if (ctx != nullptr && want_read && *expected_replies > 0 &&
          (p.revents & (POLLIN | POLLERR | POLLHUP)) != 0) {
        handle(true);
        progressed = true;
        if (ctx != nullptr && want_read) start(::asio::posix::stream_descriptor::wait_read);
      }
      return progressed;
    }
    static adapter* of(void* p) { return static_cast<adapter*>(p); }
    static void add_read(void* p) {
      of(p)->want_read = true;
      of(p)->start(::asio::posix::stream_descriptor::wait_read);
    }
    static void del_read(void* p) { of(p)->want_read = false; }
    static void add_write(void* p) {
      of(p)->want_write = true;
      of(p)->start(::asio::posix::stream_descriptor::wait_write);
    }
    static void del_write(void* p) { of(p)->want_write = false; }
    static void cleanup(void* p);               // defined after impl
    static void flushed(redisAsyncContext* c);  // defined after impl
  };

  struct impl : std::enable_shared_from_this<impl> {
    impl(executor_type ex, redis::ConnectionOptions o)
        : executor(std::move(ex)),
          options(std::move(o)),
          endpoint(options.endpoint()),
          command_timer(executor),
          connect_timer(executor) {}
    ~impl() { close(); }

    executor_type executor;
    redis::ConnectionOptions options;
    std::string endpoint;
    ::asio::steady_timer command_timer;
    ::asio::steady_timer connect_timer;
    bool command_timer_armed = false;
    enum class phase { idle, connecting, ready } state = phase::idle;
    bool closed = false;
    redisAsyncContext* ctx = nullptr;
    std::shared_ptr<adapter> ad;
    std::uint64_t generation = 0;    // one per connection attempt
    std::size_t handshake_left = 0;  // replies of the handshake still expected
    std::exception_ptr handshake_error;
    std::string connect_error;         // hiredis' text of a failed connect
    std::deque<op_ptr> waiting;        // issued while connecting
    std::deque<op_ptr> inflight;       // sent, in order
    std::size_t expected_replies = 0;  // commands sent on this context, not answered yet
    std::chrono::steady_clock::time_point connect_deadline;  // of the attempt in progress

    std::string msg(const std::string& what, const std::string& hint) const {
      return dlq::detail::message("redis", endpoint, what, hint);
    }

    void finish(const op_ptr& o, std::exception_ptr e, RedisReply r = {}) {
      if (o->finished) return;
      o->finished = true;
      ::asio::post(executor, [done = std::move(o->done), e, r = std::move(r)]() mutable {
        done(e, std::move(r));
      });
    }

    std::exception_ptr closed_error(const op& o) const {
      const bool unknown = o.write && o.sent;
      return std::make_exception_ptr(dlq::connection_error(
          msg(o.label + ": the connection was closed with the command in flight",
              unknown ? "the write was sent and may or may not have been applied (outcome "
                        "unknown); check the data before sending it again"
                      : "nothing was sent; open a new queue or connection to go on"),
          unknown));
    }

    void execute(std::vector<std::string> args, bool write, std::string label, callback done) {
      auto o = std::make_shared<op>();
      o->args = std::move(args);
      o->write = write;
      o->label = std::move(label);
      o->done = std::move(done);
      if (closed) return finish(o, closed_error(*o));
      if (state == phase::ready && expected_replies == 0 && !idle_connection_alive()) {
        drop(nullptr);  // nothing in flight: nothing to report; reconnect below
      }
      if (state == phase::ready) return send(o);
      waiting.push_back(std::move(o));
      if (state == phase::idle) connect();
    }

    // An idle connection is not read (see adapter), so a server that closed it (restart,
    // idle timeout) is noticed here, before a write is sent into a dead socket: one
    // non-blocking peek when a command follows a quiet spell.
    bool idle_connection_alive() const {
      if (ctx == nullptr) return false;
      char byte;
      const ssize_t n = ::recv(ctx->c.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0) return true;    // unexpected data; hiredis reads it with the next reply
      if (n == 0) return false;  // the peer closed it
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    }

    // --- connecting ----------------------------------------------------------------------
    void connect() {
      state = phase::connecting;
      const std::uint64_t gen = ++generation;
      connect_error.clear();
      handshake_error = nullptr;
      redisAsyncContext* c = options.unix_socket.empty()
                                 ? redisAsyncConnect(options.host.c_str(), options.port)
                                 : redisAsyncConnectUnix(options.unix_socket.c_str());
      if (c == nullptr || c->err != 0) {
        const std::string text = c == nullptr ? "cannot allocate a hiredis context" : c->errstr;
        if (c != nullptr) redisAsyncFree(c);
        return fail_waiting(std::make_exception_ptr(dlq::connection_error(
            msg("connecting: " + text, "is redis-server running and listening on this address?"),
            false)));
      }
      ctx = c;
      c->data = this;
      expected_replies = 0;
      ad = std::make_shared<adapter>(executor, c->c.fd, c, &expected_replies);
      c->ev.data = ad.get();
      c->ev.addRead = &adapter::add_read;
      c->ev.delRead = &adapter::del_read;
      c->ev.addWrite = &adapter::add_write;
      c->ev.delWrite = &adapter::del_write;
      c->ev.cleanup = &adapter::cleanup;
      redisAsyncSetConnectCallback(c, &on_connect);
      arm_connect_timer(gen);
      // The handshake: AUTH, SELECT, and CLUSTER SLOTS (a cluster node is refused).
      std::vector<std::vector<std::string>> hs;
      if (!options.password.empty()) {
        if (options.user.empty()) {
          hs.push_back({"AUTH", options.password});
        } else {
          hs.push_back({"AUTH", options.user, options.password});
        }
      }
      if (options.db != 0) hs.push_back({"SELECT", std::to_string(options.db)});
      hs.push_back({"CLUSTER", "SLOTS"});
      handshake_left = hs.size();
      for (auto& args : hs) {
        const bool is_cluster = args.front() == "CLUSTER";
        const std::string label = args.front() == "AUTH" ? "AUTH" : args.front();
        auto o = std::make_shared<op>();
        o->args = std::move(args);
        o->label = label;
        o->done = [self = shared_from_this(), gen, is_cluster](std::exception_ptr e, RedisReply r) {
          self->on_handshake(gen, is_cluster, e, r);
        };
        send(o, false);
      }
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
        if (self->caught_up()) {
          if (self->generation != gen || self->state != phase::connecting) return;
          self->connect_deadline =
              std::max(self->connect_deadline,
                       std::chrono::steady_clock::now() + self->options.connect_timeout);
          return self->wait_connect_timer(gen);
        }
        self->drop(std::make_exception_ptr(dlq::timeout_error(
            self->msg("connecting: no answer within " +
                          std::to_string(self->options.connect_timeout.count()) + " ms",
                      "the server is frozen, overloaded or unreachable; check it or raise "
                      "ConnectionOptions::connect_timeout"),
            false)));
      });
    }

    // hiredis's output buffer drained: every command issued so far is with the kernel, and
    // its command_timeout (the handshake's connect_timeout) counts from now at the latest.
    void on_flushed() {
      const auto now = std::chrono::steady_clock::now();
      if (state == phase::connecting && options.connect_timeout.count() > 0)
        connect_deadline = std::max(connect_deadline, now + options.connect_timeout);
      for (auto it = inflight.rbegin(); it != inflight.rend() && !(*it)->written; ++it) {
        (*it)->written = true;
        if (options.command_timeout.count() > 0)
          (*it)->deadline = std::max((*it)->deadline, now + options.command_timeout);
      }
    }

    // A time limit passed: handles what the socket already holds before calling it a
    // timeout (see adapter::pump). True when there was something to handle.
    bool caught_up() {
      const std::shared_ptr<adapter> a = ad;  // kept while hiredis may free the context
      return a && ctx != nullptr && a->pump();
    }

    void on_handshake(std::uint64_t gen, bool is_cluster, std::exception_ptr e,
                      const RedisReply& r) {
      if (gen != generation || state != phase::connecting) return;
      if (is_cluster) {
        e = nullptr;  // an error reply: no cluster support, a plain server
        if (r.type == REDIS_REPLY_ARRAY && !r.elements.empty()) {
          e = std::make_exception_ptr(dlq::invalid_argument(
              msg("the server is a Redis Cluster node",
                  "dlq::asio::RedisListStorage supports a single server only for now; use the "
                  "blocking dlq::RedisListStorage (it routes by slot) on a worker thread")));
        }
      }
      if (e && !handshake_error) handshake_error = e;
      if (--handshake_left != 0) return;
      if (handshake_error) return drop(handshake_error);
      connect_timer.cancel();
      state = phase::ready;
      auto ready = std::move(waiting);
      waiting.clear();
      for (auto& o : ready)
        send(o);
    }

    static void on_connect(const redisAsyncContext* c, int status) {
      if (status == REDIS_OK) return;
      auto* self = static_cast<impl*>(c->data);
      if (self != nullptr) self->connect_error = c->errstr != nullptr ? c->errstr : "";
      // hiredis frees the context next; adapter::cleanup reports it.
    }

    // --- commands ------------------------------------------------------------------------
    void send(const op_ptr& o, bool timed = true) {
      std::vector<const char*> argv;
      std::vector<std::size_t> lens;
      argv.reserve(o->args.size());
      lens.reserve(o->args.size());
      for (const auto& a : o->args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
      }
      auto* holder = new op_ptr(o);
      if (redisAsyncCommandArgv(ctx, &on_reply, holder, static_cast<int>(argv.size()), argv.data(),
                                lens.data()) != REDIS_OK) {
        delete holder;
        return finish(
            o, std::make_exception_ptr(dlq::connection_error(
                   msg(o->label + ": the connection is going down", "nothing was sent; retry"),
                   false)));
      }
      o->sent = true;
      ++expected_replies;
      if (!timed) return;  // the handshake: bounded by connect_timeout, not tracked here
      if (options.command_timeout.count() > 0)
        o->deadline = std::chrono::steady_clock::now() + options.command_timeout;
      inflight.push_back(o);
      arm_command_timer();
    }

    static void on_reply(redisAsyncContext* c, void* r, void* priv) {
      const std::unique_ptr<op_ptr> holder(static_cast<op_ptr*>(priv));
      auto* self = static_cast<impl*>(c->data);
      const op_ptr& o = *holder;
      if (self == nullptr) return;
      if (self->ctx == c && self->expected_replies > 0) --self->expected_replies;
      if (!self->inflight.empty() && self->inflight.front() == o) {
        self->inflight.pop_front();
        if (self->inflight.empty() && self->command_timer_armed) self->command_timer.cancel();
      }
      if (o->finished) return;
      if (r == nullptr) {
        const bool unknown = o->write;
        const std::string text = c->errstr != nullptr && c->err != 0 ? c->errstr : "closed";
        return self->finish(
            o, std::make_exception_ptr(dlq::connection_error(
                   self->msg(o->label + ": the connection was lost (" + text + ")",
                             unknown ? "the write was sent and may or may not have been applied "
                                       "(outcome unknown); check the data before sending it again"
                                     : "the server restarted or is unreachable; retry"),
                   unknown)));
      }
      const auto& reply = *static_cast<redisReply*>(r);
      if (reply.type == REDIS_REPLY_ERROR) {
        // The blocking paths' mapping (code, hints), with the async path's own word on a
        // cluster redirection.
        const std::string_view text(reply.str, reply.len);
        const std::string code = redis::detail::reply_code(text);
        const bool redirected = code == "MOVED" || code == "ASK";
        return self->finish(
            o, std::make_exception_ptr(redis::detail::reply_error_of(
                   reply, self->endpoint, o->label, false,
                   redirected ? "the server is a Redis Cluster node; the async path supports a "
                                "single server"
                              : "")));
      }
      self->finish(o, nullptr, RedisReply::copy(reply));
    }

    void arm_command_timer() {
      if (command_timer_armed || inflight.empty() || options.command_timeout.count() <= 0) return;
      command_timer_armed = true;
      command_timer.expires_at(inflight.front()->deadline);
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

    void on_command_timer() {
      // Skip the commands already answered.
      while (!inflight.empty() && inflight.front()->finished)
        inflight.pop_front();
      if (inflight.empty()) return;
      if (inflight.front()->deadline <= std::chrono::steady_clock::now()) {
        // The loop may have been busy (the application's work, a burst of sends) while the
        // commands waited in hiredis's buffer or their answers in the socket: handle those
        // first. There was something to handle: the server is answering (or had no chance
        // yet), and the commands still waiting get their limit again from now — as the
        // blocking connection, whose limit is per read.
        const std::uint64_t gen = generation;
        if (caught_up()) {
          if (generation != gen) return;  // the connection went down: already reported
          while (!inflight.empty() && inflight.front()->finished)
            inflight.pop_front();
          if (inflight.empty()) return;
          const auto again = std::chrono::steady_clock::now() + options.command_timeout;
          for (auto& o : inflight)
            o->deadline = std::max(o->deadline, again);
        }
      }
      const op& front = *inflight.front();
      if (front.deadline <= std::chrono::steady_clock::now()) {
        const std::string limit = std::to_string(options.command_timeout.count()) + " ms";
        drop_with([&](const op& o) {
          const bool unknown = o.write && o.sent;
          return std::make_exception_ptr(dlq::timeout_error(
              msg(o.label + ": no answer within " + limit +
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
      auto w = std::move(waiting);
      waiting.clear();
      for (auto& o : w)
        finish(o, e);
    }

    // Drops the connection: every command in flight and waiting completes with `e`.
    void drop(const std::exception_ptr& e) {
      drop_with([&](const op&) { return e; });
    }

    template <class MakeError>
    void drop_with(MakeError make) {
      ++generation;
      state = phase::idle;
      connect_timer.cancel();
      command_timer.cancel();
      auto f = std::move(inflight);
      inflight.clear();
      auto w = std::move(waiting);
      waiting.clear();
      for (auto& o : f)
        finish(o, make(*o));
      for (auto& o : w)
        finish(o, make(*o));
      if (redisAsyncContext* c = ctx) {
        ctx = nullptr;
        redisAsyncFree(c);  // NULL replies for the finished commands, then adapter::cleanup
      }
    }

    void close() noexcept {
      closed = true;
      try {
        drop_with([this](const op& o) { return closed_error(o); });
      } catch (...) {  // NOLINT(bugprone-empty-catch): close must not throw
      }
    }

    // hiredis freed the context by itself (connect failed, server closed, I/O error).
    void lost(redisAsyncContext* c) {
      if (ctx != c) return;  // freed by drop(): already reported
      ctx = nullptr;
      ++generation;
      state = phase::idle;
      connect_timer.cancel();
      inflight.clear();  // their NULL replies came before cleanup
      if (!waiting.empty()) {
        const std::string text = connect_error.empty() ? "the connection was lost" : connect_error;
        fail_waiting(std::make_exception_ptr(dlq::connection_error(
            msg("connecting: " + text, "is redis-server running and listening on this address?"),
            false)));
      }
    }
  };

  std::shared_ptr<impl> impl_;
};

inline void RedisConnection::adapter::flushed(redisAsyncContext* c) {
  auto* self = static_cast<impl*>(c->data);
  if (self != nullptr && self->ctx == c) self->on_flushed();
}

inline void RedisConnection::adapter::cleanup(void* p) {
  adapter* a = of(p);
  redisAsyncContext* c = a->ctx;
  a->ctx = nullptr;
  std::error_code ec;
  a->sd.cancel(ec);
  a->sd.release();  // hiredis closes the descriptor itself
  if (c != nullptr && c->data != nullptr) static_cast<impl*>(c->data)->lost(c);
}

}  // namespace dlq::asio

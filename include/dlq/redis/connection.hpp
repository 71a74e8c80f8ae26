// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/connection.hpp
/// One blocking connection to Redis: dlq::redis::Command, dlq::redis::Reply and
/// dlq::redis::Connection.
///
/// dlq owns the socket (redis/detail/transport.hpp: plain TCP, a unix socket, or TLS over
/// OpenSSL, redis/detail/tls_openssl.hpp, when built with it: tls_available()) and uses
/// hiredis (0.14 and 1.x) for the protocol alone: its RESP reader parses the replies, so
/// plain and TLS connections share one request path.
/// A Connection connects lazily, applies the connect and command timeouts, TCP keepalive,
/// AUTH and SELECT — and applies them again after every reconnect. A lost connection is
/// re-established with exponential backoff. Requests are pipelined: all commands of a call
/// are written with one send() and all replies read afterwards.
///
/// With Redis Sentinel (ConnectionOptions::sentinel) every connect first asks the sentinels
/// where the master is and checks its ROLE; a request answered `READONLY` (a demoted
/// master) drops the connection and, when none of its writes ran, is sent once more to the
/// master found again (redis/detail/sentinel.hpp decides).
///
/// Retries are safe by construction: a read is retried once on a fresh connection after a
/// connection loss (never after a timeout); a write is retried only when not one byte of it
/// left this process. A write that failed after being (partly) sent throws with
/// `outcome_unknown() == true` and is never re-sent.
///
/// A Connection is not thread-safe; share connections between threads with
/// dlq::redis::ConnectionPool.
#pragma once

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "dlq/errors.hpp"
#include "dlq/redis/detail/sentinel.hpp"
#include "dlq/redis/detail/tls_diagnosis.hpp"
#include "dlq/redis/detail/transport.hpp"
#include "dlq/redis/error_mapping.hpp"
#include "dlq/redis/options.hpp"

#if defined(DLQ_REDIS_TLS) && DLQ_REDIS_TLS
#include "dlq/redis/detail/tls_openssl.hpp"
#endif

namespace dlq::redis {

/// True when this build speaks TLS (`rediss://`): dlq::redis was configured with OpenSSL
/// (DLQ_WITH_TLS). Without it a TLS connection fails with dlq::tls_error (cause not_built).
constexpr bool tls_available() noexcept {
#if defined(DLQ_REDIS_TLS) && DLQ_REDIS_TLS
  return true;
#else
  return false;
#endif
}

namespace detail {
class TlsContext;  // redis/detail/tls_openssl.hpp

struct ReplyDeleter {
  void operator()(redisReply* r) const noexcept {
    if (r != nullptr) freeReplyObject(r);
  }
};
struct ReaderDeleter {
  void operator()(redisReader* r) const noexcept {
    if (r != nullptr) redisReaderFree(r);
  }
};
}  // namespace detail

/// An owned hiredis reply (freed on destruction). Error replies are returned as replies of
/// type REDIS_REPLY_ERROR; see dlq::redis::check.
using Reply = std::unique_ptr<redisReply, detail::ReplyDeleter>;

/// Whether a request may change data. Decides what is retried after a failure.
enum class Effect : unsigned char {
  read,  ///< no side effect: retried once on a fresh connection after a connection loss
  write  ///< retried only if not one byte was sent; else outcome unknown, never re-sent
};

/// One Redis command: its arguments by reference (string views must outlive the call that
/// sends it) or owned (numbers, temporaries given to arg_copy).
class Command {
 public:
  Command() = default;
  /// Starts a command with its name, e.g. Command("RPUSH").
  explicit Command(std::string_view name) { arg(name); }
  Command(const Command&) = delete;  // views may point into owned_: copying would dangle
  Command& operator=(const Command&) = delete;
  Command(Command&&) = default;  // a moved deque keeps its elements in place
  Command& operator=(Command&&) = default;
  ~Command() = default;

  /// Appends an argument by reference: the bytes must stay valid until the command is sent.
  Command& arg(std::string_view a) {
    args_.push_back(a.data() != nullptr ? a : std::string_view("", 0));
    return *this;
  }
  /// Appends an integer argument (copied).
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  Command& arg(I n) {
    return arg_copy(std::to_string(n));
  }
  /// Appends an argument by copy.
  Command& arg_copy(std::string s) {
    owned_.push_back(std::move(s));
    return arg(std::string_view(owned_.back()));
  }
  /// Reserves room for `n` arguments.
  void reserve(std::size_t n) { args_.reserve(n); }
  /// Number of arguments, the name included.
  std::size_t size() const noexcept { return args_.size(); }
  /// The arguments.
  const std::vector<std::string_view>& args() const noexcept { return args_; }
  /// Sets the text naming this command in messages (default: name and first argument).
  Command& label(std::string text) {
    label_ = std::move(text);
    return *this;
  }
  /// The text naming this command in messages. Never contains AUTH arguments.
  std::string label() const {
    if (!label_.empty()) return label_;
    if (args_.empty()) return "(empty command)";
    std::string l(args_[0]);
    if (args_.size() > 1 && l != "AUTH" && l != "auth") {
      const std::string_view a1 = args_[1];
      l += " ";
      l += a1.size() > 64 ? std::string(a1.substr(0, 64)) + "…" : std::string(a1);
    }
    return l;
  }

  /// Appends this command in RESP (the Redis protocol) to `out`.
  void encode(std::string& out) const {
    char num[24];
    auto put_len = [&](char prefix, std::size_t n) {
      out += prefix;
      const auto r = std::to_chars(num, num + sizeof num, n);
      out.append(num, static_cast<std::size_t>(r.ptr - num));
      out += "\r\n";
    };
    put_len('*', args_.size());
    for (const std::string_view a : args_) {
      put_len('$', a.size());
      out.append(a.data(), a.size());
      out += "\r\n";
    }
  }

 private:
  std::vector<std::string_view> args_;
  std::deque<std::string> owned_;  // deque: pointers stay valid as it grows
  std::string label_;
};

/// One blocking connection to one Redis server. Not thread-safe (use ConnectionPool).
class Connection {
 public:
  /// Stores the options; connects on first use (or on connect()). Does not throw.
  explicit Connection(ConnectionOptions options)
      : options_(std::move(options)), endpoint_(options_.endpoint()) {}

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  Connection(Connection&&) noexcept = default;
  Connection& operator=(Connection&&) noexcept = default;
  ~Connection() = default;

  /// The options this connection uses.
  const ConnectionOptions& options() const noexcept { return options_; }
  /// "host:port" (or "unix:/path"), for messages. Never contains the password.
  const std::string& endpoint() const noexcept { return endpoint_; }
  /// True while a connection is established (it may still have been closed by the peer).
  bool connected() const noexcept { return stream_ != nullptr; }
  /// The server's CLIENT ID of the current connection; 0 when unknown or not connected.
  long long client_id() const noexcept { return stream_ != nullptr ? client_id_ : 0; }
  /// The certificate the server presented on the current connection (TLS); nullopt on a
  /// plain connection or while not connected.
  std::optional<PeerCertificate> peer_certificate() const {
    return stream_ != nullptr ? stream_->peer_certificate() : std::nullopt;
  }
  /// Sentinel: the check of SentinelOptions::check_interval goes through `must_go(host,
  /// port, named_at)` — whether the connection to the master `host`:`port` that the
  /// sentinels named at `named_at` must go — instead of a short connection to a sentinel of
  /// this connection's own (a ConnectionPool shares one detail::SentinelLink among its
  /// connections). Empty = the connection's own check.
  void share_sentinel_check(
      std::function<bool(const std::string&, int, std::chrono::steady_clock::time_point)> must_go) {
    shared_check_ = std::move(must_go);
  }

  /// The host connected to: ConnectionOptions::host, or with Sentinel the master's host the
  /// sentinels named at the last connect (empty before it).
  const std::string& host() const noexcept {
    return options_.sentinel.enabled() ? master_host_ : options_.host;
  }
  /// How many times this object has (re)connected, the first connect included.
  std::size_t connect_count() const noexcept { return connects_; }

  /// Connects now (with reconnect_attempts retries and backoff on refused/lost connections).
  /// @throws dlq::connection_error (refused, closed), dlq::timeout_error (no answer within
  ///         connect_timeout/command_timeout), dlq::reply_error (AUTH or SELECT refused:
  ///         code WRONGPASS, NOAUTH, ERR…), dlq::tls_error (a certificate check failed, the
  ///         server and the URL disagree about TLS, or this build has no TLS; its cause()
  ///         says which), dlq::sentinel_error (Sentinel: no master found; its cause() says
  ///         why — unreachable sentinels, an unreachable master and a server that is not a
  ///         master are retried, an unknown name and refused sentinel credentials are not),
  ///         dlq::invalid_argument (Sentinel without sentinels). Nothing is retried after a
  ///         timeout, a TLS failure or a refusal of AUTH (with Sentinel, a timeout reaching
  ///         the master is retried as master_unreachable: a failover may be under way).
  void connect() {
    drop();
    auto backoff = options_.reconnect_backoff;
    int silent = 0;  // attempts a plain server closed at its first command without a word
    for (int attempt = 0;; ++attempt) {
      try {
        connect_once();
        return;
      } catch (const dlq::sentinel_error& e) {
        if (!detail::sentinel::worth_retrying(e.cause()) ||
            attempt >= options_.reconnect_attempts) {
          throw;
        }
      } catch (const dlq::timeout_error&) {
        throw;
      } catch (const dlq::tls_error&) {
        throw;
      } catch (const dlq::connection_error&) {
        if (closed_silently_) ++silent;
        if (attempt >= options_.reconnect_attempts) {
          // A TLS-only port (a Redis tls-port) resets a plain connection at its first bytes.
          if (silent == attempt + 1 && !options_.tls.enabled && options_.unix_socket.empty()) {
            throw detail::server_requires_tls_error(endpoint_, false);
          }
          throw;
        }
      }
      if (backoff.count() > 0) std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::max(options_.reconnect_backoff_max, backoff));
    }
  }

  /// Closes the connection (the next request reconnects).
  void disconnect() noexcept { drop(); }

  /// Sends `count` commands in one write and reads their replies (pipelining).
  /// Error replies are returned as replies, not thrown (see check()).
  /// @param effect Effect::write if any command may change data: decides what is retried.
  /// @throws dlq::timeout_error, dlq::connection_error, dlq::protocol_error — with
  ///         outcome_unknown() when a write had (partly) left this process.
  std::vector<Reply> run(const Command* commands, std::size_t count, Effect effect) {
    std::vector<Reply> replies;
    if (count == 0) return replies;
    detail::IoFailure failure;
    if (attempt([commands](std::size_t i) -> const Command& { return commands[i]; }, count, effect,
                replies, failure)) {
      return replies;
    }
    std::string doing = commands[0].label();
    if (count > 1) doing += " (pipeline of " + std::to_string(count) + " commands)";
    detail::throw_io_failure(failure, endpoint_, doing, effect == Effect::write,
                             options_.command_timeout);
  }
  /// Like run(const Command*, std::size_t, Effect), for commands given by pointer, but an
  /// I/O failure of the exchange is returned (false, `failure` filled, `replies` holding the
  /// replies read before the failure — those of the first replies.size() commands, which
  /// ran) instead of thrown, so that callers whose commands were written together
  /// (ConnectionPool::run_shared) can each report it naming their own command. The retry
  /// rule of run() applies to the request as a whole. Connecting still throws.
  bool try_run(const Command* const* commands, std::size_t count, Effect effect,
               std::vector<Reply>& replies, detail::IoFailure& failure) {
    replies.clear();
    if (count == 0) return true;
    return attempt([commands](std::size_t i) -> const Command& { return *commands[i]; }, count,
                   effect, replies, failure);
  }
  /// Runs a batch of commands pipelined; see run(const Command*, std::size_t, Effect).
  std::vector<Reply> run(const std::vector<Command>& commands, Effect effect) {
    return run(commands.data(), commands.size(), effect);
  }
  /// Runs one command; see run(const Command*, std::size_t, Effect).
  Reply run(const Command& command, Effect effect) {
    auto replies = run(&command, 1, effect);
    return std::move(replies.front());
  }

 private:
  static constexpr std::size_t kInput = 16 * 1024;

  void drop() noexcept {
    stream_.reset();
    reader_.reset();
  }

  // Connects (no retry): socket, TLS handshake, AUTH/SELECT/CLIENT ID.
  void connect_once() {
    drop();
    client_id_ = 0;
    closed_silently_ = false;
    const bool tls = options_.tls.enabled;
    if (tls) {
      if (!tls_available()) throw detail::tls_not_built_error(endpoint_);
      if (const std::string p = detail::tls_problem(options_); !p.empty()) {
        throw detail::tls_configuration_error(endpoint_, p, {});
      }
    }
    if (options_.sentinel.enabled()) {
      connect_to_master();
      return;
    }
    connect_to(options_);
  }

  // Connects to the server `o` names (its host and port; the rest is options_).
  void connect_to(const ConnectionOptions& o) {
    const bool tls = options_.tls.enabled;
    const auto deadline = std::chrono::steady_clock::now() + options_.connect_timeout;
    detail::Fd fd;
    detail::IoFailure failure;
    if (!detail::connect_socket(o, deadline, fd, failure)) {
      detail::throw_io_failure(failure, endpoint_, "connecting", false, options_.connect_timeout);
    }
    std::unique_ptr<redisReader, detail::ReaderDeleter> reader(redisReaderCreate());
    if (reader == nullptr) throw std::bad_alloc();
    if (in_ == nullptr) in_ = std::make_unique<char[]>(kInput);
    if (tls) {
#if defined(DLQ_REDIS_TLS) && DLQ_REDIS_TLS
      if (tls_ == nullptr) tls_ = detail::TlsContext::make(options_.tls, endpoint_);
      stream_ = detail::TlsTransport::connect(tls_, std::move(fd), options_, endpoint_, deadline);
#endif
    } else {
      stream_ = std::make_unique<detail::PlainTransport>(std::move(fd));
    }
    received_ = 0;
    first_bytes_.clear();
    reader_ = std::move(reader);
    ++connects_;
    handshake();
  }

  // Asks the sentinels where the master is (in order, from the last that answered), then
  // connects to it and checks its ROLE. Throws dlq::sentinel_error naming the cause.
  void connect_to_master() {
    const SentinelOptions& s = options_.sentinel;
    const std::string where = options_.endpoint();
    if (s.sentinels.empty()) {
      throw dlq::invalid_argument(dlq::detail::message(
          "redis", where, "SentinelOptions::master_name is set but no sentinel is listed",
          "add the sentinels' addresses to SentinelOptions::sentinels"));
    }
    std::vector<detail::sentinel::Asked> asked;
    std::optional<detail::sentinel::MasterAnswer> found;
    for (std::size_t step = 0; step < s.sentinels.size() && !found; ++step) {
      const std::size_t i =
          detail::sentinel::sentinel_to_ask(next_sentinel_, step, s.sentinels.size());
      asked.push_back(ask_sentinel(s.sentinels[i]));
      if (asked.back().type == detail::sentinel::Asked::kind::answered &&
          asked.back().answer.type == detail::sentinel::MasterAnswer::kind::address) {
        found = asked.back().answer;
        next_sentinel_ = i;
      }
    }
    if (!found) throw detail::sentinel::no_address_error(where, s.master_name, asked);
    ConnectionOptions master = options_;
    master.host = found->host;
    master.port = found->port;
    master.sentinel = SentinelOptions{};
    endpoint_ = master.endpoint() + " (master '" + s.master_name + "')";
    master_host_ = found->host;
    master_port_ = found->port;
    master_checked_ = std::chrono::steady_clock::now();
    const std::string address = found->host + ":" + std::to_string(found->port);
    try {
      connect_to(master);
    } catch (const dlq::tls_error&) {
      throw;
    } catch (const dlq::reply_error&) {
      throw;  // AUTH or SELECT refused: the master's credentials, not a failover
    } catch (const dlq::storage_error& e) {
      throw detail::sentinel::master_error(where, s.master_name, address,
                                           sentinel_error::reason::master_unreachable, e.what());
    }
    if (!detail::sentinel::usable_as_master(role_)) {
      const char* names[] = {"master", "replica", "sentinel", "unknown"};
      const std::string role = names[static_cast<int>(role_)];
      drop();
      throw detail::sentinel::master_error(where, s.master_name, address,
                                           sentinel_error::reason::not_master, role);
    }
  }

  // One sentinel's answer to SENTINEL get-master-addr-by-name (connects, asks, closes).
  detail::sentinel::Asked ask_sentinel(const SentinelAddress& a) {
    const SentinelOptions& s = options_.sentinel;
    ConnectionOptions o = sentinel_connection_options(a, s, options_.connect_timeout,
                                                      options_.command_timeout);
    o.keepalive = false;
    detail::sentinel::Asked asked;
    asked.sentinel = o.endpoint();
    try {
      Connection c(o);
      const Reply r =
          c.run(std::move(Command("SENTINEL").arg("get-master-addr-by-name").arg(s.master_name)),
                Effect::read);
      asked.type = detail::sentinel::Asked::kind::answered;
      asked.answer = detail::sentinel::read_master_address(*r);
    } catch (const dlq::reply_error& e) {  // AUTH refused
      asked.type = detail::sentinel::Asked::kind::answered;
      asked.answer.type = detail::sentinel::MasterAnswer::kind::refused;
      asked.answer.text = e.what();
    } catch (const dlq::storage_error& e) {
      asked.text = e.what();
    }
    return asked;
  }

  // AUTH, SELECT and CLIENT ID (and ROLE for a Sentinel master) in one round trip.
  void handshake() {
    std::vector<Command> cmds;
    cmds.reserve(3);
    const bool auth = !options_.password.empty();
    if (auth) {
      Command a("AUTH");
      if (!options_.user.empty()) a.arg(std::string_view(options_.user));
      a.arg(std::string_view(options_.password));
      a.label(options_.user.empty() ? "AUTH" : "AUTH as user '" + options_.user + "'");
      cmds.push_back(std::move(a));
    }
    if (options_.db != 0) cmds.push_back(std::move(Command("SELECT").arg(options_.db)));
    cmds.push_back(std::move(Command("CLIENT").arg("ID").label("CLIENT ID")));
    const bool role = options_.sentinel.enabled();
    if (role) cmds.emplace_back("ROLE");
    std::vector<Reply> replies;
    detail::IoFailure failure;
    const Command* const first = cmds.data();
    if (!exchange([first](std::size_t i) -> const Command& { return first[i]; }, cmds.size(),
                  replies, failure)) {
      drop();
      if (!options_.tls.enabled) {
        if (detail::looks_like_tls(first_bytes_)) {
          throw detail::server_requires_tls_error(endpoint_, true);
        }
        closed_silently_ = received_ == 0 &&
                           (failure.err == REDIS_ERR_EOF ||
                            (failure.err == REDIS_ERR_IO &&
                             (failure.saved_errno == ECONNRESET || failure.saved_errno == EPIPE)));
      }
      detail::throw_io_failure(failure, endpoint_, "connecting (" + cmds[0].label() + ")", false,
                               options_.command_timeout);
    }
    role_ = detail::sentinel::Role::unknown;
    if (role) {
      role_ = detail::sentinel::read_role(*replies.back());
      replies.pop_back();
    }
    for (std::size_t i = 0; i < replies.size(); ++i) {
      const redisReply& r = *replies[i];
      const bool last = i + 1 == replies.size();
      if (last) {  // CLIENT ID may be forbidden by ACLs: then replay resolution works without it
        if (r.type == REDIS_REPLY_INTEGER) client_id_ = r.integer;
        continue;
      }
      if (r.type == REDIS_REPLY_ERROR) {
        drop();
        detail::throw_reply_error(r, endpoint_, "connecting (" + cmds[i].label() + ")");
      }
    }
  }

  // Connects if needed; reconnects when the peer has closed an idle connection (checked
  // with a zero-timeout poll, so a stale pooled connection never eats a write).
  void ensure_ready() {
    // Nothing is expected from the server between requests: readable = EOF or garbage.
    if (stream_ != nullptr && !stream_->idle()) drop();
    if (stream_ != nullptr && options_.sentinel.enabled()) check_master();
    if (stream_ == nullptr) connect();
  }

  // Sentinel: once per check_interval, asks the sentinel that named the current master
  // whether it still does; drops the connection when it names another (the next connect
  // finds it). An unreachable sentinel changes nothing but which one is asked next time.
  void check_master() {
    const auto interval = options_.sentinel.check_interval;
    const auto now = std::chrono::steady_clock::now();
    if (interval.count() <= 0) return;
    if (shared_check_) {  // the pool's view (redis/detail/sentinel_link.hpp)
      if (shared_check_(master_host_, master_port_, master_checked_)) drop();
      return;
    }
    if (now - master_checked_ < interval) return;
    if (options_.sentinel.sentinels.empty()) return;
    master_checked_ = now;
    const detail::sentinel::Asked a = ask_sentinel(
        options_.sentinel.sentinels[next_sentinel_ % options_.sentinel.sentinels.size()]);
    if (a.type != detail::sentinel::Asked::kind::answered) {
      next_sentinel_ = (next_sentinel_ + 1) % options_.sentinel.sentinels.size();
      return;
    }
    if (detail::sentinel::master_moved(a.answer, master_host_, master_port_)) drop();
  }

  // One request with the retry rule of run(): an I/O failure is retried once on a fresh
  // connection unless it was a timeout or a write that had (partly) left this process.
  template <class At>
  bool attempt(At at, std::size_t count, Effect effect, std::vector<Reply>& replies,
               detail::IoFailure& failure) {
    bool resent = false;
    for (int pass = 0;; ++pass) {
      ensure_ready();
      try {
        if (exchange(at, count, replies, failure)) {
          if (!options_.sentinel.enabled() || !demoted(at, count, effect, replies) || resent) {
            return true;
          }
          resent = true;  // READONLY, nothing ran: once more to the master found again
          continue;
        }
      } catch (...) {  // e.g. std::bad_alloc: answers may be on their way, never to be read
        drop();
        throw;
      }
      drop();
      const bool timeout = detail::is_timeout(failure);
      const bool retry_safe = effect == Effect::read || !failure.sent_any;
      if (pass == 0 && !timeout && retry_safe) continue;
      return false;
    }
  }

  // True when the replies say the server is a demoted master (READONLY) and the request ran
  // no write, so it may be sent again; the connection is dropped on any READONLY (the next
  // connect asks the sentinels).
  template <class At>
  bool demoted(At at, std::size_t count, Effect effect, const std::vector<Reply>& replies) {
    using detail::sentinel::AfterReplies;
    const AfterReplies v = detail::sentinel::after_replies(
        count,
        [&](std::size_t i) { return at(i).args().empty() ? std::string_view{} : at(i).args()[0]; },
        [&](std::size_t i) -> const redisReply& { return *replies[i]; }, effect == Effect::read);
    if (v == AfterReplies::keep) return false;
    drop();
    return v == AfterReplies::rediscover_and_resend;
  }

  // One request/response exchange of the commands at(0) … at(count - 1). Returns false with
  // `failure` filled on an I/O error; `replies` then holds the replies read before it.
  template <class At>
  bool exchange(At at, std::size_t count, std::vector<Reply>& replies, detail::IoFailure& failure) {
    out_.clear();
    for (std::size_t i = 0; i < count; ++i)
      at(i).encode(out_);
    // Everything that can fail to allocate happens before the first byte leaves: once a
    // request is written, its answers are read (or the connection dropped) before returning.
    replies.clear();
    replies.reserve(count);
    if (!stream_->write_all(out_.data(), out_.size(), failure)) return false;
    if (out_.capacity() > (std::size_t{8} << 20)) std::string().swap(out_);
    for (std::size_t i = 0; i < count; ++i) {
      Reply reply;
      if (!read_reply(reply, failure)) return false;  // the replies read so far are kept
      replies.push_back(std::move(reply));
    }
    return true;
  }

  // Reads the next reply: from what the reader holds, else from the stream.
  bool read_reply(Reply& out, detail::IoFailure& failure) {
    for (;;) {
      void* raw = nullptr;
      if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) {
        failure = detail::IoFailure{};
        failure.err = REDIS_ERR_PROTOCOL;
        failure.errstr = reader_->errstr;
        failure.sent_any = true;
        return false;
      }
      if (raw != nullptr) {
        out.reset(static_cast<redisReply*>(raw));
        return true;
      }
      const std::size_t n = stream_->read_some(in_.get(), kInput, failure);
      if (n == 0) {
        failure.sent_any = true;
        return false;
      }
      if (received_ == 0) first_bytes_.assign(in_.get(), std::min<std::size_t>(n, 2));
      received_ += n;
      if (redisReaderFeed(reader_.get(), in_.get(), n) != REDIS_OK) {
        failure = detail::IoFailure{};
        failure.err = REDIS_ERR_OOM;
        failure.errstr = "cannot buffer a reply";
        failure.sent_any = true;
        return false;
      }
    }
  }

  ConnectionOptions options_;
  std::string endpoint_;
  std::unique_ptr<detail::Transport> stream_;
  std::unique_ptr<redisReader, detail::ReaderDeleter> reader_;
  long long client_id_ = 0;
  std::size_t connects_ = 0;
  std::string out_;
  std::unique_ptr<char[]> in_;               // kInput bytes: what one read takes from the stream
  std::shared_ptr<detail::TlsContext> tls_;  // loaded on the first TLS connect, then kept
  std::size_t received_ = 0;                 // bytes read on this connection
  std::string first_bytes_;                  // its first two (TLS or RESP?)
  bool closed_silently_ = false;             // the last connect's server closed before answering
  detail::sentinel::Role role_ = detail::sentinel::Role::unknown;  // ROLE at the last connect
  std::size_t next_sentinel_ = 0;  // the sentinel asked first: the last that named a master
  std::string master_host_;        // the master the sentinels named at the last connect
  int master_port_ = 0;
  std::chrono::steady_clock::time_point master_checked_{};  // when a sentinel confirmed it
  // The pool's shared check (share_sentinel_check); empty = this connection's own.
  std::function<bool(const std::string&, int, std::chrono::steady_clock::time_point)> shared_check_;
};

/// Bytes of a string or status reply.
inline std::string_view view(const redisReply& r) noexcept {
  return r.str != nullptr ? std::string_view(r.str, r.len) : std::string_view{};
}

/// Throws dlq::reply_error if `r` is an error reply.
/// @param doing text for the message, e.g. "RPUSH dlq:{orders}"
inline const redisReply& check(const Reply& r, const Connection& c, const std::string& doing,
                               bool outcome_unknown = false) {
  if (r->type == REDIS_REPLY_ERROR) {
    detail::throw_reply_error(*r, c.endpoint(), doing, outcome_unknown);
  }
  return *r;
}

/// The integer of an integer reply. @throws dlq::reply_error, dlq::protocol_error.
inline long long integer(const Reply& r, const Connection& c, const std::string& doing) {
  check(r, c, doing);
  if (r->type != REDIS_REPLY_INTEGER) detail::throw_unexpected_reply(*r, c.endpoint(), doing);
  return r->integer;
}

/// The elements of an array reply as strings (nil elements become empty strings).
/// @throws dlq::reply_error, dlq::protocol_error.
inline std::vector<std::string> strings(const Reply& r, const Connection& c,
                                        const std::string& doing) {
  check(r, c, doing);
  if (r->type != REDIS_REPLY_ARRAY) detail::throw_unexpected_reply(*r, c.endpoint(), doing);
  std::vector<std::string> out;
  out.reserve(r->elements);
  for (std::size_t i = 0; i < r->elements; ++i) {
    const redisReply& e = *r->element[i];
    if (e.type != REDIS_REPLY_STRING && e.type != REDIS_REPLY_NIL && e.type != REDIS_REPLY_STATUS) {
      detail::throw_unexpected_reply(e, c.endpoint(), doing);
    }
    out.emplace_back(view(e));
  }
  return out;
}

}  // namespace dlq::redis

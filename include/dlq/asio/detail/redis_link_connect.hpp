// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/detail/redis_link_connect.hpp
/// Internal to dlq::asio: how a dlq::asio::RedisConnection connects — a host name resolved
/// without blocking, the stream connected within connect_timeout, the handshake (AUTH,
/// SELECT, CLUSTER SLOTS), and a refused try repeated after the back-off. Part of
/// detail::redis_link (redis_link.hpp). Not part of the API.
#pragma once

#include <asio/ip/address.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/local/stream_protocol.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "dlq/asio/detail/redis_link.hpp"
#include "dlq/asio/detail/resp.hpp"
#include "dlq/errors.hpp"

namespace dlq::asio::detail {

// An idle connection is not read (reads wait only while answers are expected), so a
// server that closed it (restart, idle timeout) is noticed here, before a write is sent
// into a dead socket: one non-blocking peek when a command follows a quiet spell.
inline bool redis_link::idle_connection_alive() {
  return stream && !stream->peer_closed();
}

// A connect on demand: 1 + reconnect_attempts tries (see retry_connect).
inline void redis_link::start_connect() {
  connect_tries = 0;
  backoff = options.reconnect_backoff;
  connect();
}

// A try failed with a connection error (refused, or closed before the handshake was
// answered): true when another one is scheduled — after the back-off, on the executor's
// timer — as the blocking connection does: at most reconnect_attempts more tries, the
// wait doubled each time up to reconnect_backoff_max. The waiting commands (none of them
// was sent) stay waiting, with their formatted output.
inline bool redis_link::retry_connect() {
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

inline std::string redis_link::tries() const {
  return connect_tries == 1 ? std::string() : " (" + std::to_string(connect_tries) + " tries)";
}

// A host name (not an IP address, not a unix socket): resolved before each try.
inline bool redis_link::needs_resolving() const {
  if (!options.unix_socket.empty()) return false;
  std::error_code ec;
  (void)::asio::ip::make_address(options.host, ec);
  return static_cast<bool>(ec);
}

// Resolves the host name on Asio's resolver thread, then connects (connect_timeout
// bounds the resolution too). A failed resolution is a failed try: retried as a refused
// connect is. Its IPv4 addresses are tried, its IPv6 ones when it has none.
inline void redis_link::resolve(std::uint64_t gen) {
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

// A try failed before a stream was open: retried, or every waiting command fails.
inline void redis_link::connect_failed(const std::string& error) {
  connect_error = error;
  if (retry_connect()) return;
  fail_waiting(std::make_exception_ptr(
      dlq::connection_error(msg("connecting: " + error + tries(),
                                "is redis-server running and listening on this address?"),
                            false)));
}

// One try: the stream opened and connecting (to the resolved addresses, the IP address,
// or the unix socket), the handshake queued behind the connect.
inline void redis_link::connect() {
  state = phase::connecting;
  const std::uint64_t gen = ++generation;
  connect_error.clear();
  handshake_error = nullptr;
  if (!resolved && needs_resolving()) return resolve(gen);
  if (stream) {  // a try's stream is closed before the next one opens
    stream->close();
    stream.reset();
  }
  ::asio::local::stream_protocol::endpoint unix_endpoint;
  std::vector<::asio::ip::tcp::endpoint> tcp_endpoints;
  if (!options.unix_socket.empty()) {
    try {
      unix_endpoint = ::asio::local::stream_protocol::endpoint(options.unix_socket);
    } catch (const std::system_error&) {
      return connect_failed("unix socket path too long");
    }
    stream = std::make_shared<redis_stream>(::asio::local::stream_protocol::socket(executor));
  } else {
    if (resolved) {
      tcp_endpoints = std::move(addresses);
    } else {
      tcp_endpoints.emplace_back(::asio::ip::make_address(options.host),
                                 static_cast<unsigned short>(options.port));
    }
    resolved = false;
    stream = std::make_shared<redis_stream>(::asio::ip::tcp::socket(executor));
  }
  connected = false;
  flush_posted = write_waiting = reading = false;
  out.clear();
  writing.clear();
  writing_off = 0;
  input.clear();
  arm_connect_timer(gen);
  queue_handshake();
  auto on_connect = [self = shared_from_this(), gen](const std::error_code& ec) {
    if (self->generation != gen) return;
    self->on_connected(ec);
  };
  if (!options.unix_socket.empty()) return stream->async_connect(unix_endpoint, on_connect);
  stream->async_connect(std::move(tcp_endpoints), on_connect);
}

// The handshake: AUTH, SELECT, and CLUSTER SLOTS (for the hook: the slot map), formatted
// into the output buffer, in flight ahead of every command.
inline void redis_link::queue_handshake() {
  auto handshake = [&](redis_op::kind what, const char* label,
                       std::initializer_list<std::string_view> args) {
    resp_command(out, args.size());
    for (auto a : args)
      resp_arg(out, a);
    redis_op o;
    o.what = what;
    o.label_prefix = label;
    o.sent = true;
    inflight.push_back(std::move(o));
  };
  if (!options.password.empty()) {
    if (options.user.empty()) {
      handshake(redis_op::kind::handshake, "AUTH", {"AUTH", options.password});
    } else {
      handshake(redis_op::kind::handshake, "AUTH", {"AUTH", options.user, options.password});
    }
  }
  const std::string db = std::to_string(options.db);
  if (options.db != 0) handshake(redis_op::kind::handshake, "SELECT", {"SELECT", db});
  handshake(redis_op::kind::cluster, "CLUSTER", {"CLUSTER", "SLOTS"});
  handshake_left = inflight.size();
}

// The stream's connect completed (or failed): the handshake goes out.
inline void redis_link::on_connected(const std::error_code& ec) {
  if (ec) {
    connect_error = ec.message();
    return lost(connect_error);
  }
  connected = true;
  flush();
}

// A handshake's answer. The CLUSTER SLOTS answer goes to the hook (an error reply: no
// cluster support, a plain server). Once every answer is in: the waiting commands go out,
// or the first error of the handshake drops the connection.
inline void redis_link::on_handshake(bool is_cluster, std::exception_ptr e, const RedisReply& r) {
  if (state != phase::connecting) return;
  if (is_cluster && cluster_hook) {
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

// connect_timeout runs from the attempt, and again from the moment the handshake is
// handed to the kernel (the loop may have been busy before it wrote it).
inline void redis_link::arm_connect_timer(std::uint64_t gen) {
  if (options.connect_timeout.count() <= 0) return;
  connect_deadline = std::chrono::steady_clock::now() + options.connect_timeout;
  wait_connect_timer(gen);
}

inline void redis_link::wait_connect_timer(std::uint64_t gen) {
  connect_timer.expires_at(connect_deadline);
  connect_timer.async_wait([self = shared_from_this(), gen](const std::error_code& ec) {
    if (ec || self->generation != gen || self->state != phase::connecting) return;
    self->on_connect_timer(gen);
  });
}

inline void redis_link::on_connect_timer(std::uint64_t gen) {
  if (connect_deadline > std::chrono::steady_clock::now()) return wait_connect_timer(gen);
  // Progress the loop had not handled yet (it was busy): handled now, and the limit
  // starts again for the answers still to come.
  if (pump()) {
    if (generation != gen || state != phase::connecting) return;
    connect_deadline =
        std::max(connect_deadline, std::chrono::steady_clock::now() + options.connect_timeout);
    return wait_connect_timer(gen);
  }
  drop(std::make_exception_ptr(dlq::timeout_error(
      msg(std::string(stream ? "connecting" : "resolving the host name") + ": no answer within " +
              std::to_string(options.connect_timeout.count()) + " ms",
          "the server is frozen, overloaded or unreachable; check it or raise "
          "ConnectionOptions::connect_timeout"),
      false)));
}

}  // namespace dlq::asio::detail

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file http/server_limits.hpp
/// dlq::http::ServerLimits and ServerCounts: the limits a GuardedServer (http/server.hpp)
/// keeps for slow and greedy clients, and what it counts while keeping them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace dlq {
namespace http {

/// Limits of a GuardedServer. Every default is usable as is for the console on its own
/// address; see the file comment for what each one guards against.
struct ServerLimits {
  /// Threads that handle requests whose head has arrived. Default 16.
  std::size_t threads = 16;
  /// Time a connection has to deliver a complete request head, from its accept or its
  /// previous response (an idle keep-alive connection is closed after it too). Default 10 s.
  std::chrono::milliseconds head_timeout{10000};
  /// Time to read a request's body once its head is complete, and again to send its answer
  /// once the handler is done (both without a worker). Default 30 s.
  std::chrono::milliseconds request_timeout{30000};
  /// Largest request head (request line and headers) in bytes; larger gets 431. Default
  /// 64 KiB.
  std::size_t max_head_bytes = std::size_t{64} << 10;
  /// Largest request body in bytes (Content-Length); larger gets 413. The whole body is
  /// read before a worker takes the request, so at most this many bytes are buffered per
  /// connection. Keep it at least ConsoleOptions::max_body_bytes. Default 1 MiB.
  std::size_t max_body_bytes = std::size_t{1} << 20;
  /// Connections one client address (IPv6: one /64) may have open; more get 503 and are
  /// closed at once. 0 = no cap (behind a reverse proxy). Default 16.
  std::size_t max_connections_per_client = 16;
  /// Requests of one client address handled at once; its others wait (without a thread).
  /// 0 = no cap. Default 4.
  std::size_t max_busy_per_client = 4;
  /// Connections open in all; more get 503 and are closed at once. Default 512.
  std::size_t max_connections = 512;
  /// Of max_connections, how many only 127.0.0.1 and ::1 (an operator on the host) may use:
  /// other addresses, however many, get 503 once max_connections - local_reserve are open.
  /// Must be less than max_connections. 0 = none. Default 16.
  std::size_t local_reserve = 16;
  /// Requests of 127.0.0.1 and ::1 (an operator on the host) a free worker may take in a row
  /// ahead of older requests of other addresses; then it takes the oldest one, whoever sent
  /// it. So a flood of requests queued by other addresses delays an operator's request by at
  /// most one handler's time, and the host cannot starve the others (they get at least one
  /// worker in local_overtakes + 1 while both wait). 0 = first come, first served. Default 8.
  std::size_t local_overtakes = 8;
  /// Bytes held for slow peers in all: answers their peers have not taken yet, and request
  /// bodies still arriving or waiting for a worker (counted by Content-Length from their
  /// head until a worker takes the request). A peer that does not
  /// read would otherwise keep one whole answer per connection, and one that sends slowly one
  /// whole body, up to max_connections of them (496 MiB of 1 MiB bodies). An answer that
  /// would go over it is dropped: its connection is closed; a head whose body would go over
  /// it gets 503 and its connection is closed. At least one is always held, and those of
  /// 127.0.0.1 and ::1 regardless (at most max_connections_per_client of them). 0 = no
  /// bound. Default 64 MiB.
  std::size_t max_unsent_bytes = std::size_t{64} << 20;
};

/// What a GuardedServer is doing and has refused, for monitoring and tests.
struct ServerCounts {
  std::size_t open = 0;               ///< connections open now
  std::size_t waiting = 0;            ///< of which waiting for a request head, or to send an answer
  std::size_t busy = 0;               ///< of which being handled by a worker
  std::uint64_t refused = 0;          ///< connections closed at accept (a cap was reached), in all
  std::uint64_t head_timeouts = 0;    ///< connections closed for a late request head, in all
  std::uint64_t heads_too_large = 0;  ///< connections closed for an oversize head, in all
  std::uint64_t bodies_late = 0;      ///< connections closed for a late request body, in all
  /// connections closed because the peer did not read its answer within request_timeout
  std::uint64_t responses_late = 0;
  /// connections closed because their answer would have held more than max_unsent_bytes
  std::uint64_t responses_dropped = 0;
  /// bytes held now against max_unsent_bytes: answers peers have not taken yet, bodies
  /// arriving or waiting for a worker
  std::size_t unsent_bytes = 0;
  /// requests answered by the server itself (400, 411, 413: see the file comment), in all
  std::uint64_t requests_refused = 0;
};

}  // namespace http
}  // namespace dlq

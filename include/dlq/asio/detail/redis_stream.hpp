// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/detail/redis_stream.hpp
/// Internal to dlq::asio: the byte stream under a dlq::asio::RedisConnection — one Asio
/// stream type behind one interface (detail::redis_stream): a TCP socket
/// (asio::ip::tcp::socket) or a unix socket (asio::local::stream_protocol::socket). The
/// connection's protocol code (RESP, pipelining, time limits, reconnects) sees only this
/// interface; another transport (a TLS stream over TCP) is one more alternative of its
/// variant. Not part of the API.
///
/// The plain sockets are driven by readiness: async_read_some and async_write_some wait for
/// the socket (async_wait) and then read or write without blocking. So the bytes of an
/// answer stay in the kernel until the connection's read handler runs, and probe() — the
/// zero-timeout look the connection takes when a time limit passes on a busy loop — sees
/// them. Each plain socket is opened close-on-exec, non-blocking, and (TCP) with
/// TCP_NODELAY.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio/any_io_executor.hpp>
#include <asio/buffer.hpp>
#include <asio/error.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/post.hpp>
#include <asio/socket_base.hpp>

#include <cerrno>
#include <cstddef>
#include <memory>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

namespace dlq::asio::detail {

/// One connection's byte stream. Held by a shared_ptr: each operation in flight keeps it
/// alive (closed, once the connection dropped it), so a completion that was already queued
/// never touches a destroyed socket. Call it from its executor.
class redis_stream : public std::enable_shared_from_this<redis_stream> {
 public:
  using tcp = ::asio::ip::tcp;
  using local = ::asio::local::stream_protocol;

  /// What probe() found: bytes (or the end of the stream, or an error) to read; room to
  /// write (or an error). A connect in progress is complete when the stream is writable.
  struct readiness {
    bool readable = false;
    bool writable = false;
  };

  explicit redis_stream(tcp::socket s) : socket_(std::move(s)) {}
  explicit redis_stream(local::socket s) : socket_(std::move(s)) {}

  /// Connects to each of `endpoints` in turn until one accepts; `done(std::error_code)`
  /// gets the last error when none did. Never completes inside the call.
  template <class Handler>
  void async_connect(std::vector<tcp::endpoint> endpoints, Handler done) {
    auto eps = std::make_shared<const std::vector<tcp::endpoint>>(std::move(endpoints));
    connect_from(std::move(eps), 0, ::asio::error::host_not_found, std::move(done));
  }

  /// Connects the unix socket to `path`'s endpoint; `done(std::error_code)`.
  template <class Handler>
  void async_connect(const local::endpoint& endpoint, Handler done) {
    auto& s = std::get<local::socket>(socket_);
    std::error_code ec;
    open(s, local(), ec);
    if (ec) return post_error(std::move(done), ec);
    s.async_connect(endpoint, [self = shared_from_this(), done = std::move(done)](
                                  const std::error_code& e) mutable { done(e); });
  }

  /// Reads what has arrived (at least one byte) into `b`: `done(std::error_code, n)`;
  /// asio::error::eof when the peer closed the stream.
  template <class Handler>
  void async_read_some(::asio::mutable_buffer b, Handler done) {
    std::visit(
        [&](auto& s) {
          s.async_wait(::asio::socket_base::wait_read,
                       [self = shared_from_this(), b,
                        done = std::move(done)](const std::error_code& ec) mutable {
                         self->read_when_ready(ec, b, std::move(done));
                       });
        },
        socket_);
  }

  /// Writes some of `b` (at least one byte) once the stream takes it:
  /// `done(std::error_code, n)`. `b` must stay valid until then.
  template <class Handler>
  void async_write_some(::asio::const_buffer b, Handler done) {
    std::visit(
        [&](auto& s) {
          s.async_wait(::asio::socket_base::wait_write,
                       [self = shared_from_this(), b,
                        done = std::move(done)](const std::error_code& ec) mutable {
                         self->write_when_ready(ec, b, std::move(done));
                       });
        },
        socket_);
  }

  /// Reads what has arrived without waiting: asio::error::would_block when nothing has
  /// (a stream that cannot tell says so too: the caller then uses async_read_some).
  std::size_t try_read_some(::asio::mutable_buffer b, std::error_code& ec) {
    return std::visit([&](auto& s) { return s.read_some(b, ec); }, socket_);
  }

  /// Writes what the stream takes without waiting: asio::error::would_block when it takes
  /// nothing now (the caller then uses async_write_some).
  std::size_t try_write_some(::asio::const_buffer b, std::error_code& ec) {
    return std::visit([&](auto& s) { return s.write_some(b, ec); }, socket_);
  }

  /// True when the peer closed the stream (or it failed) while it was idle: one
  /// non-blocking peek, before a command is written into a stream the server dropped
  /// (restart, idle timeout). Bytes waiting are not consumed.
  bool peer_closed() {
    char byte;
    std::error_code ec;
    const std::size_t n = std::visit(
        [&](auto& s) {
          return s.receive(::asio::buffer(&byte, 1), ::asio::socket_base::message_peek, ec);
        },
        socket_);
    if (n > 0) return false;  // unexpected data; read with the next reply
    return ec != ::asio::error::would_block && ec != ::asio::error::try_again &&
           ec != ::asio::error::interrupted;
  }

  /// A look at the socket without waiting (poll with a zero timeout).
  readiness probe() {
    pollfd p{std::visit([](auto& s) { return s.native_handle(); }, socket_), POLLIN | POLLOUT, 0};
    readiness r;
    if (::poll(&p, 1, 0) <= 0) return r;
    r.readable = (p.revents & (POLLIN | POLLERR | POLLHUP)) != 0;
    r.writable = (p.revents & (POLLOUT | POLLERR | POLLHUP)) != 0;
    return r;
  }

  /// Cancels the operations in flight (they complete with asio::error::operation_aborted).
  void cancel() noexcept {
    std::visit(
        [](auto& s) {
          std::error_code ec;
          s.cancel(ec);
        },
        socket_);
  }

  /// Closes the socket; the operations in flight complete with operation_aborted.
  void close() noexcept {
    std::visit(
        [](auto& s) {
          std::error_code ec;
          s.close(ec);
        },
        socket_);
  }

 private:
  // Opens `s` for `protocol`: close-on-exec from the start (a ::socket with SOCK_CLOEXEC,
  // handed to Asio at once: Asio's open() leaves the descriptor to a child's exec, and
  // setting the flag after it races with a fork in another thread), non-blocking (the
  // try_* calls and the readiness-driven reads and writes rely on it).
  template <class Socket, class Protocol>
  static void open(Socket& s, const Protocol& protocol, std::error_code& ec) {
    const int fd = ::socket(protocol.family(), protocol.type() | SOCK_CLOEXEC, protocol.protocol());
    if (fd < 0) {
      ec = std::error_code(errno, std::system_category());
      return;
    }
    s.assign(protocol, fd, ec);
    if (ec) {
      ::close(fd);
      return;
    }
    s.non_blocking(true, ec);
  }

  template <class Handler>
  void connect_from(std::shared_ptr<const std::vector<tcp::endpoint>> eps, std::size_t i,
                    std::error_code last, Handler done) {
    auto& s = std::get<tcp::socket>(socket_);
    for (; i < eps->size(); ++i) {
      std::error_code ec;
      s.close(ec);
      open(s, (*eps)[i].protocol(), ec);
      if (ec) {
        last = ec;
        continue;
      }
      s.set_option(tcp::no_delay(true), ec);  // as before: a failure here is not fatal
      const tcp::endpoint& to = (*eps)[i];
      s.async_connect(to, [self = shared_from_this(), eps, i,
                           done = std::move(done)](const std::error_code& e) mutable {
        if (!e || e == ::asio::error::operation_aborted) return done(e);
        self->connect_from(std::move(eps), i + 1, e, std::move(done));
      });
      return;
    }
    post_error(std::move(done), last);
  }

  template <class Handler>
  void post_error(Handler done, std::error_code ec) {
    auto ex = std::visit([](auto& s) { return s.get_executor(); }, socket_);
    ::asio::post(ex,
                 [self = shared_from_this(), done = std::move(done), ec]() mutable { done(ec); });
  }

  // The socket is readable (or the wait failed): read without blocking; a wake-up with
  // nothing to read waits again.
  template <class Handler>
  void read_when_ready(std::error_code ec, ::asio::mutable_buffer b, Handler done) {
    std::size_t n = 0;
    if (!ec) n = try_read_some(b, ec);
    if (ec == ::asio::error::would_block || ec == ::asio::error::try_again ||
        ec == ::asio::error::interrupted)
      return async_read_some(b, std::move(done));
    done(ec, n);
  }

  template <class Handler>
  void write_when_ready(std::error_code ec, ::asio::const_buffer b, Handler done) {
    std::size_t n = 0;
    if (!ec) n = try_write_some(b, ec);
    if (ec == ::asio::error::would_block || ec == ::asio::error::try_again ||
        ec == ::asio::error::interrupted)
      return async_write_some(b, std::move(done));
    done(ec, n);
  }

  std::variant<tcp::socket, local::socket> socket_;
};

}  // namespace dlq::asio::detail

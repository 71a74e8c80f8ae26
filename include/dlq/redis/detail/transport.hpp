// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/detail/transport.hpp
/// The byte stream under a blocking dlq::redis::Connection: dlq owns the socket and keeps
/// hiredis for the protocol alone (its RESP reader), so plain TCP, unix sockets and TLS
/// (redis/detail/tls_openssl.hpp) share one request path.
///
/// - Transport: what Connection needs of a stream (write all, read some, "is it idle?").
/// - PlainTransport: a connected socket, blocking, with SO_SNDTIMEO/SO_RCVTIMEO set to the
///   command timeout (a timed-out call fails with EAGAIN, which error_mapping.hpp reads as a
///   timeout).
/// - connect_socket: TCP (every address the host resolves to, in order) or a unix socket,
///   non-blocking connect bounded by a deadline, then TCP_NODELAY and keepalive. A TLS
///   transport wraps the socket it returns.
#pragma once

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "dlq/redis/error_mapping.hpp"
#include "dlq/redis/options.hpp"

namespace dlq::redis::detail {

/// An owned file descriptor (closed on destruction).
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const noexcept { return fd_; }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

/// The failure of a system call: errno and its text.
inline IoFailure errno_failure(int e, bool sent_any = false) {
  IoFailure f;
  f.err = REDIS_ERR_IO;
  f.saved_errno = e;
  f.errstr = std::strerror(e);
  f.sent_any = sent_any;
  return f;
}

/// The failure "the peer closed the connection".
inline IoFailure eof_failure(bool sent_any) {
  IoFailure f;
  f.err = REDIS_ERR_EOF;
  f.errstr = "Server closed the connection";
  f.sent_any = sent_any;
  return f;
}

/// What a Connection needs of its byte stream. Blocking; every call is bounded by the
/// command timeout.
class Transport {
 public:
  virtual ~Transport() = default;
  Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  /// Writes all `n` bytes. False with `f` filled (f.sent_any: some bytes left) on failure.
  virtual bool write_all(const char* p, std::size_t n, IoFailure& f) = 0;
  /// Reads at least one byte into `p` (at most `n`). 0 with `f` filled on failure (EOF:
  /// REDIS_ERR_EOF; timeout: REDIS_ERR_IO with EAGAIN).
  virtual std::size_t read_some(char* p, std::size_t n, IoFailure& f) = 0;
  /// True when nothing came from the server since the last reply: the connection can carry
  /// a request. Nothing is expected between requests, so readable = closed or garbage.
  virtual bool idle() = 0;
  /// The certificate the server presented (TLS streams); nullopt on plain streams.
  virtual std::optional<PeerCertificate> peer_certificate() const { return std::nullopt; }
};

/// Milliseconds left until `deadline` (at least 1 while not past it); -1 = no deadline.
inline int ms_left(std::chrono::steady_clock::time_point deadline, bool limited) {
  if (!limited) return -1;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now())
                        .count();
  return left <= 0 ? 0 : static_cast<int>(left);
}

/// Waits until `fd` is ready for `events` or the deadline passes. 0 = ready; else errno
/// (ETIMEDOUT when the deadline passed).
inline int wait_fd(int fd, short events, std::chrono::steady_clock::time_point deadline,
                   bool limited) {
  for (;;) {
    pollfd p{};
    p.fd = fd;
    p.events = events;
    const int r = ::poll(&p, 1, ms_left(deadline, limited));
    if (r > 0) return 0;
    if (r == 0) return ETIMEDOUT;
    if (errno != EINTR) return errno;
  }
}

/// Sets or clears O_NONBLOCK. False on failure.
inline bool set_nonblocking(int fd, bool on) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0) return false;
  const int want = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  return want == flags || ::fcntl(fd, F_SETFL, want) == 0;
}

/// Sets SO_SNDTIMEO and SO_RCVTIMEO ({0,0} = no limit). False on failure.
inline bool set_io_timeout(int fd, std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(ms.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((ms.count() % 1000) * 1000);
  return ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0 &&
         ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0;
}

// Connects the non-blocking socket `fd` to `addr`, waiting until `deadline`. 0 or errno.
inline int connect_fd(int fd, const sockaddr* addr, socklen_t len,
                      std::chrono::steady_clock::time_point deadline, bool limited) {
  if (::connect(fd, addr, len) == 0) return 0;
  if (errno != EINPROGRESS && errno != EINTR) return errno;
  if (const int w = wait_fd(fd, POLLOUT, deadline, limited); w != 0) return w;
  int so_error = 0;
  socklen_t sl = sizeof so_error;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &sl) != 0) return errno;
  return so_error;
}

/// Connects to `o`'s server (TCP host:port, or o.unix_socket) within `deadline`, then makes
/// the socket blocking with TCP_NODELAY, keepalive (o.keepalive, TCP only: idle 15 s, probes
/// every 5 s, 3 of them — hiredis' values) and the command timeout. False with `f` filled
/// on failure (refused: ECONNREFUSED; deadline: ETIMEDOUT; a name that does not resolve:
/// REDIS_ERR_OTHER with the resolver's text).
inline bool connect_socket(const ConnectionOptions& o,
                           std::chrono::steady_clock::time_point deadline, Fd& out, IoFailure& f) {
  const bool limited = o.connect_timeout.count() > 0;
  int last = ECONNREFUSED;
  if (!o.unix_socket.empty()) {
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    if (o.unix_socket.size() >= sizeof sa.sun_path) {
      f.err = REDIS_ERR_OTHER;
      f.errstr = "the socket path is too long";
      return false;
    }
    std::memcpy(sa.sun_path, o.unix_socket.c_str(), o.unix_socket.size() + 1);
    Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (fd.get() < 0) {
      f = errno_failure(errno);
      return false;
    }
    last =
        connect_fd(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa, deadline, limited);
    if (last == 0) out = std::move(fd);
  } else {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    const std::string port = std::to_string(o.port);
    const int g = ::getaddrinfo(o.host.c_str(), port.c_str(), &hints, &list);
    if (g != 0) {
      f.err = REDIS_ERR_OTHER;
      f.errstr = std::string("cannot resolve '") + o.host + "': " + ::gai_strerror(g);
      return false;
    }
    std::unique_ptr<addrinfo, void (*)(addrinfo*)> hold(list, ::freeaddrinfo);
    for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
      Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
      if (fd.get() < 0) {
        last = errno;
        continue;
      }
      last = connect_fd(fd.get(), a->ai_addr, a->ai_addrlen, deadline, limited);
      if (last == 0) {
        out = std::move(fd);
        break;
      }
      if (last == ETIMEDOUT) break;  // the deadline is for the whole connect
    }
  }
  if (out.get() < 0) {
    f = errno_failure(last);
    return false;
  }
  const int fd = out.get();
  bool ok = set_nonblocking(fd, false) && set_io_timeout(fd, o.command_timeout);
  if (ok && o.unix_socket.empty()) {
    int one = 1;
    ok = ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0;
    if (ok && o.keepalive) {
      int idle = 15;
      int interval = 5;
      int count = 3;
      ok = ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) == 0 &&
           ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) == 0 &&
           ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval) == 0 &&
           ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count) == 0;
    }
  }
  if (!ok) {
    f = errno_failure(errno);
    out.reset();
    return false;
  }
  return true;
}

/// A connected socket as it is: plain TCP or a unix socket.
class PlainTransport final : public Transport {
 public:
  explicit PlainTransport(Fd fd) noexcept : fd_(std::move(fd)) {}

  bool write_all(const char* p, std::size_t n, IoFailure& f) override {
    std::size_t sent = 0;
    while (sent < n) {
      const ssize_t k = ::send(fd_.get(), p + sent, n - sent, MSG_NOSIGNAL);
      if (k < 0) {
        if (errno == EINTR) continue;
        f = errno_failure(errno, sent > 0);
        return false;
      }
      sent += static_cast<std::size_t>(k);
    }
    return true;
  }

  std::size_t read_some(char* p, std::size_t n, IoFailure& f) override {
    for (;;) {
      const ssize_t k = ::recv(fd_.get(), p, n, 0);
      if (k > 0) return static_cast<std::size_t>(k);
      if (k == 0) {
        f = eof_failure(true);
        return 0;
      }
      if (errno == EINTR) continue;
      f = errno_failure(errno, true);
      return 0;
    }
  }

  bool idle() override {
    pollfd p{};
    p.fd = fd_.get();
    p.events = POLLIN;
    return ::poll(&p, 1, 0) == 0;
  }

 private:
  Fd fd_;
};

}  // namespace dlq::redis::detail

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file http/server_connection.hpp
/// One connection of a dlq::http::GuardedServer (dlq/http/server.hpp): its socket and
/// buffered bytes, the httplib::Stream a worker reads its request from and writes its answer
/// to (every wait bounded by a per-call timeout and the request's deadline), and the client
/// key its caps count under. POSIX sockets and poll().
#pragma once

#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <optional>
#include <string>

namespace dlq {
namespace http {
namespace detail {

using server_clock = std::chrono::steady_clock;

// The address as text and port; returns the key its caps count under: the IPv4 address
// (an IPv4-mapped IPv6 address counts as IPv4), or the /64 of an IPv6 address.
inline std::string describe_peer(const sockaddr_storage& a, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    port = ntohs(v4.sin_port);
    ip = text;
    return ip;
  }
  if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    port = ntohs(v6.sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr)) {
      ::inet_ntop(AF_INET, &v6.sin6_addr.s6_addr[12], text, sizeof text);
      ip = text;
      return ip;
    }
    ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
    ip = text;
    in6_addr net{};
    std::memcpy(&net, &v6.sin6_addr, 8);  // the /64
    ::inet_ntop(AF_INET6, &net, text, sizeof text);
    return std::string(text) + "/64";
  }
  ip.clear();
  port = 0;
  return "other";
}

// One client connection: its socket, who it is, and the bytes read but not yet consumed.
struct guarded_connection {
  int fd = -1;
  std::string ip;
  int port = 0;
  std::string client;       // the key its caps are counted under
  std::string buf;          // bytes read and not consumed yet
  std::size_t off = 0;      // consumed prefix of buf
  std::size_t scanned = 0;  // buf[off, scanned) holds no end of head
  server_clock::time_point deadline;
  std::size_t requests = 0;  // served on this connection
};

// The stream a worker hands to httplib for one request: the buffered bytes first, then the
// socket, every wait bounded by the per-call timeout and by the request's deadline.
class guarded_stream final : public httplib::Stream {
 public:
  // Reads must be done by `request_timeout` from now; writes within `request_timeout` of
  // the first one (the handler's own time counts against neither).
  guarded_stream(guarded_connection& c, std::chrono::milliseconds request_timeout,
                 std::chrono::milliseconds read_wait, std::chrono::milliseconds write_wait)
      : c_(c),
        request_timeout_(request_timeout),
        read_deadline_(server_clock::now() + request_timeout),
        read_wait_(read_wait),
        write_wait_(write_wait) {}

  bool is_readable() const override {
    return c_.off < c_.buf.size() || wait(POLLIN, read_wait_, read_deadline_);
  }
  bool is_writable() const override { return wait(POLLOUT, write_wait_, write_deadline()); }

  ssize_t read(char* ptr, size_t size) override {
    if (c_.off == c_.buf.size()) {
      c_.buf.clear();
      c_.off = 0;
      c_.scanned = 0;
      for (;;) {
        if (!wait(POLLIN, read_wait_, read_deadline_)) return -1;
        c_.buf.resize(16384);
        const ssize_t n = ::recv(c_.fd, &c_.buf[0], c_.buf.size(), MSG_DONTWAIT);
        if (n > 0) {
          c_.buf.resize(static_cast<std::size_t>(n));
          break;
        }
        c_.buf.clear();
        if (n == 0) return 0;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          failed_ = true;
          return -1;
        }
      }
    }
    const std::size_t n = std::min(size, c_.buf.size() - c_.off);
    std::memcpy(ptr, c_.buf.data() + c_.off, n);
    c_.off += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    for (;;) {
      if (!wait(POLLOUT, write_wait_, write_deadline())) return -1;
      const ssize_t n = ::send(c_.fd, ptr, size, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n >= 0) return n;
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        failed_ = true;
        return -1;
      }
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = c_.ip;
    port = c_.port;
  }

  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    port = 0;
    ip.clear();
    if (::getsockname(c_.fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      (void)describe_peer(a, ip, port);
  }

  socket_t socket() const override { return c_.fd; }

  /// True when a read or write failed or timed out: the connection is out of step.
  bool failed() const noexcept { return failed_; }

 private:
  server_clock::time_point write_deadline() const {
    if (!write_deadline_) write_deadline_ = server_clock::now() + request_timeout_;
    return *write_deadline_;
  }

  // Waits until the socket is ready for `events`, at most `per_call` and never past
  // `deadline`. False on timeout or error.
  bool wait(short events, std::chrono::milliseconds per_call,
            server_clock::time_point deadline) const {
    const auto until = std::min(deadline, server_clock::now() + per_call);
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(until - server_clock::now());
      if (left.count() < 0) return false;
      pollfd p{c_.fd, events, 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1 << 30)));
      if (r > 0) return true;  // ready, or an error/hangup the next call reports
      if (r == 0) {
        if (server_clock::now() >= until) return (failed_ = true, false);
        continue;
      }
      if (errno != EINTR) return (failed_ = true, false);
    }
  }

  guarded_connection& c_;
  std::chrono::milliseconds request_timeout_;
  server_clock::time_point read_deadline_;
  mutable std::optional<server_clock::time_point> write_deadline_;
  std::chrono::milliseconds read_wait_;
  std::chrono::milliseconds write_wait_;
  mutable bool failed_ = false;
};

}  // namespace detail
}  // namespace http
}  // namespace dlq

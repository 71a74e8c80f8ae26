// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file http/server_connection.hpp
/// One connection of a dlq::http::GuardedServer (dlq/http/server.hpp): its socket and
/// buffered bytes, the httplib::Stream a worker reads its request from and writes its answer
/// to (never waiting for the peer: the poller reads whole requests and sends what is left
/// of answers), and the client key its caps count under. POSIX sockets.
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
#include <string_view>

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

// Whether a new connection is admitted, with `open` connections open in all and
// `of_client` of them from its client's key; `local`: it comes from 127.0.0.1 or ::1 (an
// operator on the host). Other addresses may use max_connections - local_reserve of the
// connections, so that however many addresses they are they cannot lock the host out.
// `per_client` 0: no cap per client. I/O-free.
inline bool admit_connection(std::size_t open, std::size_t of_client, bool local,
                             std::size_t max_connections, std::size_t per_client,
                             std::size_t local_reserve) {
  if (per_client != 0 && of_client >= per_client) return false;
  if (open >= max_connections) return false;
  return local || open + local_reserve < max_connections;
}

// True for the addresses of the host itself an operator connects from (127.0.0.1, ::1),
// as describe_peer writes them.
inline bool local_address(std::string_view ip) {
  return ip == "127.0.0.1" || ip == "::1";
}

// Which of `n` ready requests (oldest first) a free worker takes; `n` when none may be.
// `allowed(i)`: request i's client is below max_busy_per_client; `local(i)`: it comes from
// 127.0.0.1 or ::1 (an operator on the host). The oldest allowed request of the host is taken
// ahead of older ones of other addresses, so that a flood of queued requests cannot keep an
// operator waiting; but at most `max_overtakes` times in a row (ServerLimits::local_overtakes,
// counted in `overtakes`): then the oldest allowed request is taken, whoever sent it, so the
// host cannot starve others either. 0: first come, first served. I/O-free.
template <class Local, class Allowed>
std::size_t pick_ready(std::size_t n, Local local, Allowed allowed, std::size_t& overtakes,
                       std::size_t max_overtakes) {
  std::size_t oldest = 0;
  while (oldest < n && !allowed(oldest))
    ++oldest;
  if (oldest == n) return n;
  if (!local(oldest) && overtakes < max_overtakes)
    for (std::size_t i = oldest + 1; i < n; ++i)
      if (local(i) && allowed(i)) {
        ++overtakes;
        return i;
      }
  overtakes = 0;  // nobody overtaken
  return oldest;
}

// Whether an answer of `size` bytes the socket did not take at once is kept for the poller
// to send, with `held` bytes of such answers kept already; `local`: its peer is 127.0.0.1 or
// ::1. Else its connection is closed and the answer dropped. At least one answer is always
// kept, whatever its size, and the host's own are not counted against the bound: addresses
// that do not read cannot make an operator's page fail. `max_unsent` 0: no bound. I/O-free.
inline bool keep_unsent(std::size_t held, std::size_t size, bool local, std::size_t max_unsent) {
  return max_unsent == 0 || local || held == 0 || (held <= max_unsent && size <= max_unsent - held);
}

// The status line of an answer the server gives itself for a body_plan's `status`.
inline const char* status_line(int status) {
  switch (status) {
    case 411:
      return "411 Length Required";
    case 413:
      return "413 Payload Too Large";
    case 503:
      return "503 Service Unavailable";
    default:
      return "400 Bad Request";
  }
}

// Sends, without waiting, an answer the server gives itself: `status` (a status line) and a
// JSON error `code` and `message`, then "Connection: close".
inline void answer(int fd, const char* status, const std::string& code,
                   const std::string& message) {
  const std::string body =
      "{\"error\":{\"code\":\"" + code + "\",\"message\":\"[dlq.http] " + message + "\"}}\n";
  const std::string text = std::string("HTTP/1.1 ") + status +
                           "\r\nConnection: close\r\nContent-Type: application/json; "
                           "charset=utf-8\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body;
  (void)::send(fd, text.data(), text.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

// What the poller does with a request once its head (request line and headers, ending in
// an empty line) has arrived: read `body` more bytes and then hand the request to a worker,
// or answer `status` itself and close (a request that can never be served, or whose body
// would hold a worker). I/O-free; the one place GuardedServer decides on request bodies.
struct body_plan {
  int status = 0;                // 0: read the body, then hand over; else answer this and close
  std::string code;              // the error code of that answer
  std::string message;           // and its message
  std::size_t body = 0;          // bytes of body after the head (Content-Length)
  bool expect_continue = false;  // Expect: 100-continue: the poller answers 100 itself
};

inline bool ascii_iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char ch) { return ch >= 'A' && ch <= 'Z' ? char(ch - 'A' + 'a') : ch; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// The headers plan_body reads, as httplib would take them. I/O-free.
struct head_fields {
  std::optional<std::string_view> length;  // Content-Length's value
  bool two_lengths = false;                // two different Content-Length headers
  bool chunked = false;                    // any Transfer-Encoding
  bool expect_continue = false;            // Expect: 100-continue
};

// Reads the header lines of `head` (after the request line); lines without a colon are
// skipped, as httplib skips them.
inline head_fields scan_head_fields(std::string_view head) {
  head_fields f;
  std::size_t at = head.find('\n');
  while (at != std::string_view::npos && at + 1 < head.size()) {
    const std::size_t end = head.find('\n', at + 1);
    std::string_view line =
        head.substr(at + 1, (end == std::string_view::npos ? head.size() : end) - at - 1);
    at = end;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, colon);
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
      value.remove_suffix(1);
    if (ascii_iequal(name, "Content-Length")) {
      if (f.length && *f.length != value) f.two_lengths = true;
      f.length = value;
    } else if (ascii_iequal(name, "Transfer-Encoding")) {
      f.chunked = true;
    } else if (ascii_iequal(name, "Expect")) {
      f.expect_continue = ascii_iequal(value, "100-continue");
    }
  }
  return f;
}

// The request line: METHOD SP target SP HTTP/1.x, as httplib takes it. Returns the method,
// or nothing for a line httplib answers 400 to without reading the headers -- it keeps the
// connection, and the rest of the head would be taken as the next request (a request
// smuggled inside a head).
inline std::optional<std::string_view> request_method(std::string_view head) {
  const std::string_view first = head.substr(0, head.find("\r\n"));
  const std::size_t sp = first.find(' ');
  const std::size_t sp2 = sp == std::string_view::npos ? sp : first.find(' ', sp + 1);
  const std::string_view method = first.substr(0, sp == std::string_view::npos ? 0 : sp);
  const bool known = method == "POST" || method == "PUT" || method == "PATCH" ||
                     method == "DELETE" || method == "PRI" || method == "GET" || method == "HEAD" ||
                     method == "OPTIONS" || method == "TRACE" || method == "CONNECT";
  if (!known || sp2 == std::string_view::npos || sp2 == sp + 1 ||
      (first.substr(sp2 + 1) != "HTTP/1.1" && first.substr(sp2 + 1) != "HTTP/1.0"))
    return std::nullopt;
  return method;
}

// `head` is the request line and headers including the final CRLF CRLF; `max_body` is
// ServerLimits::max_body_bytes. httplib reads a body for POST, PUT, PATCH, DELETE and PRI
// (up to the connection's end when there is no Content-Length) and for no other method.
inline body_plan plan_body(std::string_view head, std::size_t max_body) {
  const auto refuse = [](int status, const char* code, std::string message) {
    body_plan p;
    p.status = status;
    p.code = code;
    p.message = std::move(message);
    return p;
  };
  // httplib skips a header line that does not end in CRLF (and refuses such a request line):
  // a line the server counted and httplib did not (a Content-Length) would let httplib read
  // a body the server never waited for, in a worker. Such a head is refused whole.
  for (std::size_t lf = head.find('\n'); lf != std::string_view::npos; lf = head.find('\n', lf + 1))
    if (lf == 0 || head[lf - 1] != '\r')
      return refuse(400, "bad_line_ending",
                    "a line of the request head ends in a bare LF; end every line in CRLF");
  const std::optional<std::string_view> method = request_method(head);
  if (!method)
    return refuse(400, "bad_request_line",
                  "the request line is not METHOD /path HTTP/1.1 with a method this server "
                  "knows; send one");
  const bool body_method = *method == "POST" || *method == "PUT" || *method == "PATCH" ||
                           *method == "DELETE" || *method == "PRI";
  const head_fields f = scan_head_fields(head);
  if (f.two_lengths)
    return refuse(400, "bad_content_length",
                  "the request has two different Content-Length headers; send one");
  if (f.chunked)
    return refuse(411, "length_required",
                  "a body sent with Transfer-Encoding is not accepted; send it with a "
                  "Content-Length");
  if (!f.length) {
    if (body_method)
      return refuse(411, "length_required",
                    std::string(*method) + " needs a Content-Length header (0 for no body)");
    return {};
  }
  const std::string_view length = *f.length;
  if (length.empty() || length.size() > 19 ||
      length.find_first_not_of("0123456789") != std::string_view::npos)
    return refuse(400, "bad_content_length",
                  "the Content-Length header is not a number of bytes; send one");
  const unsigned long long n = std::stoull(std::string(length));
  if (n > max_body)
    return refuse(413, "body_too_large",
                  "the body is larger than " + std::to_string(max_body) + " bytes; send less");
  if (n > 0 && !body_method)
    return refuse(400, "unexpected_body",
                  "this method takes no body; send the request without one");
  body_plan p;
  p.body = static_cast<std::size_t>(n);
  p.expect_continue = f.expect_continue && n > 0;
  return p;
}

// Bytes the poller reads from a socket at once. A body being read gets room for itself and
// one such read, so that the bytes it holds are those counted against max_unsent_bytes, not
// up to twice as many by a string's growth.
inline constexpr std::size_t fill_chunk = 16384;

// Drops the first `n` bytes of `s` (all of them: npos). When what it keeps is far smaller
// than its capacity (the bytes of a large body or answer, consumed), its memory is given back:
// a connection kept alive after a 1 MiB body would otherwise hold that MiB, counted nowhere,
// while it idles for its next request (head_timeout). Small buffers keep their capacity.
inline void drop_front(std::string& s, std::size_t n = std::string::npos) {
  constexpr std::size_t kept_capacity = std::size_t{64} << 10;
  if (n >= s.size()) {
    if (s.capacity() > kept_capacity) std::string().swap(s);
    s.clear();
    return;
  }
  if (s.capacity() <= kept_capacity) {
    s.erase(0, n);
    return;
  }
  std::string rest(s, n);  // allocated for what is left only
  s.swap(rest);
}

// One client connection: its socket, who it is, the bytes read but not yet consumed, and
// the bytes of an answer not yet sent.
struct guarded_connection {
  int fd = -1;
  std::string ip;
  int port = 0;
  std::string client;        // the key its caps are counted under
  std::string buf;           // bytes read and not consumed yet
  std::size_t off = 0;       // consumed prefix of buf
  std::size_t scanned = 0;   // buf[off, scanned) holds no end of head
  std::size_t need = 0;      // 0, or bytes from off that make the whole request (head + body)
  body_plan plan;            // for the request whose head is in buf (when need != 0 or refused)
  bool closing = false;      // answered by the poller: reading to the end, then closed
  std::string out;           // an answer the socket did not take yet: the poller sends it
  std::size_t out_off = 0;   // sent prefix of out
  bool close_after = false;  // close once out is sent (else read the next request)
  server_clock::time_point deadline;
  std::size_t requests = 0;  // served on this connection
  std::size_t held = 0;      // bytes of `out`, or of the body being read, counted against
                             // ServerLimits::max_unsent_bytes

  // True while part of an answer is still to be sent.
  bool writing() const noexcept { return out_off < out.size(); }

  // Sends what the socket takes of `out` without waiting; false when the peer is gone (out
  // is then dropped).
  bool flush() {
    while (writing()) {
      const ssize_t n =
          ::send(fd, out.data() + out_off, out.size() - out_off, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        out_off += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      drop_front(out);
      out_off = 0;
      return false;
    }
    drop_front(out);
    out_off = 0;
    return true;
  }
};

// A stream of one request line and nothing more, whose writes fail: what GuardedServer's
// constructor hands httplib once so that httplib builds the statics of its request parsing
// (the set of methods of a request line) on that thread, before any worker exists. httplib
// answers it 400 (the head has no end), writes nothing and calls no handler or logger
// (none is set yet).
class request_line_probe final : public httplib::Stream {
 public:
  bool is_readable() const override { return left_ > 0; }
  bool is_writable() const override { return false; }
  ssize_t read(char* ptr, size_t size) override {
    const std::size_t n = std::min(size, left_);
    std::memcpy(ptr, line_ + (sizeof line_ - 1 - left_), n);
    left_ -= n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char*, size_t) override { return -1; }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 0;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 0;
  }
  socket_t socket() const override { return INVALID_SOCKET; }

 private:
  static constexpr char line_[] = "GET / HTTP/1.1\r\n";
  std::size_t left_ = sizeof line_ - 1;
};

// The stream a worker hands to httplib for one request. Reads: the request's bytes, which
// the poller has read whole (head and body), and no more. Writes: what the socket takes at
// once; the rest is kept in the connection's `out` for the poller to send, so a worker never
// waits for a peer that does not read (the answer is in memory already, as httplib's
// Response). httplib answers some requests without reading all of their bytes (a bad Range,
// a multipart type without boundary, an over-long target or header line, a NUL in the
// request line): read_whole() is then false and the connection must be closed, or the
// bytes left would be taken as the next request (a request smuggled inside a body or head).
class guarded_stream final : public httplib::Stream {
 public:
  // `request`: the bytes of c.buf from c.off that make the request (c.need).
  guarded_stream(guarded_connection& c, std::size_t request) : c_(c), left_(request) {}

  bool is_readable() const override { return left_ > 0; }
  bool is_writable() const override { return !failed_; }

  // The request's bytes; past them the end of the stream (httplib never waits for the peer).
  ssize_t read(char* ptr, size_t size) override {
    const std::size_t n = std::min({size, left_, c_.buf.size() - c_.off});
    if (n == 0) {
      read_past_ = size > 0;
      return 0;
    }
    std::memcpy(ptr, c_.buf.data() + c_.off, n);
    c_.off += n;
    left_ -= n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (failed_) return -1;
    c_.out.append(ptr, size);
    if (!c_.flush()) {
      failed_ = true;
      return -1;
    }
    return static_cast<ssize_t>(size);
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

  /// True when a write failed (the peer is gone): the connection is out of step.
  bool failed() const noexcept { return failed_; }

  /// True when httplib read the request's bytes exactly: all of them, and asked for none
  /// past them. Else httplib and the poller disagree on where the request ends, and the
  /// connection must not carry another request.
  bool read_whole() const noexcept { return left_ == 0 && !read_past_; }

 private:
  guarded_connection& c_;
  std::size_t left_;  // bytes of the request httplib has not read yet
  bool read_past_ = false;
  bool failed_ = false;
};

}  // namespace detail
}  // namespace http
}  // namespace dlq

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file http/server.hpp
/// dlq::http::GuardedServer — an httplib::Server that slow or greedy clients cannot take
/// down: serve the console (or anything else) on it in place of a plain httplib::Server.
///
///     dlq::http::GuardedServer server;        // limits: dlq::http::ServerLimits
///     console.mount(server);                  // it is an httplib::Server
///     server.listen("127.0.0.1", 8080);
///
/// Why. cpp-httplib gives each connection one of a few worker threads (8 by default) from
/// accept to close, and waits up to its read timeout (5 s) for each byte, with no deadline
/// for a whole request. Eight idle connections therefore stall every other request for
/// about 5 s, and peers that send their request head one byte every few seconds keep every
/// worker busy for as long as they like — before any handler, so before any token check.
///
/// What GuardedServer does instead (POSIX sockets and poll()):
/// - One thread waits for request heads on all connections at once; a connection holds a
///   worker thread only once its request line and headers have fully arrived. Idle and
///   slow peers cost a socket and a buffer, never a worker.
/// - The head must be complete within ServerLimits::head_timeout of the connection being
///   accepted or its previous response being sent (keep-alive), however the bytes trickle
///   in; else the connection is closed (with 408 when part of a request had arrived). A head
///   over ServerLimits::max_head_bytes is answered 431 and closed.
/// - A request holds a worker only once its body has arrived too: the same thread reads it,
///   after the head, within ServerLimits::request_timeout (else 408 and closed), answering
///   `Expect: 100-continue` itself. So neither a slow body nor one the handler never wants
///   (a refused POST, a method or path without a route) can hold a worker. What follows
///   from that, and is answered by the server itself (and the connection closed):
///   - a Content-Length over ServerLimits::max_body_bytes: 413 (bodies are buffered whole);
///   - a body sent with Transfer-Encoding (chunked): 411 — send a Content-Length;
///   - POST, PUT, PATCH, DELETE without Content-Length: 411 (httplib would read such a body
///     up to the connection's end); another method with a body: 400;
///   - a head with a line ending in a bare LF: 400 (httplib skips such a header line, so it
///     could miss a Content-Length the server counted); a request line other than
///     `METHOD target HTTP/1.1` (or 1.0) with a method httplib knows: 400 (httplib would
///     answer it without reading the headers, then take them as the next request).
///   Chose over answering only "hopeless" requests early: a handler's own refusal (401, 403,
///   415) would still hold a worker while the body trickles in, and every route would have
///   to be known to the poller. Since httplib itself also answers `100 Continue` once it has
///   the request, a client that sends Expect gets two of them (HTTP clients skip 1xx).
/// - httplib reads the request from those bytes and no further. When it answers without
///   reading all of them (a bad Range: 416; a multipart type without boundary: 400; a target
///   or header line over 8 KiB: 414, 400; a NUL in the request line: 400), the connection is
///   closed after the answer: what it left unread is not taken as the next request.
/// - A worker never waits for a peer to read its answer: it writes what the socket takes at
///   once and leaves the rest (the answer is whole in memory already, as httplib's Response)
///   to the same thread, which sends it within ServerLimits::request_timeout from the
///   handler's end (else the connection is closed) and only then reads the connection's next
///   request. So peers that never read what they asked for hold memory but no worker: at
///   most ServerLimits::max_unsent_bytes of answers in all (plus those of 127.0.0.1 and ::1);
///   a connection whose answer would go over it is closed, its answer dropped. Bodies still
///   arriving or waiting for a worker count against the same bound (a head whose body
///   would go over it: 503); an idle connection keeps no large buffer (detail::drop_front).
/// - Each client address (IPv6: each /64) may hold at most
///   ServerLimits::max_connections_per_client connections; more are answered 503 and closed
///   at once. At most ServerLimits::max_busy_per_client of its requests are handled at once;
///   its others wait for their turn without holding a worker, so the workers stay free for
///   other addresses. ServerLimits::max_connections bounds all connections together, of
///   which ServerLimits::local_reserve only 127.0.0.1 and ::1 may use: addresses at their
///   cap, however many, cannot lock an operator on the host out. Nor can their queued
///   requests keep it waiting: a free worker takes the host's ahead of older ones, at most
///   ServerLimits::local_overtakes in a row (detail::pick_ready).
///
/// Everything else is httplib::Server's: routes, error handlers, set_payload_max_length,
/// and set_keep_alive_max_count. Not used: set_read_timeout and set_write_timeout (the
/// server reads whole requests and sends answers itself, bounded by head_timeout and
/// request_timeout), set_keep_alive_timeout (an idle keep-alive connection is closed after
/// head_timeout) and new_task_queue (the server sets its own; do not replace
/// it). Behind a reverse proxy every request comes from the proxy's address: set
/// max_connections_per_client to 0 there and let the proxy limit clients (docs/console.md
/// has an nginx recipe).
#pragma once

#include <httplib.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <dlq/errors.hpp>
#include <dlq/http/server_connection.hpp>
#include <dlq/http/server_limits.hpp>

namespace dlq {
namespace http {

/// An httplib::Server with limits for slow and greedy clients (see the file comment).
class GuardedServer : public httplib::Server {
 public:
  /// @throws dlq::invalid_argument when a limit is 0 where it must not be (threads,
  ///         head_timeout, request_timeout, max_head_bytes, max_connections), or
  ///         local_reserve is not less than max_connections.
  explicit GuardedServer(ServerLimits limits = {}) : limits_(std::move(limits)) {
    const auto refuse = [](const char* what) {
      return dlq::invalid_argument(
          dlq::detail::message("http", std::string("ServerLimits::") + what, "must be more than 0",
                               "leave it at its default or give a positive value"));
    };
    if (limits_.threads == 0) throw refuse("threads");
    if (limits_.head_timeout.count() <= 0) throw refuse("head_timeout");
    if (limits_.request_timeout.count() <= 0) throw refuse("request_timeout");
    if (limits_.max_head_bytes == 0) throw refuse("max_head_bytes");
    if (limits_.max_connections == 0) throw refuse("max_connections");
    if (limits_.local_reserve >= limits_.max_connections)
      throw dlq::invalid_argument(dlq::detail::message(
          "http", "ServerLimits::local_reserve", "must be less than max_connections",
          "leave it at its default or give fewer than max_connections"));
    new_task_queue = [this] { return new task_queue(*this); };
    // httplib's request-line statics built here, before any worker: TSan cannot see their
    // guard in a prebuilt libcpp-httplib (server_connection.hpp, request_line_probe).
    detail::request_line_probe probe;
    bool closed = false;
    (void)process_request(probe, true, closed, nullptr);
  }

  GuardedServer(const GuardedServer&) = delete;
  GuardedServer& operator=(const GuardedServer&) = delete;

  /// httplib::Server::bind_to_port, then a listen backlog of SOMAXCONN instead of
  /// httplib's 5 (a burst of connections would otherwise make the kernel drop other
  /// clients' connection attempts, which they repeat only after a second).
  bool bind_to_port(const std::string& host, int port, int socket_flags = 0) {
    const bool ok = httplib::Server::bind_to_port(host, port, socket_flags);
    if (ok) raise_backlog();
    return ok;
  }
  /// httplib::Server::bind_to_any_port, with the backlog of bind_to_port.
  int bind_to_any_port(const std::string& host, int socket_flags = 0) {
    const int port = httplib::Server::bind_to_any_port(host, socket_flags);
    if (port > 0) raise_backlog();
    return port;
  }
  /// bind_to_port and listen_after_bind.
  bool listen(const std::string& host, int port, int socket_flags = 0) {
    return bind_to_port(host, port, socket_flags) && listen_after_bind();
  }

  /// The limits in effect.
  const ServerLimits& limits() const noexcept { return limits_; }

  /// Connections now and refusals so far (all zero before listen).
  ServerCounts counts() const {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    ServerCounts c = totals_;
    if (engine_) engine_->add_counts(c);
    return c;
  }

 private:
  using clock = std::chrono::steady_clock;

  // One client connection and the stream of one of its requests (server_connection.hpp).
  using connection = detail::guarded_connection;
  using conn_ptr = std::unique_ptr<connection>;
  using conn_stream = detail::guarded_stream;

  // The head poller and the workers of one listen(); created by the task queue httplib asks
  // for at listen, stopped when httplib shuts that queue down.
  class engine {
   public:
    explicit engine(GuardedServer& server) : s_(server), lim_(server.limits_) {
      int p[2];
      if (::pipe(p) != 0)
        throw dlq::connection_error(dlq::detail::message(
            "http", "GuardedServer", std::string("cannot create a pipe: ") + std::strerror(errno),
            "raise the limit of open files"));
      wake_r_ = p[0];
      wake_w_ = p[1];
      for (const int fd : p) {
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
        ::fcntl(fd, F_SETFD, FD_CLOEXEC);
      }
      poller_ = std::thread([this] { poll_loop(); });
      for (std::size_t i = 0; i < lim_.threads; ++i)
        workers_.emplace_back([this] { work_loop(); });
    }

    engine(const engine&) = delete;
    engine& operator=(const engine&) = delete;

    ~engine() {
      stop();
      ::close(wake_r_);
      ::close(wake_w_);
    }

    // Closes every connection (those being handled after their request) and joins.
    void stop() {
      {
        std::lock_guard<std::mutex> lock(m_);
        if (stopping_ && !poller_.joinable()) return;
        stopping_ = true;
      }
      wake();
      work_cv_.notify_all();
      if (poller_.joinable()) poller_.join();
      for (auto& t : workers_)
        if (t.joinable()) t.join();
      std::lock_guard<std::mutex> lock(m_);
      for (auto& c : incoming_)
        close_locked(*c);
      incoming_.clear();
      for (auto& c : ready_)
        close_locked(*c);
      ready_.clear();
    }

    // Called on the accept thread for each new socket: admitted to the poller, or refused.
    void admit(int fd) {
      auto c = std::make_unique<connection>();
      c->fd = fd;
      sockaddr_storage a{};
      socklen_t len = sizeof a;
      if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
        c->client = detail::describe_peer(a, c->ip, c->port);
      c->deadline = clock::now() + lim_.head_timeout;
      {
        std::lock_guard<std::mutex> lock(m_);
        const auto it = per_client_.find(c->client);
        const bool full = stopping_ || !detail::admit_connection(
                                           open_, it == per_client_.end() ? 0 : it->second.open,
                                           detail::local_address(c->ip), lim_.max_connections,
                                           lim_.max_connections_per_client, lim_.local_reserve);
        if (full) {
          ++refused_;
          detail::answer(fd, "503 Service Unavailable", "too_many_connections",
                         "too many connections from this address, or in all; close some and retry");
          ::shutdown(fd, SHUT_RDWR);
          ::close(fd);
          return;
        }
        ++open_;
        ++per_client_[c->client].open;
        incoming_.push_back(std::move(c));
      }
      wake();
    }

    void add_counts(ServerCounts& out) {
      std::lock_guard<std::mutex> lock(m_);
      out.open += open_;
      out.waiting += waiting_;
      out.busy += busy_;
      out.refused += refused_;
      out.head_timeouts += head_timeouts_;
      out.heads_too_large += heads_too_large_;
      out.bodies_late += bodies_late_;
      out.responses_late += responses_late_;
      out.responses_dropped += responses_dropped_;
      out.unsent_bytes += unsent_;
      out.requests_refused += requests_refused_;
    }

   private:
    struct per_client {
      std::size_t open = 0;
      std::size_t busy = 0;
    };

    void wake() {
      const char b = 1;
      (void)!::write(wake_w_, &b, 1);
    }

    void close_locked(connection& c) {
      if (c.fd < 0) return;
      ::shutdown(c.fd, SHUT_RDWR);
      ::close(c.fd);
      c.fd = -1;
      --open_;
      release_locked(c);
      auto it = per_client_.find(c.client);
      if (it != per_client_.end() && --it->second.open == 0 && it->second.busy == 0)
        per_client_.erase(it);
    }

    // The answer of `c` is sent (or dropped), or its body handed over: its bytes no longer
    // count as held.
    void release_locked(connection& c) {
      unsent_ -= c.held;
      c.held = 0;
    }

    enum class head_state { waiting, ready, closed, too_large, refused };

    // Where the connection's request stands, from the bytes already read: its head, then
    // (plan_body) its body, which must both be in before a worker takes the request.
    head_state classify(connection& c, clock::time_point now) {
      if (c.need == 0) {
        const std::size_t from = std::max(c.off, c.scanned >= 3 ? c.scanned - 3 : std::size_t{0});
        const std::size_t end = c.buf.find("\r\n\r\n", from);
        c.scanned = c.buf.size();
        if (end == std::string::npos)
          return c.buf.size() - c.off > lim_.max_head_bytes ? head_state::too_large
                                                            : head_state::waiting;
        const std::size_t head = end + 4 - c.off;
        if (head > lim_.max_head_bytes) return head_state::too_large;
        c.plan =
            detail::plan_body(std::string_view(c.buf).substr(c.off, head), lim_.max_body_bytes);
        if (c.plan.status != 0) return head_state::refused;
        c.need = head + c.plan.body;
        if (c.buf.size() - c.off < c.need) {
          if (!hold_body(c)) return head_state::refused;
          c.buf.reserve(c.off + c.need + detail::fill_chunk);  // held = counted, not 2x
          c.deadline = now + lim_.request_timeout;  // the body's own time, from the head
          if (c.plan.expect_continue) {
            static const char go_on[] = "HTTP/1.1 100 Continue\r\n\r\n";
            (void)::send(c.fd, go_on, sizeof go_on - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
          }
        }
      }
      return c.buf.size() - c.off >= c.need ? head_state::ready : head_state::waiting;
    }

    // Counts the body `c` is about to receive against ServerLimits::max_unsent_bytes, as an
    // answer its peer has not taken (detail::keep_unsent: one always, the host's regardless):
    // a peer that sends slowly would otherwise keep max_body_bytes buffered per connection,
    // up to max_connections of them (496 MiB). Over it: the plan becomes a 503, and false.
    bool hold_body(connection& c) {
      std::lock_guard<std::mutex> lock(m_);
      if (!detail::keep_unsent(unsent_, c.plan.body, detail::local_address(c.ip),
                               lim_.max_unsent_bytes)) {
        c.plan.status = 503;
        c.plan.code = "busy";
        c.plan.message =
            "the server holds as many request bodies and answers as it may for "
            "slow peers; send it again later";
        return false;
      }
      c.held = c.plan.body;  // released when the request is handed over or closed
      unsent_ += c.held;
      return true;
    }

    // Reads what the socket has, until the request is complete or refused (a closing
    // connection: drops what it reads, until the peer's end).
    head_state fill(connection& c, clock::time_point now) {
      for (;;) {
        const head_state st = c.closing ? head_state::waiting : classify(c, now);
        if (st != head_state::waiting) return st;
        char chunk[detail::fill_chunk];
        const ssize_t n = ::recv(c.fd, chunk, sizeof chunk, MSG_DONTWAIT);
        if (n > 0) {
          if (!c.closing) c.buf.append(chunk, static_cast<std::size_t>(n));
          continue;
        }
        if (n == 0) return head_state::closed;
        if (errno == EINTR) continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? head_state::waiting : head_state::closed;
      }
    }

    // Answers `c` with an error and half-closes it: it stays with the poller, which drops
    // what the peer still sends (so that the peer reads the answer, not a reset) until the
    // peer closes or head_timeout passes.
    void refuse_locked(connection& c, const char* status, const std::string& code,
                       const std::string& message, clock::time_point now) {
      detail::answer(c.fd, status, code, message);
      ::shutdown(c.fd, SHUT_WR);
      c.closing = true;
      detail::drop_front(c.buf);
      c.off = 0;
      c.deadline = now + lim_.head_timeout;
    }

    // Hands `c` to the workers, or answers and closes it, or keeps it waiting (returned).
    conn_ptr settle(conn_ptr c, head_state st, clock::time_point now) {
      if (st == head_state::ready) {
        {
          std::lock_guard<std::mutex> lock(m_);
          ready_.push_back(std::move(c));  // its body still counted until take_locked
        }
        work_cv_.notify_all();
        return nullptr;
      }
      if (st == head_state::waiting && now < c->deadline) return c;
      std::lock_guard<std::mutex> lock(m_);
      if (c->closing) {  // its answer is sent; the peer closed or took too long
        close_locked(*c);
        return nullptr;
      }
      if (st == head_state::too_large) {
        ++heads_too_large_;
        refuse_locked(*c, "431 Request Header Fields Too Large", "head_too_large",
                      "the request line and headers are longer than " +
                          std::to_string(lim_.max_head_bytes) + " bytes; send shorter headers",
                      now);
        return c;
      }
      if (st == head_state::refused) {
        ++requests_refused_;
        refuse_locked(*c, detail::status_line(c->plan.status), c->plan.code, c->plan.message, now);
        return c;
      }
      if (st == head_state::waiting) {
        if (c->need != 0) {
          ++bodies_late_;
          detail::answer(c->fd, "408 Request Timeout", "request_timeout",
                         "the request body did not arrive within " +
                             std::to_string(lim_.request_timeout.count()) +
                             " ms of its head; send it at once");
        } else {
          ++head_timeouts_;
          if (c->buf.size() > c->off)  // part of a request came: say why it ends
            detail::answer(c->fd, "408 Request Timeout", "request_timeout",
                           "the request head did not arrive within " +
                               std::to_string(lim_.head_timeout.count()) + " ms; send it at once");
        }
      }
      close_locked(*c);
      return nullptr;
    }

    // Sends what the socket takes of c's answer (when `ready`); keeps c while some is left
    // and its deadline has not passed, then reads its next request or closes it.
    conn_ptr send_answer(conn_ptr c, bool ready, clock::time_point now) {
      const bool gone = ready && !c->flush();
      if (!gone && c->writing()) {
        if (now < c->deadline) return c;
        std::lock_guard<std::mutex> lock(m_);
        ++responses_late_;
        close_locked(*c);
        return nullptr;
      }
      {
        std::lock_guard<std::mutex> lock(m_);
        if (gone || c->close_after) {
          close_locked(*c);
          return nullptr;
        }
        release_locked(*c);
      }
      c->deadline = now + lim_.head_timeout;
      const head_state st = classify(*c, now);  // the next request may be read already
      return settle(std::move(c), st, now);
    }

    void poll_loop() {
      std::vector<conn_ptr> waiting;
      std::vector<pollfd> fds;
      for (;;) {
        std::vector<conn_ptr> fresh;
        {
          std::lock_guard<std::mutex> lock(m_);
          if (stopping_) {
            for (auto& c : waiting)
              close_locked(*c);
            waiting_ = 0;
            return;
          }
          fresh.swap(incoming_);
        }
        const auto before = clock::now();
        for (auto& c : fresh) {
          detail::drop_front(c->buf, c->off);  // what the last request left: pipelined bytes
          c->off = 0;
          c->scanned = 0;
          c->need = 0;
          if (c->writing()) {  // its answer first; the next request once it is sent
            waiting.push_back(std::move(c));
            continue;
          }
          const head_state st = classify(*c, before);
          if (auto kept = settle(std::move(c), st, before)) waiting.push_back(std::move(kept));
        }
        auto next = clock::time_point::max();
        fds.assign(1, pollfd{wake_r_, POLLIN, 0});
        for (const auto& c : waiting) {
          fds.push_back(pollfd{c->fd, static_cast<short>(c->writing() ? POLLOUT : POLLIN), 0});
          next = std::min(next, c->deadline);
        }
        {
          std::lock_guard<std::mutex> lock(m_);
          waiting_ = waiting.size();
        }
        int timeout = -1;
        if (next != clock::time_point::max())
          timeout = static_cast<int>(std::clamp<long long>(
              std::chrono::duration_cast<std::chrono::milliseconds>(next - before).count() + 1, 0,
              60000));
        const int r = ::poll(fds.data(), static_cast<nfds_t>(fds.size()), timeout);
        if (r < 0 && errno != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (r > 0 && fds[0].revents != 0) {
          char drain[256];
          while (::read(wake_r_, drain, sizeof drain) > 0) {
          }
        }
        const auto after = clock::now();
        std::vector<conn_ptr> keep;
        keep.reserve(waiting.size());
        for (std::size_t i = 0; i < waiting.size(); ++i) {  // fds[i + 1] is waiting[i]
          connection& c = *waiting[i];
          if (c.writing()) {
            if (auto kept =
                    send_answer(std::move(waiting[i]), r > 0 && fds[i + 1].revents != 0, after))
              keep.push_back(std::move(kept));
            continue;
          }
          const head_state st =
              r > 0 && fds[i + 1].revents != 0 ? fill(c, after) : head_state::waiting;
          if (auto kept = settle(std::move(waiting[i]), st, after)) keep.push_back(std::move(kept));
        }
        waiting.swap(keep);
      }
    }

    // The ready connection a free worker takes (detail::pick_ready): the oldest whose client
    // may have one more request handled, or one of the host's ahead of it.
    bool take_locked(conn_ptr& out) {
      const auto allowed = [this](std::size_t i) {
        const auto it = per_client_.find(ready_[i]->client);
        return lim_.max_busy_per_client == 0 || it == per_client_.end() ||
               it->second.busy < lim_.max_busy_per_client;
      };
      const auto local = [this](std::size_t i) { return detail::local_address(ready_[i]->ip); };
      const std::size_t i =
          detail::pick_ready(ready_.size(), local, allowed, overtakes_, lim_.local_overtakes);
      if (i == ready_.size()) return false;
      ++per_client_[ready_[i]->client].busy;
      ++busy_;
      release_locked(*ready_[i]);  // its bytes are the worker's now
      out = std::move(ready_[i]);
      ready_.erase(ready_.begin() + static_cast<std::ptrdiff_t>(i));
      return true;
    }

    void work_loop() {
      for (;;) {
        conn_ptr c;
        {
          std::unique_lock<std::mutex> lock(m_);
          work_cv_.wait(lock, [&] { return stopping_ || take_locked(c); });
          if (!c) return;  // stopping, nothing taken
        }
        const bool keep = serve(*c);
        {
          std::lock_guard<std::mutex> lock(m_);
          --busy_;
          auto it = per_client_.find(c->client);
          if (it != per_client_.end()) --it->second.busy;
          const bool kept = !c->writing() || detail::keep_unsent(unsent_, c->out.size(),
                                                                 detail::local_address(c->ip),
                                                                 lim_.max_unsent_bytes);
          if (!kept) ++responses_dropped_;
          if (!stopping_ && kept && (keep || c->writing())) {  // the poller sends the rest
            c->held = c->writing() ? c->out.size() : 0;
            unsent_ += c->held;
            c->close_after = !keep;
            c->deadline = clock::now() + (c->writing() ? lim_.request_timeout : lim_.head_timeout);
            incoming_.push_back(std::move(c));
          } else {
            close_locked(*c);
          }
        }
        wake();
        work_cv_.notify_all();  // a client below its cap again may have requests waiting
      }
    }

    // Handles one request; true when the connection stays open for the next one.
    bool serve(connection& c) {
      conn_stream strm(c, c.need);
      const std::size_t max_count = std::max<std::size_t>(1, s_.keep_alive_max_count_);
      bool close_connection = c.requests + 1 >= max_count;
      {
        std::lock_guard<std::mutex> lock(m_);
        close_connection = close_connection || stopping_;
      }
      bool connection_closed = false;
      bool ok = false;
      try {
        ok = s_.process_request(strm, close_connection, connection_closed, nullptr);
      } catch (...) {
        ok = false;
      }
      ++c.requests;
      // httplib left part of the request unread (or wanted more): what follows on the
      // connection is not the start of a request.
      return ok && !close_connection && !connection_closed && !strm.failed() && strm.read_whole();
    }

    GuardedServer& s_;
    const ServerLimits& lim_;
    int wake_r_ = -1;
    int wake_w_ = -1;
    std::mutex m_;
    std::condition_variable work_cv_;
    bool stopping_ = false;
    std::vector<conn_ptr> incoming_;  // new and kept-alive connections for the poller
    std::deque<conn_ptr> ready_;      // heads complete, waiting for a worker
    std::map<std::string, per_client> per_client_;
    std::size_t open_ = 0;
    std::size_t waiting_ = 0;
    std::size_t busy_ = 0;
    std::size_t overtakes_ = 0;  // host's requests taken in a row ahead of others' (pick_ready)
    std::uint64_t refused_ = 0;
    std::uint64_t head_timeouts_ = 0;
    std::uint64_t heads_too_large_ = 0;
    std::uint64_t bodies_late_ = 0;
    std::uint64_t responses_late_ = 0;
    std::uint64_t responses_dropped_ = 0;
    std::size_t unsent_ = 0;  // bytes of answers and bodies held for peers (max_unsent_bytes)
    std::uint64_t requests_refused_ = 0;
    std::thread poller_;
    std::vector<std::thread> workers_;
  };

  // httplib's task queue for one listen(): runs its "process this socket" task at once on the
  // accept thread (GuardedServer's process_and_close_socket only hands the socket over), and
  // owns the engine that does the work.
  class task_queue final : public httplib::TaskQueue {
   public:
    explicit task_queue(GuardedServer& s) : s_(s) {
      s_.raise_backlog();  // when bound through httplib::Server's own bind
      auto e = std::make_shared<engine>(s);
      std::lock_guard<std::mutex> lock(s_.engine_mutex_);
      s_.engine_ = std::move(e);
    }
    void enqueue(std::function<void()> fn) override { fn(); }
    void shutdown() override {
      std::shared_ptr<engine> e;
      {
        std::lock_guard<std::mutex> lock(s_.engine_mutex_);
        e = s_.engine_;
      }
      if (!e) return;
      e->stop();
      ServerCounts c;
      e->add_counts(c);
      std::lock_guard<std::mutex> lock(s_.engine_mutex_);
      s_.totals_.refused += c.refused;
      s_.totals_.head_timeouts += c.head_timeouts;
      s_.totals_.heads_too_large += c.heads_too_large;
      s_.totals_.bodies_late += c.bodies_late;
      s_.totals_.responses_late += c.responses_late;
      s_.totals_.responses_dropped += c.responses_dropped;
      s_.totals_.requests_refused += c.requests_refused;
      s_.engine_.reset();
    }

   private:
    GuardedServer& s_;
  };

  // httplib 0.11 listens with a backlog of 5: a burst of connections (refused at once, but
  // accepted one by one) would make the kernel drop other clients' SYNs, which they resend
  // only after a second. Listening again on the bound socket raises it (Linux, BSD).
  void raise_backlog() {
    const socket_t listening = svr_sock_;
    if (listening != INVALID_SOCKET) (void)::listen(listening, SOMAXCONN);
  }

  // Called by httplib's accept loop (through task_queue::enqueue) with each new socket.
  bool process_and_close_socket(socket_t sock) override {
    std::shared_ptr<engine> e;
    {
      std::lock_guard<std::mutex> lock(engine_mutex_);
      e = engine_;
    }
    if (!e) {
      ::shutdown(sock, SHUT_RDWR);
      ::close(sock);
      return false;
    }
    e->admit(sock);
    return true;
  }

  ServerLimits limits_;
  mutable std::mutex engine_mutex_;
  std::shared_ptr<engine> engine_;
  ServerCounts totals_;  // refusals of finished listens
};

}  // namespace http
}  // namespace dlq

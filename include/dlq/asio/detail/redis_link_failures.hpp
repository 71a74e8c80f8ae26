// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/detail/redis_link_failures.hpp
/// Internal to dlq::asio: what a dlq::asio::RedisConnection does when its connection ends —
/// lost (the commands in flight fail, a read is sent again once on a fresh connection),
/// dropped after a time limit, or closed — each command completed once with its typed
/// error. Part of detail::redis_link (redis_link.hpp). Not part of the API.
#pragma once

#include <cstddef>
#include <exception>
#include <string>
#include <utility>

#include "dlq/asio/detail/redis_link.hpp"
#include "dlq/errors.hpp"

namespace dlq::asio::detail {

inline std::exception_ptr redis_link::closed_error(const redis_op& o) const {
  const bool unknown = o.write && o.sent;
  return std::make_exception_ptr(dlq::connection_error(
      msg(o.label() + ": the connection was closed with the command in flight",
          unknown ? "the write was sent and may or may not have been applied (outcome "
                    "unknown); check the data before sending it again"
                  : "nothing was sent; open a new queue or connection to go on"),
      unknown));
}

inline void redis_link::fail_waiting(const std::exception_ptr& e) {
  state = phase::idle;
  waiting_out.clear();
  while (!waiting.empty()) {
    redis_op o = waiting.pop_front();
    post_done(o, e);
  }
}

// Closes the stream and forgets its buffers (their commands are reported by the caller).
inline void redis_link::close_socket() {
  ++generation;
  state = phase::idle;
  connected = flush_posted = write_waiting = reading = false;
  connect_timer.cancel();
  command_timer.cancel();
  backoff_timer.cancel();
  resolver.cancel();
  resolved = false;
  if (stream) {
    stream->close();
    stream.reset();
  }
  out.clear();
  writing.clear();
  writing_off = 0;
  input.clear();
}

// Drops the connection: every command in flight and waiting completes with `e`.
inline void redis_link::drop(const std::exception_ptr& e) {
  drop_with([&](const redis_op&) { return e; });
}

template <class MakeError>
void redis_link::drop_with(MakeError make) {
  close_socket();
  // The rings are emptied before any completion is posted.
  ring<redis_op> f = std::move(inflight);
  ring<redis_op> w = std::move(waiting);
  waiting_out.clear();
  for (std::size_t i = 0; i < f.size(); ++i)
    if (f[i].what == redis_op::kind::command) post_done(f[i], make(f[i]));
  for (std::size_t i = 0; i < w.size(); ++i)
    post_done(w[i], make(w[i]));
}

inline void redis_link::close() noexcept {
  closed = true;
  try {
    drop_with([this](const redis_op& o) { return closed_error(o); });
  } catch (...) {  // NOLINT(bugprone-empty-catch): close must not throw
  }
}

// The connection failed under the commands (EOF, an I/O error, a failed connect, bytes
// that are not RESP): those in flight fail with connection_error, those waiting for the
// connect with its error. As on the blocking connection, a read in flight on an
// established connection is sent again, once, on a fresh one (it changes nothing, so
// it cannot double anything); a write never is (outcome unknown), nor anything after a
// time limit passed (drop_with) or close().
inline void redis_link::lost(const std::string& text) {
  const bool connecting = state == phase::connecting;
  const bool was_ready = state == phase::ready;
  close_socket();
  ring<redis_op> f = std::move(inflight);
  for (std::size_t i = 0; i < f.size(); ++i) {
    redis_op& o = f[i];
    if (o.what != redis_op::kind::command) continue;
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

}  // namespace dlq::asio::detail

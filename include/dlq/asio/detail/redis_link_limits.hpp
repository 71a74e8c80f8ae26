// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/detail/redis_link_limits.hpp
/// Internal to dlq::asio: the command time limit of a dlq::asio::RedisConnection, and the
/// look at the stream taken before any limit fails a command — so that a loop busy with the
/// application's own work does not fail what the server has answered or never received.
/// Part of detail::redis_link (redis_link.hpp). Not part of the API.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <system_error>

#include "dlq/asio/detail/redis_link.hpp"
#include "dlq/errors.hpp"

namespace dlq::asio::detail {

// Handles the stream's readiness at once, ahead of the loop's turn: writes what is still
// buffered when the stream takes it, and tells whether answers have arrived (the read in
// flight takes them on the loop's next turn) or a connect in flight has completed. True
// when there was something to handle. Called when a time limit passes: the loop may have
// been busy with other work while the server did answer.
inline bool redis_link::pump() {
  if (!stream) return false;
  const redis_stream::readiness ready = stream->probe();
  if (!connected) return ready.writable;  // the connect completes on the next turn
  const std::uint64_t gen = generation;
  bool progressed = false;
  if (has_output() && ready.writable) {
    if (!write_waiting) flush();  // else the write in flight goes on on the next turn
    progressed = true;
    if (generation != gen) return true;
  }
  if (!inflight.empty() && ready.readable) progressed = true;
  return progressed;
}

inline void redis_link::arm_command_timer() {
  if (command_timer_armed || state != phase::ready || inflight.empty() ||
      options.command_timeout.count() <= 0)
    return;
  command_timer_armed = true;
  command_timer.expires_at(inflight.front().deadline);
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

// The commands in flight get their limit again from now, and the timer is armed.
inline void redis_link::restart_limits() {
  if (inflight.empty()) return;
  const auto again = std::chrono::steady_clock::now() + options.command_timeout;
  for (std::size_t i = 0; i < inflight.size(); ++i)
    inflight[i].deadline = std::max(inflight[i].deadline, again);
  arm_command_timer();
}

inline void redis_link::on_command_timer() {
  if (inflight.empty() || state != phase::ready) return;
  if (inflight.front().deadline <= std::chrono::steady_clock::now()) {
    // The loop may have been busy (the application's work, a burst of sends) while the
    // commands waited in the output buffer or their answers in the socket: handle those
    // first. There was something to handle: the server is answering (or had no chance
    // yet), and the commands still waiting get their limit again from now — as the
    // blocking connection, whose limit is per read.
    const std::uint64_t gen = generation;
    if (pump()) {
      if (generation != gen) return;  // the connection went down: already reported
      return restart_limits();
    }
  }
  if (inflight.empty()) return;
  const redis_op& front = inflight.front();
  if (front.deadline > std::chrono::steady_clock::now()) return arm_command_timer();
  const std::string limit = std::to_string(options.command_timeout.count()) + " ms";
  drop_with([&](const redis_op& o) {
    const bool unknown = o.write && o.sent;
    return std::make_exception_ptr(dlq::timeout_error(
        msg(o.label() + ": no answer within " + limit +
                (&o == &front ? "" : " (another command on the connection timed out)"),
            unknown ? "the write was sent and may or may not have been applied (outcome "
                      "unknown); it was not retried — check the data before sending it again"
                    : "the server is frozen, overloaded or unreachable; check it or raise "
                      "ConnectionOptions::command_timeout"),
        unknown));
  });
}

}  // namespace dlq::asio::detail

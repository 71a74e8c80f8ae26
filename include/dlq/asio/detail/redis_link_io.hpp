// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/detail/redis_link_io.hpp
/// Internal to dlq::asio: how a dlq::asio::RedisConnection writes and reads — the flush
/// policy (a command with nothing else in flight written during the call, a burst coalesced
/// into one write), the read loop, and the replies parsed and completed in order. Part of
/// detail::redis_link (redis_link.hpp). Not part of the API.
#pragma once

#include <asio/buffer.hpp>
#include <asio/error.hpp>
#include <asio/post.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <system_error>
#include <utility>

#include "dlq/asio/detail/redis_link.hpp"
#include "dlq/asio/detail/resp.hpp"
#include "dlq/redis/error_mapping.hpp"

namespace dlq::asio::detail {

// `o` is formatted at the end of the output buffer.
inline void redis_link::send(redis_op&& o) {
  enqueue(std::move(o));
  arm_command_timer();
  schedule_flush();
}

inline void redis_link::enqueue(redis_op&& o) {
  o.sent = true;
  if (options.command_timeout.count() > 0)
    o.deadline = std::chrono::steady_clock::now() + options.command_timeout;
  inflight.push_back(std::move(o));
}

// The flush policy: a command issued while no other awaits its answer goes out at once
// (the server has nothing else to do; no loop turn is spent before it gets it — a send
// awaited one at a time, or the first of a burst after a quiet spell); while answers are
// awaited, commands are coalesced and go out at the end of the current handler (one
// posted flush: a burst in one write). While the stream does not take more (a write
// waits for it), everything joins the waiting output. Writing each chunk of a burst
// early (so that the server works while the client builds the rest) was measured and
// lost on this 2-core machine: more writes, and no idle core for the overlap.
inline void redis_link::schedule_flush() {
  if (write_waiting || !connected) return;
  if (inflight.size() == 1 && has_output()) {
    const std::uint64_t gen = generation;
    flush();
    if (generation != gen || write_waiting || !has_output()) return;
  }
  if (flush_posted) return;
  flush_posted = true;
  ::asio::post(executor, [self = shared_from_this(), gen = generation] {
    if (self->generation != gen) return;
    self->flush_posted = false;
    if (!self->write_waiting) self->flush();
  });
}

// Hands the output to the stream, as much as it takes without waiting; the rest is
// written asynchronously (write_async), and what is issued meanwhile waits in `out`.
inline void redis_link::flush() {
  for (;;) {
    if (writing_off == writing.size()) {
      if (out.empty()) break;
      writing.swap(out);
      out.clear();
      writing_off = 0;
    }
    std::error_code ec;
    const std::size_t n = stream->try_write_some(
        ::asio::buffer(writing.data() + writing_off, writing.size() - writing_off), ec);
    if (!ec) {
      writing_off += n;
      continue;
    }
    if (ec == ::asio::error::interrupted) continue;
    if (ec == ::asio::error::would_block || ec == ::asio::error::try_again) {
      write_async();
      start_read();
      return;
    }
    return lost(ec.message());
  }
  writing.clear();
  writing_off = 0;
  on_flushed();
  start_read();
}

// The stream takes no more now: the rest of `writing` goes out when it does (its bytes
// stay where they are meanwhile; new output is appended to `out`).
inline void redis_link::write_async() {
  write_waiting = true;
  stream->async_write_some(
      ::asio::buffer(writing.data() + writing_off, writing.size() - writing_off),
      [self = shared_from_this(), gen = generation](const std::error_code& ec, std::size_t n) {
        if (self->generation != gen) return;
        self->write_waiting = false;
        if (ec == ::asio::error::operation_aborted) return;
        if (ec) return self->lost(ec.message());
        self->writing_off += n;
        self->flush();
      });
}

// The output drained: every command issued so far is with the kernel, and its
// command_timeout (the handshake's connect_timeout) counts from now at the latest.
inline void redis_link::on_flushed() {
  const auto now = std::chrono::steady_clock::now();
  if (state == phase::connecting && options.connect_timeout.count() > 0)
    connect_deadline = std::max(connect_deadline, now + options.connect_timeout);
  for (std::size_t i = inflight.size(); i-- > 0;) {
    redis_op& o = inflight[i];
    if (o.written) break;
    o.written = true;
    if (options.command_timeout.count() > 0 && o.what == redis_op::kind::command)
      o.deadline = std::max(o.deadline, now + options.command_timeout);
  }
}

// Input is awaited only while answers are expected, so an idle connection holds no
// outstanding operation and io_context::run() can return.
inline void redis_link::start_read() {
  if (reading || !stream || !connected || inflight.empty()) return;
  reading = true;
  const ::asio::mutable_buffer room = input.prepare();
  stream->async_read_some(room, [self = shared_from_this(), gen = generation, seq = ++read_seq,
                                 room = room.size()](const std::error_code& ec, std::size_t n) {
    if (self->generation != gen || self->read_seq != seq) return;
    self->reading = false;
    self->on_read(ec, n, n == room);
  });
}

// Nothing in flight any more, but a read is still outstanding: the last answers were
// completed outside its handler (after a completion threw). It is cancelled, or
// io_context::run() would not return while the connection is idle.
inline void redis_link::stop_reading() {
  if (!reading || write_waiting || !stream || !inflight.empty()) return;
  reading = false;
  ++read_seq;
  stream->cancel();
}

// A read completed: the bytes it brought (and what else the stream holds) are parsed and
// their commands completed. When the stream ended (or failed) in the same pass, the
// replies that arrived before it complete first: a write whose answer came is not reported
// as outcome unknown.
inline void redis_link::on_read(const std::error_code& ec, std::size_t n, bool filled) {
  std::string down;
  if (ec == ::asio::error::operation_aborted) return;
  if (ec == ::asio::error::eof) {
    down = "Server closed the connection";
  } else if (ec) {
    down = ec.message();
  } else {
    input.commit(n);
    if (filled) drain(down);  // the room filled up: more may be waiting
  }
  const std::uint64_t gen = generation;
  process();
  if (!down.empty() && generation == gen) lost(down);
}

// Reads what else the stream holds without waiting, until a short read: bytes left in the
// socket would otherwise wait for another loop turn (the room grows each round).
inline void redis_link::drain(std::string& down) {
  for (;;) {
    const ::asio::mutable_buffer room = input.prepare();
    std::error_code ec;
    const std::size_t n = stream->try_read_some(room, ec);
    if (!ec) {
      input.commit(n);
      if (n < room.size()) return;
      continue;  // the buffer filled up: more may be waiting
    }
    if (ec == ::asio::error::interrupted) continue;
    if (ec == ::asio::error::would_block || ec == ::asio::error::try_again) return;
    down = ec == ::asio::error::eof ? std::string("Server closed the connection") : ec.message();
    return;
  }
}

// Completes the commands whose replies are in the input buffer, oldest first. A
// completion may issue commands, close the connection or drop the last handle to it.
inline void redis_link::process() {
  const auto self = shared_from_this();
  const std::uint64_t gen = generation;
  while (!inflight.empty()) {
    // A reply known to need more bytes than have arrived is not parsed again (a big
    // reply would otherwise be re-parsed, and its first items copied, per read).
    if (input.need > input.size()) break;
    RedisReply r;
    const parse_status s = parser.parse(input.data(), input.size(), r);
    if (s == parse_status::incomplete) {
      input.need = parser.need;
      break;
    }
    if (s == parse_status::bad) return lost("Protocol error: " + parser.why);
    input.consume(parser.used);
    input.need = 0;
    redis_op o = inflight.pop_front();
    if (o.what == redis_op::kind::command && inflight.empty() && command_timer_armed)
      command_timer.cancel();
    try {
      complete(o, std::move(r));
    } catch (...) {
      // A completion threw: it leaves run(); the replies still buffered are handled
      // on the executor's next turn.
      if (generation == gen)
        ::asio::post(executor, [self, gen] {
          if (self->generation != gen) return;
          self->process();
        });
      throw;
    }
    if (generation != gen) return;  // closed or dropped by the completion
  }
  if (inflight.empty()) return stop_reading();
  start_read();
}

inline void redis_link::complete(redis_op& o, RedisReply&& r) {
  std::exception_ptr e;
  if (o.what == redis_op::kind::cluster) return on_handshake(true, e, r);  // the reply as is
  if (r.type == reply_type::error && !o.raw_errors) {
    // The blocking paths' mapping (code, hints), with the async path's own word on a
    // cluster redirection.
    const std::string code = redis::detail::reply_code(r.str);
    const bool redirected = code == "MOVED" || code == "ASK";
    e = std::make_exception_ptr(redis::detail::reply_error_of(
        r.str, endpoint, o.label(), false,
        redirected ? "the server is a Redis Cluster node: a RedisConnection talks to one "
                     "node; dlq::asio::RedisListStorage routes by slot"
                   : ""));
    r = RedisReply{};
  }
  if (o.what != redis_op::kind::command)
    return on_handshake(o.what == redis_op::kind::cluster, e, r);
  if (o.post) return post_done(o, e, std::move(r));
  o.done(e, std::move(r));
}

}  // namespace dlq::asio::detail

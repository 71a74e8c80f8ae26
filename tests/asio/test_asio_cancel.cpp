// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// Per-operation cancellation on the async Redis path, on private redis-servers frozen with
// SIGSTOP so that the operations are in flight when the cancellation is emitted: terminal
// cancellation completes the handler at once with dlq::asio::cancelled_error (outcome
// unknown for a send, not for a read), once; the command itself goes on, so a cancelled
// send is stored once or not at all, never twice; a cancellation without the terminal bit
// is ignored; the losing side of an awaitable `||` with a timer (C++20).
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <chrono>
#include <cstddef>
#include <exception>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "dlq/asio.hpp"
#include "dlq/asio/redis.hpp"
#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"
#include "support/redis_process.hpp"

#if defined(ASIO_HAS_CO_AWAIT) && defined(__cpp_impl_coroutine)
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/use_awaitable.hpp>
#define DLQ_TEST_COROUTINES 1
#endif

namespace {

using Queue = dlq::asio::AsyncDeadLetterQueue<dlq::asio::RedisListStorage>;
using clock_type = std::chrono::steady_clock;

dlq::Failure failure() {
  dlq::Failure f;
  f.error = "e";
  return f;
}

dlq::redis::ConnectionOptions options(const dlq::test::RedisProcess& server) {
  auto opts = dlq::redis::parse_url(server.url());
  opts.command_timeout = std::chrono::seconds(20);  // far beyond every wait below
  return opts;
}

// What an error is: "cancelled+unknown", "cancelled", or its text.
std::string kind(const std::exception_ptr& e) {
  if (!e) return "ok";
  try {
    std::rethrow_exception(e);
  } catch (const dlq::asio::cancelled_error& c) {
    return c.outcome_unknown() ? "cancelled+unknown" : "cancelled";
  } catch (const std::exception& x) {
    return x.what();
  }
}

// Warms the connection up (so that later commands are written at once) and returns.
void warm_up(asio::io_context& io, Queue& q) {
  bool ok = false;
  q.async_size("warm", [&](std::exception_ptr e, std::size_t) { ok = !e; });
  io.run();
  io.restart();
  REQUIRE(ok);
}

}  // namespace

TEST_CASE(
    "terminal cancellation of a send in flight completes it at once, outcome unknown; "
    "the send is stored once when the server comes back, the handler not called again",
    "[asio][redis][cancel]") {
  dlq::test::RedisProcess server;
  asio::io_context io;
  Queue q(io.get_executor(), dlq::asio::RedisListStorage(io.get_executor(), options(server)));
  warm_up(io, q);

  server.freeze();
  asio::cancellation_signal signal;
  int calls = 0;
  std::string what;
  q.async_send_to_dlq(
      "c", "job-0", failure(),
      asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, std::string) {
        ++calls;
        what = kind(e);
      }));
  asio::steady_timer t(io);
  t.expires_after(std::chrono::milliseconds(100));
  t.async_wait([&](std::error_code) { signal.emit(asio::cancellation_type::terminal); });
  const auto start = clock_type::now();
  io.run_for(std::chrono::milliseconds(600));
  CHECK(calls == 1);
  CHECK(what == "cancelled+unknown");
  CHECK(clock_type::now() - start < std::chrono::seconds(5));

  // The command was written: after SIGCONT the server applies it, and its answer is dropped.
  server.thaw();
  io.restart();
  io.run();
  CHECK(calls == 1);
  dlq::test::RawClient raw(server.url());
  CHECK(raw.list(q.storage().key("c")).size() == 1);
  // The connection goes on.
  bool later = false;
  q.async_send_to_dlq("c", "job-1", failure(),
                      [&](std::exception_ptr e, std::string) { later = !e; });
  io.restart();
  io.run();
  CHECK(later);
}

TEST_CASE(
    "terminal cancellation of a read: cancelled_error that is not outcome unknown; a "
    "cancellation without the terminal bit is ignored",
    "[asio][redis][cancel]") {
  dlq::test::RedisProcess server;
  asio::io_context io;
  Queue q(io.get_executor(), dlq::asio::RedisListStorage(io.get_executor(), options(server)));
  warm_up(io, q);
  server.freeze();
  asio::cancellation_signal terminal, partial;
  std::vector<std::string> seen;
  q.async_size(
      "c", asio::bind_cancellation_slot(terminal.slot(), [&](std::exception_ptr e, std::size_t) {
        seen.push_back("size " + kind(e));
      }));
  q.async_peek("c", 0, 10,
               asio::bind_cancellation_slot(partial.slot(),
                                            [&](std::exception_ptr e, std::vector<dlq::Entry>) {
                                              seen.push_back("peek " + kind(e));
                                            }));
  asio::steady_timer t(io);
  t.expires_after(std::chrono::milliseconds(100));
  t.async_wait([&](std::error_code) {
    terminal.emit(asio::cancellation_type::terminal);
    partial.emit(asio::cancellation_type::partial | asio::cancellation_type::total);
  });
  io.run_for(std::chrono::milliseconds(600));
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == "size cancelled");
  server.thaw();
  io.restart();
  io.run();
  REQUIRE(seen.size() == 2);
  CHECK(seen[1] == "peek ok");  // the partial one ran to its end
}

TEST_CASE(
    "2000 sends in flight, every other one cancelled: each handler called once, none "
    "stored twice, every acknowledged one stored",
    "[asio][redis][cancel]") {
  dlq::test::RedisProcess server;
  asio::io_context io;
  Queue q(io.get_executor(), dlq::asio::RedisListStorage(io.get_executor(), options(server)));
  warm_up(io, q);
  constexpr std::size_t n = 2000;
  std::list<asio::cancellation_signal> signals;  // stable addresses
  std::vector<int> calls(n, 0);
  std::vector<std::string> kinds(n);
  server.freeze();
  for (std::size_t i = 0; i < n; ++i) {
    auto& s = signals.emplace_back();
    q.async_send_to_dlq(
        "many", "job-" + std::to_string(i), failure(),
        asio::bind_cancellation_slot(s.slot(), [&, i](std::exception_ptr e, std::string) {
          ++calls[i];
          kinds[i] = kind(e);
        }));
  }
  asio::steady_timer t(io);
  t.expires_after(std::chrono::milliseconds(100));
  // The server is thawed once the cancellations are emitted, by the same handler: a thaw on
  // a clock of its own raced the loop (starved past it under load, the loop found the
  // answers and the timer ready in one turn, and handled the answers first).
  t.async_wait([&](std::error_code) {
    std::size_t i = 0;
    for (auto& s : signals)
      if (i++ % 2 == 0) s.emit(asio::cancellation_type::terminal);
    server.thaw();
  });
  io.run();
  dlq::test::RawClient raw(server.url());
  const auto items = raw.list(q.storage().key("many"));
  std::vector<int> stored(n, 0);
  for (const auto& item : items) {
    const dlq::Entry e = dlq::parse_entry(item);
    REQUIRE(e.ok());
    ++stored[std::stoul(e.payload.substr(4))];
  }
  for (std::size_t i = 0; i < n; ++i) {
    INFO("send " << i << ": " << kinds[i]);
    REQUIRE(calls[i] == 1);
    REQUIRE(stored[i] <= 1);
    if (i % 2 == 0) {
      REQUIRE(kinds[i] == "cancelled+unknown");
    } else {
      REQUIRE(kinds[i] == "ok");
      REQUIRE(stored[i] == 1);
    }
  }
  CHECK(items.size() == n);  // the cancelled ones were written before the cancellation
}

#ifdef DLQ_TEST_COROUTINES
TEST_CASE(
    "the losing side of an awaitable || with a timer: a send to a frozen server gives "
    "up after the timer, the coroutine goes on",
    "[asio][redis][cancel]") {
  using namespace asio::experimental::awaitable_operators;
  dlq::test::RedisProcess server;
  asio::io_context io;
  Queue q(io.get_executor(), dlq::asio::RedisListStorage(io.get_executor(), options(server)));
  warm_up(io, q);
  server.freeze();
  std::string outcome;
  clock_type::duration took{};
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer limit(io, std::chrono::milliseconds(150));
        const auto start = clock_type::now();
        try {
          auto r = co_await(q.async_send_to_dlq("or", "job", failure(), asio::use_awaitable) ||
                            limit.async_wait(asio::use_awaitable));
          outcome = r.index() == 0 ? "sent" : "timer";
        } catch (const dlq::asio::cancelled_error& c) {
          outcome = std::string("cancelled ") + (c.outcome_unknown() ? "unknown" : "known");
        }
        took = clock_type::now() - start;
      },
      asio::detached);
  io.run_for(std::chrono::seconds(2));
  CHECK(outcome == "timer");
  CHECK(took < std::chrono::seconds(1));
  server.thaw();
  io.restart();
  io.run();
}

TEST_CASE("io_context destroyed under a pending || side: the coroutine frame is freed",
          "[asio][redis][cancel]") {
  using namespace asio::experimental::awaitable_operators;
  dlq::test::RedisProcess server;
  std::weak_ptr<int> frame_alive;
  bool finished = false;
  {
    asio::io_context io;
    auto q = std::make_unique<Queue>(
        io.get_executor(), dlq::asio::RedisListStorage(io.get_executor(), options(server)));
    warm_up(io, *q);
    server.freeze();
    auto sentinel = std::make_shared<int>(0);
    frame_alive = sentinel;
    asio::co_spawn(
        io,
        [&, sentinel = std::move(sentinel)]() mutable -> asio::awaitable<void> {
          auto held = std::move(sentinel);  // lives in the coroutine frame
          asio::steady_timer limit(io, std::chrono::seconds(30));
          co_await(q->async_size("c", asio::use_awaitable) ||
                   limit.async_wait(asio::use_awaitable));
          finished = true;
        },
        asio::detached);
    io.run_for(std::chrono::milliseconds(100));  // the LLEN written, the server frozen
    REQUIRE_FALSE(frame_alive.expired());
    q.reset();  // closed: the LLEN's completion is posted, and never run
  }             // the io_context destroyed: its pending handlers with it
  CHECK_FALSE(finished);
  CHECK(frame_alive.expired());  // a cycle through the slot would keep the frame (a leak)
  server.thaw();
}
#endif

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// dlq::asio::AsyncDeadLetterQueue over the in-memory storage: every completion token, errors
// through the token, completion on the executor (never inside the initiating call), the same
// envelope as the blocking front end.
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>

#include <atomic>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlq/asio.hpp"
#include "support/catch.hpp"

#if defined(ASIO_HAS_CO_AWAIT) && defined(__cpp_impl_coroutine)
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/use_awaitable.hpp>
#define DLQ_TEST_COROUTINES 1
#endif

namespace {

using Queue = dlq::asio::AsyncDeadLetterQueue<dlq::MemoryStorage>;

dlq::Failure failure(std::string error, std::int64_t attempt = 3) {
  dlq::Failure f;
  f.error = std::move(error);
  f.attempt = attempt;
  f.worker = "w1";
  return f;
}

}  // namespace

TEST_CASE("a callback completes on the executor, never inside the initiating call", "[asio]") {
  asio::io_context io;
  Queue q(io.get_executor());
  bool called = false;
  std::string id;
  q.async_send_to_dlq("orders", R"({"n":1})", failure("boom"),
                      [&](std::exception_ptr e, std::string got) {
                        REQUIRE_FALSE(e);
                        called = true;
                        id = std::move(got);
                      });
  CHECK_FALSE(called);
  io.run();
  REQUIRE(called);
  CHECK_FALSE(id.empty());
  // The same envelope as the blocking front end: the stored item reads back with every field.
  auto entry = q.storage().range("orders", dlq::ListKind::dead, 0, 10);
  REQUIRE(entry.size() == 1);
  const dlq::Entry e = dlq::parse_entry(entry.front());
  CHECK(e.ok());
  CHECK(e.id == id);
  CHECK(e.payload == R"({"n":1})");
  CHECK(e.error == "boom");
  CHECK(e.attempt == 3);
  CHECK(e.worker == "w1");
  CHECK(e.queue == "orders");
  CHECK(q.counters().sent == 1);
}

TEST_CASE("use_future: send, size, peek, get and the errors of the blocking API", "[asio]") {
  asio::io_context io;
  auto guard = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  {
    Queue q(io.get_executor());
    const std::string id =
        q.async_send_to_dlq("orders", "payload-1", "timeout", 2, "w2", asio::use_future).get();
    auto ids =
        q.async_send_batch({{"orders", "p2", failure("e2")}, {"billing", "p3", failure("e3")}},
                           asio::use_future)
            .get();
    REQUIRE(ids.size() == 2);
    CHECK(q.async_size("orders", asio::use_future).get() == 2);
    CHECK(q.async_size("billing", asio::use_future).get() == 1);
    auto page = q.async_peek("orders", 0, 10, asio::use_future).get();
    REQUIRE(page.size() == 2);
    CHECK(page[0].id == id);
    CHECK(page[0].payload == "payload-1");
    CHECK(page[1].id == ids[0]);
    auto got = q.async_get("orders", ids[0], asio::use_future).get();
    REQUIRE(got.has_value());
    CHECK(got->payload == "p2");
    CHECK_FALSE(q.async_get("orders", "no-such-id", asio::use_future).get().has_value());

    // Errors travel through the token, typed as in the blocking API.
    auto empty_queue = q.async_send_to_dlq("", "p", failure("e"), asio::use_future);
    CHECK_THROWS_AS(empty_queue.get(), dlq::invalid_argument);
    auto negative = q.async_send_to_dlq("orders", "p", failure("e", -1), asio::use_future);
    CHECK_THROWS_AS(negative.get(), dlq::invalid_argument);
    CHECK_THROWS_AS(q.async_size("", asio::use_future).get(), dlq::invalid_argument);
    CHECK(q.async_size("orders", asio::use_future).get() == 2);  // nothing stored by them
  }
  guard.reset();
  runner.join();
}

TEST_CASE("retention applies on the async path: reject refuses, evict_oldest evicts", "[asio]") {
  asio::io_context io;
  dlq::Options opts;
  opts.retention.max_length = 2;
  opts.retention.overflow = dlq::Overflow::reject;
  Queue q(io.get_executor(), dlq::MemoryStorage(), opts);
  std::vector<std::exception_ptr> errors;
  for (int i = 0; i < 3; ++i)
    q.async_send_to_dlq("q", "p" + std::to_string(i), failure("e"),
                        [&](std::exception_ptr e, std::string) { errors.push_back(e); });
  io.run();
  REQUIRE(errors.size() == 3);
  CHECK_FALSE(errors[0]);
  CHECK_FALSE(errors[1]);
  REQUIRE(errors[2]);
  CHECK_THROWS_AS(std::rethrow_exception(errors[2]), dlq::queue_full_error);
  CHECK(q.storage().size("q", dlq::ListKind::dead) == 2);
}

#ifdef DLQ_TEST_COROUTINES
TEST_CASE("use_awaitable: a coroutine worker dead-letters and reads back", "[asio]") {
  asio::io_context io;
  Queue q(io.get_executor());
  std::string id;
  std::size_t size = 0;
  bool refused = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        id = co_await q.async_send_to_dlq("orders", "job-1", failure("boom"), asio::use_awaitable);
        size = co_await q.async_size("orders", asio::use_awaitable);
        try {
          co_await q.async_send_to_dlq("", "x", failure("e"), asio::use_awaitable);
        } catch (const dlq::invalid_argument&) {
          refused = true;
        }
      },
      asio::detached);
  io.run();
  CHECK_FALSE(id.empty());
  CHECK(size == 1);
  CHECK(refused);
}
#endif

TEST_CASE(
    "sends from four threads while two threads run the io_context: each completes once, "
    "every id distinct, all stored (TSan)",
    "[asio][threads]") {
  asio::io_context io;
  auto guard = asio::make_work_guard(io);
  std::thread run1([&] { io.run(); });
  std::thread run2([&] { io.run(); });
  Queue q(io.get_executor());
  constexpr int producers = 4, per = 500;
  std::vector<std::atomic<int>> calls(producers * per);
  std::mutex m;
  std::set<std::string> ids;
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p)
    threads.emplace_back([&, p] {
      for (int j = 0; j < per; ++j) {
        const int i = p * per + j;
        q.async_send_to_dlq("mt", "job", failure("e"),
                            [&, i](std::exception_ptr e, std::string id) {
                              CHECK_FALSE(e);
                              calls[std::size_t(i)].fetch_add(1);
                              {
                                std::lock_guard<std::mutex> lock(m);
                                ids.insert(std::move(id));
                              }
                              done.fetch_add(1);
                            });
      }
    });
  for (auto& t : threads)
    t.join();
  guard.reset();
  run1.join();
  run2.join();
  CHECK(done.load() == producers * per);
  for (auto& c : calls)
    CHECK(c.load() == 1);
  CHECK(ids.size() == std::size_t(producers * per));
  CHECK(q.storage().size("mt", dlq::ListKind::dead) == std::size_t(producers * per));
  CHECK(q.counters().sent == std::uint64_t(producers * per));
}

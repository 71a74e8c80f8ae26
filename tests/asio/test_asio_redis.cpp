// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// dlq::asio on the shared Redis server (fixture `redis`): the contract's send/peek/size/get
// cases through the async API on memory and Redis; 10k sends in flight from one thread (none
// lost or doubled, stored in initiation order); retention through the same scripts; closing
// the queue with operations in flight; the blocking front end reads what the async one wrote.
#include <asio/bind_executor.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>
#include <asio/use_future.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlq/asio.hpp"
#include "dlq/asio/redis.hpp"
#include "dlq/dead_letter_queue.hpp"
#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"

#if defined(ASIO_HAS_CO_AWAIT) && defined(__cpp_impl_coroutine)
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/use_awaitable.hpp>
#define DLQ_TEST_COROUTINES 1
#endif

namespace test_asio_redis {

namespace {

dlq::Failure failure(std::string error, std::int64_t attempt = 1) {
  dlq::Failure f;
  f.error = std::move(error);
  f.attempt = attempt;
  f.worker = "aw";
  return f;
}

// The two storages of the async front end, built on an io_context.
struct MemoryFixture {
  using storage = dlq::MemoryStorage;
  static storage make(asio::io_context&, const dlq::RedisListOptions&) { return storage(); }
};
struct RedisFixture {
  using storage = dlq::asio::RedisListStorage;
  static storage make(asio::io_context& io, const dlq::RedisListOptions& layout) {
    return storage(io.get_executor(), dlq::test::shared_redis_url(), layout);
  }
};

// Runs `f(queue)` with the io_context on a thread of its own, so use_future can wait.
template <class Fixture, class F>
void with_queue(F&& f, dlq::Options options = {}) {
  asio::io_context io;
  auto guard = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  auto q = std::make_unique<dlq::asio::AsyncDeadLetterQueue<typename Fixture::storage>>(
      io.get_executor(), Fixture::make(io, dlq::test::unique_layout()), std::move(options));
  f(*q);
  asio::post(io, [&q] { q.reset(); });  // destroyed on the executor's thread
  guard.reset();
  runner.join();
}

}  // namespace

TEMPLATE_TEST_CASE("async contract: send then peek returns the entry with its metadata",
                   "[asio][contract]", MemoryFixture, RedisFixture) {
  with_queue<TestType>([](auto& q) {
    dlq::Failure f = failure("payment timeout", 3);
    f.job_id = "job-17";
    f.context = {{"order", 17}};
    const std::string id =
        q.async_send_to_dlq("orders", R"({"order":17})", f, asio::use_future).get();
    auto page = q.async_peek("orders", 0, 10, asio::use_future).get();
    REQUIRE(page.size() == 1);
    const dlq::Entry& e = page.front();
    CHECK(e.ok());
    CHECK(e.id == id);
    CHECK(e.payload == R"({"order":17})");
    CHECK(e.queue == "orders");
    CHECK(e.error == "payment timeout");
    CHECK(e.attempt == 3);
    CHECK(e.worker == "aw");
    CHECK(e.job_id == "job-17");
    CHECK(e.context == nlohmann::json{{"order", 17}});
  });
}

TEMPLATE_TEST_CASE("async contract: size counts, peek pages oldest first, get finds by id",
                   "[asio][contract]", MemoryFixture, RedisFixture) {
  with_queue<TestType>([](auto& q) {
    CHECK(q.async_size("orders", asio::use_future).get() == 0);
    CHECK(q.async_peek("orders", 0, 10, asio::use_future).get().empty());
    std::vector<std::string> ids;
    for (int i = 0; i < 5; ++i)
      ids.push_back(
          q.async_send_to_dlq("orders", "p" + std::to_string(i), failure("e"), asio::use_future)
              .get());
    auto more = q.async_send_batch({{"orders", "p5", failure("e")}, {"other", "x", failure("e")}},
                                   asio::use_future)
                    .get();
    ids.push_back(more[0]);
    CHECK(q.async_size("orders", asio::use_future).get() == 6);
    CHECK(q.async_size("other", asio::use_future).get() == 1);
    auto page = q.async_peek("orders", 2, 3, asio::use_future).get();
    REQUIRE(page.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(page[i].id == ids[i + 2]);
      CHECK(page[i].payload == "p" + std::to_string(i + 2));
    }
    auto got = q.async_get("orders", ids[4], asio::use_future).get();
    REQUIRE(got.has_value());
    CHECK(got->payload == "p4");
    CHECK_FALSE(q.async_get("orders", "0190-none", asio::use_future).get().has_value());
    CHECK_FALSE(q.async_get("empty", ids[4], asio::use_future).get().has_value());
  });
}

TEMPLATE_TEST_CASE("async contract: bad input is refused with a typed error, nothing stored",
                   "[asio][contract]", MemoryFixture, RedisFixture) {
  dlq::Options o;
  o.payloads = dlq::Payloads::json_only;
  with_queue<TestType>(
      [](auto& q) {
        CHECK_THROWS_AS(q.async_send_to_dlq("", "{}", failure("e"), asio::use_future).get(),
                        dlq::invalid_argument);
        CHECK_THROWS_AS(q.async_send_to_dlq("orders", std::string("\xff\x00", 2), failure("e"),
                                            asio::use_future)
                            .get(),
                        dlq::invalid_argument);
        CHECK_THROWS_AS(q.async_peek("", 0, 1, asio::use_future).get(), dlq::invalid_argument);
        CHECK(q.async_size("orders", asio::use_future).get() == 0);
      },
      o);
}

TEST_CASE("the blocking front end reads what the async one stored (same keys, same bytes)",
          "[asio][redis]") {
  const auto layout = dlq::test::unique_layout();
  asio::io_context io;
  dlq::asio::AsyncDeadLetterQueue<dlq::asio::RedisListStorage> q(
      io.get_executor(),
      dlq::asio::RedisListStorage(io.get_executor(), dlq::test::shared_redis_url(), layout));
  std::string id;
  q.async_send_to_dlq("orders", "bytes\x01", failure("boom", 4),
                      [&](std::exception_ptr e, std::string got) {
                        REQUIRE_FALSE(e);
                        id = std::move(got);
                      });
  io.run();
  dlq::DeadLetterQueue<dlq::RedisListStorage> blocking(
      dlq::RedisListStorage(dlq::test::shared_redis_url(), layout));
  auto entry = blocking.get("orders", id);
  REQUIRE(entry.has_value());
  CHECK(entry->payload == "bytes\x01");
  CHECK(entry->attempt == 4);
  CHECK(blocking.replay_all("orders").replayed == 1);  // operators use the blocking API
  CHECK(blocking.size("orders") == 0);
}

TEST_CASE(
    "10k concurrent async sends from one thread: all complete, none lost or doubled, "
    "stored in initiation order",
    "[asio][redis]") {
  const auto layout = dlq::test::unique_layout();
  asio::io_context io;
  dlq::asio::AsyncDeadLetterQueue<dlq::asio::RedisListStorage> q(
      io.get_executor(),
      dlq::asio::RedisListStorage(io.get_executor(), dlq::test::shared_redis_url(), layout));
  constexpr std::size_t n = 10000;
  std::vector<std::string> ids(n);
  std::size_t completed = 0, failed = 0;
  for (std::size_t i = 0; i < n; ++i) {
    q.async_send_to_dlq("bulk", "job-" + std::to_string(i), failure("e"),
                        [&, i](std::exception_ptr e, std::string id) {
                          ++completed;
                          if (e) ++failed;
                          ids[i] = std::move(id);
                        });
  }
  CHECK(completed == 0);  // completions never run inside the initiating call
  io.run();
  CHECK(completed == n);
  CHECK(failed == 0);
  CHECK(std::set<std::string>(ids.begin(), ids.end()).size() == n);
  dlq::test::RawClient raw(dlq::test::shared_redis_url());
  const auto items = raw.list(q.storage().key("bulk"));
  REQUIRE(items.size() == n);
  for (std::size_t i = 0; i < n; ++i) {
    const dlq::Entry e = dlq::parse_entry(items[i]);
    REQUIRE(e.id == ids[i]);  // stored once each, in the order the sends were initiated
    REQUIRE(e.payload == "job-" + std::to_string(i));
  }
  CHECK(q.counters().sent == n);
}

TEST_CASE(
    "the flush policy: a send with nothing in flight is written during the call, later ones "
    "join the end of the handler's turn; a burst larger than the socket takes completes",
    "[asio][redis]") {
  const auto layout = dlq::test::unique_layout();
  asio::io_context io;
  dlq::asio::AsyncDeadLetterQueue<dlq::asio::RedisListStorage> q(
      io.get_executor(),
      dlq::asio::RedisListStorage(io.get_executor(), dlq::test::shared_redis_url(), layout));
  dlq::test::RawClient raw(dlq::test::shared_redis_url());
  const std::string key = q.storage().key("flush");
  q.async_size("flush", [](std::exception_ptr, std::size_t) {});  // connected first
  io.run();
  io.restart();
  const auto stored_within = [&](std::size_t n, std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (raw.list(key).size() < n && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return raw.list(key).size();
  };
  int completed = 0;
  const auto count = [&](std::exception_ptr e, std::string) {
    CHECK_FALSE(e);
    ++completed;
  };
  asio::post(io, [&] {
    q.async_send_to_dlq("flush", "first", failure("e"), count);
    // Nothing else in flight: written during the call, stored while this handler runs.
    CHECK(stored_within(1, std::chrono::milliseconds(2000)) == 1);
    // The first one's answer is unread: these wait for the end of this handler.
    for (int i = 0; i < 3; ++i)
      q.async_send_to_dlq("flush", "then", failure("e"), count);
    CHECK(stored_within(4, std::chrono::milliseconds(100)) == 1);
  });
  io.run();
  io.restart();
  CHECK(completed == 4);
  CHECK(raw.list(key).size() == 4);
  // 48 envelopes of ~350 KB from one handler: the socket takes them in pieces (partial
  // send()s, waits for writability) while the answers of the first ones come back.
  constexpr int n = 48;
  std::vector<std::string> ids(n);
  asio::post(io, [&] {
    for (int i = 0; i < n; ++i)
      q.async_send_to_dlq("flush", std::string(256 * 1024, static_cast<char>('a' + i % 26)),
                          failure("big"), [&, i](std::exception_ptr e, std::string id) {
                            CHECK_FALSE(e);
                            ++completed;
                            ids[std::size_t(i)] = std::move(id);
                          });
  });
  io.run();
  CHECK(completed == 4 + n);
  const auto items = raw.list(key);
  REQUIRE(items.size() == std::size_t(4 + n));
  for (int i = 0; i < n; ++i) {
    const dlq::Entry e = dlq::parse_entry(items[std::size_t(4 + i)]);
    CHECK(e.id == ids[std::size_t(i)]);
    CHECK(e.payload == std::string(256 * 1024, static_cast<char>('a' + i % 26)));
  }
}

TEST_CASE("a send's handler runs on its associated executor (a strand), else on the queue's",
          "[asio][redis]") {
  const auto layout = dlq::test::unique_layout();
  asio::io_context io;
  dlq::asio::AsyncDeadLetterQueue<dlq::asio::RedisListStorage> q(
      io.get_executor(),
      dlq::asio::RedisListStorage(io.get_executor(), dlq::test::shared_redis_url(), layout));
  auto strand = asio::make_strand(io);
  int on_strand = 0, plain = 0;
  for (int i = 0; i < 50; ++i) {
    q.async_send_to_dlq("exec", "p", failure("e"),
                        asio::bind_executor(strand, [&](std::exception_ptr e, std::string) {
                          CHECK_FALSE(e);
                          if (strand.running_in_this_thread()) ++on_strand;
                        }));
    q.async_send_to_dlq("exec", "p", failure("e"), [&](std::exception_ptr e, std::string) {
      CHECK_FALSE(e);
      ++plain;
    });
  }
  io.run();
  CHECK(on_strand == 50);
  CHECK(plain == 50);
}

TEST_CASE("retention on the async Redis path uses the blocking path's scripts", "[asio][redis]") {
  SECTION("Overflow::reject refuses the entry that does not fit, a batch all or nothing") {
    dlq::Options o;
    o.retention.max_length = 3;
    o.retention.overflow = dlq::Overflow::reject;
    with_queue<RedisFixture>(
        [](auto& q) {
          for (int i = 0; i < 2; ++i)
            q.async_send_to_dlq("r", "p", failure("e"), asio::use_future).get();
          CHECK_THROWS_AS(q.async_send_batch({{"r", "a", failure("e")}, {"r", "b", failure("e")}},
                                             asio::use_future)
                              .get(),
                          dlq::queue_full_error);
          CHECK(q.async_size("r", asio::use_future).get() == 2);
          q.async_send_to_dlq("r", "p", failure("e"), asio::use_future).get();
          CHECK_THROWS_AS(q.async_send_to_dlq("r", "p", failure("e"), asio::use_future).get(),
                          dlq::queue_full_error);
          CHECK(q.async_size("r", asio::use_future).get() == 3);
          CHECK(q.counters().rejected == 2);
          // A batch over several queues under reject is refused before anything is sent.
          CHECK_THROWS_AS(q.async_send_batch({{"r2", "a", failure("e")}, {"r3", "b", failure("e")}},
                                             asio::use_future)
                              .get(),
                          dlq::invalid_argument);
          CHECK(q.async_size("r2", asio::use_future).get() == 0);
        },
        o);
  }
  SECTION("Overflow::evict_oldest evicts the oldest in the same script and reports them") {
    dlq::Options o;
    o.retention.max_length = 2;
    o.retention.overflow = dlq::Overflow::evict_oldest;
    with_queue<RedisFixture>(
        [](auto& q) {
          std::vector<std::string> ids;
          for (int i = 0; i < 4; ++i)
            ids.push_back(
                q.async_send_to_dlq("c", "p" + std::to_string(i), failure("e"), asio::use_future)
                    .get());
          auto page = q.async_peek("c", 0, 10, asio::use_future).get();
          REQUIRE(page.size() == 2);
          CHECK(page[0].id == ids[2]);
          CHECK(page[1].id == ids[3]);
          CHECK(q.counters().evicted == 2);
        },
        o);
  }
}

TEST_CASE(
    "closing the queue with sends in flight: each completes with its id or a clear "
    "error, nothing is stored twice",
    "[asio][redis]") {
  const auto layout = dlq::test::unique_layout();
  // A generous command timeout: this test is about closing, not about timeouts (32 MB are
  // in flight, slow under sanitizers).
  auto patient = dlq::redis::parse_url(dlq::test::shared_redis_url());
  patient.command_timeout = std::chrono::seconds(60);
  patient.connect_timeout = std::chrono::seconds(60);  // the loop is busy building 4000 sends
  asio::io_context io;
  dlq::asio::AsyncDeadLetterQueue<dlq::asio::RedisListStorage> q(
      io.get_executor(), dlq::asio::RedisListStorage(io.get_executor(), patient, layout));
  std::string other_error;
  // Big payloads, so the answers come back over many reads while the queue is closed.
  constexpr std::size_t n = 4000;
  const std::string pad(8192, 'x');
  std::vector<std::string> acked;
  std::size_t completed = 0, closed_errors = 0, other_errors = 0, unknown = 0;
  for (std::size_t i = 0; i < n; ++i) {
    q.async_send_to_dlq("closing", "job-" + std::to_string(i) + pad, failure("e"),
                        [&](std::exception_ptr e, std::string id) {
                          ++completed;
                          if (!e) {
                            acked.push_back(std::move(id));
                            if (acked.size() == 1) q.close();  // mid-stream
                            return;
                          }
                          try {
                            std::rethrow_exception(e);
                          } catch (const dlq::connection_error& c) {
                            ++closed_errors;
                            if (c.outcome_unknown()) ++unknown;
                            CHECK(std::string(c.what()).find("closed") != std::string::npos);
                          } catch (...) {
                            ++other_errors;
                            try {
                              std::rethrow_exception(e);
                            } catch (const std::exception& x) {
                              other_error = x.what();
                            }
                          }
                        });
  }
  io.run();
  CHECK(completed == n);
  INFO(other_error);
  CHECK(other_errors == 0);
  CHECK(acked.size() >= 1);
  CHECK(closed_errors > 0);
  CHECK(acked.size() + closed_errors == n);
  // Every acknowledged send is stored exactly once; nothing is stored twice.
  dlq::test::RawClient raw(dlq::test::shared_redis_url());
  const auto items = raw.list(q.storage().key("closing"));
  std::multiset<std::string> stored;
  for (const auto& item : items)
    stored.insert(dlq::parse_entry(item).id);
  CHECK(std::set<std::string>(stored.begin(), stored.end()).size() == stored.size());
  for (const auto& id : acked)
    CHECK(stored.count(id) == 1);
  CHECK(items.size() <= acked.size() + unknown);  // the rest were refused before being sent
  // After close, new operations complete with the same clear error.
  bool refused = false;
  q.async_size("closing", [&](std::exception_ptr e, std::size_t) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const dlq::connection_error&) {
      refused = true;
    } catch (...) {
    }
  });
  io.restart();
  io.run();
  CHECK(refused);
}

#ifdef DLQ_TEST_COROUTINES
TEST_CASE("use_awaitable on Redis: a coroutine sends and reads back", "[asio][redis]") {
  asio::io_context io;
  dlq::asio::AsyncDeadLetterQueue<dlq::asio::RedisListStorage> q(
      io.get_executor(),
      dlq::asio::RedisListStorage(io.get_executor(), dlq::test::shared_redis_url(),
                                  dlq::test::unique_layout()));
  std::size_t size = 0;
  std::optional<dlq::Entry> got;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        const std::string id =
            co_await q.async_send_to_dlq("co", "job", failure("e"), asio::use_awaitable);
        size = co_await q.async_size("co", asio::use_awaitable);
        got = co_await q.async_get("co", id, asio::use_awaitable);
      },
      asio::detached);
  io.run();
  CHECK(size == 1);
  REQUIRE(got.has_value());
  CHECK(got->payload == "job");
}
#endif

}  // namespace test_asio_redis

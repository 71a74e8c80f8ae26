// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// dlq::asio on the shared Redis server (fixture `redis`), at the edges of the contract:
// hostile stored items (not JSON, no id, escaped ids, NUL bytes, deep nesting, huge),
// extreme peek arguments, error replies (WRONGTYPE), and the queue's life cycle seen from
// completion handlers (one that throws, starts another operation, closes or destroys the
// queue). Each async answer is compared with the blocking front end's on the same keys.
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>
#include <asio/use_future.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dlq/asio.hpp"
#include "dlq/asio/redis.hpp"
#include "dlq/dead_letter_queue.hpp"
#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"

namespace test_asio_redis_edges {

namespace {

using Queue = dlq::asio::AsyncDeadLetterQueue<dlq::asio::RedisListStorage>;
using Blocking = dlq::DeadLetterQueue<dlq::RedisListStorage>;

dlq::Failure failure(std::string error = "e") {
  dlq::Failure f;
  f.error = std::move(error);
  return f;
}

// An async queue on its own io_context run by a thread of its own (so use_future can wait),
// and a blocking queue on the same keys.
struct Rig {
  dlq::RedisListOptions layout = dlq::test::unique_layout();
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> guard = asio::make_work_guard(io);
  std::thread runner{[this] { io.run(); }};
  std::unique_ptr<Queue> q = std::make_unique<Queue>(
      io.get_executor(),
      dlq::asio::RedisListStorage(io.get_executor(), dlq::test::shared_redis_url(), layout));
  Blocking blocking{dlq::RedisListStorage(dlq::test::shared_redis_url(), layout)};
  dlq::test::RawClient raw{dlq::test::shared_redis_url()};

  Rig() = default;
  Rig(const Rig&) = delete;
  Rig& operator=(const Rig&) = delete;
  ~Rig() {
    asio::post(io, [this] { q.reset(); });  // destroyed on the executor's thread
    guard.reset();
    runner.join();
  }
  std::string key(const std::string& queue) const { return q->storage().key(queue); }
};

}  // namespace

TEST_CASE("async_get finds every entry async_peek lists, as the blocking get does",
          "[asio][redis][edges]") {
  Rig rig;
  const std::string id = rig.q->async_send_to_dlq("h", "fine", failure(), asio::use_future).get();
  const std::string escaped_id = "weird/id-" + dlq::test::new_id();
  rig.raw.rpush(rig.key("h"),
                {
                    "not json at all",                           // unreadable: derived id
                    R"({"payload":"no id field","error":"x"})",  // JSON without an id: derived
                    // A stored id with a JSON escape: its bytes differ from the id.
                    R"({"id":"weird\/id-)" + escaped_id.substr(9) + R"(","payload":"p"})",
                    std::string("nul\0byte", 8),  // NUL bytes: derived id
                });
  const auto page = rig.q->async_peek("h", 0, 100, asio::use_future).get();
  REQUIRE(page.size() == 5);
  CHECK(page[0].id == id);
  CHECK(page[3].id == escaped_id);
  for (const dlq::Entry& listed : page) {
    INFO("id " << listed.id);
    const auto blocking = rig.blocking.get("h", listed.id);
    REQUIRE(blocking.has_value());  // the blocking front end finds each one
    const auto async = rig.q->async_get("h", listed.id, asio::use_future).get();
    CHECK(async.has_value());
    if (async) CHECK(async->raw == listed.raw);
  }
}

TEST_CASE("async_peek with extreme start and count answers as the blocking peek",
          "[asio][redis][edges]") {
  Rig rig;
  for (int i = 0; i < 5; ++i)
    rig.q->async_send_to_dlq("x", "p" + std::to_string(i), failure(), asio::use_future).get();
  constexpr std::size_t all = std::numeric_limits<std::size_t>::max();
  const std::size_t huge = static_cast<std::size_t>(std::numeric_limits<long long>::max()) + 7;
  struct Case {
    std::size_t start, count, expected;
  };
  for (const Case c : {Case{0, all, 5}, Case{2, all, 3}, Case{4, all - 3, 1}, Case{all, 10, 0},
                       Case{huge, 10, 0}, Case{1, huge, 4}}) {
    INFO("start " << c.start << " count " << c.count);
    CHECK(rig.blocking.peek("x", c.start, c.count).size() == c.expected);
    std::vector<dlq::Entry> got;
    CHECK_NOTHROW(got = rig.q->async_peek("x", c.start, c.count, asio::use_future).get());
    CHECK(got.size() == c.expected);
  }
}

TEST_CASE("hostile stored items: deep nesting, NUL bytes, huge items read back, nothing thrown",
          "[asio][redis][edges]") {
  Rig rig;
  const std::string deep(200000, '[');
  const std::string deep_context =
      R"({"id":")" + dlq::test::new_id() + R"(","payload":"p","context":{"a":)" + deep + "}";
  rig.raw.rpush(rig.key("bad"), {deep, deep_context, std::string("\0\0\0", 3)});
  const std::string huge(8 << 20, 'h');
  rig.q->async_send_to_dlq("bad", huge, failure(), asio::use_future).get();
  rig.raw.rpush(rig.key("bad"), {"{"});
  std::vector<dlq::Entry> page;
  REQUIRE_NOTHROW(page = rig.q->async_peek("bad", 0, 10, asio::use_future).get());
  REQUIRE(page.size() == 5);
  CHECK_FALSE(page[0].ok());
  CHECK(page[2].raw == std::string("\0\0\0", 3));
  CHECK(page[3].payload == huge);
  CHECK_FALSE(page[4].ok());
  for (const auto& e : page) {
    const auto got = rig.q->async_get("bad", e.id, asio::use_future).get();
    REQUIRE(got.has_value());
    CHECK(got->raw == e.raw);
  }
  CHECK(rig.q->async_size("bad", asio::use_future).get() == 5);
}

TEST_CASE(
    "a key of another type (WRONGTYPE): typed errors, nothing unknown, the connection goes on",
    "[asio][redis][edges]") {
  Rig rig;
  rig.raw.cmd({"SET", rig.key("typed"), "a string"});
  // The error is read in the handler, on the loop's thread (a use_future exception read on
  // this thread and freed on the loop's is a ThreadSanitizer false positive: libstdc++'s
  // exception_ptr count is not instrumented).
  struct Seen {
    bool reply_error = false, unknown = true;
    std::string code;
  };
  auto seen = [](auto start) {
    std::promise<Seen> p;
    start([&p](std::exception_ptr e, auto&&) {
      Seen s;
      try {
        if (e) std::rethrow_exception(e);
      } catch (const dlq::reply_error& r) {
        s.reply_error = true;
        s.code = r.code();
        s.unknown = r.outcome_unknown();
      } catch (...) {  // NOLINT(bugprone-empty-catch): reported as not a reply_error
      }
      p.set_value(s);
    });
    return p.get_future().get();
  };
  auto& q = *rig.q;
  for (const Seen& s : {
           seen([&](auto h) { q.async_send_to_dlq("typed", "p", failure(), h); }),
           seen([&](auto h) {
             q.async_send_batch({{"typed", "a", failure()}}, h);
           }),
           seen([&](auto h) { q.async_size("typed", h); }),
           seen([&](auto h) { q.async_peek("typed", 0, 10, h); }),
           seen([&](auto h) { q.async_get("typed", "x", h); }),
       }) {
    CHECK(s.reply_error);
    CHECK(s.code == "WRONGTYPE");
    CHECK_FALSE(s.unknown);
  }
  CHECK(rig.q->counters().sent == 0);
  // The same connection serves the next queue.
  const std::string id = rig.q->async_send_to_dlq("fine", "p", failure(), asio::use_future).get();
  CHECK(rig.blocking.get("fine", id).has_value());
}

TEST_CASE("completion handlers that start sends, throw, close or destroy the queue",
          "[asio][redis][edges]") {
  const auto layout = dlq::test::unique_layout();
  const std::string url = dlq::test::shared_redis_url();
  dlq::test::RawClient raw(url);
  asio::io_context io;
  auto q = std::make_unique<Queue>(io.get_executor(),
                                   dlq::asio::RedisListStorage(io.get_executor(), url, layout));
  const std::string key = q->storage().key("life");

  SECTION("a chain: each handler starts the next send; stored in that order") {
    constexpr int n = 300;
    int done = 0;
    std::function<void(int)> next = [&](int i) {
      q->async_send_to_dlq("life", "job-" + std::to_string(i), failure(),
                           [&, i](std::exception_ptr e, std::string) {
                             REQUIRE_FALSE(e);
                             ++done;
                             if (i + 1 < n) next(i + 1);
                           });
    };
    next(0);
    io.run();
    CHECK(done == n);
    const auto items = raw.list(key);
    REQUIRE(items.size() == std::size_t(n));
    for (int i = 0; i < n; ++i)
      CHECK(dlq::parse_entry(items[std::size_t(i)]).payload == "job-" + std::to_string(i));
  }
  SECTION("a handler that throws: the exception leaves run(); the other handlers still run") {
    constexpr int n = 200;
    std::vector<int> calls(n, 0);
    for (int i = 0; i < n; ++i)
      q->async_send_to_dlq("life", "job", failure(), [&, i](std::exception_ptr e, std::string) {
        REQUIRE_FALSE(e);
        ++calls[std::size_t(i)];
        if (i % 50 == 7) throw std::runtime_error("handler failed");
      });
    int thrown = 0;
    for (;;) {
      try {
        io.run();
        break;
      } catch (const std::runtime_error&) {
        ++thrown;
        io.restart();
      }
    }
    CHECK(thrown == 4);
    for (int c : calls)
      CHECK(c == 1);
    CHECK(raw.list(key).size() == std::size_t(n));
  }
  SECTION("a handler that closes the queue, twice, then sends again") {
    constexpr int n = 2000;
    std::vector<int> calls(n, 0);
    int closed = 0, acked = 0;
    for (int i = 0; i < n; ++i)
      q->async_send_to_dlq("life", "job", failure(), [&, i](std::exception_ptr e, std::string) {
        ++calls[std::size_t(i)];
        if (e) {
          ++closed;
          CHECK_THROWS_AS(std::rethrow_exception(e), dlq::connection_error);
          return;
        }
        if (++acked == 1) {
          q->close();
          q->close();
        }
      });
    io.run();
    for (int c : calls)
      REQUIRE(c == 1);
    CHECK(acked + closed == n);
    CHECK(raw.list(key).size() >= std::size_t(acked));
    std::exception_ptr after;
    q->async_send_to_dlq("life", "late", failure(),
                         [&](std::exception_ptr e, std::string) { after = e; });
    io.restart();
    io.run();
    REQUIRE(after);
    CHECK_THROWS_AS(std::rethrow_exception(after), dlq::connection_error);
  }
  SECTION("a handler that runs the loop itself (nested poll) until its own sends complete") {
    constexpr int n = 1000, extra = 500;
    std::vector<int> calls(n + extra, 0);
    int extra_done = 0;
    for (int i = 0; i < n; ++i)
      q->async_send_to_dlq(
          "life", "job-" + std::to_string(i), failure(), [&, i](std::exception_ptr e, std::string) {
            REQUIRE_FALSE(e);
            ++calls[std::size_t(i)];
            if (i != 0) return;
            for (int j = 0; j < extra; ++j)
              q->async_send_to_dlq("life", "extra", failure(),
                                   [&, j](std::exception_ptr e2, std::string) {
                                     REQUIRE_FALSE(e2);
                                     ++calls[std::size_t(n + j)];
                                     ++extra_done;
                                   });
            const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
            while (extra_done < extra && std::chrono::steady_clock::now() < until)
              io.run_one_for(std::chrono::milliseconds(100));
          });
    io.run();
    for (int c : calls)
      REQUIRE(c == 1);
    const auto items = raw.list(key);
    REQUIRE(items.size() == std::size_t(n + extra));
    int next = 0;  // the first n in order among the items
    for (const auto& item : items) {
      const std::string payload = dlq::parse_entry(item).payload;
      if (payload != "extra") CHECK(payload == "job-" + std::to_string(next++));
    }
    CHECK(next == n);
  }
  SECTION("a handler that destroys the queue with sends in flight") {
    constexpr int n = 2000;
    std::vector<int> calls(n, 0);
    int acked = 0, failed = 0;
    for (int i = 0; i < n; ++i)
      q->async_send_to_dlq("life", "job", failure(), [&, i](std::exception_ptr e, std::string) {
        ++calls[std::size_t(i)];
        if (e) {
          ++failed;
          CHECK_THROWS_AS(std::rethrow_exception(e), dlq::connection_error);
          return;
        }
        if (++acked == 1) q.reset();
      });
    io.run();
    for (int c : calls)
      REQUIRE(c == 1);
    CHECK(acked + failed == n);
    CHECK(raw.list(key).size() >= std::size_t(acked));
  }
  if (q) {
    q.reset();
    io.restart();
    io.run();
  }
}

TEST_CASE(
    "a strand over an io_context run by two threads: sends from two threads, close from a "
    "third; each completes once, each thread's sends stored in its order",
    "[asio][redis][edges][threads]") {
  const auto layout = dlq::test::unique_layout();
  const std::string url = dlq::test::shared_redis_url();
  auto opts = dlq::redis::parse_url(url);
  opts.connect_timeout = std::chrono::seconds(30);  // TSan is slow
  opts.command_timeout = std::chrono::seconds(30);
  asio::io_context io;
  auto guard = asio::make_work_guard(io);
  std::thread run1([&] { io.run(); });
  std::thread run2([&] { io.run(); });
  auto strand = asio::make_strand(io);
  auto q = std::make_unique<Queue>(strand, dlq::asio::RedisListStorage(strand, opts, layout));
  constexpr int producers = 2, per = 1500;
  std::vector<std::atomic<int>> calls(producers * per);
  std::atomic<int> acked{0}, failed{0}, untyped{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (int j = 0; j < per; ++j) {
        const int i = p * per + j;
        q->async_send_to_dlq("mt", std::to_string(p) + "-" + std::to_string(j), failure(),
                             [&, i](std::exception_ptr e, std::string) {
                               calls[std::size_t(i)].fetch_add(1);
                               if (!e) {
                                 acked.fetch_add(1);
                                 return;
                               }
                               failed.fetch_add(1);
                               try {
                                 std::rethrow_exception(e);
                               } catch (const dlq::connection_error&) {
                               } catch (...) {
                                 untyped.fetch_add(1);
                               }
                             });
        if (j % 100 == 0) (void)q->counters();
      }
    });
  }
  std::thread closer([&] {
    while (acked.load() < 500)
      std::this_thread::yield();
    q->close();
  });
  for (auto& t : threads)
    t.join();
  closer.join();
  // Every completion has run once everything is flushed through the strand.
  for (int spin = 0; spin < 3000 && acked.load() + failed.load() < producers * per; ++spin)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  asio::post(strand, [&] { q.reset(); });
  guard.reset();
  run1.join();
  run2.join();
  CHECK(untyped.load() == 0);
  for (auto& c : calls)
    REQUIRE(c.load() == 1);
  dlq::test::RawClient raw(url);
  const auto items = raw.list(dlq::redis::KeyPattern::parse(layout.dead_key, "dead_key").key("mt"));
  CHECK(items.size() >= std::size_t(acked.load()));
  std::vector<int> last(producers, -1);
  for (const auto& item : items) {
    const std::string payload = dlq::parse_entry(item).payload;
    const auto dash = payload.find('-');
    const int p = std::stoi(payload.substr(0, dash));
    const int j = std::stoi(payload.substr(dash + 1));
    REQUIRE(j > last[std::size_t(p)]);  // in each thread's order, none twice
    last[std::size_t(p)] = j;
  }
}

TEST_CASE(
    "the queue destroyed with sends in flight, then its io_context destroyed without running "
    "again: no leak, no use after free (ASan/LSan)",
    "[asio][redis][edges]") {
  const auto layout = dlq::test::unique_layout();
  int calls = 0;
  {
    asio::io_context io;
    auto q = std::make_unique<Queue>(
        io.get_executor(),
        dlq::asio::RedisListStorage(io.get_executor(), dlq::test::shared_redis_url(), layout));
    for (int i = 0; i < 500; ++i)
      q->async_send_to_dlq("gone", "job", failure(),
                           [&](std::exception_ptr, std::string) { ++calls; });
    io.run_one();  // the connect has started, the handshake is in flight
    for (int i = 0; i < 20; ++i)
      io.poll_one();
    q.reset();
  }  // pending completions are destroyed with the io_context, never run
  SUCCEED("no sanitizer report; " << calls << " completions ran before");
  asio::io_context io;
  auto q = std::make_unique<Queue>(
      io.get_executor(),
      dlq::asio::RedisListStorage(io.get_executor(), dlq::test::shared_redis_url(), layout));
  std::vector<std::string> ids;
  q->async_send_to_dlq("gone", "job", failure(), [&](std::exception_ptr e, std::string id) {
    REQUIRE_FALSE(e);
    ids.push_back(std::move(id));
  });
  io.run();
  CHECK(ids.size() == 1);
}

TEST_CASE(
    "async_get while another client removes entries from the head between its pages finds "
    "the entry, as the blocking get does",
    "[asio][redis][edges]") {
  Rig rig;
  std::vector<std::string> items;
  std::vector<std::string> ids;
  for (int i = 0; i < 1200; ++i) {
    ids.push_back(dlq::test::new_id());
    items.push_back(R"({"id":")" + ids.back() + R"(","queue":"moving","payload":"p)" +
                    std::to_string(i) + R"(","error":"e"})");
  }
  rig.raw.rpush(rig.key("moving"), items);
  const std::string wanted = ids[600];  // on the second page of 512
  REQUIRE(rig.blocking.get("moving", wanted).has_value());
  // The LPOP goes out on the queue's own connection right behind the first page's LRANGE:
  // it runs after the first page is read and before the second (a replay, a trim).
  std::promise<std::optional<dlq::Entry>> found;
  std::promise<void> popped;
  asio::post(rig.io, [&] {
    rig.q->async_get("moving", wanted, [&](std::exception_ptr e, std::optional<dlq::Entry> got) {
      REQUIRE_FALSE(e);
      found.set_value(std::move(got));
    });
    rig.q->storage().connection().execute({"LPOP", rig.key("moving"), "200"}, true, "LPOP",
                                          [&](std::exception_ptr e, dlq::asio::RedisReply) {
                                            REQUIRE_FALSE(e);
                                            popped.set_value();
                                          });
  });
  popped.get_future().get();
  const auto got = found.get_future().get();
  REQUIRE(got.has_value());
  CHECK(got->id == wanted);
}

TEST_CASE("the asynchronous connection refuses rediss:// instead of connecting in plain TCP",
          "[asio][redis][tls]") {
  ::asio::io_context io;
  try {
    dlq::asio::RedisConnection c(io.get_executor(), "rediss://127.0.0.1:6380");
    FAIL("accepted a TLS URL");
  } catch (const dlq::invalid_argument& e) {
    CHECK(std::string(e.what()).find("not supported by the asynchronous connection") !=
          std::string::npos);
  }
  CHECK_THROWS_AS(dlq::asio::RedisListStorage(io.get_executor(), "rediss://127.0.0.1:6380"),
                  dlq::invalid_argument);
}

TEST_CASE("the asynchronous connection refuses redis+sentinel:// (not supported yet)",
          "[asio][redis][sentinel]") {
  ::asio::io_context io;
  const char* url = "redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster";
  try {
    dlq::asio::RedisConnection c(io.get_executor(), url);
    FAIL("accepted a Sentinel URL");
  } catch (const dlq::invalid_argument& e) {
    CHECK(std::string(e.what()).find("Sentinel") != std::string::npos);
  }
  CHECK_THROWS_AS(dlq::asio::RedisListStorage(io.get_executor(), url), dlq::invalid_argument);
}

TEST_CASE("replicas_to_ack is refused by the asynchronous storage (not supported yet)",
          "[asio][redis][replica_ack]") {
  asio::io_context io;
  dlq::RedisListOptions o = dlq::test::unique_layout();
  o.replicas_to_ack = 1;
  try {
    dlq::asio::RedisListStorage s(io.get_executor(), dlq::test::shared_redis_url(), o);
    FAIL("replicas_to_ack = 1 was accepted");
  } catch (const dlq::invalid_argument& e) {
    CHECK(std::string(e.what()).find("not supported by dlq::asio::RedisListStorage") !=
          std::string::npos);
  }
  o.replicas_to_ack = 0;
  CHECK_NOTHROW(dlq::asio::RedisListStorage(io.get_executor(), dlq::test::shared_redis_url(), o));
}

}  // namespace test_asio_redis_edges

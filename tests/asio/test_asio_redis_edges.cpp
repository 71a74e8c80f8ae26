// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// dlq::asio on the shared Redis server (fixture `redis`), at the edges of the contract:
// hostile stored items (not JSON, no id, escaped ids, NUL bytes, deep nesting, huge),
// extreme peek arguments, error replies (WRONGTYPE), and the queue's life cycle seen from
// completion handlers (one that throws, starts another operation, closes or destroys the
// queue). Each async answer is compared with the blocking front end's on the same keys.
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/use_future.hpp>

#include <cstddef>
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

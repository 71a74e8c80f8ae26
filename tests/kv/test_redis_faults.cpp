// The Redis key-value store and the Redis list sink under server failures, on private
// redis-servers: frozen with SIGSTOP, killed with SIGKILL and restarted (with an AOF that
// fsyncs every write). Nothing is lost; duplicates are the price of at-least-once replay.
#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/kv/memory_store.hpp"
#include "dlq/kv/storage.hpp"
#include "dlq/redis/kv_store.hpp"
#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"
#include "support/redis_process.hpp"

namespace {

dlq::redis::ConnectionOptions impatient(const dlq::test::RedisProcess& server) {
  auto o = dlq::redis::parse_url(server.url());
  o.command_timeout = std::chrono::milliseconds(300);
  o.connect_timeout = std::chrono::milliseconds(300);
  return o;
}

std::vector<std::string> payloads(int n, const std::string& tag) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i)
    out.push_back("{\"" + tag + "\":" + std::to_string(i) + "}");
  return out;
}

/// Waits (up to 10 s) until a restarted server has loaded its data set (no LOADING reply).
void wait_loaded(dlq::test::RawClient& raw) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    try {
      auto r = raw.cmd({"DBSIZE"});
      if (r->type == REDIS_REPLY_INTEGER) return;
    } catch (const dlq::storage_error&) {
      // not answering yet
    }
    if (std::chrono::steady_clock::now() > deadline) FAIL("redis-server did not finish loading");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

/// How many times each payload occurs.
std::map<std::string, int> tally(const std::vector<std::string>& items) {
  std::map<std::string, int> m;
  for (const auto& i : items)
    ++m[i];
  return m;
}

}  // namespace

TEST_CASE("a replay whose Redis sink is frozen removes nothing; the next replay pushes again",
          "[kv][redis][faults]") {
  dlq::test::RedisProcess server;
  dlq::kv::RedisListSink sink(impatient(server));
  dlq::KeyValueStorage storage(dlq::kv::MemoryStore{}, sink);
  dlq::DeadLetterQueue<decltype(storage)&> q(storage);
  const auto sent = payloads(20, "frozen");
  for (const auto& p : sent)
    q.send_to_dlq("orders", p, "e");

  sink.push_many({dlq::kv::Message{"warm-up", "x"}});  // the connection is open: the RPUSH
  server.freeze();                                     // below is sent, its answer never comes
  try {
    q.replay_all("orders");
    FAIL("replay succeeded against a frozen server");
  } catch (const dlq::storage_error& e) {
    CHECK(e.outcome_unknown());  // the RPUSH was sent; it may land when the server wakes
  }
  CHECK(q.size("orders") == 20);  // nothing removed: the push was not confirmed
  server.thaw();

  CHECK(q.replay_all("orders").replayed == 20);
  CHECK(q.size("orders") == 0);
  dlq::test::RawClient raw(server.url());
  const auto counts = tally(raw.list(sink.key("orders")));
  int extra = 0;
  for (const auto& p : sent) {
    INFO(p);
    REQUIRE(counts.count(p) == 1);
    CHECK(counts.at(p) >= 1);
    extra += counts.at(p) - 1;
  }
  CHECK(extra <= 1);  // at most the one payload whose first push had an unknown outcome
}

TEST_CASE("a Redis store frozen between push and remove loses nothing", "[kv][redis][faults]") {
  dlq::test::RedisProcess server;
  dlq::kv::MemoryQueues destination;
  int calls = 0;
  dlq::KeyValueStorage storage(dlq::kv::RedisStore(impatient(server)),
                               [&](const std::vector<dlq::kv::Message>& batch) {
                                 destination.push_many(batch);
                                 if (++calls == 3) server.freeze();  // the removal will hang
                               });
  dlq::DeadLetterQueue<decltype(storage)&> q(storage);
  const auto sent = payloads(100, "store");
  for (const auto& p : sent)
    q.send_to_dlq("orders", p, "e");

  CHECK_THROWS_AS(q.replay_all("orders"), dlq::storage_error);
  server.thaw();
  const auto report = q.replay_all("orders");
  CHECK(q.size("orders") == 0);
  const auto counts = tally(destination.contents("orders"));
  for (const auto& p : sent) {
    INFO(p);
    REQUIRE(counts.count(p) == 1);
  }
  CHECK(report.replayed <= sent.size());
  // Duplicates: at most the batch whose removal hung (it may have run after the thaw).
  CHECK(destination.size("orders") >= sent.size());
  CHECK(destination.size("orders") <= sent.size() + 64);
}

TEST_CASE("Redis killed with SIGKILL during replay and restarted from its AOF loses nothing",
          "[kv][redis][faults]") {
  // appendfsync always: every write the server acknowledged is on disk.
  dlq::test::RedisProcess server({"--appendonly", "yes", "--appendfsync", "always"});
  const unsigned seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  auto options = dlq::redis::parse_url(server.url());
  options.reconnect_attempts = 1;
  options.reconnect_backoff = std::chrono::milliseconds(10);
  dlq::KeyValueStorage storage{dlq::kv::RedisStore{options}, dlq::kv::RedisListSink{options}};
  dlq::Options qo;
  qo.replay_batch_items = 10;
  dlq::DeadLetterQueue<decltype(storage)&> q(storage, qo);
  dlq::test::RawClient raw(server.url());

  std::vector<std::string> all;
  int interrupted = 0;
  for (int round = 0; round < 5; ++round) {
    INFO("round " << round);
    const auto sent = payloads(300, "r" + std::to_string(round));
    std::vector<dlq::FailedJob> jobs;
    for (const auto& p : sent)
      jobs.push_back({"orders", p, dlq::Failure{}});
    for (auto& j : jobs)
      j.failure.error = "e";
    q.send_batch(jobs);
    all.insert(all.end(), sent.begin(), sent.end());

    const long long before = raw.integer({"LLEN", storage.sink().key("orders")});
    std::atomic<bool> failed{false};
    std::thread replayer([&] {
      try {
        q.replay_all("orders");
      } catch (const dlq::storage_error&) {
        failed = true;  // the server went away mid-replay
      }
    });
    // Kill once the replay has pushed its first batch, after a random moment more.
    dlq::test::RawClient watcher(server.url());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (watcher.integer({"LLEN", storage.sink().key("orders")}) == before &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::this_thread::sleep_for(
        std::chrono::microseconds(std::uniform_int_distribution<int>(0, 3000)(rng)));
    server.kill9();
    replayer.join();
    if (failed) ++interrupted;
    server.start();  // reloads the AOF
    wait_loaded(raw);

    // Every payload is still a record, or in the destination list — or both (a duplicate).
    const auto in_list = tally(raw.list(storage.sink().key("orders")));
    std::map<std::string, int> in_store;
    for (const auto& e : q.peek("orders", 0, 100000))
      ++in_store[e.payload];
    for (const auto& p : all) {
      INFO(p);
      REQUIRE(in_list.count(p) + in_store.count(p) >= 1);
    }
    // Finish the replay: afterwards every payload is in the list.
    q.replay_all("orders");
    CHECK(q.size("orders") == 0);
    const auto final_list = tally(raw.list(storage.sink().key("orders")));
    for (const auto& p : all)
      REQUIRE(final_list.count(p) == 1);
  }
  CHECK(interrupted >= 3);  // the kills landed mid-replay
}

TEST_CASE("a bounded send to a frozen Redis store has an unknown outcome; the bound still holds",
          "[kv][redis][faults][policies]") {
  dlq::test::RedisProcess server;
  dlq::KeyValueStorage storage(dlq::kv::RedisStore(impatient(server)));
  dlq::Options options;
  options.retention.max_length = 5;
  options.retention.overflow = dlq::Overflow::reject;
  dlq::DeadLetterQueue<decltype(storage)&> q(storage, options);
  for (int i = 0; i < 4; ++i)
    q.send_to_dlq("orders", "{}", "e", 1, "w" + std::to_string(i));

  server.freeze();  // the bounded save below is sent; no answer comes
  try {
    q.send_to_dlq("orders", "{}", "e", 1, "frozen");
    FAIL("a send succeeded against a frozen server");
  } catch (const dlq::storage_error& e) {
    CHECK(e.outcome_unknown());
  }
  server.thaw();
  // Whether the frozen send landed or not, senders now fill the queue to exactly 5.
  int stored = 0;
  int refused = 0;
  for (int i = 0; i < 5; ++i) {
    try {
      q.send_to_dlq("orders", "{}", "e", 1, "after");
      ++stored;
    } catch (const dlq::queue_full_error&) {
      ++refused;
    }
  }
  CHECK(q.size("orders") == 5);
  CHECK(stored <= 1);
  CHECK(stored + refused == 5);
  CHECK(q.counters().timeout_errors + q.counters().connection_errors >= 1);
}

TEST_CASE("a poison count sent to a frozen Redis store has an unknown outcome; counting goes on",
          "[kv][redis][faults][policies]") {
  dlq::test::RedisProcess server;
  dlq::KeyValueStorage storage(dlq::kv::RedisStore(impatient(server)));
  dlq::Options options;
  options.poison_guard.park_after = 3;
  dlq::DeadLetterQueue<decltype(storage)&> q(storage, options);
  dlq::Failure f;
  f.error = "e";
  f.job_id = "job-1";
  q.send_to_dlq("orders", "{}", f);
  q.send_to_dlq("orders", "{}", f);
  server.freeze();
  CHECK_THROWS_AS(q.send_to_dlq("orders", "{}", f), dlq::storage_error);  // nothing stored
  server.thaw();
  CHECK(q.get("orders", "job-1")->dead_letter_count == 2);
  q.send_to_dlq("orders", "{}", f);
  // The frozen increment may have run when the server woke: the count is 3 or 4, never less.
  const auto count = q.get("orders", "job-1")->dead_letter_count;
  CHECK(count >= 3);
  CHECK(count <= 4);
  q.send_to_dlq("orders", "{}", f);
  CHECK(q.get("orders", "job-1")->parked);  // 4 or 5 > 3
}

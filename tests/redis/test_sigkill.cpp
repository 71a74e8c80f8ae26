// A replayer process (DeadLetterQueue::replay_all on Redis) killed with SIGKILL at random
// points, 20 times, over 50k entries: after recover() every entry is exactly once in the
// dead-letter list or the source queue, in order.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dlq/dead_letter_queue.hpp"
#include "dlq/redis/list_storage.hpp"
#include "redis/redis_test_util.hpp"
#include "redis/sigkill_util.hpp"
#include "support/catch.hpp"
#include "support/redis_process.hpp"

namespace test_sigkill {

using namespace dlq;
using dlq::test::RawClient;

namespace {

// After a kill: the source list holds a prefix of `payloads`, the dead list the rest, in
// order — no gap, no double. Returns whether the kill landed mid-replay (both non-empty).
bool check_split(DeadLetterQueue<RedisListStorage&>& dlq, RawClient& raw, const std::string& source,
                 const std::vector<std::string>& payloads, int round) {
  auto in_source = raw.list(source);
  std::vector<std::string> all = in_source;
  std::size_t left = 0;
  for (const auto& e : dlq.peek("orders", 0, 100000)) {
    REQUIRE(e.ok());
    all.push_back(e.payload);
    ++left;
  }
  INFO("round " << round << ": " << in_source.size() << " moved, " << left << " left");
  REQUIRE(all.size() == payloads.size());
  CHECK(all == payloads);
  return left != 0 && !in_source.empty();
}

}  // namespace

TEST_CASE("a replayer killed with SIGKILL at random points loses and doubles nothing",
          "[redis][replay][sigkill]") {
  test::RedisProcess server;
  const std::string prefix = "k:";
  RedisListOptions o;
  o.dead_key = prefix + "dlq:{*}";
  o.source_key = prefix + "queue:{*}";
  o.corrupt_key = prefix + "dlq:{*}:corrupt";
  RedisListStorage storage(server.url(), o);
  RawClient raw(server.url());
  const std::string dead = storage.key("orders", ListKind::dead);
  const std::string source = storage.source_key("orders");

  dlq::DeadLetterQueue<RedisListStorage&> dlq(storage);
  std::vector<std::string> payloads;
  std::vector<dlq::FailedJob> jobs;
  for (int i = 0; i < 50000; ++i) {
    payloads.push_back("{\"job\":" + std::to_string(i) + ",\"pad\":\"" + std::string(80, 'x') +
                       "\"}");
    dlq::Failure f;
    f.error = "e";
    jobs.push_back({"orders", payloads.back(), f});
  }
  auto refill = [&] {  // a fresh dead-letter list of all 50k, an empty source queue
    raw.cmd({"DEL", dead, source});
    for (std::size_t i = 0; i < jobs.size(); i += 5000)
      dlq.send_batch(
          std::vector<dlq::FailedJob>(jobs.begin() + static_cast<std::ptrdiff_t>(i),
                                      jobs.begin() + static_cast<std::ptrdiff_t>(i + 5000)));
  };
  refill();

  const std::vector<std::string> child = {DLQ_REPLAYER_CHILD, server.url(), prefix, "orders",
                                          "1000"};
  pid_t pid = dlq::test::spawn_process(child);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(raw.list(source) == payloads);
  auto receipts = [&] { return raw.strings({"KEYS", prefix + "*:receipt:*"}).size(); };
  CHECK(receipts() == 0);  // a replay that ends deletes its receipts
  refill();

  std::mt19937 rng(std::random_device{}());
  int partial = 0;
  for (int round = 0; round < 20; ++round) {
    if (raw.integer({"LLEN", dead}) < dlq::test::replay_kill_refill_below) refill();
    dlq::test::kill_mid_replay(child, raw, source, raw.integer({"LLEN", dead}), rng);
    const std::size_t fixed = dlq.recover("orders");
    CHECK(fixed == 0);  // compare-and-move leaves nothing to repair
    CHECK(storage.size("orders", ListKind::corrupt) == 0);  // nor anything to set aside
    // A killed replayer leaves at most its last step's receipt (it expires by itself).
    CHECK(receipts() <= static_cast<std::size_t>(round) + 1);
    if (check_split(dlq, raw, source, payloads, round)) ++partial;
  }
  CHECK(partial >= 10);  // the kills really landed mid-replay
}

// The fast path (RedisListStorage::replay_fast) under the same kills, on a queue where every
// 200th entry comes from the Python service (the compare-and-move step moves those): after
// every kill each entry is exactly once in the dead list or the source queue, in order, and
// there is nothing to recover — no tombstone, nothing set aside.
TEST_CASE("a fast-path replayer killed with SIGKILL at random points loses and doubles nothing",
          "[redis][replay][sigkill][fast]") {
  test::RedisProcess server;
  const std::string prefix = "f:";
  RedisListOptions o;
  o.dead_key = prefix + "dlq:{*}";
  o.source_key = prefix + "queue:{*}";
  o.corrupt_key = prefix + "dlq:{*}:corrupt";
  RedisListStorage storage(server.url(), o);
  RawClient raw(server.url());
  const std::string dead = storage.key("orders", ListKind::dead);
  const std::string source = storage.source_key("orders");
  dlq::DeadLetterQueue<RedisListStorage&> dlq(storage);

  std::vector<std::string> items, payloads;
  detail::id_generator ids;
  dlq::Failure f;
  f.error = "e";
  for (int i = 0; i < 50000; ++i) {
    const std::string n = std::to_string(i);
    if (i % 200 == 199) {  // as the Python service writes it: no length field, no id
      payloads.push_back("{\"job\": " + n + ", \"src\": \"py\"}");
      items.push_back("{\"original_payload\": " + payloads.back() +
                      ", \"queue\": \"orders\", \"error\": \"e\", \"attempt\": 1, \"worker\": "
                      "\"py\", \"dead_lettered_at\": \"2026-11-30T03:32:19.123456+00:00\"}");
      continue;
    }
    payloads.push_back("{\"job\":" + n + ",\"pad\":\"" + std::string(80, 'x') + "\"}");
    const std::string id = ids.next(std::chrono::system_clock::now());
    detail::envelope_input in;
    in.queue = "orders";
    in.payload = payloads.back();
    in.failure = &f;
    in.worker = "w";
    in.id = id;
    in.time = std::chrono::system_clock::now();
    items.emplace_back();
    detail::write_envelope(items.back(), in);
  }
  auto refill = [&] {
    raw.cmd({"DEL", dead, source});
    raw.rpush(dead, items);
  };
  auto set_calls = [&] {  // SETs so far: the compare-and-move script writes one receipt a step
    const redis::Reply info = raw.cmd({"INFO", "commandstats"});
    const std::string text(redis::view(*info));
    const auto at = text.find("cmdstat_set:calls=");
    return at == std::string::npos ? 0L : std::stol(text.substr(at + 18));
  };
  refill();

  const std::vector<std::string> child = {DLQ_REPLAYER_CHILD, server.url(), prefix, "orders",
                                          "1000"};
  raw.cmd({"CONFIG", "RESETSTAT"});
  pid_t pid = dlq::test::spawn_process(child);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(raw.list(source) == payloads);
  // The fast path moved the dlq entries: one compare-and-move step (one receipt) per Python
  // entry, none for the 49 750 others. (Runs of 199: long enough for the fast path to go on
  // after each Python entry; shorter runs make it back off to compare-and-move.)
  CHECK(set_calls() == 250);
  refill();

  std::mt19937 rng(std::random_device{}());
  int partial = 0;
  for (int round = 0; round < 20; ++round) {
    if (raw.integer({"LLEN", dead}) < dlq::test::replay_kill_refill_below) refill();
    dlq::test::kill_mid_replay(child, raw, source, raw.integer({"LLEN", dead}), rng);
    CHECK(dlq.recover("orders") == 0);  // no tombstone: nothing to recover
    CHECK(storage.size("orders", ListKind::corrupt) == 0);
    if (check_split(dlq, raw, source, payloads, round)) ++partial;
  }
  CHECK(partial >= 10);  // the kills really landed mid-replay
}

// kill_mid_replay itself: a replayer that dies by itself (an error exit, a crash) before the
// kill is a failure of the round, not a kill that "landed mid-replay" — else a replayer that
// aborts after some moves passes every round, its entries in order, and counts as partial.
// Expected to fail (tagged !shouldfail): kill_mid_replay's own check must reject the child.
TEST_CASE("kill_mid_replay fails a round whose replayer exited by itself",
          "[redis][sigkill][!shouldfail]") {
  dlq::test::RedisProcess server;
  RawClient raw(server.url());
  std::mt19937 rng(1);
  const auto t0 = std::chrono::steady_clock::now();
  dlq::test::kill_mid_replay({"/bin/sh", "-c", "exit 3"}, raw, "nothing-moves-here", 50000, rng);
  WARN("kill_mid_replay returned after " << dlq::test::elapsed_ms(t0) << " ms");
}

}  // namespace test_sigkill

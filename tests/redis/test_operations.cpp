// Operator operations on Redis (issue 14): an edited replay killed with SIGKILL at random
// points; audit writes that fail (WRONGTYPE on the audit stream) lose and double nothing;
// the audit stream's key and type; no record for a no-op, so a flood of removes of made-up
// ids cannot push earlier records out.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlq/dead_letter_queue.hpp"
#include "dlq/redis/list_storage.hpp"
#include "redis/redis_test_util.hpp"
#include "redis/sigkill_util.hpp"
#include "support/catch.hpp"
#include "support/redis_process.hpp"

namespace test_operations {

using dlq::test::RawClient;

namespace {

dlq::Failure failure(std::string error, std::string worker = "w1") {
  dlq::Failure f;
  f.error = std::move(error);
  f.worker = std::move(worker);
  return f;
}

}  // namespace

TEST_CASE("an edited replay killed with SIGKILL leaves each entry original or edited, once",
          "[redis][ops][sigkill]") {
  dlq::test::RedisProcess server;
  const std::string prefix = "e:";
  dlq::RedisListOptions o;
  o.dead_key = prefix + "dlq:{*}";
  o.source_key = prefix + "queue:{*}";
  o.corrupt_key = prefix + "dlq:{*}:corrupt";
  dlq::RedisListStorage storage(server.url(), o);
  RawClient raw(server.url());
  const std::string dead = storage.key("orders", dlq::ListKind::dead);
  const std::string source = storage.source_key("orders");
  dlq::DeadLetterQueue<dlq::RedisListStorage&> dlq(storage);

  constexpr int count = 30000;
  std::vector<std::string> payloads;
  std::vector<dlq::FailedJob> jobs;
  for (int i = 0; i < count; ++i) {
    payloads.push_back("{\"job\":" + std::to_string(i) + ",\"pad\":\"" + std::string(80, 'x') +
                       "\"}");
    jobs.push_back({"orders", payloads.back(), failure("schema")});
  }
  auto refill = [&] {
    raw.cmd({"DEL", dead, source});
    for (std::size_t i = 0; i < jobs.size(); i += 5000)
      dlq.send_batch(
          std::vector<dlq::FailedJob>(jobs.begin() + static_cast<std::ptrdiff_t>(i),
                                      jobs.begin() + static_cast<std::ptrdiff_t>(i + 5000)));
  };
  refill();
  const std::vector<std::string> child = {DLQ_EDIT_REPLAYER_CHILD, server.url(), prefix, "orders",
                                          "500"};
  pid_t pid = dlq::test::spawn_process(child);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  {
    const auto moved = raw.list(source);
    REQUIRE(moved.size() == payloads.size());
    for (std::size_t i = 0; i < moved.size(); ++i)
      REQUIRE(moved[i] == "E" + payloads[i]);
    const auto trail = dlq.audit("orders");
    REQUIRE(trail.size() == 1);
    CHECK(trail[0].actor == "sigkill-test");
    CHECK(trail[0].counts["edited"] == count);
    CHECK(trail[0].ids_omitted == count - 100);
  }
  refill();

  std::mt19937 rng(std::random_device{}());
  int partial = 0;
  for (int round = 0; round < 20; ++round) {
    if (raw.integer({"LLEN", dead}) < dlq::test::replay_kill_refill_below) refill();
    dlq::test::kill_mid_replay(child, raw, source, raw.integer({"LLEN", dead}), rng);
    CHECK(dlq.recover("orders") == 0);
    const auto in_source = raw.list(source);
    const auto left = dlq.peek("orders", 0, count + 1);
    if (!left.empty() && !in_source.empty()) ++partial;
    INFO("round " << round << ": " << in_source.size() << " moved, " << left.size() << " left");
    // Every entry exactly once: the source holds edited payloads of a prefix (from earlier
    // rounds too), the dead list the original envelopes of the rest, in order.
    REQUIRE(in_source.size() + left.size() == payloads.size());
    for (std::size_t i = 0; i < in_source.size(); ++i)
      REQUIRE(in_source[i] == "E" + payloads[i]);
    for (std::size_t i = 0; i < left.size(); ++i) {
      REQUIRE(left[i].ok());
      REQUIRE(left[i].payload == payloads[in_source.size() + i]);
    }
  }
  CHECK(partial >= 10);  // the kills really landed mid-replay
}

TEST_CASE("an audit write that fails (WRONGTYPE) loses and doubles nothing and is counted",
          "[redis][ops][audit]") {
  const std::string url = dlq::test::shared_redis_url();
  dlq::RedisListStorage storage(url, dlq::test::unique_layout());
  RawClient raw(url);
  std::vector<std::string> logged;
  dlq::Options options;
  options.log = [&](dlq::LogLevel level, std::string_view m) {
    if (level == dlq::LogLevel::error) logged.emplace_back(m);
  };
  dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage, options);
  std::vector<std::string> ids;
  for (int i = 0; i < 300; ++i)
    ids.push_back(q.send_to_dlq("orders", std::to_string(i), failure(i % 3 == 0 ? "a" : "b")));
  const std::string audit_key = storage.audit_key("orders");
  raw.cmd({"SET", audit_key, "not a stream"});

  dlq::ReplayOptions r;
  r.error_contains = "a";
  r.transform = [](const dlq::Entry& e) -> std::optional<std::string> { return e.payload + "!"; };
  CHECK(q.replay("orders", r).replayed == 100);
  dlq::DiscardOptions d;
  d.ids = {ids[1], ids[2]};
  CHECK(q.discard("orders", d).discarded == 2);
  CHECK(q.remove("orders", ids[4]));
  CHECK(q.replay_edited("orders", ids[5], "five").replayed == 1);
  CHECK(q.purge("orders") == 300 - 100 - 2 - 1 - 1);

  const auto c = q.counters();
  CHECK(c.audit_errors == 5);
  CHECK(c.audited == 0);
  REQUIRE(logged.size() == 5);
  CHECK(logged[0].find("[dlq.audit]") == 0);
  CHECK(logged[0].find("WRONGTYPE") != std::string::npos);
  CHECK(logged[0].find("the operation itself stands") != std::string::npos);
  // Nothing lost, nothing doubled: the source holds the 100 edited and the one edited by id.
  const auto src = raw.list(storage.source_key("orders"));
  REQUIRE(src.size() == 101);
  std::set<std::string> unique(src.begin(), src.end());
  CHECK(unique.size() == 101);
  CHECK(unique.count("five") == 1);
  for (int i = 0; i < 300; i += 3)
    CHECK(unique.count(std::to_string(i) + "!") == 1);
  CHECK(q.size("orders") == 0);
  CHECK_THROWS_AS(q.audit("orders"), dlq::reply_error);

  raw.cmd({"DEL", audit_key});
  q.send_to_dlq("orders", "again", failure("b"));
  CHECK(q.purge("orders") == 1);
  const auto trail = q.audit("orders");
  REQUIRE(trail.size() == 1);
  CHECK(trail[0].operation == "purge");
  CHECK(q.counters().audited == 1);
}

TEST_CASE("the audit trail is a Redis Stream beside the queue's lists; no-ops write nothing",
          "[redis][ops][audit]") {
  const std::string url = dlq::test::shared_redis_url();
  dlq::RedisListStorage storage(url, dlq::test::unique_layout());
  RawClient raw(url);
  dlq::Options options;
  options.actor = "dave";
  dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage, options);
  const std::string key = storage.audit_key("orders");
  CHECK(key == storage.key("orders", dlq::ListKind::dead) + ":audit");
  const std::string id = q.send_to_dlq("orders", "x", failure("e"));
  q.send_to_dlq("orders", "y", failure("e"));
  for (int i = 0; i < 600; ++i)
    CHECK_FALSE(q.remove("orders", "missing-" + std::to_string(i)));
  CHECK(raw.integer({"EXISTS", key}) == 0);  // nothing changed, nothing written
  CHECK(q.remove("orders", id));
  const auto type = raw.cmd({"TYPE", key});
  CHECK(std::string(type->str, type->len) == "stream");
  CHECK(raw.integer({"XLEN", key}) == 1);
  const auto trail = q.audit("orders", {}, 100000);
  REQUIRE(trail.size() == 1);
  CHECK(trail.back().ids == std::vector<std::string>{id});
  CHECK(trail.back().actor == "dave");
  CHECK(trail.back().outcome == "ok");
  // The stream is not a queue: once the dead list is gone the queue is not listed.
  CHECK(q.purge("orders") == 1);
  const auto names = q.queues();
  CHECK(std::find(names.begin(), names.end(), "orders") == names.end());
}

// Issue 27, defect 5: 11 requests of 1000 made-up ids each (1.9 s through the console) wrote
// 11 000 "not found" records and pushed the purge record out of the stream capped at 10 000.
TEST_CASE("a flood of removes of made-up ids leaves the earlier purge record readable",
          "[redis][ops][audit]") {
  const std::string url = dlq::test::shared_redis_url();
  dlq::RedisListStorage storage(url, dlq::test::unique_layout());
  RawClient raw(url);
  dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage);
  for (int i = 0; i < 3; ++i)
    q.send_to_dlq("orders", std::to_string(i), failure("e"));
  CHECK(q.purge("orders") == 3);
  for (int request = 0; request < 11; ++request)
    for (int i = 0; i < 1000; ++i)
      CHECK_FALSE(
          q.remove("orders", "made-up-" + std::to_string(request) + "-" + std::to_string(i)));
  const auto trail = q.audit("orders", {}, 100000);
  REQUIRE(trail.size() == 1);
  CHECK(trail[0].operation == "purge");
  CHECK(trail[0].counts["purged"] == 3);
  CHECK(raw.integer({"XLEN", storage.audit_key("orders")}) == 1);
}

// Retention of the stream by age, by the records' `at` (the writers' clock): entries written
// 100 days ago (here by hand, as a process with that clock would) go with the next append;
// they are not reported as dropped. A stream over its cap loses its oldest records, and that
// is counted, logged and marked in the trail.
TEST_CASE("the audit stream keeps records by age; its cap's drops are visible",
          "[redis][ops][audit]") {
  const std::string url = dlq::test::shared_redis_url();
  auto layout = dlq::test::unique_layout();
  layout.audit_retention.max_records = 100;
  dlq::RedisListStorage storage(url, layout);
  RawClient raw(url);
  std::vector<std::string> errors;
  dlq::Options options;
  options.log = [&](dlq::LogLevel level, std::string_view m) {
    if (level == dlq::LogLevel::error) errors.emplace_back(m);
  };
  dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage, options);
  const std::string key = storage.audit_key("orders");
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const std::string old_at = std::to_string(now_ms - 100LL * 24 * 3600 * 1000);
  const std::string young_at = std::to_string(now_ms - 80LL * 24 * 3600 * 1000);
  for (int i = 0; i < 150; ++i)  // more than one page of the script's age loop
    raw.cmd({"XADD", key, "*", "at", old_at, "record", "{\"operation\":\"old\"}"});
  raw.cmd({"XADD", key, "*", "at", young_at, "record", "{\"operation\":\"young\"}"});
  std::vector<std::string> ids;
  for (int i = 0; i < 300; ++i)
    ids.push_back(q.send_to_dlq("orders", std::to_string(i), failure("e")));
  CHECK(q.remove("orders", ids[0]));
  auto trail = q.audit("orders", {}, 100000);
  REQUIRE(trail.size() == 2);
  CHECK(trail[0].operation == "young");
  CHECK(trail[1].ids == std::vector<std::string>{ids[0]});
  CHECK(q.counters().audit_dropped == 0);
  CHECK(errors.empty());

  for (std::size_t i = 1; i < ids.size(); ++i)
    CHECK(q.remove("orders", ids[i]));
  CHECK(raw.integer({"XLEN", key}) <= 101);  // the cap and its 1 %
  trail = q.audit("orders", {}, 100000);
  REQUIRE(trail.size() >= 2);
  CHECK(trail.back().operation == "audit_dropped");
  CHECK(trail.back().counts["dropped"] == 2);
  CHECK(trail[trail.size() - 2].ids == std::vector<std::string>{ids.back()});
  const auto c = q.counters();
  CHECK(c.audit_dropped > 0);
  CHECK(c.audit_errors == 0);
  REQUIRE_FALSE(errors.empty());
  CHECK(errors.size() * 2 == c.audit_dropped);
  CHECK(errors[0].find("[dlq.audit] queue 'orders': 2 audit records younger than the trail's "
                       "max age were removed by its cap") == 0);
}

}  // namespace test_operations

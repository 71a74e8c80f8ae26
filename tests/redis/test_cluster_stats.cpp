// DeadLetterQueue::stats on a Redis Cluster (ctest fixture `redis_cluster`): queues on several
// masters in one call, and a queue whose slot moved (MOVED) or is being migrated (ASK, its
// keys on two nodes) — exact depths and times all the same.
#include <chrono>
#include <string>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/redis/list_storage.hpp"
#include "redis/cluster_test_util.hpp"
#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"

namespace test_cluster_stats {

using namespace dlq;
using dlq::test::RawCluster;

static_assert(dlq::detail::has_stats<RedisListStorage>::value,
              "RedisListStorage has the stats member (one round trip per master)");

namespace {

// A queue name (the hash tag of its keys) whose dead list is on `port`.
std::string queue_on(RawCluster& raw, const RedisListStorage& s, int port,
                     const std::string& stem) {
  for (int i = 0; i < 10000; ++i) {
    const std::string q = stem + std::to_string(i);
    if (raw.owner(s.key(q, ListKind::dead)) == port) return q;
  }
  throw std::runtime_error("no queue on port " + std::to_string(port));
}

}  // namespace

TEST_CASE("stats follow a moved and a migrating slot and read the other masters in the same call",
          "[redis][cluster][stats]") {
  using namespace std::chrono_literals;
  RawCluster raw;
  RedisListStorage storage(test::cluster_url(), test::unique_layout());
  REQUIRE(storage.cluster_mode());
  auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1796000000));
  Options options;
  options.clock = [&now] { return now; };
  DeadLetterQueue<RedisListStorage&> q(storage, options);
  const auto& ports = raw.ports();
  const std::string moving = queue_on(raw, storage, ports[1], "stats-moving-");
  const std::string staying = queue_on(raw, storage, ports[0], "stats-staying-");
  const auto t0 = now;
  for (int i = 0; i < 3; ++i) {
    q.send_to_dlq(moving, "{}", "e");
    now += 1s;
  }
  q.send_to_dlq(staying, "{}", "e");
  now += 10s;

  auto check = [&](const char* when) {
    INFO(when);
    const auto s = q.stats({moving, staying});
    REQUIRE(s.size() == 2);
    CHECK(s[0].dead.depth == 3);
    CHECK(s[0].corrupt.depth == 0);
    REQUIRE(s[0].dead.oldest);
    CHECK(*s[0].dead.oldest == t0);
    CHECK(*s[0].dead.newest == t0 + 2s);
    CHECK(*s[0].oldest_age() == 13s);
    CHECK(s[1].dead.depth == 1);
    CHECK(*s[1].dead.oldest == t0 + 3s);
  };
  check("before any move");

  const std::string dead = storage.key(moving, ListKind::dead);
  const int slot = raw.keyslot(dead);
  const auto before = storage.router().stats();
  raw.migrate(slot, ports[1], ports[2]);  // the storage's map still says ports[1]: MOVED
  check("after MOVED");
  CHECK(storage.router().stats().moved > before.moved);

  // Migrating back: the dead list is still on the source, the (empty) corrupt list is on
  // neither — its commands get ASK inside the transaction, and the queue is read list by list.
  raw.begin_migration(slot, ports[2], ports[1]);
  const auto mid = storage.router().stats();
  check("during the migration, keys on the source");
  CHECK(storage.router().stats().ask > mid.ask);
  raw.move_keys(slot, ports[2], ports[1]);
  check("during the migration, keys on the target");
  raw.end_migration(slot, ports[1]);
  check("after the migration");
}

}  // namespace test_cluster_stats

// The fixtures of the storage contract suite on dlq::RedisListStorage against a 3-master
// Redis Cluster (ctest fixture `redis_cluster`; the suite is instantiated in
// contract_redis.cpp, ctest test_contract_redis_cluster), with two key layouts:
//  - ClusterSpread: the default layout's shape with a salt (`dlq:{*.7}`): each queue is its
//    own hash slot, the salt chosen so that the suite's queues "orders", "emails" and
//    "orders-retry" live on three different masters. Its
//    run leaves out "replay can send entries to another queue": in a cluster a replay moves
//    entries within one slot only, and test_redis_cluster checks the typed error instead;
//  - ClusterOneSlot: one fixed hash tag for every queue (`{prefix}dlq:*`): all queues on one
//    master, and replay between queues works.
// Test data is read and written through a raw client that follows MOVED by itself.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dlq/redis/list_storage.hpp"
#include "redis/cluster_test_util.hpp"

namespace {

struct ClusterFixtureBase {
  using storage_type = dlq::RedisListStorage;

  explicit ClusterFixtureBase(dlq::RedisListOptions layout)
      : storage_(dlq::test::cluster_url(), std::move(layout)) {}

  storage_type& storage() { return storage_; }
  std::vector<std::string> source(std::string_view queue) {
    return raw_.list(storage_.source_key(queue));
  }
  void push_raw(std::string_view queue, std::string_view raw) {
    raw_.rpush(storage_.key(queue, dlq::ListKind::dead), {std::string(raw)});
  }

 private:
  storage_type storage_;
  dlq::test::RawCluster raw_;
};

// The default layout's shape with a salt in the hash tag (`dlq:{*<salt>}`), chosen so that
// the suite's queues "orders", "emails" and "orders-retry" are on three different masters.
dlq::RedisListOptions spread_layout() {
  dlq::test::RawCluster raw;
  const std::string prefix = dlq::test::unique_prefix();
  for (int i = 0; i < 1000; ++i) {
    // Salts of one length keep slot(orders+salt) XOR slot(emails+salt) constant (CRC16 is
    // linear): vary the length too.
    const std::string salt =
        "." + std::to_string(i) + std::string(static_cast<std::size_t>(i % 7), '_');
    const int a = raw.owner("{orders" + salt + "}");
    const int b = raw.owner("{emails" + salt + "}");
    const int c = raw.owner("{orders-retry" + salt + "}");
    if (a == b || a == c || b == c) continue;
    dlq::RedisListOptions o;
    o.dead_key = prefix + "dlq:{*" + salt + "}";
    o.source_key = prefix + "queue:{*" + salt + "}";
    o.corrupt_key = prefix + "dlq:{*" + salt + "}:corrupt";
    return o;
  }
  throw std::runtime_error("spread_layout: no salt puts the queues on three masters");
}

struct ClusterSpread : ClusterFixtureBase {
  ClusterSpread() : ClusterFixtureBase(spread_layout()) {}
};

dlq::RedisListOptions one_slot_layout() {
  const std::string tag = "{" + dlq::test::unique_prefix() + "}";
  dlq::RedisListOptions o;
  o.dead_key = tag + "dlq:*";
  o.source_key = tag + "queue:*";
  o.corrupt_key = tag + "dlq:*:corrupt";
  return o;
}

struct ClusterOneSlot : ClusterFixtureBase {
  ClusterOneSlot() : ClusterFixtureBase(one_slot_layout()) {}
};

}  // namespace

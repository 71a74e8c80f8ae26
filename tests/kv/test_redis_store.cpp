// Redis store specifics on the shared test server: the key layout (plain record keys with the
// queue's hash tag, a per-collection index), keys of foreign types, the Redis list sink.
#include <string>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/redis/kv_store.hpp"
#include "kv_fixtures.hpp"
#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"

using Catch::Matchers::Contains;
using dlq::kv::RedisListSink;
using dlq::kv::RedisListSinkOptions;
using dlq::kv::RedisStore;
using dlq::kv::RedisStoreOptions;
using dlq::kv::Window;
using dlq::kv::Write;

namespace {
RedisStoreOptions namespaced(const std::string& prefix) {
  RedisStoreOptions o;
  o.key_prefix = prefix;
  return o;
}
}  // namespace

TEST_CASE("records are plain keys with the queue's hash tag, indexed per collection",
          "[kv][redis]") {
  const std::string url = dlq::test::shared_redis_url();
  const std::string prefix = dlq::test::unique_prefix();
  dlq::KeyValueStorage storage(RedisStore(url, namespaced(prefix)), dlq::kv::MemoryQueues{});
  dlq::DeadLetterQueue<decltype(storage)&> q(storage);
  dlq::Failure f;
  f.error = "boom";
  f.job_id = "job-42";
  q.send_to_dlq("orders", R"({"n":42})", f);

  dlq::test::RawClient raw(url);
  const std::string record = prefix + "dlq:{orders}:dead:r:job-42";
  CHECK(storage.store().record_key("dlq:{orders}:dead", "job-42") == record);
  auto got = raw.cmd({"GET", record});
  REQUIRE(got->type == REDIS_REPLY_STRING);
  CHECK_THAT(std::string(got->str, got->len), Contains(R"("original_payload":{"n":42})"));
  CHECK(raw.strings({"ZRANGE", prefix + "dlq:{orders}:dead:i", "0", "-1"}) ==
        std::vector<std::string>{"job-42"});
  auto counter = raw.cmd({"GET", prefix + "dlq:{orders}:dead:s"});
  REQUIRE(counter->type == REDIS_REPLY_STRING);
  CHECK(std::stoll(std::string(counter->str, counter->len)) >= 1);
  // The queue registry is a collection too: queues() reads its index, never the keyspace.
  CHECK(raw.strings({"ZRANGE", prefix + "dlq:queues:i", "0", "-1"}) ==
        std::vector<std::string>{"orders"});
  // One hash tag for all of the queue's keys: the first {…} of each key is "{orders}".
  for (const std::string& k :
       {record, prefix + "dlq:{orders}:dead:i", prefix + "dlq:{orders}:dead:s"})
    CHECK(k.substr(k.find('{'), 8) == "{orders}");
}

TEST_CASE("a key of a foreign type is refused with WRONGTYPE and nothing is changed",
          "[kv][redis][bad-input]") {
  const std::string url = dlq::test::shared_redis_url();
  const std::string prefix = dlq::test::unique_prefix();
  RedisStore store(url, namespaced(prefix));
  dlq::test::RawClient raw(url);
  raw.cmd({"RPUSH", prefix + "c:i", "not an index"});  // the index key holds a list
  try {
    store.save({Write{"ok", "a", "1"}, Write{"c", "b", "2"}});
    FAIL("saved over a key of another type");
  } catch (const dlq::reply_error& e) {
    CHECK(e.code() == "WRONGTYPE");
    CHECK_THAT(e.what(), Contains("nothing was saved"));
  }
  CHECK_FALSE(store.load("ok", "a"));  // the whole batch was refused
  CHECK(raw.strings({"LRANGE", prefix + "c:i", "0", "-1"}) ==
        std::vector<std::string>{"not an index"});
  raw.cmd({"SET", prefix + "t:i", "a string"});
  store.save({Write{"c2", "x", "1"}});
  CHECK_THROWS_AS(store.remove({dlq::kv::Removal{"c2", "x", 0, "t"}}), dlq::reply_error);
  CHECK(store.load("c2", "x"));  // not moved, not removed
}

TEST_CASE("a record whose key was deleted behind the store's back is skipped by list",
          "[kv][redis][bad-input]") {
  const std::string url = dlq::test::shared_redis_url();
  const std::string prefix = dlq::test::unique_prefix();
  RedisStore store(url, namespaced(prefix));
  store.save({Write{"c", "a", "1"}, Write{"c", "b", "2"}});
  dlq::test::RawClient raw(url);
  raw.cmd({"DEL", store.record_key("c", "a")});
  const auto items = store.list("c", Window{});
  REQUIRE(items.size() == 1);
  CHECK(items[0].id == "b");
  CHECK_FALSE(store.load("c", "a"));
}

TEST_CASE("ends passes by index members whose record is gone or of a foreign type, as list does",
          "[kv][redis][bad-input]") {
  const std::string url = dlq::test::shared_redis_url();
  const std::string prefix = dlq::test::unique_prefix();
  RedisStore store(url, namespaced(prefix));
  dlq::test::RawClient raw(url);
  store.save(
      {Write{"c", "a", "1"}, Write{"c", "b", "2"}, Write{"c", "c", "3"}, Write{"c", "d", "4"}});
  raw.cmd({"DEL", store.record_key("c", "a")});  // the oldest record's key deleted
  const auto ids = [&] {
    std::vector<std::string> out;
    for (const auto& it : store.list("c", Window{}))
      out.push_back(it.id);
    return out;
  };
  REQUIRE(ids() == std::vector<std::string>{"b", "c", "d"});
  dlq::kv::Ends e = store.ends("c");
  CHECK(e.count == store.count("c"));
  REQUIRE(e.first);  // stats would report the list untimed for good
  CHECK(e.first->id == "b");
  REQUIRE(e.last);
  CHECK(e.last->id == "d");

  // The newest record's key replaced by a hash: list passes it by (MGET), ends must too
  // rather than fail the whole stats read with WRONGTYPE.
  raw.cmd({"DEL", store.record_key("c", "d")});
  raw.cmd({"HSET", store.record_key("c", "d"), "f", "v"});
  REQUIRE(ids() == std::vector<std::string>{"b", "c"});
  e = store.ends("c");
  REQUIRE(e.first);
  CHECK(e.first->id == "b");
  REQUIRE(e.last);
  CHECK(e.last->id == "c");
  CHECK(e.last->value == "3");
}

TEST_CASE("replay into Redis lists: one RPUSH per queue run, payloads in order",
          "[kv][redis][sink]") {
  const std::string url = dlq::test::shared_redis_url();
  const std::string prefix = dlq::test::unique_prefix();
  RedisListSinkOptions so;
  so.key = prefix + "queue:{*}";
  RedisListSink sink(url, so);
  dlq::KeyValueStorage storage(dlq::kv::MemoryStore{}, sink);
  dlq::Options options;
  options.replay_batch_items = 50;
  dlq::DeadLetterQueue<decltype(storage)&> q(storage, options);
  std::vector<std::string> sent;
  for (int i = 0; i < 300; ++i) {
    sent.push_back("{\"i\":" + std::to_string(i) + "}");
    q.send_to_dlq(i % 3 == 0 ? "billing" : "orders", sent.back(), "e");
  }
  CHECK(q.replay_all("orders").replayed == 200);
  dlq::ReplayOptions to_other;
  to_other.to_queue = "billing-retry";
  CHECK(q.replay("billing", to_other).replayed == 100);

  dlq::test::RawClient raw(url);
  std::vector<std::string> orders, billing;
  for (int i = 0; i < 300; ++i)
    (i % 3 == 0 ? billing : orders).push_back(sent[i]);
  CHECK(sink.key("orders") == prefix + "queue:{orders}");
  CHECK(raw.list(prefix + "queue:{orders}") == orders);
  CHECK(raw.list(prefix + "queue:{billing-retry}") == billing);
  CHECK_THROWS_AS(RedisListSink(url, RedisListSinkOptions{"no-star", {}}), dlq::invalid_argument);
}

TEST_CASE("the Redis sink feeds the source lists RedisListStorage's workers read",
          "[kv][redis][sink]") {
  const std::string url = dlq::test::shared_redis_url();
  const std::string prefix = dlq::test::unique_prefix();
  const dlq::RedisListOptions layout = dlq::test::unique_layout(prefix);
  RedisListSinkOptions so;
  so.key = layout.source_key;
  dlq::KeyValueStorage storage(RedisStore(url, namespaced(prefix)), RedisListSink(url, so));
  dlq::DeadLetterQueue<decltype(storage)&> q(storage);
  q.send_to_dlq("orders", R"({"order":7})", "e");
  CHECK(q.replay_all("orders").replayed == 1);
  dlq::RedisListStorage lists(url, layout);
  dlq::test::RawClient raw(url);
  CHECK(raw.list(lists.source_key("orders")) == std::vector<std::string>{R"({"order":7})"});
}

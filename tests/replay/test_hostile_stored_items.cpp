// dlq — hostile stored items on every backend (empty, NUL bytes, non-string id, truncated,
// twins, not an object): exact counts, nothing lost.
#include <string>
#include <vector>

#include "dlq/dead_letter_queue.hpp"
#include "dlq/kv/memory_store.hpp"
#include "dlq/kv/storage.hpp"
#include "dlq/storage/memory.hpp"
#include "support/catch.hpp"
#ifdef DLQ_TEST_HAVE_REDIS
#include "dlq/redis/list_storage.hpp"
#include "redis/redis_test_util.hpp"
#endif

namespace {

const std::string uuid_a = "01a22b8f-1042-701e-95b6-d788902f644e";
const std::string uuid_b = "01a22b8f-1042-701e-95b6-d788902f6450";

// Items no dlq writes, pushed as raw bytes: every one must end up in exactly one place and be
// counted exactly once.
template <class Q>
void hostile_items(Q& q) {
  const std::string queue = "orders";
  const std::vector<std::string> items = {
      "",                      // empty item
      std::string("\0\0", 2),  // NUL bytes
      R"({"original_payload": )"
      "\t\n "
      R"(7 , "id": 5})",  // id not a string
      R"({"id":")" + uuid_a + R"(","original_payload":1,"id":")" + uuid_b + R"("})",  // id twice
      R"({"original_payload":)"
      "\n",                                                                 // cut short
      R"({"original_payload":"AA==","payload_encoding":"zstd","id":"z"})",  // newer encoding
      R"({"original_payload":[1,2],"id":"ok"})",                            // plain, readable
      R"({"original_payload":[1,2],"id":"ok"})",                            // its twin
      R"([1,2,3])",                                                         // not an object
  };
  for (const auto& raw : items)
    q.storage().push(dlq::Record{queue, "", "", raw});
  REQUIRE(q.size(queue) == items.size());

  // By id: the entry whose id appears twice answers to the last one (as json.loads); the
  // twins are one id: one of them moves.
  auto r = q.replay_ids(queue, {uuid_b, "ok", "ok", "z", "missing"});
  CHECK(r.replayed == 2);
  CHECK(r.set_aside == 1);  // "z": unknown encoding
  REQUIRE(r.skipped.size() == 2);
  CHECK(q.size(queue) == items.size() - 3);

  r = q.replay_all(queue);
  CHECK(r.examined == items.size() - 3);
  CHECK(r.replayed == 2);   // {"original_payload": 7 ...} and the other twin
  CHECK(r.set_aside == 4);  // "", NULs, cut short, [1,2,3]
  CHECK(q.size(queue) == 0);
  CHECK(q.corrupt_size(queue) == 5);
}

}  // namespace

TEST_CASE("hostile items — memory", "[memory]") {
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  hostile_items(q);
  std::vector<std::string> got;
  while (auto p = q.storage().source_pop("orders"))
    got.push_back(*p);
  CHECK(got == std::vector<std::string>{"1", "[1,2]", "7", "[1,2]"});
}

#ifdef DLQ_TEST_HAVE_REDIS
TEST_CASE("hostile items — Redis", "[redis]") {
  const std::string url = dlq::test::shared_redis_url();
  dlq::DeadLetterQueue<dlq::RedisListStorage> q(
      dlq::RedisListStorage(url, dlq::test::unique_layout()));
  hostile_items(q);
  dlq::test::RawClient raw(url);
  CHECK(raw.strings({"LRANGE", q.storage().source_key("orders"), "0", "-1"}) ==
        std::vector<std::string>{"1", "[1,2]", "7", "[1,2]"});
}
#endif

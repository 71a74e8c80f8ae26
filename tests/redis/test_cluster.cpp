// RedisListStorage on a real 3-master Redis Cluster (ctest fixture `redis_cluster`): slot
// hashing, routing, queues spread over every master, the front end across nodes, MOVED / ASK
// / TRYAGAIN followed (or reported with a typed error when they do not end), a slot migrated
// while a replay runs (nothing lost, nothing doubled), layouts a cluster cannot hold, and the
// plain shared server (fixture `redis`) still taken as plain.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/redis/cluster.hpp"
#include "dlq/redis/list_storage.hpp"
#include "redis/cluster_test_util.hpp"
#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"

namespace test_cluster {

using namespace dlq;
using dlq::test::failure;
using dlq::test::queues_on;
using dlq::test::RawCluster;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("key_slot agrees with CLUSTER KEYSLOT, hash tags included", "[redis][cluster]") {
  RawCluster raw;
  for (const std::string key :
       {"foo", "", "dlq:{orders}", "queue:{orders}", "dlq:{orders}:corrupt", "{user1000}.following",
        "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{}", "}{", "a{b", "\xff\x00\x01",
        "dlq:{}x}", "dlq:{a}b}:receipt:1"}) {
    CAPTURE(key);
    CHECK(static_cast<int>(redis::key_slot(key)) == raw.keyslot(key));
  }
  CHECK(redis::crc16("123456789") == 0x31C3);  // the XMODEM check value
}

TEST_CASE("replicas_to_ack is refused on Redis Cluster before anything is written",
          "[redis][cluster][replica_ack]") {
  RawCluster raw;
  RedisListOptions o = test::unique_layout();
  o.replicas_to_ack = 1;
  RedisListStorage storage(test::cluster_url(), o);
  const std::string envelope = R"({"original_payload":{},"queue":"q","error":"e"})";
  try {
    storage.push(Record{"q", {}, {}, envelope});
    FAIL("a push with replicas_to_ack = 1 was accepted by a cluster");
  } catch (const dlq::invalid_argument& e) {
    CHECK(std::string(e.what()).find("not supported on Redis Cluster") != std::string::npos);
  }
  CHECK_THROWS_AS(storage.cluster_mode(), dlq::invalid_argument);
  RedisListOptions off = o;  // the same keys, without the option: nothing was pushed
  off.replicas_to_ack = 0;
  CHECK(RedisListStorage(test::cluster_url(), off).size("q", ListKind::dead) == 0);
}

TEST_CASE("queues on every master: send, batch, sizes, queues and replay across nodes",
          "[redis][cluster]") {
  RawCluster raw;
  const std::string prefix = test::unique_prefix();
  RedisListStorage storage(test::cluster_url(), test::unique_layout(prefix));
  REQUIRE(storage.cluster_mode());
  std::vector<std::string> names;
  for (int port : raw.ports()) {
    auto on = queues_on(raw, storage, port, 2, "q" + std::to_string(port) + "-");
    REQUIRE(on.size() == 2);
    names.insert(names.end(), on.begin(), on.end());
  }
  std::sort(names.begin(), names.end());
  DeadLetterQueue<RedisListStorage&> q(storage);

  // One send per queue, then one batch across all six queues (three masters).
  std::map<std::string, std::vector<std::string>> sent;
  for (const auto& n : names) {
    q.send_to_dlq(n, "first-" + n, failure("e"));
    sent[n].push_back("first-" + n);
  }
  std::vector<FailedJob> jobs;
  for (int i = 0; i < 30; ++i) {
    const std::string& n = names[static_cast<std::size_t>(i * 7) % names.size()];
    jobs.push_back(FailedJob{n, "job-" + std::to_string(i), failure("batch")});
    sent[n].push_back("job-" + std::to_string(i));
  }
  CHECK(q.send_batch(jobs).size() == jobs.size());

  CHECK(q.queues() == names);
  const auto summary = q.summary();
  REQUIRE(summary.size() == names.size());
  for (const auto& n : names) {
    CHECK(summary.at(n) == sent[n].size());
    CHECK(q.size(n) == sent[n].size());
    // The dead list really is on the master that owns its slot.
    CHECK(raw.node(raw.owner(storage.key(n, ListKind::dead)))
              .integer({"LLEN", storage.key(n, ListKind::dead)}) ==
          static_cast<long long>(sent[n].size()));
  }
  // Every master holds some of this test's keys.
  for (int port : raw.ports()) {
    CHECK_FALSE(raw.node(port).strings({"KEYS", prefix + "*"}).empty());
  }

  for (const auto& n : names) {
    const auto report = q.replay_all(n);
    CHECK(report.replayed == sent[n].size());
    CHECK(raw.list(storage.source_key(n)) == sent[n]);
    CHECK(q.size(n) == 0);
  }
  CHECK(q.queues().empty());
}

TEST_CASE("a stale slot map follows MOVED; a migrating slot follows ASK", "[redis][cluster]") {
  RawCluster raw;
  RedisListStorage storage(test::cluster_url(), test::unique_layout());
  REQUIRE(storage.cluster_mode());
  const auto& ports = raw.ports();
  const std::string queue = queues_on(raw, storage, ports[1], 1, "moved-").at(0);
  const std::string dead = storage.key(queue, ListKind::dead);
  const int slot = raw.keyslot(dead);
  storage.push(Record{queue, "", "", "one"});
  const auto before = storage.router().stats();

  // MOVED: the slot (and its key) now lives on ports[2]; the storage's map says ports[1].
  raw.migrate(slot, ports[1], ports[2]);
  CHECK(storage.push(Record{queue, "", "", "two"}) == 2);
  CHECK(storage.router().stats().moved > before.moved);
  CHECK(raw.owner(dead) == ports[2]);
  CHECK(raw.node(ports[2]).list(dead) == std::vector<std::string>{"one", "two"});

  // ASK: the slot is migrating back to ports[1] and the (empty) corrupt list is not on the
  // source: a push to it is sent to the target with ASKING.
  const std::string corrupt = storage.key(queue, ListKind::corrupt);
  raw.begin_migration(slot, ports[2], ports[1]);
  const auto mid = storage.router().stats();
  CHECK(storage.size(queue, ListKind::corrupt) == 0);  // absent on the source: ASK
  CHECK(storage.router().stats().ask > mid.ask);
  CHECK(storage.size(queue, ListKind::dead) == 2);  // still on the source: no redirection
  raw.move_keys(slot, ports[2], ports[1]);
  CHECK(storage.range(queue, ListKind::dead, 0, 10) == std::vector<std::string>{"one", "two"});
  CHECK(storage.push(Record{queue, "", "", "three"}) == 3);  // RPUSH after ASK, on the target
  raw.end_migration(slot, ports[1]);
  CHECK(raw.node(ports[1]).list(dead) == std::vector<std::string>{"one", "two", "three"});
  CHECK(storage.size(queue, ListKind::dead) == 3);
}

TEST_CASE("a script during an unfinished migration gets a typed error and moves nothing",
          "[redis][cluster]") {
  RawCluster raw;
  RedisListStorage storage(test::cluster_url(), test::unique_layout());
  REQUIRE(storage.cluster_mode());
  const auto& ports = raw.ports();
  const std::string queue = queues_on(raw, storage, ports[0], 1, "stuck-").at(0);
  const std::string dead = storage.key(queue, ListKind::dead);
  const int slot = raw.keyslot(dead);
  DeadLetterQueue<RedisListStorage&> q(storage);
  for (int i = 0; i < 5; ++i)
    q.send_to_dlq(queue, "p" + std::to_string(i), failure("e"));

  // Migration begun and never finished: the replay script needs its receipt key, which is
  // on neither node, so the source says ASK and the target TRYAGAIN until the bound.
  raw.begin_migration(slot, ports[0], ports[1]);
  const auto start = std::chrono::steady_clock::now();
  try {
    q.replay_all(queue);
    FAIL("expected a reply_error");
  } catch (const reply_error& e) {
    CHECK(e.code() == "TRYAGAIN");
    CHECK_FALSE(e.outcome_unknown());
    CHECK(contains(e.what(), "hash slot " + std::to_string(slot)));
    CHECK(contains(e.what(), "nothing was executed"));
  }
  CHECK(test::elapsed_ms(start) < 10000);
  CHECK(storage.router().stats().retries >= 10);
  raw.cancel_migration(slot, ports[0], ports[1]);
  CHECK(raw.list(dead).size() == 5);
  CHECK(raw.list(storage.source_key(queue)).empty());
  CHECK(q.replay_all(queue).replayed == 5);  // stable again: it works
  CHECK(raw.list(storage.source_key(queue)).size() == 5);
}

TEST_CASE("a slot migrated while replays and sends run: nothing lost, nothing doubled",
          "[redis][cluster]") {
  // Payloads that are not JSON (stored as base64: compare-and-move), then JSON strings (the
  // fast path's scripts meet the migration).
  const bool json = GENERATE(false, true);
  INFO((json ? "JSON payloads (fast path)" : "base64 payloads (compare-and-move)"));
  auto payload = [json](const std::string& tag) { return json ? "\"" + tag + "\"" : tag; };
  RawCluster raw;
  const auto& ports = raw.ports();
  RedisListOptions layout = test::unique_layout();
  RedisListStorage storage(test::cluster_url(), layout);
  REQUIRE(storage.cluster_mode());
  const std::string queue = queues_on(raw, storage, ports[2], 1, "mig-").at(0);
  const std::string dead = storage.key(queue, ListKind::dead);
  const std::string source = storage.source_key(queue);
  const int slot = raw.keyslot(dead);

  Options options;
  options.replay_batch_items = 25;  // many small steps, so that some meet the migration
  DeadLetterQueue<RedisListStorage&> q(storage, options);
  constexpr int initial = 3000;
  std::vector<FailedJob> jobs;
  for (int i = 0; i < initial; ++i)
    jobs.push_back(FailedJob{queue, payload("i" + std::to_string(i)), failure("e")});
  q.send_batch(jobs);

  // A second storage (its own slot map) sends while the first replays and the slot moves
  // ports[2] -> ports[0] -> ports[1].
  RedisListStorage sender_storage(test::cluster_url(), layout);
  DeadLetterQueue<RedisListStorage&> sender(sender_storage);
  std::atomic<bool> stop{false};
  std::atomic<int> sent{0};
  std::string producer_error;
  std::string replayer_error;
  std::thread producer([&] {
    try {
      for (int i = 0; i < 100000 && !stop.load(); ++i) {
        sender.send_to_dlq(queue, payload("s" + std::to_string(i)), failure("late"));
        sent.fetch_add(1);
      }
    } catch (const std::exception& e) {
      producer_error = e.what();
    }
  });
  std::size_t replayed = 0;
  std::size_t rounds = 0;
  std::thread replayer([&] {
    try {
      for (; rounds < 100000 && !stop.load(); ++rounds)
        replayed += q.replay_all(queue).replayed;
    } catch (const std::exception& e) {
      replayer_error = e.what();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  raw.begin_migration(slot, ports[2], ports[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  raw.move_keys(slot, ports[2], ports[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  raw.end_migration(slot, ports[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  raw.migrate(slot, ports[0], ports[1]);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  stop.store(true);
  producer.join();
  replayer.join();
  CHECK(producer_error.empty());
  CHECK(replayer_error.empty());
  INFO("replay_all rounds during the migrations: " << rounds);
  replayed += q.replay_all(queue).replayed;

  // Count every entry: each sent payload is in exactly one of the two lists, once.
  CHECK(raw.owner(dead) == ports[1]);
  const auto left = raw.list(dead);
  const auto moved = raw.list(source);
  CHECK(left.empty());
  CHECK(moved.size() == replayed);
  std::multiset<std::string> all(moved.begin(), moved.end());
  for (const auto& raw_entry : left) {
    auto e = parse_entry(raw_entry);
    all.insert(e.payload);
  }
  const std::size_t expected = static_cast<std::size_t>(initial + sent.load());
  CHECK(all.size() == expected);
  for (int i = 0; i < initial; ++i)
    CHECK(all.count(payload("i" + std::to_string(i))) == 1);
  for (int i = 0; i < sent.load(); ++i)
    CHECK(all.count(payload("s" + std::to_string(i))) == 1);
  const auto stats = storage.router().stats();
  const auto sender_stats = sender_storage.router().stats();
  INFO("replayer moved " << stats.moved << " ask " << stats.ask << " retries " << stats.retries
                         << "; sender moved " << sender_stats.moved << " ask " << sender_stats.ask
                         << " retries " << sender_stats.retries);
  CHECK(stats.moved + sender_stats.moved >= 2);
  CHECK(sent.load() > 0);
}

TEST_CASE("layouts a cluster cannot hold get a typed error before anything is written",
          "[redis][cluster]") {
  RawCluster raw;
  const std::string prefix = test::unique_prefix();
  RedisListOptions seed;  // the Python seed's layout
  seed.dead_key = prefix + "dlq:*";
  seed.source_key = prefix + "queue:*";
  seed.corrupt_key = prefix + "dlq:*:corrupt";
  RedisListStorage storage(test::cluster_url(), seed);  // lazy: constructing does not connect
  try {
    storage.cluster_mode();
    FAIL("expected invalid_argument");
  } catch (const dlq::invalid_argument& e) {
    CHECK(contains(e.what(), "[dlq.redis] RedisListOptions"));
    CHECK(contains(e.what(), "'" + prefix + "dlq:*'"));
    CHECK(contains(e.what(), "every key pattern must put the queue in a hash tag, e.g. dlq:{*}"));
  }
  CHECK_THROWS_AS(storage.push(Record{"orders", "", "", "x"}), dlq::invalid_argument);
  CHECK_THROWS_AS(storage.queues(), dlq::invalid_argument);
  DeadLetterQueue<RedisListStorage&> q(storage);
  CHECK_THROWS_AS(q.send_to_dlq("orders", "x", failure("e")), dlq::invalid_argument);
  for (int port : raw.ports())
    CHECK(raw.node(port).strings({"KEYS", prefix + "*"}).empty());

  // Tags that differ between the patterns: also refused.
  RedisListOptions mixed = test::unique_layout(prefix);
  mixed.corrupt_key = "{" + prefix + "}:corrupt:*";
  RedisListStorage mixed_storage(test::cluster_url(), mixed);
  CHECK_THROWS_AS(mixed_storage.cluster_mode(), dlq::invalid_argument);

  // A tag that holds more than the queue is fine when all three patterns share it; not
  // when they differ.
  RedisListOptions salted;
  salted.dead_key = prefix + "dlq:{*.eu}";
  salted.source_key = prefix + "queue:{*.eu}";
  salted.corrupt_key = prefix + "dlq:{*.eu}:corrupt";
  RedisListStorage salted_storage(test::cluster_url(), salted);
  CHECK(salted_storage.cluster_mode());
  CHECK(salted_storage.push(Record{"orders", "", "", "x"}) == 1);
  CHECK(raw.list(prefix + "dlq:{orders.eu}") == std::vector<std::string>{"x"});
  salted.source_key = prefix + "queue:{*}";
  RedisListStorage unsalted_source(test::cluster_url(), salted);
  CHECK_THROWS_AS(unsalted_source.cluster_mode(), dlq::invalid_argument);

  // A queue name that empties the hash tag cannot be replayed atomically.
  RedisListStorage tagged(test::cluster_url(), test::unique_layout(prefix));
  RedisListStorage::replay_cursor cursor;
  CHECK_THROWS_AS(tagged.replay_step("}x", cursor, 10, [](std::string_view, Decision&) {}),
                  dlq::invalid_argument);
}

TEST_CASE("replay to a queue on another slot is refused and moves nothing", "[redis][cluster]") {
  RawCluster raw;
  RedisListStorage storage(test::cluster_url(), test::unique_layout());
  DeadLetterQueue<RedisListStorage&> q(storage);
  std::string other = "retry-0";
  for (int i = 1; redis::key_slot(storage.source_key(other)) ==
                  redis::key_slot(storage.key("orders", ListKind::dead));
       ++i)
    other = "retry-" + std::to_string(i);
  for (int i = 0; i < 3; ++i)
    q.send_to_dlq("orders", "p" + std::to_string(i), failure("e"));
  ReplayOptions o;
  o.to_queue = other;
  try {
    q.replay("orders", o);
    FAIL("expected invalid_argument");
  } catch (const dlq::invalid_argument& e) {
    CHECK(contains(e.what(), "different hash slots"));
    CHECK(contains(e.what(), "nothing was moved"));
  }
  CHECK(q.size("orders") == 3);
  CHECK(raw.list(storage.source_key(other)).empty());
  CHECK(raw.list(storage.source_key("orders")).empty());
}

TEST_CASE("a plain server is taken as plain, and the seed layout works there", "[redis][cluster]") {
  const std::string prefix = test::unique_prefix();
  RedisListOptions seed;
  seed.dead_key = prefix + "dlq:*";
  seed.source_key = prefix + "queue:*";
  seed.corrupt_key = prefix + "dlq:*:corrupt";
  RedisListStorage storage(test::shared_redis_url(), seed);
  CHECK_FALSE(storage.cluster_mode());
  DeadLetterQueue<RedisListStorage&> q(storage);
  q.send_to_dlq("orders", "x", failure("e"));
  CHECK(q.queues() == std::vector<std::string>{"orders"});
  CHECK(q.replay_all("orders").replayed == 1);
  CHECK(storage.router().masters().size() == 1);
  CHECK(storage.router().stats().refreshes == 0);
}

TEST_CASE("shared sends from many threads while their slot migrates: each stored once, in order",
          "[redis][cluster][shared_sends]") {
  RawCluster raw;
  RedisListOptions o = test::unique_layout();
  o.pool.send_batches = 1;  // batches as large as they get
  RedisListStorage storage(test::cluster_url(), o);
  REQUIRE(storage.cluster_mode());
  const auto& ports = raw.ports();
  const std::string queue = queues_on(raw, storage, ports[1], 1, "shared-moving-").at(0);
  const std::string dead = storage.key(queue, ListKind::dead);
  const int slot = raw.keyslot(dead);
  constexpr std::size_t threads = 8;
  constexpr std::size_t per_thread = 400;
  std::atomic<std::size_t> bad_length{0};
  std::atomic<std::size_t> errors{0};
  std::atomic<std::size_t> sent{0};
  std::vector<std::thread> senders;
  for (std::size_t t = 0; t < threads; ++t) {
    senders.emplace_back([&, t] {
      std::size_t last = 0;
      for (std::size_t i = 0; i < per_thread; ++i) {
        try {
          const std::size_t length = storage.push(
              Record{queue, "", "", "t" + std::to_string(t) + "-" + std::to_string(i)});
          if (length <= last) ++bad_length;
          last = length;
        } catch (const dlq::error&) {
          ++errors;
        }
        ++sent;
      }
    });
  }
  auto wait_sent = [&](std::size_t n) {
    while (sent < n)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  wait_sent(threads * per_thread / 5);
  raw.migrate(slot, ports[1], ports[2]);  // MOVED for every batched send after it
  wait_sent(threads * per_thread / 2);
  raw.begin_migration(slot, ports[2], ports[1]);  // ASK once the key has left the source
  raw.move_keys(slot, ports[2], ports[1]);
  wait_sent(threads * per_thread * 3 / 4);
  raw.end_migration(slot, ports[1]);
  for (auto& th : senders)
    th.join();
  CHECK(errors == 0);
  CHECK(bad_length == 0);
  const auto stored = raw.node(ports[1]).list(dead);
  CHECK(stored.size() == threads * per_thread);
  std::map<std::string, std::size_t> next;
  std::size_t out_of_order = 0;
  for (const auto& e : stored) {
    const auto dash = e.find('-');
    const std::string t = e.substr(0, dash);
    if (std::stoul(e.substr(dash + 1)) != next[t]) ++out_of_order;
    next[t] = std::stoul(e.substr(dash + 1)) + 1;
  }
  CHECK(out_of_order == 0);
  CHECK(storage.router().stats().moved > 0);
}

}  // namespace test_cluster

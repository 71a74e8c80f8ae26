// dlq::DeadLetterQueue over dlq::KeyValueStorage: the Rust seed's one-record-per-job
// semantics, corrupt records written straight into a store, batched reads, custom sinks.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/kv/sinks.hpp"
#include "kv_fixtures.hpp"
#include "support/catch.hpp"

namespace {

dlq::Failure job_failure(std::string job_id, std::int64_t attempt, std::string error) {
  dlq::Failure f;
  f.job_id = std::move(job_id);
  f.attempt = attempt;
  f.error = std::move(error);
  f.worker = "w1";
  return f;
}

/// Counts the calls a store receives (wraps any store).
template <class Store>
struct CountingStore {
  Store inner;
  std::shared_ptr<std::atomic<int>> loads = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> lists = std::make_shared<std::atomic<int>>(0);
  void save(const std::vector<dlq::kv::Write>& w) { inner.save(w); }
  std::optional<dlq::kv::Item> load(std::string_view c, std::string_view id) {
    ++*loads;
    return inner.load(c, id);
  }
  std::vector<dlq::kv::Item> list(std::string_view c, const dlq::kv::Window& w) {
    ++*lists;
    return inner.list(c, w);
  }
  std::size_t remove(const std::vector<dlq::kv::Removal>& r) { return inner.remove(r); }
  std::size_t count(std::string_view c) { return inner.count(c); }
};

}  // namespace

TEMPLATE_LIST_TEST_CASE("dead-lettering the same job again replaces its record (the Rust seed)",
                        "[kv][front-end]", kvtest::kv_fixtures) {
  TestType fx;
  dlq::KeyValueStorage storage(fx.make());
  auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1796000000));
  dlq::Options options;
  options.clock = [&now] { return now; };
  dlq::DeadLetterQueue<decltype(storage)&> q(storage, options);

  CHECK(q.send_to_dlq("orders", R"({"task":1})", job_failure("task-1", 1, "timeout")) == "task-1");
  now += std::chrono::seconds(5);
  q.send_to_dlq("orders", R"({"task":2})", job_failure("task-2", 1, "boom"));
  now += std::chrono::seconds(5);
  q.send_to_dlq("orders", R"({"task":1})", job_failure("task-1", 2, "timeout again"));
  const std::string no_job = q.send_to_dlq("orders", R"({"task":3})", "no job id", 1);

  CHECK(q.size("orders") == 3);
  const auto page = q.peek("orders", 0, 10);
  REQUIRE(page.size() == 3);
  CHECK(page[0].id == "task-2");
  CHECK(page[1].id == "task-1");  // replaced: moved to the end, as a new failure
  CHECK(page[1].attempt == 2);
  CHECK(page[1].error == "timeout again");
  CHECK(page[1].dead_lettered_at == "2026-11-30T00:53:30.000000+00:00");
  CHECK(page[2].id == no_job);  // a fresh id for an entry without a job id
  CHECK(no_job.size() == 36);

  auto got = q.get("orders", "task-1");
  REQUIRE(got);
  CHECK(got->attempt == 2);
  CHECK(q.remove("orders", "task-2"));
  CHECK_FALSE(q.get("orders", "task-2"));
  CHECK(q.replay_ids("orders", {"task-1"}).replayed == 1);
  CHECK(storage.sink().contents("orders") == std::vector<std::string>{R"({"task":1})"});
  CHECK(q.size("orders") == 1);
}

TEMPLATE_LIST_TEST_CASE(
    "a corrupt record written straight into the store is reported and set aside",
    "[kv][front-end][bad-input]", kvtest::kv_fixtures) {
  TestType fx;
  auto store = fx.make();
  dlq::KeyValueStorage storage(store);
  dlq::DeadLetterQueue<decltype(storage)&> q(storage);
  q.send_to_dlq("orders", R"({"n":1})", job_failure("job-1", 1, "e"));
  const std::string coll = storage.collection("orders", dlq::ListKind::dead);
  store.save({dlq::kv::Write{coll, "job-7", "\x01garbage, not an envelope"}});
  q.send_to_dlq("orders", R"({"n":2})", job_failure("job-2", 1, "e"));

  const auto page = q.peek("orders", 0, 10);
  REQUIRE(page.size() == 3);
  CHECK(page[1].ok() == false);
  CHECK_FALSE(page[1].problem.empty());
  const std::string bad_id = page[1].id;  // derived from the bytes
  CHECK(bad_id.rfind("raw-", 0) == 0);
  CHECK(q.get("orders", bad_id));  // addressable by that id although stored under job-7

  const auto report = q.replay_all("orders");
  CHECK(report.replayed == 2);
  CHECK(report.set_aside == 1);
  REQUIRE(report.skipped.size() == 1);
  CHECK(report.skipped[0].id == bad_id);
  CHECK(report.skipped[0].reason == dlq::SkipReason::corrupt);
  CHECK(storage.sink().contents("orders") == std::vector<std::string>{R"({"n":1})", R"({"n":2})"});
  CHECK(q.size("orders") == 0);
  REQUIRE(q.corrupt_size("orders") == 1);
  CHECK(q.corrupt("orders")[0].raw == "\x01garbage, not an envelope");
  CHECK(storage.find("orders", dlq::ListKind::corrupt, "job-7"));  // moved under its key
}

TEMPLATE_LIST_TEST_CASE("replay delivers exact payload bytes to a caller-supplied sink",
                        "[kv][front-end][replay]", kvtest::kv_fixtures) {
  TestType fx;
  std::vector<std::pair<std::string, std::string>> delivered;
  int calls = 0;
  dlq::KeyValueStorage storage(fx.make(), [&](const std::vector<dlq::kv::Message>& batch) {
    ++calls;
    for (const auto& m : batch)
      delivered.emplace_back(m.queue, m.payload);
  });
  dlq::Options options;
  options.replay_batch_items = 100;
  dlq::DeadLetterQueue<decltype(storage)&> q(storage, options);
  const std::string binary("\x00\xff\x10 not json", 12);
  q.send_to_dlq("orders", R"({ "spaced" :  [ 1 , 2 ], "big": 12345678901234567 })", "e");
  q.send_to_dlq("orders", binary, "e");
  dlq::ReplayOptions o;
  o.to_queue = "orders-retry";
  CHECK(q.replay("orders", o).replayed == 2);
  REQUIRE(delivered.size() == 2);
  CHECK(delivered[0].first == "orders-retry");
  CHECK(delivered[0].second == R"({ "spaced" :  [ 1 , 2 ], "big": 12345678901234567 })");
  CHECK(delivered[1].second == binary);
  CHECK(calls <= 2);  // the front end's first batch holds one entry, then it grows
}

TEST_CASE("peek costs one batched read, never one load per entry", "[kv][front-end]") {
  CountingStore<dlq::kv::MemoryStore> store;
  dlq::KeyValueStorage storage(store);
  dlq::DeadLetterQueue<decltype(storage)&> q(storage);
  std::vector<dlq::FailedJob> jobs;
  for (int i = 0; i < 500; ++i)
    jobs.push_back({"orders", "{}", job_failure("job-" + std::to_string(i), 1, "e")});
  q.send_batch(jobs);
  const int loads = *store.loads;
  const int lists = *store.lists;
  CHECK(q.peek("orders", 0, 500).size() == 500);
  CHECK(*store.lists - lists == 1);
  CHECK(*store.loads - loads == 0);
  CHECK(q.get("orders", "job-250"));  // a direct lookup: one load, no listing
  CHECK(*store.loads - loads == 1);
  CHECK(*store.lists - lists == 1);
}

TEST_CASE("a DeadLetterQueue over the in-memory key-value store needs no arguments",
          "[kv][front-end]") {
  dlq::DeadLetterQueue<dlq::KeyValueStorage<dlq::kv::MemoryStore>> q;
  dlq::Failure f = job_failure("job-1", 1, "e");
  q.send_to_dlq("orders", "{}", f);
  CHECK(q.replay_all("orders").replayed == 1);
  CHECK(q.storage().sink().pop("orders") == std::optional<std::string>("{}"));
}

// --- policies on the key-value backend: shared poison counts, exact bounded sends, retention
// without a size() call per send

TEMPLATE_LIST_TEST_CASE("two DeadLetterQueues sharing a store reach the park limit together",
                        "[kv][front-end][poison]", kvtest::kv_fixtures) {
  TestType fx;
  auto store = fx.make();
  dlq::KeyValueStorage storage_a(store);
  dlq::KeyValueStorage storage_b(store);  // a second adapter and front end: a second worker
  dlq::Options options;
  options.poison_guard.park_after = 3;
  dlq::DeadLetterQueue<decltype(storage_a)&> a(storage_a, options);
  dlq::DeadLetterQueue<decltype(storage_b)&> b(storage_b, options);
  if constexpr (dlq::detail::has_bump_count<decltype(storage_a)>::value) {
    // Each worker dead-letters the job twice: four failures in all, so the fourth is parked
    // (each worker on its own would have counted only two).
    a.send_to_dlq("orders", R"({"job":9})", job_failure("job-9", 1, "e"));
    b.send_to_dlq("orders", R"({"job":9})", job_failure("job-9", 2, "e"));
    a.send_to_dlq("orders", R"({"job":9})", job_failure("job-9", 3, "e"));
    CHECK_FALSE(a.get("orders", "job-9")->parked);
    b.send_to_dlq("orders", R"({"job":9})", job_failure("job-9", 4, "e"));
    const auto e = a.get("orders", "job-9");
    REQUIRE(e);
    CHECK(e->parked);
    CHECK(e->dead_letter_count == 4);
    CHECK(a.counters().parked + b.counters().parked == 1);
    // Counted by payload fingerprint when there is no job id: the same across workers too.
    for (int i = 0; i < 2; ++i) {
      a.send_to_dlq("orders", "same bytes", "e");
      b.send_to_dlq("orders", "same bytes", "e");
    }
    CHECK(a.counters().parked + b.counters().parked == 2);
    const auto last = a.peek("orders", 0, 10).back();
    CHECK(last.payload == "same bytes");
    CHECK(last.dead_letter_count == 4);
    CHECK(last.parked);
  } else {
    // A store without increment: each front end counts in its own process (the fallback).
    for (int i = 0; i < 2; ++i) {
      a.send_to_dlq("orders", "{}", job_failure("job-9", 1, "e"));
      b.send_to_dlq("orders", "{}", job_failure("job-9", 1, "e"));
    }
    CHECK(a.get("orders", "job-9")->dead_letter_count == 2);
    CHECK(a.counters().parked + b.counters().parked == 0);
  }
}

TEMPLATE_LIST_TEST_CASE("Overflow::reject is exact under 4 concurrent senders",
                        "[kv][front-end][retention][threads]", kvtest::kv_fixtures) {
  TestType fx;
  dlq::KeyValueStorage storage(fx.make());
  if constexpr (dlq::detail::has_push_bounded<decltype(storage)>::value) {
    dlq::Options options;
    options.retention.max_length = 30;
    options.retention.overflow = dlq::Overflow::reject;
    dlq::DeadLetterQueue<decltype(storage)&> q(storage, options);
    constexpr int threads = 4;
    constexpr int per_thread = 25;
    std::atomic<int> stored{0};
    std::atomic<int> refused{0};
    std::atomic<int> other_errors{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (int i = 0; i < per_thread; ++i) {
          try {
            q.send_to_dlq("orders", "{}",
                          job_failure("t" + std::to_string(t) + "-" + std::to_string(i), 1, "e"));
            ++stored;
          } catch (const dlq::queue_full_error&) {
            ++refused;
          } catch (...) {
            ++other_errors;
          }
        }
      });
    }
    for (auto& th : pool)
      th.join();
    CHECK(other_errors == 0);
    CHECK(stored == 30);
    CHECK(refused == threads * per_thread - 30);
    CHECK(q.size("orders") == 30);
    CHECK(q.counters().rejected == static_cast<std::uint64_t>(threads * per_thread - 30));
    // A job already in the full queue may fail again: its record is replaced, not added.
    const std::string kept = q.peek("orders", 0, 1).at(0).id;
    CHECK_NOTHROW(q.send_to_dlq("orders", "{}", job_failure(kept, 2, "again")));
    CHECK(q.size("orders") == 30);
    CHECK(q.peek("orders", 29, 1).at(0).id == kept);
  }
}

namespace {
/// Counts count() calls; forwards every optional member the wrapped store has.
struct CountCallsStore {
  dlq::kv::MemoryStore inner;
  std::shared_ptr<std::atomic<int>> counts = std::make_shared<std::atomic<int>>(0);
  /// save_and_count calls (each a count(*) of the collection on SQLite and PostgreSQL)
  std::shared_ptr<std::atomic<int>> counted_saves = std::make_shared<std::atomic<int>>(0);
  void save(const std::vector<dlq::kv::Write>& w) { inner.save(w); }
  std::size_t save_and_count(const std::vector<dlq::kv::Write>& w) {
    ++*counted_saves;
    return inner.save_and_count(w);
  }
  std::optional<dlq::kv::Item> load(std::string_view c, std::string_view id) {
    return inner.load(c, id);
  }
  std::vector<dlq::kv::Item> list(std::string_view c, const dlq::kv::Window& w) {
    return inner.list(c, w);
  }
  std::size_t remove(const std::vector<dlq::kv::Removal>& r) { return inner.remove(r); }
  std::size_t count(std::string_view c) {
    ++*counts;
    return inner.count(c);
  }
};
}  // namespace

TEST_CASE("evict_oldest takes the length from the push: no count() call per send",
          "[kv][front-end][retention]") {
  CountCallsStore store;
  dlq::KeyValueStorage storage(store);
  dlq::Options options;
  options.retention.max_length = 3;
  dlq::DeadLetterQueue<decltype(storage)&> q(storage, options);
  for (int i = 0; i < 10; ++i)
    q.send_to_dlq("orders", std::to_string(i), "e");
  CHECK(*store.counts == 0);
  CHECK(q.size("orders") == 3);
  CHECK(q.counters().evicted == 7);
  std::vector<std::string> left;
  for (const auto& e : q.peek("orders", 0, 10))
    left.push_back(e.payload);
  CHECK(left == std::vector<std::string>{"7", "8", "9"});
}

TEST_CASE("a send to an unbounded queue does not count the queue's records",
          "[kv][front-end][cost]") {
  // Without Retention::max_length the dead list's length is not needed; reading it with
  // save_and_count made every send on PostgreSQL linear in the queue's length (one send:
  // 4 ms on an empty queue, 33 ms at 100 000 entries, 119 ms at 500 000 — an outage's
  // backlog slowing every further send).
  CountCallsStore store;
  dlq::KeyValueStorage storage(store);
  dlq::DeadLetterQueue<decltype(storage)&> q(storage);
  for (int i = 0; i < 10; ++i)
    q.send_to_dlq("orders", std::to_string(i), "e");
  q.send_batch({{"orders", "a", job_failure("a", 1, "e")},
                {"billing", "b", job_failure("b", 1, "e")}});
  CHECK(*store.counted_saves == 0);
  CHECK(*store.counts == 0);
  CHECK(q.size("orders") == 11);
  CHECK(q.size("billing") == 1);
}

// Issue 11 item 4: remove(id) and replay agree on what happened to an entry. A remove that
// lands while the replay is pushing the entry's payload must not say "removed" for an entry
// that was delivered: the replay wins (remove returns false), and the report says replayed.
TEMPLATE_LIST_TEST_CASE(
    "remove during the replay's push of that entry returns false: the replay "
    "delivered it",
    "[kv][front-end][replay][remove]", kvtest::kv_fixtures) {
  TestType fx;
  dlq::kv::MemoryQueues queues;
  std::function<void()> during_push;
  dlq::KeyValueStorage storage(fx.make(), [&](const std::vector<dlq::kv::Message>& batch) {
    queues.push_many(batch);
    if (during_push) {
      auto f = std::move(during_push);
      during_push = nullptr;
      f();
    }
  });
  dlq::DeadLetterQueue<decltype(storage)&> q(storage);
  q.send_to_dlq("orders", R"({"n":1})", job_failure("job-1", 1, "e"));
  q.send_to_dlq("orders", R"({"n":2})", job_failure("job-2", 1, "e"));
  std::optional<bool> removed_during;
  std::optional<bool> removed_other;
  during_push = [&] {
    removed_during = q.remove("orders", "job-1");  // the entry being pushed right now
  };
  const auto report = q.replay_ids("orders", {"job-1"});
  REQUIRE(removed_during.has_value());
  CHECK_FALSE(*removed_during);  // it was replayed, not removed
  CHECK(report.replayed == 1);
  CHECK(queues.contents("orders") == std::vector<std::string>{R"({"n":1})"});
  CHECK(storage.superseded() == 0);
  CHECK(q.size("orders") == 1);
  CHECK_FALSE(q.get("orders", "job-1"));

  // An entry the step does not hold can still be removed from inside the push.
  q.send_to_dlq("orders", R"({"n":3})", job_failure("job-3", 1, "e"));
  during_push = [&] { removed_other = q.remove("orders", "job-2"); };
  CHECK(q.replay_ids("orders", {"job-3"}).replayed == 1);
  REQUIRE(removed_other.has_value());
  CHECK(*removed_other);
  CHECK(q.size("orders") == 0);
  CHECK(storage.superseded() == 0);
  CHECK(queues.contents("orders") == std::vector<std::string>{R"({"n":1})", R"({"n":3})"});
}

TEMPLATE_LIST_TEST_CASE("purge during the replay's push does not count the entries being pushed",
                        "[kv][front-end][replay][remove]", kvtest::kv_fixtures) {
  TestType fx;
  dlq::kv::MemoryQueues queues;
  std::function<void()> during_push;
  dlq::KeyValueStorage storage(fx.make(), [&](const std::vector<dlq::kv::Message>& batch) {
    queues.push_many(batch);
    if (during_push) {
      auto f = std::move(during_push);
      during_push = nullptr;
      f();
    }
  });
  dlq::DeadLetterQueue<decltype(storage)&> q(storage);
  for (int i = 0; i < 3; ++i)
    q.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}",
                  job_failure("job-" + std::to_string(i), 1, "e"));
  std::size_t purged = 99;
  during_push = [&] { purged = q.purge("orders"); };
  const auto report = q.replay_ids("orders", {"job-0"});
  CHECK(report.replayed == 1);
  CHECK(purged == 2);  // job-1 and job-2; job-0 was being replayed
  CHECK(queues.size("orders") == 1);
  CHECK(q.size("orders") == 0);
  CHECK(storage.superseded() == 0);
}

TEMPLATE_LIST_TEST_CASE(
    "8 threads removing while a replay runs: every entry replayed or removed, "
    "never both (200 rounds)",
    "[kv][front-end][replay][remove][threads]", kvtest::kv_fixtures) {
  TestType fx;
  dlq::kv::MemoryQueues queues;
  dlq::KeyValueStorage storage(fx.make(), [&](const std::vector<dlq::kv::Message>& batch) {
    std::this_thread::yield();  // widen the window between the check and the removal
    queues.push_many(batch);
    std::this_thread::yield();
  });
  dlq::Options options;
  options.replay_batch_items = 2;
  dlq::DeadLetterQueue<decltype(storage)&> q(storage, options);
  constexpr int threads = 8;  // one replayer, seven removers
  constexpr int rounds = 200;
  std::size_t disagreements = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<dlq::FailedJob> jobs;
    for (int i = 0; i < threads - 1; ++i) {
      dlq::FailedJob j;
      j.queue = "orders";
      j.payload = "{\"r\":" + std::to_string(round) + ",\"i\":" + std::to_string(i) + "}";
      j.failure = job_failure("r" + std::to_string(round) + "-" + std::to_string(i), 1, "e");
      jobs.push_back(std::move(j));
    }
    q.send_batch(jobs);
    queues.clear();
    std::atomic<int> ready{0};
    std::vector<char> removed(threads - 1, 0);
    dlq::ReplayReport report;
    std::vector<std::thread> pool;
    pool.emplace_back([&] {
      ++ready;
      while (ready.load() < threads)
        std::this_thread::yield();
      report = q.replay_all("orders");
    });
    for (int i = 0; i < threads - 1; ++i) {
      pool.emplace_back([&, i] {
        ++ready;
        while (ready.load() < threads)
          std::this_thread::yield();
        removed[static_cast<std::size_t>(i)] =
            q.remove("orders", "r" + std::to_string(round) + "-" + std::to_string(i)) ? 1 : 0;
      });
    }
    for (auto& t : pool)
      t.join();
    const auto delivered = queues.contents("orders");
    std::size_t removed_count = 0;
    for (int i = 0; i < threads - 1; ++i) {
      const std::string payload =
          "{\"r\":" + std::to_string(round) + ",\"i\":" + std::to_string(i) + "}";
      const auto n = std::count(delivered.begin(), delivered.end(), payload);
      const bool was_removed = removed[static_cast<std::size_t>(i)] != 0;
      removed_count += was_removed ? 1 : 0;
      if (n + (was_removed ? 1 : 0) != 1) ++disagreements;  // exactly one of the two
    }
    if (report.replayed != delivered.size()) ++disagreements;
    if (q.size("orders") != 0) ++disagreements;
    if (removed_count + delivered.size() != static_cast<std::size_t>(threads - 1)) ++disagreements;
  }
  CHECK(disagreements == 0);
  CHECK(storage.superseded() == 0);
}

// Issue 15 item 5: on keys shared with the Python service, a payload that is not JSON is
// refused instead of stored as base64 (which the Python side would replay as a string).
TEMPLATE_LIST_TEST_CASE("Payloads::json_only refuses non-JSON payloads and stores nothing",
                        "[kv][front-end][bad-input]", kvtest::kv_fixtures) {
  TestType fx;
  dlq::KeyValueStorage storage(fx.make());
  dlq::Options options;
  options.payloads = dlq::Payloads::json_only;
  dlq::DeadLetterQueue<decltype(storage)&> q(storage, options);
  CHECK_THROWS_AS(q.send_to_dlq("orders", "plain text", "e"), dlq::invalid_argument);
  std::vector<dlq::FailedJob> batch(2);
  batch[0].queue = batch[1].queue = "orders";
  batch[0].payload = R"({"ok":1})";
  batch[1].payload = std::string("\x00\x01", 2);
  CHECK_THROWS_AS(q.send_batch(batch), dlq::invalid_argument);
  CHECK(q.size("orders") == 0);                 // nothing of the batch was stored
  q.send_to_dlq("orders", "{\"a\":1}\n", "e");  // JSON with a trailing newline is JSON
  CHECK(q.replay_all("orders").replayed == 1);
  CHECK(storage.sink().contents("orders") == std::vector<std::string>{"{\"a\":1}\n"});
}

TEMPLATE_LIST_TEST_CASE(
    "with the poison guard on, a job already in a full queue may fail again; a refused new "
    "job's count is not bumped",
    "[kv][front-end][retention]", kvtest::kv_fixtures) {
  TestType fx;
  dlq::KeyValueStorage storage(fx.make());
  if constexpr (!dlq::detail::has_push_bounded<decltype(storage)>::value) {
    return;  // a store without push_bounded: the front end checks the length (no replacements)
  } else {
    dlq::Options options;
    options.retention.max_length = 2;
    options.retention.overflow = dlq::Overflow::reject;
    options.poison_guard.park_after = 2;
    dlq::DeadLetterQueue<decltype(storage)&> q(storage, options);
    q.send_to_dlq("orders", "{}", job_failure("a", 1, "e"));
    q.send_to_dlq("orders", "{}", job_failure("b", 1, "e"));
    // "a" fails again after a replay: its record is replaced (no growth) and counted.
    CHECK_NOTHROW(q.send_to_dlq("orders", "{}", job_failure("a", 2, "again")));
    CHECK(q.size("orders") == 2);
    // "c" is refused while the queue is full, three times; once there is room it is stored
    // as its first dead-lettering, not parked.
    for (int i = 0; i < 3; ++i)
      CHECK_THROWS_AS(q.send_to_dlq("orders", "{}", job_failure("c", 1, "e")),
                      dlq::queue_full_error);
    CHECK(q.remove("orders", "b"));
    q.send_to_dlq("orders", "{}", job_failure("c", 1, "e"));
    const auto c = q.get("orders", "c");
    REQUIRE(c);
    CHECK_FALSE(c->parked);
    CHECK(c->dead_letter_count == 1);
  }
}

inline std::string testing_join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v)
    out += x + " ";
  return out;
}

TEMPLATE_LIST_TEST_CASE("remove and purge from inside a replay filter neither deadlock nor double",
                        "[kv][front-end][replay][remove]", kvtest::kv_fixtures) {
  TestType fx;
  dlq::kv::MemoryQueues queues;
  dlq::KeyValueStorage storage(fx.make(), queues);
  dlq::DeadLetterQueue<decltype(storage)&> q(storage);
  for (int i = 0; i < 6; ++i)
    q.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}",
                  job_failure("job-" + std::to_string(i), 1, "e"));
  // The filter removes the entry it is asked about (job-1) and another one (job-4): the
  // removed entries are not replayed, every other one is, each once.
  std::vector<bool> removed;
  dlq::ReplayOptions o;
  std::vector<std::string> seen;
  o.filter = [&](const dlq::Entry& e) {
    seen.push_back(e.id);
    if (e.id == "job-1") removed.push_back(q.remove("orders", "job-1"));
    if (e.id == "job-2" && removed.size() == 1) removed.push_back(q.remove("orders", "job-4"));
    return true;
  };
  const auto report = q.replay("orders", o);
  INFO(::testing_join(seen));
  CHECK(removed == std::vector<bool>{true, true});
  CHECK(queues.contents("orders") ==
        std::vector<std::string>{R"({"n":0})", R"({"n":2})", R"({"n":3})", R"({"n":5})"});
  CHECK(report.replayed == 4);
  CHECK(q.size("orders") == 0);
  // A purge from inside the filter empties the queue; nothing is replayed after it.
  for (int i = 0; i < 3; ++i)
    q.send_to_dlq("orders", "{}", job_failure("p-" + std::to_string(i), 1, "e"));
  queues.clear();
  std::size_t purged = 0;
  o.filter = [&](const dlq::Entry&) {
    if (purged == 0) purged = q.purge("orders");
    return true;
  };
  CHECK(q.replay("orders", o).replayed == 0);
  CHECK(purged == 3);
  CHECK(queues.size("orders") == 0);
  CHECK(q.size("orders") == 0);
}

// The audit trail's retention on the key-value adapter (issue 27, defect 5): records older
// than max_age go with the next append, unreported; the cap (checked on the first and every
// 64th append of an adapter) removes the oldest, and those younger than max_age are counted,
// logged and marked in the trail.
TEMPLATE_LIST_TEST_CASE("the key-value audit trail keeps records by age; its cap's drops show",
                        "[kv][front-end][audit]", kvtest::kv_fixtures) {
  TestType fx;
  auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1796000000));
  dlq::Options options;
  options.clock = [&now] { return now; };
  std::vector<std::string> errors;
  options.log = [&](dlq::LogLevel level, std::string_view m) {
    if (level == dlq::LogLevel::error) errors.emplace_back(m);
  };
  dlq::KeyValueOptions ko;
  ko.audit_retention.max_age = std::chrono::hours(24);
  ko.audit_retention.max_records = 10;
  dlq::KeyValueStorage<typename TestType::store_type> storage(fx.make(), {}, ko);
  CHECK(storage.audit_retention().max_records == 10);
  dlq::DeadLetterQueue<decltype(storage)&> q(storage, options);
  std::vector<std::string> ids;
  for (int i = 0; i < 150; ++i)
    ids.push_back(q.send_to_dlq("orders", std::to_string(i), job_failure("", 1, "e")));

  for (int i = 0; i < 5; ++i)
    CHECK(q.remove("orders", ids[static_cast<std::size_t>(i)]));
  now += std::chrono::hours(25);
  CHECK(q.remove("orders", ids[5]));
  auto trail = q.audit("orders");
  REQUIRE(trail.size() == 1);
  CHECK(trail[0].ids == std::vector<std::string>{ids[5]});
  CHECK(q.counters().audit_dropped == 0);
  CHECK(errors.empty());

  for (std::size_t i = 6; i < ids.size(); ++i)
    CHECK(q.remove("orders", ids[i]));
  trail = q.audit("orders", {}, 100000);
  CHECK(trail.size() <= 10 + 64 + 1);
  std::size_t marks = 0;
  for (const auto& rec : trail)
    if (rec.operation == "audit_dropped") ++marks;
  CHECK(marks > 0);
  const auto c = q.counters();
  CHECK(c.audit_dropped > 0);
  CHECK(c.audit_errors == 0);
  REQUIRE_FALSE(errors.empty());
  CHECK(errors[0].find("audit records younger than the trail's max age were removed by its "
                       "cap") != std::string::npos);
  auto last = std::find_if(trail.rbegin(), trail.rend(),
                           [](const dlq::AuditRecord& r) { return r.operation == "remove"; });
  REQUIRE(last != trail.rend());
  CHECK(last->ids == std::vector<std::string>{ids.back()});  // the newest stays
}

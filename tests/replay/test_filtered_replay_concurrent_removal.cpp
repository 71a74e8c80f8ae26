// dlq — a filtered replay must not skip entries when entries it kept in
// place (at the head of the list) are removed by someone else during the run.
//
// A replay keeps non-matching (or parked) entries at the head and remembers how many it kept
// (the cursor's offset). When another process removes one of those kept entries — remove(),
// replay_ids(), a trim by max_length or max_age, another replayer — the list shifts left
// under the cursor, and the next window started one item too far: the first entry after the
// kept ones was never examined, was left in the dead-letter list, and the report said the
// run was complete. Same whether the removal happens between two batches or inside one
// (a conflict, after which the step was retried at the same stale offset).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <string>
#include <thread>
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

enum class Interference { remove, replay_ids, trim_length };

const char* name_of(Interference how) {
  switch (how) {
    case Interference::remove:
      return "remove(id)";
    case Interference::replay_ids:
      return "replay_ids by another replayer";
    case Interference::trim_length:
      return "trim() by max_length";
  }
  return "?";
}

// `q` replays; `other` (a second front end on the same data, as another process would be)
// removes the one kept entry at the head, between batches (`inside` false) or while the
// second batch is being decided (`inside` true: the step must conflict and be redone).
// `other` must have Retention::max_length = 6 for Interference::trim_length.
template <class Q, class Other>
void kept_head_removed_during_replay(Q& q, Other& other, Interference how, bool inside) {
  INFO(name_of(how) << (inside ? ", inside a batch" : ", between batches"));
  const std::string queue = "orders";
  const std::string kept = q.send_to_dlq(queue, R"({"k":0})", "boom", 1, "other-worker");
  std::vector<std::string> wanted;
  for (int i = 0; i < 6; ++i)
    wanted.push_back(q.send_to_dlq(queue, "{\"m\":" + std::to_string(i) + "}", "boom", 1, "w"));
  REQUIRE(q.size(queue) == 7);

  bool done = false;
  auto interfere = [&] {
    if (done) return;
    done = true;
    switch (how) {
      case Interference::remove:
        REQUIRE(other.remove(queue, kept));
        break;
      case Interference::replay_ids:
        REQUIRE(other.replay_ids(queue, {kept}).replayed == 1);
        break;
      case Interference::trim_length:
        REQUIRE(other.trim(queue).evicted_for_length == 1);
        break;
    }
  };
  dlq::ReplayOptions o;
  o.worker = "w";
  o.record_ids = true;
  std::size_t batch = 0;
  if (inside) {
    // Called while the second batch is decided (the first holds only the kept entry).
    o.filter = [&](const dlq::Entry&) {
      if (batch == 1) interfere();
      return true;
    };
  }
  o.on_progress = [&](const dlq::ReplayProgress&) {
    ++batch;
    if (!inside && batch == 1) interfere();
  };
  const dlq::ReplayReport r = q.replay(queue, o);
  CHECK(done);
  CHECK(r.replayed == 6);
  CHECK(r.replayed_ids == wanted);
  CHECK(q.size(queue) == 0);  // the kept entry went to `other`, every wanted one was replayed
}

// `inside_too` false: only between batches (KeyValueStorage runs one replay step at a time
// per process, under a lock, so a filter cannot start another replay or trim inside one).
template <class Q, class Other>
void all_cases(Q& q, Other& other, Interference how, bool inside_too = true) {
  for (bool inside : {false, true}) {
    if (inside && !inside_too) continue;
    kept_head_removed_during_replay(q, other, how, inside);
    q.purge("orders");
  }
}

// A long kept prefix (1485 entries, more than one 1000-item read of the head), two of which
// are removed right after the replay examined the last of them: the replay finds its place
// again. `q` has replay_batch_items = 100 (batches 1, 4, 16, 64, then 100: one ends at 1485).
template <class Q, class Other>
void long_kept_prefix(Q& q, Other& other) {
  const std::string queue = "orders";
  std::vector<dlq::FailedJob> jobs;
  for (int i = 0; i < 1485; ++i) {
    dlq::FailedJob j{queue, "{\"k\":" + std::to_string(i) + "}", {}};
    j.failure.error = "boom";
    j.failure.worker = "other-worker";
    jobs.push_back(std::move(j));
  }
  const std::vector<std::string> kept = q.send_batch(jobs);
  std::vector<std::string> wanted;
  for (int i = 0; i < 10; ++i)
    wanted.push_back(q.send_to_dlq(queue, "{\"m\":" + std::to_string(i) + "}", "boom", 1, "w"));
  dlq::ReplayOptions o;
  o.worker = "w";
  o.record_ids = true;
  bool done = false;
  o.on_progress = [&](const dlq::ReplayProgress& p) {
    if (!done && p.examined == 1485) {
      done = true;
      REQUIRE(other.remove(queue, kept.front()));
      REQUIRE(other.remove(queue, kept[1200]));
    }
  };
  const dlq::ReplayReport r = q.replay(queue, o);
  CHECK(done);
  CHECK(r.replayed_ids == wanted);
  CHECK(q.size(queue) == 1483);
  q.purge(queue);
}

// Real concurrency: one thread replays the "w" entries (every other entry) in batches of 10
// while another removes "other" entries by id, oldest and newest alike, and replays some of
// them by id. Every "w" entry must be replayed exactly once by the filtered run, none left.
// `payloads_out` returns what reached the source queue.
template <class Q, class Other, class Drain>
void concurrent_removals(Q& q, Other& other, Drain drain, int pairs) {
  const std::string queue = "orders";
  std::vector<dlq::FailedJob> jobs;
  for (int i = 0; i < pairs; ++i) {
    for (const char* worker : {"other-worker", "w"}) {
      dlq::FailedJob j{queue, "{\"" + std::string(worker) + "\":" + std::to_string(i) + "}", {}};
      j.failure.error = "boom";
      j.failure.worker = worker;
      jobs.push_back(std::move(j));
    }
  }
  const std::vector<std::string> ids = q.send_batch(jobs);
  std::vector<std::string> others;
  for (std::size_t i = 0; i < ids.size(); i += 2)
    others.push_back(ids[i]);
  std::mt19937 rng(12345);
  std::shuffle(others.begin(), others.end(), rng);
  others.resize(others.size() / 2);

  std::atomic<bool> started{false};
  std::size_t taken_by_other = 0;
  std::thread remover([&] {
    while (!started.load())
      std::this_thread::yield();
    for (std::size_t i = 0; i < others.size(); ++i) {
      if (i % 3 == 0) {
        taken_by_other += other.replay_ids(queue, {others[i]}).replayed;
      } else {
        taken_by_other += other.remove(queue, others[i]) ? 1 : 0;
      }
    }
  });
  dlq::ReplayOptions o;
  o.worker = "w";
  o.on_progress = [&](const dlq::ReplayProgress&) { started = true; };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  dlq::ReplayReport r;
  try {
    r = q.replay(queue, o);
  } catch (...) {
    started = true;
    remover.join();
    throw;
  }
  started = true;
  remover.join();
  CHECK(std::chrono::steady_clock::now() < deadline);
  CHECK(taken_by_other == others.size());
  CHECK(r.replayed == static_cast<std::size_t>(pairs));
  CHECK(q.size(queue) == static_cast<std::size_t>(pairs) - others.size());
  // Every "w" payload reached the source queue exactly once.
  std::map<std::string, int> seen;
  for (const auto& p : drain())
    ++seen[p];
  int w_payloads = 0;
  for (const auto& [payload, n] : seen) {
    INFO(payload);
    CHECK(n == 1);
    if (payload.rfind("{\"w\"", 0) == 0) ++w_payloads;
  }
  CHECK(w_payloads == pairs);
  q.purge(queue);
}

dlq::Options batches_of_10() {
  dlq::Options o;
  o.replay_batch_items = 10;
  return o;
}

dlq::Options batches_of_100() {
  dlq::Options o;
  o.replay_batch_items = 100;
  return o;
}

dlq::Options trimming() {
  dlq::Options o;
  o.retention.max_length = 6;
  return o;
}

}  // namespace

TEST_CASE("memory — a kept entry removed during a filtered replay skips nothing", "[memory]") {
  for (auto how : {Interference::remove, Interference::replay_ids, Interference::trim_length}) {
    dlq::MemoryStorage storage;
    dlq::DeadLetterQueue<dlq::MemoryStorage&> q(storage);
    dlq::DeadLetterQueue<dlq::MemoryStorage&> other(storage, trimming());
    all_cases(q, other, how);
  }
  dlq::MemoryStorage storage;
  dlq::DeadLetterQueue<dlq::MemoryStorage&> q(storage, batches_of_100());
  dlq::DeadLetterQueue<dlq::MemoryStorage&> other(storage);
  long_kept_prefix(q, other);
  while (storage.source_pop("orders")) {
  }
  for (int round = 0; round < 5; ++round) {
    dlq::DeadLetterQueue<dlq::MemoryStorage&> slow(storage, batches_of_10());
    concurrent_removals(
        slow, other,
        [&] {
          std::vector<std::string> out;
          while (auto p = storage.source_pop("orders"))
            out.push_back(*p);
          return out;
        },
        2000);
  }
}

TEST_CASE("key-value — a kept entry removed during a filtered replay skips nothing", "[kv]") {
  using S = dlq::KeyValueStorage<dlq::kv::MemoryStore>;
  for (auto how : {Interference::remove, Interference::replay_ids, Interference::trim_length}) {
    dlq::DeadLetterQueue<S> q;
    dlq::DeadLetterQueue<S> other(q.storage(), trimming());  // copies share the data
    all_cases(q, other, how, how == Interference::remove);
  }
  dlq::DeadLetterQueue<S> q(S(), batches_of_100());
  dlq::DeadLetterQueue<S> other(q.storage());
  long_kept_prefix(q, other);
}

#ifdef DLQ_TEST_HAVE_REDIS
TEST_CASE("Redis — a kept entry removed during a filtered replay skips nothing", "[redis]") {
  const std::string url = dlq::test::shared_redis_url();
  for (auto how : {Interference::remove, Interference::replay_ids, Interference::trim_length}) {
    const auto layout = dlq::test::unique_layout();
    dlq::DeadLetterQueue<dlq::RedisListStorage> q(dlq::RedisListStorage(url, layout));
    dlq::DeadLetterQueue<dlq::RedisListStorage> other(dlq::RedisListStorage(url, layout),
                                                      trimming());
    all_cases(q, other, how);
  }
  const auto layout = dlq::test::unique_layout();
  dlq::DeadLetterQueue<dlq::RedisListStorage> q(dlq::RedisListStorage(url, layout),
                                                batches_of_100());
  dlq::DeadLetterQueue<dlq::RedisListStorage> other(dlq::RedisListStorage(url, layout));
  long_kept_prefix(q, other);
  dlq::test::RawClient raw(url);
  for (int round = 0; round < 3; ++round) {
    raw.cmd({"DEL", q.storage().source_key("orders")});
    dlq::DeadLetterQueue<dlq::RedisListStorage> slow(dlq::RedisListStorage(url, layout),
                                                     batches_of_10());
    concurrent_removals(
        slow, other,
        [&] {
          return raw.strings({"LRANGE", q.storage().source_key("orders"), "0", "-1"});
        },
        1000);
  }
}
#endif

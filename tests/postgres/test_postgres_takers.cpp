// Concurrent takers on one PostgreSQL job queue (issue 32 item 3): 8 threads, each its own
// consumer name, take (and ack) from one kv::JobQueue<PostgresStore> of 20 000 jobs until it
// is empty. Every job is delivered to exactly one consumer and none is lost (exact sets).
// Prints the take rate, and how often take() came back empty while jobs were still ready.
// The same over the kv compare-and-move take (what the queue does on a store without
// take_oldest), for comparison: reproduces docs/postgres.md's table.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlq/kv/job_queue.hpp"
#include "postgres_fixtures.hpp"
#include "support/catch.hpp"

namespace test_postgres_takers {

// PostgresStore without take_oldest: JobQueue::take falls back to the compare-and-move.
struct CompareAndMoveStore : dlq::kv::PostgresStore {
  using dlq::kv::PostgresStore::PostgresStore;
  void take_oldest() = delete;  // hides the base's: has_take_oldest is false
};
static_assert(dlq::kv::detail::has_take_oldest<dlq::kv::PostgresStore>::value, "");
static_assert(!dlq::kv::detail::has_take_oldest<CompareAndMoveStore>::value, "");

struct Tally {
  std::vector<std::string> got;   // payloads this consumer took and acked
  std::size_t takes = 0;          // take() calls
  std::size_t empty_early = 0;    // take() empty while the queue still had ready jobs
  std::size_t empty_free = 0;     // … more of them than the other takers can be holding
};

// Takes batches of `max` until take() is empty and the queue has nothing ready. An empty
// take while jobs are ready is right only while the other takers' uncommitted takes hold
// every one of them: at most (takers - 1) * max (nothing is pushed meanwhile, and a job
// still ready after the take was, at the take, either free or in such a take).
template <class Jobs>
void drain(Jobs jobs, const std::string& me, std::size_t max, std::size_t takers, Tally& t) {
  for (;;) {
    std::vector<dlq::SourceJob> batch = jobs.take("orders", me, max);
    ++t.takes;
    if (batch.empty()) {
      const std::size_t ready = jobs.size("orders");
      if (ready == 0) return;
      ++t.empty_early;
      if (ready > (takers - 1) * max) ++t.empty_free;
      continue;
    }
    for (const dlq::SourceJob& j : batch)
      t.got.push_back(j.payload);
    REQUIRE(jobs.ack("orders", me, batch) == batch.size());
  }
}

// Pushes `n` jobs, drains them with `threads` consumers, checks the sets; returns jobs/s.
// `give_up_ok`: the take may come back empty with free jobs (the compare-and-move).
template <class Store>
double run(int threads, int n, std::size_t max, bool give_up_ok = false) {
  Store store(pgtest::suite_url(), pgtest::migrated());
  dlq::kv::JobQueue<Store> jobs(store);
  std::vector<std::string> payloads;
  for (int i = 0; i < n; ++i)
    payloads.push_back("job-" + std::to_string(i));
  std::vector<dlq::kv::Message> chunk;  // views of `payloads`
  for (int i = 0; i < n; ++i) {
    chunk.push_back(dlq::kv::Message{"orders", payloads[static_cast<std::size_t>(i)]});
    if (chunk.size() == 5000 || i + 1 == n) {
      jobs.push_many(chunk);
      chunk.clear();
    }
  }
  REQUIRE(jobs.size("orders") == static_cast<std::size_t>(n));
  std::vector<Tally> tallies(static_cast<std::size_t>(threads));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int w = 0; w < threads; ++w)
    pool.emplace_back([&, w] {
      drain(jobs, "taker-" + std::to_string(w), max, tallies.size(),
            tallies[static_cast<std::size_t>(w)]);
    });
  for (auto& t : pool)
    t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::multiset<std::string> delivered;
  std::size_t takes = 0, empty_early = 0, empty_free = 0;
  for (const Tally& t : tallies) {
    delivered.insert(t.got.begin(), t.got.end());
    takes += t.takes;
    empty_early += t.empty_early;
    empty_free += t.empty_free;
  }
  const std::set<std::string> expected(payloads.begin(), payloads.end());
  CHECK(delivered.size() == static_cast<std::size_t>(n));  // none doubled
  CHECK(std::set<std::string>(delivered.begin(), delivered.end()) == expected);  // none lost
  CHECK(jobs.size("orders") == 0);
  if (!give_up_ok) CHECK(empty_free == 0);  // take() never gave up while jobs were free
  for (int w = 0; w < threads; ++w)
    CHECK(jobs.in_flight("orders", "taker-" + std::to_string(w)) == 0);
  std::string per;
  for (const Tally& t : tallies)
    per += " " + std::to_string(t.got.size());
  const double rate = n / s;
  std::printf("%s: %d takers, %d jobs, batches of %zu: %.2f s, %.0f jobs/s, %zu take() calls, "
              "%zu empty while jobs were ready (%zu while more were ready than others could hold); "
              "jobs per taker:%s\n",
              give_up_ok ? "compare-and-move" : "skip locked", threads, n, max, s, rate, takes, empty_early, empty_free, per.c_str());
  return rate;
}

TEST_CASE("8 takers on one PostgreSQL queue: every job to exactly one, none lost",
          "[postgres][source][threads]") {
  run<dlq::kv::PostgresStore>(8, 20000, 16);
}

TEST_CASE("one taker on a PostgreSQL queue, for comparison", "[postgres][source][threads]") {
  run<dlq::kv::PostgresStore>(1, 5000, 16);
}

TEST_CASE("the compare-and-move take on PostgreSQL, for comparison",
          "[postgres][source][threads]") {
  run<CompareAndMoveStore>(8, 4000, 16, true);
  run<CompareAndMoveStore>(1, 4000, 16, true);
}

}  // namespace test_postgres_takers

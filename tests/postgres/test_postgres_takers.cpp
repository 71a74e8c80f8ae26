// Concurrent takers on one PostgreSQL job queue (issue 32 item 3): 8 threads, each its own
// consumer name, take (and ack) from one kv::JobQueue<PostgresStore> of 20 000 jobs until it
// is empty. Every job is delivered to exactly one consumer and none is lost (exact sets).
// Prints the take rate, and how often take() came back empty while jobs were still ready
// (it gives up after 16 rounds lost to other takers: the kv compare-and-move).
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

using Jobs = dlq::kv::JobQueue<dlq::kv::PostgresStore>;

struct Tally {
  std::vector<std::string> got;   // payloads this consumer took and acked
  std::size_t takes = 0;          // take() calls
  std::size_t empty_early = 0;    // take() empty while the queue still had ready jobs
};

// Takes batches of `max` until take() is empty and the queue has nothing ready.
void drain(Jobs jobs, const std::string& me, std::size_t max, Tally& t) {
  for (;;) {
    std::vector<dlq::SourceJob> batch = jobs.take("orders", me, max);
    ++t.takes;
    if (batch.empty()) {
      if (jobs.size("orders") == 0) return;
      ++t.empty_early;
      continue;
    }
    for (const dlq::SourceJob& j : batch)
      t.got.push_back(j.payload);
    REQUIRE(jobs.ack("orders", me, batch) == batch.size());
  }
}

// Pushes `n` jobs, drains them with `threads` consumers, checks the sets; returns jobs/s.
double run(int threads, int n, std::size_t max) {
  dlq::kv::PostgresStore store(pgtest::suite_url(), pgtest::migrated());
  Jobs jobs(store);
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
      drain(jobs, "taker-" + std::to_string(w), max, tallies[static_cast<std::size_t>(w)]);
    });
  for (auto& t : pool)
    t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::multiset<std::string> delivered;
  std::size_t takes = 0, empty_early = 0;
  for (const Tally& t : tallies) {
    delivered.insert(t.got.begin(), t.got.end());
    takes += t.takes;
    empty_early += t.empty_early;
  }
  const std::set<std::string> expected(payloads.begin(), payloads.end());
  CHECK(delivered.size() == static_cast<std::size_t>(n));  // none doubled
  CHECK(std::set<std::string>(delivered.begin(), delivered.end()) == expected);  // none lost
  CHECK(jobs.size("orders") == 0);
  for (int w = 0; w < threads; ++w)
    CHECK(jobs.in_flight("orders", "taker-" + std::to_string(w)) == 0);
  std::string per;
  for (const Tally& t : tallies)
    per += " " + std::to_string(t.got.size());
  const double rate = n / s;
  std::printf("%d takers, %d jobs, batches of %zu: %.2f s, %.0f jobs/s, %zu take() calls, "
              "%zu empty while jobs were ready; jobs per taker:%s\n",
              threads, n, max, s, rate, takes, empty_early, per.c_str());
  return rate;
}

TEST_CASE("8 takers on one PostgreSQL queue: every job to exactly one, none lost",
          "[postgres][source][threads]") {
  run(8, 20000, 16);
}

TEST_CASE("one taker on a PostgreSQL queue, for comparison", "[postgres][source][threads]") {
  run(1, 5000, 16);
}

}  // namespace test_postgres_takers

// A replayer process (DeadLetterQueue::replay_all over PostgresStore, into the kv::JobQueue in
// the same schema: exactly-once, one remove_and_save transaction per step) killed with SIGKILL
// at random points, 20 times (issue 32 item 3): after every kill each payload is exactly once
// in the dead letters or the ready jobs, in order — 0 lost, 0 doubled — and there is nothing
// to recover or set aside.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/kv/job_queue.hpp"
#include "dlq/kv/storage.hpp"
#include "postgres_fixtures.hpp"
#include "support/catch.hpp"
#include "support/replay_kill.hpp"

namespace test_postgres_replay_sigkill {

using Jobs = dlq::kv::JobQueue<dlq::kv::PostgresStore>;
using Storage = dlq::KeyValueStorage<dlq::kv::PostgresStore, Jobs>;

// Dead letters to replay: DLQ_TEST_REPLAY_SIGKILL_ENTRIES, default 10 000 (docs/postgres.md
// says why: the test's time under ASan + UBSan in CI).
long long entries() {
  const char* n = std::getenv("DLQ_TEST_REPLAY_SIGKILL_ENTRIES");
  return n != nullptr ? std::atoll(n) : 10000;
}

constexpr int batch = 500;  // the child's replay_batch_items
// A kill point never falls in the last two steps of the replay (a KeyValueStorage step moves
// at most replay_batch_items; there is no pipelined fast path as on Redis, whose margin is
// 16 batches: tests/redis/sigkill_util.hpp).
constexpr long long margin = 2 * batch;
// Each kill lands within the next `window` moves (uniform), so a round replays ~window / 2
// entries and the kill points walk through the whole queue over the rounds, at a cost
// that does not grow with its length (the replay moves ~2 000 entries/s under ASan).
constexpr long long window = 2000;

// One fresh schema holding `payloads` as dead letters of "orders" and no job.
struct World {
  dlq::postgres::Options options = pgtest::migrated();
  dlq::kv::PostgresStore store{pgtest::suite_url(), options};
  Jobs jobs{store};
  Storage storage{store, jobs};
  dlq::DeadLetterQueue<Storage&> dlq{storage};

  explicit World(const std::vector<std::string>& payloads) {
    dlq::Failure f;
    f.error = "e";
    std::vector<dlq::FailedJob> chunk;
    for (const std::string& p : payloads) {
      chunk.push_back({"orders", p, f});
      if (chunk.size() == 5000) {
        dlq.send_batch(chunk);
        chunk.clear();
      }
    }
    if (!chunk.empty()) dlq.send_batch(chunk);
  }

  // The ready jobs' payloads, oldest first, then the dead letters', oldest first.
  std::vector<std::string> everything(std::size_t& ready, std::size_t& dead) {
    std::vector<std::string> all;
    for (dlq::kv::Item& item : store.list(jobs.ready_collection("orders"), dlq::kv::Window{}))
      all.push_back(std::move(item.value));
    ready = all.size();
    for (std::size_t start = 0;; start += 10000) {
      const std::vector<dlq::Entry> page = dlq.peek("orders", start, 10000);
      for (const dlq::Entry& e : page) {
        REQUIRE(e.ok());
        all.push_back(e.payload);
      }
      if (page.size() < 10000) break;
    }
    dead = all.size() - ready;
    return all;
  }
};

TEST_CASE("a replayer into the PostgreSQL JobQueue killed with SIGKILL 20 times loses and "
          "doubles nothing",
          "[postgres][replay][sigkill]") {
  const long long n = entries();
  std::vector<std::string> payloads;
  for (long long i = 0; i < n; ++i)
    payloads.push_back("{\"job\":" + std::to_string(i) + ",\"pad\":\"" + std::string(80, 'x') +
                       "\"}");
  using clock = std::chrono::steady_clock;
  auto seconds = [](clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const auto t_fill = clock::now();
  auto world = std::make_unique<World>(payloads);
  double filling = seconds(clock::now() - t_fill), killing = 0, checking = 0;
  int refills = 1;
  long long replayed = 0;
  REQUIRE(world->storage.exactly_once());
  auto child = [&] {
    return std::vector<std::string>{DLQ_POSTGRES_REPLAYER_CHILD, pgtest::suite_url(),
                                    world->options.schema, "orders", std::to_string(batch)};
  };

  std::mt19937 rng(std::random_device{}());
  int partial = 0;
  for (int round = 0; round < 20; ++round) {
    const long long left = static_cast<long long>(world->dlq.size("orders"));
    if (left < margin + 4 * batch) {
      const auto t0 = clock::now();
      world = std::make_unique<World>(payloads);
      filling += seconds(clock::now() - t0);
      ++refills;
    }
    World& w = *world;
    const long long ready_before = static_cast<long long>(w.jobs.size("orders"));
    const auto t_kill = clock::now();
    dlq::test::kill_mid_replay(
        child(), [&] { return static_cast<long long>(w.jobs.size("orders")); },
        std::min(static_cast<long long>(w.dlq.size("orders")), margin + window), margin, rng);
    killing += seconds(clock::now() - t_kill);
    const auto t_check = clock::now();
    CHECK(w.dlq.recover("orders") == 0);  // nothing to repair after a kill
    CHECK(w.storage.size("orders", dlq::ListKind::corrupt) == 0);  // nothing set aside
    CHECK(w.jobs.in_flight("orders", "anyone") == 0);
    std::size_t ready = 0, dead = 0;
    const std::vector<std::string> all = w.everything(ready, dead);
    INFO("round " << round << ": " << ready << " replayed, " << dead << " dead letters left");
    REQUIRE(all.size() == payloads.size());  // 0 lost + 0 doubled, counted
    std::vector<std::string> sorted_all = all, sorted_payloads = payloads;
    std::sort(sorted_all.begin(), sorted_all.end());
    std::sort(sorted_payloads.begin(), sorted_payloads.end());
    REQUIRE(sorted_all == sorted_payloads);  // the exact multiset
    CHECK(all == payloads);                  // and in order: replayed prefix, dead suffix
    if (ready != 0 && dead != 0) ++partial;
    replayed += static_cast<long long>(ready) - ready_before;
    checking += seconds(clock::now() - t_check);
  }
  std::printf("%lld entries, %d fills (%.1f s), %lld replayed by killed replayers in %.1f s "
              "(%.0f/s), checks %.1f s, %d kills mid-replay\n",
              n, refills, filling, replayed, killing, static_cast<double>(replayed) / killing, checking, partial);
  CHECK(partial >= 10);  // the kills really landed mid-replay
}

}  // namespace test_postgres_replay_sigkill

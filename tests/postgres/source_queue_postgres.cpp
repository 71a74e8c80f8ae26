// The source-queue contract (tests/contract/source_queue_suite.hpp) on dlq::kv::JobQueue over
// PostgreSQL, with its dead letters in the same schema (replay pushes them back into the
// queue in the transaction that removes them).
#include "dlq/dlq.hpp"
#include "dlq/kv/storage.hpp"
#include "dlq/kv/job_queue.hpp"
#include "postgres_fixtures.hpp"

struct PostgresSource {
  using Jobs = dlq::kv::JobQueue<dlq::kv::PostgresStore>;
  using Storage = dlq::KeyValueStorage<dlq::kv::PostgresStore, Jobs>;
  dlq::kv::PostgresStore store{pgtest::suite_url(), pgtest::migrated()};
  Jobs source{store};
  dlq::DeadLetterQueue<Storage> queue{Storage(store, source)};
  Jobs& jobs() { return source; }
  dlq::DeadLetterQueue<Storage>& dlq() { return queue; }
};

#define DLQ_SOURCE_FIXTURES PostgresSource
#include "contract/source_queue_suite.hpp"

// What an operator does for consumers that never come back (docs/postgres.md): list the
// consumers holding jobs, recover() each; their jobs are ready again for anyone.
TEST_CASE("postgres source queue: the consumers holding jobs are listed and recovered",
          "[source]") {
  PostgresSource f;
  auto& jobs = f.jobs();
  for (const char* p : {"1", "2", "3", "4"})
    jobs.push("orders", p);
  jobs.push("orders-other", "5");
  auto a = jobs.take("orders", "w2", 1);
  (void)jobs.take("orders", "w1", 2);
  (void)jobs.take("orders-other", "w3", 1);
  CHECK(jobs.consumers("orders") == std::vector<std::string>{"w1", "w2"});
  jobs.ack("orders", "w2", a);
  CHECK(jobs.consumers("orders") == std::vector<std::string>{"w1"});
  // w1 died: the operator releases whatever the listed consumers hold.
  std::size_t released = 0;
  for (const std::string& gone : jobs.consumers("orders"))
    released += jobs.recover("orders", gone);
  CHECK(released == 2);
  CHECK(jobs.consumers("orders").empty());
  CHECK(jobs.consumers("orders-other") == std::vector<std::string>{"w3"});
  CHECK(jobs.consumers("nothing").empty());
  CHECK(payloads(jobs.take("orders", "w4", 10)) == std::vector<std::string>{"4", "2", "3"});
}

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

// The source-queue contract (tests/contract/source_queue_suite.hpp) on dlq::kv::JobQueue over
#include "dlq/dlq.hpp"
// SQLite, with its dead letters in the same file (replay pushes them back into the queue).
#include "dlq/kv/storage.hpp"
#include "dlq/sqlite/job_queue.hpp"
#include "dlq/sqlite/sqlite_store.hpp"
#include "kv_fixtures.hpp"

struct SqliteSource {
  using Storage = dlq::KeyValueStorage<dlq::kv::SqliteStore, dlq::kv::JobQueue<>>;
  kvtest::TempDir dir;
  dlq::kv::SqliteStore store{dir.file("jobs.db")};
  dlq::kv::JobQueue<> source{store};
  dlq::DeadLetterQueue<Storage> queue{Storage(store, source)};
  dlq::kv::JobQueue<>& jobs() { return source; }
  dlq::DeadLetterQueue<Storage>& dlq() { return queue; }
};

#define DLQ_SOURCE_FIXTURES SqliteSource
#include "contract/source_queue_suite.hpp"

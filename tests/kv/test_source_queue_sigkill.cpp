// A worker on a SQLite job queue (kv::JobQueue) killed with SIGKILL 20 times mid-job loses
// nothing (tests/support/source_worker_sigkill.hpp).
#include "dlq/dlq.hpp"
#include "dlq/kv/storage.hpp"
#include "dlq/sqlite/job_queue.hpp"
#include "dlq/sqlite/sqlite_store.hpp"
#include "kv_fixtures.hpp"
#include "support/source_worker_sigkill.hpp"

TEST_CASE("a worker on a SQLite job queue killed with SIGKILL mid-job loses no job",
          "[sqlite][source][sigkill]") {
  kvtest::TempDir dir;
  const std::string file = dir.file("jobs.db");
  dlq::kv::SqliteOptions options;  // as the child: survives a process crash (the test's case)
  options.synchronous = dlq::kv::SqliteSync::normal;
  dlq::kv::SqliteStore store(file, options);
  dlq::kv::JobQueue<> jobs(store);
  using Storage = dlq::KeyValueStorage<dlq::kv::SqliteStore, dlq::kv::JobQueue<>>;
  dlq::DeadLetterQueue<Storage> dlq(Storage(store, jobs));
  dlq::test::source_worker_sigkill(jobs, dlq, [&](const std::string& consumer) {
    return std::vector<std::string>{DLQ_SOURCE_WORKER_CHILD, "sqlite://" + file, "", consumer};
  });
}

// The replayer test_postgres_replay_sigkill kills at random points: DeadLetterQueue::replay_all
// over a KeyValueStorage on PostgresStore, into the kv::JobQueue in the same schema (each step
// one remove_and_save transaction), in batches of BATCH entries, then exits 0.
//   postgres_replayer_child <url> <schema> <queue> <batch>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "dlq/dlq.hpp"
#include "dlq/kv/job_queue.hpp"
#include "dlq/kv/storage.hpp"
#include "dlq/postgres/kv_store.hpp"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: postgres_replayer_child URL SCHEMA QUEUE BATCH\n");
    return 2;
  }
  try {
    using Jobs = dlq::kv::JobQueue<dlq::kv::PostgresStore>;
    using Storage = dlq::KeyValueStorage<dlq::kv::PostgresStore, Jobs>;
    dlq::postgres::Options po;
    po.schema = argv[2];
    dlq::kv::PostgresStore store(argv[1], po);
    Storage storage(store, Jobs(store));
    if (!storage.exactly_once()) {
      std::fprintf(stderr, "postgres_replayer_child: the storage is not exactly-once\n");
      return 3;
    }
    dlq::Options options;
    options.replay_batch_items = std::strtoul(argv[4], nullptr, 10);
    dlq::DeadLetterQueue<Storage&> dlq(storage, options);
    const auto report = dlq.replay_all(argv[3]);
    std::printf("replayed %zu\n", report.replayed);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "postgres_replayer_child: %s\n", e.what());
    return 1;
  }
}

// 11 — a durable dead-letter queue in one SQLite file (target dlq::sqlite, libsqlite3-dev).
// Every send that returned is on disk (WAL, synchronous=FULL), survives a crash or a restart,
// and can be shared by several threads and processes on the host.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <dlq/sqlite.hpp>

int main() {
  const std::string path = (std::filesystem::temp_directory_path() / "dlq-example-11.db").string();
  for (const char* suffix : {"", "-wal", "-shm"})
    std::filesystem::remove(path + suffix);

  dlq::kv::MemoryQueues replayed;  // stand-in for the real job queue replay feeds
  {
    // A worker process: dead-letters two jobs, then exits (or crashes: they are on disk).
    dlq::KeyValueStorage storage{dlq::kv::SqliteStore{path}};
    dlq::DeadLetterQueue<decltype(storage)&> dlq(storage);
    dlq::Failure f;
    f.error = "payment gateway timeout";
    f.attempt = 3;
    f.job_id = "order-1001";
    dlq.send_to_dlq("payments", R"({"order":1001,"amount":25})", f);
    f.job_id = "order-1002";
    dlq.send_to_dlq("payments", R"({"order":1002,"amount":40})", f);
  }
  {
    // Later, an operator's tool opens the same file, inspects and replays.
    dlq::kv::SqliteOptions options;
    options.synchronous = dlq::kv::SqliteSync::full;  // the default: durable against power loss
    dlq::KeyValueStorage storage(dlq::kv::SqliteStore(path, options), replayed);
    dlq::DeadLetterQueue<decltype(storage)&> dlq(storage);
    for (const dlq::Entry& e : dlq.peek("payments"))
      std::printf("%s  attempt %lld  %s  %s\n", e.id.c_str(), static_cast<long long>(e.attempt),
                  e.error.c_str(), e.payload.c_str());
    const dlq::ReplayReport report = dlq.replay_all("payments");
    std::printf("replayed %zu, left %zu, queue has %zu\n", report.replayed, dlq.size("payments"),
                replayed.size("payments"));
  }
  for (const char* suffix : {"", "-wal", "-shm"})
    std::filesystem::remove(path + suffix);
  return replayed.size("payments") == 2 ? 0 : 1;
}

// 03 — worker threads on Redis: several threads share one DeadLetterQueue and one
// RedisSourceQueue over a connection pool; each takes jobs under its own consumer name (a
// crash leaves them in its in-flight list, never lost), failed jobs are dead-lettered, then an
// operator inspects and replays them.
//
//   example_03_redis_worker [redis://127.0.0.1:6379/0]
//
// (Under ctest the URL comes from the test server's file, DLQ_TEST_REDIS_URL_FILE.)
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/redis/list_storage.hpp"
#include "dlq/redis/source_queue.hpp"

namespace {
std::string redis_url(int argc, char** argv) {
  if (argc > 1) return argv[1];
  if (const char* file = std::getenv("DLQ_TEST_REDIS_URL_FILE")) {
    std::ifstream in(file);
    std::string url;
    if (in >> url) return url;
  }
  return "redis://127.0.0.1:6379/0";
}
}  // namespace

int main(int argc, char** argv) {
  try {
    // Keys: dlq:{example-orders} (dead letters) and queue:{example-orders} (the job queue).
    // To share keys with an existing service, set RedisListOptions::dead_key/source_key.
    dlq::RedisListOptions layout;
    layout.pool.size = 4;  // connections shared by all threads
    dlq::redis::ConnectionOptions connection = dlq::redis::parse_url(redis_url(argc, argv));
    connection.command_timeout = std::chrono::milliseconds(500);
    dlq::DeadLetterQueue dlq{
        dlq::RedisListStorage(connection, layout)};  // CTAD: <RedisListStorage>
    dlq::RedisSourceQueue jobs(dlq.storage());       // the job lists, on the same connections
    dlq.purge("example-orders");
    while (jobs.pop("example-orders")) {
    }
    for (int job = 0; job < 40; ++job)  // a producer
      jobs.push("example-orders", R"({"order":)" + std::to_string(job) + "}");

    // Eight workers; every job "fails" its last retry and is dead-lettered.
    std::vector<std::thread> workers;
    for (int w = 0; w < 8; ++w) {
      workers.emplace_back([&dlq, &jobs, w] {
        const std::string me = "worker-" + std::to_string(w);  // one consumer name per thread
        for (;;) {
          const auto batch = jobs.take("example-orders", me, 2);
          if (batch.empty()) return;
          for (const auto& job : batch) {
            dlq::Failure f;
            f.error = "payment gateway timeout";
            f.attempt = 3;
            f.worker = me;
            dlq::dead_letter(jobs, dlq, "example-orders", me, job, f);  // stored, then acked
          }
        }
      });
    }
    for (auto& t : workers)
      t.join();

    // The operator's view.
    for (const auto& [queue, depth] : dlq.summary({"example-orders"}))
      std::printf("%s: %zu dead letters\n", queue.c_str(), depth);
    for (const auto& e : dlq.peek("example-orders", 0, 3))
      std::printf("  %s %s attempt %lld: %s\n", e.worker.c_str(), e.payload.c_str(),
                  static_cast<long long>(e.attempt), e.error.c_str());

    // The gateway is fixed: replay everything back to queue:{example-orders}.
    const auto report = dlq.replay_all("example-orders");
    std::printf("replayed %zu of %zu in %zu batches; %zu left\n", report.replayed, report.examined,
                report.batches, dlq.size("example-orders"));
    // A worker would take them again; here, tidy up the example's job queue.
    std::size_t back = 0;
    while (jobs.pop("example-orders"))
      ++back;
    return report.replayed == 40 && back == 40 ? 0 : 1;
  } catch (const dlq::timeout_error& e) {
    std::fprintf(stderr, "Redis did not answer in time: %s\n", e.what());
  } catch (const dlq::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
  }
  return 1;
}

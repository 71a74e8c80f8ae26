// 03 — worker threads on Redis: several threads share one DeadLetterQueue over a connection
// pool; failed jobs are dead-lettered, then an operator inspects and replays them.
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
    dlq::DeadLetterQueue<dlq::RedisListStorage> dlq(dlq::RedisListStorage(connection, layout));
    dlq.purge("example-orders");

    // Eight workers; every job "fails" its last retry and is dead-lettered.
    std::vector<std::thread> workers;
    for (int w = 0; w < 8; ++w) {
      workers.emplace_back([&dlq, w] {
        for (int job = 0; job < 5; ++job) {
          const std::string payload = R"({"order":)" + std::to_string(w * 100 + job) + "}";
          dlq.send_to_dlq("example-orders", payload, "payment gateway timeout", 3,
                          "worker-" + std::to_string(w));
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
    // Raw commands go to the node that owns the key (Redis Cluster or not): here, tidy up the
    // example's job queue.
    const std::string jobs = dlq.storage().source_key("example-orders");
    auto conn = dlq.storage().router().acquire(jobs);  // the node of the key's slot
    conn->run(dlq::redis::Command("DEL").arg(jobs), dlq::redis::Effect::write);
    return report.replayed == 40 ? 0 : 1;
  } catch (const dlq::timeout_error& e) {
    std::fprintf(stderr, "Redis did not answer in time: %s\n", e.what());
  } catch (const dlq::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
  }
  return 1;
}

// Uses an installed dlq through find_package.
#include <dlq/dlq.hpp>
#ifdef CONSUMER_WITH_REDIS
#include <dlq/redis.hpp>
#endif
#include <cstdio>

int main() {
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  q.send_to_dlq("orders", R"({"order":42})", "payment timeout", 3, "worker-7");
  const auto report = q.replay_all("orders");
  const auto job = q.storage().source_pop("orders");
  std::printf("dlq %d.%d.%d: replayed %zu, got %s\n", DLQ_VERSION_MAJOR, DLQ_VERSION_MINOR,
              DLQ_VERSION_PATCH, report.replayed, job ? job->c_str() : "nothing");
#ifdef CONSUMER_WITH_REDIS
  // Links and runs the Redis backend: nothing listens on port 1, so it must say so, typed.
  try {
    dlq::DeadLetterQueue<dlq::RedisListStorage> redis(
        dlq::RedisListStorage("redis://127.0.0.1:1/0"));
    (void)redis.size("orders");
    return 1;
  } catch (const dlq::connection_error& e) {
    std::printf("redis backend linked: %s\n", e.what());
  }
#endif
  return report.replayed == 1 && job == std::optional<std::string>(R"({"order":42})") ? 0 : 1;
}

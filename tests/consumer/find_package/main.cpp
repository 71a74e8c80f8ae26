// Uses an installed dlq through find_package.
#include <dlq/dlq.hpp>
#ifdef CONSUMER_WITH_REDIS
#if __has_include(<dlq/redis.hpp>)
#include <dlq/redis.hpp>
#endif
#endif
#include <cstdio>

int main() {
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  q.send_to_dlq("orders", R"({"order":42})", "payment timeout", 3, "worker-7");
  const auto report = q.replay_all("orders");
  const auto job = q.storage().source_pop("orders");
  std::printf("dlq %d.%d.%d: replayed %zu, got %s\n", DLQ_VERSION_MAJOR, DLQ_VERSION_MINOR,
              DLQ_VERSION_PATCH, report.replayed, job ? job->c_str() : "nothing");
  return report.replayed == 1 && job == std::optional<std::string>(R"({"order":42})") ? 0 : 1;
}

// A worker on a Redis source queue killed with SIGKILL 20 times mid-job loses nothing
// (tests/support/source_worker_sigkill.hpp), on a private server.
#include "dlq/dlq.hpp"
#include "dlq/redis/list_storage.hpp"
#include "dlq/redis/source_queue.hpp"
#include "support/redis_process.hpp"
#include "support/source_worker_sigkill.hpp"

namespace test_source_queue_sigkill {

TEST_CASE("a worker on a Redis source queue killed with SIGKILL mid-job loses no job",
          "[redis][source][sigkill]") {
  dlq::test::RedisProcess server;
  const std::string prefix = "sk:";
  dlq::RedisListOptions o;
  o.dead_key = prefix + "dlq:{*}";
  o.source_key = prefix + "queue:{*}";
  o.corrupt_key = prefix + "dlq:{*}:corrupt";
  dlq::DeadLetterQueue<dlq::RedisListStorage> dlq(dlq::RedisListStorage(server.url(), o));
  dlq::RedisSourceQueue jobs(dlq.storage());
  dlq::test::source_worker_sigkill(jobs, dlq, [&](const std::string& consumer) {
    return std::vector<std::string>{DLQ_SOURCE_WORKER_CHILD, server.url(), prefix, consumer};
  });
}

}  // namespace test_source_queue_sigkill

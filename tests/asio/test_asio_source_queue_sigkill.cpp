// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// A worker on dlq::asio::AsyncSourceQueue (tests/support/async_source_worker_child.cpp: one
// io_context, one thread) killed with SIGKILL 20 times mid-job on a private Redis server
// loses no job: the blocking source queue's SIGKILL test (tests/support/source_worker_sigkill.hpp)
// with the async worker as the child; the supervisor's checks and recover() are blocking.
#include "dlq/dlq.hpp"
#include "dlq/redis/list_storage.hpp"
#include "dlq/redis/source_queue.hpp"
#include "support/redis_process.hpp"
#include "support/source_worker_sigkill.hpp"

TEST_CASE("an async worker on a Redis source queue killed with SIGKILL mid-job loses no job",
          "[asio][redis][source][sigkill]") {
  dlq::test::RedisProcess server;
  const std::string prefix = "ask:";
  dlq::RedisListOptions o;
  o.dead_key = prefix + "dlq:{*}";
  o.source_key = prefix + "queue:{*}";
  o.corrupt_key = prefix + "dlq:{*}:corrupt";
  dlq::DeadLetterQueue<dlq::RedisListStorage> dlq(dlq::RedisListStorage(server.url(), o));
  dlq::RedisSourceQueue jobs(dlq.storage());
  dlq::test::source_worker_sigkill(jobs, dlq, [&](const std::string& consumer) {
    return std::vector<std::string>{DLQ_ASYNC_SOURCE_WORKER_CHILD, server.url(), prefix, consumer};
  });
}

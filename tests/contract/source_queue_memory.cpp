// The source-queue contract (tests/contract/source_queue_suite.hpp) on dlq::MemorySourceQueue.
#include "dlq/dlq.hpp"
#include "dlq/source_queue.hpp"
#include "dlq/storage/memory.hpp"

struct MemorySource {
  dlq::DeadLetterQueue<dlq::MemoryStorage> queue;
  dlq::MemorySourceQueue source{queue.storage()};
  dlq::MemorySourceQueue& jobs() { return source; }
  dlq::DeadLetterQueue<dlq::MemoryStorage>& dlq() { return queue; }
};

#define DLQ_SOURCE_FIXTURES MemorySource
#include "contract/source_queue_suite.hpp"

TEST_CASE("memory source queue: the consumers holding jobs are listed", "[source]") {
  MemorySource f;
  auto& jobs = f.jobs();
  for (const char* p : {"1", "2", "3"})
    jobs.push("orders", p);
  auto a = jobs.take("orders", "w2", 1);
  (void)jobs.take("orders", "w1", 1);
  CHECK(jobs.consumers("orders") == std::vector<std::string>{"w1", "w2"});
  jobs.ack("orders", "w2", a);
  CHECK(jobs.consumers("orders") == std::vector<std::string>{"w1"});
  jobs.recover("orders", "w1");
  CHECK(jobs.consumers("orders").empty());
  CHECK(jobs.consumers("nothing").empty());
}

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

// 02 — a worker loop: take a job, run the handler, retry with backoff, and dead-letter the
// job when its retries are exhausted. The queue here is the in-memory one; the loop is
// written against the source-queue interface (dlq/source_queue.hpp), so it runs unchanged on
// dlq::RedisSourceQueue (03-redis-worker.cpp) and dlq::kv::JobQueue (05-worker.cpp).
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>

#include <dlq/dlq.hpp>

namespace {

constexpr int kMaxAttempts = 3;

// The job handler: jobs that mention "poison" always fail.
void handle(const std::string& job) {
  if (job.find("poison") != std::string::npos) throw std::runtime_error("cannot parse order");
}

template <class Jobs, class Queue>
void work(Jobs& jobs, Queue& dlq, const std::string& queue) {
  const std::string me = "example-worker";
  for (;;) {
    auto taken = jobs.take(queue, me);  // moved to this worker's in-flight list
    if (taken.empty()) return;
    const dlq::SourceJob& job = taken[0];
    for (int attempt = 1;; ++attempt) {
      try {
        handle(job.payload);
        jobs.ack(queue, me, taken);  // done: it leaves the queue for good
        break;
      } catch (const std::exception& e) {
        if (attempt == kMaxAttempts) {
          dlq::Failure f;
          f.error = e.what();
          f.attempt = attempt;
          f.worker = me;
          f.error_type = "std::runtime_error";
          dlq::dead_letter(jobs, dlq, queue, me, job, f);  // retries exhausted: store, then ack
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1 << attempt));  // backoff
      }
    }
  }
}

}  // namespace

int main() {
  dlq::DeadLetterQueue<dlq::MemoryStorage> dlq;
  dlq::MemorySourceQueue jobs(dlq.storage());  // where replay puts jobs back
  for (int i = 0; i < 10; ++i)
    jobs.push("orders",
              i % 4 == 0 ? R"({"order":"poison"})" : "{\"order\":" + std::to_string(i) + "}");
  work(jobs, dlq, "orders");
  std::printf("dead-lettered: %zu of 10 jobs\n", dlq.size("orders"));
  for (const auto& e : dlq.peek("orders"))
    std::printf("  %s after %lld attempts: %s\n", e.payload.c_str(),
                static_cast<long long>(e.attempt), e.error.c_str());
  return dlq.size("orders") == 3 ? 0 : 1;
}

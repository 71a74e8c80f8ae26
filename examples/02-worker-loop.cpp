// 02 — a worker loop: take a job, run the handler, retry with backoff, and dead-letter the
// job when its retries are exhausted. The queue here is the in-memory one; with Redis the
// loop is the same (see 03-redis-worker.cpp).
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

template <class Queue>
void work(Queue& dlq, const std::string& queue) {
  auto& jobs = dlq.storage();
  while (auto job = jobs.source_pop(queue)) {
    for (int attempt = 1;; ++attempt) {
      try {
        handle(*job);
        break;
      } catch (const std::exception& e) {
        if (attempt == kMaxAttempts) {
          dlq::Failure f;
          f.error = e.what();
          f.attempt = attempt;
          f.worker = "example-worker";
          f.error_type = "std::runtime_error";
          dlq.send_to_dlq(queue, *job, f);  // retries exhausted: dead-letter it
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
  for (int i = 0; i < 10; ++i)
    dlq.storage().source_push(
        "orders", i % 4 == 0 ? R"({"order":"poison"})" : "{\"order\":" + std::to_string(i) + "}");
  work(dlq, "orders");
  std::printf("dead-lettered: %zu of 10 jobs\n", dlq.size("orders"));
  for (const auto& e : dlq.peek("orders"))
    std::printf("  %s after %lld attempts: %s\n", e.payload.c_str(),
                static_cast<long long>(e.attempt), e.error.c_str());
  return dlq.size("orders") == 3 ? 0 : 1;
}

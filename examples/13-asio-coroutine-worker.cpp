// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// A coroutine worker on one io_context (dlq::asio, C++20): it takes jobs, retries a failing
// job with a steady_timer back-off (the loop keeps serving other coroutines while it waits)
// and dead-letters the job once its attempts are exhausted — with co_await, never blocking.
//
// On Redis, swap the storage (link dlq::redis as well, include dlq/asio/redis.hpp):
//   dlq::asio::AsyncDeadLetterQueue<dlq::asio::RedisListStorage> dlq(
//       ex, dlq::asio::RedisListStorage(ex, "redis://127.0.0.1:6379/0"));
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <deque>
#include <stdexcept>
#include <string>

#include "dlq/asio.hpp"

namespace {

// The job handler: job "3" always fails; job "5" fails once, then succeeds.
int calls_for_5 = 0;
void handle(const std::string& job) {
  if (job == R"({"job":3})") throw std::runtime_error("payment provider rejected the card");
  if (job == R"({"job":5})" && calls_for_5++ == 0) throw std::runtime_error("timeout");
}

using Queue = dlq::asio::AsyncDeadLetterQueue<dlq::MemoryStorage>;

asio::awaitable<void> worker(std::deque<std::string>& jobs, Queue& dlq, int& dead_lettered) {
  constexpr int max_attempts = 3;
  asio::steady_timer backoff(co_await asio::this_coro::executor);
  while (!jobs.empty()) {
    const std::string job = jobs.front();
    jobs.pop_front();
    for (int attempt = 1;; ++attempt) {
      std::string error;  // co_await is not allowed inside a catch block
      try {
        handle(job);
        break;
      } catch (const std::exception& e) {
        error = e.what();
      }
      if (attempt < max_attempts) {
        backoff.expires_after(std::chrono::milliseconds(10) * (1 << attempt));
        co_await backoff.async_wait(asio::use_awaitable);  // others run meanwhile
        continue;
      }
      dlq::Failure f;
      f.error = error;
      f.attempt = attempt;
      f.worker = "coroutine-worker";
      const std::string id =
          co_await dlq.async_send_to_dlq("payments", job, f, asio::use_awaitable);
      std::printf("dead-lettered %s after %d attempts: %s\n", job.c_str(), attempt, id.c_str());
      ++dead_lettered;
      break;
    }
  }
}

}  // namespace

int main() {
  asio::io_context io;
  Queue dlq(io.get_executor());
  std::deque<std::string> jobs;
  for (int i = 1; i <= 6; ++i)
    jobs.push_back(R"({"job":)" + std::to_string(i) + "}");
  int dead_lettered = 0;
  asio::co_spawn(io, worker(jobs, dlq, dead_lettered), asio::detached);
  io.run();

  // Inspect what was dead-lettered, still through the async API.
  std::size_t size = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        size = co_await dlq.async_size("payments", asio::use_awaitable);
        for (const auto& e : co_await dlq.async_peek("payments", 0, 10, asio::use_awaitable))
          std::printf("  %s: %s (attempt %lld)\n", e.id.c_str(), e.error.c_str(),
                      static_cast<long long>(e.attempt));
      },
      asio::detached);
  io.restart();
  io.run();
  if (dead_lettered != 1 || size != 1 || calls_for_5 != 2) {
    std::fprintf(stderr, "unexpected: %d dead-lettered, size %zu\n", dead_lettered, size);
    return 1;
  }
  return 0;
}

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// Fixed amounts of work on the memory backend, blocking (DeadLetterQueue<MemoryStorage>) and
// asynchronous (asio::AsyncDeadLetterQueue<MemoryStorage>), each in a noinline measure_*
// function so that callgrind counts it alone: instructions per entry are the same on a
// loaded machine, where wall-clock rates are not. Run by run_instructions.sh (which builds
// it against one or two source trees and runs valgrind --toggle-collect='measure_*').
// Usage: bench_instructions <send|batch|replay|async_send1|async_send64|async_batch> <n>
// (200-byte JSON payloads as bench_memory.cpp; batches of 100; async_sendD: D in flight).
#include <asio/io_context.hpp>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "dlq/asio.hpp"
#include "dlq/dlq.hpp"

namespace {
std::string payload_200() {
  std::string p =
      R"({"job":"charge-card","order_id":1234567,"customer":"c-000042","amount_cents":129900,)"
      R"("currency":"EUR","items":[{"sku":"A-1","qty":2},{"sku":"B-7","qty":1}],"note":")";
  p.append(200 - p.size() - 2, 'x');
  p.append("\"}");
  return p;
}
const std::string kPayload = payload_200();
dlq::Failure failure() {
  dlq::Failure f;
  f.error = "payment gateway timeout";
  f.attempt = 3;
  f.worker = "worker-7";
  return f;
}
std::vector<dlq::FailedJob> jobs100() {
  std::vector<dlq::FailedJob> jobs(100);
  for (auto& j : jobs) {
    j.queue = "orders";
    j.payload = kPayload;
    j.failure = failure();
  }
  return jobs;
}
using Q = dlq::DeadLetterQueue<dlq::MemoryStorage>;
using AQ = dlq::asio::AsyncDeadLetterQueue<dlq::MemoryStorage>;
}  // namespace

extern "C" {
__attribute__((noinline)) void measure_send(Q& q, long n) {
  const dlq::Failure f = failure();
  for (long i = 0; i < n; ++i)
    q.send_to_dlq("orders", kPayload, f);
}
__attribute__((noinline)) void measure_batch(Q& q, long n, const std::vector<dlq::FailedJob>& j) {
  for (long i = 0; i < n / 100; ++i)
    q.send_batch(j);
}
__attribute__((noinline)) std::size_t measure_replay(Q& q) {
  return q.replay_all("orders").replayed;
}
__attribute__((noinline)) void measure_async_send(asio::io_context& io, AQ& q, long n, long depth) {
  const dlq::Failure f = failure();
  long started = 0, done = 0;
  std::function<void()> next = [&] {
    if (started == n) return;
    ++started;
    q.async_send_to_dlq("orders", kPayload, f, [&](std::exception_ptr e, std::string) {
      if (e) std::abort();
      ++done;
      next();
    });
  };
  for (long i = 0; i < depth; ++i)
    next();
  io.run();
  if (done != n) std::abort();
}
__attribute__((noinline)) void measure_async_batch(asio::io_context& io, AQ& q, long n,
                                                   const std::vector<dlq::FailedJob>& j) {
  long left = n / 100;
  std::function<void()> next = [&] {
    if (left-- == 0) return;
    q.async_send_batch(j, [&](std::exception_ptr e, auto&&...) {
      if (e) std::abort();
      next();
    });
  };
  next();
  io.run();
}
}

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const std::string what = argv[1];
  const long n = std::atol(argv[2]);
  const auto j = jobs100();
  if (what == "send") {
    Q q;
    measure_send(q, n);
  } else if (what == "batch") {
    Q q;
    measure_batch(q, n, j);
  } else if (what == "replay") {
    Q q;
    for (long i = 0; i < n / 100; ++i)
      q.send_batch(j);
    if (measure_replay(q) != static_cast<std::size_t>(n)) return 1;
  } else if (what == "async_send1" || what == "async_send64" || what == "async_batch") {
    asio::io_context io;
    AQ q(io.get_executor());
    q.async_size("orders", [](std::exception_ptr, std::size_t) {});
    io.run();
    io.restart();
    if (what == "async_batch")
      measure_async_batch(io, q, n, j);
    else
      measure_async_send(io, q, n, what == "async_send1" ? 1 : 64);
  } else {
    return 2;
  }
  return 0;
}

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// One thread, one io_context, one connection: `n` async_send_to_dlq with `depth` in flight
// (depth 1 = each send awaited before the next). Prints sends per second on one line.
// Usage: bench_asio_redis <redis-url> <n> <depth>. Run by run_asio.sh against
// redis-benchmark in the same script.
#include <asio/io_context.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "dlq/asio.hpp"
#include "dlq/asio/redis.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s <redis-url> <n> <depth>\n", argv[0]);
    return 2;
  }
  const std::string url = argv[1];
  const long n = std::atol(argv[2]);
  const long depth = std::atol(argv[3]);
  asio::io_context io;
  dlq::RedisListOptions layout;
  layout.dead_key = "bench:asio:{*}";
  dlq::asio::AsyncDeadLetterQueue<dlq::asio::RedisListStorage> q(
      io.get_executor(), dlq::asio::RedisListStorage(io.get_executor(), url, layout));
  // Not JSON: base64 in a 308-byte envelope; run_asio.sh gives redis-benchmark values of
  // the stored envelope's size (-d).
  const std::string payload(64, 'x');
  dlq::Failure f;
  f.error = "bench";
  long started = 0, done = 0, failed = 0;
  std::function<void()> next = [&] {
    if (started == n) return;
    ++started;
    q.async_send_to_dlq("q", payload, f, [&](std::exception_ptr e, std::string) {
      ++done;
      if (e) ++failed;
      next();
    });
  };
  // Warm up (connect) outside the measurement.
  q.async_size("q", [](std::exception_ptr, std::size_t) {});
  io.run();
  io.restart();
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < depth; ++i)
    next();
  io.run();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (failed != 0 || done != n) {
    std::fprintf(stderr, "%ld of %ld sends failed\n", failed, n);
    return 1;
  }
  std::printf("%.0f\n", static_cast<double>(n) / s);
  return 0;
}

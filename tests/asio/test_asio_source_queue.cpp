// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// dlq::asio::AsyncSourceQueue on memory and on the shared Redis server (or, run with
// DLQ_SOURCE_CLUSTER=1 and the filter ~[single-server], the 3-master test cluster): the
// blocking source queue's contract cases (tests/contract/source_queue_suite.hpp, included,
// not copied) with take, ack, nack, recover, size and in_flight going through the async
// queue; a cancelled waiting take loses nothing and hands out nothing twice; a steady_timer
// on the same io_context keeps its schedule while a take waits on an empty queue, and a job
// pushed meanwhile is taken within the poll's delay; async_dead_letter; a recover of more
// than one script step.
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_future.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dlq/asio.hpp"
#include "dlq/asio/redis.hpp"
#include "dlq/dlq.hpp"
#include "dlq/redis/list_storage.hpp"
#include "dlq/redis/source_queue.hpp"
#include "dlq/source_queue.hpp"
#include "redis/cluster_test_util.hpp"
#include "redis/redis_test_util.hpp"

namespace {

bool cluster_run() {
  const char* v = std::getenv("DLQ_SOURCE_CLUSTER");
  return v != nullptr && std::string(v) == "1";
}

std::string url() {
  return cluster_run() ? dlq::test::cluster_url() : dlq::test::shared_redis_url();
}

using namespace std::chrono_literals;

// The source-queue interface of the contract suite over an AsyncSourceQueue: the worker's
// operations (take without waiting, ack, nack = async_requeue, recover, size, in_flight) run
// through the async queue on an io_context of its own thread, awaited with use_future (so the
// suite's threads may call it); the producer's and operator's (push, pop, consumers) through
// the blocking source queue on the same keys.
template <class Async, class Blocking>
class Through {
 public:
  Through(Async& async, Blocking& blocking) : a_(&async), b_(&blocking) {}
  void push(std::string_view q, std::string_view p) { b_->push(q, p); }
  std::optional<std::string> pop(std::string_view q) { return b_->pop(q); }
  std::vector<std::string> consumers(std::string_view q) { return b_->consumers(q); }
  std::vector<dlq::SourceJob> take(std::string_view q, std::string_view c, std::size_t max = 1) {
    return a_->async_take(q, c, max, 0ms, asio::use_future).get();
  }
  std::size_t ack(std::string_view q, std::string_view c, const std::vector<dlq::SourceJob>& j) {
    return a_->async_ack(q, c, j, asio::use_future).get();
  }
  std::size_t nack(std::string_view q, std::string_view c, const std::vector<dlq::SourceJob>& j) {
    return a_->async_requeue(q, c, j, asio::use_future).get();
  }
  std::size_t recover(std::string_view q, std::string_view c) {
    return a_->async_recover(q, c, asio::use_future).get();
  }
  std::size_t size(std::string_view q) { return a_->async_size(q, asio::use_future).get(); }
  std::size_t in_flight(std::string_view q, std::string_view c) {
    return a_->async_in_flight(q, c, asio::use_future).get();
  }

 private:
  Async* a_;
  Blocking* b_;
};

// An io_context run by a thread of its own until the fixture ends.
struct Loop {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> guard = asio::make_work_guard(io);
  std::thread runner{[this] { io.run(); }};
  void stop() {
    if (!runner.joinable()) return;
    guard.reset();
    runner.join();
  }
  ~Loop() { stop(); }
};

}  // namespace

struct AsyncMemorySource {
  Loop loop;
  dlq::DeadLetterQueue<dlq::MemoryStorage> queue;
  dlq::MemorySourceQueue blocking{queue.storage()};
  dlq::asio::AsyncSourceQueue<dlq::MemoryStorage> async{loop.io.get_executor(), queue.storage()};
  Through<decltype(async), dlq::MemorySourceQueue> through{async, blocking};
  ~AsyncMemorySource() { loop.stop(); }
  auto& jobs() { return through; }
  auto& dlq() { return queue; }
};

struct AsyncRedisSource {
  using Queue = dlq::DeadLetterQueue<dlq::RedisListStorage>;
  dlq::RedisListOptions layout = dlq::test::unique_layout();
  Loop loop;
  Queue queue{dlq::RedisListStorage(url(), layout)};
  dlq::RedisSourceQueue blocking{queue.storage()};
  dlq::asio::RedisListStorage storage{loop.io.get_executor(), url(), layout};
  dlq::asio::AsyncSourceQueue<dlq::asio::RedisListStorage> async{loop.io.get_executor(), storage};
  Through<decltype(async), dlq::RedisSourceQueue> through{async, blocking};
  AsyncRedisSource() {
    if (cluster_run() != queue.storage().cluster_mode())
      throw std::runtime_error(cluster_run() ? "expected a Redis Cluster" : "expected one server");
  }
  ~AsyncRedisSource() {
    asio::post(loop.io, [this] { storage.close(); });  // on the loop's thread
    loop.stop();
  }
  auto& jobs() { return through; }
  auto& dlq() { return queue; }
};

#define DLQ_SOURCE_FIXTURES AsyncMemorySource, AsyncRedisSource
#include "contract/source_queue_suite.hpp"

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
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <functional>
#include <future>
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
#include "support/redis_process.hpp"

#if defined(ASIO_HAS_CO_AWAIT) && defined(__cpp_impl_coroutine)
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/use_awaitable.hpp>
#define DLQ_TEST_COROUTINES 1
#endif

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
    return settle(a_->async_take(q, c, max, 0ms, asio::use_future));
  }
  std::size_t ack(std::string_view q, std::string_view c, const std::vector<dlq::SourceJob>& j) {
    return settle(a_->async_ack(q, c, j, asio::use_future));
  }
  std::size_t nack(std::string_view q, std::string_view c, const std::vector<dlq::SourceJob>& j) {
    return settle(a_->async_requeue(q, c, j, asio::use_future));
  }
  std::size_t recover(std::string_view q, std::string_view c) {
    return settle(a_->async_recover(q, c, asio::use_future));
  }
  std::size_t size(std::string_view q) { return settle(a_->async_size(q, asio::use_future)); }
  std::size_t in_flight(std::string_view q, std::string_view c) {
    return settle(a_->async_in_flight(q, c, asio::use_future));
  }

 private:
  // The result of `done`, read once the loop's thread has dropped its side (the handler and
  // its std::promise: a no-op posted after the completion has run). Otherwise an error's
  // exception could be read here (what()) and freed there by the last exception_ptr
  // reference, whose count libstdc++.so keeps uninstrumented: ThreadSanitizer then reports
  // the free against the read (test_asio_source_queue, the brace-name case, under load).
  template <class T>
  T settle(std::future<T> done) {
    done.wait();
    std::promise<void> dropped;
    asio::post(a_->get_executor(), [&dropped] { dropped.set_value(); });
    dropped.get_future().wait();
    return done.get();
  }

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

namespace {

using clock_type = std::chrono::steady_clock;

struct TakeResult {
  std::exception_ptr error;
  std::vector<dlq::SourceJob> jobs;
  clock_type::time_point at;
};

// Starts, on `f`'s loop, a take of `consumer` that waits `wait`, bound to `signal`'s slot;
// `calls` counts its completions (a handler runs once); the first one fulfils the future.
template <class Fixture>
std::future<TakeResult> start_take(Fixture& f, asio::cancellation_signal& signal,
                                   std::shared_ptr<std::atomic<int>> calls,
                                   std::chrono::milliseconds wait, bool cancel_at_once) {
  auto done = std::make_shared<std::promise<TakeResult>>();
  auto result = done->get_future();
  asio::post(f.loop.io, [&f, &signal, calls, wait, cancel_at_once, done] {
    f.async.async_take(
        "orders", "w1", 10, wait,
        asio::bind_cancellation_slot(
            signal.slot(), [calls, done](std::exception_ptr e, std::vector<dlq::SourceJob> jobs) {
              if (calls->fetch_add(1) == 0)
                done->set_value(TakeResult{e, std::move(jobs), clock_type::now()});
            }));
    // In the same turn: the take's first try is in flight (its script sent, or on memory its
    // answer posted).
    if (cancel_at_once) signal.emit(asio::cancellation_type::terminal);
  });
  return result;
}

bool cancelled(const std::exception_ptr& e, bool* unknown) {
  try {
    if (e) std::rethrow_exception(e);
  } catch (const dlq::asio::cancelled_error& c) {
    *unknown = c.outcome_unknown();
    return true;
  } catch (...) {
  }
  return false;
}

}  // namespace

TEMPLATE_TEST_CASE(
    "async source queue: a cancelled waiting take loses nothing, takes nothing twice",
    "[source][asio][cancel]", AsyncMemorySource, AsyncRedisSource) {
  TestType f;
  auto& jobs = f.jobs();
  constexpr int rounds = 60;
  std::multiset<std::string> acked;
  int unknown_count = 0;
  std::vector<std::shared_ptr<std::atomic<int>>> all_calls;
  for (int r = 0; r < rounds; ++r) {
    const std::string job = "job-" + std::to_string(r);
    const bool at_once = r % 2 == 0;
    if (at_once) jobs.push("orders", job);  // the try in flight moves it after the cancel
    asio::cancellation_signal signal;
    auto calls = std::make_shared<std::atomic<int>>(0);
    all_calls.push_back(calls);
    const auto start = clock_type::now();
    auto fut = start_take(f, signal, calls, 5s, at_once);
    if (!at_once) {  // the take sleeps between tries on an empty queue: cancel it there
      std::this_thread::sleep_for(20ms);
      std::promise<void> emitted;
      asio::post(f.loop.io, [&] {
        signal.emit(asio::cancellation_type::terminal);
        emitted.set_value();
      });
      emitted.get_future().get();
    }
    const TakeResult res = fut.get();
    bool unknown = false;
    CHECK(cancelled(res.error, &unknown));
    CHECK(res.jobs.empty());
    CHECK(res.at - start < 2s);  // at once, not at the end of the 5 s wait
    // Cancelled in the turn that started it, the take's first try is in flight: outcome
    // unknown. Cancelled 20 ms later it is usually asleep between tries, but on a loaded
    // machine a try may still await its answer then, so either is right there.
    if (at_once) CHECK(unknown);
    unknown_count += unknown ? 1 : 0;
    if (!at_once) jobs.push("orders", job);  // after the cancel: no try may take it any more
    // The next take gets the job exactly once: held (moved by the cancelled take's try) or
    // from the queue.
    const auto next = jobs.take("orders", "w1", 10);
    REQUIRE(payloads(next) == std::vector<std::string>{job});
    CHECK(jobs.ack("orders", "w1", next) == 1);
    acked.insert(job);
  }
  std::this_thread::sleep_for(150ms);  // past a poll delay: a stray try would have shown
  for (const auto& c : all_calls)
    CHECK(c->load() == 1);  // each handler once
  CHECK(acked.size() == static_cast<std::size_t>(rounds));
  CHECK(std::set<std::string>(acked.begin(), acked.end()).size() == acked.size());
  CHECK(jobs.size("orders") == 0);
  CHECK(jobs.in_flight("orders", "w1") == 0);
  INFO("cancelled with a try in flight: " << unknown_count << " of " << rounds);
  CHECK(unknown_count >= rounds / 2);
}

TEMPLATE_TEST_CASE("async source queue: a timer keeps its schedule while a take waits",
                   "[source][asio][timer]", AsyncMemorySource, AsyncRedisSource) {
  TestType f;
  auto& jobs = f.jobs();
  // A 10 ms ticker on the same io_context, for the whole test.
  std::vector<clock_type::time_point> ticks;
  std::atomic<bool> stop{false};
  asio::steady_timer ticker(f.loop.io);
  std::promise<void> ticker_done;
  std::function<void()> tick = [&] {
    ticks.push_back(clock_type::now());
    if (stop) return ticker_done.set_value();
    ticker.expires_after(10ms);
    ticker.async_wait([&](std::error_code) { tick(); });
  };
  asio::post(f.loop.io, tick);
  // 1: a take on an empty queue waits out its 400 ms and comes back empty.
  auto t0 = clock_type::now();
  auto empty = f.async.async_take("orders", "w1", 4, 400ms, asio::use_future).get();
  const auto waited = clock_type::now() - t0;
  CHECK(empty.empty());
  CHECK(waited >= 400ms);
  CHECK(waited < 700ms);
  // 2: a job pushed while a take waits is taken within the poll's delay (at most 100 ms).
  auto waiting = f.async.async_take("orders", "w1", 4, 5s, asio::use_future);
  std::this_thread::sleep_for(250ms);
  const auto pushed = clock_type::now();
  jobs.push("orders", "late");
  auto got = waiting.get();
  const auto latency = clock_type::now() - pushed;
  CHECK(payloads(got) == std::vector<std::string>{"late"});
  CHECK(latency < 250ms);
  CHECK(jobs.ack("orders", "w1", got) == 1);
  stop = true;
  ticker_done.get_future().get();
  // The ticker was never held up: every gap near 10 ms, none past 100 ms.
  REQUIRE(ticks.size() > 2);
  auto worst = clock_type::duration::zero();
  for (std::size_t i = 1; i < ticks.size(); ++i)
    worst = std::max(worst, ticks[i] - ticks[i - 1]);
  CHECK(worst < 100ms);
  CHECK(ticks.size() >= 30);  // ~65 in 650 ms; 30 even on a loaded machine
  INFO("ticks " << ticks.size() << ", worst gap "
                << std::chrono::duration_cast<std::chrono::milliseconds>(worst).count() << " ms");
}

namespace {

// async_dead_letter through `src` and `adlq`, checked with `dead_size()` (the entries stored).
template <class Source, class Adlq, class DeadSize>
void dead_letter_case(Source& src, Adlq& adlq, DeadSize dead_size) {
  dlq::Failure fail;
  fail.error = "gateway timeout";
  fail.attempt = 3;
  auto taken = src.async_take("orders", "w1", 1, 0ms, asio::use_future).get();
  REQUIRE(taken.size() == 1);
  const std::string id =
      src.async_dead_letter(adlq, "orders", "w1", taken[0], fail, asio::use_future).get();
  CHECK_FALSE(id.empty());
  CHECK(src.async_in_flight("orders", "w1", asio::use_future).get() == 0);
  CHECK(dead_size() == 1);
  // An empty consumer name: refused through the token, nothing sent.
  CHECK_THROWS_AS(src.async_dead_letter(adlq, "orders", "", taken[0], fail, asio::use_future).get(),
                  dlq::invalid_argument);
  CHECK(dead_size() == 1);
}

}  // namespace

TEST_CASE("async source queue: async_dead_letter stores the job, then acks it (memory)",
          "[source][asio]") {
  Loop loop;
  dlq::asio::AsyncDeadLetterQueue<dlq::MemoryStorage> adlq(loop.io.get_executor());
  dlq::MemorySourceQueue blocking(adlq.storage());
  dlq::asio::AsyncSourceQueue<dlq::MemoryStorage> src(loop.io.get_executor(), adlq.storage());
  blocking.push("orders", R"({"order":1})");
  dead_letter_case(src, adlq, [&] { return adlq.async_size("orders", asio::use_future).get(); });
  loop.stop();
}

TEST_CASE("async source queue: async_dead_letter stores the job, then acks it (Redis)",
          "[source][asio][redis]") {
  AsyncRedisSource f;
  dlq::asio::AsyncDeadLetterQueue<dlq::asio::RedisListStorage> adlq(f.loop.io.get_executor(),
                                                                    f.storage);
  f.jobs().push("orders", R"({"order":1})");
  dead_letter_case(f.async, adlq, [&] { return f.queue.size("orders"); });
  CHECK(f.queue.peek("orders")[0].error == "gateway timeout");  // the blocking queue reads it
}

TEST_CASE("async source queue: recover of 2500 held jobs runs three script steps, in order",
          "[source][asio][redis]") {
  AsyncRedisSource f;
  dlq::test::RawClient raw(url());
  const std::string held = f.blocking.in_flight_key("orders", "dead");
  for (int i = 0; i < 2500; i += 500) {
    std::vector<std::string> cmd = {"RPUSH", held};
    for (int j = i; j < i + 500; ++j)
      cmd.push_back(std::to_string(j));
    raw.cmd(cmd);
  }
  raw.cmd({"SADD", f.blocking.consumers_key("orders"), "dead"});
  CHECK(f.async.async_recover("orders", "dead", asio::use_future).get() == 2500);
  CHECK(f.jobs().in_flight("orders", "dead") == 0);
  CHECK(f.jobs().consumers("orders").empty());
  const auto back = drain(f.jobs(), "orders");
  REQUIRE(back.size() == 2500);
  CHECK(back.front() == "0");
  CHECK(back.back() == "2499");
  CHECK(std::is_sorted(back.begin(), back.end(), [](const std::string& a, const std::string& b) {
    return std::stoi(a) < std::stoi(b);
  }));
}

TEST_CASE("async source queue: a take on a frozen server times out; a timer keeps its schedule",
          "[source][asio][redis][single-server]") {
  dlq::test::RedisProcess server;
  dlq::redis::ConnectionOptions opts = dlq::redis::parse_url(server.url());
  opts.command_timeout = 300ms;
  opts.reconnect_attempts = 0;
  asio::io_context io;
  dlq::asio::RedisListStorage storage(io.get_executor(), opts, dlq::test::unique_layout());
  dlq::asio::AsyncSourceQueue<dlq::asio::RedisListStorage> jobs(io.get_executor(), storage);
  // Connected first, so the freeze catches a try in flight and not the connect.
  std::size_t size = 99;
  jobs.async_size("orders", [&](std::exception_ptr, std::size_t n) { size = n; });
  io.run();
  REQUIRE(size == 0);
  io.restart();
  server.freeze();
  std::vector<clock_type::time_point> ticks;
  bool stop = false;
  asio::steady_timer ticker(io);
  std::function<void()> tick = [&] {
    ticks.push_back(clock_type::now());
    if (stop) return;
    ticker.expires_after(10ms);
    ticker.async_wait([&](std::error_code) { tick(); });
  };
  tick();
  std::exception_ptr error;
  std::size_t got = 99;
  const auto start = clock_type::now();
  clock_type::duration took{};
  jobs.async_take("orders", "w1", 4, 5s, [&](std::exception_ptr e, std::vector<dlq::SourceJob> j) {
    error = e;
    got = j.size();
    took = clock_type::now() - start;
    stop = true;
  });
  io.run_for(3s);
  server.thaw();
  CHECK(got == 0);
  CHECK_THROWS_AS(std::rethrow_exception(error), dlq::timeout_error);
  CHECK(took < 2s);  // the command's limit, not the take's 5 s wait
  auto worst = clock_type::duration::zero();
  for (std::size_t i = 1; i < ticks.size(); ++i)
    worst = std::max(worst, ticks[i] - ticks[i - 1]);
  CHECK(worst < 100ms);
  CHECK(ticks.size() >= 15);
  storage.close();
}

#ifdef DLQ_TEST_COROUTINES
namespace {

// A worker that takes four at a time and acks each job until the queue is empty, then a
// take waiting 5 s on the empty queue raced against a 100 ms timer with ||. Returns what
// happened ("acked N, timer at once" when the timer won and cancelled the take at once).
template <class Async>
asio::awaitable<std::string> worker_then_race(Async& jobs, asio::io_context& io) {
  using namespace asio::experimental::awaitable_operators;
  // Named arguments: g++ 12 rejects string literals and braced lists inside a co_await
  // expression of a template coroutine ("array used as initializer").
  const std::string q = "orders", me = "w1";
  std::string out;
  try {
    int acked = 0;
    for (;;) {
      auto batch = co_await jobs.async_take(q, me, 4, 0ms, asio::use_awaitable);
      if (batch.empty()) break;
      for (const auto& job : batch) {
        std::vector<dlq::SourceJob> one{job};
        const std::size_t n = co_await jobs.async_ack(q, me, std::move(one), asio::use_awaitable);
        acked += static_cast<int>(n);
      }
    }
    out += "acked " + std::to_string(acked);
    asio::steady_timer limit(io, 100ms);
    const auto start = clock_type::now();
    auto r = co_await(jobs.async_take(q, me, 4, 5s, asio::use_awaitable) ||
                      limit.async_wait(asio::use_awaitable));
    out += r.index() == 1 ? ", timer" : ", take";
    out += clock_type::now() - start < 1s ? " at once" : " late";
  } catch (const std::exception& e) {
    out += std::string(", threw: ") + e.what();
  }
  co_return out;
}

}  // namespace

TEMPLATE_TEST_CASE("async source queue: a coroutine worker, and a take that loses an || to a timer",
                   "[source][asio][coroutine]", AsyncMemorySource, AsyncRedisSource) {
  TestType f;
  auto& blocking = f.jobs();
  for (int i = 0; i < 10; ++i)
    blocking.push("orders", "job-" + std::to_string(i));
  auto outcome = asio::co_spawn(f.loop.io, worker_then_race(f.async, f.loop.io), asio::use_future);
  CHECK(outcome.get() == "acked 10, timer at once");
  blocking.push("orders", "after");
  std::this_thread::sleep_for(250ms);  // a stray try of the cancelled take would move it
  CHECK(blocking.in_flight("orders", "w1") == 0);
  CHECK(blocking.size("orders") == 1);
}
#endif

// The worker of source_worker_child.cpp written on the asynchronous API, for the SIGKILL
// test (tests/support/source_worker_sigkill.hpp) of dlq::asio::AsyncSourceQueue on Redis:
//   async_source_worker_child redis://HOST:PORT/DB PREFIX CONSUMER
// One io_context, one thread: async_take of "orders" four at a time as CONSUMER; per job
// about 1 ms of "work" on a steady_timer; n % 10 == 3 is poison (async_dead_letter to an
// AsyncDeadLetterQueue), every other job is "done": RPUSHed to queue "done", then acked
// (async_ack). Exits 0 when a take finds "orders" empty.
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "dlq/asio.hpp"
#include "dlq/asio/redis.hpp"

namespace {

using Storage = dlq::asio::RedisListStorage;

struct Worker : std::enable_shared_from_this<Worker> {
  Worker(asio::io_context& io, Storage& s, std::string consumer)
      : timer(io),
        storage(s),
        dlq(io.get_executor(), s),
        jobs(io.get_executor(), s),
        me(std::move(consumer)) {}

  asio::steady_timer timer;
  Storage& storage;
  dlq::asio::AsyncDeadLetterQueue<Storage> dlq;
  dlq::asio::AsyncSourceQueue<Storage> jobs;
  std::string me;
  std::vector<dlq::SourceJob> batch;
  std::size_t next = 0;
  int status = 0;

  void fail(const std::exception_ptr& e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      std::fprintf(stderr, "async_source_worker_child: %s\n", x.what());
    }
    status = 1;
    storage.close();
  }

  void take() {
    jobs.async_take(
        "orders", me, 4, std::chrono::milliseconds(0),
        [self = shared_from_this()](std::exception_ptr e, std::vector<dlq::SourceJob> got) {
          if (e) return self->fail(e);
          if (got.empty()) return self->storage.close();  // done: run() returns
          self->batch = std::move(got);
          self->next = 0;
          self->work();
        });
  }

  void work() {
    if (next == batch.size()) return take();
    timer.expires_after(std::chrono::milliseconds(1));
    timer.async_wait([self = shared_from_this()](std::error_code) { self->settle(); });
  }

  void settle() {
    const dlq::SourceJob job = batch[next++];
    auto after = [self = shared_from_this()](std::exception_ptr e, auto) {
      if (e) return self->fail(e);
      self->work();
    };
    if (std::stol(job.payload.substr(4)) % 10 == 3) {
      dlq::Failure f;
      f.error = "poison";
      f.attempt = 3;
      f.worker = me;
      return jobs.async_dead_letter(dlq, "orders", me, job, f, after);
    }
    storage.connection().execute(
        {"RPUSH", storage.source_key("done"), job.payload}, true, "RPUSH done",
        [self = shared_from_this(), job, after](std::exception_ptr e, dlq::asio::RedisReply) {
          if (e) return self->fail(e);
          self->jobs.async_ack("orders", self->me, {job}, after);
        });
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: async_source_worker_child URL PREFIX CONSUMER\n");
    return 2;
  }
  try {
    const std::string url = argv[1], prefix = argv[2];
    dlq::RedisListOptions o;
    o.dead_key = prefix + "dlq:{*}";
    o.source_key = prefix + "queue:{*}";
    o.corrupt_key = prefix + "dlq:{*}:corrupt";
    asio::io_context io;
    Storage storage(io.get_executor(), url, o);
    auto worker = std::make_shared<Worker>(io, storage, argv[3]);
    worker->take();
    io.run();
    return worker->status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "async_source_worker_child: %s\n", e.what());
    return 1;
  }
}

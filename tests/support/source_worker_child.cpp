// The worker the source-queue SIGKILL tests kill mid-job: written once against the
// source-queue interface (dlq/source_queue.hpp), run on Redis or SQLite.
//   source_worker_child redis://HOST:PORT/DB PREFIX CONSUMER
//   source_worker_child sqlite:///path/to/file.db PREFIX CONSUMER
// It takes jobs "job-<n>" from queue "orders" four at a time as CONSUMER; n % 10 == 3 is
// poison (dead-lettered through dead_letter()), every other job is "done": pushed to queue
// "done", then acked. About 1 ms of work per job. Exits 0 when "orders" is empty.
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>

#include "dlq/dlq.hpp"
#if DLQ_CHILD_REDIS
#include "dlq/redis/list_storage.hpp"
#include "dlq/redis/source_queue.hpp"
#endif
#if DLQ_CHILD_SQLITE
#include "dlq/kv/storage.hpp"
#include "dlq/sqlite/job_queue.hpp"
#include "dlq/sqlite/sqlite_store.hpp"
#endif

namespace {

template <class Jobs, class Dlq>
void work(Jobs& jobs, Dlq& dlq, const std::string& me) {
  for (;;) {
    auto batch = jobs.take("orders", me, 4);
    if (batch.empty()) return;
    for (const auto& job : batch) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const long n = std::stol(job.payload.substr(4));
      if (n % 10 == 3) {
        dlq::Failure f;
        f.error = "poison";
        f.attempt = 3;
        f.worker = me;
        dlq::dead_letter(jobs, dlq, "orders", me, job, f);
      } else {
        jobs.push("done", job.payload);
        jobs.ack("orders", me, {job});
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: source_worker_child URL PREFIX CONSUMER\n");
    return 2;
  }
  try {
    const std::string url = argv[1], prefix = argv[2], me = argv[3];
#if DLQ_CHILD_REDIS
    if (url.rfind("redis://", 0) == 0) {
      dlq::RedisListOptions o;
      o.dead_key = prefix + "dlq:{*}";
      o.source_key = prefix + "queue:{*}";
      o.corrupt_key = prefix + "dlq:{*}:corrupt";
      dlq::DeadLetterQueue<dlq::RedisListStorage> dlq(dlq::RedisListStorage(url, o));
      dlq::RedisSourceQueue jobs(dlq.storage());
      work(jobs, dlq, me);
      return 0;
    }
#endif
#if DLQ_CHILD_SQLITE
    if (url.rfind("sqlite://", 0) == 0) {
      dlq::kv::SqliteOptions options;  // survives a process crash, which is what is tested
      options.synchronous = dlq::kv::SqliteSync::normal;
      dlq::kv::SqliteStore store(url.substr(9), options);
      dlq::kv::JobQueue<> jobs(store);
      using Storage = dlq::KeyValueStorage<dlq::kv::SqliteStore, dlq::kv::JobQueue<>>;
      dlq::DeadLetterQueue<Storage> dlq(Storage(store, jobs));
      work(jobs, dlq, me);
      return 0;
    }
#endif
    std::fprintf(stderr, "source_worker_child: unsupported URL %s\n", url.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "source_worker_child: %s\n", e.what());
    return 1;
  }
}

// 05 — a worker, as the demo (scripts/demo.sh) runs it: take jobs from a queue, run the
// handler, retry with exponential backoff, and dead-letter the job with send_to_dlq when its
// retries are exhausted. The loop is the same on every job source:
//
//   example_05_worker                                   in memory: the whole story, self-checked
//   example_05_worker --store sqlite:///tmp/demo.db --queue orders [--fixed] [--done FILE]
//   example_05_worker --store redis://127.0.0.1:6379/0 --queue orders [--fixed]
//   example_05_worker --store postgres://user@host/db --queue orders [--fixed]
//                     (after `dlqctl migrate --store URL`: the jobs in a kv::JobQueue there)
//                     (any Redis URL: rediss://host:6380?ca_file=ca.pem for TLS, unix://…)
//   example_05_worker --store ... --queue orders --produce 3000     enqueue demo orders, exit
//
// The worker loop is written once against the source-queue interface (dlq/source_queue.hpp)
// and runs unchanged on each backend: dlq::MemorySourceQueue in memory, dlq::kv::JobQueue on
// SQLite (the dead letters a dlq::KeyValueStorage in the same file, replayed straight back
// into the job queue), dlq::RedisSourceQueue on Redis (the list queue:{orders}; the dead
// letters dlq:{orders}). take() moves jobs to the worker's in-flight list, so a worker that
// crashes loses nothing: restarted under the same --worker name it gets them first.
// Operators use dlqctl on the same store.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <dlq/dlq.hpp>
#include <nlohmann/json.hpp>
#if DLQ_EXAMPLE_WITH_SQLITE
#include <dlq/sqlite.hpp>
#endif
#if DLQ_EXAMPLE_WITH_REDIS
#include <dlq/redis.hpp>
#endif
#if DLQ_EXAMPLE_WITH_POSTGRES
#include <dlq/postgres.hpp>
#endif

namespace {

struct Settings {
  std::string store = "memory:";
  std::string queue = "orders";
  std::string worker = "worker-1";
  bool fixed = false;       // run version 2 of the handler (the fix)
  int max_attempts = 3;     // attempts per job before it is dead-lettered
  int backoff_ms = 2;       // first retry delay; doubles per attempt
  int idle_exit_ms = 1000;  // stop after the queue stayed empty this long (0 = never)
  std::size_t batch = 16;   // jobs taken at once
  std::string done_file;    // append the id of every processed order here
  int produce = 0;          // enqueue this many demo orders and exit
};

// --- the handler: the code being operated ---------------------------------------------------

struct ValidationError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct TimeoutError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Processes one order. Version 1 has three bugs the demo's poison orders hit; version 2
// (--fixed) is the fix. Every 40th order meets a transient timeout on its first attempt.
long long handle(const std::string& payload, int attempt, bool fixed) {
  const auto order = nlohmann::json::parse(payload);
  const long long id = order.at("id").get<long long>();
  if (id % 40 == 3 && attempt == 1) throw TimeoutError("inventory service timeout");
  const std::string currency = order.at("currency");
  if (currency != "EUR" && currency != "USD" && !(fixed && currency == "GBP"))
    throw ValidationError("unsupported currency " + currency);
  std::string amount = order.at("amount");
  if (amount.find(',') != std::string::npos) {
    if (!fixed) throw ValidationError("amount has a decimal comma");
    std::replace(amount.begin(), amount.end(), ',', '.');
  }
  if (std::stod(amount) <= 0) throw ValidationError("amount is not positive");
  const std::string sku = order.at("sku");
  if (!fixed && std::any_of(sku.begin(), sku.end(), [](char c) { return c >= 'a' && c <= 'z'; }))
    throw ValidationError("unknown SKU (lower case)");
  return id;
}

// Demo order `i`: about 5% of them are poison for version 1 of the handler.
std::string demo_order(int i) {
  const bool gbp = i % 50 == 7, comma = i % 60 == 11, lower = i % 75 == 19;
  nlohmann::ordered_json o;
  o["id"] = i;
  o["sku"] = lower ? "kb-" + std::to_string(100 + i % 7) : "KB-" + std::to_string(100 + i % 7);
  o["qty"] = 1 + i % 3;
  o["currency"] = gbp ? "GBP" : i % 2 ? "EUR" : "USD";
  o["amount"] = comma ? "19,90" : std::to_string(10 + i % 90) + ".90";
  return o.dump();
}

// --- the worker loop --------------------------------------------------------------------------

struct Stats {
  std::size_t processed = 0, after_retry = 0, dead_lettered = 0;
};

template <class Jobs, class Dlq>
Stats work(Jobs& jobs, Dlq& dlq, const Settings& s) {
  Stats stats;
  std::ofstream done;
  if (!s.done_file.empty()) done.open(s.done_file, std::ios::app);
  auto idle_since = std::chrono::steady_clock::now();
  for (;;) {
    // Moves up to s.batch jobs to this worker's in-flight list (or returns the ones it still
    // holds from a crash): a job leaves the queue for good only when it is acked.
    const std::vector<dlq::SourceJob> batch = jobs.take(s.queue, s.worker, s.batch);
    if (batch.empty()) {
      if (s.idle_exit_ms > 0 &&
          std::chrono::steady_clock::now() - idle_since > std::chrono::milliseconds(s.idle_exit_ms))
        return stats;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    std::vector<dlq::SourceJob> finished;
    for (const auto& job : batch) {
      for (int attempt = 1;; ++attempt) {
        try {
          const long long id = handle(job.payload, attempt, s.fixed);
          ++stats.processed;
          if (attempt > 1) ++stats.after_retry;
          if (done.is_open()) done << id << '\n';
          finished.push_back(job);
          break;
        } catch (const std::exception& e) {
          if (attempt < s.max_attempts) {  // retry with exponential backoff
            std::this_thread::sleep_for(std::chrono::milliseconds(s.backoff_ms << (attempt - 1)));
            continue;
          }
          dlq::Failure f;  // retries exhausted: dead-letter the job, payload byte for byte
          f.error = e.what();
          f.attempt = attempt;
          f.worker = s.worker;
          f.error_type = dynamic_cast<const ValidationError*>(&e) ? "ValidationError"
                         : dynamic_cast<const TimeoutError*>(&e)  ? "TimeoutError"
                                                                  : "Error";
          dlq::dead_letter(jobs, dlq, s.queue, s.worker, job, f);  // stored, then acked
          ++stats.dead_lettered;
          break;
        }
      }
    }
    if (done.is_open()) done.flush();
    jobs.ack(s.queue, s.worker, finished);  // only now do they leave: a crash before redelivers
    idle_since = std::chrono::steady_clock::now();
  }
}

template <class Jobs, class Dlq>
int run(Jobs& jobs, Dlq& dlq, const Settings& s) {
  if (s.produce > 0) {
    for (int i = 1; i <= s.produce; ++i)
      jobs.push(s.queue, demo_order(i));
    std::printf("produced %d orders into '%s'\n", s.produce, s.queue.c_str());
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  const Stats st = work(jobs, dlq, s);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s (handler v%d): %zu processed (%zu after a retry), %zu dead-lettered, %.1f s\n",
              s.worker.c_str(), s.fixed ? 2 : 1, st.processed, st.after_retry, st.dead_lettered,
              secs);
  return 0;
}

// The whole story in memory, checked: 400 orders, version 1 dead-letters the poison ones,
// an operator looks and replays after the fix, version 2 processes them; none is lost.
int in_memory(Settings s) {
  s.idle_exit_ms = 1;
  dlq::DeadLetterQueue<dlq::MemoryStorage> dlq;
  dlq::MemorySourceQueue jobs(dlq.storage());  // where replay puts jobs back
  for (int i = 1; i <= 400; ++i)
    jobs.push(s.queue, demo_order(i));
  const Stats v1 = work(jobs, dlq, s);
  std::printf("v1: %zu processed, %zu dead-lettered\n", v1.processed, v1.dead_lettered);
  for (const auto& e : dlq.peek(s.queue, 0, 3))
    std::printf("  dead letter: %s  (%s after %lld attempts)\n", e.payload.c_str(), e.error.c_str(),
                static_cast<long long>(e.attempt));
  const auto report = dlq.replay_all(s.queue);  // the fix is deployed: replay
  s.fixed = true;
  const Stats v2 = work(jobs, dlq, s);
  std::printf("replayed %zu; v2: %zu processed; %zu dead letters left\n", report.replayed,
              v2.processed, dlq.size(s.queue));
  return v1.processed + v2.processed == 400 && dlq.size(s.queue) == 0 ? 0 : 1;
}

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--store")
      s.store = value();
    else if (a == "--queue")
      s.queue = value();
    else if (a == "--worker")
      s.worker = value();
    else if (a == "--fixed")
      s.fixed = true;
    else if (a == "--max-attempts")
      s.max_attempts = std::stoi(value());
    else if (a == "--backoff-ms")
      s.backoff_ms = std::stoi(value());
    else if (a == "--idle-exit-ms")
      s.idle_exit_ms = std::stoi(value());
    else if (a == "--batch")
      s.batch = std::stoul(value());
    else if (a == "--done")
      s.done_file = value();
    else if (a == "--produce")
      s.produce = std::stoi(value());
    else
      throw std::invalid_argument("unknown option " + a + " (see the top of 05-worker.cpp)");
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Settings s = parse(argc, argv);
    if (s.store == "memory:") return in_memory(s);
#if DLQ_EXAMPLE_WITH_SQLITE
    if (s.store.rfind("sqlite://", 0) == 0) {
      dlq::kv::SqliteStore store(s.store.substr(9));  // sqlite:///tmp/x.db -> /tmp/x.db
      dlq::kv::JobQueue<> jobs(store);
      // Dead letters in the same file; replay pushes them back into the job queue.
      using Storage = dlq::KeyValueStorage<dlq::kv::SqliteStore, dlq::kv::JobQueue<>>;
      dlq::DeadLetterQueue<Storage> dlq(Storage(store, jobs));
      return run(jobs, dlq, s);
    }
#endif
#if DLQ_EXAMPLE_WITH_POSTGRES
    if (s.store.rfind("postgres://", 0) == 0 || s.store.rfind("postgresql://", 0) == 0) {
      dlq::kv::PostgresStore store(s.store);  // the tables: dlqctl migrate (never on first use)
      dlq::kv::JobQueue<dlq::kv::PostgresStore> jobs(store);
      // Dead letters in the same database; replay moves them back in one transaction.
      using Storage = dlq::KeyValueStorage<dlq::kv::PostgresStore, decltype(jobs)>;
      dlq::DeadLetterQueue<Storage> dlq(Storage(store, jobs));
      return run(jobs, dlq, s);
    }
#endif
#if DLQ_EXAMPLE_WITH_REDIS
    if (dlq::redis::is_url(s.store)) {  // every form parse_url takes, rediss:// (TLS) too
      dlq::DeadLetterQueue dlq{dlq::RedisListStorage(s.store)};  // (class template deduction)
      dlq::RedisSourceQueue jobs(dlq.storage());                 // the lists queue:{<queue>}
      return run(jobs, dlq, s);
    }
#endif
    std::fprintf(stderr, "05-worker: cannot open store '%s' in this build\n", s.store.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "05-worker: %s\n", e.what());
  }
  return 1;
}

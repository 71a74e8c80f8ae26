// Memory backend throughput: send and replay rates with 200-byte JSON payloads, each beside a
// baseline measured in the same process:
//   send   vs  building the envelope as a nlohmann::json document and dumping it (a first
//              port), and a bare std::deque<std::string>::emplace_back under a mutex (the
//              floor of any thread-safe in-memory list: no envelope at all);
//   replay vs  the Python seed's algorithm done naively in C++ (pop the entry, parse it with
//              nlohmann::json, dump original_payload, push it) — what a first port would do.
// Run through tests/benchmarks/run_memory.sh, which prints medians and ratios.
#include <benchmark/benchmark.h>

#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dlq/dlq.hpp"

namespace {

// A 200-byte JSON job payload.
std::string payload_200() {
  std::string p =
      R"({"job":"charge-card","order_id":1234567,"customer":"c-000042","amount_cents":129900,)"
      R"("currency":"EUR","items":[{"sku":"A-1","qty":2},{"sku":"B-7","qty":1}],"note":")";
  p.append(200 - p.size() - 2, 'x');
  p.append("\"}");
  return p;
}

const std::string kPayload = payload_200();

void BM_Send(benchmark::State& state) {
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  dlq::Failure f;
  f.error = "payment gateway timeout";
  f.attempt = 3;
  f.worker = "worker-7";
  std::size_t n = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(q.send_to_dlq("orders", kPayload, f));
    if (++n % 200000 == 0) {
      state.PauseTiming();
      q.purge("orders");
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_Send);

void BM_SendBatch100(benchmark::State& state) {
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  std::vector<dlq::FailedJob> jobs(100);
  for (auto& j : jobs) {
    j.queue = "orders";
    j.payload = kPayload;
    j.failure.error = "payment gateway timeout";
    j.failure.attempt = 3;
    j.failure.worker = "worker-7";
  }
  std::size_t n = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(q.send_batch(jobs));
    if (++n % 2000 == 0) {
      state.PauseTiming();
      q.purge("orders");
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * 100);
}
BENCHMARK(BM_SendBatch100);

void BM_Baseline_DequePush(benchmark::State& state) {
  std::mutex m;
  std::deque<std::string> list;
  for (auto _ : state) {
    std::lock_guard<std::mutex> lock(m);
    list.emplace_back(kPayload);
    if (list.size() == 200000) list.clear();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_Baseline_DequePush);

// The envelope a first port would build: a nlohmann::json document, dumped.
void BM_Baseline_NaiveSend(benchmark::State& state) {
  std::mutex m;
  std::deque<std::string> list;
  for (auto _ : state) {
    nlohmann::json entry = {{"original_payload", nlohmann::json::parse(kPayload)},
                            {"queue", "orders"},
                            {"error", "payment gateway timeout"},
                            {"attempt", 3},
                            {"worker", "worker-7"},
                            {"dead_lettered_at", "2026-11-30T03:32:19.123456+00:00"}};
    std::string raw = entry.dump();
    std::lock_guard<std::mutex> lock(m);
    list.push_back(std::move(raw));
    if (list.size() == 200000) list.clear();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_Baseline_NaiveSend);

constexpr int kReplayEntries = 100000;

void BM_ReplayAll(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    dlq::DeadLetterQueue<dlq::MemoryStorage> q;
    std::vector<dlq::FailedJob> jobs(kReplayEntries);
    for (auto& j : jobs) {
      j.queue = "orders";
      j.payload = kPayload;
      j.failure.error = "payment gateway timeout";
    }
    q.send_batch(jobs);
    state.ResumeTiming();
    const auto report = q.replay_all("orders");
    benchmark::DoNotOptimize(report.replayed);
    state.PauseTiming();
    if (report.replayed != kReplayEntries) state.SkipWithError("replay moved the wrong count");
    q = dlq::DeadLetterQueue<dlq::MemoryStorage>();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kReplayEntries);
}
BENCHMARK(BM_ReplayAll)->Unit(benchmark::kMillisecond);

void BM_Baseline_NaiveReplay(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    dlq::DeadLetterQueue<dlq::MemoryStorage> q;
    std::vector<dlq::FailedJob> jobs(kReplayEntries);
    for (auto& j : jobs) {
      j.queue = "orders";
      j.payload = kPayload;
      j.failure.error = "payment gateway timeout";
    }
    q.send_batch(jobs);
    std::deque<std::string> dead;
    for (auto& raw : q.storage().range("orders", dlq::ListKind::dead, 0, kReplayEntries))
      dead.push_back(std::move(raw));
    std::deque<std::string> source;
    std::mutex m;
    state.ResumeTiming();
    for (;;) {
      std::string raw;
      {
        std::lock_guard<std::mutex> lock(m);
        if (dead.empty()) break;
        raw = std::move(dead.front());
        dead.pop_front();
      }
      const auto entry = nlohmann::json::parse(raw);
      std::string out = entry.at("original_payload").dump();
      std::lock_guard<std::mutex> lock(m);
      source.push_back(std::move(out));
    }
    benchmark::DoNotOptimize(source.size());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kReplayEntries);
}
BENCHMARK(BM_Baseline_NaiveReplay)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

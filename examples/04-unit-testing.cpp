// 04 — unit-testing a worker with the in-memory backend: no server, same semantics as Redis.
// The worker step is written against the source-queue interface (dlq/source_queue.hpp), so
// production runs the same code on dlq::RedisSourceQueue or dlq::kv::JobQueue. A test feeds
// jobs, runs the worker, and asserts on what was dead-lettered and why; a fixed clock makes
// timestamps and ids predictable.
#include <chrono>
#include <cstdio>
#include <string>

#include <dlq/dlq.hpp>

// The code under test: a worker step that dead-letters jobs it cannot handle.
template <class Jobs, class Queue>
bool process_one(Jobs& jobs, Queue& dlq, const std::string& queue) {
  const std::string me = "payments-worker-1";
  auto taken = jobs.take(queue, me);  // in flight until acked: a crash loses nothing
  if (taken.empty()) return false;
  const dlq::SourceJob& job = taken[0];
  if (job.payload.find("\"amount\":-") != std::string::npos) {
    dlq::Failure f;
    f.error = "negative amount";
    f.attempt = 1;
    f.error_type = "ValidationError";
    f.context = {{"rule", "amount >= 0"}};
    dlq::dead_letter(jobs, dlq, queue, me, job, f);  // stored, then acked
  } else {
    jobs.ack(queue, me, taken);  // done
  }
  return true;
}

int main() {
  dlq::Options options;
  const auto fixed = std::chrono::system_clock::time_point(std::chrono::seconds(1796009539));
  options.clock = [fixed] { return fixed; };
  dlq::DeadLetterQueue<dlq::MemoryStorage> dlq(dlq::MemoryStorage{}, options);

  dlq::MemorySourceQueue jobs(dlq.storage());  // production: dlq::RedisSourceQueue
  jobs.push("payments", R"({"amount":-5})");
  jobs.push("payments", R"({"amount":10})");
  while (process_one(jobs, dlq, "payments")) {
  }

  // The checks a test framework's REQUIRE would make (not assert(): they stay in a Release
  // build, where NDEBUG removes asserts).
  int failed = 0;
  const auto check = [&failed](bool ok, const char* what) {
    if (ok) return;
    std::printf("FAILED: %s\n", what);
    ++failed;
  };
  check(dlq.size("payments") == 1, "one dead letter");
  const dlq::Entry e = dlq.peek("payments").at(0);
  check(e.error == "negative amount" && e.error_type == "ValidationError", "the error");
  check(e.payload == R"({"amount":-5})", "the payload, byte for byte");
  check(e.dead_lettered_at == "2026-11-30T03:32:19.000000+00:00", "the fixed clock's time");
  check(e.context["rule"] == "amount >= 0", "the context");
  check(jobs.size("payments") == 0 && jobs.in_flight("payments", "payments-worker-1") == 0,
        "nothing waiting or in flight");
  std::printf("worker dead-lettered %s: %s\n", e.payload.c_str(), e.error.c_str());
  return failed == 0 ? 0 : 1;
}

// 04 — unit-testing a worker with the in-memory backend: no server, same semantics as Redis.
// A test feeds jobs, runs the worker, and asserts on what was dead-lettered and why; a fixed
// clock makes timestamps and ids predictable.
#include <cassert>
#include <chrono>
#include <cstdio>
#include <string>

#include <dlq/dlq.hpp>

// The code under test: a worker step that dead-letters jobs it cannot handle.
template <class Queue>
bool process_one(Queue& dlq, const std::string& queue) {
  auto job = dlq.storage().source_pop(queue);
  if (!job) return false;
  if (job->find("\"amount\":-") != std::string::npos) {
    dlq::Failure f;
    f.error = "negative amount";
    f.attempt = 1;
    f.error_type = "ValidationError";
    f.context = {{"rule", "amount >= 0"}};
    dlq.send_to_dlq(queue, *job, f);
  }
  return true;
}

int main() {
  dlq::Options options;
  const auto fixed = std::chrono::system_clock::time_point(std::chrono::seconds(1796009539));
  options.clock = [fixed] { return fixed; };
  dlq::DeadLetterQueue<dlq::MemoryStorage> dlq(dlq::MemoryStorage{}, options);

  dlq.storage().source_push("payments", R"({"amount":-5})");
  dlq.storage().source_push("payments", R"({"amount":10})");
  while (process_one(dlq, "payments")) {
  }

  // Assertions a test framework would make:
  assert(dlq.size("payments") == 1);
  const dlq::Entry e = dlq.peek("payments").at(0);
  assert(e.error == "negative amount" && e.error_type == "ValidationError");
  assert(e.payload == R"({"amount":-5})");
  assert(e.dead_lettered_at == "2026-11-30T03:32:19.000000+00:00");
  assert(e.context["rule"] == "amount >= 0");
  std::printf("worker dead-lettered %s: %s\n", e.payload.c_str(), e.error.c_str());
  return dlq.size("payments") == 1 && e.error == "negative amount" ? 0 : 1;
}

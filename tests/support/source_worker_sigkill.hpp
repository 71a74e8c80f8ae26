// The source-queue SIGKILL test, shared by the Redis and SQLite suites: a worker process
// (tests/support/source_worker_child.cpp) is killed with SIGKILL 20 times mid-job over 1000
// jobs, each run under a new consumer name. After every kill the dead worker's jobs are
// recover()ed, and then every job is done, waiting or dead-lettered — none lost (the
// contract suite covers a worker resuming under its old name). Finally a worker runs
// to the end: every good job is done, every poison one dead-lettered, nothing waits, and the
// only duplicates are the at-least-once re-runs of jobs in flight at a kill (at most one
// batch of 4 per kill).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/catch.hpp"
#include "support/redis_process.hpp"

namespace dlq::test {

// Jobs:  push/take/recover/in_flight on queue "orders" and "done"; Dlq: peek("orders").
// `child(consumer)` = the child's argv.
template <class Jobs, class Dlq, class Child>
void source_worker_sigkill(Jobs& jobs, Dlq& dlq, Child child) {
  constexpr int n = 1000;
  for (int i = 0; i < n; ++i)
    jobs.push("orders", "job-" + std::to_string(i));
  std::mt19937 rng(std::random_device{}());
  std::string consumer;
  std::vector<std::string> done;  // what the workers finished, in order
  int mid_job = 0;
  for (int round = 0; round < 20; ++round) {
    consumer = "w" + std::to_string(round);
    const pid_t pid = spawn_process(child(consumer));
    // Kill it 10-100 ms after it took its first jobs (not after a fixed time from spawn: a
    // worker built with AddressSanitizer in compiled mode took so long to start that 11 of 20
    // kills landed before it held anything, and the check below failed).
    const auto started = std::chrono::steady_clock::now();
    while (jobs.in_flight("orders", consumer) == 0 &&
           std::chrono::steady_clock::now() - started < std::chrono::seconds(10))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(10, 100)(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    const std::size_t held = jobs.in_flight("orders", consumer);
    if (held > 0) ++mid_job;
    // Accounting: done + dead-lettered + waiting + held >= n distinct jobs.
    std::set<std::string> seen;
    for (const auto& e : dlq.peek("orders", 0, 100000))
      seen.insert(e.payload);
    while (auto p = jobs.pop("done"))
      done.push_back(*p);
    seen.insert(done.begin(), done.end());
    // The dead worker's jobs go back to the queue (what a supervisor does); then read it.
    const std::size_t recovered = jobs.recover("orders", consumer);
    CHECK(recovered == held);
    std::vector<std::string> waiting;
    while (auto p = jobs.pop("orders"))
      waiting.push_back(*p);
    for (const auto& p : waiting) {
      seen.insert(p);
      jobs.push("orders", p);
    }
    INFO("round " << round << ": " << done.size() << " done, " << waiting.size() << " waiting, "
                  << held << " held");
    REQUIRE(seen.size() == static_cast<std::size_t>(n));
  }
  CHECK(mid_job >= 10);  // the kills really landed while jobs were in flight

  const pid_t pid = spawn_process(child(consumer));
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  CHECK(jobs.size("orders") == 0);
  CHECK(jobs.in_flight("orders", consumer) == 0);
  while (auto p = jobs.pop("done"))
    done.push_back(*p);
  std::map<std::string, int> finished;
  for (const auto& p : done)
    ++finished[p];
  std::map<std::string, int> dead;
  for (const auto& e : dlq.peek("orders", 0, 100000))
    ++dead[e.payload];
  int duplicates = 0;
  for (int i = 0; i < n; ++i) {
    const std::string p = "job-" + std::to_string(i);
    if (i % 10 == 3) {
      CHECK(finished.count(p) == 0);
      REQUIRE(dead.count(p) == 1);
      duplicates += dead[p] - 1;
    } else {
      CHECK(dead.count(p) == 0);
      REQUIRE(finished.count(p) == 1);
      duplicates += finished[p] - 1;
    }
  }
  CHECK(duplicates <= 20 * 4);
}

}  // namespace dlq::test

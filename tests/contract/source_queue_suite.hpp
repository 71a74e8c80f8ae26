// The source-queue contract (dlq/source_queue.hpp): the worker's side of the queue jobs come
// from, the same on every backend. A backend's test file defines DLQ_SOURCE_FIXTURES (a
// comma-separated list of fixture types) and includes this file; each fixture provides:
//
//   Fixture();                 a fresh, isolated source queue and dead-letter queue
//   auto& jobs();              the source queue (MemorySourceQueue, RedisSourceQueue, JobQueue)
//   auto& dlq();               a DeadLetterQueue whose replay puts jobs back into jobs()
#pragma once

#ifndef DLQ_SOURCE_FIXTURES
#error "define DLQ_SOURCE_FIXTURES before including source_queue_suite.hpp"
#endif

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/source_queue.hpp"
#include "support/catch.hpp"

namespace source_contract {

inline std::vector<std::string> payloads(const std::vector<dlq::SourceJob>& jobs) {
  std::vector<std::string> out;
  for (const auto& j : jobs)
    out.push_back(j.payload);
  return out;
}

template <class Jobs>
std::vector<std::string> drain(Jobs& jobs, const std::string& queue) {
  std::vector<std::string> out;
  while (auto p = jobs.pop(queue))
    out.push_back(*p);
  return out;
}

inline dlq::Failure failure(std::string error, std::int64_t attempt) {
  dlq::Failure f;
  f.error = std::move(error);
  f.attempt = attempt;
  f.worker = "w1";
  return f;
}

// The worker loop of examples/05-worker.cpp in miniature, written once against the
// interface: jobs whose payload contains "poison" are dead-lettered, the others done.
template <class Jobs, class Dlq>
std::vector<std::string> work(Jobs& jobs, Dlq& dlq, const std::string& queue,
                              const std::string& me) {
  std::vector<std::string> done;
  for (;;) {
    auto batch = jobs.take(queue, me, 4);
    if (batch.empty()) return done;
    for (const auto& job : batch) {
      if (job.payload.find("poison") != std::string::npos) {
        dlq::dead_letter(jobs, dlq, queue, me, job, failure("poisoned", 3));
      } else {
        done.push_back(job.payload);
        jobs.ack(queue, me, {job});
      }
    }
  }
}

}  // namespace source_contract

using namespace source_contract;

TEMPLATE_TEST_CASE("source queue: push and pop are first in, first out", "[source]",
                   DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  CHECK_FALSE(jobs.pop("orders").has_value());
  CHECK(jobs.size("orders") == 0);
  jobs.push("orders", "a");
  jobs.push("orders", "b");
  jobs.push("emails", "x");
  CHECK(jobs.size("orders") == 2);
  CHECK(jobs.pop("orders") == std::optional<std::string>("a"));
  CHECK(jobs.pop("orders") == std::optional<std::string>("b"));
  CHECK_FALSE(jobs.pop("orders").has_value());
  CHECK(jobs.size("emails") == 1);
}

TEMPLATE_TEST_CASE("source queue: payloads come back byte for byte", "[source]",
                   DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  const std::vector<std::string> bytes = {std::string("nul\0inside", 10), "\xff\xfe binary",
                                          R"({"n":12345678901234567,"l":[]})", "",
                                          std::string(100000, 'x')};
  for (const auto& b : bytes)
    jobs.push("orders", b);
  auto taken = jobs.take("orders", "w1", 10);
  CHECK(payloads(taken) == bytes);
  CHECK(jobs.ack("orders", "w1", taken) == bytes.size());
  CHECK(jobs.in_flight("orders", "w1") == 0);
}

TEMPLATE_TEST_CASE("source queue: take moves jobs in flight until ack", "[source]",
                   DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  CHECK(jobs.take("orders", "w1", 5).empty());
  for (const char* p : {"1", "2", "3"})
    jobs.push("orders", p);
  auto taken = jobs.take("orders", "w1", 2);
  CHECK(payloads(taken) == std::vector<std::string>{"1", "2"});
  CHECK(jobs.size("orders") == 1);
  CHECK(jobs.in_flight("orders", "w1") == 2);
  CHECK(jobs.ack("orders", "w1", taken) == 2);
  CHECK(jobs.ack("orders", "w1", taken) == 0);  // already acked: nothing happens
  CHECK(jobs.in_flight("orders", "w1") == 0);
  CHECK(payloads(jobs.take("orders", "w1", 0)) == std::vector<std::string>{"3"});  // 0 = 1
}

TEMPLATE_TEST_CASE("source queue: a consumer that died gets its unacked jobs first", "[source]",
                   DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  for (const char* p : {"1", "2", "3", "4"})
    jobs.push("orders", p);
  (void)jobs.take("orders", "w1", 2);  // ... and the worker dies without acking
  auto again = jobs.take("orders", "w1", 3);
  CHECK(payloads(again) == std::vector<std::string>{"1", "2"});
  CHECK(jobs.size("orders") == 2);
  CHECK(jobs.ack("orders", "w1", again) == 2);
  CHECK(payloads(jobs.take("orders", "w1", 3)) == std::vector<std::string>{"3", "4"});
}

TEMPLATE_TEST_CASE("source queue: two consumers never take the same job", "[source]",
                   DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  for (int i = 0; i < 6; ++i)
    jobs.push("orders", std::to_string(i));
  auto a = payloads(jobs.take("orders", "w1", 3));
  auto b = payloads(jobs.take("orders", "w2", 3));
  CHECK(a == std::vector<std::string>{"0", "1", "2"});
  CHECK(b == std::vector<std::string>{"3", "4", "5"});
  CHECK(jobs.in_flight("orders", "w1") == 3);
  CHECK(jobs.in_flight("orders", "w2") == 3);
}

TEMPLATE_TEST_CASE("source queue: nack gives a job back at the tail", "[source]",
                   DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  for (const char* p : {"a", "b", "c"})
    jobs.push("orders", p);
  auto taken = jobs.take("orders", "w1", 1);
  CHECK(jobs.nack("orders", "w1", taken) == 1);
  CHECK(jobs.nack("orders", "w1", taken) == 0);  // no longer held: not put back twice
  CHECK(jobs.in_flight("orders", "w1") == 0);
  CHECK(drain(jobs, "orders") == std::vector<std::string>{"b", "c", "a"});
}

TEMPLATE_TEST_CASE("source queue: recover puts a dead consumer's jobs back, in order", "[source]",
                   DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  for (const char* p : {"1", "2", "3", "4"})
    jobs.push("orders", p);
  (void)jobs.take("orders", "w1", 3);
  CHECK(jobs.recover("orders", "w1") == 3);
  CHECK(jobs.recover("orders", "w1") == 0);
  CHECK(jobs.in_flight("orders", "w1") == 0);
  CHECK(drain(jobs, "orders") == std::vector<std::string>{"4", "1", "2", "3"});
}

TEMPLATE_TEST_CASE("source queue: dead_letter stores the job, then acks it", "[source]",
                   DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  auto& dlq = f.dlq();
  jobs.push("orders", R"({"order":1})");
  auto taken = jobs.take("orders", "w1", 1);
  REQUIRE(taken.size() == 1);
  const std::string id =
      dlq::dead_letter(jobs, dlq, "orders", "w1", taken[0], failure("gateway timeout", 3));
  CHECK_FALSE(id.empty());
  CHECK(jobs.in_flight("orders", "w1") == 0);
  REQUIRE(dlq.size("orders") == 1);
  CHECK(dlq.peek("orders")[0].error == "gateway timeout");
  CHECK(dlq.replay_all("orders").replayed == 1);  // the fix is deployed: back to the queue
  CHECK(payloads(jobs.take("orders", "w1", 2)) == std::vector<std::string>{R"({"order":1})"});
}

TEMPLATE_TEST_CASE("source queue: dead_letter with an empty name stores nothing", "[source]",
                   DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  auto& dlq = f.dlq();
  jobs.push("orders", "j");
  auto taken = jobs.take("orders", "w1", 1);
  REQUIRE(taken.size() == 1);
  // The ack would refuse the name after the send: the entry must not be stored first.
  CHECK_THROWS_AS(dlq::dead_letter(jobs, dlq, "orders", "", taken[0], failure("e", 3)),
                  dlq::invalid_argument);
  CHECK_THROWS_AS(dlq::dead_letter(jobs, dlq, "", "w1", taken[0], failure("e", 3)),
                  dlq::invalid_argument);
  CHECK(dlq.size("orders") == 0);
  CHECK(jobs.in_flight("orders", "w1") == 1);  // still held
}

TEMPLATE_TEST_CASE("source queue: fail_job requeues before the last attempt, then dead-letters",
                   "[source]", DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  auto& dlq = f.dlq();
  jobs.push("orders", "j");
  auto taken = jobs.take("orders", "w1", 1);
  CHECK_FALSE(dlq::fail_job(jobs, dlq, "orders", "w1", taken[0], failure("e", 1), 2));
  CHECK(dlq.size("orders") == 0);
  CHECK(jobs.size("orders") == 1);
  taken = jobs.take("orders", "w1", 1);
  CHECK(dlq::fail_job(jobs, dlq, "orders", "w1", taken[0], failure("e", 2), 2));
  CHECK(dlq.size("orders") == 1);
  CHECK(jobs.size("orders") == 0);
  CHECK(jobs.in_flight("orders", "w1") == 0);
}

TEMPLATE_TEST_CASE("source queue: the same worker loop runs on every backend", "[source]",
                   DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  auto& dlq = f.dlq();
  for (int i = 0; i < 10; ++i)
    jobs.push("orders", i % 5 == 2 ? "poison-" + std::to_string(i) : "ok-" + std::to_string(i));
  const auto done = work(jobs, dlq, "orders", "w1");
  CHECK(done.size() == 8);
  CHECK(dlq.size("orders") == 2);
  CHECK(jobs.size("orders") == 0);
  CHECK(jobs.in_flight("orders", "w1") == 0);
}

TEMPLATE_TEST_CASE("source queue: empty names are refused with invalid_argument", "[source]",
                   DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  CHECK_THROWS_AS(jobs.push("", "x"), dlq::invalid_argument);
  CHECK_THROWS_AS(jobs.take("", "w1", 1), dlq::invalid_argument);
  CHECK_THROWS_AS(jobs.take("orders", "", 1), dlq::invalid_argument);
}

TEMPLATE_TEST_CASE("source queue: moves with an empty queue or consumer name are refused",
                   "[source]", DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  jobs.push("orders", "a");
  auto taken = jobs.take("orders", "w1", 1);
  REQUIRE(taken.size() == 1);
  CHECK_THROWS_AS(jobs.pop(""), dlq::invalid_argument);
  CHECK_THROWS_AS(jobs.ack("orders", "", taken), dlq::invalid_argument);
  CHECK_THROWS_AS(jobs.ack("", "w1", taken), dlq::invalid_argument);
  CHECK_THROWS_AS(jobs.nack("orders", "", taken), dlq::invalid_argument);
  CHECK_THROWS_AS(jobs.nack("", "w1", taken), dlq::invalid_argument);
  CHECK_THROWS_AS(jobs.recover("orders", ""), dlq::invalid_argument);
  CHECK_THROWS_AS(jobs.recover("", "w1"), dlq::invalid_argument);
  CHECK(jobs.in_flight("orders", "w1") == 1);  // nothing moved
  CHECK(jobs.size("orders") == 0);
}

TEMPLATE_TEST_CASE("source queue: ack after recover handed the job to another consumer is a no-op",
                   "[source]", DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  jobs.push("orders", "x");
  auto stale = jobs.take("orders", "w1", 1);
  REQUIRE(stale.size() == 1);
  CHECK(jobs.recover("orders", "w1") == 1);  // w1 was presumed dead
  auto fresh = jobs.take("orders", "w2", 1);
  REQUIRE(payloads(fresh) == std::vector<std::string>{"x"});
  CHECK(jobs.ack("orders", "w1", stale) == 0);   // the late ack of w1 touches nothing
  CHECK(jobs.nack("orders", "w1", stale) == 0);  // nor does a late nack
  CHECK(jobs.size("orders") == 0);
  CHECK(jobs.in_flight("orders", "w2") == 1);
  CHECK(jobs.ack("orders", "w2", fresh) == 1);
  CHECK(jobs.ack("orders", "w2", fresh) == 0);  // acked twice: counted once
  CHECK(jobs.in_flight("orders", "w2") == 0);
}

TEMPLATE_TEST_CASE("source queue: ack or nack of a job the consumer does not hold moves nothing",
                   "[source]", DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  jobs.push("orders", "a");
  jobs.push("orders", "b");
  auto mine = jobs.take("orders", "w1", 1);
  auto theirs = jobs.take("orders", "w2", 1);
  REQUIRE(payloads(theirs) == std::vector<std::string>{"b"});
  CHECK(jobs.nack("orders", "w1", {dlq::SourceJob{"no-such-id", "never pushed", 7}}) == 0);
  CHECK(jobs.ack("orders", "w1", {dlq::SourceJob{"no-such-id", "never pushed", 7}}) == 0);
  CHECK(jobs.ack("orders", "w1", theirs) == 0);
  CHECK(jobs.nack("orders", "w1", theirs) == 0);
  CHECK(jobs.ack("orders", "w1", {}) == 0);
  CHECK(jobs.in_flight("orders", "w1") == 1);
  CHECK(jobs.in_flight("orders", "w2") == 1);
  CHECK(jobs.size("orders") == 0);
  CHECK(jobs.ack("orders", "w1", mine) == 1);
  CHECK(jobs.ack("orders", "w2", theirs) == 1);
}

TEMPLATE_TEST_CASE(
    "source queue: 8 threads taking, nacking and recovering each other ack every "
    "job exactly once",
    "[source][threads]", DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  constexpr int n = 400;
  for (int i = 0; i < n; ++i)
    jobs.push("orders", "job-" + std::to_string(i));
  std::mutex m;
  std::multiset<std::string> acked;  // payloads whose ack counted
  std::atomic<int> left{n};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      const std::string me = "w" + std::to_string(t);
      const std::string other = "w" + std::to_string((t + 1) % 8);
      for (int round = 0; left.load() > 0 && round < 100000; ++round) {
        auto batch = jobs.take("orders", me, 3);
        if (round % 7 == 3) jobs.recover("orders", other);  // presumes a neighbour dead
        for (std::size_t i = 0; i < batch.size(); ++i) {
          if ((round + i) % 5 == 0) {
            jobs.nack("orders", me, {batch[i]});
            continue;
          }
          if (jobs.ack("orders", me, {batch[i]}) == 1) {
            std::lock_guard<std::mutex> lock(m);
            acked.insert(batch[i].payload);
            left.fetch_sub(1);
          }
        }
        if (batch.empty()) std::this_thread::yield();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  CHECK(acked.size() == static_cast<std::size_t>(n));
  CHECK(std::set<std::string>(acked.begin(), acked.end()).size() == static_cast<std::size_t>(n));
  CHECK(jobs.size("orders") == 0);
  for (int t = 0; t < 8; ++t)
    CHECK(jobs.in_flight("orders", "w" + std::to_string(t)) == 0);
}

TEMPLATE_TEST_CASE("source queue: threads sharing one queue each get every job once",
                   "[source][threads]", DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  constexpr int n = 800;
  for (int i = 0; i < n; ++i)
    jobs.push("orders", "job-" + std::to_string(i));
  std::mutex m;
  std::multiset<std::string> seen;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const std::string me = "w" + std::to_string(t);
      for (;;) {
        auto batch = jobs.take("orders", me, 8);
        if (batch.empty()) return;
        {
          std::lock_guard<std::mutex> lock(m);
          for (const auto& j : batch)
            seen.insert(j.payload);
        }
        jobs.ack("orders", me, batch);
      }
    });
  }
  for (auto& t : threads)
    t.join();
  CHECK(seen.size() == static_cast<std::size_t>(n));
  CHECK(std::set<std::string>(seen.begin(), seen.end()).size() == static_cast<std::size_t>(n));
  CHECK(jobs.size("orders") == 0);
}

// A name is part of a key. On Redis the in-flight list of consumer "x}" of queue "orders" is
// `queue:{orders}:inflight:x}` — the job list of the queue "orders}:inflight:x"; in a
// kv::JobQueue the jobs consumer "x}:ready" holds from "orders" are the collection
// `jobs:{orders}:held:x}:ready` — the ready list of the queue "orders}:held:x". A take from
// that queue handed out a job another worker held (delivered twice) and a push to it landed
// in the worker's in-flight list. Every backend (memory too: a unit test must refuse what
// production refuses) refuses a queue name with a brace before anything moves.
TEMPLATE_TEST_CASE("source queue: a queue name with a brace cannot reach another's held jobs",
                   "[source][names]", DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  const std::vector<std::pair<std::string, std::string>> cases = {{"orders}:inflight:x", "x}"},
                                                                  {"orders}:held:x", "x}:ready"}};
  for (const auto& c : cases) {
    const std::string& hostile = c.first;
    const std::string& worker = c.second;
    INFO("queue '" << hostile << "', consumer '" << worker << "'");
    jobs.push("orders", "job of " + worker);
    REQUIRE(jobs.take("orders", worker, 1).size() == 1);
    std::vector<dlq::SourceJob> again;
    int refused = 0;
    try {
      again = jobs.take(hostile, "y", 4);
    } catch (const dlq::invalid_argument& e) {
      ++refused;
      CHECK(std::string(e.what()).find("'}'") != std::string::npos);
    }
    CHECK(payloads(again).empty());  // else the held job is delivered a second time
    try {
      jobs.push(hostile, "intruder");
    } catch (const dlq::invalid_argument&) {
      ++refused;
    }
    CHECK(refused == 2);
    // The worker still holds exactly its one job, and nothing was pushed into its list.
    CHECK(payloads(jobs.take("orders", worker, 4)) == std::vector<std::string>{"job of " + worker});
    CHECK(jobs.recover("orders", worker) == 1);
    CHECK(drain(jobs, "orders") == std::vector<std::string>{"job of " + worker});
  }
}

TEMPLATE_TEST_CASE("source queue: a brace in a queue name is refused by every call",
                   "[source][names]", DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  auto& dlq = f.dlq();
  const dlq::SourceJob job{"", "p", 0};
  for (const std::string q : {"a{b", "a}b", "{orders}", "}"}) {
    INFO(q);
    CHECK_THROWS_AS(jobs.push(q, "x"), dlq::invalid_argument);
    CHECK_THROWS_AS(jobs.pop(q), dlq::invalid_argument);
    CHECK_THROWS_AS(jobs.take(q, "w1", 1), dlq::invalid_argument);
    CHECK_THROWS_AS(jobs.ack(q, "w1", {job}), dlq::invalid_argument);
    CHECK_THROWS_AS(jobs.nack(q, "w1", {job}), dlq::invalid_argument);
    CHECK_THROWS_AS(jobs.recover(q, "w1"), dlq::invalid_argument);
    // The dead letters of a queue are replayed to its source queue: refused there too.
    CHECK_THROWS_AS(dlq.send_to_dlq(q, "x", failure("e", 1)), dlq::invalid_argument);
  }
  // Consumer names stay free: the first '}' after the queue name ends it in every key.
  for (const std::string w : {"w{1}", "}{", "x}", "x}:ready"}) {
    jobs.push("orders", "for " + w);
    CHECK(payloads(jobs.take("orders", w, 1)) == std::vector<std::string>{"for " + w});
    CHECK(jobs.in_flight("orders", w) == 1);
    CHECK(jobs.ack("orders", w, jobs.take("orders", w, 1)) == 1);
  }
  CHECK(jobs.size("orders") == 0);
}

// The rule of dlq/source_queue.hpp: one consumer name per worker at a time. take() by a name
// that holds jobs returns those jobs (a restarted worker picks up what it held), so two live
// workers sharing a name are both handed the same job.
TEMPLATE_TEST_CASE("source queue: two workers sharing one consumer name get the same held job",
                   "[source][names]", DLQ_SOURCE_FIXTURES) {
  TestType f;
  auto& jobs = f.jobs();
  jobs.push("orders", "job-1");
  jobs.push("orders", "job-2");
  const auto first = payloads(jobs.take("orders", "w1", 1));
  const auto second = payloads(jobs.take("orders", "w1", 1));  // another thread, same name
  CHECK(first == std::vector<std::string>{"job-1"});
  CHECK(second == first);  // delivered twice while job-2 waits
  CHECK(jobs.size("orders") == 1);
  CHECK(jobs.ack("orders", "w1", jobs.take("orders", "w1", 1)) == 1);
  CHECK(jobs.in_flight("orders", "w1") == 0);
}

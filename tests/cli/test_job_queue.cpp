// dlq::kv::JobQueue (dlq/sqlite/job_queue.hpp): the durable job queue the worker example and
// dlqctl use on SQLite — FIFO, byte-exact, held jobs redelivered to their consumer after a
// crash, concurrent consumers never sharing a job, replay of dead letters into it, and a
// consumer process killed with SIGKILL at random points losing nothing.
#include "dlq/sqlite/job_queue.hpp"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlq/dead_letter_queue.hpp"
#include "dlq/kv/memory_store.hpp"
#include "dlq/kv/storage.hpp"
#include "dlq/sqlite/sqlite_store.hpp"
#include "support/catch.hpp"

namespace {

// A fresh directory under $TMPDIR, removed at the end.
struct TempDir {
  std::string path;
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base ? base : "/tmp") + "/dlq-jobq-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    const std::string cmd = "rm -rf '" + path + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", path.c_str());
  }
  std::string file(const char* name) const { return path + "/" + name; }
};

std::vector<std::string> payloads(const std::vector<dlq::kv::Job>& jobs) {
  std::vector<std::string> out;
  for (const auto& j : jobs)
    out.push_back(j.payload);
  return out;
}

template <class Store>
void basic_contract(Store store) {
  dlq::kv::JobQueue<Store> q(store);
  const std::string binary("bin\0ary\xff", 8);
  q.push("orders", "a");
  q.push("orders", binary);
  q.push("orders", "c");
  q.push("other", "x");
  CHECK(q.size("orders") == 3);
  CHECK(q.size("other") == 1);

  auto first = q.take("orders", "w1", 2);
  CHECK(payloads(first) == std::vector<std::string>{"a", binary});
  CHECK(q.size("orders") == 1);
  CHECK(q.held("orders", "w1") == 2);

  // Before acking, w1 gets the same jobs again (a restarted worker resumes them).
  CHECK(payloads(q.take("orders", "w1", 5)) == payloads(first));
  // Another consumer gets the rest.
  auto second = q.take("orders", "w2", 5);
  CHECK(payloads(second) == std::vector<std::string>{"c"});
  CHECK(q.take("orders", "w3", 5).empty());

  CHECK(q.ack("orders", "w1", first) == 2);
  CHECK(q.ack("orders", "w1", first) == 0);  // acked twice: counted once
  CHECK(q.held("orders", "w1") == 0);
  CHECK(q.release("orders", "w2") == 1);  // w2 is gone for good: its job goes back
  CHECK(q.size("orders") == 1);
  CHECK(payloads(q.take("orders", "w3")) == std::vector<std::string>{"c"});
  CHECK(q.take("orders", "w1").empty());
}

}  // namespace

TEST_CASE("job queue: FIFO, byte-exact, held until acked (memory store)", "[jobs]") {
  basic_contract(dlq::kv::MemoryStore{});
}

TEST_CASE("job queue: FIFO, byte-exact, held until acked (SQLite store)", "[jobs][sqlite]") {
  TempDir dir;
  basic_contract(dlq::kv::SqliteStore(dir.file("jobs.db")));
}

TEST_CASE("job queue: held jobs survive reopening the file", "[jobs][sqlite]") {
  TempDir dir;
  {
    dlq::kv::JobQueue<> q(dlq::kv::SqliteStore(dir.file("jobs.db")));
    for (int i = 0; i < 5; ++i)
      q.push("orders", std::to_string(i));
    CHECK(q.take("orders", "w1", 3).size() == 3);
  }
  dlq::kv::JobQueue<> reopened(dlq::kv::SqliteStore(dir.file("jobs.db")));
  CHECK(reopened.size("orders") == 2);
  CHECK(payloads(reopened.take("orders", "w1", 10)) == std::vector<std::string>{"0", "1", "2"});
}

TEST_CASE("job queue: bad input is a typed error", "[jobs]") {
  dlq::kv::JobQueue<dlq::kv::MemoryStore> q(dlq::kv::MemoryStore{});
  CHECK_THROWS_AS(q.push("", "x"), dlq::invalid_argument);
  CHECK_THROWS_AS(q.take("", "w"), dlq::invalid_argument);
  CHECK_THROWS_AS(q.take("orders", ""), dlq::invalid_argument);
  CHECK_THROWS_AS(q.push_many({dlq::kv::Message{"", "x"}}), dlq::invalid_argument);
  dlq::kv::JobQueueOptions o;
  o.prefix.clear();
  CHECK_THROWS_AS(dlq::kv::JobQueue<dlq::kv::MemoryStore>(dlq::kv::MemoryStore{}, o),
                  dlq::invalid_argument);
}

TEST_CASE("job queue: concurrent consumers never share a job and lose none", "[jobs][sqlite]") {
  TempDir dir;
  dlq::kv::SqliteStore store(dir.file("jobs.db"));
  dlq::kv::JobQueue<> q(store);
  constexpr int n = 2000;
  std::vector<dlq::kv::Message> batch;
  std::vector<std::string> texts;
  texts.reserve(n);
  for (int i = 0; i < n; ++i)
    texts.push_back(std::to_string(i));
  for (const auto& t : texts)
    batch.push_back(dlq::kv::Message{"orders", t});
  q.push_many(batch);
  REQUIRE(q.size("orders") == n);

  std::mutex mutex;
  std::map<std::string, int> seen;
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      const std::string me = "w" + std::to_string(w);
      for (int rounds = 0; rounds < 10000; ++rounds) {  // bounded
        auto jobs = q.take("orders", me, 16);
        if (jobs.empty()) return;
        {
          std::lock_guard<std::mutex> lock(mutex);
          for (const auto& j : jobs)
            ++seen[j.payload];
        }
        q.ack("orders", me, jobs);
      }
    });
  }
  for (auto& t : threads)
    t.join();
  CHECK(seen.size() == static_cast<std::size_t>(n));
  std::size_t twice = 0;
  for (const auto& [k, v] : seen)
    if (v != 1) ++twice;
  CHECK(twice == 0);
  CHECK(q.size("orders") == 0);
}

TEST_CASE("job queue: dead letters in the same file replay straight into it", "[jobs][sqlite]") {
  TempDir dir;
  dlq::kv::SqliteStore store(dir.file("jobs.db"));
  dlq::kv::JobQueue<> jobs(store);
  using Storage = dlq::KeyValueStorage<dlq::kv::SqliteStore, dlq::kv::JobQueue<>>;
  dlq::DeadLetterQueue<Storage> dlq(Storage(store, jobs));
  const std::string binary("\x00\x01\x02", 3);
  dlq.send_to_dlq("orders", R"({"order":12345678901234567890})", "boom");
  dlq.send_to_dlq("orders", binary, "boom");
  CHECK(dlq.replay_all("orders").replayed == 2);
  CHECK(dlq.size("orders") == 0);
  CHECK(payloads(jobs.take("orders", "w", 10)) ==
        std::vector<std::string>{R"({"order":12345678901234567890})", binary});
}

TEST_CASE("job queue: a consumer killed with SIGKILL at random points loses nothing",
          "[jobs][sqlite][sigkill]") {
  TempDir dir;
  const std::string path = dir.file("jobs.db");
  constexpr int n = 20000;
  {
    dlq::kv::JobQueue<> q(dlq::kv::SqliteStore{path});
    std::vector<std::string> texts;
    for (int i = 0; i < n; ++i)
      texts.push_back(std::to_string(i));
    std::vector<dlq::kv::Message> batch;
    for (const auto& t : texts)
      batch.push_back(dlq::kv::Message{"orders", t});
    q.push_many(batch);
  }

  std::multiset<int> done;  // what the consumers reported processed (before acking)
  std::mt19937 rng(12345);
  int kills = 0;
  for (int round = 0; round < 20; ++round) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {  // the consumer: take, report, ack — until killed or out of jobs
      ::close(fds[0]);
      try {
        dlq::kv::SqliteOptions o;
        o.synchronous = dlq::kv::SqliteSync::normal;  // survives SIGKILL, which is the test
        dlq::kv::JobQueue<> q(dlq::kv::SqliteStore(path, o));
        for (;;) {
          auto jobs = q.take("orders", "consumer", 7);
          if (jobs.empty()) ::_exit(0);
          std::string report;
          for (const auto& j : jobs)
            report += j.payload + "\n";
          if (::write(fds[1], report.data(), report.size()) != static_cast<ssize_t>(report.size()))
            ::_exit(3);
          q.ack("orders", "consumer", jobs);
        }
      } catch (...) {
        ::_exit(2);
      }
    }
    ::close(fds[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(3 + rng() % 30));
    ::kill(pid, SIGKILL);
    std::string got;
    char buf[4096];
    for (ssize_t r; (r = ::read(fds[0], buf, sizeof buf)) > 0;)
      got.append(buf, static_cast<std::size_t>(r));
    ::close(fds[0]);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE((WIFSIGNALED(status) || WEXITSTATUS(status) == 0));
    if (WIFSIGNALED(status)) ++kills;  // killed while it was working
    std::size_t pos = 0;
    for (std::size_t nl; (nl = got.find('\n', pos)) != std::string::npos; pos = nl + 1)
      done.insert(std::stoi(got.substr(pos, nl - pos)));
  }
  // Whatever the kills left: the same consumer name resumes its held jobs, then the rest.
  dlq::kv::SqliteStore store(path);
  REQUIRE(store.integrity_check() == "ok");
  dlq::kv::JobQueue<> q(store);
  for (int rounds = 0; rounds < 10000; ++rounds) {
    auto jobs = q.take("orders", "consumer", 64);
    if (jobs.empty()) break;
    for (const auto& j : jobs)
      done.insert(std::stoi(j.payload));
    q.ack("orders", "consumer", jobs);
  }
  std::set<int> distinct(done.begin(), done.end());
  INFO("kills: " << kills << ", redelivered: " << done.size() - distinct.size());
  CHECK(kills >= 10);                                     // most rounds were cut short mid-work
  CHECK(distinct.size() == static_cast<std::size_t>(n));  // nothing lost
  CHECK(*distinct.begin() == 0);
  CHECK(*distinct.rbegin() == n - 1);
  CHECK(q.size("orders") == 0);
  CHECK(q.held("orders", "consumer") == 0);
}

// Issue 11 item 7: dead letters and the job queue in one SQLite file. Each replay step pushes
// the jobs and removes the dead letters in one transaction, so a replayer killed with SIGKILL
// at any point neither loses a job nor pushes one twice.
TEST_CASE(
    "job queue: a replay into the same file killed with SIGKILL 20 times loses and "
    "doubles nothing",
    "[jobs][sqlite][sigkill][replay]") {
  TempDir dir;
  const std::string path = dir.file("jobs.db");
  using Storage = dlq::KeyValueStorage<dlq::kv::SqliteStore, dlq::kv::JobQueue<>>;
  dlq::kv::SqliteOptions fast;
  fast.synchronous = dlq::kv::SqliteSync::normal;  // survives SIGKILL, which is the test
  constexpr int rounds = 20;
  constexpr int per_round = 300;
  int sent = 0;
  auto send = [&](int count) {  // a worker dead-letters `count` more jobs
    dlq::kv::SqliteStore store(path, fast);
    dlq::DeadLetterQueue<Storage> q(Storage(store, dlq::kv::JobQueue<>(store)));
    std::vector<dlq::FailedJob> batch;
    for (int i = 0; i < count; ++i, ++sent) {
      dlq::FailedJob j;
      j.queue = "orders";
      j.payload = "{\"n\":" + std::to_string(sent) + "}";
      j.failure.error = "boom";
      j.failure.job_id = "job-" + std::to_string(sent);
      batch.push_back(std::move(j));
    }
    q.send_batch(batch);
  };

  std::mt19937 rng(777);
  int kills = 0;
  for (int round = 0; round < rounds; ++round) {
    send(per_round);
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {  // the operator's replay: reports each batch, until killed or done
      ::close(fds[0]);
      try {
        dlq::kv::SqliteStore store(path, fast);
        dlq::Options o;
        o.replay_batch_items = 8;
        dlq::DeadLetterQueue<Storage> q(Storage(store, dlq::kv::JobQueue<>(store)), o);
        dlq::ReplayOptions r;
        r.on_progress = [&](const dlq::ReplayProgress&) {
          if (::write(fds[1], "p\n", 2) != 2) ::_exit(3);
        };
        q.replay("orders", r);
      } catch (...) {
        ::_exit(2);
      }
      ::_exit(0);
    }
    ::close(fds[1]);
    char c = 0;
    const bool started = ::read(fds[0], &c, 1) == 1;  // the first batch is in
    if (started) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 4000));
    ::kill(pid, SIGKILL);
    ::close(fds[0]);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE((WIFSIGNALED(status) || WEXITSTATUS(status) == 0));
    if (WIFSIGNALED(status)) ++kills;
  }
  // Finish what the kills left, then count every job in the queue.
  dlq::kv::SqliteStore store(path, fast);
  REQUIRE(store.integrity_check() == "ok");
  dlq::kv::JobQueue<> jobs(store);
  dlq::DeadLetterQueue<Storage> q(Storage(store, jobs));
  q.replay_all("orders");
  CHECK(q.size("orders") == 0);
  std::multiset<std::string> got;
  for (const auto& item : store.list(jobs.ready_collection("orders"), dlq::kv::Window{}))
    got.insert(item.value);
  const std::set<std::string> distinct(got.begin(), got.end());
  INFO("kills: " << kills << ", duplicates: " << got.size() - distinct.size());
  CHECK(kills >= 10);
  CHECK(distinct.size() == static_cast<std::size_t>(sent));  // nothing lost
  CHECK(got.size() == distinct.size());                      // nothing pushed twice
  CHECK(sent == rounds * per_round);
}

TEST_CASE(
    "job queue: a replay step into the same store conflicts when a record changed under "
    "it, and pushes nothing",
    "[jobs][sqlite][replay]") {
  TempDir dir;
  dlq::kv::SqliteStore store(dir.file("jobs.db"));
  dlq::kv::JobQueue<> jobs(store);
  dlq::KeyValueStorage s(store, jobs);
  s.push_many({dlq::Record{"orders", "job-1", "job-1", "one"},
               dlq::Record{"orders", "job-2", "job-2", "two"}});
  bool first = true;
  auto decide = [&](std::string_view raw, dlq::Decision& d) {
    if (first) {  // the job fails again while the step is deciding
      first = false;
      s.push(dlq::Record{"orders", "job-2", "job-2", "two again"});
    }
    d.action = dlq::Action::replay;
    d.destination = "orders";
    d.payload = raw;
  };
  decltype(s)::replay_cursor cursor;
  const auto r = s.replay_step("orders", cursor, 10, decide);
  CHECK(r.conflict);
  CHECK(jobs.size("orders") == 0);
  CHECK(s.size("orders", dlq::ListKind::dead) == 2);
  for (int guard = 0; guard < 10; ++guard)
    if (s.replay_step("orders", cursor, 10, decide).examined == 0) break;
  CHECK(payloads(jobs.take("orders", "w", 10)) == std::vector<std::string>{"one", "two again"});
  CHECK(s.size("orders", dlq::ListKind::dead) == 0);
  CHECK(s.superseded() == 0);
}

TEST_CASE("job queue: replay is exactly-once only when the job queue is in the same store",
          "[jobs][sqlite][replay]") {
  TempDir dir;
  dlq::kv::SqliteStore store(dir.file("jobs.db"));
  dlq::kv::SqliteStore same_file(dir.file("jobs.db"));  // opened separately: same database
  dlq::kv::SqliteStore other(dir.file("other.db"));
  using Storage = dlq::KeyValueStorage<dlq::kv::SqliteStore, dlq::kv::JobQueue<>>;
  CHECK(Storage(store, dlq::kv::JobQueue<>(store)).exactly_once());
  CHECK(Storage(store, dlq::kv::JobQueue<>(same_file)).exactly_once());
  CHECK_FALSE(Storage(store, dlq::kv::JobQueue<>(other)).exactly_once());
  CHECK_FALSE(dlq::KeyValueStorage(store).exactly_once());  // MemoryQueues: another place

  dlq::kv::MemoryStore memory;
  dlq::kv::JobQueue<dlq::kv::MemoryStore> memory_jobs(memory);
  dlq::KeyValueStorage in_memory(memory, memory_jobs);
  CHECK(in_memory.exactly_once());
  CHECK_FALSE(dlq::KeyValueStorage(dlq::kv::MemoryStore{}, memory_jobs).exactly_once());

  // Set-aside and discarded records go through the same transaction (no payload to push).
  Storage s(store, dlq::kv::JobQueue<>(store));
  s.push_many({dlq::Record{"orders", "a", "a", "bad"}, dlq::Record{"orders", "b", "b", "old"}});
  decltype(s)::replay_cursor cursor;
  const auto r = s.replay_step("orders", cursor, 10, [](std::string_view raw, dlq::Decision& d) {
    d.action = raw == "bad" ? dlq::Action::set_aside : dlq::Action::discard;
  });
  CHECK(r.examined == 2);
  CHECK_FALSE(r.conflict);
  CHECK(s.size("orders", dlq::ListKind::dead) == 0);
  CHECK(s.range("orders", dlq::ListKind::corrupt, 0, 10) == std::vector<std::string>{"bad"});
}

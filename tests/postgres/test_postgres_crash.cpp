// PostgreSQL killed (SIGKILL of the server and all its processes) and restarted while a
// sender runs: every send that returned is present after crash recovery. The server is a
// private one (tests/support/postgres.sh start/crash/restart/stop), not the shared fixture.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/kv/storage.hpp"
#include "dlq/postgres.hpp"
#include "kv/kv_fixtures.hpp"  // kvtest::TempDir
#include "support/catch.hpp"

namespace test_postgres_crash {

using Storage = dlq::KeyValueStorage<dlq::kv::PostgresStore>;

/// Runs tests/support/postgres.sh CMD DIR; fails the test when it fails.
void server(const std::string& cmd, const std::string& dir) {
  const std::string line = std::string(DLQ_POSTGRES_SH) + " " + cmd + " " + dir + " >/dev/null";
  REQUIRE(std::system(line.c_str()) == 0);
}

struct Sent {
  std::mutex mutex;
  std::set<std::string> acknowledged;  // job ids whose send returned
  std::atomic<int> failures{0};        // sends that threw (the server was down)
  std::atomic<int> unknown{0};         // of those, with outcome_unknown()
  std::atomic<std::size_t> count{0};
};

/// Sends job-0, job-1, … until `stop`; a send that throws is tried again with the same job
/// id (an entry is keyed by its job id: the retry replaces, never doubles).
void send_until(std::atomic<bool>& stop, const std::string& url, const dlq::postgres::Options& o,
                Sent& sent) {
  std::unique_ptr<Storage> storage;
  for (int i = 0; !stop;) {
    try {
      if (!storage) storage = std::make_unique<Storage>(dlq::kv::PostgresStore(url, o));
      dlq::DeadLetterQueue<Storage&> q(*storage);
      dlq::Failure f;
      f.error = "e";
      f.job_id = "job-" + std::to_string(i);
      q.send_to_dlq("orders", "payload " + std::to_string(i), f);
      std::lock_guard<std::mutex> g(sent.mutex);
      sent.acknowledged.insert(f.job_id);
      sent.count = sent.acknowledged.size();
      ++i;
    } catch (const dlq::storage_error& e) {
      ++sent.failures;
      if (e.outcome_unknown()) ++sent.unknown;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

bool wait_for(const Sent& sent, std::size_t n, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (sent.count < n) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

TEST_CASE("PostgreSQL killed and restarted mid-send: every acknowledged send is there",
          "[postgres][faults][crash]") {
  kvtest::TempDir dir;
  server("start", dir.path());
  struct Stop {
    std::string dir;
    ~Stop() { std::system((std::string(DLQ_POSTGRES_SH) + " stop " + dir).c_str()); }
  } stop_server{dir.path()};
  std::ifstream in(dir.file("url"));
  std::string url;
  std::getline(in, url);
  dlq::postgres::Options o;
  dlq::postgres::migrate(url, o);

  Sent sent;
  std::atomic<bool> stop{false};
  std::thread sender([&] { send_until(stop, url, o, sent); });
  bool ok = wait_for(sent, 100, std::chrono::seconds(60));
  std::size_t at_crash = sent.count;
  if (ok) {
    server("crash", dir.path());
    at_crash = sent.count;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    server("restart", dir.path());
    ok = wait_for(sent, at_crash + 100, std::chrono::seconds(60));
  }
  stop = true;
  sender.join();
  REQUIRE(ok);

  Storage storage(dlq::kv::PostgresStore(url, o));
  dlq::DeadLetterQueue<Storage&> q(storage);
  std::set<std::string> present;
  for (const dlq::Entry& e : q.peek("orders", 0, 1000000)) present.insert(e.id);
  std::size_t lost = 0;
  for (const std::string& id : sent.acknowledged) lost += present.count(id) == 0 ? 1 : 0;
  std::printf("crash: %zu acknowledged (%zu before the crash), %d failed sends during the "
              "outage (%d outcome unknown), %zu present, %zu lost\n",
              sent.acknowledged.size(), at_crash, sent.failures.load(), sent.unknown.load(),
              present.size(), lost);
  CHECK(sent.failures > 0);  // the crash was seen: the test tested something
  CHECK(lost == 0);
  CHECK(present.size() <= sent.acknowledged.size() + 1);  // at most the send in flight
}

}  // namespace test_postgres_crash

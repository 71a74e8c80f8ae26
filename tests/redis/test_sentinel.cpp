// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// Redis Sentinel (redis+sentinel://, issue 29 item 2) against real servers: each test case
// starts its own master, replica and three sentinels (tests/support/redis_sentinel.sh, its
// path in DLQ_SENTINEL_SCRIPT). Discovery and its typed errors; a `SENTINEL FAILOVER` and a
// master killed with SIGKILL while a sender runs: sends resume on the promoted replica
// without a restart, and every acknowledged entry is there exactly once. Prints the
// failover times.
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/redis/list_storage.hpp"
#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"

namespace test_sentinel {

using namespace dlq;
using dlq::test::RawClient;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

// A master, a replica and three sentinels for one test case alone; stopped, and its
// directory removed, by the destructor.
class PrivateSentinel {
 public:
  PrivateSentinel() {
    char tmpl[] = "/tmp/dlq-sentinel-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("PrivateSentinel: mkdtemp failed");
    dir_ = tmpl;
    const std::string cmd = std::string("'") + DLQ_SENTINEL_SCRIPT + "' start '" + dir_ + "/s'";
    if (std::system(cmd.c_str()) != 0) {
      stop();
      throw std::runtime_error("PrivateSentinel: " + cmd + " failed");
    }
    std::ifstream in(dir_ + "/s/env");
    for (std::string line; std::getline(in, line);) {
      const auto eq = line.find('=');
      if (eq != std::string::npos) env_[line.substr(0, eq)] = line.substr(eq + 1);
    }
    if (env_["URL"].empty()) throw std::runtime_error("PrivateSentinel: no env file");
    std::istringstream ports(env_["SENTINEL_PORTS"]);
    for (int p = 0; ports >> p;)
      sentinel_ports_.push_back(p);
  }
  PrivateSentinel(const PrivateSentinel&) = delete;
  PrivateSentinel& operator=(const PrivateSentinel&) = delete;
  ~PrivateSentinel() { stop(); }

  std::string url() const { return env_.at("URL"); }
  int master_port() const { return std::stoi(env_.at("MASTER_PORT")); }
  int replica_port() const { return std::stoi(env_.at("REPLICA_PORT")); }
  pid_t master_pid() const { return static_cast<pid_t>(std::stol(env_.at("MASTER_PID"))); }
  const std::vector<int>& sentinel_ports() const { return sentinel_ports_; }

  // The port the first sentinel names as the master now.
  int named_master_port() const {
    RawClient s("redis://127.0.0.1:" + std::to_string(sentinel_ports_.at(0)));
    const auto a = s.strings({"SENTINEL", "get-master-addr-by-name", "mymaster"});
    return a.size() == 2 ? std::stoi(a[1]) : 0;
  }

 private:
  void stop() {
    const std::string cmd = std::string("'") + DLQ_SENTINEL_SCRIPT + "' stop '" + dir_ + "/s'";
    if (std::system(cmd.c_str()) != 0) {  // best effort; nothing else to do in a destructor
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string dir_;
  std::map<std::string, std::string> env_;
  std::vector<int> sentinel_ports_;
};

// The options of a storage that waits for a failover: a connect fails within 500 ms, and
// 40 tries with backoff up to 250 ms give the sentinels ~10 s to promote the replica.
redis::ConnectionOptions patient(const std::string& url) {
  redis::ConnectionOptions o = redis::parse_url(url);
  o.connect_timeout = milliseconds(500);
  o.command_timeout = milliseconds(2000);
  o.reconnect_attempts = 40;
  o.reconnect_backoff = milliseconds(50);
  o.reconnect_backoff_max = milliseconds(250);
  return o;
}

std::string url_with(const PrivateSentinel& s, const std::string& tail) {
  std::string u = "redis+sentinel://";
  for (std::size_t i = 0; i < s.sentinel_ports().size(); ++i)
    u += (i > 0 ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(s.sentinel_ports()[i]);
  return u + tail;
}

// How many times each value of `field` occurs in `list` (entries carry "field":"…").
std::map<std::string, int> counts_of(const std::vector<std::string>& list,
                                     const std::string& field) {
  const std::string pattern = "\"" + field + "\":\"";
  std::map<std::string, int> n;
  for (const std::string& item : list) {
    const auto at = item.find(pattern);
    if (at == std::string::npos) continue;
    const auto from = at + pattern.size();
    ++n[item.substr(from, item.find('"', from) - from)];
  }
  return n;
}

// What a sender saw while the master failed over.
struct SendLog {
  std::vector<std::string> acknowledged;  // job ids of sends that returned
  std::vector<std::string> unknown;       // job ids whose outcome is unknown (answer lost)
  int unconfirmed = 0;                    // replication_error: on a master, not confirmed
  int failed = 0;                         // any other error: not stored
  milliseconds longest_gap{0};            // the longest time between two acknowledged sends
};

// Sends one entry after another on `dlq` until `stop`, logging each outcome.
void send_until(DeadLetterQueue<RedisListStorage>& dlq, const std::atomic<bool>& stop,
                SendLog& log) {
  auto last_ack = Clock::now();
  for (int i = 0; !stop.load(); ++i) {
    const std::string id = "job-" + std::to_string(i);
    try {
      Failure f;
      f.error = "boom";
      f.worker = "w";
      f.job_id = id;
      dlq.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}", f);
      log.acknowledged.push_back(id);
      const auto now = Clock::now();
      log.longest_gap =
          std::max(log.longest_gap, std::chrono::duration_cast<milliseconds>(now - last_ack));
      last_ack = now;
    } catch (const replication_error&) {
      ++log.unconfirmed;
    } catch (const storage_error& e) {
      if (e.outcome_unknown()) {
        log.unknown.push_back(id);
      } else {
        ++log.failed;
      }
    }
  }
}

}  // namespace

TEST_CASE("sentinel: the master is found through the sentinels, errors are typed",
          "[redis][sentinel]") {
  PrivateSentinel s;
  redis::Connection c(patient(s.url()));
  c.connect();
  CHECK(c.endpoint().find(":" + std::to_string(s.master_port())) != std::string::npos);
  CHECK(c.endpoint().find("mymaster") != std::string::npos);

  DeadLetterQueue<RedisListStorage> dlq(RedisListStorage(s.url(), dlq::test::unique_layout()));
  const std::string id = dlq.send_to_dlq("orders", R"({"job":1})", "boom", 1, "w");
  RawClient master("redis://127.0.0.1:" + std::to_string(s.master_port()));
  const auto on_master =
      counts_of(master.list(dlq.storage().key("orders", ListKind::dead)), "id");
  CHECK(on_master.count(id) == 1);

  // A name no sentinel monitors: typed, at once (not retried).
  const auto t0 = Clock::now();
  try {
    redis::Connection bad(patient(url_with(s, "/nosuch")));
    bad.connect();
    FAIL("an unknown master name must fail");
  } catch (const sentinel_error& e) {
    CHECK(e.cause() == sentinel_error::reason::master_name_unknown);
    CHECK(std::string(e.what()).find("does not know the name") != std::string::npos);
  }
  CHECK(Clock::now() - t0 < milliseconds(1000));

  // Credentials the sentinels refuse (they have no password): typed, the secret not shown.
  try {
    redis::Connection bad(patient(url_with(s, "/mymaster?sentinel_password=hush-hush")));
    bad.connect();
    FAIL("refused sentinel credentials must fail");
  } catch (const sentinel_error& e) {
    CHECK(e.cause() == sentinel_error::reason::sentinel_refused);
    CHECK(std::string(e.what()).find("hush-hush") == std::string::npos);
  }

  // No sentinel listening: typed, after the reconnect tries.
  redis::ConnectionOptions none = patient("redis+sentinel://127.0.0.1:1,127.0.0.1:2/mymaster");
  none.reconnect_attempts = 2;
  try {
    redis::Connection bad(none);
    bad.connect();
    FAIL("unreachable sentinels must fail");
  } catch (const sentinel_error& e) {
    CHECK(e.cause() == sentinel_error::reason::sentinels_unreachable);
    CHECK(std::string(e.what()).find("127.0.0.1:2 unreachable") != std::string::npos);
  }

  // The first sentinel down: the next one answers.
  redis::ConnectionOptions first_down = patient(s.url());
  first_down.sentinel.sentinels.insert(first_down.sentinel.sentinels.begin(),
                                       redis::SentinelAddress{"127.0.0.1", 1});
  redis::Connection second(first_down);
  second.connect();
  CHECK(second.endpoint().find(":" + std::to_string(s.master_port())) != std::string::npos);
}

// Runs a sender through a failover made by `fail` and checks that sends resumed on the
// promoted replica, each acknowledged entry there exactly once. Returns the failover time:
// from `fail` until the first acknowledged send on the new master.
template <class Fail>
milliseconds send_through_failover(PrivateSentinel& s, Fail fail, const char* what) {
  RedisListOptions lo = dlq::test::unique_layout();
  lo.replicas_to_ack = 1;  // a send the replica did not confirm is no acknowledged send
  lo.replica_ack_timeout = milliseconds(500);
  DeadLetterQueue<RedisListStorage> dlq(RedisListStorage(patient(s.url()), lo));
  const std::string key = dlq.storage().key("orders", ListKind::dead);
  std::atomic<bool> stop{false};
  SendLog log;
  std::thread sender([&] { send_until(dlq, stop, log); });
  std::this_thread::sleep_for(milliseconds(300));
  const std::size_t before = log.acknowledged.size();  // read racily: only for the print
  const auto t0 = Clock::now();
  fail();
  // The failover is over when the sentinels name the replica and a send was acknowledged
  // after that.
  while (s.named_master_port() != s.replica_port() && Clock::now() - t0 < std::chrono::seconds(20))
    std::this_thread::sleep_for(milliseconds(20));
  const auto promoted = Clock::now();
  std::this_thread::sleep_for(milliseconds(500));
  stop = true;
  sender.join();
  const auto took = std::chrono::duration_cast<milliseconds>(promoted - t0);

  REQUIRE(s.named_master_port() == s.replica_port());
  RawClient now_master("redis://127.0.0.1:" + std::to_string(s.replica_port()));
  const auto counts = counts_of(now_master.list(key), "job_id");
  int missing = 0;
  int twice = 0;
  for (const std::string& id : log.acknowledged) {
    const auto it = counts.find(id);
    if (it == counts.end()) ++missing;
    else if (it->second != 1) ++twice;
  }
  int unknown_twice = 0;
  for (const std::string& id : log.unknown)
    if (counts.count(id) != 0 && counts.at(id) > 1) ++unknown_twice;
  std::printf("sentinel %s: %zu acknowledged (%zu before), %zu outcome unknown, %d unconfirmed, "
              "%d failed; sentinels named the replica after %lld ms; longest gap between two "
              "acknowledged sends %lld ms\n",
              what, log.acknowledged.size(), before, log.unknown.size(), log.unconfirmed,
              log.failed, static_cast<long long>(took.count()),
              static_cast<long long>(log.longest_gap.count()));
  CHECK(missing == 0);
  CHECK(twice == 0);
  CHECK(unknown_twice == 0);
  // Sends resumed on the new master without a restart: the last ones are there.
  REQUIRE_FALSE(log.acknowledged.empty());
  CHECK(counts.count(log.acknowledged.back()) == 1);
  CHECK(log.acknowledged.size() > before);
  return log.longest_gap;
}

TEST_CASE("sentinel: SENTINEL FAILOVER — sends resume on the promoted replica",
          "[redis][sentinel]") {
  PrivateSentinel s;
  send_through_failover(
      s,
      [&] {
        RawClient sentinel("redis://127.0.0.1:" + std::to_string(s.sentinel_ports().at(1)));
        const auto r = sentinel.cmd({"SENTINEL", "FAILOVER", "mymaster"});
        REQUIRE(r->type == REDIS_REPLY_STATUS);
      },
      "FAILOVER");
  // The old master is a replica now: a plain connection to it is refused writes.
  RawClient old("redis://127.0.0.1:" + std::to_string(s.master_port()));
  for (int i = 0; i < 100; ++i) {
    const auto r = old.cmd({"RPUSH", "sentinel:probe", "x"});
    if (r->type == REDIS_REPLY_ERROR) {
      CHECK(std::string(redis::view(*r)).rfind("READONLY", 0) == 0);
      break;
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
}

TEST_CASE("sentinel: master killed with SIGKILL — sends resume on the promoted replica",
          "[redis][sentinel]") {
  PrivateSentinel s;
  send_through_failover(s, [&] { REQUIRE(::kill(s.master_pid(), SIGKILL) == 0); }, "SIGKILL");
}

}  // namespace test_sentinel

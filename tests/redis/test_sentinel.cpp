// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// Redis Sentinel (redis+sentinel://, issue 29 item 2) against real servers: each test case
// starts its own master, replica and three sentinels (tests/support/redis_sentinel.sh, its
// path in DLQ_SENTINEL_SCRIPT). Discovery and its typed errors; a `SENTINEL FAILOVER` and a
// master killed with SIGKILL while a sender runs: sends resume on the promoted replica
// without a restart, and every acknowledged entry is there exactly once. Prints the
// failover times.
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/redis/list_storage.hpp"
#include "redis/redis_test_util.hpp"
#include "redis/sentinel_test_util.hpp"
#include "support/catch.hpp"
#include "support/redis_process.hpp"

namespace test_sentinel {

using namespace dlq;
using dlq::test::counts_of;
using dlq::test::patient;
using dlq::test::PrivateSentinel;
using dlq::test::RawClient;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

namespace {

std::string url_with(const PrivateSentinel& s, const std::string& tail) {
  std::string u = "redis+sentinel://";
  for (std::size_t i = 0; i < s.sentinel_ports().size(); ++i)
    u += (i > 0 ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(s.sentinel_ports()[i]);
  return u + tail;
}

// What the senders saw while the master failed over.
struct SendLog {
  std::vector<std::pair<std::string, Clock::time_point>> acknowledged;  // job id, when
  std::vector<std::string> unconfirmed;  // replication_error: on a master, not confirmed
  std::vector<std::string> unknown;      // outcome unknown (the answer was lost)
  int failed = 0;                        // any other error: not stored
};

// `threads` senders on one storage until stop(): each sends entries with job ids
// "job-<thread>-<n>" one after another and logs each outcome.
class Senders {
 public:
  Senders(DeadLetterQueue<RedisListStorage>& dlq, int threads) : logs_(threads) {
    for (int t = 0; t < threads; ++t)
      threads_.emplace_back([this, &dlq, t] { run(dlq, t); });
  }
  Senders(const Senders&) = delete;
  Senders& operator=(const Senders&) = delete;
  ~Senders() { stop(); }

  std::size_t acknowledged() const { return acked_.load(); }
  SendLog stop() {
    stop_ = true;
    for (auto& th : threads_)
      if (th.joinable()) th.join();
    SendLog all;
    for (const SendLog& l : logs_) {
      all.acknowledged.insert(all.acknowledged.end(), l.acknowledged.begin(), l.acknowledged.end());
      all.unconfirmed.insert(all.unconfirmed.end(), l.unconfirmed.begin(), l.unconfirmed.end());
      all.unknown.insert(all.unknown.end(), l.unknown.begin(), l.unknown.end());
      all.failed += l.failed;
    }
    return all;
  }

 private:
  void run(DeadLetterQueue<RedisListStorage>& dlq, int t) {
    SendLog& log = logs_[static_cast<std::size_t>(t)];
    for (int i = 0; !stop_.load(); ++i) {
      const std::string id = "job-" + std::to_string(t) + "-" + std::to_string(i);
      try {
        Failure f;
        f.error = "boom";
        f.worker = "w";
        f.job_id = id;
        dlq.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}", f);
        log.acknowledged.emplace_back(id, Clock::now());
        ++acked_;
      } catch (const replication_error&) {
        log.unconfirmed.push_back(id);
      } catch (const storage_error& e) {
        if (e.outcome_unknown()) {
          log.unknown.push_back(id);
        } else {
          ++log.failed;
        }
      }
    }
  }

  std::vector<SendLog> logs_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> acked_{0};
};

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
  const auto on_master = counts_of(master.list(dlq.storage().key("orders", ListKind::dead)), "id");
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

// What a run through a failover showed on the new master.
struct Outcome {
  milliseconds promoted{0};  // fault → the sentinels name the replica
  milliseconds resumed{0};   // fault → the first send acknowledged after the promotion
  int lost = 0;              // acknowledged, not on the new master
  int duplicated = 0;        // acknowledged (or unknown), there more than once
  std::size_t acknowledged = 0;
};

// Runs `threads` senders (replicas_to_ack = `acks`) through the failover made by `fail`,
// then `recover` (after the sentinels named the replica), until sends are acknowledged
// again; counts on the new master what the acknowledged sends left. `during` runs between
// the start and the fault (the replica freezes of the load test).
template <class Fail, class Recover, class During>
Outcome send_through_failover(PrivateSentinel& s, int threads, int acks, Fail fail, Recover recover,
                              During during, const char* what) {
  RedisListOptions lo = dlq::test::unique_layout();
  lo.replicas_to_ack = acks;
  lo.replica_ack_timeout = milliseconds(500);
  DeadLetterQueue<RedisListStorage> dlq(RedisListStorage(patient(s.url()), lo));
  const std::string key = dlq.storage().key("orders", ListKind::dead);
  Senders senders(dlq, threads);
  during();
  const std::size_t before = senders.acknowledged();
  const auto t0 = Clock::now();
  fail();
  while (s.named_master_port() != s.replica_port() && Clock::now() - t0 < std::chrono::seconds(20))
    std::this_thread::sleep_for(milliseconds(20));
  const auto promoted = Clock::now();
  recover();
  const std::size_t at_promotion = senders.acknowledged();
  // 50 more acknowledged sends, and 2 s: sends that went on to the replaced master (until
  // a connection's check finds the new one, SentinelOptions::check_interval) count too.
  while ((senders.acknowledged() < at_promotion + 50 || Clock::now() - promoted < seconds(2)) &&
         Clock::now() - t0 < seconds(30))
    std::this_thread::sleep_for(milliseconds(20));
  const SendLog log = senders.stop();

  Outcome out;
  out.promoted = std::chrono::duration_cast<milliseconds>(promoted - t0);
  out.acknowledged = log.acknowledged.size();
  if (s.named_master_port() != s.replica_port())
    std::printf("the sentinels did not name the replica; their events:\n%s", s.event_log().c_str());
  REQUIRE(s.named_master_port() == s.replica_port());
  RawClient now_master("redis://127.0.0.1:" + std::to_string(s.replica_port()));
  const auto counts = counts_of(now_master.list(key), "job_id");
  Clock::time_point first_after = Clock::time_point::max();  // first one kept on the new master
  for (const auto& a : log.acknowledged)
    if (a.second > promoted && counts.count(a.first) != 0)
      first_after = std::min(first_after, a.second);
  if (first_after != Clock::time_point::max())
    out.resumed = std::chrono::duration_cast<milliseconds>(first_after - t0);
  for (const auto& a : log.acknowledged) {
    const auto it = counts.find(a.first);
    if (it == counts.end())
      ++out.lost;
    else if (it->second != 1)
      ++out.duplicated;
  }
  for (const std::string& id : log.unknown)
    if (counts.count(id) != 0 && counts.at(id) > 1) ++out.duplicated;
  std::printf(
      "sentinel %s, %d thread(s), replicas_to_ack=%d: %zu acknowledged (%zu before the "
      "fault), %zu outcome unknown, %zu unconfirmed, %d failed; sentinels named the "
      "replica after %lld ms, first acknowledged send on it after %lld ms; "
      "acknowledged entries lost: %d, duplicated: %d\n",
      what, threads, acks, log.acknowledged.size(), before, log.unknown.size(),
      log.unconfirmed.size(), log.failed, static_cast<long long>(out.promoted.count()),
      static_cast<long long>(out.resumed.count()), out.lost, out.duplicated);
  std::fflush(stdout);
  // Sends resumed on the new master without a restart.
  CHECK(senders.acknowledged() >= at_promotion + 50);
  CHECK(out.resumed > milliseconds(0));
  CHECK(out.duplicated == 0);
  return out;
}

void nothing() {}

// The replicas_to_ack of this run of the calling test case: 1 in the section `with_one`, 0 in
// `with_zero` (Catch2 runs the test case once for each).
int acks_by_section(const char* with_one, const char* with_zero) {
  int acks = 1;
  SECTION(with_one) {
    acks = 1;
  }
  SECTION(with_zero) {
    acks = 0;
  }
  return acks;
}

TEST_CASE("sentinel: SENTINEL FAILOVER — sends resume on the promoted replica",
          "[redis][sentinel]") {
  const int acks = acks_by_section("replicas_to_ack = 1", "replicas_to_ack = 0");
  PrivateSentinel s;
  const Outcome o = send_through_failover(
      s, 1, acks,
      [&] {
        RawClient sentinel("redis://127.0.0.1:" + std::to_string(s.sentinel_ports().at(1)));
        const auto r = sentinel.cmd({"SENTINEL", "FAILOVER", "mymaster"});
        REQUIRE(r->type == REDIS_REPLY_STATUS);
      },
      nothing, [] { std::this_thread::sleep_for(milliseconds(300)); }, "FAILOVER");
  if (acks == 1) CHECK(o.lost == 0);
  // The old master is a replica now: a plain connection to it is refused writes.
  RawClient old("redis://127.0.0.1:" + std::to_string(s.master_port()));
  bool readonly = false;
  for (int i = 0; i < 600 && !readonly; ++i) {  // the sentinels reconfigure it within ~15 s
    const auto r = old.cmd({"RPUSH", "sentinel:probe", "x"});
    readonly =
        r->type == REDIS_REPLY_ERROR && std::string(redis::view(*r)).rfind("READONLY", 0) == 0;
    if (!readonly) std::this_thread::sleep_for(milliseconds(50));
  }
  CHECK(readonly);
}

TEST_CASE("sentinel: master killed with SIGKILL — sends resume on the promoted replica",
          "[redis][sentinel]") {
  PrivateSentinel s;
  // replicas_to_ack = 1: after the kill the new master has no replica until the killed
  // server is started again (the sentinels make it one), so no send is acknowledged before.
  const Outcome o = send_through_failover(
      s, 1, 1, [&] { REQUIRE(::kill(s.master_pid(), SIGKILL) == 0); }, [&] { s.restart_master(); },
      [] { std::this_thread::sleep_for(milliseconds(300)); }, "SIGKILL");
  CHECK(o.lost == 0);
}

// Freezes the replica (SIGSTOP) for 50–300 ms at random moments during ~1.5 s, then thaws
// it for good (a frozen replica cannot be promoted).
void freeze_replica_at_random(const PrivateSentinel& s) {
  const unsigned seed = static_cast<unsigned>(Clock::now().time_since_epoch().count());
  std::printf("sentinel load: replica freezes with seed %u\n", seed);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pause(50, 300);
  const auto until = Clock::now() + milliseconds(1500);
  while (Clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(pause(rng)));
    ::kill(s.replica_pid(), SIGSTOP);
    std::this_thread::sleep_for(milliseconds(pause(rng)));
    ::kill(s.replica_pid(), SIGCONT);
  }
  ::kill(s.replica_pid(), SIGCONT);
  std::this_thread::sleep_for(milliseconds(200));
}

TEST_CASE("sentinel: 8 senders, replica frozen at random, master killed — acknowledged = kept",
          "[redis][sentinel][.load]") {
  const int acks =
      acks_by_section("replicas_to_ack = 1: every acknowledged entry is on the new master, once",
                      "replicas_to_ack = 0: how many acknowledged entries the failover lost");
  PrivateSentinel s;
  const Outcome o = send_through_failover(
      s, 8, acks, [&] { REQUIRE(::kill(s.master_pid(), SIGKILL) == 0); },
      [&] { s.restart_master(); }, [&] { freeze_replica_at_random(s); }, "load SIGKILL");
  if (acks == 1) CHECK(o.lost == 0);  // with 0 the number is the finding, printed above
}

namespace {

// A stand-in for a sentinel on a loopback port: answers SENTINEL get-master-addr-by-name
// with the port set by name_master(), AUTH with +OK and anything else with an integer. One
// request per connection, as Connection asks. So a test decides what "the sentinels" say.
class FakeSentinel {
 public:
  FakeSentinel() {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listen_, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(listen_, 16) != 0 ||
        ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("FakeSentinel: cannot listen");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  FakeSentinel(const FakeSentinel&) = delete;
  FakeSentinel& operator=(const FakeSentinel&) = delete;
  ~FakeSentinel() {
    stop_ = true;
    thread_.join();
    ::close(listen_);
  }
  int port() const { return port_; }
  void name_master(int port) { master_ = port; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{listen_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int fd = ::accept(listen_, nullptr, nullptr);
      if (fd < 0) continue;
      answer(fd);
      ::close(fd);
    }
  }
  // Answers every request on `fd` until the client closes it.
  void answer(int fd) {
    redisReader* reader = redisReaderCreate();
    char buf[4096];
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 2000) <= 0) break;
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      redisReaderFeed(reader, buf, static_cast<std::size_t>(n));
      void* raw = nullptr;
      std::string out;
      while (redisReaderGetReply(reader, &raw) == REDIS_OK && raw != nullptr) {
        const auto* r = static_cast<redisReply*>(raw);
        const std::string name = r->elements > 0 ? std::string(r->element[0]->str) : "";
        if (name == "SENTINEL") {
          const std::string port = std::to_string(master_.load());
          out +=
              "*2\r\n$9\r\n127.0.0.1\r\n$" + std::to_string(port.size()) + "\r\n" + port + "\r\n";
        } else if (name == "AUTH") {
          out += "+OK\r\n";
        } else {
          out += ":1\r\n";
        }
        freeReplyObject(raw);
      }
      if (!out.empty() && ::send(fd, out.data(), out.size(), MSG_NOSIGNAL) < 0) break;
    }
    redisReaderFree(reader);
  }

  int listen_ = -1;
  int port_ = 0;
  std::atomic<int> master_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// rejected_calls of `command` in the server's INFO commandstats (Redis 7): commands it
// refused, READONLY among them.
long long rejected(RawClient& server, const std::string& command) {
  const auto r = server.cmd({"INFO", "commandstats"});
  const std::string text(redis::view(*r));
  const auto at = text.find("cmdstat_" + command + ":");
  if (at == std::string::npos) return 0;
  const auto r_at = text.find("rejected_calls=", at);
  return r_at == std::string::npos ? 0 : std::stoll(text.substr(r_at + 15));
}

}  // namespace

TEST_CASE("sentinel: a send refused READONLY by a demoted master runs once on the new one",
          "[redis][sentinel]") {
  dlq::test::RedisProcess a;
  dlq::test::RedisProcess b;
  FakeSentinel sentinel;
  sentinel.name_master(a.port());
  redis::ConnectionOptions o;
  o.sentinel.sentinels = {redis::SentinelAddress{"127.0.0.1", sentinel.port()}};
  o.sentinel.master_name = "m";
  o.sentinel.check_interval = milliseconds(0);  // only READONLY leads to the new master
  redis::Connection c(o);
  RawClient ra(a.url());
  RawClient rb(b.url());
  REQUIRE(
      c.run(std::move(redis::Command("RPUSH").arg("k").arg("x")), redis::Effect::write)->integer ==
      1);

  // a becomes a replica of b (the sentinels now name b); c's connection to a stays open.
  REQUIRE(ra.cmd({"REPLICAOF", "127.0.0.1", std::to_string(b.port())})->type == REDIS_REPLY_STATUS);
  sentinel.name_master(b.port());
  const redis::Reply r =
      c.run(std::move(redis::Command("RPUSH").arg("k").arg("y")), redis::Effect::write);
  CHECK(r->type == REDIS_REPLY_INTEGER);
  CHECK(rejected(ra, "rpush") == 1);  // a refused it: the READONLY path, not a reconnect
  CHECK(rb.strings({"LRANGE", "k", "0", "-1"}) == std::vector<std::string>{"y"});
  CHECK(c.endpoint().find(std::to_string(b.port())) != std::string::npos);

  // A transaction refused at queueing (READONLY, then EXECABORT) is sent again whole.
  REQUIRE(ra.cmd({"REPLICAOF", "NO", "ONE"})->type == REDIS_REPLY_STATUS);
  REQUIRE(rb.cmd({"REPLICAOF", "127.0.0.1", std::to_string(a.port())})->type == REDIS_REPLY_STATUS);
  sentinel.name_master(a.port());
  std::vector<redis::Command> tx;
  tx.emplace_back("MULTI");
  tx.push_back(std::move(redis::Command("RPUSH").arg("t").arg("z")));
  tx.emplace_back("EXEC");
  const auto replies = c.run(tx, redis::Effect::write);
  REQUIRE(replies.size() == 3);
  CHECK(replies[2]->type == REDIS_REPLY_ARRAY);
  CHECK(rejected(rb, "rpush") == 1);
  CHECK(ra.strings({"LRANGE", "t", "0", "-1"}) == std::vector<std::string>{"z"});
}

}  // namespace test_sentinel

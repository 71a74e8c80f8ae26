// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// The sentinel connections a pool makes (issue 29's follow-up): SentinelOptions::
// check_interval asks a sentinel whether the master is still the master; a pool's
// connections share one view of the sentinels, so a pool of 8 busy connections opens about
// one sentinel connection, not 8 per interval. Counted on the sentinels themselves
// (INFO stats total_connections_received, CLIENT LIST), against a private master, replica
// and three sentinels (tests/support/redis_sentinel.sh).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dlq/redis/pool.hpp"
#include "redis/redis_test_util.hpp"
#include "redis/sentinel_test_util.hpp"
#include "support/catch.hpp"

namespace test_sentinel_view {

using namespace dlq;
using dlq::test::PrivateSentinel;
using dlq::test::RawClient;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

// A field of INFO's text ("name:value").
long long info_field(RawClient& c, const std::string& section, const std::string& name) {
  const auto r = c.cmd({"INFO", section});
  const std::string text(redis::view(*r));
  const auto at = text.find(name + ":");
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + name.size() + 1));
}

// Clients of a sentinel other than the sentinels themselves and the test's own connection.
int outside_clients(RawClient& c) {
  const long long own = c.integer({"CLIENT", "ID"});
  const auto r = c.cmd({"CLIENT", "LIST"});
  std::istringstream lines{std::string(redis::view(*r))};
  int n = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line.find("id=" + std::to_string(own) + " ") == 0) continue;
    if (line.find("name=sentinel-") != std::string::npos) continue;  // the other sentinels
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("sentinel: a pool's connections share one sentinel view",
          "[redis][sentinel][view]") {
  PrivateSentinel s;
  std::vector<RawClient> sentinels;
  for (int port : s.sentinel_ports())
    sentinels.emplace_back("redis://127.0.0.1:" + std::to_string(port));
  redis::ConnectionOptions o = dlq::test::patient(s.url());
  o.sentinel.check_interval = milliseconds(100);
  redis::PoolOptions po;
  po.size = 8;
  redis::ConnectionPool pool(o, po);

  const auto opened = [&] {
    long long n = 0;
    for (RawClient& c : sentinels)
      n += info_field(c, "stats", "total_connections_received");
    return n;
  };
  const long long before = opened();
  // 8 threads, each holding a connection of its own, a PING every 10 ms for 2 s: 20 check
  // intervals on each of 8 connections.
  std::atomic<int> pings{0};
  std::atomic<int> connected{0};
  std::atomic<int> inside{0};  // outside clients seen while the connections are in use
  std::vector<std::thread> threads;
  const auto until = Clock::now() + milliseconds(2000);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      auto lease = pool.acquire();
      lease->run(redis::Command("PING"), redis::Effect::read);
      ++connected;
      while (Clock::now() < until) {
        lease->run(redis::Command("PING"), redis::Effect::read);
        ++pings;
        std::this_thread::sleep_for(milliseconds(10));
      }
    });
  }
  while (connected.load() < 8 && Clock::now() < until)
    std::this_thread::sleep_for(milliseconds(5));
  std::this_thread::sleep_for(milliseconds(1000));
  for (RawClient& c : sentinels)
    inside += outside_clients(c);
  for (auto& th : threads)
    th.join();
  const long long during = opened() - before;
  std::printf(
      "sentinel view: 8 pooled connections, check_interval 100 ms, %d PINGs over 2 s: "
      "%lld sentinel connections opened (8 of them the connects' discovery), %d open at once "
      "1 s in\n",
      pings.load(), during, inside.load());
  std::fflush(stdout);
  // 8 discoveries (one per connection's connect) and one shared connection for the checks;
  // a view per connection would open 8 per interval (~160).
  CHECK(during <= 8 + 3);
  CHECK(inside.load() == 1);  // the shared view keeps one connection to a sentinel
}

}  // namespace test_sentinel_view

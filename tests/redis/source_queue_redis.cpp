// The source-queue contract (tests/contract/source_queue_suite.hpp) on dlq::RedisSourceQueue:
#include "dlq/dlq.hpp"
// the shared test server, and (run with DLQ_SOURCE_CLUSTER=1 in the environment, and the
// Catch2 filter ~[single-server]) the 3-master test cluster with the default layout's shape,
// each queue in its own hash slot. One executable for both: built twice it cost 60-70 s of
// CPU at -O3 a configuration.
#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "dlq/redis/list_storage.hpp"
#include "dlq/redis/source_queue.hpp"
#include "redis/cluster_test_util.hpp"
#include "redis/redis_test_util.hpp"

namespace {

bool cluster_run() {
  const char* v = std::getenv("DLQ_SOURCE_CLUSTER");
  return v != nullptr && std::string(v) == "1";
}

std::string url() {
  return cluster_run() ? dlq::test::cluster_url() : dlq::test::shared_redis_url();
}

}  // namespace

struct RedisSource {
  using Queue = dlq::DeadLetterQueue<dlq::RedisListStorage>;
  Queue queue{dlq::RedisListStorage(url(), dlq::test::unique_layout())};
  dlq::RedisSourceQueue source{queue.storage()};
  RedisSource() {
    if (cluster_run() != queue.storage().cluster_mode())
      throw std::runtime_error(cluster_run() ? "expected a Redis Cluster" : "expected one server");
  }
  dlq::RedisSourceQueue& jobs() { return source; }
  Queue& dlq() { return queue; }
};

#define DLQ_SOURCE_FIXTURES RedisSource
#include "contract/source_queue_suite.hpp"

TEST_CASE("redis source queue: in-flight keys share the queue's hash tag; consumers are listed",
          "[source][redis]") {
  RedisSource f;
  auto& jobs = f.jobs();
  const std::string k = jobs.key("orders");
  CHECK(dlq::redis::key_slot(jobs.in_flight_key("orders", "w{1}")) == dlq::redis::key_slot(k));
  CHECK(dlq::redis::key_slot(jobs.consumers_key("orders")) == dlq::redis::key_slot(k));
  for (const char* p : {"1", "2", "3"})
    jobs.push("orders", p);
  auto a = jobs.take("orders", "w2", 1);
  (void)jobs.take("orders", "w1", 1);
  CHECK(jobs.consumers("orders") == std::vector<std::string>{"w1", "w2"});
  jobs.ack("orders", "w2", a);
  CHECK(jobs.consumers("orders") == std::vector<std::string>{"w1"});
  jobs.recover("orders", "w1");
  CHECK(jobs.consumers("orders").empty());
}

TEST_CASE("redis source queue: one take moves at most 1000 jobs", "[source][redis]") {
  RedisSource f;
  auto& jobs = f.jobs();
  for (int i = 0; i < 1200; ++i)
    jobs.push("orders", std::to_string(i));
  CHECK(jobs.take("orders", "w1", 5000).size() == 1000);
  CHECK(jobs.size("orders") == 200);
  CHECK(jobs.recover("orders", "w1") == 1000);
}

TEST_CASE("redis source queue: consumer names with hash tags, separators and raw bytes work",
          "[source][redis]") {
  RedisSource f;
  auto& jobs = f.jobs();
  const std::vector<std::string> names = {
      "w{1}", "}{", "a:inflight:b", "sp ace\nnl", std::string("\xff\xfe\0x", 4), "{orders}"};
  for (const auto& n : names)
    jobs.push("orders", "job-" + n);
  std::vector<std::vector<dlq::SourceJob>> taken;
  for (const auto& n : names) {
    taken.push_back(jobs.take("orders", n, 1));
    REQUIRE(taken.back().size() == 1);
    CHECK(taken.back()[0].payload == "job-" + n);
    CHECK(jobs.in_flight("orders", n) == 1);
  }
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  CHECK(jobs.consumers("orders") == sorted);
  CHECK(jobs.recover("orders", names[0]) == 1);
  CHECK(jobs.nack("orders", names[1], taken[1]) == 1);
  for (std::size_t i = 2; i < names.size(); ++i)
    CHECK(jobs.ack("orders", names[i], taken[i]) == 1);
  CHECK(jobs.consumers("orders").empty());
  CHECK(payloads(jobs.take("orders", "last", 5)) ==
        std::vector<std::string>{"job-" + names[0], "job-" + names[1]});
}

// Single server only (the cluster run filters them out with ~[single-server]).
TEST_CASE("redis source queue: nack onto a key of another type moves nothing",
          "[source][redis][single-server]") {
  RedisSource f;
  auto& jobs = f.jobs();
  jobs.push("orders", "j");
  auto taken = jobs.take("orders", "w1", 1);
  dlq::test::RawClient raw(url());
  raw.cmd({"DEL", jobs.key("orders")});
  raw.cmd({"SET", jobs.key("orders"), "not a list"});
  CHECK_THROWS_AS(jobs.nack("orders", "w1", taken), dlq::reply_error);
  CHECK(jobs.in_flight("orders", "w1") == 1);  // still held: nothing lost
  CHECK_THROWS_AS(jobs.push("orders", "x"), dlq::reply_error);
}

TEST_CASE("redis source queue: take and recover onto keys of another type move nothing",
          "[source][redis][single-server]") {
  RedisSource f;
  auto& jobs = f.jobs();
  dlq::test::RawClient raw(url());
  for (const char* p : {"a", "b"})
    jobs.push("orders", p);
  raw.cmd({"SET", jobs.in_flight_key("orders", "w1"), "not a list"});
  CHECK_THROWS_AS(jobs.take("orders", "w1", 2), dlq::reply_error);
  CHECK(jobs.size("orders") == 2);  // nothing left the queue
  raw.cmd({"DEL", jobs.in_flight_key("orders", "w1")});
  auto taken = jobs.take("orders", "w1", 2);
  REQUIRE(taken.size() == 2);
  raw.cmd({"SET", jobs.key("orders"), "not a list"});
  CHECK_THROWS_AS(jobs.recover("orders", "w1"), dlq::reply_error);
  CHECK(jobs.in_flight("orders", "w1") == 2);  // still held: nothing lost
  raw.cmd({"DEL", jobs.key("orders")});
  CHECK(jobs.recover("orders", "w1") == 2);
  CHECK(jobs.size("orders") == 2);
}

TEST_CASE("redis source queue: the Python service's untagged layout works on one server",
          "[source][redis][single-server]") {
  const std::string prefix = dlq::test::unique_prefix();
  dlq::RedisListOptions o;
  o.dead_key = prefix + "dlq:*";
  o.source_key = prefix + "queue:*";
  o.corrupt_key = prefix + "dlq:*:corrupt";
  dlq::RedisListStorage storage(url(), o);
  dlq::RedisSourceQueue jobs(storage);
  jobs.push("pyq", R"({"a":1})");
  dlq::test::RawClient raw(url());
  CHECK(raw.list(prefix + "queue:pyq") == std::vector<std::string>{R"({"a":1})"});
  auto taken = jobs.take("pyq", "w1", 1);
  CHECK(raw.list(prefix + "queue:pyq:inflight:w1") == std::vector<std::string>{R"({"a":1})"});
  CHECK(jobs.ack("pyq", "w1", taken) == 1);
}

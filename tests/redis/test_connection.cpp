// The connection layer against the shared test server: pipelining, typed reply errors,
// binary safety, the pool under many threads.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "dlq/redis/connection.hpp"
#include "dlq/redis/pool.hpp"
#include "dlq/redis/script.hpp"
#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"
#include "support/redis_process.hpp"

namespace test_connection {

using namespace dlq;
using dlq::test::RawClient;

TEST_CASE("a pipeline sends many commands in one go and returns replies in order",
          "[redis][connection]") {
  redis::Connection conn(redis::parse_url(test::shared_redis_url()));
  const std::string key = test::unique_prefix() + "pipe";
  std::vector<redis::Command> cmds;
  for (int i = 0; i < 100; ++i)
    cmds.push_back(std::move(redis::Command("RPUSH").arg(std::string_view(key)).arg(i)));
  cmds.push_back(std::move(redis::Command("LLEN").arg(std::string_view(key))));
  auto replies = conn.run(cmds, redis::Effect::write);
  REQUIRE(replies.size() == 101);
  for (int i = 0; i < 100; ++i)
    CHECK(replies[static_cast<std::size_t>(i)]->integer == i + 1);
  CHECK(replies[100]->integer == 100);
  CHECK(conn.client_id() > 0);
  CHECK(conn.connect_count() == 1);
  redis::Command del("DEL");
  del.arg(std::string_view(key));
  conn.run(del, redis::Effect::write);
}

TEST_CASE("arguments are binary-safe", "[redis][connection]") {
  RawClient raw(test::shared_redis_url());
  const std::string key = test::unique_prefix() + "bin";
  const std::string value("a\0b\r\n$3\r\n\xff", 11);
  redis::Command set("SET");
  set.arg(std::string_view(key)).arg(std::string_view(value));
  raw.connection().run(set, redis::Effect::write);
  auto r = raw.cmd({"GET", key});
  REQUIRE(r->type == REDIS_REPLY_STRING);
  CHECK(redis::view(*r) == value);
  raw.cmd({"DEL", key});
}

TEST_CASE("error replies become reply_error with Redis's first word", "[redis][connection]") {
  redis::Connection conn(redis::parse_url(test::shared_redis_url()));
  const std::string key = test::unique_prefix() + "str";
  redis::Command set("SET");
  set.arg(std::string_view(key)).arg("x");
  conn.run(set, redis::Effect::write);
  redis::Command push("RPUSH");
  push.arg(std::string_view(key)).arg("y");
  auto r = conn.run(push, redis::Effect::write);
  try {
    redis::integer(r, conn, push.label());
    FAIL("no error");
  } catch (const reply_error& e) {
    CHECK(e.code() == "WRONGTYPE");
    CHECK(!e.outcome_unknown());
    CHECK(std::string(e.what()).find("[dlq.redis] 127.0.0.1:") == 0);
    CHECK(std::string(e.what()).find("RPUSH " + key) != std::string::npos);
  }
  // The connection stays usable after an error reply.
  redis::Command get("GET");
  get.arg(std::string_view(key));
  CHECK(redis::view(*conn.run(get, redis::Effect::read)) == "x");
  redis::Command bogus("NOSUCHCOMMAND");
  try {
    redis::check(conn.run(bogus, redis::Effect::read), conn, "x");
    FAIL("no error");
  } catch (const reply_error& e) {
    CHECK(e.code() == "ERR");
  }
  redis::Command del("DEL");
  del.arg(std::string_view(key));
  conn.run(del, redis::Effect::write);
}

TEST_CASE("a script is loaded once and reloaded after SCRIPT FLUSH", "[redis][connection]") {
  test::RedisProcess server;  // private: a flush on the shared server disturbs other tests
  redis::Connection conn(redis::parse_url(server.url()));
  redis::Script script("test script", "return tonumber(ARGV[1]) + 1");
  auto run = [&](int v) {
    auto replies = script.run_pipeline(
        conn, 0,
        [&](const std::string& sha) {
          std::vector<redis::Command> cmds;
          cmds.push_back(std::move(redis::Command("EVALSHA").arg_copy(sha).arg(0).arg(v)));
          return cmds;
        },
        redis::Effect::write);
    return redis::integer(replies[0], conn, "script");
  };
  CHECK(run(1) == 2);
  CHECK(run(2) == 3);
  RawClient(server.url()).cmd({"SCRIPT", "FLUSH"});
  CHECK(run(41) == 42);
}

TEST_CASE("the pool shares a few connections among many threads", "[redis][connection][pool]") {
  redis::PoolOptions po;
  po.size = 3;
  redis::ConnectionPool pool(redis::parse_url(test::shared_redis_url()), po);
  const std::string key = test::unique_prefix() + "pool";
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 12; ++t) {
    threads.emplace_back([&] {
      try {
        for (int i = 0; i < 200; ++i) {
          auto lease = pool.acquire();
          redis::Command c("INCR");
          c.arg(std::string_view(key));
          redis::integer(lease->run(c, redis::Effect::write), *lease, c.label());
        }
      } catch (...) {
        ++errors;
      }
    });
  }
  for (auto& t : threads)
    t.join();
  CHECK(errors == 0);
  RawClient raw(test::shared_redis_url());
  CHECK(redis::view(*raw.cmd({"GET", key})) == "2400");
  raw.cmd({"DEL", key});
}

TEST_CASE("a pool whose connections are all busy times out with a typed error",
          "[redis][connection][pool]") {
  redis::PoolOptions po;
  po.size = 1;
  po.wait_timeout = std::chrono::milliseconds(50);
  redis::ConnectionPool pool(redis::parse_url(test::shared_redis_url()), po);
  auto held = pool.acquire();
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(pool.acquire(), timeout_error);
  CHECK(test::elapsed_ms(t0) < 1000);
}

}  // namespace test_connection

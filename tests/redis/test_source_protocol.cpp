// The Redis source queue's decisions (dlq/redis/source_protocol.hpp) without a server: key
// names, what each script call sends, the bounds, the name checks and the reply reading that
// the blocking dlq::RedisSourceQueue and the asynchronous dlq::asio::AsyncSourceQueue share.
#include "dlq/redis/source_protocol.hpp"

#include <string>
#include <string_view>
#include <vector>

#include "support/catch.hpp"

namespace src = dlq::redis::source;

namespace {

std::vector<std::string> collect_take(const src::Keys& k, std::string_view consumer,
                                      std::size_t max) {
  std::vector<std::string> out;
  const std::string count = src::take_count_arg(max);
  src::take_args(k, consumer, count, [&](std::string_view a) { out.emplace_back(a); });
  return out;
}

}  // namespace

TEST_CASE("source protocol: the keys share the source key's hash tag", "[source]") {
  const src::Keys k = src::keys("queue:{orders}", "host-7/2");
  CHECK(k.source == "queue:{orders}");
  CHECK(k.in_flight == "queue:{orders}:inflight:host-7/2");
  CHECK(k.consumers == "queue:{orders}:consumers");
  CHECK(src::in_flight_key("q", std::string("\xff\0x", 3)) ==
        std::string("q:inflight:\xff\0x", 14));
}

TEST_CASE("source protocol: a take asks for 1 to 1000 jobs", "[source]") {
  CHECK(src::take_count(0) == 1);
  CHECK(src::take_count(1) == 1);
  CHECK(src::take_count(16) == 16);
  CHECK(src::take_count(1000) == 1000);
  CHECK(src::take_count(1001) == 1000);
  CHECK(src::take_count(static_cast<std::size_t>(-1)) == 1000);
  const src::Keys k = src::keys("S", "w1");
  const auto args = collect_take(k, "w1", 5000);
  CHECK(args == std::vector<std::string>{"3", "S", "S:inflight:w1", "S:consumers", "1000", "w1"});
  CHECK(args.size() == src::take_arg_count);
  CHECK(collect_take(k, "w1", 0)[4] == "1");
}

TEST_CASE("source protocol: ack and nack send the in-flight list first and every payload",
          "[source]") {
  const src::Keys k = src::keys("S", "w1");
  const std::vector<dlq::SourceJob> jobs = {{"", "a", 0}, {"", std::string("b\0c", 3), 0}};
  for (const bool requeue : {false, true}) {
    std::vector<std::string> args;
    src::settle_args(k, "w1", jobs, requeue, [&](std::string_view a) { args.emplace_back(a); });
    CHECK(args == std::vector<std::string>{"3", "S:inflight:w1", "S", "S:consumers",
                                           requeue ? "1" : "0", "w1", "a", std::string("b\0c", 3)});
    CHECK(args.size() == src::settle_arg_count(jobs.size()));
  }
}

TEST_CASE("source protocol: recover moves 1000 jobs a step and steps again after a full one",
          "[source]") {
  const src::Keys k = src::keys("S", "w1");
  std::vector<std::string> args;
  src::recover_args(k, "w1", [&](std::string_view a) { args.emplace_back(a); });
  CHECK(args == std::vector<std::string>{"3", "S:inflight:w1", "S", "S:consumers", "w1",
                                         std::to_string(src::recover_chunk)});
  CHECK(args.size() == src::recover_arg_count);
  CHECK(src::recover_again(1000));
  CHECK_FALSE(src::recover_again(999));
  CHECK_FALSE(src::recover_again(0));
}

TEST_CASE("source protocol: a take's reply becomes jobs in order, payloads unchanged", "[source]") {
  const auto jobs = src::jobs_of({"x", "", std::string("\0", 1)});
  REQUIRE(jobs.size() == 3);
  CHECK(jobs[0].payload == "x");
  CHECK(jobs[1].payload.empty());
  CHECK(jobs[2].payload == std::string("\0", 1));
  CHECK(jobs[0].id.empty());
  CHECK(jobs[0].version == 0);
  CHECK(src::label("take", "S") == "source take script on S");
}

TEST_CASE("source protocol: empty names are refused", "[source]") {
  CHECK_THROWS_AS(src::check("", "take"), dlq::invalid_argument);
  CHECK_THROWS_AS(src::check("q", "", "take"), dlq::invalid_argument);
  CHECK_THROWS_AS(src::check("", "w1", "take"), dlq::invalid_argument);
  CHECK_NOTHROW(src::check("q", "w1", "take"));
}

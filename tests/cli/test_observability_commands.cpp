// dlqctl stats, metrics and errors (through dlq::DeadLetterQueue::stats / ::errors), in-process
// over dlq::MemoryStorage with the fixture's fake clock.
#include <chrono>
#include <string>
#include <vector>

#include "cli_fixture.hpp"
#include "support/catch.hpp"

namespace test_observability_commands {

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("stats prints depth, corrupt depth, oldest, newest and age per queue", "[cli]") {
  using namespace std::chrono_literals;
  CliFixture f;
  auto q = f.dlq();
  q.send_to_dlq("orders", "{}", "e");
  f.now += 90s;
  q.send_to_dlq("orders", "{}", "e");
  f.storage.push(dlq::Record{"foreign", {}, {}, "not json"});
  f.now += 30s;

  auto t = f.run({"stats"});
  REQUIRE(t.code == 0);
  const auto lines = t.lines();
  REQUIRE(lines.size() == 3);
  CHECK(contains(lines[0], "QUEUE"));
  CHECK(contains(lines[0], "AGE"));
  CHECK(contains(lines[1], "foreign"));
  CHECK(contains(lines[1], "(no time)"));  // never guessed
  CHECK(contains(lines[2], "orders"));
  CHECK(contains(lines[2], "2m"));  // 120 s

  auto j = f.run({"stats", "orders", "empty", "--json"}).json_lines();
  REQUIRE(j.size() == 2);
  CHECK(j[0]["queue"] == "orders");
  CHECK(j[0]["dead"] == 2);
  CHECK(j[0]["corrupt"] == 0);
  CHECK(j[0]["oldest_age_seconds"] == 120.0);
  CHECK(j[0]["oldest_untimed"] == false);
  CHECK(j[0]["oldest_dead_lettered_at"].is_string());
  CHECK(j[1]["dead"] == 0);
  CHECK(j[1]["oldest_age_seconds"].is_null());

  auto foreign = f.run({"stats", "foreign", "--json"}).json_lines();
  CHECK(foreign[0]["oldest_untimed"] == true);
  CHECK(foreign[0]["oldest_age_seconds"].is_null());
}

TEST_CASE("metrics prints the Prometheus text of the stats, without per-run counters", "[cli]") {
  using namespace std::chrono_literals;
  CliFixture f;
  f.dlq().send_to_dlq("we\"ird", "{}", "e");
  f.now += 5s;
  auto t = f.run({"metrics"});
  REQUIRE(t.code == 0);
  CHECK(contains(t.out, "# TYPE dlq_entries gauge\n"));
  CHECK(contains(t.out, "dlq_entries{queue=\"we\\\"ird\",list=\"dead\"} 1\n"));
  CHECK(contains(t.out, "dlq_oldest_entry_age_seconds{queue=\"we\\\"ird\"} 5\n"));
  CHECK_FALSE(contains(t.out, "_total"));
  // Named queues keep their series when empty.
  auto named = f.run({"metrics", "orders"});
  CHECK(contains(named.out, "dlq_entries{queue=\"orders\",list=\"dead\"} 0\n"));
}

TEST_CASE("errors --max reads a sample and says so; Ctrl-C stops it", "[cli]") {
  CliFixture f;
  auto q = f.dlq();
  for (int i = 0; i < 2500; ++i)
    q.send_to_dlq("orders", "{}", i % 5 == 0 ? "rare" : "common");
  auto all = f.run({"errors", "orders", "--json"});
  REQUIRE(all.code == 0);
  CHECK(all.err.empty());
  CHECK(all.json_lines()[0]["count"] == 2000);

  auto sample = f.run({"errors", "orders", "--max", "1500"});
  REQUIRE(sample.code == 0);
  CHECK(contains(sample.out, "1500 entries"));
  CHECK(contains(sample.err, "a sample of 1500 of about 2500 entries"));

  f.cancel = true;
  auto stopped = f.run({"errors", "orders"});
  CHECK(stopped.code == 130);
  CHECK(contains(stopped.err, "interrupted"));
  CHECK(f.traps == std::vector<bool>{true, false, true, false, true, false});
}

TEST_CASE("a skipped queue name is shown cut to 64 bytes with its length (issue 27)", "[cli]") {
  // A foreign key with a 1 MiB queue name: the message names it without printing it whole.
  CliFixture f;
  f.dlq().send_to_dlq("orders", "{}", "e");
  const std::string huge = "Q" + std::string((1 << 20) - 1, 'x');
  f.storage.push(dlq::Record{huge, {}, {}, "not json"});
  f.storage.push(dlq::Record{std::string(2000, '\n'), {}, {}, "not json"});
  for (const char* command : {"queues", "stats", "metrics"}) {
    INFO(command);
    const auto r = f.run({command});
    CHECK(r.code == 0);
    INFO(r.err.substr(0, 300));
    CHECK(r.err.size() < 1000);
    CHECK(contains(r.err, "Qxxxxxxxxx"));
    CHECK(contains(r.err, "1048576 bytes"));
    CHECK(contains(r.err, "2000 bytes"));
    std::string escaped_65;  // 65 newlines as printed: more than 64 bytes of the name
    for (int i = 0; i < 65; ++i)
      escaped_65 += "\\n";
    CHECK_FALSE(contains(r.err, escaped_65));
    CHECK(contains(r.err, "\\n\\n"));
    CHECK_FALSE(contains(r.err, std::string(100, 'x')));
  }
}

}  // namespace test_observability_commands

// dlqctl's messages for a first-time user (issue 15): where replay puts jobs, a queue with no
// dead letters, dead letters under another key layout, counts that are not numbers, the
// command list, --json on count and replay, a frozen server named in CLI terms.
#include <algorithm>
#include <string>
#include <vector>

#include "cli_fixture.hpp"
#include "support/catch.hpp"

namespace test_cli_messages {

using nlohmann::json;

namespace {
bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}
std::size_t line_count(const std::string& s) {
  return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n'));
}
}  // namespace

TEST_CASE("an unknown command lists every command dlqctl has, trim included", "[cli]") {
  CliFixture f;
  auto r = f.run({"list"});
  CHECK(r.code == 1);
  CHECK(line_count(r.err) == 1);
  CHECK(contains(r.err, "'list' is not a command"));
  for (const char* cmd : {"send", "count", "peek", "show", "replay", "delete", "purge", "queues",
                          "recover", "trim", "errors", "corrupt"})
    CHECK(contains(r.err, cmd));
}

TEST_CASE("a count that is not a whole number is refused in a short line", "[cli]") {
  CliFixture f;
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"peek", "orders", "--count", "abc"},
           {"peek", "orders", "--start", "-1"},
           {"corrupt", "orders", "--count", "1e3"},
           {"replay", "orders", "--count", "abc"},
           {"replay", "orders", "--count", "0"},
           {"trim", "orders", "--max-length", "-3", "--yes"},
       }) {
    auto r = f.run(args);
    INFO(r.err);
    CHECK(r.code == 1);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.size() < 160);  // no 300-digit range
    CHECK((contains(r.err, "is not a whole number") || contains(r.err, "must be 1 or more")));
    CHECK_FALSE(f.opened);
  }
  CHECK(contains(f.run({"replay", "orders", "--count", "0"}).err, "must be 1 or more"));
  CHECK(f.run({"peek", "orders", "--count", "0"}).code == 0);
}

TEST_CASE("count --json prints one JSON object", "[cli]") {
  CliFixture f;
  auto q = f.dlq();
  q.send_to_dlq("orders", "{}", "e", 1, "w");
  q.send_to_dlq("orders", "{}", "e", 1, "w");
  auto r = f.run({"count", "orders", "--json"});
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out) == json{{"queue", "orders"}, {"dead", 2}});
  auto c = f.run({"count", "orders", "--corrupt", "--json"});
  CHECK(json::parse(c.out) == json{{"queue", "orders"}, {"corrupt", 0}});
}

TEST_CASE("replay --json prints the whole report as one JSON object", "[cli]") {
  CliFixture f;
  f.destination = [](std::string_view q) { return "the list queue:{" + std::string(q) + "}"; };
  auto q = f.dlq();
  const std::string id = q.send_to_dlq("orders", R"({"n":1})", "e", 1, "w");
  q.send_to_dlq("orders", R"({"n":2})", "e", 1, "w");
  auto r = f.run({"replay", "orders", "--id", id, "no-such-id", "--json"});
  CHECK(r.code == 3);  // a missing id is still reported as not found
  const json j = json::parse(r.out);
  CHECK(j["queue"] == "orders");
  CHECK(j["to"] == "orders");
  CHECK(j["destination"] == "the list queue:{orders}");
  CHECK(j["replayed"] == 1);
  CHECK(j["not_found"] == json::array({"no-such-id"}));
  CHECK(j["dry_run"] == false);
  CHECK(j["cancelled"] == false);
  auto all = f.run({"replay", "orders", "--all", "--dry-run", "--json"});
  CHECK(json::parse(all.out)["dry_run"] == true);
  CHECK(json::parse(all.out)["replayed"] == 1);
}

TEST_CASE("replay says where the jobs went, and --help says where they go", "[cli]") {
  CliFixture f;
  f.destination = [](std::string_view q) {
    return "the job queue jobs:{" + std::string(q) + "}:ready in /tmp/x.db";
  };
  f.dlq().send_to_dlq("orders", "{}", "e", 1, "w");
  auto r = f.run({"replay", "orders", "--all"});
  REQUIRE(r.code == 0);
  CHECK(contains(r.err, "they went to the job queue jobs:{orders}:ready in /tmp/x.db"));
  CHECK(r.lines().back() == "1");
  auto help = f.run({"replay", "--help"});
  CHECK(contains(help.out, "jobs:{QUEUE}:ready"));
  CHECK(contains(help.out, "its own sink"));
}

TEST_CASE("a queue with no dead letters says so and names the queues that have some", "[cli]") {
  CliFixture f;
  auto q = f.dlq();
  q.send_to_dlq("payments", "{}", "e", 1, "w");
  q.send_to_dlq("emails", "{}", "e", 1, "w");
  auto r = f.run({"count", "orders"});
  CHECK(r.code == 0);
  CHECK(r.out == "0\n");  // stdout stays what a script reads
  CHECK(contains(r.err, "no dead letters in 'orders'"));
  CHECK(contains(r.err, "queues that have some: emails, payments"));
  CHECK(contains(f.run({"peek", "orders"}).err, "queues that have some: emails, payments"));
  CHECK(contains(f.run({"replay", "orders", "--all"}).err, "queues that have some"));
  CHECK(f.run({"count", "payments"}).err.empty());
}

TEST_CASE("no queue in the configured layout: dlqctl names the layout that has some", "[cli]") {
  CliFixture f;
  f.other_layout = [] {
    return dlqctl::Store::OtherLayout{"the Python service's layout dlq:* / queue:*",
                                      "--dlq-key 'dlq:*' --queue-key 'queue:*'",
                                      {"pyq"}};
  };
  auto r = f.run({"queues"});
  CHECK(r.code == 0);
  CHECK(contains(r.out, "no dead letters"));
  CHECK(contains(r.err, "the Python service's layout dlq:* / queue:* (pyq)"));
  CHECK(contains(r.err, "--dlq-key 'dlq:*' --queue-key 'queue:*'"));
  auto c = f.run({"count", "pyq"});
  CHECK(contains(c.err, "no queue has any"));
  CHECK(contains(c.err, "--dlq-key 'dlq:*'"));
  auto j = f.run({"queues", "--json"});
  CHECK(j.out.empty());  // JSON Lines: no rows; the hint goes to stderr
  CHECK(contains(j.err, "--dlq-key"));

  f.other_layout = [] { return std::optional<dlqctl::Store::OtherLayout>{}; };
  CHECK_FALSE(contains(f.run({"queues"}).err, "--dlq-key"));
}

TEST_CASE("a frozen server is explained with the CLI's flag, not a C++ option", "[cli]") {
  CliFixture f;
  f.on_open = [] {
    throw dlq::timeout_error(
        "[dlq.redis] 127.0.0.1:6379: LLEN dlq:{orders}: no answer within 500 ms; the server is "
        "frozen, overloaded or unreachable; check it or raise ConnectionOptions timeouts");
  };
  auto r = f.run({"count", "orders", "--timeout", "500ms"});
  CHECK(r.code == 2);
  CHECK(line_count(r.err) == 1);
  CHECK(contains(r.err, "raise --timeout (now 500ms)"));
  CHECK_FALSE(contains(r.err, "ConnectionOptions"));
}

namespace {
// Store URLs whose credentials hold what the Redis URL parser accepts in them: '@' (the
// user-info ends at the last '@'), '/', ':', %-escapes, a user:password pair, a lone
// password, ?password=. Every secret part is one of SECa..SECd.
const std::vector<std::string> secret_urls = {
    "redis://:SECa@SECb/SECc:SECd@127.0.0.1:1/0",
    "redis://alice:SECa@SECb/SECc:SECd@127.0.0.1:1/0",
    "redis://:SECa%40SECb%2FSECc%3ASECd@127.0.0.1:1/0",
    "redis://SECa@SECb@127.0.0.1:1/0",
    "redis://alice:SECa:SECb@[::1]:1/0",
    "redis://127.0.0.1:1/0?db=0&password=SECa@SECb/SECc:SECd",
    "unix://:SECa:SECb@/tmp/redis.sock?db=0",
    "redis+unix://alice:SECa%40SECb@/tmp/redis.sock",
};

// Every command that opens the store, with the arguments it needs to get there.
const std::vector<std::vector<std::string>> store_commands = {
    {"send", "orders", "--error", "e", "--payload", "{}"},
    {"count", "orders"},
    {"peek", "orders"},
    {"show", "orders", "some-id"},
    {"replay", "orders", "--all"},
    {"replay", "orders", "--id", "some-id", "--set-payload", "-"},
    {"replay", "orders", "--id", "some-id", "--transform-cmd", "cat"},
    {"delete", "orders", "some-id"},
    {"purge", "orders", "--yes"},
    {"queues"},
    {"recover", "orders"},
    {"trim", "orders", "--max-length", "1", "--yes"},
    {"errors", "orders"},
    {"stats"},
    {"metrics"},
    {"corrupt", "orders"},
    {"search", "orders"},
    {"discard", "orders", "--error-contains", "x", "--yes"},
    {"audit", "orders"},
};
}  // namespace

TEST_CASE("no store error of any command shows any part of the store's password", "[cli]") {
  // The library names the endpoint; dlqctl adds the URL it was given (redacted). A message
  // that carries the URL itself (as the URL parser's did) is redacted on the way out too.
  for (const auto& url : secret_urls) {
    const std::vector<std::function<void()>> failures = {
        [] {
          throw dlq::connection_error(
              "[dlq.redis] 127.0.0.1:1: connecting: connection refused; is redis-server "
              "running and listening on this address?");
        },
        [] {
          throw dlq::timeout_error(
              "[dlq.redis] 127.0.0.1:1: no answer within 500 ms; check it or raise "
              "ConnectionOptions timeouts");
        },
        [url] {
          throw dlq::connection_error("[dlq.redis] cannot reach " + url + " now; check it");
        },
        [url] { throw dlq::invalid_argument("[dlq.redis] URL '" + url + "': bad port"); },
        [url] { throw dlq::reply_error("[dlq.redis] " + url + ": WRONGPASS", "WRONGPASS"); },
    };
    for (std::size_t k = 0; k < failures.size(); ++k) {
      CliFixture f;
      f.on_open = failures[k];
      for (auto args : store_commands) {
        args.insert(args.end(), {"--store", url});
        const auto r = f.run(args);
        INFO(url << ", failure " << k << ": dlqctl " << args[0] << " → " << r.err);
        CHECK(r.code != 0);
        CHECK(line_count(r.err) == 1);
        CHECK_FALSE(contains(r.out + r.err, "SEC"));
        CHECK(contains(r.err, "***"));
      }
    }
  }
}

TEST_CASE("a store URL put where no argument goes is not echoed with its password", "[cli]") {
  CliFixture f;
  for (const auto& url : secret_urls) {
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"count", "orders", url}, {url, "count", "orders"}, {url}}) {
      const auto r = f.run(args);
      INFO(url << " → " << r.err);
      CHECK(r.code == 1);
      CHECK(line_count(r.err) == 1);
      CHECK_FALSE(contains(r.out + r.err, "SEC"));
    }
  }
}

}  // namespace test_cli_messages

// Interop with the Python seed's Redis format, both ways, through DeadLetterQueue:
//  - entries written by the seed's send_to_dlq are read, peeked and replayed by C++, and the
//    replayed payloads are byte-identical to what the seed's replay_one would push;
//  - entries written by C++ are read and replayed by the seed's code, payloads JSON-equal.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/redis/list_storage.hpp"
#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"

namespace test_interop {

namespace {

// Runs a command, returns its stdout; the test fails on a non-zero exit.
std::string run(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe.get())) > 0;)
    out.append(buf, n);
  const int status = ::pclose(pipe.release());
  INFO(command << "\n" << out);
  REQUIRE(status == 0);
  return out;
}

std::string seed(const std::string& mode, const std::string& url, const std::string& prefix,
                 const std::string& queue) {
  return run(std::string(DLQ_SEED_PYTHON) + " " + DLQ_SEED_SCRIPT + " " + mode + " '" + url +
             "' '" + prefix + "' '" + queue + "'");
}

// The seed's key layout (dlq:<queue>, queue:<queue>) under a test prefix.
dlq::RedisListOptions seed_layout(const std::string& prefix) {
  dlq::RedisListOptions o;
  o.dead_key = prefix + "dlq:*";
  o.source_key = prefix + "queue:*";
  o.corrupt_key = prefix + "dlq:*:corrupt";
  return o;
}

}  // namespace

TEST_CASE("entries the Python seed wrote are read, peeked and replayed byte-exact",
          "[redis][interop]") {
  const std::string url = dlq::test::shared_redis_url();
  const std::string prefix = dlq::test::unique_prefix();
  const std::string out = seed("write", url, prefix, "orders");
  std::vector<std::string> payloads;  // json.dumps(payload) as the seed's replay pushes it
  for (std::size_t pos = 0, nl; (nl = out.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    payloads.push_back(nlohmann::json::parse(out.substr(pos, nl - pos)).get<std::string>());
  }
  REQUIRE(payloads.size() == 9);

  dlq::DeadLetterQueue<dlq::RedisListStorage> q(dlq::RedisListStorage(url, seed_layout(prefix)));
  CHECK(q.size("orders") == payloads.size());
  CHECK(q.queues() == std::vector<std::string>{"orders"});
  const auto entries = q.peek("orders", 0, 100);
  REQUIRE(entries.size() == payloads.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const dlq::Entry& e = entries[i];
    INFO(e.raw);
    CHECK(e.ok());
    CHECK(e.id_derived);  // the seed writes no id: derived from the bytes, stable
    CHECK(e.queue == "orders");
    CHECK(e.error == "error " + std::to_string(i) + ": payment timeout");
    CHECK(e.attempt == static_cast<std::int64_t>(i + 1));
    CHECK(e.worker == "py-worker-" + std::to_string(i));
    CHECK(e.dead_lettered_time.has_value());
    CHECK(e.payload == payloads[i]);
  }
  CHECK(q.peek("orders", 0, 100)[3].id == entries[3].id);

  const auto report = q.replay_all("orders");
  CHECK(report.replayed == payloads.size());
  CHECK(q.size("orders") == 0);
  dlq::test::RawClient raw(url);
  CHECK(raw.list(prefix + "queue:orders") == payloads);  // byte-identical to the seed's replay
}

TEST_CASE("entries C++ wrote are read and replayed by the Python seed", "[redis][interop]") {
  const std::string url = dlq::test::shared_redis_url();
  const std::string prefix = dlq::test::unique_prefix();
  const std::vector<std::string> payloads = {
      R"({"order":42,"amount":12.50})",
      R"({"big":12345678901234567,"max":9223372036854775807,"min":-9223372036854775808})",
      R"({"empty_list":[],"empty_object":{},"nested":[[],{}]})",
      R"({"z":1,"a":2,"m":{"y":1,"b":2}})",
      "{\"text\":\"caf\xC3\xA9 \xF0\x9F\x98\x80 \\/ \\\"q\\\" \\u0000\"}",
      "[1,2,3]",
      R"("just a string")",
      "null",
      "{\"trailing\":\"newline\"}\n",  // JSON with whitespace around it: embedded, not base64
      " \t[1, 2]\r\n",
  };
  dlq::DeadLetterQueue<dlq::RedisListStorage> q(dlq::RedisListStorage(url, seed_layout(prefix)));
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    q.send_to_dlq("orders", payloads[i], "cpp error " + std::to_string(i),
                  static_cast<std::int64_t>(i + 1), "cpp-worker");
  }
  {  // stored in the fast path's layout: payload_bytes, original_payload, id first (after
     // the payload_whitespace flag for the last two), envelope_bytes (the item's length) last
    dlq::test::RawClient raw(url);
    const auto items = raw.list(prefix + "dlq:orders");
    REQUIRE(items.size() == payloads.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
      const std::string head = i + 2 < items.size()
                                   ? R"({"payload_bytes":)"
                                   : R"({"payload_whitespace":true,"payload_bytes":)";
      CHECK(items[i].rfind(head, 0) == 0);
      const std::string end = R"(,"envelope_bytes":)" + std::to_string(items[i].size()) + "}";
      CHECK(items[i].size() > end.size());
      CHECK(items[i].compare(items[i].size() - end.size(), end.size(), end) == 0);
    }
  }
  const auto result = nlohmann::json::parse(seed("replay", url, prefix, "orders"));
  const auto& entries = result.at("entries");
  const auto& replayed = result.at("replayed");
  REQUIRE(entries.size() == payloads.size());
  REQUIRE(replayed.size() == payloads.size());
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    INFO(payloads[i]);
    CHECK(entries[i].at("queue") == "orders");
    CHECK(entries[i].at("error") == "cpp error " + std::to_string(i));
    CHECK(entries[i].at("attempt") == i + 1);
    CHECK(entries[i].at("worker") == "cpp-worker");
    CHECK(entries[i].at("original_payload") == nlohmann::json::parse(payloads[i]));
    CHECK(entries[i].at("payload_bytes").is_number_unsigned());  // extra fields, ignored
    CHECK(entries[i].at("envelope_bytes").is_number_unsigned());
    CHECK(nlohmann::json::parse(replayed[i].get<std::string>()) ==
          nlohmann::json::parse(payloads[i]));
  }
  CHECK(q.size("orders") == 0);
}

TEST_CASE("a queue of C++ and Python entries replays in order: the fast path, then the seed's",
          "[redis][interop][fast]") {
  const std::string url = dlq::test::shared_redis_url();
  const std::string prefix = dlq::test::unique_prefix();
  dlq::RedisListStorage storage(url, seed_layout(prefix));
  dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage);
  std::vector<std::string> expected;
  auto send = [&](int from, int to) {
    for (int i = from; i < to; ++i) {
      expected.push_back(R"({"cpp":)" + std::to_string(i) + "}");
      q.send_to_dlq("orders", expected.back(), "cpp error");
    }
  };
  send(0, 5);
  const std::string out = seed("write", url, prefix, "orders");
  for (std::size_t pos = 0, nl; (nl = out.find('\n', pos)) != std::string::npos; pos = nl + 1)
    expected.push_back(nlohmann::json::parse(out.substr(pos, nl - pos)).get<std::string>());
  send(5, 10);
  REQUIRE(expected.size() == 19);

  // The fast step moves the five C++ entries and stops at the seed's first.
  dlq::RedisListStorage::replay_cursor cursor;
  const dlq::FastStep f = storage.replay_fast("orders", cursor, 100, "orders", false);
  CHECK(f.moved == 5);
  CHECK(f.unprovable == 9);
  const auto report = q.replay_all("orders");
  CHECK(report.replayed == 14);
  CHECK(report.skipped.empty());
  dlq::test::RawClient raw(url);
  CHECK(raw.list(prefix + "queue:orders") == expected);
}

}  // namespace test_interop

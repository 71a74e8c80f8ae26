// dlq — stored bytes nested very deeply (a job payload of 100 000 nested
// arrays — the kind of hostile input that makes a worker give up — or a crafted context)
// crashed whoever printed the entry: Entry::to_json() and Entry::context parsed them into
// nlohmann::json values whose dump() recurses once per level and overflows the stack
// (dlqctl peek / get / export print exactly that). Replay itself never parses them.
#include <string>

#include "dlq/dead_letter_queue.hpp"
#include "dlq/storage/memory.hpp"
#include "support/catch.hpp"

namespace test_deeply_nested_entries {

namespace {

std::string nested(std::size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

}  // namespace

TEST_CASE("a deeply nested stored entry can be printed, inspected and replayed", "[memory]") {
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  const std::string deep = nested(100000);
  // A worker dead-letters the hostile job as it is (its payload is valid JSON).
  const std::string id = q.send_to_dlq("orders", deep, "too deep", 1, "w");
  // And a crafted item with a deep context, written by another tool.
  const std::string crafted = R"({"original_payload":1,"id":"crafted","context":)" + deep + "}";
  q.storage().push(dlq::Record{"orders", "crafted", "", crafted});

  const auto page = q.peek("orders");
  REQUIRE(page.size() == 2);
  for (const auto& e : page) {
    INFO(e.id);
    CHECK(e.ok());                                 // readable and replayable
    const std::string shown = e.to_json().dump();  // what dlqctl peek prints
    CHECK(shown.find(e.id) != std::string::npos);
    CHECK(!e.context.dump().empty());
    CHECK(!e.payload_json().dump().empty());
  }
  CHECK(page[0].payload == deep);  // the bytes themselves are intact

  const auto r = q.replay_all("orders");
  CHECK(r.replayed == 2);
  CHECK(q.storage().source_pop("orders") == deep);
  CHECK(q.storage().source_pop("orders") == "1");
}

TEST_CASE("entries nested to an ordinary depth still print as JSON objects", "[memory]") {
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  dlq::Failure f;
  f.error = "boom";
  f.context = nlohmann::json::parse(R"({"path":)" + nested(100) + "}");
  q.send_to_dlq("orders", nested(200), f);
  const auto e = q.peek("orders").at(0);
  const auto j = e.to_json();
  REQUIRE(j.is_object());
  CHECK(j.at("original_payload").is_array());
  CHECK(e.context.is_object());
  CHECK(e.payload_json().is_array());
}

}  // namespace test_deeply_nested_entries

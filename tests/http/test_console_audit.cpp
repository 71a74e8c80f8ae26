// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// The console's delete route and the audit trail (issue 27, defect 5): one POST /api/delete
// is one library call and one audit record naming the ids it removed; ids that are not there
// write nothing, so a flood of requests of made-up ids cannot push earlier records out.
// In-process over dlq::MemoryStorage; tests/http/test_console_audit.py does the same
// through `dlqctl serve` over the test Redis.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <dlq/dlq.hpp>
#include <dlq/http.hpp>
#include <nlohmann/json.hpp>

#include "http/console_fixture.hpp"

namespace test_console_audit {

using namespace console_test;

TEST_CASE("one POST /api/delete is one audit record naming the ids it removed") {
  Served s;
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i)
    ids.push_back(
        s.queue.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}", "boom", 1, "w"));
  auto c = s.client();
  auto r = post(c, "/api/delete",
                {{"queue", "orders"}, {"ids", {ids[4], "made-up-1", ids[0], ids[2], "made-up-2"}}});
  REQUIRE(r);
  CHECK(r->status == 200);
  const json b = body_of(r);
  CHECK(b["deleted"] == 3);
  CHECK(b["missing"] == json::array({"made-up-1", "made-up-2"}));
  CHECK(s.queue.size("orders") == 3);

  const auto trail = s.queue.audit("orders");
  REQUIRE(trail.size() == 1);
  CHECK(trail[0].operation == "remove");
  CHECK(trail[0].ids == std::vector<std::string>{ids[4], ids[0], ids[2]});
  CHECK(trail[0].ids_omitted == 0);
  CHECK(trail[0].counts["removed"] == 3);
  CHECK(trail[0].counts["not_found"] == 2);
  CHECK(trail[0].outcome == "ok");
}

TEST_CASE("a flood of POST /api/delete of made-up ids writes no audit record") {
  Served s;
  for (int i = 0; i < 3; ++i)
    s.queue.send_to_dlq("orders", "{}", "boom", 1, "w");
  auto c = s.client();
  REQUIRE(body_of(post(c, "/api/purge", {{"queue", "orders"}, {"confirm", "orders"}}))["deleted"] ==
          3);
  for (int request = 0; request < 11; ++request) {
    json ids = json::array();
    for (int i = 0; i < 1000; ++i)
      ids.push_back("made-up-" + std::to_string(request) + "-" + std::to_string(i));
    auto r = post(c, "/api/delete", {{"queue", "orders"}, {"ids", ids}});
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(body_of(r)["deleted"] == 0);
  }
  const auto trail = s.queue.audit("orders", {}, 100000);
  REQUIRE(trail.size() == 1);
  CHECK(trail[0].operation == "purge");
  CHECK(trail[0].counts["purged"] == 3);
  CHECK(s.queue.counters().audited == 1);
}

// Issue 30: the record of a replay or delete by filter said `"filter": true` and lost the
// filter; a dry run must write nothing.
TEST_CASE("a console replay and delete by filter record the filter as given, rate and counts") {
  Served s;
  for (int i = 0; i < 6; ++i) {
    dlq::Failure f;
    f.error = i % 2 == 0 ? "Currency GBP unsupported" : "other";
    f.error_type = i < 4 ? "GatewayTimeout" : "Other";
    f.worker = "w";
    s.queue.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}", f);
  }
  auto c = s.client();
  const json filter = {{"error", "currency GBP"}, {"error_type", "GatewayTimeout"},
                       {"min_age", "0s"}};
  auto dry = body_of(post(c, "/api/replay",
                          {{"queue", "orders"}, {"filter", filter}, {"dry_run", true}}));
  CHECK(wait_op(c, dry["id"])["report"]["replayed"] == 2);
  auto op = body_of(post(c, "/api/replay",
                         {{"queue", "orders"}, {"filter", filter}, {"rate", 500},
                          {"to", "orders-retry"}}));
  CHECK(wait_op(c, op["id"])["report"]["replayed"] == 2);
  auto del = body_of(post(c, "/api/discard",
                          {{"queue", "orders"}, {"filter", {{"error_type", "Other"}}}}));
  CHECK(wait_op(c, del["id"])["report"]["deleted"] == 2);

  const auto trail = s.queue.audit("orders");
  REQUIRE(trail.size() == 2);  // the dry run wrote nothing
  CHECK(trail[0].operation == "replay");
  CHECK(trail[0].filter.dump() ==
        R"({"error":"currency GBP","error_type":"GatewayTimeout","min_age":"0s"})");
  CHECK(trail[0].detail["destination"] == "orders-retry");
  CHECK(trail[0].detail.value("rate", 0.0) == 500.0);
  CHECK(trail[0].counts["replayed"] == 2);
  CHECK(trail[0].counts["examined"] == 6);
  CHECK(trail[1].operation == "discard");
  CHECK(trail[1].filter.dump() == R"({"error_type":"Other"})");
  CHECK(trail[1].counts["discarded"] == 2);
}

TEST_CASE("EntryQuery::describe: the console's filter as given, ages in their largest unit") {
  dlq::http::EntryQuery q;
  CHECK(q.describe() == nlohmann::ordered_json::object());
  q.payload = "GBP";
  q.error = "Currency";
  q.min_age = std::chrono::seconds(900);
  q.max_age = std::chrono::seconds(2 * 86400);
  CHECK(q.describe().dump() ==
        R"({"error":"Currency","payload":"GBP","min_age":"15m","max_age":"2d"})");
  CHECK(dlq::http::EntryQuery::age_text(std::chrono::seconds(0)) == "0s");
  CHECK(dlq::http::EntryQuery::age_text(std::chrono::seconds(90)) == "90s");
  CHECK(dlq::http::EntryQuery::age_text(std::chrono::seconds(7200)) == "2h");
}

}  // namespace test_console_audit

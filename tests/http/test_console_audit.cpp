// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// The console's delete route and the audit trail (issue 27, defect 5): one POST /api/delete
// is one library call and one audit record naming the ids it removed; ids that are not there
// write nothing, so a flood of requests of made-up ids cannot push earlier records out.
// In-process over dlq::MemoryStorage; tests/http/test_console_audit.py does the same
// through `dlqctl serve` over the test Redis.
#include <string>
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

}  // namespace test_console_audit

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// Audit records that stand alone (issue 30, item 1): a predicate's filter as its builder gave
// it (Filter::predicate_terms) instead of a bare `"filter": true`, the replay's rate and
// destination, and an actor that is never empty (dlq::unknown_actor when nobody was named).
#include <chrono>
#include <string>
#include <vector>

#include <dlq/dlq.hpp>

#include "support/catch.hpp"

namespace test_audit_records {

using json = nlohmann::ordered_json;

TEST_CASE("Filter::describe writes a predicate's terms, or the bare marker without them",
          "[audit]") {
  dlq::Filter f;
  f.error_type = "GatewayTimeout";
  f.predicate = [](const dlq::Entry&) { return true; };
  CHECK(f.describe() == json::parse(R"({"error_type":"GatewayTimeout","predicate":true})"));

  f.predicate_terms = json::parse(R"({"error":"currency GBP","error_type":"X"})");
  // a term named like a condition already described is kept under "predicate.<name>"
  CHECK(f.describe().dump() ==
        R"({"error_type":"GatewayTimeout","error":"currency GBP","predicate.error_type":"X"})");

  f.predicate_terms = json::object();  // empty: the marker
  CHECK(f.describe()["predicate"] == true);

  dlq::Filter no_predicate;  // terms without a predicate describe nothing
  no_predicate.predicate_terms = json::parse(R"({"error":"x"})");
  CHECK(no_predicate.describe() == json::object());
}

TEST_CASE("a replay's EntryFilter is described by predicate_terms", "[audit]") {
  dlq::ReplayOptions o;
  o.filter = [](const dlq::Entry&) { return true; };
  CHECK(dlq::detail::replay_description(o) == json::parse(R"({"filter":true})"));
  o.predicate_terms = json::parse(R"({"error":"currency GBP","min_age":"15m"})");
  CHECK(dlq::detail::replay_description(o).dump() == R"({"error":"currency GBP","min_age":"15m"})");
  // with a predicate too, the terms are the predicate's: the EntryFilter is the bare marker
  o.predicate = [](const dlq::Entry&) { return true; };
  CHECK(dlq::detail::replay_description(o).dump() ==
        R"({"error":"currency GBP","min_age":"15m","filter":true})");
}

TEST_CASE("the audit record of a replay by predicate holds its terms, rate and destination",
          "[audit]") {
  dlq::DeadLetterQueue<dlq::MemoryStorage> q(dlq::MemoryStorage{}, dlq::Options{});
  for (int i = 0; i < 6; ++i)
    q.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}",
                  i % 2 == 0 ? "currency GBP unsupported" : "other", 1, "w");
  dlq::ReplayOptions o;
  o.filter = [](const dlq::Entry& e) { return e.error.find("GBP") != std::string::npos; };
  o.predicate_terms = json::parse(R"({"error":"currency GBP"})");
  o.rate = 1000;
  o.to_queue = "orders-retry";
  o.actor = "alice";
  const auto report = q.replay("orders", o);
  CHECK(report.replayed == 3);

  dlq::ReplayOptions dry = o;  // a dry run changes nothing and writes nothing
  dry.dry_run = true;
  CHECK(q.replay("orders", dry).replayed == 0);

  const auto trail = q.audit("orders");
  REQUIRE(trail.size() == 1);
  const auto& r = trail[0];
  CHECK(r.actor == "alice");
  CHECK(r.operation == "replay");
  CHECK(r.filter.dump() == R"({"error":"currency GBP"})");
  CHECK(r.detail["destination"] == "orders-retry");
  CHECK(r.detail.value("rate", 0.0) == 1000.0);
  CHECK(r.counts["examined"] == 6);
  CHECK(r.counts["replayed"] == 3);
}

TEST_CASE("a record's actor is the call's, else Options::actor, else \"unknown\"", "[audit]") {
  SECTION("nobody named") {
    dlq::DeadLetterQueue<dlq::MemoryStorage> q(dlq::MemoryStorage{}, dlq::Options{});
    const auto id = q.send_to_dlq("orders", "{}", "e");
    CHECK(q.remove("orders", id));
    dlq::DiscardOptions d;
    d.predicate = [](const dlq::Entry&) { return true; };
    d.predicate_terms = json::parse(R"({"worker":"w"})");
    q.send_to_dlq("orders", "{}", "e", 1, "w");
    CHECK(q.discard("orders", d).discarded == 1);
    const auto trail = q.audit("orders");
    REQUIRE(trail.size() == 2);
    CHECK(trail[0].actor == "unknown");
    CHECK(trail[0].actor == dlq::unknown_actor);
    CHECK(trail[1].actor == "unknown");
    CHECK(trail[1].filter.dump() == R"({"worker":"w"})");
  }
  SECTION("Options::actor, and the call's over it") {
    dlq::Options options;
    options.actor = "billing-service";
    dlq::DeadLetterQueue<dlq::MemoryStorage> q(dlq::MemoryStorage{}, options);
    const auto a = q.send_to_dlq("orders", "{}", "e");
    const auto b = q.send_to_dlq("orders", "{}", "e");
    CHECK(q.remove("orders", a));
    CHECK(q.remove_ids("orders", {b}, "carol").removed.size() == 1);
    const auto trail = q.audit("orders");
    REQUIRE(trail.size() == 2);
    CHECK(trail[0].actor == "billing-service");
    CHECK(trail[1].actor == "carol");
  }
}

}  // namespace test_audit_records

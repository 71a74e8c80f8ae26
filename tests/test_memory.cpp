// MemoryStorage on its own: the lists, the source queues and the replay-step protocol; the
// audit trail's retention (AuditRetention) and its visible cap.
#include "dlq/storage/memory.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dlq/dead_letter_queue.hpp"
#include "dlq/metrics/prometheus.hpp"

#include "contract/range_bytes_checks.hpp"
#include "support/catch.hpp"

namespace {
dlq::Record rec(std::string_view q, std::string_view raw) {
  return {q, {}, {}, raw};
}
}  // namespace

TEST_CASE("lists keep insertion order and answer sizes and ranges", "[memory]") {
  dlq::MemoryStorage s;
  s.push(rec("a", "1"));
  s.push_many({rec("a", "2"), rec("b", "x"), rec("a", "3")});
  CHECK(s.size("a", dlq::ListKind::dead) == 3);
  CHECK(s.range("a", dlq::ListKind::dead, 1, 10) == std::vector<std::string>{"2", "3"});
  CHECK(s.range("a", dlq::ListKind::dead, 5, 10).empty());
  CHECK(s.sizes({"a", "b", "c"}) == std::vector<std::size_t>{3, 1, 0});
  CHECK(s.queues() == std::vector<std::string>{"a", "b"});
  CHECK(s.remove("a", dlq::ListKind::dead, "", "2"));
  CHECK_FALSE(s.remove("a", dlq::ListKind::dead, "", "2"));
  CHECK(s.purge("a", dlq::ListKind::dead) == 2);
  CHECK(s.queues() == std::vector<std::string>{"b"});
}

TEST_CASE("source queues are first in, first out", "[memory]") {
  dlq::MemoryStorage s;
  CHECK_FALSE(s.source_pop("jobs").has_value());
  s.source_push("jobs", "a");
  s.source_push("jobs", "b");
  CHECK(s.source_size("jobs") == 2);
  CHECK(s.source_pop("jobs") == std::optional<std::string>("a"));
  CHECK(s.source_range("jobs") == std::vector<std::string>{"b"});
}

TEST_CASE("a replay step applies keep, replay and set-aside together", "[memory]") {
  dlq::MemoryStorage s;
  for (const char* v : {"r1", "k1", "bad", "r2", "k2"})
    s.push(rec("q", v));
  dlq::MemoryStorage::replay_cursor cursor;
  auto decide = [](std::string_view raw, dlq::Decision& d) {
    if (raw[0] == 'r') {
      d.action = dlq::Action::replay;
      d.destination = "dest";
      d.payload = raw.substr(1);
    } else if (raw == "bad") {
      d.action = dlq::Action::set_aside;
    }
  };
  const auto r = s.replay_step("q", cursor, 10, decide);
  CHECK(r.examined == 5);
  CHECK_FALSE(r.conflict);
  CHECK(cursor.offset == 2);
  CHECK(s.range("q", dlq::ListKind::dead, 0, 10) == std::vector<std::string>{"k1", "k2"});
  CHECK(s.range("q", dlq::ListKind::corrupt, 0, 10) == std::vector<std::string>{"bad"});
  CHECK(s.source_range("dest") == std::vector<std::string>{"1", "2"});
  CHECK(s.replay_step("q", cursor, 10, decide).examined == 0);
}

TEST_CASE("a replay step whose window changed applies nothing", "[memory]") {
  dlq::MemoryStorage s;
  for (const char* v : {"a", "b", "c"})
    s.push(rec("q", v));
  dlq::MemoryStorage::replay_cursor cursor;
  bool removed = false;
  auto decide = [&](std::string_view, dlq::Decision& d) {
    if (!removed) removed = s.remove("q", dlq::ListKind::dead, "", "b");  // someone else acts
    d.action = dlq::Action::replay;
    d.destination = "dest";
    d.payload = "x";
  };
  const auto r = s.replay_step("q", cursor, 10, decide);
  CHECK(r.conflict);
  CHECK(r.examined == 0);
  CHECK(s.source_size("dest") == 0);
  CHECK(s.size("q", dlq::ListKind::dead) == 2);
  // Pushes at the tail do not disturb a window at the head.
  auto tail_push = [&](std::string_view, dlq::Decision& d) {
    s.push(rec("q", "late"));
    d.action = dlq::Action::replay;
    d.destination = "dest";
    d.payload = "x";
  };
  CHECK_FALSE(s.replay_step("q", cursor, 2, tail_push).conflict);
  CHECK(s.range("q", dlq::ListKind::dead, 0, 10) == std::vector<std::string>{"late", "late"});
}

TEST_CASE("a MemoryStorage can be moved with its contents", "[memory]") {
  dlq::MemoryStorage a;
  a.push(rec("q", "1"));
  dlq::MemoryStorage b = std::move(a);
  CHECK(b.size("q", dlq::ListKind::dead) == 1);
}

namespace {
void decide_replay_all(std::string_view raw, dlq::Decision& d) {
  d.action = dlq::Action::replay;
  d.destination = "dest";
  d.payload = raw;
}
}  // namespace

TEST_CASE("a plain function can be the decider", "[memory]") {
  dlq::MemoryStorage s;
  s.push(rec("q", "a"));
  dlq::MemoryStorage::replay_cursor cursor;
  CHECK(s.replay_step("q", cursor, 10, decide_replay_all).examined == 1);
  CHECK(s.source_range("dest") == std::vector<std::string>{"a"});
}

// The audit trail's retention (issue 27, defect 5): by age, with a hard cap whose drops of
// younger records are visible. AuditRetention's decisions are I/O-free; MemoryStorage, the
// key-value adapter and the Redis script all apply them.
TEST_CASE("AuditRetention decides what an append removes, without a store", "[memory][audit]") {
  using std::chrono::hours;
  using std::chrono::system_clock;
  dlq::AuditRetention r;
  CHECK(r.max_age == hours(24 * 90));
  CHECK(r.max_records == 1000000);
  const system_clock::time_point now{std::chrono::seconds(1796000000)};
  CHECK(r.expire_before(now) == now - hours(24 * 90));
  CHECK(r.expire_before(system_clock::time_point{hours(24)}) == system_clock::time_point{});
  r.max_age = std::chrono::seconds(0);
  CHECK(r.expire_before(now) == system_clock::time_point{});  // no age limit
  r.max_age = std::chrono::hours(24 * 365 * 1000);            // longer than the epoch is old
  CHECK(r.expire_before(now) == system_clock::time_point{});

  CHECK(r.cap_trigger() == 1010000);  // 1 % over the cap
  CHECK(r.excess(1010000) == 0);
  CHECK(r.excess(1010001) == 10001 - 1);  // down to the cap, at most 10 000 per append
  CHECK(r.excess(5000000) == dlq::AuditRetention::max_dropped_per_append);
  r.max_records = 10;
  CHECK(r.cap_trigger() == 11);  // at least one over
  CHECK(r.excess(11) == 0);
  CHECK(r.excess(12) == 2);
  r.max_records = 0;  // no cap
  CHECK(r.cap_trigger() == 0);
  CHECK(r.excess(std::size_t{1} << 40) == 0);
}

TEST_CASE("MemoryStorage keeps audit records by age; its cap's drops are counted and marked",
          "[memory][audit]") {
  using std::chrono::hours;
  auto now =
      std::make_shared<std::chrono::system_clock::time_point>(std::chrono::seconds(1796000000));
  dlq::Options options;
  options.clock = [now] { return *now; };
  std::vector<std::string> errors;
  options.log = [&](dlq::LogLevel level, std::string_view m) {
    if (level == dlq::LogLevel::error) errors.emplace_back(m);
  };

  SECTION("records older than max_age go without being reported as dropped") {
    dlq::AuditRetention keep;
    keep.max_age = hours(24);
    dlq::DeadLetterQueue<dlq::MemoryStorage> q(dlq::MemoryStorage(keep), options);
    std::vector<std::string> ids;
    for (int i = 0; i < 6; ++i)
      ids.push_back(q.send_to_dlq("orders", std::to_string(i), "e"));
    for (int i = 0; i < 5; ++i)
      CHECK(q.remove("orders", ids[static_cast<std::size_t>(i)]));
    *now += hours(25);
    CHECK(q.remove("orders", ids[5]));
    const auto trail = q.audit("orders");
    REQUIRE(trail.size() == 1);
    CHECK(trail[0].ids == std::vector<std::string>{ids[5]});
    CHECK(q.counters().audit_dropped == 0);
    CHECK(errors.empty());
  }

  SECTION("the cap removes younger records: counted, logged, and an audit_dropped record") {
    dlq::AuditRetention keep;
    keep.max_records = 10;
    dlq::DeadLetterQueue<dlq::MemoryStorage> q(dlq::MemoryStorage(keep), options);
    std::vector<std::string> ids;
    for (int i = 0; i < 40; ++i)
      ids.push_back(q.send_to_dlq("orders", std::to_string(i), "e"));
    for (const auto& id : ids)
      CHECK(q.remove("orders", id));
    const auto trail = q.audit("orders");
    CHECK(trail.size() <= 11);
    REQUIRE(trail.size() >= 2);
    CHECK(trail.back().operation == "audit_dropped");
    CHECK(trail.back().counts["dropped"] == 2);
    CHECK(trail[trail.size() - 2].ids == std::vector<std::string>{ids.back()});
    const auto c = q.counters();
    CHECK(c.audit_dropped > 0);
    CHECK(c.audit_errors == 0);
    std::uint64_t marked = 0;
    for (const auto& rec : trail)
      if (rec.operation == "audit_dropped") marked += rec.counts["dropped"].get<std::uint64_t>();
    CHECK(marked > 0);
    CHECK(marked <= c.audit_dropped);  // older marks were dropped in turn, and counted
    REQUIRE_FALSE(errors.empty());
    CHECK(errors.size() * 2 == c.audit_dropped);
    CHECK(errors[0].find("[dlq.audit] queue 'orders': 2 audit records younger than the "
                         "trail's max age were removed by its cap") == 0);
    CHECK(dlq::metrics::prometheus_text({}, c).find(
              "dlq_audit_dropped_total " + std::to_string(c.audit_dropped)) != std::string::npos);
  }
}

TEST_CASE("an audit record keeps at most audit_max_id_bytes of an id (round 10)",
          "[memory][audit]") {
  // Round 10 of issue 27. Entries written by other programs may carry ids of any length, and
  // every operation copied the ids it changed (up to audit_max_ids) into its record whole: a
  // discard of 100 such entries with 1 MiB ids (RPUSHed by another program) wrote one audit
  // record of 117 MB to Redis (MEMORY USAGE of the stream), kept 90 days after the entries
  // were gone; the trail's cap on records then bounds nothing. Ids are now cut like the
  // filter's texts (dlq/audit.hpp), here 4 entries with 1 MiB ids.
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(std::to_string(i) + std::string(std::size_t{1} << 20, 'I'));
    q.storage().push(rec("orders", R"({"original_payload":{"n":1},"queue":"orders",)"
                                   R"("error":"boom","attempt":1,"worker":"w",)"
                                   R"("dead_lettered_at":"2026-12-07T07:00:00+00:00","id":")" +
                                       ids.back() + "\"}"));
  }
  const auto largest_id = [&q] {
    std::size_t largest = 0;
    for (const auto& r : q.audit("orders")) {
      for (const auto& id : r.ids)
        largest = std::max(largest, id.size());
      for (const auto& id : r.filter.value("ids", nlohmann::ordered_json::array()))
        largest = std::max(largest, id.get<std::string>().size());
    }
    return largest;
  };
  CHECK(q.remove_ids("orders", {ids[0]}).removed.size() == 1);
  CHECK(largest_id() <= dlq::detail::audit_max_id_bytes + 3);  // + "…"
  CHECK(q.replay("orders", dlq::ReplayOptions::by_ids({ids[1]})).replayed == 1);
  CHECK(largest_id() <= dlq::detail::audit_max_id_bytes + 3);
  dlq::DiscardOptions d;
  d.error_contains = "boom";
  CHECK(q.discard("orders", d).discarded == 2);
  INFO("largest id kept in the trail: " << largest_id() << " bytes");
  CHECK(largest_id() <= dlq::detail::audit_max_id_bytes + 3);
  CHECK(q.audit("orders").size() == 3);
  // a cut id says so; a short one is kept as it is
  const auto trail = q.audit("orders");
  CHECK(trail[0].ids.at(0) == ids[0].substr(0, dlq::detail::audit_max_id_bytes) + "\xE2\x80\xA6");
  CHECK(dlq::detail::audit_id("0190c000-0000-7000-8000-000000000000") ==
        "0190c000-0000-7000-8000-000000000000");
  // never inside a UTF-8 sequence: 255 ASCII bytes, then a 2-byte sequence across byte 256
  CHECK(dlq::detail::audit_id(std::string(255, 'a') + "\xC3\xA9" + "tail") ==
        std::string(255, 'a') + "\xE2\x80\xA6");
}

TEST_CASE("range_bytes reads a prefix within a byte budget", "[memory]") {
  dlq::MemoryStorage s;
  dlq::test::check_range_bytes(s, "bytes");
}

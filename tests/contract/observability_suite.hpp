// The observability part of the storage contract suite (included by contract_suite.hpp, so
// every backend runs it): DeadLetterQueue::stats and DeadLetterQueue::errors. Depths exact,
// ages from the injectable clock, foreign and corrupt entries counted, times never guessed —
// also while other threads send, replay and remove.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlq/dlq.hpp"
#include "support/catch.hpp"

namespace contract {

// A clock the test moves by hand (thread-safe).
struct manual_clock {
  std::shared_ptr<std::atomic<std::int64_t>> micros =
      std::make_shared<std::atomic<std::int64_t>>(std::int64_t{1796000000} * 1000000);
  std::chrono::system_clock::time_point now() const {
    return std::chrono::system_clock::time_point(std::chrono::microseconds(micros->load()));
  }
  void advance(std::chrono::microseconds d) const { micros->fetch_add(d.count()); }
  dlq::Options options() const {
    dlq::Options o;
    auto m = micros;
    o.clock = [m] {
      return std::chrono::system_clock::time_point(std::chrono::microseconds(m->load()));
    };
    return o;
  }
};

inline std::size_t sum_counts(const std::vector<dlq::ErrorGroup>& groups) {
  std::size_t n = 0;
  for (const auto& g : groups)
    n += g.count;
  return n;
}

inline const dlq::ErrorGroup* group(const std::vector<dlq::ErrorGroup>& groups,
                                    const std::string& key, bool readable = true) {
  for (const auto& g : groups)
    if (g.key == key && g.readable == readable) return &g;
  return nullptr;
}

}  // namespace contract

TEMPLATE_TEST_CASE("stats give exact depths and the oldest entry's age by the queue's clock",
                   "[contract][stats]", DLQ_CONTRACT_FIXTURES) {
  using namespace std::chrono_literals;
  TestType fx;
  contract::manual_clock clock;
  contract::queue_of<TestType> q(fx.storage(), clock.options());
  const auto t0 = clock.now();
  for (int i = 0; i < 5; ++i) {
    q.send_to_dlq("orders", R"({"n":)" + std::to_string(i) + "}", contract::failure("e"));
    clock.advance(10s);
  }
  q.send_to_dlq("emails", "{}", contract::failure("e"));
  clock.advance(90s);  // now = t0 + 140 s

  const auto s = q.stats({"orders", "emails", "never-used"});
  REQUIRE(s.size() == 3);
  CHECK(s[0].queue == "orders");
  CHECK(s[0].dead.depth == 5);
  CHECK(s[0].corrupt.depth == 0);
  REQUIRE(s[0].dead.oldest);
  REQUIRE(s[0].dead.newest);
  CHECK(*s[0].dead.oldest == t0);
  CHECK(*s[0].dead.newest == t0 + 40s);
  CHECK_FALSE(s[0].dead.oldest_untimed);
  CHECK(s[0].read_at == t0 + 140s);
  REQUIRE(s[0].oldest_age());
  CHECK(*s[0].oldest_age() == 140s);
  CHECK(s[1].dead.depth == 1);
  CHECK(*s[1].dead.oldest == t0 + 50s);
  CHECK(*s[1].dead.newest == t0 + 50s);
  CHECK(*s[1].oldest_age() == 90s);
  CHECK(s[2].dead.depth == 0);
  CHECK_FALSE(s[2].dead.oldest);
  CHECK_FALSE(s[2].dead.oldest_untimed);  // empty is not "untimed"
  CHECK_FALSE(s[2].oldest_age());

  // The oldest leaves: the age follows the new head.
  q.replay("orders", dlq::ReplayOptions::first(2));
  const auto after = q.stats({"orders"});
  CHECK(after[0].dead.depth == 3);
  CHECK(*after[0].dead.oldest == t0 + 20s);
  CHECK(*after[0].oldest_age() == 120s);

  // Every queue with entries, sorted.
  const auto all = q.stats();
  REQUIRE(all.size() == 2);
  CHECK(all[0].queue == "emails");
  CHECK(all[1].queue == "orders");

  CHECK_THROWS_AS(q.stats({"orders", ""}), dlq::invalid_argument);
}

TEMPLATE_TEST_CASE("stats count foreign and corrupt entries and never guess their times",
                   "[contract][stats]", DLQ_CONTRACT_FIXTURES) {
  using namespace std::chrono_literals;
  TestType fx;
  contract::manual_clock clock;
  contract::queue_of<TestType> q(fx.storage(), clock.options());
  const auto t0 = clock.now();
  fx.push_raw("orders", "not json at all");
  q.send_to_dlq("orders", "{}", contract::failure("e"));
  // The Python seed's entry, with its time: read.
  fx.push_raw("orders",
              R"({"original_payload": {"n": 7}, "queue": "orders", "error": "seed", )"
              R"("attempt": 1, "worker": "py", "dead_lettered_at": "2026-11-30T00:00:00+00:00"})");
  // Another program's entry without a time: untimed.
  fx.push_raw("orders", R"({"original_payload": {"n": 8}, "queue": "orders", "error": "x"})");
  clock.advance(5s);

  auto s = q.stats({"orders"});
  CHECK(s[0].dead.depth == 4);
  CHECK_FALSE(s[0].dead.oldest);
  CHECK(s[0].dead.oldest_untimed);
  CHECK_FALSE(s[0].oldest_age());  // unknown, not 0 and not the next entry's age
  CHECK_FALSE(s[0].dead.newest);
  CHECK(s[0].dead.newest_untimed);

  // Replay sets the unreadable head aside: the corrupt list has one untimed item, and the
  // dead list's ends are now readable (the seed entry) or not (the last one) — as stored.
  fx.push_raw("orders", R"({"original_payload": 1, "dead_lettered_at": "yesterday"})");
  dlq::ReplayOptions only_first;
  only_first.limit = 1;  // replays the dlq entry; the junk in front of it is set aside
  CHECK(q.replay("orders", only_first).replayed == 1);
  s = q.stats({"orders"});
  CHECK(s[0].dead.depth == 3);
  CHECK(s[0].corrupt.depth == 1);
  CHECK(s[0].corrupt.oldest_untimed);
  CHECK(s[0].corrupt.newest_untimed);
  REQUIRE(s[0].dead.oldest);
  CHECK(*s[0].dead.oldest == *dlq::detail::iso_time::parse("2026-11-30T00:00:00+00:00"));
  CHECK(*s[0].oldest_age() == (t0 + 5s) - *s[0].dead.oldest);
  CHECK(s[0].dead.newest_untimed);  // "yesterday" does not parse
}

TEMPLATE_TEST_CASE("errors groups by error text and type with counts, times and an example id",
                   "[contract][errors]", DLQ_CONTRACT_FIXTURES) {
  using namespace std::chrono_literals;
  TestType fx;
  contract::manual_clock clock;
  contract::queue_of<TestType> q(fx.storage(), clock.options());
  const auto t0 = clock.now();
  std::string first_timeout;
  for (int i = 0; i < 10; ++i) {
    dlq::Failure f = contract::failure(i % 2 == 0 ? "gateway timeout" : "unknown sku", 1 + i);
    f.error_type = i % 2 == 0 ? "TimeoutError" : (i < 5 ? "ValueError" : "");
    f.worker = i < 3 ? "w1" : "w2";
    const std::string id = q.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}", f);
    if (i == 0) first_timeout = id;
    clock.advance(1s);
  }
  fx.push_raw("orders", "not json at all");
  fx.push_raw("orders", R"({"queue": "orders", "error": "gateway timeout"})");      // no payload
  fx.push_raw("orders", R"({"original_payload": 1, "error": "gateway timeout"})");  // no time
  // The same text written with an escape is the same group.
  fx.push_raw("orders", R"({"original_payload": 2, "error": "gateway timeo\u0075t", )"
                        R"("dead_lettered_at": "2026-11-30T00:00:00Z"})");

  dlq::ErrorsOptions o;
  o.by_worker = true;
  const dlq::ErrorsReport r = q.errors("orders", o);
  CHECK(r.queue == "orders");
  CHECK(r.examined == 14);
  CHECK(r.depth_at_start == 14);
  CHECK(r.unreadable == 2);
  CHECK(r.exact);
  CHECK(r.complete);
  CHECK_FALSE(r.changed);
  for (const auto* grouping : {&r.by_error, &r.by_error_type, &r.by_worker})
    CHECK(contract::sum_counts(*grouping) == 14);

  REQUIRE(r.by_error.size() == 4);
  const dlq::ErrorGroup& top = r.by_error[0];
  CHECK(top.key == "gateway timeout");
  CHECK(top.readable);
  CHECK(top.count == 7);  // 5 sent, the one without a time, the escaped one
  CHECK(top.untimed == 1);
  REQUIRE(top.oldest);
  CHECK(*top.oldest == *dlq::detail::iso_time::parse("2026-11-30T00:00:00Z"));
  CHECK(*top.newest == t0 + 8s);
  CHECK(top.max_attempt == 9);
  const auto* sku = contract::group(r.by_error, "unknown sku");
  REQUIRE(sku);
  CHECK(sku->count == 5);
  CHECK(*sku->oldest == t0 + 1s);
  CHECK(*sku->newest == t0 + 9s);
  CHECK(sku->max_attempt == 10);
  CHECK(q.get("orders", sku->example_id).has_value());
  CHECK(q.get("orders", sku->example_id)->error == "unknown sku");
  const auto* junk = contract::group(r.by_error, "not valid JSON", false);
  REQUIRE(junk);
  CHECK(junk->count == 1);
  CHECK(junk->untimed == 1);
  CHECK(q.get("orders", junk->example_id)->raw == "not json at all");
  const auto* no_payload = contract::group(r.by_error, "no \"original_payload\" field", false);
  REQUIRE(no_payload);
  CHECK(no_payload->count == 1);

  const auto* timeout_type = contract::group(r.by_error_type, "TimeoutError");
  REQUIRE(timeout_type);
  CHECK(timeout_type->count == 5);
  CHECK(timeout_type->example_id == first_timeout);
  CHECK(*timeout_type->oldest == t0);
  CHECK(contract::group(r.by_error_type, "ValueError")->count == 2);
  CHECK(contract::group(r.by_error_type, "")->count == 5);  // 3 sent without, 2 foreign
  CHECK(contract::group(r.by_worker, "w1")->count == 3);

  // An empty queue: an exact empty report.
  const auto none = q.errors("never-used");
  CHECK(none.examined == 0);
  CHECK(none.exact);
  CHECK(none.by_error.empty());
  CHECK_THROWS_AS(q.errors(""), dlq::invalid_argument);
}

TEMPLATE_TEST_CASE("errors reads in windows, reports progress, and a limit makes it a sample",
                   "[contract][errors]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  contract::queue_of<TestType> q(fx.storage());
  for (int i = 0; i < 10; ++i)
    q.send_to_dlq("orders", "{}", contract::failure(i < 7 ? "a" : "b"));

  dlq::ErrorsOptions o;
  o.window = 3;
  std::vector<std::size_t> progress;
  o.on_progress = [&](const dlq::ErrorsProgress& p) {
    progress.push_back(p.examined);
    CHECK(p.depth == 10);
  };
  auto r = q.errors("orders", o);
  CHECK(r.examined == 10);
  CHECK(r.exact);
  CHECK(progress == std::vector<std::size_t>{3, 6, 9, 10});

  o.max_examined = 7;
  r = q.errors("orders", o);
  CHECK(r.examined == 7);
  CHECK_FALSE(r.exact);
  CHECK_FALSE(r.complete);
  REQUIRE(r.by_error.size() == 1);
  CHECK(r.by_error[0].count == 7);

  o.max_examined = 10;  // the limit meets the end of the list: that is all of it
  r = q.errors("orders", o);
  CHECK(r.examined == 10);
  CHECK(r.exact);

  std::atomic<bool> cancel{true};
  o.cancel = &cancel;
  r = q.errors("orders", o);
  CHECK(r.cancelled);
  CHECK_FALSE(r.exact);
  CHECK(r.examined == 0);
}

TEMPLATE_TEST_CASE("errors counts each entry once when entries before its position go",
                   "[contract][errors]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  contract::queue_of<TestType> q(fx.storage());
  std::vector<std::string> ids;
  for (int i = 0; i < 30; ++i)
    ids.push_back(q.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}",
                                contract::failure("e" + std::to_string(i))));
  dlq::ErrorsOptions o;
  o.window = 10;
  int calls = 0;
  o.on_progress = [&](const dlq::ErrorsProgress&) {
    if (++calls == 1)  // after the first window: 5 entries already counted are removed
      for (int i = 0; i < 5; ++i)
        REQUIRE(q.remove("orders", ids[static_cast<std::size_t>(i)]));
  };
  const auto r = q.errors("orders", o);
  CHECK(r.changed);
  CHECK_FALSE(r.exact);     // a list that moved is reported as a sample…
  CHECK(r.examined == 30);  // …yet no entry was skipped or counted twice
  REQUIRE(r.by_error.size() == 30);
  for (const auto& g : r.by_error)
    CHECK(g.count == 1);
}

TEMPLATE_TEST_CASE("errors is exact while threads only add entries at the tail",
                   "[contract][errors][concurrency]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  contract::queue_of<TestType> q(fx.storage());
  for (int i = 0; i < 300; ++i)
    q.send_to_dlq("orders", "{}", contract::failure("seed"));
  std::vector<std::thread> senders;
  for (int t = 0; t < 2; ++t)
    senders.emplace_back([&] {
      for (int i = 0; i < 200; ++i)
        q.send_to_dlq("orders", "{}", contract::failure("new"));
    });
  dlq::ErrorsOptions o;
  o.window = 16;
  const auto r = q.errors("orders", o);
  for (auto& t : senders)
    t.join();
  CHECK_FALSE(r.changed);
  CHECK(r.exact);  // nothing before the scan position moved
  CHECK(r.examined >= 300);
  CHECK(r.examined <= 700);
  CHECK(contract::group(r.by_error, "seed")->count == 300);
  CHECK(contract::sum_counts(r.by_error) == r.examined);
}

TEMPLATE_TEST_CASE("stats never report a non-empty list without its ends while threads replay",
                   "[contract][stats][concurrency]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  contract::queue_of<TestType> q(fx.storage());
  for (int i = 0; i < 300; ++i)
    q.send_to_dlq("orders", "{}", contract::failure("seed"));
  std::thread sender([&] {
    for (int i = 0; i < 200; ++i)
      q.send_to_dlq("orders", "{}", contract::failure("new"));
  });
  std::thread replayer([&] {  // removes from the head, a few at a time, down to empty
    for (int i = 0; i < 200; ++i)
      q.replay("orders", dlq::ReplayOptions::first(4));
  });
  // Every read, at any instant: a non-empty list has readable ends (every entry here is
  // dlq-written, so an "untimed" end can only be a read that mixed two instants) — for a
  // storage that reads a list at one instant (a `stats` member: every shipped one). Without
  // it, stats fall back to size() and range() (dlq/stats.hpp), which under this churn may
  // report the ends untimed — documented, never guessed — so there only the order is checked.
  constexpr bool one_instant = dlq::detail::has_stats<typename TestType::storage_type>::value;
  for (int i = 0; i < 100; ++i) {
    const auto s = q.stats({"orders"});
    const auto& d = s[0].dead;
    CHECK(d.depth <= 500);
    if (d.depth > 0) {
      if constexpr (one_instant) {
        CHECK_FALSE(d.oldest_untimed);
        CHECK_FALSE(d.newest_untimed);
      }
      if (d.oldest && d.newest) CHECK(*d.oldest <= *d.newest);
    }
  }
  sender.join();
  replayer.join();
  const auto quiet = q.errors("orders");
  CHECK(quiet.exact);
  CHECK(quiet.examined == q.size("orders"));
  CHECK(q.stats({"orders"})[0].dead.depth == quiet.examined);
  CHECK(q.stats({"orders"})[0].dead.depth + fx.source("orders").size() == 500);
}

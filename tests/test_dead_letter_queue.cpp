// Front-end behaviour beyond the storage contract: options, reports, parked entries,
// batch sizing, and what happens when the storage fails half-way.
#include "dlq/dead_letter_queue.hpp"

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlq/source_queue.hpp"
#include "dlq/stats.hpp"
#include "dlq/storage/memory.hpp"
#include "support/catch.hpp"

namespace test_dead_letter_queue {

using Queue = dlq::DeadLetterQueue<dlq::MemoryStorage>;

namespace {
// A storage that fails on demand: wraps MemoryStorage, throws a storage error on the Nth
// replay step — before applying it, or after applying it (a lost reply: unknown outcome).
struct FlakyStorage {
  using replay_cursor = dlq::MemoryStorage::replay_cursor;
  dlq::MemoryStorage inner;
  int steps = 0;
  int fail_at_step = -1;
  bool fail_after_apply = false;

  void push(const dlq::Record& r) { inner.push(r); }
  void push_many(const std::vector<dlq::Record>& r) { inner.push_many(r); }
  std::size_t size(std::string_view q, dlq::ListKind k) { return inner.size(q, k); }
  std::vector<std::string> range(std::string_view q, dlq::ListKind k, std::size_t s,
                                 std::size_t n) {
    return inner.range(q, k, s, n);
  }
  bool remove(std::string_view q, dlq::ListKind k, std::string_view id, std::string_view raw) {
    return inner.remove(q, k, id, raw);
  }
  std::size_t purge(std::string_view q, dlq::ListKind k) { return inner.purge(q, k); }
  std::vector<std::string> queues() { return inner.queues(); }
  std::vector<std::size_t> sizes(const std::vector<std::string>& q) { return inner.sizes(q); }
  int conflict_at_step = -1;  // that step decides its window, then reports a conflict

  dlq::StepResult replay_step(std::string_view q, replay_cursor& c, std::size_t n, dlq::Decider d) {
    if (++steps == conflict_at_step) {
      for (const auto& raw : inner.range(q, dlq::ListKind::dead, c.offset, n)) {
        dlq::Decision decision;
        d(raw, decision);
      }
      return {0, true};
    }
    if (steps == fail_at_step && !fail_after_apply)
      throw dlq::timeout_error("[dlq.test] injected timeout");
    auto r = inner.replay_step(q, c, n, d);
    if (steps == fail_at_step) throw dlq::timeout_error("[dlq.test] injected lost reply", true);
    return r;
  }
};
}  // namespace

TEST_CASE("the storage contract is checked at compile time", "[frontend]") {
  STATIC_REQUIRE(dlq::is_storage_v<dlq::MemoryStorage>);
  STATIC_REQUIRE(dlq::is_storage_v<dlq::MemoryStorage&>);
  STATIC_REQUIRE(dlq::is_storage_v<FlakyStorage>);
  STATIC_REQUIRE_FALSE(dlq::is_storage_v<int>);
  STATIC_REQUIRE_FALSE(dlq::is_storage_v<std::string>);
#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
  STATIC_REQUIRE(dlq::storage<dlq::MemoryStorage>);
  STATIC_REQUIRE_FALSE(dlq::storage<int>);
#endif
}

TEST_CASE("the seed's signature and the default worker name", "[frontend]") {
  dlq::Options o;
  o.worker = "host-1:4242";
  Queue q(dlq::MemoryStorage{}, o);
  q.send_to_dlq("orders", "{}", "boom");
  q.send_to_dlq("orders", "{}", "boom", 5, "explicit");
  const auto page = q.peek("orders");
  CHECK(page[0].worker == "host-1:4242");
  CHECK(page[0].attempt == 1);
  CHECK(page[1].worker == "explicit");
  CHECK(page[1].attempt == 5);
}

TEST_CASE("several front ends can share one storage", "[frontend]") {
  dlq::MemoryStorage shared;
  dlq::DeadLetterQueue<dlq::MemoryStorage&> worker(shared);
  dlq::DeadLetterQueue<dlq::MemoryStorage&> operator_view(shared);
  worker.send_to_dlq("orders", "{}", "e");
  CHECK(operator_view.size("orders") == 1);
  CHECK(operator_view.replay_all("orders").replayed == 1);
  CHECK(shared.source_pop("orders") == std::optional<std::string>("{}"));
}

TEST_CASE("replay can record the ids it moved", "[frontend]") {
  Queue q;
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i)
    ids.push_back(q.send_to_dlq("orders", "{}", "e"));
  dlq::ReplayOptions o;
  o.record_ids = true;
  const auto r = q.replay("orders", o);
  CHECK(r.replayed_ids == ids);
  CHECK(q.replay("orders", o).replayed_ids.empty());
}

TEST_CASE("replay_one sets aside corrupt entries in front of the oldest readable one",
          "[frontend]") {
  Queue q;
  q.storage().push({"orders", {}, {}, "garbage"});
  const auto id = q.send_to_dlq("orders", R"({"n":1})", "e");
  const auto e = q.replay_one("orders");
  REQUIRE(e.has_value());
  CHECK(e->id == id);
  CHECK(q.corrupt_size("orders") == 1);
  CHECK(q.size("orders") == 0);
}

TEST_CASE("a corrupt entry can be left in place and only reported", "[frontend]") {
  Queue q;
  q.storage().push({"orders", {}, {}, "garbage"});
  q.send_to_dlq("orders", "{}", "e");
  dlq::ReplayOptions o;
  o.set_aside_corrupt = false;
  const auto r = q.replay("orders", o);
  CHECK(r.replayed == 1);
  CHECK(r.set_aside == 0);
  REQUIRE(r.skipped.size() == 1);
  CHECK(r.skipped[0].reason == dlq::SkipReason::corrupt);
  CHECK(r.skipped[0].detail == "not valid JSON");
  CHECK(q.size("orders") == 1);
}

TEST_CASE("parked entries are skipped by replay-all and replayed when asked by id", "[frontend]") {
  Queue q;
  const std::string parked =
      R"({"original_payload":{"p":1},"queue":"orders","error":"poison","attempt":9,"worker":"w",)"
      R"("dead_lettered_at":"2026-11-30T03:32:19.000000+00:00","id":"p-1","dead_letter_count":6,"parked":true})";
  q.storage().push({"orders", "p-1", {}, parked});
  q.send_to_dlq("orders", R"({"p":2})", "e");
  auto r = q.replay_all("orders");
  CHECK(r.replayed == 1);
  REQUIRE(r.skipped.size() == 1);
  CHECK(r.skipped[0].reason == dlq::SkipReason::parked);
  CHECK(r.skipped[0].id == "p-1");
  const auto e = q.peek("orders")[0];
  CHECK(e.parked);
  CHECK(e.dead_letter_count == 6);
  r = q.replay_ids("orders", {"p-1"});
  CHECK(r.replayed == 1);
  CHECK(q.storage().source_range("orders").back() == R"({"p":1})");
}

TEST_CASE("batches shrink for large entries so that one step stays near the byte target",
          "[frontend]") {
  dlq::Options o;
  o.replay_batch_bytes = 20000;
  Queue q(dlq::MemoryStorage{}, o);
  const std::string big = "\"" + std::string(1000, 'x') + "\"";
  for (int i = 0; i < 200; ++i)
    q.send_to_dlq("orders", big, "e");
  const auto r = q.replay_all("orders");
  CHECK(r.replayed == 200);
  CHECK(r.batches >= 200 * 1100 / 20000);
  CHECK(r.batches <= 20);
}

TEST_CASE("a storage failure during replay loses nothing; what moved stays moved", "[frontend]") {
  dlq::Options o;
  o.replay_batch_items = 10;
  dlq::DeadLetterQueue<FlakyStorage> q(FlakyStorage{}, o);
  for (int i = 0; i < 100; ++i)
    q.send_to_dlq("orders", std::to_string(i), "e");

  SECTION("failure before a batch is applied") {
    q.storage().fail_at_step = 3;
    CHECK_THROWS_AS(q.replay_all("orders"), dlq::timeout_error);
  }
  SECTION("failure after a batch was applied (the reply was lost)") {
    q.storage().fail_at_step = 3;
    q.storage().fail_after_apply = true;
    try {
      q.replay_all("orders");
      FAIL("expected a timeout");
    } catch (const dlq::storage_error& e) {
      CHECK(e.outcome_unknown());
    }
  }
  const auto moved = q.storage().inner.source_range("orders");
  const auto left = q.peek("orders", 0, 1000);
  CHECK(moved.size() + left.size() == 100);
  // Oldest first: the moved ones are a prefix, the rest still waits, nothing twice.
  for (std::size_t i = 0; i < moved.size(); ++i)
    CHECK(moved[i] == std::to_string(i));
  for (std::size_t i = 0; i < left.size(); ++i)
    CHECK(left[i].payload == std::to_string(moved.size() + i));
  // A second run finishes the job.
  q.storage().fail_at_step = -1;
  CHECK(q.replay_all("orders").replayed == left.size());
  CHECK(q.storage().inner.source_size("orders") == 100);
}

TEST_CASE("two replayers of the same queue never move an entry twice", "[frontend][threads]") {
  dlq::Options o;
  o.replay_batch_items = 16;
  dlq::MemoryStorage shared;
  dlq::DeadLetterQueue<dlq::MemoryStorage&> a(shared, o);
  dlq::DeadLetterQueue<dlq::MemoryStorage&> b(shared, o);
  for (int i = 0; i < 20000; ++i)
    a.send_to_dlq("orders", std::to_string(i), "e");
  std::size_t ra = 0, rb = 0;
  std::thread ta([&] { ra = a.replay_all("orders").replayed; });
  std::thread tb([&] { rb = b.replay_all("orders").replayed; });
  ta.join();
  tb.join();
  CHECK(ra + rb == 20000);
  const auto src = shared.source_range("orders");
  CHECK(std::set<std::string>(src.begin(), src.end()).size() == 20000);
  CHECK(shared.size("orders", dlq::ListKind::dead) == 0);
}

TEST_CASE("a test clock stamps entries and drives age filters", "[frontend]") {
  auto now = std::chrono::system_clock::time_point(std::chrono::hours(24 * 365 * 56));
  dlq::Options o;
  o.clock = [&now] { return now; };
  Queue q(dlq::MemoryStorage{}, o);
  q.send_to_dlq("orders", "1", "e");
  now += std::chrono::hours(2);
  q.send_to_dlq("orders", "2", "e");
  CHECK(*q.peek("orders")[0].dead_lettered_time == now - std::chrono::hours(2));
  dlq::ReplayOptions r;
  r.older_than = std::chrono::hours(1);
  CHECK(q.replay("orders", r).replayed == 1);
  CHECK(q.peek("orders")[0].payload == "2");
}

TEST_CASE("storage errors are counted by type", "[frontend][counters]") {
  dlq::DeadLetterQueue<FlakyStorage> q;
  q.send_to_dlq("orders", "{}", "e");
  q.storage().fail_at_step = 1;
  CHECK_THROWS_AS(q.replay_all("orders"), dlq::timeout_error);
  const auto c = q.counters();
  CHECK(c.timeout_errors == 1);
  CHECK(c.sent == 1);
  CHECK(c.replayed == 0);
}

TEST_CASE("an eviction that fails never makes the send fail", "[frontend][retention]") {
  dlq::Options o;
  o.retention.max_length = 2;
  std::vector<std::string> logged;
  o.log = [&](dlq::LogLevel level, std::string_view m) {
    if (level == dlq::LogLevel::error) logged.emplace_back(m);
  };
  dlq::DeadLetterQueue<FlakyStorage> q(FlakyStorage{}, o);
  q.send_to_dlq("orders", "1", "e");
  q.send_to_dlq("orders", "2", "e");
  q.storage().fail_at_step = 1;  // the eviction's first step times out
  CHECK_NOTHROW(q.send_to_dlq("orders", "3", "e"));
  CHECK(q.size("orders") == 3);  // stored; over the limit until the next trim
  REQUIRE(logged.size() == 1);
  CHECK(logged[0].find("trim() will retry") != std::string::npos);
  CHECK(q.trim("orders").evicted_for_length == 1);
  CHECK(q.peek("orders")[0].payload == "2");
}

TEST_CASE("an explicit trim throws the storage error it meets", "[frontend][retention]") {
  dlq::Options o;
  o.retention.max_length = 1;
  o.retention.overflow = dlq::Overflow::evict_oldest;
  FlakyStorage storage;
  dlq::DeadLetterQueue<FlakyStorage&> unlimited(storage);
  unlimited.send_to_dlq("orders", "1", "e");
  unlimited.send_to_dlq("orders", "2", "e");
  dlq::DeadLetterQueue<FlakyStorage&> q(storage, o);
  storage.fail_at_step = 1;  // the eviction's first step times out
  // A caller who asked for the trim hears why nothing was evicted (the send path, above,
  // only logs it); the retention timer counts and logs what trim() throws.
  CHECK_THROWS_AS(q.trim("orders"), dlq::timeout_error);
  CHECK(q.size("orders") == 2);
  CHECK(q.trim("orders").evicted_for_length == 1);
}

TEST_CASE("queue names are at most 1024 bytes", "[frontend]") {
  Queue q;
  const std::string longest(1024, 'q');
  const std::string too_long(1025, 'q');
  CHECK(dlq::queue_name_problem(longest) == nullptr);
  CHECK(dlq::queue_name_problem(too_long) != nullptr);
  q.send_to_dlq(longest, "{}", "e");
  CHECK(q.size(longest) == 1);
  CHECK(q.queues() == std::vector<std::string>{longest});
  try {
    q.send_to_dlq(too_long, "{}", "e");
    FAIL_CHECK("a 1025-byte queue name was accepted");
  } catch (const dlq::invalid_argument& e) {
    CHECK(std::string(e.what()).find("longer than 1024 bytes") != std::string::npos);
  }
  CHECK_THROWS_AS(q.replay_all(too_long), dlq::invalid_argument);
  dlq::ReplayOptions to;
  to.to_queue = too_long;
  CHECK_THROWS_AS(q.replay(longest, to), dlq::invalid_argument);
  CHECK(q.size(longest) == 1);
  CHECK(q.storage().queues() == std::vector<std::string>{longest});
}

// The rule of dlq/queue_names.hpp, decided without I/O: every key puts the queue name in
// braces, so a brace in a name would let it reach another queue's keys.
TEST_CASE("queue names hold no brace; the message says which, where and what to do",
          "[frontend][names]") {
  CHECK(dlq::queue_name_problem("orders.eu-1 (retry)") == nullptr);
  CHECK(std::string(dlq::queue_name_problem("a{b")) == "the queue name contains '{'");
  CHECK(std::string(dlq::queue_name_problem("a}b{")) == "the queue name contains '}'");
  try {
    dlq::detail::check_queue_name("source", "take", "orders}:inflight:x");
    FAIL_CHECK("a queue name with '}' was accepted");
  } catch (const dlq::invalid_argument& e) {
    const std::string m = e.what();
    CHECK(m.find("[dlq.source] take: the queue name contains '}'; at byte 6") == 0);
    CHECK(m.find("docs/names.md") != std::string::npos);
  }
  // Consumer names may hold braces (they follow the queue's closing '}'), never be empty.
  CHECK_NOTHROW(dlq::detail::check_source_names("source", "orders", "w{1}", "take"));
  CHECK_THROWS_AS(dlq::detail::check_source_names("source", "orders", "", "take"),
                  dlq::invalid_argument);
  CHECK_THROWS_AS(dlq::detail::check_source_names("source", "{orders}", "w1", "take"),
                  dlq::invalid_argument);
  // The dead-letter queue refuses them on every call; a listing skips a foreign one.
  Queue q;
  CHECK_THROWS_AS(q.send_to_dlq("a{b", "{}", "e"), dlq::invalid_argument);
  q.send_to_dlq("orders", "{}", "e");
  CHECK_THROWS_AS(q.size("orders}"), dlq::invalid_argument);
  dlq::ReplayOptions to;
  to.to_queue = "orders}:inflight:x";
  CHECK_THROWS_AS(q.replay("orders", to), dlq::invalid_argument);
  CHECK(q.size("orders") == 1);
  const auto found = dlq::split_queue_names({"orders", "a}b", "{x}"});
  CHECK(found.names == std::vector<std::string>{"orders"});
  CHECK(found.skipped == std::vector<std::string>{"a}b", "{x}"});
}

TEST_CASE("the poison guard counts in-process where the storage keeps no counts",
          "[frontend][poison]") {
  STATIC_REQUIRE_FALSE(dlq::detail::has_bump_count<FlakyStorage>::value);
  dlq::Options o;
  o.poison_guard.park_after = 1;
  dlq::DeadLetterQueue<FlakyStorage> q(FlakyStorage{}, o);
  q.send_to_dlq("orders", "same", "e");
  q.send_to_dlq("orders", "same", "e");
  q.send_to_dlq("orders", "different", "e");
  const auto page = q.peek("orders");
  CHECK_FALSE(page[0].parked);
  CHECK(page[1].parked);
  CHECK(page[1].dead_letter_count == 2);
  CHECK(page[2].dead_letter_count == 1);
}

TEST_CASE("the poison counts are bounded", "[frontend][poison]") {
  dlq::detail::counter_map counts(1000);
  for (int i = 0; i < 5000; ++i)
    counts.bump(std::to_string(i), std::chrono::hours(1));
  CHECK(counts.size() <= 1000);
  CHECK(counts.bump("4999", std::chrono::hours(1)) == 2);  // recent ones survive
  const auto now = std::chrono::steady_clock::now();
  CHECK(counts.bump("x", std::chrono::seconds(1), now) == 1);
  CHECK(counts.bump("x", std::chrono::seconds(1), now + std::chrono::seconds(2)) == 1);  // expired
}

TEST_CASE("an eviction sweep redone after a conflict still evicts down to max_length",
          "[frontend][retention]") {
  FlakyStorage storage;
  dlq::DeadLetterQueue<dlq::MemoryStorage&> filler(storage.inner);
  for (int i = 0; i < 150; ++i)
    filler.send_to_dlq("orders", std::to_string(i), "e");
  dlq::Options options;
  options.retention.max_length = 100;
  dlq::DeadLetterQueue<FlakyStorage&> q(storage, options);
  storage.conflict_at_step = storage.steps + 1;  // the sweep's first batch is redone
  const dlq::TrimReport report = q.trim("orders");
  CHECK(report.evicted_for_length == 50);
  CHECK(q.size("orders") == 100);
  CHECK(q.peek("orders", 0, 1)[0].payload == "50");
  CHECK(q.counters().evicted == 50);
  CHECK(q.counters().conflicts == 1);
}

TEST_CASE("send_batch with one bad job stores nothing and counts no failure", "[frontend]") {
  dlq::Options o;
  o.payloads = dlq::Payloads::json_only;
  o.retention_for["small"].max_length = 1;
  o.retention_for["small"].overflow = dlq::Overflow::reject;
  o.poison_guard.park_after = 1;
  Queue q(dlq::MemoryStorage{}, o);
  auto job = [](std::string queue, std::string payload, std::string job_id = "j1") {
    dlq::FailedJob j;
    j.queue = std::move(queue);
    j.payload = std::move(payload);
    j.failure.error = "e";
    j.failure.attempt = 3;
    j.failure.job_id = std::move(job_id);
    return j;
  };
  // An empty queue name, a payload json_only refuses, a queue that would overflow: each
  // time the good jobs before and after the bad one are not stored either.
  CHECK_THROWS_AS(q.send_batch({job("orders", "{}"), job("", "{}", "j2")}), dlq::invalid_argument);
  CHECK_THROWS_AS(q.send_batch({job("orders", "{}"), job("orders", "\xff binary", "j2"),
                                job("orders", "[]", "j3")}),
                  dlq::invalid_argument);
  CHECK_THROWS_AS(
      q.send_batch({job("orders", "{}"), job("small", "1", "j2"), job("small", "2", "j3")}),
      dlq::queue_full_error);
  CHECK(q.size("orders") == 0);
  CHECK(q.size("small") == 0);
  // None of the refused batches counted toward the poison guard: j1 failing once now is
  // its first dead-lettering, not a repeat to park.
  q.send_batch({job("orders", "{}"), job("small", "1", "j2")});
  const auto entries = q.peek("orders");
  REQUIRE(entries.size() == 1);
  CHECK_FALSE(entries[0].parked);
  CHECK(entries[0].dead_letter_count <= 1);
  CHECK(q.size("small") == 1);
}

TEST_CASE("a send refused by a full queue does not count toward the poison guard", "[frontend]") {
  dlq::Options o;
  o.retention.max_length = 1;
  o.retention.overflow = dlq::Overflow::reject;
  o.poison_guard.park_after = 1;
  Queue q(dlq::MemoryStorage{}, o);
  dlq::Failure f;
  f.error = "e";
  f.attempt = 3;
  f.job_id = "j2";
  q.send_to_dlq("orders", "1", "e", 3, "w");  // fills the queue
  for (int i = 0; i < 3; ++i)  // the worker retries while the queue is full: never stored
    CHECK_THROWS_AS(q.send_to_dlq("orders", "2", f), dlq::queue_full_error);
  CHECK(q.purge("orders") == 1);
  q.send_to_dlq("orders", "2", f);  // the first time j2 is actually dead-lettered
  const auto entries = q.peek("orders");
  REQUIRE(entries.size() == 1);
  CHECK_FALSE(entries[0].parked);
  CHECK(entries[0].dead_letter_count <= 1);
}

TEST_CASE("an eviction that fails after the push still reports the entry as stored", "[frontend]") {
  // Evicting is housekeeping after the entry was stored: its failure must not make the
  // worker think the send failed (it would dead-letter the job again: a duplicate).
  dlq::Options o;
  o.retention.max_length = 1;
  dlq::DeadLetterQueue<FlakyStorage> q(FlakyStorage{}, o);
  q.send_to_dlq("orders", "1", "e");
  q.storage().fail_at_step = q.storage().steps + 1;  // the eviction's step times out
  std::string id;
  CHECK_NOTHROW(id = q.send_to_dlq("orders", "2", "e"));
  CHECK_FALSE(id.empty());
  CHECK(q.size("orders") == 2);  // over the bound until the next send or trim()
  q.send_to_dlq("orders", "3", "e");
  const auto left = q.peek("orders");
  REQUIRE(left.size() == 1);
  CHECK(left[0].payload == "3");
}

TEST_CASE("a context holding a discarded value anywhere is refused before anything is stored",
          "[frontend]") {
  // nlohmann writes a discarded value as `<discarded>`, which no JSON reader reads: stored, the
  // entry would be unreadable. Found by the review of the context writer (2026-12-02).
  Queue q;
  const auto bad = nlohmann::json::parse("{bad", nullptr, false);
  REQUIRE(bad.is_discarded());
  for (int where = 0; where < 3; ++where) {
    dlq::Failure f;
    f.error = "boom";
    f.context = nlohmann::json::object();
    if (where == 0) f.context["a"] = bad;
    if (where == 1) f.context["a"] = nlohmann::json::array({1, bad});
    if (where == 2) f.context["a"]["b"]["c"] = bad;
    CHECK_THROWS_AS(q.send_to_dlq("orders", "{}", f), dlq::invalid_argument);
    CHECK_THROWS_WITH(q.send_to_dlq("orders", "{}", f),
                      Catch::Contains("discarded") && Catch::Contains("context"));
    CHECK_THROWS_AS(q.send_batch({dlq::FailedJob{"orders", "{}", f}}), dlq::invalid_argument);
  }
  CHECK(q.size("orders") == 0);
}

TEST_CASE("errors' read-ahead runs the reader on another thread and hands over what it threw",
          "[dlq][errors]") {
  const std::vector<std::string> items(5, "not json");
  const auto main_thread = std::this_thread::get_id();
  std::atomic<int> calls{0};
  std::atomic<bool> off_thread{false};
  // Windows of 2: the second read (items 1..3, anchored at item 1) runs ahead on a helper
  // thread; with `fail` it throws there, and the scan throws that.
  const auto scan = [&](bool fail) {
    calls = 0;
    const auto read = [&](std::size_t from, std::size_t count) {
      if (std::this_thread::get_id() != main_thread) off_thread = true;
      if (fail && calls++ == 1) throw dlq::storage_error("read-ahead failed");
      std::vector<std::string> out;
      for (std::size_t i = from; i < items.size() && i < from + count; ++i)
        out.push_back(items[i]);
      return out;
    };
    dlq::ErrorsOptions o;
    o.window = 2;
    // As the front end calls it: through range_reader, the one instantiation compiled mode
    // ships (a lambda's own type has no definition in a compiled-mode unit).
    return dlq::detail::summarize_errors("orders", o, items.size(),
                                         dlq::detail::range_reader(read));
  };
  const dlq::ErrorsReport r = scan(false);
  CHECK(r.examined == 5);
  CHECK(r.complete);
  CHECK(r.unreadable == 5);
  CHECK(off_thread);
  CHECK_THROWS_WITH(scan(true), "read-ahead failed");
}

}  // namespace test_dead_letter_queue

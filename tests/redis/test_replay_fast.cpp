// The fast path of an unfiltered replay on Redis (RedisListStorage::replay_fast, issue 16):
// which items the script proves and moves, which it leaves to the compare-and-move step, and
// that a queue mixing dlq entries with Python-written, corrupt, parked, base64 and crafted
// items replays exactly as the compare-and-move path alone replays it (same report, same
// order, same events and audit ids) — compared against a replay with an always-true filter,
// which never takes the fast path.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <iterator>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/redis/list_storage.hpp"
#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"
#include "support/redis_process.hpp"

namespace test_replay_fast {

using namespace dlq;
using dlq::test::new_id;
using dlq::test::RawClient;

namespace {

// An envelope as dlq writes it (dlq/entry.hpp), optionally parked.
std::string dlq_envelope(std::string_view payload, bool parked = false,
                         const std::string& id = new_id()) {
  Failure f;
  f.error = "payment timeout";
  f.attempt = 3;
  detail::envelope_input in;
  in.queue = "orders";
  in.payload = payload;
  in.failure = &f;
  in.worker = "worker-7";
  in.id = id;
  in.time = std::chrono::system_clock::now();
  in.parked = parked;
  std::string out;
  detail::write_envelope(out, in);
  return out;
}

// An entry as the Python service writes it (json.dumps: spaces, no id, no length field).
std::string python_envelope(int i) {
  return R"({"original_payload": {"job": )" + std::to_string(i) +
         R"(, "src": "py"}, "queue": "orders", "error": "boom", "attempt": 3, )"
         R"("worker": "py-1", "dead_lettered_at": "2026-11-30T03:32:19.123456+00:00"})";
}

// `item` (a dlq envelope with some bytes changed) with its final envelope_bytes value set to
// its new length, as dlq's writer computes it: the items below differ from what dlq writes
// in their payload_bytes text only, so that what refuses them is that check, not the end.
std::string with_envelope_bytes(const std::string& item) {
  const std::size_t at = item.rfind(R"(,"envelope_bytes":)");
  REQUIRE(at != std::string::npos);
  const std::string body = item.substr(0, at) + R"(,"envelope_bytes":)";
  std::size_t digits = 1;
  while (std::to_string(body.size() + 1 + digits).size() != digits)
    ++digits;
  return body + std::to_string(body.size() + 1 + digits) + "}";
}

// `env` with its payload_bytes value replaced by `n` (and envelope_bytes kept right).
std::string with_length(const std::string& env, std::size_t n) {
  const std::string head = R"({"payload_bytes":)";
  const std::size_t end = env.find(',', head.size());
  return with_envelope_bytes(head + std::to_string(n) + env.substr(end));
}
std::size_t length_of(const std::string& env) {
  const std::string head = R"({"payload_bytes":)";
  return std::stoul(env.substr(head.size(), env.find(',', head.size()) - head.size()));
}

// Items whose length field is wrong: one byte short, one byte long, and — the hardest — a
// payload that carries `,"id":"<uuid>"` inside it with the length field pointing right
// before it, so that the bytes after the claimed span look like the id field.
std::vector<std::string> wrong_lengths() {
  std::vector<std::string> out;
  const std::string plain = dlq_envelope(R"({"job":"short","pad":"xxxxxxxx"})");
  out.push_back(with_length(plain, length_of(plain) - 1));
  out.push_back(with_length(plain, length_of(plain) + 1));
  const std::string inner = R"({"a":1,"id":")" + new_id() + R"(","b":2})";
  const std::string tricky = dlq_envelope(inner);
  out.push_back(with_length(tricky, std::string(R"({"a":1)").size()));
  // Too long: up to an id-shaped member inside the context, after dead_lettered_at.
  Failure f;
  f.error = "e";
  f.context = nlohmann::json::parse(R"({"x":1,"id":")" + new_id() + R"("})");
  detail::envelope_input in;
  in.queue = "orders";
  in.payload = R"({"job":"ctx"})";
  in.failure = &f;
  in.worker = "w";
  const std::string id = new_id();
  in.id = id;
  in.time = std::chrono::system_clock::now();
  std::string ctx;
  detail::write_envelope(ctx, in);
  const std::size_t value = ctx.find(R"(,"original_payload":)") + 20;
  const std::size_t fake = ctx.find(R"(,"id":")", ctx.find("\"context\""));
  out.push_back(with_length(ctx, fake - value));
  return out;
}

// The mixed queue: dlq entries, every 10th from the Python service, corrupt items, a base64
// and a whitespace payload, the wrong-length items, and a parked entry at `parked_at`.
std::vector<std::string> mixed_items(int n, int parked_at, int python_every = 10) {
  std::vector<std::string> items;
  const auto wrong = wrong_lengths();
  for (int i = 0; i < n; ++i) {
    if (i == parked_at) {
      items.push_back(dlq_envelope(R"({"job":"parked"})", true));
    } else if (i % python_every == python_every - 1) {
      items.push_back(python_envelope(i));
    } else if (i == 57) {
      items.push_back("not json {");
    } else if (i == 58) {  // the frame's start, cut off
      items.push_back(R"({"payload_bytes":5,"original_payload":)");
    } else if (i == 71) {
      items.push_back(dlq_envelope(std::string("\x01\x02\xff", 3)));
    } else if (i == 72) {
      items.push_back(dlq_envelope(" {\"spaced\":true}\n"));
    } else if (i >= 101 && i < 101 + static_cast<int>(wrong.size())) {
      items.push_back(wrong[static_cast<std::size_t>(i - 101)]);
    } else {
      items.push_back(dlq_envelope(R"({"job":)" + std::to_string(i) + R"(,"pad":"xxxxxxxxxx"})"));
    }
  }
  return items;
}

// One replay of `items` in a fresh layout: what it reported, emitted and left where.
struct Outcome {
  ReplayReport report;
  std::vector<std::pair<EventKind, std::string>> events;
  std::vector<std::string> source, dead, corrupt;
  std::vector<std::string> audit_ids;
  std::size_t audit_omitted = 0;
  Counters counters;
};

Outcome replay(const std::vector<std::string>& items, bool slow, bool observe,
               std::size_t limit = 0) {
  const std::string url = test::shared_redis_url();
  RedisListStorage storage(url, test::unique_layout());
  RawClient raw(url);
  raw.rpush(storage.key("orders", ListKind::dead), items);
  Outcome out;
  Options options;
  if (observe) {
    options.on_event = [&out](const Event& e) {
      if (e.kind == EventKind::replayed || e.kind == EventKind::corrupt)
        out.events.emplace_back(e.kind, std::string(e.id));
    };
  }
  DeadLetterQueue<RedisListStorage&> q(storage, options);
  ReplayOptions o;
  o.record_ids = observe;
  o.limit = limit;
  if (slow) o.filter = [](const Entry&) { return true; };  // never the fast path
  out.report = q.replay("orders", o);
  out.source = raw.list(storage.source_key("orders"));
  out.dead = raw.list(storage.key("orders", ListKind::dead));
  out.corrupt = raw.list(storage.key("orders", ListKind::corrupt));
  const auto records = q.audit("orders");
  if (out.report.replayed + out.report.set_aside == 0) {  // changed nothing: no record
    REQUIRE(records.empty());
  } else {
    REQUIRE(records.size() == 1);
    out.audit_ids = records.front().ids;
    out.audit_omitted = records.front().ids_omitted;
  }
  out.counters = q.counters();
  return out;
}

void same(const Outcome& fast, const Outcome& slow) {
  CHECK(fast.report.examined == slow.report.examined);
  CHECK(fast.report.replayed == slow.report.replayed);
  CHECK(fast.report.set_aside == slow.report.set_aside);
  CHECK(fast.report.replayed_ids == slow.report.replayed_ids);
  REQUIRE(fast.report.skipped.size() == slow.report.skipped.size());
  for (std::size_t i = 0; i < fast.report.skipped.size(); ++i) {
    CHECK(fast.report.skipped[i].id == slow.report.skipped[i].id);
    CHECK(fast.report.skipped[i].reason == slow.report.skipped[i].reason);
    CHECK(fast.report.skipped[i].detail == slow.report.skipped[i].detail);
  }
  CHECK(fast.events == slow.events);
  CHECK(fast.source == slow.source);
  CHECK(fast.dead == slow.dead);
  CHECK(fast.corrupt == slow.corrupt);
  CHECK(fast.audit_ids == slow.audit_ids);
  CHECK(fast.audit_omitted == slow.audit_omitted);
  CHECK(fast.counters.replayed == slow.counters.replayed);
  CHECK(fast.counters.corrupt == slow.counters.corrupt);
  CHECK(fast.counters.parked == slow.counters.parked);
  CHECK(fast.counters.audited == slow.counters.audited);
  CHECK(fast.counters.conflicts == slow.counters.conflicts);
}

}  // namespace

TEST_CASE("the fast step moves the dlq entries at the head and stops at the first it cannot prove",
          "[redis][replay][fast]") {
  const std::string url = test::shared_redis_url();
  RedisListStorage storage(url, test::unique_layout());
  RawClient raw(url);
  const std::string dead = storage.key("orders", ListKind::dead);
  const std::string a = new_id(), b = new_id();
  raw.rpush(dead, {dlq_envelope(R"({"n":1})", false, a), dlq_envelope("[2,3]", false, b),
                   python_envelope(3), "garbage", dlq_envelope("4")});
  RedisListStorage::replay_cursor cursor;
  FastStep f = storage.replay_fast("orders", cursor, 100, "orders", true);
  CHECK_FALSE(f.declined);
  CHECK(f.moved == 2);
  CHECK(f.unprovable == 2);  // the Python entry and the garbage, up to the next dlq entry
  CHECK(f.ids == std::vector<std::string>{a, b});
  CHECK(raw.list(storage.source_key("orders")) == std::vector<std::string>{R"({"n":1})", "[2,3]"});
  CHECK(raw.integer({"LLEN", dead}) == 3);

  // Without ids asked for: the count only.
  raw.cmd({"DEL", dead});
  raw.rpush(dead, {dlq_envelope("5"), dlq_envelope("6"), dlq_envelope("7")});
  f = storage.replay_fast("orders", cursor, 2, "orders", false);
  CHECK(f.moved == 2);
  CHECK(f.unprovable == 0);  // stopped at the item limit
  CHECK(f.ids.empty());
  f = storage.replay_fast("orders", cursor, 100, "orders", false);
  CHECK(f.moved == 1);
  f = storage.replay_fast("orders", cursor, 100, "orders", false);
  CHECK(f.moved == 0);
  CHECK(f.unprovable == 0);  // the list is empty
  CHECK(raw.list(storage.source_key("orders")).size() == 5);
}

TEST_CASE("the fast step honours the byte budget and takes at least one entry",
          "[redis][replay][fast]") {
  const std::string url = test::shared_redis_url();
  RedisListOptions layout = test::unique_layout();
  layout.max_batch_bytes = 10000;
  RedisListStorage storage(url, layout);
  RawClient raw(url);
  const std::string dead = storage.key("orders", ListKind::dead);
  const std::string big = "\"" + std::string(3000, 'x') + "\"";
  raw.rpush(dead, {dlq_envelope(big), dlq_envelope(big), dlq_envelope(big), dlq_envelope(big)});
  RedisListStorage::replay_cursor cursor;
  // Each item counts its bytes plus its payload's (about 6.2 KB): two reach 10 000. (Under
  // 64 items a fast step is one script.)
  CHECK(storage.replay_fast("orders", cursor, 10, "orders", false).moved == 2);
  layout.max_batch_bytes = 1000;
  RedisListStorage small(url, layout);
  CHECK(small.replay_fast("orders", cursor, 10, "orders", false).moved == 1);
  // From 64 items on, four scripts in one round trip, each with its own budget.
  raw.rpush(dead, {dlq_envelope(big), dlq_envelope(big), dlq_envelope(big), dlq_envelope(big),
                   dlq_envelope(big)});
  CHECK(small.replay_fast("orders", cursor, 64, "orders", false).moved == 4);
  CHECK(raw.integer({"LLEN", dead}) == 2);
}

TEST_CASE("items with a wrong length field are never cut by the fast step",
          "[redis][replay][fast]") {
  const std::string url = test::shared_redis_url();
  RedisListStorage storage(url, test::unique_layout());
  RawClient raw(url);
  const std::string dead = storage.key("orders", ListKind::dead);
  for (const std::string& item : wrong_lengths()) {
    INFO(item);
    raw.cmd({"DEL", dead, storage.source_key("orders")});
    raw.rpush(dead, {item});
    RedisListStorage::replay_cursor cursor;
    const FastStep f = storage.replay_fast("orders", cursor, 100, "orders", true);
    CHECK(f.moved == 0);
    CHECK(f.unprovable == 1);
    // The replay hands it to the compare-and-move step, which cuts the real payload.
    DeadLetterQueue<RedisListStorage&> q(storage);
    const ReplayReport r = q.replay_all("orders");
    CHECK(r.replayed == 1);
    const Entry e = parse_entry(item);
    REQUIRE(e.ok());
    CHECK(raw.list(storage.source_key("orders")) == std::vector<std::string>{e.payload});
  }
}

TEST_CASE("the fast step is declined once the replay keeps items before its cursor",
          "[redis][replay][fast]") {
  const std::string url = test::shared_redis_url();
  RedisListStorage storage(url, test::unique_layout());
  RawClient raw(url);
  const std::string dead = storage.key("orders", ListKind::dead);
  raw.rpush(dead, {dlq_envelope("1", true), dlq_envelope("2")});
  RedisListStorage::replay_cursor cursor;
  // The parked entry is not provable: the compare-and-move step keeps it.
  CHECK(storage.replay_fast("orders", cursor, 100, "orders", false).unprovable == 1);
  const StepResult s = storage.replay_step("orders", cursor, 1, [](std::string_view, Decision&) {});
  CHECK(s.examined == 1);
  REQUIRE(cursor.offset() == 1);
  const FastStep f = storage.replay_fast("orders", cursor, 100, "orders", false);
  CHECK(f.declined);
  CHECK(raw.integer({"LLEN", dead}) == 2);  // nothing moved
}

TEST_CASE("a mixed queue replays exactly as the compare-and-move path replays it",
          "[redis][replay][fast]") {
  // 300 entries: more than the audit record lists (100), so that the fast path's count-only
  // steps are exercised once the record is full.
  // A Python entry every 10th (the replay backs off to compare-and-move batches between
  // fast steps) or every 150th (long runs: fast steps throughout).
  for (const auto& [parked_at, python_every] :
       std::vector<std::pair<int, int>>{{250, 10}, {0, 10}, {250, 150}}) {
    for (const bool observe : {true, false}) {
      INFO("parked entry at " << parked_at << ", a Python entry every " << python_every
                              << (observe ? ", ids and events read" : ""));
      const auto items = mixed_items(300, parked_at, python_every);
      const Outcome fast = replay(items, false, observe);
      const Outcome slow = replay(items, true, observe);
      same(fast, slow);
      // What the compare-and-move path reports for this queue, spelled out.
      CHECK(slow.report.examined == 300);
      CHECK(slow.report.set_aside == 2);
      CHECK(slow.corrupt == std::vector<std::string>{items[57], items[58]});
      CHECK(slow.dead == std::vector<std::string>{items[static_cast<std::size_t>(parked_at)]});
      CHECK(slow.report.replayed == 297);
      if (observe) CHECK(slow.report.replayed_ids.size() == 297);
      CHECK(slow.audit_ids.size() == 100);
      CHECK(slow.audit_omitted == 197);
    }
  }
}

TEST_CASE("long runs of dlq entries (pipelined fast scripts) replay as compare-and-move does",
          "[redis][replay][fast]") {
  // 3000 entries: the fast steps grow to four scripts per round trip; a Python entry every
  // 700, a corrupt item and a wrong length field among them, a parked entry near the end.
  std::vector<std::string> items;
  const auto wrong = wrong_lengths();
  for (int i = 0; i < 3000; ++i) {
    if (i % 700 == 699) {
      items.push_back(python_envelope(i));
    } else if (i == 1234) {
      items.push_back("{\"payload_bytes\":1,\"original_payload\":");
    } else if (i == 2100) {
      items.push_back(wrong[2]);
    } else if (i == 2900) {
      items.push_back(dlq_envelope(R"({"job":"parked"})", true));
    } else {
      items.push_back(dlq_envelope(R"({"job":)" + std::to_string(i) + "}"));
    }
  }
  for (const bool observe : {true, false}) {
    INFO((observe ? "ids and events read" : "counts only"));
    const Outcome fast = replay(items, false, observe);
    const Outcome slow = replay(items, true, observe);
    same(fast, slow);
    CHECK(slow.report.replayed == 2998);
    CHECK(slow.report.set_aside == 1);
  }
}

namespace {

// `env` with the text of its payload_bytes value replaced by `text` (any bytes), and
// envelope_bytes kept right.
std::string with_length_text(const std::string& env, std::string_view text) {
  const std::string head = R"({"payload_bytes":)";
  const std::size_t end = env.find(',', head.size());
  return with_envelope_bytes(head + std::string(text) + env.substr(end));
}

// `env` with `member` (`,"key":value`) added before its final '}', as a JSON tool that
// loads an entry, sets a field and writes it back compactly (jq -c, json.dumps with
// separators) adds it: at the end, every other byte unchanged.
std::string with_member(const std::string& env, std::string_view member) {
  return env.substr(0, env.size() - 1) + std::string(member) + "}";
}

// Replays `items` on both paths, with and without ids read, and compares everything.
void replays_as_compare_and_move(const std::vector<std::string>& items) {
  for (const bool observe : {true, false}) {
    INFO((observe ? "ids and events read" : "counts only"));
    same(replay(items, false, observe), replay(items, true, observe));
  }
}

}  // namespace

TEST_CASE("a length field that is not a plain JSON integer is not proof for the fast step",
          "[redis][replay][fast]") {
  // Lua's tonumber reads all of these as 5; as JSON, the first six make the item unreadable
  // (compare-and-move sets it aside), the rest are the number 5 written another way.
  const std::string env = dlq_envelope("12345");
  REQUIRE(length_of(env) == 5);
  const std::vector<std::pair<std::string, std::string>> texts = {
      {"05", "05"},    {"+5", "+5"},    {"0x5", "0x5"},
      {"\\f5", "\f5"}, {"5\\v", "5\v"}, {"5\\0x", std::string("5\0x", 3)},
      {"' 5'", " 5"},  {"5.0", "5.0"},  {"5e0", "5e0"}};
  for (const auto& [name, text] : texts) {
    DYNAMIC_SECTION("payload_bytes:" << name) {
      replays_as_compare_and_move(
          {dlq_envelope("1"), with_length_text(env, text), dlq_envelope("2"), python_envelope(3)});
    }
  }
}

TEST_CASE("an entry a JSON tool flagged at its end is not taken by the fast step",
          "[redis][replay][fast]") {
  // An operator parks an entry by hand (`jq -c '.parked = true'`, or json.loads, set,
  // json.dumps with compact separators): the new member lands at the end, the frame stays.
  // Compare-and-move keeps a parked entry and decodes a base64 one; the fast step must
  // leave both to it.
  const std::vector<std::pair<std::string, std::string>> flagged = {
      {"parked", with_member(dlq_envelope(R"({"job":"p"})"), R"(,"parked":true)")},
      {"base64", with_member(dlq_envelope(R"("AQID")"), R"(,"payload_encoding":"base64")")},
      {"whitespace", with_member(dlq_envelope("[1]"), R"(,"payload_whitespace":true)")}};
  for (const auto& [name, item] : flagged) {
    DYNAMIC_SECTION(name) {
      replays_as_compare_and_move({dlq_envelope("1"), item, dlq_envelope("2")});
    }
  }
}

TEST_CASE("two fast-path replay_all at once, a popping consumer and producers: every entry once",
          "[redis][replay][fast][concurrency]") {
  const std::string url = test::shared_redis_url();
  const RedisListOptions layout = test::unique_layout();
  RedisListStorage storage(url, layout);
  RawClient raw(url);
  const std::string dead = storage.key("orders", ListKind::dead);
  const std::string source = storage.source_key("orders");
  // dlq entries with a Python one every 25th: fast steps, compare-and-move steps in between.
  std::vector<std::string> items, payloads;
  for (int i = 0; i < 12000; ++i) {
    if (i % 25 == 24) {
      items.push_back(python_envelope(i));
      payloads.push_back(R"({"job": )" + std::to_string(i) + R"(, "src": "py"})");
    } else {
      payloads.push_back(R"({"job":)" + std::to_string(i) + "}");
      items.push_back(dlq_envelope(payloads.back()));
    }
  }
  raw.rpush(dead, items);
  const std::size_t snapshot = items.size();
  std::atomic<bool> stop{false};
  std::vector<std::string> produced, popped;
  std::mutex m;
  std::size_t replayed[2] = {0, 0};
  std::size_t events[2] = {0, 0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      RedisListStorage mine(url, layout);
      Options options;
      options.on_event = [&events, t](const Event& e) {
        if (e.kind == EventKind::replayed) ++events[t];
      };
      DeadLetterQueue<RedisListStorage&> q(mine, options);
      for (int round = 0; round < 2; ++round)  // a second run takes what the race left
        replayed[t] += q.replay_all("orders").replayed;
    });
  }
  threads.emplace_back([&] {  // the seed's replay_one: LPOP (then RPUSH elsewhere)
    RawClient c(url);
    for (int i = 0; i < 2000 && !stop; ++i) {
      auto r = c.cmd({"LPOP", dead});
      if (r->type != REDIS_REPLY_STRING) break;
      std::lock_guard<std::mutex> lock(m);
      popped.emplace_back(redis::view(*r));
    }
  });
  threads.emplace_back([&] {  // a producer
    RawClient c(url);
    for (int i = 0; i < 3000 && !stop; ++i) {
      std::string p = R"({"new":)" + std::to_string(i) + "}";
      c.rpush(dead, {dlq_envelope(p)});
      std::lock_guard<std::mutex> lock(m);
      produced.push_back(std::move(p));
    }
  });
  threads[0].join();
  threads[1].join();
  stop = true;
  threads[2].join();
  threads[3].join();
  // Every payload is exactly once: in the source list, popped (as its envelope), or still in
  // the dead list (a producer's entry after the snapshots).
  std::vector<std::string> moved = raw.list(source);
  CHECK(moved.size() == replayed[0] + replayed[1]);  // nothing moved and not reported
  CHECK(events[0] == replayed[0]);
  CHECK(events[1] == replayed[1]);
  for (const std::string& item : popped)
    moved.push_back(parse_entry(item).payload);
  for (const std::string& item : raw.list(dead))
    moved.push_back(parse_entry(item).payload);
  std::vector<std::string> expected = payloads;
  expected.insert(expected.end(), produced.begin(), produced.end());
  std::sort(moved.begin(), moved.end());
  std::sort(expected.begin(), expected.end());
  CHECK(moved.size() == expected.size());
  CHECK(moved == expected);
  // Each run is bounded by its snapshot: the two runs of each replayer took at most twice
  // what was there, never chasing the producer.
  CHECK(replayed[0] + replayed[1] <= 4 * (snapshot + produced.size()));
}

namespace {

// A field of INFO's answer, as a number.
long long info_number(RawClient& raw, const std::string& section, const std::string& field) {
  const std::string text(redis::view(*raw.cmd({"INFO", section})));
  const std::size_t at = text.find(field + ":");
  REQUIRE(at != std::string::npos);
  return std::stoll(text.substr(at + field.size() + 1));
}

}  // namespace

TEST_CASE("the fast step reads about its byte budget from the dead list, not chunks of big items",
          "[redis][replay][fast]") {
  // A private server: its peak memory is this test's alone. 2 MB entries, far above the
  // byte budget (512 KiB): each script takes one; it must not read 16 or 32 of them to do so
  // (copied into the script's reply buffer and again into Lua strings: 20 MB entries made a
  // server allocate ~640 MB per script).
  test::RedisProcess server;
  RedisListStorage storage(server.url(), test::unique_layout());
  RawClient raw(server.url());
  const std::string dead = storage.key("orders", ListKind::dead);
  const std::string big = "\"" + std::string(2000000, 'x') + "\"";
  for (int i = 0; i < 40; ++i)
    raw.rpush(dead, {dlq_envelope(big)});
  RedisListStorage::replay_cursor cursor;
  CHECK(storage.replay_fast("orders", cursor, 1, "orders", false).moved == 1);  // script loaded
  raw.cmd({"MEMORY", "PURGE"});
  const long long base = info_number(raw, "memory", "used_memory");
  raw.cmd({"CONFIG", "RESETSTAT"});
  // Four pipelined scripts of 16 (each ends at its byte budget after one entry), then one of
  // 63 with 6 MiB of budget (two entries: each counts its 2 MB and its payload's 2 MB).
  CHECK(storage.replay_fast("orders", cursor, 64, "orders", false).moved == 4);
  RedisListOptions wider = storage.options();
  wider.max_batch_bytes = 6 << 20;
  RedisListStorage more(server.url(), wider);
  CHECK(more.replay_fast("orders", cursor, 63, "orders", false).moved == 2);
  const long long peak = info_number(raw, "memory", "used_memory_peak");
  INFO("peak " << (peak - base) / 1000000 << " MB over the data");
  CHECK(peak - base < 16000000);  // a few entries' worth (each moved one is copied once)
  CHECK(raw.integer({"LLEN", dead}) == 33);
}

TEST_CASE("eight pipelined fast scripts on big entries keep the server's peak to a few entries",
          "[redis][replay][fast]") {
  // As above, with a step of 128 or more entries: eight scripts in one round trip, each ends
  // at its byte budget after one 2 MB entry. What a script read (its reply buffer, its Lua
  // strings) must not pile up across the eight.
  test::RedisProcess server;
  RedisListStorage storage(server.url(), test::unique_layout());
  RawClient raw(server.url());
  const std::string dead = storage.key("orders", ListKind::dead);
  const std::string big = "\"" + std::string(2000000, 'x') + "\"";
  for (int i = 0; i < 40; ++i)
    raw.rpush(dead, {dlq_envelope(big)});
  RedisListStorage::replay_cursor cursor;
  CHECK(storage.replay_fast("orders", cursor, 1, "orders", false).moved == 1);  // script loaded
  raw.cmd({"MEMORY", "PURGE"});
  const long long base = info_number(raw, "memory", "used_memory");
  raw.cmd({"CONFIG", "RESETSTAT"});
  const FastStep f = storage.replay_fast("orders", cursor, 1024, "orders", true);
  CHECK(f.moved == 8);
  CHECK(f.batches == std::vector<std::size_t>(8, 1));
  CHECK(f.ids.size() == 8);
  const long long peak = info_number(raw, "memory", "used_memory_peak");
  INFO("peak " << (peak - base) / 1000000 << " MB over the data");
  CHECK(peak - base < 16000000);
  CHECK(raw.integer({"LLEN", dead}) == 31);
}

TEST_CASE("big unprovable entries after a run: the eight scripts do not each send them back",
          "[redis][replay][fast]") {
  // 200 small dlq entries, then 2 MB entries from the Python service (never provable). A
  // step of 1024 is eight scripts of 128: the second stops at the first Python entry; the
  // six after it start there. Each script that meets an unprovable head returns it (the
  // compare-and-move step's window), so the server's reply and the client's read must stay
  // a few of those entries, not one per script.
  test::RedisProcess server;
  RedisListStorage storage(server.url(), test::unique_layout());
  RawClient raw(server.url());
  const std::string dead = storage.key("orders", ListKind::dead);
  std::vector<std::string> items;
  for (int i = 0; i < 200; ++i)
    items.push_back(dlq_envelope(R"({"job":)" + std::to_string(i) + "}"));
  const std::string pad(2000000, 'y');
  for (int i = 0; i < 4; ++i)
    items.push_back(R"({"original_payload": {"job": )" + std::to_string(i) + R"(, "pad": ")" + pad +
                    R"("}, "queue": "orders", "error": "boom"})");
  raw.rpush(dead, items);
  RedisListStorage::replay_cursor cursor;
  CHECK(storage.replay_fast("orders", cursor, 1, "orders", false).moved == 1);  // script loaded
  raw.cmd({"MEMORY", "PURGE"});
  const long long base = info_number(raw, "memory", "used_memory");
  raw.cmd({"CONFIG", "RESETSTAT"});
  const FastStep f = storage.replay_fast("orders", cursor, 1024, "orders", false);
  CHECK(f.moved == 199);
  CHECK(f.unprovable == 1);
  const long long peak = info_number(raw, "memory", "used_memory_peak");
  INFO("peak " << (peak - base) / 1000000 << " MB over the data");
  CHECK(peak - base < 10000000);
  CHECK(raw.integer({"LLEN", dead}) == 4);
}

TEST_CASE("a pipelined fast script ending at its item limit right before unprovable entries",
          "[redis][replay][fast]") {
  // Eight scripts of 128: the first takes 128 and stops at its limit, the second meets the
  // Python entries first and stops at once without reading them; the step still says the
  // head is unprovable, and the replay then moves everything once, in order, as
  // compare-and-move alone does.
  std::vector<std::string> items;
  for (int i = 0; i < 128; ++i)
    items.push_back(dlq_envelope(R"({"job":)" + std::to_string(i) + "}"));
  for (int i = 0; i < 5; ++i)
    items.push_back(python_envelope(i));
  for (int i = 0; i < 300; ++i)
    items.push_back(dlq_envelope(R"({"job":)" + std::to_string(1000 + i) + "}"));
  {
    RedisListStorage storage(test::shared_redis_url(), test::unique_layout());
    RawClient raw(test::shared_redis_url());
    raw.rpush(storage.key("orders", ListKind::dead), items);
    RedisListStorage::replay_cursor cursor;
    const FastStep f = storage.replay_fast("orders", cursor, 1024, "orders", true);
    CHECK(f.moved == 128);
    CHECK(f.ids.size() == 128);
    CHECK(f.unprovable >= 1);
    CHECK(raw.integer({"LLEN", storage.key("orders", ListKind::dead)}) == 305);
  }
  same(replay(items, false, true), replay(items, true, true));
  same(replay(items, false, false), replay(items, true, false));
}

TEST_CASE("a pipelined fast script killed in the middle of eight: the step reports what moved",
          "[redis][replay][fast][faults]") {
  // A private server whose scripts are BUSY at once; another client sends SCRIPT KILL in a
  // loop, killing one of the eight scripts of a step now and then (before its first write:
  // it moves nothing). The scripts after it run and move their entries: whatever the steps
  // report moved must be exactly what the destination holds.
  test::RedisProcess server;
  RedisListOptions layout = test::unique_layout();
  layout.max_batch_items = 4000;  // long scripts: each reaches Lua's hook (BUSY) while reading
  layout.max_batch_bytes = std::size_t{64} << 20;
  RedisListStorage storage(server.url(), layout);
  RawClient raw(server.url());
  const std::string dead = storage.key("orders", ListKind::dead);
  const std::string source = storage.source_key("orders");
  std::vector<std::string> items;
  for (int i = 0; i < 200000; ++i)
    items.push_back(dlq_envelope(R"({"job":)" + std::to_string(i) + "}"));
  raw.rpush(dead, items);
  raw.cmd({"CONFIG", "SET", "busy-reply-threshold", "1"});
  std::atomic<bool> stop{false};
  std::atomic<int> kills{0};
  std::thread killer([&] {
    RawClient k(server.url());
    std::mt19937 rng(7);
    while (!stop.load()) {
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));
      if (k.cmd({"SCRIPT", "KILL"})->type == REDIS_REPLY_STATUS) ++kills;
    }
  });
  std::size_t reported = 0, errors = 0;
  for (int step = 0; step < 200 && raw.integer({"LLEN", dead}) > 0; ++step) {
    RedisListStorage::replay_cursor cursor;
    try {
      reported += storage.replay_fast("orders", cursor, 32000, "orders", false).moved;
    } catch (const storage_error&) {
      ++errors;
    }
  }
  stop = true;
  killer.join();
  INFO(errors << " steps failed, " << kills.load() << " scripts killed");
  CHECK(kills.load() > 0);
  CHECK(raw.integer({"LLEN", source}) + raw.integer({"LLEN", dead}) == 200000);
  CHECK(static_cast<std::size_t>(raw.integer({"LLEN", source})) == reported);
}

TEST_CASE("a queue the fast step cannot prove costs about the scripts compare-and-move alone costs",
          "[redis][replay][fast]") {
  // Binary payloads (protobuf, say) are stored as base64: no entry is provable. The fast path
  // must not turn each compare-and-move batch into a fast step, a batch of the few items it
  // returned, and a discarded read-ahead.
  test::RedisProcess server;
  RawClient raw(server.url());
  std::vector<std::string> items;
  for (int i = 0; i < 6000; ++i)
    items.push_back(dlq_envelope(std::string("\x01\x02\xff", 3) + std::to_string(i)));
  auto scripts = [&](bool slow) {
    RedisListStorage storage(server.url(), test::unique_layout());
    raw.rpush(storage.key("orders", ListKind::dead), items);
    raw.cmd({"CONFIG", "RESETSTAT"});
    DeadLetterQueue<RedisListStorage&> q(storage);
    ReplayOptions o;
    if (slow) o.filter = [](const Entry&) { return true; };
    CHECK(q.replay("orders", o).replayed == items.size());
    CHECK(raw.list(storage.source_key("orders")).size() == items.size());
    const std::string text(redis::view(*raw.cmd({"INFO", "commandstats"})));
    const std::string field = "cmdstat_evalsha:calls=";
    const std::size_t at = text.find(field);
    REQUIRE(at != std::string::npos);
    return std::stoll(text.substr(at + field.size()));
  };
  const long long slow = scripts(true);
  const long long fast = scripts(false);
  INFO("compare-and-move alone: " << slow << " scripts; with the fast path: " << fast);
  CHECK(fast <= 2 * slow + 10);
}

TEST_CASE("a fast step refused by the server (WRONGTYPE, OOM) moves nothing and says so",
          "[redis][replay][fast]") {
  // A private server: this test changes its maxmemory.
  test::RedisProcess server;
  RedisListStorage storage(server.url(), test::unique_layout());
  RawClient raw(server.url());
  const std::string dead = storage.key("orders", ListKind::dead);
  const std::string source = storage.source_key("orders");
  std::vector<std::string> items;
  for (int i = 0; i < 3000; ++i)
    items.push_back(dlq_envelope(R"({"job":)" + std::to_string(i) + "}"));
  raw.rpush(dead, items);
  DeadLetterQueue<RedisListStorage&> q(storage);

  raw.cmd({"SET", source, "not a list"});
  try {
    q.replay_all("orders");
    FAIL("no error");
  } catch (const reply_error& e) {
    CHECK(e.code() == "WRONGTYPE");
    CHECK_FALSE(e.outcome_unknown());
  }
  CHECK(raw.list(dead) == items);
  raw.cmd({"DEL", source});

  // Over maxmemory (noeviction): the script's first write is refused, so nothing moves.
  const long long used = info_number(raw, "memory", "used_memory");
  raw.cmd({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  raw.cmd({"CONFIG", "SET", "maxmemory", std::to_string(used / 2)});
  try {
    q.replay_all("orders");
    FAIL("no error");
  } catch (const reply_error& e) {
    CHECK(e.code() == "OOM");
    CHECK_FALSE(e.outcome_unknown());
  }
  raw.cmd({"CONFIG", "SET", "maxmemory", "0"});
  CHECK(raw.list(dead) == items);
  CHECK(raw.integer({"EXISTS", source}) == 0);
  // And once the server has room, the replay moves everything, once.
  CHECK(q.replay_all("orders").replayed == items.size());
  CHECK(raw.list(source).size() == items.size());
  CHECK(raw.integer({"LLEN", dead}) == 0);
}

TEST_CASE("a fast step whose answer is lost: outcome unknown, and a second run moves the rest once",
          "[redis][replay][fast][faults]") {
  // The server freezes between two fast steps and wakes after the client's timeout: the
  // scripts sent meanwhile run (or not) when it wakes; each entry must end up exactly once.
  for (const int wake_ms : {50, 400}) {
    INFO("the server wakes after " << wake_ms << " ms");
    test::RedisProcess server;
    auto o = redis::parse_url(server.url());
    o.command_timeout = std::chrono::milliseconds(200);
    RedisListStorage storage(o, test::unique_layout());
    RawClient raw(server.url());
    const std::string dead = storage.key("orders", ListKind::dead);
    const std::string source = storage.source_key("orders");
    std::vector<std::string> items, payloads;
    for (int i = 0; i < 5000; ++i) {
      payloads.push_back(R"({"job":)" + std::to_string(i) + "}");
      items.push_back(dlq_envelope(payloads.back()));
    }
    raw.rpush(dead, items);
    DeadLetterQueue<RedisListStorage&> q(storage);
    std::thread waker;
    int steps = 0;
    ReplayOptions opts;
    opts.on_progress = [&](const ReplayProgress&) {
      if (++steps != 3) return;
      server.freeze();
      waker = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(wake_ms));
        server.thaw();
      });
    };
    std::size_t replayed = 0;
    try {
      replayed = q.replay("orders", opts).replayed;
    } catch (const storage_error& e) {
      CHECK(e.outcome_unknown());
      CHECK(std::string(e.what()).find("nothing was lost") != std::string::npos);
    }
    waker.join();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // what was sent has run
    const std::size_t before = raw.list(source).size();
    CHECK(before >= replayed);
    replayed = q.replay_all("orders").replayed;
    const auto moved = raw.list(source);
    CHECK(moved.size() == before + replayed);
    CHECK(moved == payloads);  // each once, in order
    CHECK(raw.integer({"LLEN", dead}) == 0);
  }
}

TEST_CASE("payloads with multi-byte UTF-8, escapes and frame-shaped bytes, and a limit",
          "[redis][replay][fast]") {
  const std::string uuid = new_id();
  std::vector<std::string> items = {
      dlq_envelope("\"caf\xc3\xa9 \xf0\x9f\x98\x80\""),
      dlq_envelope(R"("a\"b\\c\u0000,\"id\":\")" + uuid + R"(\"")"),
      dlq_envelope(R"({"payload_bytes":3,"original_payload":123,"id":")" + uuid +
                   R"(","queue":"x"})"),
      dlq_envelope(std::string("{\"a\":1}\0,\"id\":\"", 14) + uuid + "\""),  // NUL: base64
      dlq_envelope(R"(["}"])"),
      python_envelope(5)};
  for (int i = 0; i < 40; ++i)
    items.push_back(i % 7 == 3 ? python_envelope(i) : dlq_envelope(std::to_string(i)));
  replays_as_compare_and_move(items);
  for (const std::size_t limit :
       {std::size_t{1}, std::size_t{4}, std::size_t{6}, std::size_t{30}}) {
    INFO("limit " << limit);
    for (const bool observe : {true, false})
      same(replay(items, false, observe, limit), replay(items, true, observe, limit));
  }
}

TEST_CASE("a queue mixing Python and dlq entries finely costs about what compare-and-move costs",
          "[redis][replay][fast]") {
  // A Python worker and a C++ worker dead-lettering to one queue interleave their entries.
  // Each Python entry ends a fast step and costs a compare-and-move step: two round trips per
  // short run, where compare-and-move alone takes up to 1000 entries per round trip
  // (6000 entries, every 2nd from Python: 5998 scripts against 11, 9x the time on loopback).
  test::RedisProcess server;
  RawClient raw(server.url());
  for (const int every : {2, 10}) {
    INFO("every " << every << " entries one from Python");
    std::vector<std::string> items;
    for (int i = 0; i < 6000; ++i)
      items.push_back(i % every == every - 1 ? python_envelope(i)
                                             : dlq_envelope(std::to_string(i)));
    auto scripts = [&](bool slow) {
      RedisListStorage storage(server.url(), test::unique_layout());
      raw.rpush(storage.key("orders", ListKind::dead), items);
      raw.cmd({"CONFIG", "RESETSTAT"});
      DeadLetterQueue<RedisListStorage&> q(storage);
      ReplayOptions o;
      if (slow) o.filter = [](const Entry&) { return true; };
      CHECK(q.replay("orders", o).replayed == items.size());
      const std::string text(redis::view(*raw.cmd({"INFO", "commandstats"})));
      const std::string field = "cmdstat_evalsha:calls=";
      const std::size_t at = text.find(field);
      REQUIRE(at != std::string::npos);
      return std::stoll(text.substr(at + field.size()));
    };
    const long long slow = scripts(true);
    const long long fast = scripts(false);
    INFO("compare-and-move alone: " << slow << " scripts; with the fast path: " << fast);
    CHECK(fast <= 2 * slow + 10);
  }
}

namespace {

// `env` with `member` (`,"key":value`) inserted right before its `,"dead_lettered_at":`
// member: where a tool that keeps some fields last (a typed serializer, a JS spread that
// re-adds them) puts a new flag — in the middle of the tail, not at its end.
std::string with_member_inside(const std::string& env, std::string_view member) {
  const std::size_t at = env.find(R"(,"dead_lettered_at":)");
  REQUIRE(at != std::string::npos);
  return env.substr(0, at) + std::string(member) + env.substr(at);
}

// Checks that one fast step on a dead list holding only `item` moves nothing and hands the
// item to compare-and-move.
void fast_step_refuses(const std::string& item) {
  const std::string url = test::shared_redis_url();
  RedisListStorage storage(url, test::unique_layout());
  RawClient raw(url);
  const std::string dead = storage.key("orders", ListKind::dead);
  raw.rpush(dead, {item});
  RedisListStorage::replay_cursor cursor;
  const FastStep f = storage.replay_fast("orders", cursor, 100, "orders", true);
  CHECK(f.moved == 0);
  CHECK(f.unprovable == 1);
  CHECK(raw.list(storage.source_key("orders")).empty());
  CHECK(raw.list(dead) == std::vector<std::string>{item});
}

}  // namespace

TEST_CASE("two entries pushed as one item are never cut to the first one by the fast step",
          "[redis][replay][fast][joined]") {
  // `RPUSH key "$(cat entries.ndjson)"`, or entries concatenated by hand: the item starts
  // with the first envelope's frame and ends with the last one's '}'. Pushing the first
  // payload and trimming the item would lose the second entry; compare-and-move sets the
  // whole item aside, every byte kept.
  const std::string a = dlq_envelope(R"({"job":"first"})");
  const std::string b = dlq_envelope(R"({"job":"second"})");
  const std::vector<std::pair<std::string, std::string>> joined = {
      {"no separator", a + b},
      {"newline", a + "\n" + b},
      {"crlf", a + "\r\n" + b},
      {"space", a + " " + b},
      {"three entries", a + "\n" + b + "\n" + dlq_envelope("3")},
      {"then a Python entry", a + "\n" + python_envelope(1)},
      {"then other JSON", a + R"({"x":1})"},
      {"then other JSON, newline", a + "\n" + R"({"x":1})"},
      {"then an empty object", a + "{}"}};
  for (const auto& [name, item] : joined) {
    DYNAMIC_SECTION(name) {
      fast_step_refuses(item);
      replays_as_compare_and_move({dlq_envelope("1"), item, dlq_envelope("2")});
      // Nothing dropped: the joined item is kept whole, beside the queue.
      const Outcome o = replay({item}, false, true);
      CHECK(o.report.replayed == 0);
      CHECK(o.source.empty());
      CHECK(o.dead.size() + o.corrupt.size() == 1);
      const auto& kept = o.dead.empty() ? o.corrupt : o.dead;
      CHECK(kept == std::vector<std::string>{item});
    }
  }
}

TEST_CASE("a flag a tool put in the middle of an entry's tail is never ignored by the fast step",
          "[redis][replay][fast]") {
  // A parked entry is never replayed by the fast step; a base64 one is never pushed undecoded.
  const std::vector<std::pair<std::string, std::string>> flagged = {
      {"parked", with_member_inside(dlq_envelope(R"({"job":"p"})"), R"(,"parked":true)")},
      {"base64", with_member_inside(dlq_envelope(R"("AQID")"), R"(,"payload_encoding":"base64")")},
      {"parked, first in the tail", [] {
         std::string e = dlq_envelope(R"({"job":"q"})");
         const std::size_t at = e.find(R"(,"id":")");
         return e.substr(0, at) + R"(,"parked":true)" + e.substr(at);
       }()}};
  for (const auto& [name, item] : flagged) {
    DYNAMIC_SECTION(name) {
      fast_step_refuses(item);
      replays_as_compare_and_move({dlq_envelope("1"), item, dlq_envelope("2")});
    }
  }
  // Through replay_all: the parked entry stays, the base64 one arrives decoded.
  const Outcome o = replay({flagged[0].second, flagged[1].second}, false, true);
  CHECK(o.source == std::vector<std::string>{std::string("\x01\x02\x03", 3)});
  CHECK(o.dead == std::vector<std::string>{flagged[0].second});
}

TEST_CASE("an entry cut off inside a context that looks like the tail is never taken",
          "[redis][replay][fast]") {
  // The context holds a nested dead_lettered_at member and objects; the item is cut right
  // after one of its '}' — it ends with '}' and its frame is intact, but it is not an entry.
  Failure f;
  f.error = "e";
  f.context = nlohmann::json::parse(
      R"({"prev":{"dead_lettered_at":"2026-12-01T00:00:00.000Z","worker":"w"},)"
      R"("n":{"a":{"b":1}},"tail":"x"})");
  detail::envelope_input in;
  in.queue = "orders";
  in.payload = R"({"job":"ctx"})";
  in.failure = &f;
  in.worker = "w";
  const std::string id = new_id();
  in.id = id;
  in.time = std::chrono::system_clock::now();
  std::string whole;
  detail::write_envelope(whole, in);
  REQUIRE(parse_entry(whole).ok());
  const std::size_t from = whole.find(R"("context":)");
  REQUIRE(from != std::string::npos);
  int cuts = 0;
  for (std::size_t at = whole.find('}', from); at != std::string::npos && at + 1 < whole.size();
       at = whole.find('}', at + 1)) {
    const std::string cut = whole.substr(0, at + 1);
    INFO(cut);
    REQUIRE_FALSE(parse_entry(cut).ok());
    fast_step_refuses(cut);
    replays_as_compare_and_move({dlq_envelope("1"), cut, dlq_envelope("2")});
    ++cuts;
  }
  CHECK(cuts >= 3);
}

TEST_CASE("a flag a tool appended while shortening other bytes by as much is never ignored",
          "[redis][replay][fast]") {
  // jq 1.6 and JavaScript write the number 2.0 as 2: an entry whose context holds seven such
  // numbers, parked with `jq -c '.parked = true'`, has exactly its old length — the
  // envelope_bytes value still matches #item, but the member after it breaks the end.
  Failure f;
  f.error = "e";
  f.context = nlohmann::json::parse(R"({"a":1.0,"b":2.0,"c":3.0,"d":4.0,"e":5.0,"f":6.0,"g":7.0})");
  detail::envelope_input in;
  in.queue = "orders";
  in.payload = R"({"job":"floats"})";
  in.failure = &f;
  in.worker = "w";
  const std::string id = new_id();
  in.id = id;
  in.time = std::chrono::system_clock::now();
  std::string env;
  detail::write_envelope(env, in);
  std::string edited = env;
  // Only inside the context (dead_lettered_at may hold ".0" too).
  for (std::size_t at = edited.find(".0", edited.find(R"("context":)")); at != std::string::npos;
       at = edited.find(".0", at))
    edited.erase(at, 2);
  edited = with_member(edited, R"(,"parked":true)");
  REQUIRE(edited.size() == env.size());
  const Entry e = parse_entry(edited);
  REQUIRE(e.ok());
  REQUIRE(e.parked);
  fast_step_refuses(edited);
  replays_as_compare_and_move({dlq_envelope("1"), edited, dlq_envelope("2")});
  const Outcome o = replay({edited}, false, true);
  CHECK(o.source.empty());
  CHECK(o.dead == std::vector<std::string>{edited});
}

TEST_CASE("an item sharing a proved item's head or length is still checked whole",
          "[redis][replay][fast]") {
  // The script works out what a head (`{"payload_bytes":N,"original_payload":`) proves and
  // the end an item of a given length needs once per call: an item after a provable one,
  // with the same head or the same length, must still be refused when its own bytes are
  // not the frame.
  const std::string url = test::shared_redis_url();
  RedisListStorage storage(url, test::unique_layout());
  RawClient raw(url);
  const std::string dead = storage.key("orders", ListKind::dead);
  const std::string payload = R"({"job":"cached","pad":"xxxxxxxx"})";
  const std::string a = new_id();
  const std::string good = dlq_envelope(payload, false, a);
  // The same head (payload_bytes N) over a payload one byte shorter: the id is not where N
  // says; envelope_bytes is its true length.
  const std::string short_payload =
      with_length(dlq_envelope(R"({"job":"cached","pad":"xxxxxxx"})"), payload.size());
  REQUIRE(short_payload.substr(0, 30) == good.substr(0, 30));
  // The same length, head and fields, but an envelope_bytes value that is not its length.
  std::string wrong_end = dlq_envelope(payload);
  REQUIRE(wrong_end.size() == good.size());
  const std::size_t digit = wrong_end.size() - 2;
  wrong_end[digit] = wrong_end[digit] == '9' ? '8' : static_cast<char>(wrong_end[digit] + 1);
  for (const auto& bad : {short_payload, wrong_end}) {
    INFO(bad);
    raw.cmd({"DEL", dead, storage.source_key("orders")});
    raw.rpush(dead, {good, bad, dlq_envelope("1")});
    RedisListStorage::replay_cursor cursor;
    const FastStep f = storage.replay_fast("orders", cursor, 100, "orders", true);
    CHECK(f.moved == 1);
    CHECK(f.unprovable == 1);
    CHECK(f.ids == std::vector<std::string>{a});
    replays_as_compare_and_move({good, bad, dlq_envelope("2"), good});
  }
}

TEST_CASE("a fast replay longer than audit_max_ids lists exactly the first ids in its record",
          "[redis][replay][fast]") {
  // The fast steps ask the script for ids only while something reads them: here, after the
  // first steps, only the count. The record must still name exactly the first
  // Options::audit_max_ids entries, in order, and count the rest; with an event hook or
  // record_ids every id is still exact.
  const std::string url = test::shared_redis_url();
  for (const bool observe : {false, true}) {
    INFO((observe ? "ids and events read" : "counts only"));
    RedisListStorage storage(url, test::unique_layout());
    RawClient raw(url);
    std::vector<std::string> items, ids;
    for (int i = 0; i < 700; ++i) {
      ids.push_back(new_id());
      items.push_back(dlq_envelope(R"({"job":)" + std::to_string(i) + "}", false, ids.back()));
    }
    raw.rpush(storage.key("orders", ListKind::dead), items);
    Options options;
    options.audit_max_ids = 7;  // reached inside the third fast step (1, 4, 16 entries)
    std::vector<std::string> events;
    if (observe)
      options.on_event = [&events](const Event& e) {
        if (e.kind == EventKind::replayed) events.emplace_back(e.id);
      };
    DeadLetterQueue<RedisListStorage&> q(storage, options);
    ReplayOptions o;
    o.record_ids = observe;
    const ReplayReport r = q.replay("orders", o);
    CHECK(r.replayed == 700);
    CHECK(r.batches > 4);  // several fast steps
    const auto records = q.audit("orders");
    REQUIRE(records.size() == 1);
    CHECK(records.front().ids == std::vector<std::string>(ids.begin(), ids.begin() + 7));
    CHECK(records.front().ids_omitted == 693);
    if (observe) {
      CHECK(events == ids);
      CHECK(r.replayed_ids == ids);
    } else {
      CHECK(events.empty());
      CHECK(r.replayed_ids.empty());
    }
  }
}

namespace {

// The frame rule of the fast step (dlq/redis/scripts/replay_fast.hpp), written out again
// without the script's per-call tables or Lua: `{"payload_bytes":` then N as JSON writes it
// (1-11 digits, no leading zero) then `,"original_payload":` (the first one from byte 18),
// N payload bytes, `,"id":"`, 36 bytes, `","queue":"`, anything, and `,"envelope_bytes":`
// followed by the item's own length and `}`. On success sets the payload and id the script
// cuts.
bool frame_rule(const std::string& w, std::string& payload, std::string& id) {
  const std::string start = R"({"payload_bytes":)", mark = R"(,"original_payload":)";
  if (w.compare(0, start.size(), start) != 0) return false;
  const std::size_t c = w.find(mark, start.size());
  if (c == std::string::npos || c >= start.size() + 12) return false;
  const std::string digits = w.substr(start.size(), c - start.size());
  if (digits.empty() || digits[0] < '1' || digits[0] > '9') return false;
  for (const char d : digits)
    if (d < '0' || d > '9') return false;
  const std::size_t n = std::stoull(digits), p = c + mark.size();
  const std::string end = R"(,"envelope_bytes":)" + std::to_string(w.size()) + "}";
  if (n > w.size() || p + n + 54 + end.size() > w.size()) return false;
  if (w.compare(p + n, 7, R"(,"id":")") != 0 || w.compare(p + n + 43, 11, R"(","queue":")") != 0)
    return false;
  if (w.compare(w.size() - end.size(), end.size(), end) != 0) return false;
  payload = w.substr(p, n);
  id = w.substr(p + n + 7, 36);
  return true;
}

// `w` with its last envelope_bytes member (if any) set to its new length.
std::string refit(const std::string& w) {
  return w.rfind(R"(,"envelope_bytes":)") == std::string::npos ? w : with_envelope_bytes(w);
}

// One hostile edit of `w`, chosen by `rng`: the shapes the fast step's per-call tables could
// confuse (same head over another item, same length with another end, the head's mark
// elsewhere, a payload_bytes text Lua reads but JSON does not) and plain corruption.
std::string hostile_edit(std::string w, std::mt19937& rng) {
  const auto pick = [&rng](std::size_t n) {
    return n == 0 ? std::size_t{0} : static_cast<std::size_t>(rng() % n);
  };
  const std::string mark = R"(,"original_payload":)", tail = R"(,"envelope_bytes":)";
  const std::size_t c = w.find(mark), a = w.rfind(tail);
  const char bytes[] = {'x', '"', '\\', '\0', '\xff', '}', ',', '0', '9', ':'};
  switch (pick(20)) {
    case 0:  // one byte changed: same length, same head or same end
      if (!w.empty()) w[pick(w.size())] = bytes[pick(sizeof bytes)];
      return w;
    case 1:  // one byte dropped, envelope_bytes refitted: same head, the id off by one
      if (!w.empty() && c != std::string::npos) w.erase(c + 20 + pick(w.size() - c - 20), 1);
      return pick(2) ? refit(w) : w;
    case 2:  // one byte added, refitted or not
      w.insert(pick(w.size() + 1), 1, bytes[pick(sizeof bytes)]);
      return pick(2) ? refit(w) : w;
    case 3:  // cut off, at any byte or shorter than the end
      return w.substr(0, pick(2) ? pick(w.size() + 1) : pick(26));
    case 4:  // another envelope joined to it
      return w + (pick(2) ? "\n" : "") + dlq_envelope(R"({"j":1})");
    case 5:  // a flag appended, kept as is or with envelope_bytes refitted last
      if (a == std::string::npos) return w + "x";
      w.insert(pick(2) ? w.size() - 1 : a, R"(,"parked":true)");
      return pick(2) ? refit(w) : w;
    case 6: {  // payload_bytes written otherwise (refitted or not)
      if (c == std::string::npos || c < 17) return w + " ";
      const std::string t = w.substr(17, c - 17);
      const std::size_t n =
          t.find_first_not_of("0123456789") == std::string::npos && !t.empty() ? std::stoull(t) : 5;
      const std::string alt[] = {"0" + t,
                                 "+" + t,
                                 " " + t,
                                 t + ".0",
                                 t + "e0",
                                 "0x" + t,
                                 "-" + t,
                                 t + std::string(1, '\0'),
                                 std::to_string(n + 1),
                                 std::to_string(n - 1),
                                 "99999999999",
                                 "999999999999",
                                 "0",
                                 "",
                                 "18446744073709551617"};
      w = w.substr(0, 17) + alt[pick(std::size(alt))] + w.substr(c);
      return pick(2) ? refit(w) : w;
    }
    case 7: {  // envelope_bytes written otherwise: leading zero, one off, a sign, a space
      if (a == std::string::npos) return w + "}";
      const std::string v = w.substr(a + tail.size(), w.size() - a - tail.size() - 1);
      const std::string alt[] = {"0" + v,
                                 v + "0",
                                 "+" + v,
                                 v + " ",
                                 v + ".0",
                                 "-" + v,
                                 std::to_string(w.size() + 1),
                                 std::to_string(w.size() - 1)};
      return w.substr(0, a + tail.size()) + alt[pick(std::size(alt))] + "}";
    }
    case 8:  // the head later in the item
      return (pick(2) ? "xx" : " ") + w;
    case 9:  // the frame's start dropped or flagged
      if (w.empty()) return "{";
      return pick(2) ? w.substr(1) : R"({"parked":true,)" + w.substr(1);
    case 10:  // the mark at another offset: digits padded
      if (w.size() < 17) return w + "1";
      return refit(w.substr(0, 17) + std::string(pick(14), '1') + w.substr(17));
    case 11:  // the mark twice
      if (c != std::string::npos) w.insert(c, mark);
      return pick(2) ? refit(w) : w;
    case 12: {  // a short or frame-start-only item
      const std::string shorts[] = {
          "",
          "{",
          "}",
          mark,
          R"({"payload_bytes":5,"original_payload":)",
          R"({"payload_bytes":,"original_payload":1)",
          R"({"payload_bytes":1,"original_payload":1,"envelope_bytes":40})"};
      return shorts[pick(std::size(shorts))];
    }
    case 13:
      return python_envelope(static_cast<int>(pick(1000)));
    case 14:  // the same length, another end
      if (a != std::string::npos) w[a + 15] = 'z';
      return w;
    case 15:  // a NUL or a multi-byte character in the tail
      w.insert(w.empty() ? 0 : w.size() - 1, pick(2) ? std::string(1, '\0') : "\xc3\xa9");
      return pick(2) ? refit(w) : w;
    case 16:  // the id or queue marker edited
      if (c != std::string::npos) {
        const std::size_t id = w.find(R"(,"id":")", c);
        if (id != std::string::npos && id + 60 < w.size())
          w[id + pick(60)] = bytes[pick(sizeof bytes)];
      }
      return w;
    case 17:  // any byte of the body changed, envelope_bytes refitted (same head)
      if (!w.empty()) w[pick(w.size())] = bytes[pick(sizeof bytes)];
      return refit(w);
    default:  // kept as dlq wrote it
      return w;
  }
}

}  // namespace

TEST_CASE("an item holding a proved head after other bytes proves nothing by that head",
          "[redis][replay][fast]") {
  // For a length it has seen before, the script proves an item's head by finding the head
  // proved last for that length at the item's start. The same head further in — here after
  // a parked flag, over a payload shortened by as much, so that the id, queue and end are
  // where that head would put them — must not pass for it.
  const std::string url = test::shared_redis_url();
  RedisListStorage storage(url, test::unique_layout());
  RawClient raw(url);
  const std::string dead = storage.key("orders", ListKind::dead);
  const std::string payload = "\"" + std::string(30, 'x') + "\"";
  const std::string a = new_id(), b = new_id(), c = new_id();
  const std::string good = dlq_envelope(payload, false, a);
  std::string twin = good;  // the same length: the second one makes the head remembered
  twin.replace(twin.find(a), a.size(), b);
  const std::size_t mark = good.find(R"(,"original_payload":)");
  REQUIRE(mark != std::string::npos);
  const std::string head = good.substr(0, mark + 20);
  const std::string flag = R"({"parked":true,)";
  std::string bad = flag + head + "\"" + std::string(payload.size() - 2 - flag.size(), 'x') +
                    "\"" + good.substr(head.size() + payload.size());
  bad.replace(bad.find(a), a.size(), c);
  REQUIRE(bad.size() == good.size());
  REQUIRE(bad.find(head) == flag.size());
  std::string cut, id;
  REQUIRE_FALSE(frame_rule(bad, cut, id));
  raw.rpush(dead, {good, twin, bad, dlq_envelope("1")});
  RedisListStorage::replay_cursor cursor;
  const FastStep f = storage.replay_fast("orders", cursor, 100, "orders", true);
  CHECK(f.moved == 2);
  CHECK(f.unprovable == 1);
  CHECK(f.ids == std::vector<std::string>{a, b});
  CHECK(raw.list(storage.source_key("orders")) == std::vector<std::string>{payload, payload});
  replays_as_compare_and_move({good, twin, bad, dlq_envelope("2")});
}

TEST_CASE("hostile items after items sharing their head or length: the fast step keeps its rule",
          "[redis][replay][fast]") {
  // Thousands of dlq entries and edits of them (the same head over another item, the same
  // length with another end, payload_bytes and envelope_bytes written otherwise, the mark at
  // another offset, joined, cut, flagged, NUL and UTF-8 bytes), each right after entries it
  // shares its head or length with: every item the script takes must pass the frame rule
  // written out above and be pushed as exactly its payload; every item it refuses must fail
  // it. Each item is classified once, in a step that has seen the entries before it.
  const std::string url = test::shared_redis_url();
  RedisListStorage storage(url, test::unique_layout());
  RawClient raw(url);
  const std::string dead = storage.key("orders", ListKind::dead);
  std::mt19937 rng(20261202);
  const std::string payloads[] = {"1",
                                  "[2,3]",
                                  R"({"job":"aaaa","pad":"xxxxxxxx"})",
                                  R"({"job":"bbbb","pad":"yyyyyyyy"})",
                                  "\"caf\xc3\xa9 \xf0\x9f\x98\x80\"",
                                  R"({"s":",\"original_payload\":","e":",\"envelope_bytes\":9}"})",
                                  R"({"id":")" + new_id() + R"(","queue":"q"})",
                                  "\"" + std::string(999, 'y') + "\"",
                                  "\"" + std::string(1000, 'y') + "\"",
                                  std::string("{\"nul\":\"\0\"}", 11)};
  std::vector<std::string> items;
  for (int group = 0; group < 1000; ++group) {
    std::vector<std::string> base;
    for (int k = 0; k < 3; ++k)
      base.push_back(dlq_envelope(payloads[rng() % std::size(payloads)], rng() % 16 == 0));
    for (int k = 0; k < 6; ++k) {
      std::string w = base[rng() % base.size()];
      for (std::size_t e = rng() % 3; e > 0; --e)
        w = hostile_edit(std::move(w), rng);
      items.push_back(std::move(w));
    }
  }
  std::size_t taken = 0, refused = 0;
  for (std::size_t from = 0; from < items.size(); from += 1000) {
    const std::vector<std::string> part(
        items.begin() + static_cast<std::ptrdiff_t>(from),
        items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), from + 1000)));
    raw.rpush(dead, part);
  }
  std::vector<std::string> expected;
  std::size_t at = 0;
  while (at < items.size()) {
    RedisListStorage::replay_cursor cursor;
    const FastStep f = storage.replay_fast("orders", cursor, 63, "orders", true);
    REQUIRE(f.moved + f.unprovable > 0);
    REQUIRE(at + f.moved + f.unprovable <= items.size());
    REQUIRE(f.ids.size() == f.moved);
    for (std::size_t k = 0; k < f.moved + f.unprovable; ++k) {
      const std::string& w = items[at + k];
      std::string payload, id;
      INFO("item " << at + k << ": " << w);
      const bool provable = frame_rule(w, payload, id);
      CHECK(provable == (k < f.moved));
      if (provable && k < f.moved) {
        CHECK(f.ids[k] == id);
        expected.push_back(payload);
      }
    }
    taken += f.moved;
    refused += f.unprovable;
    at += f.moved + f.unprovable;
    if (f.unprovable > 0)  // what the compare-and-move step would take away
      raw.cmd({"LTRIM", dead, std::to_string(f.unprovable), "-1"});
  }
  CHECK(raw.integer({"LLEN", dead}) == 0);
  CHECK(raw.list(storage.source_key("orders")) == expected);
  // Both kinds were met often enough to mean something.
  CHECK(taken > 1500);
  CHECK(refused > 1500);
}

}  // namespace test_replay_fast

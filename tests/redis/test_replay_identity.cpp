// Replay verified by identity (Decision::identity): the replay script compares an item's length
// and its id bytes instead of all its bytes. These tests prove that a shifted or replaced window
// is still detected — with items that are equal outside their ids, so that only the id check
// can catch it — that items without an identity (the Python seed's entries, hand-written ids)
// keep the full byte comparison, and what a forged duplicate id can and cannot do.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/redis/list_storage.hpp"
#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"

namespace test_replay_identity {

using namespace dlq;
using dlq::test::new_id;
using dlq::test::RawClient;

namespace {

// An item shaped like an envelope: {"p":"<payload>","id":"<uuid>"}. With equal-width payloads
// every item has the same length and its id at the same offset.
std::string item(std::string_view payload, std::string_view id) {
  return "{\"p\":\"" + std::string(payload) + "\",\"id\":\"" + std::string(id) + "\"}";
}
std::string num(int n) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%06d", n);
  return buf;
}
// The payload span of item(): the characters between the quotes of "p".
std::string_view payload_of(std::string_view raw) {
  const auto first = raw.find("\"p\":\"") + 5;
  return raw.substr(first, raw.find('"', first) - first);
}
// The id value span with its quotes (a UUID: 38 bytes), as the front end gives it.
std::string_view id_span_of(std::string_view raw) {
  return raw.substr(raw.find("\"id\":") + 5, 38);
}

const auto by_identity = [](std::string_view raw, Decision& d) {
  d.action = Action::replay;
  d.payload = payload_of(raw);
  d.identity = id_span_of(raw);
};
const auto by_bytes = [](std::string_view raw, Decision& d) {
  d.action = Action::replay;
  d.payload = payload_of(raw);
};

struct Fixture {
  std::string url = test::shared_redis_url();
  RedisListStorage storage{url, test::unique_layout()};
  RawClient raw{url};

  std::string dead(const std::string& q) { return storage.key(q, ListKind::dead); }
  std::string source(const std::string& q) { return storage.source_key(q); }

  // n items that differ only in their ids, all with payload "same".
  std::vector<std::string> fill_twins(const std::string& q, int n) {
    std::vector<std::string> items;
    for (int i = 0; i < n; ++i)
      items.push_back(item("same", new_id()));
    raw.rpush(dead(q), items);
    return items;
  }
  std::vector<std::string> fill_numbered(const std::string& q, int n) {
    std::vector<std::string> items;
    for (int i = 0; i < n; ++i)
      items.push_back(item(num(i), new_id()));
    raw.rpush(dead(q), items);
    return items;
  }
  template <class Decide>
  std::size_t replay(const std::string& q, std::size_t batch, Decide decide) {
    RedisListStorage::replay_cursor cursor;
    std::size_t examined = 0;
    for (int guard = 0; guard < 100000; ++guard) {
      auto r = storage.replay_step(q, cursor, batch, decide);
      if (r.conflict) continue;
      if (r.examined == 0) break;
      examined += r.examined;
    }
    return examined;
  }
};

}  // namespace

TEST_CASE("with identities, an LPOP between read and apply is a conflict and nothing moves",
          "[redis][replay][identity]") {
  Fixture f;
  // Equal length, equal payload: after a shift by one, only the ids tell the items apart.
  const auto items = f.fill_twins("orders", 10);
  RawClient other(f.url);
  bool popped = false;
  auto decide = [&](std::string_view raw, Decision& d) {
    if (!popped) {  // the seed's replay_one pops the head while we decide
      other.cmd({"LPOP", f.dead("orders")});
      popped = true;
    }
    by_identity(raw, d);
  };
  RedisListStorage::replay_cursor cursor;
  auto r = f.storage.replay_step("orders", cursor, 5, decide);
  CHECK(r.conflict);
  CHECK(f.raw.list(f.dead("orders")) == std::vector<std::string>(items.begin() + 1, items.end()));
  CHECK(f.raw.list(f.source("orders")).empty());
  CHECK(f.storage.size("orders", ListKind::corrupt) == 0);
  // Decided anew, the step applies to the items really there.
  r = f.storage.replay_step("orders", cursor, 5, decide);
  CHECK_FALSE(r.conflict);
  CHECK(r.examined == 5);
  CHECK(f.raw.list(f.source("orders")) == std::vector<std::string>(5, "same"));
  CHECK(f.raw.list(f.dead("orders")) == std::vector<std::string>(items.begin() + 6, items.end()));
}

TEST_CASE("with identities, a stale prefetched window and a filtered window are detected",
          "[redis][replay][identity]") {
  Fixture f;
  const auto items = f.fill_twins("orders", 8);
  RawClient other(f.url);

  SECTION("an LREM in the middle of a prefetched window") {
    RedisListStorage::replay_cursor cursor;
    auto r = f.storage.replay_step("orders", cursor, 2, by_identity);  // prefetches 2..7
    REQUIRE(r.examined == 2);
    REQUIRE(cursor.has_read_ahead());
    other.integer({"LREM", f.dead("orders"), "1", items[3]});  // window now 2,4,5,...
    r = f.storage.replay_step("orders", cursor, 4, by_identity);
    CHECK(r.conflict);
    CHECK(f.storage.size("orders", ListKind::dead) == 5);
    CHECK(f.raw.list(f.source("orders")).size() == 2);
  }
  SECTION("kept items before the decided ones (LSET + LREM path)") {
    // Keep the first two, replay the rest; another replayer takes item 3 meanwhile.
    int calls = 0;
    auto decide = [&](std::string_view raw, Decision& d) {
      if (calls++ == 0) other.integer({"LREM", f.dead("orders"), "1", items[3]});
      if (raw == items[0] || raw == items[1]) return;
      by_identity(raw, d);
    };
    RedisListStorage::replay_cursor cursor;
    auto r = f.storage.replay_step("orders", cursor, 8, decide);
    CHECK(r.conflict);
    CHECK(f.storage.size("orders", ListKind::dead) == 7);
    CHECK(f.raw.list(f.source("orders")).empty());
    r = f.storage.replay_step("orders", cursor, 8, decide);
    CHECK_FALSE(r.conflict);
    CHECK(f.raw.list(f.dead("orders")) == std::vector<std::string>{items[0], items[1]});
    CHECK(f.raw.list(f.source("orders")).size() == 5);
  }
}

TEST_CASE("an identity is checked with the item's length and offset", "[redis][replay][identity]") {
  Fixture f;
  const std::string id = new_id();
  // {"p":"<p>","id":<sep>"<id>","z":"<z>"}
  auto make = [](std::string_view p, std::string_view sep, std::string_view uuid,
                 std::string_view z) {
    return "{\"p\":\"" + std::string(p) + "\",\"id\":" + std::string(sep) + "\"" +
           std::string(uuid) + "\",\"z\":\"" + std::string(z) + "\"}";
  };
  const std::string a = make("aaaa", "", id, "zz");
  f.raw.rpush(f.dead("q"), {a});
  std::string replacement;
  auto replace_then = [&](std::string_view raw, Decision& d) {
    f.raw.cmd({"LSET", f.dead("q"), "0", replacement});
    d.action = Action::replay;
    d.payload = payload_of(raw);
    d.identity = id_span_of(raw);
  };

  SECTION("same id, one byte longer: conflict") {
    replacement = make("aaaaa", "", id, "zz");
  }
  SECTION("same id and length, the id one byte further on: conflict") {
    replacement = make("aaaa", " ", id, "z");
    REQUIRE(replacement.size() == a.size());
  }
  SECTION("same length, another id: conflict") {
    replacement = make("aaaa", "", new_id(), "zz");
  }
  SECTION("control: byte-identical: applied") {
    replacement = a;
  }
  RedisListStorage::replay_cursor cursor;
  auto r = f.storage.replay_step("q", cursor, 10, replace_then);
  if (replacement == a) {
    CHECK_FALSE(r.conflict);
    CHECK(f.raw.list(f.source("q")) == std::vector<std::string>{"aaaa"});
  } else {
    CHECK(r.conflict);
    CHECK(f.raw.list(f.dead("q")) == std::vector<std::string>{replacement});
    CHECK(f.raw.list(f.source("q")).empty());
  }
}

TEST_CASE("only the identity is compared: a forged twin passes, and pushes its own bytes",
          "[redis][replay][identity]") {
  // The documented limit: an item crafted to carry another entry's id at the same offset with
  // the same length passes the identity check. What is pushed is then the bytes of the item
  // actually removed (at the decided payload span) — never another entry's loss. Without an
  // identity the full comparison refuses it.
  Fixture f;
  const std::string id = new_id();
  const std::string original = item("good", id);
  const std::string forged = item("evil", id);
  REQUIRE(forged.size() == original.size());
  f.raw.rpush(f.dead("q"), {original});
  auto forge_then = [&](auto decide) {
    return [&, decide](std::string_view raw, Decision& d) {
      f.raw.cmd({"LSET", f.dead("q"), "0", forged});
      decide(raw, d);
    };
  };
  RedisListStorage::replay_cursor cursor;

  SECTION("with the identity") {
    auto r = f.storage.replay_step("q", cursor, 10, forge_then(by_identity));
    CHECK_FALSE(r.conflict);
    CHECK(f.raw.list(f.source("q")) == std::vector<std::string>{"evil"});
    CHECK(f.storage.size("q", ListKind::dead) == 0);
  }
  SECTION("without an identity") {
    auto r = f.storage.replay_step("q", cursor, 10, forge_then(by_bytes));
    CHECK(r.conflict);
    CHECK(f.raw.list(f.dead("q")) == std::vector<std::string>{forged});
    CHECK(f.raw.list(f.source("q")).empty());
  }
  SECTION("with an identity that is not a view into the raw item (ignored: full comparison)") {
    const std::string elsewhere(id_span_of(original));
    auto not_a_view = [&](std::string_view raw, Decision& d) {
      by_bytes(raw, d);
      d.identity = elsewhere;
    };
    auto r = f.storage.replay_step("q", cursor, 10, forge_then(not_a_view));
    CHECK(r.conflict);
    CHECK(f.raw.list(f.source("q")).empty());
  }
}

TEST_CASE("with identities, a raw item still counts twice in the byte budget",
          "[redis][replay][identity]") {
  // The budget bounds how long a script blocks the server: an item verified by id is re-read
  // and has its payload cut out of it, about as much work as one compared by all its bytes.
  const std::string url = test::shared_redis_url();
  auto o = test::unique_layout();
  o.max_batch_bytes = 20000;
  RedisListStorage s(url, o);
  RawClient raw(url);
  std::vector<std::string> items;
  for (int i = 0; i < 50; ++i) {
    items.push_back(item(std::string(1000 - item("", new_id()).size(), 'x'), new_id()));
    REQUIRE(items.back().size() == 1000);
  }
  raw.rpush(s.key("q", ListKind::dead), items);
  RedisListStorage::replay_cursor c;
  auto r = s.replay_step("q", c, 1000, by_identity);
  CHECK(r.examined == 10);
  // A step the budget ended reads ahead a quarter more than it took, not 1000 items.
  CHECK(c.read_ahead() == 13);
  r = s.replay_step("q", c, 1000, by_bytes);
  CHECK(r.examined == 10);
  CHECK(s.size("q", ListKind::dead) == 30);
  CHECK(raw.list(s.source_key("q")).size() == 20);
}

TEST_CASE("with identities, concurrent replayers and a popping consumer: every item once",
          "[redis][replay][identity][concurrency]") {
  Fixture f;
  const auto items = f.fill_numbered("orders", 20000);
  std::vector<std::string> popped;
  std::mutex m;
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      if (t == 2) {  // the seed's replay_one: LPOP, then push elsewhere
        RawClient c(f.url);
        for (int i = 0; i < 3000; ++i) {
          auto r = c.cmd({"LPOP", f.dead("orders")});
          if (r->type != REDIS_REPLY_STRING) break;
          std::lock_guard<std::mutex> lock(m);
          popped.emplace_back(payload_of(redis::view(*r)));
        }
        return;
      }
      RedisListStorage replayer(f.url, f.storage.options());
      RedisListStorage::replay_cursor cursor;
      for (int guard = 0; guard < 100000; ++guard) {
        auto r = replayer.replay_step("orders", cursor, 500, by_identity);
        if (!r.conflict && r.examined == 0) break;
      }
    });
  }
  for (auto& t : threads)
    t.join();
  f.replay("orders", 1000, by_identity);  // whatever a racing finish left
  auto moved = f.raw.list(f.source("orders"));
  moved.insert(moved.end(), popped.begin(), popped.end());
  std::sort(moved.begin(), moved.end());
  std::vector<std::string> expected;
  for (int i = 0; i < 20000; ++i)
    expected.push_back(num(i));
  CHECK(moved == expected);
  CHECK(f.storage.size("orders", ListKind::dead) == 0);
}

// --- through the front end ------------------------------------------------------------------

namespace {

struct FrontFixture {
  std::string url = test::shared_redis_url();
  RedisListStorage storage{url, test::unique_layout()};
  RawClient raw{url};
  DeadLetterQueue<RedisListStorage&> q{storage};

  std::string dead() { return storage.key("orders", ListKind::dead); }
  std::vector<std::string> source() { return raw.list(storage.source_key("orders")); }
};

// A copy of `raw` with the first 'A' of its payload turned into 'B': same length, same id.
std::string tampered(std::string raw) {
  const auto at = raw.find("AAAA");
  REQUIRE(at != std::string::npos);
  raw[at] = 'B';
  return raw;
}

}  // namespace

TEST_CASE(
    "replay_all: dlq entries are verified by id — an LPOP mid-batch is a conflict, "
    "nothing lost or doubled",
    "[redis][replay][identity]") {
  FrontFixture f;
  std::vector<std::string> payloads;
  for (int i = 0; i < 40; ++i) {
    payloads.push_back("{\"n\":\"" + num(i) + "\"}");  // equal lengths
    f.q.send_to_dlq("orders", payloads.back(), "timeout", 1, "w");
  }
  RawClient other(f.url);
  std::vector<std::string> popped;
  ReplayOptions o;
  o.filter = [&](const Entry& e) {
    // While the batches of entries 0 and 10 are decided, another client pops the head.
    if ((e.payload == payloads[0] || e.payload == payloads[10]) && popped.size() < 2) {
      auto r = other.cmd({"LPOP", f.dead()});
      REQUIRE(r->type == REDIS_REPLY_STRING);
      popped.push_back(parse_entry(std::string(redis::view(*r))).payload);
    }
    return true;
  };
  const auto report = f.q.replay("orders", o);
  CHECK(report.conflicts >= 2);
  CHECK(report.replayed == 38);
  CHECK(f.q.size("orders") == 0);
  auto moved = f.source();
  CHECK(std::is_sorted(moved.begin(), moved.end()));
  moved.insert(moved.end(), popped.begin(), popped.end());
  std::sort(moved.begin(), moved.end());
  CHECK(moved == payloads);
}

TEST_CASE("replay_all: dlq entries are checked by id, seed entries and other ids by all bytes",
          "[redis][replay][identity]") {
  FrontFixture f;
  std::string entry;
  bool uses_identity = false;
  SECTION("an entry dlq wrote (UUIDv7 id): identity") {
    f.q.send_to_dlq("orders", "{\"v\":\"AAAA\"}", "timeout", 1, "w");
    entry = f.raw.list(f.dead()).at(0);
    uses_identity = true;
  }
  SECTION("an entry the Python seed wrote (no id): all bytes") {
    entry =
        "{\"original_payload\": {\"v\": \"AAAA\"}, \"queue\": \"orders\", \"error\": \"timeout\", "
        "\"attempt\": 1, \"worker\": \"w\", \"dead_lettered_at\": "
        "\"2026-11-30T03:32:19.123456+00:00\"}";
    f.raw.rpush(f.dead(), {entry});
  }
  SECTION("an entry with an id that is not a UUID: all bytes") {
    entry =
        "{\"original_payload\":{\"v\":\"AAAA\"},\"queue\":\"orders\",\"error\":\"timeout\","
        "\"id\":\"order-17\"}";
    f.raw.rpush(f.dead(), {entry});
  }
  // While the entry is decided, it is replaced by a same-length copy with another payload
  // byte. Verified by id the change goes unseen (the copy's own payload is pushed); verified
  // by all bytes it is a conflict and the retry replays the copy. Either way exactly the bytes
  // of the item removed are pushed, once.
  const std::string copy = tampered(entry);
  bool replaced = false;
  ReplayOptions o;
  o.filter = [&](const Entry&) {
    if (!replaced) f.raw.cmd({"LSET", f.dead(), "0", copy});
    replaced = true;
    return true;
  };
  const auto report = f.q.replay("orders", o);
  CHECK(report.replayed == 1);
  CHECK(report.conflicts == (uses_identity ? 0u : 1u));
  CHECK(f.q.size("orders") == 0);
  const auto src = f.source();
  REQUIRE(src.size() == 1);
  CHECK(src[0].find("BAAA") != std::string::npos);
}

// --- what the front end gives as identity ----------------------------------------------------

namespace {

// MemoryStorage that records the identity of every replay decision (and may claim to be keyed
// by job id, as a key-value storage is).
template <bool Keyed>
struct RecordingStorage {
  static constexpr bool keyed_by_job_id = Keyed;
  using replay_cursor = MemoryStorage::replay_cursor;
  MemoryStorage inner;
  std::vector<std::string> identities;  // per replay decision; "<none>" when empty
  std::vector<std::string> raws;

  std::size_t push(const Record& r) { return inner.push(r); }
  void push_many(const std::vector<Record>& r) { inner.push_many(r); }
  std::size_t size(std::string_view q, ListKind k) { return inner.size(q, k); }
  std::vector<std::string> range(std::string_view q, ListKind k, std::size_t s, std::size_t n) {
    return inner.range(q, k, s, n);
  }
  bool remove(std::string_view q, ListKind k, std::string_view id, std::string_view raw) {
    return inner.remove(q, k, id, raw);
  }
  std::size_t purge(std::string_view q, ListKind k) { return inner.purge(q, k); }
  std::vector<std::string> queues() { return inner.queues(); }
  std::vector<std::size_t> sizes(const std::vector<std::string>& q) { return inner.sizes(q); }
  StepResult replay_step(std::string_view q, replay_cursor& c, std::size_t n, Decider decide) {
    auto record = [&](std::string_view raw, Decision& d) {
      decide(raw, d);
      if (d.action != Action::replay) return;
      if (!d.identity.empty()) {
        // A view into raw, or the storage could not use it.
        REQUIRE(d.identity.data() >= raw.data());
        REQUIRE(d.identity.data() + d.identity.size() <= raw.data() + raw.size());
      }
      identities.push_back(d.identity.empty() ? "<none>" : std::string(d.identity));
      raws.emplace_back(raw);
    };
    return inner.replay_step(q, c, n, Decider(record));
  }
};

}  // namespace

TEST_CASE("the front end gives the stored UUID as identity, nothing for other entries",
          "[replay][identity]") {
  RecordingStorage<false> s;
  DeadLetterQueue<RecordingStorage<false>&> q(s);
  const std::string id = q.send_to_dlq("orders", "{\"a\":1}", "e", 1, "w");
  Failure with_job;
  with_job.error = "e";
  with_job.job_id = "3b241101-e2bb-4255-8caf-4136c566a962";  // a UUID, but not the entry id
  const std::string id2 = q.send_to_dlq("orders", "\"text\"", with_job);
  s.inner.push(Record{"orders", "", "",
                      "{\"original_payload\": 1, \"queue\": \"orders\", \"error\": \"e\"}"});
  s.inner.push(Record{"orders", "", "",
                      "{\"original_payload\":2,\"queue\":\"orders\",\"id\":\"order-17\"}"});
  s.inner.push(Record{"orders", "", "",
                      "{\"original_payload\":3,\"id\":\"0190AAAA-BBBB-7CCC-8DDD-EEEEEEEEEEEE\"}"});
  s.inner.push(Record{"orders", "", "",
                      "{\"original_payload\":4,\"id\":\"0190aaaa-bbbb-7ccc-8ddd-eeeeeeeeeee\"}"});
  CHECK(q.replay_all("orders").replayed == 6);
  CHECK(s.identities ==
        std::vector<std::string>{"\"" + id + "\"", "\"" + id2 + "\"", "<none>", "<none>",
                                 "\"0190AAAA-BBBB-7CCC-8DDD-EEEEEEEEEEEE\"", "<none>"});
}

TEST_CASE("a storage keyed by job id gets no identity for entries whose id is the job id",
          "[replay][identity]") {
  RecordingStorage<true> s;
  DeadLetterQueue<RecordingStorage<true>&> q(s);
  Failure f;
  f.error = "e";
  f.job_id = "3b241101-e2bb-4255-8caf-4136c566a962";
  CHECK(q.send_to_dlq("orders", "1", f) == f.job_id);
  const std::string generated = q.send_to_dlq("orders", "2", "e", 1, "w");
  CHECK(q.replay_all("orders").replayed == 2);
  CHECK(s.identities == std::vector<std::string>{"<none>", "\"" + generated + "\""});
}

}  // namespace test_replay_identity

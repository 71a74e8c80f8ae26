// RedisListStorage at the storage level (raw bytes, hand-written deciders) against the shared
// test server. Every test uses its own key prefix, so test processes can run in parallel.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "contract/range_bytes_checks.hpp"
#include "dlq/redis/list_storage.hpp"
#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"
#include "support/redis_process.hpp"

namespace test_redis_list {

using namespace dlq;
using dlq::test::RawClient;

namespace {

struct Fixture {
  Fixture() = default;
  explicit Fixture(std::string server_url) : url(std::move(server_url)) {}
  std::string url = test::shared_redis_url();
  std::string prefix = test::unique_prefix();
  RedisListStorage storage{url, test::unique_layout(prefix)};
  RawClient raw{url};

  std::string dead(const std::string& q) { return storage.key(q, ListKind::dead); }
  std::string corrupt(const std::string& q) { return storage.key(q, ListKind::corrupt); }
  std::string source(const std::string& q) { return storage.source_key(q); }

  void push(const std::string& queue, const std::string& envelope) {
    storage.push(Record{queue, "", "", envelope});
  }
  std::vector<std::string> fill(const std::string& queue, int n, const std::string& tag = "e") {
    std::vector<std::string> items;
    for (int i = 0; i < n; ++i)
      items.push_back(tag + std::to_string(i));
    raw.rpush(dead(queue), items);
    return items;
  }
  // Runs replay steps until the list is exhausted; returns (examined, conflicts).
  template <class Decide>
  std::pair<std::size_t, int> replay(const std::string& queue, std::size_t batch, Decide decide) {
    RedisListStorage::replay_cursor cursor;
    std::size_t examined = 0;
    int conflicts = 0;
    for (int guard = 0; guard < 100000; ++guard) {
      auto r = storage.replay_step(queue, cursor, batch, decide);
      if (r.conflict) {
        ++conflicts;
        continue;
      }
      if (r.examined == 0) break;
      examined += r.examined;
    }
    return {examined, conflicts};
  }
};

// Payload = the raw bytes; destination = the item's own queue.
const auto pass_through = [](std::string_view raw, Decision& d) {
  d.action = Action::replay;
  d.payload = raw;
};

}  // namespace

TEST_CASE("push, size, range, remove and purge", "[redis][list]") {
  Fixture f;
  for (int i = 0; i < 5; ++i)
    f.push("orders", "env" + std::to_string(i));
  CHECK(f.storage.size("orders", ListKind::dead) == 5);
  CHECK(f.storage.size("orders", ListKind::corrupt) == 0);
  CHECK(f.storage.range("orders", ListKind::dead, 1, 2) ==
        std::vector<std::string>{"env1", "env2"});
  CHECK(f.storage.range("orders", ListKind::dead, 4, 100) == std::vector<std::string>{"env4"});
  CHECK(f.storage.range("orders", ListKind::dead, 9, 100).empty());
  CHECK(f.storage.range("orders", ListKind::dead, 0, 0).empty());
  CHECK(f.storage.range("orders", ListKind::dead, 3, static_cast<std::size_t>(-1)).size() == 2);
  CHECK(f.storage.remove("orders", ListKind::dead, "id", "env2"));
  CHECK_FALSE(f.storage.remove("orders", ListKind::dead, "id", "env2"));
  CHECK(f.raw.list(f.dead("orders")) == std::vector<std::string>{"env0", "env1", "env3", "env4"});
  CHECK(f.storage.purge("orders", ListKind::dead) == 4);
  CHECK(f.storage.purge("orders", ListKind::dead) == 0);
  CHECK(f.storage.size("orders", ListKind::dead) == 0);
}

TEST_CASE("the default key layout shares one hash tag per queue", "[redis][list]") {
  RedisListStorage s(redis::ConnectionOptions{});
  CHECK(s.key("orders", ListKind::dead) == "dlq:{orders}");
  CHECK(s.key("orders", ListKind::corrupt) == "dlq:{orders}:corrupt");
  CHECK(s.source_key("orders") == "queue:{orders}");
}

TEST_CASE("bad key patterns and empty queue names are invalid_argument", "[redis][list]") {
  RedisListOptions o;
  o.dead_key = "dlq:";
  CHECK_THROWS_AS(RedisListStorage(redis::ConnectionOptions{}, o), dlq::invalid_argument);
  o.dead_key = "dlq:*:*";
  CHECK_THROWS_AS(RedisListStorage(redis::ConnectionOptions{}, o), dlq::invalid_argument);
  o.dead_key = "x:*";
  o.corrupt_key = "x:*";
  CHECK_THROWS_AS(RedisListStorage(redis::ConnectionOptions{}, o), dlq::invalid_argument);
  CHECK_THROWS_AS(RedisListStorage("redis://host:notaport"), dlq::invalid_argument);
  Fixture f;
  CHECK_THROWS_AS(f.push("", "x"), dlq::invalid_argument);
  CHECK_THROWS_AS(f.storage.size("", ListKind::dead), dlq::invalid_argument);
}

TEST_CASE("push_many stores a batch across queues in order", "[redis][list]") {
  Fixture f;
  std::vector<std::string> envs;
  for (int i = 0; i < 300; ++i)
    envs.push_back("b" + std::to_string(i));
  std::vector<Record> records;
  for (int i = 0; i < 300; ++i) {
    records.push_back(Record{i % 3 == 2 ? "b" : "a", "", "", envs[static_cast<std::size_t>(i)]});
  }
  f.storage.push_many(records);
  f.storage.push_many({});
  auto a = f.raw.list(f.dead("a"));
  auto b = f.raw.list(f.dead("b"));
  CHECK(a.size() == 200);
  CHECK(b.size() == 100);
  CHECK(a[0] == "b0");
  CHECK(a[1] == "b1");
  CHECK(a[2] == "b3");
  CHECK(b[0] == "b2");
  CHECK(b[99] == "b299");
}

TEST_CASE("queues are discovered with SCAN; sizes is one pipelined call", "[redis][list]") {
  Fixture f;
  const std::vector<std::string> names = {"orders", "a*b", "q?[x]\\y", "with space", "ünïcode"};
  for (const auto& q : names)
    f.push(q, "x");
  f.raw.rpush(f.corrupt("only-corrupt"), {"junk"});
  f.raw.cmd({"SET", f.dead("not-a-list"), "string value"});
  auto found = f.storage.queues();
  std::vector<std::string> expected = names;
  expected.push_back("only-corrupt");
  std::sort(expected.begin(), expected.end());
  CHECK(found == expected);
  f.push("orders", "y");
  CHECK(f.storage.sizes({"orders", "a*b", "nothing-here"}) == std::vector<std::size_t>{2, 1, 0});
  CHECK(f.storage.sizes({}).empty());
}

TEST_CASE("the seed's key layout is usable and discovered", "[redis][list]") {
  const std::string url = test::shared_redis_url();
  const std::string p = test::unique_prefix();
  RedisListOptions o;
  o.dead_key = p + "dlq:*";
  o.source_key = p + "queue:*";
  o.corrupt_key = p + "dlq:*:corrupt";
  RedisListStorage s(url, o);
  s.push(Record{"orders", "", "", "x"});
  s.push(Record{"billing", "", "", "y"});
  RawClient raw(url);
  raw.rpush(p + "dlq:orders:corrupt", {"junk"});
  CHECK(raw.list(p + "dlq:orders") == std::vector<std::string>{"x"});
  CHECK(s.queues() == std::vector<std::string>{"billing", "orders"});
  RedisListStorage::replay_cursor c;
  auto r = s.replay_step("orders", c, 10, pass_through);
  CHECK(r.examined == 1);
  CHECK(raw.list(p + "queue:orders") == std::vector<std::string>{"x"});
}

TEST_CASE("replay-all moves every item, in order, one batch per step", "[redis][list][replay]") {
  Fixture f;
  auto items = f.fill("orders", 2500);
  auto [examined, conflicts] = f.replay("orders", 1000, pass_through);
  CHECK(examined == 2500);
  CHECK(conflicts == 0);
  CHECK(f.raw.list(f.source("orders")) == items);
  CHECK(f.storage.size("orders", ListKind::dead) == 0);
  CHECK(f.storage.recover("orders") == 0);
}

TEST_CASE("filtered replay keeps non-matching items in place, in order", "[redis][list][replay]") {
  Fixture f;
  auto items = f.fill("orders", 1000);
  auto decide = [](std::string_view raw, Decision& d) {
    const int n = std::stoi(std::string(raw.substr(1)));
    if (n % 3 == 0) {
      d.action = Action::replay;
      d.payload = raw;
    }
  };
  auto [examined, conflicts] = f.replay("orders", 128, decide);
  CHECK(examined == 1000);
  CHECK(conflicts == 0);
  std::vector<std::string> moved, kept;
  for (const auto& it : items)
    (std::stoi(it.substr(1)) % 3 == 0 ? moved : kept).push_back(it);
  CHECK(f.raw.list(f.source("orders")) == moved);
  CHECK(f.raw.list(f.dead("orders")) == kept);
  CHECK(f.storage.recover("orders") == 0);  // no tombstone is left behind
}

TEST_CASE("set_aside moves the raw item to the corrupt list; replay can redirect",
          "[redis][list][replay]") {
  Fixture f;
  f.raw.rpush(f.dead("orders"), {"good1", "BAD1", "good2", "keep", "BAD2", "other"});
  auto decide = [](std::string_view raw, Decision& d) {
    if (raw.substr(0, 3) == "BAD") {
      d.action = Action::set_aside;
    } else if (raw == "other") {
      d.action = Action::replay;
      d.destination = "billing";
      d.payload = "payload-of-other";
    } else if (raw != "keep") {
      d.action = Action::replay;
      d.payload = raw.substr(4);
    }
  };
  auto [examined, conflicts] = f.replay("orders", 1000, decide);
  CHECK(examined == 6);
  CHECK(f.raw.list(f.corrupt("orders")) == std::vector<std::string>{"BAD1", "BAD2"});
  CHECK(f.raw.list(f.source("orders")) == std::vector<std::string>{"1", "2"});
  CHECK(f.raw.list(f.source("billing")) == std::vector<std::string>{"payload-of-other"});
  CHECK(f.raw.list(f.dead("orders")) == std::vector<std::string>{"keep"});
  CHECK(f.storage.size("orders", ListKind::corrupt) == 2);
  CHECK(f.storage.range("orders", ListKind::corrupt, 0, 10).size() == 2);
  CHECK(f.storage.purge("orders", ListKind::corrupt) == 2);
}

TEST_CASE("binary items with NUL bytes replay byte-exact", "[redis][list][replay]") {
  Fixture f;
  const std::string a("\0\x01\xff{\"x\":1}\r\n", 12);
  const std::string b(300, '\0');
  f.push("bin", a);
  f.push("bin", b);
  f.replay("bin", 10, pass_through);
  CHECK(f.raw.list(f.source("bin")) == std::vector<std::string>{a, b});
}

TEST_CASE("a list changed between read and apply is a conflict and nothing is applied",
          "[redis][list][replay]") {
  Fixture f;
  f.fill("orders", 10);
  RedisListStorage::replay_cursor cursor;
  RawClient other(f.url);
  bool popped = false;
  // The seed's replay_one pops the head while we decide: our decided items shifted.
  auto decide = [&](std::string_view raw, Decision& d) {
    if (!popped) {
      other.cmd({"LPOP", f.dead("orders")});
      popped = true;
    }
    d.action = Action::replay;
    d.payload = raw;
  };
  auto r = f.storage.replay_step("orders", cursor, 5, decide);
  CHECK(r.conflict);
  CHECK(f.storage.size("orders", ListKind::dead) == 9);
  CHECK(f.raw.list(f.source("orders")).empty());
  // Called again, it decides anew and succeeds.
  r = f.storage.replay_step("orders", cursor, 5, decide);
  CHECK_FALSE(r.conflict);
  CHECK(r.examined == 5);
  CHECK(f.raw.list(f.source("orders")) == std::vector<std::string>{"e1", "e2", "e3", "e4", "e5"});
}

TEST_CASE("a stale prefetched window is detected by the byte comparison", "[redis][list][replay]") {
  Fixture f;
  f.fill("orders", 6);
  RedisListStorage::replay_cursor cursor;
  auto r = f.storage.replay_step("orders", cursor, 2, pass_through);  // prefetches e2, e3
  CHECK(r.examined == 2);
  REQUIRE(cursor.has_read_ahead());
  f.raw.cmd({"LSET", f.dead("orders"), "0", "replaced"});  // e2 -> replaced
  r = f.storage.replay_step("orders", cursor, 2, pass_through);
  CHECK(r.conflict);
  r = f.storage.replay_step("orders", cursor, 2, pass_through);
  CHECK(r.examined == 2);
  CHECK(f.raw.list(f.source("orders")) == std::vector<std::string>{"e0", "e1", "replaced", "e3"});
}

TEST_CASE("a batch stops at the byte budget", "[redis][list][replay]") {
  const std::string url = test::shared_redis_url();
  auto o = test::unique_layout();
  o.max_batch_bytes = 20000;
  RedisListStorage s(url, o);
  RawClient raw(url);
  std::vector<std::string> items(50, std::string(1000, 'x'));
  raw.rpush(s.key("q", ListKind::dead), items);
  RedisListStorage::replay_cursor c;
  // A raw item counts twice (sent, and re-read by the script); a payload that is a span of
  // it travels as two numbers: 2000 B per item.
  auto r = s.replay_step("q", c, 1000, pass_through);
  CHECK(r.examined == 10);
  CHECK(s.size("q", ListKind::dead) == 40);
  // A payload of its own travels as bytes: 3000 B per item.
  const std::string own(1000, 'y');
  auto other = [&](std::string_view, Decision& d) {
    d.action = Action::replay;
    d.payload = own;
  };
  RedisListStorage::replay_cursor c2;
  r = s.replay_step("q", c2, 1000, other);
  CHECK(r.examined == 7);
  CHECK(s.size("q", ListKind::dead) == 33);
  CHECK(raw.list(s.source_key("q")).back() == own);
}

TEST_CASE("recover removes the tombstones of a step that stopped before its LREM",
          "[redis][list][recover]") {
  // What such a step leaves: its payloads pushed, its receipt marked, its tombstones in place.
  Fixture f;
  const std::string step = "0123456789abcdef0123456789abcdef";
  const std::string tomb = std::string(detail::tombstone_prefix) + step;
  f.raw.cmd({"SET", f.dead("orders") + ":receipt:" + step,
             std::string(redis::scripts::replay_tombstones_mark), "PX", "60000"});
  f.raw.rpush(f.dead("orders"), {"a", tomb, "b", tomb, "c"});
  CHECK(f.storage.recover("orders") == 2);
  CHECK(f.raw.list(f.dead("orders")) == std::vector<std::string>{"a", "b", "c"});
  CHECK(f.raw.list(f.corrupt("orders")).empty());
  CHECK(f.storage.recover("orders") == 0);
  CHECK(f.storage.recover("empty-queue") == 0);
}

TEST_CASE("recover sets aside items that only look like tombstones", "[redis][list][recover]") {
  // A tombstone is recover()'s to delete only when the step that wrote it marked its receipt
  // (before its LSETs). Anything else that starts with the tombstone bytes is someone else's
  // item: set aside to the corrupt list, never deleted.
  Fixture f;
  const std::string foreign("\0dlq:tombstone:not-ours", 23);
  const std::string forged = std::string(detail::tombstone_prefix) + std::string(32, 'a');
  f.raw.rpush(f.dead("orders"), {"a", foreign, "b", forged, "c", foreign});
  CHECK(f.storage.recover("orders") == 0);
  CHECK(f.raw.list(f.dead("orders")) == std::vector<std::string>{"a", "b", "c"});
  auto aside = f.raw.list(f.corrupt("orders"));
  std::sort(aside.begin(), aside.end());
  CHECK(aside == std::vector<std::string>{forged, foreign, foreign});
  CHECK(f.storage.recover("orders") == 0);
  CHECK(f.raw.list(f.corrupt("orders")).size() == 3);
}

TEST_CASE("recover() during a filtered replay finds nothing to remove or set aside",
          "[redis][list][recover][concurrency]") {
  // The replay's tombstones exist only inside its atomic script, so a concurrent recover()
  // never sees one, and it must never touch an entry.
  Fixture f;
  std::vector<std::string> items, kept, moved;
  for (int i = 0; i < 1500; ++i) {
    kept.push_back("k" + std::to_string(i));
    moved.push_back("m" + std::to_string(i));
    items.push_back(kept.back());
    items.push_back(moved.back());
  }
  f.raw.rpush(f.dead("orders"), items);
  std::atomic<bool> done{false};
  std::atomic<std::size_t> recovered{0};
  std::thread recoverer([&] {
    RedisListStorage other(f.url, test::unique_layout(f.prefix));
    while (!done)
      recovered += other.recover("orders");
  });
  const auto odd_ones = [](std::string_view raw, Decision& d) {
    if (raw.front() == 'k') return;  // keep
    d.action = Action::replay;
    d.payload = raw;
  };
  const auto [examined, conflicts] = f.replay("orders", 100, odd_ones);
  done = true;
  recoverer.join();
  CHECK(examined >= items.size());
  CHECK(recovered == 0);
  CHECK(f.raw.list(f.dead("orders")) == kept);
  CHECK(f.raw.list(f.source("orders")) == moved);
  CHECK(f.raw.list(f.corrupt("orders")).empty());
  (void)conflicts;
}

TEST_CASE("a key of the wrong type is a WRONGTYPE reply_error and nothing moves",
          "[redis][list][faults]") {
  Fixture f;
  f.raw.cmd({"SET", f.dead("s"), "not a list"});
  try {
    f.push("s", "x");
    FAIL("no error");
  } catch (const reply_error& e) {
    CHECK(e.code() == "WRONGTYPE");
    CHECK(std::string(e.what()).find(f.dead("s")) != std::string::npos);
  }
  CHECK_THROWS_AS(f.storage.purge("s", ListKind::dead), reply_error);
  CHECK(redis::view(*f.raw.cmd({"GET", f.dead("s")})) == "not a list");  // purge kept it

  f.fill("orders", 3);
  f.raw.cmd({"SET", f.source("orders"), "not a list"});
  RedisListStorage::replay_cursor c;
  try {
    f.storage.replay_step("orders", c, 10, pass_through);
    FAIL("no error");
  } catch (const reply_error& e) {
    CHECK(e.code() == "WRONGTYPE");
    CHECK_FALSE(e.outcome_unknown());
    const std::string what = e.what();
    const auto first = what.find("nothing was moved");
    CHECK(first != std::string::npos);
    CHECK(what.find("nothing was moved", first + 1) == std::string::npos);  // said once
  }
  CHECK(f.storage.size("orders", ListKind::dead) == 3);
}

TEST_CASE("SCRIPT FLUSH during a replay is absorbed (NOSCRIPT: reload, run once)",
          "[redis][list][faults]") {
  // A private server: SCRIPT FLUSH in a loop on the shared one would make other tests,
  // running in parallel, meet NOSCRIPT twice in a row.
  test::RedisProcess server;
  Fixture f(server.url());
  auto items = f.fill("orders", 300);
  RedisListStorage::replay_cursor c;
  std::size_t examined = 0;
  for (int i = 0; i < 100; ++i) {
    f.raw.cmd({"SCRIPT", "FLUSH"});
    auto r = f.storage.replay_step("orders", c, 50, pass_through);
    REQUIRE_FALSE(r.conflict);
    if (r.examined == 0) break;
    examined += r.examined;
  }
  CHECK(examined == 300);
  CHECK(f.raw.list(f.source("orders")) == items);
  f.raw.cmd({"SCRIPT", "FLUSH"});
  f.push("orders", "x");
  CHECK(f.storage.purge("orders", ListKind::dead) == 1);
}

TEST_CASE("replay-all while producers push: no livelock, no loss, snapshot semantics",
          "[redis][list][replay][concurrency]") {
  Fixture f;
  auto items = f.fill("orders", 20000);
  // The front end's snapshot bound: replay at most the count present at the start.
  const std::size_t snapshot = f.storage.size("orders", ListKind::dead);
  std::atomic<bool> stop{false};
  std::atomic<int> produced{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < 2; ++p) {
    producers.emplace_back([&, p] {
      RedisListStorage producer(f.url, f.storage.options());
      for (int i = 0; i < 100000 && !stop; ++i) {
        producer.push(
            Record{"orders", "", "", "new" + std::to_string(p) + "-" + std::to_string(i)});
        ++produced;
      }
    });
  }
  RedisListStorage::replay_cursor cursor;
  std::size_t done = 0;
  int conflicts = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (done < snapshot && test::elapsed_ms(t0) < 60000) {
    auto r = f.storage.replay_step("orders", cursor, std::min<std::size_t>(1000, snapshot - done),
                                   pass_through);
    if (r.conflict) {
      ++conflicts;
      continue;
    }
    REQUIRE(r.examined > 0);
    done += r.examined;
  }
  stop = true;
  for (auto& t : producers)
    t.join();
  CHECK(done == snapshot);
  CHECK(conflicts == 0);  // RPUSHes behind the window never disturb it
  CHECK(f.raw.list(f.source("orders")) == items);
  auto rest = f.raw.list(f.dead("orders"));
  CHECK(rest.size() == static_cast<std::size_t>(produced.load()));
  CHECK(std::all_of(rest.begin(), rest.end(),
                    [](const std::string& s) { return s.rfind("new", 0) == 0; }));
}

TEST_CASE("concurrent replayers and a popping consumer: every item exactly once",
          "[redis][list][replay][concurrency]") {
  Fixture f;
  auto items = f.fill("orders", 20000);
  std::vector<std::thread> threads;
  std::vector<std::string> popped;
  std::mutex m;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      if (t == 2) {  // the seed's replay_one: LPOP then RPUSH elsewhere
        RawClient c(f.url);
        for (int i = 0; i < 3000; ++i) {
          auto r = c.cmd({"LPOP", f.dead("orders")});
          if (r->type != REDIS_REPLY_STRING) break;
          std::lock_guard<std::mutex> lock(m);
          popped.emplace_back(redis::view(*r));
        }
        return;
      }
      f.replay("orders", 500, pass_through);
    });
  }
  for (auto& t : threads)
    t.join();
  f.replay("orders", 1000, pass_through);  // whatever a racing finish left
  auto moved = f.raw.list(f.source("orders"));
  moved.insert(moved.end(), popped.begin(), popped.end());
  std::sort(moved.begin(), moved.end());
  std::sort(items.begin(), items.end());
  CHECK(moved == items);
  CHECK(f.storage.size("orders", ListKind::dead) == 0);
}

TEST_CASE("discard removes items and pushes nothing anywhere", "[redis][list][replay]") {
  Fixture f;
  f.raw.rpush(f.dead("orders"), {"old1", "keep", "old2", "new"});
  auto decide = [](std::string_view raw, Decision& d) {
    if (raw.substr(0, 3) == "old") d.action = Action::discard;
  };
  auto [examined, conflicts] = f.replay("orders", 100, decide);
  CHECK(examined == 4);
  CHECK(f.raw.list(f.dead("orders")) == std::vector<std::string>{"keep", "new"});
  CHECK(f.raw.list(f.source("orders")).empty());
  CHECK(f.raw.list(f.corrupt("orders")).empty());
  // At the head (LTRIM path) as well.
  auto all = [](std::string_view, Decision& d) { d.action = Action::discard; };
  f.replay("orders", 100, all);
  CHECK(f.storage.size("orders", ListKind::dead) == 0);
  CHECK(f.raw.list(f.source("orders")).empty());
}

TEST_CASE("push returns the new length; push_bounded stops at the bound, atomically",
          "[redis][list]") {
  Fixture f;
  CHECK(f.storage.push(Record{"q", "", "", "a"}) == 1);
  CHECK(f.storage.push(Record{"q", "", "", "b"}) == 2);
  CHECK(f.storage.push_bounded(Record{"q", "", "", "c"}, 3));
  CHECK_FALSE(f.storage.push_bounded(Record{"q", "", "", "d"}, 3));
  CHECK(f.raw.list(f.dead("q")) == std::vector<std::string>{"a", "b", "c"});
  // Many threads racing for the last free places: exactly the bound is reached.
  std::atomic<int> stored{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i)
        if (f.storage.push_bounded(Record{"r", "", "", "x"}, 60)) ++stored;
    });
  }
  for (auto& t : threads)
    t.join();
  CHECK(stored == 60);
  CHECK(f.storage.size("r", ListKind::dead) == 60);
  f.raw.cmd({"SET", f.dead("s"), "string"});
  CHECK_THROWS_AS(f.storage.push_bounded(Record{"s", "", "", "x"}, 10), reply_error);
}

TEST_CASE("bump_count counts per queue and key and expires", "[redis][list]") {
  Fixture f;
  CHECK(f.storage.bump_count("q", "job:1", std::chrono::seconds(60)) == 1);
  CHECK(f.storage.bump_count("q", "job:1", std::chrono::seconds(60)) == 2);
  CHECK(f.storage.bump_count("q", "job:2", std::chrono::seconds(60)) == 1);
  CHECK(f.storage.bump_count("other", "job:1", std::chrono::seconds(60)) == 1);
  const auto ttl = f.raw.integer({"TTL", f.dead("q") + ":count:job:1"});
  CHECK((ttl > 50 && ttl <= 60));
  CHECK(f.storage.queues() == std::vector<std::string>{});  // counters are not lists
  f.raw.cmd({"PEXPIRE", f.dead("q") + ":count:job:1", "1"});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(f.storage.bump_count("q", "job:1", std::chrono::seconds(60)) == 1);
}

TEST_CASE("snapshot bounds: set at the start, lowered by removals, dropped when the run ends",
          "[snapshot]") {
  Fixture f;
  const auto items = f.fill("orders", 10);  // e0 … e9
  const std::string runs = f.dead("orders") + ":runs";
  auto bound_of = [&](const std::string& run) {
    auto r = f.raw.cmd({"HGET", runs, run});
    if (r->type != REDIS_REPLY_STRING) return std::string("none");
    const std::string v(r->str, r->len);
    return v.substr(0, v.find(' '));
  };
  std::vector<std::string> seen;
  auto keep = [&](std::string_view raw, Decision&) { seen.emplace_back(raw); };
  {
    RedisListStorage::replay_cursor c;
    CHECK(f.storage.replay_snapshot("orders", c) == 10);
    REQUIRE(!c.run().empty());
    CHECK(bound_of(c.run()) == "10");
    f.raw.rpush(f.dead("orders"), {"n0", "n1"});  // new: the bound stays
    CHECK(bound_of(c.run()) == "10");
    CHECK(f.storage.remove("orders", ListKind::dead, "", "e9"));  // the tail at the start
    CHECK(f.storage.remove("orders", ListKind::dead, "", "n0"));  // past the bound
    CHECK(f.storage.remove("orders", ListKind::dead, "", "e3"));
    CHECK(bound_of(c.run()) == "8");
    // A killed process's run (its deadline long past) is dropped by the next removal.
    f.raw.cmd({"HSET", runs, "killed", "5 1"});
    CHECK(f.storage.remove("orders", ListKind::dead, "", "e0"));
    CHECK(bound_of("killed") == "none");
    CHECK(bound_of(c.run()) == "7");
    for (int guard = 0; guard < 100; ++guard) {
      const auto r = f.storage.replay_step("orders", c, 3, Decider(keep));
      if (!r.conflict && r.examined == 0) break;
    }
    CHECK(seen == std::vector<std::string>{"e1", "e2", "e4", "e5", "e6", "e7", "e8"});
  }
  // The run ended (its cursor went away): its field is gone.
  auto len = f.raw.cmd({"HLEN", runs});
  CHECK(len->integer == 0);

  // A run whose bound is gone (no step for receipt_ttl, or the key deleted) is refused,
  // having moved nothing.
  RedisListStorage::replay_cursor c;
  CHECK(f.storage.replay_snapshot("orders", c) == 8);
  f.raw.cmd({"DEL", runs});
  auto take = [](std::string_view raw, Decision& d) {
    d.action = Action::discard;
    (void)raw;
  };
  CHECK_THROWS_WITH(f.storage.replay_step("orders", c, 3, Decider(take)),
                    Catch::Matchers::Contains("DLQSNAPSHOT"));
  CHECK(f.raw.list(f.dead("orders")).size() == 8);
}

TEST_CASE("snapshot bounds: one fast step lowers, refreshes and drops in one commit",
          "[snapshot]") {
  Fixture f;
  // Envelopes whose frame the fast script proves (dlq/redis/scripts/replay_fast.hpp).
  auto envelope = [](int i) {
    const std::string id = "00000000-0000-4000-8000-00000000000" + std::to_string(i);
    std::string head = R"({"payload_bytes":2,"original_payload":{},"id":")" + id +
                       R"(","queue":"orders","envelope_bytes":)";
    std::size_t n = head.size() + 4;  // the length field's own digits: fixed point
    while (head.size() + std::to_string(n).size() + 1 != n)
      n = head.size() + std::to_string(n).size() + 1;
    return head + std::to_string(n) + "}";
  };
  std::vector<std::string> items;
  for (int i = 0; i < 5; ++i)
    items.push_back(envelope(i));
  f.raw.rpush(f.dead("orders"), items);
  const std::string runs = f.dead("orders") + ":runs";
  auto field = [&](const std::string& run) {
    auto r = f.raw.cmd({"HGET", runs, run});
    return r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : std::string("none");
  };
  RedisListStorage::replay_cursor c;
  REQUIRE(f.storage.replay_snapshot("orders", c) == 5);
  const std::string before = field(c.run());
  f.raw.cmd(
      {"HSET", runs, "other", "4 99999999999999", "killed", "5 1", "past", "1 99999999999999"});
  f.raw.cmd({"PEXPIRE", runs, "50"});  // the step keeps the hash alive receipt_ttl
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const FastStep step = f.storage.replay_fast("orders", c, 2, "", false);
  CHECK(step.moved == 2);
  CHECK(f.raw.list(f.source("orders")) == std::vector<std::string>{"{}", "{}"});  // payloads
  const std::string own = field(c.run());
  CHECK(own.substr(0, own.find(' ')) == "3");        // lowered by the move
  CHECK(std::stoll(own.substr(own.find(' ') + 1)) >  // and its deadline refreshed
        std::stoll(before.substr(before.find(' ') + 1)));
  CHECK(field("other") == "2 99999999999999");
  CHECK(field("past") == "0 99999999999999");
  CHECK(field("killed") == "none");  // past its deadline: dropped
  CHECK(f.raw.cmd({"PTTL", runs})->integer > 1000);
  // A run whose field is gone is refused by the fast step, having moved nothing.
  f.raw.cmd({"HDEL", runs, c.run()});
  CHECK_THROWS_WITH(f.storage.replay_fast("orders", c, 2, "", false),
                    Catch::Matchers::Contains("DLQSNAPSHOT"));
  CHECK(f.raw.list(f.dead("orders")).size() == 3);
}

TEST_CASE("range_bytes reads a prefix within a byte budget on the server", "[redis][list]") {
  Fixture f;
  dlq::test::check_range_bytes(f.storage, "bytes");
}

// Round 8: the script read chunks of up to 64 items sized by the largest item seen, so
// one tiny item followed by large ones made the server load 64 large items (64 x 8 MiB: a
// 7.4 s script, +516 MB, every other client of that Redis waiting) to return one. Items
// past min_count are now read at most 8 at a time: the server holds at most 7 items beyond
// the budget. Seen through MONITOR, which lists the script's own LRANGE calls.
TEST_CASE("range_bytes reads at most 8 items at a time past min_count", "[redis][list]") {
  Fixture f;
  const std::string key = f.dead("chunks");
  f.raw.rpush(key, {std::string(10, 't')});
  f.raw.rpush(key, std::vector<std::string>(64, std::string(64 * 1024, 'L')));
  const std::string out = "/tmp/dlq-monitor-" + f.prefix + ".txt";
  const std::string pid_file = out + ".pid";
  const std::string start =
      "redis-cli -u '" + f.url + "' monitor > '" + out + "' 2>&1 & echo $! > '" + pid_file + "'";
  REQUIRE(std::system(start.c_str()) == 0);
  auto monitoring = [&] {
    const auto list = f.raw.cmd({"CLIENT", "LIST"});
    return list && std::string(list->str, list->len).find("cmd=monitor") != std::string::npos;
  };
  for (int i = 0; i < 200 && !monitoring(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  const BoundedRange r = f.storage.range_bytes("chunks", ListKind::dead, 0, 512, 1, 1024 * 1024);
  f.raw.cmd({"ECHO", "done-" + f.prefix});  // the last line MONITOR must show
  std::string text;
  for (int i = 0; i < 200 && text.find("done-" + f.prefix) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    std::ifstream in(out);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::ifstream pid_in(pid_file);
  long pid = 0;
  pid_in >> pid;
  if (pid > 0) std::system(("kill " + std::to_string(pid)).c_str());
  std::remove(out.c_str());
  std::remove(pid_file.c_str());
  REQUIRE(text.find("done-" + f.prefix) != std::string::npos);

  const std::string key_pattern =
      std::regex_replace(key, std::regex(R"([{}.*+?^$()|\[\]\\])"), R"(\$&)");
  const std::regex lrange("\"LRANGE\" \"" + key_pattern + "\" \"(\\d+)\" \"(\\d+)\"");
  std::vector<long> spans;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), lrange);
       it != std::sregex_iterator(); ++it)
    spans.push_back(std::stol((*it)[2]) - std::stol((*it)[1]) + 1);
  INFO(text.substr(0, 2000));
  REQUIRE(spans.size() >= 2);
  CHECK(spans.front() == 1);  // min_count
  for (std::size_t i = 1; i < spans.size(); ++i)
    CHECK(spans[i] <= 8);
  // The answer is the same: the tiny item and 15 of 64 KiB fit in 1 MiB.
  CHECK(r.items.size() == 16);
  CHECK(r.capped);
}

}  // namespace test_redis_list

// The key-value store contract suite (dlq/kv/store.hpp): the behaviour every key-value
// store must have for dlq::KeyValueStorage — versions, oldest-first windows, atomic batches,
// compare-and-delete, moves, counts, and each optional member when the store has it. A
// store's test file defines DLQ_KV_STORE_FIXTURES (a comma separated list of fixture types)
// and includes this file; each fixture provides:
//
//   using store_type = …;              the store under test
//   Fixture();                          owns what the store needs (a directory, a key prefix)
//   store_type make();                  a fresh, empty store, isolated from other tests
//
// The memory stores run it in tests/contract/kv_store_memory.cpp, SQLite and Redis in
// tests/kv/kv_store_sqlite.cpp and kv_store_redis.cpp; a new store adds one such file
// (docs/backends.md).
#pragma once

#ifndef DLQ_KV_STORE_FIXTURES
#error "define DLQ_KV_STORE_FIXTURES before including kv_store_suite.hpp"
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dlq/kv/store.hpp"
#include "support/catch.hpp"

namespace kv_contract {

using dlq::kv::Item;
using dlq::kv::Removal;
using dlq::kv::Window;
using dlq::kv::Write;

template <class Store>
std::vector<std::string> ids(Store& store, std::string_view coll, Window w = {}) {
  std::vector<std::string> out;
  for (const Item& i : store.list(coll, w))
    out.push_back(i.id);
  return out;
}

template <class Store>
std::size_t count_of(Store& store, std::string_view coll) {
  return store.list(coll, Window{}).size();
}

}  // namespace kv_contract

using kv_contract::count_of;
using kv_contract::ids;
using kv_contract::Item;
using kv_contract::Removal;
using kv_contract::Window;
using kv_contract::Write;

TEMPLATE_TEST_CASE("a saved record loads back byte for byte with a version", "[kv][store]",
                        DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  static const char bytes[] = "bin\0ary \xff\xfe bytes";
  const std::string value(bytes, sizeof bytes - 1);
  store.save({Write{"c", "a", value}});
  auto item = store.load("c", "a");
  REQUIRE(item);
  CHECK(item->id == "a");
  CHECK(item->value == value);
  CHECK(item->version > 0);
  CHECK_FALSE(store.load("c", "b"));
  CHECK_FALSE(store.load("other", "a"));
}

TEMPLATE_TEST_CASE("an empty value and ids with odd bytes are stored as given", "[kv][store]",
                        DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  static const char odd[] = "id:with:colons/{and}\xc3\xa9";
  const std::string odd_id(odd, sizeof odd - 1);
  store.save({Write{"c", odd_id, ""}, Write{"c", "x", "1"}});
  auto item = store.load("c", odd_id);
  REQUIRE(item);
  CHECK(item->value.empty());
  CHECK(ids(store, "c") == std::vector<std::string>{odd_id, "x"});
}

TEMPLATE_TEST_CASE("list is oldest first and a replaced record moves to the end",
                        "[kv][store]", DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  store.save({Write{"c", "a", "1"}, Write{"c", "b", "2"}, Write{"c", "c", "3"}});
  const auto before = store.load("c", "a")->version;
  store.save({Write{"c", "a", "1 again"}});
  const auto after = store.load("c", "a");
  CHECK(after->value == "1 again");
  CHECK(after->version > before);
  CHECK(ids(store, "c") == std::vector<std::string>{"b", "c", "a"});
  CHECK(count_of(store, "c") == 3);
}

TEMPLATE_TEST_CASE("a batch saves in order; a repeated id in it keeps the last value",
                        "[kv][store]", DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  store.save({Write{"c", "a", "1"}, Write{"c", "b", "2"}, Write{"c", "a", "3"}});
  CHECK(ids(store, "c") == std::vector<std::string>{"b", "a"});
  CHECK(store.load("c", "a")->value == "3");
}

TEMPLATE_TEST_CASE("collections are separate", "[kv][store]", DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  store.save({Write{"c1", "a", "1"}, Write{"c2", "a", "2"}, Write{"c1x", "a", "3"}});
  CHECK(store.load("c1", "a")->value == "1");
  CHECK(store.load("c2", "a")->value == "2");
  CHECK(count_of(store, "c1") == 1);
  CHECK(count_of(store, "c") == 0);  // a collection name is not a string prefix of another
}

TEMPLATE_TEST_CASE("windows page through a collection without re-reading", "[kv][store]",
                        DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  std::vector<std::string> expected;
  std::vector<std::string> values(25);
  std::vector<Write> writes;
  for (int i = 0; i < 25; ++i) {
    expected.push_back("id" + std::to_string(i));
    values[i] = "v" + std::to_string(i);
  }
  for (int i = 0; i < 25; ++i)
    writes.push_back(Write{"c", expected[i], values[i]});
  store.save(writes);

  SECTION("by version: after the last one seen") {
    std::vector<std::string> seen;
    Window w;
    w.limit = 10;
    int pages = 0;
    for (;;) {
      auto page = store.list("c", w);
      if (page.empty()) break;
      ++pages;
      CHECK(page.size() <= 10);
      for (auto& i : page)
        seen.push_back(i.id);
      w.after = page.back().version;
    }
    CHECK(pages == 3);
    CHECK(seen == expected);
  }
  SECTION("by position: offset and limit") {
    Window w;
    w.offset = 20;
    w.limit = 10;
    CHECK(ids(store, "c", w) == std::vector<std::string>(expected.begin() + 20, expected.end()));
    w.offset = 3;
    w.limit = 2;
    CHECK(ids(store, "c", w) == std::vector<std::string>{"id3", "id4"});
    w.offset = 25;
    CHECK(ids(store, "c", w).empty());
  }
  SECTION("offset counts from `after`") {
    const auto v5 = store.load("c", "id5")->version;
    Window w;
    w.after = v5;
    w.offset = 1;
    w.limit = 2;
    CHECK(ids(store, "c", w) == std::vector<std::string>{"id7", "id8"});
  }
  SECTION("limit 0 is everything") {
    CHECK(ids(store, "c").size() == 25);
  }
}

TEMPLATE_TEST_CASE("remove is a compare-and-delete on the version", "[kv][store]",
                        DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  store.save({Write{"c", "a", "1"}, Write{"c", "b", "2"}});
  const auto va = store.load("c", "a")->version;
  const auto vb = store.load("c", "b")->version;
  store.save({Write{"c", "b", "2 again"}});  // b replaced: vb is stale

  CHECK(store.remove({Removal{"c", "a", va, {}}, Removal{"c", "b", vb, {}}}) == 1);
  CHECK_FALSE(store.load("c", "a"));
  CHECK(store.load("c", "b")->value == "2 again");
  CHECK(store.remove({Removal{"c", "a", va, {}}}) == 0);    // already gone
  CHECK(store.remove({Removal{"c", "nope", 0, {}}}) == 0);  // never there
  // 0 = any version; the same record twice in one batch is removed once
  CHECK(store.remove({Removal{"c", "b", 0, {}}, Removal{"c", "b", 0, {}}}) == 1);
  CHECK(count_of(store, "c") == 0);
}

TEMPLATE_TEST_CASE("a move re-saves the value in the target collection at its end",
                        "[kv][store]", DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  store.save({Write{"t", "old", "o"}, Write{"c", "a", "1"}, Write{"c", "b", "2"}});
  const auto va = store.load("c", "a")->version;
  const auto vb = store.load("c", "b")->version;
  Removal move_a{"c", "a", va, "t"};
  Removal stale_b{"c", "b", vb + 1000, "t"};
  CHECK(store.remove({move_a, stale_b}) == 1);
  CHECK_FALSE(store.load("c", "a"));
  CHECK(store.load("c", "b"));  // stale version: not moved
  auto moved = store.load("t", "a");
  REQUIRE(moved);
  CHECK(moved->value == "1");
  CHECK(moved->version > store.load("t", "old")->version);  // the newest of its collection
  CHECK(ids(store, "t") == std::vector<std::string>{"old", "a"});
}

TEMPLATE_TEST_CASE("versions are never reused, even after the newest record is removed",
                        "[kv][store]", DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  store.save({Write{"c", "a", "1"}});
  const auto v1 = store.load("c", "a")->version;
  CHECK(store.remove({Removal{"c", "a", v1, {}}}) == 1);
  store.save({Write{"c", "a", "2"}});
  const auto v2 = store.load("c", "a")->version;
  CHECK(v2 > v1);
  CHECK(store.remove({Removal{"c", "a", v1, {}}}) == 0);  // the old version must not match
  CHECK(store.load("c", "a")->value == "2");
}

TEMPLATE_TEST_CASE("count and remove_all give exact numbers", "[kv][store]",
                        DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  if constexpr (dlq::kv::detail::has_count<typename TestType::store_type>::value) {
    std::vector<std::string> idv;
    for (int i = 0; i < 50; ++i)
      idv.push_back(std::to_string(i));
    std::vector<Write> writes;
    for (auto& i : idv)
      writes.push_back(Write{"c", i, "x"});
    writes.push_back(Write{"other", "1", "y"});
    store.save(writes);
    CHECK(store.count("c") == 50);
    CHECK(store.count("missing") == 0);
    CHECK(store.remove_all("c") == 50);
    CHECK(store.count("c") == 0);
    CHECK(store.remove_all("c") == 0);
    CHECK(store.count("other") == 1);
  }
}

TEMPLATE_TEST_CASE("ends gives the count and both end records of one instant", "[kv][store]",
                        DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  if constexpr (dlq::kv::detail::has_ends<typename TestType::store_type>::value) {
    dlq::kv::Ends e = store.ends("c");
    CHECK(e.count == 0);
    CHECK_FALSE(e.first);
    CHECK_FALSE(e.last);
    store.save({Write{"c", "a", "1"}});
    e = store.ends("c");
    CHECK(e.count == 1);
    REQUIRE(e.first);
    REQUIRE(e.last);
    CHECK(e.first->id == "a");
    CHECK(e.last->id == "a");
    CHECK(e.first->version == e.last->version);
    store.save({Write{"c", "b", "2"}, Write{"c", "c", "3"}, Write{"other", "z", "9"}});
    store.save({Write{"c", "a", "4"}});  // a replaced record moves to the end
    e = store.ends("c");
    CHECK(e.count == 3);
    REQUIRE(e.first);
    REQUIRE(e.last);
    CHECK(e.first->id == "b");
    CHECK(e.first->value == "2");
    CHECK(e.last->id == "a");
    CHECK(e.last->value == "4");
    CHECK(e.first->version < e.last->version);
    CHECK(e.last->version == store.load("c", "a")->version);

    // While one thread saves at the end and another removes from the front, every read has
    // both ends whenever its count is not zero, the oldest before the newest. The remover
    // leaves at least 40 records (only it removes, so the count it read can only grow before
    // its removal): a read never finds the list empty, so every read checks the ends however
    // the threads are scheduled (under ThreadSanitizer the remover once drained the list
    // before any of 300 reads, which then checked nothing). Reads go on until the saver is
    // done, so they overlap the saves and removals.
    std::atomic<bool> stop{false};
    std::atomic<bool> saved{false};
    std::atomic<std::size_t> removed{0};
    std::thread saver([&] {
      for (int i = 0; i < 300; ++i)
        store.save({Write{"c", "s" + std::to_string(i), "v"}});
      saved = true;
    });
    std::thread remover([&] {
      while (!stop) {
        if (store.ends("c").count <= 43) {
          std::this_thread::yield();
          continue;
        }
        auto front = store.list("c", Window{0, 0, 3});
        std::vector<Removal> rm;
        for (const Item& it : front)
          rm.push_back(Removal{"c", it.id, it.version, {}});
        store.remove(rm);
        removed += rm.size();
      }
    });
    std::size_t reads = 0;
    for (; reads < 300 || !saved; ++reads) {
      e = store.ends("c");
      REQUIRE(e.count >= 3);
      REQUIRE(e.first);
      REQUIRE(e.last);
      CHECK(e.first->version <= e.last->version);
      CHECK(e.first->id != e.last->id);
    }
    saver.join();
    // The remover takes the list down to its floor (bounded wait), so the front really moved.
    for (int i = 0; i < 2000 && store.ends("c").count > 43; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    stop = true;
    remover.join();
    CHECK(reads >= 300);
    CHECK(removed > 0);  // the front really moved
    CHECK(store.ends("c").count == 303 - removed);
  } else {
    SUCCEED("this store has no ends(): DeadLetterQueue::stats reads size() and range()");
  }
}

TEMPLATE_TEST_CASE("concurrent savers and removers lose nothing", "[kv][store][threads]",
                        DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  constexpr int threads = 4;
  constexpr int per_thread = 100;
  std::atomic<int> removed{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const std::string id = std::to_string(t) + "-" + std::to_string(i);
        store.save({Write{"c", id, id}});
        if (i % 4 == 0) {
          auto item = store.load("c", id);
          if (item && store.remove({Removal{"c", id, item->version, {}}}) == 1) ++removed;
        }
      }
    });
  }
  for (auto& th : pool)
    th.join();
  CHECK(removed == threads * per_thread / 4);
  CHECK(count_of(store, "c") == static_cast<std::size_t>(threads * per_thread - removed));
  // versions are unique and listing is strictly increasing
  auto all = store.list("c", Window{});
  for (std::size_t i = 1; i < all.size(); ++i)
    CHECK(all[i - 1].version < all[i].version);
}

TEMPLATE_TEST_CASE("versions lists the same window as list, without values", "[kv][store]",
                        DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  if constexpr (dlq::kv::detail::has_versions<typename TestType::store_type>::value) {
    store.save(
        {Write{"c", "a", "1"}, Write{"c", "b", "2"}, Write{"c", "c", "3"}, Write{"d", "x", ""}});
    store.save({Write{"c", "a", "1 again"}});
    for (const Window& w : {Window{}, Window{0, 1, 1}, Window{0, 0, 2}}) {
      std::vector<std::uint64_t> expected;
      for (const Item& i : store.list("c", w))
        expected.push_back(i.version);
      CHECK(store.versions("c", w) == expected);
    }
    Window after;
    after.after = store.load("c", "b")->version;
    CHECK(store.versions("c", after).size() == 2);
    CHECK(store.versions("none", Window{}).empty());
  }
}

// --- optional members for the front end's policies: save_and_count, save_if_below,
// increment (each test runs on the stores that have the member)

TEMPLATE_TEST_CASE(
    "save_and_count returns the last write's collection size; a replacement "
    "is not growth",
    "[kv][store][policies]", DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  if constexpr (dlq::kv::detail::has_save_and_count<typename TestType::store_type>::value) {
    CHECK(store.save_and_count({Write{"c", "a", "1"}}) == 1);
    CHECK(store.save_and_count({Write{"c", "b", "2"}}) == 2);
    CHECK(store.save_and_count({Write{"c", "a", "1 again"}}) == 2);  // replaced
    CHECK(store.save_and_count({Write{"c", "x", "3"}, Write{"other", "y", "4"}}) == 1);
    CHECK(store.save_and_count({Write{"other", "z", "5"}, Write{"c", "w", "6"}}) == 4);
    CHECK(store.save_and_count({}) == 0);
    CHECK(ids(store, "c") == std::vector<std::string>{"b", "a", "x", "w"});
    CHECK(store.remove({Removal{"c", "b", 0, {}}}) == 1);
    CHECK(store.save_and_count({Write{"c", "v", "7"}}) == 4);
    CHECK(store.remove({Removal{"c", "v", 0, "other"}}) == 1);  // a move: one less here
    CHECK(store.save_and_count({Write{"c", "u", "8"}}) == 4);
    CHECK(store.save_and_count({Write{"other", "q", "9"}}) == 4);
  }
}

TEMPLATE_TEST_CASE(
    "save_if_below admits while the collection is below the bound, always "
    "admits a replacement, and writes nothing when full",
    "[kv][store][policies]", DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  if constexpr (dlq::kv::detail::has_save_if_below<typename TestType::store_type>::value) {
    CHECK(store.save_if_below(Write{"c", "a", "1"}, 2));
    CHECK(store.save_if_below(Write{"c", "b", "2"}, 2));
    const auto vb = store.load("c", "b")->version;
    CHECK_FALSE(store.save_if_below(Write{"c", "c", "3"}, 2));  // full
    CHECK_FALSE(store.load("c", "c"));
    CHECK(store.save_if_below(Write{"c", "a", "1 again"}, 2));  // a replacement: admitted
    CHECK(store.load("c", "a")->value == "1 again");
    CHECK(store.load("c", "a")->version > vb);  // and moved to the end, as save does
    CHECK(ids(store, "c") == std::vector<std::string>{"b", "a"});
    CHECK(store.save_if_below(Write{"other", "a", "x"}, 1));      // bounds are per collection
    CHECK_FALSE(store.save_if_below(Write{"new", "a", "x"}, 0));  // 0: nothing new
    CHECK(store.remove({Removal{"c", "b", 0, {}}}) == 1);
    CHECK(store.save_if_below(Write{"c", "c", "3"}, 2));  // room again
    CHECK(count_of(store, "c") == 2);
    CHECK(count_of(store, "new") == 0);
  }
}

TEMPLATE_TEST_CASE(
    "save_if_fits saves a batch whole or not at all; replacements are not growth",
    "[kv][store][policies]", DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  if constexpr (dlq::kv::detail::has_save_if_fits<typename TestType::store_type>::value) {
    CHECK(store.save_if_fits({Write{"c", "a", "1"}, Write{"c", "b", "2"}}, 3));
    CHECK_FALSE(store.save_if_fits({Write{"c", "x", "3"}, Write{"c", "y", "4"}}, 3));
    CHECK_FALSE(store.load("c", "x"));  // nothing of a refused batch
    CHECK(store.save_if_fits({Write{"c", "a", "1 again"}, Write{"c", "z", "5"}}, 3));
    CHECK(store.load("c", "a")->value == "1 again");
    CHECK(store.save_if_fits({Write{"c", "b", "2 again"}, Write{"c", "b", "2 twice"}}, 3));
    CHECK(ids(store, "c") == std::vector<std::string>{"a", "z", "b"});
    CHECK(store.load("c", "b")->value == "2 twice");
    CHECK(store.save_if_fits({}, 0));
    CHECK(count_of(store, "c") == 3);
  }
}

TEMPLATE_TEST_CASE(
    "save_capped saves and removes the oldest beyond the bound in one step, returning them",
    "[kv][store][policies]", DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  if constexpr (dlq::kv::detail::has_save_capped<typename TestType::store_type>::value) {
    CHECK(store.save_capped({Write{"c", "a", "1"}, Write{"c", "b", "2"}}, 3).empty());
    auto removed = store.save_capped({Write{"c", "x", "3"}, Write{"c", "y", "4"}}, 3);
    REQUIRE(removed.size() == 1);
    CHECK(removed[0].id == "a");
    CHECK(removed[0].value == "1");
    CHECK(ids(store, "c") == std::vector<std::string>{"b", "x", "y"});
    removed = store.save_capped({Write{"other", "o", "5"}, Write{"c", "b", "2 again"}}, 2);
    REQUIRE(removed.size() == 1);  // the last write's collection is capped
    CHECK(removed[0].id == "x");
    CHECK(ids(store, "c") == std::vector<std::string>{"y", "b"});
    CHECK(count_of(store, "other") == 1);
    removed = store.save_capped({Write{"c", "n", "6"}}, 0);
    CHECK(removed.size() == 3);
    CHECK(count_of(store, "c") == 0);
  }
}

TEMPLATE_TEST_CASE("save_if_below is exact under 4 concurrent threads",
                        "[kv][store][policies][threads]", DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  if constexpr (dlq::kv::detail::has_save_if_below<typename TestType::store_type>::value) {
    constexpr int threads = 4;
    constexpr int per_thread = 40;
    constexpr std::size_t bound = 37;
    std::atomic<int> admitted{0};
    std::atomic<int> refused{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (int i = 0; i < per_thread; ++i) {
          const std::string id = std::to_string(t) + "-" + std::to_string(i);
          if (store.save_if_below(Write{"c", id, id}, bound))
            ++admitted;
          else
            ++refused;
        }
      });
    }
    for (auto& th : pool)
      th.join();
    CHECK(admitted == static_cast<int>(bound));
    CHECK(refused == threads * per_thread - static_cast<int>(bound));
    CHECK(count_of(store, "c") == bound);
    if constexpr (dlq::kv::detail::has_count<typename TestType::store_type>::value)
      CHECK(store.count("c") == bound);
  }
}

TEMPLATE_TEST_CASE("increment counts per (collection, key), apart from records",
                        "[kv][store][policies]", DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  if constexpr (dlq::kv::detail::has_increment<typename TestType::store_type>::value) {
    const std::chrono::seconds day(86400);
    CHECK(store.increment("c", "job:1", day) == 1);
    CHECK(store.increment("c", "job:1", day) == 2);
    CHECK(store.increment("c", "job:2", day) == 1);
    CHECK(store.increment("d", "job:1", day) == 1);
    CHECK(store.increment("c", "job:1", day) == 3);
    // Extreme lifetimes are clamped to [1 s, 100 years]: no overflow, no error.
    CHECK(store.increment("c", "forever", std::chrono::seconds::max()) == 1);
    CHECK(store.increment("c", "forever", std::chrono::seconds::max()) == 2);
    CHECK(store.increment("c", "negative", std::chrono::seconds(-5)) == 1);
    // Counters are not records: nothing to list, load or count, and purging leaves them.
    CHECK(count_of(store, "c") == 0);
    CHECK_FALSE(store.load("c", "job:1"));
    store.save({Write{"c", "job:1", "a record"}});
    if constexpr (dlq::kv::detail::has_remove_all<typename TestType::store_type>::value)
      CHECK(store.remove_all("c") == 1);
    CHECK(store.increment("c", "job:1", day) == 4);
  }
}

TEMPLATE_TEST_CASE("increment is atomic under 4 concurrent threads",
                        "[kv][store][policies][threads]", DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  if constexpr (dlq::kv::detail::has_increment<typename TestType::store_type>::value) {
    constexpr int threads = 4;
    constexpr int per_thread = 50;
    std::vector<std::vector<std::int64_t>> seen(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (int i = 0; i < per_thread; ++i)
          seen[t].push_back(store.increment("c", "job:x", std::chrono::seconds(3600)));
      });
    }
    for (auto& th : pool)
      th.join();
    std::vector<std::int64_t> all;
    for (const auto& s : seen) {
      CHECK(std::is_sorted(s.begin(), s.end()));  // each thread sees its values grow
      all.insert(all.end(), s.begin(), s.end());
    }
    std::sort(all.begin(), all.end());
    std::vector<std::int64_t> expected(threads * per_thread);
    for (std::size_t i = 0; i < expected.size(); ++i)
      expected[i] = static_cast<std::int64_t>(i + 1);
    CHECK(all == expected);  // every value exactly once: no increment lost or doubled
  }
}

TEMPLATE_TEST_CASE("a counter expires ttl after its last increment",
                        "[kv][store][policies][expiry]", DLQ_KV_STORE_FIXTURES) {
  TestType fx;
  auto store = fx.make();
  if constexpr (dlq::kv::detail::has_increment<typename TestType::store_type>::value) {
    const std::chrono::seconds ttl(1);
    CHECK(store.increment("c", "short", ttl) == 1);
    CHECK(store.increment("c", "short", ttl) == 2);
    CHECK(store.increment("c", "long", std::chrono::seconds(3600)) == 1);
    CHECK(store.increment("c", "zero", std::chrono::seconds(0)) == 1);  // counts as 1 s
    CHECK(store.increment("c", "zero", std::chrono::seconds(0)) == 2);
    std::this_thread::sleep_for(std::chrono::milliseconds(1300));
    CHECK(store.increment("c", "short", ttl) == 1);  // expired: counting starts again
    CHECK(store.increment("c", "zero", ttl) == 1);
    CHECK(store.increment("c", "long", std::chrono::seconds(3600)) == 2);
  }
}

// dlq::KeyValueStorage over every store: job-id keyed records, oldest-first windows, lookups,
// removal, purge, queues, and replay into sinks (push first, then compare-and-delete).
#include <atomic>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "dlq/kv/sinks.hpp"
#include "kv_fixtures.hpp"
#include "support/catch.hpp"

using dlq::Action;
using dlq::Decision;
using dlq::ListKind;
using dlq::Record;

namespace {

/// KeyValueOptions with this prefix (the other options at their defaults).
dlq::KeyValueOptions kv_prefix(std::string prefix) {
  dlq::KeyValueOptions o;
  o.prefix = std::move(prefix);
  return o;
}

Record rec(std::string_view queue, std::string_view id, std::string_view envelope) {
  return Record{queue, id, id, envelope};
}

/// A decider that replays every item to `dest`, its payload being the whole item.
struct replay_all_to {
  std::string_view dest;
  void operator()(std::string_view raw, Decision& d) const {
    d.action = Action::replay;
    d.destination = dest;
    d.payload = raw;
  }
};

template <class Storage>
std::size_t replay_everything(Storage& s, std::string_view queue, std::size_t batch,
                              std::string_view dest) {
  typename Storage::replay_cursor cursor;
  std::size_t total = 0;
  for (int guard = 0; guard < 100000; ++guard) {
    const dlq::StepResult r = s.replay_step(queue, cursor, batch, replay_all_to{dest});
    REQUIRE_FALSE(r.conflict);
    if (r.examined == 0) return total;
    total += r.examined;
  }
  FAIL("replay did not finish");
  return total;
}

}  // namespace

static_assert(dlq::is_storage_v<dlq::KeyValueStorage<dlq::kv::MemoryStore>>);
static_assert(dlq::is_storage_v<dlq::KeyValueStorage<kvtest::MinimalStore, dlq::kv::AnySink>>);
static_assert(dlq::detail::keyed_by_job_id<dlq::KeyValueStorage<dlq::kv::MemoryStore>>::value);
static_assert(dlq::detail::has_find<dlq::KeyValueStorage<dlq::kv::MemoryStore>>::value);
#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
static_assert(dlq::storage<dlq::KeyValueStorage<dlq::kv::MemoryStore>>);
static_assert(dlq::kv::store<dlq::kv::MemoryStore>);
static_assert(!dlq::kv::store<int>);
#endif

TEMPLATE_LIST_TEST_CASE("sending the same job id again replaces its record and moves it last",
                        "[kv][adapter]", kvtest::kv_fixtures) {
  TestType fx;
  dlq::KeyValueStorage s(fx.make());
  s.push(rec("orders", "job-1", "first failure"));
  s.push(rec("orders", "job-2", "other job"));
  s.push(rec("orders", "job-1", "second failure"));
  CHECK(s.size("orders", ListKind::dead) == 2);
  CHECK(s.range("orders", ListKind::dead, 0, 10) ==
        std::vector<std::string>{"other job", "second failure"});
  CHECK(s.find("orders", ListKind::dead, "job-1") == std::optional<std::string>("second failure"));
  CHECK_FALSE(s.find("orders", ListKind::dead, "job-3"));
  CHECK_FALSE(s.find("orders", ListKind::corrupt, "job-1"));
}

TEMPLATE_LIST_TEST_CASE("records without a job id are keyed by their fresh entry id",
                        "[kv][adapter]", kvtest::kv_fixtures) {
  TestType fx;
  dlq::KeyValueStorage s(fx.make());
  s.push_many({Record{"orders", "e1", "", "a"}, Record{"orders", "e2", "", "a"},
               Record{"billing", "e3", "", "b"}});
  CHECK(s.size("orders", ListKind::dead) == 2);
  CHECK(s.size("billing", ListKind::dead) == 1);
  CHECK(s.find("orders", ListKind::dead, "e2") == std::optional<std::string>("a"));
  CHECK(s.queues() == std::vector<std::string>{"billing", "orders"});
  CHECK(s.sizes({"orders", "billing", "none"}) == std::vector<std::size_t>{2, 1, 0});
}

TEMPLATE_LIST_TEST_CASE("a record without a queue is refused and nothing of its batch is stored",
                        "[kv][adapter]", kvtest::kv_fixtures) {
  TestType fx;
  dlq::KeyValueStorage s(fx.make());
  CHECK_THROWS_AS(s.push_many({rec("orders", "a", "x"), Record{"", "b", "", "y"}}),
                  dlq::invalid_argument);
  CHECK(s.size("orders", ListKind::dead) == 0);
  CHECK_THROWS_AS(dlq::KeyValueStorage(fx.make(), dlq::kv::MemoryQueues{}, kv_prefix("")),
                  dlq::invalid_argument);
}

TEMPLATE_LIST_TEST_CASE("a record without any id is keyed by an id derived from its bytes",
                        "[kv][adapter]", kvtest::kv_fixtures) {
  TestType fx;
  dlq::KeyValueStorage s(fx.make());
  s.push(Record{"orders", "", "", "written by another program"});
  const std::string id = dlq::detail::derived_id("written by another program");
  CHECK(s.find("orders", ListKind::dead, id) ==
        std::optional<std::string>("written by another program"));
  CHECK(s.items("orders", ListKind::dead, dlq::kv::Window{}).at(0).id == id);
}

TEMPLATE_LIST_TEST_CASE("find locates a derived id among records stored under other keys",
                        "[kv][adapter]", kvtest::kv_fixtures) {
  TestType fx;
  dlq::KeyValueStorage s(fx.make());
  s.push_many(
      {rec("orders", "job-1", "{\"id\":\"job-1\"}"), rec("orders", "job-2", "corrupt bytes")});
  const std::string id = dlq::detail::derived_id("corrupt bytes");
  CHECK(s.find("orders", ListKind::dead, id) == std::optional<std::string>("corrupt bytes"));
  CHECK_FALSE(s.find("orders", ListKind::dead, dlq::detail::derived_id("other bytes")));
  CHECK_FALSE(s.find("orders", ListKind::dead, "job-3"));
  CHECK(s.remove("orders", ListKind::dead, id, "corrupt bytes"));
  CHECK(s.size("orders", ListKind::dead) == 1);
}

TEMPLATE_LIST_TEST_CASE("range windows by position, oldest first", "[kv][adapter]",
                        kvtest::kv_fixtures) {
  TestType fx;
  dlq::KeyValueStorage s(fx.make());
  std::vector<std::string> env;
  for (int i = 0; i < 12; ++i)
    env.push_back("e" + std::to_string(i));
  std::vector<Record> records;
  for (auto& e : env)
    records.push_back(rec("q", e, e));
  s.push_many(records);
  CHECK(s.range("q", ListKind::dead, 0, 3) == std::vector<std::string>{"e0", "e1", "e2"});
  CHECK(s.range("q", ListKind::dead, 10, 5) == std::vector<std::string>{"e10", "e11"});
  CHECK(s.range("q", ListKind::dead, 12, 5).empty());
  CHECK(s.range("q", ListKind::dead, 0, 0).empty());  // count 0: nothing, as MemoryStorage
  dlq::kv::Window w;
  w.limit = 5;
  auto page1 = s.items("q", ListKind::dead, w);
  w.after = page1.back().version;
  auto page2 = s.items("q", ListKind::dead, w);
  REQUIRE(page2.size() == 5);
  CHECK(page2.front().id == "e5");
}

TEMPLATE_LIST_TEST_CASE("remove by id compares the bytes; by bytes when the id is unknown",
                        "[kv][adapter]", kvtest::kv_fixtures) {
  TestType fx;
  dlq::KeyValueStorage s(fx.make());
  s.push_many({rec("q", "a", "A"), rec("q", "b", "B"), rec("q", "c", "C")});
  CHECK_FALSE(s.remove("q", ListKind::dead, "a", "not A"));  // replaced meanwhile: kept
  CHECK(s.remove("q", ListKind::dead, "a", "A"));
  CHECK_FALSE(s.remove("q", ListKind::dead, "a", "A"));
  CHECK(s.remove("q", ListKind::dead, "raw-0123456789abcdef", "C"));  // derived id: by bytes
  CHECK(s.remove("q", ListKind::dead, "b", ""));                      // any bytes
  CHECK(s.size("q", ListKind::dead) == 0);
  CHECK_FALSE(s.remove("q", ListKind::dead, "", "nothing"));
}

TEMPLATE_LIST_TEST_CASE("purge removes one list and reports the exact count", "[kv][adapter]",
                        kvtest::kv_fixtures) {
  TestType fx;
  dlq::KeyValueStorage s(fx.make());
  std::vector<std::string> idv;
  for (int i = 0; i < 2500; ++i)
    idv.push_back(std::to_string(i));  // > one fallback page
  std::vector<Record> records;
  for (auto& i : idv)
    records.push_back(rec("q", i, "x"));
  records.push_back(rec("keep", "1", "y"));
  s.push_many(records);
  CHECK(s.purge("q", ListKind::dead) == 2500);
  CHECK(s.purge("q", ListKind::dead) == 0);
  CHECK(s.size("keep", ListKind::dead) == 1);
  CHECK(s.queues() == std::vector<std::string>{"keep"});
}

TEMPLATE_LIST_TEST_CASE("two prefixes share a store without seeing each other", "[kv][adapter]",
                        kvtest::kv_fixtures) {
  TestType fx;
  auto store = fx.make();
  dlq::KeyValueStorage a(store, dlq::kv::MemoryQueues{}, kv_prefix("app-a:"));
  dlq::KeyValueStorage b(store, dlq::kv::MemoryQueues{}, kv_prefix("app-b:"));
  a.push(rec("q", "1", "from a"));
  CHECK(b.size("q", ListKind::dead) == 0);
  CHECK(b.queues().empty());
  CHECK(a.queues() == std::vector<std::string>{"q"});
  CHECK(a.collection("q", ListKind::dead) == "app-a:{q}:dead");
}

TEMPLATE_LIST_TEST_CASE("replay pushes to the sink, then removes; keep, set-aside, discard apply",
                        "[kv][adapter][replay]", kvtest::kv_fixtures) {
  TestType fx;
  dlq::kv::MemoryQueues sink;
  dlq::KeyValueStorage s(fx.make(), sink);
  s.push_many({rec("q", "1", "p1"), rec("q", "2", "keep me"), rec("q", "3", "bad"),
               rec("q", "4", "p4"), rec("q", "5", "p5"), rec("q", "6", "evict me")});
  typename std::remove_reference_t<decltype(s)>::replay_cursor cursor;
  auto decide = [](std::string_view raw, Decision& d) {
    if (raw == "keep me") return;  // Action::keep
    if (raw == "evict me") {
      d.action = Action::discard;
      return;
    }
    if (raw == "bad") {
      d.action = Action::set_aside;
      return;
    }
    d.action = Action::replay;
    d.destination = raw == "p4" ? "elsewhere" : "q";
    d.payload = raw.substr(1);  // a part of the item, as the front end cuts the payload out
  };
  auto r1 = s.replay_step("q", cursor, 3, decide);
  CHECK(r1.examined == 3);
  CHECK_FALSE(r1.conflict);
  CHECK(sink.contents("q") == std::vector<std::string>{"1"});
  auto r2 = s.replay_step("q", cursor, 3, decide);
  CHECK(r2.examined == 3);
  auto r3 = s.replay_step("q", cursor, 3, decide);
  CHECK(r3.examined == 0);
  CHECK_FALSE(r3.conflict);
  CHECK(sink.contents("q") == std::vector<std::string>{"1", "5"});
  CHECK(sink.contents("elsewhere") == std::vector<std::string>{"4"});
  CHECK(s.range("q", ListKind::dead, 0, 100) == std::vector<std::string>{"keep me"});
  CHECK(s.range("q", ListKind::corrupt, 0, 100) == std::vector<std::string>{"bad"});
  CHECK(s.find("q", ListKind::corrupt, "3") == std::optional<std::string>("bad"));
  CHECK(s.superseded() == 0);
}

TEMPLATE_LIST_TEST_CASE("every sink shape is accepted; batch sinks get one call per step",
                        "[kv][adapter][replay]", kvtest::kv_fixtures) {
  TestType fx;
  auto store = fx.make();
  std::vector<std::string> got;
  int calls = 0;
  auto fill = [&](auto& s) {
    got.clear();
    calls = 0;
    s.push_many({rec("q", "1", "a"), rec("q", "2", "b"), rec("q", "3", "c")});
    CHECK(replay_everything(s, "q", 10, "dest") == 3);
    CHECK(got == std::vector<std::string>{"a", "b", "c"});
  };
  SECTION("batch callable") {
    dlq::KeyValueStorage s(store, [&](const std::vector<dlq::kv::Message>& m) {
      ++calls;
      for (auto& x : m)
        got.emplace_back(x.payload);
    });
    fill(s);
    CHECK(calls == 1);
  }
  SECTION("single callable") {
    dlq::KeyValueStorage s(store, [&](std::string_view queue, std::string_view payload) {
      ++calls;
      CHECK(queue == "dest");
      got.emplace_back(payload);
    });
    fill(s);
    CHECK(calls == 3);
  }
  SECTION("object with push, by reference") {
    struct pusher {
      std::vector<std::string>* out;
      int* n;
      void push(std::string_view, std::string_view p) {
        ++*n;
        out->emplace_back(p);
      }
    } p{&got, &calls};
    dlq::KeyValueStorage s(store, std::ref(p));
    fill(s);
    CHECK(calls == 3);
  }
  SECTION("type-erased AnySink") {
    dlq::KeyValueStorage<typename TestType::store_type, dlq::kv::AnySink> s(
        store, dlq::kv::AnySink([&](const std::vector<dlq::kv::Message>& m) {
          ++calls;
          for (auto& x : m)
            got.emplace_back(x.payload);
        }));
    fill(s);
    CHECK(calls == 1);
  }
  SECTION("an empty AnySink refuses to replay and removes nothing") {
    dlq::KeyValueStorage<typename TestType::store_type, dlq::kv::AnySink> s(store);
    s.push(rec("q", "1", "a"));
    typename std::remove_reference_t<decltype(s)>::replay_cursor cursor;
    CHECK_THROWS_AS(s.replay_step("q", cursor, 10, replay_all_to{"dest"}), dlq::invalid_argument);
    CHECK(s.size("q", ListKind::dead) == 1);
  }
}

TEMPLATE_LIST_TEST_CASE("a sink that throws leaves every record in place (at-least-once)",
                        "[kv][adapter][replay]", kvtest::kv_fixtures) {
  TestType fx;
  auto store = fx.make();
  bool fail = true;
  std::vector<std::string> got;
  dlq::KeyValueStorage s(store, [&](const std::vector<dlq::kv::Message>& m) {
    for (auto& x : m)
      got.emplace_back(x.payload);  // delivered, then the sink fails
    if (fail) throw std::runtime_error("destination down");
  });
  s.push_many({rec("q", "1", "a"), rec("q", "2", "b")});
  typename std::remove_reference_t<decltype(s)>::replay_cursor cursor;
  CHECK_THROWS_AS(s.replay_step("q", cursor, 10, replay_all_to{"q"}), std::runtime_error);
  CHECK(s.size("q", ListKind::dead) == 2);
  fail = false;
  CHECK(replay_everything(s, "q", 10, "q") == 2);
  CHECK(s.size("q", ListKind::dead) == 0);
  CHECK(got == std::vector<std::string>{"a", "b", "a", "b"});  // the price: duplicates
}

TEMPLATE_LIST_TEST_CASE("a job dead-lettered again during replay keeps its new record",
                        "[kv][adapter][replay]", kvtest::kv_fixtures) {
  TestType fx;
  auto store = fx.make();
  std::function<void()> during_push;
  dlq::kv::MemoryQueues queues;
  dlq::KeyValueStorage s(store, [&](const std::vector<dlq::kv::Message>& m) {
    queues.push_many(m);
    if (during_push) during_push();
  });
  dlq::KeyValueStorage producer(store, dlq::kv::MemoryQueues{});  // another worker
  s.push_many({rec("q", "job-1", "attempt 3"), rec("q", "job-2", "other")});
  during_push = [&] { producer.push(rec("q", "job-1", "attempt 4")); };
  typename std::remove_reference_t<decltype(s)>::replay_cursor cursor;
  auto r = s.replay_step("q", cursor, 10, replay_all_to{"q"});
  CHECK(r.examined == 2);
  CHECK_FALSE(r.conflict);
  CHECK(queues.contents("q") == std::vector<std::string>{"attempt 3", "other"});
  CHECK(s.range("q", ListKind::dead, 0, 100) == std::vector<std::string>{"attempt 4"});
  CHECK(s.superseded() == 1);
  // The new record comes after the cursor: the same run reaches it (a new failure).
  during_push = nullptr;
  auto r2 = s.replay_step("q", cursor, 10, replay_all_to{"q"});
  CHECK(r2.examined == 1);
  CHECK(s.size("q", ListKind::dead) == 0);
}

TEMPLATE_LIST_TEST_CASE("a cursor skips kept records and sees records saved after it",
                        "[kv][adapter][replay]", kvtest::kv_fixtures) {
  TestType fx;
  dlq::KeyValueStorage s(fx.make());
  s.push_many({rec("q", "1", "keep"), rec("q", "2", "go")});
  typename std::remove_reference_t<decltype(s)>::replay_cursor cursor;
  auto decide = [](std::string_view raw, Decision& d) {
    if (raw == "keep") return;
    d.action = Action::replay;
    d.destination = "q";
    d.payload = raw;
  };
  CHECK(s.replay_step("q", cursor, 1, decide).examined == 1);  // kept
  s.push(rec("q", "3", "late"));
  CHECK(s.replay_step("q", cursor, 10, decide).examined == 2);
  CHECK(s.replay_step("q", cursor, 10, decide).examined == 0);
  CHECK(s.sink().contents("q") == std::vector<std::string>{"go", "late"});
  CHECK(s.range("q", ListKind::dead, 0, 100) == std::vector<std::string>{"keep"});
}

TEMPLATE_LIST_TEST_CASE("concurrent producers and a replayer lose nothing and push each once",
                        "[kv][adapter][replay][threads]", kvtest::kv_fixtures) {
  TestType fx;
  dlq::KeyValueStorage s(fx.make());
  constexpr int producers = 3;
  constexpr int per_producer = 150;
  std::atomic<int> done{0};
  std::vector<std::thread> pool;
  for (int p = 0; p < producers; ++p) {
    pool.emplace_back([&, p] {
      for (int i = 0; i < per_producer; ++i) {
        const std::string id = "p" + std::to_string(p) + "-" + std::to_string(i);
        s.push(rec("q", id, id));
      }
      ++done;
    });
  }
  std::size_t replayed = 0;
  for (int guard = 0; guard < 100000; ++guard) {
    const bool finished = done.load() == producers;
    replayed += replay_everything(s, "q", 16, "q");
    if (finished) break;
    std::this_thread::yield();
  }
  for (auto& t : pool)
    t.join();
  replayed += replay_everything(s, "q", 16, "q");
  CHECK(replayed == producers * per_producer);
  auto pushed = s.sink().contents("q");
  std::sort(pushed.begin(), pushed.end());
  CHECK(std::adjacent_find(pushed.begin(), pushed.end()) == pushed.end());
  CHECK(pushed.size() == producers * per_producer);
  CHECK(s.size("q", ListKind::dead) == 0);
}

TEST_CASE("MemoryQueues is a FIFO per queue and copies share it", "[kv][sink]") {
  dlq::kv::MemoryQueues a;
  dlq::kv::MemoryQueues b = a;
  a.push("q", "1");
  b.push_many({dlq::kv::Message{"q", "2"}, dlq::kv::Message{"r", "3"}});
  CHECK(a.size("q") == 2);
  CHECK(a.pop("q") == std::optional<std::string>("1"));
  CHECK(b.contents("q") == std::vector<std::string>{"2"});
  CHECK(b.contents("none").empty());
  CHECK_FALSE(b.pop("none"));
  a.clear();
  CHECK(b.size("r") == 0);
}

TEST_CASE("sink detection accepts the four shapes and refuses others", "[kv][sink]") {
  struct none {};
  struct batch {
    void push_many(const std::vector<dlq::kv::Message>&) {}
  };
  auto single = [](std::string_view, std::string_view) {};
  STATIC_REQUIRE(dlq::kv::is_sink_v<batch>);
  STATIC_REQUIRE(dlq::kv::is_sink_v<decltype(single)>);
  STATIC_REQUIRE(dlq::kv::is_sink_v<std::reference_wrapper<batch>>);
  STATIC_REQUIRE(dlq::kv::is_sink_v<dlq::kv::MemoryQueues>);
  STATIC_REQUIRE(dlq::kv::is_sink_v<dlq::kv::AnySink>);
  STATIC_REQUIRE_FALSE(dlq::kv::is_sink_v<none>);
  STATIC_REQUIRE_FALSE(dlq::kv::is_sink_v<int>);
}

// --- the storage contract's optional policy members: declared exactly when the store has
// what they forward to, so the front end falls back otherwise

using MemoryAdapter = dlq::KeyValueStorage<dlq::kv::MemoryStore>;
using MinimalAdapter = dlq::KeyValueStorage<kvtest::MinimalStore>;
static_assert(dlq::detail::push_returns_size<MemoryAdapter>::value);
static_assert(dlq::detail::has_push_bounded<MemoryAdapter>::value);
static_assert(dlq::detail::has_bump_count<MemoryAdapter>::value);
static_assert(!dlq::detail::push_returns_size<MinimalAdapter>::value);
static_assert(!dlq::detail::has_push_bounded<MinimalAdapter>::value);
static_assert(!dlq::detail::has_bump_count<MinimalAdapter>::value);
static_assert(
    std::is_void_v<decltype(std::declval<MinimalAdapter&>().push(std::declval<const Record&>()))>);
static_assert(dlq::is_storage_v<MinimalAdapter>);
#if DLQ_TEST_HAVE_SQLITE
static_assert(dlq::detail::push_returns_size<dlq::KeyValueStorage<dlq::kv::SqliteStore>>::value);
static_assert(dlq::detail::has_push_bounded<dlq::KeyValueStorage<dlq::kv::SqliteStore>>::value);
static_assert(dlq::detail::has_bump_count<dlq::KeyValueStorage<dlq::kv::SqliteStore>>::value);
#endif
#if DLQ_TEST_HAVE_REDIS
static_assert(dlq::detail::push_returns_size<dlq::KeyValueStorage<dlq::kv::RedisStore>>::value);
static_assert(dlq::detail::has_push_bounded<dlq::KeyValueStorage<dlq::kv::RedisStore>>::value);
static_assert(dlq::detail::has_bump_count<dlq::KeyValueStorage<dlq::kv::RedisStore>>::value);
#endif

TEMPLATE_LIST_TEST_CASE("push returns the dead list's new length; a replaced job adds none",
                        "[kv][adapter][policies]", kvtest::kv_fixtures) {
  TestType fx;
  dlq::KeyValueStorage s(fx.make());
  if constexpr (dlq::detail::push_returns_size<decltype(s)>::value) {
    CHECK(s.push(rec("orders", "job-1", "a")) == 1);
    CHECK(s.push(rec("orders", "job-2", "b")) == 2);
    CHECK(s.push(rec("orders", "job-1", "a again")) == 2);
    CHECK(s.push(rec("billing", "job-1", "c")) == 1);
    CHECK(s.push(Record{"orders", "", "", "no id"}) == 3);  // keyed by its derived id
    CHECK(s.queues() == std::vector<std::string>{"billing", "orders"});
    CHECK_THROWS_AS(s.push(rec("", "x", "y")), dlq::invalid_argument);
  }
}

TEMPLATE_LIST_TEST_CASE("push_bounded stores only below the bound and registers the queue",
                        "[kv][adapter][policies]", kvtest::kv_fixtures) {
  TestType fx;
  dlq::KeyValueStorage s(fx.make());
  if constexpr (dlq::detail::has_push_bounded<decltype(s)>::value) {
    CHECK(s.push_bounded(rec("orders", "job-1", "a"), 2));
    CHECK(s.queues() == std::vector<std::string>{"orders"});
    CHECK(s.push_bounded(rec("orders", "job-2", "b"), 2));
    CHECK_FALSE(s.push_bounded(rec("orders", "job-3", "c"), 2));
    CHECK(s.push_bounded(rec("orders", "job-1", "a again"), 2));  // a replacement: admitted
    CHECK(s.range("orders", ListKind::dead, 0, 10) == std::vector<std::string>{"b", "a again"});
    CHECK_FALSE(s.push_bounded(rec("billing", "job-1", "x"), 0));
    CHECK(s.queues() == std::vector<std::string>{"orders"});  // registered, but empty
    CHECK_THROWS_AS(s.push_bounded(rec("", "x", "y"), 5), dlq::invalid_argument);
  }
}

TEMPLATE_LIST_TEST_CASE("bump_count counts per queue and key in the store, shared by adapters",
                        "[kv][adapter][policies]", kvtest::kv_fixtures) {
  TestType fx;
  auto store = fx.make();
  dlq::KeyValueStorage a(store);
  dlq::KeyValueStorage b(store);  // another adapter on the same data (another process, say)
  if constexpr (dlq::detail::has_bump_count<decltype(a)>::value) {
    const std::chrono::seconds ttl(3600);
    CHECK(a.bump_count("orders", "job:1", ttl) == 1);
    CHECK(b.bump_count("orders", "job:1", ttl) == 2);
    CHECK(a.bump_count("billing", "job:1", ttl) == 1);
    CHECK(b.bump_count("orders", "job:2", ttl) == 1);
    CHECK(a.bump_count("orders", "job:1", ttl) == 3);
    dlq::KeyValueStorage other(store, dlq::kv::MemoryQueues{}, kv_prefix("other:"));
    CHECK(other.bump_count("orders", "job:1", ttl) == 1);  // another prefix, other counters
    CHECK(a.size("orders", ListKind::dead) == 0);
    CHECK_THROWS_AS(a.bump_count("", "job:1", ttl), dlq::invalid_argument);
  }
}

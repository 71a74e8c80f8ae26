// The contract suite, operator operations (issue 14): search with continuation, discard by
// filter, edited replay, and the audit trail — on every backend. Included at the end of
// contract_suite.hpp; uses its fixtures and helpers.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlq/detail/sha256.hpp"

namespace contract_ops {

// A clock that moves only when told to (one second per send in these tests).
struct manual_clock {
  std::shared_ptr<std::chrono::system_clock::time_point> now =
      std::make_shared<std::chrono::system_clock::time_point>(std::chrono::seconds(1796000000));
  std::function<std::chrono::system_clock::time_point()> fn() const {
    auto n = now;
    return [n] { return *n; };
  }
  void advance(std::chrono::seconds s) const { *now += s; }
};

// Every matching id of a full search, in order, with at most `limit` per page and
// `max_examined` per call; checks the bounds and the progress of every call.
template <class Q>
std::vector<std::string> search_all(Q& q, const dlq::Filter& f, std::size_t limit,
                                    std::size_t max_examined) {
  std::vector<std::string> ids;
  std::string token;
  for (int calls = 0; calls < 100000; ++calls) {
    const auto page = q.search("orders", f, token, limit, max_examined);
    CHECK(page.entries.size() <= limit);
    CHECK(page.examined <= max_examined);
    CHECK_FALSE(page.restarted());
    for (const auto& e : page.entries)
      ids.push_back(e.id);
    if (page.done()) return ids;
    token = page.continuation;
  }
  FAIL("search did not finish");
  return ids;
}

}  // namespace contract_ops

// --- operator operations: search ------------------------------------------------------------

TEMPLATE_TEST_CASE("search pages through the matches of every filter condition with a token",
                   "[contract][ops][search]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  contract_ops::manual_clock clock;
  dlq::Options options;
  options.clock = clock.fn();
  contract::queue_of<TestType> q(fx.storage(), options);
  struct sent {
    std::string id;
    int i;
  };
  std::vector<sent> all;
  for (int i = 0; i < 240; ++i) {
    dlq::Failure f = contract::failure(i % 3 == 0 ? "payment timeout" : "bad input", 1,
                                       "w" + std::to_string(i % 2));
    if (i % 5 == 0) f.error_type = "TimeoutError";
    if (i % 40 == 0) f.job_id = "job-" + std::to_string(i);
    const std::string payload =
        "{\"i\":" + std::to_string(i) + (i % 7 == 0 ? ",\"note\":\"needle\"}" : "}");
    all.push_back({q.send_to_dlq("orders", payload, f), i});
    clock.advance(std::chrono::seconds(1));
  }
  fx.push_raw("orders", "not json at all");  // corrupt: matches only an empty filter
  q.send_to_dlq("other", "{\"i\":1}", contract::failure("payment timeout"));

  auto expect = [&](auto pred) {
    std::vector<std::string> ids;
    for (const auto& s : all)
      if (pred(s.i)) ids.push_back(s.id);
    return ids;
  };
  dlq::Filter f;
  f.error_contains = "timeout";
  CHECK(contract_ops::search_all(q, f, 7, 40) == expect([](int i) { return i % 3 == 0; }));
  f = {};
  f.worker = "w1";
  f.error_type = "TimeoutError";
  CHECK(contract_ops::search_all(q, f, 3, 25) ==
        expect([](int i) { return i % 2 == 1 && i % 5 == 0; }));
  f = {};
  f.payload_contains = "needle";
  CHECK(contract_ops::search_all(q, f, 100, 1000) == expect([](int i) { return i % 7 == 0; }));
  f = {};
  f.job_id = "job-80";
  CHECK(contract_ops::search_all(q, f, 5, 50) == expect([](int i) { return i == 80; }));
  f = {};
  f.ids = {all[3].id, all[200].id, "no-such-id"};
  CHECK(contract_ops::search_all(q, f, 1, 10) == std::vector<std::string>{all[3].id, all[200].id});
  // Age: sent one second apart, the clock now 240 s after the first.
  f = {};
  f.older_than = std::chrono::seconds(200);  // i <= 40
  f.newer_than = std::chrono::seconds(230);  // i >= 10
  CHECK(contract_ops::search_all(q, f, 4, 33) == expect([](int i) { return i >= 10 && i <= 40; }));
  f = {};
  f.predicate = [](const dlq::Entry& e) { return e.ok() && e.payload == "{\"i\":17}"; };
  CHECK(contract_ops::search_all(q, f, 4, 33) == expect([](int i) { return i == 17; }));
  // The empty filter returns everything, the corrupt entry included.
  const auto everything = contract_ops::search_all(q, dlq::Filter{}, 50, 64);
  CHECK(everything.size() == 241);
  CHECK(std::equal(all.begin(), all.end(), everything.begin(),
                   [](const auto& s, const std::string& id) { return s.id == id; }));

  // A page reports its progress; a search of an empty queue is done at once.
  const auto page = q.search("orders", dlq::Filter{}, {}, 10, 100);
  CHECK(page.size == 241);
  CHECK(page.position == 10);
  CHECK(page.examined == 10);
  CHECK(q.search("nothing-here", dlq::Filter{}).done());
  CHECK_THROWS_AS(q.search("orders", dlq::Filter{}, "garbage"), dlq::invalid_argument);
  CHECK_THROWS_AS(q.search("orders", dlq::Filter{}, "s1:5:"), dlq::invalid_argument);
}

TEMPLATE_TEST_CASE("search resumes exactly while entries are removed and added between calls",
                   "[contract][ops][search]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  contract::queue_of<TestType> q(fx.storage());
  std::set<std::string> matching;  // matching entries that were never removed
  std::set<std::string> removed;
  int n = 0;
  auto send = [&] {
    const bool match = n % 2 == 0;
    const std::string id =
        q.send_to_dlq("orders", std::to_string(n), contract::failure(match ? "x" : "y"));
    if (match) matching.insert(id);
    ++n;
  };
  for (int i = 0; i < 300; ++i)
    send();
  dlq::Filter f;
  f.error_contains = "x";
  std::vector<std::string> returned;
  std::string token;
  int round = 0;
  for (;; ++round) {
    REQUIRE(round < 1000);
    const auto page = q.search("orders", f, token, 4, 15);
    CHECK_FALSE(page.restarted());
    for (const auto& e : page.entries)
      returned.push_back(e.id);
    if (page.done()) break;
    token = page.continuation;
    // Between calls: remove the last entry examined and two before it, some returned
    // matches, and append new entries (two of them match) behind.
    const auto before = q.peek("orders", 0, page.position);
    for (const std::size_t back : {std::size_t{1}, std::size_t{3}, std::size_t{7}}) {
      if (before.size() < back) continue;
      const std::string& id = before[before.size() - back].id;
      if (removed.insert(id).second) {
        CHECK(q.remove("orders", id));
        matching.erase(id);
      }
    }
    if (round % 3 == 0)
      for (int k = 0; k < 4; ++k)
        send();
  }
  std::set<std::string> unique(returned.begin(), returned.end());
  CHECK(unique.size() == returned.size());  // nothing twice
  for (const auto& id : matching)           // every match that stayed, once
    CHECK(unique.count(id) == 1);
  for (const auto& id : returned)  // only matches (some removed after being returned)
    CHECK((matching.count(id) == 1 || removed.count(id) == 1));
}

TEMPLATE_TEST_CASE("search restarts, skipping nothing, when every entry it examined last is gone",
                   "[contract][ops][search]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  contract::queue_of<TestType> q(fx.storage());
  std::vector<std::string> ids;
  for (int i = 0; i < 100; ++i)
    ids.push_back(q.send_to_dlq("orders", std::to_string(i), contract::failure("e")));
  const auto first = q.search("orders", dlq::Filter{}, {}, 40, 1000);
  REQUIRE(first.entries.size() == 40);
  for (int i = 0; i < 40; ++i)  // every entry examined so far
    REQUIRE(q.remove("orders", ids[static_cast<std::size_t>(i)]));
  auto page = q.search("orders", dlq::Filter{}, first.continuation, 1000, 1000);
  CHECK(page.restarted());
  REQUIRE(page.entries.size() == 60);
  CHECK(page.entries.front().id == ids[40]);
  CHECK(page.done());
}

// --- operator operations: discard -----------------------------------------------------------

TEMPLATE_TEST_CASE("discard deletes exactly the matching entries, reports and audits them",
                   "[contract][ops][discard]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  std::vector<std::string> events;
  dlq::Options options;
  options.actor = "alice";
  options.audit_max_ids = 10;
  options.on_event = [&](const dlq::Event& e) {
    if (e.kind == dlq::EventKind::discarded) {
      events.emplace_back(e.id);
      CHECK(e.detail == "discard");
    }
  };
  contract::queue_of<TestType> q(fx.storage(), options);
  std::vector<std::string> expected, kept;
  for (int i = 0; i < 120; ++i) {
    const bool match = i % 4 == 1;
    const std::string id = q.send_to_dlq(
        "orders", std::to_string(i),
        contract::failure(match ? "payment timeout" : "payment ok", 1, match ? "w1" : "w2"));
    (match ? expected : kept).push_back(id);
  }
  dlq::DiscardOptions o;
  o.error_contains = "timeout";
  o.worker = "w1";
  o.dry_run = true;
  auto dry = q.discard("orders", o);
  CHECK(dry.dry_run);
  CHECK(dry.discarded == expected.size());
  CHECK(dry.discarded_ids == expected);
  CHECK(q.size("orders") == 120);
  CHECK(events.empty());

  o.dry_run = false;
  o.actor = "bob";
  const auto r = q.discard("orders", o);
  CHECK(r.examined == 120);
  CHECK(r.discarded == expected.size());
  CHECK(r.discarded_ids == expected);
  CHECK(events == expected);
  CHECK(q.counters().discarded == expected.size());
  std::vector<std::string> left;
  for (const auto& e : q.peek("orders", 0, 1000))
    left.push_back(e.id);
  CHECK(left == kept);

  const auto trail = q.audit("orders");  // the dry run changed nothing: no record
  REQUIRE(trail.size() == 1);
  CHECK(trail[0].operation == "discard");
  CHECK(trail[0].actor == "bob");
  CHECK(trail[0].outcome == "ok");
  CHECK(trail[0].queue == "orders");
  CHECK(trail[0].filter == nlohmann::ordered_json{{"error_contains", "timeout"}, {"worker", "w1"}});
  CHECK(trail[0].counts["discarded"] == expected.size());
  CHECK(trail[0].counts["examined"] == 120);
  CHECK(trail[0].ids == std::vector<std::string>(expected.begin(), expected.begin() + 10));
  CHECK(trail[0].ids_omitted == expected.size() - 10);

  // A limit stops after that many; an empty filter takes corrupt entries too.
  fx.push_raw("orders", "garbage");
  dlq::DiscardOptions some;
  some.limit = 5;
  CHECK(q.discard("orders", some).discarded_ids ==
        std::vector<std::string>(kept.begin(), kept.begin() + 5));
  CHECK(q.discard("orders").discarded == kept.size() - 5 + 1);
  CHECK(q.size("orders") == 0);
}

TEMPLATE_TEST_CASE("discard with concurrent senders and replayers loses and doubles nothing",
                   "[contract][ops][discard][concurrency]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  dlq::Options options;
  options.replay_batch_items = 64;
  contract::queue_of<TestType> q(fx.storage(), options);
  std::mutex mutex;
  std::map<std::string, std::string> payload_of;  // id -> payload
  auto send = [&](const std::string& tag, int i) {
    const std::string payload = tag + ":" + std::to_string(i);
    const std::string id =
        q.send_to_dlq("orders", payload, contract::failure(i % 2 == 0 ? "drop me" : "keep me"));
    std::lock_guard<std::mutex> lock(mutex);
    payload_of[id] = payload;
  };
  for (int i = 0; i < 1200; ++i)
    send("pre", i);
  std::atomic<bool> senders_done{false};
  std::vector<std::thread> senders;
  for (int t = 0; t < 2; ++t)
    senders.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i)
        send("t" + std::to_string(t), i);
    });
  std::size_t replayed = 0;
  std::thread replayer([&] {
    dlq::ReplayOptions o;
    o.error_contains = "keep";
    do {
      replayed += q.replay("orders", o).replayed;
    } while (!senders_done);
    replayed += q.replay("orders", o).replayed;
  });
  std::vector<std::string> discarded;
  dlq::DiscardOptions o;
  o.error_contains = "drop";
  auto run_discard = [&] {
    const auto r = q.discard("orders", o);
    CHECK(r.discarded == r.discarded_ids.size());
    discarded.insert(discarded.end(), r.discarded_ids.begin(), r.discarded_ids.end());
  };
  for (int k = 0; k < 3; ++k)
    run_discard();
  for (auto& t : senders)
    t.join();
  senders_done = true;
  replayer.join();
  run_discard();

  REQUIRE(payload_of.size() == 1800);
  CHECK(q.size("orders") == 0);
  std::multiset<std::string> seen;
  for (const auto& id : discarded) {
    REQUIRE(payload_of.count(id) == 1);
    const int i = std::stoi(payload_of[id].substr(payload_of[id].find(':') + 1));
    CHECK(i % 2 == 0);
    seen.insert(payload_of[id]);
  }
  const auto src = fx.source("orders");
  CHECK(src.size() == replayed);
  for (const auto& p : src) {
    CHECK(std::stoi(p.substr(p.find(':') + 1)) % 2 == 1);
    seen.insert(p);
  }
  CHECK(seen.size() == 1800);
  CHECK(std::set<std::string>(seen.begin(), seen.end()).size() == 1800);
  CHECK(q.counters().discarded == discarded.size());
}

// --- operator operations: edited replay -----------------------------------------------------

TEMPLATE_TEST_CASE("an edited replay pushes the transformed payload and audits both hashes",
                   "[contract][ops][edit]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  contract::queue_of<TestType> q(fx.storage());
  std::vector<std::string> ids;
  for (int i = 0; i < 50; ++i)
    ids.push_back(q.send_to_dlq("orders", "{\"i\":" + std::to_string(i) + "}",
                                contract::failure("schema error")));
  dlq::ReplayOptions o;
  o.record_ids = true;
  o.transform = [](const dlq::Entry& e) -> std::optional<std::string> {
    const int i = std::stoi(e.payload.substr(5));
    if (i % 2 != 0) return std::nullopt;
    return "{\"i\":" + std::to_string(i) + ",\"fixed\":true}";
  };
  o.dry_run = true;
  const auto dry = q.replay("orders", o);
  CHECK(dry.edited == 25);
  CHECK(fx.source("orders").empty());
  CHECK(q.size("orders") == 50);

  o.dry_run = false;
  const auto r = q.replay("orders", o);
  CHECK(r.replayed == 50);
  CHECK(r.edited == 25);
  CHECK(r.replayed_ids == ids);
  const auto src = fx.source("orders");
  REQUIRE(src.size() == 50);
  for (int i = 0; i < 50; ++i)
    CHECK(src[static_cast<std::size_t>(i)] ==
          "{\"i\":" + std::to_string(i) + (i % 2 == 0 ? ",\"fixed\":true}" : "}"));
  CHECK(q.size("orders") == 0);

  const auto trail = q.audit("orders");  // the dry run changed nothing: no record
  REQUIRE(trail.size() == 1);
  const auto& rec = trail[0];
  CHECK(rec.operation == "replay_edited");
  CHECK(rec.counts["edited"] == 25);
  CHECK(rec.counts["replayed"] == 50);
  CHECK(rec.ids == ids);
  REQUIRE(rec.detail["edits"].size() == 25);
  const auto& first = rec.detail["edits"][0];
  CHECK(first["id"] == ids[0]);
  CHECK(first["old_sha256"] == dlq::detail::sha256_hex("{\"i\":0}"));
  CHECK(first["new_sha256"] == dlq::detail::sha256_hex("{\"i\":0,\"fixed\":true}"));
}

TEMPLATE_TEST_CASE("replay_edited replays one entry with a new payload, the others stay",
                   "[contract][ops][edit]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  dlq::Options options;
  options.actor = "ops-default";
  contract::queue_of<TestType> q(fx.storage(), options);
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(q.send_to_dlq("orders", "old-" + std::to_string(i), contract::failure("e")));
  const std::string fixed("new\0bytes", 9);
  const auto r = q.replay_edited("orders", ids[1], fixed, "carol");
  CHECK(r.replayed == 1);
  CHECK(r.edited == 1);
  CHECK(fx.source("orders") == std::vector<std::string>{fixed});
  REQUIRE(q.size("orders") == 2);
  CHECK(q.peek("orders")[0].payload == "old-0");
  CHECK(q.peek("orders")[1].payload == "old-2");

  const auto missing = q.replay_edited("orders", "no-such-id", "x");
  CHECK(missing.replayed == 0);
  REQUIRE(missing.skipped.size() == 1);
  CHECK(missing.skipped[0].reason == dlq::SkipReason::not_found);
  CHECK(fx.source("orders").size() == 1);

  const auto trail = q.audit("orders");  // the id not found changed nothing: no record
  REQUIRE(trail.size() == 1);
  CHECK(trail[0].operation == "replay_edited");
  CHECK(trail[0].actor == "carol");
  CHECK(trail[0].ids == std::vector<std::string>{ids[1]});
  CHECK(trail[0].filter["ids"] == std::vector<std::string>{ids[1]});
  CHECK(trail[0].detail["edits"][0]["old_sha256"] == dlq::detail::sha256_hex("old-1"));
  CHECK(trail[0].detail["edits"][0]["new_sha256"] == dlq::detail::sha256_hex(fixed));
}

TEMPLATE_TEST_CASE("an edit to an empty or blank payload is refused and moves nothing",
                   "[contract][ops][edit]", DLQ_CONTRACT_FIXTURES) {
  // A failed transform (jq that failed inside a pipeline, `true`, `echo`, an empty file)
  // yields "" or a newline; replaying that would push a job that cannot be a job and delete
  // the original, which then survives only as a hash in the audit trail.
  TestType fx;
  contract::queue_of<TestType> q(fx.storage());
  std::vector<std::string> ids;
  for (int i = 0; i < 20; ++i)
    ids.push_back(q.send_to_dlq("orders", "{\"i\":" + std::to_string(i) + "}",
                                contract::failure("schema error")));
  const auto intact = [&](std::size_t dead) {
    CHECK(fx.source("orders").empty());
    CHECK(q.size("orders") == dead);
    const auto e = q.get("orders", ids[3]);
    REQUIRE(e);
    CHECK(e->payload == "{\"i\":3}");
  };
  for (const std::string blank : {"", "\n", " \t\r\n"}) {
    INFO("edited payload '" << blank << "' (" << blank.size() << " bytes)");
    CHECK_THROWS_AS(q.replay_edited("orders", ids[3], blank), dlq::invalid_argument);
    intact(20);
    dlq::ReplayOptions o = dlq::ReplayOptions::by_ids({ids[3]});
    o.transform = [&blank](const dlq::Entry&) -> std::optional<std::string> { return blank; };
    CHECK_THROWS_AS(q.replay("orders", o), dlq::invalid_argument);
    intact(20);
    o.dry_run = true;
    CHECK_THROWS_AS(q.replay("orders", o), dlq::invalid_argument);
    intact(20);
  }
  std::string what;
  try {
    q.replay_edited("orders", ids[3], "");
  } catch (const dlq::invalid_argument& e) {
    what = e.what();
  }
  CHECK(what.find(ids[3]) != std::string::npos);
  CHECK(what.find("empty") != std::string::npos);
  CHECK(what.find("nothing was replayed") != std::string::npos);
  // A replay of many entries whose transform blanks one of them: the batches before it are
  // replayed (edited), the batch holding it is refused whole; the blank one never leaves.
  dlq::ReplayOptions all = dlq::ReplayOptions::all();
  all.transform = [](const dlq::Entry& e) -> std::optional<std::string> {
    if (e.payload == "{\"i\":3}") return std::string();
    return e.payload + " ";
  };
  CHECK_THROWS_AS(q.replay("orders", all), dlq::invalid_argument);
  const auto src = fx.source("orders");
  CHECK(src.size() + q.size("orders") == 20);
  for (const auto& job : src)
    CHECK(job.find_first_not_of(" \t\r\n") != std::string::npos);
  const auto e = q.get("orders", ids[3]);
  REQUIRE(e);
  CHECK(e->payload == "{\"i\":3}");
  const auto trail = q.audit("orders");
  REQUIRE_FALSE(trail.empty());
  CHECK(trail.back().operation == "replay_edited");
  CHECK(trail.back().outcome.rfind("failed: ", 0) == 0);
}

TEMPLATE_TEST_CASE("an edited replay with concurrent senders and replayers edits each entry once",
                   "[contract][ops][edit][concurrency]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  dlq::Options options;
  options.replay_batch_items = 50;
  contract::queue_of<TestType> q(fx.storage(), options);
  for (int i = 0; i < 1000; ++i)
    q.send_to_dlq("orders", "pre:" + std::to_string(i), contract::failure("e"));
  dlq::ReplayOptions o;
  o.transform = [](const dlq::Entry& e) -> std::optional<std::string> { return e.payload + "!"; };
  std::atomic<bool> senders_done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 250; ++i)
        q.send_to_dlq("orders", "t" + std::to_string(t) + ":" + std::to_string(i),
                      contract::failure("e"));
    });
  std::atomic<std::size_t> edited{0}, replayed{0};
  std::vector<std::thread> replayers;
  for (int t = 0; t < 2; ++t)
    replayers.emplace_back([&] {
      do {
        const auto r = q.replay("orders", o);
        edited += r.edited;
        replayed += r.replayed;
      } while (!senders_done);
    });
  for (auto& t : threads)
    t.join();
  senders_done = true;
  for (auto& t : replayers)
    t.join();
  const auto last = q.replay("orders", o);
  edited += last.edited;
  replayed += last.replayed;

  const auto src = fx.source("orders");
  CHECK(src.size() == 1500);
  CHECK(edited == 1500);
  CHECK(replayed == 1500);
  std::set<std::string> unique(src.begin(), src.end());
  CHECK(unique.size() == 1500);
  for (const auto& p : src)
    CHECK(p.back() == '!');
  CHECK(q.size("orders") == 0);
}

// --- operator operations: audit trail -------------------------------------------------------

TEMPLATE_TEST_CASE("every operator mutation writes one audit record with exact counts and ids",
                   "[contract][ops][audit]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  contract_ops::manual_clock clock;
  dlq::Options options;
  options.clock = clock.fn();
  options.actor = "alice";
  options.replay_batch_items = 10;  // many batches, still one record
  contract::queue_of<TestType> q(fx.storage(), options);
  std::vector<std::string> ids;
  for (int i = 0; i < 60; ++i)
    ids.push_back(q.send_to_dlq("orders", std::to_string(i),
                                contract::failure("e", 1, i < 30 ? "w1" : "w2")));
  CHECK(q.audit("orders").empty());  // sends are not audited
  CHECK(q.counters().audited == 0);

  dlq::ReplayOptions by_worker;
  by_worker.worker = "w1";
  by_worker.record_ids = true;
  const auto r = q.replay("orders", by_worker);
  REQUIRE(r.replayed == 30);
  clock.advance(std::chrono::seconds(60));
  const auto middle = clock.fn()();
  CHECK(q.remove("orders", ids[30]));
  CHECK_FALSE(q.remove("orders", "no-such-id"));  // changed nothing: no record
  CHECK(q.purge_corrupt("orders") == 0);          // likewise
  CHECK(q.purge("orders") == 29);
  CHECK(q.recover("orders") == 0);  // likewise

  const auto trail = q.audit("orders");
  std::vector<std::string> operations;
  for (const auto& rec : trail) {
    operations.push_back(rec.operation);
    CHECK(rec.actor == "alice");
    CHECK(rec.queue == "orders");
  }
  CHECK(operations == std::vector<std::string>{"replay", "remove", "purge"});
  REQUIRE(trail.size() == 3);
  CHECK(trail[0].filter == nlohmann::ordered_json{{"worker", "w1"}});
  CHECK(trail[0].counts["replayed"] == 30);
  CHECK(trail[0].counts["examined"] == 60);
  CHECK(trail[0].counts["batches"] == r.batches);
  CHECK(trail[0].ids == r.replayed_ids);
  CHECK(trail[0].detail["destination"] == "orders");
  CHECK(trail[1].ids == std::vector<std::string>{ids[30]});
  CHECK(trail[1].counts["removed"] == 1);
  CHECK(trail[1].outcome == "ok");
  CHECK(trail[2].counts["purged"] == 29);
  CHECK(q.counters().audited == trail.size());
  CHECK(q.counters().audit_errors == 0);

  // since: only the records made from then on (the replay was a minute earlier).
  const auto later = q.audit("orders", middle);
  CHECK(later.size() == trail.size() - 1);
  CHECK(later.front().operation == "remove");
  CHECK(q.audit("orders", {}, 2).size() == 2);
  CHECK(q.audit("other").empty());

  // trim: one record when it evicted something, none for an empty run.
  for (int i = 0; i < 5; ++i)
    q.send_to_dlq("capped", std::to_string(i), contract::failure("e"));
  dlq::Options capped = options;
  capped.retention_for["capped"].max_length = 2;
  contract::queue_of<TestType> q2(fx.storage(), capped);
  CHECK(q2.trim("capped").evicted() == 3);
  CHECK(q2.trim("capped").evicted() == 0);
  const auto trims = q2.audit("capped");
  REQUIRE(trims.size() == 1);
  CHECK(trims[0].operation == "trim");
  CHECK(trims[0].counts["evicted_for_length"] == 3);
}

// Issue 27, defect 5: a record per request that changed nothing let anyone who may delete
// flush the trail (11 requests of 1000 made-up ids pushed a purge out of a 10 000 cap). The
// trail records changes only, so its growth is bounded by real changes, not by requests.
TEMPLATE_TEST_CASE("an operation that changes nothing writes no audit record",
                   "[contract][ops][audit]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  contract::queue_of<TestType> q(fx.storage());
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(q.send_to_dlq("orders", std::to_string(i), contract::failure("e")));

  for (int i = 0; i < 50; ++i)
    CHECK_FALSE(q.remove("orders", "made-up-" + std::to_string(i)));
  CHECK_FALSE(q.remove("never-used", ids[0]));
  CHECK(q.purge("never-used") == 0);
  CHECK(q.purge_corrupt("orders") == 0);
  CHECK(q.recover("orders") == 0);
  dlq::ReplayOptions none;
  none.error_contains = "no such error";
  CHECK(q.replay("orders", none).replayed == 0);
  CHECK(q.replay_ids("orders", {"made-up"}).replayed == 0);
  CHECK(q.replay_all("never-used").examined == 0);
  dlq::ReplayOptions dry = dlq::ReplayOptions::all();
  dry.dry_run = true;
  CHECK(q.replay("orders", dry).replayed == 3);  // would be
  dlq::DiscardOptions nothing;
  nothing.error_contains = "no such error";
  CHECK(q.discard("orders", nothing).discarded == 0);
  dlq::DiscardOptions dry_discard;
  dry_discard.dry_run = true;
  CHECK(q.discard("orders", dry_discard).discarded == 3);  // would be
  CHECK(q.size("orders") == 3);

  CHECK(q.audit("orders").empty());
  CHECK(q.audit("never-used").empty());
  CHECK(q.counters().audited == 0);
  CHECK(q.counters().audit_errors == 0);

  CHECK(q.remove("orders", ids[1]));  // a change: one record
  const auto trail = q.audit("orders");
  REQUIRE(trail.size() == 1);
  CHECK(trail[0].operation == "remove");
  CHECK(trail[0].ids == std::vector<std::string>{ids[1]});
}

// Retention of the trail by age (issue 27, defect 5): a record older than the trail's max
// age (default 90 days, by the writer's clock, Options::clock) is removed when a record is
// written; a younger one stays, however many records there are.
TEMPLATE_TEST_CASE("audit records older than the max age go when a record is written, younger stay",
                   "[contract][ops][audit]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  contract_ops::manual_clock clock;
  dlq::Options options;
  options.clock = clock.fn();
  contract::queue_of<TestType> q(fx.storage(), options);
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i)
    ids.push_back(q.send_to_dlq("orders", std::to_string(i), contract::failure("e")));
  const auto day = std::chrono::hours(24);
  CHECK(q.remove("orders", ids[0]));  // day 0
  clock.advance(day * 60);
  CHECK(q.remove("orders", ids[1]));  // day 60
  clock.advance(day * 29);
  CHECK(q.remove("orders", ids[2]));  // day 89: the record of day 0 is 89 days old, it stays
  auto trail = q.audit("orders");
  REQUIRE(trail.size() == 3);
  clock.advance(day * 2);
  CHECK(q.remove("orders", ids[3]));  // day 91: the record of day 0 is older than 90 days
  trail = q.audit("orders");
  REQUIRE(trail.size() == 3);
  CHECK(trail[0].ids == std::vector<std::string>{ids[1]});
  CHECK(trail[1].ids == std::vector<std::string>{ids[2]});
  CHECK(trail[2].ids == std::vector<std::string>{ids[3]});
  CHECK(q.counters().audited == 4);
}

TEMPLATE_TEST_CASE("remove_ids removes many entries in one call with one audit record",
                   "[contract][ops][audit][remove]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  dlq::Options options;
  options.audit_max_ids = 10;
  options.actor = "ops";
  contract::queue_of<TestType> q(fx.storage(), options);
  std::vector<std::string> ids;
  for (int i = 0; i < 300; ++i)
    ids.push_back(q.send_to_dlq("orders", std::to_string(i), contract::failure("e")));
  fx.push_raw("orders", "written by another program");  // a derived id ("raw-…")
  const std::string raw_id = q.peek("orders", 300, 1).at(0).id;

  std::vector<std::string> asked, expect_removed, expect_missing, expect_left;
  for (int i = 299; i >= 0; --i)  // newest first: the order given is the order reported
    if (i % 3 == 0) asked.push_back(ids[static_cast<std::size_t>(i)]);
  expect_removed = asked;
  asked.push_back(raw_id);
  expect_removed.push_back(raw_id);
  for (int i = 0; i < 50; ++i) {
    asked.push_back("made-up-" + std::to_string(i));
    expect_missing.push_back(asked.back());
  }
  asked.push_back(ids[0]);  // named twice: counted once
  for (int i = 0; i < 300; ++i)
    if (i % 3 != 0) expect_left.push_back(ids[static_cast<std::size_t>(i)]);

  const dlq::RemoveReport r = q.remove_ids("orders", asked, "erin");
  CHECK(r.removed == expect_removed);
  CHECK(r.not_found == expect_missing);
  std::vector<std::string> left;
  for (const auto& e : q.peek("orders", 0, 1000))
    left.push_back(e.id);
  CHECK(left == expect_left);

  auto trail = q.audit("orders");
  REQUIRE(trail.size() == 1);
  CHECK(trail[0].operation == "remove");
  CHECK(trail[0].actor == "erin");
  CHECK(trail[0].outcome == "ok");
  CHECK(trail[0].ids ==
        std::vector<std::string>(expect_removed.begin(), expect_removed.begin() + 10));
  CHECK(trail[0].ids_omitted == expect_removed.size() - 10);
  CHECK(trail[0].counts["removed"] == expect_removed.size());
  CHECK(trail[0].counts["not_found"] == expect_missing.size());

  // Nothing asked, nothing there: no record. 100 000 ids with one of them there: one record,
  // its size bounded by audit_max_ids whatever the request's.
  CHECK(q.remove_ids("orders", {}).removed.empty());
  std::vector<std::string> many;
  for (int i = 0; i < 100000; ++i)
    many.push_back("made-up-" + std::to_string(i));
  const auto none = q.remove_ids("orders", many);
  CHECK(none.removed.empty());
  CHECK(none.not_found.size() == many.size());
  CHECK(q.audit("orders").size() == 1);
  many.push_back(expect_left[7]);
  const auto one = q.remove_ids("orders", many);
  CHECK(one.removed == std::vector<std::string>{expect_left[7]});
  trail = q.audit("orders");
  REQUIRE(trail.size() == 2);
  CHECK(trail[1].ids == std::vector<std::string>{expect_left[7]});
  CHECK(trail[1].actor == "ops");
  CHECK(trail[1].counts["not_found"] == 100000);
  CHECK(dlq::detail::audit_json(trail[1]).size() < 1000);
  CHECK(q.counters().audited == 2);
}

TEMPLATE_TEST_CASE("a replay or discard by many ids writes a record bounded by audit_max_ids",
                   "[contract][ops][audit]", DLQ_CONTRACT_FIXTURES) {
  // The console takes 1000 ids of up to 200 bytes per request: one of them there, the rest
  // made up, must not write a 200 KB record (the trail's record cap bounds its memory only
  // when each record is bounded).
  TestType fx;
  dlq::Options options;
  options.audit_max_ids = 10;
  contract::queue_of<TestType> q(fx.storage(), options);
  const std::string real = q.send_to_dlq("orders", "1", contract::failure("e"));
  const std::string other = q.send_to_dlq("orders", "2", contract::failure("e"));
  std::vector<std::string> asked{real};
  for (int i = 0; i < 999; ++i)
    asked.push_back(std::string(190, 'x') + std::to_string(i));
  CHECK(q.replay_ids("orders", asked).replayed == 1);
  asked[0] = other;
  dlq::DiscardOptions d;
  d.ids = asked;
  CHECK(q.discard("orders", d).discarded == 1);
  const auto trail = q.audit("orders");
  REQUIRE(trail.size() == 2);
  for (const auto& rec : trail) {
    INFO(rec.operation);
    CHECK(dlq::detail::audit_json(rec).size() < 4000);
    CHECK(rec.filter["ids"].size() == 10);
    CHECK(rec.filter.value("ids_omitted", std::size_t{0}) == 990);
    CHECK(rec.filter["ids"][0] == (rec.operation == "replay" ? real : other));
  }
}

TEMPLATE_TEST_CASE("a replay or discard by long texts writes a bounded audit record",
                   "[contract][ops][audit]", DLQ_CONTRACT_FIXTURES) {
  // A filter's text conditions are as long as the caller makes them (dlqctl takes 128 KB per
  // argument, the library any length): each is recorded cut to its first 1024 bytes (never
  // inside a UTF-8 sequence), its length in "<name>_bytes", so that the trail's record cap
  // bounds its memory.
  TestType fx;
  contract::queue_of<TestType> q(fx.storage());
  const std::size_t cut_at = 1024;
  const std::string text(100000, 'e');
  // a euro sign (3 bytes) across byte 1024: the cut keeps the 1022 bytes before it
  const std::string worker = std::string(1022, 'w') + "\xe2\x82\xac" + std::string(5000, 'w');
  for (int i = 0; i < 2; ++i)
    q.send_to_dlq("orders", std::to_string(i), contract::failure(text + "!", 1, worker));
  dlq::ReplayOptions r;
  r.error_contains = text;
  r.worker = worker;
  r.limit = 1;
  CHECK(q.replay("orders", r).replayed == 1);
  dlq::DiscardOptions d;
  d.payload_contains = "1";
  d.error_contains = text;
  CHECK(q.discard("orders", d).discarded == 1);
  const auto trail = q.audit("orders");
  REQUIRE(trail.size() == 2);
  for (const auto& rec : trail) {
    INFO(rec.operation);
    CHECK(dlq::detail::audit_json(rec).size() < 4000);
    CHECK(rec.filter.value("error_contains", std::string()) == text.substr(0, cut_at));
    CHECK(rec.filter.value("error_contains_bytes", std::size_t{0}) == text.size());
    if (rec.operation == "discard") {
      CHECK(rec.filter.value("payload_contains", std::string()) == "1");  // short: whole
      CHECK_FALSE(rec.filter.contains("payload_contains_bytes"));
    } else {
      CHECK(rec.filter.value("worker", std::string()) == worker.substr(0, 1022));
      CHECK(rec.filter.value("worker_bytes", std::size_t{0}) == worker.size());
    }
  }
}

TEMPLATE_TEST_CASE("remove_ids finds every id while a replay takes entries from the head",
                   "[contract][ops][remove][concurrency]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  dlq::Options options;
  options.replay_batch_items = 7;
  contract::queue_of<TestType> q(fx.storage(), options);
  std::vector<std::string> odd;
  std::vector<dlq::FailedJob> jobs;
  for (int i = 0; i < 3000; ++i)
    jobs.push_back({"orders", std::to_string(i), contract::failure(i % 2 == 0 ? "even" : "odd")});
  const auto ids = q.send_batch(jobs);
  for (std::size_t i = 1; i < ids.size(); i += 2)
    odd.push_back(ids[i]);
  std::atomic<bool> go{false};
  std::thread replayer([&] {
    while (!go.load())
      std::this_thread::yield();
    dlq::ReplayOptions evens;
    evens.error_contains = "even";
    q.replay("orders", evens);
  });
  go = true;
  const dlq::RemoveReport r = q.remove_ids("orders", odd);
  replayer.join();
  CHECK(r.removed == odd);  // the list moving left under the scan skips none
  CHECK(r.not_found.empty());
  // Every odd entry is gone, none was replayed; every even one is in the dead list or the
  // source, once. (Whether the replay took every even one is the replay's business.)
  std::multiset<std::string> evens;
  for (const auto& e : q.peek("orders", 0, 3000)) {
    CHECK(e.error == "even");
    evens.insert(e.payload);
  }
  for (const auto& p : fx.source("orders"))
    evens.insert(p);
  CHECK(evens.size() == 1500);
  for (int i = 0; i < 3000; i += 2)
    CHECK(evens.count(std::to_string(i)) == 1);
}

TEMPLATE_TEST_CASE("a replay of many batches writes one audit record, not one per entry",
                   "[contract][ops][audit]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  dlq::Options options;
  options.replay_batch_items = 100;
  contract::queue_of<TestType> q(fx.storage(), options);
  std::vector<dlq::FailedJob> jobs(3000, {"orders", "{}", contract::failure("e")});
  q.send_batch(jobs);
  const auto r = q.replay_all("orders");
  CHECK(r.replayed == 3000);
  CHECK(r.batches >= 30);
  CHECK(q.counters().audited == 1);
  const auto trail = q.audit("orders");
  REQUIRE(trail.size() == 1);
  CHECK(trail[0].ids.size() == 100);
  CHECK(trail[0].ids_omitted == 2900);
}

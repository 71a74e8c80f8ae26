// The contract suite, snapshot semantics (issue 27, defect 2): replay-all, a filtered replay,
// a replay with a limit and discard act only on the entries present when the run started,
// whatever other clients remove or add meanwhile — an entry added during the run is never
// touched by it, and an entry present at the start and still there is reached. Included at
// the end of contract_suite.hpp; uses its fixtures and helpers. On RedisListStorage replay-all
// and the limited replay run the server-side fast path (dlq::FastStep).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace contract_snapshot {

enum class Op { discard, filtered_replay, limit_replay, replay_all };
enum class Hit { tail, spread, ahead };

inline const char* name_of(Op op) {
  switch (op) {
    case Op::discard:
      return "discard";
    case Op::filtered_replay:
      return "filtered replay";
    case Op::limit_replay:
      return "replay with a limit";
    case Op::replay_all:
      return "replay-all";
  }
  return "?";
}

inline const char* name_of(Hit hit) {
  switch (hit) {
    case Hit::tail:
      return "the 20 newest at the start (the tail entry too)";
    case Hit::spread:
      return "20 spread over the list, the tail entry too";
    case Hit::ahead:
      return "the 20 right ahead of the run";
  }
  return "?";
}

// Which of the 100 entries present at the start the other client takes.
inline std::vector<std::size_t> taken(Hit hit) {
  std::vector<std::size_t> out;
  for (std::size_t k = 0; k < 20; ++k) {
    switch (hit) {
      case Hit::tail:
        out.push_back(80 + k);
        break;
      case Hit::spread:
        out.push_back(k < 19 ? 21 + 4 * k : 99);
        break;
      case Hit::ahead:
        out.push_back(20 + k);
        break;
    }
  }
  return out;
}

// Whether the run should act on old entry i (when nobody else took it).
inline bool wanted(Op op, std::size_t i) {
  return op == Op::replay_all || op == Op::limit_replay || i % 3 != 2;
}

// What the run returned, in one shape for replay and discard.
struct Outcome {
  std::size_t examined = 0;
  std::size_t acted = 0;
  std::vector<std::string> ids;
};

// 100 entries are present when the run starts (every third one does not match the filtered
// runs' conditions); once the run is under way (after its first batch for replay, while it
// decides its second batch for discard) another client takes 20 of them — replays them by
// id, or removes them for discard — and 20 new failures that match arrive. The run must act
// on exactly the entries present at its start that it wants and nobody took, in order; the
// new ones stay, and its counts say so.
template <class Fx>
void churn_once(Op op, Hit hit) {
  INFO(name_of(op) << "; the other client takes " << name_of(hit));
  Fx fx;
  dlq::Options options;
  options.replay_batch_items = 10;
  contract::queue_of<Fx> q(fx.storage(), options);
  contract::queue_of<Fx> other(fx.storage());
  std::vector<std::string> old_ids;
  for (std::size_t i = 0; i < 100; ++i) {
    const bool match = i % 3 != 2;
    old_ids.push_back(
        q.send_to_dlq("orders", "old:" + std::to_string(i),
                      contract::failure(match ? "boom" : "fine", 1, match ? "w" : "x")));
  }
  const std::vector<std::size_t> take = taken(hit);
  std::vector<std::string> new_ids;
  bool interfered = false;
  auto interfere = [&] {
    if (interfered) return;
    interfered = true;
    std::vector<std::string> ids;
    for (const std::size_t i : take)
      ids.push_back(old_ids[i]);
    if (op == Op::discard) {
      for (const auto& id : ids)
        REQUIRE(other.remove("orders", id));
    } else {
      REQUIRE(other.replay_ids("orders", ids).replayed == ids.size());
    }
    for (int k = 0; k < 20; ++k)
      new_ids.push_back(
          other.send_to_dlq("orders", "new:" + std::to_string(k), contract::failure("boom")));
  };

  Outcome out;
  if (op == Op::discard) {
    dlq::DiscardOptions o;
    o.error_contains = "boom";
    o.predicate = [&](const dlq::Entry& e) {
      if (e.payload == "old:16") interfere();  // the second batch's first (the first holds 16)
      return true;
    };
    const dlq::DiscardReport r = q.discard("orders", o);
    out = {r.examined, r.discarded, r.discarded_ids};
  } else {
    dlq::ReplayOptions o;
    if (op == Op::filtered_replay) o.worker = "w";
    if (op == Op::limit_replay) o.limit = 90;
    o.record_ids = true;
    o.on_progress = [&](const dlq::ReplayProgress&) { interfere(); };
    const dlq::ReplayReport r = q.replay("orders", o);
    out = {r.examined, r.replayed, r.replayed_ids};
  }
  REQUIRE(interfered);

  std::vector<std::string> expected_acted, expected_left;
  for (std::size_t i = 0; i < old_ids.size(); ++i) {
    if (std::find(take.begin(), take.end(), i) != take.end()) continue;
    (wanted(op, i) ? expected_acted : expected_left).push_back(old_ids[i]);
  }
  expected_left.insert(expected_left.end(), new_ids.begin(), new_ids.end());
  std::vector<std::string> left;
  for (const auto& e : q.peek("orders", 0, 1000))
    left.push_back(e.id);
  CHECK(out.ids == expected_acted);
  CHECK(out.acted == expected_acted.size());
  CHECK(out.examined == 80);  // the entries present at the start that nobody else took
  CHECK(left == expected_left);
  if (op != Op::discard) {
    // The source queue: the other client's 20, then this run's, each once; nothing new.
    const auto src = fx.source("orders");
    CHECK(src.size() == 20 + expected_acted.size());
    for (const auto& p : src)
      CHECK(p.rfind("old:", 0) == 0);
  }
}

}  // namespace contract_snapshot

TEMPLATE_TEST_CASE("churn: a run acts only on the entries present at its start",
                   "[contract][snapshot]", DLQ_CONTRACT_FIXTURES) {
  using contract_snapshot::Hit;
  using contract_snapshot::Op;
  for (const Op op : {Op::discard, Op::filtered_replay, Op::limit_replay, Op::replay_all})
    for (const Hit hit : {Hit::tail, Hit::spread, Hit::ahead})
      contract_snapshot::churn_once<TestType>(op, hit);
}

TEMPLATE_TEST_CASE("the tail entry at the start removed, the list emptied, new failures arrive",
                   "[contract][snapshot]", DLQ_CONTRACT_FIXTURES) {
  // Every entry present at the start is taken by another client right after the run's first
  // batch, and new ones arrive: the run must stop there, having touched none of them.
  TestType fx;
  dlq::Options options;
  options.replay_batch_items = 4;
  contract::queue_of<TestType> q(fx.storage(), options);
  contract::queue_of<TestType> other(fx.storage());
  for (bool discard : {false, true}) {
    INFO((discard ? "discard" : "replay-all"));
    q.purge("orders");
    std::vector<std::string> old_ids;
    for (int i = 0; i < 30; ++i)
      old_ids.push_back(
          q.send_to_dlq("orders", "old:" + std::to_string(i), contract::failure("e")));
    std::vector<std::string> new_ids;
    bool interfered = false;
    auto interfere = [&] {
      if (interfered) return;
      interfered = true;
      // The tail entry first, then the rest, newest first.
      for (std::size_t i = old_ids.size(); i-- > 0;)
        other.remove("orders", old_ids[i]);
      for (int k = 0; k < 50; ++k)
        new_ids.push_back(
            other.send_to_dlq("orders", "new:" + std::to_string(k), contract::failure("e")));
    };
    std::size_t acted = 0;
    if (discard) {
      dlq::DiscardOptions o;
      std::size_t calls = 0;
      o.predicate = [&](const dlq::Entry&) {
        if (++calls == 17) interfere();
        return true;
      };
      const auto r = q.discard("orders", o);
      acted = r.discarded;
      CHECK(r.discarded_ids == std::vector<std::string>(old_ids.begin(), old_ids.begin() + 16));
    } else {
      dlq::ReplayOptions o;
      o.on_progress = [&](const dlq::ReplayProgress&) { interfere(); };
      const auto r = q.replay("orders", o);
      acted = r.replayed;
      CHECK(r.replayed == 1);
    }
    CHECK(interfered);
    std::vector<std::string> left;
    for (const auto& e : q.peek("orders", 0, 1000))
      left.push_back(e.id);
    CHECK(left == new_ids);
    CHECK(acted + left.size() == (discard ? 16u : 1u) + 50u);
  }
}

TEMPLATE_TEST_CASE("byte-identical entries without an id: the new twins are not touched",
                   "[contract][snapshot]", DLQ_CONTRACT_FIXTURES) {
  // Entries another program wrote without an id have an id derived from their bytes, so
  // twins share it. Old twins at the tail are removed by another client and byte-identical
  // new ones arrive: the run must leave the new ones.
  const std::string seed =
      R"({"original_payload": {"order": 7}, "queue": "orders", "error": "seed error", )"
      R"("attempt": 1, "worker": "py", "dead_lettered_at": "2026-01-01T00:00:00+00:00"})";
  for (bool discard : {false, true}) {
    INFO((discard ? "discard" : "replay-all"));
    TestType fx;
    dlq::Options options;
    options.replay_batch_items = 4;
    contract::queue_of<TestType> q(fx.storage(), options);
    contract::queue_of<TestType> other(fx.storage());
    for (int i = 0; i < 12; ++i)
      q.send_to_dlq("orders", "old:" + std::to_string(i), contract::failure("e"));
    for (int i = 0; i < 3; ++i)
      fx.push_raw("orders", seed);
    std::size_t twins_after = 0;
    bool interfered = false;
    auto interfere = [&] {
      if (interfered) return;
      interfered = true;
      const auto all = q.peek("orders", 0, 1000);
      const std::string twin_id = all.back().id;
      while (other.remove("orders", twin_id)) {
      }
      for (int i = 0; i < 2; ++i)
        fx.push_raw("orders", seed);
      for (const auto& e : q.peek("orders", 0, 1000))
        twins_after += e.id == twin_id ? 1 : 0;
    };
    if (discard) {
      dlq::DiscardOptions o;
      std::size_t calls = 0;
      o.predicate = [&](const dlq::Entry&) {
        if (++calls == 5) interfere();
        return true;
      };
      CHECK(q.discard("orders", o).discarded == 12);
    } else {
      dlq::ReplayOptions o;
      o.on_progress = [&](const dlq::ReplayProgress&) { interfere(); };
      CHECK(q.replay("orders", o).replayed == 12);
      for (const auto& p : fx.source("orders"))
        CHECK(p.rfind("old:", 0) == 0);
    }
    REQUIRE(interfered);
    CHECK(twins_after > 0);
    const auto left = q.peek("orders", 0, 1000);
    CHECK(left.size() == twins_after);
    for (const auto& e : left)
      CHECK(e.error == "seed error");
  }
}

TEMPLATE_TEST_CASE("a job dead-lettered again, or by a sender whose clock is behind, stays",
                   "[contract][snapshot]", DLQ_CONTRACT_FIXTURES) {
  // During the run: jobs present at the start fail again under the same job id (a storage
  // keyed by job id replaces their entry), and a sender whose clock is a year behind sends
  // (its UUIDv7 ids and times are older than every entry present at the start). None of
  // these entries may be touched.
  for (bool discard : {false, true}) {
    INFO((discard ? "discard" : "replay-all"));
    TestType fx;
    dlq::Options options;
    options.replay_batch_items = 4;
    contract::queue_of<TestType> q(fx.storage(), options);
    dlq::Options behind;
    const auto past = std::chrono::system_clock::now() - std::chrono::hours(24 * 365);
    behind.clock = [past] { return past; };
    contract::queue_of<TestType> late(fx.storage(), behind);
    std::vector<std::string> old_ids;
    for (int i = 0; i < 20; ++i) {
      dlq::Failure f = contract::failure("e");
      f.job_id = "job-" + std::to_string(i);
      old_ids.push_back(q.send_to_dlq("orders", "old:" + std::to_string(i), f));
    }
    std::set<std::string> again;
    bool interfered = false;
    auto interfere = [&] {
      if (interfered) return;
      interfered = true;
      for (int i : {5, 12, 19}) {
        dlq::Failure f = contract::failure("failed again");
        f.job_id = "job-" + std::to_string(i);
        again.insert(q.send_to_dlq("orders", "again:" + std::to_string(i), f));
      }
      for (int i = 0; i < 5; ++i)
        again.insert(late.send_to_dlq("orders", "late:" + std::to_string(i),
                                      contract::failure("failed again")));
    };
    if (discard) {
      dlq::DiscardOptions o;
      std::size_t calls = 0;
      o.predicate = [&](const dlq::Entry&) {
        if (++calls == 3) interfere();
        return true;
      };
      q.discard("orders", o);
    } else {
      dlq::ReplayOptions o;
      o.on_progress = [&](const dlq::ReplayProgress&) { interfere(); };
      q.replay("orders", o);
      for (const auto& p : fx.source("orders"))
        CHECK(p.rfind("old:", 0) == 0);
    }
    REQUIRE(interfered);
    std::set<std::string> left;
    for (const auto& e : q.peek("orders", 0, 1000)) {
      CHECK(e.error == "failed again");
      left.insert(e.id);
    }
    CHECK(left == again);
  }
}

TEMPLATE_TEST_CASE("churn under load: removals and new failures while runs go on",
                   "[contract][snapshot][concurrency]", DLQ_CONTRACT_FIXTURES) {
  // Real threads: while a run goes on, one thread removes entries present at the start (by
  // id, oldest and newest alike) and another sends new failures that match. Every entry
  // sent after the run's first batch is new for it: none may be touched; every entry present
  // at the start that it wants and nobody removed must be reached.
  using contract_snapshot::Op;
  for (const Op op : {Op::discard, Op::filtered_replay, Op::replay_all}) {
    INFO(contract_snapshot::name_of(op));
    TestType fx;
    dlq::Options options;
    options.replay_batch_items = 16;
    contract::queue_of<TestType> q(fx.storage(), options);
    contract::queue_of<TestType> other(fx.storage());
    std::vector<dlq::FailedJob> jobs;
    for (int i = 0; i < 1500; ++i) {
      const bool match = i % 3 != 2;
      dlq::FailedJob j{"orders", "old:" + std::to_string(i),
                       contract::failure(match ? "boom" : "fine", 1, match ? "w" : "x")};
      jobs.push_back(std::move(j));
    }
    const std::vector<std::string> old_ids = q.send_batch(jobs);
    std::vector<std::string> victims(old_ids.begin(), old_ids.end());
    std::mt19937 rng(27);
    std::shuffle(victims.begin(), victims.end(), rng);
    victims.resize(600);
    std::atomic<bool> go{false}, stop{false};
    std::set<std::string> removed_by_other, new_ids;
    std::thread remover([&] {
      while (!go)
        std::this_thread::yield();
      for (const auto& id : victims) {
        if (stop) break;
        if (other.remove("orders", id)) removed_by_other.insert(id);
      }
    });
    std::thread sender([&] {
      while (!go)
        std::this_thread::yield();
      for (int k = 0; k < 3000 && !stop; ++k)
        new_ids.insert(other.send_to_dlq("orders", "new:" + std::to_string(k),
                                         contract::failure("boom", 1, "w")));
    });
    std::vector<std::string> acted;
    try {
      if (op == Op::discard) {
        dlq::DiscardOptions o;
        o.error_contains = "boom";
        o.predicate = [&](const dlq::Entry&) {
          go = true;
          return true;
        };
        acted = q.discard("orders", o).discarded_ids;
      } else {
        dlq::ReplayOptions o;
        if (op == Op::filtered_replay) o.worker = "w";
        o.record_ids = true;
        o.on_progress = [&](const dlq::ReplayProgress&) { go = true; };
        acted = q.replay("orders", o).replayed_ids;
      }
    } catch (...) {
      go = stop = true;
      remover.join();
      sender.join();
      throw;
    }
    go = stop = true;
    remover.join();
    sender.join();
    std::size_t touched_new = 0;
    for (const auto& id : acted)
      touched_new += new_ids.count(id);
    CHECK(touched_new == 0);
    std::set<std::string> acted_set(acted.begin(), acted.end());
    CHECK(acted_set.size() == acted.size());
    std::size_t missed = 0;
    for (std::size_t i = 0; i < old_ids.size(); ++i) {
      const bool want = op == Op::replay_all || i % 3 != 2;
      if (want && !removed_by_other.count(old_ids[i]) && !acted_set.count(old_ids[i])) ++missed;
    }
    CHECK(missed == 0);
    std::set<std::string> left;
    for (const auto& e : q.peek("orders", 0, 100000))
      left.insert(e.id);
    for (const auto& id : new_ids)
      CHECK(left.count(id) == 1);
  }
}

TEMPLATE_TEST_CASE("evictions by max_length and a purge during a run leave the new entries",
                   "[contract][snapshot]", DLQ_CONTRACT_FIXTURES) {
  // Another client's sends evict the oldest entries (Retention::max_length, evict_oldest) or
  // it purges the queue, while a replay-all or a discard runs; then new failures arrive.
  for (bool purge : {false, true}) {
    for (bool discard : {false, true}) {
      INFO((purge ? "purge" : "evictions") << ", " << (discard ? "discard" : "replay-all"));
      TestType fx;
      dlq::Options options;
      options.replay_batch_items = 4;
      std::function<void()> after_first_batch;
      // Between batches, outside any storage lock (KeyValueStorage holds one while it decides).
      options.on_event = [&](const dlq::Event& e) {
        if (e.kind == dlq::EventKind::discarded && after_first_batch) after_first_batch();
      };
      contract::queue_of<TestType> q(fx.storage(), options);
      dlq::Options capped;
      capped.retention.max_length = 60;
      contract::queue_of<TestType> other(fx.storage(), capped);
      std::vector<std::string> old_ids;
      for (int i = 0; i < 50; ++i)
        old_ids.push_back(
            q.send_to_dlq("orders", "old:" + std::to_string(i), contract::failure("e")));
      std::vector<std::string> new_ids;
      std::size_t acted_before = 0;
      bool interfered = false;
      auto interfere = [&](std::size_t acted_so_far) {
        if (interfered) return;
        interfered = true;
        acted_before = acted_so_far;
        if (purge) other.purge("orders");
        for (int k = 0; k < 30; ++k)
          new_ids.push_back(
              other.send_to_dlq("orders", "new:" + std::to_string(k), contract::failure("e")));
        other.trim("orders");  // a store that evicts after the push: now at the limit
      };
      std::vector<std::string> acted;
      if (discard) {
        after_first_batch = [&] { interfere(16); };  // the first batch holds 16
        acted = q.discard("orders", dlq::DiscardOptions{}).discarded_ids;
      } else {
        dlq::ReplayOptions o;
        o.record_ids = true;
        o.on_progress = [&](const dlq::ReplayProgress& p) { interfere(p.replayed); };
        acted = q.replay("orders", o).replayed_ids;
      }
      REQUIRE(interfered);
      // The evictions took the oldest entries left down to 60 with the 30 new ones; a purge
      // took all.
      const std::size_t survivors =
          purge ? 0 : std::min<std::size_t>(old_ids.size() - acted_before, 30);
      CHECK(acted.size() == acted_before + survivors);
      for (std::size_t i = 0; i < acted.size(); ++i)
        CHECK(std::find(old_ids.begin(), old_ids.end(), acted[i]) != old_ids.end());
      std::vector<std::string> left;
      for (const auto& e : q.peek("orders", 0, 1000))
        left.push_back(e.id);
      CHECK(left == new_ids);
    }
  }
}

TEMPLATE_TEST_CASE("a filtered replay reaches every match while others remove what it keeps",
                   "[contract][snapshot][concurrency]", DLQ_CONTRACT_FIXTURES) {
  // Another client removes (remove_ids, in requests of 25 like the console's delete) the
  // entries the replay keeps in place, in random order, while new failures arrive. Every
  // match present at the start must be replayed, once; no kept entry, no new one.
  for (int round = 0; round < 4; ++round) {
    INFO("round " << round);
    TestType fx;
    dlq::Options options;
    options.replay_batch_items = round % 2 == 0 ? 7 : 64;
    contract::queue_of<TestType> q(fx.storage(), options);
    contract::queue_of<TestType> other(fx.storage());
    std::vector<dlq::FailedJob> jobs;
    for (int i = 0; i < 3000; ++i)
      jobs.push_back({"orders", "old:" + std::to_string(i),
                      contract::failure(i % 2 == 0 ? "boom" : "fine", 1, i % 2 == 0 ? "w" : "x")});
    const std::vector<std::string> ids = q.send_batch(jobs);
    std::vector<std::string> kept;
    for (std::size_t i = 1; i < ids.size(); i += 2)
      kept.push_back(ids[i]);
    std::mt19937 rng(static_cast<unsigned>(27 + round));
    std::shuffle(kept.begin(), kept.end(), rng);
    std::atomic<bool> go{false}, stop{false};
    std::thread remover([&] {
      while (!go)
        std::this_thread::yield();
      // Requests of 25 ids, or all of them at once.
      const std::size_t per = round < 2 ? 25 : kept.size();
      for (std::size_t at = 0; at < kept.size() && !stop; at += per) {
        const std::vector<std::string> some(
            kept.begin() + static_cast<std::ptrdiff_t>(at),
            kept.begin() + static_cast<std::ptrdiff_t>(std::min(at + per, kept.size())));
        other.remove_ids("orders", some);
      }
    });
    std::thread sender([&] {
      while (!go)
        std::this_thread::yield();
      for (int k = 0; k < 500 && !stop; ++k)
        other.send_to_dlq("orders", "new:" + std::to_string(k), contract::failure("boom", 1, "w"));
    });
    dlq::ReplayOptions o;
    o.worker = "w";
    o.record_ids = true;
    o.on_progress = [&](const dlq::ReplayProgress&) { go = true; };
    dlq::ReplayReport r;
    try {
      r = q.replay("orders", o);
    } catch (...) {
      go = stop = true;
      remover.join();
      sender.join();
      throw;
    }
    go = stop = true;
    remover.join();
    sender.join();
    std::multiset<std::string> replayed;
    for (const auto& p : fx.source("orders"))
      replayed.insert(p);
    std::size_t missed = 0, doubled = 0, foreign = 0;
    for (int i = 0; i < 3000; ++i) {
      const std::size_t n = replayed.count("old:" + std::to_string(i));
      if (i % 2 == 0 && n == 0) ++missed;
      if (n > 1) ++doubled;
      if (i % 2 == 1 && n != 0) ++foreign;
    }
    std::size_t new_replayed = 0;
    for (const auto& p : replayed)
      if (p.rfind("new:", 0) == 0) ++new_replayed;
    CHECK(missed == 0);
    CHECK(doubled == 0);
    CHECK(foreign == 0);
    CHECK(new_replayed == 0);
    CHECK(r.replayed == 1500 - missed);
  }
}

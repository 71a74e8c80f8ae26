// Replay receipts (dlq:{q}:receipt:<step>) live only as long as they are needed: a step's
// receipt is deleted once its answer was read (by the next step, or when the replay ends and
// its cursor goes away), whatever way the replay ends — replay-all, filtered, cancelled,
// a trim. The receipt's other job, telling a step whose answer was lost whether it ran, is
// covered by test_faults.cpp and test_lost_answer_filtered_replay.cpp.
#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/redis/list_storage.hpp"
#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"

namespace test_replay_receipts {

using namespace dlq;
using dlq::test::RawClient;

namespace {

struct Fixture {
  std::string url = test::shared_redis_url();
  std::string prefix = test::unique_prefix();
  RawClient raw{url};
  DeadLetterQueue<RedisListStorage> dlq{RedisListStorage(url, test::unique_layout(prefix))};

  std::vector<std::string> receipts() { return raw.strings({"KEYS", prefix + "*:receipt:*"}); }
  void send(const std::string& q, int n, const std::string& error) {
    for (int i = 0; i < n; ++i)
      dlq.send_to_dlq(q, "{\"job\":" + std::to_string(i) + "}", error, 3, "w");
  }
  std::size_t source_size(const std::string& q) {
    return static_cast<std::size_t>(raw.integer({"LLEN", dlq.storage().source_key(q)}));
  }
};

}  // namespace

TEST_CASE("replay leaves no receipt key behind", "[redis][replay][receipt]") {
  Fixture f;

  SECTION("replay-all") {
    f.send("orders", 700, "timeout");
    const auto report = f.dlq.replay_all("orders");
    CHECK(report.replayed == 700);
    CHECK(f.source_size("orders") == 700);
    CHECK(f.receipts().empty());
  }
  SECTION("a filtered replay (kept items: LSET + LREM)") {
    f.send("orders", 300, "timeout");
    f.send("orders", 300, "refused");
    ReplayOptions o;
    o.error_contains = "refused";
    const auto report = f.dlq.replay("orders", o);
    CHECK(report.replayed == 300);
    CHECK(f.dlq.size("orders") == 300);
    CHECK(f.receipts().empty());
  }
  SECTION("a cancelled replay") {
    f.send("orders", 600, "timeout");
    std::atomic<bool> cancel{false};
    ReplayOptions o;
    o.cancel = &cancel;
    o.on_progress = [&](const ReplayProgress& p) {
      if (p.replayed >= 5) cancel = true;
    };
    const auto report = f.dlq.replay("orders", o);
    CHECK(report.cancelled);
    CHECK(report.replayed >= 5);
    CHECK(report.replayed < 600);
    CHECK(f.dlq.size("orders") + f.source_size("orders") == 600);
    CHECK(f.receipts().empty());
  }
}

TEST_CASE("a receipt lives until the step's answer was read, then goes",
          "[redis][replay][receipt]") {
  const std::string url = test::shared_redis_url();
  const std::string prefix = test::unique_prefix();
  RedisListStorage s(url, test::unique_layout(prefix));
  RawClient raw(url);
  std::vector<std::string> items;
  for (int i = 0; i < 40; ++i)
    items.push_back("e" + std::to_string(i));
  raw.rpush(s.key("q", ListKind::dead), items);
  auto receipts = [&] { return raw.strings({"KEYS", prefix + "*:receipt:*"}).size(); };
  const auto pass = [](std::string_view r, Decision& d) {
    d.action = Action::replay;
    d.payload = r;
  };
  {
    RedisListStorage::replay_cursor c;
    CHECK(s.replay_step("q", c, 10, pass).examined == 10);
    CHECK(receipts() == 1);  // the last step's: its cursor may still need it
    CHECK(s.replay_step("q", c, 10, pass).examined == 10);
    CHECK(receipts() == 1);  // the next step deleted the one before
    RedisListStorage::replay_cursor moved = std::move(c);
    CHECK(s.replay_step("q", moved, 10, pass).examined == 10);
    CHECK(receipts() == 1);
  }
  CHECK(receipts() == 0);  // the replay ended: its cursor deleted the last one
  CHECK(raw.list(s.source_key("q")).size() == 30);
  {  // retention's discards go through the same step
    RedisListStorage::replay_cursor c;
    const auto discard = [](std::string_view, Decision& d) { d.action = Action::discard; };
    CHECK(s.replay_step("q", c, 100, discard).examined == 10);
  }
  CHECK(receipts() == 0);
  CHECK(s.size("q", ListKind::dead) == 0);
}

TEST_CASE("two replayers and a recover() loop on one queue move every entry exactly once",
          "[redis][replay][receipt][threads]") {
  // Two processes' worth of replayers (each its own storage and connections) on one queue —
  // one replays everything, the other only "refused" entries (LSET + LREM path) — while a
  // third calls recover() in a loop. Every job ends exactly once in the source list or the
  // dead list, nothing is set aside, and no receipt is left.
  Fixture f;
  constexpr int n = 1500;
  for (int i = 0; i < n; ++i)
    f.dlq.send_to_dlq("orders", "{\"job\":" + std::to_string(i) + "}",
                      i % 2 ? "refused" : "timeout", 3, "w");
  DeadLetterQueue<RedisListStorage> other{RedisListStorage(f.url, test::unique_layout(f.prefix))};
  std::atomic<bool> done{false};
  std::atomic<std::size_t> recovered{0};
  std::thread recoverer([&] {
    RedisListStorage s(f.url, test::unique_layout(f.prefix));
    while (!done.load())
      recovered += s.recover("orders");
  });
  std::size_t replayed_all = 0, replayed_refused = 0;
  std::thread a([&] {
    ReplayOptions o;
    replayed_all = f.dlq.replay("orders", o).replayed;
  });
  std::thread b([&] {
    ReplayOptions o;
    o.error_contains = "refused";
    replayed_refused = other.replay("orders", o).replayed;
  });
  a.join();
  b.join();
  done = true;
  recoverer.join();
  CHECK(recovered.load() == 0);
  std::vector<std::string> all = f.raw.list(f.dlq.storage().source_key("orders"));
  for (const auto& raw : f.raw.list(f.dlq.storage().key("orders", ListKind::dead)))
    all.push_back(parse_entry(raw).payload);
  CHECK(all.size() == static_cast<std::size_t>(n));
  std::sort(all.begin(), all.end());
  CHECK(std::unique(all.begin(), all.end()) == all.end());
  CHECK(replayed_all + replayed_refused + f.dlq.size("orders") == static_cast<std::size_t>(n));
  CHECK(f.dlq.corrupt_size("orders") == 0);
  CHECK(f.receipts().empty());
}

}  // namespace test_replay_receipts

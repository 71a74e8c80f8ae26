// dlq — a lost script answer in the middle of a filtered replay (kept items at the
// head), with the receipt alive and with the receipt already expired when the step asks for
// it. Against a private redis-server this test freezes (SIGSTOP) right after the script is
// sent. The run, continued after the fault, must leave every kept item in place, in order,
// and move every other item exactly once.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "dlq/redis/list_storage.hpp"
#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"
#include "support/redis_process.hpp"

namespace test_lost_answer_filtered_replay {

using namespace dlq;
using dlq::test::RawClient;
using dlq::test::RedisProcess;
using std::chrono::milliseconds;

TEST_CASE("a lost answer in a filtered replay; receipt alive or expired", "[redis][faults]") {
  for (int round = 0; round < 4; ++round) {
    INFO("round " << round);
    RedisProcess server;
    auto o = redis::parse_url(server.url());
    o.connect_timeout = milliseconds(1000);
    o.command_timeout = milliseconds(200);
    o.reconnect_attempts = 3;
    o.reconnect_backoff = milliseconds(20);
    RedisListOptions lo;
    // Rounds 2 and 3: the receipt lives 1 ms, so the step cannot find it and takes an
    // applied batch for one that was not (a conflict): it must still move nothing twice.
    if (round >= 2) lo.receipt_ttl = milliseconds(1);
    RedisListStorage s(o, lo);
    RawClient raw(server.url());
    std::vector<std::string> items, kept, moved;
    for (int i = 0; i < 150; ++i) {
      items.push_back("k" + std::to_string(i));
      kept.push_back(items.back());
      items.push_back("m" + std::to_string(i));
      moved.push_back(items.back());
    }
    raw.rpush(s.key("q", ListKind::dead), items);
    {  // load the script, so the fault hits EVALSHA
      s.push(Record{"warm-up", "", "", "x"});
      RedisListStorage::replay_cursor c;
      s.replay_step("warm-up", c, 1, [](std::string_view raw_item, Decision& d) {
        d.action = Action::replay;
        d.payload = raw_item;
      });
    }
    RedisListStorage::replay_cursor c;
    int decided = 0;
    std::thread waker;
    auto decide = [&](std::string_view r, Decision& d) {
      if (r.front() == 'k') return;  // keep
      d.action = Action::replay;
      d.payload = r;
      if (++decided == 60) {  // inside the second step: the script is sent to a frozen server
        server.freeze();
        waker = std::thread([&] {
          std::this_thread::sleep_for(milliseconds(round % 2 == 0 ? 100 : 260));
          server.thaw();
        });
      }
    };
    int steps = 0;
    bool threw = false;
    for (; steps < 100; ++steps) {
      StepResult r;
      try {
        r = s.replay_step("q", c, 100, decide);
      } catch (const storage_error& e) {
        CHECK(e.outcome_unknown());
        threw = true;
        break;  // the run stops here; a new run starts from the head
      }
      if (!r.conflict && r.examined == 0) break;
    }
    if (waker.joinable()) waker.join();
    REQUIRE(steps < 100);
    // Finish with a fresh run (what an operator does after an error).
    RedisListStorage::replay_cursor fresh;
    for (int i = 0; i < 100; ++i) {
      const StepResult r = s.replay_step("q", fresh, 100, decide);
      if (!r.conflict && r.examined == 0) break;
    }
    CHECK(raw.list(s.key("q", ListKind::dead)) == kept);
    CHECK(raw.list(s.source_key("q")) == moved);
    // The runs are over: their receipts go with their cursors (a step whose outcome stayed
    // unknown leaves its receipt to expire).
    c = RedisListStorage::replay_cursor{};
    fresh = RedisListStorage::replay_cursor{};
    if (!threw) CHECK(raw.strings({"KEYS", "*:receipt:*"}).empty());
  }
}

}  // namespace test_lost_answer_filtered_replay

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// Concurrent sends through one RedisListStorage go to the server in shared batches
// (ConnectionPool::run_shared, PoolOptions::send_batches): each command keeps its own reply,
// its own error reply and its own failure; nothing is lost, doubled or left hanging when the
// connection breaks or the server freezes under them.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlq/redis/list_storage.hpp"
#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"
#include "support/redis_process.hpp"

namespace test_shared_sends {

using namespace dlq;
using dlq::test::RawClient;
using dlq::test::RedisProcess;
using std::chrono::milliseconds;

namespace {

redis::ConnectionOptions fast_options(const RedisProcess& server) {
  auto o = redis::parse_url(server.url());
  o.connect_timeout = milliseconds(300);
  o.command_timeout = milliseconds(300);
  o.reconnect_attempts = 3;
  o.reconnect_backoff = milliseconds(10);
  return o;
}

RedisListOptions pool_of(std::size_t size, std::size_t send_batches,
                         RedisListOptions o = RedisListOptions{}) {
  o.pool.size = size;
  o.pool.send_batches = send_batches;
  return o;
}

std::string item(std::size_t thread, std::size_t i) {
  return "t" + std::to_string(thread) + "-" + std::to_string(i);
}

// Runs `threads` threads, each calling body(thread) once.
template <class F>
void together(std::size_t threads, F body) {
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] { body(t); });
  for (auto& th : pool)
    th.join();
}

long long connected_clients(RawClient& admin) {
  const auto reply = admin.cmd({"INFO", "clients"});
  const std::string text(redis::view(*reply));
  const auto at = text.find("connected_clients:");
  REQUIRE(at != std::string::npos);
  return std::stoll(text.substr(at + 18));
}

// Every acknowledged send is stored, no refused one is, and every stored one was either
// acknowledged or failed with its outcome unknown.
void check_outcomes(const std::set<std::string>& stored, const std::set<std::string>& acknowledged,
                    const std::set<std::string>& unknown, const std::set<std::string>& refused) {
  std::size_t lost = 0, stored_refused = 0, unexplained = 0;
  for (const auto& e : acknowledged)
    lost += stored.count(e) == 0 ? 1 : 0;
  for (const auto& e : refused)
    stored_refused += stored.count(e);
  for (const auto& e : stored)
    unexplained += acknowledged.count(e) == 0 && unknown.count(e) == 0 ? 1 : 0;
  CHECK(lost == 0);
  CHECK(stored_refused == 0);
  CHECK(unexplained == 0);
}

}  // namespace

TEST_CASE("shared sends: every send stored once, in each thread's order, with its own length",
          "[redis][shared_sends]") {
  const std::string url = dlq::test::shared_redis_url();
  for (const std::size_t batches : {std::size_t{1}, std::size_t{2}, std::size_t{0}}) {
    CAPTURE(batches);
    RedisListStorage s(url, pool_of(8, batches, dlq::test::unique_layout()));
    RawClient raw(url);
    constexpr std::size_t threads = 16;
    constexpr std::size_t per_thread = 300;
    std::atomic<std::size_t> bad_length{0};
    together(threads, [&](std::size_t t) {
      const std::string q = "q" + std::to_string(t % 4);
      std::size_t last = 0;
      for (std::size_t i = 0; i < per_thread; ++i) {
        const std::string e = item(t, i);
        const std::size_t length = s.push(Record{q, "", "", e});
        // The length RPUSH answered for this very command: it grows for each thread's own
        // queue, and never exceeds what all senders to that queue could have stored.
        if (length <= last || length > per_thread * threads / 4) ++bad_length;
        last = length;
      }
    });
    CHECK(bad_length == 0);
    for (std::size_t qn = 0; qn < 4; ++qn) {
      const auto stored = raw.list(s.key("q" + std::to_string(qn), ListKind::dead));
      CHECK(stored.size() == per_thread * threads / 4);
      std::map<std::size_t, std::size_t> next;  // thread -> next expected index
      std::size_t out_of_order = 0;
      for (const std::string& e : stored) {
        const auto dash = e.find('-');
        const std::size_t t = std::stoul(e.substr(1, dash - 1));
        const std::size_t i = std::stoul(e.substr(dash + 1));
        CHECK(t % 4 == qn);
        if (i != next[t]) ++out_of_order;
        next[t] = i + 1;
      }
      CHECK(out_of_order == 0);
      for (const auto& [t, n] : next)
        CHECK(n == per_thread);
    }
  }
}

TEST_CASE("shared sends: concurrent senders share one connection when send_batches = 1",
          "[redis][shared_sends]") {
  RedisProcess server;
  RawClient admin(server.url());
  const long long before = connected_clients(admin);  // the admin connection
  SECTION("batched: one connection carries every thread's sends") {
    RedisListStorage s(fast_options(server), pool_of(8, 1));
    together(8, [&](std::size_t t) {
      for (std::size_t i = 0; i < 200; ++i)
        s.push(Record{"q", "", "", item(t, i)});
    });
    CHECK(connected_clients(admin) - before == 1);
    CHECK(admin.integer({"LLEN", s.key("q", ListKind::dead)}) == 1600);
  }
  SECTION("unbatched (send_batches = 0): each sender leases a connection of its own") {
    RedisListStorage s(fast_options(server), pool_of(8, 0));
    together(8, [&](std::size_t t) {
      for (std::size_t i = 0; i < 200; ++i)
        s.push(Record{"q", "", "", item(t, i)});
    });
    CHECK(connected_clients(admin) - before > 1);
    CHECK(admin.integer({"LLEN", s.key("q", ListKind::dead)}) == 1600);
  }
}

TEST_CASE("shared sends: an error reply reaches its own command only", "[redis][shared_sends]") {
  const std::string url = dlq::test::shared_redis_url();
  RedisListStorage s(url, pool_of(4, 1, dlq::test::unique_layout()));
  RawClient raw(url);
  raw.cmd({"SET", s.key("bad", ListKind::dead), "not a list"});
  std::atomic<std::size_t> wrongtype{0};
  std::atomic<std::size_t> other_errors{0};
  together(8, [&](std::size_t t) {
    for (std::size_t i = 0; i < 200; ++i) {
      try {
        s.push(Record{t % 2 == 0 ? "good" : "bad", "", "", item(t, i)});
      } catch (const dlq::reply_error& e) {
        if (e.code() == "WRONGTYPE" && !e.outcome_unknown() &&
            std::string(e.what()).find("RPUSH " + s.key("bad", ListKind::dead)) !=
                std::string::npos) {
          ++wrongtype;
        } else {
          ++other_errors;
        }
      }
    }
  });
  CHECK(wrongtype == 800);
  CHECK(other_errors == 0);
  CHECK(raw.list(s.key("good", ListKind::dead)).size() == 800);
}

TEST_CASE("shared sends: connections killed under 8 senders lose and double nothing",
          "[redis][shared_sends][faults]") {
  RedisProcess server;
  RawClient admin(server.url());
  RedisListStorage s(fast_options(server), pool_of(8, 2));
  constexpr std::size_t threads = 8;
  constexpr std::size_t per_thread = 400;
  std::mutex m;
  std::set<std::string> acknowledged, unknown, refused;
  std::atomic<bool> stop{false};
  std::atomic<long long> killed{0};
  std::thread killer([&] {
    RawClient k(server.url());
    while (!stop) {
      killed += k.integer({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
      std::this_thread::sleep_for(milliseconds(3));
    }
  });
  together(threads, [&](std::size_t t) {
    for (std::size_t i = 0; i < per_thread; ++i) {
      const std::string e = item(t, i);
      try {
        s.push(Record{"q", "", "", e});
        std::lock_guard<std::mutex> g(m);
        acknowledged.insert(e);
      } catch (const dlq::storage_error& err) {
        std::lock_guard<std::mutex> g(m);
        (err.outcome_unknown() ? unknown : refused).insert(e);
      }
    }
  });
  stop = true;
  killer.join();
  admin.connection().disconnect();  // the killer may have closed it
  const auto stored = admin.list(s.key("q", ListKind::dead));
  const std::set<std::string> stored_set(stored.begin(), stored.end());
  INFO("killed " << killed << " connections; acknowledged " << acknowledged.size()
                 << ", outcome unknown " << unknown.size() << ", refused " << refused.size());
  CHECK(killed > 0);
  CHECK(acknowledged.size() + unknown.size() + refused.size() == threads * per_thread);
  CHECK(stored.size() == stored_set.size());  // nothing doubled (nothing re-sent)
  check_outcomes(stored_set, acknowledged, unknown, refused);
}

TEST_CASE("shared sends: a frozen server times out every waiting sender; sends work after",
          "[redis][shared_sends][faults]") {
  RedisProcess server;
  RawClient admin(server.url());
  RedisListStorage s(fast_options(server), pool_of(8, 2));
  s.push(Record{"q", "", "", "warm-up"});
  server.freeze();
  std::mutex m;
  std::vector<std::string> known_not_stored;
  std::atomic<std::size_t> timeouts{0};
  std::atomic<std::size_t> stored_ok{0};
  const auto t0 = std::chrono::steady_clock::now();
  together(8, [&](std::size_t t) {
    const std::string e = item(t, 0);
    try {
      s.push(Record{"q", "", "", e});
      ++stored_ok;
    } catch (const dlq::timeout_error& err) {
      ++timeouts;
      if (!err.outcome_unknown()) {
        std::lock_guard<std::mutex> g(m);
        known_not_stored.push_back(e);
      }
    }
  });
  const auto waited = dlq::test::elapsed_ms(t0);
  server.thaw();
  CHECK(stored_ok == 0);
  CHECK(timeouts == 8);
  CHECK(waited < 5000);  // bounded: a few command timeouts, never one per sender in a row
  s.push(Record{"q", "", "", "after"});
  std::this_thread::sleep_for(milliseconds(200));
  const auto stored = admin.list(s.key("q", ListKind::dead));
  CHECK(stored.back() == "after");
  for (const auto& e : known_not_stored)  // "outcome known" = not applied, even later
    CHECK(std::count(stored.begin(), stored.end(), e) == 0);
}

TEST_CASE("shared sends: with the server gone, every waiting sender fails at once, none unknown",
          "[redis][shared_sends][faults]") {
  RedisProcess server;
  for (const std::size_t batches : {std::size_t{1}, std::size_t{2}}) {
    CAPTURE(batches);
    RedisListStorage s(fast_options(server), pool_of(8, batches));
    s.push(Record{"q", "", "", "warm-up"});
    server.kill9();
    std::atomic<std::size_t> refused{0};
    std::atomic<std::size_t> other{0};
    const auto t0 = std::chrono::steady_clock::now();
    together(32, [&](std::size_t t) {
      try {
        s.push(Record{"q", "", "", item(t, 0)});
        ++other;
      } catch (const dlq::connection_error& e) {
        (e.outcome_unknown() ? other : refused) += 1;
      } catch (...) {
        ++other;
      }
    });
    const auto waited = dlq::test::elapsed_ms(t0);
    CHECK(refused == 32);
    CHECK(other == 0);
    CHECK(waited < 3000);  // a few batches' reconnect attempts, not one per sender in a row
    server.start();
    CHECK(s.push(Record{"q", "", "", "after"}) == 1);  // a new server: the data is gone
  }
}

TEST_CASE("shared sends: commands over the batch byte limit mixed with small ones",
          "[redis][shared_sends]") {
  const std::string url = dlq::test::shared_redis_url();
  RedisListStorage s(url, pool_of(4, 1, dlq::test::unique_layout()));
  RawClient raw(url);
  const std::string huge(std::size_t{5} << 20, 'h');
  std::atomic<std::size_t> bad_length{0};
  together(12, [&](std::size_t t) {
    const std::string q = "q" + std::to_string(t);
    for (std::size_t i = 0; i < (t % 3 == 0 ? 3 : 200); ++i) {
      const std::string e = t % 3 == 0 ? huge + item(t, i) : item(t, i);
      if (s.push(Record{q, "", "", e}) != i + 1) ++bad_length;
    }
  });
  CHECK(bad_length == 0);
  for (std::size_t t = 0; t < 12; ++t) {
    const std::string q = "q" + std::to_string(t);
    const auto stored = raw.list(s.key(q, ListKind::dead));
    REQUIRE(stored.size() == (t % 3 == 0 ? 3 : 200));
    for (std::size_t i = 0; i < stored.size(); ++i)
      CHECK(stored[i] == (t % 3 == 0 ? huge + item(t, i) : item(t, i)));
  }
}

TEST_CASE("shared sends: every connection leased elsewhere: senders time out together, then send",
          "[redis][shared_sends][faults]") {
  RedisProcess server;
  RedisListOptions o = pool_of(1, 2);
  o.pool.wait_timeout = milliseconds(300);
  RedisListStorage s(fast_options(server), o);
  s.push(Record{"q", "", "", "warm-up"});
  std::atomic<std::size_t> timeouts{0};
  std::atomic<std::size_t> other{0};
  std::chrono::milliseconds::rep waited = 0;
  {
    auto held = s.router().seed().acquire();  // e.g. a slow replay holding the only connection
    const auto t0 = std::chrono::steady_clock::now();
    together(16, [&](std::size_t t) {
      try {
        s.push(Record{"q", "", "", item(t, 0)});
        ++other;
      } catch (const dlq::timeout_error& e) {
        (e.outcome_unknown() ? other : timeouts) += 1;
      } catch (...) {
        ++other;
      }
    });
    waited = dlq::test::elapsed_ms(t0);
  }
  CHECK(timeouts == 16);
  CHECK(other == 0);
  CHECK(waited < 2000);
  together(16, [&](std::size_t t) { s.push(Record{"q", "", "", item(t, 1)}); });
  RawClient admin(server.url());
  CHECK(admin.integer({"LLEN", s.key("q", ListKind::dead)}) == 17);
}

TEST_CASE("shared sends: a command whose answer came before its batch failed gets that answer",
          "[redis][shared_sends][faults]") {
  RedisProcess server;
  auto o = fast_options(server);  // 300 ms command timeout
  redis::PoolOptions po;
  po.size = 2;
  po.send_batches = 1;
  redis::ConnectionPool pool(o, po);
  auto blpop = [](const char* seconds) {
    redis::Command c("BLPOP");
    c.arg("absent").arg(seconds);
    return c;
  };
  // The batch on the wire: answered (nil) after 150 ms; meanwhile A, then B, queue.
  std::thread first([&] { pool.run_shared(blpop("0.15"), redis::Effect::read); });
  std::this_thread::sleep_for(milliseconds(50));
  std::atomic<int> a_outcome{0};  // 1 = answered, 2 = outcome unknown, 3 = other error
  long long a_length = -1;
  std::thread a([&] {
    redis::Command c("RPUSH");
    c.arg("list").arg("x");
    try {
      const redis::Reply r = pool.run_shared(c, redis::Effect::write);
      a_length = r->type == REDIS_REPLY_INTEGER ? r->integer : -2;
      a_outcome = 1;
    } catch (const dlq::storage_error& e) {
      a_outcome = e.outcome_unknown() ? 2 : 3;
    }
  });
  std::this_thread::sleep_for(milliseconds(30));
  std::atomic<bool> b_timed_out{false};
  std::thread b([&] {  // answered after 1 s: its batch times out after A's answer came
    try {
      pool.run_shared(blpop("1"), redis::Effect::read);
    } catch (const dlq::timeout_error&) {
      b_timed_out = true;
    }
  });
  first.join();
  a.join();
  b.join();
  CHECK(b_timed_out);
  RawClient admin(server.url());
  REQUIRE(admin.integer({"LLEN", "list"}) == 1);  // A's RPUSH ran, and its answer came
  CHECK(a_outcome == 1);                          // so A is told so, not "outcome unknown"
  CHECK(a_length == 1);
}

TEST_CASE("shared sends: an empty command is refused and holds up no other command of its batch",
          "[redis][shared_sends]") {
  RedisProcess server;
  redis::PoolOptions po;
  po.size = 2;
  po.send_batches = 1;
  redis::ConnectionPool pool(fast_options(server), po);
  std::thread first([&] {  // the batch on the wire while the next two queue
    redis::Command c("BLPOP");
    c.arg("absent").arg("0.15");
    pool.run_shared(c, redis::Effect::read);
  });
  std::this_thread::sleep_for(milliseconds(50));
  std::atomic<bool> refused{false};
  std::thread empty([&] {
    try {
      pool.run_shared(redis::Command(), redis::Effect::write);
    } catch (const dlq::invalid_argument&) {
      refused = true;
    } catch (const dlq::error&) {
    }
  });
  std::this_thread::sleep_for(milliseconds(30));
  long long length = -1;
  std::thread x([&] {
    redis::Command c("RPUSH");
    c.arg("list").arg("x");
    try {
      const redis::Reply r = pool.run_shared(c, redis::Effect::write);
      length = r->type == REDIS_REPLY_INTEGER ? r->integer : -2;
    } catch (const dlq::error&) {  // Redis answers nothing to an empty command: the batch
    }                              // waits for one answer too many and times out
  });
  first.join();
  empty.join();
  x.join();
  CHECK(refused);
  CHECK(length == 1);
}

TEST_CASE(
    "shared sends: 64 senders through one batch slot, big and small commands, connections "
    "killed: nothing lost, doubled or left waiting",
    "[redis][shared_sends][faults]") {
  RedisProcess server;
  RedisListStorage s(fast_options(server), pool_of(2, 1));
  constexpr std::size_t threads = 64;
  constexpr std::size_t per_thread = 60;
  const std::string big(std::size_t{1} << 20, 'b');  // 5 of them pass the 4 MiB batch limit
  std::mutex m;
  std::set<std::string> acknowledged, unknown, refused;
  std::atomic<bool> stop{false};
  std::thread killer([&] {
    RawClient k(server.url());
    while (!stop) {
      try {
        k.integer({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
      } catch (const dlq::error&) {
      }
      std::this_thread::sleep_for(milliseconds(7));
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  together(threads, [&](std::size_t t) {
    for (std::size_t i = 0; i < per_thread; ++i) {
      const std::string id = item(t, i);
      const std::string e = (t + i) % 16 == 0 ? id + ":" + big : id;
      try {
        s.push(Record{"q", "", "", e});
        std::lock_guard<std::mutex> g(m);
        acknowledged.insert(id);
      } catch (const dlq::storage_error& err) {
        std::lock_guard<std::mutex> g(m);
        (err.outcome_unknown() ? unknown : refused).insert(id);
      }
    }
  });
  stop = true;
  killer.join();
  CHECK(dlq::test::elapsed_ms(t0) < 60000);
  RawClient admin(server.url());
  std::vector<std::string> stored;
  for (auto& e : admin.list(s.key("q", ListKind::dead)))
    stored.push_back(e.substr(0, e.find(':')));
  const std::set<std::string> stored_set(stored.begin(), stored.end());
  INFO("acknowledged " << acknowledged.size() << ", outcome unknown " << unknown.size()
                       << ", refused " << refused.size());
  CHECK(acknowledged.size() + unknown.size() + refused.size() == threads * per_thread);
  CHECK(stored.size() == stored_set.size());
  check_outcomes(stored_set, acknowledged, unknown, refused);
}

TEST_CASE("shared sends: two batches ending together start two batches, not one",
          "[redis][shared_sends][faults]") {
  RedisProcess server;
  auto o = fast_options(server);
  // 1 s, not less: under ThreadSanitizer on a loaded machine starting the 128 threads took
  // longer than 500 ms, and the last ones queued after the first batches had ended.
  o.connect_timeout = milliseconds(1000);
  o.command_timeout = milliseconds(1000);
  RedisListStorage s(o, pool_of(8, 2));
  s.push(Record{"q", "", "", "warm-up"});
  server.freeze();
  std::atomic<std::size_t> timeouts{0};
  const auto t0 = std::chrono::steady_clock::now();
  // Two lone sends time out together after 1 s; the 128 senders queued behind them fit in
  // two batches, which should then run side by side (another 1 s) — not one after the
  // other because both slots handed their turn to the same waiting sender.
  together(130, [&](std::size_t t) {
    try {
      s.push(Record{"q", "", "", item(t, 0)});
    } catch (const dlq::timeout_error&) {
      ++timeouts;
    }
  });
  const auto waited = dlq::test::elapsed_ms(t0);
  server.thaw();
  CHECK(timeouts == 130);
  CHECK(waited < 2600);  // two rounds of 1 s, not three
}

TEST_CASE("shared sends: slots follow the senders — one for a lone sender, combined for many",
          "[redis][shared_sends]") {
  RedisProcess server;
  redis::PoolOptions po;
  po.size = 8;
  po.send_batches = 8;
  redis::ConnectionPool pool(fast_options(server), po);
  auto rpush = [&](const std::string& value) {
    redis::Command c("RPUSH");
    c.arg("list").arg(value);
    const redis::Reply r = pool.run_shared(c, redis::Effect::write);
    return r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
  };
  for (std::size_t i = 0; i < 200; ++i)
    REQUIRE(rpush(item(0, i)) == static_cast<long long>(i + 1));
  auto st = pool.shared_send_stats();
  CHECK(st.most_batches_on_wire == 1);  // a lone sender sends at once, one command a batch
  CHECK(st.batches == 200);
  CHECK(st.commands == 200);
  CHECK(st.batches_on_wire == 0);
  // 128 threads through 8 slots: every send answered with its own length, none lost or
  // doubled, never more than 8 batches out, and batches carrying many commands.
  constexpr std::size_t threads = 128;
  constexpr std::size_t per_thread = 100;
  std::atomic<std::size_t> bad{0};
  together(threads, [&](std::size_t t) {
    for (std::size_t i = 0; i < per_thread; ++i) {
      const long long length = rpush(item(t + 1, i));
      if (length < 201 || length > static_cast<long long>(200 + threads * per_thread)) ++bad;
    }
  });
  CHECK(bad == 0);
  st = pool.shared_send_stats();
  INFO("batches " << st.batches << ", commands " << st.commands << ", most at once "
                  << st.most_batches_on_wire);
  CHECK(st.batches_on_wire == 0);
  CHECK(st.most_batches_on_wire > 1);
  CHECK(st.most_batches_on_wire <= 8);
  CHECK(st.commands == 200 + threads * per_thread);
  CHECK(st.batches - 200 < threads * per_thread / 2);  // two or more commands a batch
  RawClient admin(server.url());
  const auto stored = admin.list("list");
  CHECK(stored.size() == 200 + threads * per_thread);
  CHECK(std::set<std::string>(stored.begin(), stored.end()).size() == stored.size());
}

namespace {
// How a lone send fared that took the only batch slot of a pool (two connections, one slot)
// on a frozen server while 100 senders kept more than a batch queued behind it for
// `keep_queuing` (then they stop, and the server is thawed).
struct LoneSender {
  long long ms = -1;       // how long its send took
  bool timed_out = false;  // it failed with timeout_error
  std::size_t left_on_wire = 0;
};

LoneSender lone_sender_on_frozen_server(RedisProcess& server, redis::ConnectionOptions o,
                                        milliseconds keep_queuing) {
  o.reconnect_attempts = 0;
  redis::PoolOptions po;
  po.size = 2;
  po.send_batches = 1;
  redis::ConnectionPool pool(o, po);
  auto rpush = [&](const std::string& value) {
    redis::Command c("RPUSH");
    c.arg("list").arg(value);
    pool.run_shared(c, redis::Effect::write);
  };
  rpush("warm-up");
  server.freeze();
  std::atomic<bool> stop{false};
  LoneSender r;
  std::thread a([&] {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      rpush("a");
    } catch (const dlq::timeout_error&) {
      r.timed_out = true;
    } catch (const dlq::error&) {
    }
    r.ms = dlq::test::elapsed_ms(t0);
  });
  while (pool.shared_send_stats().batches_on_wire == 0)
    std::this_thread::sleep_for(milliseconds(1));
  std::thread others([&] {
    together(100, [&](std::size_t t) {
      for (std::size_t i = 0; !stop; ++i) {
        try {
          rpush(item(t, i));
        } catch (const dlq::error&) {
        }
      }
    });
  });
  std::this_thread::sleep_for(keep_queuing);
  stop = true;
  a.join();
  others.join();
  server.thaw();
  r.left_on_wire = pool.shared_send_stats().batches_on_wire;
  return r;
}
}  // namespace

TEST_CASE("shared sends: a thread sending for others is let go after a few batches",
          "[redis][shared_sends][faults]") {
  RedisProcess server;
  auto o = fast_options(server);
  o.connect_timeout = milliseconds(100);
  o.command_timeout = milliseconds(100);
  // Every batch times out while the others keep queuing for 4 s. A, its own send failed,
  // does not send their batches for as long as others keep queuing (it hands the slot over
  // after a failed batch, and after 8 in any case).
  const LoneSender a = lone_sender_on_frozen_server(server, o, milliseconds(4000));
  INFO("A returned after " << a.ms << " ms");
  CHECK(a.ms < 2500);
  CHECK(a.left_on_wire == 0);
}

TEST_CASE("shared sends: a sender whose own batch failed on a frozen server returns then",
          "[redis][shared_sends][faults]") {
  RedisProcess server;
  // A's lone send times out (300 ms). run_shared: "A caller whose batch was answered may
  // send up to 7 more batches" — A's was not: it hands the slot on and returns after its own
  // timeout, instead of sending others' batches into the frozen server for up to 7 timeouts
  // more (the others keep queuing for 2 s, past the 2.4 s that would take less its own).
  const LoneSender a =
      lone_sender_on_frozen_server(server, fast_options(server), milliseconds(2000));
  INFO("A returned after " << a.ms << " ms");
  CHECK(a.timed_out);
  CHECK(a.ms < 1500);  // its own timeout (300 ms) and scheduling; 8 batches take >= 2400 ms
  CHECK(a.left_on_wire == 0);
}

TEST_CASE(
    "shared sends: the server killed (SIGKILL) and restarted from its fsynced AOF under 32 "
    "senders through 8 slots: every acknowledged send stored once",
    "[redis][shared_sends][faults]") {
  RedisProcess server({"--appendonly", "yes", "--appendfsync", "always"});
  RedisListStorage s(fast_options(server), pool_of(8, 8));
  constexpr std::size_t threads = 32;
  constexpr std::size_t per_thread = 150;
  std::mutex m;
  std::set<std::string> acknowledged, unknown, refused;
  std::atomic<std::size_t> sent{0};
  std::thread senders([&] {
    together(threads, [&](std::size_t t) {
      for (std::size_t i = 0; i < per_thread; ++i) {
        const std::string e = item(t, i);
        try {
          s.push(Record{"q", "", "", e});
          std::lock_guard<std::mutex> g(m);
          acknowledged.insert(e);
        } catch (const dlq::storage_error& err) {
          std::lock_guard<std::mutex> g(m);
          (err.outcome_unknown() ? unknown : refused).insert(e);
        }
        ++sent;
      }
    });
  });
  // Killed and restarted from this thread: the server gets PR_SET_PDEATHSIG for the thread
  // that started it.
  for (const std::size_t at : {std::size_t{800}, std::size_t{2500}}) {
    while (sent < at)
      std::this_thread::sleep_for(milliseconds(1));
    server.kill9();
    std::this_thread::sleep_for(milliseconds(100));
    server.start();
  }
  senders.join();
  // The restarted server may still be loading its AOF: ask until it answers.
  std::vector<std::string> stored;
  for (int attempt = 0;; ++attempt) {
    try {
      RawClient admin(server.url());
      stored = admin.list(s.key("q", ListKind::dead));
      break;
    } catch (const dlq::error&) {
      if (attempt >= 100) throw;
      std::this_thread::sleep_for(milliseconds(50));
    }
  }
  const std::set<std::string> stored_set(stored.begin(), stored.end());
  INFO("acknowledged " << acknowledged.size() << ", outcome unknown " << unknown.size()
                       << ", refused " << refused.size() << ", stored " << stored.size());
  CHECK(acknowledged.size() + unknown.size() + refused.size() == threads * per_thread);
  CHECK(unknown.size() + refused.size() > 0);  // the kills hit sends in flight
  CHECK(stored.size() == stored_set.size());
  check_outcomes(stored_set, acknowledged, unknown, refused);
}

TEST_CASE("shared sends: OOM error replies for some commands of a batch reach those commands only",
          "[redis][shared_sends][faults]") {
  // noeviction: once used memory passes maxmemory, RPUSH is answered -OOM (nothing stored);
  // a reply that frees nothing does not bring it back under.
  RedisProcess server({"--maxmemory", "3mb", "--maxmemory-policy", "noeviction"});
  RedisListStorage s(fast_options(server), pool_of(8, 8));
  constexpr std::size_t threads = 32;
  constexpr std::size_t per_thread = 300;
  const std::string pad(400, 'p');
  std::mutex m;
  std::set<std::string> acknowledged, refused;
  std::atomic<std::size_t> other{0};
  together(threads, [&](std::size_t t) {
    for (std::size_t i = 0; i < per_thread; ++i) {
      const std::string id = item(t, i);
      try {
        s.push(Record{"q", "", "", id + ":" + pad});
        std::lock_guard<std::mutex> g(m);
        acknowledged.insert(id);
      } catch (const dlq::reply_error& e) {
        if (e.code() != "OOM" || e.outcome_unknown()) ++other;
        std::lock_guard<std::mutex> g(m);
        refused.insert(id);
      } catch (const dlq::error&) {
        ++other;
      }
    }
  });
  RawClient admin(server.url());
  std::vector<std::string> stored;
  for (auto& e : admin.list(s.key("q", ListKind::dead)))
    stored.push_back(e.substr(0, e.find(':')));
  const std::set<std::string> stored_set(stored.begin(), stored.end());
  INFO("acknowledged " << acknowledged.size() << ", refused " << refused.size());
  CHECK(other == 0);
  CHECK(refused.size() > 0);  // the limit was reached
  CHECK(acknowledged.size() + refused.size() == threads * per_thread);
  CHECK(stored.size() == stored_set.size());
  check_outcomes(stored_set, acknowledged, {}, refused);
}

}  // namespace test_shared_sends

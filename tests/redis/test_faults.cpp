// Faults against private redis-servers this test starts, kills, freezes and restarts:
// clear typed errors, bounded waits, nothing lost.
#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "dlq/redis/list_storage.hpp"
#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"
#include "support/redis_process.hpp"

namespace test_faults {

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
  o.reconnect_backoff = milliseconds(20);
  return o;
}

const auto pass_through = [](std::string_view raw, Decision& d) {
  d.action = Action::replay;
  d.payload = raw;
};

// Loads the replay script (one step on a scratch queue), so a later fault hits EVALSHA.
void warm_up(RedisListStorage& s) {
  s.push(Record{"warm-up", "", "", "x"});
  RedisListStorage::replay_cursor c;
  s.replay_step("warm-up", c, 1, pass_through);
}

std::vector<std::string> numbered(int n, const std::string& tag = "e") {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i)
    v.push_back(tag + std::to_string(i));
  return v;
}

// Every item exactly once across the dead list and the source list.
void check_exactly_once(RawClient& raw, const RedisListStorage& s, const std::string& q,
                        std::vector<std::string> items) {
  auto all = raw.list(s.key(q, ListKind::dead));
  auto src = raw.list(s.source_key(q));
  all.insert(all.end(), src.begin(), src.end());
  std::sort(all.begin(), all.end());
  std::sort(items.begin(), items.end());
  CHECK(all == items);
}

}  // namespace

TEST_CASE("CLIENT KILL of our connection: the next operation reconnects transparently",
          "[redis][faults]") {
  RedisProcess server;
  RedisListStorage s(fast_options(server));
  RawClient admin(server.url());
  s.push(Record{"q", "", "", "a"});
  CHECK(admin.integer({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}) >= 1);
  s.push(Record{"q", "", "", "b"});  // a write: the idle check saw the close before sending
  CHECK(s.size("q", ListKind::dead) == 2);
  admin.integer({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  RedisListStorage::replay_cursor c;
  CHECK(s.replay_step("q", c, 10, pass_through).examined == 2);
  CHECK(admin.list(s.source_key("q")) == std::vector<std::string>{"a", "b"});
}

TEST_CASE("server killed: refused is a connection_error; after a restart all works again",
          "[redis][faults]") {
  RedisProcess server;
  RedisListStorage s(fast_options(server));
  s.push(Record{"q", "", "", "a"});
  server.kill9();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    s.push(Record{"q", "", "", "b"});
    FAIL("no error");
  } catch (const connection_error& e) {
    CHECK_FALSE(e.outcome_unknown());  // refused: nothing was sent
    CHECK(std::string(e.what()).find("connection refused") != std::string::npos);
    CHECK(std::string(e.what()).find(std::to_string(server.port())) != std::string::npos);
  }
  CHECK(test::elapsed_ms(t0) < 3000);  // bounded: 3 retries with backoff
  CHECK_THROWS_AS(s.size("q", ListKind::dead), connection_error);
  server.start();  // same port; the data is gone (no persistence) and so is the script cache
  s.push(Record{"q", "", "", "c"});
  RedisListStorage::replay_cursor c;
  CHECK(s.replay_step("q", c, 10, pass_through).examined == 1);  // NOSCRIPT → reload
  RawClient raw(server.url());
  CHECK(raw.list(s.source_key("q")) == std::vector<std::string>{"c"});
}

TEST_CASE("server restarted while the storage was idle: operations reconnect", "[redis][faults]") {
  RedisProcess server;
  RedisListStorage s(fast_options(server));
  s.push(Record{"q", "", "", "a"});
  server.restart();
  s.push(Record{"q", "", "", "b"});
  CHECK(s.size("q", ListKind::dead) == 1);
  CHECK(s.purge("q", ListKind::dead) == 1);
}

TEST_CASE(
    "frozen server (SIGSTOP): typed timeout within the set timeout, also after a "
    "reconnect",
    "[redis][faults]") {
  RedisProcess server;
  RedisListStorage s(fast_options(server));
  s.push(Record{"q", "", "", "a"});
  server.freeze();
  auto t0 = std::chrono::steady_clock::now();
  try {
    s.push(Record{"q", "", "", "b"});
    FAIL("no error");
  } catch (const timeout_error& e) {
    CHECK(e.outcome_unknown());  // the RPUSH was sent: it may land when the server wakes
    CHECK(std::string(e.what()).find("300 ms") != std::string::npos);
    CHECK(std::string(e.what()).find("outcome unknown") != std::string::npos);
  }
  CHECK(test::elapsed_ms(t0) < 1500);
  // The connection was dropped; the next call reconnects to the frozen server (the kernel
  // accepts) and the handshake must time out just the same — hiredis 0.14's reconnect would
  // have lost the timeout and blocked for good.
  t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(s.size("q", ListKind::dead), timeout_error);
  CHECK(test::elapsed_ms(t0) < 1500);
  t0 = std::chrono::steady_clock::now();
  try {
    s.push(Record{"q", "", "", "c"});
    FAIL("no error");
  } catch (const timeout_error& e) {
    CHECK_FALSE(e.outcome_unknown());  // the handshake timed out: the RPUSH never left
  }
  CHECK(test::elapsed_ms(t0) < 1500);
  server.thaw();
  const auto n = s.size("q", ListKind::dead);
  CHECK((n == 1 || n == 2));  // "b" may have landed: that is what unknown outcome means
  s.push(Record{"q", "", "", "d"});
  CHECK(s.size("q", ListKind::dead) == n + 1);
}

TEST_CASE("server frozen during a replay step: typed error, nothing lost", "[redis][faults]") {
  RedisProcess server;
  RedisListStorage s(fast_options(server));
  RawClient raw(server.url());
  auto items = numbered(500);
  raw.rpush(s.key("q", ListKind::dead), items);
  warm_up(s);
  RedisListStorage::replay_cursor c;
  int decided = 0;
  auto freeze_midway = [&](std::string_view r, Decision& d) {
    if (++decided == 100) server.freeze();
    pass_through(r, d);
  };
  try {
    s.replay_step("q", c, 200, freeze_midway);
    FAIL("no error");
  } catch (const timeout_error& e) {
    CHECK(e.outcome_unknown());
    CHECK(std::string(e.what()).find("nothing was lost") != std::string::npos);
  }
  server.thaw();
  // The script sent before the freeze may run when the server wakes: either way each item
  // is in exactly one place.
  check_exactly_once(raw, s, "q", items);
  CHECK(s.recover("q") == 0);
  RedisListStorage::replay_cursor again;
  for (int i = 0; i < 20; ++i) {
    auto r = s.replay_step("q", again, 200, pass_through);
    if (!r.conflict && r.examined == 0) break;
  }
  CHECK(raw.list(s.source_key("q")).size() == items.size());
}

TEST_CASE("a lost script answer is resolved by the receipt: applied or not, never both",
          "[redis][faults]") {
  // The server freezes right after receiving the script and wakes after our timeout: the
  // step must reconnect, kill its old connection and read the receipt.
  for (int round = 0; round < 3; ++round) {
    RedisProcess server;
    auto o = fast_options(server);
    o.command_timeout = milliseconds(200);
    o.connect_timeout = milliseconds(1000);
    RedisListStorage s(o);
    RawClient raw(server.url());
    auto items = numbered(300);
    raw.rpush(s.key("q", ListKind::dead), items);
    warm_up(s);
    RedisListStorage::replay_cursor c;
    int decided = 0;
    std::thread waker;
    auto freeze_at_end = [&](std::string_view r, Decision& d) {
      if (++decided == 300) {
        server.freeze();
        waker = std::thread([&] {
          std::this_thread::sleep_for(milliseconds(round == 0 ? 100 : 260));
          server.thaw();
        });
      }
      pass_through(r, d);
    };
    StepResult r;
    bool threw = false;
    try {
      r = s.replay_step("q", c, 300, freeze_at_end);
    } catch (const storage_error& e) {
      threw = true;
      CHECK(e.outcome_unknown());
    }
    waker.join();
    const auto dead = raw.list(s.key("q", ListKind::dead)).size();
    if (!threw && !r.conflict) {
      CHECK(r.examined == 300);
      CHECK(dead == 0);
    }
    if (!threw && r.conflict) CHECK(dead == 300);
    check_exactly_once(raw, s, "q", items);
    // Resolved or not, the step's receipt goes with the cursor once the answer is known.
    c = RedisListStorage::replay_cursor{};
    if (!threw) CHECK(raw.strings({"KEYS", "*:receipt:*"}).empty());
  }
}

TEST_CASE("CLIENT PAUSE WRITE makes the script time out; resolution finds it not applied",
          "[redis][faults]") {
  RedisProcess server;
  auto o = fast_options(server);
  o.command_timeout = milliseconds(150);
  RedisListStorage s(o);
  RawClient raw(server.url());
  auto items = numbered(50);
  raw.rpush(s.key("q", ListKind::dead), items);
  RedisListStorage::replay_cursor c;
  warm_up(s);
  raw.cmd({"CLIENT", "PAUSE", "1000", "WRITE"});
  auto r = s.replay_step("q", c, 100, pass_through);
  CHECK(r.conflict);  // not applied, and its old connection was killed: it never will be
  raw.cmd({"CLIENT", "UNPAUSE"});
  std::this_thread::sleep_for(milliseconds(100));
  CHECK(raw.list(s.key("q", ListKind::dead)) == items);
  CHECK(raw.list(s.source_key("q")).empty());
  r = s.replay_step("q", c, 100, pass_through);
  CHECK(r.examined == 50);
  check_exactly_once(raw, s, "q", items);
}

TEST_CASE("wrong password: typed error naming AUTH, password never shown", "[redis][faults]") {
  RedisProcess server({"--requirepass", "right-secret"});
  auto o = fast_options(server);
  o.password = "wrong-secret";
  RedisListStorage s(o);
  try {
    s.size("q", ListKind::dead);
    FAIL("no error");
  } catch (const reply_error& e) {
    const std::string m = e.what();
    CHECK((e.code() == "WRONGPASS" || e.code() == "ERR"));
    CHECK(m.find("AUTH") != std::string::npos);
    CHECK(m.find("wrong-secret") == std::string::npos);
    CHECK(m.find("right-secret") == std::string::npos);
  }
  // Without a password: NOAUTH on the first command.
  auto no_pw = fast_options(server);
  RedisListStorage s2(no_pw);
  try {
    s2.push(Record{"q", "", "", "x"});
    FAIL("no error");
  } catch (const reply_error& e) {
    CHECK(e.code() == "NOAUTH");
  }
  // The URL form, with SELECT.
  RedisListStorage ok("redis://:right-secret@127.0.0.1:" + std::to_string(server.port()) + "/3");
  ok.push(Record{"q", "", "", "x"});
  RawClient raw("redis://:right-secret@127.0.0.1:" + std::to_string(server.port()) + "/3");
  CHECK(raw.list("dlq:{q}") == std::vector<std::string>{"x"});
  RawClient raw0("redis://:right-secret@127.0.0.1:" + std::to_string(server.port()) + "/0");
  CHECK(raw0.list("dlq:{q}").empty());
}

TEST_CASE("ACL user and password, re-applied with SELECT after a reconnect", "[redis][faults]") {
  RedisProcess server;
  RawClient admin(server.url());
  admin.cmd({"ACL", "SETUSER", "worker", "on", ">w-pass", "~*", "&*", "+@all"});
  admin.cmd({"ACL", "SETUSER", "default", "off"});
  RedisListStorage s("redis://worker:w-pass@127.0.0.1:" + std::to_string(server.port()) + "/2");
  s.push(Record{"q", "", "", "x"});
  RawClient worker("redis://worker:w-pass@127.0.0.1:" + std::to_string(server.port()) + "/2");
  worker.integer({"CLIENT", "KILL", "USER", "worker", "SKIPME", "yes"});
  s.push(Record{"q", "", "", "y"});  // reconnect: AUTH worker + SELECT 2 again
  CHECK(worker.list("dlq:{q}") == std::vector<std::string>{"x", "y"});
  RedisListStorage bad("redis://worker:nope@127.0.0.1:" + std::to_string(server.port()));
  try {
    bad.size("q", ListKind::dead);
    FAIL("no error");
  } catch (const reply_error& e) {
    CHECK(e.code() == "WRONGPASS");
    CHECK(std::string(e.what()).find("AUTH as user 'worker'") != std::string::npos);
    CHECK(std::string(e.what()).find("nope") == std::string::npos);
  }
}

TEST_CASE("unix socket URLs connect", "[redis][faults]") {
  RedisProcess server;
  RedisListStorage s("unix://" + server.unix_socket() + "?db=1");
  s.push(Record{"q", "", "", "x"});
  RawClient raw("redis+unix://" + server.unix_socket() + "?db=1");
  CHECK(raw.list("dlq:{q}") == std::vector<std::string>{"x"});
}

TEST_CASE("nothing listening: connection_error without outcome_unknown", "[redis][faults]") {
  redis::ConnectionOptions o;
  o.port = test::free_loopback_port();
  o.reconnect_attempts = 1;
  RedisListStorage s(o);
  try {
    s.push(Record{"q", "", "", "x"});
    FAIL("no error");
  } catch (const connection_error& e) {
    CHECK_FALSE(e.outcome_unknown());
    CHECK(std::string(e.what()).find("127.0.0.1:" + std::to_string(o.port)) != std::string::npos);
  }
  CHECK_THROWS_AS(RedisListStorage("unix:///nonexistent/redis.sock").size("q", ListKind::dead),
                  connection_error);
}

}  // namespace test_faults

// Faults on a private 3-master Redis Cluster started by this test (tests/support/
// redis_cluster.sh in a temporary directory): a lost replay-script answer on a master other
// than the URL's is resolved by that master's receipt; a paused master makes the script time
// out and the step finds it not applied; a killed master gives typed errors for its queues
// while the other masters keep working. Every entry is counted afterwards. A MOVED or ASK
// naming no host (cluster-preferred-endpoint-type unknown-endpoint) goes to the host of the
// node that answered. A master that went down and whose slot the cluster gave to another
// master: after a connection failure the router reads the map again and finds the new owner
// (push through run_shared, and Router::run), never re-sending the failed command.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dlq/redis/list_storage.hpp"
#include "redis/cluster_test_util.hpp"
#include "support/catch.hpp"

namespace test_cluster_faults {

using namespace dlq;
using dlq::test::PrivateCluster;
using std::chrono::milliseconds;

namespace {

redis::ConnectionOptions fast(const std::string& url) {
  auto o = redis::parse_url(url);
  o.command_timeout = milliseconds(200);
  o.connect_timeout = milliseconds(1000);
  o.reconnect_attempts = 1;
  o.reconnect_backoff = milliseconds(10);
  return o;
}

const auto pass_through = [](std::string_view raw, Decision& d) {
  d.action = Action::replay;
  d.payload = raw;
};

std::vector<std::string> numbered(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i)
    out.push_back("item-" + std::to_string(i));
  return out;
}

std::string queue_on(test::RawCluster& raw, const RedisListStorage& s, int port,
                     const std::string& stem = "f") {
  for (int i = 0; i < 10000; ++i) {
    const std::string q = stem + std::to_string(i);
    if (raw.owner(s.key(q, ListKind::dead)) == port) return q;
  }
  throw std::runtime_error("no queue name found for port " + std::to_string(port));
}

// Loads the slot map, a connection to `port` and the replay script there (one item replayed
// on a queue of that master).
void warm_up(test::RawCluster& raw, RedisListStorage& s, int port) {
  const std::string q = queue_on(raw, s, port, "warm");
  s.push(Record{q, "", "", "w"});
  RedisListStorage::replay_cursor c;
  REQUIRE(s.replay_step(q, c, 10, pass_through).examined == 1);
}

// Every item is in exactly one of the dead list and the source list, once.
void check_exactly_once(test::RawCluster& raw, const RedisListStorage& s, const std::string& q,
                        const std::vector<std::string>& items) {
  const auto dead = raw.list(s.key(q, ListKind::dead));
  const auto src = raw.list(s.source_key(q));
  std::multiset<std::string> all(dead.begin(), dead.end());
  all.insert(src.begin(), src.end());
  CHECK(all.size() == items.size());
  for (const auto& it : items)
    CHECK(all.count(it) == 1);
}

}  // namespace

TEST_CASE("cluster faults: lost answers, paused and killed masters", "[redis][cluster][faults]") {
  PrivateCluster cluster;
  test::RawCluster raw(cluster.ports());
  const int owner = cluster.ports()[1];  // not the URL's node

  SECTION("a lost script answer on another master is resolved by its receipt") {
    for (int round = 0; round < 3; ++round) {
      RedisListStorage s(fast(cluster.url()), test::unique_layout());
      const std::string q = queue_on(raw, s, owner);
      const auto items = numbered(300);
      raw.rpush(s.key(q, ListKind::dead), items);
      warm_up(raw, s, owner);
      RedisListStorage::replay_cursor c;
      int decided = 0;
      std::thread waker;
      auto freeze_at_end = [&](std::string_view r, Decision& d) {
        if (++decided == 300) {
          cluster.freeze(owner);
          waker = std::thread([&] {
            std::this_thread::sleep_for(milliseconds(round == 0 ? 100 : 260));
            cluster.thaw(owner);
          });
        }
        pass_through(r, d);
      };
      StepResult r;
      bool threw = false;
      try {
        r = s.replay_step(q, c, 300, freeze_at_end);
      } catch (const storage_error& e) {
        threw = true;
        INFO(e.what());
        CHECK(e.outcome_unknown());
      }
      if (waker.joinable()) waker.join();
      const auto dead = raw.list(s.key(q, ListKind::dead)).size();
      if (!threw && !r.conflict) CHECK(dead == 0);
      if (!threw && r.conflict) CHECK(dead == 300);
      check_exactly_once(raw, s, q, items);
    }
  }

  SECTION("CLIENT PAUSE WRITE on the owning master: the step finds the script not applied") {
    RedisListStorage s(fast(cluster.url()), test::unique_layout());
    const std::string q = queue_on(raw, s, owner);
    const auto items = numbered(50);
    raw.rpush(s.key(q, ListKind::dead), items);
    warm_up(raw, s, owner);
    RedisListStorage::replay_cursor c;
    raw.node(owner).cmd({"CLIENT", "PAUSE", "1000", "WRITE"});
    auto r = s.replay_step(q, c, 100, pass_through);
    CHECK(r.conflict);  // not applied, and its old connection was killed: it never will be
    raw.node(owner).cmd({"CLIENT", "UNPAUSE"});
    std::this_thread::sleep_for(milliseconds(100));
    CHECK(raw.list(s.key(q, ListKind::dead)) == items);
    CHECK(raw.list(s.source_key(q)).empty());
    r = s.replay_step(q, c, 100, pass_through);
    CHECK(r.examined == 50);
    check_exactly_once(raw, s, q, items);
  }

  SECTION("a killed master: typed errors for its queues, the other masters keep working") {
    RedisListStorage s(fast(cluster.url()), test::unique_layout());
    const int victim = cluster.ports()[2];
    const std::string lost = queue_on(raw, s, victim);
    const std::string kept = queue_on(raw, s, cluster.ports()[1]);
    s.push(Record{lost, "", "", "a"});
    s.push(Record{kept, "", "", "b"});
    cluster.kill9(victim);
    try {
      s.push(Record{lost, "", "", "c"});
      FAIL("expected connection_error");
    } catch (const connection_error& e) {
      CHECK(std::string(e.what()).find(std::to_string(victim)) != std::string::npos);
    }
    CHECK(s.push(Record{kept, "", "", "d"}) == 2);
    CHECK(raw.list(s.key(kept, ListKind::dead)) == std::vector<std::string>{"b", "d"});
  }
}

TEST_CASE("ASK and MOVED naming no host (unknown-endpoint): the answering node's host",
          "[redis][cluster][faults]") {
  // With cluster-preferred-endpoint-type unknown-endpoint a node answers "ASK <slot> :<port>"
  // and "MOVED <slot> :<port>": the empty host is the host the client asked (as the empty
  // host of CLUSTER SLOTS), not the local host — the master already known is used.
  PrivateCluster cluster;
  test::RawCluster raw(cluster.ports());
  const auto& ports = cluster.ports();
  RedisListStorage s(fast(cluster.url()), test::unique_layout());
  for (const int port : ports)  // the map known, a pool for each master
    s.push(Record{queue_on(raw, s, port, "warm-"), "", "", "warm"});
  redis::Router& router = s.router();
  REQUIRE(router.pools() == 3);
  const std::string moving = queue_on(raw, s, ports[1], "endpoint-");
  const std::string key = s.key(moving, ListKind::dead);
  const int slot = raw.keyslot(key);
  for (const int p : ports)
    raw.ok(p, {"CONFIG", "SET", "cluster-preferred-endpoint-type", "unknown-endpoint"});
  const auto before = router.stats();
  std::vector<std::string> errors;
  const auto push = [&](const std::string& payload) {
    try {
      s.push(Record{moving, "", "", payload});
    } catch (const storage_error& e) {
      errors.emplace_back(e.what());
    }
  };
  raw.begin_migration(slot, ports[1], ports[2]);
  push("asked");  // ASK <slot> :<port>
  CHECK(router.stats().ask == before.ask + 1);
  raw.move_keys(slot, ports[1], ports[2]);
  raw.end_migration(slot, ports[2]);
  push("moved");  // MOVED <slot> :<port>
  CHECK(router.stats().moved >= before.moved + 1);
  for (const auto& e : errors)
    UNSCOPED_INFO(e);
  CHECK(errors.empty());
  CHECK(raw.node(ports[2]).list(key) == std::vector<std::string>{"asked", "moved"});
  CHECK(router.pools() == 3);  // no pool for ":<port>"
}

TEST_CASE("MOVED to a master that cannot be reached: typed, once; the map read again after",
          "[redis][cluster][faults]") {
  // A slot is moved to a master that is then killed; the router learns of the move from
  // MOVED and fails (connection_error, never sent). The slot is given back to a live master
  // (as a failover would): a dead node never answers MOVED, so the router must read the map
  // again after the connection failure — the next sends succeed after at most one failure.
  // Both paths: push (Router::run_shared) and Router::run, each through its own Router.
  PrivateCluster cluster;
  test::RawCluster raw(cluster.ports());
  const auto& ports = cluster.ports();
  const auto options = test::fault_options(cluster.url());
  const auto layout = test::unique_layout();
  RedisListStorage shared(options, layout);  // push: run_shared
  RedisListStorage piped(options, layout);   // router().run
  for (const int port : ports) {             // the map known, a pool for each master, in both
    const std::string warm = queue_on(raw, shared, port, "warm-");
    shared.push(Record{warm, "", "", "warm"});
    piped.push(Record{warm, "", "", "warm"});
  }
  REQUIRE(shared.router().pools() == 3);
  REQUIRE(piped.router().pools() == 3);
  const std::string moving = queue_on(raw, shared, ports[1], "dead-");
  const std::string key = shared.key(moving, ListKind::dead);
  const int slot = raw.keyslot(key);
  raw.migrate(slot, ports[1], ports[2]);  // the routers' maps still say ports[1]
  cluster.kill9(ports[2]);
  REQUIRE(test::wait_refused(ports[2]));  // the process is gone, its sockets closed
  const auto push = [&](const std::string& payload) {
    shared.push(Record{moving, "", "", payload});
  };
  const auto run = [&](const std::string& payload) {
    std::optional<redis::ConnectionPool::Lease> lease;
    piped.router().run(lease, key, redis::Effect::write, [&](const std::string&) {
      std::vector<redis::Command> cmds;
      cmds.emplace_back("RPUSH");
      cmds.back().arg(key).arg(payload);
      return cmds;
    });
  };
  // ports[1] answers MOVED to ports[2], which refuses connections: typed, never sent.
  for (const auto& send : {std::function<void(const std::string&)>(push),
                           std::function<void(const std::string&)>(run)}) {
    try {
      send("lost");
      FAIL("expected connection_error");
    } catch (const connection_error& e) {
      INFO(e.what());
      CHECK_FALSE(e.outcome_unknown());
    }
  }
  // The slot is given back to a live master (as a failover would): the routers find it.
  const std::string owner = raw.id(ports[1]);
  raw.ok(ports[1], {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", owner});
  raw.ok(ports[1], {"CLUSTER", "BUMPEPOCH"});
  raw.ok(ports[0], {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", owner});
  std::vector<std::string> stored_items;
  for (const auto& [name, send] :
       {std::pair{std::string("push"), std::function<void(const std::string&)>(push)},
        std::pair{std::string("Router::run"), std::function<void(const std::string&)>(run)}}) {
    INFO(name);
    int failed = 0;
    bool stored = false;
    std::vector<std::string> errors;
    for (int attempt = 0; attempt < 3 && !stored; ++attempt) {
      try {
        send("after-" + name);
        stored = true;
      } catch (const storage_error& e) {
        ++failed;
        errors.emplace_back(e.what());
      }
    }
    for (const auto& e : errors)
      UNSCOPED_INFO(e);
    CHECK(stored);
    CHECK(failed <= 1);
    if (stored) stored_items.push_back("after-" + name);
  }
  CHECK(raw.node(ports[1]).list(key) == stored_items);
}

TEST_CASE("a map read after a connection failure from a node that knows no slot is not applied",
          "[redis][cluster][faults]") {
  // The seed forgets the cluster (CLUSTER RESET HARD: as a node restarted without its
  // nodes.conf; it answers CLUSTER SLOTS with an empty map) and another master dies. A
  // connection failure to the dead master makes the router read the map again, from the seed
  // first: an empty map must not replace the one known — else every key, those of the live
  // master too, fails with CLUSTERDOWN from then on (pool_for reads the empty seed again).
  PrivateCluster cluster;
  test::RawCluster raw(cluster.ports());
  const auto& ports = cluster.ports();
  const auto options = test::fault_options(cluster.url());  // the seed: ports[0]
  const auto layout = test::unique_layout();
  RedisListStorage s(options, layout);
  std::vector<std::string> queues;
  for (const int port : ports) {
    queues.push_back(queue_on(raw, s, port, "q-"));
    s.push(Record{queues.back(), "", "", "warm"});
  }
  REQUIRE(s.router().pools() == 3);
  raw.ok(ports[0], {"FLUSHALL"});
  raw.ok(ports[0], {"CLUSTER", "RESET", "HARD"});
  cluster.kill9(ports[2]);
  bool dead = false;
  for (int i = 0; i < 200 && !dead; ++i) {
    try {
      s.push(Record{queues[2], "", "", "lost"});
      std::this_thread::sleep_for(milliseconds(10));
    } catch (const storage_error&) {
      dead = true;
    }
  }
  REQUIRE(dead);
  // The live master ports[1] still serves its slots; the router must still send it there.
  std::string error;
  try {
    s.push(Record{queues[1], "", "", "after"});
  } catch (const storage_error& e) {
    error = e.what();
  }
  INFO(error);
  CHECK(error.empty());
  CHECK(raw.node(ports[1]).list(s.key(queues[1], ListKind::dead)).size() == 2);
}

TEST_CASE("a map of no slot read after CLUSTERDOWN is not applied", "[redis][cluster][faults]") {
  // The seed forgets the cluster (CLUSTER RESET HARD: as a node restarted without its
  // nodes.conf; it answers CLUSTER SLOTS with an empty map), then the cluster is down for a
  // while (one slot unassigned with cluster-require-full-coverage: every master answers
  // CLUSTERDOWN). The router reads the map again from the seed on CLUSTERDOWN: an empty map
  // must not replace the one known — else, once the cluster is healthy again, every key still
  // fails with 'no master serves hash slot' (pool_for reads the same empty seed again).
  PrivateCluster cluster;
  test::RawCluster raw(cluster.ports());
  const auto& ports = cluster.ports();
  const auto options = test::fault_options(cluster.url());  // the seed: ports[0]
  const auto layout = test::unique_layout();
  RedisListStorage s(options, layout);
  std::vector<std::string> queues;
  for (const int port : ports) {
    queues.push_back(queue_on(raw, s, port, "q-"));
    s.push(Record{queues.back(), "", "", "warm"});
  }
  REQUIRE(s.router().pools() == 3);
  const auto state = [&](int port) {
    return raw.state_ok(port) ? std::string("ok") : std::string("fail");
  };
  const auto wait_state = [&](const std::string& want) {
    for (int i = 0; i < 1000; ++i) {
      if (state(ports[1]) == want && state(ports[2]) == want) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return false;
  };
  raw.ok(ports[0], {"FLUSHALL"});
  raw.ok(ports[0], {"CLUSTER", "RESET", "HARD"});
  // One slot of ports[2] (not that of the queue used below) unassigned on every node that
  // still knows the cluster: the cluster goes down.
  const int slot = raw.keyslot(s.key(queues[2], ListKind::dead));
  REQUIRE(slot != raw.keyslot(s.key(queues[1], ListKind::dead)));
  const std::string owner_id = raw.id(ports[2]);
  raw.ok(ports[1], {"CLUSTER", "DELSLOTS", std::to_string(slot)});
  raw.ok(ports[2], {"CLUSTER", "DELSLOTS", std::to_string(slot)});
  REQUIRE(wait_state("fail"));
  // A send while the cluster is down: retried, then a typed error (or it went through).
  std::string down_error;
  try {
    s.push(Record{queues[1], "", "", "down"});
  } catch (const storage_error& e) {
    down_error = e.what();
  }
  INFO("while down: " << down_error);
  // The cluster healthy again.
  raw.ok(ports[2], {"CLUSTER", "ADDSLOTS", std::to_string(slot)});
  raw.ok(ports[1], {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", owner_id});
  REQUIRE(wait_state("ok"));
  const std::string key = s.key(queues[1], ListKind::dead);
  const std::size_t before = raw.node(ports[1]).list(key).size();
  // The live master ports[1] serves its slots; the router must send it there.
  std::string error;
  try {
    s.push(Record{queues[1], "", "", "after"});
  } catch (const storage_error& e) {
    error = e.what();
  }
  INFO("after: " << error);
  CHECK(error.empty());
  CHECK(raw.node(ports[1]).list(key).size() == before + 1);
}

TEST_CASE("slots kept on a reset seed that answers CLUSTERDOWN are read again from another node",
          "[redis][cluster][faults]") {
  // The seed forgets the cluster (CLUSTER RESET HARD) and the others list its slots under a
  // master of no address (noaddr). The seed stays the known owner of its slots (the first
  // map; since e713354 a map read then keeps it too). The cluster is then repaired without
  // the seed (its old id forgotten, its slots given to ports[1]). The seed answers
  // CLUSTERDOWN for those slots; reading the map again from the seed alone (an empty map,
  // never applied) would send them to the seed, and fail them, forever.
  PrivateCluster cluster;
  test::RawCluster raw(cluster.ports());
  const auto& ports = cluster.ports();
  const auto options = test::fault_options(cluster.url());  // the seed: ports[0]
  const auto layout = test::unique_layout();
  RedisListStorage s(options, layout);
  std::vector<std::string> queues;
  for (const int port : ports) {
    queues.push_back(queue_on(raw, s, port, "q-"));
    s.push(Record{queues.back(), "", "", "warm"});
  }
  REQUIRE(s.router().pools() == 3);
  const std::string key = s.key(queues[0], ListKind::dead);
  REQUIRE(raw.keyslot(key) <= 5460);  // redis_cluster.sh: the seed serves 0-5460
  const std::string seed_id = raw.id(ports[0]);
  raw.ok(ports[0], {"FLUSHALL"});
  raw.ok(ports[0], {"CLUSTER", "RESET", "HARD"});
  REQUIRE(test::wait_for([&] { return raw.lists_flag(ports[1], "noaddr"); }, 500));
  raw.ok(ports[1], {"CLUSTER", "FORGET", seed_id});
  raw.ok(ports[2], {"CLUSTER", "FORGET", seed_id});
  raw.ok(ports[1], {"CLUSTER", "ADDSLOTSRANGE", "0", "5460"});
  test::wait_for([&] { return raw.state_ok(ports[1]) && raw.state_ok(ports[2]); }, 1000);
  REQUIRE(raw.state_ok(ports[1]));
  REQUIRE(raw.state_ok(ports[2]));
  std::string error;
  try {
    s.push(Record{queues[0], "", "", "after"});
  } catch (const storage_error& e) {
    error = e.what();
  }
  INFO(error);
  CHECK(error.empty());
  CHECK(raw.node(ports[1]).list(key).size() == 1);
}

TEST_CASE("masters() reads the map from another node when the seed's names no slot",
          "[redis][cluster][faults]") {
  // The seed forgets the cluster (CLUSTER RESET HARD: its CLUSTER SLOTS is an empty map) and
  // the cluster is repaired without it (its id forgotten, its slots given to ports[1]).
  // masters() reads the map again first: the seed's empty map is never applied, so the next
  // source is asked — else the masters of the old map, the reset seed among them, are scanned
  // (queues()) while the seed's slots are served by ports[1].
  PrivateCluster cluster;
  test::RawCluster raw(cluster.ports());
  const auto& ports = cluster.ports();
  const auto options = test::fault_options(cluster.url());  // the seed: ports[0]
  RedisListStorage s(options, test::unique_layout());
  for (const int port : ports)
    s.push(Record{queue_on(raw, s, port, "q-"), "", "", "warm"});
  REQUIRE(s.router().pools() == 3);
  const std::string seed_id = raw.id(ports[0]);
  raw.ok(ports[0], {"FLUSHALL"});
  raw.ok(ports[0], {"CLUSTER", "RESET", "HARD"});
  REQUIRE(test::wait_for([&] { return raw.lists_flag(ports[1], "noaddr"); }, 500));
  raw.ok(ports[1], {"CLUSTER", "FORGET", seed_id});
  raw.ok(ports[2], {"CLUSTER", "FORGET", seed_id});
  raw.ok(ports[1], {"CLUSTER", "ADDSLOTSRANGE", "0", "5460"});
  test::wait_for([&] { return raw.state_ok(ports[1]) && raw.state_ok(ports[2]); }, 1000);
  REQUIRE(raw.state_ok(ports[1]));
  REQUIRE(raw.state_ok(ports[2]));
  std::set<std::string> endpoints;
  for (redis::ConnectionPool* p : s.router().masters())
    endpoints.insert(p->endpoint());
  CHECK(endpoints == std::set<std::string>{"127.0.0.1:" + std::to_string(ports[1]),
                                           "127.0.0.1:" + std::to_string(ports[2])});
}

TEST_CASE("pool_for waits for another thread's map read instead of failing",
          "[redis][cluster][faults]") {
  // The Router's map gives slot X no master (the seed had dropped it when the map was read);
  // the slot is served again. Four threads ask for X at once: one reads the map again —
  // slowly, the seed paused for 400 ms — and the others, finding that read under way, must
  // wait for it and use its map, not throw "no master serves" while it runs.
  PrivateCluster cluster;
  test::RawCluster raw(cluster.ports());
  const auto& ports = cluster.ports();
  std::string key;
  for (int i = 0; key.empty(); ++i)
    if (raw.owner("k" + std::to_string(i)) == ports[0]) key = "k" + std::to_string(i);
  const std::string slot = std::to_string(raw.keyslot(key));
  raw.ok(ports[0], {"CLUSTER", "DELSLOTS", slot});
  redis::Router router(test::fault_options(cluster.url()));  // the seed: ports[0]
  REQUIRE(router.clustered());                               // its map: X has no master
  raw.ok(ports[0], {"CLUSTER", "ADDSLOTS", slot});
  raw.ok(ports[0], {"CLIENT", "PAUSE", "400", "ALL"});
  std::atomic<int> served{0};
  std::atomic<int> failed{0};
  const auto ask = [&] {
    try {
      if (router.pool_for(key).endpoint() == "127.0.0.1:" + std::to_string(ports[0])) ++served;
    } catch (const dlq::reply_error&) {
      ++failed;
    }
  };
  std::thread t1(ask);
  std::thread t2(ask);
  std::thread t3(ask);
  std::thread t4(ask);
  t1.join();
  t2.join();
  t3.join();
  t4.join();
  CHECK(failed.load() == 0);
  CHECK(served.load() == 4);
}

}  // namespace test_cluster_faults

// dlq::asio on a Redis Cluster (ctest fixture `redis_cluster`, 3 masters): sends, size, peek
// and get on queues of each master through one node's URL, where the blocking front end finds
// them; thousands of sends in flight over queues on every master (none lost or doubled, each
// queue in issue order); a slot moved while sends are in flight (ASK during the migration,
// MOVED after it); a send issued while a queue's earlier sends are being redirected waits for
// them (issue order); a frozen master on a private cluster (typed timeouts for its queues,
// the other masters and a timer on the loop unaffected).
#include <signal.h>
#include <unistd.h>

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_future.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dlq/asio.hpp"
#include "dlq/asio/redis.hpp"
#include "dlq/dead_letter_queue.hpp"
#include "dlq/redis/list_storage.hpp"
#include "redis/cluster_test_util.hpp"
#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"

namespace test_asio_redis_cluster {

using dlq::test::RawCluster;
using std::chrono::milliseconds;
using AsyncQueue = dlq::asio::AsyncDeadLetterQueue<dlq::asio::RedisListStorage>;

namespace {

dlq::Failure failure(std::string error) {
  dlq::Failure f;
  f.error = std::move(error);
  f.attempt = 1;
  f.worker = "cluster";
  return f;
}

// A queue name whose dead list is on the master on `port` (asked from the cluster).
std::string queue_on(RawCluster& raw, const dlq::asio::RedisListStorage& s, int port,
                     const std::string& stem) {
  for (int i = 0; i < 10000; ++i) {
    const std::string q = stem + std::to_string(i);
    if (raw.owner(s.key(q)) == port) return q;
  }
  throw std::runtime_error("no queue on port " + std::to_string(port));
}

// An io_context run by a thread of its own (so the test thread can wait on futures and move
// slots while sends are in flight); the queue is destroyed on that thread.
struct Loop {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> guard = asio::make_work_guard(io);
  std::thread runner{[this] { io.run(); }};
  std::unique_ptr<AsyncQueue> q;

  Loop(const std::string& url, const dlq::RedisListOptions& layout) {
    q = std::make_unique<AsyncQueue>(io.get_executor(),
                                     dlq::asio::RedisListStorage(io.get_executor(), url, layout));
  }
  Loop(dlq::redis::ConnectionOptions options, const dlq::RedisListOptions& layout) {
    q = std::make_unique<AsyncQueue>(
        io.get_executor(),
        dlq::asio::RedisListStorage(io.get_executor(), std::move(options), layout));
  }
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;
  ~Loop() {
    asio::post(io, [this] { q.reset(); });
    guard.reset();
    runner.join();
  }
  // Runs `f` on the loop and waits for it.
  template <class F>
  auto on_loop(F f) {
    return asio::post(io, asio::use_future(std::move(f))).get();
  }
};

// The sends of a test: each one's id or error, per queue in issue order.
struct Results {
  std::mutex m;
  std::condition_variable cv;
  std::size_t issued = 0, completed = 0;
  std::map<std::string, std::vector<std::string>> ids;  // "" = failed
  std::vector<std::string> errors;

  // Issues one send from the calling thread (it is dispatched to the loop).
  void send(AsyncQueue& q, const std::string& queue, const std::string& payload) {
    std::size_t slot;
    {
      std::lock_guard<std::mutex> lock(m);
      ++issued;
      slot = ids[queue].size();
      ids[queue].emplace_back();
    }
    q.async_send_to_dlq(queue, payload, failure("e"),
                        [this, queue, slot](std::exception_ptr e, std::string id) {
                          std::lock_guard<std::mutex> lock(m);
                          if (e) {
                            try {
                              std::rethrow_exception(e);
                            } catch (const std::exception& x) {
                              errors.emplace_back(x.what());
                            }
                          } else {
                            ids[queue][slot] = std::move(id);
                          }
                          ++completed;
                          cv.notify_all();
                        });
  }
  bool wait_all(std::chrono::seconds limit = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> lock(m);
    return cv.wait_for(lock, limit, [this] { return completed == issued; });
  }
};

// The queue's dead list on its master holds exactly the acknowledged sends, in issue order,
// with their payloads.
void check_stored(RawCluster& raw, const std::string& key, const std::vector<std::string>& ids,
                  const std::string& stem) {
  const auto items = raw.list(key);
  REQUIRE(items.size() == ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const dlq::Entry e = dlq::parse_entry(items[i]);
    REQUIRE(e.id == ids[i]);  // once each, in the order the sends were issued
    REQUIRE(e.payload == stem + std::to_string(i));
  }
}

}  // namespace

TEST_CASE("each master via one URL: send, size, peek, get; the blocking front end replays",
          "[asio][redis][cluster]") {
  RawCluster raw;
  const auto layout = dlq::test::unique_layout();
  Loop loop(dlq::test::cluster_url(), layout);
  AsyncQueue& q = *loop.q;
  std::vector<std::string> queues;
  for (const int port : raw.ports())
    queues.push_back(queue_on(raw, q.storage(), port, "each-"));
  std::map<std::string, std::vector<std::string>> ids;
  for (const auto& name : queues)
    for (int i = 0; i < 3; ++i)
      ids[name].push_back(
          q.async_send_to_dlq(name, name + "-" + std::to_string(i), failure("e"), asio::use_future)
              .get());
  CHECK(loop.on_loop([&] { return q.storage().cluster().clustered(); }));
  CHECK(loop.on_loop([&] { return q.storage().cluster().connections(); }) >= 3);
  for (std::size_t n = 0; n < queues.size(); ++n) {
    const std::string& name = queues[n];
    INFO(name);
    // Stored on the master that owns the queue's slot (read there directly).
    const auto items = raw.node(raw.ports()[n]).list(q.storage().key(name));
    REQUIRE(items.size() == 3);
    CHECK(dlq::parse_entry(items[0]).id == ids[name][0]);
    CHECK(q.async_size(name, asio::use_future).get() == 3);
    const auto page = q.async_peek(name, 1, 5, asio::use_future).get();
    REQUIRE(page.size() == 2);
    CHECK(page[0].id == ids[name][1]);
    CHECK(page[1].payload == name + "-2");
    const auto got = q.async_get(name, ids[name][2], asio::use_future).get();
    REQUIRE(got.has_value());
    CHECK(got->payload == name + "-2");
  }
  // The blocking front end on the cluster finds and replays what the async one wrote.
  dlq::DeadLetterQueue<dlq::RedisListStorage> blocking(
      dlq::RedisListStorage(dlq::test::cluster_url(), layout));
  for (const auto& name : queues) {
    INFO(name);
    CHECK(blocking.size(name) == 3);
    const auto entry = blocking.get(name, ids[name][1]);
    REQUIRE(entry.has_value());
    CHECK(entry->payload == name + "-1");
    CHECK(blocking.replay_all(name).replayed == 3);
    CHECK(q.async_size(name, asio::use_future).get() == 0);
  }
}

TEST_CASE("6000 sends in flight on three masters: none lost or doubled, queues in order",
          "[asio][redis][cluster]") {
  RawCluster raw;
  const auto layout = dlq::test::unique_layout();
  asio::io_context io;
  AsyncQueue q(io.get_executor(),
               dlq::asio::RedisListStorage(io.get_executor(), dlq::test::cluster_url(), layout));
  std::vector<std::string> queues;
  for (const int port : raw.ports()) {
    queues.push_back(queue_on(raw, q.storage(), port, "bulk-a-"));
    queues.push_back(queue_on(raw, q.storage(), port, "bulk-b-"));
  }
  constexpr std::size_t per_queue = 1000;
  std::map<std::string, std::vector<std::string>> ids;
  std::size_t completed = 0, failed = 0;
  for (std::size_t i = 0; i < per_queue; ++i) {
    for (const auto& name : queues) {
      ids[name].emplace_back();
      q.async_send_to_dlq(name, "job-" + std::to_string(i), failure("e"),
                          [&, name, i](std::exception_ptr e, std::string id) {
                            ++completed;
                            if (e) ++failed;
                            ids[name][i] = std::move(id);
                          });
    }
  }
  CHECK(completed == 0);  // never inside the initiating call
  io.run();
  CHECK(completed == per_queue * queues.size());
  CHECK(failed == 0);
  CHECK(q.storage().cluster().clustered());
  std::set<std::string> all;
  for (const auto& name : queues) {
    INFO(name);
    all.insert(ids[name].begin(), ids[name].end());
    check_stored(raw, q.storage().key(name), ids[name], "job-");
  }
  CHECK(all.size() == per_queue * queues.size());
}

TEST_CASE("a slot migrated during sends: ASK and MOVED followed, nothing lost or doubled",
          "[asio][redis][cluster]") {
  RawCluster raw;
  const auto layout = dlq::test::unique_layout();
  const auto& ports = raw.ports();
  Loop loop(dlq::test::cluster_url(), layout);
  AsyncQueue& q = *loop.q;
  const std::string moving = queue_on(raw, q.storage(), ports[1], "moving-");
  const std::string staying = queue_on(raw, q.storage(), ports[0], "staying-");
  const std::string key = q.storage().key(moving);
  const int slot = raw.keyslot(key);
  Results r;
  std::size_t next_moving = 0, next_staying = 0;
  const auto burst = [&](std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      r.send(q, moving, "m-" + std::to_string(next_moving++));
      if (i % 4 == 0) r.send(q, staying, "s-" + std::to_string(next_staying++));
    }
  };
  const auto stats = [&] { return loop.on_loop([&] { return q.storage().cluster().stats(); }); };

  burst(200);
  REQUIRE(r.wait_all());  // the map is known, the slot's master is ports[1]
  burst(300);             // in flight while the migration starts
  raw.begin_migration(slot, ports[1], ports[2]);
  burst(300);
  REQUIRE(r.wait_all());
  const auto before_ask = stats();
  burst(300);  // in flight while the keys move
  // The dead list MIGRATEd (with any other key of its slot: the hash tag is the queue name,
  // so a key of an earlier run on the same cluster under another prefix shares it).
  // (check_stored below reads the list on the new owner).
  CHECK(raw.move_keys(slot, ports[1], ports[2]) >= 1);
  burst(300);  // the key is on the target: ASK
  REQUIRE(r.wait_all());
  const auto after_ask = stats();
  CHECK(after_ask.ask > before_ask.ask);
  CHECK(after_ask.moved == before_ask.moved);
  burst(300);  // in flight while the slot changes owner
  raw.end_migration(slot, ports[2]);
  burst(300);  // the router's map still says ports[1]: MOVED
  REQUIRE(r.wait_all());
  const auto after_moved = stats();
  CHECK(after_moved.moved > after_ask.moved);
  CHECK(after_moved.refreshes > after_ask.refreshes);  // the map read again after MOVED
  burst(100);                                          // straight to the new owner
  REQUIRE(r.wait_all());
  const auto settled = stats();
  CHECK(settled.moved == after_moved.moved);

  CHECK(r.errors.empty());
  for (const auto& e : r.errors)
    UNSCOPED_INFO(e);
  CHECK(raw.owner(key) == ports[2]);
  check_stored(raw, key, r.ids[moving], "m-");
  check_stored(raw, q.storage().key(staying), r.ids[staying], "s-");
  std::set<std::string> distinct(r.ids[moving].begin(), r.ids[moving].end());
  CHECK(distinct.size() == next_moving);
  // The blocking front end finds them on the new owner.
  dlq::DeadLetterQueue<dlq::RedisListStorage> blocking(
      dlq::RedisListStorage(dlq::test::cluster_url(), layout));
  CHECK(blocking.size(moving) == next_moving);
  raw.migrate(slot, ports[2], ports[1]);  // the fixture's layout again
}

TEST_CASE("a frozen master: typed timeouts for its queue, other masters and timers go on",
          "[asio][redis][cluster][faults]") {
  using namespace std::chrono_literals;
  dlq::test::PrivateCluster cluster;
  RawCluster raw(cluster.ports());
  const auto& ports = cluster.ports();
  auto options = dlq::redis::parse_url(cluster.url());
  options.command_timeout = 300ms;
  options.connect_timeout = 1000ms;
  options.reconnect_attempts = 1;
  options.reconnect_backoff = 10ms;
  const auto layout = dlq::test::unique_layout();
  asio::io_context io;
  AsyncQueue q(io.get_executor(), dlq::asio::RedisListStorage(io.get_executor(), options, layout));
  const std::string frozen = queue_on(raw, q.storage(), ports[1], "frozen-");
  const std::string live = queue_on(raw, q.storage(), ports[2], "live-");
  int warm = 0;
  for (const auto& name : {frozen, live})
    q.async_send_to_dlq(name, "warm", failure("e"), [&](std::exception_ptr e, std::string) {
      CHECK_FALSE(e);
      ++warm;
    });
  io.run();
  io.restart();
  REQUIRE(warm == 2);  // both masters' connections are open

  cluster.freeze(ports[1]);
  const auto t0 = std::chrono::steady_clock::now();
  // A 10 ms ticker on the same loop, until every send has completed.
  asio::steady_timer ticker(io);
  int ticks = 0;
  auto max_gap = std::chrono::steady_clock::duration::zero();
  auto last = t0;
  bool stop = false;
  std::function<void()> tick = [&] {
    ticker.expires_after(10ms);
    ticker.async_wait([&](const std::error_code&) {
      const auto now = std::chrono::steady_clock::now();
      max_gap = std::max(max_gap, now - last);
      last = now;
      ++ticks;
      if (!stop) tick();
    });
  };
  tick();
  constexpr int n = 20;
  int frozen_done = 0, live_done = 0, timeouts = 0, unknown = 0, live_ok = 0;
  std::chrono::steady_clock::duration live_latest{}, frozen_first = std::chrono::hours(1);
  for (int i = 0; i < n; ++i) {
    q.async_send_to_dlq(
        frozen, "f-" + std::to_string(i), failure("e"), [&](std::exception_ptr e, std::string) {
          frozen_first = std::min(frozen_first, std::chrono::steady_clock::now() - t0);
          try {
            if (e) std::rethrow_exception(e);
          } catch (const dlq::timeout_error& x) {
            ++timeouts;
            if (x.outcome_unknown()) ++unknown;
          } catch (...) {
          }
          if (++frozen_done + live_done == 2 * n) stop = true;
        });
    q.async_send_to_dlq(live, "l-" + std::to_string(i), failure("e"),
                        [&](std::exception_ptr e, std::string) {
                          live_latest = std::chrono::steady_clock::now() - t0;
                          if (!e) ++live_ok;
                          if (frozen_done + ++live_done == 2 * n) stop = true;
                        });
  }
  io.run();
  io.restart();
  cluster.thaw(ports[1]);
  CHECK(live_ok == n);
  CHECK(timeouts == n);               // typed, each one
  CHECK(unknown == n);                // sent writes: outcome unknown, not re-sent
  CHECK(live_latest < frozen_first);  // the other master answered before the limit passed
  CHECK(frozen_first >= 290ms);
  CHECK(frozen_first < 2000ms);
  // The loop went on while the master was frozen: no gap of 150 ms between ticks, so at least
  // one tick per 150 ms of the wait (a fixed count, 20, failed at load 15 under TSan with
  // 17 ticks and no long gap: a starved process gets fewer 10 ms turns, not a blocked loop).
  CHECK(max_gap < 150ms);
  CHECK(ticks >= frozen_first / 150ms);
  // After SIGCONT the frozen master's queue works again (a new connection).
  bool again = false;
  q.async_send_to_dlq(frozen, "after", failure("e"),
                      [&](std::exception_ptr e, std::string) { again = !e; });
  io.run();
  CHECK(again);
  CHECK(raw.list(q.storage().key(live)).size() == n + 1);
}

TEST_CASE("order across a MOVED: a send issued meanwhile waits for the redirected ones",
          "[asio][redis][cluster]") {
  RawCluster raw;
  const auto layout = dlq::test::unique_layout();
  const auto& ports = raw.ports();
  asio::io_context io;
  AsyncQueue q(io.get_executor(),
               dlq::asio::RedisListStorage(io.get_executor(), dlq::test::cluster_url(), layout));
  const std::string moving = queue_on(raw, q.storage(), ports[1], "fence-moving-");
  const std::string other = queue_on(raw, q.storage(), ports[1], "fence-other-");
  const std::string key = q.storage().key(moving);
  const int slot = raw.keyslot(key);
  REQUIRE(slot != raw.keyslot(q.storage().key(other)));
  std::vector<std::string> errors;
  const auto note = [&](std::exception_ptr e, std::string) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      errors.emplace_back(x.what());
    }
  };
  q.async_send_to_dlq(moving, "warm", failure("e"), note);
  q.async_send_to_dlq(other, "warm", failure("e"), note);
  io.run();
  io.restart();
  raw.migrate(slot, ports[1], ports[2]);  // the router's map still says ports[1]
  const auto before = q.storage().cluster().stats();
  // On the old master's connection, in this order: m-0, o-0, m-1. m-0's MOVED is handled (and
  // m-0 re-sent to the new owner) before o-0 completes; o-0's handler issues m-2 while m-1's
  // MOVED is not handled yet: m-2 must wait for m-1.
  q.async_send_to_dlq(moving, "m-0", failure("e"), note);
  q.async_send_to_dlq(other, "o-0", failure("e"), [&](std::exception_ptr e, std::string id) {
    note(e, id);
    q.async_send_to_dlq(moving, "m-2", failure("e"), note);
  });
  q.async_send_to_dlq(moving, "m-1", failure("e"), note);
  io.run();
  CHECK(errors.empty());
  CHECK(q.storage().cluster().stats().moved >= before.moved + 2);
  const auto items = raw.list(key);
  std::vector<std::string> payloads;
  for (const auto& item : items)
    payloads.push_back(dlq::parse_entry(item).payload);
  CHECK(payloads == std::vector<std::string>{"warm", "m-0", "m-1", "m-2"});
  raw.migrate(slot, ports[2], ports[1]);  // the fixture's layout again
}

TEST_CASE("ASK and MOVED naming no host (unknown-endpoint): the answering node's host",
          "[asio][redis][cluster]") {
  // With cluster-preferred-endpoint-type unknown-endpoint a node answers "ASK <slot> :<port>"
  // and "MOVED <slot> :<port>": the empty host is the host the client asked (as the empty
  // host of CLUSTER SLOTS), not the local host — the master already connected is used.
  dlq::test::PrivateCluster cluster;
  RawCluster raw(cluster.ports());
  const auto& ports = cluster.ports();
  auto options = dlq::redis::parse_url(cluster.url());
  options.connect_timeout = std::chrono::milliseconds(1000);
  const auto layout = dlq::test::unique_layout();
  asio::io_context io;
  AsyncQueue q(io.get_executor(), dlq::asio::RedisListStorage(io.get_executor(), options, layout));
  std::vector<std::string> errors;
  const auto note = [&](std::exception_ptr e, std::string) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      errors.emplace_back(x.what());
    }
  };
  for (const int port : ports)  // the map known, a connection to each master
    q.async_send_to_dlq(queue_on(raw, q.storage(), port, "warm-"), "warm", failure("e"), note);
  io.run();
  io.restart();
  REQUIRE(errors.empty());
  REQUIRE(q.storage().cluster().connections() == 3);
  const std::string moving = queue_on(raw, q.storage(), ports[1], "endpoint-");
  const std::string key = q.storage().key(moving);
  const int slot = raw.keyslot(key);
  for (const int p : ports)
    raw.ok(p, {"CONFIG", "SET", "cluster-preferred-endpoint-type", "unknown-endpoint"});
  const auto before = q.storage().cluster().stats();
  raw.begin_migration(slot, ports[1], ports[2]);
  q.async_send_to_dlq(moving, "asked", failure("e"), note);  // ASK <slot> :<port>
  io.run();
  io.restart();
  CHECK(q.storage().cluster().stats().ask == before.ask + 1);
  raw.move_keys(slot, ports[1], ports[2]);
  raw.end_migration(slot, ports[2]);
  q.async_send_to_dlq(moving, "moved", failure("e"), note);  // MOVED <slot> :<port>
  io.run();
  CHECK(q.storage().cluster().stats().moved >= before.moved + 1);
  for (const auto& e : errors)
    UNSCOPED_INFO(e);
  CHECK(errors.empty());
  std::vector<std::string> payloads;
  for (const auto& item : raw.node(ports[2]).list(key))
    payloads.push_back(dlq::parse_entry(item).payload);
  CHECK(payloads == std::vector<std::string>{"asked", "moved"});
  CHECK(q.storage().cluster().connections() == 3);  // no connection to ":<port>"
}

TEST_CASE("MOVED to a master that cannot be reached: typed, once; the map read again after",
          "[asio][redis][cluster][faults]") {
  using namespace std::chrono_literals;
  dlq::test::PrivateCluster cluster;
  RawCluster raw(cluster.ports());
  const auto& ports = cluster.ports();
  const auto options = dlq::test::fault_options(cluster.url());
  const auto layout = dlq::test::unique_layout();
  asio::io_context io;
  AsyncQueue q(io.get_executor(), dlq::asio::RedisListStorage(io.get_executor(), options, layout));
  int warm = 0;
  for (const int port : ports)  // the map known, a connection to each master
    q.async_send_to_dlq(queue_on(raw, q.storage(), port, "warm-"), "warm", failure("e"),
                        [&](std::exception_ptr e, std::string) { warm += e ? 0 : 1; });
  io.run();
  io.restart();
  REQUIRE(warm == 3);
  const std::string moving = queue_on(raw, q.storage(), ports[1], "dead-");
  const std::string key = q.storage().key(moving);
  const int slot = raw.keyslot(key);
  raw.migrate(slot, ports[1], ports[2]);  // the router's map still says ports[1]
  cluster.kill9(ports[2]);
  dlq::test::wait_refused(ports[2]);
  // ports[1] answers MOVED to ports[2], which refuses connections.
  int calls = 0;
  std::exception_ptr error;
  q.async_send_to_dlq(moving, "lost", failure("e"), [&](std::exception_ptr e, std::string) {
    ++calls;
    error = e;
  });
  io.run();
  io.restart();
  CHECK(calls == 1);
  REQUIRE(error);
  try {
    std::rethrow_exception(error);
  } catch (const dlq::connection_error& e) {
    CHECK_FALSE(e.outcome_unknown());  // never sent
  }
  // The slot is given back to a live master (as a failover would): the router finds it.
  const std::string owner = raw.id(ports[1]);
  raw.ok(ports[1], {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", owner});
  raw.ok(ports[1], {"CLUSTER", "BUMPEPOCH"});
  raw.ok(ports[0], {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", owner});
  int failed = 0;
  bool stored = false;
  for (int attempt = 0; attempt < 3 && !stored; ++attempt) {
    q.async_send_to_dlq(moving, "after", failure("e"), [&](std::exception_ptr e, std::string) {
      if (e) {
        ++failed;
      } else {
        stored = true;
      }
    });
    io.run();
    io.restart();
  }
  CHECK(stored);
  CHECK(failed <= 1);
  CHECK(raw.node(ports[1]).list(key).size() == (stored ? 1U : 0U));
}

TEST_CASE("a map read after a connection failure from a node that knows no slot is not applied",
          "[asio][redis][cluster][faults]") {
  // The seed forgets the cluster (CLUSTER RESET HARD: as a node restarted without its
  // nodes.conf; it answers CLUSTER SLOTS with an empty map) and another master dies. A
  // connection failure to the dead master makes the router read the map again, from the seed
  // first: an empty map must not replace the one known — else every key, those of the live
  // master too, fails with CLUSTERDOWN from then on (a slot of no master reads the seed again).
  using namespace std::chrono_literals;
  dlq::test::PrivateCluster cluster;
  RawCluster raw(cluster.ports());
  const auto& ports = cluster.ports();
  const auto options = dlq::test::fault_options(cluster.url());  // the seed: ports[0]
  const auto layout = dlq::test::unique_layout();
  asio::io_context io;
  AsyncQueue q(io.get_executor(), dlq::asio::RedisListStorage(io.get_executor(), options, layout));
  std::vector<std::string> queues;
  int warm = 0;
  for (const int port : ports) {  // the map known, a connection to each master
    queues.push_back(queue_on(raw, q.storage(), port, "q-"));
    q.async_send_to_dlq(queues.back(), "warm", failure("e"),
                        [&](std::exception_ptr e, std::string) { warm += e ? 0 : 1; });
  }
  io.run();
  io.restart();
  REQUIRE(warm == 3);
  REQUIRE(q.storage().cluster().connections() == 3);
  const auto before = q.storage().cluster().stats();
  raw.ok(ports[0], {"FLUSHALL"});
  raw.ok(ports[0], {"CLUSTER", "RESET", "HARD"});
  cluster.kill9(ports[2]);
  dlq::test::wait_refused(ports[2]);
  bool dead = false;
  for (int i = 0; i < 200 && !dead; ++i) {
    q.async_send_to_dlq(queues[2], "lost", failure("e"),
                        [&](std::exception_ptr e, std::string) { dead = dead || e; });
    io.run();  // the send, and the map read its failure starts
    io.restart();
    if (!dead) std::this_thread::sleep_for(10ms);
  }
  REQUIRE(dead);
  // The seed's empty map passed by, the map read from the next source (ports[1]) instead.
  CHECK(q.storage().cluster().stats().refreshes > before.refreshes);
  // The live master ports[1] still serves its slots; the router must still send it there.
  std::string error;
  q.async_send_to_dlq(queues[1], "after", failure("e"), [&](std::exception_ptr e, std::string) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      error = x.what();
    }
  });
  io.run();
  INFO(error);
  CHECK(error.empty());
  CHECK(raw.node(ports[1]).list(q.storage().key(queues[1])).size() == 2);
}

TEST_CASE("a map of no slot read after CLUSTERDOWN is not applied",
          "[asio][redis][cluster][faults]") {
  // The seed forgets the cluster (CLUSTER RESET HARD: it answers CLUSTER SLOTS with an empty
  // map), then the cluster is down for a while (one slot unassigned with
  // cluster-require-full-coverage: every master answers CLUSTERDOWN). The router reads the map
  // again from the seed on CLUSTERDOWN: an empty map must not replace the one known — else,
  // once the cluster is healthy again, every key still fails with 'no master serves hash
  // slot' (route reads the same empty seed again). The async counterpart of the
  // test_redis_cluster_faults case.
  using namespace std::chrono_literals;
  dlq::test::PrivateCluster cluster;
  RawCluster raw(cluster.ports());
  const auto& ports = cluster.ports();
  const auto options = dlq::test::fault_options(cluster.url());  // the seed: ports[0]
  const auto layout = dlq::test::unique_layout();
  asio::io_context io;
  AsyncQueue q(io.get_executor(), dlq::asio::RedisListStorage(io.get_executor(), options, layout));
  std::vector<std::string> queues;
  int warm = 0;
  for (const int port : ports) {  // the map known, a connection to each master
    queues.push_back(queue_on(raw, q.storage(), port, "q-"));
    q.async_send_to_dlq(queues.back(), "warm", failure("e"),
                        [&](std::exception_ptr e, std::string) { warm += e ? 0 : 1; });
  }
  io.run();
  io.restart();
  REQUIRE(warm == 3);
  const auto state = [&](int port) {
    return raw.state_ok(port) ? std::string("ok") : std::string("fail");
  };
  const auto wait_state = [&](const std::string& want) {
    for (int i = 0; i < 1000; ++i) {
      if (state(ports[1]) == want && state(ports[2]) == want) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  };
  raw.ok(ports[0], {"FLUSHALL"});
  raw.ok(ports[0], {"CLUSTER", "RESET", "HARD"});
  // One slot of ports[2] (not that of the queue used below) unassigned on every node that
  // still knows the cluster: the cluster goes down.
  const std::string key = q.storage().key(queues[1]);
  const int slot = raw.keyslot(q.storage().key(queues[2]));
  REQUIRE(slot != raw.keyslot(key));
  const std::string owner_id = raw.id(ports[2]);
  raw.ok(ports[1], {"CLUSTER", "DELSLOTS", std::to_string(slot)});
  raw.ok(ports[2], {"CLUSTER", "DELSLOTS", std::to_string(slot)});
  REQUIRE(wait_state("fail"));
  // A send while the cluster is down: retried, then a typed error (or it went through); the
  // retries read the map from the seed.
  const auto message = [](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      return std::string(x.what());
    }
  };
  std::string down_error;
  q.async_send_to_dlq(queues[1], "down", failure("e"), [&](std::exception_ptr e, std::string) {
    if (e) down_error = message(e);
  });
  io.run();
  io.restart();
  INFO("while down: " << down_error);
  // The cluster healthy again.
  raw.ok(ports[2], {"CLUSTER", "ADDSLOTS", std::to_string(slot)});
  raw.ok(ports[1], {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", owner_id});
  REQUIRE(wait_state("ok"));
  const std::size_t before = raw.node(ports[1]).list(key).size();
  // The live master ports[1] serves its slots; the router must send it there.
  std::string error;
  q.async_send_to_dlq(queues[1], "after", failure("e"), [&](std::exception_ptr e, std::string) {
    if (e) error = message(e);
  });
  io.run();
  INFO("after: " << error);
  CHECK(error.empty());
  CHECK(raw.node(ports[1]).list(key).size() == before + 1);
}

TEST_CASE("slots kept on a reset seed that answers CLUSTERDOWN are read again from another node",
          "[asio][redis][cluster][faults]") {
  // The seed forgets the cluster (CLUSTER RESET HARD) and the others list its slots under a
  // master of no address (noaddr): the router keeps the seed as their owner. The cluster is
  // then repaired without the seed (its old id forgotten, its slots given to ports[1]). The
  // seed answers CLUSTERDOWN for those slots; reading the map again from the seed alone (an
  // empty map, never applied) would send them to the seed, and fail them, forever.
  using namespace std::chrono_literals;
  dlq::test::PrivateCluster cluster;
  RawCluster raw(cluster.ports());
  const auto& ports = cluster.ports();
  const auto options = dlq::test::fault_options(cluster.url());  // the seed: ports[0]
  const auto layout = dlq::test::unique_layout();
  asio::io_context io;
  AsyncQueue q(io.get_executor(), dlq::asio::RedisListStorage(io.get_executor(), options, layout));
  std::vector<std::string> queues;
  int warm = 0;
  for (const int port : ports) {  // the map known, a connection to each master
    queues.push_back(queue_on(raw, q.storage(), port, "q-"));
    q.async_send_to_dlq(queues.back(), "warm", failure("e"),
                        [&](std::exception_ptr e, std::string) { warm += e ? 0 : 1; });
  }
  io.run();
  io.restart();
  REQUIRE(warm == 3);
  const std::string key = q.storage().key(queues[0]);
  REQUIRE(raw.keyslot(key) <= 5460);  // redis_cluster.sh: the seed serves 0-5460
  const std::string seed_id = raw.id(ports[0]);
  raw.ok(ports[0], {"FLUSHALL"});
  raw.ok(ports[0], {"CLUSTER", "RESET", "HARD"});
  REQUIRE(dlq::test::wait_for([&] { return raw.lists_flag(ports[1], "noaddr"); }, 500));
  // The seed stays the known owner of its slots (the first map; since e713354 a map read now
  // keeps it too: ports[1] lists them under the master of no address). The cluster repaired:
  raw.ok(ports[1], {"CLUSTER", "FORGET", seed_id});
  raw.ok(ports[2], {"CLUSTER", "FORGET", seed_id});
  raw.ok(ports[1], {"CLUSTER", "ADDSLOTSRANGE", "0", "5460"});
  dlq::test::wait_for([&] { return raw.state_ok(ports[1]) && raw.state_ok(ports[2]); }, 1000);
  REQUIRE(raw.state_ok(ports[1]));
  REQUIRE(raw.state_ok(ports[2]));
  std::string error;
  q.async_send_to_dlq(queues[0], "after", failure("e"), [&](std::exception_ptr e, std::string) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      error = x.what();
    }
  });
  io.run();
  INFO(error);
  CHECK(error.empty());
  CHECK(raw.node(ports[1]).list(key).size() == 1);
}

}  // namespace test_asio_redis_cluster

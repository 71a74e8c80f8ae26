// The Redis Cluster routing decisions without a server (redis/detail/slot_map.hpp,
// redis/detail/cluster_fsm.hpp), shared by the blocking dlq::redis::Router and
// dlq::asio::RedisClusterRouter: key hashing, redirections and CLUSTER SLOTS read from text
// and from a reply tree of the test's own, whether a map is applied, which nodes a map is
// read from, and what a request does after each answer. Every fault case the live cluster
// tests (test_redis_cluster_faults, test_asio_redis_cluster) found is replayed here as the
// sequence of answers the router saw: maps of no slot from a reset seed, masters of no
// address, a reset seed answering CLUSTERDOWN, seeds that do not answer, a master that went
// down, one map read at a time and its waiters woken at its end. This target links no Redis
// client and no Asio.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dlq/redis/detail/cluster_fsm.hpp"
#include "dlq/redis/detail/slot_map.hpp"
#include "support/catch.hpp"

#if defined(HIREDIS_MAJOR) || defined(ASIO_VERSION)
#error "the cluster decision module must include neither hiredis nor Asio"
#endif

using dlq::redis::key_slot;
using dlq::redis::detail::ClusterSlots;
using dlq::redis::detail::MapRead;
using dlq::redis::detail::Next;
using dlq::redis::detail::parse_redirect;
using dlq::redis::detail::Redirect;
using dlq::redis::detail::Redirections;
using dlq::redis::detail::SlotMap;
using dlq::redis::detail::SlotRange;
using std::chrono::milliseconds;

namespace {

// A reply tree of the test's own: the parser reads any reply type through an access class.
struct Tree {
  enum Type { error, array, integer, text } type = array;
  long long number = 0;
  std::string str;
  std::vector<Tree> items;
};
struct TreeAccess {
  static bool is_error(const Tree& t) { return t.type == Tree::error; }
  static bool is_array(const Tree& t) { return t.type == Tree::array; }
  static bool is_integer(const Tree& t) { return t.type == Tree::integer; }
  static std::size_t size(const Tree& t) { return t.items.size(); }
  static const Tree& at(const Tree& t, std::size_t i) { return t.items[i]; }
  static long long integer(const Tree& t) { return t.number; }
  static std::string_view text(const Tree& t) { return t.str; }
};
Tree num(long long v) {
  return Tree{Tree::integer, v, {}, {}};
}
Tree str(std::string s) {
  return Tree{Tree::text, 0, std::move(s), {}};
}
Tree err(std::string s) {
  return Tree{Tree::error, 0, std::move(s), {}};
}
Tree arr(std::vector<Tree> items) {
  return Tree{Tree::array, 0, {}, std::move(items)};
}
// [start, end, [host, port, id], [replica host, port, id]]
Tree range(long long start, long long end, const std::string& host, long long port) {
  return arr({num(start), num(end), arr({str(host), num(port), str("id")}),
              arr({str("10.9.9.9"), num(7999), str("replica")})});
}
ClusterSlots parse(const Tree& t) {
  return dlq::redis::detail::parse_cluster_slots<TreeAccess>(t, "10.0.0.9");
}

// A CLUSTER SLOTS answer of these ranges.
ClusterSlots slots(std::vector<SlotRange> ranges) {
  ClusterSlots s;
  s.ranges = std::move(ranges);
  return s;
}
ClusterSlots no_slot() {
  return ClusterSlots{};
}  // a node that forgot the cluster
ClusterSlots refused(std::string text) {
  ClusterSlots s;
  s.kind = ClusterSlots::refused;
  s.error = std::move(text);
  return s;
}

// The test cluster: a (the seed, node 0), b (node 1), c (node 2), as redis_cluster.sh.
const SlotRange a_slots{0, 5460, "10.0.0.1", 7000};
const SlotRange b_slots{5461, 10922, "10.0.0.2", 7001};
const SlotRange c_slots{10923, 16383, "10.0.0.3", 7002};
constexpr int a = 0, b = 1, c = 2;

// A map whose three masters are known (a, b, c: nodes 0, 1, 2).
void know_three(SlotMap& map) {
  REQUIRE(map.apply(slots({a_slots, b_slots, c_slots})) == SlotMap::Applied::yes);
  REQUIRE(map.find("10.0.0.2", 7001) == b);
  REQUIRE(map.find("10.0.0.3", 7002) == c);
}

// The nodes a read asks when none answers.
std::vector<int> sources(MapRead read) {
  std::vector<int> out;
  for (int n = read.node(); n >= 0; n = read.on_failure())
    out.push_back(n);
  return out;
}

Redirect redirect(const std::string& text, const std::string& answered_by = "10.0.0.1") {
  return parse_redirect(text, answered_by);
}

}  // namespace

TEST_CASE("key_slot hashes the hash tag, else the whole key (CRC16-XMODEM)",
          "[redis][cluster][fsm]") {
  CHECK(dlq::redis::crc16("123456789") == 0x31C3);  // the XMODEM check value
  CHECK(key_slot("foo") == 12182);                  // CLUSTER KEYSLOT foo
  CHECK(key_slot("{user1000}.following") == key_slot("user1000"));
  CHECK(key_slot("{user1000}.followers") == key_slot("user1000"));
  CHECK(key_slot("foo{}{bar}") == dlq::redis::crc16("foo{}{bar}") % 16384);  // empty tag
  CHECK(key_slot("foo{{bar}}zap") == key_slot("{bar"));
  CHECK(key_slot("foo{bar}{zap}") == key_slot("bar"));
}

TEST_CASE("MOVED and ASK name a slot and a node; no host means the node that answered",
          "[redis][cluster][fsm]") {
  const Redirect moved = redirect("MOVED 3999 127.0.0.1:6381");
  CHECK(moved.kind == Redirect::moved);
  CHECK(moved.slot == 3999);
  CHECK(moved.host == "127.0.0.1");
  CHECK(moved.port == 6381);
  const Redirect ask = redirect("ASK 16383 [::1]:7000");
  CHECK(ask.kind == Redirect::ask);
  CHECK(ask.slot == 16383);
  CHECK(ask.host == "::1");
  CHECK(ask.port == 7000);
  // cluster-preferred-endpoint-type unknown-endpoint: ":<port>" and "?:<port>".
  CHECK(redirect("MOVED 1 :7002", "10.0.0.7").host == "10.0.0.7");
  CHECK(redirect("ASK 1 ?:7002", "10.0.0.7").host == "10.0.0.7");
  CHECK(redirect("TRYAGAIN Multiple keys request during rehashing of slot").kind ==
        Redirect::tryagain);
  CHECK(redirect("CLUSTERDOWN The cluster is down").kind == Redirect::clusterdown);
  CHECK(redirect("CLUSTERDOWN Hash slot not served").kind == Redirect::clusterdown);
}

TEST_CASE("a redirection of a slot or port out of range, or malformed, is no redirection",
          "[redis][cluster][fsm]") {
  for (const char* text :
       {"MOVED 16384 10.0.0.2:7001", "MOVED -1 10.0.0.2:7001", "MOVED 1 10.0.0.2:0",
        "ASK 1 10.0.0.2:65536", "ASK 1 10.0.0.2:-7", "MOVED 1 10.0.0.2", "MOVED 1",
        "MOVED x 10.0.0.2:7001", "ASK 1 10.0.0.2:12ab", "MOVED 1x 10.0.0.2:7001",
        "ERR MOVED 1 10.0.0.2:7001", "CLUSTERDOWNX", "WRONGTYPE Operation against a key", ""}) {
    INFO(text);
    CHECK(redirect(text).kind == Redirect::none);
  }
}

TEST_CASE("CLUSTER SLOTS is read from any reply tree: masters, no address, the asked node",
          "[redis][cluster][fsm]") {
  const ClusterSlots read =
      parse(arr({range(0, 5460, "", 0), range(5461, 10922, "10.0.0.2", 7001),
                 range(10923, 16000, "", 7002), range(16001, 16383, "?", 7003)}));
  REQUIRE(read.kind == ClusterSlots::map);
  REQUIRE(read.ranges.size() == 4);
  CHECK(read.ranges[0].port == 0);  // noaddr: no address, not the asked node's either
  CHECK(read.ranges[0].host.empty());
  CHECK(read.ranges[1].host == "10.0.0.2");
  CHECK(read.ranges[1].start == 5461);
  CHECK(read.ranges[1].end == 10922);
  CHECK(read.ranges[2].host == "10.0.0.9");         // an empty host with a port: the node asked
  CHECK(read.ranges[3].host == "10.0.0.9");         // "?": likewise
  CHECK(parse(arr({})).kind == ClusterSlots::map);  // a node that knows no cluster
  CHECK(parse(arr({})).ranges.empty());
  const ClusterSlots disabled = parse(err("ERR This instance has cluster support disabled"));
  CHECK(disabled.kind == ClusterSlots::refused);
  CHECK(disabled.error == "ERR This instance has cluster support disabled");
}

TEST_CASE("CLUSTER SLOTS of a slot or port out of range, or of another form, is unreadable",
          "[redis][cluster][fsm]") {
  const std::vector<Tree> bad{
      num(1),
      arr({num(1)}),
      arr({range(0, 16383, "10.0.0.2", -1)}),
      arr({range(0, 16383, "10.0.0.2", 65536)}),
      arr({range(0, 16384, "10.0.0.2", 7001)}),
      arr({range(-1, 10, "10.0.0.2", 7001)}),
      arr({range(10, 9, "10.0.0.2", 7001)}),
      arr({arr({num(0), num(1)})}),
      arr({arr({num(0), str("1"), arr({str("h"), num(1)})})}),
      arr({arr({num(0), num(1), arr({str("h")})})}),
      arr({arr({num(0), num(1), arr({str("h"), str("7001")})})}),
      arr({range(0, 10, "10.0.0.2", 7001), num(3)}),
  };
  for (std::size_t i = 0; i < bad.size(); ++i) {
    INFO("case " << i);
    const ClusterSlots read = parse(bad[i]);
    CHECK(read.kind == ClusterSlots::unreadable);
    CHECK_FALSE(read.error.empty());
    CHECK(read.ranges.empty());
  }
}

TEST_CASE("the first answer decides: an error reply means plain, and plain reads no map",
          "[redis][cluster][fsm]") {
  SlotMap map("10.0.0.1", 7000);
  CHECK(map.mode() == SlotMap::Mode::unknown);
  CHECK(map.apply(refused("ERR This instance has cluster support disabled")) ==
        SlotMap::Applied::plain);
  CHECK(map.mode() == SlotMap::Mode::plain);
  CHECK(map.apply(slots({a_slots})) == SlotMap::Applied::ignored);
  CHECK(map.owner(0) == -1);
  CHECK(MapRead::elsewhere(map, -1).node() == -1);
  CHECK(MapRead::from(map, 0).node() == -1);
  CHECK(Redirections::on_failure(map, 0).read.node() == -1);
  CHECK(map.stats().refreshes == 0);
}

TEST_CASE("a first map of no slot is applied; once a map is known one of no slot never is",
          "[redis][cluster][fsm]") {
  // 70c4a3f: a reset node's empty map applied after CLUSTERDOWN failed every key from then on.
  SlotMap map("10.0.0.1", 7000);
  CHECK(map.apply(no_slot()) == SlotMap::Applied::yes);  // a cluster, of no slot yet
  CHECK(map.mode() == SlotMap::Mode::cluster);
  CHECK(map.owner(0) == -1);
  know_three(map);
  CHECK(map.apply(no_slot()) == SlotMap::Applied::no_slot);
  CHECK(map.owner(0) == a);
  CHECK(map.owner(5461) == b);
  CHECK(map.owner(16383) == c);
  CHECK(map.stats().refreshes == 2);  // applied maps only
}

TEST_CASE("an unreadable answer or an error reply leaves the known map as it is",
          "[redis][cluster][fsm]") {
  SlotMap map("10.0.0.1", 7000);
  know_three(map);
  CHECK(map.apply(parse(num(1))) == SlotMap::Applied::unreadable);
  CHECK(map.apply(refused("LOADING Redis is loading the dataset in memory")) ==
        SlotMap::Applied::refused);
  CHECK(map.mode() == SlotMap::Mode::cluster);
  CHECK(map.owner(100) == a);
  CHECK(map.owner(10923) == c);
}

TEST_CASE("a master of no address keeps its slots' known owner; others are applied",
          "[redis][cluster][fsm]") {
  // e713354 / f45159b: after the seed's CLUSTER RESET HARD another master listed its slots
  // under ["", 0]; such a map was refused whole and a stale one kept.
  SlotMap map("10.0.0.1", 7000);
  // Before any map, such slots have no master; slots no range names have none.
  CHECK(map.apply(slots({{0, 100, "", 0}, {200, 300, "10.0.0.2", 7001}})) == SlotMap::Applied::yes);
  CHECK(map.owner(0) == -1);
  CHECK(map.owner(150) == -1);
  CHECK(map.owner(200) == 1);
  know_three(map);
  // a lost its address; c's slots went to d (a failover): both in one map.
  CHECK(map.apply(slots({{0, 5460, "", 0}, b_slots, {10923, 16383, "10.0.0.4", 7003}})) ==
        SlotMap::Applied::yes);
  CHECK(map.owner(0) == a);  // kept
  CHECK(map.owner(5460) == a);
  CHECK(map.owner(5461) == b);
  CHECK(map.owner(10923) == map.find("10.0.0.4", 7003));
  CHECK(map.find("", 0) == -1);  // no node made of the empty address
  CHECK(map.size() == 4);
}

TEST_CASE("ranges over the same slots: the last one wins", "[redis][cluster][fsm]") {
  SlotMap map("10.0.0.1", 7000);
  CHECK(map.apply(slots({{0, 100, "10.0.0.2", 7001}, {50, 60, "10.0.0.3", 7002}})) ==
        SlotMap::Applied::yes);
  CHECK(map.owner(49) == 1);
  CHECK(map.owner(50) == 2);
  CHECK(map.owner(60) == 2);
  CHECK(map.owner(61) == 1);
  CHECK(map.owner(101) == -1);
  CHECK(map.masters() == std::vector<int>{1, 2});
}

TEST_CASE("a map read elsewhere asks the seed, then masters in slot order, never the failed one",
          "[redis][cluster][fsm]") {
  SlotMap map("10.0.0.1", 7000);
  know_three(map);
  CHECK(sources(MapRead::elsewhere(map, -1)) == std::vector<int>{a, b, c});
  CHECK(sources(MapRead::elsewhere(map, b)) == std::vector<int>{a, c});
  CHECK(sources(MapRead::elsewhere(map, a)) == std::vector<int>{b, c});  // the seed answered
  // At most three nodes, whatever the cluster's size.
  CHECK(map.apply(slots({{0, 99, "10.0.0.5", 7005},
                         {100, 199, "10.0.0.6", 7006},
                         {200, 299, "10.0.0.7", 7007},
                         {300, 16383, "10.0.0.8", 7008}})) == SlotMap::Applied::yes);
  const int first = map.find("10.0.0.5", 7005);
  const int second = map.find("10.0.0.6", 7006);
  const int third = map.find("10.0.0.7", 7007);
  CHECK(sources(MapRead::elsewhere(map, -1)) == std::vector<int>{a, first, second});
  CHECK(sources(MapRead::elsewhere(map, first)) == std::vector<int>{a, second, third});
  CHECK(sources(MapRead::elsewhere(map, a)) == std::vector<int>{first, second, third});
  // Before any map: the seed alone.
  SlotMap fresh("10.0.0.1", 7000);
  CHECK(sources(MapRead::elsewhere(fresh, -1)) == std::vector<int>{a});
}

TEST_CASE("a node of no answer, an error, an unreadable map or none: the next node is asked",
          "[redis][cluster][fsm]") {
  SlotMap map("10.0.0.1", 7000);
  know_three(map);
  MapRead read = MapRead::elsewhere(map, -1);
  CHECK(read.node() == a);
  CHECK(read.on_answer(no_slot()) == b);  // a reset seed: passed by
  CHECK(read.on_answer(refused("LOADING Redis is loading")) == c);
  CHECK(read.on_answer(parse(num(7))) == -1);  // no node left: the map as it is
  CHECK_FALSE(read.applied());
  CHECK(map.owner(0) == a);
  CHECK_FALSE(map.reading());
  MapRead again = MapRead::elsewhere(map, -1);
  CHECK(again.on_failure() == b);                                       // the seed does not answer
  CHECK(again.on_answer(slots({{0, 16383, "10.0.0.2", 7001}})) == -1);  // applied: over
  CHECK(again.applied());
  CHECK(map.owner(0) == b);
  CHECK_FALSE(map.reading());
}

TEST_CASE("one map read at a time: another finds nothing to do until the first is over",
          "[redis][cluster][fsm]") {
  SlotMap map("10.0.0.1", 7000);
  know_three(map);
  MapRead first = MapRead::elsewhere(map, -1);
  REQUIRE(first.node() == a);
  CHECK(map.reading());
  CHECK(MapRead::elsewhere(map, b).node() == -1);
  CHECK(MapRead::from(map, c).node() == -1);
  // A MOVED meanwhile is still followed, without a read of its own.
  Redirections route;
  const Next moved = route.on_answer(map, redirect("MOVED 100 10.0.0.2:7001"), a);
  CHECK(moved.kind == Next::resend);
  CHECK(moved.node == b);
  CHECK(moved.read.node() == -1);
  CHECK(map.owner(100) == b);
  // Moving a read keeps the gate; destroying an unfinished one frees it.
  MapRead moved_read = std::move(first);
  CHECK(map.reading());
  CHECK(first.node() == -1);  // NOLINT(bugprone-use-after-move): moved-from reads nothing
  { const MapRead dropped = std::move(moved_read); }
  CHECK_FALSE(map.reading());
  MapRead next = MapRead::elsewhere(map, -1);
  CHECK(next.node() == a);
  CHECK(next.on_answer(slots({a_slots, b_slots, c_slots})) == -1);
  CHECK_FALSE(map.reading());
  CHECK(MapRead::from(map, c).node() == c);
  // A read may end after its map (the asynchronous router's reads live in callbacks).
  auto gone = std::make_unique<SlotMap>("10.0.0.1", 7000);
  MapRead late = MapRead::elsewhere(*gone, -1);
  CHECK(late.node() == a);
  gone.reset();
}

// How long a thread waiting for the map read under way (SlotMap::wait_read) takes to wake
// once `end` has ended that read, in ms, against a thread woken by a plain notified
// std::condition_variable in the same round: the medians of 40 rounds. The read ends 2 ms
// after the waiter started, so that the waiter is blocked by then; it must not wake before.
struct WakeMs {
  double map = 0;        // the median wake of SlotMap::wait_read
  double reference = 0;  // the median wake of a notified condition variable, same rounds
};

template <class End>
WakeMs median_wake_ms(End end) {
  using clock = std::chrono::steady_clock;
  // Starts `wait` on a thread, ends its wait with `wake` 2 ms later: ms from `wake` to awake.
  const auto time_wake = [](auto wait, auto wake) {
    std::atomic<bool> started{false};
    std::atomic<bool> woken{false};
    clock::time_point woke;
    std::thread waiter([&] {
      started = true;
      wait();
      woke = clock::now();
      woken = true;
    });
    while (!started)
      std::this_thread::yield();
    std::this_thread::sleep_for(milliseconds(2));
    CHECK_FALSE(woken.load());  // the wait is under way: the waiter waits
    const clock::time_point ended = clock::now();
    wake();
    waiter.join();
    return std::chrono::duration<double, std::milli>(woke - ended).count();
  };
  std::vector<double> map_wakes;
  std::vector<double> reference_wakes;
  for (int round = 0; round < 40; ++round) {
    SlotMap map("10.0.0.1", 7000);
    know_three(map);
    MapRead read = MapRead::elsewhere(map, -1);
    REQUIRE(read.node() == a);
    map_wakes.push_back(time_wake([&] { map.wait_read(); }, [&] { end(read); }));
    CHECK_FALSE(map.reading());
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    reference_wakes.push_back(time_wake(
        [&] {
          std::unique_lock<std::mutex> lock(m);
          cv.wait(lock, [&] { return done; });
        },
        [&] {
          {
            const std::lock_guard<std::mutex> lock(m);
            done = true;
          }
          cv.notify_all();
        }));
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const WakeMs w{median(map_wakes), median(reference_wakes)};
  std::printf("wait_read woke after %.3f ms (median), a notified condition variable %.3f ms\n",
              w.map, w.reference);
  return w;
}

// A waiter woken by its notification wakes about as late as the reference, whatever the
// machine's load; a polling one (every 10 ms) ~5 ms later on the median. (An absolute bound,
// < 3 ms, failed at load 10 under ASan: 3.9 ms, the reference as slow.)
void check_woken_at_once(const WakeMs& w) {
  INFO("wait_read " << w.map << " ms, reference " << w.reference << " ms");
  CHECK(w.map < w.reference + 2.0);
}

TEST_CASE("every end of a map read wakes its waiters at once, a failed read's too",
          "[redis][cluster][fsm]") {
  SECTION("a map applied") {
    check_woken_at_once(median_wake_ms([](MapRead& r) {
      REQUIRE(r.on_answer(slots({a_slots, b_slots, c_slots})) == -1);
    }));
  }
  SECTION("no node answered: the read failed") {
    check_woken_at_once(median_wake_ms([](MapRead& r) {
      REQUIRE(r.on_failure() == b);
      REQUIRE(r.on_failure() == c);
      REQUIRE(r.on_failure() == -1);
    }));
  }
  SECTION("the read abandoned (destroyed unfinished, as when an exception unwinds)") {
    check_woken_at_once(median_wake_ms([](MapRead& r) { r = MapRead(); }));
  }
  SECTION("no read under way: wait_read returns at once") {
    SlotMap map("10.0.0.1", 7000);
    know_three(map);
    map.wait_read();
    CHECK_FALSE(map.reading());
  }
}

TEST_CASE("MOVED: the slot's master at once, the map read from it alone, the request re-sent",
          "[redis][cluster][fsm]") {
  SlotMap map("10.0.0.1", 7000);
  know_three(map);
  Redirections route;
  Next next = route.on_answer(map, redirect("MOVED 100 10.0.0.3:7002"), a);
  CHECK(next.kind == Next::resend);
  CHECK(next.node == c);
  CHECK_FALSE(next.asking);
  CHECK(next.delay == milliseconds(0));
  CHECK(map.owner(100) == c);
  CHECK(map.owner(101) == a);
  CHECK(map.stats().moved == 1);
  REQUIRE(next.read.node() == c);
  CHECK(next.read.on_failure() == -1);  // the named node alone: its failure ends the read
  CHECK_FALSE(map.reading());
  // A new node named by MOVED is added and routed to.
  next = route.on_answer(map, redirect("MOVED 100 10.0.0.4:7003"), c);
  CHECK(next.node == map.find("10.0.0.4", 7003));
  CHECK(map.owner(100) == next.node);
  for (int i = 3; i <= 5; ++i)
    CHECK(route.on_answer(map, redirect("MOVED 100 10.0.0.2:7001"), b).kind == Next::resend);
  next = route.on_answer(map, redirect("MOVED 100 10.0.0.2:7001"), b);
  CHECK(next.kind == Next::give_up);
  CHECK(next.why.find("still redirected after 5 MOVED answers") != std::string::npos);
  CHECK(next.why.find("nothing was executed") != std::string::npos);
  CHECK(map.stats().moved == 5);
}

TEST_CASE("ASK: re-sent once to the named node after ASKING; an ASK from there gives up",
          "[redis][cluster][fsm]") {
  SlotMap map("10.0.0.1", 7000);
  know_three(map);
  Redirections route;
  CHECK_FALSE(route.asking());
  Next next = route.on_answer(map, redirect("ASK 100 10.0.0.2:7001"), a);
  CHECK(next.kind == Next::resend);
  CHECK(next.node == b);
  CHECK(next.asking);
  CHECK(route.asking());
  CHECK(next.read.node() == -1);  // the map is unchanged, not read
  CHECK(map.owner(100) == a);
  CHECK(map.stats().ask == 1);
  next = route.on_answer(map, redirect("ASK 100 10.0.0.3:7002"), b);
  CHECK(next.kind == Next::give_up);
  CHECK(next.why.find("the node named by ASK redirected again") != std::string::npos);
  // After a MOVED (or a retry) the request may be asked again.
  Redirections other;
  CHECK(other.on_answer(map, redirect("ASK 100 10.0.0.2:7001"), a).asking);
  CHECK_FALSE(other.on_answer(map, redirect("MOVED 100 10.0.0.2:7001"), b).asking);
  CHECK_FALSE(other.asking());
  CHECK(other.on_answer(map, redirect("ASK 100 10.0.0.3:7002"), b).kind == Next::resend);
  CHECK(other.on_answer(map, redirect("TRYAGAIN Multiple keys"), c).kind == Next::resend);
  CHECK_FALSE(other.asking());
}

TEST_CASE("TRYAGAIN and CLUSTERDOWN back off 10 ms doubling to 200 ms, ten times, then give up",
          "[redis][cluster][fsm]") {
  SlotMap map("10.0.0.1", 7000);
  know_three(map);
  Redirections route;
  std::vector<long long> delays;
  for (int i = 0; i < 10; ++i) {
    const Next next = route.on_answer(map, redirect("TRYAGAIN Multiple keys"), b);
    REQUIRE(next.kind == Next::resend);
    CHECK(next.node == -1);  // the slot's master once the delay has passed
    CHECK_FALSE(next.asking);
    CHECK(next.read.node() == -1);  // TRYAGAIN: a migration under way; the map is right
    delays.push_back(next.delay.count());
  }
  CHECK(delays == std::vector<long long>{10, 20, 40, 80, 160, 200, 200, 200, 200, 200});
  const Next last = route.on_answer(map, redirect("CLUSTERDOWN The cluster is down"), b);
  CHECK(last.kind == Next::give_up);
  CHECK(last.why.find("still refused after 10 retries") != std::string::npos);
  CHECK(map.stats().retries == 10);
}

TEST_CASE("a reset seed kept as its slots' owner answers CLUSTERDOWN: read from another node",
          "[redis][cluster][fsm]") {
  // c8bc0e6 / 4916bbc: the seed, CLUSTER RESET HARD, stays the known owner of 0-5460 (the
  // others list them under a master of no address); the cluster is repaired without it. Its
  // CLUSTERDOWN must make the map be read from another node, never from the seed itself.
  SlotMap map("10.0.0.1", 7000);
  know_three(map);
  REQUIRE(map.apply(slots({{0, 5460, "", 0}, b_slots, c_slots})) == SlotMap::Applied::yes);
  REQUIRE(map.owner(100) == a);
  Redirections route;
  Next next = route.on_answer(map, redirect("CLUSTERDOWN Hash slot not served"), a);
  REQUIRE(next.kind == Next::resend);
  CHECK(next.node == -1);
  REQUIRE(next.read.node() == b);  // not the seed, which answered
  CHECK(next.read.on_answer(slots({{0, 10922, "10.0.0.2", 7001}, c_slots})) == -1);
  CHECK(map.owner(100) == b);  // the re-send goes to b
  CHECK_FALSE(map.reading());
}

TEST_CASE("CLUSTERDOWN with the seed reset: its map of no slot is passed by, the next applied",
          "[redis][cluster][fsm]") {
  // b5cbcca / 83a14f8 / 70c4a3f: the seed reset (empty CLUSTER SLOTS), the cluster down (one
  // slot of c unassigned). The seed's empty map must not replace the one known.
  SlotMap map("10.0.0.1", 7000);
  know_three(map);
  Redirections route;
  Next next = route.on_answer(map, redirect("CLUSTERDOWN The cluster is down"), b);
  REQUIRE(next.read.node() == a);
  CHECK(next.read.on_answer(no_slot()) == c);  // not b, which answered
  CHECK(next.read.on_answer(slots(
            {b_slots, {10923, 16000, "10.0.0.3", 7002}, {16002, 16383, "10.0.0.3", 7002}})) == -1);
  CHECK(next.read.applied());
  CHECK(map.owner(16001) == -1);  // unassigned: no master
  CHECK(map.owner(5461) == b);    // b's queues still go to b
  CHECK(map.owner(0) == -1);      // the map read names no master for the seed's slots
}

TEST_CASE("a CLUSTERDOWN re-read whose seed does not answer asks another node",
          "[redis][cluster][fsm]") {
  // The asynchronous router stopped at a seed that did not answer (the last session's
  // note); one MapRead for both routers asks the next node.
  SlotMap map("10.0.0.1", 7000);
  know_three(map);
  Redirections route;
  Next next = route.on_answer(map, redirect("CLUSTERDOWN The cluster is down"), b);
  REQUIRE(next.read.node() == a);
  CHECK(next.read.on_failure() == c);
  CHECK(next.read.on_answer(slots({{0, 10922, "10.0.0.3", 7002}, c_slots})) == -1);
  CHECK(map.owner(100) == c);
}

TEST_CASE("a master that went down: its failure reads the map elsewhere, finding the new owner",
          "[redis][cluster][fsm]") {
  // 'MOVED to a master that cannot be reached': the slot moved to c, c killed, the slot
  // given back to b. c answers nothing; its failure must make the map be read again.
  SlotMap map("10.0.0.1", 7000);
  know_three(map);
  Redirections route;
  Next next = route.on_answer(map, redirect("MOVED 6000 10.0.0.3:7002"), b);
  REQUIRE(next.node == c);
  CHECK(map.owner(6000) == c);
  CHECK(next.read.on_failure() == -1);             // c does not answer the read either
  Next failed = Redirections::on_failure(map, c);  // nor the re-send: never re-sent
  CHECK(failed.kind == Next::give_up);
  CHECK(failed.why.empty());  // the router's own error stands
  REQUIRE(failed.read.node() == a);
  CHECK(failed.read.on_answer(slots({a_slots, {5461, 10922, "10.0.0.2", 7001}})) == -1);
  CHECK(sources(Redirections::on_failure(map, c).read) == std::vector<int>{a, b});
  CHECK(map.owner(6000) == b);
}

TEST_CASE("a connection failure with the seed reset: its map of no slot is passed by",
          "[redis][cluster][fsm]") {
  // 8f62e02 / 7402928: the seed reset, c killed; the failure's read must not apply the seed's
  // empty map (every key, b's too, then failed) but ask b.
  SlotMap map("10.0.0.1", 7000);
  know_three(map);
  MapRead read = Redirections::on_failure(map, c).read;
  REQUIRE(read.node() == a);
  CHECK(read.on_answer(no_slot()) == b);
  CHECK(read.on_answer(slots({{0, 5460, "", 0}, b_slots, c_slots})) == -1);
  CHECK(read.applied());
  CHECK(map.owner(5461) == b);
  CHECK(map.owner(0) == a);  // noaddr: kept
}

TEST_CASE("a read of no failed node (masters(), a slot of no master) passes an empty seed by",
          "[redis][cluster][fsm]") {
  // The blocking Router::masters() stopped at the seed's empty map (the last session's note).
  SlotMap map("10.0.0.1", 7000);
  know_three(map);
  MapRead read = MapRead::elsewhere(map, -1);
  CHECK(read.node() == a);
  CHECK(read.on_answer(no_slot()) == b);
  CHECK(read.on_answer(slots({{0, 10922, "10.0.0.2", 7001}, c_slots})) == -1);
  CHECK(map.masters() == std::vector<int>{b, c});
}

TEST_CASE("before the mode is known a failure reads nothing; a MOVED is followed, not kept",
          "[redis][cluster][fsm]") {
  SlotMap map("10.0.0.1", 7000);
  CHECK(Redirections::on_failure(map, a).read.node() == -1);
  Redirections route;
  Next next = route.on_answer(map, redirect("MOVED 100 10.0.0.2:7001"), a);
  CHECK(next.kind == Next::resend);
  CHECK(next.node == 1);
  CHECK(map.owner(100) == -1);   // no map yet: the request alone follows it
  CHECK(next.read.node() == 1);  // the map read from there decides the mode
  CHECK(next.read.on_answer(slots({{0, 16383, "10.0.0.2", 7001}})) == -1);
  CHECK(map.mode() == SlotMap::Mode::cluster);
  CHECK(map.owner(100) == 1);
}

TEST_CASE("whatever the answers, a request ends within 32 sends", "[redis][cluster][fsm]") {
  const std::vector<std::string> answers{"MOVED 7 10.0.0.2:7001", "ASK 7 10.0.0.3:7002",
                                         "TRYAGAIN x", "CLUSTERDOWN x"};
  std::mt19937 random(20240611);
  std::uniform_int_distribution<std::size_t> pick(0, answers.size() - 1);
  int longest = 0;
  SlotMap shared("10.0.0.1", 7000);
  know_three(shared);
  for (int run = 0; run < 2000; ++run) {
    SlotMap& map = shared;  // each request's way is its own (Redirections)
    Redirections route;
    int sends = 1;
    for (;;) {
      const Next next = route.on_answer(map, redirect(answers[pick(random)]), b);
      if (next.kind != Next::resend) break;
      ++sends;
      REQUIRE(sends <= 32);
    }
    longest = std::max(longest, sends);
  }
  CHECK(longest > 16);  // the sequences reached deep (the bound is not vacuous)
  // The longest: an ASK before each of the 5 MOVED and 10 retries, an ASK, the 11th retry.
  SlotMap map("10.0.0.1", 7000);
  know_three(map);
  Redirections route;
  int sends = 1;
  for (int step = 0;; ++step) {
    const Next asked = route.on_answer(map, redirect(answers[1]), b);
    if (asked.kind != Next::resend) break;
    ++sends;
    const Next next = route.on_answer(map, redirect(answers[step < 5 ? 0 : 2]), b);
    if (next.kind != Next::resend) break;
    ++sends;
  }
  CHECK(sends == 32);
}

// CLUSTER SLOTS read from hiredis replies (the blocking router's access to the parser of
// redis/detail/slot_map.hpp), without a server: a master whose address the answering node
// does not know. Redis lists such a master (flag noaddr: a node that was CLUSTER RESET or
// restarted and is being met again) with host "" and port 0. That does not make the whole
// map unreadable: its slots keep the owner known so far, the other ranges are applied. Seen
// on a real cluster: after the seed's CLUSTER RESET HARD another master listed the seed's
// slots so, and the map read after a connection failure was refused whole
// (test_asio_redis_cluster, "a map read after a connection failure from a node that knows
// no slot is not applied", failed 3 runs of 12 under load). The decisions built on the
// map: test_cluster_fsm.cpp.
#include <hiredis/hiredis.h>

#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "dlq/redis/cluster.hpp"
#include "support/catch.hpp"

namespace {

// Builds hiredis replies by hand (the parser only reads them).
class Replies {
 public:
  redisReply* integer(long long v) {
    redisReply& r = make(REDIS_REPLY_INTEGER);
    r.integer = v;
    return &r;
  }
  redisReply* error(const std::string& s) {
    redisReply* r = text(s);
    r->type = REDIS_REPLY_ERROR;
    return r;
  }
  redisReply* text(const std::string& s) {
    texts_.push_back(s);
    redisReply& r = make(REDIS_REPLY_STRING);
    r.str = texts_.back().data();
    r.len = texts_.back().size();
    return &r;
  }
  redisReply* array(std::vector<redisReply*> items) {
    arrays_.push_back(std::move(items));
    redisReply& r = make(REDIS_REPLY_ARRAY);
    r.elements = arrays_.back().size();
    r.element = arrays_.back().data();
    return &r;
  }
  // [start, end, [host, port, id]]
  redisReply* range(long long start, long long end, const std::string& host, long long port) {
    return array({integer(start), integer(end), array({text(host), integer(port), text("id")})});
  }

 private:
  redisReply& make(int type) {
    replies_.emplace_back();
    redisReply& r = replies_.back();
    r.type = type;
    return r;
  }
  std::deque<redisReply> replies_{};
  std::deque<std::string> texts_;
  std::deque<std::vector<redisReply*>> arrays_;
};

}  // namespace

TEST_CASE(
    "a CLUSTER SLOTS master of no address (host \"\", port 0) does not make the map unreadable",
    "[redis][cluster]") {
  Replies m;
  const redisReply* map = m.array({m.range(0, 5460, "", 0), m.range(5461, 10922, "10.0.0.2", 7001),
                                   m.range(10923, 16383, "", 7002)});
  using dlq::redis::detail::ClusterSlots;
  const auto parse = [](const redisReply& r) {
    return dlq::redis::detail::parse_cluster_slots<dlq::redis::detail::hiredis_reply_access>(
        r, "10.0.0.9");
  };
  const ClusterSlots read = parse(*map);
  CHECK(read.kind == ClusterSlots::map);
  const auto& ranges = read.ranges;
  REQUIRE(ranges.size() == 3);
  CHECK(ranges[0].port == 0);  // no address: not the asked node's either
  CHECK(ranges[0].host.empty());
  CHECK(ranges[1].host == "10.0.0.2");
  CHECK(ranges[1].port == 7001);
  CHECK(ranges[2].host == "10.0.0.9");  // an empty host with a port: the node asked
  CHECK(ranges[2].port == 7002);
  // A port out of range is still unreadable.
  const redisReply* negative = m.array({m.range(0, 16383, "10.0.0.2", -1)});
  CHECK(parse(*negative).kind == ClusterSlots::unreadable);
  const redisReply* huge = m.array({m.range(0, 16383, "10.0.0.2", 65536)});
  CHECK(parse(*huge).kind == ClusterSlots::unreadable);
  // An error reply (a plain server) is read as refused, with its text.
  const redisReply* disabled = m.error("ERR This instance has cluster support disabled");
  CHECK(parse(*disabled).kind == ClusterSlots::refused);
  CHECK(parse(*disabled).error == "ERR This instance has cluster support disabled");
}

TEST_CASE("the slots of a master of no address keep their known owner; other ranges are applied",
          "[redis][cluster]") {
  using dlq::redis::detail::SlotRange;
  std::vector<std::pair<std::string, int>> nodes;  // index -> host:port, as a router keeps them
  auto index = [&](const std::string& host, int port) {
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (nodes[i].first == host && nodes[i].second == port) return static_cast<int>(i);
    nodes.emplace_back(host, port);
    return static_cast<int>(nodes.size() - 1);
  };
  const std::vector<SlotRange> first{
      {0, 5460, "a", 7000}, {5461, 10922, "b", 7001}, {10923, 16383, "c", 7002}};
  const auto known = dlq::redis::detail::slot_owners(first, {}, index);
  REQUIRE(known.size() == dlq::redis::cluster_slot_count);
  CHECK(known[0] == 0);
  CHECK(known[5461] == 1);
  CHECK(known[16383] == 2);
  // "a" lost its address; "c"'s slots went to "d" (a failover): both seen in one map.
  const std::vector<SlotRange> next{
      {0, 5460, "", 0}, {5461, 10922, "b", 7001}, {10923, 16383, "d", 7003}};
  const auto owners = dlq::redis::detail::slot_owners(next, known, index);
  CHECK(owners[0] == 0);  // kept: "a"
  CHECK(owners[5460] == 0);
  CHECK(owners[5461] == 1);
  CHECK(owners[10923] == 3);  // "d", the new master
  CHECK(owners[16383] == 3);
  CHECK(nodes.size() == 4);  // no node made of the empty address
  // Before any map is known, such slots have no owner; slots no range names have none.
  const auto fresh =
      dlq::redis::detail::slot_owners({{0, 100, "", 0}, {200, 300, "b", 7001}}, {}, index);
  CHECK(fresh[0] == -1);
  CHECK(fresh[100] == -1);
  CHECK(fresh[150] == -1);
  CHECK(fresh[200] == 1);
  CHECK(nodes.size() == 4);
}

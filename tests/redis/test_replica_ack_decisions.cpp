// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// The decisions of replica-acknowledged writes without a server
// (dlq/redis/detail/replica_ack.hpp): which options WAIT can honour, what WAIT's answer
// means for the write before it, and what the dlq::replication_error says.
#include <chrono>
#include <string>
#include <vector>

#include "dlq/redis/detail/replica_ack.hpp"
#include "support/catch.hpp"

namespace test_replica_ack_decisions {

using namespace dlq::redis::detail;
using std::chrono::milliseconds;

namespace {
WaitReply count(long long n) {
  WaitReply r;
  r.type = WaitReply::kind::count;
  r.replicas = n;
  return r;
}
}  // namespace

TEST_CASE("replica_ack decisions: a count decides against the replicas wanted",
          "[redis][replica_ack]") {
  CHECK(decide_replica_ack(1, count(1)).confirmed);
  CHECK(decide_replica_ack(1, count(2)).confirmed);  // more replicas than wanted: fine
  CHECK(decide_replica_ack(2, count(2)).acknowledged == 2);
  const AckDecision short_one = decide_replica_ack(2, count(1));
  CHECK_FALSE(short_one.confirmed);
  CHECK(short_one.acknowledged == 1);
  CHECK(short_one.why == "confirmed by 1 of 2 replicas");
  const AckDecision none = decide_replica_ack(1, count(0));
  CHECK_FALSE(none.confirmed);
  CHECK(none.acknowledged == 0);
  CHECK(none.why == "confirmed by 0 of 1 replica");
  CHECK(decide_replica_ack(1, count(-3)).acknowledged == 0);  // never negative
}

TEST_CASE("replica_ack decisions: no count is never a confirmation", "[redis][replica_ack]") {
  WaitReply refused;
  refused.type = WaitReply::kind::error;
  refused.text = "ERR WAIT cannot be used with replica instances";
  const AckDecision e = decide_replica_ack(1, refused);
  CHECK_FALSE(e.confirmed);
  CHECK(e.acknowledged == -1);
  CHECK(e.why.find("WAIT cannot be used with replica instances") != std::string::npos);

  WaitReply odd;
  odd.type = WaitReply::kind::other;
  CHECK_FALSE(decide_replica_ack(1, odd).confirmed);

  const AckDecision lost = decide_replica_ack(1, WaitReply{});
  CHECK_FALSE(lost.confirmed);
  CHECK(lost.acknowledged == -1);
  CHECK(lost.why.find("not received") != std::string::npos);
}

TEST_CASE("replica_ack decisions: options WAIT cannot honour", "[redis][replica_ack]") {
  const milliseconds cmd(2000);
  CHECK(replica_ack_problem(0, milliseconds(500), cmd).empty());
  CHECK(replica_ack_problem(0, milliseconds(0), cmd).empty());  // off: the timeout is unused
  CHECK(replica_ack_problem(1, milliseconds(500), cmd).empty());
  CHECK(replica_ack_problem(1, milliseconds(1999), cmd).empty());
  CHECK(replica_ack_problem(1, milliseconds(5000), milliseconds(0)).empty());  // no limit
  CHECK(replica_ack_problem(-1, milliseconds(500), cmd).find("negative") != std::string::npos);
  CHECK(replica_ack_problem(1, milliseconds(0), cmd).find("forever") != std::string::npos);
  CHECK(replica_ack_problem(1, milliseconds(2000), cmd).find("command_timeout") !=
        std::string::npos);
}

TEST_CASE("replica_ack decisions: the error says what happened and what to do",
          "[redis][replica_ack]") {
  const auto e = replication_failure(decide_replica_ack(1, count(0)), "127.0.0.1:6379",
                                     "RPUSH dlq:{orders}", {"id-1", "id-2"}, 2, 1,
                                     milliseconds(300));
  CHECK(e.ids() == std::vector<std::string>{"id-1", "id-2"});
  CHECK(e.entries() == 2);
  CHECK(e.wanted() == 1);
  CHECK(e.acknowledged() == 0);
  CHECK(e.timeout() == milliseconds(300));
  CHECK_FALSE(e.outcome_unknown());
  const std::string what = e.what();
  CHECK(what.rfind("[dlq.redis] 127.0.0.1:6379: RPUSH dlq:{orders}: 2 entries written", 0) == 0);
  CHECK(what.find("confirmed by 0 of 1 replica within 300 ms") != std::string::npos);
  CHECK(what.find("IS applied on the master") != std::string::npos);
  CHECK(what.find("(id id-1 and 1 more)") != std::string::npos);
  CHECK(what.find("do not repeat it") != std::string::npos);
  const dlq::storage_error& base = e;  // caught as a storage error too
  CHECK(std::string(base.what()) == what);
}

TEST_CASE("replica_ack decisions: a move or a removal says its own risk",
          "[redis][replica_ack]") {
  const auto m = replication_failure(decide_replica_ack(1, count(0)), "h:1", "replay script",
                                     {"id-1"}, 1, 1, milliseconds(300), AckedWrite::move);
  const std::string mw = m.what();
  CHECK(mw.find("1 entry moved on the master but confirmed by 0 of 1") != std::string::npos);
  CHECK(mw.find("back in the dead list") != std::string::npos);
  CHECK(mw.find("lost") == std::string::npos);
  CHECK(mw.find("store the entry twice") == std::string::npos);
  const auto r = replication_failure(decide_replica_ack(1, count(0)), "h:1", "purge script",
                                     {}, 3, 1, milliseconds(300), AckedWrite::remove);
  const std::string rw = r.what();
  CHECK(rw.find("3 entries removed on the master") != std::string::npos);
  CHECK(rw.find("back in their list") != std::string::npos);
  CHECK(rw.find("lost") == std::string::npos);
  CHECK(r.entries() == 3);
}

}  // namespace test_replica_ack_decisions

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// The decisions of Redis Sentinel without a server (dlq/redis/detail/sentinel.hpp): the
// sentinels' and ROLE's answers (real RESP bytes through hiredis' reader), the order the
// sentinels are asked, which failures are retried, the typed errors, and whether a request
// answered READONLY may be sent again. Also the redis+sentinel:// URL and its redaction.
#include <hiredis/hiredis.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlq/redact.hpp"
#include "dlq/redis/detail/sentinel.hpp"
#include "dlq/redis/options.hpp"
#include "support/catch.hpp"

namespace test_sentinel_decisions {

using namespace dlq::redis::detail::sentinel;
using reason = dlq::sentinel_error::reason;

namespace {
struct Free {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Owned = std::unique_ptr<redisReply, Free>;

// The reply hiredis reads from `resp` (one complete RESP value).
Owned parse(std::string_view resp) {
  redisReader* reader = redisReaderCreate();
  REQUIRE(redisReaderFeed(reader, resp.data(), resp.size()) == REDIS_OK);
  void* out = nullptr;
  REQUIRE(redisReaderGetReply(reader, &out) == REDIS_OK);
  redisReaderFree(reader);
  REQUIRE(out != nullptr);
  return Owned(static_cast<redisReply*>(out));
}

Asked unreachable(std::string who) {
  Asked a;
  a.sentinel = std::move(who);
  a.text = "refused";
  return a;
}
Asked answered(std::string who, std::string_view resp) {
  Asked a;
  a.sentinel = std::move(who);
  a.type = Asked::kind::answered;
  a.answer = read_master_address(*parse(resp));
  return a;
}

// after_replies over commands named `names` and replies read from `resps`.
AfterReplies decide(const std::vector<std::string_view>& names,
                    const std::vector<std::string_view>& resps, bool read_only) {
  std::vector<Owned> replies;
  for (const auto r : resps)
    replies.push_back(parse(r));
  return after_replies(
      names.size(), [&](std::size_t i) { return names[i]; },
      [&](std::size_t i) -> const redisReply& { return *replies[i]; }, read_only);
}
}  // namespace

TEST_CASE("sentinel: get-master-addr-by-name answers", "[redis][sentinel]") {
  const MasterAnswer a = read_master_address(*parse("*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n"));
  CHECK(a.type == MasterAnswer::kind::address);
  CHECK(a.host == "127.0.0.1");
  CHECK(a.port == 6380);
  CHECK(read_master_address(*parse("$-1\r\n")).type == MasterAnswer::kind::unknown_master);
  CHECK(read_master_address(*parse("*-1\r\n")).type == MasterAnswer::kind::unknown_master);
  const MasterAnswer refused = read_master_address(*parse("-NOAUTH Authentication required.\r\n"));
  CHECK(refused.type == MasterAnswer::kind::refused);
  CHECK(refused.text == "NOAUTH Authentication required.");
  // Not a sentinel's answer: a bad port, one element, an integer.
  CHECK(read_master_address(*parse("*2\r\n$1\r\nh\r\n$5\r\n70000\r\n")).type ==
        MasterAnswer::kind::malformed);
  CHECK(read_master_address(*parse("*2\r\n$1\r\nh\r\n$2\r\nab\r\n")).type ==
        MasterAnswer::kind::malformed);
  CHECK(read_master_address(*parse("*1\r\n$1\r\nh\r\n")).type == MasterAnswer::kind::malformed);
  CHECK(read_master_address(*parse(":1\r\n")).type == MasterAnswer::kind::malformed);
}

TEST_CASE("sentinel: ROLE answers", "[redis][sentinel]") {
  CHECK(read_role(*parse("*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n")) == Role::master);
  CHECK(read_role(*parse("*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n$9\r\nconnected\r\n"
                         ":10\r\n")) == Role::replica);
  CHECK(read_role(*parse("*2\r\n$8\r\nsentinel\r\n*0\r\n")) == Role::sentinel);
  CHECK(read_role(*parse("-NOPERM no ROLE for you\r\n")) == Role::unknown);
  CHECK(read_role(*parse("*0\r\n")) == Role::unknown);
  CHECK(usable_as_master(Role::master));
  CHECK(usable_as_master(Role::unknown));  // ROLE refused by an ACL: READONLY would tell
  CHECK_FALSE(usable_as_master(Role::replica));
  CHECK_FALSE(usable_as_master(Role::sentinel));
}

TEST_CASE("sentinel: asked in order from the last that answered", "[redis][sentinel]") {
  std::vector<std::size_t> order;
  for (std::size_t step = 0; step < 3; ++step)
    order.push_back(sentinel_to_ask(1, step, 3));
  CHECK(order == std::vector<std::size_t>{1, 2, 0});
  CHECK(sentinel_to_ask(0, 2, 3) == 2);
  CHECK(sentinel_to_ask(0, 0, 0) == 0);  // no sentinels: never indexed (the loop is empty)
}

TEST_CASE("sentinel: the cause of a discovery without an address", "[redis][sentinel]") {
  CHECK(no_address_cause({unreachable("a:1"), unreachable("b:2")}) ==
        reason::sentinels_unreachable);
  CHECK(no_address_cause({}) == reason::sentinels_unreachable);
  CHECK(no_address_cause({unreachable("a:1"), answered("b:2", "$-1\r\n")}) ==
        reason::master_name_unknown);
  CHECK(no_address_cause({answered("a:1", "$-1\r\n"), answered("b:2", "-WRONGPASS x\r\n")}) ==
        reason::sentinel_refused);
  CHECK(no_address_cause({answered("a:1", ":3\r\n")}) == reason::sentinel_refused);

  const dlq::sentinel_error e = no_address_error("master 'm' via sentinels a:1,b:2", "m",
                                                 {unreachable("a:1"), answered("b:2", "$-1\r\n")});
  CHECK(e.cause() == reason::master_name_unknown);
  const std::string what = e.what();
  CHECK(what.find("a:1 unreachable (refused)") != std::string::npos);
  CHECK(what.find("b:2 does not know the name") != std::string::npos);
  CHECK(what.find("sentinel monitor") != std::string::npos);
  CHECK_FALSE(e.outcome_unknown());

  const dlq::sentinel_error m =
      master_error("w", "m", "10.0.0.1:6379", reason::not_master, "replica");
  CHECK(m.cause() == reason::not_master);
  CHECK(std::string(m.what()).find("its ROLE is replica") != std::string::npos);
}

TEST_CASE("sentinel: which failures are tried again", "[redis][sentinel]") {
  CHECK(worth_retrying(reason::sentinels_unreachable));
  CHECK(worth_retrying(reason::master_unreachable));
  CHECK(worth_retrying(reason::not_master));
  CHECK_FALSE(worth_retrying(reason::master_name_unknown));
  CHECK_FALSE(worth_retrying(reason::sentinel_refused));
}

TEST_CASE("sentinel: a periodic check drops a connection to a replaced master",
          "[redis][sentinel]") {
  const MasterAnswer same = read_master_address(*parse("*2\r\n$2\r\nh1\r\n$4\r\n6379\r\n"));
  CHECK_FALSE(master_moved(same, "h1", 6379));
  CHECK(master_moved(same, "h1", 6380));
  CHECK(master_moved(same, "h2", 6379));
  // No address in the answer: keep the connection.
  CHECK_FALSE(master_moved(read_master_address(*parse("$-1\r\n")), "h1", 6379));
  CHECK_FALSE(master_moved(read_master_address(*parse("-NOAUTH x\r\n")), "h1", 6379));
}

TEST_CASE("sentinel: READONLY decides rediscovery and re-sending", "[redis][sentinel]") {
  const std::string_view ro = "-READONLY You can't write against a read only replica.\r\n";
  // A master's answers: nothing to do.
  CHECK(decide({"RPUSH"}, {":1\r\n"}, false) == AfterReplies::keep);
  CHECK(decide({"RPUSH"}, {"-OOM no\r\n"}, false) == AfterReplies::keep);
  // A demoted master refused the one write: not executed, sent again.
  CHECK(decide({"RPUSH"}, {ro}, false) == AfterReplies::rediscover_and_resend);
  // With replicas_to_ack, a WAIT follows: it writes nothing.
  CHECK(decide({"EVALSHA", "WAIT"}, {ro, ":0\r\n"}, false) == AfterReplies::rediscover_and_resend);
  // A transaction refused at queueing and discarded by EXEC: nothing ran.
  CHECK(decide({"MULTI", "RPUSH", "LLEN", "EXEC"},
               {"+OK\r\n", ro, "+QUEUED\r\n", "-EXECABORT Transaction discarded.\r\n"},
               false) == AfterReplies::rediscover_and_resend);
  // A write that ran before the demotion (its answer is an integer): never re-sent.
  CHECK(decide({"RPUSH", "RPUSH"}, {":1\r\n", ro}, false) == AfterReplies::rediscover);
  // A status that is not MULTI's OK: some write may have run.
  CHECK(decide({"SET", "RPUSH"}, {"+OK\r\n", ro}, false) == AfterReplies::rediscover);
  // A read request is re-sent whatever else it got.
  CHECK(decide({"LLEN", "RPUSH"}, {":1\r\n", ro}, true) == AfterReplies::rediscover_and_resend);
  // READONLY must be the code, not a word inside another error.
  CHECK(decide({"RPUSH"}, {"-ERR READONLY key\r\n"}, false) == AfterReplies::keep);
}

TEST_CASE("sentinel: redis+sentinel:// URLs", "[redis][sentinel][url]") {
  const auto o = dlq::redis::parse_url(
      "redis+sentinel://app:s3cret@h1:26380,h2,[::1]:26381/my%2Dmaster/3"
      "?sentinel_password=pw%26x&sentinel_user=watch");
  REQUIRE(o.sentinel.enabled());
  REQUIRE(o.sentinel.sentinels.size() == 3);
  CHECK(o.sentinel.sentinels[0].host == "h1");
  CHECK(o.sentinel.sentinels[0].port == 26380);
  CHECK(o.sentinel.sentinels[1].host == "h2");
  CHECK(o.sentinel.sentinels[1].port == 26379);
  CHECK(o.sentinel.sentinels[2].host == "::1");
  CHECK(o.sentinel.sentinels[2].port == 26381);
  CHECK(o.sentinel.master_name == "my-master");
  CHECK(o.db == 3);
  CHECK(o.user == "app");
  CHECK(o.password == "s3cret");
  CHECK(o.sentinel.user == "watch");
  CHECK(o.sentinel.password == "pw&x");
  CHECK(o.endpoint() == "master 'my-master' via sentinels h1:26380,h2:26379,[::1]:26381/3");
  CHECK(dlq::redis::is_url("redis+sentinel://h/m"));
  CHECK(dlq::redis::url_forms.find("redis+sentinel://") != std::string_view::npos);

  CHECK_THROWS_AS(dlq::redis::parse_url("redis+sentinel://h1:26379"), dlq::invalid_argument);
  CHECK_THROWS_AS(dlq::redis::parse_url("redis+sentinel://h1:26379/"), dlq::invalid_argument);
  CHECK_THROWS_AS(dlq::redis::parse_url("redis+sentinel://h1,,h2/m"), dlq::invalid_argument);
  CHECK_THROWS_AS(dlq::redis::parse_url("redis+sentinel://h1/m/x"), dlq::invalid_argument);
  // Sentinel credentials outside a sentinel URL: refused, not ignored.
  CHECK_THROWS_AS(dlq::redis::parse_url("redis://h?sentinel_password=x"), dlq::invalid_argument);
  try {
    dlq::redis::parse_url("redis+sentinel://u:topsecret@h1:1,h2:99999/m?sentinel_password=hush");
    FAIL("a port out of range must be refused");
  } catch (const dlq::invalid_argument& e) {
    const std::string what = e.what();
    CHECK(what.find("topsecret") == std::string::npos);
    CHECK(what.find("hush") == std::string::npos);
  }
}

TEST_CASE("sentinel: URLs are redacted, hosts kept", "[redis][sentinel][url]") {
  CHECK(dlq::redact_url("redis+sentinel://u:pw@h1:26379,h2:26379/m?sentinel_password=p") ==
        "redis+sentinel://***@h1:26379,h2:26379/m?sentinel_password=***");
  // Without credentials, the list of sentinels is no lost user-info: it stays readable.
  CHECK(dlq::redact_url("redis+sentinel://h1:26379,h2:26380/m") ==
        "redis+sentinel://h1:26379,h2:26380/m");
  // A password whose '@host' was forgotten is still masked, with what follows (the password
  // may hold '/': dlq/redact.hpp).
  CHECK(dlq::redact_url("redis+sentinel://u:pw,h2:1/m") == "redis+sentinel://***");
  CHECK(dlq::redact_secrets("connecting to redis+sentinel://:x@h:1/m failed") ==
        "connecting to redis+sentinel://***@h:1/m failed");
}

TEST_CASE("sentinel: a pool's shared view asks once per interval, trusts newer answers",
          "[redis][sentinel][view]") {
  using clock = SharedView::clock;
  using std::chrono::milliseconds;
  SharedView v;
  const clock::time_point t0 = clock::now();
  // 8 connections checking every 10 ms over 1 s with a 100 ms interval: 10 questions.
  int asked = 0;
  for (int ms = 0; ms < 1000; ms += 10) {
    for (int c = 0; c < 8; ++c) {
      if (!v.begin_check(t0 + milliseconds(ms), milliseconds(100))) continue;
      ++asked;
      MasterAnswer a;
      a.type = MasterAnswer::kind::address;
      a.host = "10.0.0.1";
      a.port = 6379;
      v.answered(a);
    }
  }
  CHECK(asked == 10);
  // Interval 0: never.
  SharedView off;
  CHECK_FALSE(off.begin_check(t0, milliseconds(0)));

  // While one question is under way nobody else asks, however late it is.
  SharedView w;
  REQUIRE(w.begin_check(t0, milliseconds(100)));
  CHECK_FALSE(w.begin_check(t0 + milliseconds(500), milliseconds(100)));
  w.failed(3);  // unanswered: the next sentinel, and a question again after the interval
  CHECK(w.sentinel() == 1);
  CHECK_FALSE(w.begin_check(t0 + milliseconds(50), milliseconds(100)));
  REQUIRE(w.begin_check(t0 + milliseconds(100), milliseconds(100)));
  w.failed(3);
  REQUIRE(w.begin_check(t0 + milliseconds(200), milliseconds(100)));
  w.failed(3);
  CHECK(w.sentinel() == 0);  // round the list

  // must_go: only an answer naming another master, asked after the connection's master was
  // named (an older answer may predate the failover that connection followed already).
  SharedView m;
  CHECK_FALSE(m.must_go("10.0.0.1", 6379, t0));  // no answer yet
  REQUIRE(m.begin_check(t0 + milliseconds(100), milliseconds(100)));
  MasterAnswer b;
  b.type = MasterAnswer::kind::address;
  b.host = "10.0.0.2";
  b.port = 6380;
  m.answered(b);
  CHECK(m.must_go("10.0.0.1", 6379, t0));                          // named before: go
  CHECK_FALSE(m.must_go("10.0.0.2", 6380, t0));                    // the named master
  CHECK_FALSE(m.must_go("10.0.0.1", 6379, t0 + milliseconds(100)));  // named at the question
  CHECK_FALSE(m.must_go("10.0.0.1", 6379, t0 + milliseconds(150)));  // named after it
  // An answer that names no master changes nothing.
  REQUIRE(m.begin_check(t0 + milliseconds(200), milliseconds(100)));
  MasterAnswer none;
  none.type = MasterAnswer::kind::unknown_master;
  m.answered(none);
  CHECK_FALSE(m.must_go("10.0.0.1", 6379, t0));
}

}  // namespace test_sentinel_decisions

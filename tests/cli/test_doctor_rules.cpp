// The decisions of `dlqctl doctor` (examples/dlqctl/doctor_rules.hpp) from canned INFO and
// CONFIG answers, without a server; and the command line reaching Io::doctor. The real
// servers are tests/cli/test_doctor.py's.
#include <chrono>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "doctor_rules.hpp"
#include "support/catch.hpp"

namespace test_doctor_rules {

using namespace dlqctl::doctor;
using namespace std::chrono_literals;

// Shaped as Redis 7.0 answers INFO (CRLF, sections, comments).
const char* const healthy_info =
    "# Server\r\nredis_version:7.0.15\r\n\r\n"
    "# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\nmaxmemory:268435456\r\n"
    "maxmemory_human:256.00M\r\nmaxmemory_policy:noeviction\r\n\r\n"
    "# Persistence\r\nloading:0\r\naof_enabled:1\r\n\r\n"
    "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=10.0.0.2,port=6379\r\n";

TEST_CASE("doctor: INFO text parses into key:value pairs", "[cli][doctor]") {
  const Info i = parse_info(healthy_info);
  CHECK(get(i, "redis_version") == "7.0.15");
  CHECK(get(i, "maxmemory_policy") == "noeviction");
  CHECK(number(i, "used_memory") == 1048576u);
  CHECK(get(i, "slave0") == "ip=10.0.0.2,port=6379");  // values keep their colons' rest
  CHECK_FALSE(get(i, "# Memory").has_value());
  CHECK_FALSE(number(i, "used_memory_human").has_value());  // "1.00M" is not a number
  CHECK(parse_info("").empty());
}

TEST_CASE("doctor: a healthy server is all OK, exit 0", "[cli][doctor]") {
  const Info i = parse_info(healthy_info);
  ScanFacts scan;
  scan.pattern = "dlq:{*}";
  scan.queues = {{"orders", "dlq:{orders}", 3, 900}, {"payments", "dlq:{payments}", 1, 300}};
  TlsFacts tls;
  tls.host = "127.0.0.1";
  const std::vector<Finding> all = {judge_tls(tls),
                                    judge_role(i),
                                    judge_policy(i, std::nullopt),
                                    judge_persistence(i, std::nullopt),
                                    judge_memory(i, 1200, 2),
                                    judge_queues(scan),
                                    judge_lua(std::nullopt)};
  for (const auto& f : all) {
    INFO(line(f));
    CHECK(f.level == Level::ok);
  }
  CHECK(exit_code(all, false) == 0);
  CHECK(exit_code(all, true) == 0);
  CHECK(line(all[1]) == "OK role: master, 2 connected replicas");
  CHECK(all[4].finding ==
        "used 1.0 MiB of maxmemory 256.0 MiB (0%), headroom 255.0 MiB; dead letters 1.2 KiB in 2 "
        "lists");
  CHECK(all[5].finding == "2 queues (dlq:{*}): orders (3), payments (1)");
}

TEST_CASE("doctor: an evicting policy is an ERROR, exit 4", "[cli][doctor]") {
  for (const char* policy :
       {"allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-ttl"}) {
    INFO(policy);
    const Info i = parse_info(std::string("maxmemory_policy:") + policy + "\r\n");
    const Finding f = judge_policy(i, std::nullopt);
    CHECK(f.level == Level::error);
    CHECK(f.finding.find(policy) == 0);
    CHECK(f.fix.find("noeviction") != std::string::npos);
    CHECK(exit_code({f}, false) == exit_doctor_problem);
  }
  // volatile-*: only keys with a TTL go, and the message says which
  CHECK(
      judge_policy(parse_info("maxmemory_policy:volatile-lru"), std::nullopt).finding.find("TTL") !=
      std::string::npos);
  // INFO without the field (old or filtered): CONFIG's value decides; neither: unknown, WARN
  CHECK(judge_policy(Info{}, std::string("allkeys-lru")).level == Level::error);
  CHECK(judge_policy(Info{}, std::string("noeviction")).level == Level::ok);
  const Finding unknown = judge_policy(Info{}, std::nullopt);
  CHECK(unknown.level == Level::warn);
  CHECK(unknown.finding.find("unknown (CONFIG not allowed)") == 0);
}

TEST_CASE("doctor: persistence off is a WARN; CONFIG refused is unknown", "[cli][doctor]") {
  const Info aof_off = parse_info("aof_enabled:0\r\n");
  const Finding off = judge_persistence(aof_off, std::string(""));
  CHECK(off.level == Level::warn);
  CHECK(off.finding.find("no AOF and no RDB save points") != std::string::npos);
  CHECK(exit_code({off}, false) == 0);                   // warnings alone: 0 ...
  CHECK(exit_code({off}, true) == exit_doctor_problem);  // ... unless --strict
  const Finding rdb = judge_persistence(aof_off, std::string("3600 1 300 100 60 10000"));
  CHECK(rdb.level == Level::ok);
  CHECK(rdb.finding.find("save 3600 1") != std::string::npos);
  const Finding refused = judge_persistence(aof_off, std::nullopt);
  CHECK(refused.level == Level::warn);
  CHECK(refused.finding.find("unknown (CONFIG not allowed)") == 0);
  CHECK(judge_persistence(parse_info("aof_enabled:1"), std::nullopt).level == Level::ok);
  CHECK(judge_persistence(Info{}, std::string("")).level == Level::warn);  // INFO refused
}

TEST_CASE("doctor: memory headroom against maxmemory", "[cli][doctor]") {
  const auto at = [](std::uint64_t used, std::uint64_t max) {
    return judge_memory(parse_info("used_memory:" + std::to_string(used) +
                                   "\r\nmaxmemory:" + std::to_string(max) + "\r\n"),
                        used / 2, 4);
  };
  CHECK(at(50, 100).level == Level::ok);
  CHECK(at(74, 100).level == Level::ok);
  CHECK(at(75, 100).level == Level::warn);
  CHECK(at(89, 100).level == Level::warn);
  CHECK(at(90, 100).level == Level::error);
  CHECK(at(120, 100).level == Level::error);
  CHECK(at(120, 100).finding.find("headroom 0 B") != std::string::npos);
  CHECK(at(90, 100).fix.find("OOM") != std::string::npos);
  CHECK(at(1 << 30, 0).level == Level::ok);  // no maxmemory: bounded by the host
  CHECK(at(1 << 30, 0).finding.find("no maxmemory") != std::string::npos);
  CHECK(judge_memory(Info{}, 0, 0).level == Level::warn);
  const Finding unmeasured =
      judge_memory(parse_info("used_memory:1024\r\nmaxmemory:0\r\n"), std::nullopt, 3);
  CHECK(unmeasured.finding ==
        "used 1.0 KiB, no maxmemory (bounded by the host), dead letters of unknown size in 3 "
        "lists (MEMORY USAGE not allowed)");
}

TEST_CASE("doctor: a replica is an ERROR; the cluster's state", "[cli][doctor]") {
  const Finding replica = judge_role(parse_info(
      "role:slave\r\nmaster_host:10.0.0.1\r\nmaster_port:6379\r\nmaster_link_status:up\r\n"));
  CHECK(replica.level == Level::error);
  CHECK(replica.finding.find("a replica of 10.0.0.1:6379") == 0);
  CHECK(replica.finding.find("READONLY") != std::string::npos);
  CHECK(judge_role(parse_info("role:master\r\nconnected_slaves:0\r\n")).level == Level::ok);
  CHECK(judge_role(Info{}).level == Level::warn);

  const char* ok =
      "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\n"
      "cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_size:3\r\n";
  const Finding good = judge_cluster(parse_info(ok));
  CHECK(good.level == Level::ok);
  CHECK(good.finding == "cluster_state ok, 16384/16384 slots assigned, 3 masters");
  const Finding down =
      judge_cluster(parse_info("cluster_state:fail\r\ncluster_slots_assigned:10923\r\ncluster_"
                               "slots_fail:0\r\ncluster_size:2\r\n"));
  CHECK(down.level == Level::error);
  CHECK(down.fix.find("CLUSTERDOWN") != std::string::npos);
  CHECK(judge_cluster(parse_info("cluster_state:ok\r\ncluster_slots_assigned:16384\r\n"
                                 "cluster_slots_fail:5\r\n"))
            .level == Level::error);
}

TEST_CASE("doctor: TLS off, on, verification, certificate expiry", "[cli][doctor]") {
  TlsFacts t;
  t.host = "10.0.0.5";
  CHECK(judge_tls(t).level == Level::warn);  // plain TCP off this host
  CHECK(judge_tls(t).fix.find("rediss://") != std::string::npos);
  for (const char* host : {"127.0.0.1", "localhost", "::1"}) {
    t.host = host;
    CHECK(judge_tls(t).level == Level::ok);
  }
  t.host = {};
  t.unix_socket = true;
  CHECK(judge_tls(t).finding == "TLS off (a unix socket)");

  TlsFacts s;
  s.enabled = true;
  s.host = "cache.example.com";
  s.certificate_known = true;
  s.subject = "CN=cache.example.com";
  s.issuer = "CN=Example CA";
  s.expires_in = std::chrono::duration_cast<std::chrono::seconds>(24h * 90);
  const Finding fine = judge_tls(s);
  CHECK(fine.level == Level::ok);
  CHECK(fine.finding ==
        "TLS on, certificate verified; subject CN=cache.example.com, issuer "
        "CN=Example CA, expires in 90 days");
  s.expires_in = std::chrono::duration_cast<std::chrono::seconds>(24h * 29);
  CHECK(judge_tls(s).level == Level::warn);  // < 30 days
  CHECK(judge_tls(s).finding.find("expires in 29 days") != std::string::npos);
  s.expires_in = -std::chrono::duration_cast<std::chrono::seconds>(24h * 2);
  CHECK(judge_tls(s).level == Level::error);
  CHECK(judge_tls(s).finding.find("expired 2 days ago") != std::string::npos);
  s.verify = false;  // an expired certificate is accepted only without verification
  CHECK(judge_tls(s).level == Level::error);
  CHECK(judge_tls(s).fix.find("renew the server certificate now") == 0);
  CHECK(judge_tls(s).fix.find("drop insecure_skip_verify") != std::string::npos);
  s.verify = true;
  s.expires_in = 24h + 5s;
  CHECK(judge_tls(s).finding.find("expires in 1 day") != std::string::npos);
  s.expires_in = std::chrono::duration_cast<std::chrono::seconds>(24h * 90);
  s.verify = false;
  CHECK(judge_tls(s).level == Level::warn);
  CHECK(judge_tls(s).fix.find("insecure_skip_verify") != std::string::npos);
}

TEST_CASE("doctor: queues listed, a capped scan says so; Lua refused", "[cli][doctor]") {
  ScanFacts none;
  none.pattern = "dlq:{*}";
  CHECK(judge_queues(none).finding.find("no dead-letter lists match dlq:{*} (none yet") == 0);
  CHECK(judge_queues(none).level == Level::ok);
  ScanFacts refused = none;
  refused.error = "NOPERM this user has no permissions to run the 'scan' command";
  CHECK(judge_queues(refused).level == Level::error);
  CHECK(judge_queues(refused).finding.find("SCAN refused: NOPERM") == 0);
  ScanFacts many;
  many.pattern = "dlq:*";
  for (int i = 0; i < 25; ++i)
    many.queues.push_back(
        {"q" + std::to_string(100 + i), "dlq:q" + std::to_string(100 + i), 1, {}});
  many.examined = 5000;
  many.capped = true;
  const Finding f = judge_queues(many);
  CHECK(f.level == Level::ok);
  CHECK(f.finding.find("25 queues (dlq:*): q100 (1), q101 (1)") == 0);
  CHECK(f.finding.find("… 5 more") != std::string::npos);
  CHECK(f.finding.find("stopped after about 5000 keys") != std::string::npos);
  CHECK(f.fix.find("--max-keys") != std::string::npos);

  CHECK(judge_lua(std::nullopt).level == Level::ok);
  const Finding acl =
      judge_lua(std::string("NOPERM this user has no permissions to run the 'eval' command"));
  CHECK(acl.level == Level::error);
  CHECK(acl.fix.find("+@scripting") != std::string::npos);
  CHECK(judge_lua(std::string("ERR unknown command 'EVAL'")).level == Level::error);
}

TEST_CASE("doctor: lines and the JSON document carry the same findings", "[cli][doctor]") {
  const std::vector<Finding> all = {
      {Level::ok, "role", "", "master, 0 connected replicas", ""},
      {Level::error, "maxmemory-policy", "127.0.0.1:7001", "allkeys-lru: …", "set noeviction"}};
  CHECK(line(all[0]) == "OK role: master, 0 connected replicas");
  CHECK(line(all[1]) == "ERROR maxmemory-policy: 127.0.0.1:7001: allkeys-lru: … — set noeviction");
  ScanFacts scan;
  scan.pattern = "dlq:{*}";
  scan.queues = {{"orders", "dlq:{orders}", 3, std::nullopt}};
  const auto j =
      nlohmann::json::parse(to_json("redis://127.0.0.1:6379", true, all, scan, false).dump());
  REQUIRE(j["findings"].size() == 2);
  CHECK(j["findings"][1]["level"] == "ERROR");
  CHECK(j["findings"][1]["node"] == "127.0.0.1:7001");
  CHECK(j["findings"][1]["fix"] == "set noeviction");
  CHECK(j["queues"][0]["length"] == 3);
  CHECK(j["queues"][0]["bytes"].is_null());
  CHECK(j["summary"]["error"] == 1);
  CHECK(j["exit_code"] == exit_doctor_problem);
  CHECK(j["cluster"] == true);
}

// The command line: `doctor URL` reaches Io::doctor with its flags; exit codes pass through.
struct Ran {
  int code = -1;
  std::string out, err;
  std::optional<Request> request;
};
Ran run(std::vector<std::string> args, bool with_doctor, int answer = 0) {
  std::istringstream in;
  std::ostringstream out, err;
  dlqctl::Io io(in, out, err);
  Ran r;
  if (with_doctor) {
    io.doctor = [&r, answer](const Request& q, std::ostream& o) {
      r.request = q;
      o << "OK lua: EVAL runs\n";
      return answer;
    };
  }
  const dlqctl::Opener never = [](const dlqctl::StoreSettings&) -> std::unique_ptr<dlqctl::Store> {
    throw std::logic_error("doctor must not open a store");
  };
  r.code = dlqctl::run(args, io, never);
  r.out = out.str();
  r.err = err.str();
  return r;
}

TEST_CASE("doctor: the command line reaches Io::doctor", "[cli][doctor]") {
  Ran r = run({"doctor", "redis://10.0.0.1:6380/2", "--json", "--strict", "--max-keys", "500",
               "--dlq-key", "dlq:*", "--corrupt-key", "bad:*", "--timeout", "2s"},
              true);
  CHECK(r.code == 0);
  REQUIRE(r.request.has_value());
  CHECK(r.request->url == "redis://10.0.0.1:6380/2");
  CHECK(r.request->json);
  CHECK(r.request->strict);
  CHECK(r.request->max_keys == 500);
  CHECK(r.request->dlq_key == "dlq:*");
  CHECK(r.request->corrupt_key == "bad:*");
  CHECK(r.request->timeout == 2s);
  CHECK(r.out == "OK lua: EVAL runs\n");

  r = run({"--store", "rediss://cache:6380", "doctor"}, true, exit_doctor_problem);
  CHECK(r.code == dlqctl::exit_doctor);
  REQUIRE(r.request.has_value());
  CHECK(r.request->url == "rediss://cache:6380");  // no URL: --store's
  CHECK(r.request->dlq_key == "dlq:{*}");
  CHECK(r.request->corrupt_key.empty());  // doctor derives dlq_key + ":corrupt"
  CHECK_FALSE(r.request->json);

  r = run({"doctor", "sqlite:///tmp/x.db"}, true);
  CHECK(r.code == dlqctl::exit_usage);
  CHECK_FALSE(r.request.has_value());
  CHECK(r.err.find("doctor checks Redis servers") != std::string::npos);
  CHECK(r.err.find("rediss://") != std::string::npos);  // the URL parser's forms (one list)

  r = run({"doctor", "redis://127.0.0.1:6379"}, false);  // a dlqctl built without Redis
  CHECK(r.code == dlqctl::exit_usage);
  CHECK(r.err.find("built without Redis") != std::string::npos);

  r = run({"doctor", "redis://127.0.0.1:6379", "--max-keys", "0"}, true);
  CHECK(r.code == dlqctl::exit_usage);
}

TEST_CASE("doctor: hostile queue names print on one line, escaped and cut (round 7)",
          "[cli][doctor]") {
  // dlqctl doctor over keys dlq:{a\nb}, dlq:{a\rX}, dlq:{a\0b}, dlq:{ESC[2J} and a 1 MiB
  // name printed them raw: a forged line, a terminal escape, 1 MiB on one line.
  ScanFacts s;
  s.pattern = "dlq:{*}";
  const std::string huge(1 << 20, 'x');
  for (const std::string& name : {std::string("a\nOK persistence: AOF on"), std::string("a\rX"),
                                  std::string("a\0b", 3), std::string("\x1b[2J"), huge})
    s.queues.push_back({name, "dlq:{" + name + "}", 1, {}});
  const std::string text = line(judge_queues(s));
  INFO(text.substr(0, 300));
  std::size_t controls = 0;
  for (const char c : text)
    controls += static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  CHECK(controls == 0);
  CHECK(text.size() < 1000);
  CHECK(text.find("a\\nOK persistence") != std::string::npos);
  CHECK(text.find("(1048576 bytes)") != std::string::npos);
}

}  // namespace test_doctor_rules

namespace test_doctor_rules {

// `dlqctl serve` is parsed apart (serve.hpp) when the binary has the console; the main
// command list names it either way, and a dlqctl built without it says how to get it.
TEST_CASE("dlqctl --help lists serve; without the console serve says how to build it",
          "[cli][serve]") {
  Ran r = run({"--help"}, false);
  CHECK(r.code == dlqctl::exit_ok);
  CHECK(r.out.find("\n  serve ") != std::string::npos);
  CHECK(r.out.find("operator console") != std::string::npos);

  r = run({"serve", "--listen", "127.0.0.1:0"}, false);  // a dlqctl built without cpp-httplib
  INFO(r.err);
  CHECK(r.code == dlqctl::exit_usage);
  CHECK(r.err.find("built without the console") != std::string::npos);
  CHECK(r.err.find("libcpp-httplib-dev") != std::string::npos);
}

}  // namespace test_doctor_rules

namespace test_doctor_rules {

// Sentinel answers shaped as Redis 7.0's sentinels give them (flat field/value arrays).
Info sentinel_master(const std::string& port, const std::string& flags = "master",
                     const std::string& quorum = "2") {
  return pairs_info({"name", "mymaster", "ip", "127.0.0.1", "port", port, "runid", "abc", "flags",
                     flags, "quorum", quorum, "num-slaves", "1", "num-other-sentinels", "2"});
}

Info sentinel_replica(const std::string& port, const std::string& flags = "slave",
                      const std::string& link = "ok") {
  return pairs_info({"name", "127.0.0.1:" + port, "ip", "127.0.0.1", "port", port, "flags", flags,
                     "master-link-status", link});
}

SentinelFacts answering(const std::string& address, const std::string& master_port,
                        std::size_t others = 2) {
  SentinelFacts s;
  s.address = address;
  s.answered = true;
  s.master = sentinel_master(master_port);
  s.replicas = {sentinel_replica("7001")};
  for (std::size_t i = 0; i < others; ++i)
    s.sentinels.push_back(pairs_info({"ip", "127.0.0.1", "port", std::to_string(27000 + i)}));
  s.ckquorum_ok = true;
  s.ckquorum = "OK 3 usable Sentinels. Quorum and failover authorization can be reached";
  return s;
}

SentinelFacts silent(const std::string& address, const std::string& why) {
  SentinelFacts s;
  s.address = address;
  s.error = why;
  return s;
}

TEST_CASE("doctor sentinel: three agreeing sentinels, a replica in sync, CKQUORUM OK",
          "[cli][doctor][sentinel]") {
  const std::vector<SentinelFacts> all = {
      answering("h1:26379", "7000"), answering("h2:26379", "7000"), answering("h3:26379", "7000")};
  const std::vector<Finding> f = {judge_sentinels(all, "mymaster"), judge_sentinel_master(all),
                                  judge_sentinel_quorum(all), judge_sentinel_replicas(all)};
  for (const auto& x : f) {
    INFO(line(x));
    CHECK(x.level == Level::ok);
  }
  CHECK(line(f[0]) ==
        "OK sentinels: 3/3 sentinels of the URL answered for 'mymaster': h1:26379, "
        "h2:26379, h3:26379");
  CHECK(line(f[1]) == "OK sentinel-master: 127.0.0.1:7000 (flags master)");
  CHECK(line(f[2]) == "OK sentinel-quorum: quorum 2, 3 sentinels known, CKQUORUM OK");
  CHECK(line(f[3]) ==
        "OK sentinel-replicas: 1 replica known: 127.0.0.1:7001 (flags slave, master link ok)");
  CHECK(exit_code(f, true) == 0);
}

TEST_CASE("doctor sentinel: a silent sentinel WARN, none answering ERROR",
          "[cli][doctor][sentinel]") {
  std::vector<SentinelFacts> all = {answering("h1:26379", "7000"),
                                    silent("h2:26379", "connection refused")};
  Finding f = judge_sentinels(all, "mymaster");
  CHECK(f.level == Level::warn);
  CHECK(f.finding.find("1/2 sentinels") != std::string::npos);
  CHECK(f.finding.find("not: h2:26379 (connection refused)") != std::string::npos);
  CHECK_FALSE(f.fix.empty());
  all = {silent("h1:26379", "timed out"), silent("h2:26379", "ERR No such master with that name")};
  f = judge_sentinels(all, "mymaster");
  CHECK(f.level == Level::error);
  CHECK(f.fix.find("sentinel monitor") != std::string::npos);
  CHECK(judge_sentinel_master(all).level == Level::error);
  CHECK(judge_sentinel_quorum(all).level == Level::error);
  CHECK(judge_sentinel_replicas(all).level == Level::error);
}

TEST_CASE("doctor sentinel: sentinels naming different masters ERROR, each named",
          "[cli][doctor][sentinel]") {
  const std::vector<SentinelFacts> all = {
      answering("h1:26379", "7000"), answering("h2:26379", "7000"), answering("h3:26379", "7002")};
  const Finding f = judge_sentinel_master(all);
  INFO(line(f));
  CHECK(f.level == Level::error);
  CHECK(f.finding.find("127.0.0.1:7000 (by h1:26379 h2:26379)") != std::string::npos);
  CHECK(f.finding.find("127.0.0.1:7002 (by h3:26379)") != std::string::npos);
}

TEST_CASE("doctor sentinel: master flags s_down/o_down ERROR, failover in progress WARN",
          "[cli][doctor][sentinel]") {
  std::vector<SentinelFacts> all = {answering("h1:26379", "7000")};
  all[0].master = sentinel_master("7000", "master,s_down,o_down");
  Finding f = judge_sentinel_master(all);
  CHECK(f.level == Level::error);
  CHECK(f.finding == "127.0.0.1:7000 (flags master,s_down,o_down)");
  all[0].master = sentinel_master("7000", "master,disconnected");
  CHECK(judge_sentinel_master(all).level == Level::error);
  all[0].master = sentinel_master("7000", "master,failover_in_progress");
  f = judge_sentinel_master(all);
  CHECK(f.level == Level::warn);
  CHECK(f.fix.find("failover is in progress") != std::string::npos);
  all[0].master = sentinel_master("7000", "master,s_downish");  // a whole flag, not a prefix
  CHECK(judge_sentinel_master(all).level == Level::ok);
}

TEST_CASE("doctor sentinel: CKQUORUM failing ERROR; fewer than 3 sentinels WARN",
          "[cli][doctor][sentinel]") {
  std::vector<SentinelFacts> all = {answering("h1:26379", "7000", 0)};
  Finding f = judge_sentinel_quorum(all);
  INFO(line(f));
  CHECK(f.level == Level::warn);
  CHECK(f.finding ==
        "quorum 2, 1 sentinel known, CKQUORUM OK: a single sentinel is a single "
        "point of failure");
  CHECK(f.fix.find("at least 3 sentinels") != std::string::npos);
  all = {answering("h1:26379", "7000", 1)};
  CHECK(judge_sentinel_quorum(all).level == Level::warn);
  CHECK(judge_sentinel_quorum(all).finding.find("2 sentinels known") != std::string::npos);
  all = {answering("h1:26379", "7000"), answering("h2:26379", "7000")};
  all[1].ckquorum_ok = false;
  all[1].ckquorum =
      "NOQUORUM 1 usable Sentinels. Not enough available Sentinels to reach the "
      "majority and authorize a failover";
  f = judge_sentinel_quorum(all);
  CHECK(f.level == Level::error);
  CHECK(f.finding.find("CKQUORUM fails (h2:26379: NOQUORUM 1 usable") != std::string::npos);
}

TEST_CASE("doctor sentinel: no replica, or one down or out of sync, WARN",
          "[cli][doctor][sentinel]") {
  std::vector<SentinelFacts> all = {answering("h1:26379", "7000")};
  all[0].replicas.clear();
  Finding f = judge_sentinel_replicas(all);
  CHECK(f.level == Level::warn);
  CHECK(f.finding.find("no replica known") != std::string::npos);
  all[0].replicas = {sentinel_replica("7001", "slave,s_down,disconnected"),
                     sentinel_replica("7003", "slave", "err")};
  f = judge_sentinel_replicas(all);
  INFO(line(f));
  CHECK(f.level == Level::warn);
  CHECK(f.finding.find("127.0.0.1:7001 (flags slave,s_down,disconnected, master link ok)") !=
        std::string::npos);
  CHECK(f.finding.find("127.0.0.1:7003 (flags slave, master link err)") != std::string::npos);
  CHECK(f.finding.find("2 down or not in sync") != std::string::npos);
  CHECK(f.fix.find("no replica can be promoted") != std::string::npos);
  all[0].replicas.push_back(sentinel_replica("7004"));
  CHECK(judge_sentinel_replicas(all).fix.find("bring the replicas") != std::string::npos);
}

TEST_CASE("doctor sentinel: pairs_info reads a flat field/value array", "[cli][doctor][sentinel]") {
  const Info i = pairs_info({"ip", "10.0.0.1", "port", "6379", "dangling"});
  CHECK(get(i, "ip") == "10.0.0.1");
  CHECK(get(i, "port") == "6379");
  CHECK(i.size() == 2);
}

}  // namespace test_doctor_rules

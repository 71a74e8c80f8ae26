// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// Redis Cluster over TLS (ctest fixture `redis_tls_cluster`, tests/support/redis_tls_cluster.sh:
// three masters on `--port 0 --tls-port P --tls-cluster yes --tls-auth-clients yes`). A
// rediss:// storage given one node finds the others in CLUSTER SLOTS and must reach them with
// the URL's TLS options — the CA, and the client certificate every node requires: send,
// send_batch, peek, replay and discard across queues on every master, and MOVED / ASK after a
// slot migration (MIGRATE itself runs in TLS between the nodes).
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/redis/cluster.hpp"
#include "dlq/redis/list_storage.hpp"
#include "redis/cluster_test_util.hpp"
#include "redis/redis_test_util.hpp"
#include "redis/tls_test_util.hpp"
#include "support/catch.hpp"

namespace test_tls_cluster {

using namespace dlq;
using dlq::test::failure;
using dlq::test::queues_on;
using dlq::test::RawCluster;

namespace {

// The fixture's DIR/env (KEY=VALUE lines). Throws — failing the test — without it.
const std::map<std::string, std::string>& env() {
  static const std::map<std::string, std::string> values = test::read_fixture_env(
      "DLQ_TEST_REDIS_TLS_CLUSTER_ENV_FILE", "redis_tls_cluster_start", {"PORTS", "CERTS"});
  return values;
}

std::string cert(const std::string& file) {
  return env().at("CERTS") + "/" + file;
}

std::vector<int> ports() {
  std::vector<int> out;
  std::istringstream in(env().at("PORTS"));
  for (std::string p; std::getline(in, p, ',');)
    out.push_back(std::stoi(p));
  if (out.size() != 3) throw std::runtime_error("PORTS: three ports expected");
  return out;
}

// rediss://127.0.0.1:<port>?ca_file=<test CA>, with the client certificate unless `mtls` is
// false.
std::string url(int port, bool mtls = true) {
  std::string u = "rediss://127.0.0.1:" + std::to_string(port) + "?ca_file=" + cert("ca.crt");
  if (mtls) u += "&cert_file=" + cert("client.crt") + "&key_file=" + cert("client.key");
  return u;
}

// The test cluster, every node reached over TLS.
RawCluster raw_cluster() {
  return RawCluster(ports(), [](int port) { return url(port); });
}

}  // namespace

TEST_CASE("TLS cluster: the fixture requires client certificates", "[redis][tls][cluster]") {
  const int seed = ports().at(0);
  try {
    redis::ConnectionOptions o = redis::parse_url(url(seed, false));
    o.connect_timeout = std::chrono::milliseconds(1500);
    o.reconnect_attempts = 0;
    redis::Connection c(o);
    c.run(redis::Command("PING"), redis::Effect::read);
    FAIL("a client without a certificate was served");
  } catch (const dlq::connection_error&) {  // tls_error (refused) or a reset: never served
  }
  test::RawClient with_cert(url(seed));
  const redis::Reply pong = with_cert.cmd({"PING"});
  CHECK(std::string(pong->str, pong->len) == "PONG");
}

TEST_CASE("TLS cluster: send, send_batch, peek, replay and discard on every master",
          "[redis][tls][cluster]") {
  RawCluster raw = raw_cluster();
  const std::string prefix = test::unique_prefix();
  RedisListStorage storage(url(raw.ports().at(0)), test::unique_layout(prefix));
  REQUIRE(storage.cluster_mode());
  std::vector<std::string> names;
  for (int port : raw.ports()) {
    auto on = queues_on(raw, storage, port, 2, "t" + std::to_string(port) + "-");
    REQUIRE(on.size() == 2);
    names.insert(names.end(), on.begin(), on.end());
  }
  std::sort(names.begin(), names.end());
  DeadLetterQueue<RedisListStorage&> q(storage);

  std::map<std::string, std::vector<std::string>> sent;
  for (const auto& n : names) {
    q.send_to_dlq(n, "\"first-" + n + "\"", failure("e"));
    sent[n].push_back("\"first-" + n + "\"");
  }
  std::vector<FailedJob> jobs;
  for (int i = 0; i < 30; ++i) {
    const std::string& n = names[static_cast<std::size_t>(i * 7) % names.size()];
    jobs.push_back(FailedJob{n, std::to_string(i), failure("batch")});
    sent[n].push_back(std::to_string(i));
  }
  CHECK(q.send_batch(jobs).size() == jobs.size());
  CHECK(q.queues() == names);

  // Every master holds some of this test's keys, and the router reached each over TLS with
  // the URL's options: the CA and the client certificate each node requires.
  for (int port : raw.ports())
    CHECK_FALSE(raw.node(port).strings({"KEYS", prefix + "*"}).empty());
  const auto masters = storage.router().masters();
  CHECK(masters.size() == 3);
  CHECK(storage.router().pools() >= 2);  // the seed's own pool is not counted
  for (redis::ConnectionPool* pool : masters) {
    CAPTURE(pool->endpoint());
    CHECK(pool->options().tls.enabled);
    CHECK(pool->options().tls.ca_file == cert("ca.crt"));
    CHECK(pool->options().tls.cert_file == cert("client.crt"));
    auto lease = pool->acquire();
    lease->connect();
    const auto peer = lease->peer_certificate();
    REQUIRE(peer.has_value());
    CHECK(peer->issuer == "CN=dlq test CA");
  }

  for (const auto& n : names) {
    const auto entries = q.peek(n, 0, 100);
    REQUIRE(entries.size() == sent[n].size());
    for (std::size_t i = 0; i < entries.size(); ++i)
      CHECK(entries[i].payload == sent[n][i]);
  }
  // On every master one queue replayed and one discarded (its two queues are adjacent once
  // sorted: their names start with its port).
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    if (i % 2 == 0) {
      const auto report = q.replay_all(n);
      CHECK(report.replayed == sent[n].size());
      CHECK(raw.list(storage.source_key(n)) == sent[n]);
    } else {
      const auto report = q.discard(n);
      CHECK(report.discarded == sent[n].size());
      CHECK(raw.list(storage.source_key(n)).empty());
    }
    CHECK(q.size(n) == 0);
  }
  CHECK(q.queues().empty());
}

TEST_CASE("TLS cluster: a migrated slot is followed with MOVED, a migrating one with ASK",
          "[redis][tls][cluster]") {
  RawCluster raw = raw_cluster();
  const auto& p = raw.ports();
  RedisListStorage storage(url(p.at(0)), test::unique_layout());
  REQUIRE(storage.cluster_mode());
  const std::string queue = queues_on(raw, storage, p[1], 1, "moved-").at(0);
  const std::string dead = storage.key(queue, ListKind::dead);
  const int slot = raw.keyslot(dead);
  CHECK(storage.push(Record{queue, "", "", "one"}) == 1);
  const auto before = storage.router().stats();

  raw.migrate(slot, p[1], p[2]);  // MIGRATE between the nodes runs in TLS too
  CHECK(storage.push(Record{queue, "", "", "two"}) == 2);
  CHECK(storage.router().stats().moved > before.moved);
  CHECK(raw.owner(dead) == p[2]);
  CHECK(raw.node(p[2]).list(dead) == std::vector<std::string>{"one", "two"});

  raw.begin_migration(slot, p[2], p[1]);
  const auto mid = storage.router().stats();
  CHECK(storage.size(queue, ListKind::corrupt) == 0);  // absent on the source: ASK
  CHECK(storage.router().stats().ask > mid.ask);
  raw.move_keys(slot, p[2], p[1]);
  CHECK(storage.push(Record{queue, "", "", "three"}) == 3);  // after ASK, on the target
  raw.end_migration(slot, p[1]);
  CHECK(raw.node(p[1]).list(dead) == std::vector<std::string>{"one", "two", "three"});
  CHECK(storage.size(queue, ListKind::dead) == 3);
  DeadLetterQueue<RedisListStorage&> q(storage);
  q.purge(queue);
}

}  // namespace test_tls_cluster

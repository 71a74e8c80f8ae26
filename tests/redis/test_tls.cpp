// TLS against real servers (ctest fixture `redis_tls`, tests/support/redis_tls_server.sh):
// send and replay over TLS, the pool over TLS, mutual TLS, and every failure case as its
// typed dlq::tls_error within the connect timeout — never a hang, never plain TCP.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dlq/dead_letter_queue.hpp"
#include "dlq/redis/connection.hpp"
#include "dlq/redis/list_storage.hpp"
#include "dlq/redis/pool.hpp"
#include "redis/redis_test_util.hpp"
#include "redis/tls_test_util.hpp"
#include "support/catch.hpp"

using namespace dlq;
using R = tls_error::reason;

namespace {

// The fixture's DIR/env (KEY=VALUE lines). Throws — failing the test — without it.
const std::map<std::string, std::string>& env() {
  static const std::map<std::string, std::string> values = test::read_fixture_env(
      "DLQ_TEST_REDIS_TLS_ENV_FILE", "redis_tls_server_start", {"TLS_PORT", "WRONGHOST_PORT"});
  return values;
}
std::string port(const char* name) {
  return env().at(std::string(name) + "_PORT");
}
std::string cert(const std::string& file) {
  return env().at("CERTS") + "/" + file;
}

// rediss://localhost:<port of server `name`>?ca_file=<test CA> plus `extra` parameters.
std::string tls_url(const char* name, const std::string& extra = {},
                    const std::string& host = "localhost") {
  return "rediss://" + host + ":" + port(name) + "/0?ca_file=" + cert("ca.crt") + extra;
}
std::string client_cert() {
  return "&cert_file=" + cert("client.crt") + "&key_file=" + cert("client.key");
}

redis::ConnectionOptions options(const std::string& url) {
  auto o = redis::parse_url(url);
  o.connect_timeout = std::chrono::milliseconds(1500);
  return o;
}

std::string ping(const std::string& url) {
  redis::Connection c(options(url));
  auto r = c.run(redis::Command("PING"), redis::Effect::read);
  return std::string(redis::view(redis::check(r, c, "PING")));
}

// Connects to `url`; returns the tls_error it must fail with, and how long it took.
tls_error connect_fails(const std::string& url, long long& ms) {
  const auto start = std::chrono::steady_clock::now();
  try {
    redis::Connection c(options(url));
    c.connect();
  } catch (const tls_error& e) {
    ms = test::elapsed_ms(start);
    return e;
  }
  FAIL("connected to " << url);
  throw std::logic_error("unreachable");
}

bool says(const std::exception& e, const std::string& text) {
  return std::string(e.what()).find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("TLS: a connection verifies the server and runs commands", "[redis][tls]") {
  REQUIRE(redis::tls_available());
  CHECK(ping(tls_url("TLS")) == "PONG");
  CHECK(ping(tls_url("TLS", {}, "127.0.0.1")) == "PONG");  // checked against the IP entry
  redis::Connection c(options(tls_url("TLS")));
  c.connect();
  CHECK(c.client_id() > 0);
}

TEST_CASE("TLS: the server's certificate is shown: subject, issuer, expiry", "[redis][tls]") {
  redis::Connection c(options(tls_url("TLS")));
  CHECK_FALSE(c.peer_certificate().has_value());  // not connected yet
  c.connect();
  const auto cert = c.peer_certificate();
  REQUIRE(cert.has_value());
  CHECK(cert->subject == "CN=localhost");  // redis_tls_server.sh: server.crt, one day
  CHECK(cert->issuer == "CN=dlq test CA");
  const auto left = cert->not_after - std::chrono::system_clock::now();
  CHECK(left > std::chrono::hours(23));
  CHECK(left <= std::chrono::hours(25));
  redis::Connection plain(options("redis://127.0.0.1:" + port("PLAIN") + "/0"));
  plain.connect();
  CHECK_FALSE(plain.peer_certificate().has_value());
}

TEST_CASE("TLS: send and replay through the front end", "[redis][tls]") {
  RedisListStorage storage{tls_url("TLS"), test::unique_layout()};
  DeadLetterQueue<RedisListStorage&> q{storage};
  std::set<std::string> ids;
  for (int i = 0; i < 50; ++i)
    ids.insert(q.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}", "timeout", 1, "w"));
  CHECK(q.size("orders") == 50);
  ReplayOptions o;
  o.record_ids = true;
  const auto report = q.replay("orders", o);
  CHECK(report.replayed == 50);
  CHECK(q.size("orders") == 0);
  CHECK(std::set<std::string>(report.replayed_ids.begin(), report.replayed_ids.end()) == ids);
  // The entries arrived on the source queue, read back over TLS.
  test::RawClient raw(options(tls_url("TLS")));
  CHECK(raw.list(storage.source_key("orders")).size() == 50);
}

TEST_CASE("TLS: 8 threads send through the pool and its shared batches", "[redis][tls]") {
  RedisListOptions layout = test::unique_layout();
  layout.pool.size = 4;
  RedisListStorage storage{tls_url("TLS"), layout};
  DeadLetterQueue<RedisListStorage&> q{storage};
  std::atomic<int> failures{0};
  auto sender = [&] {
    for (int i = 0; i < 200; ++i) {
      try {
        q.send_to_dlq("orders", "{\"i\":" + std::to_string(i) + "}", "e", 1, "w");
      } catch (const std::exception&) {
        ++failures;
      }
    }
  };
  std::thread t1(sender), t2(sender), t3(sender), t4(sender);
  std::thread t5(sender), t6(sender), t7(sender), t8(sender);
  t1.join(), t2.join(), t3.join(), t4.join(), t5.join(), t6.join(), t7.join(), t8.join();
  CHECK(failures == 0);
  CHECK(q.size("orders") == 1600);
}

TEST_CASE("TLS: a pooled connection the server closed is replaced", "[redis][tls]") {
  redis::ConnectionPool pool(options(tls_url("TLS")), redis::PoolOptions{});
  long long id = 0;
  {
    auto lease = pool.acquire();
    lease->run(redis::Command("PING"), redis::Effect::read);
    id = lease->client_id();
  }
  test::RawClient killer(options(tls_url("TLS")));
  killer.cmd({"CLIENT", "KILL", "ID", std::to_string(id)});
  auto lease = pool.acquire();
  auto r = lease->run(redis::Command("PING"), redis::Effect::write);  // a write: never resent
  CHECK(redis::view(*r) == "PONG");
  CHECK(lease->client_id() != id);
}

TEST_CASE("TLS: mutual TLS with the client certificate works", "[redis][tls][mtls]") {
  CHECK(ping(tls_url("MTLS", client_cert())) == "PONG");
  RedisListStorage storage{tls_url("MTLS", client_cert()), test::unique_layout()};
  DeadLetterQueue<RedisListStorage&> q{storage};
  q.send_to_dlq("orders", "{}", "e", 1, "w");
  CHECK(q.size("orders") == 1);
}

TEST_CASE("TLS: mutual TLS without a client certificate is refused, named", "[redis][tls][mtls]") {
  long long ms = 0;
  const auto e = connect_fails(tls_url("MTLS"), ms);
  CHECK(e.cause() == R::client_certificate_required);
  CHECK(says(e, "cert_file= and key_file="));
  CHECK(ms < 1500);
  // Through the storage the same error reaches the caller.
  RedisListStorage storage{tls_url("MTLS"), test::unique_layout()};
  DeadLetterQueue<RedisListStorage&> q{storage};
  try {
    q.send_to_dlq("orders", "{}", "e", 1, "w");
    FAIL("sent without a client certificate");
  } catch (const tls_error& err) {
    CHECK(err.cause() == R::client_certificate_required);
  }
}

TEST_CASE("TLS: a client certificate of another CA is refused, named", "[redis][tls][mtls]") {
  long long ms = 0;
  const auto e = connect_fails(tls_url("MTLS", "&cert_file=" + cert("client-other.crt") +
                                                   "&key_file=" + cert("client-other.key")),
                               ms);
  CHECK(e.cause() == R::client_certificate_rejected);
  CHECK(says(e, "refused this client's certificate"));
  CHECK(ms < 1500);
}

TEST_CASE("TLS: a wrong CA is refused, named", "[redis][tls]") {
  long long ms = 0;
  const std::string url = "rediss://localhost:" + port("TLS") + "?ca_file=" + cert("other-ca.crt");
  const auto e = connect_fails(url, ms);
  CHECK(e.cause() == R::untrusted_certificate);
  CHECK(says(e, "not signed by a CA this client trusts"));
  CHECK(ms < 1500);
  // Without ca_file the system's store is used: it does not know the test CA either.
  CHECK(connect_fails("rediss://localhost:" + port("TLS"), ms).cause() == R::untrusted_certificate);
}

TEST_CASE("TLS: a hostname mismatch is refused, named", "[redis][tls]") {
  long long ms = 0;
  auto e = connect_fails(tls_url("WRONGHOST"), ms);
  CHECK(e.cause() == R::hostname_mismatch);
  CHECK(says(e, "not issued for 'localhost'"));
  CHECK(ms < 1500);
  // The certificate's name as server_name passes the check (same address).
  CHECK(ping(tls_url("WRONGHOST", "&server_name=wrong.example")) == "PONG");
  // A name the certificate of the right server does not carry fails too.
  e = connect_fails(tls_url("TLS", "&server_name=other.example"), ms);
  CHECK(e.cause() == R::hostname_mismatch);
}

TEST_CASE("TLS: an expired certificate is refused, named", "[redis][tls]") {
  long long ms = 0;
  const auto e = connect_fails(tls_url("EXPIRED"), ms);
  CHECK(e.cause() == R::certificate_expired);
  CHECK(says(e, "has expired"));
  CHECK(ms < 1500);
}

TEST_CASE("TLS: insecure_skip_verify accepts any certificate (test setups)", "[redis][tls]") {
  const std::string skip = "&insecure_skip_verify=true";
  CHECK(ping(tls_url("EXPIRED", skip)) == "PONG");
  CHECK(ping(tls_url("WRONGHOST", skip)) == "PONG");
  CHECK(ping("rediss://localhost:" + port("TLS") + "?ca_file=" + cert("other-ca.crt") + skip) ==
        "PONG");
}

TEST_CASE("TLS: a plain-TCP server behind rediss:// fails within the connect timeout",
          "[redis][tls]") {
  // A plain Redis answers a TLS hello with an error when the hello holds a newline byte,
  // and stays silent otherwise (its random bytes decide): both are named, never a hang.
  for (int i = 0; i < 4; ++i) {
    long long ms = 0;
    const auto e = connect_fails(tls_url("PLAIN"), ms);
    INFO(e.what());
    CHECK((e.cause() == R::server_not_tls || e.cause() == R::handshake_timeout));
    CHECK(says(e, "redis://"));
    CHECK(ms < 1500 + 500);
  }
}

TEST_CASE("TLS: a TLS server behind redis:// fails, named, never a hang", "[redis][tls]") {
  long long ms = 0;
  auto o = redis::parse_url("redis://127.0.0.1:" + port("TLS"));
  o.connect_timeout = std::chrono::milliseconds(1500);
  o.reconnect_backoff = std::chrono::milliseconds(20);
  const auto start = std::chrono::steady_clock::now();
  try {
    redis::Connection c(o);
    c.connect();
    FAIL("connected in plain TCP to a TLS port");
  } catch (const tls_error& e) {
    ms = test::elapsed_ms(start);
    CHECK(e.cause() == R::server_requires_tls);
    CHECK(says(e, "use a rediss:// URL"));
  }
  CHECK(ms < 1500);
}

TEST_CASE("TLS: files that cannot be loaded are a configuration error", "[redis][tls]") {
  long long ms = 0;
  auto e = connect_fails("rediss://localhost:" + port("TLS") + "?ca_file=/nonexistent/ca.pem", ms);
  CHECK(e.cause() == R::configuration);
  CHECK(says(e, "/nonexistent/ca.pem"));
  e = connect_fails(
      tls_url("MTLS", "&cert_file=" + cert("client.crt") + "&key_file=" + cert("other-ca.key")),
      ms);
  CHECK(e.cause() == R::configuration);
  CHECK(says(e, "does not belong to"));
}

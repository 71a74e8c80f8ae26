// Redis URL parsing: every accepted form, and typed errors that never show the password.
#include <string>

#include "dlq/redis/options.hpp"
#include "support/catch.hpp"

using dlq::redis::parse_url;

TEST_CASE("a plain redis URL gives host, port and db", "[redis][url]") {
  auto o = parse_url("redis://10.1.2.3:6380/4");
  CHECK(o.host == "10.1.2.3");
  CHECK(o.port == 6380);
  CHECK(o.db == 4);
  CHECK(o.password.empty());
  CHECK(o.user.empty());
  CHECK(o.unix_socket.empty());
  CHECK(o.endpoint() == "10.1.2.3:6380/4");
}

TEST_CASE("defaults apply when port and db are left out", "[redis][url]") {
  auto o = parse_url("redis://localhost");
  CHECK(o.host == "localhost");
  CHECK(o.port == 6379);
  CHECK(o.db == 0);
  CHECK(parse_url("redis://localhost/").db == 0);
  CHECK(parse_url("redis://[::1]:7000/2").host == "::1");
  CHECK(parse_url("redis://[::1]:7000/2").port == 7000);
  CHECK(parse_url("redis://[::1]:7000/2").endpoint() == "[::1]:7000/2");
}

TEST_CASE("user and password are read and percent-decoded", "[redis][url]") {
  auto o = parse_url("redis://worker:p%40ss%2Fw:rd@host:1/0");
  CHECK(o.user == "worker");
  CHECK(o.password == "p@ss/w:rd");
  auto p = parse_url("redis://:only-password@host");
  CHECK(p.user.empty());
  CHECK(p.password == "only-password");
  auto q = parse_url("redis://pw/with@slash@host:2");  // TCP: the last '@' ends the user info
  CHECK(q.password == "pw/with@slash");
  CHECK(q.host == "host");
  CHECK(q.port == 2);
}

TEST_CASE("unix socket URLs in both spellings", "[redis][url]") {
  auto o = parse_url("unix:///var/run/redis/redis.sock?db=3");
  CHECK(o.unix_socket == "/var/run/redis/redis.sock");
  CHECK(o.db == 3);
  CHECK(o.endpoint() == "unix:/var/run/redis/redis.sock/3");
  auto p = parse_url("redis+unix:///tmp/r.sock?db=1&password=s3cret&user=bob");
  CHECK(p.unix_socket == "/tmp/r.sock");
  CHECK(p.db == 1);
  CHECK(p.password == "s3cret");
  CHECK(p.user == "bob");
  auto q = parse_url("unix://bob:pw@/tmp/r.sock");
  CHECK(q.user == "bob");
  CHECK(q.password == "pw");
  CHECK(q.unix_socket == "/tmp/r.sock");
}

TEST_CASE("bad URLs are invalid_argument naming the problem, never the password", "[redis][url]") {
  const char* bad[] = {"",
                       "http://host",
                       "rediss://host?cert_file=/c.pem",
                       "redis://",
                       "redis://host:",
                       "redis://host:0",
                       "redis://host:65536",
                       "redis://host:abc",
                       "redis://host/notanumber",
                       "redis://host/-1",
                       "redis://[::1",
                       "unix://relative/path",
                       "unix:///p?db=x",
                       "unix:///p?color=blue",
                       "redis://u:topsecret@host:99999",
                       "redis://u:topsecret@host/x%zz",
                       "redis+unix:///p?password=topsecret&db=oops"};
  for (const char* url : bad) {
    INFO(url);
    try {
      parse_url(url);
      FAIL("accepted");
    } catch (const dlq::invalid_argument& e) {
      const std::string m = e.what();
      CHECK(m.rfind("[dlq.redis] ", 0) == 0);
      CHECK(m.find("topsecret") == std::string::npos);
      CHECK(m.find("expected redis://") != std::string::npos);
    }
  }
}

TEST_CASE("is_url tells the schemes parse_url takes, and only those", "[redis][url]") {
  // One list of schemes (detail::url_schemes): dlqctl and the worker example ask is_url
  // which store URLs are Redis ones, so rediss:// (TLS) is one wherever parse_url takes it.
  for (const char* url : {"redis://h", "rediss://h:6380?ca_file=/ca.pem", "unix:///s.sock",
                          "redis+unix:///s.sock"}) {
    INFO(url);
    CHECK(dlq::redis::is_url(url));
    CHECK_NOTHROW(parse_url(url));
  }
  CHECK(parse_url("rediss://h:6380?ca_file=/ca.pem").tls.enabled);
  CHECK_FALSE(parse_url("redis://h").tls.enabled);
  for (const char* url : {"", "sqlite:///x.db", "http://h", "redis:/h", "redisss://h",
                          "REDIS://h", "xredis://h", "memory:"}) {
    INFO(url);
    CHECK_FALSE(dlq::redis::is_url(url));
    CHECK_THROWS_AS(parse_url(url), dlq::invalid_argument);  // "unknown scheme"
  }
  for (const dlq::redis::detail::UrlScheme& s : dlq::redis::detail::url_schemes) {
    INFO(s.prefix);  // the forms messages list name every scheme
    CHECK(dlq::redis::url_forms.find(s.prefix) != std::string_view::npos);
  }
}

TEST_CASE("option defaults are as documented", "[redis][url]") {
  dlq::redis::ConnectionOptions o;
  CHECK(o.connect_timeout.count() == 1000);
  CHECK(o.command_timeout.count() == 2000);
  CHECK(o.keepalive);
  CHECK(o.reconnect_attempts == 4);
  dlq::redis::PoolOptions p;
  CHECK(p.size == 8);
  CHECK(p.wait_timeout.count() == 5000);
}

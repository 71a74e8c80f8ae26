// A build without OpenSSL (this target links hiredis, not OpenSSL, and has no DLQ_REDIS_TLS):
// rediss:// parses, and connecting fails with dlq::tls_error (not_built) saying to build with
// OpenSSL — before any byte is sent, never falling back to plain TCP.
#include <string>

#include "dlq/redis/connection.hpp"
#include "support/catch.hpp"

static_assert(!dlq::redis::tls_available(), "this test must be built without OpenSSL");

TEST_CASE("without OpenSSL, rediss:// is refused with what to do", "[redis][tls]") {
  auto o = dlq::redis::parse_url("rediss://127.0.0.1:1/0?ca_file=/ca.pem");
  CHECK(o.tls.enabled);
  dlq::redis::Connection c(o);  // port 1: nothing listens, but no connect is even tried
  try {
    c.connect();
    FAIL("connected");
  } catch (const dlq::tls_error& e) {
    CHECK(e.cause() == dlq::tls_error::reason::not_built);
    CHECK(std::string(e.what()).find("build with OpenSSL") != std::string::npos);
  }
  CHECK(c.connect_count() == 0);
}

// The TLS decisions without a server: rediss:// URLs and their options, and how a failed TLS
// connect becomes a dlq::tls_error (redis/detail/tls_diagnosis.hpp) — cause and message.
#include <string>

#include "dlq/redis/detail/tls_diagnosis.hpp"
#include "dlq/redis/options.hpp"
#include "support/catch.hpp"

using dlq::tls_error;
using dlq::redis::parse_url;
using dlq::redis::detail::tls_error_of;
using dlq::redis::detail::TlsFailure;
namespace x509 = dlq::redis::detail::x509_result;
namespace alert = dlq::redis::detail::tls_alert;
using R = tls_error::reason;

TEST_CASE("rediss:// turns TLS on with verification; redis:// leaves it off", "[redis][tls][url]") {
  const auto o = parse_url("rediss://u:pw@cache.example.com:6380/3");
  CHECK(o.tls.enabled);
  CHECK_FALSE(o.tls.insecure_skip_verify);
  CHECK(o.tls.ca_file.empty());
  CHECK(o.tls.server_name.empty());
  CHECK(o.host == "cache.example.com");
  CHECK(o.port == 6380);
  CHECK(o.db == 3);
  CHECK(o.user == "u");
  CHECK(o.password == "pw");
  CHECK(parse_url("rediss://h").port == 6379);
  CHECK_FALSE(parse_url("redis://h").tls.enabled);
}

TEST_CASE("rediss:// parameters set the TLS options, %-decoded", "[redis][tls][url]") {
  const auto o = parse_url(
      "rediss://h:1?ca_file=/etc/ca%20s.pem&ca_dir=/etc/cas&cert_file=/c.pem&key_file=/k.pem"
      "&server_name=redis.internal&db=2");
  CHECK(o.tls.ca_file == "/etc/ca s.pem");
  CHECK(o.tls.ca_dir == "/etc/cas");
  CHECK(o.tls.cert_file == "/c.pem");
  CHECK(o.tls.key_file == "/k.pem");
  CHECK(o.tls.server_name == "redis.internal");
  CHECK(o.db == 2);
  CHECK(parse_url("rediss://h?insecure_skip_verify=true").tls.insecure_skip_verify);
  CHECK(parse_url("rediss://h?insecure_skip_verify=1").tls.insecure_skip_verify);
  CHECK_FALSE(parse_url("rediss://h?insecure_skip_verify=false").tls.insecure_skip_verify);
}

TEST_CASE("TLS settings that cannot work are invalid_argument naming the fix",
          "[redis][tls][url]") {
  struct Case {
    const char* url;
    const char* says;
  };
  const Case cases[] = {
      {"redis://h?ca_file=/ca.pem", "use rediss://"},  // never a silent plain connection
      {"redis://h?insecure_skip_verify=true", "use rediss://"},
      {"unix:///s.sock?cert_file=/c.pem", "use rediss://"},
      {"rediss://h?cert_file=/c.pem", "cert_file without key_file"},
      {"rediss://h?key_file=/k.pem", "key_file without cert_file"},
      {"rediss://h?insecure_skip_verify=maybe", "insecure_skip_verify must be true or false"},
      {"rediss://h?ca_file=", "ca_file is empty"},
      {"rediss://h?verify=none", "insecure_skip_verify"},  // the known names are listed
  };
  for (const Case& c : cases) {
    INFO(c.url);
    try {
      parse_url(c.url);
      FAIL("accepted");
    } catch (const dlq::invalid_argument& e) {
      CHECK(std::string(e.what()).find(c.says) != std::string::npos);
    }
  }
}

TEST_CASE("tls_problem checks options built in code as parse_url does", "[redis][tls]") {
  dlq::redis::ConnectionOptions o;
  CHECK(dlq::redis::detail::tls_problem(o).empty());  // TLS off: nothing to check
  o.tls.enabled = true;
  CHECK(dlq::redis::detail::tls_problem(o).empty());
  o.tls.key_file = "/k.pem";
  CHECK(dlq::redis::detail::tls_problem(o).find("key_file without cert_file") != std::string::npos);
  o.tls.cert_file = "/c.pem";
  CHECK(dlq::redis::detail::tls_problem(o).empty());
  o.unix_socket = "/s.sock";
  CHECK(dlq::redis::detail::tls_problem(o).find("unix socket") != std::string::npos);
}

namespace {
tls_error classify(const TlsFailure& f) {
  return tls_error_of(f, "cache:6380", "cache.example.com", std::chrono::milliseconds(700));
}
bool says(const tls_error& e, const std::string& text) {
  return std::string(e.what()).find(text) != std::string::npos;
}
}  // namespace

TEST_CASE("a certificate check that failed names the certificate's problem", "[redis][tls]") {
  TlsFailure f;
  f.verify_result = x509::cert_has_expired;
  f.verify_text = "certificate has expired";
  auto e = classify(f);
  CHECK(e.cause() == R::certificate_expired);
  CHECK(says(e, "[dlq.redis] cache:6380 (TLS): the server's certificate has expired"));
  CHECK(says(e, "renew the server's certificate"));

  f.verify_result = x509::cert_not_yet_valid;
  CHECK(classify(f).cause() == R::certificate_not_yet_valid);

  for (long r : {x509::hostname_mismatch, x509::ip_address_mismatch}) {
    f.verify_result = r;
    e = classify(f);
    CHECK(e.cause() == R::hostname_mismatch);
    CHECK(says(e, "not issued for 'cache.example.com'"));
    CHECK(says(e, "server_name="));
    CHECK(says(e, "insecure_skip_verify=true"));
    CHECK(says(e, "test setups only"));
  }
  for (long r : {x509::unable_to_get_issuer_cert_locally, x509::self_signed_cert_in_chain,
                 x509::depth_zero_self_signed_cert, x509::unable_to_verify_leaf_signature,
                 x509::cert_untrusted, x509::unable_to_get_issuer_cert}) {
    f.verify_result = r;
    e = classify(f);
    CHECK(e.cause() == R::untrusted_certificate);
    CHECK(says(e, "not signed by a CA this client trusts"));
    CHECK(says(e, "ca_file="));
  }
  f.verify_result = 50;  // X509_V_ERR_APPLICATION_VERIFICATION: no rule of its own
  f.verify_text = "application verification failure";
  e = classify(f);
  CHECK(e.cause() == R::handshake_failed);
  CHECK(says(e, "application verification failure"));
}

TEST_CASE("a certificate problem wins over what followed it", "[redis][tls]") {
  TlsFailure f;  // the client refused the server, then the connection broke
  f.verify_result = x509::cert_has_expired;
  f.alert = alert::handshake_failure;
  f.not_tls = true;
  CHECK(classify(f).cause() == R::certificate_expired);
}

TEST_CASE("non-TLS bytes and silence tell a plain-TCP server", "[redis][tls]") {
  TlsFailure f;
  f.not_tls = true;
  f.library_text = "wrong version number";
  auto e = classify(f);
  CHECK(e.cause() == R::server_not_tls);
  CHECK(says(e, "speaks plain TCP on this port"));
  CHECK(says(e, "redis://"));

  TlsFailure silent;
  silent.timed_out = true;
  e = classify(silent);
  CHECK(e.cause() == R::handshake_timeout);
  CHECK(says(e, "no answer to the TLS handshake within 700 ms"));
  CHECK(says(e, "redis://"));
}

TEST_CASE("the server's alerts tell a missing or refused client certificate", "[redis][tls]") {
  TlsFailure f;
  f.alert = alert::certificate_required;  // TLS 1.3
  auto e = classify(f);
  CHECK(e.cause() == R::client_certificate_required);
  CHECK(says(e, "requires a client certificate"));
  CHECK(says(e, "cert_file= and key_file="));
  f.alert = alert::handshake_failure;  // TLS 1.2 says it this way
  CHECK(classify(f).cause() == R::client_certificate_required);

  f.client_cert_given = true;
  for (int a : {alert::unknown_ca, alert::bad_certificate, alert::certificate_expired,
                alert::certificate_unknown, alert::decrypt_error, alert::certificate_required}) {
    f.alert = a;
    e = classify(f);
    CHECK(e.cause() == R::client_certificate_rejected);
    CHECK(says(e, "refused this client's certificate"));
  }
  f.alert = alert::handshake_failure;  // with a certificate: no cipher in common, say
  CHECK(classify(f).cause() == R::handshake_failed);
}

TEST_CASE("tls_error is a connection_error that is never an outcome_unknown", "[redis][tls]") {
  TlsFailure f;
  f.library_text = "something odd";
  const auto e = classify(f);
  const dlq::connection_error& base = e;
  CHECK_FALSE(base.outcome_unknown());
  CHECK(e.cause() == R::handshake_failed);
  CHECK(says(e, "(something odd)"));
}

TEST_CASE("the first bytes of an answer tell TLS from RESP", "[redis][tls]") {
  using dlq::redis::detail::looks_like_tls;
  CHECK(looks_like_tls(std::string("\x15\x03\x03\x00\x02", 5)));  // an alert
  CHECK(looks_like_tls(std::string("\x16\x03\x01", 3)));          // a handshake
  CHECK_FALSE(looks_like_tls("-ERR unknown command"));
  CHECK_FALSE(looks_like_tls(":1\r\n"));
  CHECK_FALSE(looks_like_tls(std::string("\x16", 1)));
  CHECK_FALSE(looks_like_tls(""));
}

TEST_CASE("the other TLS errors say what to do", "[redis][tls]") {
  using namespace dlq::redis::detail;
  const auto nb = tls_not_built_error("h:1");
  CHECK(nb.cause() == R::not_built);
  CHECK(says(nb, "build with OpenSSL"));
  CHECK(says(nb, "libssl-dev"));
  const auto cfg =
      tls_configuration_error("h:1", "cannot load the client key '/k.pem'", "no such file");
  CHECK(cfg.cause() == R::configuration);
  CHECK(says(cfg, "cannot load the client key '/k.pem' (no such file)"));
  const auto plain = server_requires_tls_error("h:1", false);
  CHECK(plain.cause() == R::server_requires_tls);
  CHECK(says(plain, "use a rediss:// URL"));
  CHECK(says(server_requires_tls_error("h:1", true), "answered in TLS"));
}

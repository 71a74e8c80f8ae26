// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/detail/tls_diagnosis.hpp
/// The one place where a failed TLS connection becomes a dlq::tls_error: which cause, and
/// what the message tells the user to do. I/O-free and OpenSSL-free (the TLS transport,
/// redis/detail/tls_openssl.hpp, gathers the facts into a TlsFailure; tests build
/// TlsFailure values without a server), so the blocking connection, and later the
/// asynchronous one and `dlqctl doctor`, classify alike.
///
/// | fact (first that applies)                          | cause                        |
/// | -------------------------------------------------- | ---------------------------- |
/// | verify result 10 (expired)                         | certificate_expired          |
/// | verify result 9 (not yet valid)                    | certificate_not_yet_valid    |
/// | verify result 62/64 (host / IP mismatch)           | hostname_mismatch            |
/// | verify result 2/18/19/20/21/27 (no trusted chain)  | untrusted_certificate        |
/// | any other verify result                            | handshake_failed             |
/// | the server answered with non-TLS bytes             | server_not_tls               |
/// | alert 116, or alert 40 with no client certificate  | client_certificate_required  |
/// | alert 42-46/48/49/51 with a client certificate     | client_certificate_rejected  |
/// | no answer within the connect timeout               | handshake_timeout            |
/// | anything else                                      | handshake_failed             |
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "dlq/errors.hpp"

namespace dlq::redis::detail {

/// X.509 verify results (OpenSSL's X509_V_ERR_* values; tls_openssl.hpp checks them).
namespace x509_result {
constexpr long ok = 0;
constexpr long unable_to_get_issuer_cert = 2;
constexpr long cert_not_yet_valid = 9;
constexpr long cert_has_expired = 10;
constexpr long depth_zero_self_signed_cert = 18;
constexpr long self_signed_cert_in_chain = 19;
constexpr long unable_to_get_issuer_cert_locally = 20;
constexpr long unable_to_verify_leaf_signature = 21;
constexpr long cert_untrusted = 27;
constexpr long hostname_mismatch = 62;
constexpr long ip_address_mismatch = 64;
}  // namespace x509_result

/// TLS alert descriptions (RFC 8446 section 6) the diagnosis looks at.
namespace tls_alert {
constexpr int handshake_failure = 40;
constexpr int bad_certificate = 42;
constexpr int unsupported_certificate = 43;
constexpr int certificate_revoked = 44;
constexpr int certificate_expired = 45;
constexpr int certificate_unknown = 46;
constexpr int unknown_ca = 48;
constexpr int access_denied = 49;
constexpr int decrypt_error = 51;
constexpr int certificate_required = 116;
}  // namespace tls_alert

/// What is known about a failed TLS connect (or its first exchange: with TLS 1.3 a server
/// refuses a client certificate only after the client finished its handshake).
struct TlsFailure {
  long verify_result = x509_result::ok;  ///< the check of the server's chain; 0 = passed
  std::string verify_text;               ///< OpenSSL's text for verify_result
  int alert = -1;                        ///< the alert the server sent; -1 = none
  bool not_tls = false;                  ///< the server answered with bytes that are not TLS
  bool timed_out = false;                ///< no answer within the connect timeout
  bool client_cert_given = false;        ///< a client certificate was offered
  std::string library_text;              ///< OpenSSL's error text (for the message)
};

inline std::string tls_where(const std::string& endpoint) {
  return endpoint + " (TLS)";
}

inline dlq::tls_error make_tls_error(const std::string& endpoint, dlq::tls_error::reason cause,
                                     const std::string& what, const std::string& hint) {
  return dlq::tls_error(dlq::detail::message("redis", tls_where(endpoint), what, hint), cause);
}

/// The error for a failed check of the server's certificate (f.verify_result != 0); empty
/// when the check passed.
inline std::optional<dlq::tls_error> certificate_error_of(const TlsFailure& f,
                                                          const std::string& endpoint,
                                                          const std::string& server_name) {
  using R = dlq::tls_error::reason;
  auto make = [&](R cause, const std::string& what, const std::string& hint) {
    return std::optional<dlq::tls_error>(make_tls_error(endpoint, cause, what, hint));
  };
  const std::string skip = " (insecure_skip_verify=true turns the check off: for test setups only)";
  const std::string details = f.verify_text.empty() ? std::string() : " (" + f.verify_text + ")";
  switch (f.verify_result) {
    case x509_result::ok:
      return std::nullopt;
    case x509_result::cert_has_expired:
      return make(R::certificate_expired, "the server's certificate has expired" + details,
                  "renew the server's certificate (tls-cert-file), and check this machine's "
                  "clock");
    case x509_result::cert_not_yet_valid:
      return make(R::certificate_not_yet_valid,
                  "the server's certificate is not valid yet" + details,
                  "check the clocks of this machine and of the server");
    case x509_result::hostname_mismatch:
    case x509_result::ip_address_mismatch:
      return make(R::hostname_mismatch,
                  "the server's certificate is not issued for '" + server_name + "'" + details,
                  "connect with a host name the certificate lists, or set server_name= "
                  "(TlsOptions::server_name) to one" +
                      skip);
    case x509_result::unable_to_get_issuer_cert:
    case x509_result::depth_zero_self_signed_cert:
    case x509_result::self_signed_cert_in_chain:
    case x509_result::unable_to_get_issuer_cert_locally:
    case x509_result::unable_to_verify_leaf_signature:
    case x509_result::cert_untrusted:
      return make(R::untrusted_certificate,
                  "the server's certificate is not signed by a CA this client trusts" + details,
                  "give the CA that signed it with ca_file= or ca_dir= (TlsOptions::ca_file, "
                  "ca_dir); without them the system's trust store is used" +
                      skip);
    default:
      return make(R::handshake_failed,
                  "the server's certificate was refused" +
                      (details.empty() ? " (verify result " + std::to_string(f.verify_result) + ")"
                                       : details),
                  "fix the server's certificate" + skip);
  }
}

/// The error for a failed TLS connection. `server_name`: the name the certificate was
/// checked against; `limit`: the connect timeout.
inline dlq::tls_error tls_error_of(const TlsFailure& f, const std::string& endpoint,
                                   const std::string& server_name,
                                   std::chrono::milliseconds limit) {
  using R = dlq::tls_error::reason;
  if (auto e = certificate_error_of(f, endpoint, server_name)) return *e;
  auto make = [&](R cause, const std::string& what, const std::string& hint) {
    return make_tls_error(endpoint, cause, what, hint);
  };
  if (f.not_tls) {
    return make(R::server_not_tls,
                "the server answered the TLS handshake with bytes that are not TLS: it speaks "
                "plain TCP on this port",
                "use a redis:// URL for it, or the server's TLS port (tls-port)");
  }
  const bool cert_alert =
      f.alert == tls_alert::bad_certificate || f.alert == tls_alert::unsupported_certificate ||
      f.alert == tls_alert::certificate_revoked || f.alert == tls_alert::certificate_expired ||
      f.alert == tls_alert::certificate_unknown || f.alert == tls_alert::unknown_ca ||
      f.alert == tls_alert::access_denied || f.alert == tls_alert::decrypt_error;
  if (!f.client_cert_given &&
      (f.alert == tls_alert::certificate_required || f.alert == tls_alert::handshake_failure)) {
    return make(R::client_certificate_required,
                "the server requires a client certificate (mutual TLS) and none was given",
                "give this client's certificate and key with cert_file= and key_file= "
                "(TlsOptions::cert_file, key_file), signed by a CA the server trusts "
                "(tls-ca-cert-file)");
  }
  if (f.client_cert_given && (cert_alert || f.alert == tls_alert::certificate_required)) {
    return make(R::client_certificate_rejected,
                "the server refused this client's certificate (TLS alert " +
                    std::to_string(f.alert) +
                    (f.library_text.empty() ? std::string() : ": " + f.library_text) + ")",
                "use a client certificate signed by a CA the server trusts (its "
                "tls-ca-cert-file), valid now, with the clientAuth usage");
  }
  if (f.timed_out) {
    return make(R::handshake_timeout,
                "no answer to the TLS handshake within " + std::to_string(limit.count()) + " ms",
                "a plain-TCP Redis stays silent on a TLS handshake: if the server speaks plain "
                "TCP on this port use redis://; else it is frozen or overloaded (or raise "
                "ConnectionOptions::connect_timeout)");
  }
  return make(R::handshake_failed,
              "the TLS handshake failed" +
                  (f.library_text.empty() ? std::string() : " (" + f.library_text + ")"),
              "check the server's TLS settings (tls-port, tls-protocols) against this "
              "client's options");
}

/// The error for TLS asked of a build without it.
inline dlq::tls_error tls_not_built_error(const std::string& endpoint) {
  return dlq::tls_error(
      dlq::detail::message("redis", tls_where(endpoint),
                           "TLS (rediss://, TlsOptions::enabled) is not available: this build "
                           "of dlq has no OpenSSL",
                           "build with OpenSSL (Debian: apt-get install libssl-dev, then "
                           "configure with -DDLQ_WITH_TLS=ON)"),
      dlq::tls_error::reason::not_built);
}

/// The error for a CA, certificate or key that could not be loaded or does not fit.
/// `what`: e.g. "cannot load the client certificate '/etc/dlq/client.pem'".
inline dlq::tls_error tls_configuration_error(const std::string& endpoint, const std::string& what,
                                              const std::string& library_text) {
  return dlq::tls_error(
      dlq::detail::message(
          "redis", tls_where(endpoint),
          what + (library_text.empty() ? std::string() : " (" + library_text + ")"),
          "check the path, that this process may read it, and that it is PEM"),
      dlq::tls_error::reason::configuration);
}

/// True when `bytes` (the start of a server's answer) are a TLS record header: a handshake
/// (22) or alert (21) record of version 3.x. A plain-TCP Redis never answers with them.
inline bool looks_like_tls(std::string_view bytes) {
  return bytes.size() >= 2 && (bytes[0] == '\x15' || bytes[0] == '\x16') && bytes[1] == '\x03';
}

/// The error for a plain-TCP connection to a server that speaks TLS only. `answered_tls`:
/// it answered with a TLS record; else it closed every new connection at its first command
/// without a word, as a Redis tls-port does.
inline dlq::tls_error server_requires_tls_error(const std::string& endpoint, bool answered_tls) {
  return dlq::tls_error(
      dlq::detail::message(
          "redis", endpoint,
          answered_tls ? "the server answered in TLS: it accepts only TLS on this port"
                       : "the server closed every new connection at its first command without "
                         "an answer: it most likely accepts only TLS on this port",
          "use a rediss:// URL (TlsOptions::enabled) for it, or the server's plain port"),
      dlq::tls_error::reason::server_requires_tls);
}

}  // namespace dlq::redis::detail

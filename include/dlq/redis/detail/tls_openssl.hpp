// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/detail/tls_openssl.hpp
/// TLS for the blocking Redis connection over OpenSSL (1.1.1 or 3.x): TlsContext (the
/// trust store and client certificate of one set of TlsOptions) and TlsTransport (one TLS
/// stream over a socket dlq connected, redis/detail/transport.hpp).
///
/// Only dlq::redis includes this header, and only when it was configured with TLS
/// (DLQ_REDIS_TLS=1, set by CMake when OpenSSL is found; see docs/redis.md). The core
/// never includes OpenSSL.
///
/// - Verification: SSL_VERIFY_PEER against TlsOptions' CA file/dir (else the system's
///   store), and the host name (or IP address) checked by OpenSSL itself (SSL_set1_host /
///   X509_VERIFY_PARAM_set1_ip_asc); TLS 1.2 at least. insecure_skip_verify turns both off.
/// - The handshake runs on the non-blocking socket, bounded by the connect deadline; then
///   the socket is blocking again with the command timeout (SO_RCVTIMEO/SO_SNDTIMEO).
/// - The socket is written with send(MSG_NOSIGNAL) through dlq's own BIO, so a closed peer
///   never raises SIGPIPE in the caller's process; it is read with read-ahead (a record in
///   one recv, not its header and then its body).
/// - Every failure is classified once, by tls_diagnosis.hpp; this file only gathers facts.
#pragma once

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "dlq/redis/detail/tls_diagnosis.hpp"
#include "dlq/redis/detail/transport.hpp"
#include "dlq/redis/options.hpp"

namespace dlq::redis::detail {

static_assert(x509_result::cert_has_expired == X509_V_ERR_CERT_HAS_EXPIRED, "OpenSSL value");
static_assert(x509_result::cert_not_yet_valid == X509_V_ERR_CERT_NOT_YET_VALID, "OpenSSL value");
static_assert(x509_result::hostname_mismatch == X509_V_ERR_HOSTNAME_MISMATCH, "OpenSSL value");
static_assert(x509_result::ip_address_mismatch == X509_V_ERR_IP_ADDRESS_MISMATCH, "OpenSSL value");
static_assert(x509_result::unable_to_get_issuer_cert_locally ==
                  X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
              "OpenSSL value");
static_assert(x509_result::depth_zero_self_signed_cert == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT,
              "OpenSSL value");
static_assert(x509_result::self_signed_cert_in_chain == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
              "OpenSSL value");
static_assert(x509_result::unable_to_verify_leaf_signature ==
                  X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE,
              "OpenSSL value");
static_assert(x509_result::cert_untrusted == X509_V_ERR_CERT_UNTRUSTED, "OpenSSL value");
static_assert(x509_result::unable_to_get_issuer_cert == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT,
              "OpenSSL value");
static_assert(tls_alert::certificate_required == 116 && SSL_AD_HANDSHAKE_FAILURE == 40 &&
                  SSL_AD_UNKNOWN_CA == tls_alert::unknown_ca,
              "TLS alert values");

/// What OpenSSL's error queue says (the queue is emptied).
struct SslErrors {
  std::string text;      ///< the first error's reason text
  int alert = -1;        ///< an alert received from the peer
  bool not_tls = false;  ///< the peer's bytes are not TLS records
};

inline SslErrors drain_ssl_errors() {
  SslErrors e;
  for (unsigned long code = ERR_get_error(); code != 0; code = ERR_get_error()) {
    if (e.text.empty()) {
      const char* r = ERR_reason_error_string(code);
      e.text = r != nullptr ? r : "error " + std::to_string(code);
    }
    if (ERR_GET_LIB(code) != ERR_LIB_SSL) continue;
    const int reason = ERR_GET_REASON(code);
    if (reason > SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256) {
      e.alert = reason - SSL_AD_REASON_OFFSET;
    }
    if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
        reason == SSL_R_UNKNOWN_PROTOCOL || reason == SSL_R_HTTP_REQUEST ||
        reason == SSL_R_RECORD_LENGTH_MISMATCH) {
      e.not_tls = true;
    }
  }
  return e;
}

// dlq's socket BIO: recv/send(MSG_NOSIGNAL) on the descriptor kept as the BIO's data.
inline int bio_fd(BIO* b) {
  return static_cast<int>(reinterpret_cast<std::intptr_t>(BIO_get_data(b)));
}
inline int dlq_tls_bio_write(BIO* b, const char* p, int n) {
  BIO_clear_retry_flags(b);
  for (;;) {
    const ssize_t k = ::send(bio_fd(b), p, static_cast<std::size_t>(n), MSG_NOSIGNAL);
    if (k >= 0) return static_cast<int>(k);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(b);
    return -1;
  }
}
inline int dlq_tls_bio_read(BIO* b, char* p, int n) {
  BIO_clear_retry_flags(b);
  for (;;) {
    const ssize_t k = ::recv(bio_fd(b), p, static_cast<std::size_t>(n), 0);
    if (k >= 0) return static_cast<int>(k);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(b);
    return -1;
  }
}
inline long dlq_tls_bio_ctrl(BIO*, int cmd, long, void*) {
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}
inline int dlq_tls_bio_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

/// The BIO method (made once per process; never freed).
inline BIO_METHOD* socket_bio_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "dlq socket");
    if (m != nullptr) {
      BIO_meth_set_write(m, dlq_tls_bio_write);
      BIO_meth_set_read(m, dlq_tls_bio_read);
      BIO_meth_set_ctrl(m, dlq_tls_bio_ctrl);
      BIO_meth_set_create(m, dlq_tls_bio_create);
    }
    return m;
  }();
  return method;
}

/// An X509 name as RFC 2253 text ("CN=localhost,O=Example"); "" when it cannot be printed.
inline std::string x509_name_text(const X509_NAME* name) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  if (bio == nullptr || name == nullptr) return {};
  if (X509_NAME_print_ex(bio.get(), name, 0, XN_FLAG_RFC2253) < 0) return {};
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return n > 0 && data != nullptr ? std::string(data, static_cast<std::size_t>(n)) : std::string();
}

/// Subject, issuer and expiry of `cert`.
inline PeerCertificate peer_certificate_of(const X509* cert) {
  PeerCertificate p;
  p.subject = x509_name_text(X509_get_subject_name(cert));
  p.issuer = x509_name_text(X509_get_issuer_name(cert));
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) == 1) {
    p.not_after = std::chrono::system_clock::from_time_t(::timegm(&tm));
  }
  return p;
}

struct SslCtxDeleter {
  void operator()(SSL_CTX* c) const noexcept { SSL_CTX_free(c); }
};
struct SslDeleter {
  void operator()(SSL* s) const noexcept { SSL_free(s); }
};

/// The trust store, client certificate and protocol settings of one TlsOptions: loaded once
/// per Connection (on its first connect) and used for every reconnect.
class TlsContext {
 public:
  /// Loads the CA file/dir (else the system's store) and the client certificate and key.
  /// @throws dlq::tls_error (cause configuration) naming the file that could not be loaded.
  static std::shared_ptr<TlsContext> make(const TlsOptions& t, const std::string& endpoint) {
    ERR_clear_error();
    std::unique_ptr<SSL_CTX, SslCtxDeleter> ctx(SSL_CTX_new(TLS_client_method()));
    if (ctx == nullptr) {
      throw tls_configuration_error(endpoint, "cannot create a TLS context",
                                    drain_ssl_errors().text);
    }
    SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
    SSL_CTX_set_mode(ctx.get(), SSL_MODE_AUTO_RETRY);
    // A record in one recv() instead of two (its 5-byte header, then its body): one system
    // call less per reply. Records read ahead and not yet processed are seen by idle().
    SSL_CTX_set_read_ahead(ctx.get(), 1);
    SSL_CTX_set_verify(ctx.get(), t.insecure_skip_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER,
                       nullptr);
    if (!t.ca_file.empty() || !t.ca_dir.empty()) {
      if (SSL_CTX_load_verify_locations(ctx.get(), t.ca_file.empty() ? nullptr : t.ca_file.c_str(),
                                        t.ca_dir.empty() ? nullptr : t.ca_dir.c_str()) != 1) {
        throw tls_configuration_error(
            endpoint,
            "cannot load the CA certificates " +
                (t.ca_file.empty() ? "directory '" + t.ca_dir + "'" : "'" + t.ca_file + "'"),
            drain_ssl_errors().text);
      }
    } else if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
      throw tls_configuration_error(endpoint, "cannot load the system's CA certificates",
                                    drain_ssl_errors().text);
    }
    if (!t.cert_file.empty()) {
      if (SSL_CTX_use_certificate_chain_file(ctx.get(), t.cert_file.c_str()) != 1) {
        throw tls_configuration_error(endpoint,
                                      "cannot load the client certificate '" + t.cert_file + "'",
                                      drain_ssl_errors().text);
      }
      if (SSL_CTX_use_PrivateKey_file(ctx.get(), t.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
        const SslErrors errors = drain_ssl_errors();
        if (errors.text.find("key values mismatch") != std::string::npos) {
          throw tls_configuration_error(
              endpoint, "the key '" + t.key_file + "' does not belong to '" + t.cert_file + "'",
              errors.text);
        }
        throw tls_configuration_error(endpoint, "cannot load the client key '" + t.key_file + "'",
                                      errors.text);
      }
      if (SSL_CTX_check_private_key(ctx.get()) != 1) {
        throw tls_configuration_error(
            endpoint, "the key '" + t.key_file + "' does not belong to '" + t.cert_file + "'",
            drain_ssl_errors().text);
      }
    }
    auto out = std::make_shared<TlsContext>();
    out->ctx_ = std::move(ctx);
    out->client_cert_ = !t.cert_file.empty();
    return out;
  }

  SSL_CTX* get() const noexcept { return ctx_.get(); }
  bool client_cert() const noexcept { return client_cert_; }

 private:
  std::unique_ptr<SSL_CTX, SslCtxDeleter> ctx_;
  bool client_cert_ = false;
};

/// One TLS stream over a connected socket.
class TlsTransport final : public Transport {
 public:
  /// Runs the TLS handshake on `fd` (connected by connect_socket) until `deadline`.
  /// @throws dlq::tls_error (tls_diagnosis.hpp), dlq::connection_error when the socket fails.
  static std::unique_ptr<TlsTransport> connect(std::shared_ptr<TlsContext> ctx, Fd fd,
                                               const ConnectionOptions& o,
                                               const std::string& endpoint,
                                               std::chrono::steady_clock::time_point deadline) {
    ERR_clear_error();
    std::unique_ptr<TlsTransport> t(new TlsTransport(std::move(ctx), std::move(fd)));
    SSL* ssl = SSL_new(t->ctx_->get());
    BIO* bio = BIO_new(socket_bio_method());
    if (ssl == nullptr || bio == nullptr) {
      if (ssl != nullptr) SSL_free(ssl);
      if (bio != nullptr) BIO_free(bio);
      throw tls_configuration_error(endpoint, "cannot create a TLS session",
                                    drain_ssl_errors().text);
    }
    t->ssl_.reset(ssl);
    BIO_set_data(bio, reinterpret_cast<void*>(static_cast<std::intptr_t>(t->fd_.get())));
    SSL_set_bio(ssl, bio, bio);
    const std::string name = o.tls.server_name.empty() ? o.host : o.tls.server_name;
    unsigned char ip[16];
    const bool is_ip =
        ::inet_pton(AF_INET, name.c_str(), ip) == 1 || ::inet_pton(AF_INET6, name.c_str(), ip) == 1;
    if (!is_ip) SSL_set_tlsext_host_name(ssl, name.c_str());  // SNI takes names only
    if (!o.tls.insecure_skip_verify) {
      const int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str())
                           : SSL_set1_host(ssl, name.c_str());
      if (ok != 1) {
        throw tls_configuration_error(endpoint, "cannot check the server's name '" + name + "'",
                                      drain_ssl_errors().text);
      }
    }
    const int sock = t->fd_.get();
    const bool limited = o.connect_timeout.count() > 0;
    if (!set_nonblocking(sock, true))
      throw_io_failure(errno_failure(errno), endpoint, "connecting", false, o.connect_timeout);
    const auto started = std::chrono::steady_clock::now();
    for (;;) {
      const int r = SSL_connect(ssl);
      if (r == 1) break;
      const int e = SSL_get_error(ssl, r);
      const int saved = errno;
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        const int w = wait_fd(sock, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline, limited);
        if (w == 0) continue;
        TlsFailure f;
        f.client_cert_given = t->ctx_->client_cert();
        f.timed_out = w == ETIMEDOUT;
        f.library_text = std::strerror(w);
        throw tls_error_of(f, endpoint, name, o.connect_timeout);
      }
      const SslErrors errors = drain_ssl_errors();
      TlsFailure f;
      f.client_cert_given = t->ctx_->client_cert();
      f.verify_result = SSL_get_verify_result(ssl);
      if (f.verify_result != X509_V_OK)
        f.verify_text = X509_verify_cert_error_string(f.verify_result);
      f.alert = errors.alert;
      f.not_tls = errors.not_tls;
      if (e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN || errors.text.empty()) {
        f.library_text = saved != 0 ? std::string(std::strerror(saved))
                                    : "the server closed the connection during the handshake";
      } else {
        f.library_text = errors.text;
      }
      throw tls_error_of(f, endpoint, name, o.connect_timeout);
    }
    t->name_ = name;
    t->endpoint_ = endpoint;
    t->limit_ = o.connect_timeout;
    t->await_server_flight(started, deadline, limited);
    if (!set_nonblocking(sock, false))
      throw_io_failure(errno_failure(errno), endpoint, "connecting", false, o.connect_timeout);
    return t;
  }

  bool write_all(const char* p, std::size_t n, IoFailure& f) override {
    BIO* w = SSL_get_wbio(ssl_.get());
    const auto before = BIO_number_written(w);
    std::size_t done = 0;
    while (done < n) {
      ERR_clear_error();
      std::size_t k = 0;
      const int r = SSL_write_ex(ssl_.get(), p + done, n - done, &k);
      if (r == 1) {
        done += k;
        continue;
      }
      fail(SSL_get_error(ssl_.get(), r), errno, f);
      f.sent_any = BIO_number_written(w) != before;
      return false;
    }
    return true;
  }

  std::size_t read_some(char* p, std::size_t n, IoFailure& f) override {
    if (!pending_.empty()) {  // a byte await_server_flight read
      p[0] = pending_[0];
      pending_.clear();
      read_any_ = true;
      return 1;
    }
    ERR_clear_error();
    std::size_t k = 0;
    const int r = SSL_read_ex(ssl_.get(), p, n, &k);
    if (r == 1) {
      read_any_ = true;
      return k;
    }
    const int e = SSL_get_error(ssl_.get(), r);
    const int saved = errno;
    if (e == SSL_ERROR_SSL && !read_any_) {
      // With TLS 1.3 a server checks the client certificate after the client's handshake:
      // its refusal arrives as an alert at the first read.
      const SslErrors errors = drain_ssl_errors();
      if (errors.alert >= 0) {
        TlsFailure t;
        t.alert = errors.alert;
        t.client_cert_given = ctx_->client_cert();
        t.library_text = errors.text;
        throw tls_error_of(t, endpoint_, name_, limit_);
      }
      f.err = REDIS_ERR_OTHER;
      f.errstr = "TLS: " + (errors.text.empty() ? std::string("read failed") : errors.text);
      return 0;
    }
    fail(e, saved, f);
    return 0;
  }

  bool idle() override {
    if (SSL_pending(ssl_.get()) > 0 || !pending_.empty()) return false;
    if (SSL_has_pending(ssl_.get()) == 0) {  // no record read ahead and left unprocessed
      pollfd pfd{};
      pfd.fd = fd_.get();
      pfd.events = POLLIN;
      if (::poll(&pfd, 1, 0) == 0) return true;
    }
    // Readable, or records read ahead: TLS records that carry no data (a session ticket, a
    // key update) are fine; data, a close or an error are not.
    if (!set_nonblocking(fd_.get(), true)) return false;
    ERR_clear_error();
    char byte;
    std::size_t k = 0;
    const int r = SSL_read_ex(ssl_.get(), &byte, 1, &k);
    const bool clean = r != 1 && SSL_get_error(ssl_.get(), r) == SSL_ERROR_WANT_READ;
    ERR_clear_error();
    return set_nonblocking(fd_.get(), false) && clean;
  }

  std::optional<PeerCertificate> peer_certificate() const override {
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
    X509* cert = SSL_get1_peer_certificate(ssl_.get());
#else
    X509* cert = SSL_get_peer_certificate(ssl_.get());
#endif
    if (cert == nullptr) return std::nullopt;
    const std::unique_ptr<X509, decltype(&X509_free)> owned(cert, X509_free);
    return peer_certificate_of(cert);
  }

 private:
  // TLS 1.3: the server checks the client certificate after the client's handshake ended,
  // and refuses it with an alert and a close. Were the first request written before that
  // alert is read, the server's kernel would answer it with a reset that discards the alert
  // (the client would see "connection reset" instead of the cause). So the server's first
  // flight after the handshake — session tickets, or that alert — is read first: waited for
  // as long as the handshake took (at least 50 ms), within the connect deadline. A server
  // that sends nothing costs that wait once per connect.
  void await_server_flight(std::chrono::steady_clock::time_point started,
                           std::chrono::steady_clock::time_point deadline, bool limited) {
    if (SSL_version(ssl_.get()) < TLS1_3_VERSION) return;  // TLS 1.2 refuses in the handshake
    const auto now = std::chrono::steady_clock::now();
    auto until = now + std::max<std::chrono::steady_clock::duration>(now - started,
                                                                     std::chrono::milliseconds(50));
    if (limited && deadline < until) until = deadline;
    if (wait_fd(fd_.get(), POLLIN, until, true) != 0) return;  // nothing (yet): go on
    ERR_clear_error();
    char byte;
    std::size_t k = 0;
    const int r = SSL_read_ex(ssl_.get(), &byte, 1, &k);
    if (r == 1) {  // data before any request: not a Redis server; the reader will say so
      pending_ = std::string(1, byte);
      return;
    }
    if (SSL_get_error(ssl_.get(), r) == SSL_ERROR_WANT_READ) return;  // tickets: accepted
    const SslErrors errors = drain_ssl_errors();
    TlsFailure f;
    f.alert = errors.alert;
    f.client_cert_given = ctx_->client_cert();
    f.library_text =
        errors.text.empty() ? "the server closed the connection after the handshake" : errors.text;
    throw tls_error_of(f, endpoint_, name_, limit_);
  }

  TlsTransport(std::shared_ptr<TlsContext> ctx, Fd fd) : ctx_(std::move(ctx)), fd_(std::move(fd)) {}

  // The IoFailure of a failed SSL_read/SSL_write (SSL_get_error `e`, errno `saved`).
  void fail(int e, int saved, IoFailure& f) {
    const SslErrors errors = drain_ssl_errors();
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
      f = errno_failure(EAGAIN);  // the socket's timeout expired
    } else if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && saved == 0)) {
      f = eof_failure(false);
    } else if (e == SSL_ERROR_SYSCALL) {
      f = errno_failure(saved);
    } else {
      f = IoFailure{};
      f.err = REDIS_ERR_OTHER;
      f.errstr = "TLS: " + (errors.text.empty() ? std::string("failed") : errors.text);
    }
  }

  std::shared_ptr<TlsContext> ctx_;
  Fd fd_;
  std::unique_ptr<SSL, SslDeleter> ssl_;  // after fd_: freed before the socket is closed
  bool read_any_ = false;
  std::string pending_;  // read before the first request (not from a Redis server)
  std::string name_;
  std::string endpoint_;
  std::chrono::milliseconds limit_{0};
};

}  // namespace dlq::redis::detail

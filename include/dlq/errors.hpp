// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file errors.hpp
/// The exception hierarchy. Every error the library throws derives from dlq::error, so
/// `catch (const dlq::error&)` catches all of them; catch a narrower type to act on one cause.
///
///     dlq::error                      (std::runtime_error)
///     ├── dlq::invalid_argument       a caller passed something unusable (empty queue name, …)
///     ├── dlq::format_error           stored bytes are not a readable entry (corrupt data)
///     ├── dlq::queue_full_error       retention refused a new entry (overflow policy = reject)
///     └── dlq::storage_error          the backend failed
///         ├── dlq::connection_error   could not connect, or the connection dropped
///         │   ├── dlq::tls_error      the TLS handshake failed (cause(): which check, why)
///         │   └── dlq::sentinel_error no master found through Redis Sentinel (cause(): why)
///         ├── dlq::timeout_error      no answer within the configured timeout
///         ├── dlq::protocol_error     the peer sent something that is not its protocol
///         ├── dlq::reply_error        the server refused a command (code(): WRONGTYPE, …)
///         ├── dlq::conflict_error     concurrent changes kept an operation from finishing
///         └── dlq::replication_error  written on the master, not confirmed by enough replicas
///
/// Every message has the form `[dlq.<component>] <where>: <what failed>; <what to do>`.
/// A storage_error raised after a write was sent says so with outcome_unknown(): the write may
/// or may not have been applied, and the library never retries such a write blindly.
#pragma once

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace dlq {

/// Base of every exception thrown by dlq.
class error : public std::runtime_error {
 public:
  explicit error(const std::string& message) : std::runtime_error(message) {}
};

/// The caller passed an argument the library cannot use (empty queue name, bad URL, …).
/// Nothing was written.
class invalid_argument : public error {
 public:
  using error::error;
};

/// Stored bytes are not a readable dead-letter entry (not JSON, not an object, no payload).
/// Reading APIs report such entries instead of throwing; this is thrown where a single entry
/// was asked for by the caller (for example dlq::decode_entry).
class format_error : public error {
 public:
  using error::error;
};

/// Retention refused a new entry because the queue is full and the overflow policy is
/// `reject`. Nothing was written.
class queue_full_error : public error {
 public:
  using error::error;
};

/// The storage backend failed. Subclasses say why.
class storage_error : public error {
 public:
  /// @param outcome_unknown true when a write was sent and no answer came back: it may have
  ///        been applied or not.
  explicit storage_error(const std::string& message, bool outcome_unknown = false)
      : error(message), outcome_unknown_(outcome_unknown) {}

  /// True when a write was sent before the failure and may have been applied.
  bool outcome_unknown() const noexcept { return outcome_unknown_; }

 private:
  bool outcome_unknown_;
};

/// Connecting failed (refused, unknown host, bad credentials) or the connection was closed.
class connection_error : public storage_error {
 public:
  using storage_error::storage_error;
};

/// A TLS connection could not be established: the certificate check failed, the two sides
/// disagree about TLS, or this build has no TLS. cause() says which; the message says what
/// to do. Never retried (the same check fails again) and never downgraded to plain TCP.
class tls_error : public connection_error {
 public:
  /// Why the TLS connection failed.
  enum class reason : unsigned char {
    not_built,                    ///< this build has no TLS (configured without OpenSSL)
    configuration,                ///< a CA, certificate or key file could not be loaded
    untrusted_certificate,        ///< the server's chain does not lead to a trusted CA
    hostname_mismatch,            ///< the certificate is not for the name connected to
    certificate_expired,          ///< the server's certificate has expired
    certificate_not_yet_valid,    ///< the server's certificate is not valid yet
    server_not_tls,               ///< rediss:// but the server speaks plain TCP
    server_requires_tls,          ///< redis:// but the server speaks TLS only
    client_certificate_required,  ///< the server wants a client certificate, none was given
    client_certificate_rejected,  ///< the server refused the client certificate given
    handshake_timeout,            ///< no answer to the handshake within the connect timeout
    handshake_failed              ///< any other handshake failure (the message has details)
  };

  tls_error(const std::string& message, reason cause)
      : connection_error(message, false), cause_(cause) {}

  /// Why the TLS connection failed.
  reason cause() const noexcept { return cause_; }

 private:
  reason cause_;
};

/// Redis Sentinel did not lead to a master (dlq::redis::SentinelOptions): every sentinel was
/// unreachable, none knows the master's name, the sentinels refused the credentials, or
/// the server they named is unreachable or not a master (a failover in progress). cause()
/// says which; the message names the sentinels asked and what each answered. Raised after
/// the reconnect tries (ConnectionOptions::reconnect_attempts) are used up; nothing was sent.
class sentinel_error : public connection_error {
 public:
  /// Why no master was found.
  enum class reason : unsigned char {
    sentinels_unreachable,  ///< no sentinel could be connected to (or each timed out)
    master_name_unknown,    ///< the sentinels reached do not monitor this master name
    sentinel_refused,       ///< a sentinel refused AUTH or the command (credentials, ACL)
    master_unreachable,     ///< the address the sentinels gave could not be connected to
    not_master              ///< the server the sentinels named is not a master (ROLE)
  };

  sentinel_error(const std::string& message, reason cause)
      : connection_error(message, false), cause_(cause) {}

  /// Why no master was found.
  reason cause() const noexcept { return cause_; }

 private:
  reason cause_;
};

/// The backend did not answer within the configured timeout.
class timeout_error : public storage_error {
 public:
  using storage_error::storage_error;
};

/// The backend answered with something that is not valid protocol.
class protocol_error : public storage_error {
 public:
  using storage_error::storage_error;
};

/// The server refused a command. code() is the first word of its error reply
/// (NOSCRIPT, WRONGTYPE, BUSY, MOVED, NOAUTH, WRONGPASS, OOM, ERR, …).
class reply_error : public storage_error {
 public:
  reply_error(const std::string& message, std::string code, bool outcome_unknown = false)
      : storage_error(message, outcome_unknown), code_(std::move(code)) {}

  /// The first word of the server's error reply.
  const std::string& code() const noexcept { return code_; }

 private:
  std::string code_;
};

/// Concurrent changes to the same queue kept an operation from finishing after several
/// attempts. Nothing was lost; the operation can be run again.
class conflict_error : public storage_error {
 public:
  using storage_error::storage_error;
};

/// A write that dlq::RedisListOptions::replicas_to_ack asked replicas to confirm was applied
/// on the master, but fewer replicas than wanted confirmed it within the timeout (Redis
/// `WAIT`). The write is NOT undone and is not unknown: it is on the master, and it is lost
/// only if the master fails and a replica that never received it is promoted. What to do:
/// keep the job (or its ids) until the replicas catch up and check again, or accept the
/// risk; never re-send blindly — the entry is stored already, a re-send stores it twice.
/// outcome_unknown() is false. A replay or discard stops at the first such step: ids() are
/// the entries that step moved (they are in their destination on the master).
class replication_error : public storage_error {
 public:
  /// @param ids          ids of the entries written and not confirmed, where known
  /// @param entries      how many entries the unconfirmed write stored, moved or removed
  /// @param wanted       replicas asked for (RedisListOptions::replicas_to_ack)
  /// @param acknowledged replicas that confirmed; -1 when their answer was not received
  /// @param timeout      how long the master waited for them
  replication_error(const std::string& message, std::vector<std::string> ids, std::size_t entries,
                    int wanted, int acknowledged, std::chrono::milliseconds timeout)
      : storage_error(message, false),
        ids_(std::move(ids)),
        entries_(entries),
        wanted_(wanted),
        acknowledged_(acknowledged),
        timeout_(timeout) {}

  /// Ids of the entries written on the master and not confirmed (in write order), where the
  /// write knows them: every entry of a send; the entries a replay or discard step moved that
  /// carry a dlq id (entries written by other programs have none and are only counted).
  const std::vector<std::string>& ids() const noexcept { return ids_; }
  /// How many entries the unconfirmed write stored, moved or removed.
  std::size_t entries() const noexcept { return entries_; }
  /// How many replicas were asked to confirm the write.
  int wanted() const noexcept { return wanted_; }
  /// How many confirmed it in time; -1 when the confirmation itself was not received (the
  /// connection failed after the write's own answer was read: a plain single push, or a
  /// compare-and-move replay step that read its receipt; the other pipelined and scripted
  /// writes report that case as a storage_error with outcome_unknown()).
  int acknowledged() const noexcept { return acknowledged_; }
  /// How long the master waited for the replicas.
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }

 private:
  std::vector<std::string> ids_;
  std::size_t entries_;
  int wanted_;
  int acknowledged_;
  std::chrono::milliseconds timeout_;
};

namespace detail {
/// Builds the uniform message `[dlq.<component>] <where>: <what>[; <hint>]`.
inline std::string message(const std::string& component, const std::string& where,
                           const std::string& what, const std::string& hint = {}) {
  std::string m = "[dlq." + component + "] ";
  if (!where.empty()) m += where + ": ";
  m += what;
  if (!hint.empty()) m += "; " + hint;
  return m;
}
}  // namespace detail

}  // namespace dlq

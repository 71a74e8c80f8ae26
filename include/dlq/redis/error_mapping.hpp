// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/error_mapping.hpp
/// The one place where hiredis failures and Redis error replies become dlq exceptions.
/// Every other Redis header reports failures through these functions, so the mapping (and
/// the wording of the messages) is defined once:
///
/// | hiredis / Redis                                    | dlq type                |
/// | -------------------------------------------------- | ----------------------- |
/// | I/O error with EAGAIN/EWOULDBLOCK/ETIMEDOUT, or     | dlq::timeout_error      |
/// | REDIS_ERR_TIMEOUT (hiredis >= 1.0)                 |                         |
/// | I/O error ECONNREFUSED                             | dlq::connection_error   |
/// | REDIS_ERR_EOF, other I/O errors, REDIS_ERR_OTHER   | dlq::connection_error   |
/// | REDIS_ERR_PROTOCOL, an unexpected reply type       | dlq::protocol_error     |
/// | REDIS_ERR_OOM                                      | dlq::storage_error      |
/// | an error reply ("-WRONGTYPE …")                    | dlq::reply_error (code) |
///
/// A failure after (part of) a write left this process carries outcome_unknown() == true.
/// Messages name the endpoint, never a password.
#pragma once

#include <hiredis/hiredis.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "dlq/errors.hpp"

namespace dlq::redis::detail {

/// A failed socket call or reply parse, captured at once: errno is only meaningful
/// right after the call, later calls may clear it.
struct IoFailure {
  int err = 0;            ///< hiredis REDIS_ERR_* code (REDIS_ERR_IO for a failed send())
  int saved_errno = 0;    ///< errno right after the failing call
  std::string errstr;     ///< hiredis' description
  bool sent_any = false;  ///< some bytes of the request left this process before the failure
};

/// True when the failure is a timeout (no answer within the configured limit).
inline bool is_timeout(const IoFailure& f) {
#ifdef REDIS_ERR_TIMEOUT
  if (f.err == REDIS_ERR_TIMEOUT) return true;
#endif
  if (f.err != REDIS_ERR_IO) return false;
  if (f.saved_errno == EAGAIN || f.saved_errno == EWOULDBLOCK || f.saved_errno == ETIMEDOUT ||
      f.saved_errno == EINPROGRESS) {
    return true;
  }
  // errno may have been overwritten; hiredis' text is derived from the original one.
  return f.errstr.find("timed out") != std::string::npos ||
         f.errstr.find("timeout") != std::string::npos || f.errstr == std::strerror(EAGAIN);
}

/// True when the server refused the TCP connection (nothing listens there).
inline bool is_refused(const IoFailure& f) {
  return f.err == REDIS_ERR_IO &&
         (f.saved_errno == ECONNREFUSED || f.errstr.find("refused") != std::string::npos);
}

inline std::string ms_text(std::chrono::milliseconds ms) {
  return std::to_string(ms.count()) + " ms";
}

/// Throws the dlq exception for an I/O-level failure.
/// @param endpoint  "host:port" of the server
/// @param doing     what was being done, e.g. "RPUSH dlq:{orders}" or "connecting"
/// @param is_write  the request may change data (so a failure after sending = unknown outcome)
/// @param limit     the timeout in force, for the message
[[noreturn]] inline void throw_io_failure(const IoFailure& f, const std::string& endpoint,
                                          const std::string& doing, bool is_write,
                                          std::chrono::milliseconds limit) {
  const bool unknown = is_write && f.sent_any;
  const std::string unknown_hint =
      "the write was sent and may or may not have been applied (outcome unknown); it was not "
      "retried — check the data before sending it again";
  if (is_timeout(f)) {
    std::string what = doing + ": no answer within " + ms_text(limit);
    throw dlq::timeout_error(
        dlq::detail::message("redis", endpoint, what,
                             unknown ? unknown_hint
                                     : "the server is frozen, overloaded or unreachable; check "
                                       "it or raise ConnectionOptions timeouts"),
        unknown);
  }
  if (is_refused(f)) {
    throw dlq::connection_error(
        dlq::detail::message("redis", endpoint, doing + ": connection refused",
                             "is redis-server running and listening on this address?"),
        false);
  }
  switch (f.err) {
    case REDIS_ERR_PROTOCOL:
      throw dlq::protocol_error(
          dlq::detail::message("redis", endpoint, doing + ": protocol error (" + f.errstr + ")",
                               unknown ? unknown_hint : "is this a Redis server?"),
          unknown);
    case REDIS_ERR_OOM:
      throw dlq::storage_error(
          dlq::detail::message("redis", endpoint, doing + ": out of memory in hiredis",
                               unknown ? unknown_hint : "free memory and retry"),
          unknown);
    case REDIS_ERR_EOF:
      throw dlq::connection_error(
          dlq::detail::message("redis", endpoint, doing + ": the server closed the connection",
                               unknown ? unknown_hint
                                       : "the server restarted, hit a limit or killed the client; "
                                         "retry"),
          unknown);
    default:
      throw dlq::connection_error(
          dlq::detail::message("redis", endpoint, doing + ": " + f.errstr,
                               unknown ? unknown_hint : "check that the server is reachable"),
          unknown);
  }
}

/// The first word of an error reply ("WRONGTYPE", "NOSCRIPT", "ERR", …).
inline std::string reply_code(std::string_view text) {
  const auto space = text.find(' ');
  return std::string(text.substr(0, space));
}

/// The dlq::reply_error for an error reply (code = Redis's first word; the hint for the
/// common codes unless `hint` is given). The blocking paths throw it (throw_reply_error),
/// the asynchronous one delivers it through its completion.
/// `text` is the error reply's text.
inline dlq::reply_error reply_error_of(std::string_view text, const std::string& endpoint,
                                       const std::string& doing, bool outcome_unknown = false,
                                       const std::string& hint = {}) {
  std::string code = reply_code(text);
  std::string h = hint;
  if (h.empty()) {
    if (code == "WRONGTYPE") {
      h = "a key of another type has the name dlq uses; rename it or configure other key names";
    } else if (code == "NOAUTH" || code == "WRONGPASS") {
      h = "check the user and password in the URL or ConnectionOptions";
    } else if (code == "MOVED" || code == "ASK" || code == "CROSSSLOT") {
      h = "the server is a Redis Cluster node: RedisListStorage routes by slot and follows "
          "redirections (it detects the cluster with CLUSTER SLOTS, which must be allowed); "
          "keep each request's keys in one hash slot, and connect other clients to the node "
          "that owns it";
    } else if (code == "OOM") {
      h = "the server reached maxmemory; free memory or raise maxmemory";
    } else if (code == "BUSY") {
      h = "a long-running script blocks the server; wait or SCRIPT KILL it";
    }
  }
  return dlq::reply_error(
      dlq::detail::message("redis", endpoint, doing + ": server replied: " + std::string(text), h),
      std::move(code), outcome_unknown);
}

/// reply_error_of for a hiredis error reply.
inline dlq::reply_error reply_error_of(const redisReply& r, const std::string& endpoint,
                                       const std::string& doing, bool outcome_unknown = false,
                                       const std::string& hint = {}) {
  const std::string_view text(r.str != nullptr ? r.str : "", r.str != nullptr ? r.len : 0);
  return reply_error_of(text, endpoint, doing, outcome_unknown, hint);
}

/// Throws dlq::reply_error for an error reply (see reply_error_of).
[[noreturn]] inline void throw_reply_error(const redisReply& r, const std::string& endpoint,
                                           const std::string& doing, bool outcome_unknown = false,
                                           const std::string& hint = {}) {
  throw reply_error_of(r, endpoint, doing, outcome_unknown, hint);
}

/// Throws dlq::protocol_error for a reply of an unexpected type.
[[noreturn]] inline void throw_unexpected_reply(const redisReply& r, const std::string& endpoint,
                                                const std::string& doing,
                                                bool outcome_unknown = false) {
  throw dlq::protocol_error(
      dlq::detail::message("redis", endpoint,
                           doing + ": unexpected reply of type " + std::to_string(r.type),
                           "is this a Redis server of version 6 or later?"),
      outcome_unknown);
}

}  // namespace dlq::redis::detail

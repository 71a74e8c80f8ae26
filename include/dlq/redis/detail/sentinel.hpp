// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/detail/sentinel.hpp
/// The decisions of Redis Sentinel (dlq::redis::SentinelOptions), without I/O: what a
/// sentinel's answer to `SENTINEL get-master-addr-by-name` and a server's answer to `ROLE`
/// mean, in which order the sentinels are asked, which failure of a discovery is worth
/// another try, the dlq::sentinel_error that names the cause, and whether a request
/// answered `READONLY` (a demoted master) may be sent again to the new master, and a pool's
/// shared view of the sentinels for the master checks (SharedView). The blocking
/// Connection (redis/connection.hpp) does the I/O; everything it decides from it is here,
/// tested without a server (tests/redis/test_sentinel_decisions.cpp).
///
/// The library's rule stands: a write whose answer was lost is never re-sent. A `READONLY`
/// answer is not a lost answer — the server refused the command without executing it (a
/// replica executes no write) — so a request every write of which was refused that way is
/// sent again once the new master is found.
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/errors.hpp"

namespace dlq::redis::detail::sentinel {

inline std::string_view text_of(const redisReply& r) noexcept {
  return r.str != nullptr ? std::string_view(r.str, r.len) : std::string_view{};
}

/// What one sentinel answered to `SENTINEL get-master-addr-by-name <name>`.
struct MasterAnswer {
  enum class kind : unsigned char {
    address,         ///< host and port of the master
    unknown_master,  ///< nil: this sentinel does not monitor that name
    refused,         ///< an error reply (NOAUTH, WRONGPASS, NOPERM, unknown command: no sentinel)
    malformed        ///< anything else: not a sentinel's answer
  };
  kind type = kind::malformed;
  std::string host;  ///< kind::address
  int port = 0;      ///< kind::address
  std::string text;  ///< kind::refused: the error text; kind::malformed: what was wrong
};

/// Reads a sentinel's answer to `SENTINEL get-master-addr-by-name`: an array of two strings
/// (host, port), nil for an unknown name, or an error.
inline MasterAnswer read_master_address(const redisReply& r) {
  MasterAnswer a;
  if (r.type == REDIS_REPLY_NIL) {
    a.type = MasterAnswer::kind::unknown_master;
    return a;
  }
  if (r.type == REDIS_REPLY_ERROR) {
    a.type = MasterAnswer::kind::refused;
    a.text = std::string(text_of(r));
    return a;
  }
  if (r.type != REDIS_REPLY_ARRAY || r.elements != 2 || r.element[0]->type != REDIS_REPLY_STRING ||
      r.element[1]->type != REDIS_REPLY_STRING) {
    // Sentinel answers a null array for an unknown name with RESP2 (`*-1`).
    if (r.type == REDIS_REPLY_ARRAY && r.elements == 0) {
      a.type = MasterAnswer::kind::unknown_master;
      return a;
    }
    a.text = "not an array of host and port";
    return a;
  }
  const std::string_view host = text_of(*r.element[0]);
  const std::string_view port = text_of(*r.element[1]);
  long p = 0;
  for (char c : port) {
    if (c < '0' || c > '9' || p > 65535) {
      p = -1;
      break;
    }
    p = p * 10 + (c - '0');
  }
  if (host.empty() || port.empty() || p < 1 || p > 65535) {
    a.text = "the host or port is not an address";
    return a;
  }
  a.type = MasterAnswer::kind::address;
  a.host = std::string(host);
  a.port = static_cast<int>(p);
  return a;
}

/// A server's role, from its answer to `ROLE`.
enum class Role : unsigned char { master, replica, sentinel, unknown };

/// Reads the answer to `ROLE` (an array whose first element is "master", "slave",
/// "sentinel"); unknown for an error (an ACL forbidding ROLE) or anything else.
inline Role read_role(const redisReply& r) {
  if (r.type != REDIS_REPLY_ARRAY || r.elements == 0) return Role::unknown;
  const redisReply& first = *r.element[0];
  if (first.type != REDIS_REPLY_STRING && first.type != REDIS_REPLY_STATUS) return Role::unknown;
  const std::string_view role = text_of(first);
  if (role == "master") return Role::master;
  if (role == "slave" || role == "replica") return Role::replica;
  if (role == "sentinel") return Role::sentinel;
  return Role::unknown;
}

/// True when a server whose ROLE answered `role` may be used as the master: a master, or a
/// server that refused ROLE (ROLE is in ACL category @admin, which an application user
/// often lacks) — the sentinels named it, and a replica would answer writes `READONLY`,
/// which leads to the master again. A replica or a sentinel is refused.
inline bool usable_as_master(Role role) noexcept {
  return role == Role::master || role == Role::unknown;
}

/// The index of the sentinel to ask `step`-th (0, 1, …) of `count`, starting with
/// `preferred` (the last one that named a master: it knew the answer then) and going on in
/// the configured order, wrapping around.
inline std::size_t sentinel_to_ask(std::size_t preferred, std::size_t step,
                                   std::size_t count) noexcept {
  return count == 0 ? 0 : (preferred + step) % count;
}

/// What happened at one sentinel during one discovery, for the error that ends it.
struct Asked {
  std::string sentinel;  ///< "host:port"
  enum class kind : unsigned char {
    unreachable,  ///< no connection (refused, timed out, closed)
    answered,     ///< its answer (MasterAnswer) is in `answer`
  };
  kind type = kind::unreachable;
  MasterAnswer answer;  ///< kind::answered
  std::string text;     ///< kind::unreachable: why (the connection error's words)
};

/// Why a discovery in which no sentinel named a master failed, from what each said: every
/// one unreachable; else refused by one (credentials); else an unknown name.
inline sentinel_error::reason no_address_cause(const std::vector<Asked>& asked) noexcept {
  bool refused = false;
  bool unknown = false;
  for (const Asked& a : asked) {
    if (a.type != Asked::kind::answered) continue;
    if (a.answer.type == MasterAnswer::kind::refused ||
        a.answer.type == MasterAnswer::kind::malformed) {
      refused = true;
    }
    if (a.answer.type == MasterAnswer::kind::unknown_master) unknown = true;
  }
  if (refused) return sentinel_error::reason::sentinel_refused;
  if (unknown) return sentinel_error::reason::master_name_unknown;
  return sentinel_error::reason::sentinels_unreachable;
}

/// True when a connect that failed with `cause` is worth another try (after the reconnect
/// backoff): a sentinel down, or a failover in progress (the master named is down or not a
/// master yet). A name no sentinel knows and refused credentials stay so: not retried.
inline bool worth_retrying(sentinel_error::reason cause) noexcept {
  return cause == sentinel_error::reason::sentinels_unreachable ||
         cause == sentinel_error::reason::master_unreachable ||
         cause == sentinel_error::reason::not_master;
}

/// The words for one sentinel's outcome in a message.
inline std::string describe(const Asked& a) {
  if (a.type == Asked::kind::unreachable) return a.sentinel + " unreachable (" + a.text + ")";
  switch (a.answer.type) {
    case MasterAnswer::kind::address:
      return a.sentinel + " named " + a.answer.host + ":" + std::to_string(a.answer.port);
    case MasterAnswer::kind::unknown_master:
      return a.sentinel + " does not know the name";
    case MasterAnswer::kind::refused:
      return a.sentinel + " refused: " + a.answer.text;
    case MasterAnswer::kind::malformed:
      break;
  }
  return a.sentinel + " answered something else (" + a.answer.text + ")";
}

/// The dlq::sentinel_error for a discovery of master `name` that found no address.
inline sentinel_error no_address_error(const std::string& where, const std::string& name,
                                       const std::vector<Asked>& asked) {
  const sentinel_error::reason cause = no_address_cause(asked);
  std::string what = "no sentinel named a master for '" + name + "': ";
  for (std::size_t i = 0; i < asked.size(); ++i)
    what += (i > 0 ? "; " : "") + describe(asked[i]);
  std::string hint;
  switch (cause) {
    case sentinel_error::reason::sentinel_refused:
      hint =
          "check sentinel_user/sentinel_password (SentinelOptions::user/password) and that "
          "the hosts are sentinels";
      break;
    case sentinel_error::reason::master_name_unknown:
      hint =
          "check the master name against `sentinel monitor <name>` in the sentinels' "
          "configuration";
      break;
    default:
      hint = "check that the sentinels run and listen on these addresses";
  }
  return sentinel_error(dlq::detail::message("redis", where, what, hint), cause);
}

/// The dlq::sentinel_error for a master the sentinels named that is not usable:
/// `cause` master_unreachable (with the connection error's words) or not_master.
inline sentinel_error master_error(const std::string& where, const std::string& name,
                                   const std::string& address, sentinel_error::reason cause,
                                   const std::string& detail) {
  const std::string what =
      cause == sentinel_error::reason::not_master
          ? "the sentinels named " + address + " as master '" + name + "', but its ROLE is " +
                detail
          : "the sentinels named " + address + " as master '" + name + "', unreachable: " + detail;
  return sentinel_error(
      dlq::detail::message("redis", where, what,
                           "a failover may be in progress: raise "
                           "ConnectionOptions::reconnect_attempts/reconnect_backoff_max to "
                           "wait longer for it"),
      cause);
}

/// True when a sentinel's answer names a master other than `host`:`port` (the one connected
/// to): the connection must go. Any answer that names no master changes nothing (a sentinel
/// restarting, or one that lost the name: the others decide at the next connect).
inline bool master_moved(const MasterAnswer& a, const std::string& host, int port) noexcept {
  return a.type == MasterAnswer::kind::address && (a.host != host || a.port != port);
}

/// One pool's view of the sentinels, shared by its connections (SentinelOptions::
/// check_interval): at most one question to a sentinel per interval for all of them, the
/// latest answer with the moment its question was asked, and which sentinel to ask. The
/// caller (detail::SentinelLink, redis/detail/sentinel_link.hpp) asks; this decides.
/// Thread-safe.
class SharedView {
 public:
  using clock = std::chrono::steady_clock;

  /// Whether the caller is to ask a sentinel now: true for one caller once `interval` has
  /// passed since the last question (never while a question is under way, never when
  /// `interval` is 0). A caller that gets true must report answered() or failed().
  bool begin_check(clock::time_point now, std::chrono::milliseconds interval) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (interval.count() <= 0 || asking_) return false;
    if (asked_once_ && now - last_asked_ < interval) return false;
    asking_ = true;
    asked_once_ = true;
    last_asked_ = now;
    return true;
  }
  /// The sentinel asked answered `a` (to the question begun at the last begin_check).
  /// An answer that names no master is kept too: it changes nothing (master_moved).
  void answered(const MasterAnswer& a) {
    std::lock_guard<std::mutex> lock(mutex_);
    asking_ = false;
    latest_ = a;
    latest_asked_ = last_asked_;
    have_answer_ = true;
  }
  /// The sentinel asked did not answer: the next one of `sentinels` is asked next time.
  void failed(std::size_t sentinels) {
    std::lock_guard<std::mutex> lock(mutex_);
    asking_ = false;
    if (sentinels > 0) next_ = (next_ + 1) % sentinels;
  }
  /// The index of the sentinel to ask.
  std::size_t sentinel() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return next_;
  }
  /// Whether a connection to `host`:`port`, whose master was named at `named_at`, must go:
  /// the latest answer names another master and its question was asked after `named_at`
  /// (an older answer may predate the failover that connection already followed).
  bool must_go(const std::string& host, int port, clock::time_point named_at) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return have_answer_ && latest_asked_ > named_at && master_moved(latest_, host, port);
  }

 private:
  mutable std::mutex mutex_;
  bool asking_ = false;
  bool asked_once_ = false;
  bool have_answer_ = false;
  clock::time_point last_asked_{};
  clock::time_point latest_asked_{};
  MasterAnswer latest_;
  std::size_t next_ = 0;
};

/// True for a `READONLY` error reply: the server is a replica (a demoted master) and did
/// not execute the command.
inline bool is_readonly(const redisReply& r) noexcept {
  return r.type == REDIS_REPLY_ERROR && text_of(r).substr(0, 9) == "READONLY ";
}

/// What a request's replies mean for a Sentinel connection.
enum class AfterReplies : unsigned char {
  keep,                  ///< no READONLY: the server is the master, nothing to do
  rediscover,            ///< READONLY: drop the connection (the next connect asks the
                         ///< sentinels); the replies stand (some command may have run)
  rediscover_and_resend  ///< READONLY and nothing of the request ran as a write: drop the
                         ///< connection and send the request again to the new master
};

/// Decides from the replies of a request (`count` commands, command i named `name(i)`, its
/// reply `reply(i)`) whether the server was a demoted master and whether the request may be
/// sent again. `read_only` = the request changes nothing (Effect::read): re-sent whatever
/// its replies. A write request is re-sent only when each reply shows that its command did
/// not write: `READONLY`; `+OK` to MULTI and `+QUEUED` inside it; `EXECABORT` to EXEC (the
/// transaction was discarded); any answer to WAIT (it writes nothing). Any other reply — a read
/// that answered, a write that ran before the demotion — keeps the replies as they are (the caller
/// sees the READONLY error).
template <class Name, class ReplyAt>
AfterReplies after_replies(std::size_t count, Name name, ReplyAt reply, bool read_only) {
  bool readonly = false;
  for (std::size_t i = 0; i < count && !readonly; ++i)
    readonly = is_readonly(reply(i));
  if (!readonly) return AfterReplies::keep;
  if (read_only) return AfterReplies::rediscover_and_resend;
  for (std::size_t i = 0; i < count; ++i) {
    const redisReply& r = reply(i);
    const std::string_view n = name(i);
    const std::string_view t = text_of(r);
    const bool refused = is_readonly(r);
    const bool multi = (n == "MULTI" || n == "multi") && r.type == REDIS_REPLY_STATUS && t == "OK";
    const bool queued = r.type == REDIS_REPLY_STATUS && t == "QUEUED";
    const bool aborted = (n == "EXEC" || n == "exec") && r.type == REDIS_REPLY_ERROR &&
                         t.substr(0, 10) == "EXECABORT ";
    const bool wait = n == "WAIT" || n == "wait";  // writes nothing (replicas_to_ack)
    if (!(refused || multi || queued || aborted || wait)) return AfterReplies::rediscover;
  }
  return AfterReplies::rediscover_and_resend;
}

}  // namespace dlq::redis::detail::sentinel

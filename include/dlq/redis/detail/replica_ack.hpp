// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/detail/replica_ack.hpp
/// The decisions of replica-acknowledged writes (RedisListOptions::replicas_to_ack), without
/// I/O: which option values a `WAIT numreplicas timeout` can honour, what WAIT's answer means
/// for a write sent before it in the same pipeline, and the dlq::replication_error that says
/// so. The blocking storage (list_storage-inl.hpp, and ConnectionPool::run_shared for shared
/// batches) sends the WAIT and reads its reply; everything it decides from that is here,
/// tested without a server (tests/redis/test_replica_ack_decisions.cpp).
///
/// WAIT answers the number of replicas that acknowledged every write the connection sent
/// before it (its replication offset), after at most `timeout` ms. So one WAIT at the end of
/// a pipeline covers every write in it, and a shared batch needs one WAIT, not one per send.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/errors.hpp"

namespace dlq::redis::detail {

/// WAIT's reply as read from the connection.
struct WaitReply {
  enum class kind : unsigned char {
    count,   ///< an integer: the replicas that acknowledged
    error,   ///< an error reply (a replica was asked, or WAIT is not allowed: ACL, proxy)
    other,   ///< anything else: not a Redis WAIT answer
    missing  ///< not read: the connection failed after the write's own answer
  };
  kind type = kind::missing;
  long long replicas = 0;  ///< kind::count
  std::string_view text;   ///< kind::error: the server's error text
};

/// What a write's WAIT answer means.
struct AckDecision {
  bool confirmed = false;  ///< enough replicas acknowledged: the write is done
  int acknowledged = -1;   ///< replicas that acknowledged; -1 = unknown (no count read)
  std::string why;         ///< when not confirmed: what happened, for the message
};

/// Decides a write's outcome from WAIT's reply and the replicas wanted (> 0).
inline AckDecision decide_replica_ack(int wanted, const WaitReply& reply) {
  AckDecision d;
  switch (reply.type) {
    case WaitReply::kind::count: {
      const long long n = reply.replicas < 0 ? 0 : reply.replicas;
      d.acknowledged = n > 1'000'000 ? 1'000'000 : static_cast<int>(n);
      d.confirmed = d.acknowledged >= wanted;
      if (!d.confirmed) {
        d.why = "confirmed by " + std::to_string(d.acknowledged) + " of " + std::to_string(wanted) +
                (wanted == 1 ? " replica" : " replicas");
      }
      return d;
    }
    case WaitReply::kind::error:
      d.why = "WAIT was refused (" + std::string(reply.text) + "), so no replica confirmed it";
      return d;
    case WaitReply::kind::other:
      d.why = "WAIT's answer is not a replica count, so no replica confirmed it";
      return d;
    case WaitReply::kind::missing:
      break;
  }
  d.why =
      "the replicas' confirmation was not received (the connection failed after the "
      "write's own answer)";
  return d;
}

/// Why RedisListOptions' replicas_to_ack / replica_ack_timeout cannot be used with a
/// connection whose command_timeout is `command_timeout` (0 = no limit); empty = they can.
inline std::string replica_ack_problem(int replicas, std::chrono::milliseconds timeout,
                                       std::chrono::milliseconds command_timeout) {
  if (replicas < 0) return "replicas_to_ack is negative (" + std::to_string(replicas) + ")";
  if (replicas == 0) return {};
  if (timeout.count() <= 0) {
    return "replica_ack_timeout must be more than 0 when replicas_to_ack > 0 (WAIT with "
           "timeout 0 waits forever)";
  }
  if (command_timeout.count() > 0 && timeout >= command_timeout) {
    return "replica_ack_timeout (" + std::to_string(timeout.count()) +
           " ms) must be less than the connection's command_timeout (" +
           std::to_string(command_timeout.count()) +
           " ms): the socket would time out before WAIT answers, and the write's outcome "
           "would be unknown";
  }
  return {};
}

/// What an acknowledged write did to entries: its risk when unconfirmed differs. A store
/// (a send) is lost if the master fails before a replica has it; a move (a replay or discard
/// step) or a removal is undone instead — a promoted replica has the entries back in the list
/// they left (a replayed entry would be replayed again, a removed one is there again).
enum class AckedWrite : unsigned char { store, move, remove };

/// The error for a write (`what`, e.g. "RPUSH dlq:{orders}") that `decision` did not
/// confirm: the write is on the master at `endpoint`, not undone. `kind` says what the write
/// did, for the message (its risk and what to do).
inline dlq::replication_error replication_failure(const AckDecision& decision,
                                                  const std::string& endpoint,
                                                  const std::string& what,
                                                  std::vector<std::string> ids, std::size_t entries,
                                                  int wanted, std::chrono::milliseconds timeout,
                                                  AckedWrite kind = AckedWrite::store) {
  static constexpr const char* done[] = {" written on the master", " moved on the master",
                                         " removed on the master"};
  // Each element in parentheses: clang's -Wstring-concatenation warns on literals split
  // over lines inside an array initializer.
  static constexpr const char* risk[] = {
      (": the write IS applied on the master, and is lost only if the master fails before a "
       "replica receives it"),
      (": the move IS applied on the master (out of the dead list); if the master fails before "
       "a replica receives it, a promoted replica has them back in the dead list, and a replay "
       "there delivers them again"),
      (": the removal IS applied on the master; if the master fails before a replica receives "
       "it, a promoted replica has them back in their list")};
  static constexpr const char* hint[] = {
      ("do not repeat it (it is applied: a send again would store the entry twice); check the "
       "replicas (INFO replication: link status, lag), keep the job or the ids until they have "
       "caught up, or raise RedisListOptions::replica_ack_timeout"),
      ("do not undo it (running the replay or discard again does not move these entries "
       "again); check the replicas (INFO replication: link status, lag), keep the ids until "
       "they have caught up, or raise RedisListOptions::replica_ack_timeout"),
      ("do not undo it; check the replicas (INFO replication: link status, lag), keep the ids "
       "until they have caught up, or raise RedisListOptions::replica_ack_timeout")};
  const auto k = static_cast<std::size_t>(kind);
  std::string text = std::to_string(entries) + (entries == 1 ? " entry" : " entries") + done[k] +
                     " but " + decision.why + " within " + std::to_string(timeout.count()) +
                     " ms (replicas_to_ack)" + risk[k];
  if (!ids.empty()) {
    text += " (id " + ids.front();
    if (ids.size() > 1) text += " and " + std::to_string(ids.size() - 1) + " more";
    text += ")";
  }
  return dlq::replication_error(
      dlq::detail::message("redis", endpoint, what + ": " + text, hint[k]), std::move(ids), entries,
      wanted, decision.acknowledged, timeout);
}

}  // namespace dlq::redis::detail

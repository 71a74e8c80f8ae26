// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/stats.hpp
/// dlq::redis::read_list_ends — what RedisListStorage::stats (the storage member behind
/// DeadLetterQueue::stats, see dlq/stats.hpp) sends: per queue `MULTI; LLEN dead; LINDEX dead
/// 0; LINDEX dead -1; LLEN corrupt; LINDEX corrupt 0; LINDEX corrupt -1; EXEC`, so that each
/// queue's lengths and end items are read at one instant, and every queue of a call in one
/// pipelined round trip — on a Redis Cluster one per master (a queue's keys share its hash
/// tag, so its transaction is on one slot). The cost does not depend on the lists' lengths
/// (LLEN and LINDEX 0 / -1 are O(1)); it does on the size of the end items (LINDEX returns
/// the whole item).
///
/// A queue whose slot moved (MOVED / ASK inside the transaction: EXEC answers EXECABORT and
/// nothing ran) is read again through the Router, which follows the redirection, one list at
/// a time (during a migration a queue's two keys may be on two nodes): a plain pipeline of
/// the list's three commands (ASKING cannot precede commands inside a transaction), repeated
/// while its answers disagree (a length > 0 without end items, or the other way) — at most 8
/// times, after which the list's ends are left empty (their times then show as unknown,
/// never guessed).
#pragma once

#include <hiredis/hiredis.h>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dlq/errors.hpp"
#include "dlq/redis/cluster.hpp"
#include "dlq/redis/connection.hpp"
#include "dlq/redis/error_mapping.hpp"
#include "dlq/storage.hpp"

namespace dlq::redis {

/// The keys of one queue's two lists.
struct ListKeys {
  std::string dead;     ///< the dead-letter list's key
  std::string corrupt;  ///< the corrupt list's key
};

namespace detail {

// LLEN, LINDEX 0, LINDEX -1 of one list.
inline void append_list_commands(std::vector<Command>& cmds, const std::string& key) {
  cmds.push_back(std::move(Command("LLEN").arg(std::string_view(key))));
  cmds.push_back(std::move(Command("LINDEX").arg(std::string_view(key)).arg(0)));
  cmds.push_back(std::move(Command("LINDEX").arg(std::string_view(key)).arg(-1)));
}

// Reads the 3 replies of one list (LLEN, LINDEX 0, LINDEX -1) into `e`. False when they
// disagree (possible only outside a transaction): `e` then has the length and no items.
// Throws for error replies (WRONGTYPE: a key that is not a list).
inline bool parse_list(const redisReply* const* r, ListEnds& e, const std::string& endpoint,
                       const std::string& key) {
  for (std::size_t i = 0; i < 3; ++i)
    if (r[i]->type == REDIS_REPLY_ERROR)
      throw_reply_error(*r[i], endpoint, (i == 0 ? "LLEN " : "LINDEX ") + key);
  if (r[0]->type != REDIS_REPLY_INTEGER || r[0]->integer < 0)
    throw_unexpected_reply(*r[0], endpoint, "LLEN " + key);
  e = ListEnds{};
  e.length = static_cast<std::size_t>(r[0]->integer);
  const bool first = r[1]->type == REDIS_REPLY_STRING;
  const bool last = r[2]->type == REDIS_REPLY_STRING;
  if ((e.length > 0) != first || (e.length > 0) != last) return false;
  if (first) e.first.assign(view(*r[1]));
  if (last) e.last.assign(view(*r[2]));
  return true;
}

}  // namespace detail

/// Lengths and end items of both lists of each queue (`keys`, in order), each queue read at
/// one instant, all in one pipelined round trip per master (see the file comment).
/// @throws the dlq::storage_error subclasses (dlq::reply_error for a key that is not a list).
inline std::vector<QueueEnds> read_list_ends(Router& router, const std::vector<ListKeys>& keys) {
  std::vector<QueueEnds> out(keys.size());
  if (keys.empty()) return out;
  const bool cluster = router.clustered();
  // Queues by master (one group in plain mode).
  std::vector<std::pair<ConnectionPool*, std::vector<std::size_t>>> groups;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ConnectionPool* p = cluster ? &router.pool_for(keys[i].dead) : &router.seed();
    auto g = groups.begin();
    while (g != groups.end() && g->first != p)
      ++g;
    if (g == groups.end()) g = groups.insert(groups.end(), {p, {}});
    g->second.push_back(i);
  }
  std::vector<std::size_t> redirected;
  for (auto& [pool, indexes] : groups) {
    std::vector<Command> cmds;
    cmds.reserve(indexes.size() * 8);
    for (const std::size_t i : indexes) {
      cmds.emplace_back("MULTI");
      detail::append_list_commands(cmds, keys[i].dead);
      detail::append_list_commands(cmds, keys[i].corrupt);
      cmds.emplace_back("EXEC");
    }
    auto lease = pool->acquire();
    const std::vector<Reply> replies = lease->run(cmds, Effect::read);
    for (std::size_t n = 0; n < indexes.size(); ++n) {
      const std::size_t base = n * 8;  // MULTI, 6 x QUEUED, EXEC
      const redisReply& exec = *replies.at(base + 7);
      const std::string& key = keys[indexes[n]].dead;
      if (exec.type == REDIS_REPLY_ERROR) {
        bool moved = false;
        for (std::size_t c = base + 1; c < base + 7; ++c)
          moved = moved || detail::is_redirect(*replies[c]);
        if (cluster && moved) {
          redirected.push_back(indexes[n]);
          continue;
        }
        for (std::size_t c = base; c < base + 7; ++c)  // the command that was refused
          if (replies[c]->type == REDIS_REPLY_ERROR)
            detail::throw_reply_error(*replies[c], lease->endpoint(), "stats of " + key);
        detail::throw_reply_error(exec, lease->endpoint(), "EXEC (stats of " + key + ")");
      }
      if (exec.type != REDIS_REPLY_ARRAY || exec.elements != 6)
        detail::throw_unexpected_reply(exec, lease->endpoint(), "EXEC (stats of " + key + ")");
      const std::size_t i = indexes[n];
      // Inside one transaction the replies agree: parse_list cannot return false here.
      detail::parse_list(exec.element, out[i].dead, lease->endpoint(), keys[i].dead);
      detail::parse_list(exec.element + 3, out[i].corrupt, lease->endpoint(), keys[i].corrupt);
    }
  }
  // Slot moved or migrating: each list on its own through the router (during a migration
  // a queue's two keys may be on two nodes; one key is on one).
  for (const std::size_t i : redirected) {
    for (const bool dead : {true, false}) {
      const std::string& key = dead ? keys[i].dead : keys[i].corrupt;
      ListEnds& e = dead ? out[i].dead : out[i].corrupt;
      for (int attempt = 0; attempt < 8; ++attempt) {
        std::optional<ConnectionPool::Lease> lease;
        const auto replies = router.run(lease, key, Effect::read, [&](const std::string&) {
          std::vector<Command> cmds;
          detail::append_list_commands(cmds, key);
          return cmds;
        });
        // The key moved between the commands: ask again (the last try reports the error).
        if (attempt < 7 &&
            (detail::is_redirect(*replies.at(1)) || detail::is_redirect(*replies.at(2))))
          continue;
        const redisReply* r[3] = {replies.at(0).get(), replies.at(1).get(), replies.at(2).get()};
        if (detail::parse_list(r, e, (*lease)->endpoint(), key)) break;
      }
    }
  }
  return out;
}

}  // namespace dlq::redis

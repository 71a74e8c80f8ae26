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
/// nothing ran) is read again on its own through the Router, which follows the redirection;
/// that read is a plain pipeline (ASKING cannot precede commands inside a transaction),
/// repeated while its answers disagree (a length > 0 without end items, or the other way) —
/// at most 8 times, after which the ends are left empty (their times then show as unknown,
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

// LLEN, LINDEX 0, LINDEX -1 of both lists (6 commands), inside MULTI/EXEC when `atomic`.
inline void append_ends_commands(std::vector<Command>& cmds, const ListKeys& k, bool atomic) {
  if (atomic) cmds.emplace_back("MULTI");
  for (const std::string* key : {&k.dead, &k.corrupt}) {
    cmds.push_back(std::move(Command("LLEN").arg(std::string_view(*key))));
    cmds.push_back(std::move(Command("LINDEX").arg(std::string_view(*key)).arg(0)));
    cmds.push_back(std::move(Command("LINDEX").arg(std::string_view(*key)).arg(-1)));
  }
  if (atomic) cmds.emplace_back("EXEC");
}

// Reads the 6 replies of one queue into `out`. False when they disagree (possible only
// outside a transaction). Throws for error replies (WRONGTYPE: a key that is not a list).
inline bool parse_ends(const redisReply* const* r, QueueEnds& out, const std::string& endpoint,
                       const ListKeys& k) {
  bool consistent = true;
  auto list = [&](std::size_t at, const std::string& key, ListEnds& e) {
    for (std::size_t i = at; i < at + 3; ++i)
      if (r[i]->type == REDIS_REPLY_ERROR)
        throw_reply_error(*r[i], endpoint, (i == at ? "LLEN " : "LINDEX ") + key);
    if (r[at]->type != REDIS_REPLY_INTEGER || r[at]->integer < 0)
      throw_unexpected_reply(*r[at], endpoint, "LLEN " + key);
    e = ListEnds{};
    e.length = static_cast<std::size_t>(r[at]->integer);
    const bool first = r[at + 1]->type == REDIS_REPLY_STRING;
    const bool last = r[at + 2]->type == REDIS_REPLY_STRING;
    if (first) e.first.assign(view(*r[at + 1]));
    if (last) e.last.assign(view(*r[at + 2]));
    if ((e.length > 0) != first || (e.length > 0) != last) {
      consistent = false;
      e.first.clear();
      e.last.clear();
    }
  };
  list(0, k.dead, out.dead);
  list(3, k.corrupt, out.corrupt);
  return consistent;
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
    for (const std::size_t i : indexes)
      detail::append_ends_commands(cmds, keys[i], true);
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
      detail::parse_ends(exec.element, out[indexes[n]], lease->endpoint(), keys[indexes[n]]);
    }
  }
  for (const std::size_t i : redirected) {  // slot moved: through the router, on its own
    for (int attempt = 0; attempt < 8; ++attempt) {
      std::optional<ConnectionPool::Lease> lease;
      const auto replies = router.run(lease, keys[i].dead, Effect::read, [&](const std::string&) {
        std::vector<Command> cmds;
        detail::append_ends_commands(cmds, keys[i], false);
        return cmds;
      });
      const redisReply* r[6];
      for (std::size_t c = 0; c < 6; ++c)
        r[c] = replies.at(c).get();
      if (detail::parse_ends(r, out[i], (*lease)->endpoint(), keys[i])) break;
    }
  }
  return out;
}

}  // namespace dlq::redis

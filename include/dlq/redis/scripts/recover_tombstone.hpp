// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/scripts/recover_tombstone.hpp
/// The script of dlq::RedisListStorage::recover.
#pragma once

#include <string_view>

#include "dlq/redis/scripts/snapshot.hpp"

namespace dlq::redis::scripts {

/// Recover one tombstone-like item: delete it from the dead list when it is provably a
/// tombstone of a replay step that stopped between its LSETs and its LREM (the step marked
/// its receipt with replay_tombstones_mark before writing any tombstone, and its payloads
/// were pushed before that), else move every copy of it to the corrupt list.
///
/// Input:
///   KEYS[1]  the dead list
///   KEYS[2]  the corrupt list
///   KEYS[3]  the receipt key of the step the item names (same hash tag as KEYS[1])
///   KEYS[4]  the dead list's runs hash (dlq/redis/scripts/snapshot.hpp): removals lower the
///            bounds
///   ARGV[1]  the item
///   ARGV[2]  '1' when the item has a step's shape (tombstone prefix + 32 hex digits), else
///            '0' (KEYS[3] is not read)
///   ARGV[3]  replay_tombstones_mark
/// Output: {removed, set_aside} — copies deleted as tombstones, copies moved to KEYS[2].
/// Errors: WRONGTYPE when KEYS[2] holds another type (checked before any write: nothing was
/// changed).
inline constexpr auto recover_tombstone_text = detail::join(snapshot_functions, R"lua(
local at = redis.call('LPOS', KEYS[1], ARGV[1], 'COUNT', 0)
if ARGV[2] == '1' and redis.call('GET', KEYS[3]) == ARGV[3] then
  local n = redis.call('LREM', KEYS[1], 0, ARGV[1])
  dlq_removed(KEYS[4], at, 0)
  return {n, 0}
end
local t = redis.call('TYPE', KEYS[2])['ok']
if t ~= 'list' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE key ' .. KEYS[2] .. ' holds a ' .. t ..
                           ', not a list; nothing was moved')
end
local n = redis.call('LREM', KEYS[1], 0, ARGV[1])
dlq_removed(KEYS[4], at, 0)
for i = 1, n do
  redis.call('RPUSH', KEYS[2], ARGV[1])
end
return {0, n}
)lua");
inline constexpr std::string_view recover_tombstone = recover_tombstone_text.view();

}  // namespace dlq::redis::scripts

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/scripts/list_push_capped.hpp
/// The script of dlq::RedisListStorage::push_capped.
#pragma once

#include <string_view>

#include "dlq/redis/scripts/snapshot.hpp"

namespace dlq::redis::scripts {

/// Capped push: append items and, in the same script, remove the oldest items beyond a limit
/// (Overflow::evict_oldest: exact under any number of concurrent senders). At most 10000
/// items are removed per call, so one call never blocks the server for long: a list far
/// over a lowered limit comes down over several sends, or with trim().
///
/// Input:
///   KEYS[1]  the dead list
///   KEYS[2]  its runs hash (dlq/redis/scripts/snapshot.hpp): evictions lower the bounds
///   ARGV[1]  the limit (the list's most items)
///   ARGV[2…] the items, in order
/// Output: the removed items, oldest first (an empty array when none).
/// Errors: WRONGTYPE from RPUSH when KEYS[1] holds another type (nothing was stored).
inline constexpr auto list_push_capped_text = detail::join(snapshot_functions, R"lua(
local len = 0
for i = 2, #ARGV, 1000 do
  len = redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
local over = math.min(len - tonumber(ARGV[1]), 10000)
if over <= 0 then return {} end
local removed = redis.call('LRANGE', KEYS[1], 0, over - 1)
redis.call('LTRIM', KEYS[1], over, -1)
if KEYS[2] then dlq_removed(KEYS[2], nil, over) end
return removed
)lua");
inline constexpr std::string_view list_push_capped = list_push_capped_text.view();

}  // namespace dlq::redis::scripts

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/scripts/list_push_bounded.hpp
/// The scripts of dlq::RedisListStorage::push_bounded (one item, and a batch).
#pragma once

#include <string_view>

namespace dlq::redis::scripts {

/// Bounded push: append one item only while the list is shorter than a limit, atomically.
///
/// Input:
///   KEYS[1]  the dead list
///   ARGV[1]  the limit (the list's most items)
///   ARGV[2]  the item
/// Output: 0 = the list is full, nothing was stored; else the list's length after the push.
/// Errors: WRONGTYPE from LLEN when KEYS[1] holds another type (nothing was stored).
inline constexpr std::string_view list_push_bounded = R"lua(
if redis.call('LLEN', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
return redis.call('RPUSH', KEYS[1], ARGV[2])
)lua";

/// Bounded batch push: append every item of a batch only if the list then holds at most a
/// limit of items, atomically — all of them or none (Overflow::reject with send_batch).
///
/// Input:
///   KEYS[1]  the dead list
///   ARGV[1]  the limit (the list's most items)
///   ARGV[2…] the items, in order
/// Output: 0 = they do not fit, nothing was stored; else the list's length after the push.
/// Errors: WRONGTYPE from LLEN when KEYS[1] holds another type (nothing was stored).
inline constexpr std::string_view list_push_bounded_batch = R"lua(
if redis.call('LLEN', KEYS[1]) + #ARGV - 1 > tonumber(ARGV[1]) then return 0 end
local len = 0
for i = 2, #ARGV, 1000 do
  len = redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
return len
)lua";

}  // namespace dlq::redis::scripts

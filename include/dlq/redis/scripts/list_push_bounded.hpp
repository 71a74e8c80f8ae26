// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/scripts/list_push_bounded.hpp
/// The script of dlq::RedisListStorage::push_bounded.
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

}  // namespace dlq::redis::scripts

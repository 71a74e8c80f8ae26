// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/scripts/list_purge.hpp
/// The script of dlq::RedisListStorage::purge.
#pragma once

#include <string_view>

namespace dlq::redis::scripts {

/// Purge: count a list and delete it in one atomic step, so the count is exact.
///
/// Input:
///   KEYS[1]  the list
/// Output: the number of items deleted (0 when the key did not exist).
/// Errors: WRONGTYPE from LLEN when KEYS[1] holds another type, before UNLINK could delete
/// it (nothing was deleted).
inline constexpr std::string_view list_purge = R"lua(
local n = redis.call('LLEN', KEYS[1])
if n > 0 then redis.call('UNLINK', KEYS[1]) end
return n
)lua";

}  // namespace dlq::redis::scripts

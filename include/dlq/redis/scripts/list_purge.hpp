// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/scripts/list_purge.hpp
/// The script of dlq::RedisListStorage::purge.
#pragma once

#include <string_view>

#include "dlq/redis/scripts/snapshot.hpp"

namespace dlq::redis::scripts {

/// Purge: count a list and delete it in one atomic step, so the count is exact.
///
/// Input:
///   KEYS[1]  the list
///   KEYS[2]  (a dead list only) its runs hash: every run's bound drops to 0
/// Output: the number of items deleted (0 when the key did not exist).
/// Errors: WRONGTYPE from LLEN when KEYS[1] holds another type, before UNLINK could delete
/// it (nothing was deleted).
inline constexpr auto list_purge_text = detail::join(snapshot_functions, R"lua(
local n = redis.call('LLEN', KEYS[1])
if n > 0 then
  redis.call('UNLINK', KEYS[1])
  if KEYS[2] then dlq_removed(KEYS[2], nil, n) end
end
return n
)lua");
inline constexpr std::string_view list_purge = list_purge_text.view();

}  // namespace dlq::redis::scripts

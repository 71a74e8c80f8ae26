// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/scripts/list_range_bytes.hpp
/// The script of dlq::RedisListStorage::range_bytes: a read of a list bounded by bytes on
/// the server, so that the items beyond the budget never reach the client.
#pragma once

#include <string_view>

namespace dlq::redis::scripts {

/// Range bounded by bytes (dlq::BoundedRange): items from ARGV[1], at least ARGV[3] (1 or
/// more) of them, then while their bytes add up to at most ARGV[4], at most ARGV[2].
///
/// Input:
///   KEYS[1]  the list
///   ARGV[1]  start (0 = the oldest item)
///   ARGV[2]  count: most items returned
///   ARGV[3]  min_count: fewest items returned (fewer only where the list ends)
///   ARGV[4]  max_bytes
/// Output: an array: 1 when it stopped at max_bytes with an item after the last one
/// returned (else 0), then the items, oldest first.
///
/// The script reads the list with LRANGE: first the min_count items (in chunks of 64), then
/// chunks of as many as the budget left holds of the largest item seen, at most 8. A size
/// is known only once an item is read, so the server holds at most 7 items beyond the
/// budget (64 were 7.4 s and +516 MB of Lua strings with items of 8 MiB; 8 are 0.48 s),
/// while a read of 512 small items stays a few ms (reading 1 at a time past min_count would
/// bound it strictly, but walks the list once per item: 3-15 ms for 512 items of 300 bytes
/// in a list of 200k). One script, so the items are of one instant.
inline constexpr std::string_view list_range_bytes = R"lua(
local start = tonumber(ARGV[1])
local count = tonumber(ARGV[2])
local least = math.max(1, tonumber(ARGV[3]))
local budget = tonumber(ARGV[4])
local out = {0}
local n, bytes, largest = 0, 0, 0
while n < count do
  local chunk = 1
  if largest > 0 then chunk = math.max(1, math.floor((budget - bytes) / largest)) end
  chunk = math.min(chunk, 8)
  chunk = math.min(count - n, 64, math.max(chunk, least - n))
  local items = redis.call('LRANGE', KEYS[1], start + n, start + n + chunk - 1)
  for _, item in ipairs(items) do
    local size = string.len(item)
    if n >= least and bytes + size > budget then
      out[1] = 1
      return out
    end
    n = n + 1
    bytes = bytes + size
    if size > largest then largest = size end
    out[n + 1] = item
  end
  if #items < chunk then break end
end
return out
)lua";

}  // namespace dlq::redis::scripts

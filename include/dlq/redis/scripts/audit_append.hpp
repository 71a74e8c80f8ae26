// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/scripts/audit_append.hpp
/// The script of dlq::RedisListStorage::audit_append (see dlq/redis/audit_stream.hpp).
#pragma once

#include <string_view>

namespace dlq::redis::scripts {

/// Audit append: add one record to a queue's audit stream and apply the trail's retention
/// (dlq::AuditRetention) in the same atomic step.
///
/// 1. XADD the record (fields `at`, `record`) under a server-generated id.
/// 2. Age: remove, oldest first, the records whose `at` is before ARGV[3] (XDEL), stopping at
///    the first younger one; at most 1000 per call (a trail far behind catches up over a few
///    appends). A record without a readable `at` counts as made at 0. Skipped when ARGV[3]
///    is 0.
/// 3. Cap: when the stream then holds more than ARGV[4] records, remove the oldest down to
///    ARGV[5], at most ARGV[6] per call (XTRIM MAXLEN, exact) — AuditRetention::excess.
///    Skipped when ARGV[4] is 0.
///
/// Input:
///   KEYS[1]  the audit stream
///   ARGV[1]  the record's time (ms since the epoch)    ARGV[2]  the record (JSON)
///   ARGV[3]  remove records made before this (ms); 0 = none
///   ARGV[4]  the length above which the cap applies; 0 = no cap
///   ARGV[5]  the length the cap trims to               ARGV[6]  most records the cap removes
/// Output: the number of records the cap removed (step 3; step 2 is not counted).
/// Errors: WRONGTYPE from XADD when KEYS[1] holds another type (nothing was written).
inline constexpr std::string_view audit_append = R"lua(
redis.call('XADD', KEYS[1], '*', 'at', ARGV[1], 'record', ARGV[2])
local before = tonumber(ARGV[3])
if before > 0 then
  local budget = 1000
  local count = 1
  while budget > 0 do
    local page = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', math.min(count, budget))
    local old = {}
    local young = false
    for _, e in ipairs(page) do
      local fields = e[2]
      local at = 0
      for i = 1, #fields - 1, 2 do
        if fields[i] == 'at' then at = tonumber(fields[i + 1]) or 0 end
      end
      if at >= before then
        young = true
        break
      end
      old[#old + 1] = e[1]
    end
    if #old > 0 then redis.call('XDEL', KEYS[1], unpack(old)) end
    budget = budget - #old
    if young or #page < count then break end
    count = 100
  end
end
local trigger = tonumber(ARGV[4])
if trigger == 0 then return 0 end
local len = redis.call('XLEN', KEYS[1])
if len <= trigger then return 0 end
local drop = math.min(len - tonumber(ARGV[5]), tonumber(ARGV[6]))
if drop <= 0 then return 0 end
return redis.call('XTRIM', KEYS[1], 'MAXLEN', len - drop)
)lua";

}  // namespace dlq::redis::scripts

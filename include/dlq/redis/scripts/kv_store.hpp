// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/scripts/kv_store.hpp
/// The scripts of dlq::kv::RedisStore (dlq/redis/kv_store.hpp describes its key layout: a
/// record key per record, an index sorted set and a version counter per collection).
#pragma once

#include <string_view>

namespace dlq::redis::scripts {

/// Save: insert or replace records, each under the next version of its collection, in order;
/// with a cap, then also remove, in the same script, the oldest records of the last write's
/// collection beyond it (save_capped: Overflow::evict_oldest, exact under any number of
/// concurrent senders). The removed records' keys are the prefix given plus their ids (the
/// collection's hash tag: the slot of its index).
///
/// Input (per write j = 1..n):
///   KEYS[3j-2]  the record key (a string)
///   KEYS[3j-1]  the collection's index (a sorted set: member id, score version)
///   KEYS[3j]    the collection's version counter (a string, INCR)
///   ARGV[2j-1]  the record's id
///   ARGV[2j]    the record's bytes
///   ARGV[2n+1]  optional, the cap: the most records the last write's collection may hold
///   ARGV[2n+2]  with the cap: the record key prefix of the last write's collection
/// Output: without a cap, the number of records in the last write's collection after the
/// save (ZCARD); with one, the removed records, oldest first, as a flat array id, bytes,
/// version, …
/// Errors: WRONGTYPE when a key holds another type (every key is checked before any write:
/// nothing was saved).
inline constexpr std::string_view kv_save = R"lua(
local seen = {}
for k = 1, #KEYS do
  local t = seen[KEYS[k]] or redis.call('TYPE', KEYS[k])['ok']
  seen[KEYS[k]] = t
  local want = (k % 3 == 2) and 'zset' or 'string'
  if t ~= want and t ~= 'none' then
    return redis.error_reply('WRONGTYPE key ' .. KEYS[k] .. ' holds a ' .. t .. ', not a ' ..
                             want .. '; nothing was saved')
  end
end
local n = #KEYS / 3
for j = 1, n do
  local v = redis.call('INCR', KEYS[3 * j])
  redis.call('SET', KEYS[3 * j - 2], ARGV[2 * j])
  redis.call('ZADD', KEYS[3 * j - 1], v, ARGV[2 * j - 1])
end
local index = KEYS[#KEYS - 1]
if #ARGV == 2 * n then return redis.call('ZCARD', index) end
local over = redis.call('ZCARD', index) - tonumber(ARGV[2 * n + 1])
local out = {}
if over <= 0 then return out end
local ids = redis.call('ZRANGE', index, 0, over - 1, 'WITHSCORES')
for i = 1, #ids, 2 do
  local key = ARGV[2 * n + 2] .. ids[i]
  local v = redis.call('GET', key)
  redis.call('DEL', key)
  redis.call('ZREM', index, ids[i])
  if v then
    out[#out + 1] = ids[i]; out[#out + 1] = v; out[#out + 1] = ids[i + 1]
  end
end
return out
)lua";

/// Save if fits: save a batch of records of one collection only if the collection then holds
/// at most a limit of records (an id already there is a replacement, not growth) — all of
/// them or none (Overflow::reject with send_batch).
///
/// Input (n writes):
///   KEYS[1..n]  the records' keys
///   KEYS[n+1]   the collection's index
///   KEYS[n+2]   the collection's version counter
///   ARGV[1]     the most records the collection may hold
///   ARGV[2j]    the id of write j;  ARGV[2j+1]  its bytes
/// Output: 1 = saved; 0 = they do not fit, nothing was saved.
/// Errors: WRONGTYPE (checked before any write: nothing was saved).
inline constexpr std::string_view kv_save_if_fits = R"lua(
local n = #KEYS - 2
for k = 1, #KEYS do
  local want = (k == n + 1) and 'zset' or 'string'
  local t = redis.call('TYPE', KEYS[k])['ok']
  if t ~= want and t ~= 'none' then
    return redis.error_reply('WRONGTYPE key ' .. KEYS[k] .. ' holds a ' .. t .. ', not a ' ..
                             want .. '; nothing was saved')
  end
end
local index, counter = KEYS[n + 1], KEYS[n + 2]
local added, seen = 0, {}
for j = 1, n do
  local id = ARGV[2 * j]
  if not seen[id] and not redis.call('ZSCORE', index, id) then added = added + 1 end
  seen[id] = true
end
if redis.call('ZCARD', index) + added > tonumber(ARGV[1]) then return 0 end
for j = 1, n do
  local v = redis.call('INCR', counter)
  redis.call('SET', KEYS[j], ARGV[2 * j + 1])
  redis.call('ZADD', index, v, ARGV[2 * j])
end
return 1
)lua";

/// Save if below: save one record only while its collection holds fewer than a limit of
/// records, or already holds the id (a replacement never needs room).
///
/// Input:
///   KEYS[1]  the record key
///   KEYS[2]  the collection's index
///   KEYS[3]  the collection's version counter
///   ARGV[1]  the record's id
///   ARGV[2]  the record's bytes
///   ARGV[3]  the most records the collection may hold
/// Output: 0 = full, nothing was saved; else the collection's record count after the save.
/// Errors: WRONGTYPE (checked before any write: nothing was saved).
inline constexpr std::string_view kv_save_if_below = R"lua(
local want = {'string', 'zset', 'string'}
for k = 1, 3 do
  local t = redis.call('TYPE', KEYS[k])['ok']
  if t ~= want[k] and t ~= 'none' then
    return redis.error_reply('WRONGTYPE key ' .. KEYS[k] .. ' holds a ' .. t .. ', not a ' ..
                             want[k] .. '; nothing was saved')
  end
end
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) and
   redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then
  return 0
end
local v = redis.call('INCR', KEYS[3])
redis.call('SET', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], v, ARGV[1])
return redis.call('ZCARD', KEYS[2])
)lua";

/// Increment: add one to a counter that expires a time after its last increment.
///
/// Input:
///   KEYS[1]  the counter (a string)
///   ARGV[1]  its lifetime in seconds, from this increment
/// Output: the counter's new value.
/// Errors: ERR from INCR when KEYS[1] is not an integer (nothing was changed).
inline constexpr std::string_view kv_increment = R"lua(
local v = redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ARGV[1])
return v
)lua";

/// Load: one record and its version, read-only.
///
/// Input:
///   KEYS[1]  the record key
///   KEYS[2]  the collection's index
///   ARGV[1]  the record's id
/// Output: {bytes, version} or nil when the index or the record key does not hold it.
inline constexpr std::string_view kv_load = R"lua(
local s = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not s then return false end
local v = redis.call('GET', KEYS[1])
if not v then return false end
return {v, s}
)lua";

/// List: records of a collection in version order, read-only.
///
/// Input:
///   KEYS[1]  the collection's index
///   ARGV[1]  list versions after this one (exclusive)
///   ARGV[2]  skip this many first
///   ARGV[3]  return at most this many (-1 = all)
///   ARGV[4]  the collection's record key prefix (record key = prefix .. id; it shares the
///            index's hash tag, so the keys are in the script's slot)
/// Output: a flat array id, bytes, version, id, bytes, version, … oldest first (ids whose
/// record key is missing are left out).
inline constexpr std::string_view kv_list = R"lua(
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf', 'WITHSCORES',
                       'LIMIT', ARGV[2], ARGV[3])
local out = {}
local n = #ids / 2
for c = 1, n, 500 do
  local last = math.min(c + 499, n)
  local keys = {}
  for i = c, last do keys[#keys + 1] = ARGV[4] .. ids[2 * i - 1] end
  local vals = redis.call('MGET', unpack(keys))
  for i = c, last do
    local v = vals[i - c + 1]
    if v then
      out[#out + 1] = ids[2 * i - 1]; out[#out + 1] = v; out[#out + 1] = ids[2 * i]
    end
  end
end
return out
)lua";

/// Ends: a collection's record count and its oldest and newest record, read at one instant
/// (DeadLetterQueue::stats), read-only. An index member whose record key is missing or holds
/// another type is passed by, as kv_list passes it by: each end is the first record present
/// from that end (ids read 100 at a time, then one GET per id until one holds a string — a
/// single GET when nothing is missing; pcall: a foreign type is an error, passed by).
///
/// Input:
///   KEYS[1]  the collection's index
///   ARGV[1]  the collection's record key prefix (as kv_list)
/// Output: {count, oldest, newest}; count is the index's ZCARD (as count()); oldest and newest
/// are {id, bytes, version}, or an empty array when no record of the collection is present.
inline constexpr std::string_view kv_ends = R"lua(
local n = redis.call('ZCARD', KEYS[1])
local out = {n, {}, {}}
local order = {'ZRANGE', 'ZREVRANGE'}
for e = 1, 2 do
  local i = 0
  while i < n and #out[e + 1] == 0 do
    local ids = redis.call(order[e], KEYS[1], i, i + 99, 'WITHSCORES')
    if #ids == 0 then break end
    for j = 1, #ids, 2 do
      local v = redis.pcall('GET', ARGV[1] .. ids[j])
      if type(v) == 'string' then
        out[e + 1] = {ids[j], v, ids[j + 1]}
        break
      end
    end
    i = i + 100
  end
end
return out
)lua";

/// Remove: delete records, or move them to another collection, each only if it still has
/// the expected version.
///
/// Input (per removal j, in order; 2 keys for a deletion, 5 for a move):
///   KEYS   the record key, the index — and for a move the target's record key, index and
///          version counter
///   ARGV[3j-2]  the id
///   ARGV[3j-1]  the expected version ('0' = any)
///   ARGV[3j]    '1' = move to the target, '0' = delete
/// Output: how many removals applied (an id not there, or at another version, is passed by).
/// Errors: WRONGTYPE (the index keys and every key a move writes are checked first: nothing
/// was removed). Deletions are done at the end, with one DEL and one ZREM per index in
/// chunks of 500.
inline constexpr std::string_view kv_remove = R"lua(
local n = #ARGV / 3
local seen = {}
local function check(k, want)
  local t = seen[k] or redis.call('TYPE', k)['ok']
  seen[k] = t
  if t ~= want and t ~= 'none' then
    return redis.error_reply('WRONGTYPE key ' .. k .. ' holds a ' .. t .. ', not a ' ..
                             want .. '; nothing was removed')
  end
end
local k = 1
for j = 1, n do
  local e = check(KEYS[k + 1], 'zset')
  if e then return e end
  if ARGV[3 * j] == '1' then
    e = check(KEYS[k + 2], 'string') or check(KEYS[k + 3], 'zset') or check(KEYS[k + 4], 'string')
    if e then return e end
    k = k + 5
  else
    k = k + 2
  end
end
local applied = 0
local gone = {}
local dels = {}
local zrems = {}
k = 1
for j = 1, n do
  local rec, idx, id, ver = KEYS[k], KEYS[k + 1], ARGV[3 * j - 2], ARGV[3 * j - 1]
  local move = ARGV[3 * j] == '1'
  if not gone[rec] then
    local s = redis.call('ZSCORE', idx, id)
    if s and (ver == '0' or tonumber(s) == tonumber(ver)) then
      applied = applied + 1
      if not move then
        gone[rec] = true
        dels[#dels + 1] = rec
        local z = zrems[idx]
        if z == nil then z = {}; zrems[idx] = z end
        z[#z + 1] = id
      elseif KEYS[k + 2] ~= rec then
        local v = redis.call('GET', rec)
        if v then
          local nv = redis.call('INCR', KEYS[k + 4])
          redis.call('SET', KEYS[k + 2], v)
          redis.call('ZADD', KEYS[k + 3], nv, id)
        end
        redis.call('DEL', rec)
        redis.call('ZREM', idx, id)
      end
    end
  end
  k = k + (move and 5 or 2)
end
for i = 1, #dels, 500 do
  redis.call('DEL', unpack(dels, i, math.min(i + 499, #dels)))
end
for idx, z in pairs(zrems) do
  for i = 1, #z, 500 do
    redis.call('ZREM', idx, unpack(z, i, math.min(i + 499, #z)))
  end
end
return applied
)lua";

/// Purge chunk: remove up to a chunk of the oldest records of a collection (remove_all runs
/// it until it returns 0, so no single script blocks the server for long).
///
/// Input:
///   KEYS[1]  the collection's index
///   ARGV[1]  the newest version to remove (the newest when remove_all started)
///   ARGV[2]  the chunk size
///   ARGV[3]  the collection's record key prefix
/// Output: how many records were removed.
inline constexpr std::string_view kv_purge_chunk = R"lua(
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for i = 1, #ids do
  redis.call('DEL', ARGV[3] .. ids[i])
end
if #ids > 0 then
  for i = 1, #ids, 1000 do
    redis.call('ZREM', KEYS[1], unpack(ids, i, math.min(i + 999, #ids)))
  end
end
return #ids
)lua";

}  // namespace dlq::redis::scripts

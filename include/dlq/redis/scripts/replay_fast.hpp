// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/scripts/replay_fast.hpp
/// The script of dlq::RedisListStorage::replay_fast: the server-side fast step of an
/// unfiltered replay, for the envelopes dlq writes (dlq/entry.hpp). docs/design.md says why
/// it is shaped this way, docs/benchmarks.md what it costs.
#pragma once

#include <string_view>

namespace dlq::redis::scripts {

/// Fast replay step: move the provable entries at the head of a dead list to the destination
/// list in one atomic step, without the client seeing their bytes.
///
/// An item is provable when its bytes have the layout dlq writes:
///
///     {"payload_bytes":N,"original_payload":<N bytes>,"id":"<36 bytes>"<tail>}
///
/// with N a decimal without leading zeros; the payload span starting and ending like one
/// JSON value (`{`…`}`, `[`…`]`, `"`…`"`, or neither end a bracket or quote); the 36 bytes
/// in canonical UUID shape (hex digits and four dashes); and a tail that ends the object with
/// `}`, holds `,"dead_lettered_at":"` (dlq writes it in every envelope) and none of the byte
/// strings `"id"`, `"original_payload"`, `"parked"`, `"payload_` (so no second id or
/// payload, no parked mark, no base64 or whitespace flag). The payload of an envelope dlq
/// wrote is exactly the span, its id exactly the 36 bytes — what the compare-and-move path
/// cuts and reports for it. Anything else is not provable: a Python-written or older
/// envelope (no length field), a parked or base64 entry, most corrupt items, and a dlq
/// envelope whose length field is wrong (too short, the real id follows in the tail; too
/// long, the tail lacks dead_lettered_at, or the id check fails).
///
/// The script checks the frame, not the JSON inside it (validating it costs more than the
/// move itself). An item built on purpose with this frame around bytes that are not one
/// JSON value is moved as its frame says: only that item's own bytes are pushed, no other
/// item is affected — the same limit as Decision::identity (dlq/storage.hpp); whoever can
/// write such an item to the dead list could have written an entry with that payload.
///
/// The script reads the head in chunks of at most ARGV[4] items and takes provable items
/// until ARGV[1] items are taken, their bytes plus their payloads' bytes (what the script
/// reads and writes) reach ARGV[2] (at least one item is taken when
/// the first is provable), the list ends, or an item is not provable. Then it RPUSHes the
/// taken payloads to KEYS[2] (in list order, 1000 per command) and LTRIMs them off the head:
/// every item is in exactly one of the two lists before and after, and nothing else is
/// written (no receipt, no staging), so a replayer killed at any instant leaves nothing to
/// recover.
///
/// Input:
///   KEYS[1]  the dead list
///   KEYS[2]  the destination list
///   ARGV[1]  most items to take (>= 1)
///   ARGV[2]  byte budget: stop taking once the taken items' and payloads' bytes reach it
///   ARGV[3]  "1" = return the taken items' ids, "0" = only their count
///   ARGV[4]  most items read per LRANGE
/// Output: {taken, unprovable, ids}: the number of items moved; how many items right after
/// them were read and are not provable (0 when the step stopped for a limit or the list
/// ended; it counts up to the first provable item or the end of the chunk read); and the
/// moved items' ids in list order (an empty array unless ARGV[3] is "1").
/// Errors: WRONGTYPE from LRANGE (nothing written) or from RPUSH on the first command (nothing
/// written) when a key holds another type. An RPUSH failing after another one succeeded
/// cannot happen for a list key; a server that aborts the script there (out of memory mid-
/// script) leaves pushed copies in the destination with the items still in the dead list: a
/// duplicate, never a loss.
inline constexpr std::string_view replay_fast = R"lua(
local dead, dest = KEYS[1], KEYS[2]
local max, budget = tonumber(ARGV[1]), tonumber(ARGV[2])
local want, chunk = ARGV[3] == '1', tonumber(ARGV[4])
local find, sub, byte, tonum = string.find, string.sub, string.byte, tonumber
local uuid = '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x"'
local closer = {[123] = 125, [91] = 93, [34] = 34}
-- The payload's first and last byte (1-based) and the id's first byte, or nil.
local function prove(w)
  local _, e, len = find(w, '^{"payload_bytes":([1-9]%d*),"original_payload":')
  if not e then return nil end
  local first, last = e + 1, e + tonum(len)
  if last + 45 > #w or sub(w, last + 1, last + 7) ~= ',"id":"' then return nil end
  local a, z = byte(w, first), byte(w, last)
  local c = closer[a]
  if c then
    if z ~= c or (a == 34 and last == first) then return nil end
  elseif z == 125 or z == 93 or z == 34 then
    return nil
  end
  if not find(w, uuid, last + 8) or byte(w, #w) ~= 125 then return nil end
  local t = last + 44
  if find(w, '"id"', t, true) or find(w, '"parked"', t, true) or find(w, '"payload_', t, true)
      or find(w, '"original_payload"', t, true)
      or not find(w, ',"dead_lettered_at":"', t, true) then
    return nil
  end
  return first, last, last + 8
end
local out, ids, m, bytes, unprovable, at = {}, {}, 0, 0, 0, 0
while m < max and bytes < budget do
  local n = math.min(chunk, max - m)
  local items = redis.call('LRANGE', dead, at, at + n - 1)
  for i = 1, #items do
    local w = items[i]
    local first, last, id = prove(w)
    if unprovable > 0 then
      if first then break end
      unprovable = unprovable + 1
    elseif not first then
      unprovable = 1
    else
      m = m + 1
      out[m] = sub(w, first, last)
      if want then ids[m] = sub(w, id, id + 35) end
      bytes = bytes + #w + (last - first + 1)
      if m >= max or bytes >= budget then break end
    end
  end
  if unprovable > 0 or #items < n then break end
  at = at + #items
end
for i = 1, m, 1000 do
  redis.call('RPUSH', dest, unpack(out, i, math.min(i + 999, m)))
end
if m > 0 then redis.call('LTRIM', dead, m, -1) end
return {m, unprovable, ids}
)lua";

}  // namespace dlq::redis::scripts

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/scripts/replay_fast.hpp
/// The script of dlq::RedisListStorage::replay_fast: the server-side fast step of an
/// unfiltered replay, for the envelopes dlq writes (dlq/entry.hpp). docs/design.md says why
/// it is shaped this way, docs/benchmarks.md what it costs.
#pragma once

#include <string_view>

#include "dlq/redis/scripts/snapshot.hpp"

namespace dlq::redis::scripts {

/// Fast replay step: move the provable entries at the head of a dead list to the destination
/// list in one atomic step, without the client seeing their bytes.
///
/// An item is provable when its bytes start and end as dlq writes an envelope whose payload
/// is JSON embedded verbatim and which is not parked (dlq/entry.hpp):
///
///     {"payload_bytes":N,"original_payload":<N bytes>,"id":"<36 B>","queue":"…,"envelope_bytes":M}
///
/// N is a positive integer written as JSON writes it (decimal digits, no leading zero, sign,
/// space or fraction — Lua's tonumber alone would also take `05`, `+5`, `0x5` or `5\0…`,
/// which make the item unreadable as JSON), at most 11 digits; the 36 bytes are followed by
/// `","queue":"`; the item ends with `,"envelope_bytes":M}` where M, written as Lua writes
/// #item, is the item's own byte length (so no leading zero either), after the fixed bytes.
/// Such an item's payload is exactly the N bytes and its id exactly the 36 bytes — what the
/// compare-and-move path cuts and reports for it. All of it costs O(1) an item: nothing
/// between the queue marker and the end is read. What a head up to `"original_payload":`
/// proves (N, or nothing) and the end an item of a given length must have are worked out
/// once per call and looked up for the next item with the same head or length (payload
/// sizes repeat; docs/benchmarks.md has what that saves); an item that starts with the head
/// proved last for its length needs one plain find for its head (each call into a string
/// function costs the server ~700 instructions, more than the bytes it compares); every
/// item's own bytes are still compared.
///
/// The end proves the item is the whole of one envelope as dlq wrote it: an item cut off
/// anywhere (even right after a `}` inside a context holding a nested dead_lettered_at or
/// envelope_bytes member) is shorter than the M it would have to end with — a nested
/// envelope's M is that envelope's length, never the length of an item around it; two
/// envelopes (or an envelope and any other JSON) pushed as one item, joined by nothing, `\n`
/// or `\r\n` (`RPUSH key "$(cat entries.ndjson)"`), end with the last one's M, which is not
/// the length of the whole: compare-and-move sets such an item aside, every byte kept, where
/// taking its frame would push the first payload and trim the rest away.
///
/// Flags. dlq writes the ones that change how an entry replays (parked, payload_encoding,
/// payload_whitespace) before payload_bytes, so such entries do not start this way. A tool
/// that sets one on an entry dlq wrote:
///   - appends it after envelope_bytes when it keeps the members' order (jq -c, json.dumps,
///     a JS spread or Object.assign, ordered maps): the item no longer ends with M — even when
///     re-serializing shortens other bytes by exactly the member's length (jq 1.6 and JS
///     write `2.0` as `2`: seven such numbers in a context and `,"parked":true` leave #item
///     equal to M);
///   - or sorts the members (Go maps, sort_keys): the item no longer starts with the frame;
///   - or drops the members it does not know (a typed struct without envelope_bytes): no M;
///   - or keeps some members last and puts the flag before them (a typed serializer with
///     envelope_bytes declared last, an object rebuilt with some fields last): the item is longer
///     than M — unless the same rewrite shortens other bytes by exactly the flag's length.
/// That last case needs a tool that knows dlq's layout, copies M unchanged, adds a flag in
/// the middle and happens to shorten the rest by exactly as many bytes. A tool that appends
/// a flag and then writes envelope_bytes last with the new length defeats the proof outright
/// (the item ends as dlq writes it; the step would replay a parked entry): the wire format
/// (README) asks a tool that re-writes an entry to drop envelope_bytes, never to recompute
/// it. Both are of the class of items
/// built on purpose below, as a key spelled with escapes (`"p\u0061rked"`) already was when
/// the script scanned the tail for `parked"` and `_encoding"`; that scan cost ~12-23 % of
/// the script's server time for 300 B payloads (docs/benchmarks.md) and is gone.
///
/// Anything else is not provable: a Python-written or older envelope (no length field first
/// or none last), a parked, base64 or whitespace-kept entry, corrupt items, and a dlq
/// envelope whose length field is wrong (the fixed bytes are not where N says: a wrong length
/// that still lands on them needs a payload or tail built to carry `,"id":"`, 36 bytes and
/// `","queue":"` exactly there).
///
/// The script checks this frame, not the JSON inside it (validating it costs more than the
/// move itself). An item whose id's 36 bytes hold an escape or a quote (never in what dlq
/// writes on Redis: a UUID) has its id reported as those bytes, not as the decoded string
/// compare-and-move reports (checking for them costs ~0.1 µs an item). An item built on
/// purpose with this frame around bytes that are not what dlq writes (a payload span that is
/// not one JSON value, a second id or parked field in the tail, a matching M) is moved as its
/// frame says: only that item's own bytes are pushed and no other item is affected — the
/// same limit as Decision::identity (dlq/storage.hpp); whoever can write such an item to the
/// dead list could have written an entry with that payload.
///
/// The script reads the head in chunks — one item first, then 32, doubling up to ARGV[4],
/// each no larger than what fits the budget left at the average item size read so far, so
/// that entries far bigger than the budget are read about one at a time (every item read is
/// copied into the script's reply buffer and again into a Lua string: reading 32 entries of
/// 20 MB to take one cost the server ~640 MB) — and takes provable items until ARGV[1] items
/// are taken, their bytes plus their payloads' bytes (what the script reads and writes) reach
/// ARGV[2] (the first provable item is always taken), the list ends, or an item is not
/// provable. Then it RPUSHes the taken payloads to KEYS[2] (in list
/// order, 1000 per command) and LTRIMs them off the head: every item is in exactly one of the
/// two lists before and after, and nothing else is written (no receipt, no staging), so a
/// replayer killed at any instant leaves nothing to recover.
///
/// A run with a snapshot bound (ARGV[6]; dlq/redis/scripts/snapshot.hpp) reads and takes only
/// the items below its bound; the move lowers the bounds of every run in KEYS[3].
///
/// Input:
///   KEYS[1]  the dead list
///   KEYS[2]  the destination list
///   KEYS[3]  the dead list's runs hash
///   ARGV[1]  most items to take (>= 1)
///   ARGV[2]  byte budget (see above)
///   ARGV[3]  "1" = return the taken items' ids, "0" = only their count
///   ARGV[4]  most items read per LRANGE (>= 1)
///   ARGV[5]  "1" = a script that follows another in the same pipeline: when the first item
///            it reads is not provable (the script before it most likely stopped there and
///            returned it already), it stops at once and returns {0, 1, {}, {}} — without
///            counting or returning the unprovable items, each of which can be far larger
///            than the byte budget; "0" (or absent) = count and return them
///   ARGV[6]  the run's id in KEYS[3] ('' = no snapshot bound)
///   ARGV[7]  the run's deadline distance in ms (RedisListOptions::receipt_ttl)
/// Output: {taken, unprovable, ids, rest}: the number of items moved; how many items right
/// after them were read and are not provable (0 when the step stopped at a limit or the list
/// ended; counted up to the first provable item, the end of the list, ARGV[1] items taken and
/// unprovable together, ARGV[4] unprovable items, or their bytes reaching ARGV[2]); the moved
/// items' ids in list order (an empty array unless ARGV[3] is "1"); and the bytes of those
/// unprovable items, in order — the new head of the dead list, for the compare-and-move step.
/// Errors: DLQSNAPSHOT (the run's bound is gone; nothing written); WRONGTYPE from LRANGE (nothing
/// written) or from the first RPUSH (nothing written) when a key holds another type. A server that
/// aborts the script between its writes (out of memory mid-script) leaves pushed copies in the
/// destination with the items still in the dead list: a duplicate, never a loss.
inline constexpr auto replay_fast_text = detail::join(snapshot_functions, R"lua(
local dead, dest = KEYS[1], KEYS[2]
local lim, runs, ttl = math.huge, nil, tonumber(ARGV[7])
if ARGV[6] ~= '' then
  -- Read once: the bound now, its deadline and the move's lowering written back at the end.
  runs = dlq_runs(KEYS[3])
  lim = dlq_find(runs, ARGV[6])
  if lim == nil then return dlq_gone(KEYS[3]) end
end
local max, budget = tonumber(ARGV[1]), tonumber(ARGV[2])
local want, chunk, follows = ARGV[3] == '1', tonumber(ARGV[4]), ARGV[5] == '1'
local find, sub, byte, tonum = string.find, string.sub, string.byte, tonumber
local out, ids, rest, m, bytes, unprovable, at = {}, {}, {}, 0, 0, 0, 0
local seen, spare, n, more = 0, 0, 1, true
local floor, min, max1 = math.floor, math.min, math.max
-- Per call: the payload length an item's head up to ,"original_payload": proves (false:
-- none), the end an item of a given length must have, and per length the last head that
-- proved a length. An item that starts with the head proved last for its length has that
-- head's payload length, so one plain find proves its head: no substring, pattern match,
-- tonumber or concatenation per item — a call into a string function is most of what the
-- proof costs an item (docs/benchmarks.md). Heads and lengths repeat (payload sizes do);
-- at most one entry each per item read.
local heads, ends, lead = {}, {}, {}
while more and at < lim do
  n = math.min(n, lim - at)
  local items = redis.call('LRANGE', dead, at, at + n - 1)
  more = #items == n
  for i = 1, #items do
    local w = items[i]
    local len = #w
    seen = seen + len
    local first, last, v
    local h, e = lead[len], ends[len]
    if h and find(w, h, 1, true) == 1 then
      v = heads[h]
    else
      local c = find(w, ',"original_payload":', 18, true)
      if c and c < 30 then
        h = sub(w, 1, c + 19)
        v = heads[h]
        if v == nil then
          local t = sub(h, 18, c - 1)
          v = find(h, '{"payload_bytes":', 1, true) == 1 and find(t, '^[1-9]%d*$') ~= nil and tonum(t)
          heads[h] = v
        end
        -- A head is remembered for a length seen before: lengths that each come once
        -- (payload sizes all different) cost no entry.
        if v and e then lead[len] = h end
      end
    end
    if v then
      local l = #h + v
      if not e then
        e = ',"envelope_bytes":' .. len .. '}'
        ends[len] = e
      end
      -- The markers and the end compared in place (a plain find that can only match at its
      -- one position): no substring.
      local s = len - #e + 1
      if find(w, ',"id":"', l, true) == l + 1 and find(w, '","queue":"', l + 44, true) == l + 44
          and s > l + 54 and find(w, e, s, true) == s then
        first, last = #h + 1, l
      end
    end
    if first and unprovable > 0 then
      more = false
      break
    elseif first then
      m = m + 1
      out[m] = sub(w, first, last)
      if want then ids[m] = sub(w, last + 8, last + 43) end
      bytes = bytes + len + (last - first + 1)
      if m >= max or bytes >= budget then
        more = false
        break
      end
    elseif follows and m == 0 and unprovable == 0 then
      if runs then dlq_commit(KEYS[3], runs, ARGV[6], ttl, nil, 0) end
      return {0, 1, ids, rest}
    else
      unprovable = unprovable + 1
      rest[unprovable] = w
      spare = spare + #w
      if m + unprovable >= max or unprovable >= chunk or spare >= budget then
        more = false
        break
      end
    end
  end
  if more then
    at = at + n
    -- The next chunk: 32 once the first item's size is known, then twice the last, up to
    -- ARGV[4] — and no more than fit the budget left at the average size read so far (a
    -- taken item counts itself and its payload, an unprovable one itself).
    local per, used = max1(seen / at, 1), spare
    if unprovable == 0 then per, used = 2 * per, bytes end
    n = min(n == 1 and 32 or 2 * n, chunk, max - m - unprovable, floor((budget - used) / per) + 1)
  end
end
for i = 1, m, 1000 do
  redis.call('RPUSH', dest, unpack(out, i, math.min(i + 999, m)))
end
if m > 0 then redis.call('LTRIM', dead, m, -1) end
if runs then
  dlq_commit(KEYS[3], runs, ARGV[6], ttl, nil, m)
elseif m > 0 then
  dlq_removed(KEYS[3], nil, m)
end
return {m, unprovable, ids, rest}
)lua");
inline constexpr std::string_view replay_fast = replay_fast_text.view();

}  // namespace dlq::redis::scripts

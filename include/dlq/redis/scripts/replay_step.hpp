// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/scripts/replay_step.hpp
/// The replay script of dlq::RedisListStorage::replay_step (compare-and-move), and the one
/// function that lays out its KEYS and ARGV. Why the script is shaped this way (what it
/// compares, why it cannot lose an item, what it costs) is in docs/design.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dlq/redis/connection.hpp"
#include "dlq/redis/scripts/snapshot.hpp"

namespace dlq::redis::scripts {

/// Where a decided item goes (ReplayItem::target): the corrupt list (KEYS[2]), nowhere, or a
/// destination list KEYS[k] with k >= replay_first_destination.
inline constexpr std::uint32_t replay_set_aside = 0;
/// ReplayItem::target of an item that is deleted (retention).
inline constexpr std::uint32_t replay_discard = 1;
/// KEYS index of the first destination list.
inline constexpr std::uint32_t replay_first_destination = 5;

/// What the replay script writes to its receipt (KEYS[3]) right before its first tombstone:
/// the mark recover() checks to prove that a tombstone is a replay step's own.
inline constexpr std::string_view replay_tombstones_mark = "tombstones";

/// One decided item, as the script reads it from the plan (ARGV[6]).
struct ReplayItem {
  std::uint32_t index = 0;           ///< position in the window (0 = the item at the offset)
  std::uint32_t target = 0;          ///< replay_set_aside, replay_discard, or a KEYS index
  std::uint32_t payload_first = 0;   ///< payload span in the raw item, 1-based; 0 = explicit
  std::uint32_t payload_last = 0;    ///< last byte of that span, 1-based
  std::uint32_t length = 0;          ///< the raw item's length in bytes
  std::uint32_t identity_first = 0;  ///< identity's first byte in the raw item; 0 = none
  /// What the script compares the item at `index` with: the identity bytes (then `length`
  /// and the bytes at identity_first must match) or, without an identity, the whole item.
  std::string_view check;
};

/// Everything one run of the replay script needs. Views must outlive the command.
struct ReplayCall {
  std::string_view dead;                         ///< KEYS[1]
  std::string_view corrupt;                      ///< KEYS[2]
  std::string_view receipt;                      ///< KEYS[3]
  std::string_view runs;                         ///< KEYS[4]
  const std::vector<std::string>* destinations;  ///< KEYS[5..], in target order
  std::size_t offset = 0;                        ///< ARGV[1]
  std::size_t span = 0;                          ///< ARGV[2]
  std::string_view tombstone;                    ///< ARGV[3]
  bool head = false;                             ///< ARGV[4]
  std::string_view receipt_ttl_ms;               ///< ARGV[5]
  const std::vector<ReplayItem>* items;          ///< ARGV[6] (packed) and ARGV[8..8+m-1]
  std::string_view run;                          ///< ARGV[7]
  const std::vector<std::string>* payloads;      ///< the explicit payloads, in item order
};

/// Replay step: check that every decided item of a window is still where it was decided,
/// then move them all at once — or change nothing.
///
/// Input:
///   KEYS[1]    the dead list
///   KEYS[2]    the corrupt list (set-aside items are pushed here unchanged)
///   KEYS[3]    the step's receipt key (a string; same hash tag as KEYS[1])
///   KEYS[4]    the dead list's runs hash (dlq/redis/scripts/snapshot.hpp)
///   KEYS[5..]  destination lists (replayed payloads)
///   ARGV[1]    offset of the window in the dead list
///   ARGV[2]    how many items of the window to re-read (last decided index + 1)
///   ARGV[3]    the step's tombstone (unique to the step, starts with a NUL byte)
///   ARGV[4]    '1' when the decided items are exactly the head of the list (LTRIM),
///              else '0' (each one LSET to the tombstone, then one LREM)
///   ARGV[5]    receipt lifetime in ms
///   ARGV[6]    the plan: per decided item six little-endian uint32 — index in the window,
///              target (0 = KEYS[2], 1 = discard, k >= 5 = KEYS[k]), payload's first and last
///              byte in the raw item (1-based; first = 0: the payload is the next explicit
///              payload), the raw item's length, the identity's first byte (0 = none)
///   ARGV[7]    the run's id in KEYS[4] ('' = a walk without a snapshot bound)
///   ARGV[8..7+m]   per decided item its identity bytes, or without one its whole raw bytes
///   ARGV[8+m..]    the explicit payloads (those that are not a span of their raw item)
///
/// Output: 1 = applied (and the receipt set to '1'); 0 = an item is not the decided one any
/// more, or the window reaches past the run's bound: nothing was changed.
/// Errors: WRONGTYPE (a list it writes holds another type; checked before any write: nothing
/// was changed); DLQSNAPSHOT (the run's bound is gone; nothing was changed).
/// Every removal lowers the bounds of the runs in KEYS[4] (dlq/redis/scripts/snapshot.hpp).
/// Order of writes: pushes (destinations, corrupt list), then the removal (LTRIM; or the
/// receipt set to replay_tombstones_mark, the LSETs and one LREM), then the receipt set to
/// '1'. Redis does not roll back a script that fails midway, so a failure can leave a copy
/// in both places (a duplicate), never a loss; tombstones it leaves behind are provably its
/// own (the marked receipt) for recover().
inline constexpr auto replay_step_text = detail::join(snapshot_functions, R"lua(
local off = tonumber(ARGV[1])
if ARGV[7] ~= '' then
  local bound = dlq_bound(KEYS[4], ARGV[7], tonumber(ARGV[5]))
  if bound == nil then return dlq_gone(KEYS[4]) end
  if off + tonumber(ARGV[2]) > bound then return 0 end
end
local win = redis.call('LRANGE', KEYS[1], off, off + tonumber(ARGV[2]) - 1)
local plan = ARGV[6]
local m = #plan / 24
local sub, unpack4 = string.sub, struct.unpack
local lists, idx, e = {}, {}, 7 + m
for j = 1, m do
  local i, k, a, b, n, o = unpack4('<I4I4I4I4I4I4', plan, 24 * j - 23)
  local w, v = win[i + 1], ARGV[7 + j]
  if o == 0 then
    if w ~= v then return 0 end
  elseif w == nil or #w ~= n or sub(w, o, o + #v - 1) ~= v then
    return 0
  end
  idx[j] = i
  if k == 0 then
    k = 2; v = w
  elseif k == 1 then
    v = nil
  elseif a > 0 then
    v = sub(w, a, b)
  else
    e = e + 1; v = ARGV[e]
  end
  if v ~= nil then
    local t = lists[k]
    if t == nil then t = {}; lists[k] = t end
    t[#t + 1] = v
  end
end
for k = 2, #KEYS do
  if k ~= 3 and k ~= 4 then
    local t = redis.call('TYPE', KEYS[k])['ok']
    if t ~= 'list' and t ~= 'none' then
      return redis.error_reply('WRONGTYPE key ' .. KEYS[k] .. ' holds a ' .. t .. ', not a list')
    end
  end
end
for k, t in pairs(lists) do
  for i = 1, #t, 1000 do
    redis.call('RPUSH', KEYS[k], unpack(t, i, math.min(i + 999, #t)))
  end
end
if ARGV[4] == '1' then
  redis.call('LTRIM', KEYS[1], m, -1)
  dlq_removed(KEYS[4], nil, m)
else
  redis.call('SET', KEYS[3], 'tombstones', 'PX', ARGV[5])
  for j = 1, m do
    idx[j] = off + idx[j]
    redis.call('LSET', KEYS[1], idx[j], ARGV[3])
  end
  redis.call('LREM', KEYS[1], m, ARGV[3])
  dlq_removed(KEYS[4], idx, 0)
end
redis.call('SET', KEYS[3], '1', 'PX', ARGV[5])
return 1
)lua");
inline constexpr std::string_view replay_step = replay_step_text.view();

/// ARGV[6] of replay_step: six little-endian uint32 per item.
inline std::string encode_replay_plan(const std::vector<ReplayItem>& items) {
  std::string plan;
  plan.reserve(items.size() * 24);
  auto put = [&plan](std::uint32_t v) {
    for (int b = 0; b < 4; ++b)
      plan += static_cast<char>((v >> (8 * b)) & 0xFF);
  };
  for (const ReplayItem& it : items) {
    put(it.index);
    put(it.target);
    put(it.payload_first);
    put(it.payload_last);
    put(it.length);
    put(it.identity_first);
  }
  return plan;
}

/// The EVALSHA of replay_step for `call`; `plan` is encode_replay_plan(*call.items). The
/// command refers to the bytes of `call` and `plan` (they must outlive it); `sha` is copied.
inline Command replay_step_command(const std::string& sha, const ReplayCall& call,
                                   const std::string& plan) {
  const auto& items = *call.items;
  const auto& destinations = *call.destinations;
  Command c("EVALSHA");
  c.reserve(2 + 4 + destinations.size() + 7 + items.size() + call.payloads->size());
  c.arg_copy(sha).arg(4 + destinations.size());
  c.arg(call.dead).arg(call.corrupt).arg(call.receipt).arg(call.runs);
  for (const auto& k : destinations)
    c.arg(std::string_view(k));
  c.arg(call.offset).arg(call.span).arg(call.tombstone).arg(call.head ? "1" : "0");
  c.arg(call.receipt_ttl_ms).arg(std::string_view(plan)).arg(call.run);
  for (const ReplayItem& it : items)
    c.arg(it.check);
  for (const auto& p : *call.payloads)
    c.arg(std::string_view(p));
  return c;
}

}  // namespace dlq::redis::scripts

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/scripts/snapshot.hpp
/// The snapshot bounds of dlq::RedisListStorage: how a replay or discard on a Redis list
/// examines exactly the entries present when it started (see "Snapshot" in dlq/storage.hpp
/// and docs/design.md).
///
/// A Redis list has no per-item sequence, and its content alone cannot tell an entry present
/// at the start from a byte-identical one pushed later after the first was removed (entries
/// without a dlq id are written by other programs; twins exist). What does not change is the
/// shape of the list: every client appends at the tail (RPUSH), so the entries present at a
/// run's start are always a prefix of the list — the first `b` items, with `b` the run's
/// *bound*. Pushes leave `b` alone; removing an item at position p < b lowers it by one. So
/// each run in progress has its bound in a hash on the server, `<dead key>:runs` (field: the
/// run's id; value: "<bound> <deadline in ms>"), set to LLEN when it starts
/// (replay_snapshot_begin), and every dlq script that removes items from a dead list — the
/// replay step and the fast step (dlq/redis/scripts/replay_step.hpp, replay_fast.hpp),
/// remove, purge, the capped push and recover — lowers the bound of every run in the same
/// atomic script by the number of items it removed below that bound. A run reads only items
/// below its bound (replay_snapshot_read, and the fast step clips its reads) and its replay
/// step applies only when every item of its window is below it, so it never examines an
/// entry pushed after its start, and since nothing is skipped by a bound that is exact, it
/// reaches every entry present at the start that is still there.
///
/// What this needs: every client that removes entries from a dead list while a run goes on
/// is dlq (any front end or process of this version). A removal by another program (the
/// Python seed's replay_one LPOP, a raw LREM) is not counted: each entry present at the start
/// it removes lets a run in progress take one entry more at its end. Pushes by anyone are fine.
///
/// A run refreshes its deadline (RedisListOptions::receipt_ttl ahead) with every read and
/// step; scripts drop runs whose deadline passed (a killed process), and the hash itself
/// expires receipt_ttl after the last refresh. A run whose field is gone — it made no step for
/// receipt_ttl, or the hash was deleted — fails with the error DLQSNAPSHOT (nothing moved).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dlq::redis::scripts {

namespace detail {

/// Lua text made at compile time from two parts (see join).
template <std::size_t N>
struct lua_text {
  char chars[N]{};
  constexpr std::string_view view() const { return {chars, N - 1}; }
};

/// `a` followed by `b` (string literals), as one compile-time text.
template <std::size_t A, std::size_t B>
constexpr lua_text<A + B - 1> join(const char (&a)[A], const char (&b)[B]) {
  lua_text<A + B - 1> out{};
  for (std::size_t i = 0; i + 1 < A; ++i)
    out.chars[i] = a[i];
  for (std::size_t i = 0; i < B; ++i)
    out.chars[A - 1 + i] = b[i];
  return out;
}

}  // namespace detail

/// The runs hash of the dead list `dead`: `<dead key>:runs` (same hash tag).
inline std::string runs_key(std::string_view dead) {
  std::string k(dead);
  k += ":runs";
  return k;
}

/// The Lua functions the scripts share (prepended to each one):
///   dlq_runs(runs): the runs hash as HGETALL returns it (read once per script).
///   dlq_find(all, run): the run's bound in what dlq_runs read (nil when it has none).
///   dlq_commit(runs, all, run, ttl, at, head): writes back what dlq_runs read (`all`, with
///     nothing written to the hash since) — items left the dead list at the 0-based positions
///     in `at` (ascending, as they were before the removal; nil = none) and the first `head`:
///     every run's bound is lowered by the removed items below it, runs past their deadline
///     are dropped, and when `run` is given its deadline moves to ttl ms from now and the hash
///     is kept alive that long. One TIME, one HSET (and an HDEL when runs expired), PTTL.
///   dlq_removed(runs, at, head): dlq_commit of a fresh read, for no run.
///   dlq_bound(runs, run, ttl): the run's bound (nil when it has none), its deadline moved.
///   dlq_gone(runs): the DLQSNAPSHOT error reply.
/// A script that both reads its bound and removes items reads the hash once and commits once
/// (the fast step: HGETALL, TIME, HSET, PTTL, PEXPIRE per batch, not nine commands).
inline constexpr char snapshot_functions[] = R"lua(
local function dlq_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function dlq_runs(runs)
  return redis.call('HGETALL', runs)
end
local function dlq_find(all, run)
  for i = 1, #all, 2 do
    if all[i] == run then return tonumber(string.match(all[i + 1], '^(%d+) ')) end
  end
  return nil
end
local function dlq_commit(runs, all, run, ttl, at, head)
  if #all == 0 then return end
  local now, set, drop = dlq_now(), {}, {}
  for i = 1, #all, 2 do
    local f = all[i]
    local b, t = string.match(all[i + 1], '^(%d+) (%d+)$')
    if f == run then
      b, t = string.match(all[i + 1], '^(%d+) '), now + ttl
    end
    b = tonumber(b)
    if b == nil or tonumber(t) < now then
      drop[#drop + 1] = f
    else
      local n = head
      if at then
        for j = 1, #at do
          if at[j] < b then n = n + 1 else break end
        end
      end
      if (n > 0 and b > 0) or f == run then
        set[#set + 1] = f
        set[#set + 1] = math.max(0, b - n) .. ' ' .. t
      end
    end
  end
  if #drop > 0 then redis.call('HDEL', runs, unpack(drop)) end
  if #set > 0 then redis.call('HSET', runs, unpack(set)) end
  if run and redis.call('PTTL', runs) < ttl then redis.call('PEXPIRE', runs, ttl) end
end
local function dlq_removed(runs, at, head)
  dlq_commit(runs, dlq_runs(runs), nil, 0, at, head)
end
local function dlq_bound(runs, run, ttl)
  local all = dlq_runs(runs)
  local b = dlq_find(all, run)
  if b then dlq_commit(runs, all, run, ttl, nil, 0) end
  return b
end
local function dlq_gone(runs)
  return redis.error_reply('DLQSNAPSHOT the snapshot bound of this replay or discard is gone ' ..
    'from ' .. runs .. ' (no step for longer than RedisListOptions::receipt_ttl, or the key ' ..
    'was deleted); nothing was moved by this step: run it again')
end
)lua";

/// Starts a run: its bound is the dead list's length now.
///
/// Input: KEYS[1] the dead list, KEYS[2] its runs hash; ARGV[1] the run's id, ARGV[2] the
/// deadline's distance in ms (RedisListOptions::receipt_ttl).
/// Output: the dead list's length (the run's bound).
inline constexpr auto replay_snapshot_begin_text = detail::join(snapshot_functions, R"lua(
dlq_removed(KEYS[2], nil, 0)
local n = redis.call('LLEN', KEYS[1])
redis.call('HSET', KEYS[2], ARGV[1], n .. ' 0')
dlq_bound(KEYS[2], ARGV[1], tonumber(ARGV[2]))
return n
)lua");
inline constexpr std::string_view replay_snapshot_begin = replay_snapshot_begin_text.view();

/// A run's read of its window: LRANGE first..last, clipped to the items below its bound.
///
/// Input: KEYS[1] the dead list, KEYS[2] its runs hash; ARGV[1] first, ARGV[2] last (0-based,
/// inclusive), ARGV[3] the run's id, ARGV[4] the deadline's distance in ms.
/// Output: the items, as LRANGE returns them. Errors: DLQSNAPSHOT (see the file comment).
inline constexpr auto replay_snapshot_read_text = detail::join(snapshot_functions, R"lua(
local b = dlq_bound(KEYS[2], ARGV[3], tonumber(ARGV[4]))
if b == nil then return dlq_gone(KEYS[2]) end
local first, last = tonumber(ARGV[1]), math.min(tonumber(ARGV[2]), b - 1)
if last < first then return {} end
return redis.call('LRANGE', KEYS[1], first, last)
)lua");
inline constexpr std::string_view replay_snapshot_read = replay_snapshot_read_text.view();

/// remove(): the first item equal to ARGV[1] (LREM count 1), counted against the runs.
///
/// Input: KEYS[1] the list, KEYS[2] the runs hash of the dead list (absent for the corrupt
/// list); ARGV[1] the item. Output: 1 when an item was removed, else 0.
inline constexpr auto list_remove_text = detail::join(snapshot_functions, R"lua(
if KEYS[2] == nil or redis.call('EXISTS', KEYS[2]) == 0 then
  return redis.call('LREM', KEYS[1], 1, ARGV[1])
end
local p = redis.call('LPOS', KEYS[1], ARGV[1])
if not p then return 0 end
redis.call('LREM', KEYS[1], 1, ARGV[1])
dlq_removed(KEYS[2], {p}, 0)
return 1
)lua");
inline constexpr std::string_view list_remove = list_remove_text.view();

}  // namespace dlq::redis::scripts

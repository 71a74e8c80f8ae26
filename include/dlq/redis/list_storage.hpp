// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/list_storage.hpp
/// dlq::RedisListStorage: dead letters in Redis lists, readable and writable by the Python
/// seed service (`dlq:orders` / `queue:orders` lists of JSON envelopes). CMake: dlq::redis.
///
///     dlq::DeadLetterQueue<dlq::RedisListStorage> dlq(
///         dlq::RedisListStorage("redis://127.0.0.1:6379/0"));
///     dlq.send_to_dlq("orders", payload, "payment timeout", 3, "worker-7");
///
/// Keys. Every key is a pattern with `*` standing for the queue name. The default layout is
/// Redis-Cluster-safe: all keys of one queue share the hash tag `{queue}` —
/// dead list `dlq:{orders}`, source list `queue:{orders}`, corrupt list `dlq:{orders}:corrupt`,
/// and the short-lived replay receipts `dlq:{orders}:receipt:<step>`. To share keys with the
/// Python seed set `dead_key = "dlq:*"`, `source_key = "queue:*"`, `corrupt_key =
/// "dlq:*:corrupt"` (not cluster-safe, as the seed's keys are not). The patterns double as
/// SCAN MATCH patterns for queues() (glob characters in the fixed parts are escaped). When a
/// key matches both the dead and the corrupt pattern (`dlq:a:corrupt` with the seed layout),
/// it is taken as a corrupt list.
///
/// Redis Cluster (ElastiCache / MemoryStore cluster mode, redis-cli --cluster): no new URL
/// syntax — give the URL of any master. On first use the storage asks that node `CLUSTER
/// SLOTS` (one round trip, once); a plain server answers "cluster support disabled" and
/// everything then works exactly as without cluster support (one atomic load per operation
/// more). On a cluster it keeps the slot -> master map (CRC16 of each key's hash tag, 16384
/// slots) and one connection pool per master (the URL's options — user, password,
/// timeouts, RedisListOptions::pool — with that master's address). Every operation is on one
/// queue, so on one slot and one master: it is sent there, and redirections are followed
/// (dlq/redis/cluster.hpp): MOVED updates the map and re-sends (at most 5 times), ASK re-sends
/// once to the importing master with ASKING, TRYAGAIN (a script during a slot migration) and
/// CLUSTERDOWN back off 10 -> 200 ms, at most 10 times (~1.5 s); past the bounds a
/// dlq::reply_error (code MOVED / TRYAGAIN / CLUSTERDOWN) names the slot — those answers mean
/// nothing ran. A request whose answer was lost is never re-sent: the receipt logic below
/// works per master. push_many and sizes send one pipeline per master (a command that
/// meets a redirection is re-sent alone); queues() SCANs every master and merges.
/// In cluster mode:
/// - the three key patterns must have the same hash tag: one that holds the queue (the
///   default layout; also e.g. `dlq:{*.eu}`, `queue:{*.eu}`, `dlq:{*.eu}:corrupt`), or one
///   fixed tag (`{dlq}:*`, `{dlq}:queue:*`, `{dlq}:*:corrupt`: every queue on one master). The
///   Python seed's layout (`dlq:*`) is refused on first use with dlq::invalid_argument;
///   cluster_mode() runs that check on demand;
/// - replay moves entries within one slot only: a destination queue (ReplayOptions::to_queue)
///   on another slot is refused with dlq::invalid_argument before anything moves (with one
///   fixed tag every queue shares the slot, so replaying between queues works);
/// - a queue name starting with `}` empties the hash tag and cannot be replayed;
/// - not supported: reads from replicas (every command goes to the slot's master), failover
///   beyond what MOVED/CLUSTERDOWN answers show (a dead master gives connection errors for
///   its slots until the cluster promotes a replica), and database numbers other than 0.
///   queues() during a slot migration may miss a queue whose keys move between the SCANs.
///
/// Costs. push = one RPUSH, one round trip (push_bounded: one short script; bump_count:
/// INCR + EXPIRE in one MULTI/EXEC). push_many = one pipelined round trip (one RPUSH
/// per run of consecutive records of the same queue). size/range/remove = one command.
/// purge = one script (LLEN + UNLINK, atomic, exact count). sizes = one pipelined round
/// trip (in a cluster one per master involved, like push_many). queues = SCAN MATCH … TYPE
/// list (never KEYS; in a cluster on every master). replay_step = one round trip per batch.
///
/// Replay algorithm: compare-and-move (decided by measurement — numbers below).
///  1. The window is read with a plain `LRANGE dead off off+n-1` (the previous step pipelined
///     it behind its script, so a running replay costs one round trip per batch). When the
///     replay kept items at the head (filters, parked entries), the read starts at off-1 —
///     the last kept item: if another client removed kept items meanwhile (remove, a trim,
///     another replayer), that item is not there, and the step reads the head to find its
///     place again instead of skipping the items the shift moved before `off`.
///  2. The client calls the decider per item and cuts out payloads. No JSON is ever decoded
///     in Lua (cjson mangles big numbers, `[]`, `/` and key order).
///  3. One script gets the offset and, per decided item, its index, its action and payload,
///     and what identifies it: its length and its Decision::identity (the entry's id as
///     stored, which the front end gives for entries dlq wrote) with the id's offset — or,
///     without an identity, its raw bytes. It re-reads the window and checks that every
///     decided item is still the one at its index (same length and id bytes at that offset;
///     or byte-identical) — otherwise it returns "conflict" having changed nothing.
///     Then it RPUSHes payloads to their destinations and set-aside raws to the corrupt list,
///     and removes the decided items: `LTRIM dead m -1` when they are the head of the list
///     (replay-all), else LSET each to a tombstone unique to this step and `LREM dead m
///     tombstone` (a positive count stops after m removals: O(offset + window)). Last it sets
///     a receipt key (`SET … PX`) that tells a client whose answer got lost that it ran.
///  An item is at every instant in exactly one place (dead list, destination, corrupt list):
///  a replayer killed at any point leaves nothing to recover; concurrent replayers, the
///  seed's LPOP, trims and LREMs are caught by the comparison; no staging list, lease
///  or lock; producers' RPUSHes during a replay never abort it (unlike WATCH), and new items
///  land behind the window, so replay-all keeps snapshot semantics.
///
/// Why comparing ids suffices: an entry dlq writes carries a UUIDv7 id (62 random bits), so
/// no other item holds those bytes by chance, let alone at the same offset in an item of the
/// same length. A window shifted by another client's LPOP, LREM, LSET or replay puts an item
/// with another id (or length) at a decided index, and the check fails exactly as the full
/// comparison would; byte-identical twins pass either check and are interchangeable. Payloads
/// are always cut from the item the script re-read — the one it removes — never from the
/// client's copy. So the one item that passes where the full comparison would not is one
/// crafted to carry another entry's id at the same offset with the same length; then that
/// item is removed and its own bytes at the decided payload span are pushed: no other entry
/// is lost. Items without an id in canonical UUID form (the Python seed's entries, ids
/// written by other tools) are compared byte for byte, as before.
///
/// Why the script cannot lose an item: Redis does not roll back a script that fails midway;
/// writes done before the failure stay. The script does every check first (the comparison,
/// TYPE of each list it writes — so no RPUSH can fail with WRONGTYPE), then pushes, and
/// removes only after every push succeeded. A failure after the pushes and before the
/// removal leaves copies in both places (a duplicate, never a loss); a failure between the
/// LSETs and the LREM leaves tombstones whose payloads were already pushed — recover()
/// removes such stray tombstones.
///
/// Unknown outcome: if the script's answer is lost (timeout, connection dropped after
/// sending), the step reconnects and, in one round trip, kills its old connection
/// (`CLIENT KILL ID`, so a script still queued there can never run later) and reads the
/// receipt: present = the batch was applied; absent = nothing was applied (the step reports
/// a conflict and the caller re-decides). This is the exact form of "were the items removed
/// from their positions and did the destination grow?" — which is ambiguous while producers
/// and consumers use the same lists. If the server cannot be reached for that, the step
/// throws with outcome_unknown() == true and says that nothing was lost.
///
/// Measurements that decided the algorithm (2 cores, loopback, redis-server 7.0.15, hiredis
/// 0.14.1; replay-all of 100k entries of 300 B, batches of 1000, medians of 5 runs, same
/// server, quiet machine; the other numbers come from tests/benchmarks/redis/run.sh):
///
/// | replay-all, 100k x 300 B                                     | entries/s | vs LMOVE |
/// | ------------------------------------------------------------ | --------- | -------- |
/// | server-side LMOVE loop in one Lua script (bare move limit)   |     904 k |     1.00 |
/// | two-phase staging (DESIGN.md; prototype, not in the library) |     949 k |     1.05 |
/// | compare-and-move, one ARGV per raw and per payload (first)   |     462 k |     0.51 |
/// | compare-and-move, packed plan + payload spans (this file)    |     532 k |     0.59 |
/// | same, with the 512 KiB script budget (the default)           |     500 k |     0.55 |
/// | per-item LPOP + RPUSH loop, C++/hiredis (the seed's method)  |      28 k |     0.03 |
/// | the seed itself, Python + sync redis-py                      |      14 k |    0.016 |
///
/// Where a script's time goes (INFO commandstats, 1000 items of 300 B): turning bytes into
/// Lua strings — ~1.1 ns per ARGV byte, ~1.4 ns per byte read with LRANGE inside the script;
/// the comparison itself is nearly free (Lua interns strings: equal = same pointer). Hence
/// one ARGV per raw (a single 300 KB blob was slower: large allocations), a packed binary
/// plan (struct.unpack), payloads as spans of their raw item instead of second copies, and
/// no table.concat (1.1 ms per 1000 items in Lua 5.1). Script: ~1.4 ms per 1000 x 300 B;
/// with 2 KB entries and the 512 KiB budget p50 1.0 ms, max 2.0 ms (SLOWLOG).
///
/// Through DeadLetterQueue (envelopes of ~470 B around 300 B payloads) the script used to
/// receive every decided raw item back in ARGV only to prove that the item at its index is
/// still the decided one. Entries dlq writes carry a unique id, so the front end now passes
/// it as Decision::identity and the script compares the item's length and id bytes instead
/// (see "Why comparing ids suffices" above). tests/benchmarks/redis/run.sh BUILD 7 (7
/// interleaved rounds, medians), before and after alternated in one session (A B A B, eight
/// pairs) on the shared, noisy 2-core machine (load 1 to 5); median (range) over the pairs:
///
/// | replay_all via DeadLetterQueue, 100k envelopes | before              | after               |
/// | ---------------------------------------------- | ------------------- | ------------------- |
/// | entries/s                                      | 291 k (158–303)     | 340 k (224–371)     |
/// | vs an LMOVE loop over the same envelopes       | 0.42 (0.32–0.45)    | 0.49 (0.44–0.52)    |
/// | speed-up, per pair                             |                     | 1.19x (1.12–1.42)   |
/// | storage level, 300 B items (no identity)       | 0.54 (0.52–0.56)    | 0.58 (0.48–0.60)    |
/// | replay_all script p50, 2 KB payloads (SLOWLOG) | 0.99 ms (0.96–1.07) | 0.71 ms (0.67–0.86) |
///
/// Quiet moments, same server, 100k envelopes, INFO commandstats + client CPU (4 runs each):
/// before 312–317 k/s = 0.43x — scripts 200–205 ms, LRANGE read-ahead 19–20 ms, client CPU
/// 77 ms; after 370–387 k/s = 0.50–0.53x — scripts 168–177 ms, LRANGE 14–15 ms, client CPU
/// 67 ms (its EVALSHA no longer carries the raw items). The script saves less than ~1.1 ns
/// per ARGV byte predicted: Lua interns strings, so the script's re-read of an item it had
/// just received in ARGV found the string already made (hash + compare, no allocation) —
/// now the re-read allocates it. Per 1000 envelopes (script alone, interleaved): ~2.0–2.5 ms
/// by all bytes, ~1.55–1.75 ms by id, ~1.3 ms for the bare work (LRANGE the window ~0.8 µs
/// per 470 B item, cut the payload ~0.45 µs, RPUSH ~0.2 µs; an LMOVE is ~1.4 µs). What is
/// left above LMOVE: the client's half of each round trip (~0.6 µs per entry, most of it
/// the front end's envelope scan, which validates every JSON string byte by byte) and the
/// window read ahead for it.
///
/// The scan now skips plain ASCII string bytes eight at a time (json_scan.hpp,
/// plain_string_bytes). Three alternated pairs of run.sh BUILD 3 on a quiet machine (load
/// < 1): front-end replay_all / LMOVE 0.46, 0.53, 0.49 before, 0.54, 0.50, 0.56 after
/// (median 0.49 -> 0.54; per pair 1.17x, 0.96x, 1.18x). One run.sh BUILD 7 afterwards:
/// 370 k/s = 0.51x, and an age trim() of 100k entries 382 k/s (0.53x), trim script p99
/// 1.0 ms, max 2.4 ms.
///
/// An identity-verified item still counts twice its raw size in max_batch_bytes: the script
/// re-reads it and cuts a payload of up to its size out of it (counting it once would double
/// the 2 KB batches — script p50 1.74 ms — for ~2-3% more throughput).
///
/// Decision: compare-and-move. Staging moves bytes ~1.8x faster (its script returns the
/// window instead of receiving it back), but it cannot keep filtered-out items in place
/// (they would have to be pushed back, at the head only), detects no conflicts, and leaves
/// staging lists that a later replay must recover — which needs leases to tell a dead
/// replayer from a slow one, or it doubles jobs. Compare-and-move has none of that, meets the
/// >= 0.5x-LMOVE target, and is ~19x the seed's per-item loop in C++ (~37x the seed itself).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/audit.hpp"
#include "dlq/detail/kept_prefix.hpp"
#include "dlq/errors.hpp"
#include "dlq/redis/audit_stream.hpp"
#include "dlq/redis/cluster.hpp"
#include "dlq/redis/connection.hpp"
#include "dlq/redis/options.hpp"
#include "dlq/redis/pool.hpp"
#include "dlq/redis/script.hpp"
#include "dlq/storage.hpp"

namespace dlq {

/// Key names and batch limits of a RedisListStorage. Every default is stated. A key pattern
/// must contain exactly one `*` (the queue name) and the three patterns must differ, else the
/// storage's constructor throws dlq::invalid_argument.
struct RedisListOptions {
  /// Dead-letter list of a queue; `*` is the queue name. Default "dlq:{*}" (cluster-safe).
  /// The Python seed's layout is "dlq:*".
  std::string dead_key = "dlq:{*}";
  /// Source queue replay pushes payloads to; `*` is the queue name. Default "queue:{*}".
  /// The Python seed's layout is "queue:*".
  std::string source_key = "queue:{*}";
  /// List of corrupt items set aside by replay. Default "dlq:{*}:corrupt".
  std::string corrupt_key = "dlq:{*}:corrupt";
  /// Most items one replay script moves. Default 1000; 0 = 1000; values above 4000 are
  /// lowered to 4000 (a script must stay short: it blocks the server while it runs).
  std::size_t max_batch_items = 1000;
  /// Most bytes one replay script handles — each decided raw item counts twice (the script
  /// re-reads it from the list, and receives it back to compare or — when verified by its
  /// Decision::identity — cuts a payload of up to its size out of it), a payload sent as
  /// bytes once; a step stops deciding items once it is reached (at least one item is
  /// always decided). Bounds how
  /// long a script blocks the server (measured: 2 KB entries, 512 KiB → p50 1.0 ms, max
  /// 2.0 ms; 1 MiB → p50 2.0 ms, max 3.3 ms). Default 512 KiB (1000 items of 300 B fit in
  /// ~1.1 batches); 0 = 512 KiB.
  std::size_t max_batch_bytes = std::size_t{512} << 10;
  /// How long a replay receipt key lives. Default 10 minutes; 0 = 10 minutes.
  std::chrono::milliseconds receipt_ttl{600000};
  /// Connection pool: how many connections all threads share, how long to wait for one.
  redis::PoolOptions pool;
  /// Audit records kept per queue (the stream `<dead key>:audit` is capped with XADD MAXLEN
  /// ~ this; see dlq/redis/audit_stream.hpp). Default 10 000; 0 = 10 000.
  std::size_t audit_max_records = 10000;
};

namespace detail {

/// A key pattern split at its `*`: prefix + queue + suffix.
struct KeyPattern {
  std::string prefix;
  std::string suffix;

  static KeyPattern parse(const std::string& pattern, const char* option) {
    const auto star = pattern.find('*');
    if (star == std::string::npos || pattern.find('*', star + 1) != std::string::npos) {
      throw dlq::invalid_argument(
          dlq::detail::message("redis", std::string("RedisListOptions::") + option,
                               "key pattern '" + pattern + "' must contain exactly one '*'",
                               "use '*' where the queue name goes, e.g. \"dlq:{*}\""));
    }
    return KeyPattern{pattern.substr(0, star), pattern.substr(star + 1)};
  }
  std::string key(std::string_view queue) const {
    std::string k;
    k.reserve(prefix.size() + queue.size() + suffix.size());
    k += prefix;
    k += queue;
    k += suffix;
    return k;
  }
  /// The key's Redis Cluster hash tag as a pattern: with `*` for the queue when the tag
  /// holds it ("*" for `dlq:{*}`, "*.eu" for `dlq:{*.eu}`), the fixed tag when the prefix
  /// holds a whole one (`{dlq}:*`: every queue in one slot), nullopt when the key has no tag.
  std::optional<std::string> cluster_tag() const {
    const auto open = prefix.find('{');
    if (open == std::string::npos) return std::nullopt;
    const auto close = prefix.find('}', open + 1);
    if (close != std::string::npos) {  // a fixed tag; "{}" is none (the whole key is hashed)
      if (close == open + 1) return std::nullopt;
      return prefix.substr(open + 1, close - open - 1);
    }
    const auto end = suffix.find('}');
    if (end == std::string::npos) return std::nullopt;
    return prefix.substr(open + 1) + "*" + suffix.substr(0, end);
  }
  /// The SCAN MATCH glob: fixed parts escaped, `*` for the queue.
  std::string glob() const { return escape(prefix) + "*" + escape(suffix); }
  /// The queue name if `key` has this pattern's shape.
  std::optional<std::string> queue_of(std::string_view key) const {
    if (key.size() <= prefix.size() + suffix.size()) return std::nullopt;
    if (key.substr(0, prefix.size()) != prefix) return std::nullopt;
    if (key.substr(key.size() - suffix.size()) != suffix) return std::nullopt;
    return std::string(key.substr(prefix.size(), key.size() - prefix.size() - suffix.size()));
  }
  static std::string escape(std::string_view s) {
    std::string out;
    for (char c : s) {
      if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
      out += c;
    }
    return out;
  }
};

// The replay step (compare-and-move). See the file comment for why it cannot lose an item.
// KEYS[1] dead list, KEYS[2] corrupt list, KEYS[3] receipt key, KEYS[4..] destination lists.
// ARGV[1] offset of the window, ARGV[2] span of the window to re-read, ARGV[3] tombstone,
// ARGV[4] '1' when the decided items are exactly the head of the list, ARGV[5] receipt
// lifetime (ms), ARGV[6] the plan: per decided item six little-endian uint32 — index in the
// window, key index (0 = set aside to KEYS[2], 1 = discard), payload's first and last byte in the
// raw item (1-based; first = 0: the payload is the next of the explicit payloads), the raw item's
// length and its identity's first byte in it (1-based; 0 = no identity: compare whole items),
// then one ARGV per decided item with its identity bytes (Decision::identity) or, without one,
// its raw bytes, then the explicit payloads (those that are not a span of their raw item).
// Identities and payload spans replace bytes because a script's time goes into the bytes it
// turns into Lua strings (measured ~1.1 ns per byte of ARGV).
inline constexpr std::string_view replay_script_source = R"lua(
local off = tonumber(ARGV[1])
local win = redis.call('LRANGE', KEYS[1], off, off + tonumber(ARGV[2]) - 1)
local plan = ARGV[6]
local m = #plan / 24
local sub, unpack4 = string.sub, struct.unpack
local lists, idx, e = {}, {}, 6 + m
for j = 1, m do
  local i, k, a, b, n, o = unpack4('<I4I4I4I4I4I4', plan, 24 * j - 23)
  local w, v = win[i + 1], ARGV[6 + j]
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
  if k ~= 3 then
    local t = redis.call('TYPE', KEYS[k])['ok']
    if t ~= 'list' and t ~= 'none' then
      return redis.error_reply('WRONGTYPE key ' .. KEYS[k] .. ' holds a ' .. t ..
                               ', not a list; nothing was moved')
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
else
  for j = 1, m do
    redis.call('LSET', KEYS[1], off + idx[j], ARGV[3])
  end
  redis.call('LREM', KEYS[1], m, ARGV[3])
end
redis.call('SET', KEYS[3], '1', 'PX', ARGV[5])
return 1
)lua";

// Bounded push: RPUSH only while the list is shorter than ARGV[1]; 0 = full.
inline constexpr std::string_view bounded_push_script_source = R"lua(
if redis.call('LLEN', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
return redis.call('RPUSH', KEYS[1], ARGV[2])
)lua";

// Purge: exact count and removal in one atomic step. LLEN fails with WRONGTYPE on a key of
// another type before UNLINK could delete it.
inline constexpr std::string_view purge_script_source = R"lua(
local n = redis.call('LLEN', KEYS[1])
if n > 0 then redis.call('UNLINK', KEYS[1]) end
return n
)lua";

/// Prefix of the tombstones replay writes with LSET right before removing them with LREM.
/// It starts with a NUL byte, so it is never a JSON envelope.
inline constexpr std::string_view tombstone_prefix{"\0dlq:tombstone:", 15};

}  // namespace detail

/// Dead-letter storage in Redis lists (see the file comment). Thread-safe: all members may
/// be called from many threads at once; they share a connection pool.
class RedisListStorage {
 public:
  /// The replay position: the offset of the next window (= items kept so far at the head of
  /// the list) and the window prefetched by the previous step (pipelined behind its script).
  /// When the replay kept items, every window is read from one item earlier — the last kept
  /// one — to check that no kept item was removed by another client meanwhile; if one was,
  /// the step finds its place again (one more read of the head) instead of skipping items.
  struct replay_cursor {
    std::size_t offset = 0;           ///< items of the dead list before the next window
    std::vector<std::string> window;  ///< items read ahead, valid only while `prefetched`
    std::size_t next = 0;             ///< first unconsumed item of `window`
    bool prefetched = false;          ///< `window` was read and may be used (it is verified)
    bool anchor_pending = false;      ///< `window` starts with the last kept item, unchecked
    detail::kept_prefix kept{};       ///< the items kept so far (hashes), in list order
  };

  /// Connects to `connection` (lazily: the first operation connects, and finds out whether
  /// the server is a Redis Cluster — see the file comment).
  /// @throws dlq::invalid_argument when a key pattern does not have exactly one `*` or two
  ///         patterns are equal. (A layout a cluster cannot hold is reported by the first
  ///         operation, or by cluster_mode(), once the server is known.)
  explicit RedisListStorage(redis::ConnectionOptions connection, RedisListOptions options = {})
      : options_(std::move(options)),
        dead_(detail::KeyPattern::parse(options_.dead_key, "dead_key")),
        source_(detail::KeyPattern::parse(options_.source_key, "source_key")),
        corrupt_(detail::KeyPattern::parse(options_.corrupt_key, "corrupt_key")),
        shared_(std::make_unique<Shared>(std::move(connection), options_.pool)) {
    if (options_.dead_key == options_.corrupt_key || options_.dead_key == options_.source_key ||
        options_.corrupt_key == options_.source_key) {
      throw dlq::invalid_argument(dlq::detail::message(
          "redis", "RedisListOptions", "dead_key, source_key and corrupt_key must differ",
          "give each list its own pattern"));
    }
    {  // Redis Cluster needs a queue's keys in one slot: one hash tag for all three patterns.
      const auto d = dead_.cluster_tag();
      const auto s = source_.cluster_tag();
      const auto c = corrupt_.cluster_tag();
      if (!d || !s || !c) {
        untagged_ = "key pattern '" +
                    (!d   ? options_.dead_key
                     : !s ? options_.source_key
                          : options_.corrupt_key) +
                    "' has no hash tag";
      } else if (*d != *s || *d != *c) {
        untagged_ = "key patterns '" + options_.dead_key + "', '" + options_.source_key +
                    "' and '" + options_.corrupt_key + "' do not share one hash tag";
      }
    }
    if (options_.max_batch_items == 0) options_.max_batch_items = 1000;
    options_.max_batch_items = std::min<std::size_t>(options_.max_batch_items, 4000);
    if (options_.max_batch_bytes == 0) options_.max_batch_bytes = std::size_t{512} << 10;
    if (options_.receipt_ttl.count() <= 0) options_.receipt_ttl = std::chrono::minutes(10);
    std::random_device rd;
    shared_->step_base =
        (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^
        static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }

  /// Parses `url` (see dlq::redis::parse_url) and connects lazily.
  /// @throws dlq::invalid_argument for a bad URL or bad key patterns.
  explicit RedisListStorage(std::string_view url, RedisListOptions options = {})
      : RedisListStorage(redis::parse_url(url), std::move(options)) {}

  RedisListStorage(const RedisListStorage&) = delete;
  RedisListStorage& operator=(const RedisListStorage&) = delete;
  /// Moves the connection pool along; the moved-from storage must not be used any more.
  RedisListStorage(RedisListStorage&&) noexcept = default;
  /// Moves the connection pool along; the moved-from storage must not be used any more.
  RedisListStorage& operator=(RedisListStorage&&) noexcept = default;
  ~RedisListStorage() = default;

  /// The options in force (after defaults were applied).
  const RedisListOptions& options() const noexcept { return options_; }
  /// The connection pool of the URL's server (for tools and tests that need raw commands).
  /// In Redis Cluster mode it reaches that one node only: for raw commands on a queue's keys
  /// use `router().acquire(key)`, a connection to the master that owns the key's slot (the
  /// URL's server in plain mode; raw commands are not redirected).
  redis::ConnectionPool& pool() noexcept { return shared_->router.seed(); }
  /// The router that sends each queue's commands to the node owning its hash slot (see
  /// dlq/redis/cluster.hpp).
  redis::Router& router() noexcept { return shared_->router; }
  /// Whether the server is a Redis Cluster (asks it on the first call; see the file comment).
  /// Calling it once after construction validates the key layout early.
  /// @throws dlq::invalid_argument in cluster mode when a key pattern does not put the queue
  ///         in a hash tag; the dlq::storage_error subclasses when the server is unreachable.
  bool cluster_mode() { return routed().clustered(); }

  /// The Redis key of a queue's dead or corrupt list.
  std::string key(std::string_view queue, ListKind kind) const {
    return kind == ListKind::dead ? dead_.key(queue) : corrupt_.key(queue);
  }
  /// The Redis key of a queue's source list (where replay pushes payloads).
  std::string source_key(std::string_view queue) const { return source_.key(queue); }

  /// Appends an envelope to the queue's dead list: one RPUSH.
  /// @return the dead list's length after the push.
  /// @throws dlq::invalid_argument (empty queue name), dlq::storage_error subclasses; a
  ///         timeout after sending has outcome_unknown() == true (never re-sent).
  std::size_t push(const Record& record) {
    check_queue(record.queue, "push");
    const std::string k = dead_.key(record.queue);
    Lease lease;
    auto replies = routed().run(lease, k, redis::Effect::write, [&](const std::string&) {
      return one(std::move(redis::Command("RPUSH").arg(std::string_view(k)).arg(record.envelope)));
    });
    return static_cast<std::size_t>(redis::integer(replies[0], **lease, "RPUSH " + k));
  }

  /// Appends an envelope only while the dead list has fewer than `max_length` items,
  /// atomically (one script: LLEN, then RPUSH). One round trip.
  /// @return false (and nothing stored) when the list is full.
  /// @throws as push().
  bool push_bounded(const Record& record, std::size_t max_length) {
    check_queue(record.queue, "push_bounded");
    const std::string k = dead_.key(record.queue);
    const std::string label = "bounded push script on " + k;
    Lease lease;
    auto replies = routed().run(
        lease, k, redis::Effect::write,
        [&](const std::string& sha) {
          redis::Command c("EVALSHA");
          c.arg_copy(sha).arg(1).arg(std::string_view(k)).arg(max_length).arg(record.envelope);
          c.label(label);
          return one(std::move(c));
        },
        &shared_->bounded_push_script);
    return redis::integer(replies[0], **lease, label) > 0;
  }

  /// Adds one to the counter `key` of `queue` (the poison-loop guard's) and returns its new
  /// value; the counter expires `ttl` after its last bump. INCR + EXPIRE in one MULTI/EXEC,
  /// one round trip. The counter lives at `<dead key>:count:<key>` (same hash tag; a string,
  /// so queues() never lists it).
  std::int64_t bump_count(std::string_view queue, std::string_view key, std::chrono::seconds ttl) {
    check_queue(queue, "bump_count");
    std::string k = dead_.key(queue);
    k += ":count:";
    k += key;
    const long long seconds = std::max<long long>(1, static_cast<long long>(ttl.count()));
    Lease lease;
    // A redirected INCR (index 1) makes EXEC discard the transaction: nothing ran.
    auto replies = routed().run(
        lease, k, redis::Effect::write,
        [&](const std::string&) {
          std::vector<redis::Command> cmds;
          cmds.emplace_back("MULTI");
          cmds.push_back(std::move(redis::Command("INCR").arg(std::string_view(k))));
          cmds.push_back(std::move(redis::Command("EXPIRE").arg(std::string_view(k)).arg(seconds)));
          cmds.emplace_back("EXEC");
          return cmds;
        },
        nullptr, 1);
    const std::string label = "INCR " + k;
    for (std::size_t i = 0; i + 1 < replies.size(); ++i)
      redis::check(replies[i], **lease, label);
    const redisReply& exec = redis::check(replies.back(), **lease, label);
    if (exec.type != REDIS_REPLY_ARRAY || exec.elements != 2 ||
        exec.element[0]->type != REDIS_REPLY_INTEGER) {
      if (exec.type == REDIS_REPLY_ARRAY && exec.elements > 0 &&
          exec.element[0]->type == REDIS_REPLY_ERROR) {
        redis::detail::throw_reply_error(*exec.element[0], (*lease)->endpoint(), label);
      }
      redis::detail::throw_unexpected_reply(exec, (*lease)->endpoint(), label);
    }
    return exec.element[0]->integer;
  }

  /// Appends many envelopes in one pipelined round trip (one RPUSH per run of consecutive
  /// records of the same queue; each RPUSH is atomic, the batch as a whole is not). In a
  /// cluster: one pipeline per master, the runs of a redirected RPUSH re-sent alone.
  /// @throws as push(); on an error reply the records of the other commands were stored.
  void push_many(const std::vector<Record>& records) {
    if (records.empty()) return;
    for (const Record& r : records)
      check_queue(r.queue, "push_many");
    std::vector<std::string> keys;
    std::vector<std::pair<std::size_t, std::size_t>> runs;  // [first, last) of each RPUSH
    keys.reserve(records.size());
    for (std::size_t i = 0; i < records.size();) {
      std::size_t j = i;
      while (j < records.size() && records[j].queue == records[i].queue && j - i < 4096) {
        ++j;
      }
      keys.push_back(dead_.key(records[i].queue));
      runs.emplace_back(i, j);
      i = j;
    }
    // keys must not reallocate once views into them exist: built first, used second.
    std::vector<std::string> endpoints;
    auto replies = run_spread(keys, redis::Effect::write, endpoints, [&](std::size_t n) {
      redis::Command c("RPUSH");
      c.reserve(2 + runs[n].second - runs[n].first);
      c.arg(std::string_view(keys[n]));
      for (std::size_t i = runs[n].first; i < runs[n].second; ++i)
        c.arg(records[i].envelope);
      return c;
    });
    for (std::size_t n = 0; n < replies.size(); ++n) {
      integer_reply(replies[n], endpoints[n],
                    "RPUSH " + keys[n] + " (command " + std::to_string(n + 1) + " of " +
                        std::to_string(keys.size()) + " of a batch)");
    }
  }

  /// Number of items in a queue's dead or corrupt list: one LLEN.
  std::size_t size(std::string_view queue, ListKind kind) {
    check_queue(queue, "size");
    const std::string k = key(queue, kind);
    Lease lease;
    auto replies = routed().run(lease, k, redis::Effect::read, [&](const std::string&) {
      return one(std::move(redis::Command("LLEN").arg(std::string_view(k))));
    });
    return static_cast<std::size_t>(redis::integer(replies[0], **lease, "LLEN " + k));
  }

  /// Up to `count` items from position `start` (0 = oldest): one LRANGE.
  std::vector<std::string> range(std::string_view queue, ListKind kind, std::size_t start,
                                 std::size_t count) {
    check_queue(queue, "range");
    constexpr auto max = static_cast<std::size_t>(std::numeric_limits<long long>::max());
    if (count == 0 || start >= max) return {};
    const std::size_t last = count - 1 > max - start ? max : start + (count - 1);
    const std::string k = key(queue, kind);
    Lease lease;
    auto replies = routed().run(lease, k, redis::Effect::read, [&](const std::string&) {
      return one(std::move(redis::Command("LRANGE").arg(std::string_view(k)).arg(start).arg(last)));
    });
    return redis::strings(replies[0], **lease, "LRANGE " + k);
  }

  /// Removes the first item equal to `raw` (`id` is not needed here): one LREM.
  /// @return true if an item was removed.
  bool remove(std::string_view queue, ListKind kind, std::string_view /*id*/,
              std::string_view raw) {
    check_queue(queue, "remove");
    const std::string k = key(queue, kind);
    Lease lease;
    auto replies = routed().run(lease, k, redis::Effect::write, [&](const std::string&) {
      return one(std::move(redis::Command("LREM").arg(std::string_view(k)).arg(1).arg(raw)));
    });
    return redis::integer(replies[0], **lease, "LREM " + k) > 0;
  }

  /// Deletes a queue's dead or corrupt list in one atomic step.
  /// @return the exact number of items deleted.
  std::size_t purge(std::string_view queue, ListKind kind) {
    check_queue(queue, "purge");
    const std::string k = key(queue, kind);
    Lease lease;
    auto replies = routed().run(
        lease, k, redis::Effect::write,
        [&](const std::string& sha) {
          redis::Command c("EVALSHA");
          c.arg_copy(sha).arg(1).arg(std::string_view(k)).label("purge script on " + k);
          return one(std::move(c));
        },
        &shared_->purge_script);
    return static_cast<std::size_t>(redis::integer(replies[0], **lease, "purge script on " + k));
  }

  /// Queues that have a dead or a corrupt list, sorted: SCAN MATCH <pattern> TYPE list (in
  /// Redis Cluster mode on every master, merged).
  std::vector<std::string> queues() {
    std::set<std::string> found;
    for (redis::ConnectionPool* node : routed().masters()) {
      auto lease = node->acquire();
      scan(*lease, corrupt_, [&](std::string_view k) {
        if (auto q = corrupt_.queue_of(k)) found.insert(std::move(*q));
      });
      scan(*lease, dead_, [&](std::string_view k) {
        if (corrupt_.queue_of(k)) return;  // ambiguous keys are corrupt lists
        if (auto q = dead_.queue_of(k)) found.insert(std::move(*q));
      });
    }
    return {found.begin(), found.end()};
  }

  /// Dead-list lengths of `queues`, in order: one pipelined round trip of LLENs (in a
  /// cluster one per master).
  std::vector<std::size_t> sizes(const std::vector<std::string>& queues) {
    if (queues.empty()) return {};
    std::vector<std::string> keys;
    keys.reserve(queues.size());
    for (const auto& q : queues) {
      check_queue(q, "sizes");
      keys.push_back(dead_.key(q));
    }
    std::vector<std::string> endpoints;
    auto replies = run_spread(keys, redis::Effect::read, endpoints, [&](std::size_t i) {
      redis::Command c("LLEN");
      c.arg(std::string_view(keys[i]));
      return c;
    });
    std::vector<std::size_t> out;
    out.reserve(replies.size());
    for (std::size_t i = 0; i < replies.size(); ++i) {
      out.push_back(
          static_cast<std::size_t>(integer_reply(replies[i], endpoints[i], "LLEN " + keys[i])));
    }
    return out;
  }

  /// One replay step (see the file comment and dlq/storage.hpp): reads up to `max_items`
  /// (at most RedisListOptions::max_batch_items) at the cursor, decides them, and applies
  /// the decisions atomically with one script — or reports a conflict having changed nothing.
  /// @throws dlq::storage_error subclasses; after a lost answer that could not be resolved,
  ///         outcome_unknown() == true (nothing was lost: the batch moved completely or not
  ///         at all); dlq::invalid_argument in a Redis Cluster when a destination is on
  ///         another hash slot or the queue name empties the hash tag (nothing moved).
  StepResult replay_step(std::string_view queue, replay_cursor& cursor, std::size_t max_items,
                         Decider decide) {
    check_queue(queue, "replay_step");
    StepResult result;
    if (max_items == 0) return result;
    const std::size_t max = std::min(max_items, options_.max_batch_items);
    const std::string dead = dead_.key(queue);
    redis::Router& router = routed();
    const bool cluster = router.clustered();
    const std::uint16_t slot = redis::key_slot(dead);
    if (cluster && redis::hashed_part(dead).size() == dead.size()) {
      throw dlq::invalid_argument(dlq::detail::message(
          "redis", "RedisListStorage::replay_step",
          "queue name '" + std::string(queue) + "' gives key '" + dead +
              "' an empty hash tag, so its lists would be in different Redis Cluster slots",
          "in Redis Cluster a queue name must not start with '}'"));
    }
    Lease lease;

    if (cursor.prefetched && cursor.anchor_pending) {
      // Read ahead from the last kept item: skip it if it is still there, else kept items
      // were removed since and the window is shifted: read afresh (below).
      cursor.anchor_pending = false;
      if (!cursor.window.empty() && cursor.kept.is_last(cursor.window.front())) {
        cursor.next = 1;
      } else {
        cursor.prefetched = false;
      }
    }
    if (!cursor.prefetched || cursor.next >= cursor.window.size()) {
      // An empty prefetched window is read again: items may have arrived since.
      if (!read_window(router, lease, dead, cursor, max)) {
        result.conflict = true;  // the head kept changing: the caller backs off and retries
        return result;
      }
    }
    cursor.prefetched = false;
    const std::size_t available = std::min(cursor.window.size() - cursor.next, max);
    if (available == 0) return result;

    // Decide, in order, until the item or byte budget is used up.
    struct Item {
      std::uint32_t index;      // in this step's window
      std::uint32_t key_index;  // 0 = set aside, 1 = discard; else KEYS index of the destination
      std::uint32_t first;      // payload span in the raw item, 1-based; 0 = `explicit`
      std::uint32_t last;
      std::uint32_t length;          // of the raw item
      std::uint32_t identity_first;  // identity span in the raw item, 1-based; 0 = none
      std::string_view check;        // what the script compares: the identity or the raw item
    };
    std::vector<Item> items;
    std::vector<std::string> payloads;   // payloads that are not a span of their raw item
    std::vector<std::string> dest_keys;  // KEYS[4..]
    std::size_t kept = 0;
    detail::kept_prefix step_kept;  // this step's kept items; the cursor's once it applied
    std::size_t bytes = 0;
    std::size_t examined = 0;
    bool budget_reached = false;
    const std::less<const char*> before;
    auto inside = [&before](std::string_view part, const std::string& raw) {
      return part.data() != nullptr && !before(part.data(), raw.data()) &&
             !before(raw.data() + raw.size(), part.data() + part.size());
    };
    for (std::size_t i = 0; i < available; ++i) {
      const std::string& raw = cursor.window[cursor.next + i];
      Decision d;
      decide(std::string_view(raw), d);
      ++examined;
      if (d.action != Action::keep && d.action != Action::set_aside &&
          d.action != Action::discard && d.action != Action::replay) {
        d.action = Action::keep;  // an action this storage does not know: leave the item
      }
      if (d.action == Action::keep) {
        ++kept;
        step_kept.add(raw);
        continue;
      }
      Item it{static_cast<std::uint32_t>(i), 0, 0, 0, static_cast<std::uint32_t>(raw.size()), 0,
              std::string_view(raw)};
      // The script compares the item at its index with what is sent: the identity when there
      // is one (length + id bytes at their offset), else the whole raw item.
      if (!d.identity.empty() && inside(d.identity, raw)) {
        it.identity_first = static_cast<std::uint32_t>(d.identity.data() - raw.data()) + 1;
        it.check = d.identity;
      }
      // Twice the raw size either way: the script re-reads the item and either receives it
      // back or cuts a payload (up to its size) out of it.
      bytes += 2 * raw.size();
      if (d.action == Action::set_aside || d.action == Action::discard) {
        it.key_index = d.action == Action::set_aside ? 0 : 1;
      } else {
        const std::string dk = source_.key(d.destination.empty() ? queue : d.destination);
        std::size_t at = 0;
        while (at < dest_keys.size() && dest_keys[at] != dk)
          ++at;
        if (at == dest_keys.size()) {
          if (cluster && redis::key_slot(dk) != slot) {
            throw dlq::invalid_argument(dlq::detail::message(
                "redis", "RedisListStorage::replay_step",
                "replay from queue '" + std::string(queue) + "' to queue '" +
                    std::string(d.destination) + "': in Redis Cluster '" + dk + "' (slot " +
                    std::to_string(redis::key_slot(dk)) + ") and '" + dead + "' (slot " +
                    std::to_string(slot) +
                    ") are on different hash slots, and a replay moves entries atomically "
                    "within one slot only; nothing was moved",
                "replay to the entries' own queue, then move them on from there"));
          }
          dest_keys.push_back(dk);
        }
        it.key_index = static_cast<std::uint32_t>(at + 4);
        if (inside(d.payload, raw)) {  // a span of the raw item: no bytes sent
          it.first = static_cast<std::uint32_t>(d.payload.data() - raw.data()) + 1;
          it.last = it.first + static_cast<std::uint32_t>(d.payload.size()) - 1;
        } else {
          payloads.emplace_back(d.payload);
          bytes += d.payload.size();
        }
      }
      items.push_back(it);
      if (bytes >= options_.max_batch_bytes) {
        budget_reached = true;
        break;
      }
    }
    result.examined = examined;

    if (items.empty()) {  // only keeps: nothing to write, the rest of the window stays usable
      cursor.kept.append(step_kept);
      cursor.offset += kept;
      cursor.next += examined;
      cursor.prefetched = true;
      return result;
    }

    bool head = cursor.offset == 0;
    for (std::size_t j = 0; head && j < items.size(); ++j)
      head = items[j].index == j;
    const std::string step = next_step_id();
    const std::string tombstone = std::string(detail::tombstone_prefix) + step;
    const std::string receipt = dead + ":receipt:" + step;
    const std::size_t span = items.back().index + 1;
    const std::size_t window_offset = cursor.offset;
    const std::size_t next_offset = cursor.offset + kept;
    const bool anchor_next = next_offset > 0 && cursor.kept.size() + kept == next_offset;
    const std::string corrupt = corrupt_.key(queue);
    const std::string label = "replay script on " + dead;
    const std::string ttl = std::to_string(options_.receipt_ttl.count());
    // The next window, read in the same round trip as the script: callers grow their
    // batches (the front end by x4 a step), so up to 4x this step's size — but when the byte
    // budget ended this step, the next one will end near the same count: read a quarter more
    // rather than items that would be read again (steps of ~560 x 470 B read 1000 ahead:
    // server time in LRANGE 17-22 ms per 100k entries; with this 13-17 ms).
    std::size_t ahead = std::min(max * 4, options_.max_batch_items);
    if (budget_reached) ahead = std::min(ahead, examined + examined / 4 + 1);

    // The plan: 6 little-endian uint32 per item.
    std::string plan;
    plan.reserve(items.size() * 24);
    auto put = [&plan](std::uint32_t v) {
      for (int b = 0; b < 4; ++b)
        plan += static_cast<char>((v >> (8 * b)) & 0xFF);
    };
    for (const Item& it : items) {
      put(it.index);
      put(it.key_index);
      put(it.first);
      put(it.last);
      put(it.length);
      put(it.identity_first);
    }

    auto build = [&](const std::string& sha) {
      std::vector<redis::Command> cmds;
      cmds.reserve(2);
      redis::Command s("EVALSHA");
      s.reserve(2 + 3 + dest_keys.size() + 6 + items.size() + payloads.size());
      s.arg_copy(sha).arg(3 + dest_keys.size());
      s.arg(std::string_view(dead)).arg(std::string_view(corrupt)).arg(std::string_view(receipt));
      for (const auto& k : dest_keys)
        s.arg(std::string_view(k));
      s.arg(window_offset).arg(span).arg(std::string_view(tombstone)).arg(head ? "1" : "0");
      s.arg(std::string_view(ttl)).arg(std::string_view(plan));
      for (const Item& it : items)
        s.arg(it.check);
      for (const auto& p : payloads)
        s.arg(std::string_view(p));
      s.label(label);
      cmds.push_back(std::move(s));
      // The next window (`ahead` items), in the same round trip.
      // From the last kept item, if any, to check at the next step that it is still there.
      redis::Command next("LRANGE");
      next.arg(std::string_view(dead))
          .arg(anchor_next ? next_offset - 1 : next_offset)
          .arg(next_offset + ahead - 1);
      cmds.push_back(std::move(next));
      return cmds;
    };

    long long old_client = 0;
    std::vector<redis::Reply> replies;
    try {
      replies = router.run(lease, dead, redis::Effect::write, build, &shared_->replay_script, 0,
                           &old_client);
    } catch (const dlq::storage_error& e) {
      if (!e.outcome_unknown() || !lease) throw;
      restart_at(cursor, window_offset);
      if (resolve_lost_answer(**lease, old_client, receipt, label, e, cluster)) {
        cursor.offset = next_offset;
        cursor.kept.append(step_kept);
        return result;
      }
      result.conflict = true;
      return result;
    }
    redis::Connection& conn = **lease;
    const redisReply& r = *replies[0];
    if (r.type == REDIS_REPLY_ERROR) {
      const std::string code = redis::detail::reply_code(redis::view(r));
      // Errors raised before the script writes anything: its checks, or the server refusing
      // to run it. Anything else may have come after the pushes (never after a removal).
      const bool known = code == "WRONGTYPE" || code == "NOSCRIPT" || code == "OOM" ||
                         code == "BUSY" || code == "NOPERM" || code == "READONLY" ||
                         code == "MOVED" || code == "ASK" || code == "CROSSSLOT" ||
                         code == "NOAUTH" || code == "LOADING" || code == "MASTERDOWN";
      restart_at(cursor, window_offset);
      redis::detail::throw_reply_error(
          r, conn.endpoint(), label, !known,
          known ? std::string("nothing was moved") + (code == "WRONGTYPE"
                                                          ? "; a list dlq writes to holds another "
                                                            "type: rename that key or configure "
                                                            "other key names"
                                                          : "")
                : "items may have been copied to their destination without being removed "
                  "(a duplicate, never a loss); run recover() and check the destination");
    }
    if (r.type != REDIS_REPLY_INTEGER) {
      restart_at(cursor, window_offset);
      redis::detail::throw_unexpected_reply(r, conn.endpoint(), label, true);
    }
    if (r.integer == 0) {  // conflict: nothing applied; the prefetched window is useless
      restart_at(cursor, window_offset);
      result.conflict = true;
      return result;
    }
    cursor.offset = next_offset;
    cursor.kept.append(step_kept);
    cursor.next = 0;
    if (redis::detail::is_redirect(*replies[1])) {  // the slot moved right after the script
      cursor.window.clear();
      cursor.anchor_pending = false;
      return result;
    }
    cursor.window = redis::strings(replies[1], conn, "LRANGE " + dead);
    cursor.prefetched = true;
    cursor.anchor_pending = anchor_next;
    return result;
  }

  /// The Redis key of a queue's audit stream: `<dead key>:audit` (see dlq/audit.hpp).
  std::string audit_key(std::string_view queue) const { return dead_.key(queue) + ":audit"; }

  /// Appends one audit record (dlq/audit.hpp): one XADD … MAXLEN ~ (audit_stream.hpp).
  void audit_append(std::string_view queue, std::chrono::system_clock::time_point at,
                    std::string_view record) {
    check_queue(queue, "audit_append");
    const std::size_t cap = options_.audit_max_records == 0 ? 10000 : options_.audit_max_records;
    redis::audit_stream::append(routed(), audit_key(queue), detail::audit_ms(at), record, cap);
  }

  /// The queue's audit records made at or after `since`, oldest first, at most `limit`.
  std::vector<std::string> audit_read(std::string_view queue,
                                      std::chrono::system_clock::time_point since,
                                      std::size_t limit) {
    check_queue(queue, "audit_read");
    return redis::audit_stream::read(routed(), audit_key(queue), detail::audit_ms(since), limit);
  }

  /// Repairs what an interrupted replay can leave behind: removes stray tombstones (written
  /// only by a replay script that failed between its LSETs and its LREM — its payloads were
  /// pushed already). Reads the dead list in chunks of 1000.
  /// @return the number of tombstones removed.
  std::size_t recover(std::string_view queue) {
    check_queue(queue, "recover");
    const std::string k = dead_.key(queue);
    redis::Router& router = routed();
    Lease lease;
    std::set<std::string> tombstones;
    constexpr std::size_t chunk = 1000;
    for (std::size_t start = 0;; start += chunk) {
      auto replies = router.run(lease, k, redis::Effect::read, [&](const std::string&) {
        return one(std::move(
            redis::Command("LRANGE").arg(std::string_view(k)).arg(start).arg(start + chunk - 1)));
      });
      const auto items = redis::strings(replies[0], **lease, "LRANGE " + k);
      for (const auto& it : items) {
        if (it.compare(0, detail::tombstone_prefix.size(), detail::tombstone_prefix) == 0) {
          tombstones.insert(it);
        }
      }
      if (items.size() < chunk) break;
    }
    std::size_t removed = 0;
    for (const auto& t : tombstones) {
      // Removing a tombstone is idempotent, so a lost answer is harmless: treat it as read.
      auto replies = router.run(lease, k, redis::Effect::read, [&](const std::string&) {
        return one(std::move(
            redis::Command("LREM").arg(std::string_view(k)).arg(0).arg(std::string_view(t))));
      });
      removed += static_cast<std::size_t>(
          redis::integer(replies[0], **lease, "LREM " + k + " <tombstone>"));
    }
    return removed;
  }

 private:
  using Lease = std::optional<redis::ConnectionPool::Lease>;

  static std::vector<redis::Command> one(redis::Command c) {
    std::vector<redis::Command> v;
    v.push_back(std::move(c));
    return v;
  }

  static long long integer_reply(const redis::Reply& r, const std::string& endpoint,
                                 const std::string& doing) {
    if (r->type == REDIS_REPLY_ERROR) redis::detail::throw_reply_error(*r, endpoint, doing);
    if (r->type != REDIS_REPLY_INTEGER) redis::detail::throw_unexpected_reply(*r, endpoint, doing);
    return r->integer;
  }

  // The router, once the key layout is known to suit the server: in Redis Cluster mode
  // every pattern must put the queue in a hash tag (one queue = one slot = one node).
  redis::Router& routed() {
    redis::Router& r = shared_->router;
    if (!untagged_.empty() && r.clustered()) {
      throw dlq::invalid_argument(dlq::detail::message(
          "redis", "RedisListOptions",
          "the server at " + r.seed().endpoint() + " is a Redis Cluster node, and " + untagged_ +
              ": a queue's lists would be in different hash slots",
          "in Redis Cluster every key pattern must put the queue in a hash tag, e.g. dlq:{*}, "
          "queue:{*} and dlq:{*}:corrupt (the default layout), or all share one fixed tag "
          "({dlq}:*: every queue on one node); the Python seed's layout dlq:* / queue:* works "
          "with a single Redis server only"));
    }
    return r;
  }

  // One command per key (make(i) builds command i), pipelined: one pipeline in plain mode;
  // in cluster mode one per master, and a command answered with a redirection (it did not
  // run) is sent again on its own through the router. endpoints[i] = the node that answered.
  template <class Make>
  std::vector<redis::Reply> run_spread(const std::vector<std::string>& keys, redis::Effect effect,
                                       std::vector<std::string>& endpoints, Make make) {
    redis::Router& router = routed();
    std::vector<redis::Reply> out(keys.size());
    endpoints.assign(keys.size(), std::string());
    std::vector<std::pair<redis::ConnectionPool*, std::vector<std::size_t>>> groups;
    const bool cluster = router.clustered();
    for (std::size_t i = 0; i < keys.size(); ++i) {
      redis::ConnectionPool* p = cluster ? &router.pool_for(keys[i]) : &router.seed();
      auto g =
          std::find_if(groups.begin(), groups.end(), [p](const auto& e) { return e.first == p; });
      if (g == groups.end()) g = groups.insert(groups.end(), {p, {}});
      g->second.push_back(i);
    }
    for (auto& [pool, indexes] : groups) {
      std::vector<redis::Command> cmds;
      cmds.reserve(indexes.size());
      for (const std::size_t i : indexes)
        cmds.push_back(make(i));
      auto lease = pool->acquire();
      auto replies = lease->run(cmds, effect);
      for (std::size_t n = 0; n < indexes.size(); ++n) {
        out[indexes[n]] = std::move(replies[n]);
        endpoints[indexes[n]] = lease->endpoint();
      }
    }
    if (!cluster) return out;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (!redis::detail::is_redirect(*out[i])) continue;
      Lease lease;
      auto again =
          router.run(lease, keys[i], effect, [&](const std::string&) { return one(make(i)); });
      out[i] = std::move(again[0]);
      endpoints[i] = (*lease)->endpoint();
    }
    return out;
  }

  // Forgets the read-ahead window and starts the next step at `offset` (the kept items stay).
  static void restart_at(replay_cursor& cursor, std::size_t offset) {
    cursor.offset = offset;
    cursor.window.clear();
    cursor.next = 0;
    cursor.prefetched = false;
    cursor.anchor_pending = false;
  }

  // Reads up to `max` items at the cursor. When the replay kept items (the cursor's offset
  // is their count), the read starts one earlier, at the last kept item: if that is not
  // there, another client removed kept items (remove(), a trim, another replayer), the
  // offset points past items not examined yet, and the head is read to find the place
  // again. False when the head kept changing over three tries (the caller reports a
  // conflict and retries after backing off).
  bool read_window(redis::Router& router, Lease& lease, const std::string& dead,
                   replay_cursor& cursor, std::size_t max) {
    auto lrange = [&](std::size_t from, std::size_t to) {
      auto replies = router.run(lease, dead, redis::Effect::read, [&](const std::string&) {
        return one(
            std::move(redis::Command("LRANGE").arg(std::string_view(dead)).arg(from).arg(to)));
      });
      return redis::strings(replies[0], **lease, "LRANGE " + dead);
    };
    for (int attempt = 0; attempt < 3; ++attempt) {
      const bool anchored = cursor.offset > 0 && cursor.kept.size() == cursor.offset;
      cursor.window = lrange(anchored ? cursor.offset - 1 : cursor.offset, cursor.offset + max - 1);
      cursor.next = 0;
      if (!anchored) return true;
      if (!cursor.window.empty() && cursor.kept.is_last(cursor.window.front())) {
        cursor.next = 1;
        return true;
      }
      // Read the head in chunks (the kept prefix may be long) up to the first item that
      // was not kept; the kept items left are now before it.
      constexpr std::size_t chunk = 1000;
      cursor.kept.begin_realign();
      bool more = true;
      for (std::size_t start = 0; more && start < cursor.offset; start += chunk) {
        const auto items = lrange(start, std::min(start + chunk, cursor.offset) - 1);
        for (const std::string& item : items) {
          more = cursor.kept.feed(item);
          if (!more) break;
        }
        if (items.size() < std::min(chunk, cursor.offset - start)) more = false;  // list ended
      }
      cursor.offset = cursor.kept.finish_realign();
    }
    cursor.window.clear();
    return false;
  }

  static void check_queue(std::string_view queue, const char* where) {
    if (queue.empty()) {
      throw dlq::invalid_argument(
          dlq::detail::message("redis", std::string("RedisListStorage::") + where,
                               "the queue name is empty", "pass the name of the source queue"));
    }
  }

  std::string next_step_id() {
    static constexpr char hex[] = "0123456789abcdef";
    const std::uint64_t a = shared_->step_base;
    const std::uint64_t b = shared_->step_counter.fetch_add(1, std::memory_order_relaxed);
    std::string id(32, '0');
    for (int i = 0; i < 16; ++i) {
      id[static_cast<std::size_t>(i)] = hex[(a >> (60 - 4 * i)) & 0xF];
      id[static_cast<std::size_t>(16 + i)] = hex[(b >> (60 - 4 * i)) & 0xF];
    }
    return id;
  }

  template <class F>
  void scan(redis::Connection& conn, const detail::KeyPattern& pattern, F&& on_key) {
    const std::string glob = pattern.glob();
    std::string cursor = "0";
    // SCAN ends when the server returns cursor 0; the bound only guards against a broken
    // server (10 million calls of COUNT 1000 cover far more keys than Redis can hold).
    for (long calls = 0; calls < 10'000'000; ++calls) {
      redis::Command c("SCAN");
      c.arg(std::string_view(cursor)).arg("MATCH").arg(std::string_view(glob)).arg("COUNT");
      c.arg(1000).arg("TYPE").arg("list").label("SCAN MATCH " + glob);
      redis::Reply r = conn.run(c, redis::Effect::read);
      redis::check(r, conn, c.label());
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
          r->element[1]->type != REDIS_REPLY_ARRAY) {
        redis::detail::throw_unexpected_reply(*r, conn.endpoint(), c.label());
      }
      cursor.assign(redis::view(*r->element[0]));
      const redisReply& keys = *r->element[1];
      for (std::size_t i = 0; i < keys.elements; ++i)
        on_key(redis::view(*keys.element[i]));
      if (cursor == "0") return;
    }
  }

  // After the answer to a replay script was lost: reconnect, make sure the old connection
  // can run nothing more, and read the receipt. true = applied, false = not applied.
  // Throws (outcome unknown, nothing lost) when the server cannot be asked.
  bool resolve_lost_answer(redis::Connection& conn, long long old_client,
                           const std::string& receipt, const std::string& label,
                           const dlq::storage_error& original, bool cluster) {
    try {
      std::vector<redis::Command> cmds;
      if (old_client != 0) {
        redis::Command kill("CLIENT");
        kill.arg("KILL").arg("ID").arg(old_client).label("CLIENT KILL ID");
        cmds.push_back(std::move(kill));
      }
      // In a cluster this node may be importing the slot (the script ran after ASK): ASKING
      // lets GET read the receipt there, and does nothing on the slot's owner.
      if (cluster) cmds.emplace_back("ASKING");
      redis::Command get("GET");
      get.arg(std::string_view(receipt));
      cmds.push_back(std::move(get));
      auto replies = conn.run(cmds, redis::Effect::read);
      // CLIENT KILL may be refused by ACLs; then a script still queued on the old connection
      // may run later — it re-checks every item, so it moves each exactly once or not at all.
      const redisReply& g = redis::check(replies.back(), conn, "GET " + receipt);
      return g.type == REDIS_REPLY_STRING;
    } catch (const dlq::storage_error& e) {
      const std::string what = std::string(original.what()) +
                               " — and the outcome could not be resolved (" + e.what() +
                               "); nothing was lost: the batch of " + label +
                               " moved completely or not at all; run replay again";
      if (dynamic_cast<const dlq::timeout_error*>(&original) != nullptr) {
        throw dlq::timeout_error(what, true);
      }
      if (dynamic_cast<const dlq::connection_error*>(&original) != nullptr) {
        throw dlq::connection_error(what, true);
      }
      throw dlq::storage_error(what, true);
    }
  }

  // What threads share; on the heap so that the storage can be moved (into a
  // DeadLetterQueue, for example). A moved-from storage must not be used.
  struct Shared {
    Shared(redis::ConnectionOptions connection, redis::PoolOptions pool_options)
        : router(std::move(connection), pool_options),
          replay_script("replay script", std::string(detail::replay_script_source)),
          purge_script("purge script", std::string(detail::purge_script_source)),
          bounded_push_script("bounded push script",
                              std::string(detail::bounded_push_script_source)) {}
    redis::Router router;
    redis::Script replay_script;
    redis::Script purge_script;
    redis::Script bounded_push_script;
    std::uint64_t step_base = 0;
    std::atomic<std::uint64_t> step_counter{0};
  };

  RedisListOptions options_;
  detail::KeyPattern dead_;
  detail::KeyPattern source_;
  detail::KeyPattern corrupt_;
  std::string untagged_;  // why the layout cannot be used on a Redis Cluster; empty = it can
  std::unique_ptr<Shared> shared_;
};

}  // namespace dlq

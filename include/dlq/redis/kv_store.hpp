// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/kv_store.hpp
/// dlq::kv::RedisStore — a key-value store (see dlq/kv/storage.hpp) on Redis, and
/// dlq::kv::RedisListSink — a replay destination that pushes payloads onto Redis lists.
/// CMake: dlq::redis (hiredis).
///
///     dlq::KeyValueStorage storage(dlq::kv::RedisStore("redis://127.0.0.1:6379"),
///                                  dlq::kv::RedisListSink("redis://127.0.0.1:6379"));
///     dlq::DeadLetterQueue<decltype(storage)&> dlq(storage);
///
/// Layout, for a collection C (KeyValueStorage names them "dlq:{orders}:dead", so every key
/// of one queue carries the queue's hash tag and lives in one cluster slot):
///
///     <key_prefix>C:r:<id>   a plain string key per record: the record's bytes (GET-able)
///     <key_prefix>C:i        the collection's index: a sorted set, member = id,
///                            score = version (listing reads it, never the keyspace)
///     <key_prefix>C:s        the collection's version counter (INCR), never reset
///
///     <key_prefix>C:count:<key>  a counter of increment() (a string with a TTL)
///
/// Every operation is one round trip and atomic: save, load, list, remove are Lua scripts
/// (EVALSHA; loaded again after NOSCRIPT), count is ZCARD, versions is ZRANGEBYSCORE. The
/// list script reads the record keys of the ids it found in the index: they are derived from
/// the collection's name inside the script (listing needs the ids first) and share its hash
/// tag, so they are in the slot of the index key the script was given. Scripts check the
/// type of every key they write before writing any, so a foreign key of another type makes
/// them fail with WRONGTYPE having changed nothing. remove_all works in atomic chunks of
/// 1000 records (no script blocks the server for long) up to the newest version present
/// when it started.
///
/// save_and_count is the save script (it returns the last collection's ZCARD), save_if_below
/// a script of its own (ZSCORE and ZCARD, then the save), increment a script doing INCR and
/// EXPIRE.
///
/// Versions are integers kept as sorted-set scores (doubles): exact up to 2^53.
///
/// Errors are the Redis layer's (dlq/redis/connection.hpp): a write whose answer was lost
/// throws with outcome_unknown() and is never re-sent; a read is retried once after a lost
/// connection.
#pragma once

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/errors.hpp"
#include "dlq/kv/sinks.hpp"
#include "dlq/kv/storage.hpp"
#include "dlq/redis/connection.hpp"
#include "dlq/redis/options.hpp"
#include "dlq/redis/pool.hpp"
#include "dlq/redis/script.hpp"

namespace dlq {
namespace kv {

/// Options of dlq::kv::RedisStore. Every default is stated.
struct RedisStoreOptions {
  /// Prepended to every key the store uses. Default "" (KeyValueStorage's collection names
  /// already start with its own prefix, "dlq:"). Use it to give tests or tenants separate
  /// namespaces on one server.
  std::string key_prefix;
  /// Connection pool: how many connections all threads share, how long to wait for one.
  redis::PoolOptions pool;
};

/// Options of dlq::kv::RedisListSink. Every default is stated.
struct RedisListSinkOptions {
  /// The list a queue's payloads are pushed to; `*` stands for the queue name. Default
  /// "queue:{*}" — RedisListStorage's default source list, so workers reading those lists
  /// get the replayed jobs. The Python seed's layout is "queue:*".
  std::string key = "queue:{*}";
  /// Connection pool: how many connections all threads share, how long to wait for one.
  redis::PoolOptions pool;
};

namespace detail {

// save: per write j, KEYS[3j-2] record, KEYS[3j-1] index, KEYS[3j] counter; ARGV[2j-1] id,
// ARGV[2j] value. Checks every key's type first, then writes in order.
inline constexpr std::string_view kv_save_script = R"lua(
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
for j = 1, #ARGV / 2 do
  local v = redis.call('INCR', KEYS[3 * j])
  redis.call('SET', KEYS[3 * j - 2], ARGV[2 * j])
  redis.call('ZADD', KEYS[3 * j - 1], v, ARGV[2 * j - 1])
end
return redis.call('ZCARD', KEYS[#KEYS - 1])
)lua";

// save_if_below: KEYS[1] record, KEYS[2] index, KEYS[3] counter; ARGV[1] id, ARGV[2] value,
// ARGV[3] most records. Saves only when the index holds fewer records or already holds the
// id. Returns the collection's record count after the save, or 0 (nothing saved) when full.
inline constexpr std::string_view kv_save_if_below_script = R"lua(
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

// increment: KEYS[1] the counter; ARGV[1] ttl in seconds. INCR, then EXPIRE: the counter
// expires ttl after its last increment. Returns the new value.
inline constexpr std::string_view kv_increment_script = R"lua(
local v = redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ARGV[1])
return v
)lua";

// load: KEYS[1] record, KEYS[2] index; ARGV[1] id. Returns {value, version} or nil.
inline constexpr std::string_view kv_load_script = R"lua(
local s = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not s then return false end
local v = redis.call('GET', KEYS[1])
if not v then return false end
return {v, s}
)lua";

// list: KEYS[1] index; ARGV[1] after (exclusive), ARGV[2] offset, ARGV[3] count (-1 = all),
// ARGV[4] record key prefix. Returns a flat array id, value, version, … oldest first.
inline constexpr std::string_view kv_list_script = R"lua(
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

// remove: per removal j, in order: KEYS record, index — and for a move also target record,
// target index, target counter; ARGV[3j-2] id, ARGV[3j-1] version ('0' = any), ARGV[3j]
// '1' = move to the target, '0' = delete. Returns how many applied. Checks the types of the
// index keys and of every key a move writes first; deletions are then done with one DEL and
// one ZREM per index (chunks of 500).
inline constexpr std::string_view kv_remove_script = R"lua(
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

// remove_all, one chunk: KEYS[1] index; ARGV[1] newest version to remove, ARGV[2] chunk size,
// ARGV[3] record key prefix. Removes up to a chunk of the oldest records; returns how many.
inline constexpr std::string_view kv_purge_script = R"lua(
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

/// Parses a sorted-set score that holds a version.
inline std::uint64_t kv_parse_version(std::string_view s, const std::string& endpoint,
                                      const std::string& doing) {
  std::uint64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return v;
  const double d = std::strtod(std::string(s).c_str(), nullptr);  // "1e+16" and the like
  if (d >= 1.0) return static_cast<std::uint64_t>(d);
  throw protocol_error(dlq::detail::message(
      "redis", endpoint, doing + ": a version is not a number ('" + std::string(s) + "')",
      "is another program writing to dlq's index keys?"));
}

/// "-1" for "no limit", else the number.
inline std::string kv_limit(std::size_t limit) {
  return limit == 0 ? std::string("-1") : std::to_string(limit);
}

}  // namespace detail

/// A key-value store on Redis (see the file comment for the layout and the costs). A handle:
/// copies share one connection pool. Thread-safe.
class RedisStore {
 public:
  /// Connects to `connection` (lazily: the first operation connects).
  explicit RedisStore(redis::ConnectionOptions connection, RedisStoreOptions options = {})
      : shared_(std::make_shared<shared>(std::move(connection), std::move(options))) {}

  /// Parses `url` (see dlq::redis::parse_url) and connects lazily.
  /// @throws dlq::invalid_argument for a bad URL.
  explicit RedisStore(std::string_view url, RedisStoreOptions options = {})
      : RedisStore(redis::parse_url(url), std::move(options)) {}

  /// The key holding record `id` of `collection`.
  std::string record_key(std::string_view collection, std::string_view id) const {
    std::string k = shared_->options.key_prefix;
    k += collection;
    k += ":r:";
    k += id;
    return k;
  }
  /// The sorted set indexing `collection` (member = id, score = version).
  std::string index_key(std::string_view collection) const {
    return shared_->options.key_prefix + std::string(collection) + ":i";
  }
  /// The version counter of `collection`.
  std::string counter_key(std::string_view collection) const {
    return shared_->options.key_prefix + std::string(collection) + ":s";
  }
  /// The key of increment's counter (`collection`, `key`): `<key_prefix>C:count:<key>` (a
  /// string with a TTL; the collection's hash tag, so the queue's slot).
  std::string increment_key(std::string_view collection, std::string_view key) const {
    std::string k = shared_->options.key_prefix;
    k += collection;
    k += ":count:";
    k += key;
    return k;
  }

  /// Inserts or replaces each record, in order, in one atomic script; each gets the next
  /// version of its collection (a replaced record moves to the end).
  /// @throws the Redis layer's dlq::storage_error subclasses; dlq::reply_error WRONGTYPE
  ///         (nothing saved) when one of the keys holds another type.
  void save(const std::vector<Write>& writes) { (void)save_and_count(writes); }

  /// As save (the same script), and returns how many records the collection of the last
  /// write holds after it (ZCARD inside the script; 0 when `writes` is empty).
  /// @throws as save.
  std::size_t save_and_count(const std::vector<Write>& writes) {
    if (writes.empty()) return 0;
    auto lease = shared_->pool.acquire();
    const std::string label = "save script (" + std::to_string(writes.size()) + " records)";
    auto replies = shared_->save.run_pipeline(
        *lease, 0,
        [&](const std::string& sha) {
          redis::Command c("EVALSHA");
          c.reserve(3 + writes.size() * 5);
          c.arg_copy(sha).arg(writes.size() * 3);
          for (const Write& w : writes) {
            c.arg_copy(record_key(w.collection, w.id));
            c.arg_copy(index_key(w.collection));
            c.arg_copy(counter_key(w.collection));
          }
          for (const Write& w : writes)
            c.arg(w.id).arg(w.value);
          c.label(label);
          std::vector<redis::Command> cmds;
          cmds.push_back(std::move(c));
          return cmds;
        },
        redis::Effect::write);
    return static_cast<std::size_t>(redis::integer(replies[0], *lease, label));
  }

  /// Saves `write` (as save) only if its collection holds fewer than `max_records` records
  /// or already holds a record with its id: one atomic script (ZSCORE, ZCARD, then the save).
  /// @returns false (nothing written) when the collection is full.
  /// @throws as save.
  bool save_if_below(const Write& write, std::size_t max_records) {
    auto lease = shared_->pool.acquire();
    const std::string label = "bounded save script (" + std::string(write.collection) + ")";
    auto replies = shared_->save_if_below.run_pipeline(
        *lease, 0,
        [&](const std::string& sha) {
          redis::Command c("EVALSHA");
          c.arg_copy(sha).arg(3);
          c.arg_copy(record_key(write.collection, write.id))
              .arg_copy(index_key(write.collection))
              .arg_copy(counter_key(write.collection));
          c.arg(write.id).arg(write.value).arg(max_records).label(label);
          std::vector<redis::Command> cmds;
          cmds.push_back(std::move(c));
          return cmds;
        },
        redis::Effect::write);
    return redis::integer(replies[0], *lease, label) > 0;
  }

  /// Adds one to the counter (collection, key) — the string key increment_key(collection,
  /// key) — and returns its new value; the key expires `ttl` (clamped to [1 s, 100 years]) after
  /// this increment (INCR + EXPIRE in one script), so Redis keeps the counters bounded.
  /// @throws the Redis layer's dlq::storage_error subclasses; dlq::reply_error when the key
  ///         holds something other than a counter.
  std::int64_t increment(std::string_view collection, std::string_view key,
                         std::chrono::seconds ttl) {
    auto lease = shared_->pool.acquire();
    const std::string k = increment_key(collection, key);
    const std::string label = "increment script (" + k + ")";
    const long long seconds = static_cast<long long>(detail::counter_ttl(ttl).count());
    auto replies = shared_->increment.run_pipeline(
        *lease, 0,
        [&](const std::string& sha) {
          redis::Command c("EVALSHA");
          c.arg_copy(sha).arg(1).arg(std::string_view(k)).arg(seconds).label(label);
          std::vector<redis::Command> cmds;
          cmds.push_back(std::move(c));
          return cmds;
        },
        redis::Effect::write);
    return static_cast<std::int64_t>(redis::integer(replies[0], *lease, label));
  }

  /// The record `id` of `collection`, or std::nullopt. One script, read-only.
  std::optional<Item> load(std::string_view collection, std::string_view id) {
    auto lease = shared_->pool.acquire();
    const std::string label = "load script (" + std::string(collection) + ")";
    auto replies = shared_->load.run_pipeline(
        *lease, 0,
        [&](const std::string& sha) {
          redis::Command c("EVALSHA");
          c.arg_copy(sha)
              .arg(2)
              .arg_copy(record_key(collection, id))
              .arg_copy(index_key(collection));
          c.arg(id).label(label);
          std::vector<redis::Command> cmds;
          cmds.push_back(std::move(c));
          return cmds;
        },
        redis::Effect::read);
    const redisReply& r = redis::check(replies[0], *lease, label);
    if (r.type == REDIS_REPLY_NIL) return std::nullopt;
    if (r.type != REDIS_REPLY_ARRAY || r.elements != 2)
      redis::detail::throw_unexpected_reply(r, lease->endpoint(), label);
    return Item{std::string(id), std::string(redis::view(*r.element[0])),
                detail::kv_parse_version(redis::view(*r.element[1]), lease->endpoint(), label)};
  }

  /// The records of `collection` in `window`, oldest first: one read-only script (the
  /// index range and the records' values, consistent with each other).
  std::vector<Item> list(std::string_view collection, const Window& window) {
    auto lease = shared_->pool.acquire();
    const std::string label = "list script (" + std::string(collection) + ")";
    auto replies = shared_->list.run_pipeline(
        *lease, 0,
        [&](const std::string& sha) {
          redis::Command c("EVALSHA");
          c.arg_copy(sha).arg(1).arg_copy(index_key(collection));
          c.arg(window.after).arg(window.offset).arg_copy(detail::kv_limit(window.limit));
          c.arg_copy(record_key(collection, "")).label(label);
          std::vector<redis::Command> cmds;
          cmds.push_back(std::move(c));
          return cmds;
        },
        redis::Effect::read);
    const std::vector<std::string> flat = redis::strings(replies[0], *lease, label);
    std::vector<Item> out;
    out.reserve(flat.size() / 3);
    for (std::size_t i = 0; i + 2 < flat.size(); i += 3)
      out.push_back(Item{flat[i], flat[i + 1],
                         detail::kv_parse_version(flat[i + 2], lease->endpoint(), label)});
    return out;
  }

  /// The versions in `window`, oldest first (ZRANGEBYSCORE on the index alone).
  std::vector<std::uint64_t> versions(std::string_view collection, const Window& window) {
    auto lease = shared_->pool.acquire();
    const std::string idx = index_key(collection);
    redis::Command c("ZRANGEBYSCORE");
    c.arg(std::string_view(idx)).arg_copy("(" + std::to_string(window.after)).arg("+inf");
    c.arg("WITHSCORES").arg("LIMIT").arg(window.offset).arg_copy(detail::kv_limit(window.limit));
    const std::string label = c.label();
    const std::vector<std::string> flat =
        redis::strings(lease->run(c, redis::Effect::read), *lease, label);
    std::vector<std::uint64_t> out;
    out.reserve(flat.size() / 2);
    for (std::size_t i = 1; i < flat.size(); i += 2)
      out.push_back(detail::kv_parse_version(flat[i], lease->endpoint(), label));
    return out;
  }

  /// Applies every removal whose record exists with the expected version (any when 0), in
  /// one atomic script. @returns how many were applied.
  std::size_t remove(const std::vector<Removal>& removals) {
    if (removals.empty()) return 0;
    auto lease = shared_->pool.acquire();
    const std::string label = "remove script (" + std::to_string(removals.size()) + " records)";
    auto replies = shared_->remove.run_pipeline(
        *lease, 0,
        [&](const std::string& sha) {
          redis::Command c("EVALSHA");
          std::size_t keys = 0;
          for (const Removal& r : removals)
            keys += r.move_to.empty() ? 2 : 5;
          c.reserve(3 + keys + removals.size() * 3);
          c.arg_copy(sha).arg(keys);
          std::string last_collection;  // consecutive removals share an index key
          std::string last_index;
          for (const Removal& r : removals) {
            if (r.collection != last_collection) {
              last_collection = std::string(r.collection);
              last_index = index_key(r.collection);
            }
            c.arg_copy(record_key(r.collection, r.id)).arg_copy(last_index);
            if (!r.move_to.empty())
              c.arg_copy(record_key(r.move_to, r.id))
                  .arg_copy(index_key(r.move_to))
                  .arg_copy(counter_key(r.move_to));
          }
          for (const Removal& r : removals)
            c.arg(r.id).arg(r.version).arg(r.move_to.empty() ? "0" : "1");
          c.label(label);
          std::vector<redis::Command> cmds;
          cmds.push_back(std::move(c));
          return cmds;
        },
        redis::Effect::write);
    return static_cast<std::size_t>(redis::integer(replies[0], *lease, label));
  }

  /// Number of records in `collection` (ZCARD).
  std::size_t count(std::string_view collection) {
    auto lease = shared_->pool.acquire();
    const std::string idx = index_key(collection);
    redis::Command c("ZCARD");
    c.arg(std::string_view(idx));
    return static_cast<std::size_t>(
        redis::integer(lease->run(c, redis::Effect::read), *lease, c.label()));
  }

  /// Removes every record of `collection` present when it starts, in atomic chunks of 1000.
  /// @returns exactly how many records it removed.
  std::size_t remove_all(std::string_view collection) {
    const std::string idx = index_key(collection);
    const std::string prefix = record_key(collection, "");
    auto lease = shared_->pool.acquire();
    redis::Command newest("ZRANGE");
    newest.arg(std::string_view(idx)).arg(-1).arg(-1).arg("WITHSCORES");
    const auto top =
        redis::strings(lease->run(newest, redis::Effect::read), *lease, newest.label());
    if (top.size() < 2) return 0;
    const std::string last = top[1];
    const std::string label = "purge script (" + std::string(collection) + ")";
    std::size_t removed = 0;
    for (;;) {
      auto replies = shared_->purge.run_pipeline(
          *lease, 0,
          [&](const std::string& sha) {
            redis::Command c("EVALSHA");
            c.arg_copy(sha).arg(1).arg(std::string_view(idx)).arg(std::string_view(last));
            c.arg(1000).arg(std::string_view(prefix)).label(label);
            std::vector<redis::Command> cmds;
            cmds.push_back(std::move(c));
            return cmds;
          },
          redis::Effect::write);
      const auto n = static_cast<std::size_t>(redis::integer(replies[0], *lease, label));
      removed += n;
      if (n < 1000) return removed;
    }
  }

 private:
  struct shared {
    shared(redis::ConnectionOptions connection, RedisStoreOptions o)
        : options(std::move(o)),
          pool(std::move(connection), options.pool),
          save("kv save script", std::string(detail::kv_save_script)),
          load("kv load script", std::string(detail::kv_load_script)),
          list("kv list script", std::string(detail::kv_list_script)),
          remove("kv remove script", std::string(detail::kv_remove_script)),
          purge("kv purge script", std::string(detail::kv_purge_script)),
          save_if_below("kv bounded save script", std::string(detail::kv_save_if_below_script)),
          increment("kv increment script", std::string(detail::kv_increment_script)) {}
    RedisStoreOptions options;
    redis::ConnectionPool pool;
    redis::Script save, load, list, remove, purge, save_if_below, increment;
  };
  std::shared_ptr<shared> shared_;
};

/// A replay destination that RPUSHes payloads onto Redis lists (one list per queue, named by
/// RedisListSinkOptions::key). One pipelined round trip per replay step, one RPUSH per run of
/// consecutive messages to the same queue, so each queue receives its payloads in order.
/// A handle: copies share one connection pool. Thread-safe.
///
/// At-least-once: if the answer of a push is lost (timeout, connection dropped), it throws
/// with outcome_unknown() and KeyValueStorage removes nothing; the next replay pushes those
/// payloads again, possibly a second time.
class RedisListSink {
 public:
  /// Connects to `connection` (lazily).
  /// @throws dlq::invalid_argument when options.key does not contain exactly one `*`.
  explicit RedisListSink(redis::ConnectionOptions connection, RedisListSinkOptions options = {})
      : shared_(std::make_shared<shared>(std::move(connection), std::move(options))) {}

  /// Parses `url` (see dlq::redis::parse_url) and connects lazily.
  /// @throws dlq::invalid_argument for a bad URL or key pattern.
  explicit RedisListSink(std::string_view url, RedisListSinkOptions options = {})
      : RedisListSink(redis::parse_url(url), std::move(options)) {}

  /// The list `queue`'s payloads are pushed to.
  std::string key(std::string_view queue) const {
    return shared_->prefix + std::string(queue) + shared_->suffix;
  }

  /// Pushes every payload to its queue's list, in order, in one pipelined round trip.
  /// @throws the Redis layer's dlq::storage_error subclasses (outcome_unknown() when a push
  ///         was sent and its answer lost); dlq::reply_error WRONGTYPE when a key holds
  ///         another type.
  void push_many(const std::vector<Message>& messages) {
    if (messages.empty()) return;
    std::vector<redis::Command> cmds;
    for (std::size_t i = 0; i < messages.size();) {
      std::size_t j = i;
      redis::Command c("RPUSH");
      c.arg_copy(key(messages[i].queue));
      while (j < messages.size() && messages[j].queue == messages[i].queue && j - i < 1000)
        c.arg(messages[j++].payload);
      cmds.push_back(std::move(c));
      i = j;
    }
    auto lease = shared_->pool.acquire();
    auto replies = lease->run(cmds, redis::Effect::write);
    for (std::size_t i = 0; i < replies.size(); ++i)
      redis::integer(replies[i], *lease, cmds[i].label());
  }

 private:
  struct shared {
    shared(redis::ConnectionOptions connection, RedisListSinkOptions o)
        : pool(std::move(connection), o.pool) {
      const auto star = o.key.find('*');
      if (star == std::string::npos || o.key.find('*', star + 1) != std::string::npos)
        throw invalid_argument(
            dlq::detail::message("redis", "RedisListSinkOptions::key",
                                 "key pattern '" + o.key + "' must contain exactly one '*'",
                                 "use '*' where the queue name goes, e.g. \"queue:{*}\""));
      prefix = o.key.substr(0, star);
      suffix = o.key.substr(star + 1);
    }
    redis::ConnectionPool pool;
    std::string prefix, suffix;
  };
  std::shared_ptr<shared> shared_;
};

}  // namespace kv
}  // namespace dlq

// Compiled mode (CMake DLQ_COMPILED=ON; dlq::redis defines DLQ_COMPILED_REDIS): these
// instantiations are built once, in src/redis.cpp; a translation unit that includes this header
// instantiates none of them.
#if defined(DLQ_COMPILED_REDIS)
#include "dlq/dead_letter_queue.hpp"
namespace dlq {
extern template class KeyValueStorage<kv::RedisStore>;
extern template class KeyValueStorage<kv::RedisStore, kv::RedisListSink>;
extern template class DeadLetterQueue<KeyValueStorage<kv::RedisStore>>;
extern template class DeadLetterQueue<KeyValueStorage<kv::RedisStore>&>;
extern template class DeadLetterQueue<KeyValueStorage<kv::RedisStore, kv::RedisListSink>>;
extern template class DeadLetterQueue<KeyValueStorage<kv::RedisStore, kv::RedisListSink>&>;
}  // namespace dlq
#endif

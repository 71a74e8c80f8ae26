// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/kv_store.hpp
/// dlq::kv::RedisStore: a key-value store (the contract in dlq/kv/store.hpp) on Redis, for
/// dlq::KeyValueStorage. CMake: dlq::redis (hiredis). Its usual replay destination,
/// dlq::kv::RedisListSink, is in dlq/redis/list_sink.hpp (included here).
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
///     <key_prefix>C:count:<key>  a counter of increment() (a string with a TTL)
///
/// Invariants:
/// - Every operation is one round trip and atomic: save, save_and_count, save_capped (the
///   save script with a cap), save_if_below, save_if_fits, load, list, ends, remove and
///   increment are scripts
///   (dlq/redis/scripts/kv_store.hpp), count is ZCARD, versions is ZRANGEBYSCORE. remove_all works
///   in atomic chunks of 1000 records (no script blocks the server for long) up to the newest
///   version present when it started.
/// - A script checks the type of every key it writes before writing any: a foreign key of
///   another type fails it with WRONGTYPE, having changed nothing.
/// - Versions are integers kept as sorted-set scores (doubles): exact up to 2^53.
/// - Errors are the Redis layer's (dlq/redis/connection.hpp): a write whose answer was lost
///   throws with outcome_unknown() and is never re-sent; a read is retried once after a
///   lost connection.
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

#include "dlq/detail/compiled.hpp"
#include "dlq/errors.hpp"
#include "dlq/kv/sinks.hpp"
#include "dlq/kv/store.hpp"
#include "dlq/redis/connection.hpp"
#include "dlq/redis/list_sink.hpp"
#include "dlq/redis/options.hpp"
#include "dlq/redis/pool.hpp"
#include "dlq/redis/script.hpp"
#include "dlq/redis/scripts/kv_store.hpp"

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

namespace detail {

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
  explicit RedisStore(redis::ConnectionOptions connection, RedisStoreOptions options = {});

  /// Parses `url` (see dlq::redis::parse_url) and connects lazily.
  /// @throws dlq::invalid_argument for a bad URL.
  explicit RedisStore(std::string_view url, RedisStoreOptions options = {});

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
    const auto replies = run_save(*lease, writes, nullptr, label);
    return static_cast<std::size_t>(redis::integer(replies[0], *lease, label));
  }

  /// Saves `write` (as save) only if its collection holds fewer than `max_records` records
  /// or already holds a record with its id: one atomic script (ZSCORE, ZCARD, then the save).
  /// @returns false (nothing written) when the collection is full.
  /// @throws as save.
  bool save_if_below(const Write& write, std::size_t max_records) {
    auto lease = shared_->pool.acquire();
    const std::string label = "bounded save script (" + std::string(write.collection) + ")";
    auto replies = eval(*lease, shared_->save_if_below, redis::Effect::write,
                        [&](redis::Command& c, const std::string& sha) {
                          c.arg_copy(sha).arg(3);
                          c.arg_copy(record_key(write.collection, write.id))
                              .arg_copy(index_key(write.collection))
                              .arg_copy(counter_key(write.collection));
                          c.arg(write.id).arg(write.value).arg(max_records).label(label);
                        });
    return redis::integer(replies[0], *lease, label) > 0;
  }

  /// Saves every write (all of one collection; as save) only if the collection then holds at
  /// most `max_records` records (an id already there is a replacement, not growth): one
  /// atomic script. @returns false (nothing written) when they do not fit. @throws as save.
  bool save_if_fits(const std::vector<Write>& writes, std::size_t max_records) {
    if (writes.empty()) return true;
    const std::string_view coll = writes.front().collection;
    auto lease = shared_->pool.acquire();
    const std::string label = "bounded batch save script (" + std::string(coll) + ")";
    auto replies = eval(*lease, shared_->save_if_fits, redis::Effect::write,
                        [&](redis::Command& c, const std::string& sha) {
                          c.reserve(4 + writes.size() * 3);
                          c.arg_copy(sha).arg(writes.size() + 2);
                          for (const Write& w : writes)
                            c.arg_copy(record_key(coll, w.id));
                          c.arg_copy(index_key(coll)).arg_copy(counter_key(coll)).arg(max_records);
                          for (const Write& w : writes)
                            c.arg(w.id).arg(w.value);
                          c.label(label);
                        });
    return redis::integer(replies[0], *lease, label) > 0;
  }

  /// As save, and in the same atomic script removes the oldest records of the last write's
  /// collection beyond `max_records`. @returns the removed records, oldest first.
  /// @throws as save.
  std::vector<Item> save_capped(const std::vector<Write>& writes, std::size_t max_records) {
    if (writes.empty()) return {};
    auto lease = shared_->pool.acquire();
    const std::string label = "capped save script (" + std::string(writes.back().collection) + ")";
    const auto replies = run_save(*lease, writes, &max_records, label);
    return items_of(replies[0], *lease, label);
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
    auto replies = eval(*lease, shared_->increment, redis::Effect::write,
                        [&](redis::Command& c, const std::string& sha) {
                          c.arg_copy(sha).arg(1).arg(std::string_view(k)).arg(seconds).label(label);
                        });
    return static_cast<std::int64_t>(redis::integer(replies[0], *lease, label));
  }

  /// The record `id` of `collection`, or std::nullopt. One script, read-only.
  std::optional<Item> load(std::string_view collection, std::string_view id) {
    auto lease = shared_->pool.acquire();
    const std::string label = "load script (" + std::string(collection) + ")";
    auto replies = eval(*lease, shared_->load, redis::Effect::read,
                        [&](redis::Command& c, const std::string& sha) {
                          c.arg_copy(sha)
                              .arg(2)
                              .arg_copy(record_key(collection, id))
                              .arg_copy(index_key(collection));
                          c.arg(id).label(label);
                        });
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
    auto replies = eval(
        *lease, shared_->list, redis::Effect::read, [&](redis::Command& c, const std::string& sha) {
          c.arg_copy(sha).arg(1).arg_copy(index_key(collection));
          c.arg(window.after).arg(window.offset).arg_copy(detail::kv_limit(window.limit));
          c.arg_copy(record_key(collection, "")).label(label);
        });
    return items_of(replies[0], *lease, label);
  }

  /// The record count and the oldest and newest record of `collection`, read at one instant
  /// (one read-only script): DeadLetterQueue::stats reads a list's depth and both ends with
  /// it, so a list that changes meanwhile never yields ends of two different instants. An
  /// index member whose record key is missing or holds another type is passed by, as list
  /// passes it by: each end is the first record present from that end; count is count()'s.
  Ends ends(std::string_view collection) {
    auto lease = shared_->pool.acquire();
    const std::string label = "ends script (" + std::string(collection) + ")";
    auto replies = eval(*lease, shared_->ends, redis::Effect::read,
                        [&](redis::Command& c, const std::string& sha) {
                          c.arg_copy(sha).arg(1).arg_copy(index_key(collection));
                          c.arg_copy(record_key(collection, "")).label(label);
                        });
    const redisReply& r = redis::check(replies[0], *lease, label);
    auto bad = [&]() { redis::detail::throw_unexpected_reply(r, lease->endpoint(), label); };
    if (r.type != REDIS_REPLY_ARRAY || r.elements != 3 ||
        r.element[0]->type != REDIS_REPLY_INTEGER || r.element[0]->integer < 0)
      bad();
    Ends out;
    out.count = static_cast<std::size_t>(r.element[0]->integer);
    auto item = [&](const redisReply& e) -> std::optional<Item> {
      if (e.type != REDIS_REPLY_ARRAY || (e.elements != 0 && e.elements != 3)) bad();
      if (e.elements == 0) return std::nullopt;
      for (std::size_t i = 0; i < 3; ++i)
        if (e.element[i]->type != REDIS_REPLY_STRING) bad();
      return Item{std::string(redis::view(*e.element[0])), std::string(redis::view(*e.element[1])),
                  detail::kv_parse_version(redis::view(*e.element[2]), lease->endpoint(), label)};
    };
    out.first = item(*r.element[1]);
    out.last = item(*r.element[2]);
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
    auto replies = eval(*lease, shared_->remove, redis::Effect::write,
                        [&](redis::Command& c, const std::string& sha) {
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
                        });
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
      auto replies = eval(*lease, shared_->purge, redis::Effect::write,
                          [&](redis::Command& c, const std::string& sha) {
                            c.arg_copy(sha).arg(1).arg(std::string_view(idx));
                            c.arg(std::string_view(last)).arg(1000);
                            c.arg(std::string_view(prefix)).label(label);
                          });
      const auto n = static_cast<std::size_t>(redis::integer(replies[0], *lease, label));
      removed += n;
      if (n < 1000) return removed;
    }
  }

 private:
  // The save script (scripts::kv_save) over `writes`, capped at *cap when cap is not null.
  std::vector<redis::Reply> run_save(redis::Connection& lease, const std::vector<Write>& writes,
                                     const std::size_t* cap, const std::string& label) {
    return eval(lease, shared_->save, redis::Effect::write,
                [&](redis::Command& c, const std::string& sha) {
                  c.reserve(5 + writes.size() * 5);
                  c.arg_copy(sha).arg(writes.size() * 3);
                  for (const Write& w : writes) {
                    c.arg_copy(record_key(w.collection, w.id));
                    c.arg_copy(index_key(w.collection));
                    c.arg_copy(counter_key(w.collection));
                  }
                  for (const Write& w : writes)
                    c.arg(w.id).arg(w.value);
                  if (cap != nullptr)
                    c.arg(*cap).arg_copy(record_key(writes.back().collection, ""));
                  c.label(label);
                });
  }

  // The records of a script's flat reply: id, bytes, version, …
  static std::vector<Item> items_of(const redis::Reply& reply, const redis::Connection& conn,
                                    const std::string& label) {
    const std::vector<std::string> flat = redis::strings(reply, conn, label);
    std::vector<Item> out;
    out.reserve(flat.size() / 3);
    for (std::size_t i = 0; i + 2 < flat.size(); i += 3)
      out.push_back(Item{flat[i], flat[i + 1],
                         detail::kv_parse_version(flat[i + 2], conn.endpoint(), label)});
    return out;
  }

  // Runs one EVALSHA of `script` on `conn` (loaded again after NOSCRIPT): `args(c, sha)`
  // appends everything after the command name.
  template <class Args>
  static std::vector<redis::Reply> eval(redis::Connection& conn, redis::Script& script,
                                        redis::Effect effect, Args&& args) {
    return script.run_pipeline(
        conn, 0,
        [&](const std::string& sha) {
          std::vector<redis::Command> cmds;
          cmds.emplace_back("EVALSHA");
          args(cmds.back(), sha);
          return cmds;
        },
        effect);
  }

  struct shared {
    shared(redis::ConnectionOptions connection, RedisStoreOptions o)
        : options(std::move(o)),
          pool(std::move(connection), options.pool),
          save("kv save script", std::string(redis::scripts::kv_save)),
          load("kv load script", std::string(redis::scripts::kv_load)),
          list("kv list script", std::string(redis::scripts::kv_list)),
          ends("kv ends script", std::string(redis::scripts::kv_ends)),
          remove("kv remove script", std::string(redis::scripts::kv_remove)),
          purge("kv purge script", std::string(redis::scripts::kv_purge_chunk)),
          save_if_below("kv bounded save script", std::string(redis::scripts::kv_save_if_below)),
          save_if_fits("kv bounded batch save script",
                       std::string(redis::scripts::kv_save_if_fits)),
          increment("kv increment script", std::string(redis::scripts::kv_increment)) {}
    RedisStoreOptions options;
    redis::ConnectionPool pool;
    redis::Script save, load, list, ends, remove, purge, save_if_below, save_if_fits, increment;
  };
  std::shared_ptr<shared> shared_;
};

}  // namespace kv
}  // namespace dlq

#if defined(DLQ_REDIS_HEADER_ONLY)
#include "dlq/redis/kv_store-inl.hpp"
#endif

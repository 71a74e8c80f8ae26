// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/list_storage-inl.hpp
/// RedisListStorage's connection, pushes, reads, removals, purge, queue listing, stats and
/// audit trail: the definitions of list_storage.hpp's members other than the replay step
/// (list_storage_replay-inl.hpp) and the fast path (list_storage_fast-inl.hpp). Non-template
/// ones are DLQ_REDIS_INLINE (see dlq/detail/compiled.hpp): included by list_storage.hpp in
/// header-only mode, compiled into the library in compiled mode.
#pragma once

#include "dlq/detail/id.hpp"
#include "dlq/redis/audit_stream.hpp"
#include "dlq/redis/list_storage.hpp"
#include "dlq/redis/scripts/audit_append.hpp"
#include "dlq/redis/scripts/list_purge.hpp"
#include "dlq/redis/scripts/list_push_bounded.hpp"
#include "dlq/redis/scripts/list_push_capped.hpp"
#include "dlq/redis/scripts/list_range_bytes.hpp"
#include "dlq/redis/scripts/recover_tombstone.hpp"
#include "dlq/redis/scripts/replay_fast.hpp"
#include "dlq/redis/scripts/snapshot.hpp"
#include "dlq/redis/stats.hpp"

namespace dlq {

template <class Make>
std::vector<redis::Reply> RedisListStorage::run_spread(const std::vector<std::string>& keys,
                                                       redis::Effect effect,
                                                       std::vector<std::string>& endpoints,
                                                       Make make, std::vector<redis::Reply>* waits,
                                                       std::vector<std::string>* wait_endpoints) {
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
    if (waits != nullptr) add_wait(cmds);
    auto lease = pool->acquire();
    auto replies = lease->run(cmds, effect);
    if (waits != nullptr) {
      waits->push_back(take_wait(replies));
      wait_endpoints->push_back(lease->endpoint());
    }
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

template <class F>
void RedisListStorage::scan(redis::Connection& conn, const redis::KeyPattern& pattern, F&& on_key) {
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

DLQ_REDIS_INLINE RedisListStorage::RedisListStorage(redis::ConnectionOptions connection,
                                                    RedisListOptions options)
    : options_(std::move(options)),
      dead_(redis::KeyPattern::parse(options_.dead_key, "RedisListOptions::dead_key")),
      source_(redis::KeyPattern::parse(options_.source_key, "RedisListOptions::source_key")),
      corrupt_(redis::KeyPattern::parse(options_.corrupt_key, "RedisListOptions::corrupt_key")),
      shared_(nullptr) {
  const std::string ack_problem = redis::detail::replica_ack_problem(
      options_.replicas_to_ack, options_.replica_ack_timeout, connection.command_timeout);
  if (!ack_problem.empty()) {
    throw dlq::invalid_argument(dlq::detail::message(
        "redis", "RedisListOptions::replicas_to_ack", ack_problem,
        "see \"Replica-acknowledged writes\" in docs/redis.md"));
  }
  shared_ = std::make_shared<Shared>(std::move(connection), options_.pool);
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
      untagged_ = "key patterns '" + options_.dead_key + "', '" + options_.source_key + "' and '" +
                  options_.corrupt_key + "' do not share one hash tag";
    }
  }
  if (options_.max_batch_items == 0) options_.max_batch_items = 1000;
  options_.max_batch_items = std::min<std::size_t>(options_.max_batch_items, 4000);
  if (options_.max_batch_bytes == 0) options_.max_batch_bytes = std::size_t{512} << 10;
  if (options_.receipt_ttl.count() <= 0) options_.receipt_ttl = std::chrono::minutes(10);
  shared_->step_base =
      detail::os_random64() ^
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

DLQ_REDIS_INLINE redis::Router& RedisListStorage::routed() {
  redis::Router& r = shared_->router;
  if (options_.replicas_to_ack > 0 && r.clustered()) {
    throw dlq::invalid_argument(dlq::detail::message(
        "redis", "RedisListOptions::replicas_to_ack",
        "the server at " + r.seed().endpoint() +
            " is a Redis Cluster node; replica-acknowledged writes are not supported on "
            "Redis Cluster yet (WAIT would have to follow each write to its slot's master, "
            "through redirections)",
        "set replicas_to_ack = 0 for a cluster, and min-replicas-to-write on its masters"));
  }
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

DLQ_REDIS_INLINE std::string RedisListStorage::key(std::string_view queue, ListKind kind) const {
  return kind == ListKind::dead ? dead_.key(queue) : corrupt_.key(queue);
}

DLQ_REDIS_INLINE std::size_t RedisListStorage::push(const Record& record) {
  check_queue(record.queue, "push");
  const std::string k = dead_.key(record.queue);
  // Shared: concurrent sends through this storage go to the server in batches (PoolOptions
  // ::send_batches), each still with its own reply.
  auto answer = routed().run_shared(
      k, redis::Effect::write,
      [&] {
        return std::move(redis::Command("RPUSH").arg(std::string_view(k)).arg(record.envelope));
      },
      replica_ack());
  const auto n = static_cast<std::size_t>(integer_reply(answer.reply, answer.endpoint, "RPUSH " + k));
  if (options_.replicas_to_ack > 0) {
    confirm(answer.wait ? answer.wait->get() : nullptr, answer.endpoint, "RPUSH " + k,
            ids_of(&record, 1), 1);
  }
  return n;
}

DLQ_REDIS_INLINE bool RedisListStorage::push_bounded(const Record& record, std::size_t max_length) {
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
        return waited(one(std::move(c)));
      },
      &shared_->bounded_push_script);
  const redis::Reply wait = take_wait(replies);
  const bool pushed = redis::integer(replies[0], **lease, label) > 0;
  if (pushed) confirm(wait.get(), (*lease)->endpoint(), label, ids_of(&record, 1), 1);
  return pushed;
}

DLQ_REDIS_INLINE bool RedisListStorage::push_bounded(const std::vector<Record>& records,
                                                     std::size_t max_length) {
  if (records.empty()) return true;
  check_queue(records.front().queue, "push_bounded");
  const std::string k = dead_.key(records.front().queue);
  const std::string label = "bounded batch push script on " + k;
  Lease lease;
  auto replies = routed().run(
      lease, k, redis::Effect::write,
      [&](const std::string& sha) {
        return waited(one(push_script_call(sha, k, max_length, records, label)));
      },
      &shared_->bounded_batch_push_script);
  const redis::Reply wait = take_wait(replies);
  const bool pushed = redis::integer(replies[0], **lease, label) > 0;
  if (pushed) {
    confirm(wait.get(), (*lease)->endpoint(), label, ids_of(records.data(), records.size()),
            records.size());
  }
  return pushed;
}

DLQ_REDIS_INLINE std::vector<std::string> RedisListStorage::push_capped(
    const std::vector<Record>& records, std::size_t max_length) {
  if (records.empty()) return {};
  check_queue(records.front().queue, "push_capped");
  const std::string k = dead_.key(records.front().queue);
  const std::string label = "capped push script on " + k;
  const std::string runs = runs_key(k);  // evictions lower the snapshot bounds
  Lease lease;
  auto replies = routed().run(
      lease, k, redis::Effect::write,
      [&](const std::string& sha) {
        return waited(one(push_script_call(sha, k, max_length, records, label, &runs)));
      },
      &shared_->capped_push_script);
  const redis::Reply wait = take_wait(replies);
  auto evicted = redis::strings(replies[0], **lease, label);
  confirm(wait.get(), (*lease)->endpoint(), label, ids_of(records.data(), records.size()),
          records.size());
  return evicted;
}

DLQ_REDIS_INLINE std::int64_t RedisListStorage::bump_count(std::string_view queue,
                                                           std::string_view key,
                                                           std::chrono::seconds ttl) {
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

DLQ_REDIS_INLINE void RedisListStorage::push_many(const std::vector<Record>& records) {
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
  std::vector<redis::Reply> waits;  // one per pipeline (one in plain mode) when acked
  std::vector<std::string> wait_endpoints;
  const bool acked = options_.replicas_to_ack > 0;
  auto replies = run_spread(
      keys, redis::Effect::write, endpoints,
      [&](std::size_t n) {
        redis::Command c("RPUSH");
        c.reserve(2 + runs[n].second - runs[n].first);
        c.arg(std::string_view(keys[n]));
        for (std::size_t i = runs[n].first; i < runs[n].second; ++i)
          c.arg(records[i].envelope);
        return c;
      },
      acked ? &waits : nullptr, acked ? &wait_endpoints : nullptr);
  for (std::size_t n = 0; n < replies.size(); ++n) {
    integer_reply(replies[n], endpoints[n],
                  "RPUSH " + keys[n] + " (command " + std::to_string(n + 1) + " of " +
                      std::to_string(keys.size()) + " of a batch)");
  }
  for (std::size_t w = 0; w < waits.size(); ++w) {
    confirm(waits[w].get(), wait_endpoints[w],
            "RPUSH of a batch of " + std::to_string(records.size()),
            ids_of(records.data(), records.size()), records.size());
  }
}

DLQ_REDIS_INLINE std::size_t RedisListStorage::size(std::string_view queue, ListKind kind) {
  check_queue(queue, "size");
  const std::string k = key(queue, kind);
  Lease lease;
  auto replies = routed().run(lease, k, redis::Effect::read, [&](const std::string&) {
    return one(std::move(redis::Command("LLEN").arg(std::string_view(k))));
  });
  return static_cast<std::size_t>(redis::integer(replies[0], **lease, "LLEN " + k));
}

DLQ_REDIS_INLINE std::vector<std::string> RedisListStorage::range(std::string_view queue,
                                                                  ListKind kind, std::size_t start,
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

DLQ_REDIS_INLINE BoundedRange RedisListStorage::range_bytes(std::string_view queue,
                                                            ListKind kind, std::size_t start,
                                                            std::size_t count,
                                                            std::size_t min_count,
                                                            std::size_t max_bytes) {
  check_queue(queue, "range_bytes");
  constexpr auto max = static_cast<std::size_t>(std::int64_t{1} << 52);  // exact in Lua
  BoundedRange out;
  if (count == 0 || start >= max) return out;
  count = std::min(count, max - start);
  const std::string k = key(queue, kind);
  const std::string label = "range script on " + k;
  Lease lease;
  auto replies = routed().run(
      lease, k, redis::Effect::read,
      [&](const std::string& sha) {
        redis::Command c("EVALSHA");
        c.arg_copy(sha).arg(1).arg(std::string_view(k)).arg(start).arg(count);
        c.arg(std::min(min_count, count)).arg(std::min(max_bytes, max)).label(label);
        return one(std::move(c));
      },
      &shared_->range_bytes_script);
  const redis::Reply& r = replies[0];
  redis::check(r, **lease, label);
  if (r->type != REDIS_REPLY_ARRAY || r->elements == 0 ||
      r->element[0]->type != REDIS_REPLY_INTEGER)
    redis::detail::throw_unexpected_reply(*r, (*lease)->endpoint(), label);
  out.capped = r->element[0]->integer != 0;
  out.items.reserve(r->elements - 1);
  for (std::size_t i = 1; i < r->elements; ++i) {
    const redisReply& e = *r->element[i];
    if (e.type != REDIS_REPLY_STRING)
      redis::detail::throw_unexpected_reply(e, (*lease)->endpoint(), label);
    out.items.emplace_back(redis::view(e));
  }
  return out;
}

DLQ_REDIS_INLINE bool RedisListStorage::remove(std::string_view queue, ListKind kind,
                                               std::string_view id, std::string_view raw) {
  check_queue(queue, "remove");
  const std::string k = key(queue, kind);
  const std::string runs = runs_key(k);  // a dead list's: the removal lowers the bounds
  const std::string label = "remove script on " + k;
  Lease lease;
  auto replies = routed().run(
      lease, k, redis::Effect::write,
      [&](const std::string& sha) {
        redis::Command c("EVALSHA");
        c.arg_copy(sha).arg(kind == ListKind::dead ? 2 : 1).arg(std::string_view(k));
        if (kind == ListKind::dead) c.arg(std::string_view(runs));
        c.arg(raw).label(label);
        return waited(one(std::move(c)));
      },
      &shared_->remove_script);
  const redis::Reply wait = take_wait(replies);
  const bool removed = redis::integer(replies[0], **lease, label) > 0;
  if (removed) {
    std::vector<std::string> ids;
    if (!id.empty()) ids.emplace_back(id);
    confirm(wait.get(), (*lease)->endpoint(), label, std::move(ids), 1,
            redis::detail::AckedWrite::remove);
  }
  return removed;
}

DLQ_REDIS_INLINE std::size_t RedisListStorage::purge(std::string_view queue, ListKind kind) {
  check_queue(queue, "purge");
  const std::string k = key(queue, kind);
  const std::string runs = runs_key(k);  // a dead list's: every bound drops to 0
  Lease lease;
  auto replies = routed().run(
      lease, k, redis::Effect::write,
      [&](const std::string& sha) {
        redis::Command c("EVALSHA");
        c.arg_copy(sha).arg(kind == ListKind::dead ? 2 : 1).arg(std::string_view(k));
        if (kind == ListKind::dead) c.arg(std::string_view(runs));
        c.label("purge script on " + k);
        return waited(one(std::move(c)));
      },
      &shared_->purge_script);
  const redis::Reply wait = take_wait(replies);
  const auto n =
      static_cast<std::size_t>(redis::integer(replies[0], **lease, "purge script on " + k));
  if (n > 0) {
    confirm(wait.get(), (*lease)->endpoint(), "purge script on " + k, {}, n,
            redis::detail::AckedWrite::remove);
  }
  return n;
}

DLQ_REDIS_INLINE std::vector<std::string> RedisListStorage::queues() {
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

DLQ_REDIS_INLINE std::vector<std::size_t> RedisListStorage::sizes(
    const std::vector<std::string>& queues) {
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

DLQ_REDIS_INLINE std::vector<QueueEnds> RedisListStorage::stats(
    const std::vector<std::string>& queues) {
  std::vector<redis::ListKeys> keys;
  keys.reserve(queues.size());
  for (const auto& q : queues) {
    check_queue(q, "stats");
    keys.push_back({dead_.key(q), corrupt_.key(q)});
  }
  return redis::read_list_ends(routed(), keys);
}

DLQ_REDIS_INLINE std::size_t RedisListStorage::audit_append(
    std::string_view queue, std::chrono::system_clock::time_point at, std::string_view record) {
  check_queue(queue, "audit_append");
  return redis::audit_stream::append(routed(), shared_->audit_script, audit_key(queue),
                                     detail::audit_ms(at), record, options_.audit_retention);
}

DLQ_REDIS_INLINE std::vector<std::string> RedisListStorage::audit_read(
    std::string_view queue, std::chrono::system_clock::time_point since, std::size_t limit) {
  check_queue(queue, "audit_read");
  return redis::audit_stream::read(routed(), audit_key(queue), detail::audit_ms(since), limit);
}

DLQ_REDIS_INLINE redis::Command RedisListStorage::push_script_call(
    const std::string& sha, const std::string& key, std::size_t limit,
    const std::vector<Record>& records, const std::string& label, const std::string* key2) {
  redis::Command c("EVALSHA");
  c.reserve(5 + records.size());
  c.arg_copy(sha).arg(key2 != nullptr ? 2 : 1).arg(std::string_view(key));
  if (key2 != nullptr) c.arg(std::string_view(*key2));
  c.arg(limit);
  for (const Record& r : records)
    c.arg(r.envelope);
  c.label(label);
  return c;
}

DLQ_REDIS_INLINE void RedisListStorage::add_wait(std::vector<redis::Command>& cmds) const {
  if (options_.replicas_to_ack <= 0) return;
  redis::Command c("WAIT");
  c.arg(options_.replicas_to_ack).arg(static_cast<long long>(options_.replica_ack_timeout.count()));
  cmds.push_back(std::move(c.label("WAIT")));
}

DLQ_REDIS_INLINE std::vector<redis::Command> RedisListStorage::waited(
    std::vector<redis::Command> cmds) const {
  add_wait(cmds);
  return cmds;
}

DLQ_REDIS_INLINE redis::Reply RedisListStorage::take_wait(std::vector<redis::Reply>& replies) const {
  if (options_.replicas_to_ack <= 0 || replies.empty()) return nullptr;
  redis::Reply wait = std::move(replies.back());
  replies.pop_back();
  return wait;
}

DLQ_REDIS_INLINE void RedisListStorage::confirm(const redisReply* wait,
                                                const std::string& endpoint,
                                                const std::string& what,
                                                std::vector<std::string> ids,
                                                std::size_t entries,
                                                redis::detail::AckedWrite kind) const {
  const int wanted = options_.replicas_to_ack;
  if (wanted <= 0) return;
  redis::detail::WaitReply reply;  // kind missing when not read
  if (wait != nullptr) {
    if (wait->type == REDIS_REPLY_INTEGER) {
      reply.type = redis::detail::WaitReply::kind::count;
      reply.replicas = wait->integer;
    } else if (wait->type == REDIS_REPLY_ERROR) {
      reply.type = redis::detail::WaitReply::kind::error;
      reply.text = redis::view(*wait);
    } else {
      reply.type = redis::detail::WaitReply::kind::other;
    }
  }
  const redis::detail::AckDecision d = redis::detail::decide_replica_ack(wanted, reply);
  if (d.confirmed) return;
  throw redis::detail::replication_failure(d, endpoint, what, std::move(ids), entries, wanted,
                                           options_.replica_ack_timeout, kind);
}

DLQ_REDIS_INLINE std::vector<std::string> RedisListStorage::ids_of(const Record* records,
                                                                   std::size_t n) {
  std::vector<std::string> ids;
  ids.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    if (!records[i].id.empty()) ids.emplace_back(records[i].id);
  return ids;
}

DLQ_REDIS_INLINE std::vector<redis::Command> RedisListStorage::one(redis::Command c) {
  std::vector<redis::Command> v;
  v.push_back(std::move(c));
  return v;
}

DLQ_REDIS_INLINE long long RedisListStorage::integer_reply(const redis::Reply& r,
                                                           const std::string& endpoint,
                                                           const std::string& doing) {
  if (r->type == REDIS_REPLY_ERROR) redis::detail::throw_reply_error(*r, endpoint, doing);
  if (r->type != REDIS_REPLY_INTEGER) redis::detail::throw_unexpected_reply(*r, endpoint, doing);
  return r->integer;
}

DLQ_REDIS_INLINE void RedisListStorage::check_queue(std::string_view queue, const char* where) {
  if (queue.empty()) {
    throw dlq::invalid_argument(
        dlq::detail::message("redis", std::string("RedisListStorage::") + where,
                             "the queue name is empty", "pass the name of the source queue"));
  }
}

DLQ_REDIS_INLINE RedisListStorage::Shared::Shared(redis::ConnectionOptions connection,
                                                  redis::PoolOptions pool_options)
    : router(std::move(connection), pool_options),
      replay_script("replay script", std::string(redis::scripts::replay_step)),
      purge_script("purge script", std::string(redis::scripts::list_purge)),
      bounded_push_script("bounded push script", std::string(redis::scripts::list_push_bounded)),
      bounded_batch_push_script("bounded batch push script",
                                std::string(redis::scripts::list_push_bounded_batch)),
      capped_push_script("capped push script", std::string(redis::scripts::list_push_capped)),
      recover_script("recover script", std::string(redis::scripts::recover_tombstone)),
      fast_script("fast replay script", std::string(redis::scripts::replay_fast)),
      snapshot_begin_script("snapshot script", std::string(redis::scripts::replay_snapshot_begin)),
      snapshot_read_script("snapshot read script",
                           std::string(redis::scripts::replay_snapshot_read)),
      remove_script("remove script", std::string(redis::scripts::list_remove)),
      range_bytes_script("range script", std::string(redis::scripts::list_range_bytes)),
      audit_script("audit append script", std::string(redis::scripts::audit_append)) {}

DLQ_REDIS_INLINE RedisListStorage::RedisListStorage(std::string_view url, RedisListOptions options)
    : RedisListStorage(redis::parse_url(url), std::move(options)) {}

}  // namespace dlq

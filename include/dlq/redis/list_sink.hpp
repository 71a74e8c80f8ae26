// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/list_sink.hpp
/// dlq::kv::RedisListSink: a replay destination of the key-value backend
/// (dlq::KeyValueStorage) that pushes payloads onto Redis lists — where workers reading a
/// Redis source queue find them. CMake: dlq::redis.
///
///     dlq::KeyValueStorage storage(dlq::kv::RedisStore(url), dlq::kv::RedisListSink(url));
///
/// Contract: each queue receives its payloads in order; a push whose answer was lost throws
/// with outcome_unknown() and is never re-sent (the key-value replay is at-least-once).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/errors.hpp"
#include "dlq/kv/sinks.hpp"
#include "dlq/redis/connection.hpp"
#include "dlq/redis/key_pattern.hpp"
#include "dlq/redis/options.hpp"
#include "dlq/redis/pool.hpp"

namespace dlq::kv {

/// Options of dlq::kv::RedisListSink. Every default is stated.
struct RedisListSinkOptions {
  /// The list a queue's payloads are pushed to; `*` stands for the queue name. Default
  /// "queue:{*}" — RedisListStorage's default source list, so workers reading those lists
  /// get the replayed jobs. The Python seed's layout is "queue:*".
  std::string key = "queue:{*}";
  /// Connection pool: how many connections all threads share, how long to wait for one.
  redis::PoolOptions pool;
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
      : shared_(std::make_shared<shared>(std::move(connection), options)) {}

  /// Parses `url` (see dlq::redis::parse_url) and connects lazily.
  /// @throws dlq::invalid_argument for a bad URL or key pattern.
  explicit RedisListSink(std::string_view url, RedisListSinkOptions options = {})
      : RedisListSink(redis::parse_url(url), std::move(options)) {}

  /// The list `queue`'s payloads are pushed to.
  std::string key(std::string_view queue) const { return shared_->pattern.key(queue); }

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
    shared(redis::ConnectionOptions connection, const RedisListSinkOptions& o)
        : pool(std::move(connection), o.pool),
          pattern(redis::KeyPattern::parse(o.key, "RedisListSinkOptions::key")) {}
    redis::ConnectionPool pool;
    redis::KeyPattern pattern;
  };
  std::shared_ptr<shared> shared_;
};

}  // namespace dlq::kv

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/redis_list_storage.hpp
/// dlq::asio::RedisListStorage: the asynchronous storage of dlq::asio::AsyncDeadLetterQueue
/// on Redis lists, over one non-blocking dlq::asio::RedisConnection. CMake: dlq::asio and
/// dlq::redis.
///
///     asio::io_context io;
///     dlq::asio::AsyncDeadLetterQueue<dlq::asio::RedisListStorage> q(
///         io.get_executor(),
///         dlq::asio::RedisListStorage(io.get_executor(), "redis://127.0.0.1:6379/0"));
///
/// Same keys, same wire format and same scripts as the blocking dlq::RedisListStorage
/// (RedisListOptions: dead_key pattern): the blocking and the asynchronous front ends see the
/// same entries, so operators replay, trim and purge with the blocking API. Costs, in round
/// trips, all pipelined on the one connection: a push is one RPUSH (Retention::max_length
/// with Overflow::reject: the bounded push script; with Overflow::evict_oldest: the capped
/// push script — each one EVAL); size one LLEN; a range one LRANGE; bump_count (the poison
/// guard) one EVAL of INCR + EXPIRE.
/// On a Redis Cluster (detected by the URL's node's handshake) each command goes to the master
/// of its queue's slot through a dlq::asio::RedisClusterRouter (asio/redis_cluster.hpp): one
/// connection per master, MOVED/ASK followed, a queue's sends stored in issue order.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/post.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "dlq/asio/redis_cluster.hpp"
#include "dlq/asio/redis_connection.hpp"
#include "dlq/asio/storage.hpp"
#include "dlq/errors.hpp"
#include "dlq/redis/error_mapping.hpp"
#include "dlq/redis/key_pattern.hpp"
#include "dlq/redis/list_storage.hpp"
#include "dlq/redis/options.hpp"
#include "dlq/redis/scripts/list_push_bounded.hpp"
#include "dlq/redis/scripts/list_push_capped.hpp"

namespace dlq::asio {

/// Asynchronous dead-letter storage in Redis lists (see the file comment). A handle: copies
/// share one connection (one per master on a cluster). Call it from its executor
/// (AsyncDeadLetterQueue does).
class RedisListStorage {
 public:
  /// Marks this type as an asynchronous storage for AsyncDeadLetterQueue.
  using async_storage_tag = void;
  using executor_type = ::asio::any_io_executor;

  /// Connects lazily to `connection` with the key layout of `options` (dead_key for the dead
  /// lists, source_key for dlq::asio::AsyncSourceQueue; the pool settings do not apply).
  /// @throws dlq::invalid_argument when the dead_key or source_key pattern does not have
  ///         exactly one `*`, or RedisListOptions::replicas_to_ack is not 0 (not supported
  ///         here yet).
  RedisListStorage(executor_type executor, redis::ConnectionOptions connection,
                   const RedisListOptions& options = {})
      : dead_(redis::KeyPattern::parse(options.dead_key, "RedisListOptions::dead_key")),
        source_(redis::KeyPattern::parse(options.source_key, "RedisListOptions::source_key")),
        conn_(std::make_shared<RedisConnection>(std::move(executor), std::move(connection))),
        link_(RedisClusterRouter::make(conn_)) {
    if (options.replicas_to_ack != 0) {
      throw dlq::invalid_argument(dlq::detail::message(
          "asio", "RedisListOptions::replicas_to_ack",
          "replica-acknowledged writes are not supported by dlq::asio::RedisListStorage yet "
          "(its sends do not send WAIT)",
          "set replicas_to_ack = 0 here and use the blocking dlq::RedisListStorage for "
          "acknowledged sends, or min-replicas-to-write on the server"));
    }
  }
  /// Parses `url` (dlq::redis::parse_url). @throws dlq::invalid_argument for a bad URL.
  RedisListStorage(executor_type executor, std::string_view url,
                   const RedisListOptions& options = {})
      : RedisListStorage(std::move(executor), redis::parse_url(url), options) {}

  /// The connection (for raw commands and its counters): to the URL's server.
  RedisConnection& connection() noexcept { return *conn_; }
  /// The Redis Cluster router (its stats; plain() once the server answered as a single
  /// server).
  const RedisClusterRouter& cluster() const noexcept { return *link_; }
  /// The executor its completions run on.
  executor_type get_executor() const noexcept { return conn_->get_executor(); }
  /// The Redis key of a queue's dead list.
  std::string key(std::string_view queue) const { return dead_.key(queue); }
  /// The Redis key of a queue's source list (RedisListOptions::source_key), as the blocking
  /// storage's source_key(): where dlq::asio::AsyncSourceQueue takes jobs from.
  std::string source_key(std::string_view queue) const { return source_.key(queue); }

  /// For dlq's own asynchronous operations (dlq::asio::AsyncSourceQueue): one command whose
  /// keys are all in `key`'s slot, appended as RESP by `format(std::string& out)` during the
  /// call, sent through the router (the URL's connection on a single server, the slot's
  /// master on a cluster) as RedisClusterRouter::execute_inline. `done` runs on the executor,
  /// never inside this call.
  template <class Format>
  void execute_inline(std::string_view key, Format&& format, bool write, const char* label_prefix,
                      std::string label, RedisConnection::inline_callback done) {
    link_->execute_inline(key, std::forward<Format>(format), write, label_prefix, std::move(label),
                          std::move(done));
  }

  /// Appends `envelopes` to the queue's dead list in one command: RPUSH when `max_length`
  /// is 0; else, with `evict_oldest`, the capped push script (the evicted items are
  /// reported); else the bounded push script (all or none; stored == false when they do
  /// not fit). `done(std::exception_ptr, PushResult)` runs on the executor (from the
  /// connection's read handler when the answer arrives, or posted). The command is
  /// formatted straight into the connection's output buffer.
  template <class Done>
  void push(std::string_view queue, std::vector<std::string> envelopes, std::size_t max_length,
            bool evict_oldest, Done&& done) {
    push_each(queue, envelopes, max_length, evict_oldest, std::forward<Done>(done));
  }

  /// push() of one envelope, copied into the connection's output buffer during the call.
  template <class Done>
  void push_one(std::string_view queue, std::string_view envelope, std::size_t max_length,
                bool evict_oldest, Done&& done) {
    const std::string_view one[1] = {envelope};
    push_each(queue, one, max_length, evict_oldest, std::forward<Done>(done));
  }

  /// Length of the queue's dead list: one LLEN.
  void size(std::string_view queue, std::function<void(std::exception_ptr, std::size_t)> done) {
    const std::string k = dead_.key(queue);
    const std::string label = "LLEN " + k;
    link_->execute(k, {"LLEN", k}, false, label,
                   [done = std::move(done), label, endpoint = conn_->endpoint()](
                       std::exception_ptr e, RedisReply r) {
                     if (!e && r.type != reply_type::integer)
                       e = unexpected(endpoint, label, r.type, false);
                     done(e, e ? 0 : static_cast<std::size_t>(r.integer));
                   });
  }

  /// Items [start, start + count) of the queue's dead list: one LRANGE (count 0 = none).
  /// Clamped to Redis's index range as the blocking range: a count reaching past the end
  /// reads to the end, a start beyond it reads nothing.
  void range(std::string_view queue, std::size_t start, std::size_t count,
             std::function<void(std::exception_ptr, std::vector<std::string>)> done) {
    constexpr auto max = static_cast<std::size_t>(std::numeric_limits<long long>::max());
    if (count == 0 || start >= max) {
      return ::asio::post(conn_->get_executor(), [done = std::move(done)] { done(nullptr, {}); });
    }
    const std::size_t last = count - 1 > max - start ? max : start + (count - 1);
    const std::string k = dead_.key(queue);
    const std::string label = "LRANGE " + k;
    link_->execute(k, {"LRANGE", k, std::to_string(start), std::to_string(last)}, false, label,
                   [done = std::move(done), label, endpoint = conn_->endpoint()](
                       std::exception_ptr e, RedisReply r) {
                     std::vector<std::string> out;
                     if (!e && r.type != reply_type::array) {
                       e = unexpected(endpoint, label, r.type, false);
                     } else if (!e) {
                       out.reserve(r.elements.size());
                       for (auto& item : r.elements)
                         out.push_back(std::move(item.str));
                     }
                     done(e, std::move(out));
                   });
  }

  /// Adds one to the poison guard's counter `key` of `queue` and reports its new value, as
  /// the blocking dlq::RedisListStorage::bump_count does — same key
  /// (`<dead key>:count:<key>`, in the queue's hash tag: the queue's slot on a cluster), same
  /// effect (INCR, then EXPIRE `ttl`, at least 1 s, atomically; a `ttl` EXPIRE refuses as
  /// too large leaves the count without a new expiry, as on the blocking storage) — so the
  /// blocking and the asynchronous front ends count the same jobs together. One command: a
  /// script doing both (the blocking storage sends MULTI/INCR/EXPIRE/EXEC on its own
  /// connection; one command here cannot be split by a lost connection or a cluster
  /// redirection).
  /// `done(std::exception_ptr, std::int64_t)` runs once, on the executor (from the
  /// connection's read handler when the answer arrives, or posted), never inside this call;
  /// on failure the value is 0 and the error is the connection's (a dlq::storage_error
  /// subclass; an error reply, e.g. WRONGTYPE, a dlq::reply_error). A failed count may still
  /// have been applied (its answer lost); nothing is re-sent.
  template <class Done>
  void bump_count(std::string_view queue, std::string_view key, std::chrono::seconds ttl,
                  Done&& done) {
    std::string k = dead_.key(queue);
    k += ":count:";
    k += key;
    const std::string seconds =
        std::to_string(std::max<long long>(1, static_cast<long long>(ttl.count())));
    // EXPIRE through pcall: a ttl past what EXPIRE takes (seconds::max(), "for ever") is
    // refused after the INCR ran; the count stands and keeps its expiry (none for a new
    // key), as in the blocking storage's EXEC, which reads the INCR and not the EXPIRE —
    // a redis.call would fail every such send, its count bumped each time.
    static constexpr std::string_view script =
        "local n = redis.call('INCR', KEYS[1])\n"
        "redis.pcall('EXPIRE', KEYS[1], ARGV[1])\n"
        "return n\n";
    const auto format = [&](std::string& out) {
      detail::resp_command(out, 5);
      detail::resp_arg(out, "EVAL");
      detail::resp_arg(out, script);
      detail::resp_arg(out, "1");
      detail::resp_arg(out, k);
      detail::resp_arg(out, seconds);
    };
    link_->execute_inline(
        k, format, true, "INCR ", k,
        [done = std::forward<Done>(done), label = "INCR " + k, endpoint = conn_->endpoint()](
            std::exception_ptr e, RedisReply&& r) mutable {
          if (!e && r.type != reply_type::integer) e = unexpected(endpoint, label, r.type, true);
          done(e, e ? 0 : static_cast<std::int64_t>(r.integer));
        });
  }

  /// Closes the connection (see RedisConnection::close), and those to the cluster's masters.
  void close() noexcept {
    conn_->close();
    link_->close();
  }

 private:
  enum class kind { plain, bounded, capped };

  // push() and push_one(): `envelopes` is a range of strings, formatted during the call;
  // `queue` is read (for the key) before `done` is moved from.
  template <class Envelopes, class Done>
  void push_each(std::string_view queue, const Envelopes& envelopes, std::size_t max_length,
                 bool evict_oldest, Done&& done) {
    const std::string k = dead_.key(queue);
    const kind how = max_length == 0 ? kind::plain : evict_oldest ? kind::capped : kind::bounded;
    const auto format = [&](std::string& out) {
      if (how == kind::plain) {
        detail::resp_command(out, 2 + std::size(envelopes));
        detail::resp_arg(out, "RPUSH");
        detail::resp_arg(out, k);
      } else {
        // The capped push evicts: KEYS[2], the dead list's runs hash, lowers the snapshot
        // bounds of the replays and discards in progress (dlq/redis/scripts/snapshot.hpp).
        const bool capped = how == kind::capped;
        detail::resp_command(out, (capped ? 6 : 5) + std::size(envelopes));
        detail::resp_arg(out, "EVAL");
        detail::resp_arg(out, capped ? redis::scripts::list_push_capped
                              : std::size(envelopes) == 1
                                  ? redis::scripts::list_push_bounded
                                  : redis::scripts::list_push_bounded_batch);
        detail::resp_arg(out, capped ? "2" : "1");
        detail::resp_arg(out, k);
        if (capped) detail::resp_arg(out, redis::scripts::runs_key(k));
        detail::resp_arg(out, std::to_string(max_length));
      }
      for (const auto& e : envelopes)
        detail::resp_arg(out, e);
    };
    const char* prefix = how == kind::plain    ? "RPUSH "
                         : how == kind::capped ? "capped push script on "
                                               : "bounded push script on ";
    // The arguments are made before the call: the key is copied, not moved, as `format`
    // reads it. Through the router: straight to the connection on a single server.
    link_->execute_inline(k, format, true, prefix, k,
                          [done = std::forward<Done>(done), how, prefix, k, conn = conn_](
                              std::exception_ptr e, RedisReply&& r) mutable {
                            PushResult result;
                            if (!e) {
                              if (how == kind::capped && r.type == reply_type::array) {
                                for (auto& item : r.elements)
                                  result.evicted.push_back(std::move(item.str));
                              } else if (how != kind::capped && r.type == reply_type::integer) {
                                result.stored = r.integer > 0;
                              } else {
                                e = unexpected(conn->endpoint(), prefix + k, r.type, true);
                              }
                            }
                            done(e, std::move(result));
                          });
  }

  static std::exception_ptr unexpected(const std::string& endpoint, const std::string& label,
                                       int type, bool write) {
    return std::make_exception_ptr(dlq::protocol_error(
        dlq::detail::message("redis", endpoint,
                             label + ": unexpected reply of type " + std::to_string(type),
                             "is this a Redis server of version 6 or later?"),
        write));
  }

  redis::KeyPattern dead_;
  redis::KeyPattern source_;
  std::shared_ptr<RedisConnection> conn_;
  std::shared_ptr<RedisClusterRouter> link_;  // every command goes through it
};

}  // namespace dlq::asio

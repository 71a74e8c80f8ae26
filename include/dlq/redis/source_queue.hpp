// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/source_queue.hpp
/// dlq::RedisSourceQueue — the worker's side of the Redis source lists that a
/// dlq::RedisListStorage replays into, behind the source-queue interface of
/// dlq/source_queue.hpp (push, pop, reliable take with ack / nack, recover). Link `dlq::redis`.
///
///     dlq::DeadLetterQueue q{dlq::RedisListStorage("redis://127.0.0.1:6379/0")};
///     dlq::RedisSourceQueue jobs(q.storage());
///     for (auto& job : jobs.take("orders", "host-7/1", 16)) { ... jobs.ack(...) / dead_letter }
///
/// Keys, for the storage's source key S of queue Q (default `queue:{Q}`): the jobs are the
/// list S (producers RPUSH, take moves from the head — the Python service's layout works
/// unchanged), consumer C's in-flight jobs the list `S:inflight:C`, and the set `S:consumers`
/// names the consumers that hold jobs. All three share S's hash tag, so on Redis Cluster a
/// queue's keys are in one slot; every command goes through the storage's router (MOVED /
/// ASK followed as for the dead-letter lists). A queue name holds no brace, so no queue's S
/// is another's in-flight list; with no `}` after the `*` (the seed's `queue:*`, a fixed
/// tag) nothing ends the name: keep names free of `:inflight:` and `:consumers` there
/// (docs/names.md).
///
/// Every move is one server-side step: take is one script (LRANGE of the consumer's in-flight
/// list, else up to `max` LMOVE from S into it, plus SADD), ack and nack one script (LREM from
/// the in-flight list; nack then RPUSH to S, after checking S is a list so nothing is removed
/// that cannot be put back), recover one script per 1000 jobs (LMOVE). A job is at every
/// instant in S, in one in-flight list, or acked; an answer lost to a timeout leaves the
/// jobs in flight, where the next take() of the same consumer or recover() finds them.
/// On lists a job is identified by its bytes: ack/nack remove one in-flight item equal to
/// the payload (identical payloads are interchangeable).
/// Key names, scripts, arguments, bounds and name checks are those of
/// dlq/redis/source_protocol.hpp, shared with the asynchronous dlq::asio::AsyncSourceQueue;
/// this class only does their I/O (EVALSHA through the storage's pool and router).
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "dlq/errors.hpp"
#include "dlq/redis/cluster.hpp"
#include "dlq/redis/connection.hpp"
#include "dlq/redis/list_storage.hpp"
#include "dlq/redis/script.hpp"
#include "dlq/redis/source_protocol.hpp"
#include "dlq/source_queue.hpp"

namespace dlq {

/// The source lists of a RedisListStorage behind the source-queue interface (see the file
/// comment and dlq/source_queue.hpp). A handle: it refers to the storage, which must outlive
/// it; copies share the loaded scripts. Thread-safe (connections come from the storage's
/// pool).
class RedisSourceQueue {
 public:
  /// A handle on `storage`'s source lists (no I/O).
  explicit RedisSourceQueue(RedisListStorage& storage)
      : storage_(&storage), scripts_(std::make_shared<Scripts>()) {}

  /// The key of `queue`'s job list.
  std::string key(std::string_view queue) const { return storage_->source_key(queue); }
  /// The key of the list of jobs `consumer` holds from `queue`.
  std::string in_flight_key(std::string_view queue, std::string_view consumer) const {
    return redis::source::in_flight_key(key(queue), consumer);
  }
  /// The key of the set of consumers that hold jobs from `queue`.
  std::string consumers_key(std::string_view queue) const {
    return redis::source::consumers_key(key(queue));
  }

  /// Appends a job at the tail of `queue`: one RPUSH.
  /// @throws dlq::invalid_argument (empty queue name, or a layout Redis Cluster cannot hold);
  ///         the dlq::storage_error subclasses (dlq::reply_error WRONGTYPE when the key is
  ///         not a list).
  void push(std::string_view queue, std::string_view payload) {
    check(queue, "push");
    const std::string k = key(queue);
    run_one(k, redis::Effect::write, {"RPUSH", k, payload}, &redis::integer);
  }

  /// Removes and returns the oldest job (at-most-once: one LPOP); nullopt when empty.
  /// @throws as push().
  std::optional<std::string> pop(std::string_view queue) {
    check(queue, "pop");
    const std::string k = key(queue);
    return run_one(k, redis::Effect::write, {"LPOP", k},
                   [](const redis::Reply& r, const redis::Connection& conn,
                      const std::string& label) -> std::optional<std::string> {
                     const redisReply& reply = redis::check(r, conn, label);
                     if (reply.type == REDIS_REPLY_NIL) return std::nullopt;
                     if (reply.type != REDIS_REPLY_STRING)
                       redis::detail::throw_unexpected_reply(reply, conn.endpoint(), label);
                     return std::string(reply.str, reply.len);
                   });
  }

  /// Reliable take (see dlq/source_queue.hpp): one script. `max` 0 = 1; values above 1000
  /// are lowered to 1000 (the script blocks the server while it runs). One consumer name
  /// per worker thread at a time: a take by a name that holds jobs returns those jobs (the
  /// restarted worker's rule), so two live threads sharing a name are handed the same jobs.
  /// @throws as push(); a timeout leaves any moved jobs in `consumer`'s in-flight list.
  std::vector<SourceJob> take(std::string_view queue, std::string_view consumer,
                              std::size_t max = 1) {
    redis::source::check(queue, consumer, "take");
    const redis::source::Keys k = redis::source::keys(key(queue), consumer);
    const std::string count = redis::source::take_count_arg(max);
    std::vector<std::string> payloads = run_script(
        k.source, scripts_->take, redis::source::label("take", k.source),
        [&](redis::Command& c) {
          redis::source::take_args(k, consumer, count, [&c](std::string_view a) { c.arg(a); });
        },
        [](const redis::Reply& r, const redis::Connection& conn, const std::string& label) {
          return redis::strings(r, conn, label);
        });
    return redis::source::jobs_of(std::move(payloads));
  }

  /// Removes finished jobs from `consumer`'s in-flight list: one script. Returns how many
  /// were there.
  /// @throws as push().
  std::size_t ack(std::string_view queue, std::string_view consumer,
                  const std::vector<SourceJob>& jobs) {
    return settle(queue, consumer, jobs, false, "ack");
  }

  /// Moves jobs from `consumer`'s in-flight list to the tail of `queue`: one script. Returns
  /// how many were there.
  /// @throws as push(); dlq::reply_error WRONGTYPE (nothing moved) when the queue's key holds
  ///         another type.
  std::size_t nack(std::string_view queue, std::string_view consumer,
                   const std::vector<SourceJob>& jobs) {
    return settle(queue, consumer, jobs, true, "nack");
  }

  /// Moves every job `consumer` holds to the tail of `queue`, in order (one script per 1000
  /// jobs). Returns how many.
  /// @throws as push().
  std::size_t recover(std::string_view queue, std::string_view consumer) {
    redis::source::check(queue, consumer, "recover");
    const redis::source::Keys k = redis::source::keys(key(queue), consumer);
    std::size_t moved = 0;
    for (;;) {
      const long long n = run_script(
          k.source, scripts_->recover, redis::source::label("recover", k.in_flight),
          [&](redis::Command& c) {
            redis::source::recover_args(k, consumer, [&c](std::string_view a) { c.arg(a); });
          },
          [](const redis::Reply& r, const redis::Connection& conn, const std::string& label) {
            return redis::integer(r, conn, label);
          });
      moved += static_cast<std::size_t>(n);
      if (!redis::source::recover_again(n)) return moved;
    }
  }

  /// Jobs waiting in `queue`: one LLEN.
  /// @throws as push().
  std::size_t size(std::string_view queue) {
    check(queue, "size");
    return length(key(queue));
  }

  /// Jobs `consumer` holds from `queue`: one LLEN.
  /// @throws as push().
  std::size_t in_flight(std::string_view queue, std::string_view consumer) {
    check(queue, consumer, "in_flight");
    return length(in_flight_key(queue, consumer));
  }

  /// The consumers that hold jobs from `queue` (to recover() those that are gone), sorted:
  /// one SMEMBERS.
  /// @throws as push().
  std::vector<std::string> consumers(std::string_view queue) {
    check(queue, "consumers");
    const std::string set = consumers_key(queue);
    std::vector<std::string> out =
        run_one(set, redis::Effect::read, {"SMEMBERS", set}, &redis::strings);
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  struct Scripts {
    redis::Script take{"source take script", std::string(redis::source::take_script)};
    redis::Script settle{"source settle script", std::string(redis::source::settle_script)};
    redis::Script recover{"source recover script", std::string(redis::source::recover_script)};
  };
  using Lease = std::optional<redis::ConnectionPool::Lease>;
  template <class Read>
  using read_result = std::invoke_result_t<Read&, const redis::Reply&, const redis::Connection&,
                                           const std::string&>;

  static void check(std::string_view queue, const char* where) {
    redis::source::check(queue, where);
  }
  static void check(std::string_view queue, std::string_view consumer, const char* where) {
    redis::source::check(queue, consumer, where);
  }

  // The router, after the storage checked that its layout suits the server (Cluster: hash
  // tags).
  redis::Router& router() {
    storage_->cluster_mode();
    return storage_->router();
  }

  // Runs one command (`args`, keys in `k`'s slot) on the master of `k`'s slot and returns
  // read(reply, connection, label).
  template <class Read>
  read_result<Read> run_one(const std::string& k, redis::Effect effect,
                            std::initializer_list<std::string_view> args, Read read) {
    const std::string label = std::string(*args.begin()) + " " + k;
    Lease lease;
    auto replies = router().run(lease, k, effect, [&](const std::string&) {
      redis::Command c;
      for (std::string_view a : args)
        c.arg(a);
      c.label(label);
      std::vector<redis::Command> v;
      v.push_back(std::move(c));
      return v;
    });
    return read(replies[0], **lease, label);
  }

  std::size_t length(const std::string& k) {
    return static_cast<std::size_t>(run_one(k, redis::Effect::read, {"LLEN", k}, &redis::integer));
  }

  template <class Args, class Read>
  read_result<Read> run_script(const std::string& k, redis::Script& script,
                               const std::string& label, Args args, Read read) {
    Lease lease;
    auto replies = router().run(
        lease, k, redis::Effect::write,
        [&](const std::string& sha) {
          redis::Command c("EVALSHA");
          c.arg_copy(sha);
          args(c);
          c.label(label);
          std::vector<redis::Command> v;
          v.push_back(std::move(c));
          return v;
        },
        &script);
    return read(replies[0], **lease, label);
  }

  std::size_t settle(std::string_view queue, std::string_view consumer,
                     const std::vector<SourceJob>& jobs, bool requeue, const char* where) {
    redis::source::check(queue, consumer, where);
    if (jobs.empty()) return 0;
    const redis::source::Keys k = redis::source::keys(key(queue), consumer);
    const long long n = run_script(
        k.source, scripts_->settle, redis::source::label(where, k.in_flight),
        [&](redis::Command& c) {
          redis::source::settle_args(k, consumer, jobs, requeue,
                                     [&c](std::string_view a) { c.arg(a); });
        },
        [](const redis::Reply& r, const redis::Connection& conn, const std::string& label) {
          return redis::integer(r, conn, label);
        });
    return static_cast<std::size_t>(n);
  }

  RedisListStorage* storage_;
  std::shared_ptr<Scripts> scripts_;
};

}  // namespace dlq

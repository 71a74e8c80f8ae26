// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file source_queue.hpp
/// The worker's side of a source queue — the queue jobs come from and replay puts them back
/// to — with one interface on every backend:
///
/// | backend | type | header |
/// | --- | --- | --- |
/// | memory (unit tests) | `dlq::MemorySourceQueue` | `dlq/source_queue.hpp` |
/// | Redis list, incl. Cluster | `dlq::RedisSourceQueue` | `dlq/redis/source_queue.hpp` |
/// | SQLite (`kv::JobQueue`) | `dlq::kv::JobQueue<>` | `dlq/sqlite/job_queue.hpp` |
/// | PostgreSQL (`kv::JobQueue`) | `dlq::kv::JobQueue<dlq::kv::PostgresStore>` | `dlq/kv/job_queue.hpp` |
///
/// Members of a source queue `Q` (every one thread-safe; `queue` and `consumer` non-empty):
///
///     Q.push(queue, payload)                  append a job at the tail
///     Q.pop(queue) -> std::optional<std::string>
///                                             remove the oldest job (at-most-once: a worker
///                                             that dies after pop() loses the job)
///     Q.take(queue, consumer, max = 1) -> std::vector<dlq::SourceJob>
///                                             reliable take: moves up to `max` jobs, oldest
///                                             first, atomically into `consumer`'s in-flight
///                                             list; if `consumer` already holds jobs (it died
///                                             before acking them), returns those instead
///     Q.ack(queue, consumer, jobs) -> size_t  done (or dead-lettered): remove from in-flight
///     Q.nack(queue, consumer, jobs) -> size_t give back: from in-flight to the queue's tail
///     Q.recover(queue, consumer) -> size_t    `consumer` is gone for good: every job it holds
///                                             goes back to the queue's tail
///     Q.size(queue) -> size_t                 jobs waiting
///     Q.in_flight(queue, consumer) -> size_t  jobs `consumer` holds
///     Q.consumers(queue) -> vector<string>    consumers holding jobs (memory and Redis only)
///
/// Delivery guarantee: **at-least-once**. A job is at every instant in exactly one place —
/// the queue, one consumer's in-flight list, or gone (acked) — and every move between them
/// is one atomic step of the backend. A job taken and not acked is never lost: the same
/// consumer gets it again from its next take(), or recover() puts it back for anyone. The
/// price is duplicates: a worker that dies after finishing a job but before ack() runs it
/// again after recovery, so handlers must be idempotent (or check a job id). Use one
/// consumer name per worker thread (e.g. "host-7/2"), stable across restarts, and never two
/// live workers under one name: take() by a name that holds jobs returns those jobs (that
/// is how a restarted worker resumes; the store cannot tell it from a second live worker),
/// so two threads or coroutines sharing a name are handed the same job and run it twice.
/// Names: a queue name holds no `{` or `}` (dlq/queue_names.hpp, docs/names.md); a
/// consumer name is any non-empty bytes.
///
/// The worker loop, the same on every backend:
///
///     for (auto& job : jobs.take("orders", me, 16)) {
///       try {
///         handle(job.payload);
///         jobs.ack("orders", me, {job});
///       } catch (const std::exception& e) {      // retries exhausted
///         dlq::dead_letter(jobs, dlq, "orders", me, job, failure_of(e));  // send, then ack
///       }
///     }
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlq/entry.hpp"
#include "dlq/errors.hpp"
#include "dlq/queue_names.hpp"
#include "dlq/storage/memory.hpp"

namespace dlq {

namespace detail {

/// The name rule of every source queue, the same as a dead-letter queue's (dlq/queue_names.hpp:
/// never empty, at most 1024 bytes, no NUL byte, no `{` or `}` — a brace would let one
/// queue's name reach another queue's keys) (`where`: the operation; `component`: the
/// message's prefix, "source" or the backend's).
/// @throws dlq::invalid_argument
inline void check_source_queue(const char* component, std::string_view queue, const char* where) {
  check_queue_name(component, where, queue);
}
/// check_source_queue(), and a consumer name is never empty. Any other byte is allowed in a
/// consumer name: it follows the queue's closing `}` in every key, so it cannot move it.
/// @throws dlq::invalid_argument
inline void check_source_names(const char* component, std::string_view queue,
                               std::string_view consumer, const char* where) {
  check_source_queue(component, queue, where);
  if (consumer.empty())
    throw invalid_argument(message(component, where, "the consumer name is empty",
                                   "name each worker thread, e.g. \"host-7/2\""));
}

}  // namespace detail

/// One job taken from a source queue (see the file comment). Pass it back unchanged to
/// ack() or nack().
struct SourceJob {
  std::string id;             ///< the job's id where the backend has one (kv::JobQueue); empty
                              ///< on lists (memory, Redis), where the payload identifies it
  std::string payload;        ///< the payload bytes, exactly as pushed
  std::uint64_t version = 0;  ///< the backend's version of the in-flight record (JobQueue)
};

/// The source queues of a dlq::MemoryStorage (where its replay puts jobs back) behind the
/// source-queue interface (see the file comment). A handle: it refers to the storage, which
/// must outlive it; every handle on one storage sees the same jobs and in-flight lists.
///
///     dlq::DeadLetterQueue<dlq::MemoryStorage> dlq;
///     dlq::MemorySourceQueue jobs(dlq.storage());
///     jobs.push("orders", R"({"order":42})");
class MemorySourceQueue {
 public:
  /// A handle on `storage`'s source queues.
  explicit MemorySourceQueue(MemoryStorage& storage) noexcept : storage_(&storage) {}

  /// Appends a job at the tail of `queue`.
  /// @throws dlq::invalid_argument for a queue name dlq/queue_names.hpp refuses.
  void push(std::string_view queue, std::string_view payload) {
    check(queue, "push");
    storage_->source_push(queue, payload);
  }
  /// Removes and returns the oldest job (at-most-once); nullopt when the queue is empty.
  /// @throws dlq::invalid_argument for a queue name dlq/queue_names.hpp refuses.
  std::optional<std::string> pop(std::string_view queue) {
    check(queue, "pop");
    return storage_->source_pop(queue);
  }
  /// Reliable take (see the file comment); `max` 0 = 1. Returns nothing when the queue is
  /// empty and the consumer holds nothing (it does not wait). One consumer name per worker
  /// thread at a time: a take by a name that holds jobs returns those jobs again.
  /// @throws dlq::invalid_argument for a refused queue name or an empty consumer name.
  std::vector<SourceJob> take(std::string_view queue, std::string_view consumer,
                              std::size_t max = 1) {
    check(queue, consumer, "take");
    std::vector<SourceJob> out;
    for (std::string& p : storage_->source_take(queue, consumer, max == 0 ? 1 : max))
      out.push_back(SourceJob{{}, std::move(p), 0});
    return out;
  }
  /// Removes finished jobs from `consumer`'s in-flight list; returns how many were there.
  /// @throws dlq::invalid_argument for a refused queue name or an empty consumer name.
  std::size_t ack(std::string_view queue, std::string_view consumer,
                  const std::vector<SourceJob>& jobs) {
    check(queue, consumer, "ack");
    return storage_->source_settle(queue, consumer, payloads(jobs), false);
  }
  /// Moves jobs from `consumer`'s in-flight list back to the queue's tail; returns how many
  /// were there.
  /// @throws dlq::invalid_argument for a refused queue name or an empty consumer name.
  std::size_t nack(std::string_view queue, std::string_view consumer,
                   const std::vector<SourceJob>& jobs) {
    check(queue, consumer, "nack");
    return storage_->source_settle(queue, consumer, payloads(jobs), true);
  }
  /// Moves every job `consumer` holds back to the queue's tail, in order; returns how many.
  /// @throws dlq::invalid_argument for a refused queue name or an empty consumer name.
  std::size_t recover(std::string_view queue, std::string_view consumer) {
    check(queue, consumer, "recover");
    return storage_->source_recover(queue, consumer);
  }
  /// Jobs waiting in `queue`.
  /// @throws dlq::invalid_argument for a queue name the rule refuses.
  std::size_t size(std::string_view queue) {
    check(queue, "size");
    return storage_->source_size(queue);
  }
  /// Jobs `consumer` holds from `queue`.
  /// @throws dlq::invalid_argument for a queue or consumer name the rule refuses.
  std::size_t in_flight(std::string_view queue, std::string_view consumer) {
    check(queue, consumer, "in_flight");
    return storage_->source_in_flight(queue, consumer);
  }
  /// The consumers that hold jobs from `queue` (to recover() those that are gone), sorted.
  /// @throws dlq::invalid_argument for a queue name the rule refuses.
  std::vector<std::string> consumers(std::string_view queue) {
    check(queue, "consumers");
    return storage_->source_consumers(queue);
  }

 private:
  static void check(std::string_view queue, const char* where) {
    detail::check_source_queue("source", queue, where);
  }
  static void check(std::string_view queue, std::string_view consumer, const char* where) {
    detail::check_source_names("source", queue, consumer, where);
  }
  static std::vector<std::string_view> payloads(const std::vector<SourceJob>& jobs) {
    std::vector<std::string_view> out;
    out.reserve(jobs.size());
    for (const SourceJob& j : jobs)
      out.emplace_back(j.payload);
    return out;
  }

  MemoryStorage* storage_;
};

/// Dead-letters a job taken from `source` whose retries are exhausted, then acks it: the
/// payload goes to `dlq` byte for byte with `failure`, and only once it is stored does the
/// job leave `consumer`'s in-flight list. Returns the dead letter's id. An empty queue or
/// consumer name is refused before anything is sent.
/// When send_to_dlq throws (server gone, timed out…) the job stays in flight and the
/// exception propagates: the job is delivered again (take() by the same consumer, or
/// recover()), never lost. A crash between the send and the ack dead-letters the job twice
/// on its next failure (at-least-once; both entries carry the same payload and job_id).
/// @throws dlq::invalid_argument for a refused name; what `dlq.send_to_dlq` and `source.ack`
///         throw.
template <class Source, class Queue>
std::string dead_letter(Source& source, Queue& dlq, std::string_view queue,
                        std::string_view consumer, const SourceJob& job, const Failure& failure) {
  detail::check_source_names("source", queue, consumer, "dead_letter");
  std::string id = dlq.send_to_dlq(queue, job.payload, failure);
  source.ack(queue, consumer, std::vector<SourceJob>{job});
  return id;
}

/// Settles a job whose handler failed on attempt `failure.attempt`: when that is at least
/// `max_attempts`, dead-letters it (dead_letter()) and returns true; otherwise gives it back
/// to the queue's tail (nack) for a later attempt and returns false. Attempts are counted by
/// the caller (a job given back carries no count: keep it in the payload or retry in place).
/// @throws what dead_letter() and `source.nack` throw.
template <class Source, class Queue>
bool fail_job(Source& source, Queue& dlq, std::string_view queue, std::string_view consumer,
              const SourceJob& job, const Failure& failure, std::int64_t max_attempts) {
  if (failure.attempt >= max_attempts) {
    dead_letter(source, dlq, queue, consumer, job, failure);
    return true;
  }
  source.nack(queue, consumer, std::vector<SourceJob>{job});
  return false;
}

}  // namespace dlq

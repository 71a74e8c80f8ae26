// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file storage/memory.hpp
/// dlq::MemoryStorage — the in-memory backend, for unit tests of workers and for embedding.
///
/// It keeps, per queue, the dead-letter list, the corrupt list and the source queue (the
/// list replay pushes payloads back to, which a test or an in-process worker consumes with
/// source_pop). It is thread-safe and follows the same protocol as the Redis backend: a
/// replay step copies its window out under the lock, lets the front end decide without the
/// lock held, then re-checks that the window is unchanged and applies every decision at once
/// under the lock — so concurrent sends, removals and replays behave as they do on Redis.
///
///     dlq::DeadLetterQueue<dlq::MemoryStorage> dlq;
///     dlq.send_to_dlq("orders", R"({"order":42})", "payment timeout", 3, "worker-7");
///     dlq.replay_all("orders");
///     auto job = dlq.storage().source_pop("orders");  // R"({"order":42})"
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/detail/compiled.hpp"
#include "dlq/detail/counter_map.hpp"
#include "dlq/detail/kept_prefix.hpp"
#include "dlq/policies.hpp"
#include "dlq/storage.hpp"

namespace dlq {

/// Thread-safe in-memory storage. Movable, not copyable.
class MemoryStorage {
 public:
  /// Replay position: the number of items a replay kept in place so far, and which ones
  /// (so that the replay finds its place again when another client removes some of them),
  /// and the snapshot bound.
  struct replay_cursor {
    std::size_t offset = 0;      ///< items kept at the head of the list so far
    detail::kept_prefix kept{};  ///< the kept items (hashes), in list order
    /// The walk examines only items numbered up to this (see replay_snapshot); the default
    /// bounds nothing.
    std::uint64_t last = std::numeric_limits<std::uint64_t>::max();
  };

  MemoryStorage();
  /// A storage whose audit trail keeps its records as `audit_retention` says (the default
  /// constructor: 90 days, at most 1 000 000 per queue; see dlq/audit.hpp).
  explicit MemoryStorage(AuditRetention audit_retention);
  ~MemoryStorage();
  MemoryStorage(MemoryStorage&&) noexcept;
  MemoryStorage& operator=(MemoryStorage&&) noexcept;

  /// Appends one envelope to the queue's dead-letter list; returns the list's new length.
  std::size_t push(const Record& record);

  /// Appends one envelope only while the dead-letter list has fewer than `max_length`
  /// items (atomically); false when it is full.
  bool push_bounded(const Record& record, std::size_t max_length);

  /// Appends `records` (all of one queue) only if the dead-letter list then holds at most
  /// `max_length` items, atomically: all of them or none. False when they do not fit.
  bool push_bounded(const std::vector<Record>& records, std::size_t max_length);

  /// Appends `records` (all of one queue) and, under the same lock, removes the oldest items
  /// beyond `max_length`; returns the removed items, oldest first.
  std::vector<std::string> push_capped(const std::vector<Record>& records, std::size_t max_length);

  /// Adds one to the counter `key` of `queue` and returns its new value. A counter expires
  /// `ttl` after its last bump; at most 100 000 are kept — beyond that the ones closest to
  /// expiry are dropped first — so the bookkeeping stays bounded.
  std::int64_t bump_count(std::string_view queue, std::string_view key, std::chrono::seconds ttl);

  /// Appends several envelopes, all at once (no other operation sees half of them).
  void push_many(const std::vector<Record>& records);

  /// Number of items in one of the queue's lists.
  std::size_t size(std::string_view queue, ListKind kind);

  /// Items [start, start + count) of one of the queue's lists (fewer at the end).
  std::vector<std::string> range(std::string_view queue, ListKind kind, std::size_t start,
                                 std::size_t count);

  /// Items from `start`: at least `min_count` (1 or more), then while their bytes stay
  /// within `max_bytes`, at most `count` (see dlq::BoundedRange). Copies only those.
  BoundedRange range_bytes(std::string_view queue, ListKind kind, std::size_t start,
                           std::size_t count, std::size_t min_count, std::size_t max_bytes);

  /// Removes the first item equal to `raw`; false when there is none.
  bool remove(std::string_view queue, ListKind kind, std::string_view /*id*/, std::string_view raw);

  /// Removes every item of one of the queue's lists and returns how many there were.
  std::size_t purge(std::string_view queue, ListKind kind);

  /// Names of the queues that have dead-letter or corrupt items, sorted.
  std::vector<std::string> queues();

  /// Dead-letter list sizes of several queues, read at one instant.
  std::vector<std::size_t> sizes(const std::vector<std::string>& names);

  /// Length and first and last item of both lists of each queue, in order, each queue read
  /// under the lock at one instant (the storage member `stats`, see dlq/stats.hpp).
  std::vector<QueueEnds> stats(const std::vector<std::string>& names);

  /// Bounds the walk with `cursor` to the items the queue's dead list holds now (see
  /// "Snapshot" in dlq/storage.hpp) and returns their number. Every item pushed to a dead list
  /// gets the next number of a counter the storage keeps (under its lock), so items only ever
  /// follow older ones in a list: the snapshot is "numbered up to the counter's value now",
  /// and a replay step reads only the items of its window numbered up to that. Exact whatever
  /// other clients remove (by position, by bytes, byte-identical twins included) or add.
  std::size_t replay_snapshot(std::string_view queue, replay_cursor& cursor);

  /// One replay step (see dlq/storage.hpp for the protocol).
  StepResult replay_step(std::string_view queue, replay_cursor& cursor, std::size_t max_items,
                         Decider decide);

  /// Nothing to recover: a replay step applies at once or not at all. Returns 0.
  std::size_t recover(std::string_view /*queue*/) { return 0; }

  // --- the audit trail (see dlq/audit.hpp) -----------------------------------------------

  /// Appends one audit record (JSON text) made at `at` to the queue's trail, then applies
  /// the trail's retention under the same lock: the records made before
  /// `audit_retention.expire_before(at)` go, then the cap (AuditRetention::excess). Returns
  /// how many records younger than the max age the cap removed.
  std::size_t audit_append(std::string_view queue, std::chrono::system_clock::time_point at,
                           std::string_view record);

  /// The retention of the audit trail (set at construction).
  const AuditRetention& audit_retention() const noexcept;

  /// The queue's audit records made at or after `since`, oldest first, at most `limit`.
  std::vector<std::string> audit_read(std::string_view queue,
                                      std::chrono::system_clock::time_point since,
                                      std::size_t limit);

  // --- the source queues (where replay puts jobs back) ----------------------------------

  /// Appends a job payload to a source queue (what a producer does).
  void source_push(std::string_view queue, std::string_view payload);

  /// Takes the oldest job payload from a source queue (what a worker does); nullopt if empty.
  std::optional<std::string> source_pop(std::string_view queue);

  /// Reliable take for `consumer` (see dlq/source_queue.hpp): the jobs it already holds
  /// (up to `max`, oldest first) if any, else up to `max` jobs moved from the head of the
  /// source queue to the tail of its in-flight list, atomically.
  std::vector<std::string> source_take(std::string_view queue, std::string_view consumer,
                                       std::size_t max);

  /// Removes from `consumer`'s in-flight list one item equal to each of `payloads` and, when
  /// `requeue`, appends it to the source queue; all at once. Returns how many were found.
  std::size_t source_settle(std::string_view queue, std::string_view consumer,
                            const std::vector<std::string_view>& payloads, bool requeue);

  /// Moves every job `consumer` holds to the tail of the source queue, in order; returns how
  /// many.
  std::size_t source_recover(std::string_view queue, std::string_view consumer);

  /// The consumers that hold jobs from a source queue, sorted.
  std::vector<std::string> source_consumers(std::string_view queue);

  /// Number of jobs `consumer` holds from a source queue (taken, not acked).
  std::size_t source_in_flight(std::string_view queue, std::string_view consumer);

  /// Number of job payloads waiting in a source queue.
  std::size_t source_size(std::string_view queue);

  /// Job payloads [start, start + count) of a source queue, oldest first (default: all).
  std::vector<std::string> source_range(
      std::string_view queue, std::size_t start = 0,
      std::size_t count = std::numeric_limits<std::size_t>::max());

 private:
  struct lists {
    std::deque<std::string> dead;
    std::deque<std::uint64_t> numbers;  // of the dead items, in step with `dead`, ascending
    std::deque<std::string> corrupt;
    std::deque<std::string> source;
    std::map<std::string, std::deque<std::string>, std::less<>> in_flight;  // by consumer
  };
  struct state {
    std::mutex mutex;
    std::map<std::string, lists, std::less<>> queues;
    detail::counter_map counters;
    std::uint64_t pushed = 0;  // the number of the last item pushed to any dead list
    std::map<std::string, std::deque<std::pair<std::chrono::system_clock::time_point, std::string>>,
             std::less<>>
        audit;
    AuditRetention audit_retention;
  };

  static std::deque<std::string>& list_of(lists& l, ListKind kind) {
    return kind == ListKind::dead ? l.dead : l.corrupt;
  }
  static const std::deque<std::string>& list_of(const lists& l, ListKind kind) {
    return kind == ListKind::dead ? l.dead : l.corrupt;
  }
  static std::vector<std::string> slice(const std::deque<std::string>& list, std::size_t start,
                                        std::size_t count);
  // The items before the cursor are the ones the replay kept, minus any another client
  // removed since (remove(), a trim, another replayer): if the last kept item is no longer
  // just before the cursor, move the cursor back to the first item not examined yet —
  // else that item would be skipped.
  static void find_place(const std::deque<std::string>& dead, replay_cursor& cursor);
  lists* find_lists(std::string_view queue);
  // Appends one item to a dead list with the next number (under the lock).
  void append_dead(lists& l, std::string_view bytes);
  lists& lists_for(std::string_view queue);

  std::unique_ptr<state> state_;
};

}  // namespace dlq

#if defined(DLQ_HEADER_ONLY)
#include "dlq/storage/memory-inl.hpp"
#endif

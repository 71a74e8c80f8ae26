// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file dead_letter_queue.hpp
/// dlq::DeadLetterQueue — the front end workers and operators call.
///
/// It owns everything that is the same on every backend: building the envelope (id, clock,
/// metadata), validation, filters, the replay loop and its report (dlq/replay.hpp), and
/// retention (dlq/retention.hpp). The Storage (see dlq/storage.hpp) owns bytes and
/// atomicity. Every member is safe to call from several threads at once when the storage is
/// (all storages shipped with dlq are).
///
///     dlq::DeadLetterQueue<dlq::MemoryStorage> dlq;               // or RedisListStorage, …
///     dlq.send_to_dlq("orders", payload, "payment timeout", 3, "worker-7");
///     auto page = dlq.peek("orders");                             // inspect
///     auto report = dlq.replay_all("orders");                     // move back to the queue
///
/// Where the members are defined, by concern: this header declares the class and defines
/// the reads (size, peek, summary, stats, errors, queues, corrupt, search, audit) and purges;
/// the send path is in dlq/detail/dead_letter_queue_send.hpp, lookups and removals by id in
/// dlq/detail/dead_letter_queue_lookup.hpp, replay, discard and trim with their audit records
/// in dlq/detail/dead_letter_queue_bulk.hpp (all included at the end of this header). See
/// dlq/replay.hpp for what a replay does.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "dlq/audit.hpp"
#include "dlq/detail/batched_walk.hpp"
#include "dlq/detail/compiled.hpp"
#include "dlq/detail/id.hpp"
#include "dlq/detail/queue_core.hpp"
#include "dlq/entry.hpp"
#include "dlq/errors.hpp"
#include "dlq/operations.hpp"
#include "dlq/policies.hpp"
#include "dlq/queue_names.hpp"
#include "dlq/replay.hpp"
#include "dlq/retention.hpp"
#include "dlq/search.hpp"
#include "dlq/stats.hpp"
#include "dlq/storage.hpp"

namespace dlq {

/// One job for send_batch.
struct FailedJob {
  std::string queue;    ///< source queue
  std::string payload;  ///< payload bytes, exactly as they should be replayed
  Failure failure;      ///< what went wrong
};

/// The dead-letter queue front end over a Storage (see dlq/storage.hpp). `Storage` may be a
/// reference type (`DeadLetterQueue<MemoryStorage&>`) to share one storage.
template <class Storage>
class DeadLetterQueue {
  using storage_type = std::remove_cv_t<std::remove_reference_t<Storage>>;
  static_assert(detail::check_storage<storage_type>::value, "dlq: not a storage");

 public:
  /// Creates a queue front end over `storage`.
  explicit DeadLetterQueue(Storage storage = Storage(), Options options = {});

  /// The storage, for backend-specific calls (e.g. MemoryStorage::source_pop).
  storage_type& storage() noexcept { return storage_; }

  /// The options this queue was created with.
  const Options& options() const noexcept { return core_->options; }

  /// The counters since this queue was created (see dlq::Counters). Cheap; thread-safe.
  Counters counters() const noexcept { return core_->counters.snapshot(); }

  // --- workers ---------------------------------------------------------------------------

  /// Dead-letters one job: stores `payload` (any bytes; kept byte-exact) with `failure`
  /// under the source queue `queue`, and returns the new entry's id. One storage round trip
  /// (one more with the poison guard on). Under Retention::max_length the queue never holds
  /// more than max_length entries after a send, whatever other senders do: Overflow::reject
  /// refuses the entry, Overflow::evict_oldest evicts the oldest in the same atomic step as
  /// the push (a storage without push_capped evicts right after it; a failure there is
  /// logged and trim() retries, the send does not fail).
  /// @throws dlq::invalid_argument for an empty queue name, a negative attempt, a context
  ///         that is not a JSON object, or a payload that is not JSON under
  ///         Payloads::json_only; dlq::queue_full_error when retention rejects the entry;
  ///         dlq::storage_error when the backend fails.
  std::string send_to_dlq(std::string_view queue, std::string_view payload, const Failure& failure);

  /// The Python seed's signature: send_to_dlq(queue, payload, error, attempt, worker).
  std::string send_to_dlq(std::string_view queue, std::string_view payload, std::string error,
                          std::int64_t attempt = 1, std::string worker = {});

  /// Dead-letters several jobs and returns their ids in order. Validates every job before
  /// storing any. One storage call (one round trip on Redis) when no queue of the batch has a
  /// max_length, else one per queue of the batch. With Overflow::reject a batch is all or
  /// nothing: the jobs of one queue are stored together only if they all fit (atomically, on
  /// every shipped storage) — else it throws queue_full_error having stored nothing. A batch
  /// over several queues is first checked against each, so one full queue refuses it whole;
  /// only when another sender fills a queue between that check and the push are the jobs of
  /// the queues pushed before it stored while the error is thrown (send one queue's jobs per
  /// batch where that matters).
  /// With Overflow::evict_oldest the oldest entries beyond max_length are evicted atomically
  /// with the push and each is reported. With the poison guard on, each job's count costs one
  /// storage call before the push.
  /// @throws as send_to_dlq.
  std::vector<std::string> send_batch(const std::vector<FailedJob>& jobs);

  // --- operators: inspect ----------------------------------------------------------------

  /// Number of entries in the queue's dead-letter list (the seed's dlq_length).
  std::size_t size(std::string_view queue);

  /// Entries [start, start + count) of the dead-letter list, oldest first, without removing
  /// them (the seed's peek_dlq). Unreadable entries are included with ok() == false.
  std::vector<Entry> peek(std::string_view queue, std::size_t start = 0, std::size_t count = 10);

  /// Entries of the dead (`kind` ListKind::dead) or corrupt list from `start`: at least
  /// `min_count` (1 or more), then while their stored bytes stay within `max_bytes`, at most
  /// `count`, bounded before they leave the store (the storage's `range_bytes`, see
  /// dlq::BoundedRange). nullopt when the storage has no `range_bytes` (the key-value
  /// storages): read with peek or corrupt then. The console's scans use it.
  std::optional<PeekWindow> peek_bounded(std::string_view queue, ListKind kind, std::size_t start,
                                         std::size_t count, std::size_t min_count,
                                         std::size_t max_bytes);

  /// The entry with this id, or nullopt.
  std::optional<Entry> get(std::string_view queue, std::string_view id);

  /// Removes the entry with this id without replaying it. Returns false when there is none
  /// (then nothing is written to the audit trail). remove_ids with one id.
  bool remove(std::string_view queue, std::string_view id);

  /// Removes the entries with these ids without replaying them: one scan of the list for all
  /// of them (one lookup each where the storage has `find`), then one atomic
  /// compare-and-delete per entry found (an entry replayed or changed meanwhile is looked for
  /// again, twice at most). One audit record ("remove", by `actor`, default Options::actor)
  /// names the ids removed — the first Options::audit_max_ids, the rest counted — and counts
  /// those not found; none when nothing was removed. An id named twice counts once.
  /// @throws dlq::invalid_argument for an empty queue name; dlq::storage_error when the
  ///         backend fails (entries removed before stay removed and are in the audit record,
  ///         outcome "failed: …"); dlq::conflict_error (a storage_error) when, on a storage
  ///         without `find`, other clients removed entries so fast that the scan lost its
  ///         place 4 times (never an id reported not found that was there all along).
  RemoveReport remove_ids(std::string_view queue, const std::vector<std::string>& ids,
                          std::string actor = {});

  /// Deletes every entry of the queue's dead-letter list; returns exactly how many were
  /// deleted (one atomic step). One audit record ("purge", by `actor`, default
  /// Options::actor) when it deleted any.
  std::size_t purge(std::string_view queue, std::string actor = {});

  /// Dead-letter depth of each named queue, read in one storage call (the seed's
  /// dlq_summary).
  std::map<std::string, std::size_t> summary(const std::vector<std::string>& queues);

  /// Dead-letter depth of every queue that has dead-letter or corrupt entries.
  std::map<std::string, std::size_t> summary();

  /// Depth, corrupt depth and the times of the oldest and newest entry of each named queue,
  /// in order, at a cost independent of the queues' lengths (see dlq/stats.hpp). Ages are
  /// measured by Options::clock. Times that cannot be read are reported as such, not guessed.
  /// @throws dlq::invalid_argument for an empty queue name; dlq::storage_error subclasses.
  std::vector<QueueStats> stats(const std::vector<std::string>& queues);

  /// stats() of every queue that has dead-letter or corrupt entries, sorted by name (the
  /// queues of queues(): names dlq refuses are skipped).
  std::vector<QueueStats> stats();

  /// The queue's dead letters grouped by error text and by error type (counts, oldest and
  /// newest time, an example id per group), read oldest first in bounded windows (see
  /// dlq/stats.hpp and ErrorsOptions; the default reads every entry). The report says whether
  /// its counts are exact or a sample.
  /// @throws dlq::invalid_argument for an empty queue name; dlq::storage_error subclasses.
  ErrorsReport errors(std::string_view queue, const ErrorsOptions& options = {});

  /// Names of the queues that have dead-letter or corrupt entries, sorted. Names found in the
  /// store that dlq refuses (dlq::queue_name_problem: a foreign key with a NUL byte, or over 1024
  /// bytes) are left out; list_queues() counts them.
  std::vector<std::string> queues();

  /// The queue names found in the store, split into those dlq serves (what queues() returns)
  /// and those it refuses and every listing skips (see dlq/queue_names.hpp).
  QueueNames list_queues();

  /// Entries [start, start + count) of the queue's corrupt list (set aside by replay).
  std::vector<Entry> corrupt(std::string_view queue, std::size_t start = 0, std::size_t count = 10);

  /// Number of items in the queue's corrupt list.
  std::size_t corrupt_size(std::string_view queue);

  /// Deletes the queue's corrupt list; returns how many items it had. One audit record
  /// ("purge_corrupt", by `actor`, default Options::actor) when it deleted any.
  std::size_t purge_corrupt(std::string_view queue, std::string actor = {});

  // --- operators: replay -----------------------------------------------------------------

  /// Replays entries of `queue` as `options` say (see dlq/replay.hpp for the semantics).
  /// @throws dlq::invalid_argument for an empty queue name; dlq::storage_error when the
  ///         backend fails (batches applied before the failure stay applied, nothing is
  ///         lost); dlq::conflict_error when other processes keep changing the same entries.
  ReplayReport replay(std::string_view queue, const ReplayOptions& options = {});

  /// Replays every entry present now back to its source queue (the seed's replay_all).
  ReplayReport replay_all(std::string_view queue);

  /// Replays the oldest readable entry and returns it, or nullopt when there is none (the
  /// seed's replay_one). Corrupt entries in front of it are set aside on the way.
  std::optional<Entry> replay_one(std::string_view queue);

  /// Replays the entries with these ids, wherever they are in the list.
  ReplayReport replay_ids(std::string_view queue, std::vector<std::string> ids);

  /// Finishes replays of `queue` that were interrupted (a replayer killed mid-way), where the
  /// backend can leave such state; returns the number of items it fixed. A no-op on backends
  /// whose replay steps are atomic. One audit record ("recover", by `actor`, default
  /// Options::actor) when it fixed any.
  std::size_t recover(std::string_view queue, std::string actor = {});

  // --- operators: search, discard, edit, audit (dlq/search.hpp, dlq/operations.hpp) -----

  /// One page of a resumable search of the dead-letter list (see dlq/search.hpp): the
  /// entries `filter` matches from the `continuation` point on (empty = from the oldest), at
  /// most `limit` (0 = 100), after examining at most `max_examined` entries (0 = 10 000).
  /// Pass page.continuation to the next call until page.done(). Age conditions are measured
  /// by Options::clock. Read-only: not audited.
  /// @throws dlq::invalid_argument for an empty queue name or a malformed continuation;
  ///         dlq::storage_error when the backend fails.
  SearchPage search(std::string_view queue, const Filter& filter,
                    std::string_view continuation = {}, std::size_t limit = 100,
                    std::size_t max_examined = 0);

  /// Deletes the entries `options` matches, in atomic batches (see dlq/operations.hpp);
  /// every deletion is counted (Counters::discarded) and emitted (EventKind::discarded); one
  /// audit record, also when it fails part-way.
  /// @throws dlq::invalid_argument for an empty queue name; dlq::storage_error when the
  ///         backend fails (batches applied before stay applied and are in the audit
  ///         record); dlq::conflict_error when other clients keep changing the same entries.
  DiscardReport discard(std::string_view queue, const DiscardOptions& options = {});

  /// Replays the entry `id` with `new_payload` instead of its stored payload, in one atomic
  /// step (see ReplayOptions::transform); a parked entry is replayed too. The audit record
  /// ("replay_edited", by `actor`, default Options::actor) holds the SHA-256 of the old and
  /// new payload. Returns the report: replayed == 1 on success, else the id is in skipped
  /// (not_found, or corrupt: an unreadable entry has no payload to edit).
  /// @throws dlq::invalid_argument when `new_payload` is empty or only whitespace (never a
  ///         valid job; nothing is read or moved); otherwise as replay().
  ReplayReport replay_edited(std::string_view queue, std::string_view id, std::string new_payload,
                             std::string actor = {}, std::string to_queue = {});

  /// The queue's audit records made at or after `since` (by Options::clock when written),
  /// oldest first, at most `limit` (0 = 1000). Empty on a storage without an audit trail
  /// (see dlq/audit.hpp).
  /// @throws dlq::invalid_argument for an empty queue name; dlq::storage_error.
  std::vector<AuditRecord> audit(std::string_view queue,
                                 std::chrono::system_clock::time_point since = {},
                                 std::size_t limit = 1000);

  // --- retention -------------------------------------------------------------------------

  /// Applies the queue's retention now: evicts entries beyond Retention::max_length and
  /// entries older than Retention::max_age, oldest first, in bounded atomic batches. Every
  /// eviction is counted and reported as an event.
  /// @throws dlq::invalid_argument for an empty queue name; dlq::storage_error when the
  ///         backend fails (the batches applied before it stay evicted; run it again).
  TrimReport trim(std::string_view queue);

  /// trim() on every queue that has entries; returns the totals.
  TrimReport trim();

 private:
  // Replays and writes the audit record (detail/dead_letter_queue_bulk.hpp).
  detail::replay_engine::result run_replay(std::string_view queue, const ReplayOptions& options,
                                           bool keep_replayed, std::string_view operation);

  AuditRecord audit_record(std::string_view operation, std::string_view queue,
                           std::string_view actor) const {
    AuditRecord r;
    r.operation = std::string(operation);
    r.queue = std::string(queue);
    r.actor = std::string(actor);
    return r;
  }

  // One audit record for a simple operation (no filter), written after it.
  void audit_simple(std::string_view operation, std::string_view queue,
                    nlohmann::ordered_json counts, const std::vector<std::string>& ids = {},
                    std::string outcome = "ok", std::string_view actor = {}) {
    if constexpr (detail::has_audit<storage_type>::value) {
      AuditRecord r = audit_record(operation, queue, actor);
      r.counts = std::move(counts);
      detail::audit_ids bounded{core_->options.audit_max_ids, {}, 0};
      for (const auto& id : ids)
        bounded.add(id);
      r.ids = std::move(bounded.ids);
      r.ids_omitted = bounded.omitted;
      r.outcome = std::move(outcome);
      detail::write_audit(*core_, storage_, r);
    } else {
      (void)operation;
      (void)queue;
      (void)counts;
      (void)ids;
      (void)outcome;
      (void)actor;
    }
  }

  // The jobs of one queue within a send (in order of first use).
  struct queue_part {
    std::string_view queue;
    std::vector<std::size_t> jobs;  // indexes into the send's jobs
  };

  // The send path (detail/dead_letter_queue_send.hpp).
  std::vector<std::string> send(const detail::job_view* jobs, std::size_t n, const char* where);
  bool any_retention(const std::vector<queue_part>& parts) const;

  // Whether the storage can push `count` entries under Overflow::reject atomically.
  static constexpr bool bounded_atomically(std::size_t count) {
    return detail::has_push_bounded_many<storage_type>::value ||
           (count == 1 && detail::has_push_bounded<storage_type>::value);
  }

  void admit(const queue_part& part, bool several_queues, const detail::job_view* single);
  detail::prepared_entry prepare(const detail::job_view& job,
                                 std::chrono::system_clock::time_point now);
  detail::poison_mark count_poison(const detail::job_view& job);
  void push_all(const std::vector<detail::prepared_entry>& entries);
  void push_part(const queue_part& part, const std::vector<detail::prepared_entry>& entries);
  std::size_t push_records(const std::vector<Record>& records, bool need_length = true);

  static std::vector<Entry> parse_all(std::vector<std::string> raws) {
    std::vector<Entry> out;
    out.reserve(raws.size());
    for (auto& raw : raws)
      out.push_back(parse_entry(std::move(raw)));
    return out;
  }

  // Runs `f`, counting storage errors by type before they propagate.
  template <class F>
  decltype(auto) guarded(F&& f) {
    try {
      return f();
    } catch (const storage_error& e) {
      core_->count_failure(e);
      throw;
    }
  }

  // Lookups and removals by id (detail/dead_letter_queue_lookup.hpp).
  RemoveReport remove_many(std::string_view queue, const std::vector<std::string>& ids,
                           std::string actor);
  std::optional<std::string> find_raw(std::string_view queue, ListKind kind, std::string_view id);
  std::map<std::string, std::string, std::less<>> find_raws(
      std::string_view queue, ListKind kind, const std::vector<std::string_view>& ids);

  Storage storage_;
  std::unique_ptr<detail::queue_core> core_;  // not movable: atomics, a mutex
};

// --- DeadLetterQueue's public members -------------------------------------------------------
template <class Storage>
DLQ_MEMBER_INLINE DeadLetterQueue<Storage>::DeadLetterQueue(Storage storage, Options options)
    : storage_(std::forward<Storage>(storage)),
      core_(std::make_unique<detail::queue_core>(std::move(options))) {}

template <class Storage>
DLQ_MEMBER_INLINE std::size_t DeadLetterQueue<Storage>::size(std::string_view queue) {
  detail::queue_core::validate_queue(queue, "size");
  return guarded([&] { return storage_.size(queue, ListKind::dead); });
}

template <class Storage>
DLQ_MEMBER_INLINE std::vector<Entry> DeadLetterQueue<Storage>::peek(std::string_view queue,
                                                                    std::size_t start,
                                                                    std::size_t count) {
  detail::queue_core::validate_queue(queue, "peek");
  return guarded([&] { return parse_all(storage_.range(queue, ListKind::dead, start, count)); });
}

template <class Storage>
DLQ_MEMBER_INLINE std::optional<PeekWindow> DeadLetterQueue<Storage>::peek_bounded(
    std::string_view queue, ListKind kind, std::size_t start, std::size_t count,
    std::size_t min_count, std::size_t max_bytes) {
  detail::queue_core::validate_queue(queue, "peek_bounded");
  if constexpr (detail::has_range_bytes<storage_type>::value) {
    return guarded([&] {
      BoundedRange r = storage_.range_bytes(queue, kind, start, count, min_count, max_bytes);
      return std::optional<PeekWindow>(PeekWindow{parse_all(std::move(r.items)), r.capped});
    });
  } else {
    return std::nullopt;
  }
}

template <class Storage>
DLQ_MEMBER_INLINE std::size_t DeadLetterQueue<Storage>::purge(std::string_view queue,
                                                              std::string actor) {
  detail::queue_core::validate_queue(queue, "purge");
  const std::size_t n = guarded([&] { return storage_.purge(queue, ListKind::dead); });
  if (n != 0) audit_simple("purge", queue, detail::object_of("purged", n), {}, "ok", actor);
  return n;
}

template <class Storage>
DLQ_MEMBER_INLINE std::map<std::string, std::size_t> DeadLetterQueue<Storage>::summary(
    const std::vector<std::string>& queues) {
  for (const auto& q : queues)
    detail::queue_core::validate_queue(q, "summary");
  return guarded([&] {
    const auto sizes = storage_.sizes(queues);
    std::map<std::string, std::size_t> out;
    for (std::size_t i = 0; i < queues.size() && i < sizes.size(); ++i)
      out[queues[i]] = sizes[i];
    return out;
  });
}

template <class Storage>
DLQ_MEMBER_INLINE std::map<std::string, std::size_t> DeadLetterQueue<Storage>::summary() {
  return summary(queues());
}

template <class Storage>
DLQ_MEMBER_INLINE std::vector<QueueStats> DeadLetterQueue<Storage>::stats(
    const std::vector<std::string>& queues) {
  for (const auto& q : queues)
    detail::queue_core::validate_queue(q, "stats");
  return guarded(
      [&] { return detail::queue_stats(storage_, queues, [this] { return core_->now(); }); });
}

template <class Storage>
DLQ_MEMBER_INLINE std::vector<QueueStats> DeadLetterQueue<Storage>::stats() {
  return stats(queues());
}

template <class Storage>
DLQ_MEMBER_INLINE ErrorsReport DeadLetterQueue<Storage>::errors(std::string_view queue,
                                                                const ErrorsOptions& options) {
  detail::queue_core::validate_queue(queue, "errors");
  return guarded([&] { return detail::summarize_errors(storage_, queue, options); });
}

template <class Storage>
DLQ_MEMBER_INLINE std::vector<std::string> DeadLetterQueue<Storage>::queues() {
  return list_queues().names;
}

template <class Storage>
DLQ_MEMBER_INLINE QueueNames DeadLetterQueue<Storage>::list_queues() {
  return guarded([&] { return split_queue_names(storage_.queues()); });
}

template <class Storage>
DLQ_MEMBER_INLINE std::vector<Entry> DeadLetterQueue<Storage>::corrupt(std::string_view queue,
                                                                       std::size_t start,
                                                                       std::size_t count) {
  detail::queue_core::validate_queue(queue, "corrupt");
  return guarded([&] { return parse_all(storage_.range(queue, ListKind::corrupt, start, count)); });
}

template <class Storage>
DLQ_MEMBER_INLINE std::size_t DeadLetterQueue<Storage>::corrupt_size(std::string_view queue) {
  detail::queue_core::validate_queue(queue, "corrupt_size");
  return guarded([&] { return storage_.size(queue, ListKind::corrupt); });
}

template <class Storage>
DLQ_MEMBER_INLINE std::size_t DeadLetterQueue<Storage>::purge_corrupt(std::string_view queue,
                                                                      std::string actor) {
  detail::queue_core::validate_queue(queue, "purge_corrupt");
  const std::size_t n = guarded([&] { return storage_.purge(queue, ListKind::corrupt); });
  if (n != 0)
    audit_simple("purge_corrupt", queue, detail::object_of("purged", n), {}, "ok", actor);
  return n;
}

template <class Storage>
DLQ_MEMBER_INLINE SearchPage DeadLetterQueue<Storage>::search(std::string_view queue,
                                                              const Filter& filter,
                                                              std::string_view continuation,
                                                              std::size_t limit,
                                                              std::size_t max_examined) {
  detail::queue_core::validate_queue(queue, "search");
  return guarded([&] {
    return search_page(storage_, queue, filter, continuation, limit, core_->now(), max_examined);
  });
}

template <class Storage>
DLQ_MEMBER_INLINE std::vector<AuditRecord> DeadLetterQueue<Storage>::audit(
    std::string_view queue, std::chrono::system_clock::time_point since, std::size_t limit) {
  detail::queue_core::validate_queue(queue, "audit");
  if (limit == 0) limit = 1000;
  return guarded([&] { return detail::read_audit(storage_, queue, since, limit); });
}

}  // namespace dlq

#include "dlq/detail/dead_letter_queue_bulk.hpp"
#include "dlq/detail/dead_letter_queue_lookup.hpp"
#include "dlq/detail/dead_letter_queue_send.hpp"

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file dead_letter_queue.hpp
/// dlq::DeadLetterQueue — the front end workers and operators call.
///
/// It owns everything that is the same on every backend: building the envelope (id, clock,
/// metadata), validation, filters, the replay loop and its report. The Storage (see
/// dlq/storage.hpp) owns bytes and atomicity. Every member is safe to call from several
/// threads at once when the storage is (all storages shipped with dlq are).
///
///     dlq::DeadLetterQueue<dlq::MemoryStorage> dlq;               // or RedisListStorage, …
///     dlq.send_to_dlq("orders", payload, "payment timeout", 3, "worker-7");
///     auto page = dlq.peek("orders");                             // inspect
///     auto report = dlq.replay_all("orders");                     // move back to the queue
///
/// Replay semantics:
/// - Entries move oldest first, in batches; each batch moves atomically (on Redis: one
///   script), so an entry is at every instant in exactly one place — the dead-letter list,
///   the destination queue or the corrupt list — whatever fails or is killed, when.
///   (dlq::KeyValueStorage replaying into an external sink cannot apply across the two: it
///   pushes first and removes second — at-least-once, never lost.)
/// - "All" means the entries present when the replay started: the replay examines at most
///   that many entries from the head, so an entry dead-lettered again during the run (it
///   lands at the tail) is not replayed again by the same run.
/// - Filters (ids, error text, worker, age, predicate) leave non-matching entries in place,
///   in order.
/// - Corrupt entries (not JSON, no payload, …) are never dropped: replay moves them to the
///   queue's corrupt list and reports them; corrupt() shows them.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "dlq/detail/counter_map.hpp"
#include "dlq/entry.hpp"
#include "dlq/errors.hpp"
#include "dlq/operations.hpp"
#include "dlq/policies.hpp"
#include "dlq/storage.hpp"

namespace dlq {

/// Settings of a DeadLetterQueue. Every default is usable as is.
struct Options {
  /// Source of the current time for dead_lettered_at, ids and age filters.
  /// Empty (the default) = std::chrono::system_clock::now. Tests set a fixed clock.
  std::function<std::chrono::system_clock::time_point()> clock;
  /// How the library waits (replay pacing, back-off after a conflict). Empty (the default) =
  /// std::this_thread::sleep_for. Tests pair a fake sleep with a fake clock.
  std::function<void(std::chrono::nanoseconds)> sleep;
  /// Worker name recorded when a Failure names none. Default "" (as the Python seed).
  std::string worker;
  /// Most entries one replay batch moves. Default 1000; 0 means the default.
  std::size_t replay_batch_items = 1000;
  /// Bytes one replay batch aims at: the batch shrinks for large entries so that no single
  /// atomic step (one Redis script) blocks the server for long. Default 1 MiB; 0 = default.
  std::size_t replay_batch_bytes = std::size_t{1} << 20;
  /// Consecutive batches that may find the list changed under them (another process
  /// removing entries at the same place) before replay gives up with conflict_error.
  /// Default 100; 0 means the default.
  std::size_t max_conflicts = 100;
  /// Retention of every queue not named in retention_for. Default: keep everything.
  Retention retention;
  /// Retention per queue name, overriding `retention`.
  std::map<std::string, Retention, std::less<>> retention_for;
  /// The poison-loop guard. Default: off.
  PoisonGuard poison_guard;
  /// Called for every entry dead-lettered, replayed, evicted, parked, or found corrupt (see
  /// EventKind). May be called from any thread that uses the queue. An exception it throws
  /// is counted (Counters::hook_errors) and logged, and never breaks the operation.
  std::function<void(const Event&)> on_event;
  /// Where the library's own messages go (evictions, rejections, swallowed hook errors,
  /// errors of the trim timer). Empty (the default) = nowhere: no logging library is imposed.
  std::function<void(LogLevel, std::string_view)> log;
  /// Who operates this queue, written in the audit trail (dlq/audit.hpp) when an operation
  /// names no actor of its own. Default "" (dlqctl sets the OS user).
  std::string actor;
  /// Most entry ids one audit record lists; the rest are counted. Default 100.
  std::size_t audit_max_ids = 100;
};

/// What trim() removed.
struct TrimReport {
  std::size_t evicted_for_length = 0;  ///< entries beyond Retention::max_length
  std::size_t evicted_for_age = 0;     ///< entries older than Retention::max_age
  std::size_t evicted() const noexcept { return evicted_for_length + evicted_for_age; }
};

/// One job for send_batch.
struct FailedJob {
  std::string queue;    ///< source queue
  std::string payload;  ///< payload bytes, exactly as they should be replayed
  Failure failure;      ///< what went wrong
};

/// Why replay passed over an entry it was asked about.
enum class SkipReason : unsigned char {
  corrupt,   ///< unreadable; moved to the corrupt list (or left, in a dry run)
  parked,    ///< parked by the poison-loop guard; replay it by id to force it
  not_found  ///< an id given in ReplayOptions::ids is not in the dead-letter list
};

/// One entry replay passed over, and why.
struct Skipped {
  std::string id;      ///< entry id (derived from the bytes for unreadable entries)
  SkipReason reason;   ///< why
  std::string detail;  ///< human-readable detail (e.g. what is wrong with a corrupt entry)
};

/// Running totals of a replay, passed to ReplayOptions::on_progress after every batch.
struct ReplayProgress {
  std::size_t examined = 0;   ///< entries looked at so far
  std::size_t replayed = 0;   ///< entries moved so far (would be, in a dry run)
  std::size_t set_aside = 0;  ///< corrupt entries set aside so far
  std::size_t remaining = 0;  ///< entries of the starting snapshot not looked at yet
};

/// What to replay, and where to. The default replays everything present at the start back to
/// the source queue. The conditions of the dlq::Filter base (ids, error text, error type,
/// worker, job id, age, payload text, predicate) select the entries; with `ids` set the
/// other conditions do not apply, and ids not found are reported as skipped.
struct ReplayOptions : Filter {
  /// Most entries to replay; 0 = no limit.
  std::size_t limit = 0;
  /// Destination queue; empty = the queue the entries were dead-lettered from.
  std::string to_queue;
  /// Only entries for which this returns true; empty = no condition (the same as
  /// Filter::predicate; both apply when both are set). It runs while the storage decides a
  /// batch: it must not call this queue's operations (on the key-value backend, whose
  /// replay holds a lock, that would deadlock); decide from the Entry alone.
  std::function<bool(const Entry&)> filter;
  /// Edit-and-replay: the payload to push for an entry instead of its stored one, or
  /// nullopt to push it unchanged; empty (the default) = no edits. Applied inside the same
  /// atomic step that moves the entry, so after any crash the entry is either in the
  /// dead-letter list with its original payload or in the destination with the edited one,
  /// never both, never neither (on the key-value backend replaying into an external sink:
  /// at-least-once, as every replay there — the edited payload may be pushed twice, the
  /// original is never pushed once an edit was decided, and a record stays until its push
  /// returned). Runs under the same rules as `filter`. Counted in ReplayReport::edited; the
  /// audit record holds the SHA-256 of the old and new payload of each edit (bounded by
  /// Options::audit_max_ids).
  std::function<std::optional<std::string>(const Entry&)> transform;
  /// Who asks, for the audit trail; empty (the default) = Options::actor.
  std::string actor;
  /// Decide and report, but move nothing.
  bool dry_run = false;
  /// Move corrupt entries met on the way to the corrupt list (default). When false they stay
  /// in place and are only reported.
  bool set_aside_corrupt = true;
  /// Record the id of every replayed entry in ReplayReport::replayed_ids (default: off,
  /// since a replay of millions would hold millions of ids).
  bool record_ids = false;
  /// Most entries replayed per second; 0 = as fast as the backend allows. Batches shrink to
  /// about a tenth of a second's worth so that the pace is even.
  double rate = 0;
  /// Called after every applied batch with the running totals (see ReplayProgress).
  std::function<void(const ReplayProgress&)> on_progress;
  /// Checked before every batch: once it is true the replay stops between batches and
  /// reports `cancelled`. Nothing is lost; everything reported as replayed was moved.
  const std::atomic<bool>* cancel = nullptr;

  /// Replay everything present at the start.
  static ReplayOptions all() { return {}; }
  /// Replay at most the `n` oldest entries.
  static ReplayOptions first(std::size_t n) {
    ReplayOptions o;
    o.limit = n;
    return o;
  }
  /// Replay exactly these entries.
  static ReplayOptions by_ids(std::vector<std::string> ids) {
    ReplayOptions o;
    o.ids = std::move(ids);
    return o;
  }
};

/// What a replay did. Counts are exact: every entry examined is in exactly one of
/// replayed, set_aside, or left in place.
struct ReplayReport {
  std::size_t examined = 0;   ///< entries looked at
  std::size_t replayed = 0;   ///< entries moved to the destination (would be, in a dry run)
  std::size_t set_aside = 0;  ///< corrupt entries moved to the corrupt list (would be, dry run)
  std::size_t batches = 0;    ///< atomic steps applied
  std::size_t conflicts = 0;  ///< batches redone because the list changed under them
  std::size_t edited = 0;     ///< replayed with a payload from ReplayOptions::transform
  bool dry_run = false;       ///< nothing was moved
  bool cancelled = false;     ///< ReplayOptions::cancel stopped the run between batches
  std::vector<std::string> replayed_ids;  ///< with ReplayOptions::record_ids
  std::vector<Skipped> skipped;           ///< corrupt / parked entries passed over, ids not found
};

/// The dead-letter queue front end over a Storage (see dlq/storage.hpp). `Storage` may be a
/// reference type (`DeadLetterQueue<MemoryStorage&>`) to share one storage.
template <class Storage>
class DeadLetterQueue {
  using storage_type = std::remove_cv_t<std::remove_reference_t<Storage>>;
  static_assert(detail::check_storage<storage_type>::value, "dlq: not a storage");

 public:
  /// Creates a queue front end over `storage`.
  explicit DeadLetterQueue(Storage storage = Storage(), Options options = {})
      : storage_(std::forward<Storage>(storage)),
        options_(std::move(options)),
        shared_(std::make_unique<shared_state>()) {
    if (options_.replay_batch_items == 0) options_.replay_batch_items = 1000;
    if (options_.replay_batch_bytes == 0) options_.replay_batch_bytes = std::size_t{1} << 20;
    if (options_.max_conflicts == 0) options_.max_conflicts = 100;
  }

  /// The storage, for backend-specific calls (e.g. MemoryStorage::source_pop).
  storage_type& storage() noexcept { return storage_; }

  /// The options this queue was created with.
  const Options& options() const noexcept { return options_; }

  /// The counters since this queue was created (see dlq::Counters). Cheap; thread-safe.
  Counters counters() const noexcept { return shared_->counters.snapshot(); }

  // --- workers ---------------------------------------------------------------------------

  /// Dead-letters one job: stores `payload` (any bytes; kept byte-exact) with `failure`
  /// under the source queue `queue`, and returns the new entry's id. One storage round trip
  /// (one more with the poison guard on; eviction, when the queue is over its retention
  /// length, happens after the entry is stored and never makes the send fail).
  /// @throws dlq::invalid_argument for an empty queue name, a negative attempt or a context
  ///         that is not a JSON object; dlq::queue_full_error when retention rejects the
  ///         entry; dlq::storage_error when the backend fails.
  std::string send_to_dlq(std::string_view queue, std::string_view payload,
                          const Failure& failure) {
    validate_queue(queue, "send_to_dlq");
    validate_failure(failure);
    return guarded([&] {
      const auto now = current_time();
      std::string id = make_id(failure, now);
      const poison_mark mark = count_poison(queue, payload, failure);
      std::string envelope;
      write(envelope, queue, payload, failure, id, now, mark);
      store(Record{queue, id, failure.job_id, envelope});
      after_send(queue, id, failure, mark);
      return id;
    });
  }

  /// The Python seed's signature: send_to_dlq(queue, payload, error, attempt, worker).
  std::string send_to_dlq(std::string_view queue, std::string_view payload, std::string error,
                          std::int64_t attempt = 1, std::string worker = {}) {
    Failure f;
    f.error = std::move(error);
    f.attempt = attempt;
    f.worker = std::move(worker);
    return send_to_dlq(queue, payload, f);
  }

  /// Dead-letters several jobs in one storage call (one round trip on Redis) and returns
  /// their ids in order. Validates every job, and checks rejecting retention, before storing
  /// any. With the poison guard on, each job's count costs one storage call before the push.
  /// @throws as send_to_dlq.
  std::vector<std::string> send_batch(const std::vector<FailedJob>& jobs) {
    for (const auto& job : jobs) {
      validate_queue(job.queue, "send_batch");
      validate_failure(job.failure);
    }
    if (jobs.empty()) return {};
    return guarded([&] {
      std::map<std::string_view, std::size_t> per_queue;
      for (const auto& job : jobs)
        ++per_queue[job.queue];
      for (const auto& [queue, n] : per_queue) {
        const Retention& r = retention_of(queue);
        if (r.max_length != 0 && r.overflow == Overflow::reject &&
            storage_.size(queue, ListKind::dead) + n > r.max_length)
          reject(queue, r);
      }
      const auto now = current_time();
      std::vector<std::string> ids;
      std::vector<poison_mark> marks;
      std::vector<std::string> envelopes(jobs.size());
      std::vector<Record> records;
      ids.reserve(jobs.size());
      marks.reserve(jobs.size());
      records.reserve(jobs.size());
      for (std::size_t i = 0; i < jobs.size(); ++i) {
        ids.push_back(make_id(jobs[i].failure, now));
        marks.push_back(count_poison(jobs[i].queue, jobs[i].payload, jobs[i].failure));
        write(envelopes[i], jobs[i].queue, jobs[i].payload, jobs[i].failure, ids.back(), now,
              marks.back());
      }
      for (std::size_t i = 0; i < jobs.size(); ++i)
        records.push_back(Record{jobs[i].queue, ids[i], jobs[i].failure.job_id, envelopes[i]});
      storage_.push_many(records);
      for (std::size_t i = 0; i < jobs.size(); ++i)
        after_send(jobs[i].queue, ids[i], jobs[i].failure, marks[i]);
      for (const auto& [queue, n] : per_queue) {
        const Retention& r = retention_of(queue);
        if (r.max_length != 0 && r.overflow == Overflow::evict_oldest) enforce_length(queue, r, 0);
      }
      return ids;
    });
  }

  // --- operators: inspect ----------------------------------------------------------------

  /// Number of entries in the queue's dead-letter list (the seed's dlq_length).
  std::size_t size(std::string_view queue) {
    validate_queue(queue, "size");
    return guarded([&] { return storage_.size(queue, ListKind::dead); });
  }

  /// Entries [start, start + count) of the dead-letter list, oldest first, without removing
  /// them (the seed's peek_dlq). Unreadable entries are included with ok() == false.
  std::vector<Entry> peek(std::string_view queue, std::size_t start = 0, std::size_t count = 10) {
    validate_queue(queue, "peek");
    return guarded([&] { return parse_all(storage_.range(queue, ListKind::dead, start, count)); });
  }

  /// The entry with this id, or nullopt.
  std::optional<Entry> get(std::string_view queue, std::string_view id) {
    validate_queue(queue, "get");
    return guarded([&]() -> std::optional<Entry> {
      auto raw = find_raw(queue, ListKind::dead, id);
      if (!raw) return std::nullopt;
      return parse_entry(std::move(*raw));
    });
  }

  /// Removes the entry with this id without replaying it. Returns false when there is none.
  bool remove(std::string_view queue, std::string_view id) {
    validate_queue(queue, "remove");
    const bool removed = guarded([&] {
      for (int attempt = 0; attempt < 3; ++attempt) {
        auto raw = find_raw(queue, ListKind::dead, id);
        if (!raw) return false;
        if (storage_.remove(queue, ListKind::dead, id, *raw)) return true;
      }
      return false;
    });
    audit_simple("remove", queue, {{"removed", removed ? 1 : 0}}, {std::string(id)},
                 removed ? "ok" : "not found");
    return removed;
  }

  /// Deletes every entry of the queue's dead-letter list; returns exactly how many were
  /// deleted (one atomic step).
  std::size_t purge(std::string_view queue) {
    validate_queue(queue, "purge");
    const std::size_t n = guarded([&] { return storage_.purge(queue, ListKind::dead); });
    audit_simple("purge", queue, {{"purged", n}});
    return n;
  }

  /// Dead-letter depth of each named queue, read in one storage call (the seed's
  /// dlq_summary).
  std::map<std::string, std::size_t> summary(const std::vector<std::string>& queues) {
    for (const auto& q : queues)
      validate_queue(q, "summary");
    return guarded([&] {
      const auto sizes = storage_.sizes(queues);
      std::map<std::string, std::size_t> out;
      for (std::size_t i = 0; i < queues.size() && i < sizes.size(); ++i)
        out[queues[i]] = sizes[i];
      return out;
    });
  }

  /// Dead-letter depth of every queue that has dead-letter or corrupt entries.
  std::map<std::string, std::size_t> summary() { return summary(queues()); }

  /// Names of the queues that have dead-letter or corrupt entries, sorted.
  std::vector<std::string> queues() {
    return guarded([&] {
      auto names = storage_.queues();
      std::sort(names.begin(), names.end());
      return names;
    });
  }

  /// Entries [start, start + count) of the queue's corrupt list (set aside by replay).
  std::vector<Entry> corrupt(std::string_view queue, std::size_t start = 0,
                             std::size_t count = 10) {
    validate_queue(queue, "corrupt");
    return guarded(
        [&] { return parse_all(storage_.range(queue, ListKind::corrupt, start, count)); });
  }

  /// Number of items in the queue's corrupt list.
  std::size_t corrupt_size(std::string_view queue) {
    validate_queue(queue, "corrupt_size");
    return guarded([&] { return storage_.size(queue, ListKind::corrupt); });
  }

  /// Deletes the queue's corrupt list; returns how many items it had.
  std::size_t purge_corrupt(std::string_view queue) {
    validate_queue(queue, "purge_corrupt");
    const std::size_t n = guarded([&] { return storage_.purge(queue, ListKind::corrupt); });
    audit_simple("purge_corrupt", queue, {{"purged", n}});
    return n;
  }

  // --- operators: replay -----------------------------------------------------------------

  /// Replays entries of `queue` as `options` say (see the file comment for the semantics).
  /// @throws dlq::invalid_argument for an empty queue name; dlq::storage_error when the
  ///         backend fails (batches applied before the failure stay applied, nothing is
  ///         lost); dlq::conflict_error when other processes keep changing the same entries.
  ReplayReport replay(std::string_view queue, const ReplayOptions& options = {}) {
    validate_queue(queue, "replay");
    return guarded([&] {
      replay_run run(*this, queue, options);
      return run.execute_audited(options.transform ? "replay_edited" : "replay");
    });
  }

  /// Replays every entry present now back to its source queue (the seed's replay_all).
  ReplayReport replay_all(std::string_view queue) { return replay(queue, ReplayOptions::all()); }

  /// Replays the oldest readable entry and returns it, or nullopt when there is none (the
  /// seed's replay_one). Corrupt entries in front of it are set aside on the way.
  std::optional<Entry> replay_one(std::string_view queue) {
    validate_queue(queue, "replay_one");
    return guarded([&]() -> std::optional<Entry> {
      ReplayOptions o = ReplayOptions::first(1);
      replay_run run(*this, queue, o);
      run.keep_entries = true;
      ReplayReport report = run.execute_audited("replay");
      if (report.replayed == 0 || run.entries.empty()) return std::nullopt;
      return std::move(run.entries.front());
    });
  }

  /// Replays the entries with these ids, wherever they are in the list.
  ReplayReport replay_ids(std::string_view queue, std::vector<std::string> ids) {
    return replay(queue, ReplayOptions::by_ids(std::move(ids)));
  }

  /// Finishes replays of `queue` that were interrupted (a replayer killed mid-way), where the
  /// backend can leave such state; returns the number of items it fixed. A no-op on backends
  /// whose replay steps are atomic.
  std::size_t recover(std::string_view queue) {
    validate_queue(queue, "recover");
    if constexpr (detail::has_recover<storage_type>::value) {
      const std::size_t n =
          guarded([&] { return static_cast<std::size_t>(storage_.recover(queue)); });
      audit_simple("recover", queue, {{"fixed", n}});
      return n;
    } else {
      return 0;
    }
  }

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
                    std::size_t max_examined = 0) {
    validate_queue(queue, "search");
    return guarded([&] {
      return search_page(storage_, queue, filter, continuation, limit, current_time(),
                         max_examined);
    });
  }

  /// Deletes the entries `options` matches, in atomic batches (see dlq/operations.hpp);
  /// every deletion is counted and emitted (EventKind::discarded); one audit record.
  /// @throws dlq::invalid_argument for an empty queue name; dlq::storage_error when the
  ///         backend fails (batches applied before stay applied and are in the audit
  ///         record); dlq::conflict_error when other clients keep changing the same entries.
  DiscardReport discard(std::string_view queue, const DiscardOptions& options = {}) {
    validate_queue(queue, "discard");
    return guarded([&] { return ops::discard(*this, queue, options); });
  }

  /// Replays the entry `id` with `new_payload` instead of its stored payload, in one atomic
  /// step (see ReplayOptions::transform); a parked entry is replayed too. The audit record
  /// ("replay_edited") holds the SHA-256 of the old and new payload. Returns the report:
  /// replayed == 1 on success, else the id is in skipped (not_found, or corrupt).
  /// @throws as replay().
  ReplayReport replay_edited(std::string_view queue, std::string_view id, std::string new_payload,
                             std::string actor = {}, std::string to_queue = {}) {
    validate_queue(queue, "replay_edited");
    ReplayOptions o = ReplayOptions::by_ids({std::string(id)});
    o.actor = std::move(actor);
    o.to_queue = std::move(to_queue);
    o.transform = [&new_payload](const Entry&) -> std::optional<std::string> {
      return new_payload;
    };
    return guarded([&] {
      replay_run run(*this, queue, o);
      return run.execute_audited("replay_edited");
    });
  }

  /// The queue's audit records made at or after `since` (by Options::clock when written),
  /// oldest first, at most `limit` (0 = 1000). Empty on a storage without an audit trail.
  /// @throws dlq::invalid_argument for an empty queue name; dlq::storage_error.
  std::vector<AuditRecord> audit(std::string_view queue,
                                 std::chrono::system_clock::time_point since = {},
                                 std::size_t limit = 1000) {
    validate_queue(queue, "audit");
    if (limit == 0) limit = 1000;
    return guarded([&] { return ops::read(*this, queue, since, limit); });
  }

  // --- retention -------------------------------------------------------------------------

  /// Applies the queue's retention now: evicts entries beyond Retention::max_length and
  /// entries older than Retention::max_age, oldest first, in bounded atomic batches. Every
  /// eviction is counted and reported as an event.
  TrimReport trim(std::string_view queue) {
    validate_queue(queue, "trim");
    const TrimReport done = guarded([&] {
      TrimReport report;
      const Retention& r = retention_of(queue);
      if (r.max_length != 0) report.evicted_for_length = enforce_length(queue, r, 0);
      if (r.max_age.count() > 0) report.evicted_for_age = enforce_age(queue, r);
      return report;
    });
    if (done.evicted() != 0)  // a timer's empty runs would drown the trail
      audit_simple("trim", queue,
                   {{"evicted_for_length", done.evicted_for_length},
                    {"evicted_for_age", done.evicted_for_age}});
    return done;
  }

  /// trim() on every queue that has entries; returns the totals.
  TrimReport trim() {
    TrimReport total;
    for (const auto& q : queues()) {
      const TrimReport r = trim(q);
      total.evicted_for_length += r.evicted_for_length;
      total.evicted_for_age += r.evicted_for_age;
    }
    return total;
  }

 private:
  using ops = detail::operations<DeadLetterQueue>;
  friend struct detail::operations<DeadLetterQueue>;

  // One audit record for a simple operation (no filter), written after it.
  void audit_simple(std::string_view operation, std::string_view queue,
                    nlohmann::ordered_json counts, const std::vector<std::string>& ids = {},
                    std::string outcome = "ok") {
    AuditRecord r = ops::record(*this, operation, queue, {});
    r.counts = std::move(counts);
    ops::set_ids(*this, r, ids);
    r.outcome = std::move(outcome);
    ops::audit(*this, r);
  }

  // One replay run: the state the decider needs between batches.
  struct replay_run {
    replay_run(DeadLetterQueue& q, std::string_view queue_name, const ReplayOptions& o)
        : self(q),
          queue(queue_name),
          opts(o),
          destination(o.to_queue.empty() ? queue_name : o.to_queue) {
      if (!opts.to_queue.empty()) validate_queue(opts.to_queue, "replay (to_queue)");
      for (const auto& id : opts.ids)
        ids_left.insert(id);
      by_id = !opts.ids.empty();
      limit_left = opts.limit == 0 ? std::numeric_limits<std::size_t>::max() : opts.limit;
      filtered = !matcher.matches_all() || static_cast<bool>(opts.filter);
      need_ids = opts.record_ids || static_cast<bool>(self.options_.on_event) ||
                 detail::has_audit<storage_type>::value;
    }

    // Runs the replay and writes its audit record (also when it fails: what was applied
    // before the failure stays applied and is recorded).
    ReplayReport execute_audited(std::string_view operation) {
      AuditRecord rec = ops::record(self, operation, queue, opts.actor);
      rec.filter = opts.describe();
      if (opts.filter) rec.filter["predicate"] = true;
      if (opts.limit != 0) rec.detail["limit"] = opts.limit;
      rec.detail["destination"] = std::string(destination);
      auto finish = [&](const ReplayReport& r, std::string outcome) {
        rec.counts = {{"examined", r.examined},   {"replayed", r.replayed},
                      {"set_aside", r.set_aside}, {"skipped", r.skipped.size()},
                      {"edited", r.edited},       {"batches", r.batches}};
        rec.outcome = std::move(outcome);
        rec.ids = std::move(audit_ids.ids);
        rec.ids_omitted = audit_ids.omitted;
        if (!edits.empty()) rec.detail["edits"] = std::move(edits);
        ops::audit(self, rec);
      };
      try {
        ReplayReport r = execute();
        finish(r, r.cancelled ? "cancelled" : r.dry_run ? "dry_run" : "ok");
        return r;
      } catch (const std::exception& e) {
        finish(report, std::string("failed: ") + e.what());
        throw;
      }
    }

    struct pending_item {
      Action action;        // what this batch does with it (dry runs: what it would do)
      std::string id;       // filled when it will be reported
      SkipReason reason{};  // for skipped items
      std::string detail;
      bool skipped = false;
    };
    // An edited item of the current step (index into `pending`) and its payload hashes
    // (empty once the audit record has no room for more).
    struct edit_note {
      std::size_t index;
      std::string old_sha, new_sha;
    };

    ReplayReport execute() {
      report.dry_run = opts.dry_run;
      std::size_t budget = self.storage_.size(queue, ListKind::dead);  // the snapshot bound
      typename storage_type::replay_cursor cursor{};
      std::size_t consecutive_conflicts = 0;
      std::size_t size_at_conflict = budget;
      // Batches start at one entry and grow (x4 a step) towards the item and byte targets,
      // so that the first batch cannot be huge before the entry size is known.
      std::size_t window = 1;
      std::size_t window_cap = std::numeric_limits<std::size_t>::max();
      if (opts.rate > 0)  // about a tenth of a second's worth of entries per batch
        window_cap = static_cast<std::size_t>(std::max(1.0, opts.rate / 10));

      const auto started = self.current_time();
      while (budget > 0 && limit_left > 0 && !(by_id && ids_left.empty())) {
        if (opts.cancel && opts.cancel->load()) {
          report.cancelled = true;
          break;
        }
        pending.clear();
        step_entries.clear();
        step_notes.clear();
        step_limit_used = 0;
        step_bytes = 0;
        const std::size_t n = std::min({window, budget, window_cap});
        auto decider = [this](std::string_view raw, Decision& d) { decide(raw, d); };
        const StepResult step = self.storage_.replay_step(queue, cursor, n, Decider(decider));
        if (step.conflict) {
          on_conflict(consecutive_conflicts, size_at_conflict);
          continue;
        }
        consecutive_conflicts = 0;
        if (step.examined == 0) break;
        commit_step(step.examined);
        budget -= std::min(budget, step.examined);
        if (opts.on_progress)
          opts.on_progress({report.examined, report.replayed, report.set_aside, budget});
        if (opts.rate > 0 && report.replayed > 0) pace(started);
        const std::uint64_t average = std::max<std::uint64_t>(1, step_bytes / step.examined);
        const auto by_bytes = static_cast<std::size_t>(
            std::max<std::uint64_t>(1, self.options_.replay_batch_bytes / average));
        window = std::min({by_bytes, window * 4, self.options_.replay_batch_items});
      }
      for (const auto& id : ids_left)
        report.skipped.push_back({id, SkipReason::not_found, "no entry with this id"});
      return std::move(report);
    }

    // Keeps the run at ReplayOptions::rate: the n-th entry is not replayed before
    // started + n / rate.
    void pace(std::chrono::system_clock::time_point started) {
      const auto due =
          started +
          std::chrono::round<std::chrono::system_clock::duration>(
              std::chrono::duration<double>(static_cast<double>(report.replayed) / opts.rate));
      const auto now = self.current_time();
      if (due > now) self.wait(due - now);
    }

    // The list changed under a batch: someone else removed entries where it was working.
    // Back off (so that a second replayer of the same queue can finish its batches) and try
    // again; give up only when the list stops shrinking — a change that is not progress.
    void on_conflict(std::size_t& consecutive, std::size_t& size_before) {
      ++report.conflicts;
      self.shared_->counters.conflicts.fetch_add(1, std::memory_order_relaxed);
      const std::size_t size_now = self.storage_.size(queue, ListKind::dead);
      consecutive = size_now < size_before ? 1 : consecutive + 1;
      size_before = size_now;
      if (consecutive >= self.options_.max_conflicts)
        throw conflict_error(detail::message(
            "replay", "queue '" + std::string(queue) + "'",
            "the dead-letter list kept changing under the replay (" + std::to_string(consecutive) +
                " batches in a row) without getting shorter",
            "another process is rewriting the same entries; nothing was lost, run the replay "
            "again when it is done (" +
                std::to_string(report.replayed) + " entries were replayed before this)"));
      self.back_off(consecutive, report.conflicts);
    }

    void decide(std::string_view raw, Decision& d) {
      step_bytes += raw.size();
      if (step_limit_used >= limit_left) return;  // the limit is reached: leave the rest
      detail::envelope_view view;
      std::string_view payload;
      problem.clear();
      const bool readable = detail::view_envelope(raw, view);
      if (!readable) problem = unreadable_reason(raw);
      if (!readable || !detail::cut_payload(view, scratch, payload, problem)) {
        std::string id = readable ? detail::entry_id(view, raw) : detail::derived_id(raw);
        if (by_id && !take_id(id)) return;  // not asked for: leave it alone
        pending_item item{Action::keep, std::move(id), SkipReason::corrupt, problem, true};
        if (opts.set_aside_corrupt) {
          item.action = Action::set_aside;
          if (!opts.dry_run) d.action = Action::set_aside;
        }
        pending.push_back(std::move(item));
        return;
      }
      std::string id;
      if (by_id) {
        id = detail::entry_id(view, raw);
        if (!take_id(id)) return;
      } else {
        if (view.parked == "true") {
          pending.push_back({Action::keep, detail::entry_id(view, raw), SkipReason::parked,
                             "parked by the poison-loop guard; replay it by id", true});
          return;
        }
        if (filtered && !matches(view, raw)) return;
        if (need_ids || keep_entries) id = detail::entry_id(view, raw);
      }
      ++step_limit_used;
      if (keep_entries) step_entries.push_back(parse_entry(std::string(raw)));
      pending.push_back({Action::replay, std::move(id), SkipReason{}, {}, false});
      if (opts.transform) {
        if (auto edited_payload = opts.transform(parse_entry(std::string(raw)))) {
          edit_note note{pending.size() - 1, {}, {}};
          if (audit_ids.ids.size() + step_notes.size() < self.options_.audit_max_ids) {
            note.old_sha = detail::sha256_hex(payload);
            note.new_sha = detail::sha256_hex(*edited_payload);
          }
          step_notes.push_back(std::move(note));
          edited = std::move(*edited_payload);  // the storage copies it before the next call
          payload = edited;
        }
      }
      if (opts.dry_run) return;
      d.action = Action::replay;
      d.destination = destination;
      d.payload = payload;
      d.identity = identity_of(view);
    }

    // The stored id's value span (quotes included) when it is a canonical UUID — what dlq
    // writes (UUIDv7, 62 random bits), so no other item carries it by chance at the same
    // offset; else empty: the storage compares the whole item (see Decision::identity).
    // Not when a storage keyed by job id used the job id as the entry id: re-sending the
    // job rewrites the entry under the same id.
    static std::string_view identity_of(const detail::envelope_view& view) {
      if constexpr (detail::keyed_by_job_id<storage_type>::value) {
        if (!view.job_id.empty()) return {};
      }
      const std::string_view v = view.id;
      const bool quoted = v.size() == 38 && v.front() == '"' && v.back() == '"';
      return quoted && detail::is_canonical_uuid(v.substr(1, 36)) ? v : std::string_view{};
    }

    bool matches(const detail::envelope_view& view, std::string_view raw) {
      if (!matcher.matches(raw, true, view, detail::entry_id(view, raw))) return false;
      if (opts.filter && !opts.filter(parse_entry(std::string(raw)))) return false;
      return true;
    }

    // An id asked for and not yet taken (in this or an earlier batch).
    bool take_id(const std::string& id) {
      if (ids_left.count(id) == 0) return false;
      for (const auto& p : pending)
        if (p.id == id) return false;  // a byte-identical twin in the same batch
      return true;
    }

    void commit_step(std::size_t examined) {
      report.examined += examined;
      ++report.batches;
      auto& counters = self.shared_->counters;
      std::size_t next_note = 0;
      for (std::size_t index = 0; index < pending.size(); ++index) {
        auto& p = pending[index];
        const edit_note* note = nullptr;
        if (next_note < step_notes.size() && step_notes[next_note].index == index)
          note = &step_notes[next_note++];
        if (by_id) ids_left.erase(p.id);
        if (p.action == Action::replay) {
          ++report.replayed;
          --limit_left;
          audit_ids.add(p.id);
          if (note) {
            ++report.edited;
            if (!note->old_sha.empty())
              edits.push_back(
                  {{"id", p.id}, {"old_sha256", note->old_sha}, {"new_sha256", note->new_sha}});
          }
          if (!opts.dry_run) {
            counters.replayed.fetch_add(1, std::memory_order_relaxed);
            self.emit(EventKind::replayed, queue, p.id, destination);
          }
          if (opts.record_ids) report.replayed_ids.push_back(p.id);
        } else if (p.action == Action::set_aside) {
          ++report.set_aside;
        }
        if (p.skipped && p.reason == SkipReason::corrupt) {
          counters.corrupt.fetch_add(1, std::memory_order_relaxed);
          self.emit(EventKind::corrupt, queue, p.id, p.detail);
        }
        if (p.skipped) report.skipped.push_back({std::move(p.id), p.reason, std::move(p.detail)});
      }
      for (auto& e : step_entries)
        entries.push_back(std::move(e));
      step_entries.clear();
    }

    DeadLetterQueue& self;
    std::string_view queue;
    const ReplayOptions& opts;
    std::string_view destination;
    std::unordered_set<std::string> ids_left;
    bool by_id = false;
    bool filtered = false;
    bool need_ids = false;
    std::size_t limit_left = 0;
    std::size_t step_limit_used = 0;
    std::uint64_t step_bytes = 0;
    std::vector<pending_item> pending;
    std::string scratch;
    std::string problem;
    ReplayReport report;
    bool keep_entries = false;
    std::vector<Entry> step_entries;
    std::vector<Entry> entries;
    detail::filter_matcher matcher{opts, self.current_time()};
    std::string edited;                 // the transformed payload of the item being decided
    std::vector<edit_note> step_notes;  // this step's edits
    detail::audit_ids audit_ids{self.options_.audit_max_ids, {}, 0};
    nlohmann::ordered_json edits = nlohmann::ordered_json::array();
  };

  // What the poison guard decided for a new entry.
  struct poison_mark {
    std::int64_t count = 0;  // 0 = guard off
    bool parked = false;
  };

  // State that must not move with the front end (atomics, a mutex).
  struct shared_state {
    detail::live_counters counters;
    std::mutex poison_mutex;
    detail::counter_map poison_counts;  // where the storage keeps no counts
  };

  static void validate_queue(std::string_view queue, const char* where) {
    if (queue.empty())
      throw invalid_argument(detail::message("queue", where, "the queue name is empty",
                                             "pass the name of the source queue"));
    if (queue.find('\0') != std::string_view::npos)
      throw invalid_argument(detail::message("queue", where, "the queue name contains a NUL byte",
                                             "use a printable queue name"));
  }

  static void validate_failure(const Failure& f) {
    if (f.attempt < 0)
      throw invalid_argument(detail::message(
          "send", "send_to_dlq", "attempt is negative (" + std::to_string(f.attempt) + ")",
          "pass the number of attempts made (1 or more)"));
    if (!f.context.is_null() && !f.context.is_object())
      throw invalid_argument(detail::message(
          "send", "send_to_dlq", std::string("context is a JSON ") + f.context.type_name(),
          "pass a JSON object of fields, or leave it null"));
  }

  static std::string unreadable_reason(std::string_view raw) {
    return detail::json::skip_value(raw.data(), raw.data() + raw.size(),
                                    detail::json::mode::lenient) != nullptr
               ? "not a JSON object"
               : "not valid JSON";
  }

  // Runs `f`, counting storage errors by type before they propagate.
  template <class F>
  decltype(auto) guarded(F&& f) {
    auto& c = shared_->counters;
    constexpr auto r = std::memory_order_relaxed;
    try {
      return f();
    } catch (const timeout_error&) {
      c.timeout_errors.fetch_add(1, r);
      throw;
    } catch (const connection_error&) {
      c.connection_errors.fetch_add(1, r);
      throw;
    } catch (const reply_error&) {
      c.reply_errors.fetch_add(1, r);
      throw;
    } catch (const conflict_error&) {
      throw;  // counted per conflicting batch
    } catch (const storage_error&) {
      c.other_storage_errors.fetch_add(1, r);
      throw;
    }
  }

  // Calls the user's hook; an exception it throws is counted and logged, never propagated.
  void emit(EventKind kind, std::string_view queue, std::string_view id,
            std::string_view detail) noexcept {
    if (!options_.on_event) return;
    try {
      options_.on_event(Event{kind, queue, id, detail});
    } catch (const std::exception& e) {
      shared_->counters.hook_errors.fetch_add(1, std::memory_order_relaxed);
      log(LogLevel::warning,
          std::string("[dlq.hooks] on_event threw: ") + e.what() + "; the operation went on");
    } catch (...) {
      shared_->counters.hook_errors.fetch_add(1, std::memory_order_relaxed);
      log(LogLevel::warning,
          "[dlq.hooks] on_event threw a non-std exception; the operation went on");
    }
  }

  void log(LogLevel level, const std::string& message) noexcept {
    if (!options_.log) return;
    try {
      options_.log(level, message);
    } catch (...) {
      shared_->counters.hook_errors.fetch_add(1, std::memory_order_relaxed);
    }
  }

  std::chrono::system_clock::time_point current_time() const {
    return options_.clock ? options_.clock() : std::chrono::system_clock::now();
  }

  template <class Rep, class Period>
  void wait(std::chrono::duration<Rep, Period> d) const {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d);
    if (options_.sleep) {
      options_.sleep(ns);
    } else {
      std::this_thread::sleep_for(ns);
    }
  }

  // Exponential back-off with a little jitter after the n-th conflict in a row.
  void back_off(std::size_t consecutive, std::size_t salt) const {
    const auto base = std::chrono::microseconds(50) * (1u << std::min<std::size_t>(consecutive, 9));
    const auto jitter = std::chrono::microseconds(detail::fnv1a64(std::to_string(salt)) % 50);
    wait(std::min<std::chrono::microseconds>(base, std::chrono::milliseconds(20)) + jitter);
  }

  const Retention& retention_of(std::string_view queue) const {
    const auto it = options_.retention_for.find(queue);
    return it == options_.retention_for.end() ? options_.retention : it->second;
  }

  [[noreturn]] void reject(std::string_view queue, const Retention& r) {
    shared_->counters.rejected.fetch_add(1, std::memory_order_relaxed);
    const std::string message = detail::message(
        "retention", "queue '" + std::string(queue) + "'",
        "the dead-letter queue is full (max_length " + std::to_string(r.max_length) +
            ", overflow = reject); the entry was not stored",
        "replay or purge entries, or raise Retention::max_length");
    log(LogLevel::warning, message);
    throw queue_full_error(message);
  }

  // Stores one record under the queue's retention.
  void store(const Record& record) {
    const Retention& r = retention_of(record.queue);
    if (r.max_length != 0 && r.overflow == Overflow::reject) {
      bool stored = false;
      if constexpr (detail::has_push_bounded<storage_type>::value) {
        stored = storage_.push_bounded(record, r.max_length);
      } else {  // approximate under concurrent senders: check, then push
        stored = storage_.size(record.queue, ListKind::dead) < r.max_length;
        if (stored) storage_.push(record);
      }
      if (!stored) reject(record.queue, r);
      return;
    }
    std::size_t length = 0;
    if constexpr (detail::push_returns_size<storage_type>::value) {
      length = static_cast<std::size_t>(storage_.push(record));
    } else {
      storage_.push(record);
    }
    if (r.max_length != 0) enforce_length(record.queue, r, length);
  }

  // After a successful push: counters and events. Never throws.
  void after_send(std::string_view queue, std::string_view id, const Failure& f,
                  const poison_mark& mark) noexcept {
    auto& c = shared_->counters;
    c.sent.fetch_add(1, std::memory_order_relaxed);
    emit(EventKind::dead_lettered, queue, id, f.error);
    if (mark.parked) {
      c.parked.fetch_add(1, std::memory_order_relaxed);
      emit(EventKind::parked, queue, id, std::to_string(mark.count));
    }
  }

  poison_mark count_poison(std::string_view queue, std::string_view payload, const Failure& f) {
    const PoisonGuard& g = options_.poison_guard;
    if (g.park_after <= 0) return {};
    std::string key;
    if (!f.job_id.empty()) {
      key = "job:" + f.job_id;
    } else {
      key = "payload:";
      detail::append_hex(key, detail::fnv1a64(payload), 16);
    }
    poison_mark mark;
    if constexpr (detail::has_bump_count<storage_type>::value) {
      mark.count = static_cast<std::int64_t>(storage_.bump_count(queue, key, g.remember_for));
    } else {
      std::string id(queue);
      id.push_back('\0');
      id += key;
      std::lock_guard<std::mutex> lock(shared_->poison_mutex);
      mark.count = shared_->poison_counts.bump(id, g.remember_for);
    }
    mark.parked = mark.count > g.park_after;
    return mark;
  }

  // Evicts the oldest entries beyond max_length. `known_length` is the list length right
  // after a push (0 = unknown: read it). Runs after the entry is stored, so a failure here
  // is logged and counted, never thrown at the sender: the next send or trim() retries.
  std::size_t enforce_length(std::string_view queue, const Retention& r, std::size_t known_length) {
    try {
      const std::size_t length =
          known_length != 0 ? known_length : storage_.size(queue, ListKind::dead);
      if (length <= r.max_length) return 0;
      std::size_t left = length - r.max_length;
      return sweep(queue, "max_length", [&left](std::string_view, bool& stop) {
        if (left == 0) {
          stop = true;
          return false;
        }
        --left;
        return true;
      });
    } catch (const storage_error& e) {
      log(LogLevel::error, std::string("[dlq.retention] queue '") + std::string(queue) +
                               "': eviction failed: " + e.what() + "; trim() will retry");
      return 0;
    }
  }

  // Evicts entries older than max_age from the oldest end, up to the first newer one.
  std::size_t enforce_age(std::string_view queue, const Retention& r) {
    const auto cutoff = current_time() - r.max_age;
    return sweep(queue, "max_age", [&cutoff](std::string_view raw, bool& stop) {
      detail::envelope_view view;
      if (!detail::view_envelope(raw, view)) return false;  // unreadable: keep, go on
      const auto t = detail::iso_time::parse(detail::string_field(view.dead_lettered_at));
      if (!t) return false;  // no readable time: keep, go on
      if (*t >= cutoff) {
        stop = true;
        return false;
      }
      return true;
    });
  }

  // Walks the dead-letter list from its oldest end in bounded atomic batches, deleting the
  // entries `evict(raw, stop)` selects, until it sets `stop` or the list ends. Reports each
  // eviction; returns how many there were.
  template <class Evict>
  std::size_t sweep(std::string_view queue, std::string_view reason, Evict&& evict) {
    typename storage_type::replay_cursor cursor{};
    std::size_t evicted = 0;
    std::size_t conflicts = 0;
    std::size_t window = 16;
    bool stop = false;
    std::vector<std::string> ids;
    while (!stop) {
      ids.clear();
      bool step_stop = false;
      std::uint64_t bytes = 0;
      auto decider = [&](std::string_view raw, Decision& d) {
        bytes += raw.size();
        if (step_stop || !evict(raw, step_stop)) return;
        d.action = Action::discard;
        detail::envelope_view view;
        ids.push_back(detail::view_envelope(raw, view) ? detail::entry_id(view, raw)
                                                       : detail::derived_id(raw));
      };
      const StepResult step = storage_.replay_step(queue, cursor, window, Decider(decider));
      if (step.conflict) {
        shared_->counters.conflicts.fetch_add(1, std::memory_order_relaxed);
        if (++conflicts >= options_.max_conflicts)
          throw conflict_error(detail::message("retention", "queue '" + std::string(queue) + "'",
                                               "the list kept changing under the trim",
                                               "nothing was lost; run trim() again"));
        back_off(conflicts, conflicts);
        continue;
      }
      conflicts = 0;
      if (step.examined == 0) break;
      stop = step_stop;
      evicted += ids.size();
      shared_->counters.evicted.fetch_add(ids.size(), std::memory_order_relaxed);
      for (const auto& id : ids)
        emit(EventKind::evicted, queue, id, reason);
      const std::uint64_t average = std::max<std::uint64_t>(1, bytes / step.examined);
      window = std::min<std::size_t>({static_cast<std::size_t>(std::max<std::uint64_t>(
                                          1, options_.replay_batch_bytes / average)),
                                      window * 4, options_.replay_batch_items});
    }
    if (evicted != 0)
      log(LogLevel::info, "[dlq.retention] queue '" + std::string(queue) + "': evicted " +
                              std::to_string(evicted) + " entries (" + std::string(reason) + ")");
    return evicted;
  }

  std::string make_id(const Failure& f, std::chrono::system_clock::time_point now) {
    if constexpr (detail::keyed_by_job_id<storage_type>::value) {
      if (!f.job_id.empty()) return f.job_id;
    }
    static detail::id_generator generator;  // process-wide: ids increase across instances
    return generator.next(now);
  }

  void write(std::string& out, std::string_view queue, std::string_view payload, const Failure& f,
             std::string_view id, std::chrono::system_clock::time_point now,
             const poison_mark& mark) const {
    detail::envelope_input in;
    in.queue = queue;
    in.payload = payload;
    in.failure = &f;
    in.worker = f.worker.empty() ? std::string_view(options_.worker) : std::string_view(f.worker);
    in.id = id;
    in.time = now;
    in.dead_letter_count = mark.count;
    in.parked = mark.parked;
    detail::write_envelope(out, in);
  }

  static std::vector<Entry> parse_all(std::vector<std::string> raws) {
    std::vector<Entry> out;
    out.reserve(raws.size());
    for (auto& raw : raws)
      out.push_back(parse_entry(std::move(raw)));
    return out;
  }

  std::optional<std::string> find_raw(std::string_view queue, ListKind kind, std::string_view id) {
    if constexpr (detail::has_find<storage_type>::value) {
      return storage_.find(queue, kind, id);
    } else {
      constexpr std::size_t page = 512;
      // Ids of plain characters appear verbatim in the stored bytes: a cheap pre-check.
      const bool plain = id.rfind("raw-", 0) != 0 && std::all_of(id.begin(), id.end(), [](char c) {
                           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                                  (c >= 'A' && c <= 'Z') || c == '-' || c == '_' || c == '.';
                         });
      // Pages are read by offset while other clients may remove entries (a replay, a trim):
      // each page after the first is read from the last item of the page before, and if that
      // item is not there the list moved left under the scan — the scan finds that item
      // again (a page back) and goes on after it, so no entry slides past unseen. If it was
      // removed itself, the scan starts over (at most 3 times; then "not found").
      std::size_t start = 0;
      std::optional<std::string> last;  // the last item of the previous page
      int restarts = 0;
      for (;;) {
        const bool anchored = last.has_value();
        auto raws =
            storage_.range(queue, kind, anchored ? start - 1 : start, anchored ? page + 1 : page);
        if (anchored && (raws.empty() || raws.front() != *last)) {
          const std::size_t back = start - 1 > page ? start - 1 - page : 0;
          const auto before = storage_.range(queue, kind, back, start - back);
          const auto it = std::find(before.rbegin(), before.rend(), *last);
          if (it != before.rend()) {
            start = back + static_cast<std::size_t>(before.rend() - it);  // just after it
          } else if (++restarts <= 3) {
            start = 0;
            last.reset();
          } else {
            return std::nullopt;
          }
          continue;
        }
        const std::size_t first = anchored ? 1 : 0;
        for (std::size_t i = first; i < raws.size(); ++i) {
          std::string& raw = raws[i];
          if (plain && raw.find(id) == std::string::npos) continue;  // cheap pre-check
          detail::envelope_view view;
          const std::string found = detail::view_envelope(raw, view) ? detail::entry_id(view, raw)
                                                                     : detail::derived_id(raw);
          if (found == id) return std::move(raw);
        }
        if (raws.size() - first < page) return std::nullopt;
        last = std::move(raws.back());
        start += page;
      }
    }
  }

  Storage storage_;
  Options options_;
  std::unique_ptr<shared_state> shared_;
};

/// Calls trim() on every queue of a DeadLetterQueue at a fixed interval on a background
/// thread, so that max_age is enforced even when no new failure arrives. Stops (and joins)
/// when destroyed. An error of one run is counted in the queue's counters, logged through
/// Options::log, and the next run tries again.
///
///     dlq::TrimTimer timer(dlq, std::chrono::minutes(1));
template <class Queue>
class TrimTimer {
 public:
  /// Starts trimming `queue` every `interval`; the first run is one interval from now.
  /// `queue` must outlive the timer.
  TrimTimer(Queue& queue, std::chrono::milliseconds interval)
      : queue_(queue), interval_(interval), thread_([this] { run(); }) {}

  TrimTimer(const TrimTimer&) = delete;
  TrimTimer& operator=(const TrimTimer&) = delete;

  ~TrimTimer() { stop(); }

  /// Stops the timer and waits for a run in progress to finish. Idempotent.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  /// Number of completed runs (for tests and health checks).
  std::size_t runs() const noexcept { return runs_.load(); }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, interval_, [this] { return stopping_; })) {
      lock.unlock();
      try {
        (void)queue_.trim();
      } catch (const std::exception& e) {  // counted by the queue; the next run retries
        if (const auto& log = queue_.options().log) {
          try {
            log(LogLevel::error, std::string("[dlq.retention] trim timer: ") + e.what() +
                                     "; retrying at the next interval");
          } catch (...) {
          }
        }
      }
      ++runs_;
      lock.lock();
    }
  }

  Queue& queue_;
  std::chrono::milliseconds interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::atomic<std::size_t> runs_{0};
  std::thread thread_;
};

template <class Queue>
TrimTimer(Queue&, std::chrono::milliseconds) -> TrimTimer<Queue>;

}  // namespace dlq

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file dead_letter_queue.hpp
/// dlq::DeadLetterQueue — the front end workers and operators call, and its send path.
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
/// The send path, the same for one job and for a batch: validate every job; check that the
/// jobs fit (Overflow::reject); prepare each envelope (id, poison count, JSON); push each
/// queue's jobs under its retention — Overflow::reject stores all of them or none,
/// Overflow::evict_oldest evicts the oldest beyond max_length atomically with the push where
/// the storage can (push_capped: every shipped storage), and every eviction is reported with
/// its id; count and report every entry stored. See dlq/replay.hpp for what a replay does.
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
  ///         outcome "failed: …").
  RemoveReport remove_ids(std::string_view queue, const std::vector<std::string>& ids,
                          std::string actor = {});

  /// Deletes every entry of the queue's dead-letter list; returns exactly how many were
  /// deleted (one atomic step).
  std::size_t purge(std::string_view queue);

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
  /// store that dlq refuses (dlq::queue_name_problem: a foreign key with a NUL byte) are left
  /// out; list_queues() counts them.
  std::vector<std::string> queues();

  /// The queue names found in the store, split into those dlq serves (what queues() returns)
  /// and those it refuses and every listing skips (see dlq/queue_names.hpp).
  QueueNames list_queues();

  /// Entries [start, start + count) of the queue's corrupt list (set aside by replay).
  std::vector<Entry> corrupt(std::string_view queue, std::size_t start = 0, std::size_t count = 10);

  /// Number of items in the queue's corrupt list.
  std::size_t corrupt_size(std::string_view queue);

  /// Deletes the queue's corrupt list; returns how many items it had.
  std::size_t purge_corrupt(std::string_view queue);

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
  /// whose replay steps are atomic.
  std::size_t recover(std::string_view queue);

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
  TrimReport trim(std::string_view queue);

  /// trim() on every queue that has entries; returns the totals.
  TrimReport trim();

 private:
  // Runs a replay and writes its audit record (also when it fails: what was applied before
  // the failure stays applied and is recorded).
  detail::replay_engine::result run_replay(std::string_view queue, const ReplayOptions& options,
                                           bool keep_replayed, std::string_view operation) {
    detail::storage_dead_list<storage_type> list(storage_, queue);
    detail::replay_engine engine(*core_, list, queue);
    constexpr bool audited = detail::has_audit<storage_type>::value;
    engine.collect_audit(audited);
    if constexpr (!audited) {
      return engine.run(options, keep_replayed);
    } else {
      AuditRecord rec = audit_record(operation, queue, options.actor);
      rec.filter = detail::audit_filter(options.describe(), core_->options.audit_max_ids);
      if (options.filter) rec.filter["filter"] = true;
      if (options.limit != 0) rec.detail["limit"] = options.limit;
      rec.detail["destination"] = options.to_queue.empty() ? std::string(queue) : options.to_queue;
      auto finish = [&](const detail::replay_engine::result& r, std::string outcome) {
        const ReplayReport& p = r.report;
        if (p.dry_run || p.replayed + p.set_aside == 0) return;  // no change, no record
        rec.counts = detail::object_of("examined", p.examined, "replayed", p.replayed, "set_aside",
                                       p.set_aside, "skipped", p.skipped.size(), "edited", p.edited,
                                       "batches", p.batches);
        rec.outcome = std::move(outcome);
        rec.ids = r.ids.ids;
        rec.ids_omitted = r.ids.omitted;
        if (!r.edits.empty()) rec.detail["edits"] = r.edits;
        detail::write_audit(*core_, storage_, rec);
      };
      try {
        auto r = engine.run(options, keep_replayed);
        finish(r, r.report.cancelled ? "cancelled" : "ok");
        return r;
      } catch (const std::exception& e) {
        finish(engine.partial(), std::string("failed: ") + e.what());
        throw;
      }
    }
  }

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
                    std::string outcome = "ok") {
    if constexpr (detail::has_audit<storage_type>::value) {
      AuditRecord r = audit_record(operation, queue, {});
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
    }
  }

  // The jobs of one queue within a send (in order of first use).
  struct queue_part {
    std::string_view queue;
    std::vector<std::size_t> jobs;  // indexes into the send's jobs
  };

  // The send path (see the file comment).
  std::vector<std::string> send(const detail::job_view* jobs, std::size_t n, const char* where) {
    for (std::size_t i = 0; i < n; ++i) {
      detail::queue_core::validate(jobs[i], where);
      detail::check_payload(jobs[i].queue, jobs[i].payload,
                            core_->options.payloads == Payloads::json_only);
    }
    if (n == 0) return {};
    return guarded([&] {
      std::vector<queue_part> parts;
      for (std::size_t i = 0; i < n; ++i) {
        auto it = std::find_if(parts.begin(), parts.end(),
                               [&](const queue_part& p) { return p.queue == jobs[i].queue; });
        if (it == parts.end()) it = parts.insert(parts.end(), queue_part{jobs[i].queue, {}});
        it->jobs.push_back(i);
      }
      for (const auto& part : parts)
        admit(part, parts.size() > 1, n == 1 ? &jobs[0] : nullptr);
      const auto now = core_->now();
      std::vector<detail::prepared_entry> entries;
      entries.reserve(n);
      for (std::size_t i = 0; i < n; ++i)
        entries.push_back(prepare(jobs[i], now));
      if (parts.size() > 1 && !any_retention(parts)) {
        push_all(entries);  // one storage call for the whole batch
      } else {
        for (const auto& part : parts)
          push_part(part, entries);
      }
      std::vector<std::string> ids;
      ids.reserve(n);
      for (auto& e : entries) {
        core_->after_send(e);
        ids.push_back(std::move(e.id));
      }
      return ids;
    });
  }

  bool any_retention(const std::vector<queue_part>& parts) const {
    return std::any_of(parts.begin(), parts.end(), [this](const queue_part& p) {
      return core_->retention_of(p.queue).max_length != 0;
    });
  }

  // Whether the storage can push `count` entries under Overflow::reject atomically.
  static constexpr bool bounded_atomically(std::size_t count) {
    return detail::has_push_bounded_many<storage_type>::value ||
           (count == 1 && detail::has_push_bounded<storage_type>::value);
  }

  // Retention before the push (Overflow::reject): a part that does not fit refuses the whole
  // send before anything is stored. Where the storage bounds the push atomically, the push
  // decides (this check runs only when the send spans several queues, so that one full queue
  // refuses the whole batch) — except that a single job (`single`) is also checked here when
  // the poison guard is on, so that a send refused by a full queue does not bump the job's
  // count (prepare bumps it before the push). A job already stored under its job id
  // (keyed_by_job_id) is a replacement, not growth: the push admits it.
  void admit(const queue_part& part, bool several_queues, const detail::job_view* single) {
    const Retention& r = core_->retention_of(part.queue);
    if (r.max_length == 0 || r.overflow != Overflow::reject) return;
    if (!several_queues && bounded_atomically(part.jobs.size())) {
      if (single == nullptr || core_->options.poison_guard.park_after <= 0) return;
      if (storage_.size(part.queue, ListKind::dead) < r.max_length) return;
      if constexpr (detail::keyed_by_job_id<storage_type>::value) {
        const std::string& job_id = single->failure->job_id;
        if (!job_id.empty() && find_raw(part.queue, ListKind::dead, job_id)) return;
      }
      core_->reject(part.queue, r);
    }
    if (storage_.size(part.queue, ListKind::dead) + part.jobs.size() > r.max_length)
      core_->reject(part.queue, r);
  }

  // The prepare step: id, poison count and envelope of one job.
  detail::prepared_entry prepare(const detail::job_view& job,
                                 std::chrono::system_clock::time_point now) {
    std::string id = detail::queue_core::make_id(*job.failure, now,
                                                 detail::keyed_by_job_id<storage_type>::value);
    return core_->prepare(job, now, std::move(id), count_poison(job));
  }

  detail::poison_mark count_poison(const detail::job_view& job) {
    const PoisonGuard& g = core_->options.poison_guard;
    if (g.park_after <= 0) return {};
    const std::string key = detail::queue_core::poison_key(job);
    if constexpr (detail::has_bump_count<storage_type>::value) {
      return core_->mark(
          static_cast<std::int64_t>(storage_.bump_count(job.queue, key, g.remember_for)));
    } else {
      return core_->mark(core_->bump_local_count(job.queue, key));
    }
  }

  void push_all(const std::vector<detail::prepared_entry>& entries) {
    std::vector<Record> records;
    records.reserve(entries.size());
    for (const auto& e : entries)
      records.push_back(e.record());
    storage_.push_many(records);
  }

  // Pushes one queue's part under the queue's retention: Overflow::reject pushes all or
  // nothing; Overflow::evict_oldest evicts the oldest beyond max_length — atomically with the
  // push where the storage has push_capped, else right after it (a sweep).
  void push_part(const queue_part& part, const std::vector<detail::prepared_entry>& entries) {
    std::vector<Record> records;
    records.reserve(part.jobs.size());
    for (std::size_t i : part.jobs)
      records.push_back(entries[i].record());
    const Retention& r = core_->retention_of(part.queue);
    if (r.max_length != 0 && r.overflow == Overflow::reject) {
      bool stored = true;
      if constexpr (detail::has_push_bounded_many<storage_type>::value) {
        stored = storage_.push_bounded(records, r.max_length);
      } else if constexpr (detail::has_push_bounded<storage_type>::value) {
        if (records.size() == 1) {
          stored = storage_.push_bounded(records.front(), r.max_length);
        } else {
          storage_.push_many(records);  // checked by admit(): approximate under races
        }
      } else {
        push_records(records);  // checked by admit(): approximate under races
      }
      if (!stored) core_->reject(part.queue, r);
      return;
    }
    if (r.max_length != 0) {  // Overflow::evict_oldest
      if constexpr (detail::has_push_capped<storage_type>::value) {
        const std::vector<std::string> evicted = storage_.push_capped(records, r.max_length);
        detail::report_evictions(*core_, part.queue, evicted, "max_length");
        detail::log_evictions(*core_, part.queue, evicted.size(), "max_length");
      } else {
        const std::size_t length = push_records(records);
        detail::storage_dead_list<storage_type> list(storage_, part.queue);
        detail::enforce_length(*core_, list, part.queue, r, length);
      }
      return;
    }
    push_records(records);
  }

  // push (one record) or push_many; returns the dead list's new length when the storage
  // says it (push returning a length), else 0.
  std::size_t push_records(const std::vector<Record>& records) {
    if (records.size() != 1) {
      storage_.push_many(records);
      return 0;
    }
    if constexpr (detail::push_returns_size<storage_type>::value) {
      return static_cast<std::size_t>(storage_.push(records.front()));
    } else {
      storage_.push(records.front());
      return 0;
    }
  }

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

  // remove and remove_ids (see remove_ids).
  RemoveReport remove_many(std::string_view queue, const std::vector<std::string>& ids,
                           std::string actor) {
    std::vector<std::string_view> wanted;  // each id once, in the order given
    {
      std::set<std::string_view> seen;
      for (const auto& id : ids)
        if (seen.insert(id).second) wanted.push_back(id);
    }
    std::set<std::string_view> removed;
    RemoveReport report;
    auto finish = [&](std::string outcome) {
      for (const auto id : wanted)
        (removed.count(id) != 0 ? report.removed : report.not_found).emplace_back(id);
      if (report.removed.empty()) return;  // no change, no record
      AuditRecord rec = audit_record("remove", queue, actor);
      rec.counts =
          detail::object_of("removed", report.removed.size(), "not_found", report.not_found.size());
      detail::audit_ids bounded{core_->options.audit_max_ids, {}, 0};
      for (const auto& id : report.removed)
        bounded.add(id);
      rec.ids = std::move(bounded.ids);
      rec.ids_omitted = bounded.omitted;
      rec.outcome = std::move(outcome);
      detail::write_audit(*core_, storage_, rec);
    };
    try {
      guarded([&] {
        std::vector<std::string_view> pending = wanted;
        // An entry found but changed before its compare-and-delete (replayed and sent again,
        // edited) is looked for again: three attempts in all, as one remove always had.
        for (int attempt = 0; attempt < 3 && !pending.empty(); ++attempt) {
          const auto found = find_raws(queue, ListKind::dead, pending);
          std::vector<std::string_view> again;
          for (const auto id : pending) {
            const auto it = found.find(id);
            if (it == found.end()) continue;  // not there
            if (storage_.remove(queue, ListKind::dead, id, it->second)) {
              removed.insert(id);
            } else {
              again.push_back(id);
            }
          }
          pending = std::move(again);
        }
      });
    } catch (const std::exception& e) {
      finish(std::string("failed: ") + e.what());
      throw;
    }
    finish("ok");
    return report;
  }

  std::optional<std::string> find_raw(std::string_view queue, ListKind kind, std::string_view id) {
    if constexpr (detail::has_find<storage_type>::value) {
      return storage_.find(queue, kind, id);
    } else {
      auto found = find_raws(queue, kind, {id});
      if (found.empty()) return std::nullopt;
      return std::move(found.begin()->second);
    }
  }

  // The stored item of each of `ids` (the first one with that id) that is in the list, by id:
  // one lookup per id where the storage has `find`, else one scan of the list that stops
  // once every id was found.
  std::map<std::string, std::string, std::less<>> find_raws(
      std::string_view queue, ListKind kind, const std::vector<std::string_view>& ids) {
    std::map<std::string, std::string, std::less<>> out;
    if (ids.empty()) return out;
    if constexpr (detail::has_find<storage_type>::value) {
      for (const auto id : ids)
        if (out.find(id) == out.end())
          if (auto raw = storage_.find(queue, kind, id))
            out.emplace(std::string(id), std::move(*raw));
      return out;
    } else {
      constexpr std::size_t page = 512;
      const std::set<std::string_view> wanted(ids.begin(), ids.end());
      // Ids of plain characters appear verbatim in the stored bytes: a cheap pre-check when
      // there are few of them.
      bool plain = wanted.size() <= 8;
      for (const auto id : wanted)
        plain = plain && detail::id_stored_verbatim(id);
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
            return out;
          }
          continue;
        }
        const std::size_t first = anchored ? 1 : 0;
        const bool full = raws.size() - first >= page;
        if (full) last = raws.back();  // the next page's anchor (a copy: found items move out)
        for (std::size_t i = first; i < raws.size(); ++i) {
          std::string& raw = raws[i];
          if (plain && std::none_of(wanted.begin(), wanted.end(), [&](std::string_view id) {
                return raw.find(id) != std::string::npos;
              }))
            continue;  // cheap pre-check
          detail::envelope_view view;
          std::string found = detail::view_envelope(raw, view) ? detail::entry_id(view, raw)
                                                               : detail::derived_id(raw);
          if (wanted.count(found) == 0 || out.find(found) != out.end()) continue;
          out.emplace(std::move(found), std::move(raw));
          if (out.size() == wanted.size()) return out;
        }
        if (!full) return out;
        start += page;
      }
    }
  }

  Storage storage_;
  std::unique_ptr<detail::queue_core> core_;  // not movable: atomics, a mutex
};

// --- DeadLetterQueue's public members -------------------------------------------------------

template <class Storage>
DLQ_MEMBER_INLINE DeadLetterQueue<Storage>::DeadLetterQueue(Storage storage, Options options)
    : storage_(std::forward<Storage>(storage)),
      core_(std::make_unique<detail::queue_core>(std::move(options))) {}

template <class Storage>
DLQ_MEMBER_INLINE std::string DeadLetterQueue<Storage>::send_to_dlq(std::string_view queue,
                                                                    std::string_view payload,
                                                                    const Failure& failure) {
  const detail::job_view job{queue, payload, &failure};
  return std::move(send(&job, 1, "send_to_dlq").front());
}

template <class Storage>
DLQ_MEMBER_INLINE std::string DeadLetterQueue<Storage>::send_to_dlq(std::string_view queue,
                                                                    std::string_view payload,
                                                                    std::string error,
                                                                    std::int64_t attempt,
                                                                    std::string worker) {
  Failure f;
  f.error = std::move(error);
  f.attempt = attempt;
  f.worker = std::move(worker);
  return send_to_dlq(queue, payload, f);
}

template <class Storage>
DLQ_MEMBER_INLINE std::vector<std::string> DeadLetterQueue<Storage>::send_batch(
    const std::vector<FailedJob>& jobs) {
  std::vector<detail::job_view> views;
  views.reserve(jobs.size());
  for (const auto& job : jobs)
    views.push_back(detail::job_view{job.queue, job.payload, &job.failure});
  return send(views.data(), views.size(), "send_batch");
}

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
DLQ_MEMBER_INLINE std::optional<Entry> DeadLetterQueue<Storage>::get(std::string_view queue,
                                                                     std::string_view id) {
  detail::queue_core::validate_queue(queue, "get");
  return guarded([&]() -> std::optional<Entry> {
    auto raw = find_raw(queue, ListKind::dead, id);
    if (!raw) return std::nullopt;
    return parse_entry(std::move(*raw));
  });
}

template <class Storage>
DLQ_MEMBER_INLINE bool DeadLetterQueue<Storage>::remove(std::string_view queue,
                                                        std::string_view id) {
  detail::queue_core::validate_queue(queue, "remove");
  return !remove_many(queue, {std::string(id)}, {}).removed.empty();
}

template <class Storage>
DLQ_MEMBER_INLINE RemoveReport DeadLetterQueue<Storage>::remove_ids(
    std::string_view queue, const std::vector<std::string>& ids, std::string actor) {
  detail::queue_core::validate_queue(queue, "remove_ids");
  return remove_many(queue, ids, std::move(actor));
}

template <class Storage>
DLQ_MEMBER_INLINE std::size_t DeadLetterQueue<Storage>::purge(std::string_view queue) {
  detail::queue_core::validate_queue(queue, "purge");
  const std::size_t n = guarded([&] { return storage_.purge(queue, ListKind::dead); });
  if (n != 0) audit_simple("purge", queue, detail::object_of("purged", n));
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
DLQ_MEMBER_INLINE std::size_t DeadLetterQueue<Storage>::purge_corrupt(std::string_view queue) {
  detail::queue_core::validate_queue(queue, "purge_corrupt");
  const std::size_t n = guarded([&] { return storage_.purge(queue, ListKind::corrupt); });
  if (n != 0) audit_simple("purge_corrupt", queue, detail::object_of("purged", n));
  return n;
}

template <class Storage>
DLQ_MEMBER_INLINE ReplayReport DeadLetterQueue<Storage>::replay(std::string_view queue,
                                                                const ReplayOptions& options) {
  detail::queue_core::validate_queue(queue, "replay");
  return guarded([&] {
    return run_replay(queue, options, false, options.transform ? "replay_edited" : "replay").report;
  });
}

template <class Storage>
DLQ_MEMBER_INLINE ReplayReport DeadLetterQueue<Storage>::replay_all(std::string_view queue) {
  return replay(queue, ReplayOptions::all());
}

template <class Storage>
DLQ_MEMBER_INLINE std::optional<Entry> DeadLetterQueue<Storage>::replay_one(
    std::string_view queue) {
  detail::queue_core::validate_queue(queue, "replay_one");
  return guarded([&]() -> std::optional<Entry> {
    auto result = run_replay(queue, ReplayOptions::first(1), true, "replay");
    if (result.replayed_raw.empty()) return std::nullopt;
    return parse_entry(std::move(result.replayed_raw.front()));
  });
}

template <class Storage>
DLQ_MEMBER_INLINE ReplayReport DeadLetterQueue<Storage>::replay_ids(std::string_view queue,
                                                                    std::vector<std::string> ids) {
  return replay(queue, ReplayOptions::by_ids(std::move(ids)));
}

template <class Storage>
DLQ_MEMBER_INLINE std::size_t DeadLetterQueue<Storage>::recover(std::string_view queue) {
  detail::queue_core::validate_queue(queue, "recover");
  if constexpr (detail::has_recover<storage_type>::value) {
    const std::size_t n =
        guarded([&] { return static_cast<std::size_t>(storage_.recover(queue)); });
    if (n != 0) audit_simple("recover", queue, detail::object_of("fixed", n));
    return n;
  } else {
    return 0;
  }
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
DLQ_MEMBER_INLINE DiscardReport DeadLetterQueue<Storage>::discard(std::string_view queue,
                                                                  const DiscardOptions& options) {
  detail::queue_core::validate_queue(queue, "discard");
  DiscardReport report;
  AuditRecord rec = audit_record("discard", queue, options.actor);
  rec.filter = detail::audit_filter(options.describe(), core_->options.audit_max_ids);
  if (options.limit != 0) rec.detail["limit"] = options.limit;
  auto finish = [&](std::string outcome) {
    if (report.dry_run || report.discarded == 0) return;  // no change, no record
    rec.counts = detail::object_of("examined", report.examined, "discarded", report.discarded,
                                   "batches", report.batches);
    rec.outcome = std::move(outcome);
    detail::audit_ids ids{core_->options.audit_max_ids, {}, 0};
    for (const auto& id : report.discarded_ids)
      ids.add(id);
    rec.ids = std::move(ids.ids);
    rec.ids_omitted = ids.omitted;
    detail::write_audit(*core_, storage_, rec);
  };
  try {
    guarded([&] {
      detail::storage_dead_list<storage_type> list(storage_, queue);
      detail::discard_engine(*core_, list, queue).run(options, report);
    });
  } catch (const std::exception& e) {
    finish(std::string("failed: ") + e.what());
    throw;
  }
  finish(report.cancelled ? "cancelled" : "ok");
  return report;
}

template <class Storage>
DLQ_MEMBER_INLINE ReplayReport DeadLetterQueue<Storage>::replay_edited(std::string_view queue,
                                                                       std::string_view id,
                                                                       std::string new_payload,
                                                                       std::string actor,
                                                                       std::string to_queue) {
  detail::queue_core::validate_queue(queue, "replay_edited");
  if (detail::blank_payload(new_payload))
    throw detail::blank_edit_error(queue, id, new_payload.size());
  ReplayOptions o = ReplayOptions::by_ids({std::string(id)});
  o.actor = std::move(actor);
  o.to_queue = std::move(to_queue);
  o.transform = [&new_payload](const Entry&) -> std::optional<std::string> { return new_payload; };
  return guarded([&] { return run_replay(queue, o, false, "replay_edited").report; });
}

template <class Storage>
DLQ_MEMBER_INLINE std::vector<AuditRecord> DeadLetterQueue<Storage>::audit(
    std::string_view queue, std::chrono::system_clock::time_point since, std::size_t limit) {
  detail::queue_core::validate_queue(queue, "audit");
  if (limit == 0) limit = 1000;
  return guarded([&] { return detail::read_audit(storage_, queue, since, limit); });
}

template <class Storage>
DLQ_MEMBER_INLINE TrimReport DeadLetterQueue<Storage>::trim(std::string_view queue) {
  detail::queue_core::validate_queue(queue, "trim");
  const TrimReport done = guarded([&] {
    detail::storage_dead_list<storage_type> list(storage_, queue);
    return detail::trim(*core_, list, queue);
  });
  if (done.evicted() != 0)  // no change, no record (see dlq/audit.hpp)
    audit_simple("trim", queue,
                 detail::object_of("evicted_for_length", done.evicted_for_length, "evicted_for_age",
                                   done.evicted_for_age));
  return done;
}

template <class Storage>
DLQ_MEMBER_INLINE TrimReport DeadLetterQueue<Storage>::trim() {
  TrimReport total;
  for (const auto& q : queues()) {
    const TrimReport r = trim(q);
    total.evicted_for_length += r.evicted_for_length;
    total.evicted_for_age += r.evicted_for_age;
  }
  return total;
}

}  // namespace dlq

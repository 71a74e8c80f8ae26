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
/// The send path, the same for one job and for a batch: validate every job; retention
/// before the push (Overflow::reject refuses what does not fit); prepare each envelope (id,
/// poison count, JSON); push; retention after the push (Overflow::evict_oldest evicts the
/// oldest beyond max_length); count and report every entry stored. See dlq/replay.hpp for
/// what a replay does.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "dlq/detail/batched_walk.hpp"
#include "dlq/detail/queue_core.hpp"
#include "dlq/entry.hpp"
#include "dlq/errors.hpp"
#include "dlq/policies.hpp"
#include "dlq/replay.hpp"
#include "dlq/retention.hpp"
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
  explicit DeadLetterQueue(Storage storage = Storage(), Options options = {})
      : storage_(std::forward<Storage>(storage)),
        core_(std::make_unique<detail::queue_core>(std::move(options))) {}

  /// The storage, for backend-specific calls (e.g. MemoryStorage::source_pop).
  storage_type& storage() noexcept { return storage_; }

  /// The options this queue was created with.
  const Options& options() const noexcept { return core_->options; }

  /// The counters since this queue was created (see dlq::Counters). Cheap; thread-safe.
  Counters counters() const noexcept { return core_->counters.snapshot(); }

  // --- workers ---------------------------------------------------------------------------

  /// Dead-letters one job: stores `payload` (any bytes; kept byte-exact) with `failure`
  /// under the source queue `queue`, and returns the new entry's id. One storage round trip
  /// (one more with the poison guard on; eviction, when the queue is over its retention
  /// length, happens after the entry is stored and never makes the send fail).
  /// @throws dlq::invalid_argument for an empty queue name, a negative attempt, a context
  ///         that is not a JSON object, or a payload that is not JSON under
  ///         Payloads::json_only; dlq::queue_full_error when retention rejects the entry;
  ///         dlq::storage_error when the backend fails.
  std::string send_to_dlq(std::string_view queue, std::string_view payload,
                          const Failure& failure) {
    const detail::job_view job{queue, payload, &failure};
    return std::move(send(&job, 1, "send_to_dlq").front());
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
    std::vector<detail::job_view> views;
    views.reserve(jobs.size());
    for (const auto& job : jobs)
      views.push_back(detail::job_view{job.queue, job.payload, &job.failure});
    return send(views.data(), views.size(), "send_batch");
  }

  // --- operators: inspect ----------------------------------------------------------------

  /// Number of entries in the queue's dead-letter list (the seed's dlq_length).
  std::size_t size(std::string_view queue) {
    detail::queue_core::validate_queue(queue, "size");
    return guarded([&] { return storage_.size(queue, ListKind::dead); });
  }

  /// Entries [start, start + count) of the dead-letter list, oldest first, without removing
  /// them (the seed's peek_dlq). Unreadable entries are included with ok() == false.
  std::vector<Entry> peek(std::string_view queue, std::size_t start = 0, std::size_t count = 10) {
    detail::queue_core::validate_queue(queue, "peek");
    return guarded([&] { return parse_all(storage_.range(queue, ListKind::dead, start, count)); });
  }

  /// The entry with this id, or nullopt.
  std::optional<Entry> get(std::string_view queue, std::string_view id) {
    detail::queue_core::validate_queue(queue, "get");
    return guarded([&]() -> std::optional<Entry> {
      auto raw = find_raw(queue, ListKind::dead, id);
      if (!raw) return std::nullopt;
      return parse_entry(std::move(*raw));
    });
  }

  /// Removes the entry with this id without replaying it. Returns false when there is none.
  bool remove(std::string_view queue, std::string_view id) {
    detail::queue_core::validate_queue(queue, "remove");
    return guarded([&] {
      for (int attempt = 0; attempt < 3; ++attempt) {
        auto raw = find_raw(queue, ListKind::dead, id);
        if (!raw) return false;
        if (storage_.remove(queue, ListKind::dead, id, *raw)) return true;
      }
      return false;
    });
  }

  /// Deletes every entry of the queue's dead-letter list; returns exactly how many were
  /// deleted (one atomic step).
  std::size_t purge(std::string_view queue) {
    detail::queue_core::validate_queue(queue, "purge");
    return guarded([&] { return storage_.purge(queue, ListKind::dead); });
  }

  /// Dead-letter depth of each named queue, read in one storage call (the seed's
  /// dlq_summary).
  std::map<std::string, std::size_t> summary(const std::vector<std::string>& queues) {
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
    detail::queue_core::validate_queue(queue, "corrupt");
    return guarded(
        [&] { return parse_all(storage_.range(queue, ListKind::corrupt, start, count)); });
  }

  /// Number of items in the queue's corrupt list.
  std::size_t corrupt_size(std::string_view queue) {
    detail::queue_core::validate_queue(queue, "corrupt_size");
    return guarded([&] { return storage_.size(queue, ListKind::corrupt); });
  }

  /// Deletes the queue's corrupt list; returns how many items it had.
  std::size_t purge_corrupt(std::string_view queue) {
    detail::queue_core::validate_queue(queue, "purge_corrupt");
    return guarded([&] { return storage_.purge(queue, ListKind::corrupt); });
  }

  // --- operators: replay -----------------------------------------------------------------

  /// Replays entries of `queue` as `options` say (see dlq/replay.hpp for the semantics).
  /// @throws dlq::invalid_argument for an empty queue name; dlq::storage_error when the
  ///         backend fails (batches applied before the failure stay applied, nothing is
  ///         lost); dlq::conflict_error when other processes keep changing the same entries.
  ReplayReport replay(std::string_view queue, const ReplayOptions& options = {}) {
    detail::queue_core::validate_queue(queue, "replay");
    return guarded([&] { return run_replay(queue, options, false).report; });
  }

  /// Replays every entry present now back to its source queue (the seed's replay_all).
  ReplayReport replay_all(std::string_view queue) { return replay(queue, ReplayOptions::all()); }

  /// Replays the oldest readable entry and returns it, or nullopt when there is none (the
  /// seed's replay_one). Corrupt entries in front of it are set aside on the way.
  std::optional<Entry> replay_one(std::string_view queue) {
    detail::queue_core::validate_queue(queue, "replay_one");
    return guarded([&]() -> std::optional<Entry> {
      auto result = run_replay(queue, ReplayOptions::first(1), true);
      if (result.replayed_raw.empty()) return std::nullopt;
      return parse_entry(std::move(result.replayed_raw.front()));
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
    detail::queue_core::validate_queue(queue, "recover");
    if constexpr (detail::has_recover<storage_type>::value) {
      return guarded([&] { return static_cast<std::size_t>(storage_.recover(queue)); });
    } else {
      return 0;
    }
  }

  // --- retention -------------------------------------------------------------------------

  /// Applies the queue's retention now: evicts entries beyond Retention::max_length and
  /// entries older than Retention::max_age, oldest first, in bounded atomic batches. Every
  /// eviction is counted and reported as an event.
  TrimReport trim(std::string_view queue) {
    detail::queue_core::validate_queue(queue, "trim");
    return guarded([&] {
      detail::storage_dead_list<storage_type> list(storage_, queue);
      return detail::trim(*core_, list, queue);
    });
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
  detail::replay_engine::result run_replay(std::string_view queue, const ReplayOptions& options,
                                           bool keep_replayed) {
    detail::storage_dead_list<storage_type> list(storage_, queue);
    return detail::replay_engine(*core_, list, queue).run(options, keep_replayed);
  }

  // The send path (see the file comment).
  std::vector<std::string> send(const detail::job_view* jobs, std::size_t n, const char* where) {
    for (std::size_t i = 0; i < n; ++i) {
      detail::queue_core::validate(jobs[i], where);
      detail::check_payload(jobs[i].queue, jobs[i].payload,
                            core_->options.payloads == Payloads::json_only);
    }
    if (n == 0) return {};
    return guarded([&] {
      std::vector<std::pair<std::string_view, std::size_t>> per_queue;  // in order of first use
      for (std::size_t i = 0; i < n; ++i) {
        auto it = std::find_if(per_queue.begin(), per_queue.end(),
                               [&](const auto& q) { return q.first == jobs[i].queue; });
        if (it == per_queue.end()) {
          per_queue.emplace_back(jobs[i].queue, 1);
        } else {
          ++it->second;
        }
      }
      for (const auto& [queue, count] : per_queue)
        admit(queue, count, n == 1 ? &jobs[0] : nullptr);
      const auto now = core_->now();
      std::vector<detail::prepared_entry> entries;
      entries.reserve(n);
      for (std::size_t i = 0; i < n; ++i)
        entries.push_back(prepare(jobs[i], now));
      const std::size_t length = push(entries);
      for (const auto& [queue, count] : per_queue)
        evict(queue, length);
      std::vector<std::string> ids;
      ids.reserve(n);
      for (auto& e : entries) {
        core_->after_send(e);
        ids.push_back(std::move(e.id));
      }
      return ids;
    });
  }

  // Retention before the push: Overflow::reject refuses `count` entries that do not fit.
  // A single entry (`single`) is checked by the push itself where the storage has
  // push_bounded — and also here when the poison guard is on, so that a send refused by a
  // full queue does not bump the job's count (prepare bumps it before the push). A job
  // already stored under its job id (keyed_by_job_id) is a replacement, not growth: let
  // push_bounded admit it.
  void admit(std::string_view queue, std::size_t count, const detail::job_view* single) {
    const Retention& r = core_->retention_of(queue);
    if (r.max_length == 0 || r.overflow != Overflow::reject) return;
    if (single != nullptr && detail::has_push_bounded<storage_type>::value) {
      if (core_->options.poison_guard.park_after <= 0) return;
      if (storage_.size(queue, ListKind::dead) < r.max_length) return;
      if constexpr (detail::keyed_by_job_id<storage_type>::value) {
        const std::string& job_id = single->failure->job_id;
        if (!job_id.empty() && find_raw(queue, ListKind::dead, job_id)) return;
      }
      core_->reject(queue, r);
    }
    if (storage_.size(queue, ListKind::dead) + count > r.max_length) core_->reject(queue, r);
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

  // Stores the entries: one push (push_bounded under a rejecting retention, where the
  // storage has it) or one push_many. Returns the dead list's new length when the storage
  // says it (one entry), else 0.
  std::size_t push(const std::vector<detail::prepared_entry>& entries) {
    if (entries.size() > 1) {
      std::vector<Record> records;
      records.reserve(entries.size());
      for (const auto& e : entries)
        records.push_back(e.record());
      storage_.push_many(records);
      return 0;
    }
    const Record record = entries.front().record();
    const Retention& r = core_->retention_of(record.queue);
    if constexpr (detail::has_push_bounded<storage_type>::value) {
      if (r.max_length != 0 && r.overflow == Overflow::reject) {
        if (!storage_.push_bounded(record, r.max_length)) core_->reject(record.queue, r);
        return 0;
      }
    }
    if constexpr (detail::push_returns_size<storage_type>::value) {
      return static_cast<std::size_t>(storage_.push(record));
    } else {
      storage_.push(record);
      return 0;
    }
  }

  // Retention after the push: Overflow::evict_oldest evicts the oldest beyond max_length.
  // `length` is the list's length after the push when known (one queue), else 0.
  void evict(std::string_view queue, std::size_t length) {
    const Retention& r = core_->retention_of(queue);
    if (r.max_length == 0 || r.overflow != Overflow::evict_oldest) return;
    detail::storage_dead_list<storage_type> list(storage_, queue);
    detail::enforce_length(*core_, list, queue, r, length);
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
  std::unique_ptr<detail::queue_core> core_;  // not movable: atomics, a mutex
};

}  // namespace dlq

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file operations.hpp
/// Operator operations of DeadLetterQueue beyond inspect and replay: delete by filter
/// (discard), and the writing and reading of the audit trail (dlq/audit.hpp). Search is in
/// dlq/search.hpp, edited replay in ReplayOptions::transform and replay_edited.
///
/// discard(queue, options) deletes the entries `options` (a dlq::Filter) matches, oldest
/// first, in bounded batches; each batch is one atomic storage step (the same step as
/// replay, with Action::discard), so a concurrent sender, replayer or trim never loses or
/// doubles an entry, and a discard that fails or is killed leaves every entry either in the
/// list or deleted — and reported as deleted only when it was. Like replay-all it examines
/// only the entries present when it started, whatever other clients remove or add meanwhile
/// (see "Snapshot" in dlq/storage.hpp). Every deleted entry is counted
/// (Counters::discarded) and emitted as EventKind::discarded (detail "discard"), like
/// evictions; the report lists every id. One audit record per discard.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "dlq/audit.hpp"
#include "dlq/detail/batched_walk.hpp"
#include "dlq/detail/compiled.hpp"
#include "dlq/detail/queue_core.hpp"
#include "dlq/entry.hpp"
#include "dlq/errors.hpp"
#include "dlq/policies.hpp"
#include "dlq/search.hpp"
#include "dlq/storage.hpp"

namespace dlq {

/// What discard() deletes: the entries the Filter matches (all fields of dlq::Filter apply,
/// AND-ed; the default matches every entry, corrupt ones included).
struct DiscardOptions : Filter {
  /// Most entries to delete; 0 (the default) = no limit.
  std::size_t limit = 0;
  /// Decide and report, but delete nothing. Default false.
  bool dry_run = false;
  /// Who asks, for the audit trail; empty (the default) = Options::actor.
  std::string actor;
  /// Checked before every batch: once true the discard stops between batches and reports
  /// `cancelled`. Default: none.
  const std::atomic<bool>* cancel = nullptr;
};

/// What a discard did. Every entry examined was either deleted (listed in discarded_ids) or
/// left in place.
struct DiscardReport {
  std::size_t examined = 0;   ///< entries looked at
  std::size_t discarded = 0;  ///< entries deleted (would be, in a dry run)
  std::size_t batches = 0;    ///< atomic steps applied
  std::size_t conflicts = 0;  ///< batches redone because the list changed under them
  bool dry_run = false;       ///< nothing was deleted
  bool cancelled = false;     ///< DiscardOptions::cancel stopped the run between batches
  std::vector<std::string> discarded_ids;  ///< the id of every entry deleted, oldest first
};

/// What DeadLetterQueue::remove_ids did: every distinct id asked for is in exactly one of the
/// two lists, in the order given.
struct RemoveReport {
  std::vector<std::string> removed;    ///< ids whose entry was removed
  std::vector<std::string> not_found;  ///< ids with no entry (or removed by another client first)
};

namespace detail {

/// Appends `record` (its time and actor filled in) to the trail of its queue; returns how
/// many records younger than the retention age the storage's cap dropped to make room (0
/// for a storage whose audit_append returns nothing).
template <class S>
std::size_t append_audit(queue_core& core, S& storage, AuditRecord& record) {
  record.time = core.now();
  if (record.actor.empty()) record.actor = core.options.actor;
  if (record.actor.empty()) record.actor = std::string(unknown_actor);
  const std::string json = audit_json(record);  // = to_json().dump(…, replace)
  using returned = decltype(storage.audit_append(record.queue, record.time, json));
  std::size_t dropped = 0;
  if constexpr (std::is_convertible_v<returned, std::size_t>) {
    dropped = static_cast<std::size_t>(storage.audit_append(record.queue, record.time, json));
  } else {
    storage.audit_append(record.queue, record.time, json);
  }
  core.counters.audited.fetch_add(1, std::memory_order_relaxed);
  return dropped;
}

/// Appends `record` to the trail of its queue in `storage` (when the storage has one).
/// Never throws: a failure is counted (Counters::audit_errors), logged, and leaves the
/// operation standing. When the storage's cap dropped records younger than the retention
/// age to make room, that is counted (Counters::audit_dropped), logged at error level and
/// marked in the trail by an "audit_dropped" record (see dlq/audit.hpp); what that record's
/// own append drops is counted and logged only.
template <class S>
void write_audit(queue_core& core, S& storage, AuditRecord& record) noexcept {
  if constexpr (has_audit<S>::value) {
    try {
      std::size_t dropped = append_audit(core, storage, record);
      for (int note = 0; dropped != 0; ++note) {
        core.counters.audit_dropped.fetch_add(dropped, std::memory_order_relaxed);
        core.log(LogLevel::error,
                 "[dlq.audit] queue '" + record.queue + "': " + std::to_string(dropped) +
                     " audit records younger than the trail's max age were removed by its cap "
                     "on the number of records (AuditRetention::max_records): the trail of "
                     "that time is incomplete (an \"audit_dropped\" record marks the place); "
                     "if this was not a burst of real operations, look for who made it; raise "
                     "the cap to keep more — Counters::audit_dropped counts these");
        if (note != 0) break;
        AuditRecord mark;
        mark.operation = "audit_dropped";
        mark.queue = record.queue;
        mark.counts = object_of("dropped", dropped);
        dropped = append_audit(core, storage, mark);
      }
    } catch (const std::exception& e) {
      core.counters.audit_errors.fetch_add(1, std::memory_order_relaxed);
      core.log(LogLevel::error, "[dlq.audit] queue '" + record.queue + "': the audit record of " +
                                    record.operation + " could not be written (" + e.what() +
                                    "); the operation itself stands — check the audit key or "
                                    "table, Counters::audit_errors counts these");
    } catch (...) {
      core.counters.audit_errors.fetch_add(1, std::memory_order_relaxed);
      core.log(LogLevel::error, "[dlq.audit] queue '" + record.queue +
                                    "': the audit record could not be written (non-std "
                                    "exception); the operation itself stands");
    }
  } else {
    (void)core;
    (void)storage;
    (void)record;
  }
}

/// The audit records of `queue` in `storage` (none when the storage has no trail).
template <class S>
std::vector<AuditRecord> read_audit(S& storage, std::string_view queue,
                                    std::chrono::system_clock::time_point since,
                                    std::size_t limit) {
  std::vector<AuditRecord> out;
  if constexpr (has_audit<S>::value) {
    for (const auto& text : storage.audit_read(queue, since, limit))
      out.push_back(AuditRecord::from_json(text));
  } else {
    (void)storage;
    (void)queue;
    (void)since;
    (void)limit;
  }
  return out;
}

/// One discard of one queue over a dead list (see the file comment).
class discard_engine {
 public:
  discard_engine(queue_core& core, dead_list& list, std::string_view queue)
      : core_(core), list_(list), queue_(queue) {}

  /// Deletes what `o` matches into `report` (filled as batches apply, so that a failure
  /// leaves it saying what was deleted). @throws conflict_error when the list keeps changing
  /// under the discard; what the storage throws.
  void run(const DiscardOptions& o, DiscardReport& report);

 private:
  queue_core& core_;
  dead_list& list_;
  std::string_view queue_;
};

}  // namespace detail

}  // namespace dlq

#if defined(DLQ_HEADER_ONLY)
#include "dlq/operations-inl.hpp"
#endif

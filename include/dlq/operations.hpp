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
/// list or deleted — and reported as deleted only when it was. Like replay-all it examines at
/// most the entries present when it started. Every deleted entry is counted
/// (Counters::discarded) and emitted as EventKind::discarded (detail "discard"), like
/// evictions; the report lists every id. One audit record per discard.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/audit.hpp"
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

namespace detail {

/// The operations' engine; a friend of DeadLetterQueue (it uses the queue's storage,
/// options, counters, events and log).
template <class Queue>
struct operations {
  using storage_type = typename Queue::storage_type;

  // Appends `record` to the queue's trail. Never throws: a failure is counted, logged and
  // leaves the operation standing.
  static void audit(Queue& self, AuditRecord& record) noexcept {
    if constexpr (has_audit<storage_type>::value) {
      auto& c = self.shared_->counters;
      try {
        record.time = self.current_time();
        if (record.actor.empty()) record.actor = self.options_.actor;
        const std::string json =
            record.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        self.storage_.audit_append(record.queue, record.time, json);
        c.audited.fetch_add(1, std::memory_order_relaxed);
      } catch (const std::exception& e) {
        c.audit_errors.fetch_add(1, std::memory_order_relaxed);
        self.log(LogLevel::error, "[dlq.audit] queue '" + record.queue + "': the audit record of " +
                                      record.operation + " could not be written (" + e.what() +
                                      "); the operation itself stands — check the audit key "
                                      "or table, Counters::audit_errors counts these");
      } catch (...) {
        c.audit_errors.fetch_add(1, std::memory_order_relaxed);
        self.log(LogLevel::error, "[dlq.audit] queue '" + record.queue +
                                      "': the audit record could not be written (non-std "
                                      "exception); the operation itself stands");
      }
    } else {
      (void)self;
      (void)record;
    }
  }

  // A record for `operation` on `queue` with ids bounded by Options::audit_max_ids.
  static AuditRecord record(Queue& self, std::string_view operation, std::string_view queue,
                            std::string_view actor) {
    AuditRecord r;
    r.operation = std::string(operation);
    r.queue = std::string(queue);
    r.actor = std::string(actor);
    (void)self;
    return r;
  }

  static void set_ids(Queue& self, AuditRecord& r, const std::vector<std::string>& ids) {
    audit_ids bounded;
    bounded.max = self.options_.audit_max_ids;
    for (const auto& id : ids)
      bounded.add(id);
    r.ids = std::move(bounded.ids);
    r.ids_omitted = bounded.omitted;
  }

  static std::vector<AuditRecord> read(Queue& self, std::string_view queue,
                                       std::chrono::system_clock::time_point since,
                                       std::size_t limit) {
    std::vector<AuditRecord> out;
    if constexpr (has_audit<storage_type>::value) {
      for (const auto& text : self.storage_.audit_read(queue, since, limit))
        out.push_back(AuditRecord::from_json(text));
    } else {
      (void)self;
      (void)queue;
      (void)since;
      (void)limit;
    }
    return out;
  }

  static DiscardReport discard(Queue& self, std::string_view queue, const DiscardOptions& o) {
    DiscardReport report;
    report.dry_run = o.dry_run;
    AuditRecord rec = record(self, "discard", queue, o.actor);
    rec.filter = o.describe();
    auto finish = [&](const std::string& outcome) {
      rec.counts = {{"examined", report.examined},
                    {"discarded", report.discarded},
                    {"batches", report.batches}};
      rec.outcome = outcome;
      if (o.limit != 0) rec.detail["limit"] = o.limit;
      set_ids(self, rec, report.discarded_ids);
      audit(self, rec);
    };
    try {
      run_discard(self, queue, o, report);
    } catch (const std::exception& e) {
      finish(std::string("failed: ") + e.what());
      throw;
    }
    finish(report.cancelled ? "cancelled" : o.dry_run ? "dry_run" : "ok");
    return report;
  }

  static void run_discard(Queue& self, std::string_view queue, const DiscardOptions& o,
                          DiscardReport& report) {
    const filter_matcher matcher(o, self.current_time());
    std::size_t budget = self.storage_.size(queue, ListKind::dead);  // the snapshot bound
    std::size_t limit_left = o.limit == 0 ? std::numeric_limits<std::size_t>::max() : o.limit;
    typename storage_type::replay_cursor cursor{};
    std::size_t conflicts = 0;
    std::size_t window = 16;
    std::vector<std::string> ids;
    auto& counters = self.shared_->counters;
    while (budget > 0 && limit_left > 0) {
      if (o.cancel && o.cancel->load()) {
        report.cancelled = true;
        break;
      }
      ids.clear();
      std::uint64_t bytes = 0;
      auto decider = [&](std::string_view raw, Decision& d) {
        bytes += raw.size();
        if (ids.size() >= limit_left || matcher.cannot_match(raw)) return;
        envelope_view view;
        const bool readable = view_envelope(raw, view);
        std::string id = readable ? entry_id(view, raw) : derived_id(raw);
        if (!matcher.matches(raw, readable, view, id)) return;
        ids.push_back(std::move(id));
        if (!o.dry_run) d.action = Action::discard;
      };
      const std::size_t n = std::min(window, budget);
      const StepResult step = self.storage_.replay_step(queue, cursor, n, Decider(decider));
      if (step.conflict) {
        ++report.conflicts;
        counters.conflicts.fetch_add(1, std::memory_order_relaxed);
        if (++conflicts >= self.options_.max_conflicts)
          throw conflict_error(
              message("discard", "queue '" + std::string(queue) + "'",
                      "the list kept changing under the discard (" + std::to_string(conflicts) +
                          " batches in a row)",
                      "nothing was lost; " + std::to_string(report.discarded) +
                          " entries were deleted before this (see the audit trail); run it again"));
        self.back_off(conflicts, conflicts);
        continue;
      }
      conflicts = 0;
      if (step.examined == 0) break;
      ++report.batches;
      report.examined += step.examined;
      budget -= std::min(budget, step.examined);
      limit_left -= std::min(limit_left, ids.size());
      report.discarded += ids.size();
      if (!o.dry_run) {
        counters.discarded.fetch_add(ids.size(), std::memory_order_relaxed);
        for (const auto& id : ids)
          self.emit(EventKind::discarded, queue, id, "discard");
      }
      for (auto& id : ids)
        report.discarded_ids.push_back(std::move(id));
      const std::uint64_t average = std::max<std::uint64_t>(1, bytes / step.examined);
      window = std::min<std::size_t>({static_cast<std::size_t>(std::max<std::uint64_t>(
                                          1, self.options_.replay_batch_bytes / average)),
                                      window * 4, self.options_.replay_batch_items});
    }
  }
};

}  // namespace detail

}  // namespace dlq

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file detail/dead_letter_queue_bulk.hpp
/// DeadLetterQueue's bulk changes and their audit records: replay (all, one, by id, edited),
/// recover, discard and trim. Each writes one audit record when it changed something, also
/// when it fails part-way (what was applied before the failure stays applied and is
/// recorded). Included by dlq/dead_letter_queue.hpp; include that header, not this one.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlq/dead_letter_queue.hpp"

namespace dlq {

// Runs a replay and writes its audit record (also when it fails: what was applied before
// the failure stays applied and is recorded).
template <class Storage>
DLQ_MEMBER_INLINE detail::replay_engine::result DeadLetterQueue<Storage>::run_replay(
    std::string_view queue, const ReplayOptions& options, bool keep_replayed,
    std::string_view operation) {
  detail::storage_dead_list<storage_type> list(storage_, queue);
  detail::replay_engine engine(*core_, list, queue);
  constexpr bool audited = detail::has_audit<storage_type>::value;
  engine.collect_audit(audited);
  if constexpr (!audited) {
    return engine.run(options, keep_replayed);
  } else {
    AuditRecord rec = audit_record(operation, queue, options.actor);
    rec.filter = detail::audit_filter(detail::replay_description(options), core_->options.audit_max_ids);
    if (options.limit != 0) rec.detail["limit"] = options.limit;
    rec.detail["destination"] = options.to_queue.empty() ? std::string(queue) : options.to_queue;
    if (options.rate > 0) rec.detail["rate"] = options.rate;
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
DLQ_MEMBER_INLINE std::size_t DeadLetterQueue<Storage>::recover(std::string_view queue,
                                                                std::string actor) {
  detail::queue_core::validate_queue(queue, "recover");
  if constexpr (detail::has_recover<storage_type>::value) {
    const std::size_t n =
        guarded([&] { return static_cast<std::size_t>(storage_.recover(queue)); });
    if (n != 0) audit_simple("recover", queue, detail::object_of("fixed", n), {}, "ok", actor);
    return n;
  } else {
    (void)actor;
    return 0;
  }
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

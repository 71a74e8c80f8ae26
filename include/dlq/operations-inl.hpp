// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file operations-inl.hpp
/// The definitions of operations.hpp's non-template functions (see DLQ_INLINE in
/// dlq/detail/compiled.hpp): included by operations.hpp in header-only mode, compiled into the
/// library in compiled mode.
#pragma once

#include "dlq/operations.hpp"

namespace dlq::detail {

DLQ_INLINE void discard_engine::run(const DiscardOptions& o, DiscardReport& report) {
  report.dry_run = o.dry_run;
  const filter_matcher matcher(o, core_.now());
  // The entries present now: the storage bounds the walk to exactly those when it can
  // (replay_snapshot, see dlq/storage.hpp), else at most as many as there are now.
  const std::optional<std::size_t> bounded = list_.snapshot();
  std::size_t budget = bounded ? std::numeric_limits<std::size_t>::max() : list_.size();
  std::size_t limit_left = o.limit == 0 ? std::numeric_limits<std::size_t>::max() : o.limit;
  batched_walk walk(core_, list_, 16);
  std::vector<std::string> ids;
  auto begin = [&ids] { ids.clear(); };
  auto decide = [&](std::string_view raw, Decision& d) {
    if (ids.size() >= limit_left || matcher.cannot_match(raw)) return;
    envelope_view view;
    const bool readable = view_envelope(raw, view);
    std::string id = readable ? entry_id(view, raw) : derived_id(raw);
    if (!matcher.matches(raw, readable, view, id)) return;
    ids.push_back(std::move(id));
    if (!o.dry_run) d.action = Action::discard;
  };
  auto give_up = [&](std::size_t consecutive) {
    return message("discard", "queue '" + std::string(queue_) + "'",
                   "the list kept changing under the discard (" + std::to_string(consecutive) +
                       " batches in a row) without getting shorter",
                   "nothing was lost; " + std::to_string(report.discarded) +
                       " entries were deleted before this (see the audit trail); run it again");
  };
  while (budget > 0 && limit_left > 0) {
    if (o.cancel && o.cancel->load()) {
      report.cancelled = true;
      break;
    }
    const std::size_t examined = walk.next(budget, Decider(decide), begin, give_up);
    report.conflicts = walk.conflicts();
    if (examined == 0) break;
    ++report.batches;
    report.examined += examined;
    budget -= std::min(budget, examined);
    limit_left -= std::min(limit_left, ids.size());
    report.discarded += ids.size();
    if (!o.dry_run) {
      core_.counters.discarded.fetch_add(ids.size(), std::memory_order_relaxed);
      for (const auto& id : ids)
        core_.emit(EventKind::discarded, queue_, id, "discard");
    }
    for (auto& id : ids)
      report.discarded_ids.push_back(std::move(id));
  }
}

}  // namespace dlq::detail

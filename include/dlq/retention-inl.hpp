// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file retention-inl.hpp
/// The definitions of retention.hpp's non-template functions (see DLQ_INLINE in
/// dlq/detail/compiled.hpp): included by retention.hpp in header-only mode, compiled into the
/// library in compiled mode.
#pragma once

#include "dlq/retention.hpp"

namespace dlq::detail {

DLQ_INLINE void report_evictions(queue_core& core, std::string_view queue,
                                 const std::vector<std::string>& raws, std::string_view reason) {
  core.counters.evicted.fetch_add(raws.size(), std::memory_order_relaxed);
  (reason == "max_age" ? core.counters.evicted_for_age : core.counters.evicted_for_length)
      .fetch_add(raws.size(), std::memory_order_relaxed);
  for (const auto& raw : raws) {
    envelope_view view;
    const std::string id = view_envelope(raw, view) ? entry_id(view, raw) : derived_id(raw);
    core.emit(EventKind::evicted, queue, id, reason);
  }
}

DLQ_INLINE void log_evictions(queue_core& core, std::string_view queue, std::size_t n,
                              std::string_view reason) {
  if (n == 0) return;
  core.log(LogLevel::info, "[dlq.retention] queue '" + std::string(queue) + "': evicted " +
                               std::to_string(n) + " entries (" + std::string(reason) + ")");
}

DLQ_INLINE std::size_t sweep(queue_core& core, dead_list& list, std::string_view queue,
                             std::string_view reason, evict_rule evict) {
  batched_walk walk(core, list, 16);
  std::size_t evicted = 0;
  bool stop = false;
  std::vector<std::string> raws;  // evicted by the batch being decided
  bool step_stop = false;
  auto begin = [&] {
    raws.clear();
    step_stop = false;
  };
  auto decide = [&](std::string_view raw, Decision& d) {
    if (step_stop || !evict(raw, evicted + raws.size(), step_stop)) return;
    d.action = Action::discard;
    raws.emplace_back(raw);
  };
  auto give_up = [&](std::size_t) {
    return message("retention", "queue '" + std::string(queue) + "'",
                   "the list kept changing under the trim", "nothing was lost; run trim() again");
  };
  while (!stop) {
    if (walk.next(std::numeric_limits<std::size_t>::max(), Decider(decide), begin, give_up) == 0)
      break;
    stop = step_stop;
    evicted += raws.size();
    report_evictions(core, queue, raws, reason);
  }
  log_evictions(core, queue, evicted, reason);
  return evicted;
}

DLQ_INLINE std::size_t enforce_length(queue_core& core, dead_list& list, std::string_view queue,
                                      const Retention& r, std::size_t known_length) {
  const std::size_t length = known_length != 0 ? known_length : list.size();
  if (length <= r.max_length) return 0;
  const std::size_t excess = length - r.max_length;
  return sweep(core, list, queue, "max_length",
               [excess](std::string_view, std::size_t selected, bool& stop) {
                 stop = selected >= excess;
                 return !stop;
               });
}

DLQ_INLINE void enforce_length_after_send(queue_core& core, dead_list& list, std::string_view queue,
                                          const Retention& r, std::size_t known_length) {
  try {
    enforce_length(core, list, queue, r, known_length);
  } catch (const storage_error& e) {
    core.log(LogLevel::error, std::string("[dlq.retention] queue '") + std::string(queue) +
                                  "': eviction failed: " + e.what() + "; trim() will retry");
  }
}

DLQ_INLINE std::size_t enforce_age(queue_core& core, dead_list& list, std::string_view queue,
                                   const Retention& r) {
  const auto cutoff = core.now() - r.max_age;
  return sweep(core, list, queue, "max_age",
               [&cutoff](std::string_view raw, std::size_t, bool& stop) {
                 envelope_view view;
                 if (!view_envelope(raw, view)) return false;  // unreadable: keep, go on
                 const auto t = iso_time::parse(string_field(view.dead_lettered_at));
                 if (!t) return false;  // no readable time: keep, go on
                 if (*t >= cutoff) {
                   stop = true;
                   return false;
                 }
                 return true;
               });
}

DLQ_INLINE TrimReport trim(queue_core& core, dead_list& list, std::string_view queue) {
  TrimReport report;
  const Retention& r = core.retention_of(queue);
  if (r.max_length != 0) report.evicted_for_length = enforce_length(core, list, queue, r, 0);
  if (r.max_age.count() > 0) report.evicted_for_age = enforce_age(core, list, queue, r);
  return report;
}

}  // namespace dlq::detail

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file search-inl.hpp
/// The definitions of search.hpp's non-template functions (see DLQ_INLINE in
/// dlq/detail/compiled.hpp): included by search.hpp in header-only mode, compiled into the
/// library in compiled mode.
#pragma once

#include "dlq/search.hpp"

namespace dlq {

DLQ_INLINE nlohmann::ordered_json Filter::describe() const {
  nlohmann::ordered_json j = nlohmann::ordered_json(nlohmann::ordered_json::value_t::object);
  if (!ids.empty()) j["ids"] = ids;
  if (!error_contains.empty()) j["error_contains"] = error_contains;
  if (!error_type.empty()) j["error_type"] = error_type;
  if (!worker.empty()) j["worker"] = worker;
  if (!job_id.empty()) j["job_id"] = job_id;
  const auto seconds = [](std::chrono::system_clock::duration d) {
    return std::chrono::duration<double>(d).count();
  };
  if (older_than) j["older_than_s"] = seconds(*older_than);
  if (newer_than) j["newer_than_s"] = seconds(*newer_than);
  if (!payload_contains.empty()) j["payload_contains"] = payload_contains;
  if (predicate) detail::describe_predicate(j, predicate_terms, "predicate");
  return j;
}

}  // namespace dlq

namespace dlq::detail {

DLQ_INLINE filter_matcher::filter_matcher(const Filter& f,
                                          std::chrono::system_clock::time_point now)
    : f_(f) {
  for (const auto& id : f.ids)
    ids_.insert(id);
  if (f.older_than) older_cutoff_ = now - *f.older_than;
  if (f.newer_than) newer_cutoff_ = now - *f.newer_than;
  fields_ = !f.error_contains.empty() || !f.error_type.empty() || !f.worker.empty() ||
            !f.job_id.empty() || f.older_than || f.newer_than || !f.payload_contains.empty();
  for (const std::string* t : {&f.error_contains, &f.error_type, &f.worker, &f.job_id})
    if (!t->empty()) texts_.push_back(t);
}

DLQ_INLINE bool filter_matcher::matches(std::string_view raw, bool readable,
                                        const envelope_view& view, const std::string& id) const {
  if (!ids_.empty() && ids_.count(id) == 0) return false;
  if (!readable) {
    if (fields_) return false;
    return !f_.predicate || f_.predicate(parse_entry(std::string(raw)));
  }
  if (!f_.error_contains.empty() &&
      !contains(string_field(view.error), f_.error_contains, false))  // linear: text_search.hpp
    return false;
  if (!f_.error_type.empty() && string_field(view.error_type) != f_.error_type) return false;
  if (!f_.worker.empty() && string_field(view.worker) != f_.worker) return false;
  if (!f_.job_id.empty() && string_field(view.job_id) != f_.job_id) return false;
  if (older_cutoff_ || newer_cutoff_) {
    const auto t = iso_time::parse(string_field(view.dead_lettered_at));
    if (!t) return false;
    if (older_cutoff_ && *t > *older_cutoff_) return false;
    if (newer_cutoff_ && *t < *newer_cutoff_) return false;
  }
  if (!f_.payload_contains.empty()) {
    std::string scratch, problem;
    std::string_view payload;
    if (!cut_payload(view, scratch, payload, problem)) return false;
    if (!contains(payload, f_.payload_contains, false)) return false;
  }
  if (f_.predicate && !f_.predicate(parse_entry(std::string(raw)))) return false;
  return true;
}

DLQ_INLINE bool filter_matcher::matches(std::string_view raw) const {
  envelope_view view;
  const bool readable = view_envelope(raw, view);
  const std::string id = readable ? entry_id(view, raw) : derived_id(raw);
  return matches(raw, readable, view, id);
}

}  // namespace dlq::detail

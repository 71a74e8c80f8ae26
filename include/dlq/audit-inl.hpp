// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file audit-inl.hpp
/// The definitions of audit.hpp's non-template functions (see DLQ_INLINE in
/// dlq/detail/compiled.hpp): included by audit.hpp in header-only mode, compiled into the
/// library in compiled mode.
#pragma once

#include "dlq/audit.hpp"

namespace dlq {

DLQ_INLINE nlohmann::ordered_json AuditRecord::to_json() const {
  nlohmann::ordered_json j;
  j["time"] = detail::iso_time::format(time);
  j["actor"] = actor;
  j["operation"] = operation;
  j["queue"] = queue;
  j["filter"] = filter.is_null() ? nlohmann::ordered_json::object() : filter;
  j["counts"] = counts.is_null() ? nlohmann::ordered_json::object() : counts;
  j["ids"] = ids;
  j["ids_omitted"] = ids_omitted;
  j["outcome"] = outcome;
  j["detail"] = detail.is_null() ? nlohmann::ordered_json::object() : detail;
  return j;
}

DLQ_INLINE AuditRecord AuditRecord::from_json(std::string_view text) {
  AuditRecord r;
  const auto j = nlohmann::ordered_json::parse(text, nullptr, false);
  if (!j.is_object()) {
    r.outcome = "unreadable audit record";
    return r;
  }
  const auto str = [&](const char* key, std::string& out) {
    const auto it = j.find(key);
    if (it != j.end() && it->is_string()) out = it->get<std::string>();
  };
  std::string time;
  str("time", time);
  if (const auto t = detail::iso_time::parse(time)) r.time = *t;
  str("actor", r.actor);
  str("operation", r.operation);
  str("queue", r.queue);
  str("outcome", r.outcome);
  if (auto it = j.find("filter"); it != j.end() && it->is_object()) r.filter = *it;
  if (auto it = j.find("counts"); it != j.end() && it->is_object()) r.counts = *it;
  if (auto it = j.find("detail"); it != j.end() && it->is_object()) r.detail = *it;
  if (auto it = j.find("ids"); it != j.end() && it->is_array())
    for (const auto& id : *it)
      if (id.is_string()) r.ids.push_back(id.get<std::string>());
  if (auto it = j.find("ids_omitted"); it != j.end() && it->is_number_unsigned())
    r.ids_omitted = it->get<std::size_t>();
  return r;
}

}  // namespace dlq

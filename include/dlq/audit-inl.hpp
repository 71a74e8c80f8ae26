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
  j["filter"] =
      filter.is_null() ? nlohmann::ordered_json(nlohmann::ordered_json::value_t::object) : filter;
  j["counts"] =
      counts.is_null() ? nlohmann::ordered_json(nlohmann::ordered_json::value_t::object) : counts;
  j["ids"] = ids;
  j["ids_omitted"] = ids_omitted;
  j["outcome"] = outcome;
  j["detail"] =
      detail.is_null() ? nlohmann::ordered_json(nlohmann::ordered_json::value_t::object) : detail;
  return j;
}

namespace detail {

DLQ_INLINE void append_dumped_string(std::string& out, std::string_view text) {
  json::append_string(out, text, json::invalid_utf8::per_subpart);
}

DLQ_INLINE void append_dumped(std::string& out, const nlohmann::ordered_json& value) {
  append_dumped_value(out, value);
}

DLQ_INLINE std::string audit_json(const AuditRecord& r) {
  std::string out;
  out.append("{\"time\":");
  append_dumped_string(out, iso_time::format(r.time));
  out.append(",\"actor\":");
  append_dumped_string(out, r.actor);
  out.append(",\"operation\":");
  append_dumped_string(out, r.operation);
  out.append(",\"queue\":");
  append_dumped_string(out, r.queue);
  out.append(",\"filter\":");
  if (r.filter.is_null())
    out.append("{}");
  else
    append_dumped(out, r.filter);
  out.append(",\"counts\":");
  if (r.counts.is_null())
    out.append("{}");
  else
    append_dumped(out, r.counts);
  out.append(",\"ids\":[");
  for (std::size_t i = 0; i < r.ids.size(); ++i) {
    if (i != 0) out.push_back(',');
    append_dumped_string(out, r.ids[i]);
  }
  out.append("],\"ids_omitted\":");
  out.append(std::to_string(r.ids_omitted));
  out.append(",\"outcome\":");
  append_dumped_string(out, r.outcome);
  out.append(",\"detail\":");
  if (r.detail.is_null())
    out.append("{}");
  else
    append_dumped(out, r.detail);
  out.push_back('}');
  return out;
}

}  // namespace detail

}  // namespace dlq

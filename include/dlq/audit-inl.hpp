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

}  // namespace dlq

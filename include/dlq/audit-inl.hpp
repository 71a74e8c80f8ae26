// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file audit-inl.hpp
/// The definitions of audit.hpp's non-template functions (see DLQ_INLINE in
/// dlq/detail/compiled.hpp): included by audit.hpp in header-only mode, compiled into the
/// library in compiled mode.
#pragma once

#include <cmath>

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

namespace detail {

DLQ_INLINE void append_dumped_string(std::string& out, std::string_view text) {
  static constexpr char hexdigits[] = "0123456789abcdef";
  out.push_back('"');
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* const end = p + text.size();
  while (p != end) {
    const unsigned char c = *p;
    if (c < 0x80) {
      switch (c) {
        case '"':
          out.append("\\\"");
          break;
        case '\\':
          out.append("\\\\");
          break;
        case '\b':
          out.append("\\b");
          break;
        case '\f':
          out.append("\\f");
          break;
        case '\n':
          out.append("\\n");
          break;
        case '\r':
          out.append("\\r");
          break;
        case '\t':
          out.append("\\t");
          break;
        default:
          if (c <= 0x1F) {
            out.append("\\u00");
            out.push_back(hexdigits[c >> 4]);
            out.push_back(hexdigits[c & 0xF]);
          } else {
            out.push_back(static_cast<char>(c));
          }
      }
      ++p;
      continue;
    }
    // A multi-byte sequence: its length and the range of its second byte (Unicode Table 3-7).
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
    if (len == 0) {  // not a lead byte
      out.append("\xEF\xBF\xBD");
      ++p;
      continue;
    }
    std::size_t good = 1;  // bytes of the sequence that are right so far
    while (good < len && p + good != end) {
      const unsigned char b = p[good];
      if (b < (good == 1 ? lo : 0x80) || b > (good == 1 ? hi : 0xBF)) break;
      ++good;
    }
    if (good == len) {
      out.append(reinterpret_cast<const char*>(p), len);
    } else {
      out.append("\xEF\xBF\xBD");  // the cut-short sequence; the byte after it is read again
    }
    p += good;
  }
  out.push_back('"');
}

DLQ_INLINE void append_dumped(std::string& out, const nlohmann::ordered_json& value) {
  using J = nlohmann::ordered_json;
  switch (value.type()) {
    case J::value_t::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, v] : *value.get_ptr<const J::object_t*>()) {
        if (!first) out.push_back(',');
        first = false;
        append_dumped_string(out, key);
        out.push_back(':');
        append_dumped(out, v);
      }
      out.push_back('}');
      return;
    }
    case J::value_t::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& v : *value.get_ptr<const J::array_t*>()) {
        if (!first) out.push_back(',');
        first = false;
        append_dumped(out, v);
      }
      out.push_back(']');
      return;
    }
    case J::value_t::string:
      append_dumped_string(out, *value.get_ptr<const J::string_t*>());
      return;
    case J::value_t::binary: {
      const J::binary_t& b = *value.get_ptr<const J::binary_t*>();
      out.append("{\"bytes\":[");
      for (std::size_t i = 0; i < b.size(); ++i) {
        if (i != 0) out.push_back(',');
        out.append(std::to_string(static_cast<unsigned>(b[i])));
      }
      out.append("],\"subtype\":");
      out.append(b.has_subtype() ? std::to_string(b.subtype()) + "}" : std::string("null}"));
      return;
    }
    case J::value_t::boolean:
      out.append(*value.get_ptr<const J::boolean_t*>() ? "true" : "false");
      return;
    case J::value_t::number_integer:
      out.append(std::to_string(*value.get_ptr<const J::number_integer_t*>()));
      return;
    case J::value_t::number_unsigned:
      out.append(std::to_string(*value.get_ptr<const J::number_unsigned_t*>()));
      return;
    case J::value_t::number_float: {
      const double x = *value.get_ptr<const J::number_float_t*>();
      if (!std::isfinite(x)) {
        out.append("null");
        return;
      }
      char buf[64];
      const char* e = nlohmann::detail::to_chars(buf, buf + sizeof buf, x);
      out.append(buf, static_cast<std::size_t>(e - buf));
      return;
    }
    case J::value_t::discarded:
      out.append("<discarded>");
      return;
    case J::value_t::null:
    default:
      out.append("null");
      return;
  }
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

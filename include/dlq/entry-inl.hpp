// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file entry-inl.hpp
/// The definitions of entry.hpp's non-template functions (see DLQ_INLINE in
/// dlq/detail/compiled.hpp): included by entry.hpp in header-only mode, compiled into the
/// library in compiled mode.
#pragma once

#include "dlq/entry.hpp"

namespace dlq {
namespace detail {

DLQ_INLINE void write_envelope(std::string& out, const envelope_input& in) {
  const Failure& f = *in.failure;
  const payload_shape shape = shape_of(in.payload);
  const bool as_json = shape != payload_shape::binary;
  if (!as_json && in.json_only) refuse_payload(in.queue, in.payload);
  out.reserve(out.size() + (as_json ? in.payload.size() : in.payload.size() / 3 * 4 + 4) +
              in.queue.size() + f.error.size() + in.worker.size() + 160);
  // payload_bytes: the byte length of original_payload's value as written, right before it,
  // and the id right after it — the layout whose payload span a server-side replay step can
  // prove from a few bytes (dlq/redis/scripts/replay_fast.hpp).
  const std::size_t encoded = as_json ? in.payload.size() : (in.payload.size() + 2) / 3 * 4 + 2;
  const std::size_t start = out.size();
  // The flags that change how the entry replays come first, so that a flagged entry never
  // starts with payload_bytes (what the fast step requires).
  out.push_back('{');
  if (in.parked) out.append("\"parked\":true,");
  if (shape == payload_shape::spaced) out.append("\"payload_whitespace\":true,");
  if (!as_json) out.append("\"payload_encoding\":\"base64\",");
  out.append("\"payload_bytes\":");
  out.append(std::to_string(encoded));
  out.append(",\"original_payload\":");
  if (as_json) {
    out.append(in.payload);
  } else {
    out.push_back('"');
    base64::encode(in.payload, out);
    out.push_back('"');
  }
  out.append(",\"id\":");
  json::append_string(out, in.id);
  out.append(",\"queue\":");
  json::append_string(out, in.queue);
  out.append(",\"error\":");
  json::append_string(out, f.error);
  out.append(",\"attempt\":");
  out.append(std::to_string(f.attempt));
  out.append(",\"worker\":");
  json::append_string(out, in.worker);
  out.append(",\"dead_lettered_at\":\"");
  iso_time::append(out, in.time);
  out.push_back('"');
  if (!f.error_type.empty()) {
    out.append(",\"error_type\":");
    json::append_string(out, f.error_type);
  }
  if (!f.job_id.empty()) {
    out.append(",\"job_id\":");
    json::append_string(out, f.job_id);
  }
  if (!f.context.is_null()) {
    out.append(",\"context\":");
    out.append(f.context.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  if (in.dead_letter_count > 0) {
    out.append(",\"dead_letter_count\":");
    out.append(std::to_string(in.dead_letter_count));
  }
  // envelope_bytes, last: the byte length of the whole envelope, its own digits and the
  // final '}' included — what lets the fast step prove in O(1) that an item is one whole
  // envelope as written (not cut off, not joined to another, not edited by a tool that
  // adds a member; dlq/redis/scripts/replay_fast.hpp).
  out.append(",\"envelope_bytes\":");
  const std::size_t fixed = out.size() - start + 1;  // with the final '}'
  std::size_t digits = 1;
  while (std::to_string(fixed + digits).size() != digits)
    ++digits;
  out.append(std::to_string(fixed + digits));
  out.push_back('}');
}

}  // namespace detail

DLQ_INLINE Entry parse_entry(std::string raw) {
  Entry e;
  detail::envelope_view v;
  if (!detail::view_envelope(raw, v)) {
    e.id = detail::derived_id(raw);
    e.id_derived = true;
    e.problem = detail::json::skip_value(raw.data(), raw.data() + raw.size(),
                                         detail::json::mode::lenient) != nullptr
                    ? "not a JSON object"
                    : "not valid JSON";
    e.raw = std::move(raw);
    return e;
  }
  e.id = detail::entry_id(v, raw, &e.id_derived);
  e.queue = detail::string_field(v.queue);
  e.error = detail::string_field(v.error);
  e.attempt = detail::int_field(v.attempt);
  e.worker = detail::string_field(v.worker);
  e.dead_lettered_at = detail::string_field(v.dead_lettered_at);
  if (!e.dead_lettered_at.empty())
    e.dead_lettered_time = detail::iso_time::parse(e.dead_lettered_at);
  e.error_type = detail::string_field(v.error_type);
  e.job_id = detail::string_field(v.job_id);
  if (!v.context.empty()) {
    if (detail::nests_deeper_than(v.context, detail::max_json_depth)) {
      e.context = std::string(v.context);
    } else {
      e.context = detail::parse_json_or_discarded<nlohmann::json>(v.context);
      if (e.context.is_discarded()) e.context = std::string(v.context);
    }
  }
  e.dead_letter_count = detail::int_field(v.dead_letter_count);
  e.parked = v.parked == "true";
  std::string scratch;
  std::string_view payload;
  if (detail::cut_payload(v, scratch, payload, e.problem)) {
    e.payload_encoding =
        v.payload_encoding.empty() ? PayloadEncoding::json : PayloadEncoding::base64;
    e.payload.assign(payload.data(), payload.size());
  }
  e.raw = std::move(raw);
  return e;
}

DLQ_INLINE Entry parse_entry_or_throw(std::string raw) {
  Entry e = parse_entry(std::move(raw));
  if (!e.ok())
    throw format_error(detail::message("entry", "entry " + e.id, e.problem,
                                       "the bytes are kept; inspect them with peek()"));
  return e;
}

}  // namespace dlq

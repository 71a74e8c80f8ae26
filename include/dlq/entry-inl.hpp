// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file entry-inl.hpp
/// The definitions of entry.hpp's non-template functions (see DLQ_INLINE in
/// dlq/detail/compiled.hpp): included by entry.hpp in header-only mode, compiled into the
/// library in compiled mode.
#pragma once

#include <charconv>
#include <cstring>

#include "dlq/entry.hpp"

namespace dlq {
namespace detail {

template <std::size_t N>
char* put_literal(char* p, const char (&text)[N]) noexcept {
  std::memcpy(p, text, N - 1);
  return p + N - 1;
}

/// Ends the envelope written so far at [base, p) with envelope_bytes, its last member: the
/// byte length of the whole envelope, its own digits and the final '}' included — what lets
/// the fast step prove in O(1) that an item is one whole envelope as written (not cut off,
/// not joined to another, not edited by a tool that adds a member;
/// dlq/redis/scripts/replay_fast.hpp). Returns the position after the '}'.
inline char* put_envelope_bytes(const char* base, char* p) noexcept {
  p = put_literal(p, ",\"envelope_bytes\":");
  const std::size_t fixed = static_cast<std::size_t>(p - base) + 1;  // with the final '}'
  std::size_t digits = 1;
  for (std::size_t bound = 10; fixed + digits >= bound; bound *= 10)
    ++digits;
  p = std::to_chars(p, p + 20, fixed + digits).ptr;
  *p++ = '}';
  return p;
}

DLQ_INLINE void write_envelope(std::string& out, const envelope_input& in) {
  const Failure& f = *in.failure;
  const payload_shape shape = shape_of(in.payload);
  const bool as_json = shape != payload_shape::binary;
  if (!as_json && in.json_only) refuse_payload(in.queue, in.payload);
  // payload_bytes: the byte length of original_payload's value as written, right before it,
  // and the id right after it — the layout whose payload span a server-side replay step can
  // prove from a few bytes (dlq/redis/scripts/replay_fast.hpp).
  const std::size_t encoded = as_json ? in.payload.size() : (in.payload.size() + 2) / 3 * 4 + 2;
  std::string context;
  if (!f.context.is_null())  // = dump(-1, ' ', false, replace), without nlohmann's serializer
    append_dumped_value(context, f.context);
  // One pass through a pointer into `out`, grown once by the most the envelope can take
  // (member names, numbers and flags fit in 512 bytes; every string at its longest escaped
  // form), then cut to what was written.
  const std::size_t start = out.size();
  out.resize(start + 512 + encoded + context.size() + json::max_string_size(in.id.size()) +
             json::max_string_size(in.queue.size()) + json::max_string_size(f.error.size()) +
             json::max_string_size(in.worker.size()) + json::max_string_size(f.error_type.size()) +
             json::max_string_size(f.job_id.size()));
  char* const base = &out[start];
  char* p = base;
  // The flags that change how the entry replays come first, so that a flagged entry never
  // starts with payload_bytes (what the fast step requires).
  *p++ = '{';
  if (in.parked) p = put_literal(p, "\"parked\":true,");
  if (shape == payload_shape::spaced) p = put_literal(p, "\"payload_whitespace\":true,");
  if (!as_json) p = put_literal(p, "\"payload_encoding\":\"base64\",");
  p = put_literal(p, "\"payload_bytes\":");
  p = std::to_chars(p, p + 20, encoded).ptr;
  p = put_literal(p, ",\"original_payload\":");
  if (as_json) {
    std::memcpy(p, in.payload.data(), in.payload.size());
    p += in.payload.size();
  } else {
    *p++ = '"';
    p = base64::encode_to(in.payload, p);
    *p++ = '"';
  }
  p = put_literal(p, ",\"id\":");
  p = json::write_string(p, in.id);
  p = put_literal(p, ",\"queue\":");
  p = json::write_string(p, in.queue);
  p = put_literal(p, ",\"error\":");
  p = json::write_string(p, f.error);
  p = put_literal(p, ",\"attempt\":");
  p = std::to_chars(p, p + 20, f.attempt).ptr;
  p = put_literal(p, ",\"worker\":");
  p = json::write_string(p, in.worker);
  p = put_literal(p, ",\"dead_lettered_at\":\"");
  iso_time::write(p, in.time);
  p += 32;
  *p++ = '"';
  if (!f.error_type.empty()) {
    p = put_literal(p, ",\"error_type\":");
    p = json::write_string(p, f.error_type);
  }
  if (!f.job_id.empty()) {
    p = put_literal(p, ",\"job_id\":");
    p = json::write_string(p, f.job_id);
  }
  if (!f.context.is_null()) {
    p = put_literal(p, ",\"context\":");
    std::memcpy(p, context.data(), context.size());
    p += context.size();
  }
  if (in.dead_letter_count > 0) {
    p = put_literal(p, ",\"dead_letter_count\":");
    p = std::to_chars(p, p + 20, in.dead_letter_count).ptr;
  }
  p = put_envelope_bytes(base, p);
  out.resize(start + static_cast<std::size_t>(p - base));
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
      e.context = detail::read_json_dom<nlohmann::json>(v.context);
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

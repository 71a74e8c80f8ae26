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

// write_envelope() by appending, field by field: the path for fields too long for
// write_envelope's stack buffer (the same bytes).
inline void write_envelope_appending(std::string& out, const envelope_input& in,
                                     payload_shape shape) {
  const Failure& f = *in.failure;
  const bool as_json = shape != payload_shape::binary;
  out.reserve(out.size() + (as_json ? in.payload.size() : in.payload.size() / 3 * 4 + 4) +
              in.queue.size() + f.error.size() + in.worker.size() + 160);
  // payload_bytes: the byte length of original_payload's value as written, right before it,
  // and the id right after it — the layout whose payload span a server-side replay step can
  // prove from a few bytes (dlq/redis/scripts/replay_fast.hpp).
  const std::size_t encoded = as_json ? in.payload.size() : (in.payload.size() + 2) / 3 * 4 + 2;
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
  out.push_back('}');
}

template <std::size_t N>
char* put_literal(char* p, const char (&text)[N]) noexcept {
  std::memcpy(p, text, N - 1);
  return p + N - 1;
}

DLQ_INLINE void write_envelope(std::string& out, const envelope_input& in) {
  const Failure& f = *in.failure;
  const payload_shape shape = shape_of(in.payload);
  const bool as_json = shape != payload_shape::binary;
  if (!as_json && in.json_only) refuse_payload(in.queue, in.payload);
  // The fields before and after the payload are written into stack buffers through a
  // pointer (their longest escaped form fits), then appended with the payload to `out`,
  // reserved once to the exact size. Longer fields take the appending path.
  constexpr std::size_t tail_room = 2048;
  const std::size_t fields = in.id.size() + in.queue.size() + f.error.size() + in.worker.size() +
                             f.error_type.size() + f.job_id.size();
  if (fields > (tail_room - 256) / 6) return write_envelope_appending(out, in, shape);
  // payload_bytes: the byte length of original_payload's value as written, right before it,
  // and the id right after it — the layout whose payload span a server-side replay step can
  // prove from a few bytes (dlq/redis/scripts/replay_fast.hpp).
  const std::size_t encoded = as_json ? in.payload.size() : (in.payload.size() + 2) / 3 * 4 + 2;
  // The flags that change how the entry replays come first, so that a flagged entry never
  // starts with payload_bytes (what the fast step requires).
  char head[160];
  char* h = head;
  *h++ = '{';
  if (in.parked) h = put_literal(h, "\"parked\":true,");
  if (shape == payload_shape::spaced) h = put_literal(h, "\"payload_whitespace\":true,");
  if (!as_json) h = put_literal(h, "\"payload_encoding\":\"base64\",");
  h = put_literal(h, "\"payload_bytes\":");
  h = std::to_chars(h, head + sizeof head, encoded).ptr;
  h = put_literal(h, ",\"original_payload\":");
  char tail[tail_room];
  char* t = tail;
  t = put_literal(t, ",\"id\":");
  t = json::write_string(t, in.id);
  t = put_literal(t, ",\"queue\":");
  t = json::write_string(t, in.queue);
  t = put_literal(t, ",\"error\":");
  t = json::write_string(t, f.error);
  t = put_literal(t, ",\"attempt\":");
  t = std::to_chars(t, tail + sizeof tail, f.attempt).ptr;
  t = put_literal(t, ",\"worker\":");
  t = json::write_string(t, in.worker);
  t = put_literal(t, ",\"dead_lettered_at\":\"");
  iso_time::write(t, in.time);
  t += 32;
  *t++ = '"';
  if (!f.error_type.empty()) {
    t = put_literal(t, ",\"error_type\":");
    t = json::write_string(t, f.error_type);
  }
  if (!f.job_id.empty()) {
    t = put_literal(t, ",\"job_id\":");
    t = json::write_string(t, f.job_id);
  }
  std::string context;
  if (!f.context.is_null())
    context = f.context.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  char end[64];
  char* e = end;
  if (in.dead_letter_count > 0) {
    e = put_literal(e, ",\"dead_letter_count\":");
    e = std::to_chars(e, end + sizeof end, in.dead_letter_count).ptr;
  }
  *e++ = '}';
  const auto size = [](const char* from, const char* to) {
    return static_cast<std::size_t>(to - from);
  };
  out.reserve(out.size() + size(head, h) + encoded + size(tail, t) +
              (f.context.is_null() ? 0 : 11 + context.size()) + size(end, e));
  out.append(head, size(head, h));
  if (as_json) {
    out.append(in.payload);
  } else {
    out.push_back('"');
    const std::size_t at = out.size();
    out.resize(at + encoded - 2);
    base64::encode_to(in.payload, &out[at]);
    out.push_back('"');
  }
  out.append(tail, size(tail, t));
  if (!f.context.is_null()) {
    out.append(",\"context\":");
    out.append(context);
  }
  out.append(end, size(end, e));
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

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file entry.hpp
/// The dead-letter entry and its JSON wire format.
///
/// An entry is one JSON object. The six fields of the Python seed keep their names and types,
/// so entries written by either side are read by the other:
///
///     {"payload_bytes":12,"original_payload":{"order":42},
///      "id":"019acb7e-1c2d-7000-8a4f-3e5b6c7d8e9f","queue":"orders","error":"payment timeout",
///      "attempt":3,"worker":"worker-7","dead_lettered_at":"2026-11-30T03:32:19.123456+00:00",
///      "envelope_bytes":246}
///
/// Fields of dlq's own, all optional on read (absent = default):
///   "payload_bytes"      the byte length of original_payload's value as written; dlq
///                        writes it right before original_payload, and id right after it,
///                        preceded only by the flags parked, payload_whitespace and
///                        payload_encoding when set — so that a server-side replay step can
///                        find the payload of an unflagged entry from a few bytes
///                        (dlq/redis/scripts/replay_fast.hpp). Readers ignore it: field order
///                        and an extra field change nothing for a JSON reader
///   "envelope_bytes"     the byte length of the whole envelope as written (its own digits
///                        and the final '}' included); dlq writes it last, so that the same
///                        step proves in O(1) that an item is one whole envelope (not cut
///                        off, not joined to another, not re-written with an added member).
///                        Readers ignore it; a tool that re-writes an entry drops it, never
///                        recomputes it (a flag appended before a recomputed one is not seen
///                        by that step)
///   "id"                 unique, time-ordered UUIDv7; entries without one (seed-written) get
///                        an id derived from their bytes ("raw-<16 hex>")
///   "error_type"         the kind of failure (e.g. an exception type)
///   "job_id"             the caller's job id
///   "context"            a JSON object of free-form fields
///   "payload_encoding"   "base64" when original_payload is a base64 string of raw bytes;
///                        absent when original_payload is the JSON payload itself
///   "payload_whitespace" true when the JSON payload had whitespace around it, kept in the
///                        envelope around the value (between the ':' and the next ',')
///   "dead_letter_count"  how many times this job has been dead-lettered (poison guard)
///   "parked"             true when the poison guard parked the entry
/// Fields dlq does not know are kept: entries are never re-serialized, only spliced.
///
/// Payloads are byte-exact. A payload that is one valid JSON value (UTF-8), optionally with
/// whitespace around it (`{"a":1}\n`), is embedded verbatim — numbers keep every digit, `[]`
/// stays `[]`, key order, spacing and the surrounding whitespace are untouched — and replay
/// cuts those bytes back out (with "payload_whitespace":true, the whitespace around the value
/// too). Any other payload (binary, protobuf, text) is stored as a base64 string with
/// "payload_encoding":"base64" and decoded on replay. The Python seed's replay re-serializes
/// original_payload instead (json.dumps): it replays an embedded payload as the same JSON
/// value, but a base64 payload as a string — hence Payloads::json_only, which refuses a
/// payload that is not JSON instead of writing such an entry.
///
/// dead_lettered_at is ISO-8601 UTC as Python's isoformat() writes it; on read a fraction is
/// optional and the zone may be "+00:00", "Z", another offset, or absent (UTC).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "dlq/detail/base64.hpp"
#include "dlq/detail/compiled.hpp"
#include "dlq/detail/id.hpp"
#include "dlq/detail/json_dom.hpp"
#include "dlq/detail/json_scan.hpp"
#include "dlq/detail/time.hpp"
#include "dlq/errors.hpp"

namespace dlq {

/// How a payload is carried in the envelope.
enum class PayloadEncoding : unsigned char {
  json,   ///< original_payload is the payload's JSON text, verbatim
  base64  ///< original_payload is a base64 string of the payload bytes
};

/// The longest job id (Failure::job_id) dlq accepts, in bytes; a send with a longer one is
/// refused with dlq::invalid_argument on every backend. A job id is the entry's id on the
/// key-value stores and the poison guard's counter key, and PostgreSQL's btree indexes take
/// at most 2704 bytes an entry: 1024 leaves room for a 1024-byte queue name beside it
/// (dlq::max_queue_name_bytes), and is far beyond any real job id (hash a longer one).
inline constexpr std::size_t max_job_id_bytes = 1024;

/// What went wrong with a job: everything send_to_dlq records besides the payload.
struct Failure {
  std::string error;         ///< the error message (the seed's `error`)
  std::int64_t attempt = 1;  ///< attempts made before giving up (the seed's default: 1)
  std::string worker;        ///< which worker gave up; empty = the queue's default worker
  std::string error_type;    ///< optional kind of error, e.g. "TimeoutError"; empty = none
  std::string job_id;        ///< optional caller job id; empty = none; at most
                             ///< dlq::max_job_id_bytes
  nlohmann::json context;    ///< optional JSON object of free-form fields; null = none;
                             ///< a discarded value in it (a failed parse) is refused
};

/// One stored dead-letter entry, as read back.
///
/// An entry that cannot be read (not JSON, not an object, no payload, undecodable payload)
/// still comes back: `ok()` is false, `problem` says why, `raw` holds the bytes and `id`
/// their derived id. Such entries are skipped by replay and moved to the corrupt list.
struct Entry {
  std::string id;                ///< the entry id (stored, or derived from the bytes)
  bool id_derived = false;       ///< true when the entry had no "id" and `id` was derived
  std::string queue;             ///< the source queue recorded in the entry
  std::string error;             ///< the error message
  std::int64_t attempt = 0;      ///< attempts made (0 when absent or not an integer)
  std::string worker;            ///< the worker that gave up
  std::string dead_lettered_at;  ///< the timestamp exactly as stored
  /// dead_lettered_at parsed; nullopt when absent or unparseable.
  std::optional<std::chrono::system_clock::time_point> dead_lettered_time;
  std::string error_type;  ///< "" when absent
  std::string job_id;      ///< "" when absent
  /// null when absent; a JSON string of the stored text when it does not parse or nests
  /// deeper than 256 levels (detail::max_json_depth).
  nlohmann::json context;
  std::int64_t dead_letter_count = 0;  ///< times this job was dead-lettered (0 = not tracked)
  bool parked = false;                 ///< parked by the poison-loop guard
  std::string payload;                 ///< the payload bytes, exactly as given to send_to_dlq
  PayloadEncoding payload_encoding = PayloadEncoding::json;  ///< how it was stored
  std::string problem;  ///< why the entry is unreadable; empty when ok()
  std::string raw;      ///< the stored bytes

  /// True when the entry is readable and can be replayed.
  bool ok() const noexcept { return problem.empty(); }

  /// The payload parsed as JSON (a JSON payload), or a JSON string (a base64 payload: the
  /// base64 text). Returns a discarded value when the payload does not parse or nests
  /// deeper than 256 levels (detail::max_json_depth: printing it would overflow the stack).
  /// (A template only so that a translation unit that never calls it does not compile
  /// nlohmann's parser; Json is always nlohmann::json.)
  template <class Json = nlohmann::json>
  Json payload_json() const {
    if (payload_encoding == PayloadEncoding::json) {
      if (detail::nests_deeper_than(payload, detail::max_json_depth))
        return Json(Json::value_t::discarded);
      return Json::parse(payload, nullptr, false);
    }
    return detail::base64::encode(payload);
  }

  /// All stored fields as one JSON object, in stored order, with "id" added when it was
  /// derived. What it shows agrees with ok():
  ///   - a readable entry shows its fields. A value strict JSON cannot hold (NaN or Infinity,
  ///     which Python's json.dumps writes; a lone surrogate escape such as "\ude00") is shown
  ///     as a string of its raw text, and a "note" names those fields;
  ///   - a readable entry nested deeper than 256 levels (detail::max_json_depth, which would
  ///     overflow the stack of dump()) gives {"id", "note", "raw" or "raw_base64"};
  ///   - a corrupt entry gives {"id", "problem", "raw" (text) or "raw_base64"}.
  /// Never throws for bad data, and the result always dumps (valid UTF-8 throughout).
  /// (A template only so that a translation unit that never calls it does not compile
  /// nlohmann's parser; Json is always nlohmann::ordered_json.)
  template <class Json = nlohmann::ordered_json>
  Json to_json() const {
    const bool too_deep = ok() && detail::nests_deeper_than(raw, detail::max_json_depth);
    if (ok() && !too_deep) {
      auto j = Json::parse(raw, nullptr, false);
      if (j.is_object()) {
        if (!j.contains("id")) j["id"] = id;
        return j;
      }
      if (auto fields = fields_as_json<Json>()) return std::move(*fields);
    }
    Json j;
    j["id"] = id;
    if (ok())
      j["note"] = too_deep
                      ? "nested deeper than " + std::to_string(detail::max_json_depth) +
                            " levels: shown as raw text (the entry is readable and replayable)"
                      : std::string("shown as raw text (the entry is readable and replayable)");
    else
      j["problem"] = problem;
    if (detail::json::is_valid_utf8(raw)) {
      j["raw"] = raw;
      return j;
    }
    j["raw_base64"] = detail::base64::encode(raw);
    return j;
  }

 private:
  /// The fields of a readable entry one by one (to_json when the whole does not parse as
  /// strict JSON): each value that nlohmann cannot parse is shown as a string of its text.
  template <class Json>
  std::optional<Json> fields_as_json() const {
    Json out = Json(Json::value_t::object);
    std::string as_text;  // the fields shown as raw text, for the note
    std::string key_buffer;
    bool clean = true;
    const bool whole = detail::json::scan_object(
        raw, detail::json::mode::lenient,
        [&](std::string_view key, bool escaped, std::string_view value) {
          std::string k(key);
          if (escaped && detail::json::unescape(key, key_buffer)) k = key_buffer;
          if (!detail::json::is_valid_utf8(k) || !detail::json::is_valid_utf8(value)) {
            clean = false;
            return;
          }
          auto v = Json::parse(value, nullptr, false);
          if (v.is_discarded()) {
            v = std::string(value);
            if (!as_text.empty()) as_text += ", ";
            as_text += k;
          }
          out[k] = std::move(v);
        });
    if (!whole || !clean) return std::nullopt;
    if (!out.contains("id")) out["id"] = id;
    if (!as_text.empty())
      out[out.contains("note") ? "dlq_note" : "note"] =
          "shown as raw text: " + as_text +
          " (NaN, Infinity or a lone surrogate escape, which strict JSON cannot hold; the entry "
          "is readable and replayable byte-exact)";
    return out;
  }
};

/// What DeadLetterQueue::peek_bounded read: entries of one read bounded by bytes (see
/// dlq::BoundedRange).
struct PeekWindow {
  std::vector<Entry> entries;  ///< the entries read, oldest first
  /// The read stopped at its byte bound with more items after it: a short read that is not
  /// the end of the list.
  bool capped = false;
};

namespace detail {

/// Byte spans of an envelope's known fields (values as stored, strings with their quotes).
/// Empty span = field absent.
struct envelope_view {
  std::string_view payload;
  std::string_view queue;
  std::string_view error;
  std::string_view attempt;
  std::string_view worker;
  std::string_view dead_lettered_at;
  std::string_view id;
  std::string_view error_type;
  std::string_view job_id;
  std::string_view context;
  std::string_view payload_encoding;
  std::string_view payload_whitespace;
  std::string_view dead_letter_count;
  std::string_view parked;
};

/// Scans `raw` into `view`. False when `raw` is not exactly one JSON object. Duplicate keys:
/// the last one wins, as in Python's json.loads.
inline bool view_envelope(std::string_view raw, envelope_view& view) {
  view = envelope_view{};
  std::string key_buffer;
  return json::scan_object(raw, json::mode::lenient,
                           [&](std::string_view key, bool escaped, std::string_view value) {
                             if (escaped) {
                               if (!json::unescape(key, key_buffer)) return;
                               key = key_buffer;
                             }
                             switch (key.size()) {
                               case 2:
                                 if (key == "id") view.id = value;
                                 break;
                               case 5:
                                 if (key == "queue")
                                   view.queue = value;
                                 else if (key == "error")
                                   view.error = value;
                                 break;
                               case 6:
                                 if (key == "worker")
                                   view.worker = value;
                                 else if (key == "job_id")
                                   view.job_id = value;
                                 else if (key == "parked")
                                   view.parked = value;
                                 break;
                               case 7:
                                 if (key == "attempt")
                                   view.attempt = value;
                                 else if (key == "context")
                                   view.context = value;
                                 break;
                               case 10:
                                 if (key == "error_type") view.error_type = value;
                                 break;
                               case 16:
                                 if (key == "original_payload")
                                   view.payload = value;
                                 else if (key == "dead_lettered_at")
                                   view.dead_lettered_at = value;
                                 else if (key == "payload_encoding")
                                   view.payload_encoding = value;
                                 break;
                               case 17:
                                 if (key == "dead_letter_count") view.dead_letter_count = value;
                                 break;
                               case 18:
                                 if (key == "payload_whitespace") view.payload_whitespace = value;
                                 break;
                               default:
                                 break;
                             }
                           });
}

/// Decodes a JSON string span, or returns "" when the span is absent or not a string.
inline std::string string_field(std::string_view span) {
  std::string out;
  if (!json::string_value(span, out)) out.clear();
  return out;
}

/// Parses an integer span (also "3.0"); `fallback` when absent or not an integer.
inline std::int64_t int_field(std::string_view span, std::int64_t fallback = 0) {
  if (span.empty()) return fallback;
  bool neg = false;
  std::size_t i = 0;
  if (span[0] == '-') {
    neg = true;
    i = 1;
  }
  if (i == span.size()) return fallback;
  std::int64_t v = 0;
  for (; i < span.size(); ++i) {
    const char c = span[i];
    if (c == '.') {
      for (std::size_t k = i + 1; k < span.size(); ++k)
        if (span[k] != '0') return fallback;
      break;
    }
    if (c < '0' || c > '9') return fallback;
    if (v > (INT64_MAX - (c - '0')) / 10) return fallback;
    v = v * 10 + (c - '0');
  }
  return neg ? -v : v;
}

/// The entry id: the stored "id" string, or one derived from the bytes.
inline std::string entry_id(const envelope_view& view, std::string_view raw,
                            bool* derived = nullptr) {
  std::string id;
  if (!view.id.empty() && json::string_value(view.id, id) && !id.empty()) {
    if (derived) *derived = false;
    return id;
  }
  if (derived) *derived = true;
  return derived_id(raw);
}

/// Finds the payload bytes to push back on replay. On success `payload` views either `raw`
/// (a JSON payload, verbatim; with "payload_whitespace":true the whitespace around the value
/// too) or `scratch` (a decoded base64 payload). On failure returns false and sets `problem`.
/// `view` must come from view_envelope on the bytes `payload` is to view.
inline bool cut_payload(const envelope_view& view, std::string& scratch, std::string_view& payload,
                        std::string& problem) {
  if (view.payload.empty()) {
    problem = "no \"original_payload\" field";
    return false;
  }
  if (view.payload_encoding.empty()) {
    payload = view.payload;
    if (view.payload_whitespace == "true") {
      // The value sits inside a validated object: a ':' comes before it and a ',' or '}'
      // after it, so both walks stop inside the stored bytes.
      const char* begin = payload.data();
      const char* end = begin + payload.size();
      while (json::is_ws(begin[-1]))
        --begin;
      while (json::is_ws(*end))
        ++end;
      payload = std::string_view(begin, static_cast<std::size_t>(end - begin));
    }
    return true;
  }
  if (view.payload_encoding != "\"base64\"") {
    problem = "unknown payload_encoding " + std::string(view.payload_encoding) +
              " (written by a newer dlq?)";
    return false;
  }
  std::string text;
  if (!json::string_value(view.payload, text) || !base64::decode(text, scratch)) {
    problem = "payload_encoding is base64 but original_payload is not a base64 string";
    return false;
  }
  payload = scratch;
  return true;
}

/// Everything needed to write one envelope.
struct envelope_input {
  std::string_view queue;
  std::string_view payload;
  const Failure* failure = nullptr;
  std::string_view worker;  // resolved worker name
  std::string_view id;
  std::chrono::system_clock::time_point time;
  std::int64_t dead_letter_count = 0;  // 0 = do not write
  bool parked = false;
  bool json_only = false;  // refuse a payload that is not JSON (Payloads::json_only)
};

/// How write_envelope embeds `payload`: verbatim (`json`), verbatim with whitespace around
/// the value (`spaced`), or as base64 (`binary`).
enum class payload_shape : unsigned char { json, spaced, binary };

/// The shape `payload` is written in (see write_envelope).
inline payload_shape shape_of(std::string_view payload) {
  if (json::is_exact_value(payload, json::mode::strict)) return payload_shape::json;
  std::size_t b = 0;
  std::size_t e = payload.size();
  while (b < e && json::is_ws(payload[b]))
    ++b;
  while (e > b && json::is_ws(payload[e - 1]))
    --e;
  if (b < e && (b > 0 || e < payload.size()) &&
      json::is_exact_value(payload.substr(b, e - b), json::mode::strict))
    return payload_shape::spaced;
  return payload_shape::binary;
}

/// Throws the dlq::invalid_argument that Payloads::json_only gives a payload that is not JSON.
[[noreturn]] inline void refuse_payload(std::string_view queue, std::string_view payload) {
  throw invalid_argument(message(
      "send", "queue '" + std::string(queue) + "'",
      "the payload (" + std::to_string(payload.size()) +
          " bytes) is not JSON and Options::payloads is Payloads::json_only",
      "send JSON payloads on keys shared with the Python service (it would replay a base64 "
      "payload as a string), or set Options::payloads to Payloads::any; nothing was stored"));
}

/// Checks `payload` before anything is stored (the front end, for Payloads::json_only).
/// @throws dlq::invalid_argument when `json_only` is set and the payload is not JSON.
inline void check_payload(std::string_view queue, std::string_view payload, bool json_only) {
  if (json_only && shape_of(payload) == payload_shape::binary) refuse_payload(queue, payload);
}

/// Appends the envelope for `in` to `out`: compact JSON; first the flags "parked",
/// "payload_whitespace", "payload_encoding" (each only when set), then payload_bytes,
/// original_payload and id, then the other fields, and envelope_bytes (the envelope's byte
/// length) last.
/// @throws dlq::invalid_argument when in.json_only is set and the payload is not JSON
///         (nothing is appended).
void write_envelope(std::string& out, const envelope_input& in);

}  // namespace detail

/// Reads one stored item into an Entry. Never throws for bad data: an unreadable item gives
/// an Entry with ok() == false and `problem` set (see Entry).
Entry parse_entry(std::string raw);

/// Like parse_entry, but throws dlq::format_error (saying why) when the item is unreadable.
Entry parse_entry_or_throw(std::string raw);

}  // namespace dlq

#if defined(DLQ_HEADER_ONLY)
#include "dlq/entry-inl.hpp"
#endif

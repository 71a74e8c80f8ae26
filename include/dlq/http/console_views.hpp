// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file http/console_views.hpp
/// The JSON shapes of the console's answers (docs/console.md): errors, /api/info, a queue's
/// statistics, the rows of /api/entries and /api/corrupt, /api/entry, a replay's report.
/// I/O-free functions of the values they show; dlq::http::Console (dlq/http/console.hpp)
/// sends them.
#pragma once

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <dlq/detail/base64.hpp>
#include <dlq/detail/json_scan.hpp>
#include <dlq/detail/time.hpp>
#include <dlq/dlq.hpp>
#include <dlq/http/backend.hpp>
#include <dlq/http/console_options.hpp>
#include <dlq/redact.hpp>
#include <nlohmann/json.hpp>

namespace dlq {
namespace http {
namespace detail {

// --- errors ------------------------------------------------------------------------------
// A refusal or failure of one request: its HTTP status and the JSON error it answers with.
struct http_error {
  int status;
  std::string code;
  std::string message;
};

inline http_error bad(std::string code, const std::string& where, const std::string& what,
                      const std::string& hint, int status = 400) {
  return {status, std::move(code), dlq::detail::message("http", where, what, hint)};
}

// `s` for a message: the credentials of its URLs masked (dlq/redact.hpp) on the whole text
// first, control characters shown as '?', then cut to 200 bytes with "…" appended. Masking
// before the cut: a cut inside a URL would drop the '@' the masking needs and show part of
// the password. The cut moves back to a UTF-8 sequence boundary and to before a run of '*'
// it would split, so a mask is shown whole or not at all.
// `s` for one line of a log or a message: control characters as '?' FIRST, then URL
// credentials masked — the other order let a raw "\n" or "\r" inside a password end the
// masking there and show the rest of the password.
inline std::string masked_line(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return redact_secrets(s);
}

inline std::string printable(std::string_view s) {
  constexpr std::size_t limit = 200;
  std::string out = masked_line(std::string(s));
  if (out.size() <= limit) return out;
  std::size_t n = limit;
  while (n > 0 && (static_cast<unsigned char>(out[n]) & 0xC0) == 0x80)
    --n;
  while (n > 0 && out[n] == '*' && out[n - 1] == '*')
    --n;
  out.resize(n);
  return out + "…";
}

inline std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

inline void send_json(httplib::Response& r, int status, const nlohmann::json& j) {
  r.status = status;
  r.set_content(dump(j) + "\n", "application/json; charset=utf-8");
}

inline void send_error(httplib::Response& r, const http_error& e) {
  send_json(r, e.status, {{"error", {{"code", e.code}, {"message", masked_line(e.message)}}}});
  if (e.status == 401) r.set_header("WWW-Authenticate", "Bearer realm=\"dlq\"");
}

// --- answers --------------------------------------------------------------------------------
inline nlohmann::json info_json(const ConsoleOptions& opts, const Caller& who) {
  return {{"read_only", opts.read_only},
          {"auth", !opts.token.empty() || !opts.tokens.empty()},
          {"caller",
           {{"name", who.name.empty() ? nlohmann::json(nullptr) : nlohmann::json(who.name)},
            {"role", role_name(who.role)}}},
          {"version", std::to_string(DLQ_VERSION_MAJOR) + "." + std::to_string(DLQ_VERSION_MINOR) +
                          "." + std::to_string(DLQ_VERSION_PATCH)},
          {"limits",
           {{"max_page", opts.max_page},
            {"max_ids", opts.max_ids},
            {"max_examined", opts.max_examined},
            {"max_operations", opts.max_operations},
            {"max_body_bytes", opts.max_body_bytes},
            {"max_listed_queues", opts.max_listed_queues}}}};
}

inline double age_seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::system_clock::now() - t).count();
}

inline nlohmann::json stats_json(const QueueStats& s) {
  nlohmann::json j = {{"name", s.name}, {"dead", s.dead}, {"corrupt", s.corrupt}};
  j["waiting"] = s.waiting ? nlohmann::json(*s.waiting) : nlohmann::json(nullptr);
  j["oldest_at"] = s.oldest_at.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.oldest_at);
  j["oldest_age_seconds"] =
      s.oldest_time ? nlohmann::json(age_seconds(*s.oldest_time)) : nlohmann::json(nullptr);
  return j;
}

inline std::string preview(const Entry& e) {
  const std::string& bytes = e.ok() ? e.payload : e.raw;
  std::string out;
  const std::size_t n = std::min<std::size_t>(bytes.size(), 160);
  std::string_view head(bytes.data(), n);
  // keep whole UTF-8 sequences: cut back to a valid prefix
  while (!head.empty() && !dlq::detail::json::is_valid_utf8(head))
    head.remove_suffix(1);
  if (head.size() + 4 < n || head.empty()) {  // binary: printable ASCII, '.' elsewhere
    for (std::size_t i = 0; i < n; ++i) {
      const auto c = static_cast<unsigned char>(bytes[i]);
      out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '.';
    }
  } else {
    for (const char c : head)
      out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  }
  if (bytes.size() > n) out += "…";
  return out;
}

// Text fields of a row of /api/entries or /api/corrupt are cut to this many bytes (the
// entry's own answer shows up to max_payload_view of each).
constexpr std::size_t list_field_bytes = 1024;

// `text` cut to at most `limit` bytes at a UTF-8 sequence boundary, with "…" appended when
// cut; `cut` is set then.
inline std::string cut_text(std::string_view text, std::size_t limit, bool& cut) {
  if (text.size() <= limit) return std::string(text);
  cut = true;
  std::size_t n = limit;
  for (int back = 0; back < 3 && n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80;
       ++back)
    --n;
  return std::string(text.substr(0, n)) + "…";
}

// The row of an entry; each text field cut to `limit` bytes ("…" appended), the names of
// the cut fields added to `cut` (may be null).
inline nlohmann::json summary_json(const Entry& e, std::size_t limit = list_field_bytes,
                                   nlohmann::json* cut = nullptr) {
  const auto text = [&](const char* name, const std::string& value) {
    bool was_cut = false;
    std::string shown = cut_text(value, limit, was_cut);
    if (was_cut && cut) cut->push_back(name);
    return shown;
  };
  nlohmann::json j = {{"id", text("id", e.id)}, {"ok", e.ok()}};
  if (!e.ok()) {
    j["problem"] = text("problem", e.problem);
    j["size"] = e.raw.size();
    j["preview"] = preview(e);
    return j;
  }
  j["error"] = text("error", e.error);
  j["error_type"] = text("error_type", e.error_type);
  j["worker"] = text("worker", e.worker);
  j["job_id"] = text("job_id", e.job_id);
  j["attempt"] = e.attempt;
  j["queue"] = text("queue", e.queue);
  j["dead_lettered_at"] = text("dead_lettered_at", e.dead_lettered_at);
  j["age_seconds"] = e.dead_lettered_time ? nlohmann::json(age_seconds(*e.dead_lettered_time))
                                          : nlohmann::json(nullptr);
  j["parked"] = e.parked;
  j["size"] = e.payload.size();
  j["preview"] = preview(e);
  return j;
}

inline std::string hex_dump(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (std::size_t off = 0; off < bytes.size(); off += 16) {
    char addr[32];
    std::snprintf(addr, sizeof addr, "%08zx  ", off);
    out += addr;
    std::string text;
    for (std::size_t i = 0; i < 16; ++i) {
      if (off + i < bytes.size()) {
        const auto c = static_cast<unsigned char>(bytes[off + i]);
        out += digits[c >> 4];
        out += digits[c & 15];
        out += ' ';
        text += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '.';
      } else {
        out += "   ";
      }
      if (i == 7) out += ' ';
    }
    out += " |" + text + "|\n";
  }
  return out;
}

// Lays valid JSON text out on lines, two spaces per level, changing only the whitespace
// between tokens: keys keep their stored order and every token its bytes (2.50, 3e2 and
// \u00e9 stay as stored), which is the byte-exact promise a re-dump would break.
// Stops once the text laid out exceeds `limit` bytes (the caller cuts it there): indentation
// grows with the depth, so a payload nested d deep lays out to about 2*d*d bytes (round 11
// of issue 27: 20 KB nested 10,000 deep made 200 MB, 256 KiB would make 34 GB).
inline std::string indent_json(std::string_view text, std::size_t limit = std::string::npos) {
  std::string out;
  out.reserve(std::min(limit, text.size() + text.size() / 4));
  std::size_t depth = 0;
  const auto newline = [&] { out += '\n'; out.append(2 * depth, ' '); };
  const auto space = [](char x) { return x == ' ' || x == '\t' || x == '\n' || x == '\r'; };
  for (std::size_t i = 0; i < text.size() && out.size() <= limit; ++i) {
    const char c = text[i];
    if (c == '"') {  // a string: copied as is, up to its unescaped closing quote
      const std::size_t start = i++;
      while (i < text.size() && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
      out.append(text.substr(start, i - start + 1));
    } else if (c == '{' || c == '[') {
      std::size_t k = i + 1;
      while (k < text.size() && space(text[k])) ++k;
      if (k < text.size() && (text[k] == '}' || text[k] == ']')) {  // empty: {} or []
        out += c;
        out += text[k];
        i = k;
      } else {
        out += c;
        ++depth;
        newline();
      }
    } else if (c == '}' || c == ']') {
      depth = depth > 0 ? depth - 1 : 0;
      newline();
      out += c;
    } else if (c == ',') {
      out += c;
      newline();
    } else if (c == ':') {
      out += ": ";
    } else if (!space(c)) {
      out += c;
    }
  }
  return out;
}

// /api/entry: every field within max_payload_view (see ConsoleOptions::max_payload_view).
// Nothing here copies a whole large entry: the envelope is parsed and pretty-printed only
// when it is within the limit, the payload only when it is shown whole.
inline nlohmann::json full_json(const Entry& e, std::size_t max_payload_view) {
  const std::size_t view = std::max<std::size_t>(max_payload_view, 64);
  nlohmann::json cut_fields = nlohmann::json::array();
  nlohmann::json j = summary_json(e, view, &cut_fields);
  const std::string& bytes = e.ok() ? e.payload : e.raw;
  const bool cut = bytes.size() > view;
  const std::string_view shown(bytes.data(), cut ? view : bytes.size());
  if (cut) cut_fields.push_back("payload");
  j["truncated"] = cut;
  j["payload_base64"] = dlq::detail::base64::encode(shown);
  const auto text_field = [&](const char* name, std::string_view value) {
    bool was_cut = false;
    std::string out = cut_text(value, view, was_cut);
    if (was_cut && std::find(cut_fields.begin(), cut_fields.end(), name) == cut_fields.end())
      cut_fields.push_back(name);
    return out;
  };
  if (e.ok() && e.payload_encoding == PayloadEncoding::json && !cut) {
    j["payload_kind"] = "json";
    j["payload_text"] = text_field(
        "payload", nlohmann::json::accept(e.payload) ? indent_json(e.payload, view) : e.payload);
  } else if (dlq::detail::json::is_valid_utf8(shown)) {
    j["payload_kind"] = "text";
    j["payload_text"] = std::string(shown);
  } else {
    j["payload_kind"] = "binary";
    // a hex dump line holds 16 bytes in 78 characters: a fifth of the limit fits in it
    const std::string_view hex_part = shown.substr(
        0, std::min<std::size_t>(shown.size(), std::min<std::size_t>(64 << 10, view / 5)));
    j["payload_hex"] = hex_dump(hex_part);
    std::string text;
    for (const char c : shown) {
      const auto u = static_cast<unsigned char>(c);
      text += (u >= 0x20 && u < 0x7f) || c == '\n' ? c : '.';
    }
    j["payload_text"] = text;
  }
  if (e.ok()) {
    const std::string context =
        e.context.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (context.size() <= view) {
      j["context"] = e.context;
    } else {
      j["context"] = text_field("context", context);  // the start of its JSON text
    }
    j["dead_letter_count"] = e.dead_letter_count;
    j["payload_encoding"] = e.payload_encoding == PayloadEncoding::json ? "json" : "base64";
  }
  if (e.raw.size() <= view) {
    // laid out by indent_json (the text of dump(2)) up to the view: dump(2) itself gives each
    // element 2 spaces per level, 290 times the size of a payload nested 250 deep
    j["stored_text"] = text_field(
        "stored_text",
        indent_json(
            e.to_json().dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace),
            view));
  } else {
    bool was_cut = false;
    std::string head = cut_text(e.raw, view, was_cut);
    head += "\n(the stored envelope is " + std::to_string(e.raw.size()) + " bytes; the first " +
            std::to_string(view) + " are shown)";
    cut_fields.push_back("stored_text");
    j["stored_text"] = std::move(head);
  }
  j["truncated_fields"] = std::move(cut_fields);
  return j;
}

inline nlohmann::json report_json(const ReplayReport& rep) {
  nlohmann::json skipped = nlohmann::json::array();
  for (std::size_t i = 0; i < rep.skipped.size() && i < 100; ++i) {
    const auto& s = rep.skipped[i];
    const char* why = s.reason == SkipReason::corrupt  ? "corrupt"
                      : s.reason == SkipReason::parked ? "parked"
                                                       : "not_found";
    skipped.push_back({{"id", s.id}, {"reason", why}, {"detail", s.detail}});
  }
  nlohmann::json moved = nlohmann::json::array();
  for (const auto& id : rep.replayed_ids)
    moved.push_back(id);
  nlohmann::json out = {{"examined", rep.examined},           {"replayed", rep.replayed},
                        {"set_aside", rep.set_aside},         {"batches", rep.batches},
                        {"conflicts", rep.conflicts},         {"dry_run", rep.dry_run},
                        {"cancelled", rep.cancelled},         {"skipped", skipped},
                        {"skipped_total", rep.skipped.size()}};
  out["replayed_ids"] = moved;
  return out;
}

inline std::string iso(std::chrono::system_clock::time_point t) {
  return dlq::detail::iso_time::format(t);
}

// Parses an age of the console's filters (EntryQuery::age_text writes them) such as "90", "90s", "15m", "2h", "7d" (seconds when unitless), at most
// 100 years.
inline std::optional<std::chrono::seconds> age_value(const std::string& v, const char* name) {
  if (v.empty()) return std::nullopt;
  std::size_t i = 0;
  std::int64_t n = 0;
  while (i < v.size() && v[i] >= '0' && v[i] <= '9' && i < 12)
    n = n * 10 + (v[i++] - '0');
  std::int64_t unit = 0;
  const std::string rest = v.substr(i);
  if (rest.empty() || rest == "s") unit = 1;
  if (rest == "m") unit = 60;
  if (rest == "h") unit = 3600;
  if (rest == "d") unit = 86400;
  if (i == 0 || unit == 0)
    throw bad("bad_parameter", name, "'" + printable(v) + "' is not an age",
                      "use a number with s, m, h or d, e.g. 15m or 2d");
  constexpr std::int64_t max_seconds = std::int64_t{36500} * 86400;  // 100 years
  if (n > max_seconds / unit)
    throw bad("bad_parameter", name,
                      "'" + printable(v) + "' is longer than 100 years",
                      "use an age of at most 36500d");
  return std::chrono::seconds(n * unit);
}

}  // namespace detail
}  // namespace http
}  // namespace dlq

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file metrics/prometheus.hpp
/// The Prometheus text exposition format (version 0.0.4) of a DeadLetterQueue's stats and
/// counters — no dependency: serve the string from the HTTP server the service already has.
///
///     // GET /metrics
///     std::string body = dlq::metrics::scrape(dlq);        // stats() + counters()
///     respond(200, dlq::metrics::content_type, body);
///
/// Series (names follow the Prometheus conventions: base units, `_total` for counters):
///
///   gauges — read from the store, so every process sharing it reports the same values;
///   aggregate with `max without(instance) (…)`:
///     dlq_entries{queue, list="dead"|"corrupt"}       entries in each list
///     dlq_oldest_entry_age_seconds{queue}             how long the oldest dead letter waited
///     dlq_oldest_entry_timestamp_seconds{queue}       its dead_lettered_at (Unix time)
///     dlq_newest_entry_timestamp_seconds{queue}       the newest one's dead_lettered_at
///     dlq_oldest_entry_untimed{queue}                 1 when the oldest dead letter has no
///                                                     readable time (its age is then absent)
///     dlq_skipped_queues                              queue names found in the store that dlq
///                                                     refuses and left out (dlq/queue_names.hpp;
///                                                     scrape() of all queues writes it)
///   counters — per process, since the DeadLetterQueue was created (they restart at 0 with
///   the process); aggregate with `sum without(instance) (rate(…[5m]))`:
///     dlq_sent_total, dlq_rejected_total, dlq_replayed_total,
///     dlq_evicted_total{reason="max_length"|"max_age"}, dlq_parked_total, dlq_corrupt_total,
///     dlq_replay_conflicts_total, dlq_hook_errors_total,
///     dlq_storage_errors_total{kind="timeout"|"connection"|"reply"|"other"},
///     dlq_audit_errors_total, dlq_audit_dropped_total (the audit trail lost records:
///     writes that failed; records its cap removed before their max age, dlq/audit.hpp)
///
/// Age and timestamp series are written only for queues whose oldest (newest) dead letter
/// has a readable time: a time is never guessed. A queue label's value is the queue name
/// where it is UTF-8, a byte that is not UTF-8 being the text `\xNN` and a backslash the
/// text `\\` (two of them): so no two names share a label (the text `\xff` of a name is
/// `\\xff`, a byte 0xff is `\xff`) and no queue's series is ever left out. The format's
/// own escaping comes on top (`\` -> `\\`, `"` -> `\"`, newline -> `\n`): a backslash of
/// a name is `\\\\` in the text, a byte 0xff `\\xff`. Constant labels are escaped as the
/// format alone requires. The same queue listed twice is written once: a duplicate series
/// would make Prometheus reject the whole scrape.
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/detail/json_scan.hpp"
#include "dlq/errors.hpp"
#include "dlq/policies.hpp"
#include "dlq/queue_names.hpp"
#include "dlq/stats.hpp"

namespace dlq::metrics {

/// The HTTP Content-Type of the text exposition format.
inline constexpr const char* content_type = "text/plain; version=0.0.4; charset=utf-8";

/// Options of the exposition. Every default is usable as is.
struct PrometheusOptions {
  /// Labels added to every series, e.g. {{"service", "billing"}}. Default none. Names must
  /// match [a-zA-Z_][a-zA-Z0-9_]*, must not start with "__" and must not be "queue", "list",
  /// "reason" or "kind".
  std::vector<std::pair<std::string, std::string>> labels;
  /// Write the counter series (false: gauges only — e.g. dlqctl, whose counters would only
  /// count its own run). Default true.
  bool counters = true;
};

/// Appends `value` as the inside of a label value: `\` -> `\\`, `"` -> `\"`, newline ->
/// `\n`, a byte that does not start well-formed UTF-8 -> the text `\xNN` (so `\\xNN`).
inline void append_label_value(std::string& out, std::string_view value) {
  static constexpr char hex[] = "0123456789abcdef";
  const char* p = value.data();
  const char* const end = p + value.size();
  while (p != end) {
    const auto c = static_cast<unsigned char>(*p);
    if (c < 0x80) {
      if (c == '\\')
        out += "\\\\";
      else if (c == '"')
        out += "\\\"";
      else if (c == '\n')
        out += "\\n";
      else
        out += static_cast<char>(c);
      ++p;
      continue;
    }
    const std::size_t len = detail::json::utf8_sequence_length(p, end);
    if (len == 0) {
      out += "\\\\x";
      out += hex[c >> 4];
      out += hex[c & 0xF];
      ++p;
    } else {
      out.append(p, len);
      p += len;
    }
  }
}

/// Appends the queue name `name` as the inside of a `queue` label value, injectively (see
/// the file comment): as append_label_value, but a backslash of the name is the text `\\`
/// (so `\\\\`). Why: else the name holding the text `\xff` and the name holding the byte
/// 0xff would share a label, and one of the two queues would go unreported. (A backslash is
/// never part of a UTF-8 sequence, so the parts between backslashes escape as the whole.)
inline void append_queue_label_value(std::string& out, std::string_view name) {
  std::size_t from = 0;
  for (std::size_t at = name.find('\\'); at != std::string_view::npos;
       at = name.find('\\', from)) {
    append_label_value(out, name.substr(from, at - from + 1));  // up to the backslash, with it
    out += "\\\\";                                              // and a second one
    from = at + 1;
  }
  append_label_value(out, name.substr(from));
}

namespace detail {

inline bool valid_label_name(std::string_view name) {
  if (name.empty() || (name.size() >= 2 && name.substr(0, 2) == "__")) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return name != "queue" && name != "list" && name != "reason" && name != "kind";
}

// The `queue="…"` label (append_queue_label_value) of each of `stats`, `name(s)` giving
// the queue, in order, paired with its stats; a label equal to an earlier one's (the same
// queue listed twice: the escaping is injective, so only equal names share a label) is
// left out: a duplicate series makes Prometheus reject the whole scrape. The one rule of
// write_prometheus and of the console's exposition (ConsoleBackend::metrics_text,
// dlq/http/backend.hpp).
template <class Stats, class Name>
std::vector<std::pair<std::string, const Stats*>> distinct_queue_labels(
    const std::vector<Stats>& stats, Name name) {
  std::vector<std::pair<std::string, const Stats*>> queues;
  std::set<std::string> seen;
  for (const Stats& s : stats) {
    std::string label = "queue=\"";
    append_queue_label_value(label, name(s));
    label += '"';
    if (seen.insert(label).second) queues.emplace_back(std::move(label), &s);
  }
  return queues;
}

// Seconds with microsecond precision, exactly (no floating point).
inline void append_seconds(std::string& out, std::chrono::microseconds us) {
  std::int64_t v = us.count();
  if (v < 0) {
    out += '-';
    v = -v;
  }
  out += std::to_string(v / 1000000);
  const std::int64_t frac = v % 1000000;
  if (frac == 0) return;
  std::string digits = std::to_string(frac);
  out += '.';
  out.append(6 - digits.size(), '0');
  while (!digits.empty() && digits.back() == '0')
    digits.pop_back();
  out += digits;
}

inline std::chrono::microseconds since_epoch(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch());
}

// Writes one metric family: HELP and TYPE lines, then samples.
class family_writer {
 public:
  family_writer(std::string& out, const std::string& constant_labels)
      : out_(out), constant_(constant_labels) {}

  void header(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    for (const char c : help) {  // HELP escapes only `\` and newline
      if (c == '\\')
        out_ += "\\\\";
      else if (c == '\n')
        out_ += "\\n";
      else
        out_ += c;
    }
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }

  // `labels`: already escaped `name="value"` pairs joined by commas (may be empty).
  void sample(std::string_view name, const std::string& labels, const std::string& value) {
    out_ += name;
    if (!labels.empty() || !constant_.empty()) {
      out_ += '{';
      out_ += labels;
      if (!labels.empty() && !constant_.empty()) out_ += ',';
      out_ += constant_;
      out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }

 private:
  std::string& out_;
  const std::string& constant_;
};

}  // namespace detail

namespace detail {

// The constant labels of `options`, escaped and joined by commas.
inline std::string constant_labels(const PrometheusOptions& options) {
  std::string constant;
  for (const auto& [name, value] : options.labels) {
    if (!valid_label_name(name))
      throw invalid_argument(dlq::detail::message(
          "metrics", "PrometheusOptions::labels", "invalid label name '" + name + "'",
          "use [a-zA-Z_][a-zA-Z0-9_]*, not starting with __, and not queue, list, reason or "
          "kind (dlq's own labels)"));
    if (!constant.empty()) constant += ',';
    constant += name;
    constant += "=\"";
    append_label_value(constant, value);
    constant += '"';
  }
  return constant;
}

}  // namespace detail

/// Appends the gauge dlq_skipped_queues: `skipped` queue names a listing found in the store
/// and left out because dlq refuses them (QueueNames::skipped, see dlq/queue_names.hpp).
/// @throws dlq::invalid_argument for a constant label with an invalid or reserved name.
inline void write_skipped_queues(std::string& out, std::size_t skipped,
                                 const PrometheusOptions& options = {}) {
  const std::string constant = detail::constant_labels(options);
  detail::family_writer w(out, constant);
  w.header("dlq_skipped_queues", "gauge",
           "Queue names found in the store that dlq refuses (a NUL byte: a foreign key) and "
           "leaves out of this exposition; the other queues are reported.");
  w.sample("dlq_skipped_queues", {}, std::to_string(skipped));
}

/// Appends the gauge dlq_queues_omitted: `omitted` queues dlq serves that a capped listing
/// left out of this exposition (dlq::cap_queue_names; the console's /metrics).
inline void write_omitted_queues(std::string& out, std::size_t omitted,
                                 const PrometheusOptions& options = {}) {
  const std::string constant = detail::constant_labels(options);
  detail::family_writer w(out, constant);
  w.header("dlq_queues_omitted", "gauge",
           "Queues found in the store but left out of this exposition: it reports at most "
           "max_listed_queues queues (default 1000) and 1 MiB of their names, in the order "
           "the store lists them, so that its size stays bounded.");
  w.sample("dlq_queues_omitted", {}, std::to_string(omitted));
}

namespace detail {

// The queues of `stats`, one per distinct escaped queue label (see the file comment): the
// label `queue="…"` and the first stats with it.
inline std::vector<std::pair<std::string, const QueueStats*>> queue_labels(
    const std::vector<QueueStats>& stats) {
  return distinct_queue_labels(stats,
                               [](const QueueStats& s) -> std::string_view { return s.queue; });
}

// The gauge families of write_prometheus: depths and the times of the oldest and newest entry.
inline void write_queue_gauges(
    family_writer& w, const std::vector<std::pair<std::string, const QueueStats*>>& queues) {
  if (!queues.empty()) {
    w.header("dlq_entries", "gauge",
             "Entries in a queue's dead-letter list (list=\"dead\") or corrupt list "
             "(list=\"corrupt\"), read from the store: every process sharing it reports the "
             "same value; aggregate with max without(instance).");
    for (const auto& [label, s] : queues) {
      w.sample("dlq_entries", label + ",list=\"dead\"", std::to_string(s->dead.depth));
      w.sample("dlq_entries", label + ",list=\"corrupt\"", std::to_string(s->corrupt.depth));
    }
  }
  auto time_family = [&](const char* name, const char* type, const char* help, auto value) {
    bool any = false;
    for (const auto& [label, s] : queues) {
      std::string v;
      if (!value(*s, v)) continue;
      if (!any) w.header(name, type, help);
      any = true;
      w.sample(name, label, v);
    }
  };
  time_family("dlq_oldest_entry_age_seconds", "gauge",
              "Seconds the oldest dead letter of the queue has waited (by the scraping "
              "process's clock); absent when the list is empty or the entry has no readable "
              "time (see dlq_oldest_entry_untimed).",
              [](const QueueStats& s, std::string& v) {
                const auto age = s.oldest_age();
                if (!age) return false;
                append_seconds(v, std::chrono::duration_cast<std::chrono::microseconds>(*age));
                return true;
              });
  time_family("dlq_oldest_entry_timestamp_seconds", "gauge",
              "dead_lettered_at of the oldest dead letter of the queue, in Unix seconds; "
              "absent when unknown.",
              [](const QueueStats& s, std::string& v) {
                if (!s.dead.oldest) return false;
                append_seconds(v, since_epoch(*s.dead.oldest));
                return true;
              });
  time_family("dlq_newest_entry_timestamp_seconds", "gauge",
              "dead_lettered_at of the newest dead letter of the queue, in Unix seconds; "
              "absent when unknown.",
              [](const QueueStats& s, std::string& v) {
                if (!s.dead.newest) return false;
                append_seconds(v, since_epoch(*s.dead.newest));
                return true;
              });
  time_family("dlq_oldest_entry_untimed", "gauge",
              "1 when the queue's oldest dead letter has no readable dead_lettered_at "
              "(corrupt or foreign; its age is not reported, never guessed), else 0; absent "
              "for an empty list.",
              [](const QueueStats& s, std::string& v) {
                if (s.dead.depth == 0) return false;
                v = s.dead.oldest_untimed ? "1" : "0";
                return true;
              });
}

// The counter families of write_prometheus.
inline void write_counters(family_writer& w, const Counters& c) {
  const char* per_process =
      " Per process, since its DeadLetterQueue was created (restarts at 0); aggregate with "
      "sum without(instance) (rate(...)).";
  auto counter = [&](const char* name, const char* help, std::uint64_t value) {
    w.header(name, "counter", std::string(help) + per_process);
    w.sample(name, {}, std::to_string(value));
  };
  counter("dlq_sent_total", "Jobs dead-lettered (entries stored).", c.sent);
  counter("dlq_rejected_total", "Jobs refused because their queue was full (Overflow::reject).",
          c.rejected);
  counter("dlq_replayed_total", "Entries replayed (moved back to a queue).", c.replayed);
  w.header(
      "dlq_evicted_total", "counter",
      std::string("Entries removed by retention, by reason (max_length, max_age).") + per_process);
  w.sample("dlq_evicted_total", "reason=\"max_length\"", std::to_string(c.evicted_for_length));
  w.sample("dlq_evicted_total", "reason=\"max_age\"", std::to_string(c.evicted_for_age));
  counter("dlq_parked_total", "Entries parked by the poison-loop guard.", c.parked);
  counter("dlq_corrupt_total", "Unreadable entries met by replay.", c.corrupt);
  counter("dlq_replay_conflicts_total",
          "Replay and trim batches redone because the list changed under them.", c.conflicts);
  counter("dlq_hook_errors_total", "Exceptions thrown by the on_event and log hooks (swallowed).",
          c.hook_errors);
  counter("dlq_audit_errors_total",
          "Audit records that could not be written (the operation stood; logged).", c.audit_errors);
  counter("dlq_audit_dropped_total",
          "Audit records removed by the trail's cap on their number before their max age: "
          "the audit trail of that time is incomplete (logged, and marked in the trail).",
          c.audit_dropped);
  w.header("dlq_storage_errors_total", "counter",
           std::string("Storage operations that failed, by kind (timeout, connection, reply = "
                       "the server refused the command, other).") +
               per_process);
  w.sample("dlq_storage_errors_total", "kind=\"timeout\"", std::to_string(c.timeout_errors));
  w.sample("dlq_storage_errors_total", "kind=\"connection\"", std::to_string(c.connection_errors));
  w.sample("dlq_storage_errors_total", "kind=\"reply\"", std::to_string(c.reply_errors));
  w.sample("dlq_storage_errors_total", "kind=\"other\"", std::to_string(c.other_storage_errors));
}

}  // namespace detail

/// Appends the exposition of `stats` (gauges) and, when `counters` is not null and
/// options.counters is true, of the counters to `out`.
/// @throws dlq::invalid_argument for a constant label with an invalid or reserved name.
inline void write_prometheus(std::string& out, const std::vector<QueueStats>& stats,
                             const Counters* counters, const PrometheusOptions& options = {}) {
  const std::string constant = detail::constant_labels(options);
  detail::family_writer w(out, constant);
  detail::write_queue_gauges(w, detail::queue_labels(stats));
  if (counters == nullptr || !options.counters) return;
  detail::write_counters(w, *counters);
}

/// The exposition of `stats` and `counters` as a string (see write_prometheus).
inline std::string prometheus_text(const std::vector<QueueStats>& stats, const Counters& counters,
                                   const PrometheusOptions& options = {}) {
  std::string out;
  write_prometheus(out, stats, &counters, options);
  return out;
}

/// The exposition of `stats` alone (gauges; no counters).
inline std::string prometheus_text(const std::vector<QueueStats>& stats,
                                   const PrometheusOptions& options = {}) {
  std::string out;
  write_prometheus(out, stats, nullptr, options);
  return out;
}

/// A scrape of `queue` (a DeadLetterQueue): stats() of every queue that has entries, plus
/// its counters and dlq_skipped_queues (names found that dlq refuses are left out and
/// counted, see dlq/queue_names.hpp). One storage call for the stats (see dlq/stats.hpp)
/// after listing the queues.
/// @throws what DeadLetterQueue::stats throws.
template <class Queue>
std::string scrape(Queue& queue, const PrometheusOptions& options = {}) {
  QueueNames found = queue.list_queues();
  const auto all = listed_stats(found, [&](const auto& names) { return queue.stats(names); });
  std::string out = prometheus_text(all, queue.counters(), options);
  write_skipped_queues(out, found.skipped.size(), options);
  return out;
}

/// A scrape of `queue` as above, of at most the queues `limits` allows (dlq::cap_queue_names,
/// in the order the store lists them), plus the gauge dlq_queues_omitted counting the rest:
/// the console's /metrics.
/// @throws what DeadLetterQueue::stats throws.
template <class Queue>
std::string scrape(Queue& queue, const PrometheusOptions& options, const ListingLimits& limits) {
  QueueNames found = queue.list_queues();
  cap_queue_names(found, limits);
  const auto all = listed_stats(found, [&](const auto& names) { return queue.stats(names); });
  std::string out = prometheus_text(all, queue.counters(), options);
  write_skipped_queues(out, found.skipped.size(), options);
  write_omitted_queues(out, found.omitted, options);
  return out;
}

/// A scrape of the named queues of `queue` (a DeadLetterQueue), plus its counters: a fixed
/// list keeps a queue's series at 0 when it empties (the list of queues with entries drops
/// it, and its series would go stale instead). One storage call for the stats.
/// @throws what DeadLetterQueue::stats throws.
template <class Queue>
std::string scrape(Queue& queue, const std::vector<std::string>& queues,
                   const PrometheusOptions& options = {}) {
  return prometheus_text(queue.stats(queues), queue.counters(), options);
}

}  // namespace dlq::metrics

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file stats-inl.hpp
/// The definitions of stats.hpp's non-template functions (see DLQ_INLINE in
/// dlq/detail/compiled.hpp): included by stats.hpp in header-only mode, compiled into the
/// library in compiled mode.
#pragma once

#include "dlq/stats.hpp"

namespace dlq::detail {

DLQ_INLINE std::optional<std::chrono::system_clock::time_point> time_of_span(
    std::string_view span) {
  if (span.size() >= 2 && span.front() == '"' && span.back() == '"' &&
      span.find('\\') == std::string_view::npos)
    return iso_time::parse(span.substr(1, span.size() - 2));  // the usual case: no escapes
  const std::string text = string_field(span);
  if (text.empty()) return std::nullopt;
  return iso_time::parse(text);
}

DLQ_INLINE std::optional<std::chrono::system_clock::time_point> time_of_item(std::string_view raw) {
  envelope_view view;
  if (!view_envelope(raw, view)) return std::nullopt;
  return time_of_span(view.dead_lettered_at);
}

DLQ_INLINE ListStats list_stats(const ListEnds& ends) {
  ListStats s;
  s.depth = ends.length;
  if (ends.length == 0) return s;
  s.oldest = time_of_item(ends.first);
  s.newest = ends.length == 1 ? s.oldest : time_of_item(ends.last);
  s.oldest_untimed = !s.oldest;
  s.newest_untimed = !s.newest;
  return s;
}

DLQ_INLINE void error_grouper::add(std::string_view raw) {
  envelope_view view;
  if (!view_envelope(raw, view)) {
    add_unreadable(
        raw, json::skip_value(raw.data(), raw.data() + raw.size(), json::mode::lenient) != nullptr
                 ? "not a JSON object"
                 : "not valid JSON");
    return;
  }
  std::string_view payload;
  problem_.clear();
  if (!cut_payload(view, scratch_, payload, problem_)) {
    add_unreadable(raw, problem_, &view);
    return;
  }
  const auto time = time_of_span(view.dead_lettered_at);
  const std::int64_t attempt = int_field(view.attempt);
  bump(by_error_, view.error, view, raw, time, attempt);
  bump(by_type_, view.error_type, view, raw, time, attempt);
  if (by_worker_) bump(by_worker_map_, view.worker, view, raw, time, attempt);
}

DLQ_INLINE void error_grouper::finish(ErrorsReport& report) const {
  report.by_error = groups(by_error_);
  report.by_error_type = groups(by_type_);
  if (by_worker_) report.by_worker = groups(by_worker_map_);
  std::size_t unreadable = 0;
  for (const auto& [problem, g] : unreadable_)
    unreadable += g.count;
  report.unreadable = unreadable;
}

DLQ_INLINE void error_grouper::note(ErrorGroup& g, std::optional<time_point> time,
                                    std::int64_t attempt) {
  ++g.count;
  if (time) {
    if (!g.oldest || *time < *g.oldest) g.oldest = time;
    if (!g.newest || *time > *g.newest) g.newest = time;
  } else {
    ++g.untimed;
  }
  g.max_attempt = std::max(g.max_attempt, attempt);
}

DLQ_INLINE void error_grouper::bump(std::unordered_map<std::string, ErrorGroup>& map,
                                    std::string_view span, const envelope_view& view,
                                    std::string_view raw, std::optional<time_point> time,
                                    std::int64_t attempt) {
  key_.assign(span.data(), span.size());
  auto it = map.find(key_);
  if (it == map.end()) {
    it = map.emplace(key_, ErrorGroup{}).first;
    it->second.example_id = entry_id(view, raw);
  }
  note(it->second, time, attempt);
}

DLQ_INLINE void error_grouper::add_unreadable(std::string_view raw, const std::string& problem,
                                              const envelope_view* view) {
  auto it = unreadable_.find(problem);
  if (it == unreadable_.end()) {
    it = unreadable_.emplace(problem, ErrorGroup{}).first;
    it->second.key = problem;
    it->second.readable = false;
    it->second.example_id = view ? entry_id(*view, raw) : derived_id(raw);
  }
  note(it->second, view ? time_of_span(view->dead_lettered_at) : std::nullopt,
       view ? int_field(view->attempt) : 0);
}

DLQ_INLINE void error_grouper::merge(ErrorGroup& into, const ErrorGroup& g) {
  into.count += g.count;
  into.untimed += g.untimed;
  into.max_attempt = std::max(into.max_attempt, g.max_attempt);
  if (g.oldest && (!into.oldest || *g.oldest < *into.oldest)) {
    into.oldest = g.oldest;
    into.example_id = g.example_id;  // the example of the earlier group
  }
  if (g.newest && (!into.newest || *g.newest > *into.newest)) into.newest = g.newest;
}

DLQ_INLINE std::vector<ErrorGroup> error_grouper::groups(
    const std::unordered_map<std::string, ErrorGroup>& map) const {
  std::map<std::string, ErrorGroup> decoded;
  for (const auto& [span, g] : map) {
    std::string key = string_field(span);
    auto it = decoded.find(key);
    if (it == decoded.end()) {
      ErrorGroup copy = g;
      copy.key = key;
      decoded.emplace(std::move(key), std::move(copy));
    } else {
      merge(it->second, g);
    }
  }
  std::vector<ErrorGroup> out;
  out.reserve(decoded.size() + unreadable_.size());
  for (auto& [key, g] : decoded)
    out.push_back(std::move(g));
  for (const auto& [problem, g] : unreadable_)
    out.push_back(g);
  std::stable_sort(out.begin(), out.end(), [](const ErrorGroup& a, const ErrorGroup& b) {
    if (a.count != b.count) return a.count > b.count;
    if (a.readable != b.readable) return a.readable;
    return a.key < b.key;
  });
  return out;
}

}  // namespace dlq::detail

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file stats-inl.hpp
/// The definitions of stats.hpp's non-template functions (see DLQ_INLINE in
/// dlq/detail/compiled.hpp) and of errors()' scan: included by stats.hpp in header-only mode,
/// compiled into the library in compiled mode (the scan instantiated there for range_reader).
#pragma once

#include <algorithm>
#include <exception>
#include <map>
#include <thread>
#include <unordered_map>
#include <utility>

#include "dlq/detail/search_place.hpp"
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

/// Accumulates the groups of an errors() scan. (A template, over the scan's reader type, only
/// so that it is compiled where the scan is instantiated.)
template <class Tag>
class error_grouper {
 public:
  explicit error_grouper(bool by_worker) : by_worker_(by_worker) {}

  /// Counts one stored item.
  void add(std::string_view raw);

  /// Fills the report's groupings.
  void finish(ErrorsReport& report) const;

 private:
  using time_point = std::chrono::system_clock::time_point;

  static void note(ErrorGroup& g, std::optional<time_point> time, std::int64_t attempt);

  // Groups are keyed by the field's bytes as stored (cheap); keys that decode to the same
  // text (different escapes) are merged in groups().
  void bump(std::unordered_map<std::string, ErrorGroup>& map, std::string_view span,
            const envelope_view& view, std::string_view raw, std::optional<time_point> time,
            std::int64_t attempt);

  void add_unreadable(std::string_view raw, const std::string& problem,
                      const envelope_view* view = nullptr);

  static void merge(ErrorGroup& into, const ErrorGroup& g);

  std::vector<ErrorGroup> groups(const std::unordered_map<std::string, ErrorGroup>& map) const;

  bool by_worker_;
  std::unordered_map<std::string, ErrorGroup> by_error_, by_type_, by_worker_map_;
  std::map<std::string, ErrorGroup> unreadable_;
  std::string key_, scratch_, problem_;
};

template <class Tag>
void error_grouper<Tag>::add(std::string_view raw) {
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

template <class Tag>
void error_grouper<Tag>::finish(ErrorsReport& report) const {
  report.by_error = groups(by_error_);
  report.by_error_type = groups(by_type_);
  if (by_worker_) report.by_worker = groups(by_worker_map_);
  std::size_t unreadable = 0;
  for (const auto& [problem, g] : unreadable_)
    unreadable += g.count;
  report.unreadable = unreadable;
}

template <class Tag>
void error_grouper<Tag>::note(ErrorGroup& g, std::optional<time_point> time, std::int64_t attempt) {
  ++g.count;
  if (time) {
    if (!g.oldest || *time < *g.oldest) g.oldest = time;
    if (!g.newest || *time > *g.newest) g.newest = time;
  } else {
    ++g.untimed;
  }
  g.max_attempt = std::max(g.max_attempt, attempt);
}

template <class Tag>
void error_grouper<Tag>::bump(std::unordered_map<std::string, ErrorGroup>& map,
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

template <class Tag>
void error_grouper<Tag>::add_unreadable(std::string_view raw, const std::string& problem,
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

template <class Tag>
void error_grouper<Tag>::merge(ErrorGroup& into, const ErrorGroup& g) {
  into.count += g.count;
  into.untimed += g.untimed;
  into.max_attempt = std::max(into.max_attempt, g.max_attempt);
  if (g.oldest && (!into.oldest || *g.oldest < *into.oldest)) {
    into.oldest = g.oldest;
    into.example_id = g.example_id;  // the example of the earlier group
  }
  if (g.newest && (!into.newest || *g.newest > *into.newest)) into.newest = g.newest;
}

template <class Tag>
std::vector<ErrorGroup> error_grouper<Tag>::groups(
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

/// One window read on a helper thread (ErrorsOptions::read_ahead): what
/// `std::async(std::launch::async, read, from, count)` and its future did — the reader copied
/// here, run on a thread of its own, its result or exception handed over by get(), the thread
/// waited for by get(), by the next start() and by the destructor — without <future>, whose
/// header and shared-state templates every unit that includes stats.hpp compiled.
class window_read_ahead {
 public:
  window_read_ahead() = default;
  window_read_ahead(const window_read_ahead&) = delete;
  window_read_ahead& operator=(const window_read_ahead&) = delete;
  ~window_read_ahead() { wait(); }

  /// True between start() and get().
  bool valid() const noexcept { return thread_.joinable(); }

  template <class Reader>
  void start(const Reader& read, std::size_t from, std::size_t count) {
    wait();
    result_.clear();
    error_ = nullptr;
    thread_ = std::thread([this, read, from, count]() mutable {
      try {
        result_ = read(from, count);
      } catch (...) {
        error_ = std::current_exception();
      }
    });
  }

  /// The window read; rethrows what the reader threw. Precondition: valid().
  std::vector<std::string> get() {
    thread_.join();
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return std::move(result_);
  }

  /// Waits for the window in flight, if any, and drops it (and what its reader threw).
  void drop() noexcept {
    if (!valid()) return;
    try {
      (void)get();
    } catch (...) {  // NOLINT(bugprone-empty-catch): a window nobody reads
    }
  }

 private:
  void wait() noexcept {
    if (thread_.joinable()) thread_.join();
  }

  std::thread thread_;
  std::vector<std::string> result_;
  std::exception_ptr error_;
};

// How many entries the next window of an errors scan reads after `examined` entries:
// ErrorsOptions::window, within ErrorsOptions::max_examined (0 = no bound; examined is at
// most max_examined).
DLQ_INLINE std::size_t errors_window(const ErrorsOptions& options, std::size_t window,
                                     std::size_t examined) noexcept {
  if (options.max_examined == 0) return window;
  return std::min(window, options.max_examined - examined);
}

// The windows of an errors scan: at most ErrorsOptions::window items (0 = 1000) and about
// lookup_bytes (8 MiB), sized by the largest item read so far (round 12: 1000 items of 2 MiB
// were one read); the first by the first item, read once for it (not examined).
struct errors_windows {
  std::size_t most;
  std::size_t largest = 0;  // stored bytes of the largest item read
  template <class Reader>
  errors_windows(std::size_t window, Reader& read) : most(window == 0 ? 1000 : window) {
    note(read(0, 1));
  }
  void note(const std::vector<std::string>& raws) noexcept {
    for (const auto& raw : raws)
      largest = std::max(largest, raw.size());
  }
  std::size_t size() const noexcept { return items_within(largest, most); }
};

// The position just after `last`, the last item an errors scan examined before position
// `start`, found again in the window before it after entries before it were removed; nullopt
// when it is gone too.
template <class Reader>
std::optional<std::size_t> position_after(Reader& read, std::size_t start, std::size_t window,
                                          const std::string& last) {
  const std::size_t back = start - 1 > window ? start - 1 - window : 0;
  const auto before = read(back, start - back);
  const auto it = std::find(before.rbegin(), before.rend(), last);
  if (it == before.rend()) return std::nullopt;
  return back + static_cast<std::size_t>(before.rend() - it);
}

template <class Reader>
ErrorsReport summarize_errors(std::string_view queue, const ErrorsOptions& options,
                              std::size_t depth, Reader read) {
  ErrorsReport report;
  report.queue = std::string(queue);
  errors_windows windows(options.window, read);
  error_grouper<Reader> grouper(options.by_worker);
  report.depth_at_start = depth;
  // The next window, read on a helper thread while this one is grouped (read_ahead).
  window_read_ahead ahead;
  std::size_t ahead_from = 0, ahead_count = 0;
  auto fetch = [&](std::size_t from, std::size_t count) {
    if (ahead.valid()) {
      if (ahead_from == from && ahead_count == count) return ahead.get();
      ahead.drop();  // not the window needed (the scan realigned): dropped
    }
    return read(from, count);
  };
  std::size_t start = 0;            // position of the next item to examine
  std::optional<std::string> last;  // the last item examined (the anchor of the next read)
  int realigned = 0;                // consecutive realignments
  bool limited = false;
  for (;;) {
    report.cancelled = options.cancel != nullptr && options.cancel->load();
    if (report.cancelled) break;
    if (options.max_examined != 0 && report.examined >= options.max_examined) {
      limited = true;
      break;
    }
    const std::size_t want = errors_window(options, windows.size(), report.examined);
    const bool anchored = last.has_value() && start > 0;
    std::vector<std::string> raws = fetch(anchored ? start - 1 : start, anchored ? want + 1 : want);
    windows.note(raws);
    if (anchored && (raws.empty() || raws.front() != *last)) {
      // Entries before the scan position were removed: find the last examined item again
      // (a window back) and go on after it. If it is gone too, go on from the same position:
      // entries may then be missed or counted twice — the report is a sample either way.
      report.changed = true;
      if (++realigned <= 3) {
        if (const auto after = position_after(read, start, windows.size(), *last)) {
          start = *after;
          continue;
        }
      }
      last.reset();
      realigned = 0;
      continue;
    }
    realigned = 0;
    const std::size_t first = anchored ? 1 : 0;
    const std::size_t n = raws.size() - first;
    if (n == want && options.read_ahead) {  // more may follow: read it while grouping this
      const std::size_t next = errors_window(options, windows.size(), report.examined + n);
      if (next > 0) {
        ahead_from = start + n - 1;  // anchored at this window's last item
        ahead_count = next + 1;
        ahead.start(read, ahead_from, ahead_count);
      }
    }
    for (std::size_t i = first; i < raws.size(); ++i)
      grouper.add(raws[i]);
    report.examined += n;
    start += n;
    if (options.on_progress) options.on_progress({report.examined, report.depth_at_start});
    if (n < want) {
      report.complete = true;
      break;
    }
    last = std::move(raws.back());
  }
  ahead.drop();  // stopped (cancel) with a window in flight: wait for it, drop it
  // A scan stopped by max_examined exactly at the end of the list did read all of it: the
  // last examined item is still in place and nothing follows it.
  if (limited && last) {
    const auto tail = read(start - 1, 2);
    if (tail.size() == 1 && tail.front() == *last) report.complete = true;
  }
  grouper.finish(report);
  report.exact = report.complete && !report.changed && !report.cancelled;
  return report;
}

}  // namespace dlq::detail

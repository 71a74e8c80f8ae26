// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file stats.hpp
/// Observability of dead-letter queues: depths and ages in one cheap call
/// (DeadLetterQueue::stats) and a summary of dead letters grouped by error
/// (DeadLetterQueue::errors). dlq/metrics/prometheus.hpp turns both into the Prometheus text
/// format.
///
///     auto s = dlq.stats({"orders", "emails"});      // depth, corrupt depth, oldest, newest
///     if (auto age = s[0].oldest_age()) …            // how long the oldest has waited
///     auto r = dlq.errors("orders");                 // groups by error text and error type
///     for (const auto& g : r.by_error) …             // count, oldest, newest, an example id
///
/// stats — cost independent of the lists' lengths: a storage with the optional member
/// `stats` (see dlq/storage.hpp) reads each queue's list lengths and end items at one instant
/// (MemoryStorage: under its lock; RedisListStorage: LLEN + LINDEX 0 / -1 of both lists in
/// one MULTI/EXEC per queue, all queues in one pipelined round trip — one per master on a
/// Redis Cluster; KeyValueStorage over a store with `ends` — kv::MemoryStore, SqliteStore —
/// a count and the first and last record of each list). Other storages (KeyValueStorage over
/// kv::RedisStore, your own) fall back to size() and range() of the two end items — three
/// calls per list, each read at its own instant.
///
/// Times: "oldest" and "newest" are the dead_lettered_at of the list's first and last item
/// (lists are in arrival order; with senders' clocks skewed the first item's time can
/// differ from the smallest time by that skew). An item without a readable time (not JSON,
/// written by another program without the field, an unparseable timestamp) is reported as
/// such (ListStats::oldest_untimed / newest_untimed) and its time is never guessed — in
/// particular stats do not look past it for a readable one (that would cost a scan).
///
/// errors — reads the dead-letter list oldest first in windows of at most
/// ErrorsOptions::window entries and about 8 MiB (sized by the largest entry read so far, the
/// first window by the first entry, read once more for it; one range() call each: an entry
/// larger than all before it may take a read over that), so memory stays bounded by two
/// windows (one read ahead) plus the groups.
/// Each window after the first is read from the last item of the window before: when that
/// item is not where it was, the list moved under the scan (a replay, a trim, a removal), the
/// scan finds its place again and the report says so (ErrorsReport::changed). The counts are
/// exact (ErrorsReport::exact) only when the scan read the list to its end, within
/// ErrorsOptions::max_examined, and nothing moved under it; otherwise they are a sample.
/// While one window is grouped the next is read on a helper thread (ErrorsOptions::
/// read_ahead), so on Redis a scan costs little more than reading the list.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/detail/compiled.hpp"
#include "dlq/detail/function_ref.hpp"
#include "dlq/entry.hpp"
#include "dlq/storage.hpp"

namespace dlq {

/// Depth and the times of the two ends of one list of a queue.
struct ListStats {
  /// Items in the list when it was read.
  std::size_t depth = 0;
  /// dead_lettered_at of the oldest (first) item; nullopt when the list is empty or that item
  /// has no readable time (then oldest_untimed is true).
  std::optional<std::chrono::system_clock::time_point> oldest;
  /// dead_lettered_at of the newest (last) item; nullopt as for `oldest`.
  std::optional<std::chrono::system_clock::time_point> newest;
  /// True when the list is not empty and its oldest item's time is not known: the item has no
  /// readable dead_lettered_at (corrupt, foreign), or — on a storage without the `stats`
  /// member only — the list kept changing under 8 reads in a row. Never guessed.
  bool oldest_untimed = false;
  /// As oldest_untimed, for the newest item.
  bool newest_untimed = false;
};

/// Stats of one queue (DeadLetterQueue::stats).
struct QueueStats {
  std::string queue;  ///< the queue's name
  ListStats dead;     ///< the dead-letter list
  ListStats corrupt;  ///< the corrupt list (items replay set aside)
  /// The time of the read, by the queue's clock (Options::clock), taken right after it.
  std::chrono::system_clock::time_point read_at{};

  /// How long the oldest dead letter has waited (read_at - dead.oldest; 0 when its time is in
  /// the future, a sender's clock ahead), or nullopt when the list is empty or the oldest
  /// entry has no readable time (dead.oldest_untimed).
  std::optional<std::chrono::system_clock::duration> oldest_age() const {
    if (!dead.oldest) return std::nullopt;
    const auto age = read_at - *dead.oldest;
    return age.count() < 0 ? std::chrono::system_clock::duration::zero() : age;
  }
};

/// Running totals of an errors() scan, passed to ErrorsOptions::on_progress after every window.
struct ErrorsProgress {
  std::size_t examined = 0;  ///< entries grouped so far
  std::size_t depth = 0;     ///< the list's depth when the scan started (a moving target)
};

/// How errors() scans. Every default is usable as is.
struct ErrorsOptions {
  /// Most entries to examine; 0 (the default) = all. Past it the scan stops and the report
  /// is a sample of the oldest entries (ErrorsReport::exact == false).
  std::size_t max_examined = 0;
  /// Most entries per read (one storage range() call); fewer when they are large: a read
  /// holds about 8 MiB. Default 1000; 0 = 1000.
  std::size_t window = 1000;
  /// Also group by worker (ErrorsReport::by_worker). Default false.
  bool by_worker = false;
  /// Read the next window on a helper thread (a std::thread of its own) while grouping the current
  /// one, so that a networked store's round trip overlaps the grouping. Default true; the storage
  /// is called from that thread (every storage is thread-safe by contract).
  bool read_ahead = true;
  /// Called after every window with the running totals. Empty (the default) = not called.
  std::function<void(const ErrorsProgress&)> on_progress;
  /// Checked before every window: once true the scan stops (ErrorsReport::cancelled; the
  /// counts are a sample). nullptr (the default) = never.
  const std::atomic<bool>* cancel = nullptr;
};

/// Dead letters that share an error text (or error type, or worker).
struct ErrorGroup {
  /// The shared value (error text, error type or worker; "" when the entries have none), or —
  /// when `readable` is false — what is wrong with the entries (e.g. "not valid JSON").
  std::string key;
  /// False for a group of unreadable entries (those replay would set aside as corrupt).
  bool readable = true;
  std::size_t count = 0;  ///< entries in the group
  /// The earliest and latest dead_lettered_at among the group's entries with a readable time;
  /// nullopt when none has one.
  std::optional<std::chrono::system_clock::time_point> oldest, newest;
  std::size_t untimed = 0;       ///< entries of the group without a readable time
  std::int64_t max_attempt = 0;  ///< the highest attempt count among them
  std::string example_id;        ///< the id of the group's first (oldest) entry
};

/// What errors() found. Each grouping covers every examined entry: its counts add up to
/// `examined`. Groups are sorted by count, largest first (ties by key).
struct ErrorsReport {
  std::string queue;               ///< the queue scanned
  std::size_t examined = 0;        ///< entries grouped
  std::size_t depth_at_start = 0;  ///< the dead-letter list's depth when the scan started
  std::size_t unreadable = 0;      ///< examined entries that are unreadable (corrupt)
  /// True when the counts are exact: the scan read the list to its end, within max_examined,
  /// was not cancelled, and nothing moved under it (every entry present during the whole scan
  /// counted exactly once). False = the counts are a sample.
  bool exact = false;
  bool complete = false;   ///< the scan reached the end of the list
  bool changed = false;    ///< entries before the scan position were removed during the scan
  bool cancelled = false;  ///< ErrorsOptions::cancel stopped it
  std::vector<ErrorGroup> by_error;       ///< grouped by error text
  std::vector<ErrorGroup> by_error_type;  ///< grouped by error type
  std::vector<ErrorGroup> by_worker;      ///< grouped by worker (ErrorsOptions::by_worker)
};

namespace detail {

/// dead_lettered_at of a stored item; nullopt when it has none that parses.
std::optional<std::chrono::system_clock::time_point> time_of_span(std::string_view span);

/// The time of one stored item; nullopt when it is unreadable or has no readable time.
std::optional<std::chrono::system_clock::time_point> time_of_item(std::string_view raw);

/// Reads the lengths and end items of both lists of each queue: the storage's `stats`
/// member when it has one, else size() and range() of the two ends.
template <class S>
std::vector<QueueEnds> read_queue_ends(S& storage, const std::vector<std::string>& queues) {
  if constexpr (has_stats<S>::value) {
    return storage.stats(queues);
  } else {
    // A list that keeps changing under 8 reads gets its length and no end items: the
    // times are then reported unknown (untimed), not guessed.
    auto read_list = [&storage](const std::string& queue, ListKind kind, ListEnds& out) {
      for (int attempt = 0; attempt < 8; ++attempt) {
        out = ListEnds{};
        out.length = storage.size(queue, kind);
        if (out.length == 0) return;
        auto first = storage.range(queue, kind, 0, 1);
        auto last = storage.range(queue, kind, out.length - 1, 1);
        // Empty when the list shrank between the reads: read again (the ends must exist).
        if (first.empty() || last.empty()) continue;
        out.first = std::move(first.front());
        out.last = std::move(last.front());
        return;
      }
      out.first.clear();
      out.last.clear();
    };
    std::vector<QueueEnds> out(queues.size());
    for (std::size_t i = 0; i < queues.size(); ++i) {
      read_list(queues[i], ListKind::dead, out[i].dead);
      read_list(queues[i], ListKind::corrupt, out[i].corrupt);
    }
    return out;
  }
}

/// Turns one list's ends into its stats (times read from the items, never guessed).
ListStats list_stats(const ListEnds& ends);

/// DeadLetterQueue::stats: reads, then takes `now()` for the ages.
template <class S, class Now>
std::vector<QueueStats> queue_stats(S& storage, const std::vector<std::string>& queues, Now now) {
  std::vector<QueueEnds> ends = read_queue_ends(storage, queues);
  const auto at = now();
  std::vector<QueueStats> out;
  out.reserve(queues.size());
  for (std::size_t i = 0; i < queues.size() && i < ends.size(); ++i) {
    QueueStats q;
    q.queue = queues[i];
    q.dead = list_stats(ends[i].dead);
    q.corrupt = list_stats(ends[i].corrupt);
    q.read_at = at;
    out.push_back(std::move(q));
  }
  return out;
}

/// Reads `count` items of the dead-letter list from position `from` (a storage's range()).
using range_reader = function_ref<std::vector<std::string>(std::size_t, std::size_t)>;

/// DeadLetterQueue::errors over a storage's reads: scans `queue`'s dead-letter list, `depth`
/// entries deep when the scan starts, in windows read by `read` (see the file comment).
/// `read` is called from a helper thread too (ErrorsOptions::read_ahead). A template only so
/// that a translation unit that never calls errors() does not compile the scan (and the
/// helper thread and maps it uses); Reader is always range_reader, instantiated
/// once in the library in compiled mode.
template <class Reader>
ErrorsReport summarize_errors(std::string_view queue, const ErrorsOptions& options,
                              std::size_t depth, Reader read);

#if !defined(DLQ_HEADER_ONLY)
extern template ErrorsReport summarize_errors<range_reader>(std::string_view, const ErrorsOptions&,
                                                            std::size_t, range_reader);
#endif

/// DeadLetterQueue::errors: scans `queue`'s dead-letter list in windows (see the file
/// comment).
template <class S>
ErrorsReport summarize_errors(S& storage, std::string_view queue, const ErrorsOptions& options) {
  const std::size_t depth = storage.size(queue, ListKind::dead);
  auto read = [&storage, queue](std::size_t from, std::size_t count) {
    return storage.range(queue, ListKind::dead, from, count);
  };
  return summarize_errors<range_reader>(queue, options, depth, range_reader(read));
}

}  // namespace detail

}  // namespace dlq

#if defined(DLQ_HEADER_ONLY)
#include "dlq/stats-inl.hpp"
#endif

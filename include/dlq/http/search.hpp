// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file http/search.hpp
/// The console's entry filter and its bounded, resumable scan over a dead-letter list.
///
/// A scan never loads a whole list: each call reads windows of at most `window` entries
/// with peek and examines at most `max_examined` entries, then hands back a continuation
/// token (dlq::http::Cursor) that encodes the position reached, the id of the last entry
/// examined and its dead_lettered_at. The next call finds that id again within the
/// `lookback` entries before the position, so entries removed before it in between (the list
/// moves left) neither hide nor repeat entries. When the id is not there (it was replayed or
/// deleted too, e.g. a replay took the head), the scan goes on at the first entry not older
/// than it, found by binary search over the list (about log2(length) reads of one entry):
/// exact for a list in dead-letter order, which appends keep; entries written out of time
/// order (clock skew between writers) may then be shown twice or, near the cut, passed over.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <dlq/detail/base64.hpp>
#include <dlq/entry.hpp>
#include <dlq/errors.hpp>

namespace dlq {
namespace http {

/// Which entries a console page or a replay by filter is about (the console's conditions;
/// a replay receives them as a dlq::EntryFilter predicate). Empty fields are no
/// condition; an empty filter matches every entry, corrupt ones included. Any condition
/// excludes unreadable (corrupt) entries.
struct EntryQuery {
  std::string error;       ///< error message contains this text (ASCII case-insensitive)
  std::string error_type;  ///< error_type equals this
  std::string worker;      ///< worker equals this
  std::string job_id;      ///< job_id equals this
  std::string payload;     ///< payload bytes contain this text (ASCII case-insensitive)
  /// Dead-lettered at least this long ago; nullopt = no condition.
  std::optional<std::chrono::seconds> min_age;
  /// Dead-lettered at most this long ago; nullopt = no condition.
  std::optional<std::chrono::seconds> max_age;

  /// True when no condition is set.
  bool empty() const noexcept {
    return error.empty() && error_type.empty() && worker.empty() && job_id.empty() &&
           payload.empty() && !min_age && !max_age;
  }

  /// True when `e` meets every condition, ages measured from `now`. Entries without a
  /// readable time never meet an age condition.
  bool matches(const Entry& e, std::chrono::system_clock::time_point now) const {
    if (empty()) return true;
    if (!e.ok()) return false;
    if (!error.empty() && !contains_nocase(e.error, error)) return false;
    if (!error_type.empty() && e.error_type != error_type) return false;
    if (!worker.empty() && e.worker != worker) return false;
    if (!job_id.empty() && e.job_id != job_id) return false;
    if (!payload.empty() && !contains_nocase(e.payload, payload)) return false;
    if (min_age || max_age) {
      if (!e.dead_lettered_time) return false;
      const auto age = now - *e.dead_lettered_time;
      // Compared in the clock's unit; an age beyond the clock's range (about 292 years in
      // nanoseconds) is compared by sign instead of being converted (the conversion would
      // overflow and wrap to a short age).
      const auto in_range = [](std::chrono::seconds s) {
        constexpr auto cap = std::chrono::duration_cast<std::chrono::seconds>(
            std::chrono::system_clock::duration::max());
        return s <= cap && s >= -cap;
      };
      if (min_age && (in_range(*min_age) ? age < *min_age : min_age->count() > 0)) return false;
      if (max_age && (in_range(*max_age) ? age > *max_age : max_age->count() < 0)) return false;
    }
    return true;
  }

  /// True when `needle` occurs in `hay`, ASCII letters compared case-insensitively.
  static bool contains_nocase(std::string_view hay, std::string_view needle) noexcept {
    if (needle.empty()) return true;
    if (needle.size() > hay.size()) return false;
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    for (std::size_t i = 0; i + needle.size() <= hay.size(); ++i) {
      std::size_t j = 0;
      while (j < needle.size() && lower(hay[i + j]) == lower(needle[j]))
        ++j;
      if (j == needle.size()) return true;
    }
    return false;
  }
};

/// Where a scan stopped: the position of the next entry and the last one examined.
struct Cursor {
  std::size_t position = 0;  ///< index (from the head) of the next entry to examine
  std::string last_id;       ///< id of the entry examined last ("" at the start)
  /// dead_lettered_at of that entry in microseconds since the epoch; 0 = unknown.
  std::int64_t last_time_us = 0;

  /// The token form: base64 of "<position>:<time>:<last id>" (opaque to clients).
  std::string encode() const {
    return dlq::detail::base64::encode(std::to_string(position) + ":" +
                                       std::to_string(last_time_us) + ":" + last_id);
  }

  /// Parses a token made by encode().
  /// @throws dlq::invalid_argument when `token` is not one.
  static Cursor decode(std::string_view token) {
    std::string text;
    const auto bad = [] {
      return dlq::invalid_argument(dlq::detail::message(
          "http", "cursor", "not a continuation token of this console",
          "pass the `next` value of the previous page unchanged, or drop it to start over"));
    };
    if (token.size() > 1024 || !dlq::detail::base64::decode(token, text)) throw bad();
    Cursor c;
    std::size_t i = 0;
    const auto number = [&](auto& out) {
      const std::size_t begin = i;
      out = 0;
      while (i < text.size() && text[i] >= '0' && text[i] <= '9' && i - begin < 18)
        out = out * 10 + (text[i++] - '0');
      if (i == begin || i >= text.size() || text[i] != ':') throw bad();
      ++i;
    };
    number(c.position);
    number(c.last_time_us);
    c.last_id = text.substr(i);
    if (c.position == 0 && !c.last_id.empty()) throw bad();
    return c;
  }
};

/// Bounds of one scan call.
struct ScanLimits {
  std::size_t limit = 50;            ///< most matching entries returned
  std::size_t max_examined = 10000;  ///< most entries examined by one call
  std::size_t window = 500;          ///< most entries read by one peek
  std::size_t lookback = 256;        ///< entries before the position searched for the last id
  /// Stored bytes (Entry::raw) of the matching entries one page holds: the page ends after
  /// the entry that reaches them (so it holds at least one). 0 = no bound.
  std::size_t max_bytes = 0;
};

/// One page of a scan.
struct SearchPage {
  std::vector<Entry> entries;  ///< matching entries, oldest first
  std::size_t examined = 0;    ///< entries examined by this call
  std::size_t start = 0;       ///< position this call started at
  std::optional<Cursor> next;  ///< where to continue; nullopt = the end of the list
};

namespace detail {

inline std::int64_t micros(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

/// The position of the first entry not older than the cursor's last entry, by binary search
/// over [0, cursor.position) with one-entry reads; entries without a time count as older.
/// The cursor's position when its time is unknown.
template <class Peek>
std::size_t first_not_older(Peek& peek, std::string_view queue, const Cursor& c) {
  if (c.last_time_us == 0) return c.position;
  std::size_t lo = 0, hi = c.position;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    const std::vector<Entry> one = peek(queue, mid, 1);
    if (one.empty()) {
      hi = mid;
      continue;
    }
    const auto& e = one.front();
    if (e.dead_lettered_time && micros(*e.dead_lettered_time) >= c.last_time_us) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

}  // namespace detail

/// Scans `queue` from `from` (nullopt = the head) for entries matching `filter`, within
/// `limits`, through `peek(queue, start, count)`. See the file comment for the guarantees.
/// @throws whatever `peek` throws.
template <class Peek>
SearchPage scan(Peek&& peek, std::string_view queue, const EntryQuery& filter,
                const std::optional<Cursor>& from, const ScanLimits& limits,
                std::chrono::system_clock::time_point now) {
  SearchPage page;
  std::size_t pos = 0;
  if (from && from->position > 0) {
    const std::size_t back = std::min(from->position, limits.lookback);
    const std::size_t s = from->position - back;
    const std::vector<Entry> before = peek(queue, s, back);
    bool found = false;
    for (std::size_t k = before.size(); k-- > 0;) {
      if (before[k].id == from->last_id) {
        pos = s + k + 1;
        found = true;
        break;
      }
    }
    if (!found) pos = detail::first_not_older(peek, queue, *from);
  }
  page.start = pos;
  std::string last_id = from ? from->last_id : std::string();
  std::int64_t last_time = from ? from->last_time_us : 0;
  const std::size_t want = std::max<std::size_t>(1, limits.limit);
  bool at_end = false;
  std::size_t page_bytes = 0;  // of the matching entries kept (ScanLimits::max_bytes)
  const auto full = [&] {
    return page.entries.size() == want || (limits.max_bytes != 0 && page_bytes >= limits.max_bytes);
  };
  while (!full() && page.examined < limits.max_examined) {
    std::size_t n = std::min(limits.window, limits.max_examined - page.examined);
    if (filter.empty()) n = std::min(n, want - page.entries.size());
    std::vector<Entry> batch = peek(queue, pos, n);
    std::size_t used = 0;
    for (auto& e : batch) {
      ++used;
      ++page.examined;
      ++pos;
      last_id = e.id;
      last_time = e.dead_lettered_time ? detail::micros(*e.dead_lettered_time) : 0;
      if (filter.matches(e, now)) {
        page_bytes += e.raw.size();
        page.entries.push_back(std::move(e));
        if (full()) break;
      }
    }
    if (batch.size() < n && used == batch.size()) {
      at_end = true;
      break;
    }
  }
  if (!at_end) page.next = Cursor{pos, last_id, last_time};
  return page;
}

}  // namespace http
}  // namespace dlq

// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file http/search.hpp
/// The console's entry filter and its bounded, resumable scan over a dead-letter list.
///
/// A scan never loads a whole list: each call reads windows of at most `window` entries
/// with peek and examines at most `max_examined` entries, then hands back a continuation
/// token (dlq::http::Cursor). The place is kept and found again exactly as the library's
/// search does it, by the same code (dlq/detail/search_place.hpp): the token holds a
/// position and the hashes of the last 16 entries examined, and every peek re-reads the 16
/// positions before the place with the next window, so the place and the entries after it
/// come from one read. While other clients send, replay, discard and delete, a run of pages
/// returns every matching entry that was in the list when it started and was not removed
/// before the scan reached it, once. Only when each of the last 16 entries examined was
/// removed before the next read is the place lost: the scan starts again at the head and
/// that page says `restarted` (entries shown before may come again; none is skipped).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <dlq/detail/base64.hpp>
#include <dlq/detail/search_place.hpp>
#include <dlq/detail/text_search.hpp>
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

  /// The conditions as the console's API takes them, for the audit trail (the filter's
  /// terms: dlq::Filter::predicate_terms): one member per condition set, named as in
  /// /api/replay's "filter" (error, error_type, worker, job_id, payload, min_age, max_age),
  /// texts as given, ages as age_text() writes them ("15m"); {} when none is set.
  nlohmann::ordered_json describe() const {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    const std::pair<const char*, const std::string*> texts[] = {
        {"error", &error}, {"error_type", &error_type}, {"worker", &worker},
        {"job_id", &job_id}, {"payload", &payload}};
    for (const auto& [name, text] : texts)
      if (!text->empty()) j[name] = *text;
    if (min_age) j["min_age"] = age_text(*min_age);
    if (max_age) j["max_age"] = age_text(*max_age);
    return j;
  }

  /// `age` in the console's age syntax, in the largest unit that holds it exactly: "15m",
  /// "2d", "90s", "0s" (what the console's min_age / max_age parse back to the same age).
  static std::string age_text(std::chrono::seconds age) {
    const std::int64_t n = age.count();
    const std::pair<std::int64_t, const char*> units[] = {{86400, "d"}, {3600, "h"}, {60, "m"}};
    for (const auto& [size, unit] : units)
      if (n != 0 && n % size == 0) return std::to_string(n / size) + unit;
    return std::to_string(n) + "s";
  }

  /// True when `needle` occurs in `hay`, ASCII letters compared case-insensitively; linear
  /// in the length of `hay` whatever both hold (dlq/detail/text_search.hpp).
  static bool contains_nocase(std::string_view hay, std::string_view needle) {
    return dlq::detail::contains(hay, needle, true);
  }
};

/// Where a scan stopped: the place of dlq/detail/search_place.hpp.
struct Cursor {
  /// Entries of the list before the place (every entry examined last that is still in the
  /// list is before it).
  std::size_t position = 0;
  /// Hashes (64-bit FNV-1a of the stored bytes) of the last entries examined, oldest first,
  /// at most 16; empty at the start.
  std::vector<std::uint64_t> anchors;

  /// The token form: base64 of the library's continuation text (opaque to clients).
  std::string encode() const {
    return dlq::detail::base64::encode(dlq::detail::search_token{position, anchors}.encode());
  }

  /// Parses a token made by encode().
  /// @throws dlq::invalid_argument when `token` is not one.
  static Cursor decode(std::string_view token) {
    const auto bad = [] {
      return dlq::invalid_argument(dlq::detail::message(
          "http", "cursor", "not a continuation token of this console",
          "pass the `next` value of the previous page unchanged, or drop it to start over"));
    };
    std::string text;
    if (token.size() > 1024 || !dlq::detail::base64::decode(token, text)) throw bad();
    dlq::detail::search_token t;
    try {
      t = dlq::detail::search_token::decode(text);
    } catch (const dlq::invalid_argument&) {
      throw bad();
    }
    return Cursor{t.position, std::move(t.anchors)};
  }
};

/// Bounds of one scan call.
struct ScanLimits {
  std::size_t limit = 50;            ///< most matching entries returned
  std::size_t max_examined = 10000;  ///< most entries examined by one call
  /// Most entries examined per peek (each peek also re-reads the 16 entries before the
  /// place).
  std::size_t window = 500;
  /// Stored bytes (Entry::raw) of the matching entries one page holds: the page ends after
  /// the entry that reaches them (so it holds at least one). 0 = no bound.
  std::size_t max_bytes = 0;
  /// Stored bytes one read holds (0 = no bound: reads of `window` entries + 16). A call
  /// first reads the one entry at its place. Where the store bounds reads by bytes
  /// (scan's `peek_bounded`, dlq::BoundedRange) every read holds at most read_bytes beyond
  /// the entries re-read before the place and one more (fewer are re-read when entries are
  /// large, and only those the call read itself: one at first). Otherwise every read takes about read_bytes / (the largest entry the call has
  /// read) entries, at least 2, at most `window` + 16, so a read of 4 MiB entries holds 2
  /// of them, not 516, but an entry larger than all before it may take a read over the
  /// budget by (its size x the read's count).
  std::size_t read_bytes = std::size_t{8} << 20;
};

/// How many entries a scan's next peek asks for under `limits`, when the largest entry it
/// has read so far has `largest` stored bytes (0: none read yet). See ScanLimits::read_bytes.
inline std::size_t read_entries(const ScanLimits& limits, std::size_t largest) noexcept {
  const std::size_t most = std::max<std::size_t>(1, limits.window) + 16;
  if (limits.read_bytes == 0) return most;
  if (largest == 0) return 2;
  return std::min(most, std::max<std::size_t>(2, limits.read_bytes / largest));
}

/// Whether a page of `entries` entries holding `bytes` stored bytes (Entry::raw) is full
/// under `limits`: it holds limits.limit entries (at least 1), or its bytes reached
/// limits.max_bytes (0 = no bound), so a page ends after the entry that reaches them. The
/// rule of every console page: scan() (/api/entries) and /api/corrupt.
inline bool page_full(std::size_t entries, std::size_t bytes, const ScanLimits& limits) noexcept {
  return entries >= std::max<std::size_t>(1, limits.limit) ||
         (limits.max_bytes != 0 && bytes >= limits.max_bytes);
}

/// One page of a scan.
struct SearchPage {
  std::vector<Entry> entries;  ///< matching entries, oldest first
  std::size_t examined = 0;    ///< entries examined by this call
  std::size_t start = 0;       ///< position this call started examining at
  std::optional<Cursor> next;  ///< where to continue; nullopt = the end of the list
  /// The place was lost (each of the last 16 entries examined was removed before this call
  /// read on) and this call started again at the head: entries returned by earlier pages
  /// may be returned again (none is skipped). False: no entry of the run repeats.
  bool restarted = false;
};

namespace detail {

/// The anchor hash of an entry read through peek: of its stored bytes (Entry::raw, which
/// DeadLetterQueue::peek fills), else of its id.
inline std::uint64_t scan_key(const Entry& e) noexcept {
  return dlq::detail::search_key(e.raw.empty() ? std::string_view(e.id) : std::string_view(e.raw));
}

}  // namespace detail

namespace detail {

/// How a scan sizes and issues its reads (ScanLimits::read_bytes): bounded by bytes in the
/// store where `peek_bounded` can (it returns a dlq::PeekWindow, see dlq::BoundedRange),
/// else sized by the largest entry read so far through `peek`.
template <class Peek, class PeekBounded>
struct scan_reader {
  Peek& peek;
  PeekBounded& peek_bounded;
  std::string_view queue;
  const ScanLimits& limits;
  bool bounded = false;     // peek_bounded bounds the reads
  std::size_t largest = 0;  // stored bytes of the largest entry read

  void note(const std::vector<Entry>& batch) {
    for (const auto& e : batch)
      largest = std::max(largest, std::max<std::size_t>(1, e.raw.size()));
  }

  // A sample of the one entry at the place (not examined): whether peek_bounded bounds the
  // reads and, if not, the size of the first read.
  void sample(std::size_t at) {
    if (limits.read_bytes == 0) return;
    std::optional<PeekWindow> w = peek_bounded(queue, at, 1, 1, limits.read_bytes);
    bounded = w.has_value();
    note(w ? w->entries : peek(queue, at, 1));
  }

  // Sets the place's read sizes for the next read; returns how many entries it examines.
  std::size_t size(dlq::detail::search_place& place) const {
    const std::size_t most = std::max<std::size_t>(1, limits.window);
    if (bounded) {  // whole windows, cut by bytes in the store (a capped read that misses
                    // the place shrinks the place's read sizes)
      place.set_back_for(limits.read_bytes, largest);
      return most;
    }
    const std::size_t per_read = read_entries(limits, largest);
    const std::size_t back =
        per_read >= most + 16 ? 16 : std::min<std::size_t>(16, std::max<std::size_t>(1, per_read / 2));
    place.set_read_sizes(back, per_read >= most + 16 ? dlq::detail::search_place::window : per_read);
    return std::min(most, std::max<std::size_t>(1, per_read - back));
  }

  // Issues the read `r` of `place`; `capped`: it stopped at the byte bound (not the end).
  std::vector<Entry> read(const dlq::detail::search_place& place,
                          const dlq::detail::search_place::read& r, bool& capped) {
    std::vector<Entry> batch;
    capped = false;
    if (bounded) {
      if (std::optional<PeekWindow> w =
              peek_bounded(queue, r.start, r.count, place.min_items(r), limits.read_bytes)) {
        batch = std::move(w->entries);
        capped = w->capped;
      }
    } else {
      batch = peek(queue, r.start, r.count);
    }
    if (batch.size() > r.count)
      batch.erase(batch.begin() + static_cast<std::ptrdiff_t>(r.count), batch.end());
    note(batch);
    return batch;
  }
};

}  // namespace detail

/// Scans `queue` from `from` (nullopt = the head) for entries matching `filter`, within
/// `limits`, through `peek_bounded(queue, start, count, min_count, max_bytes)` — reads
/// bounded by bytes before they leave the store (std::optional<dlq::PeekWindow>,
/// DeadLetterQueue::peek_bounded; nullopt = it cannot) — else `peek(queue, start, count)`;
/// `length` is the list's length read before (it bounds a forged or stale position). See
/// the file comment for the guarantees.
/// @throws whatever `peek` and `peek_bounded` throw.
template <class Peek, class PeekBounded>
SearchPage scan(Peek&& peek, PeekBounded&& peek_bounded, std::size_t length,
                std::string_view queue, const EntryQuery& filter,
                const std::optional<Cursor>& from, const ScanLimits& limits,
                std::chrono::system_clock::time_point now) {
  SearchPage page;
  dlq::detail::search_token token;
  if (from) token = dlq::detail::search_token{from->position, from->anchors};
  dlq::detail::search_place place(std::move(token), length);
  page.start = place.position();
  const std::size_t want = std::max<std::size_t>(1, limits.limit);
  detail::scan_reader<Peek, PeekBounded> reader{peek, peek_bounded, queue, limits};
  reader.sample(place.position());
  bool at_end = false;
  bool started = false;
  std::size_t page_bytes = 0;  // of the matching entries kept (ScanLimits::max_bytes)
  const auto full = [&] { return page_full(page.entries.size(), page_bytes, limits); };
  while (!full() && page.examined < limits.max_examined) {
    std::size_t n = std::min(reader.size(place), limits.max_examined - page.examined);
    if (filter.empty()) n = std::min(n, want - page.entries.size());
    const dlq::detail::search_place::read r = place.next_read(n);
    bool capped = false;
    std::vector<Entry> batch = reader.read(place, r, capped);
    std::vector<std::pair<std::size_t, std::size_t>> moved;  // (batch index, page index)
    const auto key = [&](std::size_t i) {
      const auto m =
          std::lower_bound(moved.begin(), moved.end(), std::make_pair(i, std::size_t{0}));
      return detail::scan_key(m != moved.end() && m->first == i ? page.entries[m->second]
                                                                : batch[i]);
    };
    const dlq::detail::search_place::found f = place.accept(r, batch.size(), key, capped);
    page.examined += f.searched;
    if (place.searching()) continue;
    if (!started) {
      page.start = place.position();
      started = true;
    }
    std::size_t used = 0;
    for (std::size_t i = f.first; i < batch.size() && page.examined < limits.max_examined; ++i) {
      ++used;
      ++page.examined;
      if (filter.matches(batch[i], now)) {
        page_bytes += batch[i].raw.size();
        moved.emplace_back(i, page.entries.size());
        page.entries.push_back(std::move(batch[i]));
        if (full()) break;
      }
    }
    place.advance(f.first, used, key);
    if (f.end && f.first + used == batch.size()) {
      at_end = true;
      break;
    }
  }
  page.restarted = place.restarted();
  if (!at_end) {
    const dlq::detail::search_token t = place.token();
    page.next = Cursor{t.position, t.anchors};
  }
  return page;
}

/// scan() through `peek(queue, start, count)` alone: reads sized by the largest entry read
/// so far (ScanLimits::read_bytes).
template <class Peek>
SearchPage scan(Peek&& peek, std::size_t length, std::string_view queue, const EntryQuery& filter,
                const std::optional<Cursor>& from, const ScanLimits& limits,
                std::chrono::system_clock::time_point now) {
  const auto unbounded = [](std::string_view, std::size_t, std::size_t, std::size_t,
                            std::size_t) { return std::optional<PeekWindow>(); };
  return scan(peek, unbounded, length, queue, filter, from, limits, now);
}

}  // namespace http
}  // namespace dlq

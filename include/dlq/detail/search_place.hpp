// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file detail/search_place.hpp
/// The place of a resumable search in a dead-letter list that other clients change while it
/// runs, and the reads that find it again: the one decision behind dlq::search_page
/// (DeadLetterQueue::search, dlqctl search), dlq::http::scan (the console's /api/entries)
/// and the lookups by id on storages without `find` (DeadLetterQueue::get, remove,
/// remove_ids). I/O-free: the caller issues the reads it is asked for and hands back what
/// they returned, so the logic is tested without a server (tests/test_search_place.cpp).
///
/// What it relies on. Entries leave a dead list anywhere (replay, discard, remove, trim) and
/// join it only at the tail (sends; a key-value re-send is a removal plus an append), so the
/// entries that stay keep their order and only move towards the head. One read of the list
/// (the storage's `range`, the console's `peek`) returns items of one instant: a Redis
/// LRANGE or script, one SQL query, the memory storage under its lock.
///
/// The place. The search remembers the 64-bit FNV-1a hashes of the last entries it examined
/// (the anchors, up to 16, oldest first) and a position P such that every anchor still in the
/// list is before P. Every entry before the latest anchor still in the list was examined
/// (entries only move towards the head, new ones arrive behind), and every entry after it
/// was not. So the search goes on right after that anchor — it skips nothing and repeats
/// nothing — and it finds it *in the same read* that returns the entries to examine next:
///
///   - Every read re-reads the positions where the anchors were: [P - 16, P + n). The latest
///     anchor in [P - 16, P) is looked for from P downwards (usually found at once, at
///     P - 1), and the entries after it in that read are the next ones, whatever happened
///     before the read. There is no "find the place, then read from it" gap for a removal to
///     fall into, neither between calls nor between the reads of one call. 16 extra items
///     per read is the whole price (3% of a 500-item read).
///   - When none of the anchors is in [P - 16, P) (more than 16 entries before the place were
///     removed since the last read), the search reads backwards in windows of 500 ending at
///     P - 16, then below, for the latest anchor; the entries after it in the window where it
///     is found are examined from that read. A long way back may take several calls (each
///     window counts towards the call's budget; the token keeps the lower position).
///   - When every anchor is gone (each of the last 16 entries examined was removed, e.g. a
///     replay took the head past the search), the place is unknown: the search starts again
///     at the oldest entry and says so (restarted()). Entries examined before the last 16 may
///     then be returned a second time — never skipped. The window it read last already
///     starts at the oldest entry, so no read is wasted.
///
/// Limits, both far from entries dlq writes (each carries a random 62-bit id): entries
/// stored byte for byte identical (a foreign writer pushing the same bytes repeatedly) have
/// the same hash, so a copy that moved into [P - 16, P) may be taken for the anchor it
/// copies, and the entries between them passed over; two different entries whose hashes
/// collide (chance about 2^-64 per comparison) likewise.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/detail/id.hpp"
#include "dlq/errors.hpp"

namespace dlq::detail {

/// Stored bytes one read of a walk over a list holds, about: a lookup by id, a search
/// (search_page; bounded in the store where it has `range_bytes`, beyond the items re-read
/// before its place and one more) and an errors() scan.
inline constexpr std::size_t lookup_bytes = std::size_t{8} << 20;

/// Items per read of such a walk sized by the largest item it has read so far (`largest`
/// bytes): about lookup_bytes, at least 1, at most `most`.
inline std::size_t items_within(std::size_t largest, std::size_t most) noexcept {
  return std::min(std::max<std::size_t>(1, most),
                  std::max<std::size_t>(1, lookup_bytes / std::max<std::size_t>(1, largest)));
}

/// Items per read of a lookup by id without the storage's `find` (DeadLetterQueue::find_raws)
/// and of a search without the storage's `range_bytes`: items_within, 1 to 512.
inline std::size_t lookup_page(std::size_t largest) noexcept {
  return items_within(largest, 512);
}

/// The state a continuation token carries: the position P (every anchor still in the list
/// is before it) and the hashes of the last entries examined, oldest first. Text form
/// `s1:<position>:<16 hex digits>,…` (what DeadLetterQueue::search hands out; the console
/// wraps it in base64).
struct search_token {
  static constexpr std::size_t max_anchors = 16;
  std::size_t position = 0;
  std::vector<std::uint64_t> anchors;

  std::string encode() const {
    std::string out = "s1:" + std::to_string(position) + ":";
    for (std::size_t i = 0; i < anchors.size(); ++i) {
      if (i != 0) out += ',';
      append_hex(out, anchors[i], 16);
    }
    return out;
  }

  /// @throws dlq::invalid_argument when `text` is not a token made by encode().
  static search_token decode(std::string_view text) {
    const auto bad = [&] {
      return dlq::invalid_argument(dlq::detail::message(
          "search", "continuation", "'" + std::string(text.substr(0, 80)) + "' is not a token",
          "pass the continuation of the previous page unchanged, or an empty string to start"));
    };
    search_token t;
    if (text.substr(0, 3) != "s1:") throw bad();
    std::size_t i = 3;
    std::size_t digits = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits) {
      if (digits >= 18) throw bad();
      t.position = t.position * 10 + static_cast<std::size_t>(text[i] - '0');
    }
    if (digits == 0 || i >= text.size() || text[i] != ':') throw bad();
    ++i;
    while (i < text.size()) {
      if (text.size() - i < 16 || t.anchors.size() >= max_anchors) throw bad();
      std::uint64_t v = 0;
      for (std::size_t k = 0; k < 16; ++k) {
        const char c = text[i + k];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) throw bad();
        v = (v << 4) | static_cast<std::uint64_t>(d);
      }
      t.anchors.push_back(v);
      i += 16;
      if (i < text.size()) {
        if (text[i] != ',') throw bad();
        ++i;
        if (i == text.size()) throw bad();
      }
    }
    if ((t.position > 0) != !t.anchors.empty()) throw bad();
    return t;
  }
};

/// The anchor hash of a stored item: FNV-1a of its exact bytes.
inline std::uint64_t search_key(std::string_view raw) noexcept {
  return fnv1a64(raw);
}

/// Where a search is, and which read comes next (see the file comment). Use:
///
///     search_place place(token, list_length_now);
///     for (;;) {
///       const search_place::read r = place.next_read(n);  // n: most new items wanted
///       items = <one read of [r.start, r.start + r.count)>;
///       const search_place::found f = place.accept(r, items.size(), key_of_item);
///       <count f.searched towards the budget>
///       if (place.searching()) continue;                  // the place is further back
///       <examine items [f.first, f.first + used)>;
///       place.advance(f.first, used, key_of_item);
///       if (f.end && f.first + used == items.size()) <the end of the list>;
///     }
///
/// `key_of_item(i)` returns search_key() of item i of the last read; it is called only for
/// the items compared with the anchors and for the last 16 examined.
class search_place {
 public:
  /// Items re-read before the place by every read (where the anchors were).
  static constexpr std::size_t overlap = search_token::max_anchors;
  /// Items per read while the place is looked for further back.
  static constexpr std::size_t window = 500;

  /// A read to issue: items [start, start + count) of the list.
  struct read {
    std::size_t start = 0;
    std::size_t count = 0;
  };

  /// What a read held.
  struct found {
    std::size_t first = 0;     ///< items [first, got) follow the place: examine them in order
    std::size_t searched = 0;  ///< items compared while looking for the place further back
    bool end = false;          ///< the read ended short: nothing follows its last item
  };

  /// The fewest items a read `r` bounded by bytes (dlq::BoundedRange) must return for
  /// accept() to conclude: every item re-read before the place and one more (1 at the
  /// start and while the place is looked for further back).
  std::size_t min_items(const read& r) const noexcept {
    if (position_ == 0 || searching_ || r.start >= position_) return 1;
    return std::min(r.count, position_ - r.start + 1);
  }

  search_place() = default;

  /// Resumes at `token` (a default token: the start). `length` is the list's length read
  /// after the token was made (anchors still in the list are before it); 0 means every
  /// entry examined before is gone, so the search starts at the head without repeating any.
  search_place(search_token token, std::size_t length)
      : position_(token.position), anchors_(std::move(token.anchors)) {
    if (anchors_.empty()) position_ = 0;
    if (position_ > length) position_ = length;
    if (position_ == 0) anchors_.clear();
  }

  /// Sets how many items the next reads re-read before the place (`back`: 1..overlap) and
  /// read while the place is looked for further back (`search`: at least 1), so that a
  /// read of large items holds few of them. Fewer items re-read only make looking further
  /// back (searching()) more frequent: the anchors kept, and so what is found, are the same.
  void set_read_sizes(std::size_t back, std::size_t search) noexcept {
    back_ = std::min(std::max<std::size_t>(back, 1), overlap);
    search_window_ = std::max<std::size_t>(search, 1);
  }

  /// Sets only how many items the next reads re-read before the place (1..overlap), for
  /// reads bounded by bytes: half of what `budget` bytes hold of items of `largest` bytes
  /// (the largest read so far), so that the items a bounded read must return (min_items)
  /// stay within the budget — and no more than were examined since this place was made (or
  /// restarted): only those were read, and `largest` says nothing of the others (a place
  /// resumed from a token re-reads 1, not 16 entries of unknown size).
  void set_back_for(std::size_t budget, std::size_t largest) noexcept {
    const std::size_t half = largest == 0 ? overlap : budget / largest / 2;
    back_ = std::min(std::max<std::size_t>(std::min(half, examined_), 1), overlap);
  }

  /// The read to issue next, for at most `want` (at least 1) items after the place.
  read next_read(std::size_t want) const noexcept {
    if (position_ == 0) return {0, std::max<std::size_t>(want, 1)};
    if (searching_) {
      const std::size_t w = std::min(search_window_, position_);
      return {position_ - w, w};
    }
    const std::size_t back = std::min(back_, position_);
    return {position_ - back, back + std::max<std::size_t>(want, 1)};
  }

  /// Takes the result of the read next_read() asked for: `got` items (at most r.count) and
  /// their keys through `key(i)`. `capped`: the read stopped at a byte bound with more items
  /// after it (dlq::BoundedRange::capped), so a short read is not the end of the list. A
  /// capped read that did not reach the place (fewer than min_items()) concludes nothing:
  /// the next read covers fewer items before the place.
  template <class Key>
  found accept(const read& r, std::size_t got, Key&& key, bool capped = false) {
    found f;
    f.end = got < r.count && !capped;
    if (position_ == 0) {  // the start (or a restart): every item is new
      f.first = 0;
      return f;
    }
    if (capped && r.start < position_ && got < position_ - r.start) {
      (searching_ ? search_window_ : back_) = std::max<std::size_t>(1, got);
      if (searching_) f.searched = got;
      f.first = got;
      return f;
    }
    const std::size_t region = std::min(position_ - r.start, got);  // items before P
    for (std::size_t k = region; k-- > 0;) {
      if (searching_) ++f.searched;
      const std::uint64_t h = key(k);
      const auto a = std::find(anchors_.rbegin(), anchors_.rend(), h);
      if (a == anchors_.rend()) continue;
      anchors_.erase(a.base(), anchors_.end());  // the anchors after it are gone
      position_ = r.start + k + 1;
      searching_ = false;
      f.first = k + 1;
      return f;
    }
    if (searching_) f.searched += (position_ - r.start) - region;  // none: counts as read
    // No anchor in [r.start, P): every one still in the list is before r.start.
    position_ = r.start;
    if (position_ > 0) {
      searching_ = true;
      f.first = got;
      f.end = false;
      return f;
    }
    // Every anchor is gone: the place is lost. Start over at the head, from this very read.
    anchors_.clear();
    examined_ = 0;
    searching_ = false;
    if (got > 0) restarted_ = true;
    f.first = 0;
    return f;
  }

  /// The caller examined items [first, first + n) of the last read (`first` as accept()
  /// returned): the place moves behind them, and the last of them become the anchors.
  template <class Key>
  void advance(std::size_t first, std::size_t n, Key&& key) {
    if (n == 0) return;
    position_ += n;
    examined_ += n;
    const std::size_t m = std::min(n, search_token::max_anchors);
    for (std::size_t i = first + n - m; i < first + n; ++i)
      anchors_.push_back(key(i));
    if (anchors_.size() > search_token::max_anchors)
      anchors_.erase(anchors_.begin(),
                     anchors_.end() - static_cast<std::ptrdiff_t>(search_token::max_anchors));
  }

  /// True while the place is looked for further back (the last read did not hold it).
  bool searching() const noexcept { return searching_; }
  /// True when every anchor was gone and the search started again at the head.
  bool restarted() const noexcept { return restarted_; }
  /// Entries before the place (a lower bound while searching()).
  std::size_t position() const noexcept { return position_; }
  /// The token to continue from.
  search_token token() const { return search_token{position_, anchors_}; }

 private:
  std::size_t position_ = 0;
  std::vector<std::uint64_t> anchors_;
  std::size_t back_ = overlap;          // items re-read before the place (set_read_sizes)
  std::size_t search_window_ = window;  // items per read while searching (set_read_sizes)
  std::size_t examined_ = 0;            // items examined since made or restarted (set_back_for)
  bool searching_ = false;
  bool restarted_ = false;
};

}  // namespace dlq::detail

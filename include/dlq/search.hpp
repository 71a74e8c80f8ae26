// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file search.hpp
/// dlq::Filter — which entries an operator operation addresses (search, replay, discard) —
/// and dlq::search_page, the resumable search over a dead-letter list.
///
/// A search over a large list is a series of cheap calls: each call examines at most
/// `max_examined` entries (default 10 000), returns the matching ones (at most `limit`) and
/// an opaque continuation token; pass the token to the next call, until the page says
/// done(). Only the storage contract's `range` and `size` are used, so every backend can be
/// searched, and no call holds a lock or blocks a server for long.
///
///     dlq::Filter f;
///     f.error_contains = "timeout";
///     std::string token;
///     do {
///       auto page = dlq.search("orders", f, token, 100);
///       for (const auto& e : page.entries) show(e);
///       token = page.continuation;
///     } while (!token.empty());
///
/// Resuming is exact while the list changes between calls. New entries are appended at the
/// tail (found by later calls); entries removed before the search position shift the rest
/// left. The token holds the position and the hashes of the last entries examined (up to
/// 16): a call finds the latest of them still in the list (reading backwards from the
/// position, within its budget — a long way back takes several calls, each returning an
/// empty page) and goes on right after it. So a matching entry that stays in the list is
/// returned exactly once. Only if every one of those 16 entries was removed between two
/// calls is the place unknown: the search then starts again at the oldest entry and the
/// page says restarted() — entries may be returned a second time, never skipped.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "dlq/detail/compiled.hpp"
#include "dlq/entry.hpp"
#include "dlq/errors.hpp"
#include "dlq/storage.hpp"

namespace dlq {

/// Which entries an operation addresses. Every condition that is set must hold (AND); the
/// default (nothing set) matches every entry. Used by search, ReplayOptions and discard.
///
/// Unreadable (corrupt) entries match only a filter without field conditions (error,
/// error type, worker, job id, age, payload text): by their derived id ("raw-…") in `ids`,
/// or by `predicate`, which sees them with Entry::ok() == false.
struct Filter {
  /// Only entries with one of these ids; empty = no condition.
  std::vector<std::string> ids;
  /// Only entries whose error message contains this text (case-sensitive); empty = none.
  std::string error_contains;
  /// Only entries with exactly this error type; empty = no condition.
  std::string error_type;
  /// Only entries from exactly this worker; empty = no condition.
  std::string worker;
  /// Only entries with exactly this job id; empty = no condition.
  std::string job_id;
  /// Only entries dead-lettered at least this long ago (by Options::clock); nullopt = no
  /// condition. Entries without a readable timestamp do not match an age condition.
  std::optional<std::chrono::system_clock::duration> older_than;
  /// Only entries dead-lettered at most this long ago; nullopt = no condition.
  std::optional<std::chrono::system_clock::duration> newer_than;
  /// Only entries whose payload bytes contain this text (a base64-stored payload is
  /// searched decoded); empty = no condition.
  std::string payload_contains;
  /// Only entries for which this returns true; empty = no condition. It must not call the
  /// queue's operations (during a replay or discard the key-value backend holds a lock).
  std::function<bool(const Entry&)> predicate;

  /// True when no condition is set (the filter matches everything).
  bool empty() const noexcept {
    return ids.empty() && error_contains.empty() && error_type.empty() && worker.empty() &&
           job_id.empty() && !older_than && !newer_than && payload_contains.empty() && !predicate;
  }

  /// The conditions as a JSON object (for the audit trail and tools): one key per condition
  /// set; durations in seconds; the predicate as `"predicate": true`.
  nlohmann::ordered_json describe() const;
};

/// One page of a search.
struct SearchPage {
  std::vector<Entry> entries;  ///< matching entries, oldest first (at most the limit)
  /// Pass to the next call; empty when the search reached the end of the list.
  std::string continuation;
  std::size_t examined = 0;  ///< entries this call examined
  std::size_t position = 0;  ///< entries of the list before the continuation point
  std::size_t size = 0;      ///< the list's length when this call started (for progress)
  bool restarted_ = false;   ///< set by search_page; read it with restarted()

  /// True when the search is complete (no continuation).
  bool done() const noexcept { return continuation.empty(); }
  /// True when the place of the previous call was lost (every entry it examined last was
  /// removed since) and the search started again at the oldest entry: entries returned
  /// before may be returned again (none is skipped).
  bool restarted() const noexcept { return restarted_; }
};

namespace detail {

/// Evaluates a Filter against stored items (the one implementation behind search, replay
/// and discard).
class filter_matcher {
 public:
  filter_matcher(const Filter& f, std::chrono::system_clock::time_point now);

  /// True when the filter sets no condition.
  bool matches_all() const noexcept { return ids_.empty() && !fields_ && !f_.predicate; }

  /// True when matches() needs the entry id (the filter has ids).
  bool needs_id() const noexcept { return !ids_.empty(); }

  /// A cheap pre-check: true when `raw` cannot match because a required text of a string
  /// field (error, error type, worker, job id) occurs nowhere in its bytes. Only when `raw`
  /// has no backslash: an escaped field could hold the text without its bytes appearing.
  bool cannot_match(std::string_view raw) const noexcept {
    if (texts_.empty() || raw.find('\\') != std::string_view::npos) return false;
    for (const std::string* t : texts_)
      if (raw.find(*t) == std::string_view::npos) return true;
    return false;
  }

  /// Whether `raw` matches. `view` must be the result of view_envelope(raw) when
  /// `readable`; `id` is the entry id (stored or derived).
  bool matches(std::string_view raw, bool readable, const envelope_view& view,
               const std::string& id) const;

  /// Convenience: scans `raw` itself.
  bool matches(std::string_view raw) const;

 private:
  const Filter& f_;
  std::unordered_set<std::string> ids_;
  std::optional<std::chrono::system_clock::time_point> older_cutoff_;
  std::optional<std::chrono::system_clock::time_point> newer_cutoff_;
  bool fields_ = false;
  std::vector<const std::string*> texts_;  // texts a matching entry's bytes must contain
};

/// The state a continuation token carries: the position after the last entry examined and
/// the hashes of the last entries examined, oldest first.
struct search_token {
  static constexpr std::size_t max_anchors = 16;
  std::size_t position = 0;
  std::vector<std::uint64_t> anchors;

  std::string encode() const;

  static search_token decode(std::string_view text);
};

}  // namespace detail

/// One call of a resumable search of `queue`'s dead-letter list in `storage` (see the file
/// comment): examines at most `max_examined` entries (0 = 10 000; re-finding the place
/// counts too) from the continuation point and returns the ones `filter` matches, at most
/// `limit` (0 = 100) — the page stops right after the limit-th match. `now` is the time age
/// conditions are measured from. DeadLetterQueue::search calls this with its clock.
/// @throws dlq::invalid_argument for a malformed continuation token; what the storage throws.
template <class Storage>
SearchPage search_page(Storage& storage, std::string_view queue, const Filter& filter,
                       std::string_view continuation, std::size_t limit,
                       std::chrono::system_clock::time_point now, std::size_t max_examined = 0) {
  if (limit == 0) limit = 100;
  if (max_examined == 0) max_examined = 10000;
  constexpr std::size_t chunk = 500;
  detail::search_token token;
  if (!continuation.empty()) token = detail::search_token::decode(continuation);
  SearchPage page;
  page.size = storage.size(queue, ListKind::dead);
  std::size_t budget = max_examined;
  std::size_t pos = token.position;

  const detail::filter_matcher matcher(filter, now);
  std::vector<std::uint64_t> recent = std::move(token.anchors);
  std::vector<std::string> first;  // items read with the fast-path check, if it passed

  if (pos > 0) {
    // Fast path: the list did not move under the last entry examined — read from it.
    first = storage.range(queue, ListKind::dead, pos - 1, chunk + 1);
    if (!first.empty() && detail::fnv1a64(first.front()) == recent.back()) {
      first.erase(first.begin());
    } else {
      first.clear();
      // Find the place again: the latest anchor still in the list, at or before the
      // position (entries only shift left; new ones arrive behind). Read backwards.
      std::size_t upper = std::min(pos, page.size);  // search [.., upper)
      std::optional<std::size_t> found;
      while (upper > 0 && budget > 0) {
        const std::size_t n = std::min({chunk, upper, budget});
        const std::size_t from = upper - n;
        const auto items = storage.range(queue, ListKind::dead, from, n);
        budget -= std::min(budget, items.size());
        for (std::size_t k = std::min(items.size(), n); k-- > 0 && !found;) {
          const std::uint64_t h = detail::fnv1a64(items[k]);
          const auto a = std::find(recent.rbegin(), recent.rend(), h);
          if (a == recent.rend()) continue;
          found = from + k + 1;
          recent.erase(a.base(), recent.end());  // the later anchors are gone
        }
        if (found) break;
        upper = from;
      }
      if (!found && upper > 0) {  // budget used up: go on backwards in the next call
        token.position = upper;
        page.position = upper;
        page.continuation = token.encode();
        page.examined = max_examined - budget;
        return page;
      }
      if (found) {
        pos = *found;
      } else {  // every anchor is gone: start over (nothing to repeat in an empty list)
        pos = 0;
        recent.clear();
        page.restarted_ = page.size > 0;
      }
    }
  }

  bool end = false;
  while (budget > 0 && page.entries.size() < limit) {
    const std::size_t n = std::min(chunk, budget);
    std::vector<std::string> items;
    if (!first.empty()) {
      items = std::move(first);
      first.clear();
      if (items.size() > n) items.resize(n);
    } else {
      items = storage.range(queue, ListKind::dead, pos, n);
    }
    if (items.empty()) {
      end = true;
      break;
    }
    std::size_t used = 0;
    // Only the last 16 items examined become anchors: hash those (and matches, whose bytes
    // move into the page) instead of every item.
    std::vector<std::pair<std::size_t, std::uint64_t>> moved;  // (index, hash) of matches
    for (auto& raw : items) {
      ++used;
      --budget;
      ++page.examined;
      if (!matcher.cannot_match(raw)) {
        detail::envelope_view view;
        const bool readable = detail::view_envelope(raw, view);
        const std::string id = !matcher.needs_id() ? std::string()
                               : readable          ? detail::entry_id(view, raw)
                                                   : detail::derived_id(raw);
        if (matcher.matches(raw, readable, view, id)) {
          moved.emplace_back(used - 1, detail::fnv1a64(raw));
          page.entries.push_back(parse_entry(std::move(raw)));
        }
      }
      if (page.entries.size() >= limit || budget == 0) break;
    }
    pos += used;
    const std::size_t tail = std::min(used, detail::search_token::max_anchors);
    for (std::size_t k = used - tail; k < used; ++k) {
      const auto m =
          std::find_if(moved.begin(), moved.end(), [k](const auto& e) { return e.first == k; });
      recent.push_back(m != moved.end() ? m->second : detail::fnv1a64(items[k]));
    }
    if (recent.size() > detail::search_token::max_anchors)
      recent.erase(recent.begin(),
                   recent.end() - static_cast<std::ptrdiff_t>(detail::search_token::max_anchors));
    if (items.size() < n && used == items.size()) {
      end = true;
      break;
    }
  }
  page.position = pos;
  if (!end) {
    token.position = pos;
    token.anchors = std::move(recent);
    if (token.position > 0 && token.anchors.empty())
      end = true;  // nothing examined: done
    else
      page.continuation = token.encode();
  }
  return page;
}

}  // namespace dlq

#if defined(DLQ_HEADER_ONLY)
#include "dlq/search-inl.hpp"
#endif

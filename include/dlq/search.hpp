// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file search.hpp
/// dlq::Filter — which entries an operator operation addresses (search, replay, discard) —
/// and dlq::search_page, the resumable search over a dead-letter list.
///
/// A search over a large list is a series of cheap calls: each call examines at most
/// `max_examined` entries (default 10 000), returns the matching ones (at most `limit`) and
/// an opaque continuation token; pass the token to the next call, until the page says
/// done(). Only the storage contract's `range` and `size` are used (and `range_bytes` where
/// the storage has it), so every backend can be searched, and no call holds a lock or blocks
/// a server for long. A read holds about 8 MiB of entries, as a lookup by id: 500 small
/// ones, 2 of 4 MiB (bounded in the store where it has `range_bytes`, else sized by the
/// largest entry read so far).
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
/// Exact while the list changes, between calls and during one: other clients send,
/// replay, discard, remove and trim meanwhile. A run of pages returns every matching entry
/// that was in the list when it started and was not removed before the search reached it,
/// once; entries sent meanwhile join at the tail and are returned too. The token holds a
/// position and the hashes of the last 16 entries examined (the anchors). Entries only leave
/// the list or join it at the tail, so whatever stays keeps its order: every entry before
/// the latest anchor still in the list was examined, every entry after it was not. Each
/// read — one `range` call, which every backend answers from one instant — re-reads the 16
/// positions before the place together with the next chunk, and the entries after the
/// latest anchor in it are the next ones: the place is found and the entries after it are
/// read at the same instant, so no removal can fall between the two (the design and its
/// limits: dlq/detail/search_place.hpp; docs/operations.md). When more than 16 entries
/// before the place went meanwhile, the call reads backwards for the anchor, within its
/// budget (a long way back may take calls that return empty pages).
///
/// Repeats happen in two cases only. (1) Every one of the last 16 entries examined was
/// removed before the next read (e.g. a replay took the head past the search): the place
/// is unknown, the search starts again at the oldest entry, and that page says restarted();
/// matches returned before it that are still in the list are returned again — none is
/// skipped. (2) On the key-value backend a job sent again with the same job id replaces
/// its entry and moves it to the tail: the new attempt is returned again, under the same id.
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
#include "dlq/detail/search_place.hpp"
#include "dlq/detail/text_search.hpp"
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
  /// What `predicate` (and ReplayOptions::filter) select, in the words of whoever built
  /// them, for the audit trail: a JSON object whose members the record's filter holds in
  /// place of the bare marker `"predicate": true` (`"filter": true`), e.g. the console's
  /// {"error": "currency GBP", "error_type": "GatewayTimeout"} (dlq::http::EntryQuery::
  /// describe()). Null or empty (the default) = the marker. It selects nothing itself; a
  /// member named like a condition already described is written as "predicate.<name>".
  nlohmann::ordered_json predicate_terms;

  /// True when no condition is set (the filter matches everything).
  bool empty() const noexcept {
    return ids.empty() && error_contains.empty() && error_type.empty() && worker.empty() &&
           job_id.empty() && !older_than && !newer_than && payload_contains.empty() && !predicate;
  }

  /// The conditions as a JSON object (for the audit trail and tools): one key per condition
  /// set; durations in seconds; the predicate as the members of `predicate_terms`, or as
  /// `"predicate": true` when it has none.
  nlohmann::ordered_json describe() const;
};

namespace detail {

/// Writes what a predicate selects into the description `j`: the members of `terms` (a
/// member whose name `j` has already as "<marker>.<name>"), or `"<marker>": true` when
/// `terms` is not a non-empty object. The one rule behind Filter::describe() and the audit
/// record of a replay with ReplayOptions::filter.
inline void describe_predicate(nlohmann::ordered_json& j, const nlohmann::ordered_json& terms,
                               const std::string& marker) {
  if (!terms.is_object() || terms.empty()) {
    j[marker] = true;
    return;
  }
  for (const auto& [name, value] : terms.items())
    j[j.contains(name) ? marker + "." + name : name] = value;
}

}  // namespace detail

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
  /// True when the place was lost (each of the last 16 entries examined was removed before
  /// this call read on) and this call started again at the oldest entry: matches returned
  /// by earlier pages may be returned again (none is skipped). False otherwise: then no page
  /// of the run repeats an entry.
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
  bool cannot_match(std::string_view raw) const {
    if (texts_.empty() || raw.find('\\') != std::string_view::npos) return false;
    for (const std::string* t : texts_)
      if (!contains(raw, *t, false)) return true;  // linear (detail/text_search.hpp)
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

}  // namespace detail

namespace detail {

/// The read `r` of a lookup by id or of a search at `place`: bounded by lookup_bytes in the
/// store where it has `range_bytes`, else the items of `range` (never capped).
template <class S>
BoundedRange lookup_read(S& storage, std::string_view queue, ListKind kind,
                         const search_place& place, const search_place::read& r) {
  if constexpr (has_range_bytes<S>::value) {
    return storage.range_bytes(queue, kind, r.start, r.count, place.min_items(r), lookup_bytes);
  } else {
    return BoundedRange{storage.range(queue, kind, r.start, r.count), false};
  }
}

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
  detail::search_place place(std::move(token), page.size);
  const detail::filter_matcher matcher(filter, now);
  std::size_t budget = max_examined;
  bool end = false;
  // Reads of about 8 MiB, as a lookup by id: `chunk` items bounded by bytes in the store
  // (range_bytes), else sized by the largest item read so far — first the one item at the
  // place, read to size the first read and not examined (an item larger than all before it
  // may take a read over the budget).
  std::size_t largest = 0;  // stored bytes of the largest item read
  if constexpr (!detail::has_range_bytes<Storage>::value)
    for (const auto& raw : storage.range(queue, ListKind::dead, place.position(), 1))
      largest = raw.size();
  while (budget > 0 && page.entries.size() < limit) {
    std::size_t want = chunk;
    if constexpr (detail::has_range_bytes<Storage>::value) {
      place.set_back_for(detail::lookup_bytes, largest);
    } else {
      if (largest != 0) want = std::min(chunk, detail::lookup_page(largest));
      place.set_read_sizes(std::min<std::size_t>(16, want), want);
    }
    const detail::search_place::read r = place.next_read(std::min(want, budget));
    BoundedRange read = detail::lookup_read(storage, queue, ListKind::dead, place, r);
    std::vector<std::string>& items = read.items;
    for (const auto& raw : items)
      largest = std::max(largest, raw.size());
    // Matches move into the page: their keys are read from there (entry index per item).
    std::vector<std::pair<std::size_t, std::size_t>> moved;
    const auto key = [&](std::size_t i) {
      const auto m =
          std::lower_bound(moved.begin(), moved.end(), std::make_pair(i, std::size_t{0}));
      return m != moved.end() && m->first == i ? detail::search_key(page.entries[m->second].raw)
                                               : detail::search_key(items[i]);
    };
    const detail::search_place::found f = place.accept(r, items.size(), key, read.capped);
    budget -= std::min(budget, f.searched);
    page.examined += f.searched;
    if (place.searching()) continue;
    std::size_t used = 0;
    for (std::size_t i = f.first; i < items.size() && budget > 0; ++i) {
      ++used;
      --budget;
      ++page.examined;
      std::string& raw = items[i];
      if (!matcher.cannot_match(raw)) {
        detail::envelope_view view;
        const bool readable = detail::view_envelope(raw, view);
        const std::string id = !matcher.needs_id() ? std::string()
                               : readable          ? detail::entry_id(view, raw)
                                                   : detail::derived_id(raw);
        if (matcher.matches(raw, readable, view, id)) {
          moved.emplace_back(i, page.entries.size());
          page.entries.push_back(parse_entry(std::move(raw)));
          if (page.entries.size() >= limit) break;
        }
      }
    }
    place.advance(f.first, used, key);
    if (f.end && f.first + used == items.size()) {
      end = true;
      break;
    }
  }
  page.position = place.position();
  page.restarted_ = place.restarted();
  if (!end) page.continuation = place.token().encode();
  return page;
}

}  // namespace dlq

#if defined(DLQ_HEADER_ONLY)
#include "dlq/search-inl.hpp"
#endif

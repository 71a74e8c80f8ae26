// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file detail/dead_letter_queue_lookup.hpp
/// DeadLetterQueue's lookups and removals by entry id (get, remove, remove_ids): one lookup
/// per id where the storage has `find`, else one scan of the dead list that keeps its place
/// while other clients remove entries, then one compare-and-delete per entry found. Included
/// by dlq/dead_letter_queue.hpp; include that header, not this one.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "dlq/dead_letter_queue.hpp"
#include "dlq/detail/search_place.hpp"
#include "dlq/errors.hpp"

namespace dlq {

template <class Storage>
DLQ_MEMBER_INLINE std::optional<Entry> DeadLetterQueue<Storage>::get(std::string_view queue,
                                                                     std::string_view id) {
  detail::queue_core::validate_queue(queue, "get");
  return guarded([&]() -> std::optional<Entry> {
    auto raw = find_raw(queue, ListKind::dead, id);
    if (!raw) return std::nullopt;
    return parse_entry(std::move(*raw));
  });
}

template <class Storage>
DLQ_MEMBER_INLINE bool DeadLetterQueue<Storage>::remove(std::string_view queue,
                                                        std::string_view id) {
  detail::queue_core::validate_queue(queue, "remove");
  return !remove_many(queue, {std::string(id)}, {}).removed.empty();
}

template <class Storage>
DLQ_MEMBER_INLINE RemoveReport DeadLetterQueue<Storage>::remove_ids(
    std::string_view queue, const std::vector<std::string>& ids, std::string actor) {
  detail::queue_core::validate_queue(queue, "remove_ids");
  return remove_many(queue, ids, std::move(actor));
}

// remove and remove_ids (see remove_ids).
template <class Storage>
DLQ_MEMBER_INLINE RemoveReport DeadLetterQueue<Storage>::remove_many(
    std::string_view queue, const std::vector<std::string>& ids, std::string actor) {
  std::vector<std::string_view> wanted;  // each id once, in the order given
  {
    std::set<std::string_view> seen;
    for (const auto& id : ids)
      if (seen.insert(id).second) wanted.push_back(id);
  }
  std::set<std::string_view> removed;
  RemoveReport report;
  auto finish = [&](std::string outcome) {
    for (const auto id : wanted)
      (removed.count(id) != 0 ? report.removed : report.not_found).emplace_back(id);
    if (report.removed.empty()) return;  // no change, no record
    AuditRecord rec = audit_record("remove", queue, actor);
    rec.counts =
        detail::object_of("removed", report.removed.size(), "not_found", report.not_found.size());
    detail::audit_ids bounded{core_->options.audit_max_ids, {}, 0};
    for (const auto& id : report.removed)
      bounded.add(id);
    rec.ids = std::move(bounded.ids);
    rec.ids_omitted = bounded.omitted;
    rec.outcome = std::move(outcome);
    detail::write_audit(*core_, storage_, rec);
  };
  try {
    guarded([&] {
      std::vector<std::string_view> pending = wanted;
      // An entry found but changed before its compare-and-delete (replayed and sent again,
      // edited) is looked for again: three attempts in all, as one remove always had.
      for (int attempt = 0; attempt < 3 && !pending.empty(); ++attempt) {
        const auto found = find_raws(queue, ListKind::dead, pending);
        std::vector<std::string_view> again;
        for (const auto id : pending) {
          const auto it = found.find(id);
          if (it == found.end()) continue;  // not there
          if (storage_.remove(queue, ListKind::dead, id, it->second)) {
            removed.insert(id);
          } else {
            again.push_back(id);
          }
        }
        pending = std::move(again);
      }
    });
  } catch (const std::exception& e) {
    finish(std::string("failed: ") + e.what());
    throw;
  }
  finish("ok");
  return report;
}

template <class Storage>
DLQ_MEMBER_INLINE std::optional<std::string> DeadLetterQueue<Storage>::find_raw(
    std::string_view queue, ListKind kind, std::string_view id) {
  if constexpr (detail::has_find<storage_type>::value) {
    return storage_.find(queue, kind, id);
  } else {
    auto found = find_raws(queue, kind, {id});
    if (found.empty()) return std::nullopt;
    return std::move(found.begin()->second);
  }
}

// The stored item of each of `ids` (the first one with that id) that is in the list, by id:
// one lookup per id where the storage has `find`, else one scan of the list that stops
// once every id was found.
template <class Storage>
DLQ_MEMBER_INLINE std::map<std::string, std::string, std::less<>>
DeadLetterQueue<Storage>::find_raws(std::string_view queue, ListKind kind,
                                    const std::vector<std::string_view>& ids) {
  std::map<std::string, std::string, std::less<>> out;
  if (ids.empty()) return out;
  if constexpr (detail::has_find<storage_type>::value) {
    for (const auto id : ids)
      if (out.find(id) == out.end())
        if (auto raw = storage_.find(queue, kind, id))
          out.emplace(std::string(id), std::move(*raw));
    return out;
  } else {
    // Pages of at most 512 items and about 8 MiB: bounded by the storage's range_bytes, else
    // by detail::lookup_page (the first page is one item), so a list of 4 MiB items is read
    // 2 at a time, not 512.
    std::size_t largest = 0;
    std::size_t page = detail::has_range_bytes<storage_type>::value ? 512 : 1;
    const std::set<std::string_view> wanted(ids.begin(), ids.end());
    // Ids of plain characters appear verbatim in the stored bytes: a cheap pre-check when
    // there are few of them.
    bool plain = wanted.size() <= 8;
    for (const auto id : wanted)
      plain = plain && detail::id_stored_verbatim(id);
    // Pages are read by offset while other clients may remove entries (a replay, a trim):
    // the scan keeps its place as a search does (detail/search_place.hpp: the last 16
    // entries examined, found again in the read that returns the next ones), so no entry
    // slides past unseen. Only when all 16 were removed between two reads does it start over
    // at the head (found entries are kept); after 3 such restarts it gives up with a
    // conflict_error — never an id reported missing that was there all along.
    detail::search_place place;
    int restarts = 0;
    for (;;) {
      const bool placed = place.position() > 0;
      const detail::search_place::read r = place.next_read(page);
      BoundedRange read = detail::lookup_read(storage_, queue, kind, place, r);
      std::vector<std::string>& raws = read.items;
      for (const auto& raw : raws)
        largest = std::max(largest, raw.size());
      const auto key = [&](std::size_t i) { return detail::search_key(raws[i]); };
      const detail::search_place::found f = place.accept(r, raws.size(), key, read.capped);
      if (place.searching()) continue;  // the place is further back
      if (placed && place.position() == 0 && ++restarts > 3) {
        throw conflict_error(detail::message(
            "lookup", "queue '" + std::string(queue) + "'",
            "the list changed faster than it could be read (the scan lost its place 4 times)",
            "run the operation again"));
      }
      place.advance(f.first, raws.size() - f.first, key);  // before items move out
      for (std::size_t i = f.first; i < raws.size(); ++i) {
        std::string& raw = raws[i];
        if (plain && std::none_of(wanted.begin(), wanted.end(), [&](std::string_view id) {
              return raw.find(id) != std::string::npos;
            }))
          continue;  // cheap pre-check
        detail::envelope_view view;
        std::string found = detail::view_envelope(raw, view) ? detail::entry_id(view, raw)
                                                             : detail::derived_id(raw);
        if (wanted.count(found) == 0 || out.find(found) != out.end()) continue;
        out.emplace(std::move(found), std::move(raw));
        if (out.size() == wanted.size()) return out;
      }
      if (f.end) return out;
      // The next reads within about 8 MiB: with range_bytes, 512 items bounded by bytes in
      // the store; else fewer items a read once large ones were seen (what is found is the
      // same; only the place is looked for in smaller steps). An item larger than all before
      // it may then take a read over the budget.
      if constexpr (detail::has_range_bytes<storage_type>::value) {
        place.set_back_for(detail::lookup_bytes, largest);
      } else {
        page = detail::lookup_page(largest);
        place.set_read_sizes(std::min<std::size_t>(16, page), page);
      }
    }
  }
}

}  // namespace dlq

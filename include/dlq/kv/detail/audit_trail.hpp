// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file kv/detail/audit_trail.hpp
/// The audit trail of dlq::KeyValueStorage (see dlq/audit.hpp) over any key-value store: one
/// collection of records "<ms> <json>" per queue, oldest first, kept by age and by count.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "dlq/audit.hpp"
#include "dlq/detail/id.hpp"
#include "dlq/kv/store.hpp"
#include "dlq/policies.hpp"

namespace dlq {
namespace kv {
namespace detail {

/// Records read per page when the trail is walked or capped.
inline constexpr std::size_t audit_page_size = 1000;

/// The time of a stored audit record ("<ms> <json>"); 0 when it has none.
inline std::int64_t audit_record_ms(const std::string& value) {
  return std::strtoll(value.c_str(), nullptr, 10);
}

/// A fresh time-ordered record id (one generator per process: ids increase).
inline std::string audit_record_id(std::chrono::system_clock::time_point at) {
  static ::dlq::detail::id_generator ids;
  return ids.next(at);
}

/// Removes the oldest records of `coll` made before `before_ms`, up to the first younger
/// record and at most 1000 (one list of one record when there are none).
template <class Kv>
void audit_expire(Kv& store, const std::string& coll, std::int64_t before_ms) {
  Window window;
  window.limit = 1;
  for (std::size_t budget = 1000; budget > 0;) {
    const std::vector<Item> items = store.list(coll, window);
    std::vector<Removal> old;
    bool young = false;
    for (const Item& item : items) {
      if (audit_record_ms(item.value) >= before_ms) {
        young = true;
        break;
      }
      old.push_back(Removal{coll, item.id, item.version, {}});
    }
    if (!old.empty()) store.remove(old);
    budget -= std::min(budget, old.size());
    if (young || items.size() < window.limit) break;
    window.after = items.back().version;
    window.limit = std::min<std::size_t>(100, budget);
  }
}

/// Removes the `excess` oldest records of `coll`, in pages. Returns how many of them were
/// made at or after `before_ms` (younger than the max age: dropped by the cap alone).
template <class Kv>
std::size_t audit_cap(Kv& store, const std::string& coll, std::size_t excess,
                      std::int64_t before_ms) {
  std::size_t dropped = 0;
  Window oldest;
  while (excess > 0) {
    oldest.limit = std::min<std::size_t>(excess, audit_page_size);
    const std::vector<Item> items = store.list(coll, oldest);
    if (items.empty()) break;
    std::vector<Removal> removals;
    for (const Item& item : items) {
      removals.push_back(Removal{coll, item.id, item.version, {}});
      if (audit_record_ms(item.value) >= before_ms) ++dropped;
    }
    store.remove(removals);
    excess -= std::min(excess, items.size());
    oldest.after = items.back().version;
  }
  return dropped;
}

/// Appends one audit record made at `at` to `coll`, then applies `retention`: the records
/// made before retention.expire_before(at) go (audit_expire), and on the first and every 64th
/// append counted by `appends` the trail is counted and capped (AuditRetention::excess).
/// Returns how many records younger than the max age the cap removed.
template <class Kv>
std::size_t audit_append(Kv& store, const std::string& coll, const AuditRetention& retention,
                         std::atomic<std::size_t>& appends,
                         std::chrono::system_clock::time_point at, std::string_view record) {
  const std::string id = audit_record_id(at);
  const std::string value = std::to_string(::dlq::detail::audit_ms(at)) + " " + std::string(record);
  store.save({Write{coll, id, value}});
  const std::int64_t before = ::dlq::detail::audit_ms(retention.expire_before(at));
  if (before > 0) audit_expire(store, coll, before);
  if (retention.max_records == 0 || appends.fetch_add(1, std::memory_order_relaxed) % 64 != 0)
    return 0;
  return audit_cap(store, coll, retention.excess(count_records(store, coll)), before);
}

/// The records of `coll` made at or after `since`, oldest first, at most `limit` (the JSON
/// part of each).
template <class Kv>
std::vector<std::string> audit_read(Kv& store, const std::string& coll,
                                    std::chrono::system_clock::time_point since,
                                    std::size_t limit) {
  const std::int64_t since_ms = ::dlq::detail::audit_ms(since);
  std::vector<std::string> out;
  Window window;
  window.limit = audit_page_size;
  while (out.size() < limit) {
    const std::vector<Item> page = store.list(coll, window);
    for (const Item& item : page) {
      const auto space = item.value.find(' ');
      if (space == std::string::npos) continue;
      if (audit_record_ms(item.value) < since_ms) continue;
      out.push_back(item.value.substr(space + 1));
      if (out.size() >= limit) break;
    }
    if (page.size() < window.limit) break;
    window.after = page.back().version;
  }
  return out;
}

}  // namespace detail
}  // namespace kv
}  // namespace dlq

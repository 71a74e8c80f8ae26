// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file detail/counter_map-inl.hpp
/// The definitions of counter_map.hpp's non-template functions (see DLQ_INLINE in
/// dlq/detail/compiled.hpp): included by counter_map.hpp in header-only mode, compiled into
/// the library in compiled mode.
#pragma once

#include <algorithm>
#include <iterator>
#include <vector>

#include "dlq/detail/counter_map.hpp"

namespace dlq::detail {

DLQ_INLINE std::int64_t counter_map::bump(const std::string& key, std::chrono::seconds ttl,
                                          std::chrono::steady_clock::time_point now) {
  auto it = counters_.find(key);
  if (it != counters_.end() && it->second.expires <= now) {
    counters_.erase(it);
    it = counters_.end();
  }
  if (it == counters_.end()) {
    if (counters_.size() >= capacity_) prune(now);
    it = counters_.emplace(key, counter{}).first;
  }
  it->second.expires = now + ttl;
  return ++it->second.value;
}

DLQ_INLINE void counter_map::prune(std::chrono::steady_clock::time_point now) {
  for (auto it = counters_.begin(); it != counters_.end();)
    it = it->second.expires <= now ? counters_.erase(it) : std::next(it);
  if (counters_.size() < capacity_) return;
  std::vector<std::chrono::steady_clock::time_point> expiries;
  expiries.reserve(counters_.size());
  for (const auto& c : counters_)
    expiries.push_back(c.second.expires);
  auto nth = expiries.begin() + static_cast<std::ptrdiff_t>(expiries.size() / 10);
  std::nth_element(expiries.begin(), nth, expiries.end());
  const auto cut = *nth;
  for (auto it = counters_.begin(); it != counters_.end();)
    it = it->second.expires <= cut ? counters_.erase(it) : std::next(it);
}

}  // namespace dlq::detail

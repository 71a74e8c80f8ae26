// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// A bounded map of expiring counters: the poison-loop guard's bookkeeping where the storage
// keeps none (and MemoryStorage's). Not thread-safe: callers lock.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <unordered_map>
#include <vector>

namespace dlq::detail {

class counter_map {
 public:
  explicit counter_map(std::size_t capacity = 100000) : capacity_(capacity) {}

  /// Adds one to `key` (which expires `ttl` after this bump) and returns the new value.
  std::int64_t bump(const std::string& key, std::chrono::seconds ttl,
                    std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) {
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

  std::size_t size() const noexcept { return counters_.size(); }

 private:
  struct counter {
    std::int64_t value = 0;
    std::chrono::steady_clock::time_point expires;
  };

  // Drops expired counters, then, if still full, the tenth closest to expiry.
  void prune(std::chrono::steady_clock::time_point now) {
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

  std::size_t capacity_;
  std::unordered_map<std::string, counter> counters_;
};

}  // namespace dlq::detail

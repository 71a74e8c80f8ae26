// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// A bounded map of expiring counters: the poison-loop guard's bookkeeping where the storage
// keeps none (and MemoryStorage's). Not thread-safe: callers lock.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "dlq/detail/compiled.hpp"

namespace dlq::detail {

class counter_map {
 public:
  explicit counter_map(std::size_t capacity = 100000) : capacity_(capacity) {}

  /// Adds one to `key` (which expires `ttl` after this bump) and returns the new value.
  std::int64_t bump(const std::string& key, std::chrono::seconds ttl,
                    std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

  std::size_t size() const noexcept { return counters_.size(); }

 private:
  struct counter {
    std::int64_t value = 0;
    std::chrono::steady_clock::time_point expires;
  };

  // Drops expired counters, then, if still full, the tenth closest to expiry.
  void prune(std::chrono::steady_clock::time_point now);

  std::size_t capacity_;
  std::unordered_map<std::string, counter> counters_;
};

}  // namespace dlq::detail

#if defined(DLQ_HEADER_ONLY)
#include "dlq/detail/counter_map-inl.hpp"
#endif

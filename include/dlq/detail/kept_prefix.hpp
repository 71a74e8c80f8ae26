// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// What a replay kept in place at the head of a dead-letter list, so that a storage whose
// replay cursor is an offset (MemoryStorage, RedisListStorage) can find its place again
// when other clients removed some of those kept items meanwhile (remove(), replay_ids(),
// a trim, another replayer). Without it the offset points past the first item the replay
// has not examined yet, and that item is silently skipped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/detail/id.hpp"

namespace dlq::detail {

/// The kept items of one replay run, as 64-bit hashes in list order (8 bytes each; a replay
/// that keeps nothing — replay-all without filters — costs nothing). size() is the number of
/// kept items, i.e. the cursor's offset while the list is untouched.
class kept_prefix {
 public:
  /// Number of kept items remembered.
  std::size_t size() const noexcept { return hashes_.size(); }

  /// Records one more kept item (the next in list order).
  void add(std::string_view raw) { hashes_.push_back(fnv1a64(raw)); }

  /// Records the items of `more` after these (a step's kept items, once it applied).
  void append(const kept_prefix& more) {
    hashes_.insert(hashes_.end(), more.hashes_.begin(), more.hashes_.end());
  }

  /// True when `item` (the item now just before the cursor) is the last kept item: the
  /// kept prefix has not shrunk (items are only ever removed from it, never inserted).
  bool is_last(std::string_view item) const noexcept {
    return !hashes_.empty() && hashes_.back() == fnv1a64(item);
  }

  /// Given the list's current first items (at least as many as were kept, or the whole list
  /// when shorter), forgets the kept items that are gone and returns how many are left —
  /// the offset of the first item the replay has not examined. The items before the cursor
  /// are a subsequence of the kept ones, so a greedy in-order match finds them.
  std::size_t realign(const std::vector<std::string>& head) {
    std::vector<std::uint64_t> still;
    std::size_t k = 0;
    for (const std::string& item : head) {
      const std::uint64_t h = fnv1a64(item);
      while (k < hashes_.size() && hashes_[k] != h)
        ++k;
      if (k == hashes_.size()) break;  // not a kept item: the first one not examined
      still.push_back(h);
      ++k;
    }
    hashes_ = std::move(still);
    return hashes_.size();
  }

 private:
  std::vector<std::uint64_t> hashes_;
};

}  // namespace dlq::detail
